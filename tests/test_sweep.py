"""Scenario loading and expansion, sweeps, best_per_shape, and the plot functions (CPU only).

Sweeps are generic over kernel families: GEMM scenarios (the default family) and a toy
streaming-copy family (tests/toy_family.py) go through the same code.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from toy_family import ToyConfig, register_toy

from tilesim import GemmConfig, simulate
from tilesim.sweep import (
    Scenario,
    SweepRow,
    available_scenarios,
    best_per_shape,
    load_scenario,
    run_sweep,
    scenarios_dir,
    throughput_metric,
)

BUILTIN = ("tile_sizes", "naive_vs_tiled", "double_buffering", "reduction_ladder", "reduction_loads_in_flight",
           "softmax_variants", "layernorm_variants", "tile_map")
MAPS = ("tile_map",)
"""Scenarios drawn as tile-size maps, where the cells that break a limit are part of the picture."""
MISSING_PIPE_DATA = "no sourced latency for pipe"
"""The h200 profile has no measured shuffle/SFU latency until the pipes_probe runs on the device."""


def _write(tmp_path, text, name="tiny.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_builtin_scenarios_are_listed_and_resolve_by_name():
    names = available_scenarios()
    assert sorted(names) == sorted(BUILTIN)
    for n in BUILTIN:
        sc = load_scenario(n)
        assert sc.name == n and sc.path == scenarios_dir() / f"{n}.toml"
    assert "validation_suite" not in names  # another format, not a sweep scenario


@pytest.mark.parametrize("name", BUILTIN)
def test_builtin_scenarios_have_no_invalid_entries_and_simulate(name):
    sc = load_scenario(name)
    rows = sc.expand()
    if name in MAPS:  # a map shows where the limits are: its invalid cells break a hardware limit
        assert all("exceeds" in r.error or "warp size" in r.error or "does not fit" in r.error
                   for r in rows if r.error)
        rows = [r for r in rows if not r.error]
    assert rows and [(r.label, r.error) for r in rows if r.error] == []
    assert len({r.full_label for r in rows}) == len(rows)  # labels tell the configurations apart
    for row in (rows[0], rows[-1]):
        try:
            assert simulate(row.cfg, sc.hardware).time_s > 0
        except ValueError as e:
            if MISSING_PIPE_DATA in str(e):
                pytest.xfail(f"{sc.hardware} lacks measured pipe data: {e}")
            raise


def test_builtin_scenario_contents():
    ts = load_scenario("tile_sizes")
    assert set(ts.shapes) == {(4096, 4096, 4096), (2048, 2048, 2048)}
    cfgs = {r.cfg for r in ts.expand()}
    assert any(c.variant == "warp" for c in cfgs)
    assert {c.vectorize for c in cfgs if c.variant == "reg2d"} == {False, True}
    ladder = [r.cfg.variant for r in load_scenario("naive_vs_tiled").expand()]
    assert ladder == ["naive_uncoalesced", "naive", "smem", "reg1d", "reg2d", "reg2d", "warp"]
    pipes = {(r.cfg.pipeline, r.cfg.stages) for r in load_scenario("double_buffering").expand()}
    assert pipes == {("none", 1), ("regs", 2), ("cp_async", 2), ("cp_async", 3), ("cp_async", 4)}


def test_grid_is_a_cartesian_product_over_base(tmp_path):
    p = _write(tmp_path, """
name = "g"
shapes = [[256, 256, 256], [512, 256, 128]]
base = { variant = "reg2d", bm = 64, bn = 64 }
[grid]
bk = [8, 16]
tm = [4, 8]
tn = [4, 8]
""")
    sc = load_scenario(p)
    assert sc.hardware == "h200" and sc.description == "" and sc.family == "gemm"  # the default family
    rows = sc.expand()
    assert len(rows) == 2 * 2 * 2 * 2 and all(r.cfg is not None for r in rows)
    first = [r.cfg for r in rows if r.shape == (256, 256, 256)]
    assert {(c.bk, c.tm, c.tn) for c in first} == {(a, b, c) for a in (8, 16) for b in (4, 8) for c in (4, 8)}
    assert all(c.bm == 64 and c.bn == 64 and c.variant == "reg2d" for c in first)
    assert rows[0].shape == (256, 256, 256) and rows[-1].shape == (512, 256, 128)


def test_configs_merge_over_base_and_union_with_grid(tmp_path):
    p = _write(tmp_path, """
