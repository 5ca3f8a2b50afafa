"""siboehm/SGEMM_CUDA's fp32 kernels 1-10 as held-out GEMMs: sources verbatim under ``src/``, launches
and mapped configurations in :mod:`validation.public.sgemm.kernels`."""
