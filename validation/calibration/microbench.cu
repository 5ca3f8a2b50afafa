// Microbenchmarks for the hardware model (validation/calibrate.py). Never the validation GEMMs.
// Loads that must not be hoisted, merged or removed are inline PTX marked volatile.
// All kernels are extern "C" so that cupy.RawModule finds them by name.

extern "C" {

// ---- HBM: device-to-device copy, float4, grid-stride ----------------------------------------------
__global__ void copy_f4(const float4* __restrict__ src, float4* __restrict__ dst, unsigned long long n) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {  // four loads in flight per thread
        float4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
        dst[i] = a; dst[i + stride] = b; dst[i + 2 * stride] = c; dst[i + 3 * stride] = d;
    }
    for (; i < n; i += stride) dst[i] = src[i];
}

// Bandwidth kernels use blocks of exactly MB_THREADS threads (compile-time, so offsets are immediates).
#define MB_THREADS 256

// ---- L2: repeated reads of a buffer resident in L2, bypassing L1 (ld.global.cg) ------------------
// n_vec (float4) must be a multiple of 4 * gridDim.x * MB_THREADS. Each pass reads the whole buffer.
__global__ void __launch_bounds__(MB_THREADS) read_l2(const float4* __restrict__ buf,
                                                      unsigned long long n_vec, int passes, float* out) {
    unsigned long long stride = (unsigned long long)gridDim.x * MB_THREADS;
    unsigned long long tid = (unsigned long long)blockIdx.x * MB_THREADS + threadIdx.x;
    float acc = 0.f;
    for (int p = 0; p < passes; ++p) {
        for (unsigned long long j = tid; j < n_vec; j += 4 * stride) {
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                float4 v;
                const float4* ptr = buf + j + u * stride;
                asm volatile("ld.global.cg.v4.f32 {%0,%1,%2,%3}, [%4];"
                             : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(ptr));
                acc += (v.x + v.y) + (v.z + v.w);  // use every component: no narrowing to 32-bit loads
            }
        }
    }
    if (acc == -12345.f) out[tid] = acc;
}

// ---- L1: each block re-reads its own 32 KiB slice (L1-resident, ld.global.ca) --------------------
#define L1_SLICE_VEC (8 * MB_THREADS)  // float4 per block = 32 KiB
__global__ void __launch_bounds__(MB_THREADS) read_l1(const float4* __restrict__ buf, int iters, float* out) {
    const float4* ptr = buf + (unsigned long long)blockIdx.x * L1_SLICE_VEC + threadIdx.x;
    // 1 at run time, unknown to the compiler: loads of consecutive iterations never coincide in
    // the compiler's eyes, so none is merged with another (out[] is zero-filled by the host)
    const int step = 1 + (int)out[blockIdx.x * MB_THREADS];
    float acc = 0.f;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            float4 v;
            // the address depends on the iteration so that ptxas cannot hoist the load
            asm volatile("ld.global.ca.v4.f32 {%0,%1,%2,%3}, [%4];"
                         : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(ptr + ((u + it * step) & 7) * MB_THREADS));
            acc += (v.x + v.y) + (v.z + v.w);  // use every component: no narrowing to 32-bit loads
        }
    }
    if (acc == -12345.f) out[blockIdx.x * MB_THREADS + threadIdx.x] = acc;
}

// ---- shared memory bandwidth: conflict-free float4 reads (4 wavefronts per warp instruction) ----
#define SMEM_VEC (8 * MB_THREADS)  // 32 KiB per block
__global__ void __launch_bounds__(MB_THREADS) read_smem(int iters, float* out) {
    const int step = 1 + (int)out[blockIdx.x * MB_THREADS];  // see read_l1
    __shared__ float4 s[SMEM_VEC];
    for (int i = threadIdx.x; i < SMEM_VEC; i += MB_THREADS) { float4 t; t.x = i; t.y = i + 1; t.z = i + 2; t.w = i + 3; s[i] = t; }
    __syncthreads();
    unsigned addr = (unsigned)__cvta_generic_to_shared(s + threadIdx.x);
    float acc = 0.f;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            float4 v;
            asm volatile("ld.shared.v4.f32 {%0,%1,%2,%3}, [%4];"
                         : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                         : "r"(addr + 16u * (unsigned)((u + it * step) & 7) * MB_THREADS));
            acc += (v.x + v.y) + (v.z + v.w);  // use every component: no narrowing to 32-bit loads
        }
    }
    if (acc == -12345.f) out[blockIdx.x * MB_THREADS + threadIdx.x] = acc;
}

