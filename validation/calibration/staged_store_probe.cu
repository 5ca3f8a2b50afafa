// staged_store_probe: the register-staged (stages = 1) k-step of the tc_gemm suite, taken apart.
//
// NOT compiled on its own: staged_store_probe.py appends it to validation/families/tc_gemm/tc_gemm.cu (the
// suite's own load_tile / load_regs / store_regs / compute_mma / shared_gemm are used as they are, nothing is
// re-written here), followed by the suite's own extern "C" kernels (mma.py's instantiation()).
//
// Configuration: the suite's mma_fp16_B{row,col}_128x128x32_w64x32_{dense,pad,swz}_s1 (fp16 in, fp32 accumulate,
// 8 warps, mma.sync m16n8k16 fed by ldmatrix.x4). Kernels ssp_<mode>_<layout>_<b> (MODES below), one k-tile
// a loop iteration, `ksteps` iterations; the k-tile read is k0 = (kt & (ktiles - 1)) * BK of an A (M x K) and
// B (K x N or N x K) small enough to stay in the L2 (the probe uses 1024 x 512 and 512 x 1024 fp16, 1 MiB each),
// block b reads the tile rows m0 = (b % (M / 128)) * 128, n0 = (b / (M / 128) % (N / 128)) * 128.
//   FULL    the suite's stages == 1 k-step: __syncthreads; load_tile (LDG.128 -> registers -> STS.128);
//           __syncthreads; compute_mma (ldmatrix + mma.sync)
//   STORES  the same without compute_mma (LDG + STS and the two barriers)
//   STS     store_regs only, from registers loaded once before the loop (STS and the two barriers, no LDG)
//   MMA     __syncthreads; compute_mma, on the tile loaded once before the loop (no copy; the one barrier keeps
//           ptxas from reusing the previous k-step's ldmatrix results)
// ssp_suite_<layout>_<b>: tcg::shared_gemm itself (the suite kernel's body) between two clock64 reads.
// Every warp's lane 0 writes SSP_REC longs: loop cycles (clock64 after the loop - before it), %smid, the start
// and end clock64. Every thread adds its accumulators (and, for STORES / STS, one shared element) into sink[]
// so nothing is dead code.
#define SSP_REC 4
#define SSP_BM 128
#define SSP_BN 128
#define SSP_BK 32
#define SSP_WM 64
#define SSP_WN 32
#define SSP_THREADS 256
#define SSP_FULL 0
#define SSP_STORES 1
#define SSP_STS 2
#define SSP_MMA 3

