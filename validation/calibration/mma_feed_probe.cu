// The mma.sync GEMM inner loop in isolation (sm_90a; driven by validation/calibration/mma_feed_probe.py):
// every warp repeats, per "k-slice" (16 of k), (WM/16) ldmatrix.x4 of A and (WN/16) ldmatrix.x4.trans of B
// from a swizzled, conflict-free shared layout (the layout of validation/families/tc_gemm/tc_gemm.cu:
// chunk_off<SWIZZLED>), then (WM/16) x (WN/8) mma.sync m16n8k16 fp16 -> fp32 into WM*WN/32 accumulators
// per thread. All operands live in shared memory (no global loads in the timed loop). Knobs (template
// parameters, one kernel per combination): the warp tile WM x WN, warps per block, the minimum blocks per
// SM of __launch_bounds__ (the host's dynamic shared memory makes exactly that many blocks fit), SYNC (0:
// no barrier, 1: __syncthreads after every slice, 2: after every second slice), DBUF (1: the fragments of
// slice s+1 are loaded before the MMAs of slice s, two register sets; 0: load, then use), LOADS (0: the
// register-fed control: fragments loaded once before the loop, the same MMAs every slice).
//
// Shared memory: a ring of MF_STAGES stages, each an A tile (BM rows x MF_BK halves, 4 chunks of 16 bytes
// a row: chunk c of row r at r*4 + (c ^ ((r/2) & 3))) and a B tile (MF_BK rows of k x BN halves, row
// major, BN/8 chunks a row: chunk c of row r at r*BLC + (c ^ (r & 7))), BM = 2*WM (two warps along M),
// BN = (warps/2)*WN: the tc_gemm block tile. Iteration `it` reads stage (it & stage_mask); stage_mask is
// a kernel argument (3 from the host) so that ptxas cannot prove the loads loop-invariant and hoist them.
// Results: every accumulator is XOR-folded into one value compared with a key the compiler cannot know
// (it depends on kernel arguments), so no load or MMA is dead code (ptxas deletes unused results).
// Each block writes MF_REC longs: clock64 cycles and %globaltimer ns of its timed part (between two
// __syncthreads), its %smid and its start %globaltimer (the host counts co-resident blocks per SM).
// References: PTX ISA 9.x, "Warp Level Matrix Multiply-Accumulate Instructions" (mma.sync m16n8k16 fragment
// layouts, ldmatrix). All kernels are extern "C" so that cupy.RawModule finds them by name.

#define MF_REC 4        // longs per block record: cycles, ns, smid, start ns (mma_feed_probe.py REC)
#define MF_BK 32        // halves of k per stage: two k-slices of 16 (the tc_gemm bk 32 configuration)
#define MF_STAGES 4     // stages in the shared ring (the host passes stage_mask = MF_STAGES - 1)
#define MF_WARPS_M 2    // warps along M in a block (the rest along N)

__device__ __forceinline__ unsigned long long mf_global_ns() {
    unsigned long long g;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
    return g;
}

