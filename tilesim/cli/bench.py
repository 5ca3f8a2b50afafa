"""``tilesim bench``: the simulator's own wall time, one representative configuration per family."""

from __future__ import annotations

import sys

import click
from rich.table import Table

import tilesim
from tilesim.cli.base import (
    cli,
    console,
    fail,
)
from tilesim.kernels import registry

# ----------------------------------------------------------------------------------------------
# bench


def _suite_first_config(family: str):
    """The first configuration of the family's validation suite (the harness is imported here only)."""
    from validation.harness.suite import load_suite

    configs = load_suite(family)
    return configs[0] if configs else None


@cli.command()
@click.option("--repeat", type=int, default=5, show_default=True, help="timed runs per case")
@click.option("--hardware", default="h200", show_default=True)
@click.option("--strict", is_flag=True, help="exit 1 when a target is missed")
@click.option("--smoke", is_flag=True, hidden=True, help="tiny shapes, for tests of this command")
@click.option("--sweep", "sweeps", multiple=True, metavar="SCENARIO",
              help="also time whole sweeps (repeatable; e.g. tile_sizes): wall time, configurations, and "
                   "seconds per 1,000 configurations against the 30 s target")
@click.option("-j", "--jobs", type=int, default=None,
              help="worker processes for the sweeps [default: every CPU]")
@click.option("--scenario", "scenario_names", multiple=True, metavar="SCENARIO",
              help="time every configuration of these scenarios once each (repeatable) "
                   "[default: every built-in scenario]")
@click.option("--suite", "suites", multiple=True, metavar="FAMILY",
              help="time every configuration of FAMILY's validation suite once each (repeatable; e.g. "
                   "tc_gemm, whose median has issue #9's 50 ms target)")
@click.option("--no-scenarios", is_flag=True, help="skip timing the built-in scenarios' configurations")
@click.option("--no-sweep-1000", "no_sweep_1000", is_flag=True,
              help="skip the benchmark sweep of 1,188 configurations")
def bench(repeat, hardware, strict, smoke, sweeps, jobs, scenario_names, suites, no_scenarios, no_sweep_1000) -> None:
    """The simulator's wall time: one representative configuration per kernel family (median of
    REPEAT runs, lowering included) and the same at a problem 4x larger in every dimension; every
    configuration of the built-in scenarios once each (median, 90th percentile, worst, against the
    targets: 0.1 s each, a 20 ms median); every configuration of any --suite FAMILY's validation suite
    once each; and whole sweeps: a benchmark sweep of 1,188 GEMM configurations in worker processes
    (seconds per 1,000 against 30 s) and any --sweep SCENARIO."""
    from tilesim import bench as bench_lib

    if repeat < 1:
        fail(f"--repeat = {repeat}: must be >= 1")
    try:
        hw = tilesim.resolve_hardware(hardware)
    except ValueError as e:
        fail(str(e))
    if jobs is not None and jobs < 1:
        fail(f"--jobs = {jobs}: must be >= 1")
    scenarios = _load_sweeps(sweeps)  # checked before any work
    suite_configs = _load_suites(suites)
    timed = [] if no_scenarios else _load_sweeps(
        scenario_names or (() if smoke else _builtin_scenarios()))
    if not (smoke or no_sweep_1000):
        scenarios.append(bench_lib.bench_sweep_scenario())
    con = console()
    cases = bench_lib.bench_cases(smoke, suite=_suite_first_config)
    tab = Table(title=f"simulator wall time, {repeat} run(s) per case, on {hw.display_name}")
    for col in ("family", "case", "median s", "min s", "predicted ms"):
        tab.add_column(col, justify="left" if col in ("family", "case") else "right")
    checks, notes = [], []
    target_s, target_ratio = bench_lib.TARGETS["median_s"], bench_lib.TARGETS["scaling_ratio"]
    for case in cases:
        if case.config is None:
            notes.append(f"  {case.family}: not timed: {case.reason}")
            continue
        fam = registry.get(case.family)
        try:
            base = bench_lib.time_config(case.config, hw, repeat)
            big = bench_lib.time_config(case.scaled, hw, repeat) if case.scaled is not None else None
        except Exception as e:  # noqa: BLE001  (one family's failure must not hide the others' timings)
            notes.append(f"  {case.family}: simulation failed: {type(e).__name__}: {e}")
            continue
        name = fam.full_label(case.config)
        tab.add_row(case.family, name, f"{base.median_s:.4f}", f"{base.min_s:.4f}", f"{base.predicted_s * 1e3:.3f}")
        checks.append((f"{name} median <= {target_s} s", base.median_s <= target_s))
        if big is None:
            notes.append(f"  {case.family}: no scaling case: {case.reason}")
            continue
        big_name = fam.full_label(case.scaled)
        tab.add_row(case.family, big_name, f"{big.median_s:.4f}", f"{big.min_s:.4f}", f"{big.predicted_s * 1e3:.3f}")
        ratio = big.median_s / base.median_s if base.median_s > 0 else float("inf")
        checks.append((f"{big_name} = {ratio:.2f}x {name} (<= {target_ratio}x)", ratio <= target_ratio))
    con.print(tab)
    if suite_configs:
        checks += _bench_suites(con, suite_configs, hw)
    if timed:
        checks += _bench_scenario_configs(con, timed, hw)
    if scenarios:
        checks += _bench_sweeps(con, scenarios, hw, jobs)
    for note in notes:
        con.print(note, markup=False, soft_wrap=True)
    for what, ok in checks:
        con.print(f"  {'PASS' if ok else 'FAIL'}  {what}", markup=False, soft_wrap=True)
    if strict and not all(ok for _, ok in checks):
        sys.exit(1)


