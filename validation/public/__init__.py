"""Held-out public kernels: GPU kernels written outside this project, kept verbatim, measured on the
same H200 as the validation suite but never used to fit the model, to check that it generalises.

``sgemm/``: siboehm/SGEMM_CUDA's fp32 kernels 1-10 mapped onto the GEMM family's
:class:`~tilesim.kernels.gemm.config.GemmConfig`; ``tc/``: tensor-core GEMMs (their own package).
``python -m validation.public.run sgemm --out DIR`` measures on a GPU;
``python -m validation.public.report sgemm`` compares with the model on the CPU. Every family writes
the same ``times.csv`` columns: kernel, size, label, status, rel_err, median_s, p10_s, p90_s,
regs_per_thread, flops_per_s.
"""
