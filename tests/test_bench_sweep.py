"""`tilesim bench --sweep`: whole sweeps timed beside the single configurations."""

from click.testing import CliRunner

from tilesim.cli import cli


def test_bench_times_a_whole_sweep_beside_the_single_cases():
    res = CliRunner().invoke(cli, ["bench", "--smoke", "--repeat", "1", "--sweep", "naive_vs_tiled", "-j", "1"])
    assert res.exit_code == 0, res.output
    assert "whole sweeps" in res.output and "naive_vs_tiled" in res.output and "s per 1,000" in res.output


def test_bench_sweep_bad_input_is_one_line():
    res = CliRunner().invoke(cli, ["bench", "--smoke", "--repeat", "1", "--sweep", "no_such_scenario"])
    assert res.exit_code != 0
    assert "no_such_scenario" in res.output and res.output.strip().count("\n") == 0
