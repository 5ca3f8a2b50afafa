"""Opcode histograms of compiled kernels (cuobjdump -sass), for reading what the compiler emitted.

``python -m validation.sass_histogram CUBIN_DIR OUT.json`` counts, per kernel function, each SASS
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


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 2:
        print("usage: python -m validation.sass_histogram CUBIN_DIR OUT.json", file=sys.stderr)
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
