"""The GEMM family (fp32 FFMA ladder, naive to warp-tiled and pipelined): config, lowering, counts.

Registered as ``"gemm"``. ``GemmConfig`` lives in :mod:`.config`, the lowering in :mod:`.lower`,
closed-form traffic counts in :mod:`.analytic`.
"""

from tilesim.kernels.gemm.config import GemmConfig, check_fits
from tilesim.kernels.gemm.lower import lower
from tilesim.kernels.registry import KernelFamily, register


def counts(cfg: GemmConfig) -> dict:
    """FLOPs and compulsory HBM bytes (A and B read once, C written once, read too when beta != 0)."""
    e = cfg.elem_bytes
    return {"flops": cfg.flops,
            "min_hbm_bytes": float((cfg.m * cfg.k + cfg.k * cfg.n + cfg.m * cfg.n * (2 if cfg.beta else 1)) * e)}


FAMILY = register(KernelFamily(
    name="gemm", config=GemmConfig, lower=lower, check_fits=check_fits, counts=counts,
    label=lambda c: c.label,
    description="C = alpha*A@B + beta*C in fp32 on the FMA pipe: naive, shared-memory tiled, 1-D/2-D "
                "register tiling, warp tiling, register-prefetch and cp.async pipelines",
    problem_fields=("m", "n", "k")))

__all__ = ["FAMILY", "GemmConfig", "check_fits", "counts", "lower"]
