// Wrapper (ours, not upstream): fast.cu's matmul.cu prelude (fastcu_prelude.cuh), then the verbatim
// examples/matmul/matmul_3.cuh (git-ignored; python -m validation.public.fetch downloads it).
// validation/public/tc/kernels.py appends the explicit instantiation runKernel3 launches (DBG = false:
// its host code picks that one when DB is null).
#include "fastcu_prelude.cuh"
#include "fastcu_matmul_3.cuh"
