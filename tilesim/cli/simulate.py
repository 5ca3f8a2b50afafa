"""``tilesim simulate <family>`` (one option per field of the family's config) and ``tilesim families``."""

from __future__ import annotations

import dataclasses
import json

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

import tilesim
from tilesim.cli.base import (
    OneLineErrors,
    check_output,
    cli,
    console,
    fail,
    fmt_bytes,
    fmt_count,
    load_families,
    save_figure,
)
from tilesim.cli.progress import progress
from tilesim.kernels import registry
from tilesim.sweep import COMPUTE_BOUND_FLOP_PER_BYTE

# ----------------------------------------------------------------------------------------------
# simulate <family>: one option per configuration field

_OWN_OPTIONS = ("hardware", "json", "timeline", "exact", "compile", "l2_start", "help")
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
        click.Option(["--timeline", "timeline_png"], default=None,
                     help="also write the block-slot timeline of one SM to this PNG"),
        click.Option(["--exact"], is_flag=True,
                     help="simulate every step (no steady-state holds; slower)"),
        click.Option(["--l2-start", "l2_start"], type=click.Choice(tilesim.L2_STARTS), default="flushed",
                     show_default=True,
                     help="the L2 at the start: flushed (full of an earlier write's dirty lines, as after "
                          "the validation harness's flush or a kernel that wrote its output) or clean"),
        click.Option(["--compile", "compile_"], is_flag=True,
                     help="build the kernel with nvcc for the GPU's architecture (no GPU needed) and use "
                          "its register count, static shared memory and (with nvdisasm) its k-loop's "
                          "integer instructions from the SASS instead of the model's estimates"),
    ]

    def run(hardware, as_json, timeline_png, exact, l2_start, compile_, **knobs):
        _simulate(fam, {k: v for k, v in knobs.items() if v is not None}, hardware, as_json,
                  timeline_png, exact, compile_, l2_start)

    doc = fam.description or f"Simulate one {fam.name} kernel."
    return _FamilyCommand(fam, name=fam.name, params=params, callback=run, help=doc,
                          epilog="Knob values are checked by the family's configuration; "
                                 "`tilesim families " + fam.name + "` lists them.")


class _SimulateGroup(OneLineErrors):
    def list_commands(self, ctx):
        return list(load_families())

    def get_command(self, ctx, name):
        fams = load_families()
        if name not in fams:
            try:
                registry.get(name)
            except ValueError as e:
                raise click.UsageError(str(e), ctx) from None
        try:
            return _family_command(fams[name])
        except ValueError as e:
            raise click.UsageError(str(e), ctx) from None


@cli.group(cls=_SimulateGroup, invoke_without_command=True)
@click.option("--cu", "cu", default=None, metavar="FILE",
              help="your own CUDA file: compile it with nvcc (no GPU) and simulate --program with its figures")
@click.option("--kernel", "kernel", default=None, metavar="NAME", help="the kernel of --cu to read")
@click.option("--program", "program", default=None, metavar="FILE.py",
              help="the kernel's tile program: a Python file defining PROGRAM or program()")
@click.option("--hardware", "cu_hardware", default="h200", show_default=True, help="GPU, with --cu")
@click.option("--json", "cu_json", is_flag=True, help="with --cu: print result.to_dict() as JSON only")
@click.option("--exact", "cu_exact", is_flag=True, help="with --cu: simulate every step")
@click.pass_context
def simulate(ctx, cu, kernel, program, cu_hardware, cu_json, cu_exact) -> None:
    """Simulate one kernel: `tilesim simulate <family> --<knob> VALUE ...` (`tilesim families`), or
    your own: `tilesim simulate --cu FILE --kernel NAME --program PROGRAM.py`."""
    given = [o for o, v in (("--cu", cu), ("--kernel", kernel), ("--program", program)) if v is not None]
    if ctx.invoked_subcommand is not None:
        if given or cu_json or cu_exact or cu_hardware != "h200":
            fail(f"{', '.join(given) or 'these options'} go without a family (`tilesim simulate --cu FILE "
                 "--kernel NAME --program FILE`); a family's options come after its name")
        return
    if not given:
        click.echo(ctx.get_help())
        return
    missing = [o for o in ("--cu", "--kernel", "--program") if o not in given]
    if missing:
        fail(f"{', '.join(missing)} missing: your own kernel needs --cu FILE --kernel NAME --program FILE")
    from tilesim.cli.compiled import simulate_cu

    def report(prog, result, notes):
        _print_report(console(), None, None, tilesim.resolve_hardware(cu_hardware), result, (prog,), notes)

    try:
        simulate_cu(cu, kernel, program, cu_hardware, cu_json, cu_exact, report)
    except ValueError as e:
        fail(str(e))


