"""The row-softmax family (fp32): config, lowering, counts. Registered as ``"softmax"``."""

from tilesim.kernels.registry import KernelFamily, register
from tilesim.kernels.softmax.config import SoftmaxConfig, check_fits
from tilesim.kernels.softmax.lower import lower


def counts(cfg: SoftmaxConfig) -> dict:
    """FLOPs, compulsory HBM bytes (input read once, output written once) and global reads per element."""
    return {"flops": cfg.flops, "min_hbm_bytes": cfg.min_hbm_bytes, "global_reads": cfg.global_reads,
            "elements": cfg.elements}


FAMILY = register(KernelFamily(
    name="softmax", config=SoftmaxConfig, lower=lower, check_fits=check_fits, counts=counts,
    label=lambda c: c.label,
    description="row softmax in fp32: a thread, warp or block per row; classic three passes or online "
                "(max and sum in one pass); the row re-read from global memory or cached in registers "
                "or shared memory",
    problem_fields=("rows", "cols")))

__all__ = ["FAMILY", "SoftmaxConfig", "check_fits", "counts", "lower"]
