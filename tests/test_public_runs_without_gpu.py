"""The README's held-out measuring commands say in one line that they need a GPU (no traceback)."""

import pytest

from validation.harness.suite import gpu_available
from validation.public import run as sgemm_run
from validation.public.tc import run as tc_run

pytestmark = pytest.mark.skipif(gpu_available() is None, reason="a GPU is here: the commands would measure")


@pytest.mark.parametrize("main, argv, prog", [
    (sgemm_run.main, ["sgemm", "--out"], "python -m validation.public.run sgemm"),
    (sgemm_run.main, ["tc", "--out"], "python -m validation.public.tc.run"),
    (tc_run.main, ["--out"], "python -m validation.public.tc.run"),
])
def test_one_line_without_a_gpu(main, argv, prog, tmp_path, capsys):
    assert main([*argv, str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{prog}: needs CuPy and an NVIDIA GPU: ") and "\n" not in err
    assert not (tmp_path / "out").exists()
