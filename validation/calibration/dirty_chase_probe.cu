// dirty_chase_probe: the latency of loads that miss the L2 while it holds the harness flush's dirty lines.
//
// dc_init writes, for every warp's chain, the address of the chain's next node (nodes DC_STRIDE bytes apart,
// a region of its own per warp: every step a line never touched before in the launch). dc_chase: lane 0 of
// every warp follows its chain with ld.global.cg (L2 only), `steps` dependent loads, and records clock64
// cycles of the whole chase and of each quarter of it (the flush's dirty lines are written back as the
// misses push them out: the quarters show whether the extra latency fades). No includes: NVRTC and nvcc.
#define DC_REC 6          // longs per warp record: total cycles, 4 quarters, sink
#define DC_STRIDE 2048    // bytes between a chain's nodes (as calibrate.py's hbm_chase)

extern "C" __global__ void dc_init(unsigned long long* buf, long long nodes_per_chain, long long chains) {
    const long long stride_words = DC_STRIDE / 8;
    const long long total = nodes_per_chain * chains;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long c = i / nodes_per_chain, s = i % nodes_per_chain;
        unsigned long long* node = buf + (c * nodes_per_chain + s) * stride_words;
        const long long next = s + 1 < nodes_per_chain ? s + 1 : 0;
        node[0] = (unsigned long long)(buf + (c * nodes_per_chain + next) * stride_words);
    }
}

extern "C" __global__ void dc_chase(const unsigned long long* __restrict__ buf, long long nodes_per_chain,
                                    int steps, long long* rec) {
    const int warp = threadIdx.x >> 5;
    const long long chain = (long long)blockIdx.x * (blockDim.x >> 5) + warp;
    if ((threadIdx.x & 31) != 0) return;
    unsigned long long p = (unsigned long long)(buf + chain * nodes_per_chain * (DC_STRIDE / 8));
    long long* r = rec + chain * DC_REC;
    const int quarter = steps / 4;
    const long long t0 = clock64();
    long long tq = t0;
    for (int q = 0; q < 4; ++q) {
        for (int s = 0; s < quarter; ++s) asm volatile("ld.global.cg.u64 %0, [%0];" : "+l"(p) :: "memory");
        const long long now = clock64();
        r[1 + q] = now - tq;
        tq = now;
    }
    r[0] = tq - t0;
    r[5] = (long long)p;  // keeps the chase
}
