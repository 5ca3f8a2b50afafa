"""The generic suite runner (validation.harness.suite) driving a fake family and runner on the CPU.

Every number below is a fabricated test input, never a measurement."""

from __future__ import annotations

import csv
import dataclasses
import json
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from tilesim.kernels import registry
from validation.harness import runners, suite
from validation.harness.timing import Timing

REPO = Path(__file__).resolve().parents[1]
FAKE = "fakecopy"


@dataclasses.dataclass(frozen=True)
class FakeCopyConfig:
    n: int
    threads: int = 256
    mode: str = "ok"  # what the fake runner does: ok, wrong, unsupported, compile, cuda, error, crash
    regs_per_thread: int | None = None

    def __post_init__(self):
        if self.threads not in (128, 256, 512):
            raise ValueError(f"FakeCopyConfig.threads = {self.threads}: must be 128, 256 or 512")


FAKE_FAMILY = registry.KernelFamily(
    name=FAKE, config=FakeCopyConfig, lower=lambda c: None, check_fits=lambda c, hw: None,
    counts=lambda c: {"min_hbm_bytes": 8.0 * c.n}, label=lambda c: f"copy_t{c.threads}_{c.mode}",
    problem_fields=("n",))


class CompileException(Exception):
    """Named as CuPy's NVRTC error."""


class CUDARuntimeError(Exception):
    """Named and placed as CuPy's runtime error."""


CUDARuntimeError.__module__ = "cupy_backends.cuda.api.runtime"


class FakeCase:
    def __init__(self, cfg, calls):
        self.cfg, self.calls = cfg, calls
        self.kernel_names = ("copy_kernel",)
        self.attributes = {"regs_per_thread": 16, "static_smem_bytes": 0, "local_bytes": 0}

    def launch(self):
        self.calls.append(("launch", self.cfg))
        if self.cfg.mode == "error":
            raise RuntimeError("flaky")
        if self.cfg.mode == "cuda":
            raise CUDARuntimeError("cudaErrorIllegalAddress: an illegal memory access")
        if self.cfg.mode == "hang":
            time.sleep(0.4)

    def check(self):
        self.calls.append(("check", self.cfg))
        if self.cfg.mode == "wrong":
            return False, 0.5, "rel_err 0.5"
        self.launch()
        return True, 1e-7, ""


def make_runner(calls):
    def prepare(cfg, seed=0):
        calls.append(("prepare", cfg))
        if cfg.mode == "unsupported":
            raise ValueError("FakeCopyConfig.n: too large for the kernels")
        if cfg.mode == "compile":
            raise CompileException("nvrtc: error")
        return FakeCase(cfg, calls)

    return types.SimpleNamespace(FAMILY=FAKE, kernel_source=lambda c: None, prepare=prepare)


def fake_time(fn, **kw):
    fn()
    return Timing.from_samples([2e-6, 1e-6, 3e-6], flushed_l2=True)


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """The fake family registered (through registry.get) and its runner found by name."""
    calls: list = []
    real_get, real_runner = registry.get, runners.get_runner
    monkeypatch.setattr(registry, "get", lambda name: FAKE_FAMILY if name == FAKE else real_get(name))
    monkeypatch.setattr(runners, "get_runner", lambda name: make_runner(calls) if name == FAKE else real_runner(name))
    monkeypatch.setattr(suite, "context_ok", lambda: True)
    path = tmp_path / "suite.toml"
    path.write_text('[[shape]]\nname = "small"\nn = 1024\n\n[[shape]]\nname = "big"\nn = 65536\n\n'
                    '[[config]]\nthreads = 256\n\n[[config]]\nthreads = 128\nshapes = ["big"]\n')
    return types.SimpleNamespace(calls=calls, suite=path, out=tmp_path / "out")


def _rows(path: Path) -> list[dict]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


# ----- the suite file -----------------------------------------------------------------------------
def test_configs_cross_shapes_config_major_and_respect_shapes(fake):
    cfgs = suite.load_suite(FAKE, fake.suite)
    assert [(c.n, c.threads) for c in cfgs] == [(1024, 256), (65536, 256), (65536, 128)]
    assert suite.select(FAKE, cfgs, shape="65536", only="t128") == [cfgs[2]]
    assert suite.select(FAKE, cfgs, limit=1) == cfgs[:1]


@pytest.mark.parametrize("text, match", [
    ('[[shape]]\nname = "a"\nn = 1\n', "needs at least one"),
    ('[[shape]]\nname = "a"\nn = 1\nm = 2\n[[config]]\n', r"shape #0 \(a\): keys must be"),
    ('[[shape]]\nname = "a"\nn = 1\n[[config]]\nshapes = ["b"]\n', r"config #0: unknown shape names \['b'\]"),
    ('[[shape]]\nname = "a"\nn = 1\n[[config]]\nthreads = 100\n', r"config #0 on shape a: .*threads = 100"),
    ('[[shape]]\nname = "a"\nn = 1\n[[config]]\ncolour = 1\n', r"config #0 on shape a: .*colour"),
    ('[[shape]]\nname = "a"\nn = 1\n[[config]]\nn = 5\n', r"config #0: \['n'\] are problem fields"),
    ('[[shape]]\nname = "a"\nn = 1\n[[config]]\n[[config]]\n', r"config #1: duplicate configuration copy_t256_ok@1"),
    ('[[tiling]]\n', "unknown top-level keys"),
])
def test_suite_file_errors_name_the_entry(fake, tmp_path, text, match):
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(ValueError, match=match):
        suite.load_suite(FAKE, bad)


