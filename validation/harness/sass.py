"""The inner loop's instruction mix from a cubin's SASS (issue #10, compiler-informed prediction).

:func:`disassemble` runs ``nvdisasm -c`` on a cubin (``cuobjdump -sass`` when only that is on the
PATH; neither needs a GPU). :func:`parse_sass` splits the listing per entry function,
:func:`main_loop` finds the k-loop: the body of a backward branch (from the branch's target to the
branch), the one with the most math instructions (FFMA, HMMA, HGMMA, ...), the shortest on a tie
(the innermost). :func:`loop_mix` counts its instructions per class (:data:`CLASSES`) and
``other``: every instruction that is neither math, nor a memory access, nor a barrier -- the
address, index, predicate, loop and move instructions that the families estimate as their integer
overhead (``Compute("int", ...)``; e.g. the GEMM family's ``OTHER_FIXED_PER_WARP_STEP`` and
``OTHER_PER_GLOBAL_LOAD``). One SASS instruction is one warp instruction of each warp.

:func:`apply_loop_mix` puts that count in a tile program's loop step in place of the estimate.
The mix is per loop iteration; when the compiler unrolled the loop (its FFMA count an integer
multiple of the step's), the counts are divided by that factor.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace

#: classes of SASS opcodes shown by ``tilesim simulate --compile`` (an opcode not listed is "other")
CLASSES = {
    "FFMA": ("FFMA",),
    "FP32 other": ("FADD", "FMUL", "FMNMX", "FSETP", "FSEL", "FCHK", "FMUL32I", "FADD32I", "FFMA32I", "FSET"),
    "HMMA": ("HMMA", "HGMMA", "IMMA", "IGMMA", "DMMA", "QGMMA", "BMMA"),
    "MUFU": ("MUFU",),
    "LDG": ("LDG", "LD"),
    "LDGSTS": ("LDGSTS",),
    "LDS": ("LDS",),
    "LDSM": ("LDSM",),
    "STS": ("STS",),
    "STG": ("STG", "ST", "RED", "ATOMG", "ATOM"),
    "LDL/STL": ("LDL", "STL"),
    "BAR": ("BAR", "SYNCS", "ARRIVES"),
    "SHFL": ("SHFL",),
    "IMAD": ("IMAD", "IMAD32I"),
    "IADD": ("IADD3", "IADD", "IADD32I", "VIADD", "VIADDMNMX"),
    "ISETP": ("ISETP",),
    "LOP3/SHF/LEA": ("LOP3", "LOP", "SHF", "SHL", "SHR", "LEA"),
    "MOV/SEL": ("MOV", "SEL", "PRMT", "CS2R", "S2R", "LDC", "P2R", "R2P"),
    "uniform": (),  # every opcode that starts with U, S2UR, R2UR, LDCU
    "branch": ("BRA", "BSSY", "BSYNC", "WARPSYNC", "EXIT", "CALL", "RET", "JMP", "BREAK", "NOP"),
}
#: classes that are not the integer overhead: math, memory accesses and barriers
NOT_OTHER = ("FFMA", "FP32 other", "HMMA", "MUFU", "LDG", "LDGSTS", "LDS", "LDSM", "STS", "STG", "LDL/STL",
             "BAR", "SHFL")
MATH = ("FFMA", "HMMA")
_BY_OPCODE = {op: cls for cls, ops in CLASSES.items() for op in ops}

_INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)(.*?);")
_LABEL = re.compile(r"^(\.L[\w.]+):")
_FUNC = re.compile(r"^\s*\.text\.(\S+):")
_TARGET = re.compile(r"`\((\.L[\w.]+)\)")


class SassUnavailable(RuntimeError):
    """No disassembler on the PATH (the message names what is missing, on one line)."""


def classify(opcode: str) -> str:
    """The class of a SASS opcode (without modifiers), see :data:`CLASSES`."""
    if opcode in _BY_OPCODE:
        return _BY_OPCODE[opcode]
    if opcode.startswith("U") or opcode in ("S2UR", "R2UR", "LDCU"):
        return "uniform"
    return "MOV/SEL" if opcode.startswith("MOV") else "unclassified"


def disassembler() -> list[str]:
    """The command that prints a cubin's SASS: ``nvdisasm -c`` or ``cuobjdump -sass``; raises
    :class:`SassUnavailable` naming both when neither is on the PATH."""
    path = shutil.which("nvdisasm")
    if path:
        return [path, "-c"]
    path = shutil.which("cuobjdump")
    if path:
        return [path, "-sass"]
    raise SassUnavailable("neither nvdisasm nor cuobjdump is on the PATH: the inner loop's instruction mix "
                          "needs one of them (CUDA toolkit, or pip install nvidia-cuda-nvdisasm)")


def disassemble(cubin_path: str, timeout_s: float = 120) -> str:
    """The SASS listing of a cubin (see :func:`disassembler`)."""
    cmd = [*disassembler(), str(cubin_path)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError) as e:
        raise SassUnavailable(f"{cmd[0]} failed: {e}") from None
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        raise SassUnavailable(f"{cmd[0]} failed: {last}")
    return r.stdout


def parse_sass(text: str) -> dict[str, list[dict]]:
    """Per function of a listing: its instructions in order, each ``{"addr", "opcode", "target",
    "labels"}`` (``target``: a branch's label, ``labels``: the labels that name this address).
    Understands nvdisasm's ``.text.<name>:`` sections and cuobjdump's ``Function : <name>``."""
    funcs: dict[str, list[dict]] = {}
    current: list[dict] | None = None
    pending: list[str] = []
    for line in text.splitlines():
        m = _FUNC.match(line) or re.match(r"^\s*Function : (\S+)", line)
        if m:
            current = funcs.setdefault(m.group(1), [])
            pending = []
            continue
        if current is None:
            continue
        m = _LABEL.match(line.strip())
        if m:
            pending.append(m.group(1))
            continue
        m = _INSTR.match(line)
        if m:
            t = _TARGET.search(m.group(4))
            addr = int(m.group(1), 16)
            target = t.group(1) if t else None
            if target is None and m.group(2) == "BRA":  # cuobjdump: BRA 0x1a0
                a = re.search(r"0x([0-9a-f]+)", m.group(4))
                target = int(a.group(1), 16) if a else None
            current.append({"addr": addr, "opcode": m.group(2), "target": target, "labels": pending})
            pending = []
    return funcs


def loops(instrs: list[dict]) -> list[tuple[int, int]]:
    """``(first, last)`` instruction indices of every backward branch's body (the target to the
    branch; a branch to itself, the trap after a function's ``EXIT``, is none)."""
    where: dict = {}
    for i, ins in enumerate(instrs):
        where[ins["addr"]] = i
        for lab in ins["labels"]:
            where[lab] = i
    out = []
    for i, ins in enumerate(instrs):
        if ins["opcode"] == "BRA" and ins["target"] is not None:
            j = where.get(ins["target"])
            if j is not None and j < i:  # a branch to itself is the padding after EXIT, not a loop
                out.append((j, i))
    return out


def count_classes(instrs: list[dict]) -> dict[str, int]:
    """Instructions per class (only the classes present)."""
    counts: dict[str, int] = {}
    for ins in instrs:
        c = classify(ins["opcode"])
        counts[c] = counts.get(c, 0) + 1
    return counts


def main_loop(instrs: list[dict]) -> tuple[int, int] | None:
    """The k-loop: the backward branch's body with the most math instructions (the shortest on a
    tie); ``None`` when the function has no loop."""
    best, key = None, None
    for first, last in loops(instrs):
        body = instrs[first:last + 1]
        math = sum(1 for ins in body if classify(ins["opcode"]) in MATH)
        k = (math, -len(body))
        if key is None or k > key:
            best, key = (first, last), k
    return best


def loop_mix(instrs: list[dict]) -> dict | None:
    """The k-loop's instructions per iteration: ``classes`` (per :data:`CLASSES`), ``total``,
    ``other`` (the integer overhead: not math, memory or barrier), ``first_addr``/``last_addr``;
    ``None`` when the function has no backward branch."""
    span = main_loop(instrs)
    if span is None:
        return None
    body = instrs[span[0]:span[1] + 1]
    classes = count_classes(body)
    other = sum(n for c, n in classes.items() if c not in NOT_OTHER)
    return {"classes": classes, "total": len(body), "other": other,
            "first_addr": body[0]["addr"], "last_addr": body[-1]["addr"]}


def function_mixes(text: str) -> dict[str, dict | None]:
    """:func:`loop_mix` of every function of a listing."""
    return {name: loop_mix(instrs) for name, instrs in parse_sass(text).items()}


# ----- the program side ----------------------------------------------------------------------------
def loop_phase_index(program) -> int:
    """The phase the SASS k-loop stands for: the one with the most trips (the first on a tie)."""
    return max(range(len(program.phases)), key=lambda i: (program.phases[i].trips, -i))


def _async_copies(ld) -> int:
    """Warp copy instructions of a cp.async load (a transposed lane scatters one copy per element)."""
    return sum(max((len(s) for s in w.shared_offsets if isinstance(s, tuple)), default=1)
               for w in ld.instructions)


def program_mix(program) -> dict[str, float]:
    """The loop step's warp instructions per warp in the same classes as :func:`loop_mix` (the
    model's side of the comparison): FFMA, HMMA, LDG, LDGSTS, LDS (with generic shared loads), STS,
    BAR, other (``Compute`` on the "int" and "issue" pipes plus loads' address instructions)."""
    from tilesim.program import Compute, Mma

    step = program.phases[loop_phase_index(program)].step
    warps = program.launch.warps_per_block
    out = {"FFMA": 0.0, "HMMA": 0.0, "LDG": 0.0, "LDGSTS": 0.0, "LDS": 0.0, "STS": 0.0, "BAR": 0.0,
           "other": 0.0}
    for ld in step.loads:
        if ld.dest == "bulk":
            continue
        n = (_async_copies(ld) if ld.dest == "async" else len(ld.instructions)) * ld.repeat
        out["LDGSTS" if ld.dest == "async" else "LDG"] += n
        if ld.dest == "shared":
            out["STS"] += sum(max((len(s) for s in w.shared_offsets if isinstance(s, tuple)), default=1)
                              for w in ld.instructions) * ld.repeat
        out["other"] += ld.address_instructions * len(ld.instructions) * ld.repeat
    out["STS"] += sum(len(s.instructions) * s.repeat for s in step.shared_stores)
    out["LDS"] += sum(len(s.instructions) * s.repeat for s in step.shared_loads)
    for op in step.compute:
        if isinstance(op, Mma):
            out["HMMA"] += op.count * (4 if op.scope == "warpgroup" else 1)  # a wgmma: each warp of 4
        elif isinstance(op, Compute) and op.pipe == "fma":
            out["FFMA"] += op.count
        elif isinstance(op, Compute) and op.pipe in ("int", "issue"):
            out["other"] += op.count
    out = {k: v / warps for k, v in out.items()}
    out["BAR"] = float(step.barriers)
    return out


def unroll_factor(mix: dict, program) -> int:
    """How many of the program's loop steps one SASS loop iteration holds: the ratio of FFMA (or
    HMMA) counts when it is an integer >= 2, else 1. A step with barriers repeats them when the loop
    is unrolled: when the iteration's barriers are not that multiple of the step's, the math ratio is
    the instruction's, not the loop's (a wmma m16n16k8 tf32 is four HMMA.1684 where the model counts
    two m16n8k8: 128 HMMA against 64 in a loop of one k-step and two BAR.SYNC), and it is 1."""
    model = program_mix(program)
    for cls in ("FFMA", "HMMA"):
        sass_n, model_n = mix["classes"].get(cls, 0), model[cls]
        if sass_n and model_n:
            ratio = sass_n / model_n
            n = round(ratio)
            if n < 2 or abs(ratio - n) > 0.01 * n:
                return 1
            if model["BAR"] and mix["classes"].get("BAR", 0) != n * model["BAR"]:
                return 1
            return n
    return 1


def apply_loop_mix(program, mix: dict):
    """``program`` with its loop step's integer overhead set to the SASS count: the step's
    ``Compute("int")`` operations become one of ``other`` per warp (per loop iteration divided by
    :func:`unroll_factor`) times the warps, less what the step already issues as "issue" compute and
    as loads' ``address_instructions``; where the step has no FP32-pipe compute, the SASS's "FP32 other"
    instructions count as "other" too. Returns ``(program, int_per_warp_step, unroll)``."""
    from tilesim.program import Compute

    i = loop_phase_index(program)
    phase = program.phases[i]
    step = phase.step
    warps = program.launch.warps_per_block
    unroll = unroll_factor(mix, program)
    other = mix["other"]
    if not any(isinstance(op, Compute) and op.pipe == "fma" for op in step.compute):
        # a lowering with no FP32-pipe work counts what its SASS does there (tc_gemm's tf32 rounding:
        # FSETP) among its integer overhead, so the SASS's "FP32 other" belongs to "other" here
        other += mix.get("classes", {}).get("FP32 other", 0)
    per_warp = other / unroll
    issue = sum(op.count for op in step.compute if isinstance(op, Compute) and op.pipe == "issue")
    address = sum(ld.address_instructions * len(ld.instructions) * ld.repeat for ld in step.loads)
    count = max(0.0, per_warp * warps - issue - address)
    ints = [op for op in step.compute if isinstance(op, Compute) and op.pipe == "int"]
    chain = max((op.chain for op in ints), default=0.0)
    rest = tuple(op for op in step.compute if not (isinstance(op, Compute) and op.pipe == "int"))
    dtype = ints[0].dtype if ints else "fp32"  # the families' integer work keeps the default dtype
    new_step = replace(step, compute=(*rest, Compute("int", count, dtype=dtype, chain=chain)))
    phases = list(program.phases)
    phases[i] = replace(phase, step=new_step)
    return replace(program, phases=tuple(phases)), per_warp, unroll
