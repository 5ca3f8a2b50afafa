// Tensor-core GEMM kernels of the "tc_gemm" family, instructions "wmma" and "mma_sync" (rungs 1-4 of
// the ladder in /work/briefs/knobs.md; the wgmma kernels live in wgmma.cu).
//
//   C[M x N] = A[M x K] @ B, fp32 accumulation. A row-major; B row-major K x N (BCOL = false) or stored
//   transposed, N x K row-major (BCOL = true); C row-major in fp32 or in the input type.
//
// Everything is inline PTX: no CUDA header is included (NVRTC under CuPy may not find <mma.h>, and
// CuPy's own half header clashes with it: cupy/cupy#8146). fp16 and bf16 values are carried as
// 16-bit patterns (unsigned short), tf32 operands as fp32 (float) rounded with cvt.rna.tf32.f32.
//
// Two kernel bodies, instantiated by one extern "C" kernel per configuration (mma.py writes it):
//
// * tcg::global_gemm (staging "global", rung 1): every warp owns a WM x WN tile of 16 x 16 WMMA
//   accumulators and loads its A/B fragments with wmma.load straight from global memory. A fragment
//   that is partial in M, N or K (or whose row stride is not a multiple of 16 bytes) is copied
//   element by element, zero-filled, into a per-warp scratch in shared memory and loaded from there,
//   so any M, N, K works. Accumulators leave through wmma.store (fp32, whole fragment, aligned) or
//   through the per-warp scratch with guarded, converting element stores.
//
// * tcg::shared_gemm (staging "shared", rungs 2-4): block tiles BM x BK of A and BK x BN (or BN x BK)
//   of B in shared memory, in a ring of STAGES slots. STAGES == 1: synchronous copy (global ->
//   registers -> shared, barrier, compute, barrier). STAGES >= 2: 16-byte cp.async.cg with src-size 0
//   (zero fill) at the edges, one commit group per k-tile, cp.async.wait_group(STAGES - 2) and ONE
//   __syncthreads per k-step; the tile STAGES - 1 ahead is issued right after that barrier into the
//   slot computed in the previous step. Compute: WMMA 16x16x16 / 16x16x8 fragments (wmma.load from
//   shared) or mma.sync m16n8k16 / m16n8k8 fed by ldmatrix.x4 (A; B when it is K-contiguous; B
//   row-major fp16/bf16 with ldmatrix.x4.trans; B row-major tf32 with 32-bit shared loads, since
//   ldmatrix moves 16-bit elements and cannot transpose 32-bit ones). For tf32, ldmatrix (non-trans)
//   of 8 rows x 16 bytes gives lane l the 32-bit element (row l/4, column l%4), which is exactly the
//   m16n8k8 tf32 A fragment layout (PTX ISA, "Matrix Fragments for mma.m16n8k8", .tf32) and the
//   K-contiguous B fragment layout, the same trick CUTLASS's SM80 tf32 kernels use (SM75_U32x4_LDSM_N).
//
// Shared-memory layouts (of 16-byte chunks; CE = 16 / sizeof(element) elements per chunk; a tile row
// has LC chunks):
//   NAIVE    dense rows (pitch LC chunks): ldmatrix's 8 rows of one chunk hit the same banks when
//            the row is 64 or 128 bytes (4-way / 8-way conflicts);
//   PADDED   pitch LC + 1 chunks (+8 half / +4 fp32 elements): 8 consecutive rows fall in 8 distinct
//            16-byte bank groups;
//   SWIZZLED dense rows, chunk c of row r stored at chunk c ^ s(r) with s(r) = r & 7 when LC >= 8
//            and (r / (8 / LC)) % LC when LC < 8 (LC a power of two): 8 consecutive rows of one
//            logical chunk land in 8 distinct bank groups of a 128-byte line (conflict-free ldmatrix
//            and 16-byte cp.async writes). WMMA cannot read this layout (wmma.load wants a strided
//            matrix); mma.py rejects it.
//
// Epilogues: DIRECT: guarded stores from the accumulators (mma.sync: 2 consecutive elements a store;
// WMMA: wmma.store to global for whole aligned fp32 fragments, else through a per-warp scratch).
// SHARED: after the main loop (cp.async drained, barrier) the block's C tile is staged in fp32 in
// shared memory over the operand buffers (pitch BN + 8 floats: float2 accumulator writes are
// conflict-free, rows stay 16-byte aligned), then written with 16-byte coalesced guarded stores.
//
// Index arithmetic: element offsets within a matrix use 64-bit products (idx_t) where a row index
// multiplies a stride.

