// Do the warp schedulers favour the warps of the oldest block on an SM? (driven by
// validation/calibration/age_probe.py; issue #10). The host launches exactly k blocks per SM (dynamic shared
// memory pins the count) of AGE_THREADS threads, all resident at once; every block runs AGE_SEGMENTS
// segments of seg_iters trips of one fixed body. Thread 0 of each block writes AGE_REC longs:
//   [0] %smid, [1] clock64 and [2] %globaltimer at loop start (after a barrier: all its warps are there),
//   [3 + m] clock64 and [3 + AGE_SEGMENTS + m] %globaltimer when warp 0 ends segment m (m = 0..7),
//   [19] clock64 and [20] %globaltimer at block end (after a barrier: all its warps are done), [21] blockIdx.x.
// Bodies (no DRAM traffic in the timed loop):
//   age_ffma_ilp   AGE_ILP independent FFMA chains x AGE_STEPS per trip: issue / FP32-pipe bound
//   age_ffma_chain one dependent FFMA chain, AGE_STEPS per trip: latency bound while few warps share a scheduler
//   age_lds        AGE_LDS independent conflict-free ld.shared.u32 per trip: shared-memory pipe bound
//   age_l2_chase   AGE_CHASE dependent ld.global.cg per trip through an L2-resident ring of 128-byte lines
//                  (every lane of a warp reads the same line: one L2 request per step): L2-latency bound
// Results are folded into a value compared with one the compiler cannot know (sel is 0 at run time), so the
// loops are not dead code. References: PTX ISA, "Special Registers: %smid, %clock64, %globaltimer".

#define AGE_THREADS 128   // 4 warps per block (age_probe.py THREADS)
#define AGE_SEGMENTS 8    // marks per block (age_probe.py SEGMENTS)
#define AGE_REC 24        // longs per block record (age_probe.py REC)
#define AGE_ILP 8         // independent FFMA chains per thread (age_ffma_ilp)
#define AGE_STEPS 16      // FFMA per chain per trip
#define AGE_LDS 8         // shared loads per trip (age_lds)
#define AGE_LDS_WORDS 4096  // 16 KiB of the dynamic shared memory read by age_lds
#define AGE_CHASE 8       // dependent L2 loads per trip (age_l2_chase)
#define AGE_LINE_WORDS 32 // 128-byte lines of the chase ring

__device__ __forceinline__ unsigned long long age_ns() {
    unsigned long long g;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
    return g;
}

__device__ __forceinline__ long long age_clk() {
    long long c;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c));
    return c;
}

__device__ __forceinline__ unsigned age_smid() {
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

struct FfmaIlp {
    float a[AGE_ILP];
    float x, y;
    __device__ FfmaIlp(int sel, unsigned*, const unsigned*) {
        x = 0.999f + (float)sel;
        y = 0.001f * (float)(sel + 1);
#pragma unroll
        for (int c = 0; c < AGE_ILP; ++c) a[c] = (float)(threadIdx.x + c);
    }
    __device__ __forceinline__ void trip() {
#pragma unroll
        for (int s = 0; s < AGE_STEPS; ++s)
#pragma unroll
            for (int c = 0; c < AGE_ILP; ++c) a[c] = fmaf(a[c], x, y);
    }
    __device__ unsigned result() const {
        float t = 0.0f;
#pragma unroll
        for (int c = 0; c < AGE_ILP; ++c) t += a[c];
        return __float_as_uint(t);
    }
};

struct FfmaChain {
    float a, x, y;
    __device__ FfmaChain(int sel, unsigned*, const unsigned*) {
        x = 0.999f + (float)sel;
        y = 0.001f * (float)(sel + 1);
        a = (float)threadIdx.x;
    }
    __device__ __forceinline__ void trip() {
#pragma unroll
        for (int s = 0; s < AGE_STEPS; ++s) a = fmaf(a, x, y);
    }
    __device__ unsigned result() const { return __float_as_uint(a); }
};

struct Lds {
    unsigned base, acc[AGE_LDS], i;
    __device__ Lds(int, unsigned* smem, const unsigned*) {
        for (int w = threadIdx.x; w < AGE_LDS_WORDS; w += AGE_THREADS) smem[w] = (unsigned)w * 2654435761u;
        __syncthreads();
        base = (unsigned)__cvta_generic_to_shared(smem);
        i = threadIdx.x >> 5;
#pragma unroll
        for (int j = 0; j < AGE_LDS; ++j) acc[j] = 0u;
    }
    __device__ __forceinline__ void trip() {
        // warp-wide 32 consecutive words (one wavefront, no bank conflict), rows rotating over the 16 KiB
        const unsigned row = (i & 15u) * (AGE_LDS * 32u) + (threadIdx.x & 31u);
#pragma unroll
        for (int j = 0; j < AGE_LDS; ++j) {
            unsigned v;
            asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(base + 4u * (row + 32u * (unsigned)j)));
            acc[j] ^= v;
        }
        ++i;
    }
    __device__ unsigned result() const {
        unsigned t = 0u;
#pragma unroll
        for (int j = 0; j < AGE_LDS; ++j) t ^= acc[j];
        return t;
    }
};

