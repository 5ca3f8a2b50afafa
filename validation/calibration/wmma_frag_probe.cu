// How many cycles of the SM's load path one WMMA fragment load from shared memory takes when it is issued as
// tc_gemm.cu issues it (see wmma_frag_probe.py).
//
// tc_gemm.cu's wmma_load_a / wmma_load_b hand inline PTX a *generic* address
// ("wmma.load.a.sync.aligned.row.m16n16k16.f16 {..}, [%8], %9" with "l"(p)); ptxas emits four generic 4-byte
// loads per 16x16 fragment (LD.E [R.64+0x0/0x10/0x280/0x290] at ldm 40). With ".shared" and a 32-bit address,
// or through nvcuda::wmma::load_matrix_sync on a __shared__ tile, the same fragment is one LDSM.16.M88.4. One
// such LD.E reads 8 rows x 16 bytes: one shared wavefront at an 80-byte pitch, but 5-6 distinct 128-byte lines,
// where shared_generic_probe's ld_generic32 (32 consecutive words, one line) is the only generic measurement
// behind the engine's one L1 request slot a generic load.
//
// Every kernel: dynamic shared memory (the python side asks for enough to hold 1 or 2 blocks an SM), a timed
// loop of `iters` trips, each of WFP_FRAGS fragments of a 64-row slab (4 row blocks x 2 k-halves: the suite's
// w64 x k32 A fragments), the slab alternating between two each trip ((i + warp) & 1) so the addresses move.
// Thread 0 records clock64 and %globaltimer after a barrier before the loop and after one behind it.
//   frag_generic_P    ld.f32 through a generic pointer, the fragment pattern at row pitch P bytes (LD.E)
//   frag_shared_P     the same addresses by ld.shared.f32 (LDS): the data stage alone
//   frag_ldsm_P       ldmatrix.x4 of the same fragments (what ".shared" or the C++ API compile to)
//   frag_wmma_ptx_P   tc_gemm.cu's inline PTX (generic wmma.load.a, ldm = P / 2; not at P = 4)
//   frag_generic_cpC_80  frag_generic plus C 16-byte cp.async a thread and trip from an L2-resident buffer
//   frag_cponly4_80      those copies (C = 4) without the loads
//   frag_chase_P      warp 0 chases through the fragment-pattern words (each lane's next address is the word
//                     it loaded); the other warps, if any, run frag_generic's trips until it is done
// P = 4 is the control (32 consecutive words an instruction: ld_generic32's pattern; for ldmatrix, 8x8
// matrices of 128 consecutive bytes), 64 dense 16-bit rows (4-way bank conflict), 80 the suite's padded
// rows, 128 every row on the same banks (8-way), 144 the padded tf32 rows.

#define WFP_FRAGS 8          // fragments a warp loads a trip
#define WFP_LOADS 32         // generic (or LDS) warp loads a trip: WFP_FRAGS x 4
#define WFP_TILE_BYTES 24576 // the two slabs at up to 144 bytes a row (18 KiB), rounded up
#define WFP_CP_SLOTS 1024    // 16-byte cp.async landing slots, two rings (frag_generic_cp*, frag_cponly*)
#define WFP_REC 6            // longs a record: clock start, clock end, ns start, ns end, smid, loader trips

extern __shared__ __align__(128) char wfp_smem[];

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ int smid() {
    int s;
    asm volatile("mov.u32 %0, %smid;" : "=r"(s));
    return s;
}
__device__ __forceinline__ void put(long long* rec, long long c0, long long c1, unsigned long long g0,
                                    unsigned long long g1, long long extra) {
    long long* r = rec + WFP_REC * blockIdx.x;
    r[0] = c0;
    r[1] = c1;
    r[2] = (long long)g0;
    r[3] = (long long)g1;
    r[4] = smid();
    r[5] = extra;
}
// after the loop: barrier, thread 0 records; `keep` is never true at run time (keeps the loads alive)
__device__ __forceinline__ void record(long long* rec, long long c0, unsigned long long g0, bool keep, float* out) {
    __syncthreads();
    if (threadIdx.x == 0) put(rec, c0, clock64(), g0, global_ns(), 0);
    if (keep) out[threadIdx.x] = 1.0f;
}
__device__ __forceinline__ void fill(char* buf) {
    for (int i = threadIdx.x; i < WFP_TILE_BYTES / 4; i += blockDim.x) reinterpret_cast<float*>(buf)[i] = (float)(i & 255);
    __syncthreads();
}

