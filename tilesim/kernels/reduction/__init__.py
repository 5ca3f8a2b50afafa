"""The reduction family (the sum of an fp32 vector): config, lowering, counts. Registered as
``"reduction"``. The launches of one configuration are the tuple :func:`lower` returns."""

from tilesim.kernels.reduction.config import ReductionConfig, check_fits
from tilesim.kernels.reduction.lower import lower
from tilesim.kernels.registry import KernelFamily, register


def counts(cfg: ReductionConfig) -> dict:
    """Useful additions, compulsory HBM bytes (the input read once, the sum written once), and the
    bytes the partial sums add (written by the first pass and read by the second; 0 with atomics)."""
    partial = 0 if cfg.finish == "atomic" else 2 * 4 * cfg.blocks
    return {"flops": cfg.flops, "min_hbm_bytes": cfg.min_hbm_bytes, "partial_bytes": float(partial),
            "blocks": cfg.blocks, "elements": cfg.n}


FAMILY = register(KernelFamily(
    name="reduction", config=ReductionConfig, lower=lower, check_fits=check_fits, counts=counts,
    label=lambda c: c.label,
    description="sum of an fp32 vector: Harris's ladder (interleaved divergent and strided, sequential "
                "addressing, first add, unrolled last warp, complete unroll), a vectorised grid-stride "
                "loop, warp shuffles; finished by a second one-block pass or by atomics",
    problem_fields=("n",)))

__all__ = ["FAMILY", "ReductionConfig", "check_fits", "counts", "lower"]