// ---- L1 hits at one request per instruction: coalesced 32-bit loads (128 B per warp instruction)
__global__ void __launch_bounds__(MB_THREADS) read_l1_req(const float* __restrict__ buf, int iters, float* out) {
    const float* base = buf + (unsigned long long)blockIdx.x * (L1_SLICE_VEC * 4) + threadIdx.x;
    const int step = 1 + (int)out[blockIdx.x * MB_THREADS];  // see read_l1
    float acc = 0.f;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            float v;
            asm volatile("ld.global.ca.f32 %0, [%1];" : "=f"(v) : "l"(base + ((u + it * step) & 7) * MB_THREADS));
            acc += v;
        }
    }
    if (acc == -12345.f) out[blockIdx.x * MB_THREADS + threadIdx.x] = acc;
}

// ---- L1 scattered hits: every lane of a warp reads a different 128-byte line (one float each),
// lanes `stride_floats` apart, so each warp instruction touches 32 lines: lines per clock. Each
// lane cycles over 8 adjacent lines, so a block's 256 lines stay L1-resident.
__global__ void __launch_bounds__(MB_THREADS) read_l1_scatter(const float* __restrict__ buf, int iters,
                                                              int stride_floats, float* out) {
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const float* base = buf + (unsigned long long)blockIdx.x * 32ull * stride_floats + lane * (unsigned long long)stride_floats;
    const int step = 1 + (int)out[blockIdx.x * MB_THREADS];  // see read_l1
    float acc = 0.f;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            float v;
            asm volatile("ld.global.ca.f32 %0, [%1];" : "=f"(v) : "l"(base + 32u * ((u + it * step + warp) & 7)));
            acc += v;
        }
    }
    if (acc == -12345.f) out[blockIdx.x * MB_THREADS + threadIdx.x] = acc;
}

// ---- latency: pointer chases, one thread, cycles from clock64 -------------------------------------
// Global chase: each visited 8-byte word holds the address of the next one. mode 0 = ld.global.ca
// (L1 allowed), 1 = ld.global.cg (L2, bypass L1). 1 + warm_steps untimed steps, then `steps` timed
// ones. Writes the timed cycles and the final pointer.
__global__ void chase_global(unsigned long long start, int warm_steps, int steps, int mode,
                             long long* cycles_out, unsigned long long* sink) {
    unsigned long long p = start;
    long long t0, t1;
    if (mode == 0) {
        // untimed warm-up steps (at least one, so the first timed load is not the first instruction)
        for (int s = 0; s <= warm_steps; ++s) asm volatile("ld.global.ca.u64 %0, [%0];" : "+l"(p));
        t0 = clock64();
        for (int s = 0; s < steps; ++s) asm volatile("ld.global.ca.u64 %0, [%0];" : "+l"(p));
        t1 = clock64();
    } else {
        for (int s = 0; s <= warm_steps; ++s) asm volatile("ld.global.cg.u64 %0, [%0];" : "+l"(p));
        t0 = clock64();
        for (int s = 0; s < steps; ++s) asm volatile("ld.global.cg.u64 %0, [%0];" : "+l"(p));
        t1 = clock64();
    }
    cycles_out[0] = t1 - t0;
    sink[0] = p;
}

// Shared-memory chase: the block copies a chain of byte offsets (relative to the shared array)
// into shared memory, then thread 0 follows it.
#define CHASE_WORDS 4096  // 16 KiB
__global__ void chase_smem(const unsigned* __restrict__ chain, int steps, long long* cycles_out,
                           unsigned* sink) {
    __shared__ unsigned s[CHASE_WORDS];
    for (int i = threadIdx.x; i < CHASE_WORDS; i += blockDim.x) s[i] = chain[i];
    __syncthreads();
    if (threadIdx.x != 0) return;
    unsigned sbase = (unsigned)__cvta_generic_to_shared(s);
    unsigned p = sbase;
    asm volatile("ld.shared.u32 %0, [%0];" : "+r"(p));
    long long t0 = clock64();
    for (int st = 0; st < steps; ++st) asm volatile("ld.shared.u32 %0, [%0];" : "+r"(p));
    long long t1 = clock64();
    cycles_out[0] = t1 - t0;
    sink[0] = p;
}