// lane's byte offset in a fragment: row g = lane / 4 (+ 8), bytes 4 t, t = lane % 4 (+ 16): the m16n8k16
// register layout the wmma fragment has; P = 4: 32 consecutive words
template <int P> __device__ __forceinline__ constexpr int lane_base(int lane) {
    return P == 4 ? 4 * lane : (lane >> 2) * P + 4 * (lane & 3);
}
// load J (0..3) of a fragment: rows + 8 (J odd), bytes + 16 (J >= 2), as ptxas orders wmma.load.a's LD.E
template <int P, int J> __device__ __forceinline__ constexpr int j_off() {
    return P == 4 ? 128 * J : 8 * P * (J & 1) + 16 * (J >> 1);
}
// fragment F (0..7) of a 64-row slab: row block F / 2 (16 rows), k-half F % 2 (32 bytes)
template <int P, int F> __device__ __forceinline__ constexpr int f_off() {
    return P == 4 ? 512 * F : 16 * P * (F >> 1) + 32 * (F & 1);
}
template <int P> __device__ __forceinline__ constexpr int slab_bytes() { return P == 4 ? 4096 : 64 * P; }
template <int P> __device__ __forceinline__ int slab(int i, int warp) { return ((i + warp) & 1) * slab_bytes<P>(); }
// ldmatrix.x4 lane address: lane l gives row l % 16 of the fragment, 16-byte chunk l / 16 (matrices rows 0-7 /
// 8-15 x bytes 0-15 / 16-31); P = 4: matrix l / 8 at 128 (l / 8), its row l % 8 at 16 (l % 8)
template <int P> __device__ __forceinline__ constexpr int ldsm_lane_base(int lane) {
    return P == 4 ? 16 * lane : (lane & 15) * P + 16 * (lane >> 4);
}

#define WFP_LDG(F, J) { float v; asm volatile("ld.f32 %0, [%1];" : "=f"(v) : "l"(q + f_off<P, F>() + j_off<P, J>())); acc[J] += v; }
#define WFP_GFRAG(F) WFP_LDG(F, 0) WFP_LDG(F, 1) WFP_LDG(F, 2) WFP_LDG(F, 3)
#define WFP_GTRIP WFP_GFRAG(0) WFP_GFRAG(1) WFP_GFRAG(2) WFP_GFRAG(3) WFP_GFRAG(4) WFP_GFRAG(5) WFP_GFRAG(6) WFP_GFRAG(7)

template <int P>
__device__ __forceinline__ void frag_generic_body(int iters, int sel, long long* rec, float* out, const char* other) {
    char* buf = wfp_smem;
    fill(buf);
    const char* p = (sel ? other : (const char*)buf) + lane_base<P>(threadIdx.x & 31);  // sel = 0: generic -> shared
    const int warp = threadIdx.x >> 5;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    const long long c0 = clock64();
    const unsigned long long g0 = global_ns();
#pragma unroll 1
    for (int i = 0; i < iters; ++i) {
        const char* q = p + slab<P>(i, warp);
        WFP_GTRIP
    }
    record(rec, c0, g0, acc[0] + acc[1] + acc[2] + acc[3] == (float)sel - 1.5f, out);
}

template <int P>
__device__ __forceinline__ void frag_shared_body(int iters, int sel, long long* rec, float* out) {
    char* buf = wfp_smem;
    fill(buf);
    const unsigned s = (unsigned)__cvta_generic_to_shared(buf) + lane_base<P>(threadIdx.x & 31);
    const int warp = threadIdx.x >> 5;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    const long long c0 = clock64();
    const unsigned long long g0 = global_ns();
#pragma unroll 1
    for (int i = 0; i < iters; ++i) {
        const unsigned q = s + slab<P>(i, warp);
#define WFP_LDS(F, J) { float v; asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(q + f_off<P, F>() + j_off<P, J>())); acc[J] += v; }
#define WFP_SFRAG(F) WFP_LDS(F, 0) WFP_LDS(F, 1) WFP_LDS(F, 2) WFP_LDS(F, 3)
        WFP_SFRAG(0) WFP_SFRAG(1) WFP_SFRAG(2) WFP_SFRAG(3) WFP_SFRAG(4) WFP_SFRAG(5) WFP_SFRAG(6) WFP_SFRAG(7)
#undef WFP_SFRAG
#undef WFP_LDS
    }
    record(rec, c0, g0, acc[0] + acc[1] + acc[2] + acc[3] == (float)sel - 1.5f, out);
}

// one ldmatrix.x4 a fragment: WFP_FRAGS warp instructions a trip
template <int P>
__device__ __forceinline__ void frag_ldsm_body(int iters, int sel, long long* rec, float* out) {
    char* buf = wfp_smem;
    fill(buf);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned s = (unsigned)__cvta_generic_to_shared(buf) + ldsm_lane_base<P>(lane);
    unsigned x = 0;
    const long long c0 = clock64();
    const unsigned long long g0 = global_ns();
#pragma unroll 1
    for (int i = 0; i < iters; ++i) {
        const unsigned q = s + slab<P>(i, warp);
#define WFP_LDSM(F) { unsigned r0, r1, r2, r3; asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];" \
                      : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(q + f_off<P, F>())); x ^= r0 ^ r1 ^ r2 ^ r3; }
        WFP_LDSM(0) WFP_LDSM(1) WFP_LDSM(2) WFP_LDSM(3) WFP_LDSM(4) WFP_LDSM(5) WFP_LDSM(6) WFP_LDSM(7)
