"""The ``tilesim`` command line: simulate one kernel, sweep a scenario, inspect hardware, benchmark.

This is the only module of ``tilesim`` that prints or writes files. Invalid input prints one line
``error: <reason>`` on stderr and exits with status 2. matplotlib is imported only when a plot is
written, so commands that do not plot start fast.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

import tilesim
from tilesim import hardware as hw_catalog

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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(tilesim.__version__, prog_name="tilesim")
def cli() -> None:
    """tilesim: predict time and memory traffic of tiled GPU kernels (GEMM) on a modelled GPU."""


# ----------------------------------------------------------------------------------------------
# simulate


@cli.group()
def simulate() -> None:
    """Simulate one kernel and print its report."""


def _default_stages(pipeline: str) -> int:
    return {"none": 1, "regs": 2, "cp_async": 2}.get(pipeline, 1)


@simulate.command("gemm")
@click.option("--m", "m", type=int, default=4096, show_default=True, help="rows of A and C")
@click.option("--n", "n", type=int, default=4096, show_default=True, help="columns of B and C")
@click.option("--k", "k", type=int, default=4096, show_default=True, help="columns of A, rows of B")
@click.option("--variant", default="reg2d", show_default=True,
              help="naive_uncoalesced, naive, smem, reg1d, reg2d or warp")
@click.option("--bm", type=int, default=128, show_default=True, help="block tile rows")
@click.option("--bn", type=int, default=128, show_default=True, help="block tile columns")
@click.option("--bk", type=int, default=8, show_default=True, help="k-step of the shared tile")
@click.option("--tm", type=int, default=8, show_default=True, help="thread tile rows")
@click.option("--tn", type=int, default=8, show_default=True, help="thread tile columns")
@click.option("--wm", type=int, default=64, show_default=True, help="warp tile rows (warp)")
@click.option("--wn", type=int, default=64, show_default=True, help="warp tile columns (warp)")
@click.option("--wniter", type=int, default=4, show_default=True, help="warp sub-tiles along N")
@click.option("--vectorize/--no-vectorize", default=False, show_default=True,
              help="16-byte loads, A transposed in shared memory (reg2d, warp)")
@click.option("--smem-pad", type=int, default=0, show_default=True, help="padding per shared row")
@click.option("--pipeline", default="none", show_default=True, help="none, regs or cp_async")
@click.option("--stages", type=int, default=None,
              help="pipeline depth [default: 1 for none, 2 for regs and cp_async]")
@click.option("--dtype", default="fp32", show_default=True, help="fp32, fp16 or bf16")
@click.option("--alpha", type=float, default=1.0, show_default=True)
@click.option("--beta", type=float, default=0.0, show_default=True)
@click.option("--regs", type=int, default=None, help="registers per thread (default: estimated)")
@click.option("--hardware", default="h200", show_default=True, help="GPU (see `tilesim hardware list`)")
@click.option("--json", "as_json", is_flag=True, help="print result.to_dict() as JSON only")
@click.option("--timeline", "timeline_png", type=click.Path(dir_okay=False), default=None,
              help="also write the block-slot timeline of one SM to this PNG")
@click.option("--exact", is_flag=True, help="simulate every k-step (no steady-state holds; slower)")
def simulate_gemm(m, n, k, variant, bm, bn, bk, tm, tn, wm, wn, wniter, vectorize, smem_pad,
                  pipeline, stages, dtype, alpha, beta, regs, hardware, as_json, timeline_png, exact) -> None:
    """Simulate C = alpha*A@B + beta*C for one GEMM tiling."""
    from tilesim.kernels.gemm_config import GemmConfig, check_fits

    try:
        hw = tilesim.resolve_hardware(hardware)
        cfg = GemmConfig(m, n, k, variant=variant, bm=bm, bn=bn, bk=bk, tm=tm, tn=tn, wm=wm, wn=wn,
                         wniter=wniter, vectorize=vectorize, smem_pad=smem_pad, pipeline=pipeline,
                         stages=stages if stages is not None else _default_stages(pipeline),
                         dtype=dtype, alpha=alpha, beta=beta, regs_per_thread=regs)
        check_fits(cfg, hw)
        result = tilesim.simulate(cfg, hw, timeline=timeline_png is not None, steady_state=not exact)
    except ValueError as e:
        _fail(str(e))
    if timeline_png is not None:
        from tilesim.plots import timeline_figure

        path = _save_figure(timeline_figure(result), timeline_png)
        click.echo(f"wrote timeline to {path}", err=as_json)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    _print_report(_console(), cfg, hw, result)


def _print_report(con: Console, cfg, hw, r) -> None:
    peak = hw.fp32_flops_per_s
    con.print(f"[bold]{cfg.label}[/bold]  GEMM {cfg.m}x{cfg.n}x{cfg.k} {cfg.dtype} on {hw.display_name}"
              + (" (calibrated)" if hw.calibrated else ""))
    summary = Table(show_header=False, box=None, pad_edge=False)
    summary.add_column(style="bold")
    summary.add_column()
    summary.add_row("time", f"{r.time_s * 1e3:.4f} ms")
    summary.add_row("throughput", f"{r.tflops:.2f} TFLOP/s = {100 * r.flops / r.time_s / peak:.1f}% "
                    f"of FP32 peak ({peak / 1e12:.1f} TFLOP/s)")
    summary.add_row("bound", r.bound)
    summary.add_row("roofline", f"{r.roofline_s * 1e3:.4f} ms lower bound "
                    f"(predicted time is {r.time_s / r.roofline_s:.2f}x)" if r.roofline_s > 0 else "n/a")
    summary.add_row("launch", f"{r.blocks} blocks of {cfg.threads} threads, {cfg.estimated_regs} regs/thread, "
                    f"{cfg.smem_bytes} B shared/block")
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

    SCENARIO defaults to tile_sizes. Prints the fastest configurations per shape, the best one per
    shape and the skipped (invalid) configurations with their reasons.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tilesim.sweep import load_scenario, run_sweep

    con = _console()
    try:
        sc = load_scenario(scenario)
        hw = tilesim.resolve_hardware(hardware if hardware is not None else sc.hardware)
    except ValueError as e:
        _fail(str(e))
    if top < 0:
        _fail(f"--top = {top}: must be >= 0")
    con.print(f"[bold]{escape(sc.name)}[/bold] on {escape(hw.display_name)}: {escape(sc.description)}")
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
        doc = {"scenario": sc.name, "description": sc.description, "hardware": res.hardware,
               "rows": [r.to_dict() for r in res.rows]}
        path.write_text(json.dumps(doc, indent=2))
        click.echo(f"wrote {len(res.rows)} rows to {path}")
    if not no_plot and res.ok:
        from tilesim.plots import sweep_figure

        target = plot_path or Path("out") / f"sweep_{sc.name}.png"
        fig = sweep_figure(res.rows, title=f"{sc.name} on {hw.display_name} (predicted)")
        path = _save_figure(fig, target)
        click.echo(f"wrote plot to {path}")
    if traffic_path and res.ok:
        from tilesim.plots import traffic_figure

        path = _save_figure(traffic_figure(res.rows), traffic_path)
        click.echo(f"wrote traffic plot to {path}")


def _print_sweep(con: Console, res, top: int) -> None:
    for shape, rows in res.by_shape().items():
        shown = rows if top == 0 else rows[:top]
        title = f"{'x'.join(map(str, shape))}: {len(rows)} configurations"
        if len(shown) < len(rows):
            title += f" (fastest {len(shown)})"
        tab = Table(title=title, title_justify="left")
        for col, just in (("#", "right"), ("config", "left"), ("ms", "right"), ("TFLOP/s", "right"),
                          ("bound", "left"), ("occupancy", "right"), ("HBM GB", "right"),
                          ("L2 hit", "right"), ("smem conflicts", "right")):
            tab.add_column(col, justify=just)
        for i, row in enumerate(shown, start=1):
            r = row.result
            tab.add_row(str(i), row.label, f"{r.time_s * 1e3:.3f}", f"{r.tflops:.1f}", r.bound,
                        f"{100 * r.occupancy:.0f}% ({r.blocks_per_sm}/SM)",
                        f"{r.traffic.hbm_bytes / 1e9:.3f}", f"{100 * r.traffic.l2_hit_rate:.1f}%",
                        _count(r.traffic.smem_conflict_wavefronts))
        con.print(tab)
    best = res.best()
    if best:
        con.print("[bold]best per shape[/bold]")
        for shape, row in best.items():
            con.print(f"  {'x'.join(map(str, shape))}: {row.label}  {row.result.time_s * 1e3:.3f} ms, "
                      f"{row.result.tflops:.1f} TFLOP/s, {row.result.bound}-bound", soft_wrap=True)
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


def _bench_cases(smoke: bool):
    from tilesim.kernels.gemm_config import GemmConfig

    s, big = (256, 512) if smoke else (4096, 16384)
    warp = dict(variant="warp", bm=128, bn=128, bk=16, wm=64, wn=64, wniter=4, tm=8, tn=4,
                vectorize=True, pipeline="cp_async", stages=3)
    return [
        (f"gemm reg2d 128x128x8 t8x8 {s}^3", GemmConfig(s, s, s, "reg2d", bm=128, bn=128, bk=8, tm=8, tn=8)),
        (f"gemm reg2d 128x128x8 t8x8 {big}^3", GemmConfig(big, big, big, "reg2d", bm=128, bn=128, bk=8, tm=8, tn=8)),
        (f"naive 32x32 {s}^3", GemmConfig(s, s, s, "naive", bm=32, bn=32)),
        (f"warp 128x128x16 cp_async3 {s}^3", GemmConfig(s, s, s, **warp)),
    ]


@cli.command()
@click.option("--repeat", type=int, default=5, show_default=True, help="timed runs per case")
@click.option("--hardware", default="h200", show_default=True)
@click.option("--strict", is_flag=True, help="exit 1 when a target is missed")
@click.option("--smoke", is_flag=True, hidden=True, help="tiny shapes, for tests of this command")
def bench(repeat, hardware, strict, smoke) -> None:
    """Benchmark the simulator's own wall time per case (lowering included), against targets."""
    if repeat < 1:
        _fail(f"--repeat = {repeat}: must be >= 1")
    try:
        hw = tilesim.resolve_hardware(hardware)
    except ValueError as e:
        _fail(str(e))
    con = _console()
    cases = _bench_cases(smoke)
    tab = Table(title=f"simulator wall time, {repeat} run(s) per case, on {hw.display_name}")
    for col in ("case", "median s", "min s", "predicted ms"):
        tab.add_column(col, justify="left" if col == "case" else "right")
    medians = []
    for name, cfg in cases:
        walls = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            r = tilesim.simulate(cfg, hw)
            walls.append(time.perf_counter() - t0)
        med = statistics.median(walls)
        medians.append(med)
        tab.add_row(name, f"{med:.4f}", f"{min(walls):.4f}", f"{r.time_s * 1e3:.3f}")
    con.print(tab)
    small, large, naive, _ = medians
    ratio = large / small if small > 0 else float("inf")
    con.print(f"ratio {cases[1][0]} / {cases[0][0]}: {ratio:.2f}")
    checks = [
        (f"{cases[0][0]} median <= 0.25 s", small <= 0.25),
        (f"{cases[1][0]} <= 3x {cases[0][0]}", ratio <= 3.0),
        (f"{cases[2][0]} median <= 1 s", naive <= 1.0),
    ]
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
