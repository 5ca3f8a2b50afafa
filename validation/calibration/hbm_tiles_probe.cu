// HBM delivery to many tile-streaming blocks (sm_90; driven by validation/calibration/hbm_tiles_probe.py).
//
// ht_tiles mirrors the staging k-step of microbench.cu's dgstaged_outer_8x8 (lds_outer with STAGED, GLOBAL,
// STREAM): per k-step a barrier, each thread HT_VEC_PER_THREAD 16-byte __ldcg loads (ld.global.cg, L2 only)
// of the block's tile, their stores to shared memory, a barrier. The tile is HT_VEC_PER_THREAD x threads
// float4 (4 warps: 4 KiB, 8 warps: 8 KiB), seen as rows of `row_bytes` (32: 128 rows for 4 warps); float4
// e = q * threads + tid lies in row e / (row_bytes / 16), column e % (row_bytes / 16) (consecutive lanes,
// consecutive 16 bytes, as dgstaged's). Its global address:
//     g + blockIdx.x * block_stride + it * step_bytes + row * pitch + column * 16      (all in bytes)
// The host chooses the layout: contiguous (pitch = row_bytes, step_bytes = tile bytes: a fresh contiguous
// chunk each k-step, as dgstaged), pitched (pitch 16 KiB, step_bytes = row_bytes: the next 32 bytes of each
// of the block's rows, as a row-major GEMM's A tile), pitched by lines (step_bytes = 128: each k-step's rows
// on lines never touched before). `loads` = 0 leaves the loads out (the stored values come from registers):
// the same loop without HBM, the k-step's cost without loads.
//
// After the staging, `ffma` FFMA per thread (HT_FFMA_CHAINS independent chains, a multiple of them) stand for
// the k-step's math: 0 makes the k-step the staging alone (its clock64 time is the tile's load latency under
// the load the other blocks make, plus the stores and barriers); 512 is dgstaged_outer_8x8's count (8 rounds
// x 64), which the blocks of an SM issue in turn, so the demand on HBM per SM is dgstaged's.
//
// Records: per block HT_REC longs (clock64 cycles and %globaltimer ns at the start and at the end of the
// k-loop, %smid, the sink); per block and k-step the clock64 cycles of that k-step (thread 0, from one
// barrier to the next: int32 `step_cycles[blockIdx.x * iters + it]`). The stored tile is read back into a
// sink compared with a key the compiler cannot know, so the loads and stores are not dead code.
// References: CUDA C++ Programming Guide, "Load Functions Using Cache Hints" (__ldcg); PTX ISA, "Special
// Registers: %globaltimer, %clock64, %smid".

#define HT_REC 6              // longs per block record (hbm_tiles_probe.py REC)
#define HT_VEC_PER_THREAD 2   // float4 per thread per k-step: dgstaged_outer_8x8's TM / 4 (hbm_tiles_probe.py)
#define HT_FFMA_CHAINS 8      // independent FFMA chains of the k-step's math (hbm_tiles_probe.py FFMA_CHAINS)

__device__ __forceinline__ unsigned long long ht_global_ns() {
    unsigned long long g;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
    return g;
}

__device__ __forceinline__ unsigned ht_smid() {
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

extern "C" __global__ void ht_tiles(const char* __restrict__ g, int iters, int loads, int row_bytes,
                                    long long pitch, long long step_bytes, long long block_stride, int ffma,
                                    float key, long long* rec, int* step_cycles) {
    extern __shared__ float4 tile[];  // HT_VEC_PER_THREAD x blockDim.x float4 (the rest only limits residency)
    const int threads = blockDim.x;
    const int row_vec = row_bytes / 16;
    long long off[HT_VEC_PER_THREAD];
#pragma unroll
    for (int q = 0; q < HT_VEC_PER_THREAD; ++q) {
        const int e = q * threads + threadIdx.x;
        off[q] = (long long)(e / row_vec) * pitch + (long long)(e % row_vec) * 16;
    }
    const char* gb = g + (long long)blockIdx.x * block_stride;
    float sink = 0.f;
    __syncthreads();
    const long long c0 = clock64();
    const unsigned long long g0 = ht_global_ns();
    long long prev = c0;
    for (int it = 0; it < iters; ++it) {
        __syncthreads();
        float4 v[HT_VEC_PER_THREAD];
        const char* step = gb + (long long)it * step_bytes;
#pragma unroll
        for (int q = 0; q < HT_VEC_PER_THREAD; ++q) {
            if (loads) v[q] = __ldcg(reinterpret_cast<const float4*>(step + off[q]));
            else v[q] = make_float4(sink, (float)it, 1.f, 2.f);
        }
#pragma unroll
        for (int q = 0; q < HT_VEC_PER_THREAD; ++q) tile[q * threads + threadIdx.x] = v[q];
        __syncthreads();
        const float4 r = tile[(threadIdx.x * 7 + it) % (HT_VEC_PER_THREAD * threads)];
        sink += r.x + r.w;
        // the k-step's math: `ffma` FFMA per thread in HT_FFMA_CHAINS independent chains (dgstaged_outer_8x8:
        // 8 rounds x 64 = 512), issue-bound as the benchmark's
        float c[HT_FFMA_CHAINS];
#pragma unroll
        for (int j = 0; j < HT_FFMA_CHAINS; ++j) c[j] = r.y + (float)j;
        for (int i = 0; i < ffma; i += HT_FFMA_CHAINS) {
#pragma unroll
            for (int j = 0; j < HT_FFMA_CHAINS; ++j) c[j] = fmaf(c[j], 0.999f, r.z);
        }
#pragma unroll
        for (int j = 0; j < HT_FFMA_CHAINS; ++j) sink += c[j];
        if (threadIdx.x == 0) {
            const long long now = clock64();
            step_cycles[(long long)blockIdx.x * iters + it] = (int)(now - prev);
            prev = now;
        }
    }
    __syncthreads();
    const long long c1 = clock64();
    const unsigned long long g1 = ht_global_ns();
    if (threadIdx.x == 0) {
        long long* r = rec + (long long)HT_REC * blockIdx.x;
        r[0] = c0; r[1] = c1; r[2] = (long long)g0; r[3] = (long long)g1; r[4] = ht_smid();
        r[5] = sink == key ? 1 : 0;  // key is never a sum of the inputs: keeps the loads
    }
}

// a clock64 spin that the timed launch queues behind (probe_common.GatedTimer)
extern "C" __global__ void ht_spin(long long cycles) {
    const long long c0 = clock64();
    while (clock64() - c0 < cycles) { }
}