#undef WFP_LDSM
    }
    record(rec, c0, g0, x == (unsigned)sel + 0x9e3779b9u, out);
}

// tc_gemm.cu's wmma_load_a<FP16> (generic address into shared memory, ldm = P / 2 halves): WFP_FRAGS
// wmma.load.a a trip, 4 LD.E each in SASS. A one-lane shared store a warp and trip (STS, which a generic load
// may alias) keeps ptxas from hoisting the loads of both slabs out of the loop, which it does without one.
template <int P>
__device__ __forceinline__ void frag_wmma_ptx_body(int iters, int sel, long long* rec, float* out) {
    char* buf = wfp_smem;
    fill(buf);
    const char* p = buf;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned scratch = (unsigned)__cvta_generic_to_shared(buf + WFP_TILE_BYTES - 4 * 32 + 4 * lane);  // in no fragment
    unsigned x = 0;
    const long long c0 = clock64();
    const unsigned long long g0 = global_ns();
#pragma unroll 1
    for (int i = 0; i < iters; ++i) {
        if (lane == 0) asm volatile("st.shared.u32 [%0], %1;" :: "r"(scratch), "r"(i) : "memory");
        const char* q = p + slab<P>(i, warp);
#define WFP_WLD(F) { unsigned r[8]; asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;\n" \
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7]) \
                     : "l"(q + f_off<P, F>()), "r"(P / 2)); x ^= r[0] ^ r[1] ^ r[2] ^ r[3] ^ r[4] ^ r[5] ^ r[6] ^ r[7]; }
        WFP_WLD(0) WFP_WLD(1) WFP_WLD(2) WFP_WLD(3) WFP_WLD(4) WFP_WLD(5) WFP_WLD(6) WFP_WLD(7)
#undef WFP_WLD
    }
    record(rec, c0, g0, x == (unsigned)sel + 0x9e3779b9u, out);
}

// frag_generic (LOADS true) or nothing (false) plus C 16-byte cp.async a thread and trip into a landing ring
// (two halves of WFP_CP_SLOTS / 2), committed each trip and waited for one trip later, as the suite's ring
// does; the source: an L2-resident buffer of src_mask + 1 float4, each block from its own place in it
template <int P, int C, bool LOADS>
__device__ __forceinline__ void frag_cp_body(int iters, int sel, long long* rec, float* out, const char* other,
                                             const float4* src, int src_mask) {
    char* buf = wfp_smem;
    float4* land = reinterpret_cast<float4*>(wfp_smem + WFP_TILE_BYTES);
    fill(buf);
    const char* p = (sel ? other : (const char*)buf) + lane_base<P>(threadIdx.x & 31);
    const int warp = threadIdx.x >> 5;
    const int half = WFP_CP_SLOTS / 2;
    const unsigned land_s = (unsigned)__cvta_generic_to_shared(land);
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    const long long c0 = clock64();
    const unsigned long long g0 = global_ns();
#pragma unroll 1
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int c = 0; c < C; ++c) {
            const unsigned dst = land_s + 16u * ((i & 1) * half + (c * blockDim.x + threadIdx.x) % half);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst),
                         "l"(src + ((blockIdx.x * 8192 + (i * C + c) * blockDim.x + threadIdx.x) & src_mask)) : "memory");
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
        if (LOADS) {
            const char* q = p + slab<P>(i, warp);
            WFP_GTRIP
        }
        asm volatile("cp.async.wait_group 1;" ::: "memory");
    }
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
    record(rec, c0, g0, acc[0] + acc[1] + acc[2] + acc[3] + land[threadIdx.x % half].x == (float)sel - 1.5f, out);
}

