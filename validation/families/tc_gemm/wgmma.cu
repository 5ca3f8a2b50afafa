// Hopper tensor-core GEMM, C = A @ B with fp32 accumulation: TMA into 128-byte-swizzled shared memory,
// mbarrier full/empty rings, wgmma.mma_async on warpgroups, one producer warpgroup and 1-2 consumers,
// optional thread-block clusters of 2 along M with TMA multicast of the B tile.
//
// This file is not compiled alone: validation/families/tc_gemm/wgmma.py prepends the configuration
// (#define TC_*), the wgmma instruction wrapper `wgmma_tile` of this configuration's instruction shape,
// and appends nothing; the kernel's name is TC_KERNEL_NAME (extern "C", one per configuration).
//
// Layouts (bytes; E = element size, CW = 128 / E elements = one 128-byte swizzle row):
//   A stage: [BK/CW][BM][CW]  K-major, each chunk BM rows of 128 B (TMA box {CW, BM}, SWIZZLE_128B)
//   B stage, b_layout col (N x K, K-major):   [BK/CW][BN][CW]  (TMA box {CW, BN})
//   B stage, b_layout row (K x N, N-major):   [BN/64][BK][64]  (TMA box {64, BK}; 16-bit types only,
//            the wgmma transpose bit; descriptor LBO = BK*128 (next 64-wide N chunk), SBO = 1024)
// Descriptors (PTX ISA "Matrix Descriptor Format" for wgmma): start address >> 4 in bits 0-13,
// leading byte offset >> 4 in 16-29, stride byte offset >> 4 in 32-45, swizzle mode in 62-63 (1 = 128B).
// K-major 128B swizzle: SBO = 1024 (8 rows x 128 B), LBO unused (1); a K step of one instruction
// (32 bytes) advances the start address by 32 B inside the 1024-byte-aligned swizzle atom.

typedef unsigned int u32;
typedef unsigned long long u64;

// ----- configuration-derived constants -------------------------------------------------------------
constexpr int E = TC_ELEM_BYTES;                 // bytes per input element (2: fp16/bf16, 4: tf32)
constexpr int CW = 128 / E;                      // elements in one 128-byte swizzle row
constexpr int KI = 32 / E;                       // K of one wgmma instruction (16 or 8): 32 bytes
constexpr int BM = TC_BM, BN = TC_BN, BK = TC_BK, WM = TC_WM;
constexpr int STAGES = TC_STAGES, CONSUMERS = TC_CONSUMERS, CLUSTER = TC_CLUSTER;
constexpr int MSUB = WM / 64;                    // m64 sub-tiles per consumer warpgroup
constexpr int NI = TC_NI;                        // n of one wgmma instruction (divides BN)
constexpr int KCHUNKS = BK / CW;                 // 128-byte chunks along K per stage
constexpr int ACC = BN / 2;                      // fp32 accumulators per thread per m64 sub-tile
constexpr int THREADS = (CONSUMERS + 1) * 128;
constexpr int A_STAGE_BYTES = BM * BK * E;
constexpr int B_STAGE_BYTES = BN * BK * E;
constexpr int STAGE_BYTES = A_STAGE_BYTES + B_STAGE_BYTES;
constexpr int SWIZZLE_ATOM_BYTES = 1024;         // 8 rows x 128 B: base alignment of swizzled tiles
constexpr int OUT_E = TC_OUT_BYTES;              // bytes per output element (4 or 2)
// tile order: groups of GROUP_M tiles along M walk N before the next group (L2 reuse)
constexpr int GROUP_M = TC_GROUP_M;
// setmaxnreg (PTX ISA 9.7.17.x): producer gives registers back, consumers take them
constexpr int PRODUCER_REGS = 40;
constexpr int CONSUMER_REGS = 232;