// Thread 0 of each block records (clock64 delta, globaltimer delta in ns) into clk[2*block..].
__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long g;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
    return g;
}

// ---- FP32 FMA rate: 16 independent FFMA chains per thread; 256 FLOP per thread per iteration ----
__global__ void fma_chains(float a, float b, int iters, float* out, long long* clk) {
    long long c0 = clock64();
    unsigned long long g0 = global_ns();
    float x[16];
#pragma unroll
    for (int c = 0; c < 16; ++c) x[c] = threadIdx.x * 0.001f + c;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int r = 0; r < 8; ++r) {
#pragma unroll
            for (int c = 0; c < 16; ++c) x[c] = fmaf(x[c], a, b);
        }
    }
    float acc = 0.f;
#pragma unroll
    for (int c = 0; c < 16; ++c) acc += x[c];
    if (acc == -12345.f) out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
    if (threadIdx.x == 0) {
        clk[2 * blockIdx.x] = clock64() - c0;
        clk[2 * blockIdx.x + 1] = (long long)(global_ns() - g0);
    }
}

// ---- issue rate: FFMA (FMA pipe) and LOP3 (integer ALU pipe) 2:1, 16 + 8 independent chains ----
// Per iteration: 64 FFMA + 32 LOP3 = 96 warp instructions per warp (ISSUE_INSTR_PER_ITER in
// calibrate.py). Each LOP3 is a 3-input majority and consecutive ones on a chain use different
// operands (5 distinct inputs), so no two can merge into one LOP3.
__global__ void issue_mix(float a, float b, unsigned y, unsigned z, unsigned w, unsigned v,
                          int iters, float* out, long long* clk) {
    long long c0 = clock64();
    unsigned long long g0 = global_ns();
    float f[16];
    unsigned q[8];
#pragma unroll
    for (int c = 0; c < 16; ++c) f[c] = threadIdx.x + c;
#pragma unroll
    for (int c = 0; c < 8; ++c) q[c] = threadIdx.x * 7u + c;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
#pragma unroll
            for (int c = 0; c < 8; ++c) {
                f[2 * c] = fmaf(f[2 * c], a, b);
                asm volatile("lop3.b32 %0, %0, %1, %2, 0xE8;" : "+r"(q[c]) : "r"(y), "r"(z));
                f[2 * c + 1] = fmaf(f[2 * c + 1], a, b);
            }
#pragma unroll
            for (int c = 0; c < 8; ++c) {
                f[2 * c] = fmaf(f[2 * c], b, a);
                asm volatile("lop3.b32 %0, %0, %1, %2, 0xE8;" : "+r"(q[c]) : "r"(w), "r"(v));
                f[2 * c + 1] = fmaf(f[2 * c + 1], b, a);
            }
        }
    }
    float acc = 0.f;
    unsigned qa = 0;
#pragma unroll
    for (int c = 0; c < 16; ++c) acc += f[c];
#pragma unroll
    for (int c = 0; c < 8; ++c) qa ^= q[c];
    if (acc == -12345.f || qa == 0xDEADBEEFu) out[blockIdx.x * blockDim.x + threadIdx.x] = acc + qa;
    if (threadIdx.x == 0) {
        clk[2 * blockIdx.x] = clock64() - c0;
        clk[2 * blockIdx.x + 1] = (long long)(global_ns() - g0);
    }
}

// ---- launch overhead: an empty kernel ---------------------------------------------------------------
__global__ void empty_kernel() {}

// ---- SM clock under load: every block spins for `spin_cycles`, recording clock64 and globaltimer ---
__global__ void clock_probe(long long spin_cycles, long long* out) {
    long long c0 = clock64();
    unsigned long long g0 = global_ns();
    long long c = c0;
    while (c - c0 < spin_cycles) c = clock64();
    unsigned long long g1 = global_ns();
    if (threadIdx.x == 0) {
        out[2 * blockIdx.x] = c - c0;
        out[2 * blockIdx.x + 1] = (long long)(g1 - g0);
    }
}

}  // extern "C"