namespace tcg {

// ---- knob codes (mma.py uses the same numbers) ------------------------------------------------------
constexpr int FP16 = 0, BF16 = 1, TF32 = 2;          // dtype
constexpr int OUT_F32 = 0, OUT_INPUT = 1;            // out_dtype
constexpr int WMMA = 0, MMA_SYNC = 1;                // instruction
constexpr int NAIVE = 0, PADDED = 1, SWIZZLED = 2;   // layout
constexpr int EPI_DIRECT = 0, EPI_SHARED = 1;        // epilogue
constexpr int C_PAD_FLOATS = 8;                      // the staged C tile's row pad (32 bytes)
typedef long long idx_t;  // 64-bit element offsets (no <cstddef>: size_t is not guaranteed under NVRTC)

template <int DT> struct Elem { typedef unsigned short T; static constexpr int BYTES = 2; };
template <> struct Elem<TF32> { typedef float T; static constexpr int BYTES = 4; };

// the stored output element: fp32, or the input's 16-bit type (tf32's "input" is fp32)
template <int DT, int OUT> struct Out { typedef float T; static constexpr int BYTES = 4; };
template <> struct Out<FP16, OUT_INPUT> { typedef unsigned short T; static constexpr int BYTES = 2; };
template <> struct Out<BF16, OUT_INPUT> { typedef unsigned short T; static constexpr int BYTES = 2; };

// ---- conversions ------------------------------------------------------------------------------------
__device__ __forceinline__ unsigned short f32_to_f16(float x) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}
__device__ __forceinline__ unsigned short f32_to_bf16(float x) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}
// two floats to one 32-bit word: lo at the lower address (cvt.rn.{f16,bf16}x2.f32 d, a, b puts a in
// the upper half: PTX ISA, cvt)
template <int DT> __device__ __forceinline__ unsigned pack2(float lo, float hi) {
  unsigned r;
  if constexpr (DT == FP16) asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
template <int DT, int OUT> __device__ __forceinline__ typename Out<DT, OUT>::T to_out(float x) {
  if constexpr (Out<DT, OUT>::BYTES == 4) return x;
  else if constexpr (DT == FP16) return f32_to_f16(x);
  else return f32_to_bf16(x);
}
__device__ __forceinline__ unsigned to_tf32(unsigned bits) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(__uint_as_float(bits)));
  return r;
}

// ---- shared memory, cp.async, ldmatrix ------------------------------------------------------------
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  unsigned r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}
// 16 bytes global -> shared, bypassing L1; src_bytes = 0 zero-fills the destination (PTX ISA, cp.async)
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
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// ---- mma.sync (PTX ISA, "Warp-level matrix multiply-accumulate: mma") -----------------------------
template <int DT> __device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4],
                                                           const unsigned (&b)[2]) {
  if constexpr (DT == FP16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else if constexpr (DT == BF16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

// ---- WMMA through PTX (wmma.load / wmma.mma / wmma.store; generic addresses) ----------------------
// Fragment registers per thread (PTX ISA, "Matrix Fragments for WMMA"): f16 A/B 8 x .b32 (f16x2),
// bf16 A/B 4 x .b32, tf32 (m16n16k8) A/B 4 x .b32, f32 accumulator 8 x .f32.
template <int DT> struct WFrag { static constexpr int AB = (DT == FP16) ? 8 : 4; };

#define TCG_R8(x) "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3]), "=r"(x[4]), "=r"(x[5]), "=r"(x[6]), "=r"(x[7])
#define TCG_R4(x) "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3])

template <int DT, bool COL>
__device__ __forceinline__ void wmma_load_a(unsigned* r, const void* p, int ldm) {
  if constexpr (DT == FP16)
    asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;\n"
                 : TCG_R8(r) : "l"(p), "r"(ldm));
  else if constexpr (DT == BF16)
    asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.bf16 {%0, %1, %2, %3}, [%4], %5;\n"
                 : TCG_R4(r) : "l"(p), "r"(ldm));
  else
    asm volatile("wmma.load.a.sync.aligned.row.m16n16k8.tf32 {%0, %1, %2, %3}, [%4], %5;\n"
                 : TCG_R4(r) : "l"(p), "r"(ldm));
}
template <int DT, bool COL>
__device__ __forceinline__ void wmma_load_b(unsigned* r, const void* p, int ldm) {
  if constexpr (DT == FP16) {
    if constexpr (COL)
      asm volatile("wmma.load.b.sync.aligned.col.m16n16k16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;\n"
                   : TCG_R8(r) : "l"(p), "r"(ldm));
    else
      asm volatile("wmma.load.b.sync.aligned.row.m16n16k16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;\n"
                   : TCG_R8(r) : "l"(p), "r"(ldm));
  } else if constexpr (DT == BF16) {
    if constexpr (COL)
      asm volatile("wmma.load.b.sync.aligned.col.m16n16k16.bf16 {%0, %1, %2, %3}, [%4], %5;\n"
                   : TCG_R4(r) : "l"(p), "r"(ldm));
    else
      asm volatile("wmma.load.b.sync.aligned.row.m16n16k16.bf16 {%0, %1, %2, %3}, [%4], %5;\n"
                   : TCG_R4(r) : "l"(p), "r"(ldm));
  } else {
    if constexpr (COL)
      asm volatile("wmma.load.b.sync.aligned.col.m16n16k8.tf32 {%0, %1, %2, %3}, [%4], %5;\n"
                   : TCG_R4(r) : "l"(p), "r"(ldm));
    else
      asm volatile("wmma.load.b.sync.aligned.row.m16n16k8.tf32 {%0, %1, %2, %3}, [%4], %5;\n"
                   : TCG_R4(r) : "l"(p), "r"(ldm));
  }
}
#undef TCG_R8
#undef TCG_R4

#define TCG_D8 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
template <int DT, bool COL>
__device__ __forceinline__ void wmma_mma(float (&d)[8], const unsigned* a, const unsigned* b) {
  if constexpr (DT == FP16) {
    if constexpr (COL)
      asm volatile("wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%0, %1, %2, %3, %4, %5, %6, %7}, "
                   "{%8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19, %20, %21, %22, %23}, "
                   "{%0, %1, %2, %3, %4, %5, %6, %7};\n"
                   : TCG_D8
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(a[4]), "r"(a[5]), "r"(a[6]), "r"(a[7]),
                     "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(b[4]), "r"(b[5]), "r"(b[6]), "r"(b[7]));
    else
      asm volatile("wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32 {%0, %1, %2, %3, %4, %5, %6, %7}, "
                   "{%8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19, %20, %21, %22, %23}, "
                   "{%0, %1, %2, %3, %4, %5, %6, %7};\n"
                   : TCG_D8
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(a[4]), "r"(a[5]), "r"(a[6]), "r"(a[7]),
                     "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(b[4]), "r"(b[5]), "r"(b[6]), "r"(b[7]));
  } else if constexpr (DT == BF16) {
    if constexpr (COL)
      asm volatile("wmma.mma.sync.aligned.row.col.m16n16k16.f32.bf16.bf16.f32 {%0, %1, %2, %3, %4, %5, %6, %7}, "
                   "{%8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3, %4, %5, %6, %7};\n"
                   : TCG_D8
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]));
    else
      asm volatile("wmma.mma.sync.aligned.row.row.m16n16k16.f32.bf16.bf16.f32 {%0, %1, %2, %3, %4, %5, %6, %7}, "
                   "{%8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3, %4, %5, %6, %7};\n"
                   : TCG_D8
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]));
  } else {
    if constexpr (COL)
      asm volatile("wmma.mma.sync.aligned.row.col.m16n16k8.f32.tf32.tf32.f32 {%0, %1, %2, %3, %4, %5, %6, %7}, "
                   "{%8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3, %4, %5, %6, %7};\n"
                   : TCG_D8
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]));
    else
      asm volatile("wmma.mma.sync.aligned.row.row.m16n16k8.f32.tf32.tf32.f32 {%0, %1, %2, %3, %4, %5, %6, %7}, "
                   "{%8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3, %4, %5, %6, %7};\n"
                   : TCG_D8
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]));
  }
}
#undef TCG_D8