def _check_choices(fam: registry.KernelFamily, cfg) -> None:
    """Knobs with listed choices must take one of them (for configs that do not check it themselves)."""
    for knob in fam.knobs():
        v = getattr(cfg, knob.name)
        if knob.choices and v not in knob.choices:
            raise ValueError(f"{fam.config.__name__}.{knob.name} = {v!r}: must be one of "
                             f"{', '.join(map(str, knob.choices))}")


def _try(fam, values: dict, hw):
    cfg = fam.make(**values)
    _check_choices(fam, cfg)
    fam.check_fits(cfg, hw)
    return cfg


def _config_with_working_defaults(fam, values: dict, hw):
    """The configuration of ``values`` (the knobs given) over the family's defaults; when the
    defaults do not work with what was given (``--variant naive`` with the 128x128 default tile is
    16,384 threads), the knobs not given are taken from the first built-in scenario configuration
    of this family that agrees with every knob given (fewest changed knobs first). Returns
    ``(config, note)``; raises the first ``ValueError``, with the knobs to set, when none works."""
    try:
        return _try(fam, values, hw), ""
    except ValueError as first:
        error = first
    if any(f".{k} = " in str(error) for k in values):  # a knob the user gave breaks a rule: say so
        raise error
    defaults = {k.name: k.default for k in fam.knobs()}
    chosen = {k.name: values.get(k.name, k.default) for k in fam.knobs() if k.choices}
    tried = set()
    candidates = []
    for name, knobs in _scenario_knob_sets(fam.name):
        if any(k in knobs and knobs[k] != v for k, v in {**chosen, **values}.items()):
            continue
        fill = {k: v for k, v in knobs.items() if k not in values and k not in fam.problem_fields
                and v != defaults.get(k)}
        key = tuple(sorted(fill.items(), key=str))
        if fill and key not in tried:
            tried.add(key)
            candidates.append((len(fill), name, fill))
    for _, name, fill in sorted(candidates, key=lambda c: c[0]):
        try:
            cfg = _try(fam, {**values, **fill}, hw)
        except ValueError:
            continue
        given = ", ".join(f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}")
                          if v is not False else f"--no-{k.replace('_', '-')}" for k, v in fill.items())
        return cfg, f"the defaults do not fit ({error}); using {given} (from scenario {name})"
    unset = [k.name for k in fam.knobs() if k.name not in values and k.name not in fam.problem_fields]
    raise ValueError(f"{error} (with the default tile; set the tile knobs yourself: "
                     f"{', '.join('--' + k.replace('_', '-') for k in unset[:8])})") from None


def _scenario_knob_sets(family: str):
    """``(scenario name, knobs)`` of the built-in scenarios' explicit configurations of ``family``."""
    from tilesim.sweep import available_scenarios, load_scenario

    for name in available_scenarios():
        try:
            sc = load_scenario(name)
        except ValueError:
            continue
        if sc.family != family:
            continue
        for knobs in sc.knob_sets():
            yield name, knobs


def _check_compile_target(hw) -> None:
    """``--compile`` on a GPU nvcc cannot target (Apple, unknown) is one line, before any knob check."""
    from validation.harness import compile as nvcc

    try:
        nvcc.arch_for(hw)
    except nvcc.CompileError as e:
        raise ValueError(str(e)) from None


