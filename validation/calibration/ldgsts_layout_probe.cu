// LDGSTS layout probe (sm_90a; driven by validation/calibration/ldgsts_layout_probe.py): every warp of every
// block issues 16-byte cp.async.cg.shared.global copies (SASS LDGSTS.E.BYPASS.128) of one fixed per-lane
// pattern, LG_COPIES copies a batch (each into its own LG_SLOT_BYTES slot of the warp's shared region), then
// cp.async.commit_group and cp.async.wait_group LG_WAIT (LG_WAIT + 1 batches in flight a warp), for `iters`
// batches. The pattern comes from the host as two int tables of 32 lanes: goff[lane] (byte offset of the
// lane's 16-byte source chunk from the copy's global base) and soff[lane] (byte offset of its destination
// from the copy's shared slot).
// lg_copy (cg): no two warps of the grid read the same byte (so no L2 request merging between SMs). The
// L2-resident source is cut into bands of `band` bytes (>= the pattern's rows x global pitch, a multiple of
// 512), each band into 2^col_log2 columns of `col` bytes (a multiple of 128, >= a pattern row, all columns
// within one global pitch): copy position t has base (t >> col_log2) * band + (t & (cols - 1)) * col, and its
// footprint lies in its own column of its own band. Warp gw (of total_warps over the grid) owns positions
// t = gw + total_warps * j, j = 0 .. npos - 1, and cycles through them (copy after copy); the host sizes npos
// so every position lies in the source (disjoint per-warp windows, the whole source L2-resident).
// lg_copy_ca: the same with cp.async.ca (LDGSTS.E.128 through L1) from a small L1-resident source: the base
// of copy k of batch `it` of warp gw is ((it * LG_COPIES + k) * total_warps + gw) * LG_BASE_STEP bytes, the
// address masked by src_mask (buffer bytes - 1, a power of two; LG_BASE_STEP keeps the line alignment).
// `active` = 0 predicates every copy off (the loop-overhead control row).
// Each block writes LG_REC longs: clock64 cycles and %globaltimer ns from loop start to loop end (between two
// __syncthreads, after a final wait_group 0), its %smid and its start %globaltimer.

#define LG_REC 4          // longs per block record: cycles, ns, smid, start ns
#define LG_COPIES 4       // copies (LDGSTS per thread) a batch
#define LG_WAIT 2         // cp.async.wait_group after each batch
#define LG_SLOT_BYTES 2048  // shared bytes per copy slot (a pattern's extent must fit)
#define LG_BASE_STEP 1536   // global bytes between consecutive copies' bases (a multiple of 512)

__device__ __forceinline__ unsigned long long lg_global_ns() {
  unsigned long long g;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
  return g;
}
__device__ __forceinline__ unsigned lg_smid() {
  unsigned s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

template <bool CA>
__device__ __forceinline__ void lg_copy16(unsigned dst, const void* src, bool on) {
  if (CA) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %2, 0;\n @p cp.async.ca.shared.global [%0], [%1], 16; }\n"
                 ::"r"(dst), "l"(src), "r"((int)on));
  } else {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %2, 0;\n @p cp.async.cg.shared.global [%0], [%1], 16; }\n"
                 ::"r"(dst), "l"(src), "r"((int)on));
  }
}

template <bool CA>
__device__ __forceinline__ void lg_body(int iters, long long* __restrict__ rec, const char* __restrict__ src,
                                        long long src_mask, const int* __restrict__ goff,
                                        const int* __restrict__ soff, int active, int npos, int col_log2,
                                        int col, int band) {
  extern __shared__ __align__(1024) unsigned char lg_smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  const long long gw = (long long)blockIdx.x * warps + warp;
  const long long total_warps = (long long)gridDim.x * warps;
  const unsigned g = (unsigned)goff[lane], mask = (unsigned)src_mask;  // 32-bit offsets (buffer < 4 GiB)
  const unsigned s0 = (unsigned)__cvta_generic_to_shared(lg_smem) + warp * (LG_COPIES * LG_SLOT_BYTES) + soff[lane];
  const bool on = active != 0;
  const unsigned step = (unsigned)(total_warps * LG_BASE_STEP);  // between a warp's consecutive copies
  unsigned base = (unsigned)(gw * LG_BASE_STEP);  // ca
  const unsigned tw = (unsigned)total_warps, cmask = (1u << col_log2) - 1u;  // cg: positions t = gw + tw * j
  unsigned j = 0;
  __syncthreads();
  const unsigned long long t0 = lg_global_ns();
  const long long c0 = clock64();
#pragma unroll 1
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int k = 0; k < LG_COPIES; ++k) {
      if (CA) {
        lg_copy16<CA>(s0 + k * LG_SLOT_BYTES, src + ((base + g) & mask), on);
        base += step;
      } else {
        const unsigned t = (unsigned)gw + tw * j;
        lg_copy16<CA>(s0 + k * LG_SLOT_BYTES, src + ((t >> col_log2) * (unsigned)band + (t & cmask) * (unsigned)col + g), on);
        j = (j + 1 == (unsigned)npos) ? 0u : j + 1;
      }
    }
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group %0;\n" ::"n"(LG_WAIT) : "memory");
  }
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();
  const long long c1 = clock64();
  const unsigned long long t1 = lg_global_ns();
  if (threadIdx.x == 0) {
    long long* r = rec + (long long)blockIdx.x * LG_REC;
    r[0] = c1 - c0;
    r[1] = (long long)(t1 - t0);
    r[2] = lg_smid();
    r[3] = (long long)t0;
  }
}

extern "C" __global__ void __launch_bounds__(256) lg_copy(int iters, long long* rec, const char* src,
                                                          long long src_mask, const int* goff, const int* soff,
                                                          int active, int npos, int col_log2, int col, int band) {
  lg_body<false>(iters, rec, src, src_mask, goff, soff, active, npos, col_log2, col, band);
}
extern "C" __global__ void __launch_bounds__(256) lg_copy_ca(int iters, long long* rec, const char* src,
                                                             long long src_mask, const int* goff,
                                                             const int* soff, int active, int npos, int col_log2,
                                                             int col, int band) {
  lg_body<true>(iters, rec, src, src_mask, goff, soff, active, npos, col_log2, col, band);
}