__device__ __forceinline__ unsigned mf_smid() {
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

__device__ __forceinline__ unsigned mf_smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// small random fp16 pairs (|x| < 0.5, random signs) from a hash of i; 0 when `on` is 0
__device__ __forceinline__ unsigned mf_noise(unsigned i, unsigned on) {
    unsigned h = (i + 1u) * 0x9E3779B1u;
    h ^= h >> 15;
    h *= 0x85EBCA77u;
    h ^= h >> 13;
    return on ? (h & 0xB7FFB7FFu) : 0u;
}

__device__ __forceinline__ void mf_ldsm_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void mf_ldsm_x4_trans(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void mf_mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <int WM, int WN, int WARPS>
struct MfGeom {
    static constexpr int MI = WM / 16, NI = WN / 8;
    static constexpr int BM = MF_WARPS_M * WM, BN = (WARPS / MF_WARPS_M) * WN;
    static constexpr int A_LC = MF_BK / 8, B_LC = BN / 8;       // 16-byte chunks a row
    static constexpr int A_BYTES = BM * MF_BK * 2, B_BYTES = MF_BK * BN * 2;
    static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
    static constexpr int SMEM_BYTES = MF_STAGES * STAGE_BYTES;
    static_assert(WM % 16 == 0 && WN % 16 == 0 && WARPS % MF_WARPS_M == 0, "tile shapes");
    static_assert(A_LC == 4 && B_LC >= 8, "swizzle: A rows of 4 chunks, B rows of at least 8");
};

// the fragments of k-slice ks (0 or 1) of the stage at byte offset `st` (A at st, B at st + A_BYTES)
template <int WM, int WN, int WARPS>
__device__ __forceinline__ void mf_load(unsigned (&af)[WM / 16][4], unsigned (&bf)[WN / 8][2], unsigned sbase,
                                        unsigned st, int ks, int wm0, int wn0, int lane) {
    typedef MfGeom<WM, WN, WARPS> G;
#pragma unroll
    for (int mi = 0; mi < G::MI; ++mi) {
        const int r = wm0 + mi * 16 + (lane & 15), c = ks * 2 + (lane >> 4);
        mf_ldsm_x4(af[mi], sbase + st + (unsigned)(r * G::A_LC + (c ^ ((r >> 1) & 3))) * 16u);
    }
#pragma unroll
    for (int p = 0; p < G::NI / 2; ++p) {
        const int r = ks * 16 + (lane & 15), c = (wn0 + p * 16) / 8 + (lane >> 4);
        unsigned q[4];
        mf_ldsm_x4_trans(q, sbase + st + G::A_BYTES + (unsigned)(r * G::B_LC + (c ^ (r & 7))) * 16u);
        bf[2 * p][0] = q[0];
        bf[2 * p][1] = q[1];
        bf[2 * p + 1][0] = q[2];
        bf[2 * p + 1][1] = q[3];
    }
}

template <int WM, int WN>
__device__ __forceinline__ void mf_mmas(float (&acc)[WM / 16][WN / 8][4], const unsigned (&af)[WM / 16][4],
                                        const unsigned (&bf)[WN / 8][2]) {
#pragma unroll
    for (int mi = 0; mi < WM / 16; ++mi)
#pragma unroll
        for (int ni = 0; ni < WN / 8; ++ni) {
            const int nj = (mi & 1) ? WN / 8 - 1 - ni : ni;  // serpentine, as tc_gemm's compute_mma
            mf_mma(acc[mi][nj], af[mi], bf[nj]);
        }
}

template <int WM, int WN, int WARPS, int SYNC, int DBUF, int LOADS>
__device__ __forceinline__ void mf_body(int iters, int stage_mask, long long* clk, float* out, int noise) {
    typedef MfGeom<WM, WN, WARPS> G;
    extern __shared__ __align__(128) unsigned char mf_dyn[];
    for (int i = threadIdx.x * 16; i < G::SMEM_BYTES; i += blockDim.x * 16)
        *reinterpret_cast<uint4*>(mf_dyn + i) = make_uint4(mf_noise(i, noise), mf_noise(i + 1, noise),
                                                           mf_noise(i + 2, noise), mf_noise(i + 3, noise));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm0 = (warp % MF_WARPS_M) * WM, wn0 = (warp / MF_WARPS_M) * WN;
    const unsigned sbase = mf_smem_u32(mf_dyn), mask = (unsigned)stage_mask;
    float acc[G::MI][G::NI][4];
#pragma unroll
    for (int mi = 0; mi < G::MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < G::NI; ++ni)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[mi][ni][i] = 0.f;
    unsigned af0[G::MI][4], bf0[G::NI][2], af1[G::MI][4], bf1[G::NI][2];
    __syncthreads();  // the fill is done
    if (DBUF || !LOADS) mf_load<WM, WN, WARPS>(af0, bf0, sbase, 0u, 0, wm0, wn0, lane);
    __syncthreads();
    const long long c0 = clock64();
    const unsigned long long g0 = mf_global_ns();
    for (int it = 0; it < iters; ++it) {
        const unsigned st = ((unsigned)it & mask) * (unsigned)G::STAGE_BYTES;
        if (!LOADS) {  // register-fed control: the same MMAs, no loads
            mf_mmas<WM, WN>(acc, af0, bf0);
            if (SYNC == 1) __syncthreads();
            mf_mmas<WM, WN>(acc, af0, bf0);
            if (SYNC != 0) __syncthreads();
        } else if (DBUF) {
            mf_load<WM, WN, WARPS>(af1, bf1, sbase, st, 1, wm0, wn0, lane);
            mf_mmas<WM, WN>(acc, af0, bf0);
            if (SYNC == 1) __syncthreads();
            const unsigned nst = (((unsigned)it + 1u) & mask) * (unsigned)G::STAGE_BYTES;
            mf_load<WM, WN, WARPS>(af0, bf0, sbase, nst, 0, wm0, wn0, lane);
            mf_mmas<WM, WN>(acc, af1, bf1);
            if (SYNC != 0) __syncthreads();
        } else {
            mf_load<WM, WN, WARPS>(af0, bf0, sbase, st, 0, wm0, wn0, lane);
            mf_mmas<WM, WN>(acc, af0, bf0);
            if (SYNC == 1) __syncthreads();
            mf_load<WM, WN, WARPS>(af0, bf0, sbase, st, 1, wm0, wn0, lane);
            mf_mmas<WM, WN>(acc, af0, bf0);
            if (SYNC != 0) __syncthreads();
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        const long long c1 = clock64();
        const unsigned long long g1 = mf_global_ns();
        long long* r = clk + MF_REC * blockIdx.x;
        r[0] = c1 - c0;
        r[1] = (long long)(g1 - g0);
        r[2] = mf_smid();
        r[3] = (long long)g0;
    }
    unsigned bits = 0u;
#pragma unroll
    for (int mi = 0; mi < G::MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < G::NI; ++ni)
#pragma unroll
            for (int i = 0; i < 4; ++i) bits ^= __float_as_uint(acc[mi][ni][i]);
    if (bits == 0x9E3779B9u + (unsigned)stage_mask + (unsigned)noise)  // never at run time
        out[blockIdx.x * blockDim.x + threadIdx.x] = (float)bits;
}

// mf_<WM>x<WN>_w<warps>_b<min blocks/SM>_s<sync>_d<dbuf>_l<loads>
#define MF_KERNEL(WM, WN, W, B, S, D, L)                                                              \
extern "C" __global__ void __launch_bounds__(W * 32, B)                                               \
mf_##WM##x##WN##_w##W##_b##B##_s##S##_d##D##_l##L(int iters, int stage_mask, long long* clk, float* out, \
                                                 int noise) {                                         \
    mf_body<WM, WN, W, S, D, L>(iters, stage_mask, clk, out, noise);                                  \
}

// every barrier / buffering combination of one (tile, warps, blocks), plus the register-fed control
#define MF_SWEEP(WM, WN, W, B)          \
    MF_KERNEL(WM, WN, W, B, 0, 0, 1)    \
    MF_KERNEL(WM, WN, W, B, 1, 0, 1)    \
    MF_KERNEL(WM, WN, W, B, 2, 0, 1)    \
    MF_KERNEL(WM, WN, W, B, 0, 1, 1)    \
    MF_KERNEL(WM, WN, W, B, 1, 1, 1)    \
    MF_KERNEL(WM, WN, W, B, 2, 1, 1)    \
    MF_KERNEL(WM, WN, W, B, 0, 0, 0)

// mma_feed_probe.py SWEEP lists these (tile, warps, blocks/SM); 64x64 with 8 warps x 2 blocks cannot
// fit (128 accumulators a thread, 128 registers at most for 16 warps/SM)
MF_SWEEP(64, 64, 4, 1)
MF_SWEEP(64, 64, 4, 2)
MF_SWEEP(64, 64, 8, 1)
MF_SWEEP(64, 32, 4, 1)
MF_SWEEP(64, 32, 4, 2)
MF_SWEEP(64, 32, 8, 1)
MF_SWEEP(64, 32, 8, 2)
MF_SWEEP(32, 32, 4, 1)
MF_SWEEP(32, 32, 4, 2)
MF_SWEEP(32, 32, 8, 1)
MF_SWEEP(32, 32, 8, 2)

// ======================================================================================================
// GEMM k-step traffic (mma_feed_probe.py GT_CONFIGS, groups "gemm_traffic" and "gemm_traffic_w4"): the
// 64x64-warp-tile loop of mf_64x64_w<WARPS>_b*_s2_d0_l1 (barrier once per k-step of SL slices), with the
// global -> shared traffic of tc_gemm's shared_gemm (fp16, B row-major, a CSTAGES-stage cp.async ring) put
// back piece by piece. Geometries (template parameters WARPS, CSTAGES; the kernel's __launch_bounds__
// minimum blocks per SM): 8 warps, block tile 128x256, 4 stages, 1 block per SM (gemm_traffic, kernels
// mfgt_<mode>_k<SL>), and 4 warps, block tile 128x128, 3 stages, 2 or 1 blocks per SM (gemm_traffic_w4,
// kernels mfgt_<mode>_k<SL>_w4_b<blocks>_c3). The ldmatrix reads keep reading the fixed "compute ring" at
// the start of shared memory ((stage_mask + 1) stages of MfGeom<64, 64, WARPS>; slice s of k-step `it`
// reads stage ((it + s / 2) & stage_mask), k half s & 1), so only the traffic and its bookkeeping are
// added. The copies land in a separate "copy ring" of CSTAGES stages right after it (never read). Per
// k-step, as in shared_gemm: cp.async.wait_group(CSTAGES - 2), __syncthreads, the copies of the k-tile
// CSTAGES - 1 ahead into the slot `next`, cp.async.commit_group, then the SL slices of
// ldmatrix + mma.sync. Copy modes (template parameter MODE):
//   MF_GT_NONE   no copies, no cp.async bookkeeping (the control: the same loop as mf_..._s2_d0_l1)
//   MF_GT_COMMIT commit_group / wait_group only (empty groups)
//   MF_GT_ZFILL  the MF_GT_COPY copies with src-size = the kernel argument src_bytes (the host passes 0:
//                every copy zero-fills its 16 bytes; PTX ISA, cp.async: no source bytes are read)
//   MF_GT_COPY   16-byte cp.async.cg (no src-size) of the block's GEMM tiles: A rows m0.. (BKE halves
//                from k0), B rows k0.. (BN halves from n0); per-thread source pointers computed once,
//                one 64-bit add of the k offset per copy per k-step, dense destination (conflict-free)
//   MF_GT_GEMM   tc_gemm's load_tile (copied below: 64-bit index products, bounds checks, src-size 0
//                zero fill, swizzled destinations through cvta) with shared_gemm's `nk < ktiles` guard
//   MF_GT_GEMM_PAD the same load_tile into tc_gemm's padded layout (rows of LC + 1 chunks)
// The host picks the data: M = N = K = 2048 fp16 (A + B = 16 MiB, L2-resident after the first pass; K, the
// A rows' pitch, is a kernel argument: the gemm_traffic_ragged rows also take K = 2008 and 2032) with
// blocks on the GEMM's tile grid (16 x 8 tiles of 128x256, 16 x 16 of 128x128; x over N tiles), or one
// 1 GiB set (every block of the grid its own A rows and B columns, K chosen to fill 1 GiB; k wraps after
// K / BKE k-steps, by then the data is long evicted from L2).

#define MF_GT_CSTAGES 4  // copy ring stages of the 8-warp kernels (tc_gemm's 4-stage configuration)
#define MF_GT_NONE 0
#define MF_GT_COMMIT 1
#define MF_GT_ZFILL 2
#define MF_GT_COPY 3
#define MF_GT_GEMM 4
#define MF_GT_GEMM_PAD 5

typedef long long mf_idx_t;

__device__ __forceinline__ unsigned mf_gt_smem_addr(const void* p) {  // tcg::smem_addr
    unsigned r;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}
// tcg::cp_async16: 16 bytes global -> shared, bypassing L1; src_bytes = 0 zero-fills the destination
__device__ __forceinline__ void mf_gt_cp_async16(unsigned dst, const void* src, unsigned src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
// 16 bytes without src-size (the whole chunk is read)
__device__ __forceinline__ void mf_gt_cp_async16_full(unsigned dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void mf_gt_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void mf_gt_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// ---- copied from validation/families/tc_gemm/tc_gemm.cu (chunk_off, load_tile with STAGES >= 2), for
// the instantiations shared_gemm<FP16, *, BCOL = false, MMA_SYNC, 128, BN, 32, 64, 64, SWIZZLED, STAGES, *>
// (BN 256: 8 warps, 4 stages; BN 128: 4 warps, 3 stages; STAGES >= 2 only picks the cp.async branch) ----
namespace mfgt {
constexpr int PADDED = 1, SWIZZLED = 2;
template <int LAYOUT, int LC, int CE>
__device__ __forceinline__ int chunk_off(int r, int c) {
    if constexpr (LAYOUT == PADDED) {
        return (r * (LC + 1) + c) * CE;  // pitch LC + 1 chunks
    } else {
        constexpr int RPG = (LC >= 8) ? 1 : 8 / LC;  // rows per 128-byte line
        constexpr int MASK = ((LC >= 8) ? 8 : LC) - 1;
        return (r * LC + (c ^ ((r / RPG) & MASK))) * CE;
    }
}
template <int THREADS_, int BN_, int PAD_ = 0>
struct S {  // tcg::Shared<FP16, ..., BM 128, BN_, BK 32, WM 64, WN 64, SWIZZLED or PADDED (PAD_ 1), ...>
    typedef unsigned short T;
    static constexpr int CE = 8, THREADS = THREADS_, A_ROWS = 128, A_LC = 4, B_ROWS = 32, B_LC = BN_ / 8;
    static constexpr int A_ELEMS = A_ROWS * (A_LC + PAD_) * CE, B_ELEMS = B_ROWS * (B_LC + PAD_) * CE;
};
template <class S, int LAYOUT, bool BCOL>
__device__ __forceinline__ void load_tile(const typename S::T* __restrict__ A, const typename S::T* __restrict__ B,
                                          typename S::T* sA, typename S::T* sB, int m0, int n0, int k0,
                                          int M, int N, int K) {
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
            mf_gt_cp_async16(mf_gt_smem_addr(sA + chunk_off<LAYOUT, S::A_LC, CE>(r, c)),
                             ok ? A + (mf_idx_t)gm * K + gk : A, ok ? 16u : 0u);
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
                src = B + (mf_idx_t)gn * K + gk;
            } else {
                const int gk = k0 + r, gn = n0 + c * CE;
                ok = gk < K && gn < N;
                src = B + (mf_idx_t)gk * N + gn;
            }
            mf_gt_cp_async16(mf_gt_smem_addr(sB + chunk_off<LAYOUT, S::B_LC, CE>(r, c)), ok ? src : B,
                             ok ? 16u : 0u);
        }
    }
}
}  // namespace mfgt

template <int SL, int MODE, int WARPS, int CSTAGES>
__device__ __forceinline__ void mf_gt_body(int iters, int stage_mask, long long* clk, float* out, int noise,
                                           const unsigned short* __restrict__ A,
                                           const unsigned short* __restrict__ B, const int* __restrict__ tile_m0,
                                           const int* __restrict__ tile_n0, int M, int N, int K, int kt_limit,
                                           int src_bytes) {
    typedef MfGeom<64, 64, WARPS> G;
    constexpr bool PADM = MODE == MF_GT_GEMM_PAD;                 // load_tile into the padded layout
    typedef mfgt::S<32 * WARPS, G::BN, PADM ? 1 : 0> LS;          // load_tile's view of the block tile
    constexpr int THREADS = 32 * WARPS;
    constexpr int BKE = 16 * SL;                                  // halves of k per k-step
    constexpr int A_LC = BKE / 8, A_CH = G::BM * A_LC;            // 16-byte chunks of the A tile
    constexpr int B_LC = G::BN / 8, B_CH = BKE * B_LC;            // ... of the B tile
    constexpr int A_IT = A_CH / THREADS, B_IT = B_CH / THREADS;   // copies per thread per k-step
    constexpr int CSTAGE_BYTES = (A_CH + B_CH) * 16;
    static_assert(A_CH % THREADS == 0 && B_CH % THREADS == 0, "whole copies per thread");
    static_assert((MODE != MF_GT_GEMM && !PADM) || SL == 2, "load_tile is tc_gemm's bk 32 instantiation");
    static_assert(CSTAGES >= 2, "a cp.async ring: wait_group(CSTAGES - 2)");
    extern __shared__ __align__(128) unsigned char mf_dyn[];
    const int ring_bytes = (stage_mask + 1) * G::STAGE_BYTES;  // the compute ring; the copy ring follows
    for (int i = threadIdx.x * 16; i < ring_bytes; i += blockDim.x * 16)
        *reinterpret_cast<uint4*>(mf_dyn + i) = make_uint4(mf_noise(i, noise), mf_noise(i + 1, noise),
                                                           mf_noise(i + 2, noise), mf_noise(i + 3, noise));
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm0 = (warp % MF_WARPS_M) * 64, wn0 = (warp / MF_WARPS_M) * 64;
    const unsigned sbase = mf_smem_u32(mf_dyn), mask = (unsigned)stage_mask;
    const unsigned cbase = sbase + (unsigned)ring_bytes;
    const int m0 = tile_m0[blockIdx.x], n0 = tile_n0[blockIdx.x];
    unsigned short* cring = reinterpret_cast<unsigned short*>(mf_dyn + ring_bytes);  // generic, for load_tile
    constexpr int CSLOT = PADM ? LS::A_ELEMS + LS::B_ELEMS : CSTAGE_BYTES / 2;      // elements per slot

    // MF_GT_COPY / MF_GT_ZFILL: the k0 = 0 source of each copy (the k-step adds ka / kb elements)
    const unsigned short* pa[A_IT];
    const unsigned short* pb[B_IT];
#pragma unroll
    for (int j = 0; j < A_IT; ++j) {
        const int i = tid + j * THREADS;
        pa[j] = A + (mf_idx_t)(m0 + i / A_LC) * K + (i % A_LC) * 8;
    }
#pragma unroll
    for (int j = 0; j < B_IT; ++j) {
        const int i = tid + j * THREADS;
        pb[j] = B + (mf_idx_t)(i / B_LC) * N + n0 + (i % B_LC) * 8;
    }
    float acc[4][8][4];
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 8; ++ni)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[mi][ni][i] = 0.f;
    unsigned af[4][4], bf[8][2];

    // the k-tiles 0 .. CSTAGES - 2 before the loop (shared_gemm's prologue); ka, kb: the next
    // k-tile's offsets (elements) into A and B for the COPY modes, kn its k0 for the GEMM mode
    int ka = 0, kn = 0;
    mf_idx_t kb = 0;
    auto issue = [&](int slot, int nk) {
        if constexpr (MODE == MF_GT_COPY || MODE == MF_GT_ZFILL) {
            const unsigned dst = cbase + (unsigned)slot * (unsigned)CSTAGE_BYTES;
#pragma unroll
            for (int j = 0; j < A_IT; ++j) {
                const unsigned d = dst + (unsigned)(tid + j * THREADS) * 16u;
                if constexpr (MODE == MF_GT_COPY) mf_gt_cp_async16_full(d, pa[j] + ka);
                else mf_gt_cp_async16(d, pa[j] + ka, (unsigned)src_bytes);
            }
#pragma unroll
            for (int j = 0; j < B_IT; ++j) {
                const unsigned d = dst + (unsigned)(A_CH + tid + j * THREADS) * 16u;
                if constexpr (MODE == MF_GT_COPY) mf_gt_cp_async16_full(d, pb[j] + kb);
                else mf_gt_cp_async16(d, pb[j] + kb, (unsigned)src_bytes);
            }
            ka += BKE;
            kb += (mf_idx_t)BKE * N;
            if (ka + BKE > K) {  // wrap: the next k-tile would run past the row
                ka = 0;
                kb = 0;
            }
        } else if constexpr (MODE == MF_GT_GEMM || PADM) {
            if (nk < kt_limit)
                mfgt::load_tile<LS, PADM ? mfgt::PADDED : mfgt::SWIZZLED, false>(A, B, cring + slot * CSLOT,
                                                            cring + slot * CSLOT + LS::A_ELEMS, m0, n0, kn, M,
                                                            N, K);
            kn += BKE;
            if (kn + BKE > K) kn = 0;
        }
        if constexpr (MODE != MF_GT_NONE) mf_gt_commit();
    };
#pragma unroll
    for (int s = 0; s < CSTAGES - 1; ++s) issue(s, s);
    __syncthreads();  // the fill is done
    const long long c0 = clock64();
    const unsigned long long g0 = mf_global_ns();
    int next = CSTAGES - 1;
    for (int it = 0; it < iters; ++it) {
        if constexpr (MODE != MF_GT_NONE) mf_gt_wait<CSTAGES - 2>();
        __syncthreads();
        issue(next, it + CSTAGES - 1);
        next = (next + 1 == CSTAGES) ? 0 : next + 1;
#pragma unroll
        for (int s = 0; s < SL; ++s) {
            const unsigned st = (((unsigned)it + (unsigned)(s / 2)) & mask) * (unsigned)G::STAGE_BYTES;
            mf_load<64, 64, WARPS>(af, bf, sbase, st, s & 1, wm0, wn0, lane);
            mf_mmas<64, 64>(acc, af, bf);
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        const long long c1 = clock64();
        const unsigned long long g1 = mf_global_ns();
        long long* r = clk + MF_REC * blockIdx.x;
        r[0] = c1 - c0;
        r[1] = (long long)(g1 - g0);
        r[2] = mf_smid();
        r[3] = (long long)g0;
    }
    if constexpr (MODE != MF_GT_NONE) mf_gt_wait<0>();  // drain (after the timed part)
    unsigned bits = 0u;
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 8; ++ni)
#pragma unroll
            for (int i = 0; i < 4; ++i) bits ^= __float_as_uint(acc[mi][ni][i]);
    if (bits == 0x9E3779B9u + (unsigned)stage_mask + (unsigned)noise)  // never at run time
        out[blockIdx.x * blockDim.x + threadIdx.x] = (float)bits;
}

