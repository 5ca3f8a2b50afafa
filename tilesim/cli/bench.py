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
@click.option("-j", "--jobs", type=int, default=None, help="worker processes for --sweep [default: every CPU]")
def bench(repeat, hardware, strict, smoke, sweeps, jobs) -> None:
    """The simulator's wall time for one representative configuration per kernel family
    (median of REPEAT runs, lowering included), and at a problem 4x larger in every dimension;
    with --sweep, whole sweeps beside them."""
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
    if scenarios:
        checks += _bench_sweeps(con, scenarios, hw, jobs)
    for note in notes:
        con.print(note, markup=False, soft_wrap=True)
    for what, ok in checks:
        con.print(f"  {'PASS' if ok else 'FAIL'}  {what}", markup=False, soft_wrap=True)
    if strict and not all(ok for _, ok in checks):
        sys.exit(1)


SWEEP_TARGET_S_PER_1000 = 30.0  # issue #11: a 1,000-configuration sweep in <= 30 s on 2 cores
SWEEP_MIN_CHECKED = 100  # smaller sweeps are timed but not checked: worker start-up dominates them


def _load_sweeps(sweeps) -> list:
    from tilesim.sweep import load_scenario

    try:
        return [load_scenario(name) for name in sweeps]
    except (OSError, ValueError) as e:
        fail(str(e))


def _bench_sweeps(con, scenarios, hw, jobs) -> list[tuple[str, bool]]:
    """Time each scenario's whole sweep (worker processes as ``tilesim sweep`` runs them); one table."""
    import os
    import time

    from tilesim.sweep import default_jobs, run_sweep

    jobs = jobs or default_jobs()
    tab = Table(title=f"whole sweeps, {jobs} worker process(es), {os.cpu_count()} CPUs, on {hw.display_name}")
    for col in ("scenario", "configurations", "wall s", "s per 1,000"):
        tab.add_column(col, justify="left" if col == "scenario" else "right")
    checks = []
    for sc in scenarios:
        t0 = time.perf_counter()
        res = run_sweep(sc, hw, jobs=jobs)
        wall = time.perf_counter() - t0
        n = len(res.rows)
        per_1000 = wall / n * 1000 if n else float("inf")
        tab.add_row(sc.name, str(n), f"{wall:.2f}", f"{per_1000:.1f}")
        if n >= SWEEP_MIN_CHECKED:
            checks.append((f"sweep {sc.name}: {per_1000:.1f} s per 1,000 configurations "
                           f"(<= {SWEEP_TARGET_S_PER_1000:.0f} s)", per_1000 <= SWEEP_TARGET_S_PER_1000))
    con.print(tab)
    return checks