def _compiled_programs(fam, cfg, hw, as_json: bool):
    """``cfg`` with ``regs_per_thread`` set to what nvcc allocates for its kernels (the maximum over
    the kernels it launches), compiled for ``hw``'s architecture, and its programs informed by the
    compile (:func:`tilesim.cli.compiled.inform`: static shared memory, and the SASS k-loop's
    integer overhead when the configuration launches one kernel). Prints what it used (on stderr
    under ``--json``). Returns ``(cfg, programs, notes)``. Errors (no nvcc, nvcc fails, Apple GPU,
    no CUDA source) are one line."""
    from tilesim.cli.compiled import inform
    from validation.harness import compile as nvcc  # the CLI may import validation, lazily

    try:
        arch = nvcc.arch_for(hw)  # also checked before the configuration (see _simulate)
        if not any(f.name == "regs_per_thread" for f in dataclasses.fields(cfg)):
            raise ValueError(f"{fam.name}: its configuration has no regs_per_thread; --compile cannot feed it")
        if cfg.regs_per_thread is not None:
            raise ValueError("give --regs-per-thread or --compile, not both")
        res = nvcc.compiled_resources(fam.name, cfg, arch)
    except nvcc.CompileError as e:
        raise ValueError(str(e)) from None
    estimates = tilesim.lower(cfg)  # the program as the model estimates it (cfg has no register count yet)
    cfg = dataclasses.replace(cfg, regs_per_thread=res["regs_per_thread"])
    if len(estimates) == 1 and len(res["kernels"]) == 1:
        program, notes = inform(estimates[0], {**res, "loop_mix": next(iter(res["kernels"].values()))["loop_mix"]},
                                err=as_json)
        return cfg, (program,), notes
    # several kernels: the maximum register count for every launch, as before; no per-kernel mix
    estimate = max(p.launch.regs_per_thread for p in estimates)
    click.echo(f"registers: {res['regs_per_thread']} (nvcc {res['nvcc_version'].split(',')[0]}, {res['arch']}; "
               f"the model's estimate was {estimate}; {len(res['kernels'])} kernels: their SASS loop mix "
               "and static shared memory are not used)", err=as_json)
    if res["spill_store_bytes"] or res["spill_load_bytes"]:
        click.echo(f"warning: spills: {res['spill_store_bytes']} B stored, {res['spill_load_bytes']} B loaded per "
                   f"thread ({res['local_bytes']} B stack frame); the model does not charge local-memory traffic",
                   err=as_json)
    return cfg, tilesim.lower(cfg), {}


def _simulate(fam, values: dict, hardware: str, as_json: bool, timeline_png, exact: bool,
              compile_: bool = False, l2_start: str = "flushed") -> None:
    missing = [f for f in _required_fields(fam) if f not in values]
    if missing:
        fail(f"{fam.name}: missing {', '.join('--' + m.replace('_', '-') for m in missing)} "
              f"(no default; `tilesim families {fam.name}` lists the knobs)")
    check_output(timeline_png, "--timeline")
    notes: dict = {}
    try:
        hw = tilesim.resolve_hardware(hardware)
        if compile_:
            _check_compile_target(hw)
        cfg, filled = _config_with_working_defaults(fam, values, hw)
        if filled:
            click.echo(f"note: {filled}", err=True)
        kernel = cfg
        if compile_:
            cfg, kernel, notes = _compiled_programs(fam, cfg, hw, as_json)
            fam.check_fits(cfg, hw)
        if exact:  # every step simulated: seconds to minutes, so show how far it is
            result = _simulate_with_progress(kernel, hw, timeline_png is not None, fam.full_label(cfg), l2_start)
        else:
            result = tilesim.simulate(kernel, hw, timeline=timeline_png is not None, l2_start=l2_start)
        programs = () if as_json else tilesim.lower(kernel)
    except ValueError as e:
        fail(str(e))
    if timeline_png is not None:
        from tilesim.plots import timeline_figure

        path = save_figure(timeline_figure(result, kernel=fam.full_label(cfg)), timeline_png)
        click.echo(f"wrote timeline to {path}", err=as_json)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    _print_report(console(), fam, cfg, hw, result, programs, notes)


def _simulate_with_progress(kernel, hw, timeline: bool, label: str, l2_start: str = "flushed"):
    """``tilesim.simulate(..., steady_state=False)`` with its progress on standard error (a bar on a
    terminal, a line per percent when piped); a rerun at the SM clock of the kernel's tensor load
    starts again from 0%, named so."""
    name = f"simulating {label} step by step"
    with progress(name, counts=False) as update:
        state = {"last": 0.0, "run": 1}

        def on_progress(fraction: float) -> None:
            if fraction < state["last"]:
                state["run"] += 1
                update.restart(f"{name} (run {state['run']}: at the SM clock under this tensor load)")
            state["last"] = fraction
            update(round(1000 * fraction), 1000)

        return tilesim.simulate(kernel, hw, timeline=timeline, steady_state=False, on_progress=on_progress,
                                l2_start=l2_start)