// row-major fp32 store of a 16 x 16 accumulator (ldm in floats, a multiple of 4; p 32-byte aligned)
template <int DT>
__device__ __forceinline__ void wmma_store(float* p, const float (&d)[8], int ldm) {
  if constexpr (DT == TF32)
    asm volatile("wmma.store.d.sync.aligned.row.m16n16k8.f32 [%0], {%1, %2, %3, %4, %5, %6, %7, %8}, %9;\n"
                 ::"l"(p), "f"(d[0]), "f"(d[1]), "f"(d[2]), "f"(d[3]), "f"(d[4]), "f"(d[5]), "f"(d[6]), "f"(d[7]),
                 "r"(ldm) : "memory");
  else
    asm volatile("wmma.store.d.sync.aligned.row.m16n16k16.f32 [%0], {%1, %2, %3, %4, %5, %6, %7, %8}, %9;\n"
                 ::"l"(p), "f"(d[0]), "f"(d[1]), "f"(d[2]), "f"(d[3]), "f"(d[4]), "f"(d[5]), "f"(d[6]), "f"(d[7]),
                 "r"(ldm) : "memory");
}

template <int DT, int N> __device__ __forceinline__ void round_tf32(unsigned (&r)[N]) {
  if constexpr (DT == TF32) {
#pragma unroll
    for (int i = 0; i < N; ++i) r[i] = to_tf32(r[i]);
  }
}

// One WMMA accumulator fragment to C (rows r0.., columns c0..; M x N, ldc = N) through a per-warp
// 16 x 16 fp32 scratch in shared memory, with guarded converting stores.
template <int DT, int OUT>
__device__ __forceinline__ void wmma_store_guarded(typename Out<DT, OUT>::T* C, const float (&d)[8],
                                                   float* scratch, int r0, int c0, int M, int N, int lane) {
  wmma_store<DT>(scratch, d, 16);
  __syncwarp();
#pragma unroll 1
  for (int e = lane; e < 256; e += 32) {
    const int r = r0 + e / 16, c = c0 + e % 16;
    if (r < M && c < N) C[(idx_t)r * N + c] = to_out<DT, OUT>(scratch[e]);
  }
  __syncwarp();
}

// ======================================================================================================
// Rung 1: WMMA fragments straight from global memory (no block-level shared memory; per-warp scratch)
// ======================================================================================================
template <int DT, int OUT, bool BCOL, int BM, int BN, int WM, int WN>
__device__ __forceinline__ void global_gemm(const void* __restrict__ Av, const void* __restrict__ Bv,
                                            void* __restrict__ Cv, int M, int N, int K) {
  typedef typename Elem<DT>::T T;
  typedef typename Out<DT, OUT>::T TO;
  constexpr int EB = Elem<DT>::BYTES, CE = 16 / EB;
  constexpr int KF = (DT == TF32) ? 8 : 16;  // fragment k
  constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN, WARPS = WARPS_M * WARPS_N;
  constexpr int FI = WM / 16, FJ = WN / 16, FR = WFrag<DT>::AB;
  constexpr int SCRATCH_BYTES = 16 * KF * EB * 2 + 16 * 16 * 4;  // A edge, B edge, C (fp32)
  static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0, "tile shapes");
  __shared__ __align__(128) unsigned char scratch_all[WARPS * SCRATCH_BYTES];

  const T* A = static_cast<const T*>(Av);
  const T* B = static_cast<const T*>(Bv);
  TO* C = static_cast<TO*>(Cv);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm0 = blockIdx.y * BM + (warp % WARPS_M) * WM;
  const int wn0 = blockIdx.x * BN + (warp / WARPS_M) * WN;
  if (wm0 >= M || wn0 >= N) return;  // the whole warp (no block barrier in this kernel)
  unsigned char* scratch = scratch_all + warp * SCRATCH_BYTES;
  T* sa = reinterpret_cast<T*>(scratch);
  T* sb = reinterpret_cast<T*>(scratch + 16 * KF * EB);
  float* sc = reinterpret_cast<float*>(scratch + 16 * KF * EB * 2);
  // wmma.load from global needs ldm a multiple of 16 bytes (then every fragment origin is 32-byte
  // aligned: its row is a multiple of 8 or 16 and its column of 16 bytes)
  const bool a_strided = (K % CE) == 0;
  const bool b_strided = ((BCOL ? K : N) % CE) == 0;

  float acc[FI][FJ][8];
