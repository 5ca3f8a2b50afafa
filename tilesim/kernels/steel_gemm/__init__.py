"""The steel-style GEMM family (Apple GPUs, Metal simdgroup_matrix): config, lowering, counts.

Registered as ``"steel_gemm"``. The knobs are those of MLX's steel GEMM and the m5-gemm kernels
(:mod:`.config`); the lowering (:mod:`.lower`) gives a tile program the per-vendor cost model prices.
"""

from tilesim.kernels.registry import KernelFamily, register
from tilesim.kernels.steel_gemm.config import SteelGemmConfig, check_fits
from tilesim.kernels.steel_gemm.lower import lower


def counts(cfg: SteelGemmConfig) -> dict:
    """FLOPs, compulsory device-memory bytes (A, B read once, C written once), register use and the
    spilled registers' device-memory bytes."""
    e = cfg.elem_bytes
    return {"flops": cfg.flops, "min_hbm_bytes": float((cfg.m * cfg.k + cfg.k * cfg.n + cfg.m * cfg.n) * e),
            "tg_bytes": cfg.tg_bytes, "regs_per_thread": cfg.estimated_regs, "spilled_regs": cfg.spilled_regs, "spill_bytes": cfg.spill_bytes}


FAMILY = register(KernelFamily(
    name="steel_gemm", config=SteelGemmConfig, lower=lower, check_fits=check_fits, counts=counts,
    label=lambda c: c.label,
    description="C = A@B on Apple GPUs: naive (one output per thread from device memory), threadgroup-tiled "
                "(one output per thread from threadgroup slabs), or MLX steel style (the default): threadgroup tile BM x BN x BK, WM x WN SIMD-groups each "
                "owning a patch of 8x8 simdgroup_matrix fragments; sync or double-buffered copy; aligned, ragged "
                "or guarded edges; register spills as device-memory traffic",
    problem_fields=("m", "n", "k")))

__all__ = ["FAMILY", "SteelGemmConfig", "check_fits", "counts", "lower"]