def test_gemm_suite_keeps_the_recorded_110_configurations_and_csv_format():
    cfgs = suite.load_suite("gemm")
    assert len(cfgs) == 110
    recorded = REPO / "validation" / "results" / "h200" / "gemm" / "times.csv"
    if not recorded.exists():
        pytest.skip("no recorded GEMM results")
    runner = runners.get_runner("gemm")
    with recorded.open(newline="") as fh:
        header = tuple(next(csv.reader(fh)))
    assert header == suite.csv_columns("gemm", runner)
    cols = suite.config_columns("gemm")
    done = suite.read_done(recorded, cols)
    assert {suite.row_key(suite.config_row("gemm", c), cols) for c in cfgs} <= done  # a rerun measures nothing
    assert all(suite.row_key(row, cols) in done for row, _ in runner.reference_rows(cfgs))


# ----- running ------------------------------------------------------------------------------------
def test_every_status_is_recorded_and_a_wrong_kernel_is_never_timed(fake):
    cfgs = [FakeCopyConfig(1024, mode=m) for m in ("ok", "wrong", "unsupported", "compile", "cuda", "error")]
    lines: list[str] = []
    path = suite.run_suite(FAKE, cfgs, fake.out, time_fn=fake_time, log=lines.append)
    rows = _rows(path)
    assert [r["status"] for r in rows] == ["ok", "wrong", "unsupported", "compile_error", "launch_error", "error"]
    ok = rows[0]
    assert ok["label"] == "copy_t256_ok" and ok["n"] == "1024" and ok["regs_per_thread_override"] == ""
    assert float(ok["median_s"]) == 2e-6 and ok["reps"] == "3" and ok["regs_per_thread"] == "16"
    assert float(ok["bytes_per_s"]) == pytest.approx(8.0 * 1024 / 2e-6)
    assert ("launch", cfgs[1]) not in fake.calls  # wrong: checked, never launched again
    assert rows[1]["median_s"] == "" and "rel_err 0.5" in rows[1]["message"]
    assert "FakeCopyConfig.n" in rows[2]["message"]
    assert len(lines) == 7 and lines[1].startswith("[1/6] fakecopy copy_t256_ok@1024: ok median 2.0 us")
    meta = json.loads((fake.out / "metadata.json").read_text())
    assert meta["family"] == FAKE and meta["timing"]["budget_s"] == suite.TIMING_DEFAULTS["budget_s"]


def test_resume_keeps_final_rows_and_retries_errors(fake):
    cfgs = [FakeCopyConfig(1024), FakeCopyConfig(1024, mode="error"), FakeCopyConfig(2048)]
    suite.run_suite(FAKE, cfgs[:2], fake.out, time_fn=fake_time, log=None)
    fake.calls.clear()
    path = suite.run_suite(FAKE, cfgs, fake.out, time_fn=fake_time, log=None)
    prepared = [c for what, c in fake.calls if what == "prepare"]
    assert prepared == [cfgs[1], cfgs[2]]  # the ok row is never repeated; error is retried
    assert [r["status"] for r in _rows(path)] == ["ok", "error", "error", "ok"]
    suite.run_suite(FAKE, cfgs, fake.out, time_fn=fake_time, log=None, resume=False)
    assert (fake.out / "times.csv.bak").exists() and len(_rows(path)) == 3


def test_a_configuration_the_process_died_in_twice_is_recorded_and_skipped(fake):
    cfg = FakeCopyConfig(1024)
    key = json.dumps(suite.row_key(suite.config_row(FAKE, cfg), suite.config_columns(FAKE)))
    fake.out.mkdir()
    (fake.out / "in_progress.json").write_text(json.dumps({key: 1}))  # killed once: tried again
    suite.run_suite(FAKE, [cfg], fake.out, time_fn=fake_time, log=None)
    assert _rows(fake.out / "times.csv")[0]["status"] == "ok"
    other = FakeCopyConfig(2048)
    key = json.dumps(suite.row_key(suite.config_row(FAKE, other), suite.config_columns(FAKE)))
    (fake.out / "in_progress.json").write_text(json.dumps({key: 2}))  # died twice: a hang or a crash
    fake.calls.clear()
    suite.run_suite(FAKE, [cfg, other], fake.out, time_fn=fake_time, log=None)
    row = _rows(fake.out / "times.csv")[-1]
    assert row["status"] == "launch_error" and "died 2 times" in row["message"] and not fake.calls


