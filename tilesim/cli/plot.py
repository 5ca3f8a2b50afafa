"""``tilesim plot heatmap|roofline SCENARIO``: the tile-size map and the hierarchical roofline of a
sweep, one command each (the sweep runs in parallel processes; ``--csv`` keeps and resumes it)."""

from __future__ import annotations

import click

import tilesim
from tilesim.cli.base import check_output, cli, console, fail, save_figure


@cli.group("plot")
def plot_group() -> None:
    """Figures of a sweep: a tile-size heatmap, a hierarchical roofline."""


def _run(scenario: str, hardware, jobs, csv_path, fresh):
    from tilesim.sweep import SweepCSV, default_jobs, load_scenario, run_sweep

    if jobs is not None and jobs < 1:
        fail(f"--jobs = {jobs}: must be >= 1")
    try:
        sc = load_scenario(scenario)
        hw = tilesim.resolve_hardware(hardware if hardware is not None else sc.hardware)
        writer = SweepCSV(csv_path, sc.family, fresh=fresh) if csv_path else None
        done = writer.done(sc.expand(hw)) if writer else None
        res = run_sweep(sc, hw, on_result=(lambda row, *_: writer.write(row)) if writer else None,
                        jobs=jobs or default_jobs(), done=done)
    except (ValueError, OSError) as e:
        fail(str(e))
    if writer:
        writer.finish(res.rows)
    if not res.ok:
        click.echo(f"error: {sc.name}: no configuration could be simulated", err=True)
        raise SystemExit(1)
    return sc, hw, res


_common = [
    click.option("--hardware", default=None, help="GPU (default: the scenario's)"),
    click.option("--jobs", "-j", type=int, default=None, help="worker processes [default: every CPU]"),
    click.option("--csv", "csv_path", default=None,
                 help="also write (and resume) the sweep's rows as CSV"),
    click.option("--fresh", is_flag=True, help="with --csv: start afresh"),
]


def _with_common(f):
    for option in reversed(_common):
        f = option(f)
    return f


@plot_group.command("heatmap")
@click.argument("scenario", default="tile_map")
@click.option("--x", "x", default="bm", show_default=True, help="knob along the x axis")
@click.option("--y", "y", default="bn", show_default=True, help="knob along the y axis")
@click.option("--panel", default=None, help="knob with one panel per value, or 'shape' [default: shape]")
@click.option("--metric", type=click.Choice(["auto", "tflops", "bandwidth", "time"]), default="auto",
              show_default=True)
@click.option("--out", "out_path", default=None,
              help="PNG [default: out/heatmap_<scenario>.png]")
@_with_common
def plot_heatmap(scenario, x, y, panel, metric, out_path, hardware, jobs, csv_path, fresh) -> None:
    """Predicted throughput over two knobs of SCENARIO (default tile_map); cells that break a
    hardware limit are hatched with the limit's name."""
    from tilesim.plots import heatmap_figure

    out_path = out_path or f"out/heatmap_{scenario.rsplit('/', 1)[-1].removesuffix('.toml')}.png"
    check_output(out_path, "--out")
    check_output(csv_path, "--csv")
    sc, hw, res = _run(scenario, hardware, jobs, csv_path, fresh)
    try:
        fig = heatmap_figure(res.rows, x, y, panel=panel, metric=metric, scenario=sc.name,
                             hardware=hw.display_name)
    except ValueError as e:
        fail(str(e))
    console().print(f"wrote heatmap to {save_figure(fig, out_path)}")


@plot_group.command("roofline")
@click.argument("scenario", default="tile_sizes")
@click.option("--top", type=click.IntRange(min=0), default=5, show_default=True,
              help="label the N fastest configurations")
@click.option("--out", "out_path", default=None,
              help="PNG [default: out/roofline_<scenario>.png]")
@_with_common
def plot_roofline(scenario, top, out_path, hardware, jobs, csv_path, fresh) -> None:
    """A hierarchical roofline (HBM, L2, shared memory) of SCENARIO's configurations (default tile_sizes)."""
    from tilesim.plots import roofline_figure

    out_path = out_path or f"out/roofline_{scenario.rsplit('/', 1)[-1].removesuffix('.toml')}.png"
    check_output(out_path, "--out")
    check_output(csv_path, "--csv")
    sc, hw, res = _run(scenario, hardware, jobs, csv_path, fresh)
    try:
        fig = roofline_figure(res.rows, hw, scenario=sc.name, top=top)
    except ValueError as e:
        fail(str(e))
    console().print(f"wrote roofline to {save_figure(fig, out_path)}")
