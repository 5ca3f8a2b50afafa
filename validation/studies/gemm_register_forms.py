"""Other forms of the GEMM blind register rule, on the development set only (issue #10).

CPU only, no compiler and no time: reads the nvcc 13.0 counts of ``fit.csv``
(``validation/results/h200/studies/gemm_regs/``, written by :mod:`validation.studies.gemm_register_counts`)
and scores each candidate form of ``GemmConfig.register_terms`` by the fraction of kernels within 8
registers of ptxas and the fraction with ptxas's blocks per SM (the issue's two figures), on the whole
set and on the tilings a tuner would consider (no spill, 128..512 threads, reg2d / warp). Every form
is finished as the rule is (:func:`tilesim.kernels.gemm.config.regs_from_terms`: floor, launch bound,
occupancy snap). ``heldout.csv`` and the suite's counts are not read: a form that won here would be
checked on them afterwards.

Each form changes one thing of the rule that the kernels' structure suggests (``validation/families/gemm/gemm.cu``):

* ``prefetch_x2_acc128`` / ``prefetch_x1.5_acc64``: ptxas loads the next k-step's A and B fragments
  while the current one's FFMAs run (fragments counted twice / one and a half times for tiles of at
  least 128 / 64 accumulators);
* ``kvec_full``: an A row read as float4 along k keeps all four k-steps live (3 extra per A fragment
  register rather than the rule's 1.5);
* ``sum_of_phases`` (the rule before the ``load_phase`` term): pipeline none counts the loads'
  addresses beside the inner product's fragments and never the load phase, where a k-tile's loads
  are in flight with their values (2 address registers + w values per load); the rule now takes the
  larger phase (chosen here: 28 kernels of fit.csv come within 8, 5 fall out);
* ``scalar_copy_5``: a 4-byte cp.async costs 5 registers (64-bit source, shared address, source size,
  bounds predicate) rather than 3;
* ``vec_a_chunk``: the four 4-byte cp.async of a 16-byte A chunk (A stored transposed) share one
  source address (3 registers per chunk, not per copy);
* ``acc_x1.1``: 10% more than the accumulators (whatever ptxas adds with the tile's size).

How far ptxas goes beyond what a kernel needs (``need``, nvcc, about 10 minutes on 2 cores; writes
``need.csv`` beside ``fit.csv``): 24 kernels drawn from the tuner's subset (seed 7) are compiled
without ``__launch_bounds__`` under ``-maxrregcount`` 48, 56, ..., 248, 255; ``need_regs`` is the
smallest cap without a spill (to 8 registers), ``free_regs`` the count with no cap at all, beside
ptxas's count with the launch bound (``regs_per_thread`` of fit.csv). Found: the launch-bounded count
is -3 to +112 registers from the need (median +29; 21 of 24 more than 8 over it), by an amount no
term of the kernel's structure follows (warp 128x128x8 t4x2 cp_async2: need 136, ptxas 211; warp
128x128x8 t8x4 cp_async2: need 136, ptxas 171; reg2d 128x64x8 t8x8 vec: need 104, ptxas 117): ptxas
spends registers it could do without, which bounds what any count of live values can reach.

``python -m validation.studies.gemm_register_forms`` prints the table (a few seconds). Found (nvcc
13.0): only ``load_phase`` (the larger phase) gained within 8 on both subsets and is in the rule;
no other form gains in both figures on either subset (``scalar_copy_5``: +0.4 points within 8 on
fit.csv, -0.7 of equal occupancy; ``vec_a_chunk``: +1.0 of equal occupancy on the tuner's subset,
-2.3 within 8 on fit.csv; the others lose 3.7 to 8.2 points within 8 on both). Figures on the suite and held-out set:
``tests/test_register_estimates.py``.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from pathlib import Path

from tilesim import GemmConfig
from tilesim.analytic.occupancy import occupancy
from tilesim.hardware import catalog
from tilesim.kernels.gemm.config import REGS_KVEC_A_EXTRA, regs_from_terms
from validation.studies.gemm_register_counts import OUT_DIR, read

Terms = dict[str, float]


def _loads(c: GemmConfig) -> tuple[int, int, int]:
    """(w, A loads, B loads) of one k-tile per thread, as ``register_terms`` counts them."""
    w = 4 if c.vectorize else 1
    return w, math.ceil(c.bm * c.bk / (w * c.threads)), math.ceil(c.bk * c.bn / (w * c.threads))


def _tiled(c: GemmConfig) -> bool:
    return c.variant in ("reg2d", "warp")


def prefetch(mult: float, min_acc: int) -> Callable[[GemmConfig, Terms], Terms]:
    def form(c, t):
        if _tiled(c) and t["accumulators"] >= min_acc:
            t["fragments"] *= mult
        return t
    return form


def kvec_full(c, t):
    t["a_kvec"] *= 3 / REGS_KVEC_A_EXTRA
    return t


def sum_of_phases(c, t):
    t["load_phase"] = 0
    return t


def scalar_copy_5(c, t):
    if c.uses_smem and c.pipeline == "cp_async" and not c.vectorize:
        _, a, b = _loads(c)
        t["staging"] = 5 * (a + b)
    return t


def vec_a_chunk(c, t):
    if c.uses_smem and c.pipeline == "cp_async" and c.vectorize:
        _, a, b = _loads(c)
        b_copies = b if (c.bn + c.smem_pad) % 4 == 0 else 4 * b
        t["staging"] = 3 * (a + b_copies)
    return t


def acc_scaled(c, t):
    if _tiled(c):
        t["accumulators"] *= 1.1
    return t


FORMS: dict[str, Callable[[GemmConfig, Terms], Terms] | None] = {
    "rule (config.py)": None,
    "prefetch_x2_acc128": prefetch(2.0, 128),
    "prefetch_x1.5_acc64": prefetch(1.5, 64),
    "kvec_full": kvec_full,
    "sum_of_phases": sum_of_phases,
    "scalar_copy_5": scalar_copy_5,
    "vec_a_chunk": vec_a_chunk,
    "acc_x1.1": acc_scaled,
}


def estimate(c: GemmConfig, form) -> int:
    if form is None:
        return c.estimated_regs
    return regs_from_terms(form(c, dict(c.register_terms)), c.threads)


def score(rows: list[tuple[GemmConfig, int]], form) -> tuple[float, float]:
    """(fraction within 8 registers, fraction with ptxas's blocks per SM) of ``form`` on ``rows``;
    an estimate over 255 registers (the tiling cannot launch) counts as a different occupancy."""
    hw = catalog.load("h200")
    within = occ = 0
    for c, regs in rows:
        est = estimate(c, form)
        within += abs(est - regs) <= 8
        occ += est <= hw.max_regs_per_thread and (occupancy(hw, c.threads, est, c.smem_bytes).blocks_per_sm
                                                  == occupancy(hw, c.threads, regs, c.smem_bytes).blocks_per_sm)
    return within / len(rows), occ / len(rows)


def dev_sets(path: Path = OUT_DIR / "fit.csv") -> dict[str, list[tuple[GemmConfig, int]]]:
    """The whole development set and its tuner's subset (no spill, 128..512 threads, reg2d / warp)."""
    rows = read(path)
    with open(path, newline="") as fh:
        spills = [r["local_bytes"] != "0" for r in csv.DictReader(fh)]
    tuner = [(c, r) for (c, r), s in zip(rows, spills, strict=True)
             if not s and _tiled(c) and 128 <= c.threads <= 512]
    return {"fit": rows, "tuner": tuner}


NEED_SAMPLE, NEED_SEED = 24, 7
NEED_CAPS = (*range(48, 256, 8), 255)


def _without_launch_bounds(code: str) -> str:
    """``code`` with every ``__launch_bounds__(...)`` removed (nvcc ignores -maxrregcount under one)."""
    key, out, i = "__launch_bounds__(", [], 0
    while (j := code.find(key, i)) >= 0:
        out.append(code[i:j])
        k, depth = j + len(key), 1
        while depth:
            depth += {"(": 1, ")": -1}.get(code[k], 0)
            k += 1
        i = k
    return "".join(out) + code[i:]


def need(workers: int = 2) -> list[dict]:
    """Rows of ``need.csv``: knobs, ``threads``, ``regs_per_thread`` (fit.csv), ``free_regs`` and
    ``need_regs`` (see the module docstring) of :data:`NEED_SAMPLE` tuner's kernels."""
    import random
    from concurrent.futures import ThreadPoolExecutor

    from validation.families.gemm import runner
    from validation.studies.gemm_register_counts import FIELDS
    from validation.studies.register_counts import demangled, ptxas_report

    sample = random.Random(NEED_SEED).sample(dev_sets()["tuner"], NEED_SAMPLE)
    code = _without_launch_bounds(runner.batch_source([c for c, _ in sample]))

    def at(cap):
        opts = runner.OPTIONS + ((f"-maxrregcount={cap}",) if cap else ())
        return cap, demangled(ptxas_report(code, opts))

    with ThreadPoolExecutor(workers) as ex:
        reports = dict(ex.map(at, (None, *NEED_CAPS)))
    rows = []
    for c, regs in sample:
        name = runner.kernel_name(c)
        fits = [cap for cap in NEED_CAPS if reports[cap][name]["local_bytes"] == 0]
        rows.append({**{f: getattr(c, f) for f in FIELDS}, "threads": c.threads, "regs_per_thread": regs,
                     "free_regs": reports[None][name]["regs_per_thread"], "need_regs": min(fits, default="")})
    return rows


def main() -> int:
    import sys

    if sys.argv[1:] == ["need"]:
        rows = need()
        path = OUT_DIR / "need.csv"
        with open(path, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        print(f"{len(rows)} kernels -> {path}")
        return 0
    sets = dev_sets()
    print(f"{'form':24s}" + "".join(f"  {k} ({len(v)}): within 8 / equal occupancy" for k, v in sets.items()))
    for name, form in FORMS.items():
        cells = [score(rows, form) for rows in sets.values()]
        print(f"{name:24s}" + "".join(f"  {w:7.1%} / {o:5.1%}{'':24s}" for w, o in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