// latency: warp 0 chases, iters trips of WFP_FRAGS dependent loads: lane l's word of fragment F (its load J = 0
// word) holds the low 32 bits of the generic address of its word of fragment F + 1, the high 32 bits are the
// buffer's (the shared window's), so each hop is one LD.E and no address arithmetic. The other warps (a block of
// more than one warp) run frag_generic's trips until warp 0 is done and count them. Warp 0's lane 0 records its
// own loop; r[5] = the other warps' trips. A block whose buffer crosses a 4 GiB boundary records clock end 0.
template <int P>
__device__ __forceinline__ void frag_chase_body(int iters, int sel, long long* rec, float* out, const char* other) {
    char* buf = wfp_smem;
    volatile int* flags = reinterpret_cast<volatile int*>(wfp_smem + WFP_TILE_BYTES);  // [0] done, [1] trips
    fill(buf);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const char* p = sel ? other : (const char*)buf;
    constexpr int OFFS[WFP_FRAGS] = {f_off<P, 0>(), f_off<P, 1>(), f_off<P, 2>(), f_off<P, 3>(),
                                     f_off<P, 4>(), f_off<P, 5>(), f_off<P, 6>(), f_off<P, 7>()};
    if (warp == 0) {
        for (int f = 0; f < WFP_FRAGS; ++f)
            *reinterpret_cast<unsigned*>(buf + OFFS[f] + lane_base<P>(lane)) =
                (unsigned)(unsigned long long)(p + OFFS[(f + 1) % WFP_FRAGS] + lane_base<P>(lane));
        if (lane == 0) { flags[0] = 0; flags[1] = 0; }
    }
    __syncthreads();
    const unsigned hi = (unsigned)((unsigned long long)p >> 32);
    const bool same_hi = (unsigned)((unsigned long long)(p + WFP_TILE_BYTES) >> 32) == hi;
    if (warp == 0) {
        unsigned at = (unsigned)(unsigned long long)(p + lane_base<P>(lane));
        const long long c0 = clock64();
        const unsigned long long g0 = global_ns();
#pragma unroll 1
        for (int i = 0; i < iters; ++i) {
#pragma unroll
            for (int f = 0; f < WFP_FRAGS; ++f) {
                unsigned long long a;
                asm volatile("mov.b64 %0, {%1, %2};" : "=l"(a) : "r"(at), "r"(hi));
                asm volatile("ld.u32 %0, [%1];" : "=r"(at) : "l"(a));
            }
        }
        const long long c1 = clock64();
        const unsigned long long g1 = global_ns();
        __syncwarp();
        if (lane == 0) flags[0] = 1;
        __syncthreads();
        if (lane == 0) put(rec, c0, same_hi ? c1 : 0, g0, g1, flags[1]);
        if (at == (unsigned)sel - 7u) out[threadIdx.x] = 1.0f;
    } else {
        const char* pl = p + lane_base<P>(lane);
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        int i = 0;
#pragma unroll 1
        for (; !flags[0]; ++i) {
            const char* q = pl + slab<P>(i, warp);
            WFP_GTRIP
        }
        if (lane == 0) atomicAdd((int*)flags + 1, i);
        __syncthreads();
        if (acc[0] + acc[1] + acc[2] + acc[3] == (float)sel - 1.5f) out[threadIdx.x] = 1.0f;
    }
}

// every kernel has the same parameters: (iters, sel, rec, out, other, src, src_mask)
#define WFP_PARAMS int iters, int sel, long long *rec, float *out, const char *other, const float4 *src, int src_mask
#define WFP_INSTANCES(P)                                                                                      \
    extern "C" __global__ void __launch_bounds__(1024) frag_generic_##P(WFP_PARAMS) { frag_generic_body<P>(iters, sel, rec, out, other); } \
    extern "C" __global__ void __launch_bounds__(1024) frag_shared_##P(WFP_PARAMS) { frag_shared_body<P>(iters, sel, rec, out); }           \
    extern "C" __global__ void __launch_bounds__(1024) frag_ldsm_##P(WFP_PARAMS) { frag_ldsm_body<P>(iters, sel, rec, out); }               \
    extern "C" __global__ void __launch_bounds__(1024) frag_chase_##P(WFP_PARAMS) { frag_chase_body<P>(iters, sel, rec, out, other); }
WFP_INSTANCES(4)
WFP_INSTANCES(64)
WFP_INSTANCES(80)
WFP_INSTANCES(128)
WFP_INSTANCES(144)
#define WFP_WMMA_INSTANCE(P) \
    extern "C" __global__ void __launch_bounds__(1024) frag_wmma_ptx_##P(WFP_PARAMS) { frag_wmma_ptx_body<P>(iters, sel, rec, out); }
WFP_WMMA_INSTANCE(64)
WFP_WMMA_INSTANCE(80)
WFP_WMMA_INSTANCE(128)
WFP_WMMA_INSTANCE(144)
extern "C" __global__ void __launch_bounds__(1024) frag_generic_cp2_80(WFP_PARAMS) { frag_cp_body<80, 2, true>(iters, sel, rec, out, other, src, src_mask); }
extern "C" __global__ void __launch_bounds__(1024) frag_generic_cp4_80(WFP_PARAMS) { frag_cp_body<80, 4, true>(iters, sel, rec, out, other, src, src_mask); }
extern "C" __global__ void __launch_bounds__(1024) frag_cponly4_80(WFP_PARAMS) { frag_cp_body<80, 4, false>(iters, sel, rec, out, other, src, src_mask); }
