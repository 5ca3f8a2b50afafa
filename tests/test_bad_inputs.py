"""What a new user hit (issue #11), as stories: every bad input is one line naming what is wrong,
given before any work is done.

Each test is one kind of bad input, through the door a user would take (the command line, the
Python API, a scenario file, a hardware file). Command-line errors are checked to be exactly one
line starting with ``error: `` and no traceback; "before any work" is checked by timing the
command or by showing that nothing was written.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import replace

import pytest
from click.testing import CliRunner

import tilesim
from tilesim import GemmConfig
from tilesim.analytic.checks import check_flops, check_not_faster_than_roofline
from tilesim.cli import cli
from tilesim.hardware import catalog
from tilesim.program import Compute, Launch, Phase, Step, TileProgram
from tilesim.sweep import run_sweep

FAST_S = 3.0  # "before any work": a rejected command returns well within this


@pytest.fixture
def runner():
    return CliRunner()


def one_line_error(res, *needles, code=2) -> str:
    """The command failed with exactly one ``error:`` line that names each needle."""
    assert res.exit_code == code, (res.output, res.exception)
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.output
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def timed(runner, args):
    t = time.perf_counter()
    res = runner.invoke(cli, args)
    return res, time.perf_counter() - t


def scenario_file(tmp_path, text: str, name: str = "s.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# ----- impossible problems ----------------------------------------------------------------------
def test_a_trillion_element_gemm_is_refused_for_device_memory(runner):
    # 1,000,000^3: 12 TB of operands on a 141 GB GPU used to run for an hour of simulated time
    res, dt = timed(runner, ["simulate", "gemm", "--m", "1000000", "--n", "1000000", "--k", "1000000"])
    one_line_error(res, "device memory", "12 TB")
    assert dt < FAST_S


def test_a_grid_beyond_the_launch_limit_is_refused(runner):
    # M = 2^32 with 128-row tiles is a grid.y of 33,554,432 (limit 65,535)
    res, dt = timed(runner, ["simulate", "gemm", "--m", "4294967296", "--n", "128", "--k", "8"])
    one_line_error(res, "grid.y = 33,554,432", "65,535")
    assert dt < FAST_S


def test_the_api_refuses_impossible_problems_too():
    with pytest.raises(ValueError, match="device memory"):
        tilesim.simulate(GemmConfig(1_000_000, 1_000_000, 1_000_000), "h200")
    with pytest.raises(ValueError, match=r"grid\.y"):
        tilesim.lower(GemmConfig(2**32, 128, 8), "h200")


def test_an_impossible_sweep_row_is_skipped_with_the_reason(tmp_path):
    sc = scenario_file(tmp_path, 'family = "gemm"\nshapes = [[4294967296, 128, 8], [256, 256, 256]]\n')
    res = run_sweep(sc, jobs=1)
    bad = [r for r in res.rows if not r.ok]
    assert len(bad) == 1 and "grid.y" in bad[0].error
    assert len(res.ok) == 1


# ----- a hand-written program whose flops disagree with its counts ------------------------------------
def _program(flops: float, ffma_per_step: float = 512.0) -> TileProgram:
    step = Step(compute=(Compute("fma", ffma_per_step),))
    return TileProgram(name="mine", launch=Launch((64, 64, 1), 256, 64, 0),
                       phases=(Phase("main", 128, step),), flops=flops)


def test_a_program_declaring_more_flops_than_it_computes_is_rejected():
    # the README's old example: 137 G declared, 34 G in its FMA counts, 102 TFLOP/s on a 62.9 TFLOP/s GPU
    counted = 64 * 64 * 128 * 512 * 64.0
    prog = _program(flops=4 * counted)
    with pytest.raises(ValueError, match="declares .* FLOP but its compute counts do at most"):
        tilesim.simulate(prog, "h200")
    assert tilesim.simulate(_program(flops=counted), "h200").tflops <= 62.9 + 1e-6


def test_a_program_that_declares_no_flops_is_allowed():
    check_flops(_program(flops=0.0))
    assert tilesim.simulate(_program(flops=0.0), "h200").time_s > 0


def test_the_engine_never_predicts_faster_than_the_roofline_of_what_it_executes():
    for name in ("naive_vs_tiled", "double_buffering", "reduction_ladder"):
        for row in run_sweep(name, jobs=1).ok:
            check_not_faster_than_roofline(row.result)
    r = tilesim.simulate(GemmConfig(512, 512, 512), "h200")
    with pytest.raises(ValueError, match="faster than the roofline"):
        check_not_faster_than_roofline(replace(r, time_s=r.roofline_s / 2))


# ----- every GEMM variant with the default tiles ----------------------------------------------------
@pytest.mark.parametrize("variant", ["naive_uncoalesced", "naive", "smem", "reg1d", "reg2d", "warp"])
def test_every_gemm_variant_works_with_the_default_tiles(runner, variant):
    res = runner.invoke(cli, ["simulate", "gemm", "--m", "512", "--n", "512", "--k", "512",
                              "--variant", variant])
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith(variant)


def test_a_variant_whose_given_tile_cannot_work_says_which_knobs_to_set(runner):
    res = runner.invoke(cli, ["simulate", "gemm", "--m", "512", "--n", "512", "--k", "512",
                              "--variant", "naive", "--bm", "128"])
    one_line_error(res, "max_threads_per_block", "set the tile knobs", "--bn")


# ----- output paths are checked first ----------------------------------------------------------------
def test_a_sweep_csv_under_a_file_fails_before_the_sweep(runner, tmp_path):
    (tmp_path / "afile").write_text("x")
    res, dt = timed(runner, ["sweep", "tile_sizes", "--csv", str(tmp_path / "afile" / "rows.csv")])
    one_line_error(res, "--csv", "is a file, not a folder")
    assert dt < FAST_S


def test_a_plot_path_that_is_a_folder_fails_before_the_sweep(runner, tmp_path):
    res, dt = timed(runner, ["sweep", "tile_sizes", "--plot", str(tmp_path)])
    one_line_error(res, "--plot", "is a folder")
    assert dt < FAST_S


def test_a_timeline_path_that_cannot_be_written_fails_before_the_simulation(runner, tmp_path):
    (tmp_path / "afile").write_text("x")
    res = runner.invoke(cli, ["simulate", "gemm", "--m", "256", "--n", "256", "--k", "256",
                              "--timeline", str(tmp_path / "afile" / "t.png")])
    one_line_error(res, "--timeline")


def test_a_report_csv_into_a_folder_fails_before_the_report(runner, tmp_path):
    res, dt = timed(runner, ["validate", "report", "--csv", str(tmp_path)])
    one_line_error(res, "--csv", "is a folder")
    assert dt < FAST_S


def test_json_dash_writes_the_rows_to_standard_output(runner):
    res = runner.invoke(cli, ["sweep", "naive_vs_tiled", "--json", "-", "--no-plot", "-j", "1"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)  # the tables went to standard error
    assert doc["scenario"] == "naive_vs_tiled" and len(doc["rows"]) == 7


# ----- sweeps ------------------------------------------------------------------------------------
def test_an_all_invalid_sweep_exits_non_zero(runner, tmp_path):
    sc = scenario_file(tmp_path, 'family = "gemm"\nshapes = [[256, 256, 256]]\n'
                                 'base = { variant = "naive", bm = 64, bn = 64 }\n')
    res = runner.invoke(cli, ["sweep", sc, "--no-plot"])
    one_line_error(res, "no configuration could be simulated", code=1)
    assert "max_threads_per_block" in res.stdout  # the reason, in the skipped list


def test_a_folder_of_scenarios_is_swept_scenario_by_scenario(runner, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    for name in ("a", "b"):
        scenario_file(folder, f'name = "{name}"\nfamily = "gemm"\nshapes = [[256, 256, 256]]\n', f"{name}.toml")
    (folder / "notes.toml").write_text('title = "not a scenario"\n')
    res = runner.invoke(cli, ["sweep", str(folder), "--csv", str(tmp_path / "csv"), "--no-plot", "-j", "1"])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (tmp_path / "csv").iterdir()) == ["a.csv", "b.csv"]


def test_the_built_in_scenarios_folder_is_a_valid_target(runner):
    from tilesim.sweep import scenarios_dir

    assert scenarios_dir().is_dir() and len(list(scenarios_dir().glob("*.toml"))) >= 7


def test_a_folder_without_scenarios_is_one_line(runner, tmp_path):
    one_line_error(runner.invoke(cli, ["sweep", str(tmp_path)]), "no scenario file")


def test_an_unknown_scenario_lists_the_known_ones(runner):
    one_line_error(runner.invoke(cli, ["sweep", "tile_sizez"]), "unknown scenario", "tile_sizes")


def test_a_scenario_with_an_unknown_knob_names_it(runner, tmp_path):
    sc = scenario_file(tmp_path, 'family = "gemm"\nshapes = [[256, 256, 256]]\nbase = { bmm = 64 }\n')
    one_line_error(runner.invoke(cli, ["sweep", sc]), "unknown gemm knob(s) 'bmm'")


def test_a_scenario_that_is_not_toml_is_one_line(runner, tmp_path):
    sc = scenario_file(tmp_path, 'family = "gemm"\nshapes = [[256, 256, 256]\n')
    one_line_error(runner.invoke(cli, ["sweep", sc]), "invalid TOML")


def test_a_scenario_shape_with_the_wrong_fields_is_one_line(runner, tmp_path):
    sc = scenario_file(tmp_path, 'family = "gemm"\nshapes = [[256, 256]]\n')
    one_line_error(runner.invoke(cli, ["sweep", sc]), "must be [m, n, k]")


def test_a_scenario_of_an_unknown_family_lists_the_families(runner, tmp_path):
    sc = scenario_file(tmp_path, 'family = "gem"\nshapes = [[256, 256, 256]]\n')
    one_line_error(runner.invoke(cli, ["sweep", sc]), "unknown kernel family 'gem'", "gemm")


@pytest.mark.parametrize("args, needle", [
    (["-j", "0"], "--jobs = 0"),
    (["--dask", "remote"], "--dask remote"),
    (["--fresh"], "--fresh: only with --csv"),
    (["--top", "-1"], "--top = -1"),
    (["--hardware", "h999"], "unknown hardware 'h999'"),
])
def test_bad_sweep_options_are_one_line(runner, args, needle):
    one_line_error(runner.invoke(cli, ["sweep", "naive_vs_tiled", *args]), needle)


def test_resuming_into_a_csv_of_another_family_is_refused(runner, tmp_path):
    csv = tmp_path / "rows.csv"
    csv.write_text("family,label,n,threads\ntoy,x,1,64\n")
    one_line_error(runner.invoke(cli, ["sweep", "naive_vs_tiled", "--csv", str(csv), "--no-plot"]),
                   "not those of this sweep's family", "--fresh")


def test_sweep_tables_keep_whole_names_on_an_80_column_terminal(monkeypatch):
    from rich.console import Console

    from tilesim.cli.sweep import _print_sweep

    res = run_sweep("naive_vs_tiled", jobs=1)
    con = Console(width=80, record=True, force_terminal=False)
    _print_sweep(con, res, 0)
    text = con.export_text()
    assert "…" not in text
    cells = "".join(line.split("│")[2].strip() for line in text.splitlines() if line.count("│") > 3)
    for row in res.ok:
        assert row.label in cells  # folded over lines, never cut


# ----- the simulate command ----------------------------------------------------------------------
def test_an_unknown_family_is_one_line(runner):
    one_line_error(runner.invoke(cli, ["simulate", "gemmm", "--m", "1"]), "unknown kernel family")


def test_a_missing_problem_size_names_the_option(runner):
    one_line_error(runner.invoke(cli, ["simulate", "gemm", "--m", "256"]), "missing --n, --k")


def test_a_tile_knob_that_breaks_a_rule_names_the_rule(runner):
    one_line_error(runner.invoke(cli, ["simulate", "gemm", "--m", "256", "--n", "256", "--k", "256",
                                       "--tm", "7"]), "GemmConfig.tm = 7")


# ----- the API ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("knob, value", [("beta", "0"), ("alpha", "x"), ("vectorize", "yes"),
                                         ("bm", 64.0), ("stages", "2")])
def test_the_api_checks_types(knob, value):
    with pytest.raises(ValueError, match=f"GemmConfig.{knob} = "):
        GemmConfig(256, 256, 256, **{knob: value})


def test_the_api_refuses_unknown_hardware_with_the_known_names():
    with pytest.raises(ValueError, match="unknown hardware 'h201'; known: .*h200"):
        tilesim.simulate(GemmConfig(256, 256, 256), "h201")


def test_run_sweep_refuses_a_bad_job_count():
    with pytest.raises(ValueError, match="jobs = 0"):
        run_sweep("naive_vs_tiled", jobs=0)


# ----- hardware files --------------------------------------------------------------------------------
@pytest.fixture
def catalog_with_a_broken_file(tmp_path, monkeypatch):
    for p in catalog.DATA_DIR.glob("*.toml"):
        shutil.copy(p, tmp_path / p.name)
    (tmp_path / "broken.toml").write_text("[meta]\nvendor = \"nvidia\"\nsm_count = 132\n")
    (tmp_path / "garbled.toml").write_text("[meta\n")
    monkeypatch.setattr(catalog, "DATA_DIR", tmp_path)
    return tmp_path


def test_a_malformed_hardware_file_is_one_line_in_hardware_list(runner, catalog_with_a_broken_file):
    res = runner.invoke(cli, ["hardware", "list"])
    assert res.exit_code == 1
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 2 and "broken" in errors[0] and "garbled" in errors[1]
    assert "Traceback" not in res.output
    assert "h200" in res.stdout  # the good files are still listed


def test_a_malformed_hardware_file_names_itself_when_loaded(catalog_with_a_broken_file):
    with pytest.raises(ValueError, match="broken.toml"):
        catalog.load("broken")