def _print_report(con: Console, fam, cfg, hw, r, programs, notes=None) -> None:
    """The human report; ``fam`` and ``cfg`` are None for a hand-written program (``--cu``)."""
    if fam is None:
        con.print(f"[bold]{escape(programs[0].name)}[/bold]  your tile program on {escape(hw.display_name)}"
                  + (" (calibrated)" if hw.calibrated else ""))
        counts = {"min_hbm_bytes": sum(p.min_hbm_bytes for p in programs)}
    else:
        size = " x ".join(f"{f}={getattr(cfg, f)}" for f in fam.problem_fields)
        con.print(f"[bold]{escape(fam.full_label(cfg))}[/bold]  {fam.name} {escape(size)} on "
                  f"{escape(hw.display_name)}" + (" (calibrated)" if hw.calibrated else ""))
        counts = fam.counts(cfg)
    summary = Table(show_header=False, box=None, pad_edge=False)
    summary.add_column(style="bold")
    summary.add_column()
    summary.add_row("time", f"{r.time_s * 1e3:.4f} ms")
    # one speed line: TFLOP/s for compute-heavy kernels, compulsory bytes per second for the others
    tensor = r.utilization.get("tensor", 0.0) > 0 and hw.has("tensor_flops_per_s")
    peak, what = (hw.tensor_flops_per_s, "the datasheet's dense tensor peak") if tensor else (hw.fp32_flops_per_s,
                                                                                         "FP32 peak")
    need = counts.get("min_hbm_bytes", 0)
    if r.flops > 0 and (not need or r.flops >= COMPUTE_BOUND_FLOP_PER_BYTE * need):
        summary.add_row("throughput", f"{r.tflops:.2f} TFLOP/s = {100 * r.flops / r.time_s / peak:.1f}% "
                        f"of {what} ({peak / 1e12:.1f} TFLOP/s)")
    elif need:
        bw = need / r.time_s
        summary.add_row("bandwidth", f"{bw / 1e12:.3f} TB/s of compulsory HBM bytes = "
                        f"{100 * bw / hw.hbm_bytes_per_s:.1f}% of HBM peak ({hw.hbm_bytes_per_s / 1e12:.2f} TB/s)")
    summary.add_row("bound", r.bound)
    if r.sm_clock_hz and abs(r.sm_clock_hz - hw.sm_clock_hz) > 1e-3 * hw.sm_clock_hz:
        summary.add_row("SM clock", f"{r.sm_clock_hz / 1e9:.3f} GHz under this tensor load "
                        f"({hw.sm_clock_hz / 1e9:.3f} GHz without; measured curve, clock_load_probe)")
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
    tr.add_row("HBM", "read", fmt_bytes(t.hbm_read_bytes))
    tr.add_row("HBM", "write", fmt_bytes(t.hbm_write_bytes))
    if t.hbm_flushed_writeback_bytes:
        tr.add_row("HBM", "earlier dirty lines written back", fmt_bytes(t.hbm_flushed_writeback_bytes))
    tr.add_row("L2", "load (SM requests)", fmt_bytes(t.l2_load_bytes))
    tr.add_row("L2", "store", fmt_bytes(t.l2_store_bytes))
    tr.add_row("L2", "hit rate", f"{100 * t.l2_hit_rate:.1f}%")
    tr.add_row("L1", "wavefronts", fmt_count(t.l1_wavefronts))
    tr.add_row("shared", "bytes (stored + loaded)", fmt_bytes(t.smem_bytes))
    tr.add_row("shared", "wavefronts", fmt_count(t.smem_wavefronts))
    tr.add_row("shared", "bank-conflict wavefronts", fmt_count(t.smem_conflict_wavefronts))
    tr.add_row("registers", "operand bytes", fmt_bytes(t.register_operand_bytes))
    tr.add_row("issue", "warp instructions", fmt_count(t.instructions))
    tr.add_row("issue", "of which FFMA", fmt_count(t.ffma))
    con.print(tr)
    if notes and notes.get("mix"):
        from tilesim.cli.compiled import mix_table

        con.print(mix_table(notes["mix"]))


# ----------------------------------------------------------------------------------------------
# families


@cli.command()
@click.argument("name", required=False)
def families(name) -> None:
    """The kernel families and their knobs (NAME: only that family)."""
    fams = load_families()
    if name is not None:
        try:
            fams = {name: registry.get(name)}
        except ValueError as e:
            fail(str(e))
    con = console()
    if not fams:
        con.print("no kernel family is registered")
        return
    for fam in fams.values():
        problem = ", ".join(fam.problem_fields) or "none"
        con.print(f"[bold]{escape(fam.name)}[/bold]: {escape(fam.description or '(no description)')}")
        con.print(f"problem fields: {escape(problem)}; run one with `tilesim simulate {escape(fam.name)} "
                  "--<knob> VALUE ...`", soft_wrap=True)
        required = _required_fields(fam)
        tab = Table()
        for col in ("knob", "type", "default", "choices", "doc"):
            tab.add_column(col, overflow="fold")
        for k in fam.knobs():
            default = "(required)" if k.name in required else str(k.default)
            tab.add_row(k.name, k.type, default, ", ".join(map(str, k.choices)), Text(k.doc))
        con.print(tab)