// ---- FFMA issue rate against resident warps: an outer-product update acc[8][4] += a[i] * b[j]
// (the register pattern of a register-tiled GEMM, without any memory access). Launched with
// one block per SM (large dynamic shared memory, unused) and blockDim = 32 x warps, so the rate
// depends on how many warps each scheduler has to choose from. 32 FFMA per thread per iteration.
extern "C" __global__ void fma_outer(float s, int iters, float* out, long long* clk) {
    extern __shared__ float pad_smem[];
    long long c0 = clock64();
    unsigned long long g0 = global_ns();
    float a[8], b[4], acc[8][4];
#pragma unroll
    for (int i = 0; i < 8; ++i) a[i] = threadIdx.x * 0.001f + i;
#pragma unroll
    for (int j = 0; j < 4; ++j) b[j] = s + j * 0.5f;
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
#pragma unroll
        for (int j = 0; j < 4; ++j) b[j] = b[j] * 0.9999f;  // new operands each round, like new fragments
    }
    float t = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) t += acc[i][j];
    if (t == -12345.f) out[blockIdx.x * blockDim.x + threadIdx.x] = t + pad_smem[0];
    if (threadIdx.x == 0) {
        clk[2 * blockIdx.x] = clock64() - c0;
        clk[2 * blockIdx.x + 1] = (long long)(global_ns() - g0);
    }
}

// ---- instruction-cache reach: a loop whose body is REPS x 32 independent FFMA (16 bytes each in
// SASS), run by one block of `warps` warps per SM (large dynamic shared memory, unused). When the
// body outgrows the instruction caches, lone warps stall on instruction fetch.
template <int REPS>
__device__ __forceinline__ void fma_code_body(float (&acc)[32], float a, float b) {
#pragma unroll
    for (int r = 0; r < REPS; ++r)
#pragma unroll
        for (int j = 0; j < 32; ++j) acc[j] = fmaf(acc[j], a, b);
}

template <int REPS>
__device__ void fma_code(float a, float b, int iters, float* out, long long* clk) {
    extern __shared__ float pad_smem2[];
    long long c0 = clock64();
    unsigned long long g0 = global_ns();
    float acc[32];
#pragma unroll
    for (int j = 0; j < 32; ++j) acc[j] = threadIdx.x * 0.001f + j;
    for (int it = 0; it < iters; ++it) fma_code_body<REPS>(acc, a, b);
    float t = 0.f;
#pragma unroll
    for (int j = 0; j < 32; ++j) t += acc[j];
    if (t == -12345.f) out[blockIdx.x * blockDim.x + threadIdx.x] = t + pad_smem2[0];
    if (threadIdx.x == 0) {
        clk[2 * blockIdx.x] = clock64() - c0;
        clk[2 * blockIdx.x + 1] = (long long)(global_ns() - g0);
    }
}

extern "C" __global__ void fma_code_8k(float a, float b, int iters, float* out, long long* clk) { fma_code<16>(a, b, iters, out, clk); }
extern "C" __global__ void fma_code_16k(float a, float b, int iters, float* out, long long* clk) { fma_code<32>(a, b, iters, out, clk); }
extern "C" __global__ void fma_code_32k(float a, float b, int iters, float* out, long long* clk) { fma_code<64>(a, b, iters, out, clk); }
extern "C" __global__ void fma_code_64k(float a, float b, int iters, float* out, long long* clk) { fma_code<128>(a, b, iters, out, clk); }

// ---- outer products fed from shared memory, as a register-tiled GEMM's inner loop: per round
// (one k) a thread loads TM values of A and TN of B (16-byte shared loads; lanes laid out as the
// GEMM's, 8 along N and 4 along M, so A is read by groups of 8 lanes) and does TM x TN FFMA. Eight
// rounds per iteration are unrolled (a BK = 8 tile); a compiler barrier per iteration makes every
// iteration load its operands again. Dynamic shared memory: 16 x (AW + 8 TN) floats (more to
// keep one block per SM).
template <int TM, int TN, bool A_ROWMAJOR = false, bool STAGED = false, bool GLOBAL = false, bool SCALAR = false,
          bool STREAM = false, bool PREFETCH = false, int REGION_PAD_VEC4 = 0>