name = "c"
shapes = [[256, 256, 256]]
base = { variant = "reg2d", bm = 64, bn = 64, tm = 4, tn = 4 }
grid = { bk = [8, 16] }
[[configs]]
bk = 32
[[configs]]
variant = "naive"
bm = 16
bn = 16
""")
    cfgs = [r.cfg for r in load_scenario(p).expand()]
    assert [c.bk for c in cfgs[:3]] == [8, 16, 32]
    assert cfgs[3].variant == "naive" and (cfgs[3].bm, cfgs[3].bn, cfgs[3].tm) == (16, 16, 4)


def test_table_valued_grid_axis_moves_coupled_knobs_together(tmp_path):
    p = _write(tmp_path, """
name = "t"
shapes = [[256, 256, 256]]
base = { variant = "reg2d", bm = 64, bn = 64, tm = 4, tn = 4 }
[grid]
pipe = [{ pipeline = "none" }, { pipeline = "regs", stages = 2 }, { pipeline = "cp_async", stages = 3 }]
bk = [8, 16]
""")
    rows = load_scenario(p).expand()
    assert len(rows) == 6 and not any(r.error for r in rows)
    assert {(r.cfg.pipeline, r.cfg.stages) for r in rows} == {("none", 1), ("regs", 2), ("cp_async", 3)}


def test_base_alone_and_duplicates_run_once(tmp_path):
    p = _write(tmp_path, """
name = "b"
shapes = [[256, 256, 256]]
base = { variant = "naive", bm = 16, bn = 16 }
""")
    assert len(load_scenario(p).expand()) == 1
    sc = Scenario(name="d", shapes=((256, 256, 256),), base={"variant": "naive", "bm": 16, "bn": 16},
                  configs=({}, {"bm": 16}))
    assert len(sc.expand()) == 1


def test_invalid_combinations_are_skipped_with_the_reason(tmp_path):
    p = _write(tmp_path, """