// one kernel: KNAME, WARPS warps, __launch_bounds__(32 x WARPS, MINBLOCKS), a copy ring of CSTAGES stages
#define MF_GT_KERNEL_AT(KNAME, SL, MODE, WARPS, MINBLOCKS, CSTAGES)                                          \
extern "C" __global__ void __launch_bounds__(WARPS * 32, MINBLOCKS)                                          \
KNAME(int iters, int stage_mask, long long* clk, float* out, int noise, const unsigned short* A,              \
      const unsigned short* B, const int* tile_m0, const int* tile_n0, int M, int N, int K, int kt_limit,     \
      int src_bytes) {                                                                                        \
    mf_gt_body<SL, MODE, WARPS, CSTAGES>(iters, stage_mask, clk, out, noise, A, B, tile_m0, tile_n0, M, N, K, \
                                         kt_limit, src_bytes);                                                \
}

// mfgt_<mode>_k<slices per k-step>: 8 warps (block tile 128 x 256), 1 block per SM, MF_GT_CSTAGES stages
#define MF_GT_KERNEL(NAME, SL, MODE) MF_GT_KERNEL_AT(mfgt_##NAME##_k##SL, SL, MODE, 8, 1, MF_GT_CSTAGES)

// mfgt_<mode>_k<slices>_w<warps>_b<min blocks per SM>_c<copy ring stages>: another geometry (block tile
// 128 x (warps / 2 x 64))
#define MF_GT_KERNEL_G(NAME, SL, MODE, W, B, C) \
    MF_GT_KERNEL_AT(mfgt_##NAME##_k##SL##_w##W##_b##B##_c##C, SL, MODE, W, B, C)

// mma_feed_probe.py GT_CONFIGS lists these (group gemm_traffic)
MF_GT_KERNEL(none, 2, MF_GT_NONE)
MF_GT_KERNEL(commit, 2, MF_GT_COMMIT)
MF_GT_KERNEL(zfill, 2, MF_GT_ZFILL)
MF_GT_KERNEL(copy, 2, MF_GT_COPY)
MF_GT_KERNEL(gemm, 2, MF_GT_GEMM)
MF_GT_KERNEL(none, 3, MF_GT_NONE)
MF_GT_KERNEL(copy, 3, MF_GT_COPY)

// mma_feed_probe.py GT_W4_CONFIGS lists these (group gemm_traffic_w4): the suite's mma.sync GEMMs with
// 128 x 128 block tiles of 4 warps and a 3-stage ring (s3), 2 blocks per SM as they run, and 1 block per
// SM (the host's dynamic shared memory) as the control that separates "2 blocks share an SM" from "4 warps"
MF_GT_KERNEL_G(none, 2, MF_GT_NONE, 4, 2, 3)
MF_GT_KERNEL_G(copy, 2, MF_GT_COPY, 4, 2, 3)
MF_GT_KERNEL_G(gemm, 2, MF_GT_GEMM, 4, 2, 3)
MF_GT_KERNEL_G(none, 2, MF_GT_NONE, 4, 1, 3)
MF_GT_KERNEL_G(copy, 2, MF_GT_COPY, 4, 1, 3)
MF_GT_KERNEL_G(gemm, 2, MF_GT_GEMM, 4, 1, 3)
// group gemm_traffic_ragged: tc_gemm's load_tile into its padded layout (pitch 5 chunks for A, 17 for B;
// 3 x 18.5 KiB copy ring), 2 blocks per SM as the suite's mma_fp16_*_pad_s3 kernels run
MF_GT_KERNEL_G(gemm_pad, 2, MF_GT_GEMM_PAD, 4, 2, 3)

// ======================================================================================================
// GEMM k-step critical path (mma_feed_probe.py GP_CONFIGS, group "gemm_path", kernels
// mfgp_<order>_w<warps>_b<min blocks per SM>_c<copy stages>_<bcol|brow>): the gemm_traffic loop with
// tc_gemm's load_tile, every warp stamping clock64 (CS2R) at six points of each k-step: the loop top (t0),
// after cp.async.wait_group (t1, DEPBAR), after __syncthreads (t2, BAR), after the k-step's copies and
// commit_group (t3, LDGDEPBAR), after the first mma.sync (t4, the first HMMA issued) and after the last
// (t5). Every MF_GP_EVERY-th k-step, lane 0 of each warp writes MF_GP_REC longs (below) for at most
// MF_GP_MAXREC such k-steps. The question: after the barrier, how long until a warp's first HMMA, as a
// function of the copies it issued just before (nvcc reuses the LDGSTS address registers for the first
// ldmatrix, whose address then waits for the L1 to accept all of the warp's copies), where their data
// comes from and how many sectors they touch. Knobs: ORDER (MF_GP_COPY_FIRST: tc_gemm's order, copies,
// then slice 0's fragments and MMAs, then slice 1's; MF_GP_LDSM_FIRST: slice 0's fragments and MMAs before
// the copies, then slice 1's, so that no copy stands between the barrier and the first HMMA; t3/t4 are
// then the copies and the first HMMA of slice 1. A plain "slice 0's ldmatrix before the copies" does not
// do it: ptxas (nvcc 13) still puts a slice-1 address instruction that waits for the copies' register
// reads before the first HMMA), BCOL (B stored N x K, K-contiguous: B tile rows of bk halves, as the
// suite's Bcol kernels; K = 2008 then makes A and B rows start mid-sector), the kernel argument `real`
// (copies per thread that read data: the first `real` of the thread's A_IT + B_IT copies, A first; the
// others zero-fill, src-size 0, so the instruction stream is the same for every `real`), the geometry
// (8 warps x 1 block: block tile 128 x 256, 4 stages; 4 warps x 1 or 2 blocks: 128 x 128, 3 stages).
// The ldmatrix reads keep reading the fixed compute ring, as in mf_gt_body.
// Stamp record (longs): t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t0 - (the previous k-step's t0),
// t0, the k-step index.

#define MF_GP_REC 8         // longs per stamped k-step and warp (mma_feed_probe.py GP_REC)
#define MF_GP_EVERY 16      // stamp every 16th k-step (GP_EVERY; a power of two)
#define MF_GP_MAXREC 128    // stamped k-steps kept per warp (GP_MAXREC)
#define MF_GP_COPY_FIRST 0  // ORDER: copies, then slice 0's fragments (tc_gemm's shared_gemm)
#define MF_GP_LDSM_FIRST 1  // ORDER: slice 0's fragments, then the copies

__device__ __forceinline__ long long mf_clk() {  // CS2R Rx, SR_CLOCKLO; volatile + memory: kept in order
    long long c;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
    return c;
}

// tc_gemm's load_tile (STAGES >= 2, SWIZZLED) for tile BM_ x BN_ x 32 with THREADS_ threads, B row-major
// (BCOL false) or N x K (true), and the copy index `real` from which every copy zero-fills
template <int THREADS_, int BN_, bool BCOL>
__device__ __forceinline__ void mf_gp_load_tile(const unsigned short* __restrict__ A,
                                                const unsigned short* __restrict__ B, unsigned short* sA,
                                                unsigned short* sB, int m0, int n0, int k0, int M, int N, int K,
                                                int real) {
    constexpr int CE = 8, A_ROWS = 128, A_LC = 4;
    constexpr int B_ROWS = BCOL ? BN_ : 32, B_LC = BCOL ? 4 : BN_ / 8;
    constexpr int A_CHUNKS = A_ROWS * A_LC, B_CHUNKS = B_ROWS * B_LC;
    constexpr int A_IT = A_CHUNKS / THREADS_, B_IT = B_CHUNKS / THREADS_;
    static_assert(A_CHUNKS % THREADS_ == 0 && B_CHUNKS % THREADS_ == 0, "whole copies per thread");
    const int tid = threadIdx.x;
#pragma unroll
    for (int it = 0; it < A_IT; ++it) {
        const int i = tid + it * THREADS_;
        const int r = i / A_LC, c = i % A_LC;
        const int gm = m0 + r, gk = k0 + c * CE;
        const bool ok = gm < M && gk < K && it < real;
        mf_gt_cp_async16(mf_gt_smem_addr(sA + mfgt::chunk_off<mfgt::SWIZZLED, A_LC, CE>(r, c)),
                         ok ? A + (mf_idx_t)gm * K + gk : A, ok ? 16u : 0u);
    }
#pragma unroll
    for (int it = 0; it < B_IT; ++it) {
        const int i = tid + it * THREADS_;
        const int r = i / B_LC, c = i % B_LC;
        bool ok;
        const unsigned short* src;
        if constexpr (BCOL) {
            const int gn = n0 + r, gk = k0 + c * CE;
            ok = gn < N && gk < K;
            src = B + (mf_idx_t)gn * K + gk;
        } else {
            const int gk = k0 + r, gn = n0 + c * CE;
            ok = gk < K && gn < N;
            src = B + (mf_idx_t)gk * N + gn;
        }
        ok = ok && A_IT + it < real;
        mf_gt_cp_async16(mf_gt_smem_addr(sB + mfgt::chunk_off<mfgt::SWIZZLED, B_LC, CE>(r, c)), ok ? src : B,
                         ok ? 16u : 0u);
    }
}

// mf_mmas less its first mma.sync (mi 0, ni 0)
__device__ __forceinline__ void mf_gp_mmas_rest(float (&acc)[4][8][4], const unsigned (&af)[4][4],
                                                const unsigned (&bf)[8][2]) {
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 8; ++ni) {
            if (mi == 0 && ni == 0) continue;
            const int nj = (mi & 1) ? 7 - ni : ni;
            mf_mma(acc[mi][nj], af[mi], bf[nj]);
        }
}