SWEEP_MIN_CHECKED = 100  # smaller sweeps are timed but not checked: worker start-up dominates them


def _builtin_scenarios() -> list[str]:
    from tilesim.sweep import available_scenarios

    return available_scenarios()


def _bench_scenario_configs(con, scenarios, hw) -> list[tuple[str, bool]]:
    """Time every configuration of each scenario once in this process; one table, one row per
    scenario and one for all, and the checks against the targets (bench.SCENARIO_TARGETS)."""
    from tilesim import bench as bench_lib

    walls = bench_lib.time_scenario_configs(scenarios, hw)
    if not walls:
        con.print("  no valid configuration in the scenarios timed", markup=False)
        return []
    target_s, median_target_s = bench_lib.SCENARIO_TARGETS["worst_s"], bench_lib.SCENARIO_TARGETS["median_s"]
    tab = Table(title=f"every configuration of the scenarios, simulated once each (lowering included), "
                      f"on {hw.display_name}")
    for col in ("scenario", "configurations", "median ms", "90th pct ms", "worst s", f"over {target_s} s",
                "slowest"):
        tab.add_column(col, justify="left" if col in ("scenario", "slowest") else "right", overflow="fold")
    groups = [(sc.name, [w for w in walls if w.scenario == sc.name]) for sc in scenarios]
    if len(groups) > 1:
        groups.append(("all", walls))
    for name, ws in groups:
        if not ws:
            continue
        st = bench_lib.summarize_walls(ws)
        tab.add_row(name, str(st.count), f"{st.median_s * 1e3:.1f}", f"{st.p90_s * 1e3:.1f}",
                    f"{st.worst_s:.3f}", str(len(st.over)), st.worst.label)
    con.print(tab)
    st = bench_lib.summarize_walls(walls)
    slowest = ", ".join(f"{w.scenario} {w.label} {w.wall_s:.3f} s" for w in st.over[:5])
    more = f" and {len(st.over) - 5} more" if len(st.over) > 5 else ""
    return [
        (f"every one of {st.count} scenario configurations <= {target_s} s "
         f"(worst {st.worst_s:.3f} s, {st.worst.scenario} {st.worst.label}"
         + (f"; over: {slowest}{more})" if st.over else ")"), not st.over),
        (f"median per scenario configuration {st.median_s * 1e3:.1f} ms <= {median_target_s * 1e3:.0f} ms",
         st.median_s <= median_target_s),
    ]


