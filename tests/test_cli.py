"""The tilesim command line, through click's CliRunner (CPU only, fast; `bench` only in smoke mode)."""

from __future__ import annotations

import csv
import json
import os
import sys
import types

import pytest
from click.testing import CliRunner

from tilesim import GemmConfig, simulate
from tilesim.cli import cli


@pytest.fixture
def runner():
    return CliRunner()


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


# ----- simulate ---------------------------------------------------------------------------------
def test_simulate_gemm_prints_a_report(runner):
    res = _ok(runner.invoke(cli, ["simulate", "gemm", "--m", "1024", "--n", "1024", "--k", "1024",
                                  "--variant", "reg2d", "--bm", "128", "--bn", "128", "--bk", "8",
                                  "--tm", "8", "--tn", "8"]))
    out = res.stdout
    for needle in ("reg2d_128x128x8_t8x8", "ms", "TFLOP/s", "FP32 peak", "bound", "roofline",
                   "utilization", "HBM", "L2", "hit rate", "wavefronts", "bank-conflict",
                   "operand bytes", "instructions", "blocks/SM", "limited by", "waves"):
        assert needle in out, needle


def test_simulate_gemm_json_round_trip(runner):
    args = ["simulate", "gemm", "--m", "512", "--n", "768", "--k", "256", "--variant", "warp",
            "--bm", "128", "--bn", "128", "--bk", "16", "--wm", "64", "--wn", "64", "--wniter", "4",
            "--tm", "8", "--tn", "4", "--vectorize", "--pipeline", "cp_async", "--stages", "3", "--json"]
    res = _ok(runner.invoke(cli, args))
    d = json.loads(res.stdout)
    assert d["time_s"] > 0 and d["tflops"] > 0
    cfg = GemmConfig(512, 768, 256, "warp", bm=128, bn=128, bk=16, wm=64, wn=64, wniter=4, tm=8, tn=4,
                     vectorize=True, pipeline="cp_async", stages=3)
    expect = simulate(cfg, "h200").to_dict()
    assert d == json.loads(json.dumps(expect))
    assert d["kernel"].endswith(cfg.label)


def test_simulate_default_stages_follow_the_pipeline(runner):
    d = json.loads(_ok(runner.invoke(cli, ["simulate", "gemm", "--m", "256", "--n", "256", "--k", "256",
                                           "--pipeline", "regs", "--json"])).stdout)
    assert d["kernel"].endswith("regs2")


def test_simulate_timeline_png(runner, tmp_path):
    png = tmp_path / "t" / "tl.png"
    res = _ok(runner.invoke(cli, ["simulate", "gemm", "--m", "256", "--n", "256", "--k", "256",
                                  "--timeline", str(png), "--json"]))
    assert png.stat().st_size > 1000
    json.loads(res.stdout)  # stdout stays pure JSON


@pytest.mark.parametrize("args, needles", [
    (["--tm", "7", "--bm", "128"], ("tm", "7", "128")),
    (["--variant", "naive", "--bm", "64", "--bn", "64"], ("threads", "4096", "1024")),
    (["--hardware", "gpu9000"], ("hardware", "gpu9000", "h200")),
    (["--variant", "bogus"], ("variant", "bogus")),
    (["--pipeline", "cp_async", "--stages", "9"], ("stages",)),
    (["--m", "0"], ("GemmConfig.m",)),
    (["--variant", "warp", "--wniter", "3"], ("wniter",)),
])
def test_simulate_bad_input_is_one_error_line_and_exit_2(runner, args, needles):
    _err(runner.invoke(cli, ["simulate", "gemm", "--m", "256", "--n", "256", "--k", "256", *args]), *needles)


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


def test_sweep_tiny_scenario_with_csv_json_and_plot(runner, tmp_path):
    sc = tmp_path / "tiny.toml"
    sc.write_text(TINY)
    csv_path, json_path, png = tmp_path / "o" / "s.csv", tmp_path / "o" / "s.json", tmp_path / "o" / "s.png"
    traffic = tmp_path / "o" / "t.png"
    res = _ok(runner.invoke(cli, ["sweep", str(sc), "--csv", str(csv_path), "--json", str(json_path),
                                  "--plot", str(png), "--top", "2", "--traffic-plot", str(traffic)]))
    out = res.stdout
    assert "256x256x256" in out and "512x256x128" in out and "best per shape" in out
    assert "skipped 2 invalid configuration(s)" in out and "GemmConfig.tm = 7" in out
    assert "(fastest 2)" in out
    with csv_path.open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 8  # (3 grid + 1 config) x 2 shapes, two of them skipped
    assert sum(1 for r in rows if r["error"]) == 2
    assert all(float(r["time_s"]) > 0 for r in rows if not r["error"])
    doc = json.loads(json_path.read_text())
    assert doc["scenario"] == "tiny" and len(doc["rows"]) == 8
    assert png.stat().st_size > 1000
    assert str(png) in out
    assert traffic.stat().st_size > 1000 and "traffic plot" in out


