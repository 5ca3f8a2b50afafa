// Microbenchmarks for the pipes the reduction/softmax/layernorm families use: the special-function
// unit (MUFU), warp shuffles, the integer ALU, fp32 add and max, shared and global atomics, barriers.
// Driven by validation/calibration/pipes_probe.py (which documents what each kernel measures and
// checks the SASS of each loop body). Never the validation kernels themselves.
//
// Rules that keep the compiler from removing or merging the work:
// - every chain's value is used at the end (`if (acc == -12345.f) out[...] = acc`: never true, but
//   the compiler cannot know it), so nothing is dead;
// - special functions and integer ops are inline PTX with operands that make consecutive ops
//   impossible to fold (ptxas folds chains of integer adds into IMADs: every integer chain
//   alternates an add with a majority LOP3);
// - the float chains are self-bounded (x = 2^-x, x = rsqrt(x), x = -1/x, x = max(-x, b)) so that
//   no value runs to inf or NaN;
// - atomics go to addresses that differ between the unrolled copies, with per-lane values (no
//   warp aggregation by the compiler).
//
// Throughput kernels: blocks of PB_THREADS threads, signature
//   (float fa, float fb, unsigned ua, unsigned ub, int iters, float* out, long long* clk);
// thread 0 of each block records (clock64 delta, %globaltimer delta in ns) into clk[2*block..].
// Latency kernels: one block, signature (float fa, unsigned ua, int iters, float* out, long long* cyc);
// thread 0 writes the cycles of the timed loop into cyc[0].
// All kernels are extern "C" so that cupy.RawModule finds them by name.

#define PB_THREADS 256   // must match pipes_probe.py THREADS
#define PB_CHAINS 8      // independent chains per thread
#define PB_ROUNDS 8      // rounds per iteration: PB_CHAINS * PB_ROUNDS = 64 ops per thread per iteration
#define PB_ATOMICS 8     // atomics per thread per iteration
#define LAT_STEPS 32     // dependent steps per iteration of a latency loop
#define BAR_STEPS 8      // barriers per iteration of the barrier loop

__device__ __forceinline__ unsigned long long pb_global_ns() {
    unsigned long long g;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
    return g;
}

__device__ __forceinline__ void pb_record(long long c0, unsigned long long g0, long long* clk) {
    if (threadIdx.x == 0) {
        clk[2 * blockIdx.x] = clock64() - c0;
        clk[2 * blockIdx.x + 1] = (long long)(pb_global_ns() - g0);
    }
}

// ---- one step of each chain (inline PTX: what ptxas sees is exactly one instruction's worth) ----
__device__ __forceinline__ void ex2_neg(float& x) {  // x = 2^-x: MUFU.EX2 with a negated operand
    asm volatile("{ .reg .f32 t; neg.f32 t, %0; ex2.approx.ftz.f32 %0, t; }" : "+f"(x));
}
__device__ __forceinline__ void expf_ftz_neg(float& x) {  // x = e^-x as __expf compiles with -ftz=true
    asm volatile("{ .reg .f32 t; mul.ftz.f32 t, %0, 0fBFB8AA3B; ex2.approx.ftz.f32 %0, t; }" : "+f"(x));
}
__device__ __forceinline__ void rsq(float& x) { asm volatile("rsqrt.approx.ftz.f32 %0, %0;" : "+f"(x)); }
// x = 1/(-x): MUFU.RCP with a negated operand (ptxas folds rcp(rcp(x)) into x, not this)
__device__ __forceinline__ void rcp_neg(float& x) {
    asm volatile("{ .reg .f32 t; neg.f32 t, %0; rcp.approx.ftz.f32 %0, t; }" : "+f"(x));
}
__device__ __forceinline__ void iadd3(unsigned& q, unsigned y, unsigned z) {  // q += y + z: IADD3
    asm volatile("{ .reg .u32 t; add.u32 t, %0, %1; add.u32 %0, t, %2; }" : "+r"(q) : "r"(y), "r"(z));
}
__device__ __forceinline__ void maj3(unsigned& q, unsigned y, unsigned z) {  // majority: LOP3.LUT 0xE8
    asm volatile("lop3.b32 %0, %0, %1, %2, 0xE8;" : "+r"(q) : "r"(y), "r"(z));
}

