// Kernels of tc_feed_probe.py (H200, sm_90a): how the tensor-core GEMMs' operand feeds run in isolation.
//
// tcf_copy: the k-step copies of tc_gemm's cp.async pipeline alone. Per k-step a block copies a
//   TCF_BM x TCF_BK fp16 tile of A (row pitch a_pitch elements) and a TCF_BK x TCF_BN tile of B (row
//   pitch b_pitch) into a TCF_STAGES ring in shared memory with 16-byte cp.async.cg (the only copy size
//   tc_gemm's load_tile uses: K = 2008 is a multiple of 8, so no narrower fallback exists), one commit
//   group per k-step, cp.async.wait_group(TCF_STAGES - 2) and one __syncthreads, as tc_gemm's main loop
//   (tcf_copy_s8: TCF_DEEP_STAGES stages, wait_group(6): the SM's throughput with more latency hidden).
//   Chunk i of the 1024 (512 of A: 128 rows x 4; 512 of B: 32 rows x 16) goes to thread i % blockDim.x,
//   in load_tile's order (row = i / chunks per row). Shared destinations: tc_gemm's swizzled layout,
//   chunk c of row r at c ^ s(r), s(r) = r & 7 for B's 16-chunk rows, (r / 2) % 4 for A's 4-chunk rows. The block's A rows are
//   blockIdx.x % a_row_tiles, its B columns blockIdx.x / a_row_tiles % b_col_tiles; k walks the first
//   ksteps_per_pass k-steps of the rows and wraps (L2-resident data). No data is consumed.
// tcf_wmma: wmma.load.a (fp16 16x16, row-major, ldm elements) straight from global memory, as
//   tc_gemm's rung-1 kernel (generic address, inline PTX, no header); warp w of block b loads one fragment
//   per iteration, rows row0 = 16 (b x warps + w) mod a_rows (+ TCF_RG_ROWS x g for row group g of
//   rgroups, mod a_rows), k = 16 x (fragment index mod kfrags): kfrags fragments along a row group, then the
//   next group. It folds its 8 registers into a sink with XOR (so the loads stay), stored never (zeros).
//
// Both write per block {clock64 cycles, %globaltimer ns, %smid, start ns} (TCF_REC longs) from thread 0,
// after a barrier that follows the loop.

#define TCF_REC 4
#define TCF_BM 128
#define TCF_BN 128
#define TCF_BK 32
#define TCF_STAGES 4
#define TCF_DEEP_STAGES 8
#define TCF_RG_ROWS 256  // tcf_wmma: rows between a warp's row groups
#define TCF_A_LC (TCF_BK * 2 / 16)   // 4 chunks a row of the A tile
#define TCF_B_LC (TCF_BN * 2 / 16)   // 16 chunks a row of the B tile
#define TCF_A_CHUNKS (TCF_BM * TCF_A_LC)
#define TCF_B_CHUNKS (TCF_BK * TCF_B_LC)
#define TCF_STAGE_BYTES ((TCF_A_CHUNKS + TCF_B_CHUNKS) * 16)