#pragma unroll
  for (int i = 0; i < FI; ++i)
#pragma unroll
    for (int j = 0; j < FJ; ++j)
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[i][j][e] = 0.f;

  for (int k0 = 0; k0 < K; k0 += KF) {
    unsigned af[FI][FR], bf[FJ][FR];
    const bool k_whole = k0 + KF <= K;
#pragma unroll
    for (int i = 0; i < FI; ++i) {
      const int r0 = wm0 + i * 16;
      if (a_strided && k_whole && r0 + 16 <= M) {
        wmma_load_a<DT, false>(af[i], A + (idx_t)r0 * K + k0, K);
      } else {  // 16 x KF, zero-filled
#pragma unroll 1
        for (int e = lane; e < 16 * KF; e += 32) {
          const int r = r0 + e / KF, c = k0 + e % KF;
          sa[e] = (r < M && c < K) ? A[(idx_t)r * K + c] : T(0);
        }
        __syncwarp();
        wmma_load_a<DT, false>(af[i], sa, KF);
        __syncwarp();
      }
      round_tf32<DT>(af[i]);
    }
#pragma unroll
    for (int j = 0; j < FJ; ++j) {
      const int c0 = wn0 + j * 16;
      if (b_strided && k_whole && c0 + 16 <= N) {
        if constexpr (BCOL) wmma_load_b<DT, true>(bf[j], B + (idx_t)c0 * K + k0, K);
        else wmma_load_b<DT, false>(bf[j], B + (idx_t)k0 * N + c0, N);
      } else {
        if constexpr (BCOL) {  // 16 (n) x KF (k), col_major with ldm KF
#pragma unroll 1
          for (int e = lane; e < 16 * KF; e += 32) {
            const int n = c0 + e / KF, k = k0 + e % KF;
            sb[e] = (n < N && k < K) ? B[(idx_t)n * K + k] : T(0);
          }
          __syncwarp();
          wmma_load_b<DT, true>(bf[j], sb, KF);
        } else {  // KF (k) x 16 (n), row_major with ldm 16
#pragma unroll 1
          for (int e = lane; e < 16 * KF; e += 32) {
            const int k = k0 + e / 16, n = c0 + e % 16;
            sb[e] = (n < N && k < K) ? B[(idx_t)k * N + n] : T(0);
          }
          __syncwarp();
          wmma_load_b<DT, false>(bf[j], sb, 16);
        }
        __syncwarp();
      }
      round_tf32<DT>(bf[j]);
    }
#pragma unroll
    for (int i = 0; i < FI; ++i)
#pragma unroll
      for (int j = 0; j < FJ; ++j) wmma_mma<DT, BCOL>(acc[i][j], af[i], bf[j]);
  }

  const bool c_strided = (N % 4) == 0;  // fp32 wmma.store: ldm a multiple of 16 bytes
#pragma unroll
  for (int i = 0; i < FI; ++i)
#pragma unroll
    for (int j = 0; j < FJ; ++j) {
      const int r0 = wm0 + i * 16, c0 = wn0 + j * 16;
      if (Out<DT, OUT>::BYTES == 4 && c_strided && r0 + 16 <= M && c0 + 16 <= N)
        wmma_store<DT>(reinterpret_cast<float*>(C) + (idx_t)r0 * N + c0, acc[i][j], N);
      else
        wmma_store_guarded<DT, OUT>(C, acc[i][j], sc, r0, c0, M, N, lane);
    }
}

// ======================================================================================================
// Rungs 2-4: block tiles staged in shared memory
// ======================================================================================================
// element offset of chunk c of row r in a tile with LC chunks a row, CE elements a chunk
template <int LAYOUT, int LC, int CE>
__device__ __forceinline__ int chunk_off(int r, int c) {
  if constexpr (LAYOUT == SWIZZLED) {
    constexpr int RPG = (LC >= 8) ? 1 : 8 / LC;  // rows per 128-byte line
    constexpr int MASK = ((LC >= 8) ? 8 : LC) - 1;
    return (r * LC + (c ^ ((r / RPG) & MASK))) * CE;
  } else if constexpr (LAYOUT == PADDED) {
    return (r * (LC + 1) + c) * CE;
  } else {
    return (r * LC + c) * CE;
  }
}

template <int DT, int OUT, bool BCOL, int INSTR, int BM, int BN, int BK, int WM, int WN, int LAYOUT,
          int STAGES, int EPI>
