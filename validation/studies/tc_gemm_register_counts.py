"""Compiler register counts of wmma / mma_sync tc_gemm configurations outside the suite (issue #10).

CPU only (nvcc, no GPU). Draws tensor-core GEMM tilings from a grid of the wmma and mma_sync kernels'
knobs (:func:`grid`: dtype, output type, B layout, block and warp tile, k-tile, shared layout, stages,
epilogue, and the rung-1 kernels that load fragments from global memory), compiles their kernels from
``validation/families/tc_gemm/tc_gemm.cu`` (``mma.batch_source``: the templates and options the suite's
NVRTC builds use) with ``nvcc -cubin -arch=sm_90 -Xptxas -v`` in batches, and writes one row per
kernel: the knobs, the block's threads and ptxas's ``Used N registers`` (``regs_per_thread``) and
stack frame (``local_bytes``). No time is measured or read.

Two disjoint seeded draws of :data:`HELDOUT` kernels each, none of them a suite kernel:

* ``dev`` (seed 1): compared with the rule while its form was chosen (it showed that ptxas hoists a
  k-tile's fragments only within the occupancy step of the kernel's least need, not whenever it
  would leave one block per SM: 36.7% within 8 registers / 79.2% equal occupancy with the latter,
  48.3% / 88.3% with the former); no constant was fitted on it;
* ``heldout`` (seed 2, none in ``dev``): drawn and compiled after the rule was final, never used to
  choose anything; ``tests/test_register_estimates.py`` reports and guards the rule's figures on both.

The rule's terms (``TcGemmConfig.register_terms``) come from the kernels' structure; its base
constants were read off the suite's compiler counts (see ``tilesim/kernels/tc_gemm/config.py``).

``python -m validation.studies.tc_gemm_register_counts [dev|heldout]`` writes
``validation/results/h200/studies/tc_gemm_regs/<which>.csv`` (about a minute each on 2 cores). The counts are offline nvcc's; the
suite's recorded counts are CuPy NVRTC's on the H200 (``python -m validation.harness.compile tc_gemm``
compares the two). wgmma kernels are left out: their count is fixed by ``setmaxnreg`` and the launch
bound, not by the tile (see ``TcGemmConfig.estimated_regs``).
"""

from __future__ import annotations

import csv
import itertools
import random
import sys
from pathlib import Path

from tilesim.kernels.tc_gemm.config import TcGemmConfig
from validation.families.tc_gemm import mma
from validation.studies.register_counts import count_rows, ptxas_report, read_rows, write_rows

OUT_DIR = Path(__file__).resolve().parents[1] / "results" / "h200" / "studies" / "tc_gemm_regs"
SHAPE = 4096  # m = n = k: the kernels do not depend on the problem size (runtime arguments)
HELDOUT = 120
BATCH = 12  # kernels per nvcc translation unit
FIELDS = ("dtype", "out_dtype", "b_layout", "instruction", "staging", "bm", "bn", "bk", "wm", "wn", "layout",
          "stages", "epilogue")
_TILES = ((64, 64, 32, 32), (128, 64, 64, 32), (64, 128, 32, 64), (128, 128, 64, 32), (128, 128, 32, 64),
          (128, 128, 64, 64), (128, 256, 64, 64), (256, 128, 64, 64), (128, 64, 32, 32), (64, 128, 64, 64),
          (128, 128, 32, 32), (64, 64, 64, 64), (128, 64, 64, 64))
_GLOBAL_TILES = ((64, 64, 16, 16), (64, 64, 32, 32), (128, 128, 32, 64), (128, 128, 64, 32), (64, 64, 16, 32),
                 (128, 64, 32, 32))


def grid() -> dict[str, TcGemmConfig]:
    """Every wmma / mma_sync configuration of the study grid that ``mma.validate`` accepts, whose block
    has at most 1024 threads, by kernel name (one per kernel)."""
    out: dict[str, TcGemmConfig] = {}

    def add(**kw):
        try:
            c = TcGemmConfig(m=SHAPE, n=SHAPE, k=SHAPE, **kw)
            out.setdefault(mma.kernel_name(c), c)
        except ValueError:
            return

    for dt, od, bl, ins in itertools.product(("fp16", "bf16", "tf32"), ("fp32", "input"), ("row", "col"),
                                             ("wmma", "mma_sync")):
        if dt == "tf32" and od == "input":
            continue  # the same kernel as fp32 output (kernel_name)
        for (bm, bn, wm, wn), bk, lay, st, epi in itertools.product(
                _TILES, (32, 64), ("naive", "padded", "swizzled"), (1, 2, 3, 4), ("direct", "shared")):
            add(dtype=dt, out_dtype=od, b_layout=bl, instruction=ins, bm=bm, bn=bn, bk=bk, wm=wm, wn=wn,
                layout=lay, stages=st, epilogue=epi)
        if ins == "wmma":
            for bm, bn, wm, wn in _GLOBAL_TILES:
                add(dtype=dt, out_dtype=od, b_layout=bl, instruction=ins, staging="global", bm=bm, bn=bn,
                    bk=8 if dt == "tf32" else 16, wm=wm, wn=wn, layout="naive", stages=1)
    return out


def suite_names() -> set[str]:
    """Kernel names of the recorded suite's wmma / mma_sync rows."""
    from validation.harness.report import config_from_row

    names = set()
    path = Path(__file__).resolve().parents[1] / "results" / "h200" / "tc_gemm" / "times.csv"
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if row.get("status") == "ok" and row.get("instruction") in ("wmma", "mma_sync"):
                names.add(mma.kernel_name(config_from_row("tc_gemm", row)))
    return names


def draw(which: str) -> dict[str, TcGemmConfig]:
    """``dev`` (seed 1) or ``heldout`` (seed 2, none in ``dev``): :data:`HELDOUT` kernels of the grid,
    none in the suite."""
    exclude = suite_names()
    cfgs = {k: c for k, c in grid().items() if k not in exclude}
    dev_keys = random.Random(1).sample(sorted(cfgs), HELDOUT)
    if which == "dev":
        return {k: cfgs[k] for k in dev_keys}
    rest = sorted(set(cfgs) - set(dev_keys))
    return {k: cfgs[k] for k in random.Random(2).sample(rest, HELDOUT)}


def _compile_batch(names: list[str], cfgs: dict) -> dict[str, dict]:
    # extern "C": ptxas names are the kernel names
    return ptxas_report(mma.batch_source([cfgs[n] for n in names]), mma.OPTIONS)


def compile_counts(cfgs: dict[str, TcGemmConfig], workers: int = 2) -> list[dict]:
    """One row per kernel: the knobs, ``threads``, ``regs_per_thread``, ``local_bytes``, ``nvcc``."""
    return count_rows(cfgs, FIELDS, BATCH, workers, lambda b: _compile_batch(b, cfgs))


write = write_rows


def read(path: Path) -> list[tuple[TcGemmConfig, int]]:
    """(configuration, compiler registers) per row of a file this script wrote."""
    ints = ("bm", "bn", "bk", "wm", "wn", "stages")
    return [(TcGemmConfig(m=SHAPE, n=SHAPE, k=SHAPE, **kw), regs) for kw, regs in read_rows(path, FIELDS, ints)]


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv) or ["heldout"]
    for which in args:
        if which not in ("dev", "heldout"):
            print(f"error: {which!r}: give dev or heldout", file=sys.stderr)
            return 2
        rows = compile_counts(draw(which))
        path = OUT_DIR / f"{which}.csv"
        write(rows, path)
        print(f"{which}: {len(rows)} kernels -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
