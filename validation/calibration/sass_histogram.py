"""Opcode histograms of compiled kernels (cuobjdump -sass), for reading what the compiler emitted.

:func:`hot_loop` counts the opcodes of one function's busiest loop body (between a backward branch
and its target): the calibration divides measured times by these counts, so that a rate counts
every issued instruction, loop overhead included, as the simulator does.

``python -m validation.calibration.sass_histogram CUBIN_DIR OUT.json`` counts, per kernel function, each SASS
opcode (without modifiers) in every ``*.cubin`` below CUBIN_DIR (CuPy's kernel cache holds the
cubins it compiled). Needs ``cuobjdump`` (on the GPU machine).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

_FUNC = re.compile(r"^\s*Function : (\S+)")
_INSTR = re.compile(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)")
_ADDR_INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)([^;]*)")


def histogram(sass: str) -> dict[str, dict[str, int]]:
    out: dict[str, Counter] = {}
    cur = None
    for line in sass.splitlines():
        m = _FUNC.match(line)
        if m:
            cur = out.setdefault(m.group(1), Counter())
            continue
        if cur is not None:
            m = _INSTR.search(line)
            if m:
                cur[m.group(1)] += 1
    return {k: dict(v) for k, v in out.items()}


def function_sass(sass: str, name: str) -> list[tuple[int, str, str]]:
    """(address, opcode, operands) of every instruction of function ``name`` in a cuobjdump listing."""
    out, cur = [], None
    for line in sass.splitlines():
        m = _FUNC.match(line)
        if m:
            cur = m.group(1)
            continue
        if cur == name:
            m = _ADDR_INSTR.search(line)
            if m:
                out.append((int(m.group(1), 16), m.group(3), m.group(4).strip()))
    if not out:
        raise ValueError(f"no function {name!r} in the SASS listing")
    return out


def loop_bodies(instrs: list[tuple[int, str, str]]) -> list[Counter]:
    """Opcode counts of every loop body: from a backward branch's target to the branch."""
    bodies = []
    for addr, op, operands in instrs:
        m = re.match(r"(0x[0-9a-f]+)", operands)
        if op == "BRA" and m and int(m.group(1), 16) < addr:
            lo = int(m.group(1), 16)
            bodies.append(Counter(o for a, o, _ in instrs if lo <= a <= addr))
    return bodies


def hot_loop(sass: str, name: str, key: str = "FFMA") -> Counter:
    """Opcode counts of the loop body of ``name`` with the most ``key`` instructions."""
    bodies = loop_bodies(function_sass(sass, name))
    if not bodies:
        raise ValueError(f"{name}: no loop in the SASS")
    return max(bodies, key=lambda c: (c[key], -sum(c.values())))


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 2:
        print("usage: python -m validation.calibration.sass_histogram CUBIN_DIR OUT.json", file=sys.stderr)
        return 2
    result: dict = {}
    for cubin in sorted(f for f in Path(args[0]).expanduser().rglob("*") if f.is_file()):
        p = subprocess.run(["cuobjdump", "-sass", str(cubin)], capture_output=True, text=True)
        if p.returncode == 0:
            result.update(histogram(p.stdout))
    Path(args[1]).write_text(json.dumps(result, indent=1, sort_keys=True))
    print(f"{len(result)} kernels -> {args[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