name = "bad"
shapes = [[256, 256, 256]]
base = { variant = "reg2d", bm = 128, bn = 128, bk = 8 }
grid = { tm = [8, 7] }
[[configs]]
variant = "naive"
bm = 64
bn = 64
""")
    seen = []
    res = run_sweep(p, on_result=lambda row, done, total: seen.append((row.label, done, total)))
    assert len(res.rows) == 3 and len(res.ok) == 1 and len(res.skipped) == 2
    errs = [r.error for r in res.skipped]
    assert any("GemmConfig.tm = 7" in e and "must divide bm = 128" in e for e in errs)
    assert any("threads = 4096" in e and "max_threads_per_block" in e for e in errs)
    assert [d for _, d, _ in seen] == [1, 2, 3] and {t for *_, t in seen} == {3}
    assert all(r.cfg is None for r in res.skipped)
    assert "tm=7" in res.skipped[0].label and res.skipped[0].full_label.endswith("@256x256x256")


@pytest.mark.parametrize("text, needle", [
    ('name = "x"\nshapes = [[64, 64, 64]]\nbase = { bogus = 1 }\n', "bogus"),
    ('name = "x"\nshapes = [[64, 64, 64]]\ngrid = { tmm = [1, 2] }\n', "tmm"),
    ('name = "x"\nshapes = [[64, 64]]\n', "shapes"),
    ('name = "x"\nshapes = []\n', "shapes"),
    ('name = "x"\nshapes = [[64, 64, 64]]\ngrid = { tm = [] }\n', "grid.tm"),
    ('name = "x"\nshapes = [[64, 64, 64]]\nextra = 1\n', "extra"),
    ('name = "x"\nshapes = [[64, 64, 64]\n', "invalid TOML"),
    ('name = "x"\nfamily = "conv9d"\nshapes = [[64]]\n', "unknown kernel family 'conv9d'; known: .*gemm"),
    ('name = "x"\nshapes = [{ m = 64, n = 64 }]\n', "must name exactly m, n, k"),
    ('name = "x"\nshapes = [[64, 64, 64]]\nbase = { m = 128 }\n', "unknown gemm knob.*'m'"),
])
def test_malformed_scenarios_raise_value_error_naming_the_problem(tmp_path, text, needle):
    p = _write(tmp_path, text)
    with pytest.raises(ValueError, match=needle):
        load_scenario(p)


def test_unknown_scenario_name_lists_known_ones(tmp_path):
    with pytest.raises(ValueError, match="tile_sizes"):
        load_scenario("no_such_scenario")
    with pytest.raises(ValueError, match="does not exist"):
        load_scenario(tmp_path / "missing.toml")


def test_unknown_hardware_raises():
    sc = Scenario(name="h", shapes=((64, 64, 64),), base={"variant": "naive", "bm": 16, "bn": 16})
    with pytest.raises(ValueError, match="unknown hardware"):
        run_sweep(sc, hardware="gpu9000")


def test_hardware_override_is_used():
    sc = Scenario(name="h", shapes=((256, 256, 256),), base={"variant": "naive", "bm": 16, "bn": 16})
    res = run_sweep(sc, hardware="a100_sxm4")
    assert res.hardware == "a100_sxm4" and res.ok[0].result.hardware == "a100_sxm4"


_NAIVE_RESULT = {}


def _row(shape, time_s, error=None):
    if error:
        return SweepRow(shape=shape, knobs={}, error=error)
    cfg = GemmConfig(*shape, "naive", bm=16, bn=16)
    if shape not in _NAIVE_RESULT:
        _NAIVE_RESULT[shape] = simulate(cfg)
    return SweepRow(shape=shape, knobs={}, cfg=cfg, result=dataclasses.replace(_NAIVE_RESULT[shape], time_s=time_s))


def test_best_per_shape_picks_the_fastest_and_ignores_errors():
    a, b = (256, 256, 256), (512, 512, 512)
    rows = [_row(a, 3e-3), _row(a, 1e-3), _row(b, 2e-3), _row(a, 0.0, error="nope"), _row(b, 5e-3)]
    best = best_per_shape(rows)
    assert list(best) == [a, b]
    assert best[a].result.time_s == 1e-3 and best[b].result.time_s == 2e-3
    assert best_per_shape([_row(a, 0.0, error="nope")]) == {}


def test_row_to_dict_is_flat_with_the_same_keys_for_ok_and_error_rows(tmp_path):
    res = run_sweep(Scenario(name="r", shapes=((256, 256, 256),),
                             base={"variant": "reg2d", "bm": 64, "bn": 64},
                             grid=(("tm", (4, 7)),)))
    ok, bad = res.ok[0].to_dict(), res.skipped[0].to_dict()
    assert list(ok) == list(bad)
    fields = [f.name for f in dataclasses.fields(GemmConfig)]
    for key in ("family", "label", "full_label", *fields, "flops", "min_hbm_bytes", "time_s", "tflops",
                "effective_hbm_bytes_per_s", "bound", "hbm_bytes", "l2_bytes", "l2_hit_rate",
                "smem_wavefronts", "smem_conflict_wavefronts", "occupancy", "blocks_per_sm", "waves", "error"):
        assert key in ok
    assert all(not isinstance(v, (dict, list, tuple)) for v in ok.values())
    r = res.ok[0].result
    assert ok["time_s"] == r.time_s and ok["tflops"] == r.tflops and ok["error"] is None
    assert math.isclose(ok["hbm_bytes"], r.traffic.hbm_read_bytes + r.traffic.hbm_write_bytes)
    assert bad["time_s"] is None and "tm" in bad["error"] and bad["tm"] == 7 and bad["m"] == 256
    assert ok["flops"] == 2.0 * 256**3 and ok["family"] == "gemm" and ok["full_label"] == ok["label"] + "@256x256x256"
    assert math.isclose(ok["effective_hbm_bytes_per_s"], ok["min_hbm_bytes"] / ok["time_s"])


def test_by_shape_sorts_fastest_first():
    res = run_sweep("naive_vs_tiled")
    rows = res.by_shape()[(4096, 4096, 4096)]
    times = [r.result.time_s for r in rows]
    assert times == sorted(times)
    assert res.best()[(4096, 4096, 4096)] is rows[0]


# ----- other families ----------------------------------------------------------------------------
def test_a_scenario_of_another_family_expands_through_the_registry(tmp_path, monkeypatch):
    register_toy(monkeypatch)
    p = _write(tmp_path, """