struct Shared {
  typedef typename Elem<DT>::T T;
  typedef typename Out<DT, OUT>::T TO;
  static constexpr int EB = Elem<DT>::BYTES, CE = 16 / EB;
  static constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN, THREADS = WARPS_M * WARPS_N * 32;
  static constexpr int A_ROWS = BM, A_LC = BK / CE;                       // A tile: BM x BK
  static constexpr int B_ROWS = BCOL ? BN : BK, B_LC = (BCOL ? BK : BN) / CE;  // B tile
  static constexpr int PAD = (LAYOUT == PADDED) ? 1 : 0;
  static constexpr int A_ELEMS = A_ROWS * (A_LC + PAD) * CE;
  static constexpr int B_ELEMS = B_ROWS * (B_LC + PAD) * CE;
  static constexpr int STAGE_BYTES = (A_ELEMS + B_ELEMS) * EB;
  static constexpr int A_CHUNKS = A_ROWS * A_LC, B_CHUNKS = B_ROWS * B_LC;  // 16-byte chunks of a k-tile
  static constexpr int A_IT = (A_CHUNKS + THREADS - 1) / THREADS, B_IT = (B_CHUNKS + THREADS - 1) / THREADS;
  static constexpr int KSTEPS = A_LC / 2;  // a fragment k (16 fp16/bf16, 8 tf32) is 2 chunks
  static constexpr int C_PITCH = BN + C_PAD_FLOATS;
  static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0, "tile shapes");
  static_assert(BK % CE == 0 && A_LC % 2 == 0, "BK: a whole number of fragment k steps");
  static_assert(LAYOUT != SWIZZLED || ((A_LC & (A_LC - 1)) == 0 && (B_LC & (B_LC - 1)) == 0),
                "swizzled rows: a power-of-two number of 16-byte chunks");
  static_assert(INSTR == MMA_SYNC || LAYOUT != SWIZZLED, "WMMA cannot read the swizzled layout");
};

// STAGES == 1, first half: this thread's 16-byte chunks of the k-tile (k0) of A and B into registers
// (zero outside the matrices). load_tile calls it and then store_regs; staged_store_probe calls the halves
// on their own.
template <class S, bool BCOL>
__device__ __forceinline__ void load_regs(const typename S::T* __restrict__ A, const typename S::T* __restrict__ B,
                                          uint4 (&va)[S::A_IT], uint4 (&vb)[S::B_IT], int m0, int n0, int k0,
                                          int M, int N, int K) {
  constexpr int CE = S::CE;
  constexpr int A_CHUNKS = S::A_CHUNKS, B_CHUNKS = S::B_CHUNKS;
  const int tid = threadIdx.x;
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
  for (int it = 0; it < S::A_IT; ++it) {
    const int i = tid + it * S::THREADS;
    va[it] = zero;
    if (A_CHUNKS % S::THREADS == 0 || i < A_CHUNKS) {
      const int r = i / S::A_LC, c = i % S::A_LC;
      const int gm = m0 + r, gk = k0 + c * CE;
      if (gm < M && gk < K) va[it] = *reinterpret_cast<const uint4*>(A + (idx_t)gm * K + gk);
    }
  }
#pragma unroll
  for (int it = 0; it < S::B_IT; ++it) {
    const int i = tid + it * S::THREADS;
    vb[it] = zero;
    if (B_CHUNKS % S::THREADS == 0 || i < B_CHUNKS) {
      const int r = i / S::B_LC, c = i % S::B_LC;
      if constexpr (BCOL) {
        const int gn = n0 + r, gk = k0 + c * CE;
        if (gn < N && gk < K) vb[it] = *reinterpret_cast<const uint4*>(B + (idx_t)gn * K + gk);
      } else {
        const int gk = k0 + r, gn = n0 + c * CE;
        if (gk < K && gn < N) vb[it] = *reinterpret_cast<const uint4*>(B + (idx_t)gk * N + gn);
      }
    }
  }
}

// STAGES == 1, second half: the registers into the shared tiles in their layout (16-byte stores).
template <class S, int LAYOUT>
__device__ __forceinline__ void store_regs(typename S::T* sA, typename S::T* sB, const uint4 (&va)[S::A_IT],
                                           const uint4 (&vb)[S::B_IT]) {
  constexpr int CE = S::CE;
  constexpr int A_CHUNKS = S::A_CHUNKS, B_CHUNKS = S::B_CHUNKS;
  const int tid = threadIdx.x;
#pragma unroll
  for (int it = 0; it < S::A_IT; ++it) {
    const int i = tid + it * S::THREADS;
    if (A_CHUNKS % S::THREADS == 0 || i < A_CHUNKS)
      *reinterpret_cast<uint4*>(sA + chunk_off<LAYOUT, S::A_LC, CE>(i / S::A_LC, i % S::A_LC)) = va[it];
  }
#pragma unroll
  for (int it = 0; it < S::B_IT; ++it) {
    const int i = tid + it * S::THREADS;
    if (B_CHUNKS % S::THREADS == 0 || i < B_CHUNKS)
      *reinterpret_cast<uint4*>(sB + chunk_off<LAYOUT, S::B_LC, CE>(i / S::B_LC, i % S::B_LC)) = vb[it];
  }
}

