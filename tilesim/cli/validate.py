"""``tilesim validate ...``: thin forwards to the validation harness, imported only when run."""

from __future__ import annotations

import sys

import click

from tilesim.cli.base import (
    cli,
    fail,
)

# ----------------------------------------------------------------------------------------------
# validate (forwards to the validation package, which is imported only here)


def _validation_fn(module: str, name: str):
    import importlib

    try:
        mod = importlib.import_module(module)
        return getattr(mod, name)
    except (ImportError, AttributeError) as e:
        fail(f"cannot use {module}.{name}: {e} (is the validation package installed?)")


def _exit_with(rc) -> None:
    if isinstance(rc, int) and rc != 0:
        sys.exit(rc)


@cli.group()
def validate() -> None:
    """Measure on a real GPU and compare with predictions (the validation package)."""


@validate.command("report")
@click.option("--results", "results_dir", type=click.Path(file_okay=False), default=None,
              help="folder of measured results (default: the validation package's)")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), default=None,
              help="write predicted vs measured rows as CSV")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="write the predicted-vs-measured figure to this PNG")
@click.option("--hardware", default="h200", show_default=True)
@click.option("--exact", is_flag=True, help="simulate every k-step (no steady-state holds; minutes)")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="simulate in this many processes [default: 1, or every CPU with --exact]")
def validate_report(results_dir, csv_path, plot_path, hardware, exact, jobs) -> None:
    """Compare measured times with predictions: error statistics, table, plot."""
    import os

    fn = _validation_fn("validation.report", "main_report")
    workers = jobs if jobs is not None else (os.cpu_count() or 1) if exact else 1
    try:
        rc = fn(results_dir, csv_path, plot_path, hardware, steady_state=not exact, workers=workers)
    except ValueError as e:
        fail(str(e))
    _exit_with(rc)


@validate.command("run")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None, help="output folder")
@click.option("--limit", type=int, default=None, help="measure at most N configurations")
@click.option("--only", default=None, help="only configurations whose label contains TEXT")
def validate_run(out_dir, limit, only) -> None:
    """Measure the validation suite on this machine's GPU (needs CuPy and an NVIDIA GPU)."""
    fn = _validation_fn("validation.suite", "main")
    argv: list[str] = []
    if out_dir is not None:
        argv += ["--out", str(out_dir)]
    if limit is not None:
        argv += ["--limit", str(limit)]
    if only is not None:
        argv += ["--only", only]
    try:
        rc = fn(argv)
    except ValueError as e:
        fail(str(e))
    _exit_with(rc)


@validate.command("calibrate")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None, help="output folder")
def validate_calibrate(out_dir) -> None:
    """Run the microbenchmarks and write a calibrated hardware profile (needs a GPU)."""
    fn = _validation_fn("validation.calibrate", "main")
    argv = ["--out", str(out_dir)] if out_dir is not None else []
    try:
        rc = fn(argv)
    except ValueError as e:
        fail(str(e))
    _exit_with(rc)


@validate.command("engine-check")
@click.option("--results", "results_dir", type=click.Path(file_okay=False), default=None,
              help="folder of recorded microbenchmarks (default: the validation package's)")
def validate_engine_check(results_dir) -> None:
    """The engine against its own recorded microbenchmarks, written as tile programs (CPU)."""
    fn = _validation_fn("validation.engine_check", "main")
    _exit_with(fn(["--results", str(results_dir)] if results_dir is not None else []))


@validate.command("replay")
@click.option("--results", "results_dir", type=click.Path(file_okay=False), default=None,
              help="folder with schedule_trace.npz (default: the validation package's)")
@click.option("--capacity-mb", type=float, default=None, help="L2 capacity (default: the profile's l2_bytes)")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="also draw one SM's blocks for three traced kernels to this PNG")
def validate_replay(results_dir, capacity_mb, plot_path) -> None:
    """Replay recorded per-block schedules through an LRU L2: the DRAM reads they imply (CPU)."""
    fn = _validation_fn("validation.schedule_replay", "main")
    argv: list[str] = []
    if results_dir is not None:
        argv += ["--results", str(results_dir)]
    if capacity_mb is not None:
        argv += ["--capacity-mb", str(capacity_mb)]
    if plot_path is not None:
        argv += ["--plot", str(plot_path)]
    _exit_with(fn(argv))
