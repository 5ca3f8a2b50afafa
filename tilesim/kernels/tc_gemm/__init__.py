"""The tensor-core GEMM family (fp16, bf16, tf32 inputs; fp32 accumulation): WMMA from global memory,
staged wmma and mma.sync with ldmatrix, cp.async rings, and Hopper's TMA + wgmma with warp
specialisation and clusters. Registered as ``"tc_gemm"``; knobs in :mod:`.config`, the lowering in
:mod:`.lower`."""

from tilesim.kernels.registry import KernelFamily, register
from tilesim.kernels.tc_gemm.config import TcGemmConfig, check_fits
from tilesim.kernels.tc_gemm.lower import lower


def counts(cfg: TcGemmConfig) -> dict:
    """FLOPs and compulsory HBM bytes (A and B read once, C written once)."""
    return {"flops": cfg.flops, "min_hbm_bytes": cfg.min_hbm_bytes}


FAMILY = register(KernelFamily(
    name="tc_gemm", config=TcGemmConfig, lower=lower, check_fits=check_fits, counts=counts,
    label=lambda c: c.label,
    description="C = A@B on tensor cores (fp16/bf16/tf32 in, fp32 accumulate): WMMA from global memory, "
                "shared-memory tiles with ldmatrix and mma.sync, cp.async rings, TMA + wgmma with "
                "producer/consumer warpgroups and clusters",
    problem_fields=("m", "n", "k")))

__all__ = ["FAMILY", "TcGemmConfig", "check_fits", "counts", "lower"]