// Copy one k-tile (k0) of A and B into a ring slot: cp.async (STAGES >= 2) or registers -> shared.
template <class S, int STAGES, int LAYOUT, bool BCOL>
__device__ __forceinline__ void load_tile(const typename S::T* __restrict__ A, const typename S::T* __restrict__ B,
                                          typename S::T* sA, typename S::T* sB, int m0, int n0, int k0,
                                          int M, int N, int K) {
  typedef typename S::T T;
  constexpr int CE = S::CE;
  constexpr int A_CHUNKS = S::A_ROWS * S::A_LC, B_CHUNKS = S::B_ROWS * S::B_LC;
  constexpr int A_IT = (A_CHUNKS + S::THREADS - 1) / S::THREADS;
  constexpr int B_IT = (B_CHUNKS + S::THREADS - 1) / S::THREADS;
  const int tid = threadIdx.x;
  if constexpr (STAGES >= 2) {
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
  } else {
    uint4 va[A_IT], vb[B_IT];
    load_regs<S, BCOL>(A, B, va, vb, m0, n0, k0, M, N, K);
    store_regs<S, LAYOUT>(sA, sB, va, vb);
  }
}

// One k-tile of mma.sync on the warp's WM x WN tile (accumulators acc[MI][NI][4]).
template <class S, int DT, bool BCOL, int LAYOUT, int WM, int WN>
__device__ __forceinline__ void compute_mma(const typename S::T* sA, const typename S::T* sB, int wm0, int wn0,
                                            int lane, float (&acc)[WM / 16][WN / 8][4]) {
  constexpr int MI = WM / 16, NI = WN / 8, CE = S::CE, EB = S::EB;
  const unsigned a_base = smem_addr(sA), b_base = smem_addr(sB);
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int ks = 0; ks < S::KSTEPS; ++ks) {
    unsigned af[MI][4], bf[NI][2];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int r = wm0 + mi * 16 + (lane & 15), c = ks * 2 + (lane >> 4);
      ldmatrix_x4(af[mi], a_base + chunk_off<LAYOUT, S::A_LC, CE>(r, c) * EB);
      round_tf32<DT>(af[mi]);
    }
    if constexpr (BCOL || DT != TF32) {
#pragma unroll
      for (int p = 0; p < NI / 2; ++p) {
        unsigned q[4];
        if constexpr (BCOL) {  // tile rows are n, K contiguous: non-transposed ldmatrix
          const int r = wn0 + p * 16 + (lane & 7) + ((lane >> 4) << 3), c = ks * 2 + ((lane >> 3) & 1);
          ldmatrix_x4(q, b_base + chunk_off<LAYOUT, S::B_LC, CE>(r, c) * EB);
        } else {  // tile rows are k, N contiguous (16-bit): transposing ldmatrix
          const int r = ks * 16 + (lane & 15), c = (wn0 + p * 16) / CE + (lane >> 4);
          ldmatrix_x4_trans(q, b_base + chunk_off<LAYOUT, S::B_LC, CE>(r, c) * EB);
        }
        bf[2 * p][0] = q[0];
        bf[2 * p][1] = q[1];
        bf[2 * p + 1][0] = q[2];
        bf[2 * p + 1][1] = q[3];
      }
    } else {  // tf32, B row-major: b0 = B[k = t][n = g], b1 = B[k = t + 4][n = g] (32-bit loads)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int n = wn0 + ni * 8 + g, k = ks * 8 + t;
        bf[ni][0] = __float_as_uint(sB[chunk_off<LAYOUT, S::B_LC, CE>(k, n / CE) + n % CE]);
        bf[ni][1] = __float_as_uint(sB[chunk_off<LAYOUT, S::B_LC, CE>(k + 4, n / CE) + n % CE]);
      }
    }
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) round_tf32<DT>(bf[ni]);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        // serpentine order over ni: consecutive mma share a B fragment
        const int nj = (mi & 1) ? NI - 1 - ni : ni;
        mma16816<DT>(acc[mi][nj], af[mi], bf[nj]);
      }
  }
}

// One k-tile of WMMA on the warp's WM x WN tile (accumulators acc[WM/16][WN/16][8]).
template <class S, int DT, bool BCOL, int WM, int WN>
__device__ __forceinline__ void compute_wmma(const typename S::T* sA, const typename S::T* sB, int wm0, int wn0,
                                             float (&acc)[WM / 16][WN / 16][8]) {
  constexpr int FI = WM / 16, FJ = WN / 16, FR = WFrag<DT>::AB, CE = S::CE;
  constexpr int KF = 2 * CE;
  constexpr int A_LD = (S::A_LC + S::PAD) * CE, B_LD = (S::B_LC + S::PAD) * CE;  // pitches, elements
#pragma unroll
  for (int ks = 0; ks < S::KSTEPS; ++ks) {
    unsigned af[FI][FR], bf[FJ][FR];
#pragma unroll
    for (int i = 0; i < FI; ++i) {
      wmma_load_a<DT, false>(af[i], sA + (wm0 + i * 16) * A_LD + ks * KF, A_LD);
      round_tf32<DT>(af[i]);
    }
#pragma unroll
    for (int j = 0; j < FJ; ++j) {
      if constexpr (BCOL) wmma_load_b<DT, true>(bf[j], sB + (wn0 + j * 16) * B_LD + ks * KF, B_LD);
      else wmma_load_b<DT, false>(bf[j], sB + (ks * KF) * B_LD + wn0 + j * 16, B_LD);
      round_tf32<DT>(bf[j]);
    }
#pragma unroll
    for (int i = 0; i < FI; ++i)
#pragma unroll
      for (int j = 0; j < FJ; ++j) wmma_mma<DT, BCOL>(acc[i][j], af[i], bf[j]);
  }
}