static_assert(BM == CONSUMERS * WM, "bm must equal consumers * wm");
static_assert(OUT_E == 4 || OUT_E == 2, "C is fp32 or 16-bit");
static_assert(WM % 64 == 0 && BK % CW == 0, "wm multiple of 64, bk multiple of the 128-byte row");
static_assert(BN % NI == 0 && NI % 8 == 0, "the instruction n must divide bn");
static_assert(TC_B_KMAJOR || (E == 2 && NI % 64 == 0), "b_layout row needs 16-bit types and n % 64 == 0");
static_assert(A_STAGE_BYTES % SWIZZLE_ATOM_BYTES == 0 && B_STAGE_BYTES % SWIZZLE_ATOM_BYTES == 0,
              "stage tiles must keep 1024-byte alignment");

struct __align__(64) TmaMap { u64 opaque[16]; };  // CUtensorMap: 128 bytes, 64-byte aligned

#if TC_TMAP_CONSTANT
__constant__ TmaMap tc_tmap_a;
__constant__ TmaMap tc_tmap_b;
#define TMAP_A (&tc_tmap_a)
#define TMAP_B (&tc_tmap_b)
#define TMAP_PARAMS
#else
#define TMAP_A (&tmap_a)
#define TMAP_B (&tmap_b)
#define TMAP_PARAMS const __grid_constant__ TmaMap tmap_a, const __grid_constant__ TmaMap tmap_b,
#endif

// ----- PTX helpers ----------------------------------------------------------------------------------
__device__ __forceinline__ u32 smem_u32(const void* p) {
    u32 r;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}

__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}

// wait until the phase of parity `parity` has completed
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "WAIT:\n"
#if TC_CLUSTER > 1
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
#else
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
#endif
        "@!done bra WAIT;\n"
        "}\n" :: "r"(bar), "r"(parity) : "memory");
}

// arrive on the barrier at the same shared offset in CTA `cta` of this cluster (itself included)
__device__ __forceinline__ void mbar_arrive_cluster(u32 bar, u32 cta) {
    asm volatile(
        "{\n"
        ".reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n"
        "}\n" :: "r"(bar), "r"(cta) : "memory");
}

__device__ __forceinline__ void mbar_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}

__device__ __forceinline__ void tma_load_2d(u32 dst, const TmaMap* map, u32 bar, int x, int y) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4}], [%2];"
        :: "r"(dst), "l"(reinterpret_cast<u64>(map)), "r"(bar), "r"(x), "r"(y) : "memory");
}

// the same tile into every CTA of `mask` (same shared offsets, each CTA's own barrier at `bar`)
__device__ __forceinline__ void tma_load_2d_multicast(u32 dst, const TmaMap* map, u32 bar, int x, int y,
                                                      unsigned short mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%3, %4}], [%2], %5;"
        :: "r"(dst), "l"(reinterpret_cast<u64>(map)), "r"(bar), "r"(x), "r"(y), "h"(mask) : "memory");
}

__device__ __forceinline__ u64 smem_desc(u32 addr, u32 lbo_bytes, u32 sbo_bytes) {
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)((lbo_bytes & 0x3FFFF) >> 4) << 16)
         | ((u64)((sbo_bytes & 0x3FFFF) >> 4) << 32) | (1ull << 62);  // 62-63 = 1: 128-byte swizzle
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }

__device__ __forceinline__ void cluster_sync() {
    // not .aligned: the producer warp reaches the final one diverged (lane 0 issued the loads)
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

__device__ __forceinline__ u32 cluster_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ void named_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(threads) : "memory");
}

// two fp32 -> one packed 16-bit pair (lower half = first element)
__device__ __forceinline__ u32 pack2(float lo, float hi) {
    u32 r;
#if TC_DTYPE_BF16
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}

__device__ __forceinline__ unsigned short pack1(float v) {
    unsigned short r;
#if TC_DTYPE_BF16
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(v));
#else
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(v));
#endif
    return r;
}