def test_a_dead_context_writes_the_row_then_stops_for_a_restart(fake, monkeypatch):
    monkeypatch.setattr(suite, "context_ok", lambda: False)
    cfgs = [FakeCopyConfig(1024, mode="cuda"), FakeCopyConfig(2048)]
    with pytest.raises(suite.ContextLost, match="illegal memory access"):
        suite.run_suite(FAKE, cfgs, fake.out, time_fn=fake_time, log=None)
    rows = _rows(fake.out / "times.csv")
    assert [r["status"] for r in rows] == ["launch_error"]
    monkeypatch.setattr(suite, "context_ok", lambda: True)
    suite.run_suite(FAKE, cfgs, fake.out, time_fn=fake_time, log=None)  # the restart resumes after it
    assert [r["status"] for r in _rows(fake.out / "times.csv")] == ["launch_error", "ok"]


def test_a_hung_kernel_gets_its_row_from_the_watchdog_which_then_stops_the_process(fake):
    hangs = []
    cfgs = [FakeCopyConfig(1024, mode="hang"), FakeCopyConfig(2048)]
    suite.run_suite(FAKE, cfgs, fake.out, time_fn=fake_time, log=None, config_timeout_s=0.1,
                    on_hang=lambda: hangs.append(1))  # the real on_hang exits with EXIT_HUNG
    rows = _rows(fake.out / "times.csv")
    assert hangs == [1]
    assert [r["status"] for r in rows] == ["launch_error", "ok"]  # one row each, none written twice
    assert "still running after 0.1 s" in rows[0]["message"]
    assert json.loads((fake.out / "in_progress.json").read_text()) == {}


def test_no_configuration_starts_after_the_deadline(fake):
    lines: list[str] = []
    suite.run_suite(FAKE, [FakeCopyConfig(1024)], fake.out, time_fn=fake_time, log=lines.append, deadline=0.0)
    assert not fake.calls and "time budget spent, 1 left" in lines[-1]
    assert not (fake.out / "times.csv").read_text().strip().count("\n")  # the header only


def test_reference_rows_are_timed_after_the_suite(fake, monkeypatch):
    calls = fake.calls

    class Ref:
        def launch(self):
            calls.append(("ref", None))

        def rates(self, median_s):
            return {"bytes_per_s": 1.0 / median_s}

    runner = make_runner(calls)
    runner.reference_rows = lambda cfgs: [({"n": c.n, "label": "vendor"}, Ref) for c in cfgs]
    monkeypatch.setattr(runners, "get_runner", lambda name: runner)
    path = suite.run_suite(FAKE, [FakeCopyConfig(1024)], fake.out, time_fn=fake_time, log=None)
    rows = _rows(path)
    assert [r["label"] for r in rows] == ["copy_t256_ok", "vendor"]
    assert float(rows[1]["bytes_per_s"]) == pytest.approx(5e5)
    suite.run_suite(FAKE, [FakeCopyConfig(1024)], fake.out, time_fn=fake_time, log=None)
    assert len(_rows(path)) == 2


def test_row_writer_refuses_a_file_of_other_columns(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a,b\n1,2\n3,")  # a torn last line
    with suite.RowWriter(path, ("a", "b")) as w:
        w.write({"a": 5, "b": None})
    assert path.read_text() == "a,b\n1,2\n5,\n"
    with pytest.raises(ValueError, match="existing header differs"):
        suite.RowWriter(path, ("a", "c"))


def test_runners_are_found_by_family_name():
    assert "gemm" in runners.available()
    assert runners.get_runner("gemm").FAMILY == "gemm"
    with pytest.raises(ValueError, match="no validation/families/nosuch/runner.py"):
        runners.get_runner("nosuch")


def test_command_line_without_gpu_or_with_unknown_family_exits_2():
    for args in (["gemm", "--results", "/tmp/unused"], ["nosuch"]):
        p = subprocess.run([sys.executable, "-m", "validation.harness.suite", *args], cwd=REPO, capture_output=True,
                           text=True, timeout=120)
        try:
            import cupy  # noqa: F401

            if args[0] == "gemm":
                continue
        except ImportError:
            pass
        assert p.returncode == 2, p.stderr
        assert "validation.harness.suite:" in p.stderr


def test_device_script_is_valid_bash():
    assert subprocess.run(["bash", "-n", str(REPO / "validation" / "device.sh")]).returncode == 0


def test_recorded_rows_read_the_main_file_then_each_part_in_name_order(tmp_path):
    """A results folder's later runs (parts/<run>/times.csv) follow its main rows; a column only a part has
    stays absent from the main rows (their configuration's default)."""
    from validation.harness.rows import PARTS_DIR, recorded_rows

    (tmp_path / "times.csv").write_text("label,median_s\nmain_a,1\n")
    for run, text in (("b_second", "label,setmaxnreg,median_s\npart_b,False,3\n"),
                      ("a_first", "label,setmaxnreg,median_s\npart_a,False,2\n")):
        (tmp_path / PARTS_DIR / run).mkdir(parents=True)
        (tmp_path / PARTS_DIR / run / "times.csv").write_text(text)
    rows = recorded_rows(tmp_path)
    assert [r["label"] for r in rows] == ["main_a", "part_a", "part_b"]
    assert "setmaxnreg" not in rows[0] and rows[1]["setmaxnreg"] == "False"
    assert recorded_rows(tmp_path / "missing") == []
