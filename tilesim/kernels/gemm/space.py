"""The GEMM family's knob space for ``tilesim tune``: every tiling a user would consider.

:func:`space` yields knob sets (the configuration's fields other than the problem fields m, n, k),
one per combination; the tuner builds each with ``GemmConfig(**problem, **knobs)`` and counts the
combinations the constructor rejects (a ValueError: tm not dividing bm, a warp tile that does not
hold 32 threads, ...) or the GPU cannot launch. The problem size does not change the space.

Per variant (the axes are products; the counts are before the constructor's rules):

* naive_uncoalesced, naive: block bm x bn of 8..32 per side (threads = bm*bn <= 1024);
* smem: square blocks 8..32, bk 8..32, pipeline none or regs;
* reg1d: bm, bn 32..128, bk 8 or 16, tm 4..16, the four pipelines below, smem_pad 0 or 1;
* reg2d: bm, bn 32..256, bk 8..32, tm, tn 4 or 8, vectorize, smem_pad 0 or 4, the four pipelines;
* warp: bm, bn 64..256, bk 8..32, wm, wn 32..128, wniter 1..4, (tm, tn) in (4,4), (8,4), (8,8),
  vectorized (16-byte loads: the warp-tiled kernels always are), the four pipelines.

Pipelines: none; regs (register-prefetch double buffering); cp_async with 2 or 3 stages.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

PIPELINES = (("none", None), ("regs", None), ("cp_async", 2), ("cp_async", 3))


def _pipe(pipeline: str, stages) -> dict:
    return {"pipeline": pipeline} if stages is None else {"pipeline": pipeline, "stages": stages}


def space(problem: dict) -> Iterator[dict]:
    """Every knob set of the GEMM space (see the module docstring); ``problem`` (m, n, k) is unused:
    the same tilings are tried at every size."""
    del problem
    for variant in ("naive_uncoalesced", "naive"):
        for bm, bn in itertools.product((8, 16, 32), repeat=2):
            yield {"variant": variant, "bm": bm, "bn": bn}
    for b, bk, pipe in itertools.product((8, 16, 32), (8, 16, 32), PIPELINES[:2]):
        yield {"variant": "smem", "bm": b, "bn": b, "bk": bk, **_pipe(*pipe)}
    for bm, bn, bk, tm, pad, pipe in itertools.product((32, 64, 128), (32, 64, 128), (8, 16), (4, 8, 16),
                                                       (0, 1), PIPELINES):
        yield {"variant": "reg1d", "bm": bm, "bn": bn, "bk": bk, "tm": tm, "smem_pad": pad, **_pipe(*pipe)}
    for bm, bn, bk, tm, tn, vec, pad, pipe in itertools.product((32, 64, 128, 256), (32, 64, 128, 256),
                                                                (8, 16, 32), (4, 8), (4, 8), (False, True),
                                                                (0, 4), PIPELINES):
        yield {"variant": "reg2d", "bm": bm, "bn": bn, "bk": bk, "tm": tm, "tn": tn, "vectorize": vec,
               "smem_pad": pad, **_pipe(*pipe)}
    for bm, bn, bk, wm, wn, wniter, (tm, tn), vec, pipe in itertools.product(
            (64, 128, 256), (64, 128, 256), (8, 16, 32), (32, 64, 128), (32, 64, 128), (1, 2, 4),
            ((4, 4), (8, 4), (8, 8)), (True,), PIPELINES):
        yield {"variant": "warp", "bm": bm, "bn": bn, "bk": bk, "wm": wm, "wn": wn, "wniter": wniter,
               "tm": tm, "tn": tn, "vectorize": vec, **_pipe(*pipe)}
