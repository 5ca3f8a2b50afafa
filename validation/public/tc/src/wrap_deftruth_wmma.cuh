// Wrapper (ours, not upstream): makes the verbatim excerpt of DefTruth/CUDA-Learn-Notes
// hgemm/hgemm_wmma.cu compile without PyTorch. The excerpt includes <torch/types.h> and
// <torch/extension.h>; its kernels use no torch API, so the build puts src/stub (empty headers of
// those names) on the include path. validation/public/tc/kernels.py appends one explicit
// template instantiation per translation unit.
#include "deftruth_hgemm_wmma.cu.excerpt"
