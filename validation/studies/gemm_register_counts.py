"""Compiler register counts of GEMM configurations outside the recorded suite (issue #10).

CPU only (nvcc, no GPU). Draws fp32 GEMM tilings from a grid of every variant and knob
(:func:`grid`), compiles their kernels from ``validation/families/gemm/gemm.cu`` (the runner's
``batch_source``: the same templates and options the suite's NVRTC builds use) with
``nvcc -cubin -arch=sm_90 -Xptxas -v`` in batches, and writes one row per kernel: the knobs, the
block's threads and ptxas's ``Used N registers`` (``regs_per_thread``) and stack frame
(``local_bytes``). No time is measured or read.

Two disjoint random draws of the grid (seeded, so the files can be rebuilt):

* ``fit`` (seed 0, 1,800 reg2d / warp kernels plus every naive / smem / reg1d one): the set the
  blind rule's constants (``tilesim/kernels/gemm/config.py``, ``GemmConfig.estimated_regs``) were
  chosen on;
* ``heldout`` (seed 1, 300 kernels of the grid with shared-memory padding 0, 1 or 4 as well, none
  of them in ``fit`` or in the suite): never used to choose anything; ``tests/test_register_estimates.py``
  reports and guards the rule's figures on it.

``python -m validation.studies.gemm_register_counts heldout`` writes
``validation/results/h200/studies/gemm_regs/heldout.csv`` (about 2 minutes on 2 cores; ``fit``:
about 15 minutes). The counts are offline nvcc's; the suite's recorded counts are CuPy NVRTC's on the
H200 (they agree on 20 of the suite's 28 GEMM kernels, within 2 on 24:
``python -m validation.harness.compile gemm``).
"""

from __future__ import annotations

import csv
import itertools
import math
import random
import sys
from pathlib import Path

from tilesim import GemmConfig
from tilesim.hardware import catalog
from tilesim.kernels.gemm.config import check_fits
from validation.families.gemm import runner
from validation.studies.register_counts import (
    count_rows,
    demangled,
    ptxas_report,
    read_rows,
    write_rows,
)

OUT_DIR = Path(__file__).resolve().parents[1] / "results" / "h200" / "studies" / "gemm_regs"
SHAPE = 4096  # m = n = k: the kernels do not depend on the problem size (runtime arguments)
FIT_TILED = 1800
HELDOUT = 300
BATCH = 30  # kernels per nvcc translation unit
FIELDS = ("variant", "bm", "bn", "bk", "tm", "tn", "wm", "wn", "wniter", "vectorize", "smem_pad",
          "pipeline", "stages")
_WARP_TILES = ((128, 128, 64, 64), (128, 128, 32, 64), (128, 128, 64, 32), (128, 64, 64, 32),
               (64, 64, 32, 32), (128, 256, 64, 64), (256, 128, 64, 64), (64, 128, 32, 64),
               (128, 128, 128, 64), (64, 64, 64, 32))


def screen_regs(c: GemmConfig) -> int:
    """The register screen of the grid, frozen so that the draws do not move when the rule does: the
    blind estimate as it stood before issue #10 (accumulators + one k-step's fragments + the regs
    pipeline's staged elements + 26). A tiling it puts over 255 registers, or whose block it says
    cannot be resident, is left out of the grid (as ``check_fits`` did when the sets were drawn)."""
    v = c.variant
    if v in ("naive_uncoalesced", "naive", "smem"):
        acc, frag = 1, 2
    elif v == "reg1d":
        acc, frag = c.tm, 2
    elif v == "reg2d":
        acc, frag = c.tm * c.tn, c.tm + c.tn
    else:
        acc, frag = c.wmiter * c.wniter * c.tm * c.tn, c.wmiter * c.tm + c.wniter * c.tn
    staging = math.ceil((c.bm * c.bk + c.bk * c.bn) / c.threads) if c.pipeline == "regs" else 0
    return acc + frag + staging + 26