// the staged C tile (fp32, pitch C_PITCH) to global with 16-byte coalesced guarded stores
template <class S, int DT, int OUT, int BM, int BN>
__device__ __forceinline__ void store_staged_c(const float* sC, typename S::TO* C, int m0, int n0, int M, int N) {
  typedef typename S::TO TO;
  constexpr int OV = 16 / Out<DT, OUT>::BYTES;  // output elements per 16-byte store
  constexpr int CPR = BN / OV, TOTAL = BM * CPR;
  const bool vec_ok = (N % OV) == 0;
#pragma unroll 4
  for (int i = threadIdx.x; i < TOTAL; i += S::THREADS) {
    const int lr = i / CPR, lc = (i % CPR) * OV;
    const int gr = m0 + lr, gc = n0 + lc;
    if (gr >= M) continue;
    float v[OV];
#pragma unroll
    for (int q = 0; q < OV; q += 4) {
      const float4 f = *reinterpret_cast<const float4*>(sC + lr * S::C_PITCH + lc + q);
      v[q] = f.x;
      v[q + 1] = f.y;
      v[q + 2] = f.z;
      v[q + 3] = f.w;
    }
    TO* dst = C + (idx_t)gr * N + gc;
    if (vec_ok && gc + OV <= N) {
      if constexpr (OV == 4) {
        *reinterpret_cast<float4*>(dst) = make_float4(v[0], v[1], v[2], v[3]);
      } else {
        *reinterpret_cast<uint4*>(dst) = make_uint4(pack2<DT>(v[0], v[1]), pack2<DT>(v[2], v[3]),
                                                    pack2<DT>(v[4], v[5]), pack2<DT>(v[6], v[7]));
      }
    } else {
#pragma unroll
      for (int e = 0; e < OV; ++e)
        if (gc + e < N) dst[e] = to_out<DT, OUT>(v[e]);
    }
  }
}

// two adjacent outputs (row r, columns c, c + 1) from an mma.sync accumulator pair
template <int DT, int OUT>
__device__ __forceinline__ void store_pair(typename Out<DT, OUT>::T* C, int r, int c, float x0, float x1, int M,
                                           int N, bool even_n) {
  if (r >= M) return;
  typename Out<DT, OUT>::T* p = C + (idx_t)r * N + c;
  if (even_n && c + 1 < N) {
    if constexpr (Out<DT, OUT>::BYTES == 4) *reinterpret_cast<float2*>(p) = make_float2(x0, x1);
    else *reinterpret_cast<unsigned*>(p) = pack2<DT>(x0, x1);
  } else {
    if (c < N) p[0] = to_out<DT, OUT>(x0);
    if (c + 1 < N) p[1] = to_out<DT, OUT>(x1);
  }
}

// ----- k-loop parts (compiled in only with TC_PARTS: validation/studies/tc_step_parts.py) -----------------
// Thread 0 of block b sums clock64 over the cp.async ring's k-loop and writes, at tc_parts + b * TC_PARTS_WORDS:
// its SM id, the k-loop, the waits (cp.async.wait_group and the barrier), the copy issue (the tile STAGES - 1
// ahead and the commit) and its warp's fragment loads and MMAs. Nothing else changes.
#ifndef TC_PARTS
#define TC_PARTS 0
#endif
#if TC_PARTS
#define TC_PARTS_WORDS 5
extern "C" { __device__ unsigned long long* tc_parts; }  // unmangled: set from Python
__device__ __forceinline__ long long parts_clock() {
  long long t;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) :: "memory");
  return t;
}
#endif

template <int DT, int OUT, bool BCOL, int INSTR, int BM, int BN, int BK, int WM, int WN, int LAYOUT,
          int STAGES, int EPI>
__device__ __forceinline__ void shared_gemm(const void* __restrict__ Av, const void* __restrict__ Bv,
                                            void* __restrict__ Cv, int M, int N, int K) {
  typedef Shared<DT, OUT, BCOL, INSTR, BM, BN, BK, WM, WN, LAYOUT, STAGES, EPI> S;
  typedef typename S::T T;
  typedef typename S::TO TO;
  extern __shared__ __align__(128) unsigned char smem[];
  const T* A = static_cast<const T*>(Av);
  const T* B = static_cast<const T*>(Bv);
  TO* C = static_cast<TO*>(Cv);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int wm0 = (warp % S::WARPS_M) * WM, wn0 = (warp / S::WARPS_M) * WN;  // within the block tile
  T* ring = reinterpret_cast<T*>(smem);
  constexpr int SLOT = S::A_ELEMS + S::B_ELEMS;  // elements per ring slot

  constexpr int AI = WM / 16, AJ = (INSTR == MMA_SYNC) ? WN / 8 : WN / 16, AE = (INSTR == MMA_SYNC) ? 4 : 8;
  float acc[AI][AJ][AE];
#pragma unroll
  for (int i = 0; i < AI; ++i)
#pragma unroll
    for (int j = 0; j < AJ; ++j)
#pragma unroll
      for (int e = 0; e < AE; ++e) acc[i][j][e] = 0.f;

  const int ktiles = (K + BK - 1) / BK;
  auto compute = [&](int slot) {
    const T* sA = ring + slot * SLOT;
    const T* sB = sA + S::A_ELEMS;
    if constexpr (INSTR == MMA_SYNC) compute_mma<S, DT, BCOL, LAYOUT, WM, WN>(sA, sB, wm0, wn0, lane, acc);
    else compute_wmma<S, DT, BCOL, WM, WN>(sA, sB, wm0, wn0, acc);
  };

  if constexpr (STAGES == 1) {
    for (int kt = 0; kt < ktiles; ++kt) {
      __syncthreads();  // the previous k-tile's reads are done
      load_tile<S, 1, LAYOUT, BCOL>(A, B, ring, ring + S::A_ELEMS, m0, n0, kt * BK, M, N, K);
      __syncthreads();
      compute(0);
    }
  } else {
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < ktiles) load_tile<S, STAGES, LAYOUT, BCOL>(A, B, ring + s * SLOT, ring + s * SLOT + S::A_ELEMS,
                                                          m0, n0, s * BK, M, N, K);
      cp_async_commit();
    }
    int slot = 0, next = STAGES - 1;  // kt % STAGES, (kt + STAGES - 1) % STAGES