def _load_suites(families) -> list[tuple[str, list]]:
    """(family, every configuration of its validation suite) for each of ``families``; one line and exit 2
    for a family without one."""
    from validation.harness.suite import load_suite

    out = []
    for family in families:
        try:
            registry.get(family)
            configs = load_suite(family)
        except (OSError, ValueError) as e:
            fail(f"--suite {family}: {e}")
        if not configs:
            fail(f"--suite {family}: its validation suite has no configuration")
        out.append((family, configs))
    return out


def _bench_suites(con, suites, hw) -> list[tuple[str, bool]]:
    """Time every configuration of each family's suite once; one table row per family and the checks
    against the families' targets (bench.SUITE_MEDIAN_TARGETS_S)."""
    from tilesim import bench as bench_lib

    tab = Table(title=f"every configuration of the validation suites, simulated once each (lowering included), "
                      f"on {hw.display_name}")
    for col in ("family", "configurations", "median ms", "90th pct ms", "worst s", "slowest"):
        tab.add_column(col, justify="left" if col in ("family", "slowest") else "right", overflow="fold")
    checks = []
    for family, configs in suites:
        st = bench_lib.summarize_walls(bench_lib.time_configs(family, configs, hw))
        tab.add_row(family, str(st.count), f"{st.median_s * 1e3:.1f}", f"{st.p90_s * 1e3:.1f}", f"{st.worst_s:.3f}",
                    st.worst.label)
        target = bench_lib.SUITE_MEDIAN_TARGETS_S.get(family)
        if target is not None:
            checks.append((f"median per {family} suite configuration {st.median_s * 1e3:.1f} ms <= "
                           f"{target * 1e3:.0f} ms", st.median_s <= target))
    con.print(tab)
    return checks


def _load_sweeps(sweeps) -> list:
    from tilesim.sweep import load_scenario

    try:
        return [load_scenario(name) for name in sweeps]  # a list: the benchmark sweep may join it
    except (OSError, ValueError) as e:
        fail(str(e))


def _bench_sweeps(con, scenarios, hw, jobs) -> list[tuple[str, bool]]:
    """Time each scenario's whole sweep (worker processes as ``tilesim sweep`` runs them); one table."""
    import os
    import time

    from tilesim import bench as bench_lib
    from tilesim.sweep import default_jobs, run_sweep

    jobs = jobs or default_jobs()
    tab = Table(title=f"whole sweeps, {jobs} worker process(es), {os.cpu_count()} CPUs, on {hw.display_name}")
    for col in ("scenario", "configurations", "rejected", "wall s", "s per 1,000"):
        tab.add_column(col, justify="left" if col == "scenario" else "right")
    checks = []
    for sc in scenarios:
        t0 = time.perf_counter()
        res = run_sweep(sc, hw, jobs=jobs)
        wall = time.perf_counter() - t0
        n = sum(1 for r in res.rows if r.cfg is not None)  # simulated; rejected ones cost no simulation
        per_1000 = wall / n * 1000 if n else float("inf")
        tab.add_row(sc.name, str(n), str(len(res.rows) - n), f"{wall:.2f}", f"{per_1000:.1f}")
        if n >= SWEEP_MIN_CHECKED:
            target = bench_lib.SWEEP_TARGET_S_PER_1000
            checks.append((f"sweep {sc.name}: {n} configurations in {wall:.1f} s, {per_1000:.1f} s per 1,000 "
                           f"(<= {target:.0f} s) with {jobs} worker(s)", per_1000 <= target))
    con.print(tab)
    return checks
