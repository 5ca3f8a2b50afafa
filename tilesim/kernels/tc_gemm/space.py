"""The tensor-core GEMM family's knob space for ``tilesim tune``: every tiling a user would consider.

:func:`space` yields knob sets (the configuration's fields other than m, n, k); the tuner builds
each with ``TcGemmConfig(**problem, **knobs)`` and counts those the constructor rejects (a warp
tile that does not divide the block, bk not a multiple of the instruction's k, a wgmma block that
is not consumers x wm, ...) or the GPU cannot launch. The input type and the layout of B are the
user's data, not tiling: fp16 inputs, fp32 output and row-major B unless the problem dict (or
``tilesim tune --set``) gives ``dtype``, ``out_dtype`` or ``b_layout``.

* wmma from global memory: bm, bn 64 or 128, warp tiles 32 or 64 per side;
* wmma and mma_sync staged in shared memory: bm, bn 64..256, bk 32 or 64, warp tiles 32..128 per
  side, layout naive, padded or swizzled, stages 1..4, epilogue direct or shared;
* wgmma (TMA ring, warp-specialised): bn 64..256 in steps of 64, wm 64 or 128, 1 or 2 consumer
  warpgroups (bm = consumers x wm), bk 32 or 64, stages 2..5, clusters of 1 or 2, epilogue direct
  or shared;
* wgmma on one buffer (stages 1, no producer warpgroup, so no setmaxnreg; no cluster): the same
  tiles and epilogues.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

DATA_KNOBS = ("dtype", "out_dtype", "b_layout")
"""Knobs that describe the user's data rather than the tiling: taken from ``problem`` when given."""


def space(problem: dict) -> Iterator[dict]:
    """Every knob set of the tensor-core GEMM space (see the module docstring)."""
    data = {k: problem[k] for k in DATA_KNOBS if k in problem}
    for bm, bn, wm, wn in itertools.product((64, 128), (64, 128), (32, 64), (32, 64)):
        yield {**data, "instruction": "wmma", "staging": "global", "bm": bm, "bn": bn, "bk": 32, "wm": wm,
               "wn": wn, "stages": 1, "layout": "naive"}
    for ins, bm, bn, bk, wm, wn, layout, stages, epi in itertools.product(
            ("wmma", "mma_sync"), (64, 128, 256), (64, 128, 256), (32, 64), (32, 64, 128), (32, 64, 128),
            ("naive", "padded", "swizzled"), (1, 2, 3, 4), ("direct", "shared")):
        yield {**data, "instruction": ins, "staging": "shared", "bm": bm, "bn": bn, "bk": bk, "wm": wm,
               "wn": wn, "layout": layout, "stages": stages, "epilogue": epi}
    for bn, wm, consumers, bk, stages, cluster, epi in itertools.product(
            (64, 128, 192, 256), (64, 128), (1, 2), (32, 64), (2, 3, 4, 5), (1, 2), ("direct", "shared")):
        yield {**data, "instruction": "wgmma", "staging": "shared", "bm": consumers * wm, "bn": bn, "bk": bk,
               "wm": wm, "wn": bn, "layout": "swizzled", "stages": stages, "consumers": consumers,
               "cluster": cluster, "epilogue": epi}
    for bn, wm, consumers, bk, epi in itertools.product((64, 128, 192, 256), (64, 128), (1, 2), (32, 64),
                                                        ("direct", "shared")):
        yield {**data, "instruction": "wgmma", "staging": "shared", "bm": consumers * wm, "bn": bn, "bk": bk,
               "wm": wm, "wn": bn, "layout": "swizzled", "stages": 1, "consumers": consumers, "cluster": 1,
               "epilogue": epi, "setmaxnreg": False}