// store the pair (v0, v1) at C[row][col], C[row][col + 1]; `vec` when 8/4-byte aligned (N even)
__device__ __forceinline__ void store_pair(void* c, int M, int N, int row, int col, float v0, float v1, bool vec) {
    if (row >= M || col >= N) return;
    const size_t at = (size_t)row * N + col;
#if TC_OUT_BYTES == 4
    float* p = reinterpret_cast<float*>(c) + at;
    if (vec && col + 1 < N) {
        *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
    } else {
        p[0] = v0;
        if (col + 1 < N) p[1] = v1;
    }
#else
    unsigned short* p = reinterpret_cast<unsigned short*>(c) + at;
    if (vec && col + 1 < N) {
        *reinterpret_cast<u32*>(p) = pack2(v0, v1);
    } else {
        p[0] = pack1(v0);
        if (col + 1 < N) p[1] = pack1(v1);
    }
#endif
}

// ----- the kernel -------------------------------------------------------------------------------------
// ----- schedule trace (compiled in only with TC_TRACE; validation/studies/tc_schedule_trace.py) ----
// TC_TRACE 1: the producer thread of block b writes, at tc_trace + b * (ktiles + 2): its SM id, then
// %globaltimer (ns) as it issues the TMA loads of each k-tile (after the stage is free), and consumer 0 the
// time its last k-tile's wgmma are done. TC_TRACE 2 (ring kernel only; validation/studies/tc_step_parts.py):
// where a k-step's cycles go, clock64 summed over the k-loop, at tc_trace + b * TRACE_PARTS: [0] the SM id,
// [1] the producer's k-loop, [2] its empty-barrier waits; consumer warpgroup 0, thread 0: [3] its k-loop,
// [4] full-barrier waits, [5] wgmma issue (fence to commit), [6] wait_group(1), [7] the stage release
// (its arrive, with cluster-scope release on both blocks of a cluster). Nothing else changes.
#if TC_TRACE
extern "C" { __device__ unsigned long long* tc_trace; }  // unmangled: set from Python
#endif
#if TC_TRACE == 2
constexpr int TRACE_PARTS = 8;
__device__ __forceinline__ unsigned long long* parts_row() {
    return tc_trace + (size_t)blockIdx.x * TRACE_PARTS;
}
__device__ __forceinline__ long long parts_clock() {
    long long t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) :: "memory");
    return t;
}
#endif
#if TC_TRACE == 1
__device__ __forceinline__ unsigned long long* trace_row(int ktiles) {
    return tc_trace + (size_t)blockIdx.x * (size_t)(ktiles + 2);
}
__device__ __forceinline__ unsigned long long trace_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#endif

extern "C" __global__ void __launch_bounds__(THREADS, 1)
#if TC_CLUSTER > 1
__cluster_dims__(TC_CLUSTER, 1, 1)
#endif
TC_KERNEL_NAME(TMAP_PARAMS void* __restrict__ c, int M, int N, int K) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    __shared__ __align__(8) u64 full_bar[STAGES];
    __shared__ __align__(8) u64 empty_bar[STAGES];

    // 1024-byte aligned base (the launch adds SWIZZLE_ATOM_BYTES of slack to the dynamic size)
    const u32 raw_base = smem_u32(smem_raw);
    const u32 base = (raw_base + SWIZZLE_ATOM_BYTES - 1) & ~(u32)(SWIZZLE_ATOM_BYTES - 1);
    unsigned char* const base_ptr = smem_raw + (base - raw_base);
    const u32 a_base = base;                              // STAGES x A_STAGE_BYTES
    const u32 b_base = base + STAGES * A_STAGE_BYTES;     // STAGES x B_STAGE_BYTES

    // tile of this CTA: GROUP_M tiles along M, then along N (cluster pairs share tile_n)
    const int tiles_m = ((M + BM - 1) / BM + CLUSTER - 1) / CLUSTER * CLUSTER;
    const int tiles_n = (N + BN - 1) / BN;
    const int pid = blockIdx.x;
    const int per_group = GROUP_M * tiles_n;
    const int first_m = (pid / per_group) * GROUP_M;
    const int group_size = min(tiles_m - first_m, GROUP_M);
    const int tile_m = first_m + (pid % per_group) % group_size;
    const int tile_n = (pid % per_group) / group_size;
    const int m0 = tile_m * BM, n0 = tile_n * BN;
    const int ktiles = (K + BK - 1) / BK;

    const int wg = threadIdx.x / 128;     // 0: producer, 1..CONSUMERS: consumers
    const int t = threadIdx.x % 128;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_u32(&full_bar[s]), 1);                     // the producer's arrive.expect_tx
            mbar_init(smem_u32(&empty_bar[s]), CONSUMERS * CLUSTER);  // one per consumer of each CTA
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
#if TC_CLUSTER > 1
    cluster_sync();
    const u32 rank = cluster_rank();
