// The staged-WMMA GEMM k-step of the suite kernel wmma_fp16_Bcol_128x128x32_w64x32_pad_s3 in isolation (sm_90a;
// driven by validation/calibration/wmma_feed_probe.py). Geometry: 128x128 block tile, 8 warps of 64x32
// (warps 2 along M, 4 along N, as tcg::Shared: warp w at wm0 = (w % 2) * 64, wn0 = (w / 2) * 32), BK 32 (two
// 16-deep k-slices a k-step), fp16 in, fp32 accumulators, tc_gemm's padded shared layout (A: 128 rows of
// BK + 8 halves = 80 bytes; B stored N x K (Bcol): 128 rows of 80 bytes), a 3-stage ring of 20,480-byte slots
// at the start of dynamic shared memory, and tc_gemm's shared_gemm k-loop for STAGES >= 2: per k-step
// cp.async.wait_group(1), __syncthreads, the copy of the k-tile 2 ahead into slot `next`, commit_group, then
// the fragments + MMAs of slot `slot` (both slots rotate mod 3). Knobs (template parameters, one kernel each):
//   FRAG  WF_WMMA  tc_gemm.cu's wmma_load_a<FP16, false> / wmma_load_b<FP16, true> (inline PTX wmma.load on a
//                  generic address: 4 LD.E a fragment in SASS) and its wmma_mma<FP16, true> (copied below)
//         WF_LDS   the same fragment registers by ld.shared.b32 from cvta'd shared addresses (4 LDS a fragment,
//                  the words each lane's LD.E read: rows g and g + 8, k 2t and 2t + 8 of the fragment;
//                  registers 4..7 repeat 0..3: the generic wmma.load also loads only 4 words a lane) and the
//                  same wmma.mma (the values are not checked: a timing probe)
//         WF_LDSM  tc_gemm's compute_mma path for Bcol + padded: ldmatrix.x4 (A: 4 a slice; B: N x K tile,
//                  non-transposed, 2 a slice) and mma.sync m16n8k16 (16 a slice), serpentine order
//   COPY  WF_NONE  no copies: the ring keeps the noise it was filled with; the loop keeps wait_group, the
//                  barrier and the (empty) commit_group
//         WF_GEMM  tc_gemm's load_tile<S, 3, PADDED, BCOL = true> (copied below) for the block's (m0, n0)
//                  tile of the host's data, k0 advancing a k-tile a k-step and wrapping at K
//   MINBLOCKS of __launch_bounds__(256, MINBLOCKS): 2 (the suite's) or 1 (the host asks for enough dynamic
//                  shared memory that only one block fits)
// The host passes M = N = 0 to WF_GEMM kernels for zero-fill copies (load_tile's own bounds check fails for
// every chunk: src-size 0, the source is never read), the same SASS.
// Each block writes WF_REC longs: clock64 cycles and %globaltimer ns from loop start to loop end (between two
// __syncthreads), its %smid and its start %globaltimer. The accumulators are summed into one float a thread
// written to `out` (so no fragment load or MMA is dead code). All kernels extern "C" (cupy.RawModule).
// Second geometry (kernels wf_ldsm_*_w4, WF_KERNEL_W4 at the end): the suite kernel
// mma_fp16_Bcol_128x128x32_w64x64_pad_s3's 4 warps of 64x64 (128 threads, warp w at wm0 = (w % 2) * 64,
// wn0 = (w / 2) * 64), FRAG WF_LDSM only, the same ring, loop and copies (8 cp.async a thread and k-step).

#define WF_REC 4      // longs per block record: cycles, ns, smid, start ns (wmma_feed_probe.py REC)
#define WF_STAGES 3   // ring stages (tc_gemm STAGES 3)
#define WF_WMMA 0
#define WF_LDS 1
#define WF_LDSM 2
#define WF_NONE 0
#define WF_GEMM 1

typedef long long idx_t;

__device__ __forceinline__ unsigned long long wf_global_ns() {
  unsigned long long g;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
  return g;
}
__device__ __forceinline__ unsigned wf_smid() {
  unsigned s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}