struct L2Chase {
    const unsigned* ring;
    unsigned line;
    __device__ L2Chase(int, unsigned*, const unsigned* chase) {
        ring = chase;
        // each warp starts at its own line of the ring (the ring's first word holds its length in lines)
        const unsigned lines = chase[0];
        const unsigned warp = blockIdx.x * (AGE_THREADS / 32) + (threadIdx.x >> 5);
        line = 1u + (warp * 7919u) % (lines - 1u);
    }
    __device__ __forceinline__ void trip() {
#pragma unroll
        for (int s = 0; s < AGE_CHASE; ++s) {
            unsigned v;
            const unsigned* p = ring + (size_t)line * AGE_LINE_WORDS + (threadIdx.x & 31u);
            asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p));
            line = v;
        }
    }
    __device__ unsigned result() const { return line; }
};

template <class Body>
__device__ __forceinline__ void age_run(int seg_iters, int sel, long long* rec, unsigned* out, const unsigned* chase) {
    extern __shared__ unsigned age_smem[];
    Body body(sel, age_smem, chase);
    long long* r = rec + AGE_REC * blockIdx.x;
    __syncthreads();
    if (threadIdx.x == 0) {
        r[1] = age_clk();
        r[2] = (long long)age_ns();
        r[0] = age_smid();
    }
    for (int m = 0; m < AGE_SEGMENTS; ++m) {
        for (int i = 0; i < seg_iters; ++i) body.trip();
        if (threadIdx.x == 0) {
            r[3 + m] = age_clk();
            r[3 + AGE_SEGMENTS + m] = (long long)age_ns();
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        r[3 + 2 * AGE_SEGMENTS] = age_clk();
        r[4 + 2 * AGE_SEGMENTS] = (long long)age_ns();
        r[5 + 2 * AGE_SEGMENTS] = blockIdx.x;
    }
    if (body.result() == 0x9e3779b9u + (unsigned)sel) out[threadIdx.x] = 1u;  // never at run time
}

extern "C" __global__ void __launch_bounds__(AGE_THREADS)
age_ffma_ilp(int seg_iters, int sel, long long* rec, unsigned* out, const unsigned* chase) {
    age_run<FfmaIlp>(seg_iters, sel, rec, out, chase);
}

extern "C" __global__ void __launch_bounds__(AGE_THREADS)
age_ffma_chain(int seg_iters, int sel, long long* rec, unsigned* out, const unsigned* chase) {
    age_run<FfmaChain>(seg_iters, sel, rec, out, chase);
}

extern "C" __global__ void __launch_bounds__(AGE_THREADS)
age_lds(int seg_iters, int sel, long long* rec, unsigned* out, const unsigned* chase) {
    age_run<Lds>(seg_iters, sel, rec, out, chase);
}

extern "C" __global__ void __launch_bounds__(AGE_THREADS)
age_l2_chase(int seg_iters, int sel, long long* rec, unsigned* out, const unsigned* chase) {
    age_run<L2Chase>(seg_iters, sel, rec, out, chase);
}
