// Wrapper (ours, not upstream): includes the verbatim excerpt of xlite-dev/LeetCUDA
// kernels/hgemm/mma/basic/hgemm_mma_stage.cu (no torch in the excerpt).
// validation/public/tc/kernels.py appends one explicit template instantiation per translation unit.
#include "leetcuda_hgemm_mma_stage.cu.excerpt"