name = "copies"
family = "toy"
shapes = [[512], { n = 4096 }, [1000]]
base = { vec = true }
grid = { threads = [128, 256] }
""")
    sc = load_scenario(p)
    assert sc.family == "toy" and sc.shapes == ((512,), (4096,), (1000,)) and sc.knob_names == ("threads", "vec")
    rows = sc.expand()
    assert len(rows) == 6
    ok = [r for r in rows if r.cfg is not None]
    assert all(isinstance(r.cfg, ToyConfig) and r.cfg.vec for r in ok) and len(ok) == 3
    assert [r.full_label for r in ok] == ["copy_t128_vec@512", "copy_t128_vec@4096", "copy_t256_vec@4096"]
    assert ok[0].counts["min_hbm_bytes"] == 8.0 * 512 and ok[0].shape_desc == "n = 512"
    bad = [r for r in rows if r.error]  # 512 is not a multiple of 256*4, 1000 of anything: reported
    assert len(bad) == 3 and all("ToyConfig.n" in r.error and "multiple of" in r.error for r in bad)
    with pytest.raises(ValueError, match="unknown toy knob.*'bm'.*threads, vec"):
        Scenario(name="x", family="toy", shapes=((1024,),), base={"bm": 4})
    with pytest.raises(ValueError, match=r"must be \[n\]"):
        Scenario(name="x", family="toy", shapes=((1024, 2),))


def test_sweep_module_knows_no_family_by_name():
    import tilesim.sweep as sweep_module

    source = open(sweep_module.__file__).read()
    assert "GemmConfig" not in source and "kernels.gemm" not in source


# ----- plots ------------------------------------------------------------------------------------
def _texts_overlap(fig):
    """Pairs of (title, legend) whose drawn boxes overlap, after a draw."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    titles = [t for t in [fig._suptitle] if t is not None and t.get_text()]
    titles += [ax.title for ax in fig.axes if ax.title.get_text()]
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in titles]
    boxes += [("legend", lg.get_window_extent(renderer)) for lg in legends]
    return [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1:] if ba.overlaps(bb)]