def grid(pads=(0,)) -> dict[str, GemmConfig]:
    """Every configuration of the study grid that fits the H200 (threads, shared memory and
    :func:`screen_regs`), by kernel name (one per kernel)."""
    hw = catalog.load("h200")
    out: dict[str, GemmConfig] = {}

    def add(**kw):
        try:
            c = GemmConfig(m=SHAPE, n=SHAPE, k=SHAPE, **kw)
            check_fits(c.with_(regs_per_thread=screen_regs(c)), hw)
        except ValueError:
            return
        out.setdefault(runner.kernel_name(c), c)

    pipes = ("none", "regs", "cp_async")
    for bm, bn in itertools.product((8, 16, 32), (8, 16, 32, 64)):
        add(variant="naive", bm=bm, bn=bn)
        add(variant="naive_uncoalesced", bm=bm, bn=bn)
        for bk, pipe, pad in itertools.product((8, 16, 32), pipes, pads):
            add(variant="smem", bm=bm, bn=bn, bk=bk, pipeline=pipe, smem_pad=pad)
    for bk, pad in itertools.product((8, 16, 32), pads):
        for tm, bm, bn, pipe in itertools.product((4, 8, 16), (64, 128), (32, 64, 128), pipes):
            add(variant="reg1d", bm=bm, bn=bn, bk=bk, tm=tm, pipeline=pipe, smem_pad=pad)
        for tm, tn, bm, bn in itertools.product((2, 4, 8, 16), (2, 4, 8, 16), (32, 64, 128, 256),
                                                (32, 64, 128, 256)):
            if tm * tn < 64 and bm * bn // (tm * tn) > 512:
                continue
            for vec, pipe in itertools.product((False, True), pipes):
                add(variant="reg2d", bm=bm, bn=bn, bk=bk, tm=tm, tn=tn, vectorize=vec, pipeline=pipe,
                    smem_pad=pad)
        for (bm, bn, wm, wn), (tm, tn), wniter in itertools.product(
                _WARP_TILES, ((8, 4), (4, 4), (8, 8), (4, 8), (2, 4), (4, 2)), (1, 2, 4, 8)):
            for vec, pipe in itertools.product((False, True), pipes):
                add(variant="warp", bm=bm, bn=bn, bk=bk, wm=wm, wn=wn, wniter=wniter, tm=tm, tn=tn,
                    vectorize=vec, pipeline=pipe, smem_pad=pad)
    return out


def _tiled(cfgs: dict) -> list[str]:
    return [k for k, c in cfgs.items() if c.variant in ("reg2d", "warp")]


def fit_set() -> dict[str, GemmConfig]:
    """Seed 0: every naive, smem and reg1d kernel of the unpadded grid and 1,800 reg2d / warp ones."""
    cfgs = grid()
    rng = random.Random(0)
    tiled = _tiled(cfgs)
    drop = set(rng.sample(tiled, len(tiled) - FIT_TILED))
    return {k: c for k, c in cfgs.items() if k not in drop}


def suite_names() -> set[str]:
    """Kernel names of the recorded suite's rows."""
    from validation.harness.report import config_from_row

    names = set()
    with open(Path(__file__).resolve().parents[1] / "results" / "h200" / "gemm" / "times.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            if row.get("status") == "ok" and row.get("variant") != "cublas":
                names.add(runner.kernel_name(config_from_row("gemm", row)))
    return names


def heldout_set() -> dict[str, GemmConfig]:
    """Seed 1: 300 kernels of the grid with padding 0, 1 or 4, none in :func:`fit_set` or the suite."""
    exclude = set(fit_set()) | suite_names()
    cfgs = {k: c for k, c in grid(pads=(0, 1, 4)).items() if k not in exclude}
    keys = sorted(cfgs)
    return {k: cfgs[k] for k in random.Random(1).sample(keys, HELDOUT)}


def _compile_batch(names: list[str], cfgs: dict) -> dict[str, dict]:
    return demangled(ptxas_report(runner.batch_source([cfgs[n] for n in names]), runner.OPTIONS))


def compile_counts(cfgs: dict[str, GemmConfig], workers: int = 2) -> list[dict]:
    """One row per kernel: the knobs, ``threads``, ``regs_per_thread``, ``local_bytes``, ``nvcc``."""
    return count_rows(cfgs, FIELDS, BATCH, workers, lambda b: _compile_batch(b, cfgs))


write = write_rows


def read(path: Path) -> list[tuple[GemmConfig, int]]:
    """(configuration, compiler registers) per row of a file this script wrote."""
    ints = ("bm", "bn", "bk", "tm", "tn", "wm", "wn", "wniter", "smem_pad", "stages")
    return [(GemmConfig(m=SHAPE, n=SHAPE, k=SHAPE, **kw), regs) for kw, regs in read_rows(path, FIELDS, ints)]


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv) or ["heldout"]
    for which in args:
        if which not in ("fit", "heldout"):
            print(f"error: {which!r}: give fit or heldout", file=sys.stderr)
            return 2
        cfgs = fit_set() if which == "fit" else heldout_set()
        rows = compile_counts(cfgs)
        path = OUT_DIR / f"{which}.csv"
        write(rows, path)
        print(f"{which}: {len(rows)} kernels -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
