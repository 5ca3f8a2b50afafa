"""``tilesim validate run|report|calibrate|ncu``: thin forwards to the validation harness.

The validation package is imported only when one of these commands runs (never by ``import
tilesim``). ``--family`` may be given several times; without it, ``run`` and ``ncu`` take every
family with a runner (``validation/families/<name>/runner.py``) and ``report`` every family with
recorded results. The research studies (engine check, schedule replay, ...) are not commands:
they run as ``python -m validation.studies.<study>``.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from tilesim.cli.base import check_output, cli, fail


def _validation_fn(module: str, name: str):
    """``module.name`` from the validation package, or one error line."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        fail(f"cannot use {module}.{name}: {e} (is the validation package installed?)")


def _exit_with(rc) -> None:
    if isinstance(rc, int) and rc != 0:
        sys.exit(rc)


def _families_or_all(families: tuple[str, ...]) -> list[str]:
    if families:
        return list(families)
    found = _validation_fn("validation.harness.runners", "available")()
    if not found:
        fail("no family has a validation runner (validation/families/<name>/runner.py)")
    return found


def _selection_argv(families, results, gpu, out, suite, only, shape, limit, fresh) -> list[str]:
    """The harness's selection arguments (validation.harness.suite.add_selection_args)."""
    argv = _families_or_all(families)
    if (out or suite) and len(argv) != 1:
        fail(f"--out and --suite need exactly one --family (selected: {', '.join(argv)})")
    for flag, value in (("--results", results), ("--gpu", gpu), ("--out", out), ("--suite", suite),
                        ("--only", only), ("--shape", shape), ("--limit", limit)):
        if value is not None:
            argv += [flag, str(value)]
    if fresh:
        argv.append("--fresh")
    return argv


def _forward(module: str, argv: list[str]) -> None:
    fn = _validation_fn(module, "main")
    try:
        rc = fn(argv)
    except (ValueError, OSError) as e:  # bad input or a file that cannot be read: one line, no traceback
        fail(str(e))
    _exit_with(rc)


def _selection_options(f):
    """The options ``run`` and ``ncu`` share (which configurations, where the results go)."""
    options = [
        click.option("--family", "families", multiple=True,
                     help="kernel family (repeat for several) [default: every family with a runner]"),
        click.option("--results", type=click.Path(file_okay=False), default=None,
                     help="results root [default: validation/results/<gpu>]"),
        click.option("--gpu", default=None, help="name of the results directory [default: from the device]"),
        click.option("--out", type=click.Path(file_okay=False), default=None,
                     help="output folder (one family only) [default: <results>/<family>]"),
        click.option("--suite", type=click.Path(exists=True, dir_okay=False), default=None,
                     help="suite TOML (one family only) [default: validation/families/<family>/suite.toml]"),
        click.option("--only", default=None, help="only configurations whose label contains TEXT"),
        click.option("--shape", default=None, help="only one problem size, e.g. 4096x4096x4096"),
        click.option("--limit", type=click.IntRange(min=1), default=None, help="at most N configurations per family"),
        click.option("--fresh", is_flag=True, help="do not resume (the old CSV is kept as .bak)"),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@cli.group()
def validate() -> None:
    """Measure on a real GPU and compare with predictions (the validation harness)."""


@validate.command("run")
@_selection_options
@click.option("--reps", type=click.IntRange(min=1), default=None, help="timed repetitions [default: the family's]")
@click.option("--no-flush", is_flag=True, help="do not flush L2 between repetitions")
@click.option("--no-reference", is_flag=True, help="skip the runner's reference rows (e.g. cuBLAS)")
def validate_run(families, results, gpu, out, suite, only, shape, limit, fresh, reps, no_flush,
                 no_reference) -> None:
    """Measure the families' validation suites on this machine's GPU (needs CuPy); resumable."""
    argv = _selection_argv(families, results, gpu, out, suite, only, shape, limit, fresh)
    if reps is not None:
        argv += ["--reps", str(reps)]
    argv += ["--no-flush"] * no_flush + ["--no-reference"] * no_reference
    _forward("validation.harness.suite", argv)


@validate.command("ncu")
@_selection_options
@click.option("--extra", is_flag=True, help="also the stall and issue diagnostics (slower)")
def validate_ncu(families, results, gpu, out, suite, only, shape, limit, fresh, extra) -> None:
    """Nsight Compute counters of the suites' configurations (needs CuPy, a GPU and ncu)."""
    argv = _selection_argv(families, results, gpu, out, suite, only, shape, limit, fresh)
    _forward("validation.harness.ncu", argv + ["--extra"] * extra)


@validate.command("report")
@click.option("--family", "families", multiple=True,
              help="kernel family (repeat for several) [default: every family with recorded results]")
@click.option("--results", type=click.Path(file_okay=False), default=None,
              help="results root, validation/results/<gpu> [default: the recorded ones]")
@click.option("--csv", "csv_path", default=None,
              help="write predicted vs measured rows as CSV")
@click.option("--plot", "plot_path", default=None,
              help="write the predicted-vs-measured figure to this PNG")
@click.option("--rank-plot", "rank_plot_path", default=None,
              help="write the ranking figure (measured vs predicted rank, per family and size) to this PNG")
@click.option("--hardware", default=None, help="catalog GPU [default: the results directory's name]")
@click.option("--mode", "modes", type=click.Choice(["informed", "blind"]), multiple=True,
              help="informed (the compiler's registers) and/or blind [default: both]")
@click.option("--summary", is_flag=True, help="only the summary tables")
@click.option("--exact", is_flag=True, help="simulate every step (no steady-state holds; minutes)")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="simulate in this many processes [default: 1, or every CPU with --exact]")
def validate_report(families, results, csv_path, plot_path, rank_plot_path, hardware, modes, summary, exact,
                    jobs) -> None:
    """Compare recorded measurements with predictions: error statistics per family, table, plots (CPU)."""
    check_output(csv_path, "--csv")
    check_output(plot_path, "--plot")
    check_output(rank_plot_path, "--rank-plot")
    fn = _validation_fn("validation.harness.report", "main_report")
    workers = jobs if jobs is not None else (os.cpu_count() or 1) if exact else 1
    kwargs = {"csv_path": csv_path, "plot_path": plot_path, "rank_plot_path": rank_plot_path, "workers": workers,
              "steady_state": not exact, "per_config": not summary}
    if modes:
        kwargs["modes"] = tuple(modes)
    try:
        rc = fn(list(families) or None, results, hardware, **kwargs)
    except (ValueError, OSError) as e:
        fail(str(e))
    _exit_with(rc)


@validate.command("calibrate")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="folder for calibration.json [default: validation/results/<gpu>/calibration]")
@click.option("--profile", type=click.Path(dir_okay=False), default=None,
              help="calibrated profile to write [default: tilesim/hardware/calibrated/<gpu>.toml]")
@click.option("--no-profile", is_flag=True, help="only write calibration.json")
@click.option("--runs", type=click.IntRange(min=1), default=None, help="runs per benchmark")
@click.option("--from-json", type=click.Path(exists=True, dir_okay=False), default=None,
              help="rebuild the profile from a recorded calibration.json (no GPU needed)")
def validate_calibrate(out, profile, no_profile, runs, from_json) -> None:
    """Run the microbenchmarks and write a calibrated hardware profile (needs a GPU, except --from-json)."""
    argv: list[str] = []
    for flag, value in (("--out", out), ("--profile", profile), ("--runs", runs), ("--from-json", from_json)):
        if value is not None:
            argv += [flag, str(value)]
    argv += ["--no-profile"] * no_profile
    _forward("validation.calibration.calibrate", argv)