def test_sweep_default_plot_path(runner, tmp_path):
    sc = tmp_path / "tiny.toml"
    sc.write_text(TINY)
    with runner.isolated_filesystem(temp_dir=tmp_path) as d:
        res = _ok(runner.invoke(cli, ["sweep", str(sc)]))
        from pathlib import Path
        assert (Path(d) / "out" / "sweep_tiny.png").is_file()
        assert "out/sweep_tiny.png" in res.stdout


def test_sweep_hardware_override_and_no_plot(runner, tmp_path):
    sc = tmp_path / "tiny.toml"
    sc.write_text(TINY)
    with runner.isolated_filesystem(temp_dir=tmp_path) as d:
        res = _ok(runner.invoke(cli, ["sweep", str(sc), "--hardware", "a100_sxm4", "--no-plot"]))
        assert "A100" in res.stdout
        from pathlib import Path
        assert not (Path(d) / "out").exists()


@pytest.mark.parametrize("args, needle", [
    (["no_such_scenario"], "no_such_scenario"),
    (["tile_sizes", "--hardware", "gpu9000"], "gpu9000"),
])
def test_sweep_errors(runner, args, needle):
    _err(runner.invoke(cli, ["sweep", *args, "--no-plot"]), needle)


def test_sweep_bad_scenario_file(runner, tmp_path):
    sc = tmp_path / "bad.toml"
    sc.write_text('name = "bad"\nshapes = [[64, 64, 64]]\nbase = { bogus = 1 }\n')
    _err(runner.invoke(cli, ["sweep", str(sc)]), "bogus")


# ----- bench (smoke mode only: the real benchmark is not a test) --------------------------------
def test_bench_smoke(runner):
    out = _ok(runner.invoke(cli, ["bench", "--smoke", "--repeat", "1"])).stdout
    assert "median s" in out and "ratio" in out
    assert out.count("PASS") + out.count("FAIL") == 3


# ----- validate: forwards to the validation package ----------------------------------------------
def _fake(monkeypatch, module, name, calls, rc=0):
    mod = types.ModuleType(module)

    def fn(*args, **kwargs):
        calls.append(args + tuple(sorted(kwargs.items())))
        return rc

    setattr(mod, name, fn)
    monkeypatch.setitem(sys.modules, module, mod)


def test_validate_report_forwards_options(runner, monkeypatch, tmp_path):
    calls = []
    _fake(monkeypatch, "validation.report", "main_report", calls)
    _ok(runner.invoke(cli, ["validate", "report", "--results", str(tmp_path), "--csv", "a.csv",
                            "--plot", "p.png", "--hardware", "h200"]))
    assert calls == [(str(tmp_path), "a.csv", "p.png", "h200", ("steady_state", True), ("workers", 1))]
    calls.clear()
    _ok(runner.invoke(cli, ["validate", "report", "--exact"]))
    assert calls == [(None, None, None, "h200", ("steady_state", False), ("workers", os.cpu_count() or 1))]
    calls.clear()
    _ok(runner.invoke(cli, ["validate", "report", "--exact", "-j", "3"]))
    assert calls == [(None, None, None, "h200", ("steady_state", False), ("workers", 3))]
    assert runner.invoke(cli, ["validate", "report", "-j", "0"]).exit_code != 0


def test_validate_run_and_calibrate_build_argv(runner, monkeypatch):
    calls = []
    _fake(monkeypatch, "validation.suite", "main", calls)
    _ok(runner.invoke(cli, ["validate", "run", "--out", "r", "--limit", "3", "--only", "reg2d"]))
    assert calls == [(["--out", "r", "--limit", "3", "--only", "reg2d"],)]
    calls.clear()
    _fake(monkeypatch, "validation.calibrate", "main", calls, rc=3)
    res = runner.invoke(cli, ["validate", "calibrate", "--out", "c"])
    assert calls == [(["--out", "c"],)] and res.exit_code == 3


def test_validate_missing_module_is_an_error(runner, monkeypatch):
    monkeypatch.setitem(sys.modules, "validation.calibrate", None)
    _err(runner.invoke(cli, ["validate", "calibrate"]), "validation.calibrate")


def test_main_entry_point(monkeypatch, capsys):
    from tilesim.cli import main

    with pytest.raises(SystemExit) as e:
        main(["hardware", "list"])
    assert e.value.code == 0
    assert "h200" in capsys.readouterr().out


def test_validate_engine_check_and_replay_forward_options(runner, monkeypatch, tmp_path):
    calls = []
    _fake(monkeypatch, "validation.engine_check", "main", calls)
    _ok(runner.invoke(cli, ["validate", "engine-check"]))
    _ok(runner.invoke(cli, ["validate", "engine-check", "--results", str(tmp_path)]))
    assert calls == [([],), (["--results", str(tmp_path)],)]
    calls.clear()
    _fake(monkeypatch, "validation.schedule_replay", "main", calls)
    _ok(runner.invoke(cli, ["validate", "replay", "--capacity-mb", "31.4", "--plot", "x.png"]))
    assert calls == [(["--capacity-mb", "31.4", "--plot", "x.png"],)]
    _fake(monkeypatch, "validation.schedule_replay", "main", calls, rc=1)
    assert runner.invoke(cli, ["validate", "replay"]).exit_code == 1
