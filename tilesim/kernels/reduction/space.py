"""The reduction family's knob space for ``tilesim tune``: every kernel a user would consider.

:func:`space` yields knob sets (the configuration's fields other than ``n``); the tuner builds each
with ``ReductionConfig(n=..., **knobs)`` and counts those the constructor rejects (e.g. a grid
larger than the number of chunks) or the GPU cannot launch.

* the six loop-free kernels of Harris's ladder at 64..1024 threads;
* grid_stride and shuffle at 64..1024 threads, vector 1, 2 or 4, unroll 1, 2, 4 or 8, and a first
  pass of one loop step per block (grid 0) or a fixed grid of 128..4096 blocks (powers of two, and
  the H100/H200's 132 SMs times 1..16);

each finished by a second pass or by atomics.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from tilesim.kernels.reduction.config import FINISHES, GRID_STRIDE, LADDER, THREADS

GRIDS = (0, 128, 132, 256, 264, 512, 528, 1024, 1056, 2048, 2112, 4096)


def space(problem: dict) -> Iterator[dict]:
    """Every knob set of the reduction space (see the module docstring)."""
    del problem
    for variant, threads, finish in itertools.product(LADDER, THREADS, FINISHES):
        yield {"variant": variant, "threads": threads, "finish": finish}
    for variant, threads, vector, unroll, grid, finish in itertools.product(
            GRID_STRIDE, THREADS, (1, 2, 4), (1, 2, 4, 8), GRIDS, FINISHES):
        yield {"variant": variant, "threads": threads, "vector": vector, "unroll": unroll, "grid": grid,
               "finish": finish}