template <int WARPS, int CSTAGES, int ORDER, bool BCOL>
__device__ __forceinline__ void mf_gp_body(int iters, int stage_mask, long long* clk, long long* stamps, float* out,
                                           const unsigned short* __restrict__ A,
                                           const unsigned short* __restrict__ B, const int* __restrict__ tile_m0,
                                           const int* __restrict__ tile_n0, int M, int N, int K, int real) {
    typedef MfGeom<64, 64, WARPS> G;
    constexpr int THREADS = 32 * WARPS, BKE = 32;
    constexpr int CSLOT = (G::BM + G::BN) * BKE;  // elements of one copy-ring slot (A tile, then B tile)
    static_assert(CSTAGES >= 2, "a cp.async ring: wait_group(CSTAGES - 2)");
    extern __shared__ __align__(128) unsigned char mf_dyn[];
    const int ring_bytes = (stage_mask + 1) * G::STAGE_BYTES;  // the compute ring; the copy ring follows
    for (int i = threadIdx.x * 16; i < ring_bytes; i += blockDim.x * 16)
        *reinterpret_cast<uint4*>(mf_dyn + i) = make_uint4(0u, 0u, 0u, 0u);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm0 = (warp % MF_WARPS_M) * 64, wn0 = (warp / MF_WARPS_M) * 64;
    const unsigned sbase = mf_smem_u32(mf_dyn), mask = (unsigned)stage_mask;
    const int m0 = tile_m0[blockIdx.x], n0 = tile_n0[blockIdx.x];
    unsigned short* cring = reinterpret_cast<unsigned short*>(mf_dyn + ring_bytes);
    float acc[4][8][4];
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 8; ++ni)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[mi][ni][i] = 0.f;
    unsigned af[4][4], bf[8][2];
    int kn = 0;
    auto issue = [&](int slot, int nk) {
        mf_gp_load_tile<THREADS, G::BN, BCOL>(A, B, cring + slot * CSLOT, cring + slot * CSLOT + G::BM * BKE, m0,
                                              n0, kn, M, N, K, real);
        kn += BKE;
        if (kn + BKE > K) kn = 0;
        mf_gt_commit();
    };