extern "C" {

// ---- throughput: PB_CHAINS independent chains of one op, PB_ROUNDS rounds per iteration --------
#define PB_FLOAT_THROUGHPUT(NAME, INIT, STEP)                                                     \
__global__ void __launch_bounds__(PB_THREADS) NAME(float fa, float fb, unsigned ua, unsigned ub,  \
                                                   int iters, float* out, long long* clk) {       \
    long long c0 = clock64();                                                                     \
    unsigned long long g0 = pb_global_ns();                                                       \
    float x[PB_CHAINS];                                                                           \
    _Pragma("unroll") for (int c = 0; c < PB_CHAINS; ++c) x[c] = (INIT);                          \
    for (int it = 0; it < iters; ++it) {                                                          \
        _Pragma("unroll") for (int r = 0; r < PB_ROUNDS; ++r) {                                   \
            _Pragma("unroll") for (int c = 0; c < PB_CHAINS; ++c) { STEP; }                       \
        }                                                                                         \
    }                                                                                             \
    float acc = 0.f;                                                                              \
    _Pragma("unroll") for (int c = 0; c < PB_CHAINS; ++c) acc += x[c];                            \
    if (acc == -12345.f) out[blockIdx.x * PB_THREADS + threadIdx.x] = acc + ua + ub;              \
    pb_record(c0, g0, clk);                                                                       \
}

// MUFU.EX2: x = 2^-x (ex2.approx.ftz.f32, the fast path of exp2f)
PB_FLOAT_THROUGHPUT(tp_ex2, 0.5f + 0.01f * c + 1e-4f * threadIdx.x, ex2_neg(x[c]))
// __expf as compiled with -ftz=true / --use_fast_math: FMUL + MUFU.EX2 per call
PB_FLOAT_THROUGHPUT(tp_expf_ftz, 0.5f + 0.01f * c + 1e-4f * threadIdx.x, expf_ftz_neg(x[c]))
// __expf as compiled with the default flags (no ftz): FMUL, FSETP and predicated FMULs around MUFU.EX2
PB_FLOAT_THROUGHPUT(tp_expf, 0.5f + 0.01f * c + 1e-4f * threadIdx.x, x[c] = __expf(-x[c]))
// MUFU.RSQ: x = rsqrt(x)
PB_FLOAT_THROUGHPUT(tp_rsq, 1.5f + 0.01f * c + 1e-4f * threadIdx.x, rsq(x[c]))
// MUFU.RCP: x = 1/(-x)
PB_FLOAT_THROUGHPUT(tp_rcp, 1.5f + 0.01f * c + 1e-4f * threadIdx.x, rcp_neg(x[c]))
// FADD: x = x + fa (round-to-nearest intrinsic: never contracted or reassociated)
PB_FLOAT_THROUGHPUT(tp_fadd, 1.0f + c + 1e-3f * threadIdx.x, x[c] = __fadd_rn(x[c], fa))
// FMNMX: x = max(-x, fb) (the negation is an operand modifier, no extra instruction)
PB_FLOAT_THROUGHPUT(tp_fmnmx, 1.0f + c + 1e-3f * threadIdx.x, x[c] = fmaxf(-x[c], fb))

// SHFL.BFLY: x = shfl_xor(x, 1 << ((r + c) % 5)) on PB_CHAINS independent registers
__global__ void __launch_bounds__(PB_THREADS) tp_shfl(float fa, float fb, unsigned ua, unsigned ub,
                                                      int iters, float* out, long long* clk) {
    long long c0 = clock64();
    unsigned long long g0 = pb_global_ns();
    unsigned q[PB_CHAINS];
#pragma unroll
    for (int c = 0; c < PB_CHAINS; ++c) q[c] = ua * (threadIdx.x + 1) + c;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int r = 0; r < PB_ROUNDS; ++r) {
#pragma unroll
            for (int c = 0; c < PB_CHAINS; ++c) q[c] = __shfl_xor_sync(0xffffffffu, q[c], 1 << ((r + c) % 5));
        }
    }
    unsigned acc = 0;
#pragma unroll
    for (int c = 0; c < PB_CHAINS; ++c) acc ^= q[c];
    if (acc == 0xDEADBEEFu) out[blockIdx.x * PB_THREADS + threadIdx.x] = fa + fb + acc;
    pb_record(c0, g0, clk);
}