#else
    __syncthreads();
#endif

    if (wg == 0) {
        // ----- producer: one thread issues every TMA ------------------------------------------------
#if TC_SETMAXNREG
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(PRODUCER_REGS));
#endif
        if (t == 0) {
#if TC_TRACE == 1
            {
                unsigned sm;
                asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
                trace_row(ktiles)[0] = sm;
            }
#endif
#if TC_TRACE == 2
            long long p_wait = 0;
            const long long p_start = parts_clock();
#endif
            for (int kt = 0; kt < ktiles; ++kt) {
                const int s = kt % STAGES;
                const u32 round = (u32)(kt / STAGES);
                const u32 full = smem_u32(&full_bar[s]);
#if TC_TRACE == 2
                const long long w0 = parts_clock();
#endif
                mbar_wait(smem_u32(&empty_bar[s]), (round & 1) ^ 1);  // round 0 passes at once
#if TC_TRACE == 2
                p_wait += parts_clock() - w0;
#endif
#if TC_TRACE == 1
                trace_row(ktiles)[1 + kt] = trace_now();
#endif
                mbar_expect_tx(full, STAGE_BYTES);
                const u32 a_dst = a_base + s * A_STAGE_BYTES;
                const u32 b_dst = b_base + s * B_STAGE_BYTES;
                const int k0 = kt * BK;
#pragma unroll
                for (int ch = 0; ch < KCHUNKS; ++ch)
                    tma_load_2d(a_dst + ch * BM * 128, TMAP_A, full, k0 + ch * CW, m0);
#if TC_CLUSTER > 1
                if (rank == 0) {
                    const unsigned short mask = (unsigned short)((1u << CLUSTER) - 1);
#if TC_B_KMAJOR
#pragma unroll
                    for (int ch = 0; ch < KCHUNKS; ++ch)
                        tma_load_2d_multicast(b_dst + ch * BN * 128, TMAP_B, full, k0 + ch * CW, n0, mask);
#else
#pragma unroll
                    for (int j = 0; j < BN / 64; ++j)
                        tma_load_2d_multicast(b_dst + j * BK * 128, TMAP_B, full, n0 + j * 64, k0, mask);
#endif
                }
#else
#if TC_B_KMAJOR
#pragma unroll
                for (int ch = 0; ch < KCHUNKS; ++ch)
                    tma_load_2d(b_dst + ch * BN * 128, TMAP_B, full, k0 + ch * CW, n0);
#else
#pragma unroll
                for (int j = 0; j < BN / 64; ++j)
                    tma_load_2d(b_dst + j * BK * 128, TMAP_B, full, n0 + j * 64, k0);
#endif
#endif
            }
#if TC_TRACE == 2
            {
                unsigned sm;
                asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
                parts_row()[0] = sm;
                parts_row()[1] = (unsigned long long)(parts_clock() - p_start);
                parts_row()[2] = (unsigned long long)p_wait;
            }
#endif
        }
    } else {
        // ----- consumers: wgmma on the staged tiles -------------------------------------------------
#if TC_SETMAXNREG
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(CONSUMER_REGS));
#endif
        const int cw = wg - 1;
        float acc[MSUB][ACC];
#pragma unroll
        for (int ms = 0; ms < MSUB; ++ms)