typedef long long i64;

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ i64 gtimer() {
  i64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ int smid() {
  int s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

extern "C" __global__ void tcf_spin(i64 cycles) {
  const i64 t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

template <int STAGES>
__device__ __forceinline__ void copy_body(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                                          i64 a_pitch, i64 b_pitch, int a_row_tiles, int b_col_tiles,
                                          int ksteps_per_pass, int ksteps, i64* rec) {
  extern __shared__ __align__(128) unsigned char copy_smem[];
  const int tid = threadIdx.x;
  const int at = blockIdx.x % a_row_tiles, bt = (blockIdx.x / a_row_tiles) % b_col_tiles;
  const unsigned short* a0 = A + (i64)at * TCF_BM * a_pitch;
  const unsigned short* b0 = B + (i64)bt * TCF_BN;
  const unsigned base = smem_u32(copy_smem);
  __syncthreads();
  const i64 c0 = clock64(), t0 = gtimer();
  int kp = 0;  // k-step within the pass
  for (int ks = 0; ks < ksteps; ++ks) {
    const unsigned sa = base + (ks % STAGES) * TCF_STAGE_BYTES;
    const unsigned sb = sa + TCF_A_CHUNKS * 16;
    const int k0 = kp * TCF_BK;
    for (int i = tid; i < TCF_A_CHUNKS; i += blockDim.x) {
      const int r = i / TCF_A_LC, c = i % TCF_A_LC;
      cp_async16(sa + (r * TCF_A_LC + (c ^ ((r >> 1) & (TCF_A_LC - 1)))) * 16, a0 + (i64)r * a_pitch + k0 + c * 8);
    }
    for (int i = tid; i < TCF_B_CHUNKS; i += blockDim.x) {
      const int r = i / TCF_B_LC, c = i % TCF_B_LC;
      cp_async16(sb + (r * TCF_B_LC + (c ^ (r & 7))) * 16, b0 + (i64)(k0 + r) * b_pitch + c * 8);
    }
    cp_async_commit();
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    kp = (kp + 1 == ksteps_per_pass) ? 0 : kp + 1;
  }
  cp_async_wait<0>();
  __syncthreads();
  const i64 c1 = clock64(), t1 = gtimer();
  if (tid == 0) {
    i64* r = rec + (i64)blockIdx.x * TCF_REC;
    r[0] = c1 - c0;
    r[1] = t1 - t0;
    r[2] = smid();
    r[3] = t0;
  }
}

// tc_gemm's 4-stage ring (wait_group(2): three k-steps in flight), and an 8-stage one (seven in flight: the
// SM's copy throughput with more latency hidden)
extern "C" __global__ void __launch_bounds__(256) tcf_copy(const unsigned short* __restrict__ A,
                                                           const unsigned short* __restrict__ B, i64 a_pitch,
                                                           i64 b_pitch, int a_row_tiles, int b_col_tiles,
                                                           int ksteps_per_pass, int ksteps, i64* rec) {
  copy_body<TCF_STAGES>(A, B, a_pitch, b_pitch, a_row_tiles, b_col_tiles, ksteps_per_pass, ksteps, rec);
}
extern "C" __global__ void __launch_bounds__(256) tcf_copy_s8(const unsigned short* __restrict__ A,
                                                              const unsigned short* __restrict__ B, i64 a_pitch,
                                                              i64 b_pitch, int a_row_tiles, int b_col_tiles,
                                                              int ksteps_per_pass, int ksteps, i64* rec) {
  copy_body<TCF_DEEP_STAGES>(A, B, a_pitch, b_pitch, a_row_tiles, b_col_tiles, ksteps_per_pass, ksteps, rec);
}

extern "C" __global__ void __launch_bounds__(512) tcf_wmma(const unsigned short* __restrict__ A, int ldm,
                                                           int a_rows, int kfrags, int rgroups, int iters,
                                                           i64* rec, unsigned* sink) {
  extern __shared__ __align__(128) unsigned char wmma_smem[];  // asked for only to hold one block an SM
  const int warp = threadIdx.x >> 5;
  const int row0 = ((blockIdx.x * (blockDim.x >> 5) + warp) * 16) % a_rows;
  const unsigned short* a = A + (i64)row0 * ldm;
  unsigned acc = 0u;
  int kf = 0, rg = 0;
  wmma_smem[threadIdx.x] = 0;
  __syncthreads();
  const i64 c0 = clock64(), t0 = gtimer();
  for (int it = 0; it < iters; ++it) {
    unsigned f[8];
    asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;\n"
                 : "=r"(f[0]), "=r"(f[1]), "=r"(f[2]), "=r"(f[3]), "=r"(f[4]), "=r"(f[5]), "=r"(f[6]), "=r"(f[7])
                 : "l"(a + kf * 16), "r"(ldm));
#pragma unroll
    for (int e = 0; e < 8; ++e) acc ^= f[e];
    if (++kf == kfrags) {  // next row group: TCF_RG_ROWS rows further, modulo a_rows
      kf = 0;
      rg = (rg + 1 == rgroups) ? 0 : rg + 1;
      a = A + (i64)((row0 + rg * TCF_RG_ROWS) % a_rows) * ldm;
    }
  }
  __syncthreads();
  const i64 c1 = clock64(), t1 = gtimer();
  if (acc == 0x9e3779b9u) sink[blockIdx.x * blockDim.x + threadIdx.x] = acc + wmma_smem[threadIdx.x];  // never (zeros)
  if (threadIdx.x == 0) {
    i64* r = rec + (i64)blockIdx.x * TCF_REC;
    r[0] = c1 - c0;
    r[1] = t1 - t0;
    r[2] = smid();
    r[3] = t0;
  }
}
