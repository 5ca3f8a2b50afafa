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
def bench(repeat, hardware, strict, smoke) -> None:
    """The simulator's wall time for one representative configuration per kernel family
    (median of REPEAT runs, lowering included), and at a problem 4x larger in every dimension."""
    from tilesim import bench as bench_lib

    if repeat < 1:
        fail(f"--repeat = {repeat}: must be >= 1")
    try:
        hw = tilesim.resolve_hardware(hardware)
    except ValueError as e:
        fail(str(e))
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
    for note in notes:
        con.print(note, markup=False, soft_wrap=True)
    for what, ok in checks:
        con.print(f"  {'PASS' if ok else 'FAIL'}  {what}", markup=False, soft_wrap=True)
    if strict and not all(ok for _, ok in checks):
        sys.exit(1)