#pragma unroll
            for (int i = 0; i < ACC; ++i) acc[ms][i] = 0.0f;

#if TC_TRACE == 2
        long long c_full = 0, c_issue = 0, c_group = 0, c_release = 0;
        const long long c_start = parts_clock();
#endif
        for (int kt = 0; kt < ktiles; ++kt) {
            const int s = kt % STAGES;
#if TC_TRACE == 2
            const long long q0 = parts_clock();
#endif
            mbar_wait(smem_u32(&full_bar[s]), (u32)(kt / STAGES) & 1);
#if TC_TRACE == 2
            const long long q1 = parts_clock();
            c_full += q1 - q0;
#endif
            const u32 a_st = a_base + s * A_STAGE_BYTES + (cw * WM) * 128;
            const u32 b_st = b_base + s * B_STAGE_BYTES;
            wgmma_fence();
#pragma unroll
            for (int ch = 0; ch < KCHUNKS; ++ch) {
#pragma unroll
                for (int kk = 0; kk < CW / KI; ++kk) {
#pragma unroll
                    for (int ns = 0; ns < BN / NI; ++ns) {
#if TC_B_KMAJOR
                        const u64 db = smem_desc(b_st + ch * BN * 128 + ns * NI * 128 + kk * 32, 16, 1024);
#else
                        const u64 db = smem_desc(b_st + (ns * NI / 64) * BK * 128 + (ch * CW + kk * KI) * 128,
                                                 BK * 128, 1024);
#endif
#pragma unroll
                        for (int ms = 0; ms < MSUB; ++ms) {
                            const u64 da = smem_desc(a_st + ch * BM * 128 + ms * 64 * 128 + kk * 32, 16, 1024);
                            wgmma_tile(&acc[ms][ns * (NI / 2)], da, db);
                        }
                    }
                }
            }
            wgmma_commit();
#if TC_TRACE == 2
            const long long q2 = parts_clock();
            c_issue += q2 - q1;
#endif
            wgmma_wait<1>();  // the previous k-tile's group is done: release its stage
#if TC_TRACE == 2
            const long long q3 = parts_clock();
            c_group += q3 - q2;
#endif
            if (kt > 0) {
                const u32 prev = smem_u32(&empty_bar[(kt - 1) % STAGES]);
#if TC_CLUSTER > 1
                if (t < CLUSTER) mbar_arrive_cluster(prev, (u32)t);
#else
                if (t == 0) mbar_arrive(prev);
#endif
            }
#if TC_TRACE == 2
            c_release += parts_clock() - q3;
#endif
        }
#if TC_TRACE == 2
        if (cw == 0 && t == 0) {
            parts_row()[3] = (unsigned long long)(parts_clock() - c_start);
            parts_row()[4] = (unsigned long long)c_full;
            parts_row()[5] = (unsigned long long)c_issue;
            parts_row()[6] = (unsigned long long)c_group;
            parts_row()[7] = (unsigned long long)c_release;
        }
#endif
        wgmma_wait<0>();
#if TC_TRACE == 1
        if (cw == 0 && t == 0) trace_row(ktiles)[1 + ktiles] = trace_now();
#endif

        // ----- epilogue ------------------------------------------------------------------------------
        const int warp = t / 32, lane = t % 32;
        const int frag_row = warp * 16 + lane / 4;   // wgmma D fragment: rows r and r + 8
        const int frag_col = 2 * (lane % 4);         // columns 8j + c, 8j + c + 1
#if TC_EPILOGUE_SHARED
        // stage this warpgroup's WM x BN tile in shared memory (reusing the ring, now idle), then
        // 16-byte coalesced stores
        // rows padded so that the fragment stores of 8 rows (a half-warp's float2 or a warp's
        // 4-byte stores) fall in distinct banks; wgmma.py sizes the region the same way
        constexpr int STAGE_PITCH_BYTES = BN * OUT_E + (OUT_E == 4 ? 32 : 16);
        named_sync(1, CONSUMERS * 128);              // every consumer is done reading the ring
        unsigned char* const tile = base_ptr + cw * WM * STAGE_PITCH_BYTES;