// Integer ALU: each chain alternates IADD3 (q += ua + ub) and LOP3 (majority with ub, ua): 32 + 32
// per thread per iteration. The alternation keeps ptxas from folding the adds into an IMAD.
__global__ void __launch_bounds__(PB_THREADS) tp_int(float fa, float fb, unsigned ua, unsigned ub,
                                                     int iters, float* out, long long* clk) {
    long long c0 = clock64();
    unsigned long long g0 = pb_global_ns();
    unsigned q[PB_CHAINS];
#pragma unroll
    for (int c = 0; c < PB_CHAINS; ++c) q[c] = threadIdx.x * 7u + c;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int r = 0; r < PB_ROUNDS / 2; ++r) {
#pragma unroll
            for (int c = 0; c < PB_CHAINS; ++c) iadd3(q[c], ua, ub);
#pragma unroll
            for (int c = 0; c < PB_CHAINS; ++c) maj3(q[c], ub, ua ^ 0x5A5A5A5Au);
        }
    }
    unsigned acc = 0;
#pragma unroll
    for (int c = 0; c < PB_CHAINS; ++c) acc ^= q[c];
    if (acc == 0xDEADBEEFu) out[blockIdx.x * PB_THREADS + threadIdx.x] = fa + fb + acc;
    pb_record(c0, g0, clk);
}

// ATOMS.ADD, every lane its own word (conflict-free: consecutive words), PB_ATOMICS words per thread
__global__ void __launch_bounds__(PB_THREADS) tp_atoms_distinct(float fa, float fb, unsigned ua, unsigned ub,
                                                                int iters, float* out, long long* clk) {
    __shared__ unsigned s[PB_ATOMICS * PB_THREADS];
    for (int i = threadIdx.x; i < PB_ATOMICS * PB_THREADS; i += PB_THREADS) s[i] = 0;
    __syncthreads();
    long long c0 = clock64();
    unsigned long long g0 = pb_global_ns();
    const unsigned v = ua + threadIdx.x;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < PB_ATOMICS; ++u) atomicAdd(&s[u * PB_THREADS + threadIdx.x], v);
    }
    __syncthreads();
    unsigned acc = 0;
#pragma unroll
    for (int u = 0; u < PB_ATOMICS; ++u) acc += s[u * PB_THREADS + threadIdx.x];
    if (acc == 0xDEADBEEFu) out[blockIdx.x * PB_THREADS + threadIdx.x] = fa + fb + acc + ub;
    pb_record(c0, g0, clk);
}

// ATOMS.ADD, all 32 lanes of a warp on one word (a different word per warp and per unrolled copy)
__global__ void __launch_bounds__(PB_THREADS) tp_atoms_same(float fa, float fb, unsigned ua, unsigned ub,
                                                            int iters, float* out, long long* clk) {
    __shared__ unsigned s[PB_ATOMICS * (PB_THREADS / 32)];
    const unsigned warp = threadIdx.x >> 5;
    if (threadIdx.x < PB_ATOMICS * (PB_THREADS / 32)) s[threadIdx.x] = 0;
    __syncthreads();
    long long c0 = clock64();
    unsigned long long g0 = pb_global_ns();
    const unsigned v = ua + threadIdx.x;  // differs per lane: the compiler cannot aggregate the warp's adds
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < PB_ATOMICS; ++u) atomicAdd(&s[u * (PB_THREADS / 32) + warp], v);
    }
    __syncthreads();
    unsigned acc = s[warp];
    if (acc == 0xDEADBEEFu) out[blockIdx.x * PB_THREADS + threadIdx.x] = fa + fb + acc + ub;
    pb_record(c0, g0, clk);
}

// REDG.ADD.F32 to ONE global word (out[0]) from lane 0 of every warp of every block: what a
// reduction whose blocks finish with atomicAdd(result, partial) does, at full contention.
__global__ void __launch_bounds__(PB_THREADS) tp_red_same(float fa, float fb, unsigned ua, unsigned ub,
                                                          int iters, float* out, long long* clk) {
    long long c0 = clock64();
    unsigned long long g0 = pb_global_ns();
    if ((threadIdx.x & 31) == 0) {
        const float v = fa * (1 + (threadIdx.x >> 5)) + fb * blockIdx.x;
        for (int it = 0; it < iters; ++it) {
#pragma unroll
            for (int u = 0; u < PB_ATOMICS; ++u) atomicAdd(out, v + u);
        }
    }
    if (ua == 0xDEADBEEFu) out[1] = ub;
    pb_record(c0, g0, clk);
}