#pragma unroll
    for (int s = 0; s < CSTAGES - 1; ++s) issue(s, s);
    __syncthreads();  // the fill is done
    const long long c0 = clock64();
    const unsigned long long g0 = mf_global_ns();
    long long* my = stamps + (size_t)(blockIdx.x * WARPS + warp) * MF_GP_MAXREC * MF_GP_REC;
    int next = CSTAGES - 1, rec = 0;
    long long prev = mf_clk();
    for (int it = 0; it < iters; ++it) {
        const long long t0 = mf_clk();
        mf_gt_wait<CSTAGES - 2>();
        const long long t1 = mf_clk();
        __syncthreads();
        const long long t2 = mf_clk();
        const unsigned st0 = ((unsigned)it & mask) * (unsigned)G::STAGE_BYTES;
        long long t3, t4;
        if constexpr (ORDER == MF_GP_COPY_FIRST) {  // tc_gemm: copies, slice 0, slice 1
            issue(next, it + CSTAGES - 1);
            t3 = mf_clk();
            mf_load<64, 64, WARPS>(af, bf, sbase, st0, 0, wm0, wn0, lane);
            mf_mma(acc[0][0], af[0], bf[0]);  // mf_mmas' first (mi 0, ni 0)
            t4 = mf_clk();
            mf_gp_mmas_rest(acc, af, bf);
            mf_load<64, 64, WARPS>(af, bf, sbase, st0, 1, wm0, wn0, lane);
            mf_mmas<64, 64>(acc, af, bf);
        } else {  // fragments first: slice 0, the copies, slice 1
            mf_load<64, 64, WARPS>(af, bf, sbase, st0, 0, wm0, wn0, lane);
            mf_mmas<64, 64>(acc, af, bf);
            issue(next, it + CSTAGES - 1);
            t3 = mf_clk();
            mf_load<64, 64, WARPS>(af, bf, sbase, st0, 1, wm0, wn0, lane);
            mf_mma(acc[0][0], af[0], bf[0]);
            t4 = mf_clk();
            mf_gp_mmas_rest(acc, af, bf);
        }
        const long long t5 = mf_clk();
        if ((it & (MF_GP_EVERY - 1)) == MF_GP_EVERY - 1 && rec < MF_GP_MAXREC) {
            if (lane == 0) {
                long long* r = my + rec * MF_GP_REC;
                r[0] = t1 - t0;
                r[1] = t2 - t1;
                r[2] = t3 - t2;
                r[3] = t4 - t3;
                r[4] = t5 - t4;
                r[5] = t0 - prev;
                r[6] = t0;
                r[7] = it;
            }
            ++rec;
        }
        prev = t0;
        next = (next + 1 == CSTAGES) ? 0 : next + 1;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        const long long c1 = clock64();
        const unsigned long long g1 = mf_global_ns();
        long long* r = clk + MF_REC * blockIdx.x;
        r[0] = c1 - c0;
        r[1] = (long long)(g1 - g0);
        r[2] = mf_smid();
        r[3] = (long long)g0;
    }
    mf_gt_wait<0>();  // drain (after the timed part)
    unsigned bits = 0u;
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 8; ++ni)
#pragma unroll
            for (int i = 0; i < 4; ++i) bits ^= __float_as_uint(acc[mi][ni][i]);
    if (bits == 0x9E3779B9u + (unsigned)stage_mask + (unsigned)real)  // never at run time
        out[blockIdx.x * blockDim.x + threadIdx.x] = (float)bits;
}

