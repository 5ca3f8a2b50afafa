"""Closed-form counts of the layernorm family (no simulation).

``flops`` counts the algorithm's floating-point operations per element: two-pass 8 (sum 1;
deviation, square, accumulate 3; output: subtract, scale by rstd, scale by w, add b 4), one-pass 7
(sum 1, square-accumulate 2, output 4); the per-row statistics (a handful per row) are left out.
``min_hbm_bytes`` is the compulsory traffic: x read once, y written once, w and b read once.
``x_global_reads`` is how many times the kernel reads x from global memory (L2 or HBM): once
per pass with cache "none", once with the register or shared cache; ``global_load_bytes`` what
the threads load from global memory in all (x per read, w and b once per row).
"""

from __future__ import annotations

from tilesim.kernels.layernorm.config import FLOAT_BYTES, LayerNormConfig

FLOPS_PER_ELEMENT = {"two": 8, "one": 7}


def counts(config: LayerNormConfig) -> dict:
    c = config
    elements = c.rows * c.cols
    passes = 2 if c.passes == "one" else 3  # statistics pass(es) and the output pass
    x_reads = passes if c.cache == "none" else 1
    return {
        "flops": float(FLOPS_PER_ELEMENT[c.passes] * elements),
        "min_hbm_bytes": float((2 * elements + 2 * c.cols) * FLOAT_BYTES),
        "passes": passes,
        "x_global_reads": x_reads,
        # requested from L2 (before L1 merging of w and b across the warps of a block): x per read,
        # w and b once per row
        "global_load_bytes": float((x_reads * elements + 2 * c.cols * c.rows) * FLOAT_BYTES),
    }