// REDG.ADD.F32, every lane its own global word (each warp instruction covers one 128-byte line),
// PB_ATOMICS lines per warp, none shared between warps: out must hold gridDim.x * PB_ATOMICS * PB_THREADS floats.
__global__ void __launch_bounds__(PB_THREADS) tp_red_distinct(float fa, float fb, unsigned ua, unsigned ub,
                                                              int iters, float* out, long long* clk) {
    long long c0 = clock64();
    unsigned long long g0 = pb_global_ns();
    float* base = out + (unsigned long long)blockIdx.x * PB_ATOMICS * PB_THREADS + threadIdx.x;
    const float v = fa + fb * threadIdx.x;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < PB_ATOMICS; ++u) atomicAdd(base + u * PB_THREADS, v);
    }
    if (ua == 0xDEADBEEFu) out[0] = ub;
    pb_record(c0, g0, clk);
}

// ---- latency: one warp, one dependent chain of LAT_STEPS ops per iteration, timed by clock64 ----
#define PB_LATENCY(NAME, T, INIT, STEP)                                                           \
__global__ void NAME(float fa, unsigned ua, int iters, float* out, long long* cyc) {              \
    T x = (INIT);                                                                                 \
    _Pragma("unroll") for (int s = 0; s < LAT_STEPS; ++s) { STEP; }  /* untimed: warms up */     \
    long long t0 = clock64();                                                                     \
    for (int it = 0; it < iters; ++it) {                                                          \
        _Pragma("unroll") for (int s = 0; s < LAT_STEPS; ++s) { STEP; }                           \
    }                                                                                             \
    long long t1 = clock64();                                                                     \
    if (threadIdx.x == 0) cyc[0] = t1 - t0;                                                       \
    if (x == (T)(-12345)) out[threadIdx.x] = (float)x;  /* never true; keeps the chain alive */   \
}

PB_LATENCY(lat_ex2, float, 0.5f + 1e-4f * threadIdx.x + fa, ex2_neg(x))
PB_LATENCY(lat_rsq, float, 1.5f + 1e-4f * threadIdx.x + fa, rsq(x))
PB_LATENCY(lat_fadd, float, 1.0f + 1e-3f * threadIdx.x, x = __fadd_rn(x, fa))
// IADD3 and LOP3 alternating (a chain of adds alone is folded by ptxas): cycles per op
PB_LATENCY(lat_int, unsigned, threadIdx.x * 7u + ua, if (s & 1) maj3(x, ua, ua ^ 0x5A5A5A5Au); else iadd3(x, ua, 3u))
// LOP3 alone (majority): with lat_int, the IADD3 latency is 2 * lat_int - lat_lop3
PB_LATENCY(lat_lop3, unsigned, threadIdx.x * 7u + ua, maj3(x, (s & 1) ? ua : ~ua, ua ^ 0x5A5A5A5Au))
PB_LATENCY(lat_shfl, unsigned, threadIdx.x * 7u + ua, x = __shfl_xor_sync(0xffffffffu, x, 1 << (s % 5)))
// one step of a warp tree reduction: x += shfl_xor(x, m) (SHFL.BFLY then FADD, dependent)
PB_LATENCY(lat_reduce_step, float, 1.0f + 1e-3f * threadIdx.x + fa,
           x = __fadd_rn(x, __shfl_xor_sync(0xffffffffu, x, 1 << (s % 5))))

// ---- barrier: BAR_STEPS __syncthreads() per iteration, one block of 32 x warps threads -------
__global__ void lat_bar(float fa, unsigned ua, int iters, float* out, long long* cyc) {
#pragma unroll
    for (int s = 0; s < BAR_STEPS; ++s) __syncthreads();  // untimed: warms up
    long long t0 = clock64();
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int s = 0; s < BAR_STEPS; ++s) __syncthreads();
    }
    long long t1 = clock64();
    if (threadIdx.x == 0) cyc[0] = t1 - t0;
    if (ua == 0xDEADBEEFu) out[threadIdx.x] = fa;
}

// ---- a spin that keeps the GPU busy while the host enqueues the timed launch ---------------------
__global__ void pb_spin(long long spin_cycles) {
    long long c0 = clock64();
    while (clock64() - c0 < spin_cycles) {
    }
}

}  // extern "C"
