"""The layernorm family: LayerNorm forward in fp32 (thread, warp or block per row; one or two
passes; the row re-read from global memory, kept in registers or in shared memory).

Registered as ``"layernorm"``. :class:`LayerNormConfig` and :func:`check_fits` live in
:mod:`.config`, the lowering in :mod:`.lower`, closed-form counts in :mod:`.analytic`. The CUDA
kernels are ``validation/families/layernorm/layernorm.cu``.
"""

from tilesim.kernels.layernorm.analytic import counts
from tilesim.kernels.layernorm.config import LayerNormConfig, check_fits
from tilesim.kernels.layernorm.lower import lower
from tilesim.kernels.registry import KernelFamily, register

FAMILY = register(KernelFamily(
    name="layernorm", config=LayerNormConfig, lower=lower, check_fits=check_fits, counts=counts,
    label=lambda c: c.label,
    description="LayerNorm forward, fp32, rows x cols with weight and bias: a thread, warp or block "
                "per row; two-pass or one-pass statistics; the row re-read, kept in registers or in "
                "shared memory; float or float4 accesses",
    problem_fields=("rows", "cols")))

__all__ = ["FAMILY", "LayerNormConfig", "check_fits", "counts", "lower"]