// mfgp_<copy|ldsm>_w<warps>_b<min blocks per SM>_c<copy stages>_<brow|bcol>
#define MF_GP_KERNEL(ONAME, ORDER, W, MINB, C, BNAME, BCOL)                                                   \
extern "C" __global__ void __launch_bounds__(W * 32, MINB)                                                    \
mfgp_##ONAME##_w##W##_b##MINB##_c##C##_##BNAME(int iters, int stage_mask, long long* clk, long long* stamps,  \
                                               float* out, const unsigned short* A, const unsigned short* B,  \
                                               const int* tile_m0, const int* tile_n0, int M, int N, int K,   \
                                               int real) {                                                    \
    mf_gp_body<W, C, ORDER, BCOL>(iters, stage_mask, clk, stamps, out, A, B, tile_m0, tile_n0, M, N, K, real); \
}

// mma_feed_probe.py GP_CONFIGS lists these (group gemm_path)
MF_GP_KERNEL(copy, MF_GP_COPY_FIRST, 8, 1, 4, brow, false)
MF_GP_KERNEL(ldsm, MF_GP_LDSM_FIRST, 8, 1, 4, brow, false)
MF_GP_KERNEL(copy, MF_GP_COPY_FIRST, 8, 1, 4, bcol, true)
MF_GP_KERNEL(ldsm, MF_GP_LDSM_FIRST, 8, 1, 4, bcol, true)
MF_GP_KERNEL(copy, MF_GP_COPY_FIRST, 4, 2, 3, brow, false)
MF_GP_KERNEL(ldsm, MF_GP_LDSM_FIRST, 4, 2, 3, brow, false)
MF_GP_KERNEL(copy, MF_GP_COPY_FIRST, 4, 2, 3, bcol, true)
MF_GP_KERNEL(copy, MF_GP_COPY_FIRST, 4, 1, 3, brow, false)

