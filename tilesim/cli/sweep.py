"""``tilesim sweep``: every configuration of a scenario (any kernel family), tables, CSV/JSON, figures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import tilesim
from tilesim.cli.base import (
    check_output,
    cli,
    console,
    fail,
    fmt_count,
    save_figure,
)
from tilesim.cli.progress import progress

# ----------------------------------------------------------------------------------------------
# sweep


def _scenarios_of(target: str) -> list:
    """The scenario ``target`` names, or every scenario file in the folder ``target``."""
    from tilesim.sweep import is_scenario_file, load_scenario

    p = Path(target)
    if p.is_dir():
        files = [f for f in sorted(p.glob("*.toml")) if is_scenario_file(f)]
        if not files:
            fail(f"{target}: no scenario file (*.toml with a top-level shapes or family) in this folder")
        return [load_scenario(f) for f in files]
    return [load_scenario(target)]


def _outputs(scenarios, csv_path, json_path, plot_path, traffic_path, no_plot) -> list[dict]:
    """Per scenario, where its CSV, JSON and figures go; every path checked before any work. With
    several scenarios (a folder) the options name folders: <folder>/<scenario>.csv and so on."""
    many = len(scenarios) > 1
    if many and json_path == "-":
        fail("--json -: a folder of scenarios writes one JSON per scenario; give a folder")
    plans = []
    for sc in scenarios:
        def at(opt, value, ext, default=None, sc=sc):
            if value is None:
                return default
            return str(Path(value) / f"{sc.name}{ext}") if many else value
        plan = {"csv": at("--csv", csv_path, ".csv"), "json": at("--json", json_path, ".json"),
                "plot": None if no_plot else at("--plot", plot_path, ".png", str(Path("out") / f"sweep_{sc.name}.png")),
                "traffic": at("--traffic-plot", traffic_path, "_traffic.png")}
        for opt, key in (("--csv", "csv"), ("--json", "json"), ("--plot", "plot"), ("--traffic-plot", "traffic")):
            check_output(plan[key], opt, stdout_ok=key == "json")
        plans.append(plan)
    return plans


@cli.command()
@click.argument("scenario", default="tile_sizes")
@click.option("--hardware", default=None, help="GPU (default: the scenario's)")
@click.option("--csv", "csv_path", default=None,
              help="write all rows as CSV, each as it finishes; an existing CSV of the same sweep is resumed "
                   "(a folder of scenarios: a folder, one CSV per scenario)")
@click.option("--fresh", is_flag=True, help="with --csv: start afresh instead of resuming the file")
@click.option("--json", "json_path", default=None,
              help="write all rows as JSON ('-': standard output, tables then go to standard error)")
@click.option("--plot", "plot_path", default=None,
              help="sweep figure PNG [default: out/sweep_<scenario>.png]")
@click.option("--no-plot", is_flag=True, help="do not write the sweep figure")
@click.option("--traffic-plot", "traffic_path", default=None,
              help="also write bytes per level (HBM, L2, shared) per configuration to this PNG")
@click.option("--top", type=int, default=15, show_default=True, help="rows per shape in the tables (0: all)")
@click.option("--jobs", "-j", type=int, default=None,
              help="worker processes [default: every CPU; 1: in this process]")
@click.option("--dask", "dask_mode", default=None, metavar="local",
              help="run on a Dask cluster: 'local' starts a dask.distributed LocalCluster")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="run on an existing Dask cluster, e.g. tcp://host:8786")
def sweep(scenario, hardware, csv_path, fresh, json_path, plot_path, no_plot, traffic_path, top, jobs,
          dask_mode, scheduler) -> None:
    """Simulate every configuration of SCENARIO (a name in scenarios/, a TOML path, or a folder of
    scenario files, each swept in turn).

    SCENARIO defaults to tile_sizes. A scenario names its kernel family (`family = "..."`,
    default gemm). Prints the fastest configurations per shape, the best one per shape and the
    skipped (invalid) configurations with their reasons. Exits with status 1 when no
    configuration could be simulated.
    """
    from tilesim.sweep import default_jobs

    if top < 0:
        fail(f"--top = {top}: must be >= 0")
    if jobs is not None and jobs < 1:
        fail(f"--jobs = {jobs}: must be >= 1")
    if dask_mode is not None and dask_mode != "local":
        fail(f"--dask {dask_mode}: only 'local' (a LocalCluster on this machine); use --scheduler ADDRESS "
             "for an existing cluster")
    if dask_mode is not None and scheduler is not None:
        fail("--dask and --scheduler: give one of them")
    if fresh and csv_path is None:
        fail("--fresh: only with --csv (the file a sweep resumes)")
    try:
        scenarios = _scenarios_of(scenario)
        hws = [tilesim.resolve_hardware(hardware if hardware is not None else sc.hardware) for sc in scenarios]
    except (ValueError, ImportError) as e:  # ImportError: a family package that does not import
        fail(str(e))
    plans = _outputs(scenarios, csv_path, json_path, plot_path, traffic_path, no_plot)
    client = _dask_client(dask_mode, scheduler, jobs)
    try:
        failed = 0
        for sc, hw, plan in zip(scenarios, hws, plans, strict=True):
            failed += not _sweep_one(sc, hw, plan, top, jobs or default_jobs(), fresh, client)
    finally:
        if client is not None:
            cluster = getattr(client, "_tilesim_cluster", None)
            client.close()
            if cluster is not None:
                cluster.close()
    if failed:
        click.echo(f"error: no configuration could be simulated in {failed} of {len(scenarios)} "
                   "scenario(s) (see the reasons above)", err=True)
        sys.exit(1)


def _dask_client(mode, scheduler, jobs):
    if mode is None and scheduler is None:
        return None
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        fail("--dask/--scheduler need dask.distributed: pip install 'dask[distributed]'")
    try:
        if scheduler is not None:
            return Client(scheduler, timeout="5s")
        from tilesim.sweep import default_jobs

        cluster = LocalCluster(n_workers=jobs or default_jobs(), threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
        client._tilesim_cluster = cluster
        return client
    except (OSError, TimeoutError) as e:
        fail(f"cannot reach the Dask scheduler {scheduler or '(local)'}: {e}")


def _sweep_one(sc, hw, plan: dict, top: int, jobs: int, fresh: bool, client) -> bool:
    """One scenario: simulate, print, write. False when no configuration could be simulated."""
    from tilesim.sweep import SweepCSV, run_sweep

    to_stdout = plan["json"] == "-"
    con = console(stderr=to_stdout)
    con.print(f"[bold]{escape(sc.name)}[/bold] ({escape(sc.family)}) on {escape(hw.display_name)}: "
              f"{escape(sc.description)}")
    writer = done = None
    if plan["csv"]:
        try:
            writer = SweepCSV(plan["csv"], sc.family, fresh=fresh)
            done = writer.done(sc.expand(hw))
        except (ValueError, OSError) as e:
            fail(str(e))
        if done:
            con.print(f"resuming {plan['csv']}: {len(done)} row(s) already there are kept, not simulated again")
    try:
        with progress(sc.name) as update:
            def on_result(row, n, total):
                if writer is not None:
                    writer.write(row)
                update(n, total)

            res = run_sweep(sc, hw, on_result=on_result, jobs=jobs, done=done, client=client)
    except ValueError as e:
        fail(str(e))
    finally:
        if writer is not None and "res" not in locals():
            writer.close()

    _print_sweep(con, res, top)
    if writer is not None:
        path = writer.finish(res.rows)
        con.print(f"wrote {len(res.rows)} rows to {path}")
    if plan["json"]:
        doc = {"scenario": sc.name, "family": sc.family, "description": sc.description,
               "hardware": res.hardware, "rows": [r.to_dict() for r in res.rows]}
        if to_stdout:
            click.echo(json.dumps(doc, indent=2))
        else:
            path = Path(plan["json"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(doc, indent=2))
            con.print(f"wrote {len(res.rows)} rows to {path}")
    if plan["plot"] and res.ok:
        from tilesim.plots import sweep_figure

        fig = sweep_figure(res.rows, scenario=sc.name, hardware=hw.display_name)
        con.print(f"wrote plot to {save_figure(fig, plan['plot'])}")
    if plan["traffic"] and res.ok:
        from tilesim.plots import traffic_figure

        fig = traffic_figure(res.rows, scenario=sc.name, hardware=hw.display_name)
        con.print(f"wrote traffic plot to {save_figure(fig, plan['traffic'])}")
    return bool(res.ok)


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
        widest = max(len(r.label) for r in shown)
        narrow = con.width < 110  # an 80-column terminal: names fold over at most two lines
        for col, just in (("#", "right"), ("config", "left"), ("ms", "right"), rate, ("bound", "left"),
                          ("occupancy", "right"), ("HBM GB", "right"), ("L2 hit", "right"),
                          ("smem conflicts", "right")):
            if narrow and col in ("smem conflicts", "HBM GB"):
                continue
            tab.add_column(col, justify=just, overflow="fold",
                           min_width=min(widest, 22 if narrow else 40) if col == "config" else None)
        for i, row in enumerate(shown, start=1):
            r = row.result
            bw = row.effective_hbm_bytes_per_s
            speed = f"{r.tflops:.1f}" if metric == "tflops" else "" if bw is None else f"{bw / 1e12:.2f}"
            cells = [str(i), row.label, f"{r.time_s * 1e3:.3f}", speed, r.bound,
                     f"{100 * r.occupancy:.0f}% ({r.blocks_per_sm}/SM)", f"{r.traffic.hbm_bytes / 1e9:.3f}",
                     f"{100 * r.traffic.l2_hit_rate:.1f}%", fmt_count(r.traffic.smem_conflict_wavefronts)]
            if narrow:
                del cells[8], cells[6]
            tab.add_row(*cells)
        con.print(tab)
    if any(len(rows) for rows in res.by_shape().values()) and con.width < 110:
        con.print("(a narrow terminal: HBM GB and smem conflicts are in --csv/--json)", style="dim")
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
