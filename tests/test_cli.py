"""The tilesim command line, through click's CliRunner (CPU only, fast; `bench` only in smoke mode).

The commands are generic over kernel families: besides GEMM, a toy streaming-copy family
(tests/toy_family.py) is registered in some tests to show that nothing is GEMM-specific.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import types
from pathlib import Path

import pytest
from click.testing import CliRunner
from toy_family import register_toy

from tilesim import GemmConfig, simulate
from tilesim.cli import cli
from tilesim.kernels import registry


@pytest.fixture
def runner():
    return CliRunner()


@pytest.fixture
def toy(monkeypatch):
    return register_toy(monkeypatch)


def _ok(res):
    assert res.exit_code == 0, (res.output, res.exception)
    return res


def _err(res, *needles):
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "Traceback" not in res.output
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


SMALL = ["--m", "256", "--n", "256", "--k", "256"]


# ----- simulate <family> ------------------------------------------------------------------------
def test_simulate_gemm_prints_a_report(runner):
    # the README's command, at a smaller size
    res = _ok(runner.invoke(cli, ["simulate", "gemm", "--m", "1024", "--n", "1024", "--k", "1024",
                                  "--variant", "reg2d", "--bm", "128", "--bn", "128", "--bk", "8",
                                  "--tm", "8", "--tn", "8", "--hardware", "h200"]))
    out = res.stdout
    assert "HBM peak" not in out  # a GEMM is ranked by its FLOP rate
    for needle in ("reg2d_128x128x8_t8x8", "1024", "ms", "TFLOP/s", "FP32 peak", "bound", "roofline", "utilization", "HBM", "L2", "hit rate", "wavefronts",
                   "bank-conflict", "instructions", "blocks/SM", "limited by", "waves",
                   "256 threads", "blocks of"):
        assert needle in out, needle


def test_simulate_gemm_json_round_trip(runner):
    args = ["simulate", "gemm", "--m", "512", "--n", "768", "--k", "256", "--variant", "warp",
            "--bm", "128", "--bn", "128", "--bk", "16", "--wm", "64", "--wn", "64", "--wniter", "4",
            "--tm", "8", "--tn", "4", "--vectorize", "--pipeline", "cp_async", "--stages", "3", "--json"]
    d = json.loads(_ok(runner.invoke(cli, args)).stdout)
    assert d["time_s"] > 0 and d["tflops"] > 0
    cfg = GemmConfig(512, 768, 256, "warp", bm=128, bn=128, bk=16, wm=64, wn=64, wniter=4, tm=8, tn=4,
                     vectorize=True, pipeline="cp_async", stages=3)
    assert d == json.loads(json.dumps(simulate(cfg, "h200").to_dict()))


def test_options_are_generated_from_the_knobs_with_dashes_or_underscores(runner):
    fam = registry.get("gemm")
    help_text = _ok(runner.invoke(cli, ["simulate", "gemm", "--help"])).stdout
    for knob in fam.knobs():
        assert f"--{knob.name.replace('_', '-')}" in help_text, knob.name
    assert "required (problem size)" in help_text and "--no-vectorize" in help_text
    base = ["simulate", "gemm", *SMALL, "--variant", "reg2d", "--json"]
    dashed = json.loads(_ok(runner.invoke(cli, [*base, "--smem-pad", "4"])).stdout)
    under = json.loads(_ok(runner.invoke(cli, [*base, "--smem_pad", "4"])).stdout)
    assert dashed == under and "pad4" in dashed["kernel"]


def test_simulate_timeline_png(runner, tmp_path):
    png = tmp_path / "t" / "tl.png"
    res = _ok(runner.invoke(cli, ["simulate", "gemm", *SMALL, "--timeline", str(png), "--json"]))
    assert png.stat().st_size > 1000
    json.loads(res.stdout)  # stdout stays pure JSON
    assert "wrote timeline" in res.stderr


def test_simulate_exact_steps_every_step(runner):
    held = json.loads(_ok(runner.invoke(cli, ["simulate", "gemm", *SMALL, "--json"])).stdout)
    exact = json.loads(_ok(runner.invoke(cli, ["simulate", "gemm", *SMALL, "--exact", "--json"])).stdout)
    assert exact["time_s"] > 0 and exact["events"] >= held["events"]


@pytest.mark.parametrize("args, needles", [
    (["--tm", "7", "--bm", "128"], ("tm", "7", "128")),
    (["--variant", "naive", "--bm", "64", "--bn", "64"], ("threads", "4096", "1024")),
    (["--hardware", "gpu9000"], ("hardware", "gpu9000", "h200")),
    (["--variant", "bogus"], ("variant", "bogus")),
    (["--pipeline", "cp_async", "--stages", "9"], ("stages",)),
    (["--pipeline", "regs", "--stages", "3"], ("GemmConfig.stages = 3", "2")),
    (["--dtype", "fp16"], ("GemmConfig.dtype = 'fp16'", "fp32")),
    (["--m", "0"], ("GemmConfig.m",)),
    (["--bm", "big"], ("bm", "big", "integer")),
    (["--vectorize", "--variant", "naive"], ("vectorize", "naive")),
    (["--variant", "warp", "--wniter", "3"], ("wniter",)),
    (["--bogus", "3"], ("gemm", "unknown knob", "--bogus", "bm")),
])
def test_simulate_bad_input_is_one_error_line_and_exit_2(runner, args, needles):
    _err(runner.invoke(cli, ["simulate", "gemm", *SMALL, *args]), *needles)


def test_a_pipeline_without_stages_takes_the_default_stages(runner):
    """README: `tilesim simulate gemm ... --pipeline regs` works (stages: 2 with a pipeline)."""
    for pipe, label in (("regs", "regs2"), ("cp_async", "cp_async2")):
        d = json.loads(_ok(runner.invoke(cli, ["simulate", "gemm", *SMALL, "--pipeline", pipe, "--json"])).stdout)
        assert d["kernel"].endswith(label), d["kernel"]
    d = json.loads(_ok(runner.invoke(cli, ["simulate", "gemm", *SMALL, "--pipeline", "cp_async", "--stages", "none",
                                           "--json"])).stdout)
    assert d["kernel"].endswith("cp_async2")


def test_simulate_unknown_family_and_missing_problem_size(runner):
    _err(runner.invoke(cli, ["simulate", "conv9d", "--m", "4"]), "unknown kernel family", "conv9d", "gemm")
    _err(runner.invoke(cli, ["simulate", "gemm", "--m", "256"]), "gemm", "missing", "--n", "--k")


def test_simulate_a_second_family_through_the_same_command(runner, toy):
    assert "toy" in _ok(runner.invoke(cli, ["simulate", "--help"])).stdout
    out = _ok(runner.invoke(cli, ["simulate", "toy", "--n", "1048576", "--threads", "128", "--vec"])).stdout
    for needle in ("copy_t128_vec@1048576", "toy n=1048576", "bandwidth", "HBM peak", "2048 blocks of 128 threads"):
        assert needle in out, needle
    assert "FP32 peak" not in out  # a copy is ranked by its bandwidth
    _err(runner.invoke(cli, ["simulate", "toy", "--n", "1024", "--threads", "100"]), "threads", "100", "512")
    _err(runner.invoke(cli, ["simulate", "toy", "--n", "1024", "--bm", "4"]), "toy", "unknown knob", "--bm")


# ----- families ---------------------------------------------------------------------------------
def test_families_lists_every_family_with_its_knobs(runner, toy):
    out = _ok(runner.invoke(cli, ["families"])).stdout
    for needle in ("gemm", "toy", "a streaming copy", "knob", "type", "default", "choices", "doc",
                   "problem fields: m, n, k", "variant", "regs_per_thread", "64, 128, 256, 512",
                   "elements to copy", "(required)"):
        assert needle in out, needle
    one = _ok(runner.invoke(cli, ["families", "toy"])).stdout
    assert "toy" in one and "gemm" not in one and "threads per block" in one


def test_families_gemm_documents_every_knob(runner):
    out = _ok(runner.invoke(cli, ["families", "gemm"])).stdout
    for needle in ("block tile rows", "register-prefetch", "naive_uncoalesced, naive, smem", "none, regs, cp_async",
                   "fp32 only", "1 without a pipeline"):
        assert needle in " ".join(out.replace("│", " ").split()), needle
    help_text = " ".join(_ok(runner.invoke(cli, ["simulate", "gemm", "--help"])).stdout.split())
    assert "warp tile rows (warp); must divide bm; default: 64" in help_text


def test_families_unknown_name(runner):
    _err(runner.invoke(cli, ["families", "conv9d"]), "conv9d", "gemm")


def test_usage_errors_are_one_line(runner):
    _err(runner.invoke(cli, ["frobnicate"]), "frobnicate")
    _err(runner.invoke(cli, ["sweep", "--top", "many"]), "--top", "many")


# ----- hardware ---------------------------------------------------------------------------------
def test_hardware_list(runner):
    out = _ok(runner.invoke(cli, ["hardware", "list"])).stdout
    for needle in ("h200", "NVIDIA H200", "a100_sxm4", "132", "FP32 TFLOP/s", "HBM TB/s", "calibrated"):
        assert needle in out


def test_hardware_show_with_sources(runner):
    out = _ok(runner.invoke(cli, ["hardware", "show", "h200", "--sources"])).stdout
    for needle in ("sm_count", "132", "hbm_bytes_per_s", "l2_bytes", "props: multiProcessorCount",
                   "fp32_flops_per_s", "derived"):
        assert needle in out
    plain = _ok(runner.invoke(cli, ["hardware", "show", "h200"])).stdout
    assert "props: multiProcessorCount" not in plain and "smem_per_sm_bytes" in plain


def test_hardware_show_unknown(runner):
    _err(runner.invoke(cli, ["hardware", "show", "gpu9000"]), "gpu9000")


# ----- sweep ------------------------------------------------------------------------------------
TINY = """
name = "tiny"
description = "a tiny sweep for tests"
shapes = [[256, 256, 256], [512, 256, 128]]
base = { variant = "reg2d", bm = 64, bn = 64, bk = 8 }
grid = { tm = [4, 8, 7] }
[[configs]]
variant = "naive"
bm = 16
bn = 16
"""


def _scenario(tmp_path, text=TINY, name="tiny.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_sweep_tiny_scenario_with_csv_json_and_plot(runner, tmp_path):
    sc = _scenario(tmp_path)
    csv_path, json_path, png = tmp_path / "o" / "s.csv", tmp_path / "o" / "s.json", tmp_path / "o" / "s.png"
    traffic = tmp_path / "o" / "t.png"
    res = _ok(runner.invoke(cli, ["sweep", str(sc), "--csv", str(csv_path), "--json", str(json_path),
                                  "--plot", str(png), "--top", "2", "--traffic-plot", str(traffic)]))
    out = res.stdout
    assert "tiny (gemm)" in out and "m x n x k = 256x256x256" in out and "512x256x128" in out
    assert "best per shape" in out and "(fastest 2)" in out and "TFLOP/s" in out
    assert "skipped 2 configuration(s)" in out and "GemmConfig.tm = 7" in out
    with csv_path.open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 8  # (3 grid + 1 config) x 2 shapes, two of them skipped
    assert sum(1 for r in rows if r["error"]) == 2
    assert all(float(r["time_s"]) > 0 for r in rows if not r["error"])
    assert {r["family"] for r in rows} == {"gemm"} and rows[0]["full_label"].endswith("@256x256x256")
    doc = json.loads(json_path.read_text())
    assert doc["scenario"] == "tiny" and doc["family"] == "gemm" and len(doc["rows"]) == 8
    assert png.stat().st_size > 1000 and str(png) in out
    assert traffic.stat().st_size > 1000 and "traffic plot" in out


def test_sweep_default_plot_path(runner, tmp_path):
    sc = _scenario(tmp_path)
    with runner.isolated_filesystem(temp_dir=tmp_path) as d:
        res = _ok(runner.invoke(cli, ["sweep", str(sc)]))
        assert (Path(d) / "out" / "sweep_tiny.png").is_file()
        assert "out/sweep_tiny.png" in res.stdout


def test_sweep_hardware_override_and_no_plot(runner, tmp_path):
    sc = _scenario(tmp_path)
    with runner.isolated_filesystem(temp_dir=tmp_path) as d:
        res = _ok(runner.invoke(cli, ["sweep", str(sc), "--hardware", "a100_sxm4", "--no-plot"]))
        assert "A100" in res.stdout
        assert not (Path(d) / "out").exists()


def test_sweep_of_another_family(runner, tmp_path, toy):
    sc = _scenario(tmp_path, """