// ======================================================================================================
// GEMM k-step with B stored N x K (mma_feed_probe.py GB_CONFIGS, group "gemm_bcol", kernels
// mfgb_<copy>_<read>): what the suite's mma_fp16_Bcol_128x256x32_w64x64_swz_s4 loop has that mfgt_gemm_k2
// (gemm_traffic) has not. mfgt_gemm_k2 copies B row-major (K x N: each warp cp.async covers one B row of
// 512 contiguous bytes, 4 lines; A's cover 8 rows x 64 bytes, 8 half-lines) and reads a fixed compute ring
// with ldmatrix.trans; the suite kernel (Bcol) copies B as 256 rows of 64 bytes (every warp cp.async, A or B,
// covers 8 rows x 64 bytes: 8 half-lines) and reads the ring slot it copied, B with non-transposed ldmatrix.
// 8 warps (64x64 warp tiles, block tile 128 x 256), 1 block per SM, bk 32, a 4-stage cp.async ring;
// the loop of tc_gemm's shared_gemm: cp.async.wait_group(2), __syncthreads, tc_gemm's load_tile of the
// k-tile 3 ahead (mfgt::load_tile with a B-layout-aware tile view; `nk < kt_limit` guard), commit_group,
// then two k-slices of ldmatrix.x4 + 32 mma.sync. Knobs: BCOL (the copies' B layout: global B N x K and the
// shared B tile 256 rows x 4 chunks, or K x N and 32 rows x 32 chunks; tc_gemm's swizzle either way) and
// READ: MF_GB_FIXED_BROW (mf_load from the fixed compute ring at the start of shared memory, B with
// ldmatrix.trans: as mfgt_gemm_k2), MF_GB_FIXED_BCOL (the fixed ring's B read as an N x K swizzled tile
// with non-transposed ldmatrix, tc_gemm's compute_mma BCOL addressing), MF_GB_RING (tc_gemm's compute_mma
// on the copy ring's slot kt % 4 through cvta'd generic pointers, B in the copies' layout: the suite's loop),
// MF_GB_RING0 (MF_GB_RING with the copy ring at the start of dynamic shared memory, as tc_gemm's `ring = smem`:
// its generic address is then the extern __shared__ symbol's, which ptxas rematerializes every k-step from
// S2UR SR_CgaCtaId / SR_SWINHI as in the suite kernel; no fixed compute ring, nothing zeroed).
// Same kernel arguments as the MF_GT kernels (noise and src_bytes unused).

#define MF_GB_FIXED_BROW 0
#define MF_GB_FIXED_BCOL 1
#define MF_GB_RING 2
#define MF_GB_RING0 3

namespace mfgt {
template <int THREADS_, int BN_, bool BCOL_>
struct SC {  // tcg::Shared<FP16, ..., BM 128, BN_, BK 32, WM 64, WN 64, SWIZZLED, ...> with its B layout
    typedef unsigned short T;
    static constexpr int CE = 8, THREADS = THREADS_, A_ROWS = 128, A_LC = 4;
    static constexpr int B_ROWS = BCOL_ ? BN_ : 32, B_LC = BCOL_ ? 4 : BN_ / 8;
    static constexpr int A_ELEMS = A_ROWS * A_LC * CE, B_ELEMS = B_ROWS * B_LC * CE;
};
}  // namespace mfgt

// one k-slice's fragments, tc_gemm compute_mma's addressing (A: 128 x 4 chunks; B: BCOL 256 rows of 4
// chunks, non-transposed ldmatrix; else 32 rows of 32 chunks, ldmatrix.trans), shared byte bases a_base, b_base
template <bool BCOL>
__device__ __forceinline__ void mf_gb_load(unsigned (&af)[4][4], unsigned (&bf)[8][2], unsigned a_base,
                                           unsigned b_base, int ks, int wm0, int wn0, int lane) {
    constexpr int B_LC = BCOL ? 4 : 32;
#pragma unroll
    for (int mi = 0; mi < 4; ++mi) {
        const int r = wm0 + mi * 16 + (lane & 15), c = ks * 2 + (lane >> 4);
        mf_ldsm_x4(af[mi], a_base + mfgt::chunk_off<mfgt::SWIZZLED, 4, 8>(r, c) * 2);
    }
#pragma unroll
    for (int p = 0; p < 4; ++p) {
        unsigned q[4];
        if constexpr (BCOL) {
            const int r = wn0 + p * 16 + (lane & 7) + ((lane >> 4) << 3), c = ks * 2 + ((lane >> 3) & 1);
            mf_ldsm_x4(q, b_base + mfgt::chunk_off<mfgt::SWIZZLED, B_LC, 8>(r, c) * 2);
        } else {
            const int r = ks * 16 + (lane & 15), c = (wn0 + p * 16) / 8 + (lane >> 4);
            mf_ldsm_x4_trans(q, b_base + mfgt::chunk_off<mfgt::SWIZZLED, B_LC, 8>(r, c) * 2);
        }
        bf[2 * p][0] = q[0];
        bf[2 * p][1] = q[1];
        bf[2 * p + 1][0] = q[2];
        bf[2 * p + 1][1] = q[3];
    }
}

