"""The row-softmax family's knob space for ``tilesim tune``: every kernel a user would consider.

:func:`space` yields knob sets (the configuration's fields other than rows and cols): the product
of variant, unit, tree, cache, vector, threads and unroll over their choices. The tuner builds each
with ``SoftmaxConfig(rows=..., cols=..., **knobs)`` and counts those the constructor rejects
(``unit = "block"`` on a variant other than online, a registers cache over 64 floats per thread,
float4 on a row length not a multiple of 4, ...) or the GPU cannot launch.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from tilesim.kernels.softmax.config import (
    CACHES,
    THREAD_CHOICES,
    TREES,
    UNITS,
    UNROLLS,
    VARIANTS,
    VECTORS,
)


def space(problem: dict) -> Iterator[dict]:
    """Every knob set of the softmax space (see the module docstring)."""
    del problem
    for variant, unit, tree, cache, vector, threads, unroll in itertools.product(
            VARIANTS, UNITS, TREES, CACHES, VECTORS, THREAD_CHOICES, UNROLLS):
        yield {"variant": variant, "unit": unit, "tree": tree, "cache": cache, "vector": vector,
               "threads": threads, "unroll": unroll}
