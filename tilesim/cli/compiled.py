"""What ``tilesim simulate`` does with a compiled kernel (issue #10): the compiler's registers,
static shared memory and the SASS k-loop's integer overhead put into the tile program, the
estimate-against-SASS table, and ``tilesim simulate --cu FILE --kernel NAME --program FILE``."""

from __future__ import annotations

import dataclasses
import json
import runpy
from pathlib import Path

import click
from rich.table import Table

import tilesim
from tilesim.program import TileProgram


def inform(program: TileProgram, compiled: dict, *, apply_mix: bool = True, err: bool = False):
    """``program`` with the compiled kernel's figures in place of the estimates: its registers, its
    static shared memory when above the program's (dynamic shared memory is the program's to say),
    and, when the SASS k-loop was read, the loop step's integer overhead
    (:func:`validation.harness.sass.apply_loop_mix`). Spills are reported, not charged (the tile
    program has no local-memory traffic). Prints one line per change (on stderr when ``err``) and
    returns ``(program, notes)`` with ``notes["mix"]`` (SASS and model classes) when there was one."""
    from validation.harness import sass

    ln = program.launch
    smem = max(ln.smem_bytes_per_block, compiled["static_smem_bytes"])
    click.echo(f"registers: {compiled['regs_per_thread']} (nvcc {compiled['nvcc_version'].split(',')[0]}, "
               f"{compiled['arch']}; the model's estimate was {ln.regs_per_thread})", err=err)
    if compiled["static_smem_bytes"]:
        click.echo(f"shared memory: {compiled['static_smem_bytes']} B static (nvcc) against the program's "
                   f"{ln.smem_bytes_per_block} B per block; using {smem} B", err=err)
    if compiled["spill_store_bytes"] or compiled["spill_load_bytes"]:
        click.echo(f"warning: spills: {compiled['spill_store_bytes']} B stored, {compiled['spill_load_bytes']} B "
                   f"loaded per thread ({compiled['local_bytes']} B stack frame); the model does not charge "
                   "local-memory traffic", err=err)
    program = dataclasses.replace(program, launch=dataclasses.replace(
        ln, regs_per_thread=compiled["regs_per_thread"], smem_bytes_per_block=smem))
    notes: dict = {}
    mix = compiled.get("loop_mix")
    if compiled.get("sass_missing"):
        click.echo(f"SASS not read: {compiled['sass_missing']}", err=err)
    elif mix is None:
        click.echo("SASS: the kernel has no loop (no backward branch); the model's integer estimate stays", err=err)
    else:
        model = sass.program_mix(program)
        unroll = sass.unroll_factor(mix, program)
        if apply_mix:
            program, per_warp, unroll = sass.apply_loop_mix(program, mix)
            click.echo(f"integer overhead: {per_warp:g} instructions per warp and k-step from the SASS loop "
                       f"(the model's estimate was {model['other']:g})"
                       + (f"; the loop is unrolled {unroll}x" if unroll > 1 else ""), err=err)
        if mix["classes"].get("LDL/STL"):
            click.echo(f"warning: the loop issues {mix['classes']['LDL/STL']} local loads/stores (spills) per "
                       "iteration; not charged", err=err)
        notes["mix"] = {"sass": mix, "model": model, "unroll": unroll, "applied": apply_mix}
    return program, notes


def mix_table(notes: dict) -> Table:
    """Warp instructions per warp and k-step: the model's estimate against the SASS loop, per class."""
    mix, model, unroll = notes["sass"], notes["model"], notes["unroll"]
    per = {c: n / unroll for c, n in mix["classes"].items()}
    sass_cls = {"FFMA": per.get("FFMA", 0), "HMMA": per.get("HMMA", 0),
                "LDG": per.get("LDG", 0), "LDGSTS": per.get("LDGSTS", 0),
                "LDS": per.get("LDS", 0) + per.get("LDSM", 0), "STS": per.get("STS", 0),
                "BAR": per.get("BAR", 0), "other": mix["other"] / unroll}
    t = Table(title="inner loop, warp instructions per warp and k-step (model estimate vs SASS"
              + (f", loop unrolled {unroll}x" if unroll > 1 else "") + ")", title_justify="left")
    for col in ("class", "model", "SASS"):
        t.add_column(col, justify="left" if col == "class" else "right")
    for cls, n in sass_cls.items():
        if n or model.get(cls):
            t.add_row(cls + (" (integer overhead)" if cls == "other" else ""), f"{model.get(cls, 0):g}", f"{n:g}")
    detail = ", ".join(f"{c} {n:g}" for c, n in sorted(per.items(), key=lambda kv: -kv[1])
                       if c not in ("FFMA", "HMMA", "LDG", "LDGSTS", "LDS", "LDSM", "STS", "BAR"))
    t.caption = f"SASS other: {detail}" if detail else None
    return t


def load_program(path: str) -> TileProgram:
    """The tile program of a Python file: its ``PROGRAM`` (a TileProgram, or a tuple of one) or the
    result of its ``program()``. ``ValueError`` (one line) otherwise."""
    p = Path(path)
    if p.suffix != ".py":
        raise ValueError(f"--program {path}: must be a Python file defining PROGRAM or program() "
                         "(the tile program, as in the README's 'Describing your own kernel')")
    if not p.is_file():
        raise ValueError(f"--program {path}: no such file")
    try:
        ns = runpy.run_path(str(p))
    except Exception as e:  # the user's file: any error is one line naming it
        raise ValueError(f"--program {path}: running it raised {type(e).__name__}: {e}") from None
    prog = ns.get("PROGRAM")
    if prog is None and callable(ns.get("program")):
        prog = ns["program"]()
    if isinstance(prog, tuple) and len(prog) == 1:
        prog = prog[0]
    if not isinstance(prog, TileProgram):
        raise ValueError(f"--program {path}: defines no PROGRAM or program() giving one TileProgram "
                         f"(got {type(prog).__name__})")
    return prog


def simulate_cu(cu: str, kernel: str, program_path: str, hardware: str, as_json: bool, exact: bool,
                print_report) -> None:
    """``tilesim simulate --cu FILE --kernel NAME --program FILE``: compile the user's kernel for the
    GPU's architecture, put its registers, shared memory and k-loop mix into the program, simulate.
    ``print_report(program, result, notes)`` prints the human report. Raises ``ValueError``."""
    from validation.harness import compile as nvcc

    hw = tilesim.resolve_hardware(hardware)
    try:
        arch = nvcc.arch_for(hw)
        program = load_program(program_path)
        compiled = nvcc.compile_file(cu, kernel, arch)
    except nvcc.CompileError as e:
        raise ValueError(str(e)) from None
    click.echo(f"kernel: {compiled['kernel']} of {cu}", err=as_json)
    program, notes = inform(program, compiled, err=as_json)
    result = tilesim.simulate(program, hw, steady_state=not exact)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    print_report(program, result, notes)
