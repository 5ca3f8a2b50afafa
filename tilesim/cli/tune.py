"""``tilesim tune <family> <shape>``: the fastest configurations of a family's whole knob space.

Enumerates the space, drops what the GPU cannot launch, bounds every survivor, simulates in order of
increasing bound until no bound can beat the ``--top``-th best (:mod:`tilesim.tune`), and prints the
best and the runners-up with their bound, the counts and the wall time. ``--measure-top N`` times
the N best predicted kernels on this machine's GPU through the validation layer and prints
predicted vs measured and the regret. Every option and path is checked before any work.
"""

from __future__ import annotations

import json
import time

import click
from rich.markup import escape
from rich.table import Table

from tilesim.cli.base import check_output, cli, console, fail, fmt_bytes


class _Progress:
    """Progress of the bound and simulate stages: a bar on a terminal, else a line per 10 percent."""

    def __init__(self, err) -> None:
        self.err = err
        self.bar = None
        self.tasks: dict = {}
        self.last: dict = {}
        if err.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=err, transient=True)

    def __enter__(self):
        if self.bar is not None:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def __call__(self, stage: str, done: int, total: int) -> None:
        label = {"bound": "bounding", "simulate": "simulating (stops at the bound)"}.get(stage, stage)
        if self.bar is not None:
            if stage not in self.tasks:
                self.tasks[stage] = self.bar.add_task(label, total=total)
            self.bar.update(self.tasks[stage], completed=done, total=total)
            return
        step = 10 * done // max(total, 1)
        if self.last.get(stage) != step:
            self.last[stage] = step
            click.echo(f"tune: {label} {done}/{total}", err=True)


def _parse_sets(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for v in values:
        key, sep, val = v.partition("=")
        if not sep or not key.strip():
            fail(f"--set {v}: must be KNOB=VALUE, e.g. --set dtype=bf16")
        out[key.strip().replace("-", "_")] = val.strip()
    return out


@cli.command()
@click.argument("family")
@click.argument("shape")
@click.option("--hardware", default="h200", show_default=True, help="GPU (see `tilesim hardware list`)")
@click.option("--top", type=int, default=5, show_default=True,
              help="configurations ranked exactly and shown (the search prunes against the top-th best)")
@click.option("--set", "sets", multiple=True, metavar="KNOB=VALUE",
              help="fix a knob for every configuration (repeatable), e.g. --set dtype=bf16")
@click.option("--json", "json_path", default=None, help="write the result as JSON ('-': standard output)")
@click.option("--csv", "csv_path", default=None, help="write every simulated configuration as CSV")
@click.option("--jobs", "-j", type=int, default=None, help="worker processes [default: every CPU; 1: in this process]")
@click.option("--measure-top", type=int, default=0, metavar="N",
              help="with a GPU: compile and time the N best predicted kernels, print predicted vs measured "
                   "and the regret")
def tune(family, shape, hardware, top, sets, json_path, csv_path, jobs, measure_top) -> None:
    """Search FAMILY's whole knob space at SHAPE (the family's problem fields joined by 'x', e.g.
    4096x4096x4096 for m x n x k) for the fastest predicted configuration.

    Exits with status 1 when no configuration could be simulated.
    """
    from tilesim import tune as tuning
    from tilesim.api import resolve_hardware
    from tilesim.kernels import registry
    from tilesim.sweep import default_jobs

    if top < 1:
        fail(f"--top = {top}: must be >= 1")
    if jobs is not None and jobs < 1:
        fail(f"--jobs = {jobs}: must be >= 1")
    if measure_top < 0:
        fail(f"--measure-top = {measure_top}: must be >= 0")
    check_output(json_path, "--json", stdout_ok=True)
    check_output(csv_path, "--csv")
    fixed = _parse_sets(sets)
    try:
        fam = registry.get(family)
        problem = tuning.parse_problem(fam.name, shape)
        hw = resolve_hardware(hardware)
        tuning.load_space(fam.name)
        known = {k.name for k in fam.knobs()} - set(fam.problem_fields)
        unknown = sorted(set(fixed) - known)
        if unknown:
            raise ValueError(f"--set: unknown {fam.name} knob(s) {', '.join(unknown)}; knobs: {', '.join(sorted(known))}")
        fam.make(**problem, **fixed)  # the fixed values' types and ranges, one line each
    except (ValueError, ImportError) as e:
        fail(str(e))
    if measure_top:
        from validation.harness import runners, suite

        why = suite.gpu_available()
        if why is not None:
            fail(f"--measure-top needs a GPU on this machine: {why}")
        try:
            runners.get_runner(fam.name)
        except ValueError as e:
            fail(f"--measure-top: {e}")
    # a fixed value is converted by the family (strings to the field's type)
    fixed = {k: getattr(fam.make(**problem, **fixed), k) for k in fixed}
    to_stdout = json_path == "-"
    con = console(stderr=to_stdout)
    err = console(stderr=True)
    size = " x ".join(fam.problem_fields) + " = " + "x".join(str(problem[f]) for f in fam.problem_fields)
    con.print(f"[bold]tune {escape(fam.name)}[/bold] at {escape(size)} on {escape(hw.display_name)}")
    try:
        with _Progress(err) as progress:
            res = tuning.tune(fam.name, problem, hw, top=max(top, measure_top), jobs=jobs or default_jobs(),
                              fixed=fixed, on_progress=progress)
    except ValueError as e:
        fail(str(e))
    _print_result(con, res, top)
    measured = None
    if measure_top and res.ranked:
        t0 = time.perf_counter()
        try:
            measured = tuning.measure_top(res, measure_top, log=lambda s: err.print(s, markup=False))
        except ValueError as e:
            fail(str(e))
        _print_measured(con, measured, time.perf_counter() - t0)
    if csv_path:
        _write_csv(csv_path, res)
        con.print(f"wrote {len(res.ranked)} simulated configurations to {csv_path}")
    if json_path:
        doc = res.to_dict()
        if measured is not None:
            doc["measured"] = [{"label": m.candidate.row.label, "predicted_s": m.candidate.time_s,
                                "measured_s": m.median_s, "status": m.status, "message": m.message}
                               for m in measured]
            doc["regret"] = tuning.regret(measured)
            from validation.harness.metadata import collect_metadata  # noqa: PLC0415  (needs a GPU, as measuring did)

            doc["metadata"] = collect_metadata()
        text = json.dumps(doc, indent=2, default=str)
        if to_stdout:
            click.echo(text)
        else:
            from pathlib import Path

            Path(json_path).parent.mkdir(parents=True, exist_ok=True)
            Path(json_path).write_text(text + "\n")
            con.print(f"wrote {json_path}")
    if not res.ranked:
        click.echo("error: no configuration could be simulated (see the counts above)", err=True)
        raise SystemExit(1)


def _speed(metric: str, c) -> str:
    r = c.row.result
    if metric == "tflops":
        return f"{r.tflops:.1f}"
    bw = c.row.effective_hbm_bytes_per_s
    return "" if bw is None else f"{bw / 1e12:.2f}"


def _print_result(con, res, top: int) -> None:
    metric = res.metric()
    rate = "TFLOP/s" if metric == "tflops" else "eff. TB/s"
    shown = res.ranked[:top]
    if shown:
        tab = Table(title=f"{res.family}: the {len(shown)} fastest of {res.simulated} simulated", title_justify="left")
        widest = max(len(c.row.label) for c in shown)
        for col, just in (("#", "right"), ("config", "left"), ("ms", "right"), (rate, "right"),
                          ("bound ms", "right"), ("bound by", "left"), ("limiter", "left")):
            tab.add_column(col, justify=just, overflow="fold",
                           min_width=min(widest, 22 if con.width < 110 else 40) if col == "config" else None)
        for c in shown:
            tab.add_row(str(c.rank), c.row.label, f"{c.time_s * 1e3:.4f}", _speed(metric, c),
                        f"{c.bound.time_s * 1e3:.4f}", c.bound.limiter, c.row.result.bound)
        con.print(tab)
        best = shown[0]
        speed = _speed(metric, best)
        con.print(f"[bold]best[/bold]: {escape(best.row.label)}  {best.time_s * 1e3:.4f} ms"
                  + (f", {speed} {rate}" if speed else "") + f", {best.row.result.bound}-bound", soft_wrap=True)
        if metric != "tflops":
            con.print("eff. TB/s: the family's compulsory HBM bytes "
                      f"({fmt_bytes(best.row.counts.get('min_hbm_bytes') or 0)}) over the predicted time", style="dim")
    con.print(f"enumerated {res.enumerated:,}: {res.invalid_count:,} invalid (rejected by the configuration), "
              f"{res.duplicates:,} duplicates, {res.unfit_count:,} unfit for {res.hardware}; {res.valid:,} valid: "
              f"{res.pruned:,} pruned by the bound, {res.simulated:,} simulated"
              + (f" ({sum(res.failed.values())} failed)" if res.failed else "")
              + f"; {res.wall_s:.1f} s wall ({res.bound_s:.1f} s bounding)", soft_wrap=True, markup=False)
    for title, reasons in (("invalid", res.invalid), ("unfit", res.unfit), ("failed", res.failed)):
        if reasons:
            con.print(f"{title}, by reason:", style="dim")
            for key, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:6]:
                con.print(f"  {n:>6,} x {res.examples.get(key, key)}", markup=False, soft_wrap=True, style="dim")
            if len(reasons) > 6:
                con.print(f"  ... and {len(reasons) - 6} more reasons (--json lists them)", style="dim")


