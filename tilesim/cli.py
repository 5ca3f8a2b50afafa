"""The ``tilesim`` command line: simulate one kernel of any registered family, list the families,
sweep a scenario, inspect hardware, benchmark the simulator, forward to the validation harness.

This is the only module of ``tilesim`` that prints or writes files; it parses, calls the library
and prints. Kernel families come from :mod:`tilesim.kernels.registry`: ``tilesim simulate <family>``
has one option per configuration field (``--bm 128``, ``--smem-pad 4``, ``--vectorize``), so the
options follow the family's config class. Invalid input, click's usage errors included, prints
one line ``error: <reason>`` on stderr and exits with status 2. matplotlib is imported only when
a plot is written, and the validation package only inside ``tilesim validate``.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

import tilesim
from tilesim import hardware as hw_catalog
from tilesim.kernels import registry

# ----------------------------------------------------------------------------------------------
# helpers


def _console(*, stderr: bool = False) -> Console:
    """A rich console; at least 120 columns wide when not writing to a terminal (pipes, tests)."""
    c = Console(stderr=stderr, highlight=False)
    if not c.is_terminal:
        c = Console(stderr=stderr, highlight=False, width=max(c.width, 120))
    return c


def _fail(message: str) -> None:
    """Print ``error: message`` on stderr and exit with status 2."""
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def _bytes(x: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:,.2f} {unit}"
    return f"{x:,.0f} B"


def _count(x: float) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:,.2f} {unit}"
    return f"{x:,.0f}"


def _save_figure(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path


def _families() -> dict[str, registry.KernelFamily]:
    """The registered families; a family package that fails to import is one error line."""
    try:
        return registry.families()
    except (ImportError, ValueError) as e:
        _fail(f"cannot load the kernel families: {e}")


class _OneLineErrors(click.Group):
    """A group whose usage errors (unknown command or option, bad value) print one line."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rc = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as e:
            where = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
            _fail(" ".join(e.format_message().split()) + where)
        except click.ClickException as e:
            e.show()
            sys.exit(e.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(rc if isinstance(rc, int) else 0)


@click.group(cls=_OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(tilesim.__version__, prog_name="tilesim")
def cli() -> None:
    """tilesim: predict time and memory traffic of tiled GPU kernels on a modelled GPU."""


# ----------------------------------------------------------------------------------------------
# simulate <family>: one option per configuration field

_OWN_OPTIONS = ("hardware", "json", "timeline", "exact", "help")
_METAVARS = {"int": "INT", "float": "FLOAT", "bool": "BOOL", "str": "TEXT", "int | None": "INT|none"}


def _required_fields(fam: registry.KernelFamily) -> list[str]:
    return [f.name for f in dataclasses.fields(fam.config)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]


def _knob_help(fam: registry.KernelFamily, knob: registry.Knob) -> str:
    parts = [knob.doc] if knob.doc else []
    if knob.choices:
        parts.append(f"one of: {', '.join(map(str, knob.choices))}")
    if knob.name in _required_fields(fam):
        parts.append("required" + (" (problem size)" if knob.name in fam.problem_fields else ""))
    else:
        parts.append(f"default: {knob.default}")
    return "; ".join(parts)


def _knob_option(fam: registry.KernelFamily, knob: registry.Knob) -> click.Option:
    if knob.name in _OWN_OPTIONS:
        raise ValueError(f"{fam.name}: knob {knob.name!r} clashes with the option --{knob.name} of "
                         f"`tilesim simulate`; rename the field")
    dashed = knob.name.replace("_", "-")
    if knob.type == "bool":
        return click.Option([f"--{dashed}/--no-{dashed}", knob.name], default=None, help=_knob_help(fam, knob))
    names = [f"--{dashed}"] + ([f"--{knob.name}"] if dashed != knob.name else [])
    return click.Option([*names, knob.name], default=None, metavar=_METAVARS.get(knob.type, "VALUE"),
                        help=_knob_help(fam, knob))


class _FamilyCommand(click.Command):
    """``tilesim simulate <family>``; an unknown option is reported as an unknown knob."""

    def __init__(self, fam: registry.KernelFamily, **kwargs):
        super().__init__(**kwargs)
        self.family = fam

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as e:
            knobs = ", ".join(k.name for k in self.family.knobs())
            raise click.UsageError(f"{self.family.name}: unknown knob {e.option_name}; knobs: {knobs}",
                                   ctx) from None


def _family_command(fam: registry.KernelFamily) -> click.Command:
    params = [_knob_option(fam, k) for k in fam.knobs()]
    params += [
        click.Option(["--hardware"], default="h200", show_default=True,
                     help="GPU (see `tilesim hardware list`)"),
        click.Option(["--json", "as_json"], is_flag=True, help="print result.to_dict() as JSON only"),
        click.Option(["--timeline", "timeline_png"], type=click.Path(dir_okay=False), default=None,
                     help="also write the block-slot timeline of one SM to this PNG"),
        click.Option(["--exact"], is_flag=True,
                     help="simulate every step (no steady-state holds; slower)"),
    ]

    def run(hardware, as_json, timeline_png, exact, **knobs):
        _simulate(fam, {k: v for k, v in knobs.items() if v is not None}, hardware, as_json,
                  timeline_png, exact)

    doc = fam.description or f"Simulate one {fam.name} kernel."
    return _FamilyCommand(fam, name=fam.name, params=params, callback=run, help=doc,
                          epilog="Knob values are checked by the family's configuration; "
                                 "`tilesim families " + fam.name + "` lists them.")


class _SimulateGroup(_OneLineErrors):
    def list_commands(self, ctx):
        return list(_families())

    def get_command(self, ctx, name):
        fams = _families()
        if name not in fams:
            try:
                registry.get(name)
            except ValueError as e:
                raise click.UsageError(str(e), ctx) from None
        try:
            return _family_command(fams[name])
        except ValueError as e:
            raise click.UsageError(str(e), ctx) from None


@cli.group(cls=_SimulateGroup)
def simulate() -> None:
    """Simulate one kernel: `tilesim simulate <family> --<knob> VALUE ...` (`tilesim families`)."""


def _check_choices(fam: registry.KernelFamily, cfg) -> None:
    """Knobs with listed choices must take one of them (for configs that do not check it themselves)."""
    for knob in fam.knobs():
        v = getattr(cfg, knob.name)
        if knob.choices and v not in knob.choices:
            raise ValueError(f"{fam.config.__name__}.{knob.name} = {v!r}: must be one of "
                             f"{', '.join(map(str, knob.choices))}")


def _simulate(fam, values: dict, hardware: str, as_json: bool, timeline_png, exact: bool) -> None:
    missing = [f for f in _required_fields(fam) if f not in values]
    if missing:
        _fail(f"{fam.name}: missing {', '.join('--' + m.replace('_', '-') for m in missing)} "
              f"(no default; `tilesim families {fam.name}` lists the knobs)")
    try:
        hw = tilesim.resolve_hardware(hardware)
        cfg = fam.make(**values)
        _check_choices(fam, cfg)
        fam.check_fits(cfg, hw)
        result = tilesim.simulate(cfg, hw, timeline=timeline_png is not None, steady_state=not exact)
        programs = () if as_json else tilesim.lower(cfg)
    except ValueError as e:
        _fail(str(e))
    if timeline_png is not None:
        from tilesim.plots import timeline_figure

        path = _save_figure(timeline_figure(result, kernel=fam.full_label(cfg)), timeline_png)
        click.echo(f"wrote timeline to {path}", err=as_json)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    _print_report(_console(), fam, cfg, hw, result, programs)


def _print_report(con: Console, fam, cfg, hw, r, programs) -> None:
    size = " x ".join(f"{f}={getattr(cfg, f)}" for f in fam.problem_fields)
    con.print(f"[bold]{escape(fam.full_label(cfg))}[/bold]  {fam.name} {escape(size)} on "
              f"{escape(hw.display_name)}" + (" (calibrated)" if hw.calibrated else ""))
    counts = fam.counts(cfg)
    summary = Table(show_header=False, box=None, pad_edge=False)
    summary.add_column(style="bold")
    summary.add_column()
    summary.add_row("time", f"{r.time_s * 1e3:.4f} ms")
    peak = hw.fp32_flops_per_s
    if r.flops > 0:
        summary.add_row("throughput", f"{r.tflops:.2f} TFLOP/s = {100 * r.flops / r.time_s / peak:.1f}% "
                        f"of FP32 peak ({peak / 1e12:.1f} TFLOP/s)")
    need = counts.get("min_hbm_bytes", 0)
    if need:
        bw = need / r.time_s
        summary.add_row("bandwidth", f"{bw / 1e12:.3f} TB/s of compulsory HBM bytes = "
                        f"{100 * bw / hw.hbm_bytes_per_s:.1f}% of HBM peak ({hw.hbm_bytes_per_s / 1e12:.2f} TB/s)")
    summary.add_row("bound", r.bound)
    summary.add_row("roofline", f"{r.roofline_s * 1e3:.4f} ms lower bound "
                    f"(predicted time is {r.time_s / r.roofline_s:.2f}x)" if r.roofline_s > 0 else "n/a")
    for i, p in enumerate(programs):
        ln = p.launch
        name = "launch" if len(programs) == 1 else f"launch {i + 1}"
        summary.add_row(name, f"{ln.blocks} blocks of {ln.threads_per_block} threads, {ln.regs_per_thread} "
                        f"regs/thread, {ln.smem_bytes_per_block} B shared/block")
    summary.add_row("occupancy", f"{r.blocks_per_sm} blocks/SM, {100 * r.occupancy:.1f}% of warp slots "
                    f"(limited by {r.occupancy_limiter})")
    summary.add_row("waves", f"{r.waves:.2f} over {hw.sm_count} SMs")
    con.print(summary)

    util = Table(title="utilization (busy fraction of the kernel's time)", title_justify="left")
    util.add_column("resource")
    util.add_column("busy", justify="right")
    util.add_column("")
    for res, frac in sorted(r.utilization.items(), key=lambda kv: -kv[1]):
        bar = "#" * round(30 * min(max(frac, 0.0), 1.0))
        util.add_row(res + (" *" if res == r.bound else ""), f"{100 * frac:.1f}%", bar)
    con.print(util)

    t = r.traffic
    tr = Table(title="traffic (whole kernel, all SMs)", title_justify="left")
    tr.add_column("level")
    tr.add_column("quantity")
    tr.add_column("value", justify="right")
    tr.add_row("HBM", "read", _bytes(t.hbm_read_bytes))
    tr.add_row("HBM", "write", _bytes(t.hbm_write_bytes))
    tr.add_row("L2", "load (SM requests)", _bytes(t.l2_load_bytes))
    tr.add_row("L2", "store", _bytes(t.l2_store_bytes))
    tr.add_row("L2", "hit rate", f"{100 * t.l2_hit_rate:.1f}%")
    tr.add_row("L1", "wavefronts", _count(t.l1_wavefronts))
    tr.add_row("shared", "bytes (stored + loaded)", _bytes(t.smem_bytes))
    tr.add_row("shared", "wavefronts", _count(t.smem_wavefronts))
    tr.add_row("shared", "bank-conflict wavefronts", _count(t.smem_conflict_wavefronts))
    tr.add_row("registers", "operand bytes", _bytes(t.register_operand_bytes))
    tr.add_row("issue", "warp instructions", _count(t.instructions))
    tr.add_row("issue", "of which FFMA", _count(t.ffma))
    con.print(tr)


# ----------------------------------------------------------------------------------------------
# families


@cli.command()
@click.argument("name", required=False)
def families(name) -> None:
    """The kernel families and their knobs (NAME: only that family)."""
    fams = _families()
    if name is not None:
        try:
            fams = {name: registry.get(name)}
        except ValueError as e:
            _fail(str(e))
    con = _console()
    if not fams:
        con.print("no kernel family is registered")
        return
    for fam in fams.values():
        problem = ", ".join(fam.problem_fields) or "none"
        con.print(f"[bold]{escape(fam.name)}[/bold]: {escape(fam.description or '(no description)')}")
        required = _required_fields(fam)
        tab = Table(title=f"{fam.name} knobs (problem fields: {problem}); "
                          f"`tilesim simulate {fam.name} --<knob> VALUE`", title_justify="left")
        for col in ("knob", "type", "default", "choices", "doc"):
            tab.add_column(col, overflow="fold")
        for k in fam.knobs():
            default = "(required)" if k.name in required else str(k.default)
            tab.add_row(k.name, k.type, default, ", ".join(map(str, k.choices)), Text(k.doc))
        con.print(tab)


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

    con = _console()
    if top < 0:
        _fail(f"--top = {top}: must be >= 0")
    try:
        sc = load_scenario(scenario)
        hw = tilesim.resolve_hardware(hardware if hardware is not None else sc.hardware)
    except ValueError as e:
        _fail(str(e))
    con.print(f"[bold]{escape(sc.name)}[/bold] ({escape(sc.family)}) on {escape(hw.display_name)}: "
              f"{escape(sc.description)}")
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=_console(stderr=True), transient=True)
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
        path = _save_figure(fig, target)
        click.echo(f"wrote plot to {path}")
    if traffic_path and res.ok:
        from tilesim.plots import traffic_figure

        fig = traffic_figure(res.rows, scenario=sc.name, hardware=hw.display_name)
        path = _save_figure(fig, traffic_path)
        click.echo(f"wrote traffic plot to {path}")


def _print_sweep(con: Console, res, top: int) -> None:
    for rows in res.by_shape().values():
        if not rows:
            continue
        shown = rows if top == 0 else rows[:top]
        title = f"{rows[0].family} {rows[0].shape_desc}: {len(rows)} configurations"
        if len(shown) < len(rows):
            title += f" (fastest {len(shown)})"
        tab = Table(title=title, title_justify="left")
        for col, just in (("#", "right"), ("config", "left"), ("ms", "right"), ("TFLOP/s", "right"),
                          ("eff. TB/s", "right"), ("bound", "left"), ("occupancy", "right"),
                          ("HBM GB", "right"), ("L2 hit", "right"), ("smem conflicts", "right")):
            tab.add_column(col, justify=just)
        for i, row in enumerate(shown, start=1):
            r = row.result
            bw = row.effective_hbm_bytes_per_s
            tab.add_row(str(i), row.label, f"{r.time_s * 1e3:.3f}", f"{r.tflops:.1f}",
                        "" if bw is None else f"{bw / 1e12:.2f}", r.bound,
                        f"{100 * r.occupancy:.0f}% ({r.blocks_per_sm}/SM)",
                        f"{r.traffic.hbm_bytes / 1e9:.3f}", f"{100 * r.traffic.l2_hit_rate:.1f}%",
                        _count(r.traffic.smem_conflict_wavefronts))
        con.print(tab)
    con.print("eff. TB/s: the family's compulsory HBM bytes over the predicted time", style="dim")
    best = res.best()
    if best:
        con.print("[bold]best per shape[/bold]")
        for shape, row in best.items():
            con.print(f"  {'x'.join(map(str, shape))}: {row.label}  {row.result.time_s * 1e3:.3f} ms, "
                      f"{row.result.tflops:.1f} TFLOP/s, {row.result.bound}-bound", markup=False,
                      soft_wrap=True)
    skipped = res.skipped
    if skipped:
        reasons: dict[str, list[str]] = {}
        for row in skipped:
            reasons.setdefault(row.error, []).append(f"{row.label} @ {row.shape_str}")
        con.print(f"[bold]skipped {len(skipped)} invalid configuration(s)[/bold]")
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


# ----------------------------------------------------------------------------------------------
# hardware


@cli.group("hardware")
def hardware_group() -> None:
    """The GPU catalog (datasheet values, each with its source; calibrated profiles applied)."""


@hardware_group.command("list")
def hardware_list() -> None:
    """One line per GPU in the catalog."""
    tab = Table(title="hardware catalog")
    for col in ("name", "display name", "SMs", "clock GHz", "FP32 TFLOP/s", "HBM TB/s", "L2 MiB", "calibrated"):
        tab.add_column(col, justify="left" if col in ("name", "display name", "calibrated") else "right")
    for name in hw_catalog.available():
        hw = hw_catalog.load(name)
        cal = f"yes ({hw.calibration_date or 'undated'})" if hw.calibrated else "no"
        tab.add_row(hw.name, hw.display_name, str(hw.sm_count), f"{hw.sm_clock_hz / 1e9:.2f}",
                    f"{hw.fp32_flops_per_s / 1e12:.1f}", f"{hw.hbm_bytes_per_s / 1e12:.2f}",
                    f"{hw.l2_bytes / 2**20:.0f}", cal)
    _console().print(tab)


def _human(field: str, v) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return ""
    if field.endswith("_hz"):
        return f"{v / 1e9:.3f} GHz"
    if field.endswith("bytes_per_s"):
        return f"{v / 1e12:.3f} TB/s"
    if field.endswith("flops_per_s"):
        return f"{v / 1e12:.1f} TFLOP/s"
    if field.endswith("_bytes") and v >= 1024:
        return f"{v / 2**10:,.0f} KiB" if v < 2**20 else f"{v / 2**20:,.1f} MiB" if v < 2**30 else f"{v / 2**30:,.1f} GiB"
    if field.endswith("_s"):
        return f"{v * 1e6:.2f} µs"
    return ""


@hardware_group.command("show")
@click.argument("name")
@click.option("--sources", is_flag=True, help="also print where each value comes from")
def hardware_show(name, sources) -> None:
    """Every field of GPU NAME (field names carry the unit; * marks calibrated values)."""
    try:
        hw = hw_catalog.load(name)
    except ValueError as e:
        _fail(str(e))
    con = _console()
    cal = (f"calibrated {len(hw.calibrated)} field(s) on {hw.calibration_date or 'an unknown date'}"
           if hw.calibrated else "not calibrated (datasheet values)")
    con.print(f"[bold]{hw.display_name}[/bold] ({hw.name}, {hw.vendor}): {cal}")
    tab = Table()
    tab.add_column("field")
    tab.add_column("value", justify="right")
    tab.add_column("", justify="right")
    tab.add_column("cal", justify="center")
    if sources:
        tab.add_column("source", overflow="fold")
    for f in hw_catalog.DATA_FIELDS:
        v = getattr(hw, f)
        row = [f, f"{v:g}" if isinstance(v, float) else str(v), _human(f, v), "*" if f in hw.calibrated else ""]
        if sources:
            row.append(Text(hw.source_of(f)))
        tab.add_row(*row)
    for f, v in (("fp32_flops_per_s", hw.fp32_flops_per_s), ("smem_bytes_per_clk_per_sm", hw.smem_bytes_per_clk_per_sm)):
        row = [f, f"{v:g}", _human(f, v), ""]
        if sources:
            row.append("derived")
        tab.add_row(*row, style="dim")
    con.print(tab)


# ----------------------------------------------------------------------------------------------
# bench


def _suite_first_config(family: str):
    """The first configuration of the family's validation suite, or None (validation imported here only)."""
    import importlib

    try:
        mod = importlib.import_module("validation.harness.suite")
    except ImportError:
        return None
    first = getattr(mod, "first_config", None)
    return first(family) if first is not None else None


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
        _fail(f"--repeat = {repeat}: must be >= 1")
    try:
        hw = tilesim.resolve_hardware(hardware)
    except ValueError as e:
        _fail(str(e))
    con = _console()
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
        except ValueError as e:
            notes.append(f"  {case.family}: simulation failed: {e}")
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


# ----------------------------------------------------------------------------------------------
# validate (forwards to the validation package, which is imported only here)


def _validation_fn(module: str, name: str):
    import importlib

    try:
        mod = importlib.import_module(module)
        return getattr(mod, name)
    except (ImportError, AttributeError) as e:
        _fail(f"cannot use {module}.{name}: {e} (is the validation package installed?)")


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
        _fail(str(e))
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
        _fail(str(e))
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
        _fail(str(e))
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


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``tilesim``)."""
    cli.main(args=argv, prog_name="tilesim")


if __name__ == "__main__":
    main()