// small random fp16 pairs (|x| < 0.5, random signs) from a hash of i
__device__ __forceinline__ unsigned wf_noise(unsigned i) {
  unsigned h = (i + 1u) * 0x9E3779B1u;
  h ^= h >> 15;
  h *= 0x85EBCA77u;
  h ^= h >> 13;
  return h & 0xB7FFB7FFu;
}

// ---- copied from validation/families/tc_gemm/tc_gemm.cu (smem_addr, cp_async16, cp_async_commit/wait,
// ldmatrix_x4, mma16816<FP16>, wmma_load_a<FP16, false>, wmma_load_b<FP16, true>, wmma_mma<FP16, true>,
// chunk_off, load_tile with STAGES >= 2) for the instantiation shared_gemm<FP16, *, BCOL = true, WMMA, 128, 128,
// 32, 64, 32, PADDED, 3, *>; only the FP16 / COL branches kept ----
namespace tcg {
constexpr int PADDED = 1;
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  unsigned r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, unsigned src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#define TCG_R8(x) "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3]), "=r"(x[4]), "=r"(x[5]), "=r"(x[6]), "=r"(x[7])
__device__ __forceinline__ void wmma_load_a(unsigned* r, const void* p, int ldm) {  // <FP16, false>
  asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;\n"
               : TCG_R8(r) : "l"(p), "r"(ldm));
}
__device__ __forceinline__ void wmma_load_b(unsigned* r, const void* p, int ldm) {  // <FP16, COL = true>
  asm volatile("wmma.load.b.sync.aligned.col.m16n16k16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;\n"
               : TCG_R8(r) : "l"(p), "r"(ldm));
}
#undef TCG_R8
#define TCG_D8 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
__device__ __forceinline__ void wmma_mma(float (&d)[8], const unsigned* a, const unsigned* b) {  // <FP16, true>
  asm volatile("wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%0, %1, %2, %3, %4, %5, %6, %7}, "
               "{%8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19, %20, %21, %22, %23}, "
               "{%0, %1, %2, %3, %4, %5, %6, %7};\n"
               : TCG_D8
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(a[4]), "r"(a[5]), "r"(a[6]), "r"(a[7]),
                 "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(b[4]), "r"(b[5]), "r"(b[6]), "r"(b[7]));
}
#undef TCG_D8
template <int LAYOUT, int LC, int CE>
__device__ __forceinline__ int chunk_off(int r, int c) {  // the PADDED branch
  return (r * (LC + 1) + c) * CE;
}
// tcg::Shared<FP16, *, BCOL = true, *, BM 128, BN 128, BK 32, WM, WN, PADDED, 3, *>: WM x WN = 64 x 32
// (8 warps, 256 threads: the wmma suite kernel's) or 64 x 64 (4 warps, 128 threads: the mma_sync w64x64 one's)
template <int WM_, int WN_>
struct SG {
  typedef unsigned short T;
  static constexpr int WM = WM_, WN = WN_, WARPS_M = 128 / WM, THREADS = (128 / WM) * (128 / WN) * 32;
  static constexpr int CE = 8, A_ROWS = 128, A_LC = 4, B_ROWS = 128, B_LC = 4, PAD = 1;
  static constexpr int A_ELEMS = A_ROWS * (A_LC + PAD) * CE, B_ELEMS = B_ROWS * (B_LC + PAD) * CE;
  static constexpr int SLOT = A_ELEMS + B_ELEMS, STAGE_BYTES = SLOT * 2, KSTEPS = A_LC / 2;
};
template <class S, int LAYOUT, bool BCOL>
__device__ __forceinline__ void load_tile(const typename S::T* __restrict__ A, const typename S::T* __restrict__ B,
                                          typename S::T* sA, typename S::T* sB, int m0, int n0, int k0,
                                          int M, int N, int K) {  // the STAGES >= 2 branch
  typedef typename S::T T;
  constexpr int CE = S::CE;
  constexpr int A_CHUNKS = S::A_ROWS * S::A_LC, B_CHUNKS = S::B_ROWS * S::B_LC;
  constexpr int A_IT = (A_CHUNKS + S::THREADS - 1) / S::THREADS;
  constexpr int B_IT = (B_CHUNKS + S::THREADS - 1) / S::THREADS;
  const int tid = threadIdx.x;
#pragma unroll
  for (int it = 0; it < A_IT; ++it) {
    const int i = tid + it * S::THREADS;
    if (A_CHUNKS % S::THREADS == 0 || i < A_CHUNKS) {
      const int r = i / S::A_LC, c = i % S::A_LC;
      const int gm = m0 + r, gk = k0 + c * CE;
      const bool ok = gm < M && gk < K;
      cp_async16(smem_addr(sA + chunk_off<LAYOUT, S::A_LC, CE>(r, c)), ok ? A + (idx_t)gm * K + gk : A,
                 ok ? 16u : 0u);
    }
  }
#pragma unroll
  for (int it = 0; it < B_IT; ++it) {
    const int i = tid + it * S::THREADS;
    if (B_CHUNKS % S::THREADS == 0 || i < B_CHUNKS) {
      const int r = i / S::B_LC, c = i % S::B_LC;
      bool ok;
      const T* src;
      if constexpr (BCOL) {
        const int gn = n0 + r, gk = k0 + c * CE;
        ok = gn < N && gk < K;
        src = B + (idx_t)gn * K + gk;
      } else {
        const int gk = k0 + r, gn = n0 + c * CE;
        ok = gk < K && gn < N;
        src = B + (idx_t)gk * N + gn;
      }
      cp_async16(smem_addr(sB + chunk_off<LAYOUT, S::B_LC, CE>(r, c)), ok ? src : B, ok ? 16u : 0u);
    }
  }
}
}  // namespace tcg

