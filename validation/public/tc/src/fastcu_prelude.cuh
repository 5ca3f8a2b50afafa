// Ours (not upstream): the prelude that pranjalssh/fast.cu's matmul.cu puts before
// `#include "examples/matmul/matmul_N.cuh"` (its includes, the bf16 typedef, CEIL_DIV and cudaCheck),
// minus cuBLAS and the benchmark. The same text as the top of wrap_fastcu.cuh (matmul_2's wrapper,
// left as it was measured); wrap_fastcu_m3.cuh and wrap_fastcu_m4.cuh include it.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda/barrier>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <cassert>
#include <utility>
#include <cuda_bf16.h>

typedef __nv_bfloat16 bf16;
#define CEIL_DIV(M, N) (((M) + (N)-1) / (N))

void cudaCheck(cudaError_t error, const char *file, int line) {
  if (error != cudaSuccess) {
    printf("[CUDA ERROR] at file %s:%d:\n%s\n", file, line,
           cudaGetErrorString(error));
    exit(1);
  }
}
#define cudaCheck(err) (cudaCheck(err, __FILE__, __LINE__))
