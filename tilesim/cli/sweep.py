"""``tilesim sweep``: every configuration of a scenario (any kernel family), tables, CSV/JSON, figures."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import tilesim
from tilesim.cli.base import (
    cli,
    console,
    fail,
    fmt_count,
    save_figure,
)

# ----------------------------------------------------------------------------------------------
# sweep


@cli.command()
@click.argument("scenario", default="tile_sizes")
@click.option("--hardware", default=None, help="GPU (default: the scenario's)")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), default=None, help="write all rows as CSV")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None, help="write all rows as JSON")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="sweep figure PNG [default: out/sweep_<scenario>.png]")
@click.option("--no-plot", is_flag=True, help="do not write the sweep figure")
@click.option("--traffic-plot", "traffic_path", type=click.Path(dir_okay=False), default=None,
              help="also write bytes per level (HBM, L2, shared) per configuration to this PNG")
@click.option("--top", type=int, default=15, show_default=True, help="rows per shape in the tables (0: all)")
def sweep(scenario, hardware, csv_path, json_path, plot_path, no_plot, traffic_path, top) -> None:
    """Simulate every configuration of SCENARIO (a name in scenarios/ or a TOML path).

    SCENARIO defaults to tile_sizes. A scenario names its kernel family (`family = "..."`,
    default gemm). Prints the fastest configurations per shape, the best one per shape and the
    skipped (invalid) configurations with their reasons.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tilesim.sweep import load_scenario, run_sweep

    con = console()
    if top < 0:
        fail(f"--top = {top}: must be >= 0")
    try:
        sc = load_scenario(scenario)
        hw = tilesim.resolve_hardware(hardware if hardware is not None else sc.hardware)
    except (ValueError, ImportError) as e:  # ImportError: a family package that does not import
        fail(str(e))
    con.print(f"[bold]{escape(sc.name)}[/bold] ({escape(sc.family)}) on {escape(hw.display_name)}: "
              f"{escape(sc.description)}")
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=console(stderr=True), transient=True)
    with progress:
        task = progress.add_task("simulating", total=None)

        def on_result(row, done, total):
            progress.update(task, completed=done, total=total, description=f"{row.label[:40]:40s}")

        res = run_sweep(sc, hw, on_result=on_result)

    _print_sweep(con, res, top)

    if csv_path:
        path = _write_csv(res, csv_path)
        click.echo(f"wrote {len(res.rows)} rows to {path}")
    if json_path:
        path = Path(json_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"scenario": sc.name, "family": sc.family, "description": sc.description,
               "hardware": res.hardware, "rows": [r.to_dict() for r in res.rows]}
        path.write_text(json.dumps(doc, indent=2))
        click.echo(f"wrote {len(res.rows)} rows to {path}")
    if not no_plot and res.ok:
        from tilesim.plots import sweep_figure

        target = plot_path or Path("out") / f"sweep_{sc.name}.png"
        fig = sweep_figure(res.rows, scenario=sc.name, hardware=hw.display_name)
        path = save_figure(fig, target)
        click.echo(f"wrote plot to {path}")
    if traffic_path and res.ok:
        from tilesim.plots import traffic_figure

        fig = traffic_figure(res.rows, scenario=sc.name, hardware=hw.display_name)
        path = save_figure(fig, traffic_path)
        click.echo(f"wrote traffic plot to {path}")


def _print_sweep(con: Console, res, top: int) -> None:
    from tilesim.sweep import throughput_metric

    metric = throughput_metric(res.rows) if res.ok else "time"
    rate = ("TFLOP/s", "right") if metric == "tflops" else ("eff. TB/s", "right")
    for rows in res.by_shape().values():
        if not rows:
            continue
        shown = rows if top == 0 else rows[:top]
        title = f"{rows[0].family} {rows[0].shape_desc}: {len(rows)} configurations"
        if len(shown) < len(rows):
            title += f" (fastest {len(shown)})"
        tab = Table(title=title, title_justify="left")
        for col, just in (("#", "right"), ("config", "left"), ("ms", "right"), rate, ("bound", "left"),
                          ("occupancy", "right"), ("HBM GB", "right"), ("L2 hit", "right"),
                          ("smem conflicts", "right")):
            tab.add_column(col, justify=just, overflow="fold")
        for i, row in enumerate(shown, start=1):
            r = row.result
            bw = row.effective_hbm_bytes_per_s
            speed = f"{r.tflops:.1f}" if metric == "tflops" else "" if bw is None else f"{bw / 1e12:.2f}"
            tab.add_row(str(i), row.label, f"{r.time_s * 1e3:.3f}", speed, r.bound,
                        f"{100 * r.occupancy:.0f}% ({r.blocks_per_sm}/SM)",
                        f"{r.traffic.hbm_bytes / 1e9:.3f}", f"{100 * r.traffic.l2_hit_rate:.1f}%",
                        fmt_count(r.traffic.smem_conflict_wavefronts))
        con.print(tab)
    if metric != "tflops":
        con.print("eff. TB/s: the family's compulsory HBM bytes over the predicted time", style="dim")
    best = res.best()
    if best:
        con.print("[bold]best per shape[/bold]")
        for row in best.values():
            bw = row.effective_hbm_bytes_per_s
            speed = (f"{row.result.tflops:.1f} TFLOP/s" if metric == "tflops" or bw is None
                     else f"{bw / 1e12:.2f} TB/s effective")
            con.print(f"  {row.shape_desc}: {row.label}  {row.result.time_s * 1e3:.3f} ms, {speed}, "
                      f"{row.result.bound}-bound", markup=False, soft_wrap=True)
    skipped = res.skipped
    if skipped:
        reasons: dict[str, list[str]] = {}
        for row in skipped:
            reasons.setdefault(row.error, []).append(f"{row.label} @ {row.shape_str}")
        con.print(f"[bold]skipped {len(skipped)} configuration(s)[/bold] (rejected by the family or the "
                  "GPU's limits, or not simulated), with the reason:")
        for reason, who in reasons.items():
            more = f" (+{len(who) - 2} more)" if len(who) > 2 else ""
            con.print(f"  {len(who)} x {reason}\n      e.g. {'; '.join(who[:2])}{more}", markup=False,
                      soft_wrap=True)


def _write_csv(res, csv_path) -> Path:
    import csv

    path = Path(csv_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    dicts = [r.to_dict() for r in res.rows]
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(dicts[0]) if dicts else ["label"])
        w.writeheader()
        for d in dicts:
            w.writerow({k: ("" if v is None else v) for k, v in d.items()})
    return path