namespace ssp {

template <bool BCOL, int LAYOUT>
using Cfg = tcg::Shared<tcg::FP16, tcg::OUT_F32, BCOL, tcg::MMA_SYNC, SSP_BM, SSP_BN, SSP_BK, SSP_WM, SSP_WN, LAYOUT,
                        1, tcg::EPI_DIRECT>;

__device__ __forceinline__ unsigned smid() {
  unsigned r;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
  return r;
}

__device__ __forceinline__ void record(long long* rec, long long t0, long long t1) {
  if ((threadIdx.x & 31) == 0) {
    const long long block = (long long)blockIdx.y * gridDim.x + blockIdx.x;
    long long* r = rec + (block * (blockDim.x >> 5) + (threadIdx.x >> 5)) * SSP_REC;
    r[0] = t1 - t0;
    r[1] = smid();
    r[2] = t0;
    r[3] = t1;
  }
}

template <bool BCOL, int LAYOUT, int MODE>
__device__ __forceinline__ void kstep_loop(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                                           float* sink, long long* rec, int ksteps, int M, int N, int K) {
  typedef Cfg<BCOL, LAYOUT> S;
  typedef typename S::T T;
  constexpr int WM = SSP_WM, WN = SSP_WN;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sA = reinterpret_cast<T*>(smem);
  T* sB = sA + S::A_ELEMS;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm0 = (warp % S::WARPS_M) * WM, wn0 = (warp / S::WARPS_M) * WN;  // as shared_gemm
  const int mt = M / SSP_BM;
  const int m0 = (blockIdx.x % mt) * SSP_BM, n0 = (blockIdx.x / mt % (N / SSP_BN)) * SSP_BN;
  const int kmask = K / SSP_BK - 1;  // K / BK a power of two
  float acc[WM / 16][WN / 8][4];
#pragma unroll
  for (int i = 0; i < WM / 16; ++i)
#pragma unroll
    for (int j = 0; j < WN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
  uint4 va[S::A_IT], vb[S::B_IT];
  if constexpr (MODE == SSP_STS) tcg::load_regs<S, BCOL>(A, B, va, vb, m0, n0, 0, M, N, K);
  if constexpr (MODE == SSP_MMA) tcg::load_tile<S, 1, LAYOUT, BCOL>(A, B, sA, sB, m0, n0, 0, M, N, K);
  __syncthreads();
  const long long t0 = clock64();
  for (int kt = 0; kt < ksteps; ++kt) {
    const int k0 = (kt & kmask) * SSP_BK;
    if constexpr (MODE == SSP_FULL || MODE == SSP_STORES) {
      __syncthreads();  // the previous k-tile's reads are done
      tcg::load_tile<S, 1, LAYOUT, BCOL>(A, B, sA, sB, m0, n0, k0, M, N, K);
      __syncthreads();
    } else if constexpr (MODE == SSP_STS) {
      __syncthreads();
      tcg::store_regs<S, LAYOUT>(sA, sB, va, vb);
      __syncthreads();
    }
    if constexpr (MODE == SSP_MMA) __syncthreads();  // else ptxas keeps the fixed tile's fragments in registers
    if constexpr (MODE == SSP_FULL || MODE == SSP_MMA)
      tcg::compute_mma<S, tcg::FP16, BCOL, LAYOUT, WM, WN>(sA, sB, wm0, wn0, lane, acc);
  }
  const long long t1 = clock64();
  record(rec, t0, t1);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < WM / 16; ++i)
#pragma unroll
    for (int j = 0; j < WN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s += acc[i][j][e];
  if constexpr (MODE == SSP_STORES || MODE == SSP_STS) s += __uint_as_float(reinterpret_cast<const unsigned*>(sA)[threadIdx.x]);
  sink[(long long)blockIdx.x * blockDim.x + threadIdx.x] = s;
}

}  // namespace ssp

#define SSP_KERNEL(name, BCOL, LAYOUT, MODE)                                                                 \
  extern "C" __global__ void __launch_bounds__(SSP_THREADS)                                                  \
      name(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B, float* sink,            \
           long long* rec, int ksteps, int M, int N, int K) {                                                \
    ssp::kstep_loop<BCOL, LAYOUT, MODE>(A, B, sink, rec, ksteps, M, N, K);                                   \
  }

// the suite kernel's body, timed: shared_gemm between two clock64 (cycles per k-step: two K, the difference)
#define SSP_SUITE(name, BCOL, LAYOUT)                                                                       \
  extern "C" __global__ void __launch_bounds__(SSP_THREADS)                                                  \
      name(const void* __restrict__ A, const void* __restrict__ B, void* __restrict__ C, int M, int N, int K,  \
           long long* rec) {                                                                                 \
    const long long t0 = clock64();                                                                          \
    tcg::shared_gemm<tcg::FP16, tcg::OUT_F32, BCOL, tcg::MMA_SYNC, SSP_BM, SSP_BN, SSP_BK, SSP_WM, SSP_WN,     \
                     LAYOUT, 1, tcg::EPI_DIRECT>(A, B, C, M, N, K);                                          \
    const long long t1 = clock64();                                                                          \
    ssp::record(rec, t0, t1);                                                                                \
  }

// ---- the kernels (staged_store_probe.py's KERNELS: one line each, parsed by the tests) ----
SSP_KERNEL(ssp_full_dense_row, false, tcg::NAIVE, SSP_FULL)
SSP_KERNEL(ssp_full_pad_row, false, tcg::PADDED, SSP_FULL)
SSP_KERNEL(ssp_full_swz_row, false, tcg::SWIZZLED, SSP_FULL)
SSP_KERNEL(ssp_full_dense_col, true, tcg::NAIVE, SSP_FULL)
SSP_KERNEL(ssp_full_pad_col, true, tcg::PADDED, SSP_FULL)
SSP_KERNEL(ssp_full_swz_col, true, tcg::SWIZZLED, SSP_FULL)
SSP_KERNEL(ssp_stores_dense_row, false, tcg::NAIVE, SSP_STORES)
SSP_KERNEL(ssp_stores_pad_row, false, tcg::PADDED, SSP_STORES)
SSP_KERNEL(ssp_stores_swz_row, false, tcg::SWIZZLED, SSP_STORES)
SSP_KERNEL(ssp_stores_dense_col, true, tcg::NAIVE, SSP_STORES)
SSP_KERNEL(ssp_stores_pad_col, true, tcg::PADDED, SSP_STORES)
SSP_KERNEL(ssp_stores_swz_col, true, tcg::SWIZZLED, SSP_STORES)
SSP_KERNEL(ssp_sts_dense_row, false, tcg::NAIVE, SSP_STS)
SSP_KERNEL(ssp_sts_pad_row, false, tcg::PADDED, SSP_STS)
SSP_KERNEL(ssp_sts_swz_row, false, tcg::SWIZZLED, SSP_STS)
SSP_KERNEL(ssp_sts_dense_col, true, tcg::NAIVE, SSP_STS)
SSP_KERNEL(ssp_sts_pad_col, true, tcg::PADDED, SSP_STS)
SSP_KERNEL(ssp_sts_swz_col, true, tcg::SWIZZLED, SSP_STS)
SSP_KERNEL(ssp_mma_dense_row, false, tcg::NAIVE, SSP_MMA)
SSP_KERNEL(ssp_mma_pad_row, false, tcg::PADDED, SSP_MMA)
SSP_KERNEL(ssp_mma_swz_row, false, tcg::SWIZZLED, SSP_MMA)
SSP_KERNEL(ssp_mma_dense_col, true, tcg::NAIVE, SSP_MMA)
SSP_KERNEL(ssp_mma_pad_col, true, tcg::PADDED, SSP_MMA)
SSP_KERNEL(ssp_mma_swz_col, true, tcg::SWIZZLED, SSP_MMA)
SSP_SUITE(ssp_suite_dense_row, false, tcg::NAIVE)
SSP_SUITE(ssp_suite_pad_row, false, tcg::PADDED)
SSP_SUITE(ssp_suite_swz_row, false, tcg::SWIZZLED)
SSP_SUITE(ssp_suite_dense_col, true, tcg::NAIVE)
SSP_SUITE(ssp_suite_pad_col, true, tcg::PADDED)
SSP_SUITE(ssp_suite_swz_col, true, tcg::SWIZZLED)
