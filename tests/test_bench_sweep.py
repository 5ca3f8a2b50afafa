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


def test_bench_times_every_configuration_of_the_scenarios_against_the_targets():
    res = CliRunner().invoke(cli, ["bench", "--smoke", "--repeat", "1", "--scenario", "naive_vs_tiled"])
    assert res.exit_code == 0, res.output
    assert "every configuration of the scenarios" in res.output
    assert "every one of 7 scenario configurations <= 0.1 s" in res.output
    assert "median per scenario configuration" in res.output and "<= 20 ms" in res.output


def test_scenario_wall_summary_flags_the_slow_ones_and_the_median():
    from tilesim.bench import ConfigWall, percentile, summarize_walls

    walls = [ConfigWall("s", f"c{i}", w) for i, w in enumerate((0.010, 0.030, 0.015, 0.25, 0.012))]
    st = summarize_walls(walls)
    assert (st.count, st.median_s, st.worst_s, st.worst.label) == (5, 0.015, 0.25, "c3")
    assert [w.label for w in st.over] == ["c3"] and not st.meets_targets
    assert summarize_walls(walls[:3] + walls[4:]).meets_targets
    assert not summarize_walls([ConfigWall("s", "a", 0.03)]).meets_targets  # median above 20 ms
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5


def test_the_benchmark_sweep_has_at_least_1000_valid_configurations():
    from tilesim.bench import bench_sweep_scenario

    rows = bench_sweep_scenario().expand()
    assert sum(r.cfg is not None for r in rows) >= 1000


def test_bench_times_every_configuration_of_a_validation_suite(monkeypatch):
    """--suite FAMILY: each configuration of the family's suite once; tc_gemm's median against issue #9's 50 ms."""
    import validation.harness.suite as suite

    real = suite.load_suite
    monkeypatch.setattr(suite, "load_suite", lambda family: real(family)[:3])  # three, to keep the test short
    res = CliRunner().invoke(cli, ["bench", "--smoke", "--repeat", "1", "--no-scenarios", "--suite", "tc_gemm"])
    assert res.exit_code == 0, res.output
    assert "every configuration of the validation suites" in res.output
    assert "median per tc_gemm suite configuration" in res.output and "<= 50 ms" in res.output


def test_bench_suite_bad_family_is_one_line():
    res = CliRunner().invoke(cli, ["bench", "--smoke", "--repeat", "1", "--suite", "no_such_family"])
    assert res.exit_code != 0
    assert "no_such_family" in res.output and res.output.strip().count("\n") == 0