def _print_measured(con, measured, wall_s: float) -> None:
    from tilesim.tune import regret

    tab = Table(title="predicted vs measured", title_justify="left")
    for col, just in (("#", "right"), ("config", "left"), ("predicted ms", "right"), ("measured ms", "right"),
                      ("error", "right"), ("status", "left")):
        tab.add_column(col, justify=just, overflow="fold")
    for m in measured:
        pred = m.candidate.time_s
        meas = m.median_s
        errs = f"{(pred / meas - 1) * 100:+.1f}%" if meas else ""
        tab.add_row(str(m.candidate.rank), m.candidate.row.label, f"{pred * 1e3:.4f}",
                    f"{meas * 1e3:.4f}" if meas else "", errs, m.status if m.status == "ok" else m.message[:80])
    con.print(tab)
    r = regret(measured)
    timed = [m for m in measured if m.median_s is not None]
    if r is None:
        con.print("regret: unknown (the predicted best could not be timed)")
    else:
        fastest = min(timed, key=lambda m: m.median_s)
        con.print(f"regret: {r * 100:.1f}% (the predicted best measured {measured[0].median_s * 1e3:.4f} ms; the "
                  f"fastest measured, {fastest.candidate.row.label}, {fastest.median_s * 1e3:.4f} ms); "
                  f"{wall_s:.1f} s measuring", markup=False, soft_wrap=True)


def _write_csv(path: str, res) -> None:
    import csv
    from pathlib import Path

    from tilesim.tune import candidate_record

    records = [candidate_record(c) for c in res.ranked]
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", newline="") as fh:
        if not records:
            fh.write("")
            return
        w = csv.DictWriter(fh, fieldnames=list(records[0]))
        w.writeheader()
        w.writerows(records)