name = "copies"
family = "toy"
shapes = [[1048576], { n = 4194304 }]
grid = { threads = [128, 256, 100], vec = [false, true] }
""", "copies.toml")
    csv_path = tmp_path / "c.csv"
    out = _ok(runner.invoke(cli, ["sweep", str(sc), "--csv", str(csv_path), "--plot", str(tmp_path / "c.png")])).stdout
    assert "copies (toy)" in out and "toy n = 1048576" in out and "copy_t128_vec" in out
    assert "eff. TB/s" in out and "TFLOP/s" not in out  # a copy is ranked by bandwidth
    assert "skipped 4 configuration(s)" in out and "ToyConfig.threads = 100" in out
    rows = list(csv.DictReader(csv_path.open()))
    assert len(rows) == 12 and {"n", "threads", "vec", "effective_hbm_bytes_per_s"} <= set(rows[0])
    assert (tmp_path / "c.png").stat().st_size > 1000


@pytest.mark.parametrize("args, needle", [
    (["no_such_scenario"], "no_such_scenario"),
    (["tile_sizes", "--hardware", "gpu9000"], "gpu9000"),
    (["tile_sizes", "--top", "-1"], "--top"),
])
def test_sweep_errors(runner, args, needle):
    _err(runner.invoke(cli, ["sweep", *args, "--no-plot"]), needle)


@pytest.mark.parametrize("text, needles", [
    ('name = "bad"\nshapes = [[64, 64, 64]]\nbase = { bogus = 1 }\n', ("bogus", "gemm knob")),
    ('name = "bad"\nfamily = "conv9d"\nshapes = [[64]]\n', ("unknown kernel family", "conv9d")),
    ('name = "bad"\nshapes = [[64, 64]]\n', ("shapes", "[m, n, k]")),
])
def test_sweep_bad_scenario_file(runner, tmp_path, text, needles):
    _err(runner.invoke(cli, ["sweep", str(_scenario(tmp_path, text, "bad.toml"))]), *needles)


# ----- bench (smoke mode only: the real benchmark is not a test) --------------------------------
def test_bench_smoke_times_every_family(runner, toy, monkeypatch):
    from tilesim import bench

    out = _ok(runner.invoke(cli, ["bench", "--smoke", "--repeat", "1"])).stdout
    assert "toy: not timed: no bench problem" in out  # said, not skipped silently
    monkeypatch.setitem(bench.BENCH_PROBLEMS, "toy", ({"n": 1 << 22}, {"n": 1 << 16}))
    out = _ok(runner.invoke(cli, ["bench", "--smoke", "--repeat", "1"])).stdout
    assert "median s" in out and "predicted ms" in out
    timed = [name for name in registry.families() if f"\n│ {name} " in out]
    assert "gemm" in timed and "toy" in timed
    for name in registry.families():  # every family is timed or says why not
        assert name in timed or f"{name}: not timed" in out or f"{name}: simulation failed" in out, name
    assert out.count("PASS") + out.count("FAIL") == 2 * len(timed)
    assert "@256x256x256" in out and "@1024x1024x1024" in out  # gemm's smoke case and the 4x one
    assert "copy_t256@65536" in out and "copy_t256@262144" in out


def test_bench_cases_fall_back_on_the_validation_suite(toy):
    from toy_family import ToyConfig

    from tilesim.bench import SCALE, bench_cases

    def suite(name):
        if name == "toy":
            return ToyConfig(8192, threads=128)
        raise OSError(f"no suite for {name}")

    case = {c.family: c for c in bench_cases(suite=suite)}["toy"]
    assert case.config == ToyConfig(8192, threads=128) and case.scaled == ToyConfig(8192 * SCALE, threads=128)
    plain = {c.family: c for c in bench_cases()}["toy"]
    assert plain.config is None and "BENCH_PROBLEMS" in plain.reason
    gemm = {c.family: c for c in bench_cases(smoke=True, suite=suite)}["gemm"]  # the table comes first
    assert (gemm.config.m, gemm.scaled.m) == (256, 256 * SCALE)


def test_bench_bad_repeat(runner):
    _err(runner.invoke(cli, ["bench", "--repeat", "0"]), "--repeat")


# ----- validate: forwards to the validation package ----------------------------------------------
def _fake(monkeypatch, module, name, calls, rc=0):
    """Replace ``module.name`` by a function that records its arguments and returns ``rc``."""
    mod = types.ModuleType(module)

    def fn(*args, **kwargs):
        calls.append(args + tuple(sorted(kwargs.items())))
        return rc

    setattr(mod, name, fn)
    monkeypatch.setitem(sys.modules, module, mod)


def test_validate_run_and_ncu_build_the_harness_argv(runner, monkeypatch):
    calls = []
    _fake(monkeypatch, "validation.harness.suite", "main", calls)
    _fake(monkeypatch, "validation.harness.runners", "available", [], rc=["gemm", "softmax"])
    _ok(runner.invoke(cli, ["validate", "run", "--family", "gemm", "--family", "softmax", "--only", "reg2d",
                            "--limit", "3", "--reps", "5", "--no-flush", "--fresh"]))
    assert calls == [(["gemm", "softmax", "--only", "reg2d", "--limit", "3", "--fresh", "--reps", "5",
                       "--no-flush"],)]
    calls.clear()
    _ok(runner.invoke(cli, ["validate", "run", "--family", "softmax", "--out", "r"]))
    assert calls == [(["softmax", "--out", "r"],)]
    calls.clear()
    _ok(runner.invoke(cli, ["validate", "run"]))  # every family with a runner
    assert calls == [(["gemm", "softmax"],)]
    calls.clear()
    _fake(monkeypatch, "validation.harness.ncu", "main", calls, rc=2)
    res = runner.invoke(cli, ["validate", "ncu", "--family", "gemm", "--shape", "4096x4096x4096", "--extra"])
    assert calls == [(["gemm", "--shape", "4096x4096x4096", "--extra"],)] and res.exit_code == 2


def test_validate_report_forwards_options(runner, monkeypatch, tmp_path):
    calls = []
    _fake(monkeypatch, "validation.harness.report", "main_report", calls)
    _ok(runner.invoke(cli, ["validate", "report", "--family", "gemm", "--results", str(tmp_path), "--csv", "a.csv",
                            "--plot", "p.png", "--hardware", "h200", "--mode", "blind", "--summary"]))
    assert calls == [(["gemm"], str(tmp_path), "h200", ("csv_path", "a.csv"), ("modes", ("blind",)),
                      ("per_config", False), ("plot_path", "p.png"), ("rank_plot_path", None), ("steady_state", True),
                      ("workers", 1))]
    calls.clear()
    _ok(runner.invoke(cli, ["validate", "report", "--exact"]))
    assert calls == [(None, None, None, ("csv_path", None), ("per_config", True), ("plot_path", None),
                      ("rank_plot_path", None), ("steady_state", False), ("workers", os.cpu_count() or 1))]
    calls.clear()
    _ok(runner.invoke(cli, ["validate", "report", "--exact", "-j", "3"]))
    assert calls[0][-1] == ("workers", 3)
    _err(runner.invoke(cli, ["validate", "report", "-j", "0"]), "-j", "0")


def test_validate_calibrate_forwards_and_keeps_the_exit_status(runner, monkeypatch, tmp_path):
    calls = []
    _fake(monkeypatch, "validation.calibration.calibrate", "main", calls, rc=3)
    recorded = tmp_path / "x.json"
    recorded.write_text("{}")
    res = runner.invoke(cli, ["validate", "calibrate", "--out", "c", "--from-json", str(recorded), "--no-profile"])
    assert calls == [(["--out", "c", "--from-json", str(recorded), "--no-profile"],)] and res.exit_code == 3


def test_validate_out_or_suite_need_one_family_and_files_must_exist(runner, monkeypatch, tmp_path):
    calls = []
    _fake(monkeypatch, "validation.harness.suite", "main", calls)
    _fake(monkeypatch, "validation.harness.runners", "available", [], rc=["gemm", "softmax"])
    _err(runner.invoke(cli, ["validate", "run", "--out", "x"]), "--out", "exactly one --family", "gemm, softmax")
    _err(runner.invoke(cli, ["validate", "ncu", "--family", "gemm", "--suite", str(tmp_path / "no.toml")]),
         "--suite", "does not exist")
    _err(runner.invoke(cli, ["validate", "calibrate", "--from-json", str(tmp_path / "no.json")]),
         "--from-json", "does not exist")
    assert calls == []


def test_validate_harness_errors_are_one_line(runner, monkeypatch):
    def broken(argv):
        raise FileNotFoundError(2, "No such file or directory", "calibration.json")

    mod = types.ModuleType("validation.calibration.calibrate")
    mod.main = broken
    monkeypatch.setitem(sys.modules, "validation.calibration.calibrate", mod)
    _err(runner.invoke(cli, ["validate", "calibrate"]), "calibration.json")


def test_validate_gpu_commands_say_they_need_a_gpu_in_one_line():
    """The real harness, no fakes: without CuPy (or a device) run, ncu and calibrate exit 2 with one line."""
    import subprocess

    from validation.harness.suite import gpu_available

    if gpu_available() is None:
        pytest.skip("a GPU is usable here")
    for cmd in (["run", "--family", "gemm", "--limit", "1"], ["ncu", "--family", "gemm", "--limit", "1"],
                ["calibrate"]):
        p = subprocess.run([sys.executable, "-m", "tilesim.cli", "validate", *cmd], capture_output=True, text=True,
                           cwd=Path(__file__).resolve().parents[1])
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1 and "needs CuPy and an NVIDIA GPU" in lines[0], (cmd, p.stderr)


def test_validate_without_the_validation_package_is_one_error_line(runner, monkeypatch):
    monkeypatch.setitem(sys.modules, "validation.calibration.calibrate", None)
    _err(runner.invoke(cli, ["validate", "calibrate"]), "validation.calibration.calibrate")


def test_studies_are_not_commands_and_tilesim_does_not_import_validation(runner):
    out = _ok(runner.invoke(cli, ["validate", "--help"])).stdout
    for cmd in ("run", "report", "calibrate", "ncu"):
        assert cmd in out
    assert "engine-check" not in out and "replay" not in out
    import subprocess

    code = "import sys, tilesim.cli; assert not [m for m in sys.modules if m.startswith('validation')]"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_main_entry_point(monkeypatch, capsys):
    from tilesim.cli import main

    with pytest.raises(SystemExit) as e:
        main(["hardware", "list"])
    assert e.value.code == 0
    assert "h200" in capsys.readouterr().out
