// TMA issue-to-landing time of a GEMM k-step's PAIR of boxes (A tile + B tile, one mbarrier) for the
// H200 (sm_90a). Driven by validation/calibration/tma_pair_probe.py, which documents the rows.
//
// One thread of each block (one block per SM, held there by its dynamic shared memory) loads `iters`
// pairs through a ring of `stages` slots: slot s holds an A box (a_rows x 64 halves, 128-byte swizzle)
// and a B box (b_rows x 64 halves) and one mbarrier that expects a_bytes + b_bytes (expect_tx, then both
// TMAs' complete_tx). The thread reads clock64 just before the expect_tx of pair k and just after its
// wait for pair k returns; lat[block * iters + k] = the difference (cycles from issue to landing). After
// pair k lands it issues pair k + stages into the freed slot, so `stages` pairs are in flight. Nothing
// consumes the data. Each block also writes a record of PR_REC longs: clock64 cycles and %globaltimer ns
// of the timed part, its %smid, 0. out[block] = 1 when an mbarrier wait timed out (the host reports it).
//
// Tiles: pair k of block b loads A tile and B tile number t = (base + b * block_stride + (k % period) *
// k_stride) mod total (A and B tensors have the same tile count); tile t is box column t & 63 and box
// row t >> 6 of a 4096-half-wide tensor. Incremental: no division in the issuing loop.
// References: PTX ISA 9.x "cp.async.bulk.tensor", "mbarrier". extern "C" for cupy.RawModule.

#define PR_REC 4              // longs per block record: cycles, ns, smid, 0 (tma_pair_probe.py REC)
#define PR_TILES_X_SHIFT 6    // 64 boxes of 64 halves per 4096-half row (log2)
#define PR_MAX_STAGES 2       // pairs in flight at most (the issue-time ring below)
#define PR_WAIT_LIMIT_CYCLES 4000000000LL  // about 2 s at 1.98 GHz: a wait gives up after this

__device__ __forceinline__ unsigned long long pr_global_ns() {
    unsigned long long g;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
    return g;
}
__device__ __forceinline__ unsigned pr_smid() {
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}
__device__ __forceinline__ void pr_mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void pr_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ bool pr_try(unsigned bar, unsigned parity) {
    unsigned ok;
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n"
                 "}\n" : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
    return ok != 0u;
}
__device__ __forceinline__ bool pr_wait(unsigned bar, unsigned parity) {
    if (pr_try(bar, parity)) return true;
    long long start = clock64();
    while (!pr_try(bar, parity)) {
        if (clock64() - start > PR_WAIT_LIMIT_CYCLES) return false;
    }
    return true;
}
__device__ __forceinline__ void pr_tma(unsigned dst, const void* tmap, unsigned tile, int rows, unsigned bar) {
    int x = (int)(tile & 63u) * 64, y = (int)(tile >> PR_TILES_X_SHIFT) * rows;
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(dst), "l"(tmap), "r"(x), "r"(y), "r"(bar) : "memory");
}

struct PairWalk {
    unsigned start, cur, kpos, period, k_stride, total;
    __device__ __forceinline__ unsigned next() {
        unsigned t = cur;
        if (++kpos == period) {
            kpos = 0u;
            cur = start;
        } else {
            cur += k_stride;
            if (cur >= total) cur -= total;
        }
        return t;
    }
};

extern "C" {

__global__ void pr_spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

__global__ void __launch_bounds__(32, 1) tma_pair(int iters, int stages, long long* clk, float* out,
                                                  int* lat, const void* tmap_a, const void* tmap_b,
                                                  int a_rows, int b_rows, int total_tiles, int base,
                                                  int block_stride, int k_stride, int period) {
    extern __shared__ __align__(16) unsigned char pr_dyn[];
    __shared__ long long issued[PR_MAX_STAGES];
    unsigned sbase = static_cast<unsigned>(__cvta_generic_to_shared(pr_dyn));
    unsigned tiles = (sbase + 1023u) & ~1023u;
    unsigned a_bytes = (unsigned)a_rows * 128u, b_bytes = (unsigned)b_rows * 128u;
    unsigned slot_bytes = a_bytes + b_bytes;  // both multiples of 1024: every box stays 1024-aligned
    unsigned bars = tiles + (unsigned)stages * slot_bytes;
    if (threadIdx.x == 0) {
        asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" :: "l"(tmap_a) : "memory");
        asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" :: "l"(tmap_b) : "memory");
        asm volatile("prefetch.tensormap [%0];" :: "l"(tmap_a) : "memory");
        asm volatile("prefetch.tensormap [%0];" :: "l"(tmap_b) : "memory");
        for (int s = 0; s < stages; ++s) pr_mbar_init(bars + 8u * s, 1u);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    PairWalk w;
    w.total = (unsigned)total_tiles;
    w.period = (unsigned)period;
    w.k_stride = (unsigned)k_stride;
    w.kpos = 0u;
    w.start = (unsigned)(((unsigned long long)(unsigned)base
                          + (unsigned long long)blockIdx.x * (unsigned)block_stride) % (unsigned long long)w.total);
    w.cur = w.start;
    int* my_lat = lat + (long long)blockIdx.x * iters;
    __syncthreads();
    long long c0 = clock64();
    unsigned long long g0 = pr_global_ns();
    if (threadIdx.x == 0) {
        for (int i = 0; i < stages && i < iters; ++i) {
            unsigned tile = w.next();
            unsigned bar = bars + 8u * i, dst = tiles + (unsigned)i * slot_bytes;
            issued[i] = clock64();
            pr_expect_tx(bar, slot_bytes);
            pr_tma(dst, tmap_a, tile, a_rows, bar);
            pr_tma(dst + a_bytes, tmap_b, tile, b_rows, bar);
        }
        unsigned s = 0, phase = 0, bar = bars, dst = tiles;
        for (int i = 0; i < iters; ++i) {
            if (!pr_wait(bar, phase)) {
                out[blockIdx.x] = 1.f;  // timed out: the host reports the row as failed
                break;
            }
            long long landed = clock64();
            my_lat[i] = (int)(landed - issued[s]);
            if (i + stages < iters) {
                unsigned tile = w.next();
                issued[s] = clock64();
                pr_expect_tx(bar, slot_bytes);
                pr_tma(dst, tmap_a, tile, a_rows, bar);
                pr_tma(dst + a_bytes, tmap_b, tile, b_rows, bar);
            }
            if (++s == (unsigned)stages) {
                s = 0;
                phase ^= 1u;
                bar = bars;
                dst = tiles;
            } else {
                bar += 8u;
                dst += slot_bytes;
            }
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        long long c1 = clock64();
        unsigned long long g1 = pr_global_ns();
        long long* r = clk + PR_REC * blockIdx.x;
        r[0] = c1 - c0;
        r[1] = (long long)(g1 - g0);
        r[2] = pr_smid();
        r[3] = 0;
    }
}

}  // extern "C"