#if TC_PARTS
    long long parts_wait = 0, parts_copy = 0, parts_compute = 0;
    const long long parts_start = parts_clock();
#endif
    for (int kt = 0; kt < ktiles; ++kt) {
#if TC_PARTS
      const long long q0 = parts_clock();
#endif
      cp_async_wait<STAGES - 2>();  // k-tile kt has landed (for this thread's copies) ...
      __syncthreads();              // ... for every thread's; and slot `next` is no longer read
#if TC_PARTS
      const long long q1 = parts_clock();
      parts_wait += q1 - q0;
#endif
      const int nk = kt + STAGES - 1;
      if (nk < ktiles) load_tile<S, STAGES, LAYOUT, BCOL>(A, B, ring + next * SLOT, ring + next * SLOT + S::A_ELEMS,
                                                           m0, n0, nk * BK, M, N, K);
      cp_async_commit();
#if TC_PARTS
      const long long q2 = parts_clock();
      parts_copy += q2 - q1;
#endif
      compute(slot);
#if TC_PARTS
      parts_compute += parts_clock() - q2;
#endif
      slot = (slot + 1 == STAGES) ? 0 : slot + 1;
      next = (next + 1 == STAGES) ? 0 : next + 1;
    }
#if TC_PARTS
    if (threadIdx.x == 0) {
      unsigned sm;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
      unsigned long long* row = tc_parts + (size_t)(blockIdx.y * gridDim.x + blockIdx.x) * TC_PARTS_WORDS;
      row[0] = sm;
      row[1] = (unsigned long long)(parts_clock() - parts_start);
      row[2] = (unsigned long long)parts_wait;
      row[3] = (unsigned long long)parts_copy;
      row[4] = (unsigned long long)parts_compute;
    }
#endif
  }

  // ---- epilogue ----
  if constexpr (EPI == EPI_SHARED || INSTR == WMMA) {
    if constexpr (STAGES >= 2) cp_async_wait<0>();
    __syncthreads();  // the operand buffers are free
  }
  float* sC = reinterpret_cast<float*>(smem);
  if constexpr (INSTR == MMA_SYNC) {
    const int g = lane >> 2, t = lane & 3;
    if constexpr (EPI == EPI_SHARED) {
#pragma unroll
      for (int mi = 0; mi < AI; ++mi)
#pragma unroll
        for (int ni = 0; ni < AJ; ++ni) {
          const int r = wm0 + mi * 16 + g, c = wn0 + ni * 8 + 2 * t;
          *reinterpret_cast<float2*>(sC + r * S::C_PITCH + c) = make_float2(acc[mi][ni][0], acc[mi][ni][1]);
          *reinterpret_cast<float2*>(sC + (r + 8) * S::C_PITCH + c) = make_float2(acc[mi][ni][2], acc[mi][ni][3]);
        }
      __syncthreads();
      store_staged_c<S, DT, OUT, BM, BN>(sC, C, m0, n0, M, N);
    } else {
      const bool even_n = (N % 2) == 0;
#pragma unroll
      for (int mi = 0; mi < AI; ++mi)
#pragma unroll
        for (int ni = 0; ni < AJ; ++ni) {
          const int r = m0 + wm0 + mi * 16 + g, c = n0 + wn0 + ni * 8 + 2 * t;
          store_pair<DT, OUT>(C, r, c, acc[mi][ni][0], acc[mi][ni][1], M, N, even_n);
          store_pair<DT, OUT>(C, r + 8, c, acc[mi][ni][2], acc[mi][ni][3], M, N, even_n);
        }
    }
  } else {
    if constexpr (EPI == EPI_SHARED) {
#pragma unroll
      for (int i = 0; i < AI; ++i)
#pragma unroll
        for (int j = 0; j < AJ; ++j)
          wmma_store<DT>(sC + (wm0 + i * 16) * S::C_PITCH + wn0 + j * 16, acc[i][j], S::C_PITCH);
      __syncthreads();
      store_staged_c<S, DT, OUT, BM, BN>(sC, C, m0, n0, M, N);
    } else {
      float* scratch = sC + warp * 256;  // 16 x 16 fp32 per warp (mma.py sizes the buffer for it)
      const bool c_strided = (N % 4) == 0;
#pragma unroll
      for (int i = 0; i < AI; ++i)
#pragma unroll
        for (int j = 0; j < AJ; ++j) {
          const int r0 = m0 + wm0 + i * 16, c0 = n0 + wn0 + j * 16;
          if (Out<DT, OUT>::BYTES == 4 && c_strided && r0 + 16 <= M && c0 + 16 <= N)
            wmma_store<DT>(reinterpret_cast<float*>(C) + (idx_t)r0 * N + c0, acc[i][j], N);
          else
            wmma_store_guarded<DT, OUT>(C, acc[i][j], scratch, r0, c0, M, N, lane);
        }
    }
  }
}

}  // namespace tcg