// one 16x16 fp16 fragment (A row-major, or B stored N x K) by four ld.shared.b32: the words lane (g, t) of the
// generic wmma.load reads (rows g, g + 8; k halves 2t, 2t + 8 at a pitch of 80 bytes); r[4..7] = r[0..3]
__device__ __forceinline__ void wf_lds_frag(unsigned (&r)[8], unsigned addr) {
  constexpr unsigned ROW8 = 8u * 80u;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(r[0]) : "r"(addr));
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(r[1]) : "r"(addr + ROW8));
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(r[2]) : "r"(addr + 16u));
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(r[3]) : "r"(addr + ROW8 + 16u));
#pragma unroll
  for (int i = 0; i < 4; ++i) r[4 + i] = r[i];
}

template <int FRAG, int COPY, int WM = 64, int WN = 32>
__device__ __forceinline__ void wf_body(int iters, long long* rec, float* out, const unsigned short* __restrict__ A,
                                        const unsigned short* __restrict__ B, const int* __restrict__ tile_m0,
                                        const int* __restrict__ tile_n0, int M, int N, int K) {
  typedef tcg::SG<WM, WN> S;
  typedef typename S::T T;
  constexpr int FI = WM / 16, FJ = WN / 16, MI = WM / 16, NI = WN / 8;
  static_assert(FRAG == WF_LDSM || (WM == 64 && WN == 32), "wmma / lds fragments: the 64 x 32 geometry only");
  constexpr int LD = (S::A_LC + S::PAD) * S::CE;  // 40 halves: the A and B tiles' pitch
  extern __shared__ __align__(128) unsigned char wf_smem[];
  T* ring = reinterpret_cast<T*>(wf_smem);
  for (int i = threadIdx.x * 16; i < WF_STAGES * S::STAGE_BYTES; i += blockDim.x * 16)
    *reinterpret_cast<uint4*>(wf_smem + i) = make_uint4(wf_noise(i), wf_noise(i + 1), wf_noise(i + 2), wf_noise(i + 3));
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm0 = (warp % S::WARPS_M) * WM, wn0 = (warp / S::WARPS_M) * WN;
  const int m0 = COPY == WF_GEMM ? tile_m0[blockIdx.x] : 0, n0 = COPY == WF_GEMM ? tile_n0[blockIdx.x] : 0;
  const unsigned sbase = tcg::smem_addr(wf_smem);

  constexpr int AI = WM / 16, AJ = (FRAG == WF_LDSM) ? NI : FJ, AE = (FRAG == WF_LDSM) ? 4 : 8;
  float acc[AI][AJ][AE];
#pragma unroll
  for (int i = 0; i < AI; ++i)
#pragma unroll
    for (int j = 0; j < AJ; ++j)
#pragma unroll
      for (int e = 0; e < AE; ++e) acc[i][j][e] = 0.f;

  auto compute = [&](int slot) {
    const T* sA = ring + slot * S::SLOT;
    const T* sB = sA + S::A_ELEMS;
    if constexpr (FRAG == WF_LDSM) {  // tc_gemm's compute_mma<S, FP16, BCOL = true, PADDED, WM, WN>
      const unsigned a_base = sbase + (unsigned)(slot * S::STAGE_BYTES), b_base = a_base + S::A_ELEMS * 2;
#pragma unroll
      for (int ks = 0; ks < S::KSTEPS; ++ks) {
        unsigned af[MI][4], bf[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          const int r = wm0 + mi * 16 + (lane & 15), c = ks * 2 + (lane >> 4);
          tcg::ldmatrix_x4(af[mi], a_base + tcg::chunk_off<tcg::PADDED, S::A_LC, S::CE>(r, c) * 2);
        }
#pragma unroll
        for (int p = 0; p < NI / 2; ++p) {
          unsigned q[4];
          const int r = wn0 + p * 16 + (lane & 7) + ((lane >> 4) << 3), c = ks * 2 + ((lane >> 3) & 1);
          tcg::ldmatrix_x4(q, b_base + tcg::chunk_off<tcg::PADDED, S::B_LC, S::CE>(r, c) * 2);
          bf[2 * p][0] = q[0];
          bf[2 * p][1] = q[1];
          bf[2 * p + 1][0] = q[2];
          bf[2 * p + 1][1] = q[3];
        }
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) {
            const int nj = (mi & 1) ? NI - 1 - ni : ni;
            tcg::mma16816(reinterpret_cast<float(&)[4]>(acc[mi][nj][0]), af[mi], bf[nj]);
          }
      }
    } else if constexpr (FRAG != WF_LDSM) {  // tc_gemm's compute_wmma<S, FP16, BCOL = true, 64, 32>, fragments by
                                             // wmma.load or ld.shared
      const unsigned lane_off = (unsigned)(((lane >> 2) * LD + (lane & 3) * 2) * 2);
      const unsigned a_s = sbase + (unsigned)(slot * S::STAGE_BYTES) + lane_off, b_s = a_s + S::A_ELEMS * 2;
#pragma unroll
      for (int ks = 0; ks < S::KSTEPS; ++ks) {
        unsigned af[FI][8], bf[FJ][8];
#pragma unroll
        for (int i = 0; i < FI; ++i) {
          if constexpr (FRAG == WF_WMMA) tcg::wmma_load_a(af[i], sA + (wm0 + i * 16) * LD + ks * 16, LD);
          else wf_lds_frag(af[i], a_s + (unsigned)(((wm0 + i * 16) * LD + ks * 16) * 2));
        }
#pragma unroll
        for (int j = 0; j < FJ; ++j) {
          if constexpr (FRAG == WF_WMMA) tcg::wmma_load_b(bf[j], sB + (wn0 + j * 16) * LD + ks * 16, LD);
          else wf_lds_frag(bf[j], b_s + (unsigned)(((wn0 + j * 16) * LD + ks * 16) * 2));
        }
#pragma unroll
        for (int i = 0; i < FI; ++i)
#pragma unroll
          for (int j = 0; j < FJ; ++j)
            tcg::wmma_mma(reinterpret_cast<float(&)[8]>(acc[i][j % AJ][0]), af[i], bf[j]);
      }
    }
  };
  auto copy = [&](int slot, int k0) {
    if constexpr (COPY == WF_GEMM)
      tcg::load_tile<S, tcg::PADDED, true>(A, B, ring + slot * S::SLOT, ring + slot * S::SLOT + S::A_ELEMS, m0, n0,
                                           k0, M, N, K);
  };