__device__ __forceinline__ void lds_outer(int iters, float* out, long long* clk, const float4* g = nullptr) {
    extern __shared__ float4 lds_smem4[];
    float* sm = reinterpret_cast<float*>(lds_smem4);
    const int AW = STAGED ? blockDim.x / 32 * 4 * TM : 32 * 4 * TM;  // A row: warps x 4 lane rows x TM
    constexpr int BW = 8 * TN;                  // B row: 8 lane columns x TN
    float* As = sm;                             // [16][AW]
    float* Bs = sm + 16 * AW;                   // [16][BW]
    for (int i = threadIdx.x; i < 16 * (AW + BW); i += blockDim.x) sm[i] = 1.0f + i * 1e-6f;
    __syncthreads();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int m0 = (warp * 4 + lane / 8) * TM, n0 = (lane % 8) * TN;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
    // PREFETCH (with STAGED, GLOBAL, STREAM): the next k-step's tile is loaded into registers before
    // this k-step's math, as a GEMM pipelined by register prefetch
    float4 pa[TM / 4], pb = make_float4(0.f, 0.f, 0.f, 0.f);
    auto tile_ptr = [&](int step) {
        return g + ((size_t)blockIdx.x * iters + step) * (2 * AW + 2 * BW);
    };
    if constexpr (PREFETCH) {
#pragma unroll
        for (int q = 0; q < TM / 4; ++q) pa[q] = __ldcg(tile_ptr(0) + q * blockDim.x + threadIdx.x);
        if (threadIdx.x < 2 * TN) pb = __ldcg(tile_ptr(0) + 2 * AW + threadIdx.x);
    }
    long long c0 = clock64();
    unsigned long long g0 = global_ns();
    for (int it = 0; it < iters; ++it) {
        const int r0 = (it & 1) * 8;
        if constexpr (PREFETCH) {
            __syncthreads();
#pragma unroll
            for (int q = 0; q < TM / 4; ++q) {
                const int e = (q * blockDim.x + threadIdx.x) * 4;
                *reinterpret_cast<float4*>(&As[(r0 + e / AW) * AW + e % AW]) = pa[q];
            }
            if (threadIdx.x < 2 * TN) {
                const int e = threadIdx.x * 4;
                *reinterpret_cast<float4*>(&Bs[(r0 + e / BW) * BW + e % BW]) = pb;
            }
            __syncthreads();
            if (it + 1 < iters) {
#pragma unroll
                for (int q = 0; q < TM / 4; ++q) pa[q] = __ldcg(tile_ptr(it + 1) + q * blockDim.x + threadIdx.x);
                if (threadIdx.x < 2 * TN) pb = __ldcg(tile_ptr(it + 1) + 2 * AW + threadIdx.x);
            }
        } else if constexpr (STAGED) {  // a non-pipelined GEMM's k-step: store the block's next tile, barrier
            const int bm = AW;  // this block's A tile: 8 x bm, B tile: 8 x 8TN
            __syncthreads();
            // GLOBAL: the tile comes from this block's own 8 x (bm + BW) floats in global memory, read
            // through L2 only (ld.global.cg; the same lines every k-step, so they stay L2-resident)
            // STREAM: a new tile every k-step (block b's k-step it at (b * iters + it) tiles): HBM reads
            // REGION_PAD_VEC4: block regions padded (an odd number of float4), so that the blocks' streams
            // do not sit a power-of-two multiple apart
            const float4* gb = g + (STREAM ? (size_t)blockIdx.x * iters + it : (size_t)blockIdx.x) * (2 * bm + 2 * BW)
                               + (size_t)blockIdx.x * REGION_PAD_VEC4;
            float4 va[TM / 4], vb = make_float4(acc[0][0], 1.f, 2.f, 3.f);
            if constexpr (SCALAR) {  // 4-byte loads and stores, as the non-vectorized GEMMs stage
                const float* gs = reinterpret_cast<const float*>(gb);
#pragma unroll
                for (int q = 0; q < TM; ++q) {
                    const int e = q * blockDim.x + threadIdx.x;  // consecutive lanes, consecutive floats
                    As[(r0 + e / bm) * AW + e % bm] = __ldcg(gs + e);
                }
            } else {
#pragma unroll
            for (int q = 0; q < TM / 4; ++q) {
                va[q] = make_float4(acc[0][0], 1.f, 2.f, 3.f);
                if constexpr (GLOBAL) va[q] = __ldcg(gb + q * blockDim.x + threadIdx.x);
            }
#pragma unroll
            for (int q = 0; q < TM / 4; ++q) {
                const int e = (q * blockDim.x + threadIdx.x) * 4;  // A float index in the 8 x bm tile
                *reinterpret_cast<float4*>(&As[(r0 + e / bm) * AW + e % bm]) = va[q];
            }
            }
            if constexpr (GLOBAL) {
                if (threadIdx.x < 2 * TN) vb = __ldcg(gb + 2 * bm + threadIdx.x);
            }
            if (threadIdx.x < 2 * TN) {
                const int e = threadIdx.x * 4;
                *reinterpret_cast<float4*>(&Bs[(r0 + e / BW) * BW + e % BW]) = vb;
            }
            __syncthreads();
        } else {
            asm volatile("" ::: "memory");
        }
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            float a[TM], b[TN];
            if constexpr (A_ROWMAJOR) {  // As[m][k] (8 k per row): a column of the tile per round
#pragma unroll
                for (int i = 0; i < TM; ++i) a[i] = As[r0 * AW + (m0 + i) * 8 + k];
            } else {
#pragma unroll
                for (int i = 0; i < TM; i += 4) {
                    const float4 v = *reinterpret_cast<const float4*>(&As[(r0 + k) * AW + m0 + i]);
                    a[i] = v.x; a[i + 1] = v.y; a[i + 2] = v.z; a[i + 3] = v.w;
                }
            }
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&Bs[(r0 + k) * BW + n0 + j]);
                b[j] = v.x; b[j + 1] = v.y; b[j + 2] = v.z; b[j + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
    }
    float t = 0.f;
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) t += acc[i][j];
    if (t == -12345.f) out[blockIdx.x * blockDim.x + threadIdx.x] = t;
    if (threadIdx.x == 0) {
        clk[2 * blockIdx.x] = clock64() - c0;
        clk[2 * blockIdx.x + 1] = (long long)(global_ns() - g0);
    }
}
extern "C" __global__ void lds_outer_8x8(int iters, float* out, long long* clk) { lds_outer<8, 8>(iters, out, clk); }
extern "C" __global__ void lds_outer_8x4(int iters, float* out, long long* clk) { lds_outer<8, 4>(iters, out, clk); }
extern "C" __global__ void lds_outer_4x4(int iters, float* out, long long* clk) { lds_outer<4, 4>(iters, out, clk); }
// A stored row-major as in the non-vectorized GEMMs (As[m][k]): lanes 8 rows apart share a bank
extern "C" __global__ void lds_outer_rm_8x8(int iters, float* out, long long* clk) { lds_outer<8, 8, true>(iters, out, clk); }
// with a non-pipelined GEMM's staging per k-step: barrier, the block's next A and B tiles stored, barrier
extern "C" __global__ void staged_outer_8x8(int iters, float* out, long long* clk) { lds_outer<8, 8, false, true>(iters, out, clk); }
extern "C" __global__ void staged_outer_4x4(int iters, float* out, long long* clk) { lds_outer<4, 4, false, true>(iters, out, clk); }
// ... with the tiles loaded from global memory (L2 hits) each k-step, as a non-pipelined GEMM
extern "C" __global__ void gstaged_outer_8x8(const float4* g, int iters, float* out, long long* clk) {
    lds_outer<8, 8, false, true, true>(iters, out, clk, g);
}
extern "C" __global__ void gstaged_outer_4x4(const float4* g, int iters, float* out, long long* clk) {
    lds_outer<4, 4, false, true, true>(iters, out, clk, g);
}
// ... with A staged by 4-byte loads and stores (TM of each per thread), as the non-vectorized GEMMs
extern "C" __global__ void sgstaged_outer_8x8(const float4* g, int iters, float* out, long long* clk) {
    lds_outer<8, 8, false, true, true, true>(iters, out, clk, g);
}
extern "C" __global__ void sgstaged_outer_4x4(const float4* g, int iters, float* out, long long* clk) {
    lds_outer<4, 4, false, true, true, true>(iters, out, clk, g);
}
// ... with 16-byte loads of a new tile every k-step (never read before: from HBM)
extern "C" __global__ void dgstaged_outer_8x8(const float4* g, int iters, float* out, long long* clk) {
    lds_outer<8, 8, false, true, true, false, true>(iters, out, clk, g);
}
extern "C" __global__ void dgstaged_outer_4x4(const float4* g, int iters, float* out, long long* clk) {
    lds_outer<4, 4, false, true, true, false, true>(iters, out, clk, g);
}
// ... with the next k-step's tile loaded into registers before this k-step's math (register prefetch)
extern "C" __global__ void pdgstaged_outer_8x8(const float4* g, int iters, float* out, long long* clk) {
    lds_outer<8, 8, false, true, true, false, true, true>(iters, out, clk, g);
}
extern "C" __global__ void pdgstaged_outer_4x4(const float4* g, int iters, float* out, long long* clk) {
    lds_outer<4, 4, false, true, true, false, true, true>(iters, out, clk, g);
}
// dgstaged with each block's region shifted by 33 float4 (528 bytes) more than the last
extern "C" __global__ void xdgstaged_outer_8x8(const float4* g, int iters, float* out, long long* clk) {
    lds_outer<8, 8, false, true, true, false, true, false, 33>(iters, out, clk, g);
}
extern "C" __global__ void xdgstaged_outer_4x4(const float4* g, int iters, float* out, long long* clk) {
    lds_outer<4, 4, false, true, true, false, true, false, 33>(iters, out, clk, g);
}
// dgstaged_outer_8x8 held to the residency its shared memory asks for: nvcc 13.0 gives dgstaged_outer_8x8
// 143 registers, so an SM holds 3 blocks of 4 warps (not 4) or 1 of 8 (not 2); under these launch bounds
// ptxas allocates 125, with no spills, and 4 (2) blocks fit (validation/studies/engine_check.py)
extern "C" __global__ void __launch_bounds__(128, 4) ldgstaged_outer_8x8_4w(const float4* g, int iters, float* out,
                                                                             long long* clk) {
    lds_outer<8, 8, false, true, true, false, true>(iters, out, clk, g);
}
extern "C" __global__ void __launch_bounds__(256, 2) ldgstaged_outer_8x8_8w(const float4* g, int iters, float* out,
                                                                             long long* clk) {
    lds_outer<8, 8, false, true, true, false, true>(iters, out, clk, g);
}