def test_plot_functions_return_figures_without_saving(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    from tilesim import plots

    monkeypatch.chdir(tmp_path)
    res = run_sweep(Scenario(name="p", shapes=((256, 256, 256), (512, 256, 256)),
                             base={"variant": "reg2d", "bm": 64, "bn": 64},
                             grid=(("tm", (4, 8, 7)),)))
    assert isinstance(plots.sweep_figure(res.rows), Figure)
    assert isinstance(plots.sweep_figure(res.rows, top=1, title="t"), Figure)
    assert isinstance(plots.traffic_figure(res.rows), Figure)
    r = simulate(res.ok[0].cfg, timeline=True)
    assert isinstance(plots.timeline_figure(r), Figure)
    assert list(tmp_path.iterdir()) == []  # nothing written
    with pytest.raises(ValueError, match="timeline"):
        plots.timeline_figure(simulate(res.ok[0].cfg))
    with pytest.raises(ValueError, match="rows"):
        plots.sweep_figure(res.skipped)
    with pytest.raises(ValueError, match="metric"):
        plots.sweep_figure(res.rows, metric="joules")
    fig = plots.block_progress_figure([("k", [([0.0, 1e-3], [0.0, 1.0]), ([5e-4, 2e-3], [0.0, 1.0])])], title="t")
    assert isinstance(fig, Figure) and len(fig.axes) == 1 and len(fig.axes[0].lines) == 2
    with pytest.raises(ValueError, match="panels"):
        plots.block_progress_figure([])


def test_figures_say_scenario_shape_gpu_and_units_and_titles_do_not_overlap_legends(monkeypatch):
    from tilesim import plots

    register_toy(monkeypatch)
    gemm = run_sweep(Scenario(name="ladder", shapes=((256, 256, 256), (512, 256, 256)),
                              base={"variant": "reg2d", "bm": 64, "bn": 64}, grid=(("tm", (4, 8)),)))
    copy = run_sweep(Scenario(name="copies", family="toy", shapes=((1 << 20,),), grid=(("threads", (128, 256)),)))
    assert throughput_metric(gemm.rows) == "tflops" and throughput_metric(copy.rows) == "bandwidth"
    for res, unit in ((gemm, "TFLOP/s"), (copy, "TB/s")):
        fig = plots.sweep_figure(res.rows, scenario=res.scenario.name, hardware="NVIDIA H200")
        text = fig._suptitle.get_text() + " ".join(ax.get_title() + ax.get_xlabel() for ax in fig.axes)
        for needle in (res.scenario.name, "NVIDIA H200", unit, res.ok[0].shape_desc):
            assert needle in text, needle
        assert _texts_overlap(fig) == []
        fig = plots.traffic_figure(res.rows, scenario=res.scenario.name, hardware="NVIDIA H200")
        text = " ".join(ax.get_title() + ax.get_xlabel() for ax in fig.axes)
        for needle in (res.scenario.name, "NVIDIA H200", "bytes", res.scenario.family):
            assert needle in text, needle
        assert _texts_overlap(fig) == []
    r = simulate(gemm.ok[0].cfg, "h200", timeline=True)
    fig = plots.timeline_figure(r, kernel=gemm.ok[0].full_label)
    assert "@256x256x256" in fig.axes[0].get_title() and "µs" in fig.axes[0].get_xlabel()
    assert _texts_overlap(fig) == []


# ----- parallel, resumable sweeps (issue #11) ------------------------------------------------------
RESUME_SCENARIO = """name = "resume"
family = "gemm"
shapes = [[2048, 2048, 2048], [1024, 3072, 1536]]
base = { variant = "reg2d" }
[grid]
bm = [64, 128]
bn = [64, 128]
bk = [8, 16]
tm = [4, 8]
tn = [4, 8]
"""


def _sweep_cmd(scenario, csv_path, jobs=2):
    import sys  # noqa: PLC0415

    return [sys.executable, "-m", "tilesim.cli", "sweep", str(scenario), "--csv", str(csv_path),
            "--no-plot", "-j", str(jobs)]


def _csv_rows(path):
    import csv as csv_mod  # noqa: PLC0415

    with open(path, newline="") as fh:
        return list(csv_mod.reader(fh))


def test_parallel_sweep_equals_the_serial_one():
    serial = run_sweep("naive_vs_tiled", jobs=1)
    parallel = run_sweep("naive_vs_tiled", jobs=2)
    assert [r.to_dict() for r in serial.rows] == [r.to_dict() for r in parallel.rows]


def test_a_killed_sweep_resumes_with_every_finished_row_kept_and_none_repeated(tmp_path):
    import os  # noqa: PLC0415
    import signal  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import time  # noqa: PLC0415

    sc = _write(tmp_path, RESUME_SCENARIO, "resume.toml")
    whole = tmp_path / "whole.csv"
    subprocess.run(_sweep_cmd(sc, whole), check=True, capture_output=True, timeout=300)
    expected = _csv_rows(whole)
    assert len(expected) == 1 + 64

    part = tmp_path / "part.csv"
    proc = subprocess.Popen(_sweep_cmd(sc, part), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:  # kill once some rows, not all, are on disk
            if part.exists() and part.read_text().count("\n") >= 1 + 12:
                break
            time.sleep(0.005)
        os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its worker processes
    finally:
        proc.wait(timeout=30)
    kept = _csv_rows(part)
    assert 1 + 12 <= len(kept) < len(expected), len(kept)
    finished = {r[2] for r in kept[1:] if len(r) == len(expected[0])}

    res = subprocess.run(_sweep_cmd(sc, part), check=True, capture_output=True, text=True, timeout=300)
    assert f"{len(finished)} row(s) already there are kept" in res.stdout
    assert _csv_rows(part) == expected  # same rows, same order, none repeated


def test_piped_progress_is_a_line_per_percent(tmp_path):
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    res = subprocess.run([sys.executable, "-m", "tilesim.cli", "sweep", "naive_vs_tiled", "--no-plot", "-j", "2"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("naive_vs_tiled: ")]
    assert lines[-1] == "naive_vs_tiled: 100% (7/7)" and len(lines) == 7


def test_dask_local_cluster_runs_the_sweep(tmp_path):
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster  # noqa: PLC0415

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        res = run_sweep("naive_vs_tiled", client=client)
    assert [r.to_dict() for r in res.rows] == [r.to_dict() for r in run_sweep("naive_vs_tiled", jobs=1).rows]


def test_the_dask_option_of_the_cli(tmp_path):
    pytest.importorskip("distributed")
    from click.testing import CliRunner  # noqa: PLC0415

    from tilesim.cli import cli  # noqa: PLC0415

    res = CliRunner().invoke(cli, ["sweep", "naive_vs_tiled", "--dask", "local", "-j", "2", "--no-plot",
                                   "--csv", str(tmp_path / "d.csv")])
    assert res.exit_code == 0, res.output
    assert len(_csv_rows(tmp_path / "d.csv")) == 8


def test_the_scheduler_option_uses_an_existing_cluster(tmp_path):
    pytest.importorskip("distributed")
    from click.testing import CliRunner  # noqa: PLC0415
    from distributed import LocalCluster  # noqa: PLC0415

    from tilesim.cli import cli  # noqa: PLC0415

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        res = CliRunner().invoke(cli, ["sweep", "naive_vs_tiled", "--scheduler", cluster.scheduler_address,
                                       "--no-plot", "--json", str(tmp_path / "d.json")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "d.json").exists()


def test_an_unreachable_scheduler_is_one_line():
    pytest.importorskip("distributed")
    from click.testing import CliRunner  # noqa: PLC0415

    from tilesim.cli import cli  # noqa: PLC0415

    res = CliRunner().invoke(cli, ["sweep", "naive_vs_tiled", "--scheduler", "tcp://127.0.0.1:1", "--no-plot"])
    assert res.exit_code == 2 and res.stderr.startswith("error: cannot reach the Dask scheduler"), res.output