#pragma unroll
  for (int s = 0; s < WF_STAGES - 1; ++s) {  // shared_gemm's prologue
    copy(s, s * 32);
    tcg::cp_async_commit();
  }
  int kn = (WF_STAGES - 1) * 32;  // k0 of the k-tile the next copy fetches (wraps at K)
  if (kn >= K) kn = 0;
  __syncthreads();
  const long long c0 = clock64();
  const unsigned long long g0 = wf_global_ns();
  int slot = 0, next = WF_STAGES - 1;
  for (int it = 0; it < iters; ++it) {
    tcg::cp_async_wait<WF_STAGES - 2>();
    __syncthreads();
    copy(next, kn);
    tcg::cp_async_commit();
    kn += 32;
    if (kn >= K) kn = 0;
    compute(slot);
    slot = (slot + 1 == WF_STAGES) ? 0 : slot + 1;
    next = (next + 1 == WF_STAGES) ? 0 : next + 1;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const long long c1 = clock64();
    const unsigned long long g1 = wf_global_ns();
    long long* r = rec + WF_REC * blockIdx.x;
    r[0] = c1 - c0;
    r[1] = (long long)(g1 - g0);
    r[2] = wf_smid();
    r[3] = (long long)g0;
  }
  tcg::cp_async_wait<0>();  // drain (after the timed part)
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < AI; ++i)
#pragma unroll
    for (int j = 0; j < AJ; ++j)