// ---- DRAM latency under load: block 0's thread 0 follows a pointer chain of fresh lines (ld.global.cg,
// every hop a DRAM miss) while all other blocks stream 16-byte loads (ld.global.cg) from their own
// slices of a large buffer, ILP independent loads in flight per thread. Cycles per hop against the
// background's bandwidth (bytes over the kernel's time).
template <int ILP>
__device__ __forceinline__ void loaded_chase(unsigned long long start, int steps, const float4* __restrict__ bg,
                                             long long slice_vec4, int bg_iters, long long* cycles_out,
                                             unsigned long long* sink, float* out) {
    if (blockIdx.x == 0) {
        if (threadIdx.x == 0) {
            unsigned long long p = start;
            for (int s = 0; s < 64; ++s) asm volatile("ld.global.cg.u64 %0, [%0];" : "+l"(p));  // the others ramp up
            const long long t0 = clock64();
            for (int s = 0; s < steps; ++s) asm volatile("ld.global.cg.u64 %0, [%0];" : "+l"(p));
            cycles_out[0] = clock64() - t0;
            sink[0] = p;
        }
        return;
    }
    const float4* base = bg + (long long)(blockIdx.x - 1) * slice_vec4;
    float acc = 0.f;
    long long i = threadIdx.x;
    for (int it = 0; it < bg_iters; ++it) {
        float4 v[ILP];
#pragma unroll
        for (int u = 0; u < ILP; ++u) {
            v[u] = __ldcg(base + i);
            i += blockDim.x;
            if (i >= slice_vec4) i -= slice_vec4;
        }
#pragma unroll
        for (int u = 0; u < ILP; ++u) acc += v[u].x;
    }
    if (acc == -12345.f) out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
extern "C" __global__ void loaded_chase_1(unsigned long long start, int steps, const float4* __restrict__ bg,
                                          long long slice_vec4, int bg_iters, long long* cyc,
                                          unsigned long long* sink, float* out) {
    loaded_chase<1>(start, steps, bg, slice_vec4, bg_iters, cyc, sink, out);
}
extern "C" __global__ void loaded_chase_4(unsigned long long start, int steps, const float4* __restrict__ bg,
                                          long long slice_vec4, int bg_iters, long long* cyc,
                                          unsigned long long* sink, float* out) {
    loaded_chase<4>(start, steps, bg, slice_vec4, bg_iters, cyc, sink, out);
}
extern "C" __global__ void loaded_chase_8(unsigned long long start, int steps, const float4* __restrict__ bg,
                                          long long slice_vec4, int bg_iters, long long* cyc,
                                          unsigned long long* sink, float* out) {
    loaded_chase<8>(start, steps, bg, slice_vec4, bg_iters, cyc, sink, out);
}
