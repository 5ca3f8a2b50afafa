"""The dirty-L2 chase probe (validation/calibration/dirty_chase_probe): the .cu compiles for sm_90 without
spills, its defines match the module, the shapes and the summary work on synthetic records (never a
result), and without a GPU the CLI says so and exits 2."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from validation.calibration import dirty_chase_probe as dc


def test_defines_match_the_module():
    d = dc.defines()
    assert d["DC_REC"] == dc.REC and d["DC_STRIDE"] == dc.STRIDE
    assert dc.STEPS % 4 == 0  # the kernel records four quarters


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_compiles_for_sm90_without_spills(tmp_path):
    p = subprocess.run(["nvcc", "-cubin", f"-arch={dc.ARCH}", "-O3", "-Xptxas", "-v", "-o", str(tmp_path / "dc.cubin"),
                        str(dc.KERNEL_SRC)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert not re.search(r"[1-9]\d* bytes spill", p.stderr)
    assert "warning" not in p.stderr.lower()
    assert "'dc_chase'" in p.stderr and "'dc_init'" in p.stderr


def test_chains_per_shape():
    assert dc.chains(("w1", None, 1), 132) == (1, 1, 1)
    assert dc.chains(("sm8w", 1, 8), 132) == (132, 8, 1056)
    # every chase reads fresh lines: the largest shape's chains fit in memory and exceed the L2 (60 MiB)
    _, _, n = dc.chains(dc.SHAPES[-1], 132)
    assert n * dc.STEPS * 128 > 2 * 60 * 2**20 / 4


def test_summary_on_synthetic_records():
    steps = dc.STEPS
    q = steps // 4
    rec = lambda c: [c * steps, c * q, c * q, c * q, c * q, 0]  # noqa: E731
    res = {"cases": {}}
    for name, _, _ in dc.SHAPES:
        for cond, cyc in (("dirty", 900), ("clean", 700)):
            res["cases"][dc.case_name(name, cond)] = {"cycles_per_load": dc.per_load([rec(cyc), rec(cyc)])}
    s = dc.summarize(res)
    assert set(s) == {n for n, _, _ in dc.SHAPES}
    assert s["w1"]["extra_cycles"] == pytest.approx(200)
    assert s["w1"]["dirty_by_quarter"] == [pytest.approx(900)] * 4
    assert "w1" in dc.format_table(res)


def test_cli_without_gpu(monkeypatch, capsys):
    monkeypatch.setattr(dc.pc, "gpu_missing", lambda: "no CUDA device found")
    assert dc.main([]) == 2
    assert "dirty_chase_probe: needs CuPy and an NVIDIA GPU" in capsys.readouterr().err