#pragma unroll
      for (int e = 0; e < AE; ++e) sum += acc[i][j][e];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// wf_<frag>_<copy>_b<min blocks per SM>
#define WF_KERNEL(NAME, FRAG, COPY, B)                                                                          \
  extern "C" __global__ void __launch_bounds__(256, B)                                                          \
  wf_##NAME##_b##B(int iters, long long* rec, float* out, const unsigned short* A, const unsigned short* B_,    \
                   const int* tile_m0, const int* tile_n0, int M, int N, int K) {                               \
    wf_body<FRAG, COPY>(iters, rec, out, A, B_, tile_m0, tile_n0, M, N, K);                                    \
  }
#define WF_KERNELS(B)                         \
  WF_KERNEL(wmma_none, WF_WMMA, WF_NONE, B)   \
  WF_KERNEL(wmma_gemm, WF_WMMA, WF_GEMM, B)   \
  WF_KERNEL(lds_none, WF_LDS, WF_NONE, B)     \
  WF_KERNEL(lds_gemm, WF_LDS, WF_GEMM, B)     \
  WF_KERNEL(ldsm_none, WF_LDSM, WF_NONE, B)   \
  WF_KERNEL(ldsm_gemm, WF_LDSM, WF_GEMM, B)
WF_KERNELS(2)
WF_KERNELS(1)

// wf_ldsm_<copy>_b<min blocks per SM>_w4: the geometry of the suite kernel mma_fp16_Bcol_128x128x32_w64x64_pad_s3
// (INSTR mma_sync, 4 warps of 64x64: warp w at wm0 = (w % 2) * 64, wn0 = (w / 2) * 64; 128 threads, load_tile 8
// x 16-byte cp.async a thread and k-step; ldmatrix.x4 16 a warp and k-step, mma.sync m16n8k16 64)
#define WF_KERNEL_W4(NAME, FRAG, COPY, B)                                                                       \
  extern "C" __global__ void __launch_bounds__(128, B)                                                          \
  wf_##NAME##_b##B##_w4(int iters, long long* rec, float* out, const unsigned short* A, const unsigned short* B_, \
                        const int* tile_m0, const int* tile_n0, int M, int N, int K) {                          \
    wf_body<FRAG, COPY, 64, 64>(iters, rec, out, A, B_, tile_m0, tile_n0, M, N, K);                           \
  }
WF_KERNEL_W4(ldsm_none, WF_LDSM, WF_NONE, 2)
WF_KERNEL_W4(ldsm_gemm, WF_LDSM, WF_GEMM, 2)
WF_KERNEL_W4(ldsm_none, WF_LDSM, WF_NONE, 1)
WF_KERNEL_W4(ldsm_gemm, WF_LDSM, WF_GEMM, 1)