#pragma unroll
        for (int ms = 0; ms < MSUB; ++ms) {
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int r = ms * 64 + frag_row + 8 * h;
                    const int col = 8 * j + frag_col;
                    unsigned char* p = tile + r * STAGE_PITCH_BYTES + col * OUT_E;
#if TC_OUT_BYTES == 4
                    *reinterpret_cast<float2*>(p) = make_float2(acc[ms][4 * j + 2 * h], acc[ms][4 * j + 2 * h + 1]);
#else
                    *reinterpret_cast<u32*>(p) = pack2(acc[ms][4 * j + 2 * h], acc[ms][4 * j + 2 * h + 1]);
#endif
                }
            }
        }
        named_sync(2 + cw, 128);
        constexpr int CHUNK_ELEMS = 16 / OUT_E;
        constexpr int CHUNKS_PER_ROW = BN / CHUNK_ELEMS;
        const bool vec16 = ((size_t)N * OUT_E) % 16 == 0;
        for (int i = t; i < WM * CHUNKS_PER_ROW; i += 128) {
            const int r = i / CHUNKS_PER_ROW, ch = i % CHUNKS_PER_ROW;
            const int row = m0 + cw * WM + r, col = n0 + ch * CHUNK_ELEMS;
            if (row >= M || col >= N) continue;
            const unsigned char* src = tile + r * STAGE_PITCH_BYTES + ch * 16;
            unsigned char* dst = reinterpret_cast<unsigned char*>(c) + ((size_t)row * N + col) * OUT_E;
            if (vec16 && col + CHUNK_ELEMS <= N) {
                *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
            } else {
                for (int e = 0; e < CHUNK_ELEMS && col + e < N; ++e)
                    for (int b = 0; b < OUT_E; ++b) dst[e * OUT_E + b] = src[e * OUT_E + b];
            }
        }
#else
        (void)base_ptr;
        const bool vec = (N % 2) == 0;
#pragma unroll
        for (int ms = 0; ms < MSUB; ++ms) {
            const int row = m0 + cw * WM + ms * 64 + frag_row;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
                const int col = n0 + 8 * j + frag_col;
                store_pair(c, M, N, row, col, acc[ms][4 * j + 0], acc[ms][4 * j + 1], vec);
                store_pair(c, M, N, row + 8, col, acc[ms][4 * j + 2], acc[ms][4 * j + 3], vec);
            }
        }
#endif
    }
#if TC_CLUSTER > 1
    // no CTA leaves while its peer may still arrive on its barriers or multicast into it
    cluster_sync();
#endif
}
// ===== the one-buffer kernel (TC_STAGES == 1) ==========================================================
// wgmma.py builds a stages = 1 configuration from this file with the ring kernel above left out (from its
// `extern "C"` line to this marker) and this kernel in its place; a ring configuration's source stops at
// this marker. One shared buffer, no producer warpgroup, no cluster: for each k-tile thread 0 arms the
// buffer's mbarrier (arrive.expect_tx) and issues the TMA copies, every thread waits for the barrier's
// phase, each warpgroup issues its wgmmas on the buffer, commits them and waits for all of them
// (wait_group 0), and the block passes __syncthreads before thread 0 overwrites the buffer with the
// next k-tile. Loads and math alternate within a block; other resident blocks overlap them. No
// setmaxnreg (nothing to take registers from). Ragged edges as the ring's: TMA fills out-of-bounds
// elements with zeros, the epilogues guard rows and columns.
constexpr int ONE_BUFFER_THREADS = CONSUMERS * 128;  // THREADS above counts the ring's producer warpgroup
static_assert(STAGES == 1 && CLUSTER == 1, "the one-buffer kernel has one stage and no cluster");
static_assert(!TC_SETMAXNREG && PRODUCER_REGS > 0 && CONSUMER_REGS > 0,  // (the ring's constants, unused here)
              "the one-buffer kernel has no producer warpgroup to take registers from");