template <bool BCOL, int READ>
__device__ __forceinline__ void mf_gb_body(int iters, int stage_mask, long long* clk, float* out,
                                           const unsigned short* __restrict__ A,
                                           const unsigned short* __restrict__ B, const int* __restrict__ tile_m0,
                                           const int* __restrict__ tile_n0, int M, int N, int K, int kt_limit) {
    constexpr int WARPS = 8, CSTAGES = MF_GT_CSTAGES, BKE = 32;
    typedef MfGeom<64, 64, WARPS> G;
    typedef mfgt::SC<32 * WARPS, G::BN, BCOL> LS;
    constexpr int CSLOT = LS::A_ELEMS + LS::B_ELEMS;  // elements of one copy-ring slot (A tile, then B tile)
    constexpr bool FROM_RING = READ == MF_GB_RING || READ == MF_GB_RING0;
    extern __shared__ __align__(128) unsigned char mf_dyn[];
    // the fixed compute ring, then the copy ring (MF_GB_RING0: the copy ring alone, at offset 0)
    const int ring_bytes = READ == MF_GB_RING0 ? 0 : (stage_mask + 1) * G::STAGE_BYTES;
    for (int i = threadIdx.x * 16; i < ring_bytes; i += blockDim.x * 16)
        *reinterpret_cast<uint4*>(mf_dyn + i) = make_uint4(0u, 0u, 0u, 0u);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm0 = (warp % MF_WARPS_M) * 64, wn0 = (warp / MF_WARPS_M) * 64;
    const unsigned sbase = mf_smem_u32(mf_dyn), mask = (unsigned)stage_mask;
    const int m0 = tile_m0[blockIdx.x], n0 = tile_n0[blockIdx.x];
    unsigned short* cring = READ == MF_GB_RING0 ? reinterpret_cast<unsigned short*>(mf_dyn)
                                                : reinterpret_cast<unsigned short*>(mf_dyn + ring_bytes);
    float acc[4][8][4];
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 8; ++ni)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[mi][ni][i] = 0.f;
    unsigned af[4][4], bf[8][2];
    int kn = 0;
    auto issue = [&](int slot, int nk) {
        if (nk < kt_limit)
            mfgt::load_tile<LS, mfgt::SWIZZLED, BCOL>(A, B, cring + slot * CSLOT, cring + slot * CSLOT + LS::A_ELEMS,
                                                      m0, n0, kn, M, N, K);
        kn += BKE;
        if (kn + BKE > K) kn = 0;
        mf_gt_commit();
    };
#pragma unroll
    for (int s = 0; s < CSTAGES - 1; ++s) issue(s, s);
    __syncthreads();  // the fill is done
    const long long c0 = clock64();
    const unsigned long long g0 = mf_global_ns();
    int slot = 0, next = CSTAGES - 1;
    for (int it = 0; it < iters; ++it) {
        mf_gt_wait<CSTAGES - 2>();
        __syncthreads();
        issue(next, it + CSTAGES - 1);
        unsigned a_base, b_base;
        if constexpr (FROM_RING) {  // compute_mma: smem_addr of the slot's generic pointers
            const unsigned short* sA = cring + slot * CSLOT;
            a_base = mf_gt_smem_addr(sA);
            b_base = mf_gt_smem_addr(sA + LS::A_ELEMS);
        } else {
            a_base = sbase + ((unsigned)it & mask) * (unsigned)G::STAGE_BYTES;
            b_base = a_base + (unsigned)G::A_BYTES;
        }
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) {
            mf_gb_load<FROM_RING ? BCOL : READ == MF_GB_FIXED_BCOL>(af, bf, a_base, b_base, ks, wm0, wn0, lane);
            mf_mmas<64, 64>(acc, af, bf);
        }
        slot = (slot + 1 == CSTAGES) ? 0 : slot + 1;
        next = (next + 1 == CSTAGES) ? 0 : next + 1;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        const long long c1 = clock64();
        const unsigned long long g1 = mf_global_ns();
        long long* r = clk + MF_REC * blockIdx.x;
        r[0] = c1 - c0;
        r[1] = (long long)(g1 - g0);
        r[2] = mf_smid();
        r[3] = (long long)g0;
    }
    mf_gt_wait<0>();  // drain (after the timed part)
    unsigned bits = 0u;
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 8; ++ni)
#pragma unroll
            for (int i = 0; i < 4; ++i) bits ^= __float_as_uint(acc[mi][ni][i]);
    if (bits == 0x9E3779B9u + (unsigned)stage_mask + (unsigned)kt_limit)  // never at run time
        out[blockIdx.x * blockDim.x + threadIdx.x] = (float)bits;
}

// mfgb_<brow|bcol>_<fixed|fixedcol|ring|ring0>: the MF_GT kernel arguments (noise, src_bytes unused)
#define MF_GB_KERNEL(NAME, BCOL, READ)                                                                        \
extern "C" __global__ void __launch_bounds__(256, 1)                                                          \
mfgb_##NAME(int iters, int stage_mask, long long* clk, float* out, int noise, const unsigned short* A,        \
            const unsigned short* B, const int* tile_m0, const int* tile_n0, int M, int N, int K, int kt_limit, \
            int src_bytes) {                                                                                  \
    mf_gb_body<BCOL, READ>(iters, stage_mask, clk, out, A, B, tile_m0, tile_n0, M, N, K, kt_limit);          \
}

// mma_feed_probe.py GB_CONFIGS lists these (group gemm_bcol)
MF_GB_KERNEL(brow_fixed, false, MF_GB_FIXED_BROW)
MF_GB_KERNEL(bcol_fixed, true, MF_GB_FIXED_BROW)
MF_GB_KERNEL(bcol_fixedcol, true, MF_GB_FIXED_BCOL)
MF_GB_KERNEL(bcol_ring, true, MF_GB_RING)
MF_GB_KERNEL(brow_ring, false, MF_GB_RING)
MF_GB_KERNEL(bcol_ring0, true, MF_GB_RING0)
