"""Compiler register counts of softmax kernels over a grid of every variant and knob (issue #10).

CPU only (nvcc, no GPU). Every softmax kernel of :func:`grid` (variants, threads 32..1024, vector,
unroll, caches; the registers cache at 1024 and 4096 columns, its array length being a template
argument), compiled from ``validation/families/softmax/softmax.cu`` (the runner's ``batch_source``:
the suite's templates and options) with ``nvcc -cubin -arch=sm_90 -Xptxas -v``, one row per kernel:
the knobs, ptxas's ``Used N registers`` (``regs_per_thread``) and stack frame (``local_bytes``). No
time is measured or read.

The grid is where ``REGS_SINGLE_BLOCK_SNAP`` (``tilesim/kernels/softmax/config.py``) was read from
(the classic kernels at unroll x vector = 16 take 36-44 registers at 128..512 threads and 32 at 1024),
so it is not a held-out set for that term; ``tests/test_register_estimates.py`` reports the rule's
figures on it beside the suite's. The counts are offline nvcc's; the suite's are CuPy NVRTC's on the
H200 (``python -m validation.harness.compile softmax`` compares them).

``python -m validation.studies.softmax_register_counts`` writes
``validation/results/h200/studies/softmax_regs/grid.csv`` (about a minute on 2 cores).
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

from tilesim.kernels.softmax.config import SoftmaxConfig
from validation.families.softmax import runner
from validation.harness.compile import nvcc_version
from validation.studies.register_counts import ptxas_report, read_rows, write_rows

OUT_DIR = Path(__file__).resolve().parents[1] / "results" / "h200" / "studies" / "softmax_regs"
ROWS = 4096
FIELDS = ("cols", "variant", "unit", "tree", "cache", "vector", "threads", "unroll")


def grid() -> dict[str, SoftmaxConfig]:
    """Every valid configuration of the grid, one per kernel (by template instance)."""
    out: dict[str, SoftmaxConfig] = {}
    kinds = (("thread_row", "warp", "sequential"), ("warp_shuffle", "warp", "sequential"),
             ("block_tree", "warp", "sequential"), ("block_tree", "warp", "interleaved"),
             ("online", "warp", "sequential"), ("online", "block", "sequential"))
    for (variant, unit, tree), threads, vector in itertools.product(kinds, (32, 64, 128, 256, 512, 1024), (1, 4)):
        for cache, unroll, cols in itertools.chain(
                itertools.product(("none", "shared"), (1, 2, 4, 8), (4096,)),
                itertools.product(("registers",), (1,), (1024, 4096))):
            try:
                c = SoftmaxConfig(rows=ROWS, cols=cols, variant=variant, unit=unit, tree=tree, cache=cache,
                                  vector=vector, threads=threads, unroll=unroll)
            except ValueError:
                continue
            if cache == "shared" and c.smem_bytes > 227 * 1024:
                continue
            out.setdefault(runner.kernel_name(c), c)
    return out


def compile_counts(cfgs: dict[str, SoftmaxConfig]) -> list[dict]:
    """One row per kernel: the knobs, ``regs_per_thread``, ``local_bytes``, ``nvcc``."""
    found = ptxas_report(runner.batch_source(cfgs.values()), runner.OPTIONS)
    version = nvcc_version()
    rows = []
    for _name, c in sorted(cfgs.items()):
        k = found[runner.mangled_name(c)]
        rows.append({**{f: getattr(c, f) for f in FIELDS}, "regs_per_thread": k["regs_per_thread"],
                     "local_bytes": k["local_bytes"], "nvcc": version})
    return rows


def read(path: Path) -> list[tuple[SoftmaxConfig, int]]:
    """(configuration, compiler registers) per row of a file this script wrote."""
    ints = ("cols", "vector", "threads", "unroll")
    return [(SoftmaxConfig(rows=ROWS, **kw), regs) for kw, regs in read_rows(path, FIELDS, ints)]


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args:
        print(f"error: {args[0]!r}: no arguments (writes {OUT_DIR / 'grid.csv'})", file=sys.stderr)
        return 2
    rows = compile_counts(grid())
    path = OUT_DIR / "grid.csv"
    write_rows(rows, path)
    print(f"grid: {len(rows)} kernels -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