static_assert(THREADS == ONE_BUFFER_THREADS + 128, "the ring's block is this one and a producer warpgroup");

extern "C" __global__ void __launch_bounds__(ONE_BUFFER_THREADS, 1)
TC_KERNEL_NAME(TMAP_PARAMS void* __restrict__ c, int M, int N, int K) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    __shared__ __align__(8) u64 full_bar;

    // 1024-byte aligned base (the launch adds SWIZZLE_ATOM_BYTES of slack to the dynamic size)
    const u32 raw_base = smem_u32(smem_raw);
    const u32 base = (raw_base + SWIZZLE_ATOM_BYTES - 1) & ~(u32)(SWIZZLE_ATOM_BYTES - 1);
    unsigned char* const base_ptr = smem_raw + (base - raw_base);
    const u32 a_base = base;                  // A_STAGE_BYTES
    const u32 b_base = base + A_STAGE_BYTES;  // B_STAGE_BYTES

    // tile of this CTA: GROUP_M tiles along M, then along N (the ring's order)
    const int tiles_m = (M + BM - 1) / BM;
    const int tiles_n = (N + BN - 1) / BN;
    const int pid = blockIdx.x;
    const int per_group = GROUP_M * tiles_n;
    const int first_m = (pid / per_group) * GROUP_M;
    const int group_size = min(tiles_m - first_m, GROUP_M);
    const int tile_m = first_m + (pid % per_group) % group_size;
    const int tile_n = (pid % per_group) / group_size;
    const int m0 = tile_m * BM, n0 = tile_n * BN;
    const int ktiles = (K + BK - 1) / BK;

    const int cw = threadIdx.x / 128;     // consumer warpgroup 0..CONSUMERS-1
    const int t = threadIdx.x % 128;
    const u32 full = smem_u32(&full_bar);

    if (threadIdx.x == 0) {
        mbar_init(full, 1);                   // thread 0's arrive.expect_tx
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#if TC_TRACE == 1
        unsigned sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        trace_row(ktiles)[0] = sm;
#endif
    }
    __syncthreads();

    float acc[MSUB][ACC];
#pragma unroll
    for (int ms = 0; ms < MSUB; ++ms)
#pragma unroll
        for (int i = 0; i < ACC; ++i) acc[ms][i] = 0.0f;

    for (int kt = 0; kt < ktiles; ++kt) {
        if (threadIdx.x == 0) {
            // the buffer is free: every warpgroup passed the previous k-tile's __syncthreads
#if TC_TRACE == 1
            trace_row(ktiles)[1 + kt] = trace_now();
#endif
            mbar_expect_tx(full, STAGE_BYTES);
            const int k0 = kt * BK;
#pragma unroll
            for (int ch = 0; ch < KCHUNKS; ++ch)
                tma_load_2d(a_base + ch * BM * 128, TMAP_A, full, k0 + ch * CW, m0);
#if TC_B_KMAJOR
#pragma unroll
            for (int ch = 0; ch < KCHUNKS; ++ch)
                tma_load_2d(b_base + ch * BN * 128, TMAP_B, full, k0 + ch * CW, n0);
#else
#pragma unroll
            for (int j = 0; j < BN / 64; ++j)
                tma_load_2d(b_base + j * BK * 128, TMAP_B, full, n0 + j * 64, k0);
#endif
        }
        mbar_wait(full, (u32)kt & 1);         // the barrier completes one phase per k-tile
        const u32 a_st = a_base + (cw * WM) * 128;
        const u32 b_st = b_base;
        wgmma_fence();
#pragma unroll
        for (int ch = 0; ch < KCHUNKS; ++ch) {
#pragma unroll
            for (int kk = 0; kk < CW / KI; ++kk) {
#pragma unroll
                for (int ns = 0; ns < BN / NI; ++ns) {
#if TC_B_KMAJOR
                    const u64 db = smem_desc(b_st + ch * BN * 128 + ns * NI * 128 + kk * 32, 16, 1024);
#else
                    const u64 db = smem_desc(b_st + (ns * NI / 64) * BK * 128 + (ch * CW + kk * KI) * 128,
                                             BK * 128, 1024);
#endif
#pragma unroll
                    for (int ms = 0; ms < MSUB; ++ms) {
                        const u64 da = smem_desc(a_st + ch * BM * 128 + ms * 64 * 128 + kk * 32, 16, 1024);
                        wgmma_tile(&acc[ms][ns * (NI / 2)], da, db);
                    }
                }
            }
        }
        wgmma_commit();
        wgmma_wait<0>();                      // this k-tile's wgmmas are done reading the buffer
        __syncthreads();                      // ... in every warpgroup: thread 0 may overwrite it
    }
