"""The layernorm family's knob space for ``tilesim tune``: every kernel a user would consider.

:func:`space` yields knob sets (the configuration's fields other than rows and cols): the product
of variant, passes, cache, vector, threads (32..1024, powers of two) and unroll over their choices.
The tuner builds each with ``LayerNormConfig(rows=..., cols=..., **knobs)`` and counts those the
constructor rejects (a registers cache over 64 floats per thread, unroll with the registers cache,
float4 on a row length not a multiple of 4, ...) or the GPU cannot launch.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from tilesim.kernels.layernorm.config import CACHES, PASSES, UNROLLS, VARIANTS, VECTORS

THREADS = (32, 64, 128, 256, 512, 1024)


def space(problem: dict) -> Iterator[dict]:
    """Every knob set of the layernorm space (see the module docstring)."""
    del problem
    for variant, passes, cache, vector, threads, unroll in itertools.product(
            VARIANTS, PASSES, CACHES, VECTORS, THREADS, UNROLLS):
        yield {"variant": variant, "passes": passes, "cache": cache, "vector": vector, "threads": threads,
               "unroll": unroll}
