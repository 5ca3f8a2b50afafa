"""The tensor-core GEMM family "tc_gemm": real CUDA kernels for the validation harness.

``tc_gemm.cu`` + ``mma.py``: the wmma and mma_sync kernels (rungs 1-4: WMMA from global memory,
shared-memory tiles, ldmatrix + mma.sync with naive / padded / swizzled layouts, cp.async rings);
``wgmma.py`` + ``wgmma.cu``: the Hopper TMA + wgmma kernels (rung 5); ``runner.py``: the runner
protocol of :mod:`validation.harness.runners`; ``suite.toml``: the measured configurations;
``smoke.py``: a quick correctness and speed pass on a GPU.
"""