#if TC_TRACE == 1
    if (cw == 0 && t == 0) trace_row(ktiles)[1 + ktiles] = trace_now();
#endif

    // ----- epilogue (the ring kernel's; the loop's last __syncthreads freed the buffer) --------------
    const int warp = t / 32, lane = t % 32;
    const int frag_row = warp * 16 + lane / 4;   // wgmma D fragment: rows r and r + 8
    const int frag_col = 2 * (lane % 4);         // columns 8j + c, 8j + c + 1
#if TC_EPILOGUE_SHARED
    constexpr int STAGE_PITCH_BYTES = BN * OUT_E + (OUT_E == 4 ? 32 : 16);
    unsigned char* const tile = base_ptr + cw * WM * STAGE_PITCH_BYTES;
#pragma unroll
    for (int ms = 0; ms < MSUB; ++ms) {
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = ms * 64 + frag_row + 8 * h;
                const int col = 8 * j + frag_col;
                unsigned char* p = tile + r * STAGE_PITCH_BYTES + col * OUT_E;
#if TC_OUT_BYTES == 4
                *reinterpret_cast<float2*>(p) = make_float2(acc[ms][4 * j + 2 * h], acc[ms][4 * j + 2 * h + 1]);
#else
                *reinterpret_cast<u32*>(p) = pack2(acc[ms][4 * j + 2 * h], acc[ms][4 * j + 2 * h + 1]);
#endif
            }
        }
    }
    named_sync(1 + cw, 128);
    constexpr int CHUNK_ELEMS = 16 / OUT_E;
    constexpr int CHUNKS_PER_ROW = BN / CHUNK_ELEMS;
    const bool vec16 = ((size_t)N * OUT_E) % 16 == 0;
    for (int i = t; i < WM * CHUNKS_PER_ROW; i += 128) {
        const int r = i / CHUNKS_PER_ROW, ch = i % CHUNKS_PER_ROW;
        const int row = m0 + cw * WM + r, col = n0 + ch * CHUNK_ELEMS;
        if (row >= M || col >= N) continue;
        const unsigned char* src = tile + r * STAGE_PITCH_BYTES + ch * 16;
        unsigned char* dst = reinterpret_cast<unsigned char*>(c) + ((size_t)row * N + col) * OUT_E;
        if (vec16 && col + CHUNK_ELEMS <= N) {
            *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
        } else {
            for (int e = 0; e < CHUNK_ELEMS && col + e < N; ++e)
                for (int b = 0; b < OUT_E; ++b) dst[e * OUT_E + b] = src[e * OUT_E + b];
        }
    }
#else
    (void)base_ptr;
    const bool vec = (N % 2) == 0;
#pragma unroll
    for (int ms = 0; ms < MSUB; ++ms) {
        const int row = m0 + cw * WM + ms * 64 + frag_row;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
            const int col = n0 + 8 * j + frag_col;
            store_pair(c, M, N, row, col, acc[ms][4 * j + 0], acc[ms][4 * j + 1], vec);
            store_pair(c, M, N, row + 8, col, acc[ms][4 * j + 2], acc[ms][4 * j + 3], vec);
        }
    }
#endif
}
