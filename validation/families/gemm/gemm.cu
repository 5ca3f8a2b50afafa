// The GEMM family measured against tilesim's predictions (fp32).
//
//   C = alpha * A @ B + beta * C, row-major; A is M x K, B is K x N, C is M x N.
//
// One kernel template per variant of tilesim.kernels.gemm_config.GemmConfig:
//   gemm_naive_uncoalesced<BM, BN>                threadIdx.x walks rows of C
//   gemm_naive<BM, BN>                            threadIdx.x walks columns of C
//   gemm_smem<BM, BN, BK, PAD, PIPE, STAGES>
//   gemm_reg1d<BM, BN, BK, TM, PAD, PIPE, STAGES>
//   gemm_reg2d<BM, BN, BK, TM, TN, VEC, PAD, PIPE, STAGES>
//   gemm_warp<BM, BN, BK, WM, WN, WNITER, TM, TN, VEC, PAD, PIPE, STAGES>   (siboehm's kernel 10)
// All take (int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C),
// run on a 1-D block of GemmConfig.threads threads and a grid (ceil(N/BN), ceil(M/BM), 1).
//
// Shared memory (dynamic, exactly GemmConfig.smem_bytes): NBUF A buffers then NBUF B buffers, NBUF =
// 1 (PIPE 0 "none"), 2 (PIPE 1 "regs") or STAGES (PIPE 2 "cp_async"). One A buffer is [BM][BK+PAD],
// or [BK][BM+PAD] (A transposed) when VEC; one B buffer is [BK][BN+PAD].
// VEC: 16-byte global loads (needs K % 4 == 0 and N % 4 == 0 and 16-byte aligned pointers), A stored
// transposed, float4 shared-memory reads and C stores where the layout is 16-byte aligned.
// Ragged edges: every global load is bounds-checked (out of range -> 0) and every store is guarded.
// C is read only when beta != 0.
// Index arithmetic is 32-bit: M*K, K*N and M*N must stay below 2^31 (the Python side checks it).

#ifdef GEMM_HOST_EMULATION
#include "host_emulation.cuh"  // CUDA keywords and builtins for a threaded CPU run (tests only)
#endif

#define GEMM_ARGS int M, int N, int K, float alpha, const float* __restrict__ A, \
                  const float* __restrict__ B, float beta, float* __restrict__ C

namespace gemm {

constexpr int PIPE_NONE = 0;
constexpr int PIPE_REGS = 1;
constexpr int PIPE_CP_ASYNC = 2;

// ----- cp.async helpers -------------------------------------------------------------------------
#ifndef GEMM_HOST_EMULATION
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    unsigned r;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}
// 4-byte copy; src_size 0 writes a zero without reading.
__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                 :: "r"(smem_addr(dst)), "l"(src), "r"(valid ? 4 : 0) : "memory");
}
// 16-byte copy (bypasses L1); src_size 0 writes zeros without reading.
__device__ __forceinline__ void cp_async16(float* dst, const float* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(smem_addr(dst)), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory"); }
#else
// CPU emulation (tests only): copies are queued per thread and performed at the latest moment
// cp.async allows (when wait_group retires their group), with the same zero-fill semantics.
__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool valid) { host_emu::cp_async(dst, src, 1, valid); }
__device__ __forceinline__ void cp_async16(float* dst, const float* src, bool valid) { host_emu::cp_async(dst, src, 4, valid); }
__device__ __forceinline__ void cp_async_commit() { host_emu::commit(); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { host_emu::wait_group(N); }
#endif

// ----- shared-memory layout and tile movement ----------------------------------------------------
template <bool VEC> struct VecT { using type = float; };
template <> struct VecT<true> { using type = float4; };

template <int BM, int BN, int BK, int NT, bool VEC, int PAD, int PIPE, int STAGES>
struct Tiles {
    static constexpr int NBUF = PIPE == PIPE_NONE ? 1 : (PIPE == PIPE_REGS ? 2 : STAGES);
    static constexpr int LDA = VEC ? BM + PAD : BK + PAD;   // row stride of one A buffer
    static constexpr int LDB = BN + PAD;                    // row stride of one B buffer
    static constexpr int A_SIZE = VEC ? BK * (BM + PAD) : BM * (BK + PAD);
    static constexpr int B_SIZE = BK * (BN + PAD);
    static constexpr int SMEM_FLOATS = NBUF * (A_SIZE + B_SIZE);
    static constexpr int W = VEC ? 4 : 1;                   // elements per global load
    static constexpr int A_ITEMS = BM * BK / W;
    static constexpr int B_ITEMS = BK * BN / W;
    static constexpr int A_ITERS = (A_ITEMS + NT - 1) / NT;
    static constexpr int B_ITERS = (B_ITEMS + NT - 1) / NT;
    // float4 shared accesses are legal only where every address is 16-byte aligned.
    static constexpr bool A_SMEM_VEC = VEC && A_SIZE % 4 == 0 && LDA % 4 == 0;
    static constexpr bool B_SMEM_VEC = VEC && (NBUF * A_SIZE) % 4 == 0 && B_SIZE % 4 == 0 && LDB % 4 == 0;
    using V = typename VecT<VEC>::type;

    static_assert(!VEC || (BK % 4 == 0 && BN % 4 == 0), "VEC needs BK and BN multiples of 4");
    static_assert(PIPE != PIPE_CP_ASYNC || (STAGES >= 2 && STAGES <= 4), "cp_async needs 2..4 stages");

    __device__ static float* a_buf(float* smem, int s) { return smem + s * A_SIZE; }
    __device__ static float* b_buf(float* smem, int s) { return smem + NBUF * A_SIZE + s * B_SIZE; }

    // Element (m, k) of an A buffer.
    __device__ static float a_at(const float* As, int m, int k) {
        return VEC ? As[k * LDA + m] : As[m * LDA + k];
    }

    // Global -> registers for the tile at (row0, col0, k0); out-of-range elements read as 0.
    __device__ static void load_regs(const float* A, const float* B, int M, int N, int K,
                                     int row0, int col0, int k0, int tid, V (&ra)[A_ITERS], V (&rb)[B_ITERS]) {
#pragma unroll
        for (int i = 0; i < A_ITERS; ++i) {
            const int c = tid + i * NT;
            if constexpr (VEC) {
                const int r = c / (BK / 4), kk = (c % (BK / 4)) * 4;
                const int gr = row0 + r, gk = k0 + kk;
                ra[i] = (c < A_ITEMS && gr < M && gk < K)
                            ? *reinterpret_cast<const float4*>(A + gr * K + gk)
                            : make_float4(0.f, 0.f, 0.f, 0.f);
            } else {
                const int r = c / BK, kk = c % BK;
                const int gr = row0 + r, gk = k0 + kk;
                ra[i] = (c < A_ITEMS && gr < M && gk < K) ? A[gr * K + gk] : 0.f;
            }
        }
#pragma unroll
        for (int i = 0; i < B_ITERS; ++i) {
            const int c = tid + i * NT;
            if constexpr (VEC) {
                const int r = c / (BN / 4), cc = (c % (BN / 4)) * 4;
                const int gk = k0 + r, gc = col0 + cc;
                rb[i] = (c < B_ITEMS && gk < K && gc < N)
                            ? *reinterpret_cast<const float4*>(B + gk * N + gc)
                            : make_float4(0.f, 0.f, 0.f, 0.f);
            } else {
                const int r = c / BN, cc = c % BN;
                const int gk = k0 + r, gc = col0 + cc;
                rb[i] = (c < B_ITEMS && gk < K && gc < N) ? B[gk * N + gc] : 0.f;
            }
        }
    }

    // Registers -> one shared buffer pair.
    __device__ static void store_regs(float* As, float* Bs, int tid, const V (&ra)[A_ITERS], const V (&rb)[B_ITERS]) {
#pragma unroll
        for (int i = 0; i < A_ITERS; ++i) {
            const int c = tid + i * NT;
            if (A_ITEMS % NT == 0 || c < A_ITEMS) {
                if constexpr (VEC) {
                    const int r = c / (BK / 4), kk = (c % (BK / 4)) * 4;
                    As[(kk + 0) * LDA + r] = ra[i].x;
                    As[(kk + 1) * LDA + r] = ra[i].y;
                    As[(kk + 2) * LDA + r] = ra[i].z;
                    As[(kk + 3) * LDA + r] = ra[i].w;
                } else {
                    const int r = c / BK, kk = c % BK;
                    As[r * LDA + kk] = ra[i];
                }
            }
        }
#pragma unroll
        for (int i = 0; i < B_ITERS; ++i) {
            const int c = tid + i * NT;
            if (B_ITEMS % NT == 0 || c < B_ITEMS) {
                if constexpr (VEC) {
                    const int r = c / (BN / 4), cc = (c % (BN / 4)) * 4;
                    float* d = Bs + r * LDB + cc;
                    if constexpr (B_SMEM_VEC) {
                        *reinterpret_cast<float4*>(d) = rb[i];
                    } else {
                        d[0] = rb[i].x; d[1] = rb[i].y; d[2] = rb[i].z; d[3] = rb[i].w;
                    }
                } else {
                    const int r = c / BN, cc = c % BN;
                    Bs[r * LDB + cc] = rb[i];
                }
            }
        }
    }

    // Global -> shared with cp.async (zero-fill out of range); the caller commits the group.
    __device__ static void load_async(float* As, float* Bs, const float* A, const float* B, int M, int N, int K,
                                      int row0, int col0, int k0, int tid) {
#pragma unroll
        for (int i = 0; i < A_ITERS; ++i) {
            const int c = tid + i * NT;
            if (A_ITEMS % NT == 0 || c < A_ITEMS) {
                if constexpr (VEC) {
                    // A is stored transposed: four 4-byte copies per 16-byte chunk.
                    const int r = c / (BK / 4), kk = (c % (BK / 4)) * 4;
                    const int gr = row0 + r, gk = k0 + kk;
                    const bool ok = gr < M && gk < K;
                    const float* src = ok ? A + gr * K + gk : A;
#pragma unroll
                    for (int j = 0; j < 4; ++j) cp_async4(As + (kk + j) * LDA + r, ok ? src + j : A, ok);
                } else {
                    const int r = c / BK, kk = c % BK;
                    const int gr = row0 + r, gk = k0 + kk;
                    const bool ok = gr < M && gk < K;
                    cp_async4(As + r * LDA + kk, ok ? A + gr * K + gk : A, ok);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < B_ITERS; ++i) {
            const int c = tid + i * NT;
            if (B_ITEMS % NT == 0 || c < B_ITEMS) {
                if constexpr (VEC) {
                    const int r = c / (BN / 4), cc = (c % (BN / 4)) * 4;
                    const int gk = k0 + r, gc = col0 + cc;
                    const bool ok = gk < K && gc < N;
                    const float* src = ok ? B + gk * N + gc : B;
                    float* d = Bs + r * LDB + cc;
                    if constexpr (B_SMEM_VEC) {
                        cp_async16(d, src, ok);
                    } else {
#pragma unroll
                        for (int j = 0; j < 4; ++j) cp_async4(d + j, ok ? src + j : B, ok);
                    }
                } else {
                    const int r = c / BN, cc = c % BN;
                    const int gk = k0 + r, gc = col0 + cc;
                    const bool ok = gk < K && gc < N;
                    cp_async4(Bs + r * LDB + cc, ok ? B + gk * N + gc : B, ok);
                }
            }
        }
    }
};

// ----- schedule trace (compiled in only with -DGEMM_TRACE; validation/schedule_trace.py) ---------
// Thread 0 of each block writes, at gemm_trace + block * (GEMM_TRACE_MARKS + 2): its SM id, then
// %globaltimer (ns) when k-tiles 0, nk/8, 2nk/8, ... start and when the k-loop ends.
#define GEMM_TRACE_MARKS 8
#ifdef GEMM_TRACE
extern "C" { __device__ unsigned long long* gemm_trace; }  // unmangled: set from Python
__device__ __forceinline__ void trace_stamp(int slot) {
    if (threadIdx.x == 0) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        unsigned long long* p = gemm_trace + (size_t)(blockIdx.y * gridDim.x + blockIdx.x) * (GEMM_TRACE_MARKS + 2);
        if (slot == 0) {
            unsigned s;
            asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
            p[0] = s;
        }
        p[1 + slot] = t;
    }
}
__device__ __forceinline__ void trace_step(int kt, int nk) {
    const int j = kt * GEMM_TRACE_MARKS / nk;
    if (kt == 0 || j != (kt - 1) * GEMM_TRACE_MARKS / nk) trace_stamp(j);
}
#else
__device__ __forceinline__ void trace_stamp(int) {}
__device__ __forceinline__ void trace_step(int, int) {}
#endif

// The k-loop shared by all staged variants. Compute is a struct with
//   __device__ void step(const float* As, const float* Bs)   (one BK-deep tile)
// holding its accumulators; the caller writes C afterwards.
template <class T, int BM, int BN, int BK, int NT, int PIPE, int STAGES, class Compute>
__device__ __forceinline__ void mainloop(Compute& comp, float* smem, const float* A, const float* B,
                                         int M, int N, int K, int row0, int col0) {
    const int tid = threadIdx.x;
    const int nk = (K + BK - 1) / BK;
    if constexpr (PIPE == PIPE_CP_ASYNC) {
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < nk) T::load_async(T::a_buf(smem, s), T::b_buf(smem, s), A, B, M, N, K, row0, col0, s * BK, tid);
            cp_async_commit();
        }
        int read_stage = 0, write_stage = STAGES - 1;
        for (int kt = 0; kt < nk; ++kt) {
            trace_step(kt, nk);
            cp_async_wait<STAGES - 2>();   // tile kt has landed (this thread's copies)
            __syncthreads();               // ... everyone's, and everyone finished tile kt-1
            const int nt = kt + STAGES - 1;
            if (nt < nk)
                T::load_async(T::a_buf(smem, write_stage), T::b_buf(smem, write_stage), A, B, M, N, K,
                              row0, col0, nt * BK, tid);
            cp_async_commit();
            comp.step(T::a_buf(smem, read_stage), T::b_buf(smem, read_stage));
            read_stage = read_stage + 1 == STAGES ? 0 : read_stage + 1;
            write_stage = write_stage + 1 == STAGES ? 0 : write_stage + 1;
        }
        cp_async_wait<0>();
    } else if constexpr (PIPE == PIPE_REGS) {
        typename T::V ra[T::A_ITERS], rb[T::B_ITERS];
        T::load_regs(A, B, M, N, K, row0, col0, 0, tid, ra, rb);
        T::store_regs(T::a_buf(smem, 0), T::b_buf(smem, 0), tid, ra, rb);
        __syncthreads();
        for (int kt = 0; kt < nk; ++kt) {
            trace_step(kt, nk);
            const int cur = kt & 1;
            const bool more = kt + 1 < nk;
            if (more) T::load_regs(A, B, M, N, K, row0, col0, (kt + 1) * BK, tid, ra, rb);
            comp.step(T::a_buf(smem, cur), T::b_buf(smem, cur));
            if (more) T::store_regs(T::a_buf(smem, cur ^ 1), T::b_buf(smem, cur ^ 1), tid, ra, rb);
            __syncthreads();
        }
    } else {
        typename T::V ra[T::A_ITERS], rb[T::B_ITERS];
        for (int kt = 0; kt < nk; ++kt) {
            trace_step(kt, nk);
            T::load_regs(A, B, M, N, K, row0, col0, kt * BK, tid, ra, rb);
            T::store_regs(T::a_buf(smem, 0), T::b_buf(smem, 0), tid, ra, rb);
            __syncthreads();
            comp.step(T::a_buf(smem, 0), T::b_buf(smem, 0));
            __syncthreads();
        }
    }
    trace_stamp(GEMM_TRACE_MARKS);
}

__device__ __forceinline__ void store_c(float* C, int M, int N, int row, int col, float v, float alpha, float beta) {
    if (row < M && col < N) {
        float* p = C + row * N + col;
        *p = beta == 0.f ? alpha * v : alpha * v + beta * *p;
    }
}

// Writes a row segment of 4 outputs starting at a multiple-of-4 column (N % 4 == 0: all or none in range).
__device__ __forceinline__ void store_c4(float* C, int M, int N, int row, int col, float4 v, float alpha, float beta) {
    if (row < M && col < N) {
        float4* p = reinterpret_cast<float4*>(C + row * N + col);
        float4 o;
        if (beta == 0.f) {
            o = make_float4(alpha * v.x, alpha * v.y, alpha * v.z, alpha * v.w);
        } else {
            const float4 c = *p;
            o = make_float4(alpha * v.x + beta * c.x, alpha * v.y + beta * c.y,
                            alpha * v.z + beta * c.z, alpha * v.w + beta * c.w);
        }
        *p = o;
    }
}

#ifdef GEMM_HOST_EMULATION
using ::dyn_smem4;
#else
extern __shared__ float4 dyn_smem4[];
#endif

// ----- per-variant compute ----------------------------------------------------------------------------
template <class T, int BK, int BN>
struct SmemCompute {  // one output per thread: (r, c) = (tid / BN, tid % BN)
    int r, c;
    float acc = 0.f;
    __device__ void step(const float* As, const float* Bs) {
#pragma unroll
        for (int k = 0; k < BK; ++k) acc += T::a_at(As, r, k) * Bs[k * T::LDB + c];
    }
};

template <class T, int BK, int BN, int TM>
struct Reg1dCompute {  // a column of TM outputs: rows rg*TM + i, column c
    int rg, c;
    float acc[TM] = {};
    __device__ void step(const float* As, const float* Bs) {
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float b = Bs[k * T::LDB + c];
#pragma unroll
            for (int i = 0; i < TM; ++i) acc[i] += T::a_at(As, rg * TM + i, k) * b;
        }
    }
};

// Loads n contiguous floats from shared memory (float4 when allowed and n % 4 == 0).
template <int NREG, bool VEC4>
__device__ __forceinline__ void lds_row(float (&dst)[NREG], int off, const float* p) {
    if constexpr (VEC4 && NREG % 4 == 0) {
#pragma unroll
        for (int i = 0; i < NREG; i += 4) {
            const float4 v = *reinterpret_cast<const float4*>(p + i);
            dst[off + i] = v.x; dst[off + i + 1] = v.y; dst[off + i + 2] = v.z; dst[off + i + 3] = v.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < NREG; ++i) dst[off + i] = p[i];
    }
}

template <class T, int BK, int TM, int TN>
struct Reg2dCompute {  // TM x TN outputs: rows tr*TM + i, columns tc*TN + j
    int tr, tc;
    float acc[TM][TN] = {};
    __device__ void step(const float* As, const float* Bs) {
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
            if constexpr (T::A_SMEM_VEC && TM % 4 == 0) {
                const float* pa = As + k * T::LDA + tr * TM;
#pragma unroll
                for (int i = 0; i < TM; i += 4) {
                    const float4 v = *reinterpret_cast<const float4*>(pa + i);
                    a[i] = v.x; a[i + 1] = v.y; a[i + 2] = v.z; a[i + 3] = v.w;
                }
            } else {
#pragma unroll
                for (int i = 0; i < TM; ++i) a[i] = T::a_at(As, tr * TM + i, k);
            }
            const float* pb = Bs + k * T::LDB + tc * TN;
            if constexpr (T::B_SMEM_VEC && TN % 4 == 0) {
#pragma unroll
                for (int j = 0; j < TN; j += 4) {
                    const float4 v = *reinterpret_cast<const float4*>(pb + j);
                    b[j] = v.x; b[j + 1] = v.y; b[j + 2] = v.z; b[j + 3] = v.w;
                }
            } else {
#pragma unroll
                for (int j = 0; j < TN; ++j) b[j] = pb[j];
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
    }
};

template <class T, int BK, int WM, int WN, int WMITER, int WNITER, int TM, int TN>
struct WarpCompute {
    static constexpr int WSUBM = WM / WMITER, WSUBN = WN / WNITER;
    int m_base, n_base;  // first A row / B column of this thread inside the block tile
    float acc[WMITER * TM][WNITER * TN] = {};
    __device__ void step(const float* As, const float* Bs) {
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[WMITER * TM], b[WNITER * TN];
#pragma unroll
            for (int wi = 0; wi < WMITER; ++wi) {
                const int m = m_base + wi * WSUBM;
                if constexpr (T::A_SMEM_VEC && TM % 4 == 0) {
                    const float* pa = As + k * T::LDA + m;
#pragma unroll
                    for (int i = 0; i < TM; i += 4) {
                        const float4 v = *reinterpret_cast<const float4*>(pa + i);
                        a[wi * TM + i] = v.x; a[wi * TM + i + 1] = v.y;
                        a[wi * TM + i + 2] = v.z; a[wi * TM + i + 3] = v.w;
                    }
                } else {
#pragma unroll
                    for (int i = 0; i < TM; ++i) a[wi * TM + i] = T::a_at(As, m + i, k);
                }
            }
#pragma unroll
            for (int wj = 0; wj < WNITER; ++wj) {
                const float* pb = Bs + k * T::LDB + n_base + wj * WSUBN;
                if constexpr (T::B_SMEM_VEC && TN % 4 == 0) {
#pragma unroll
                    for (int j = 0; j < TN; j += 4) {
                        const float4 v = *reinterpret_cast<const float4*>(pb + j);
                        b[wj * TN + j] = v.x; b[wj * TN + j + 1] = v.y;
                        b[wj * TN + j + 2] = v.z; b[wj * TN + j + 3] = v.w;
                    }
                } else {
#pragma unroll
                    for (int j = 0; j < TN; ++j) b[wj * TN + j] = pb[j];
                }
            }
#pragma unroll
            for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
                for (int j = 0; j < WNITER * TN; ++j) acc[i][j] += a[i] * b[j];
        }
    }
};

}  // namespace gemm

// ----- kernels ---------------------------------------------------------------------------------------

// One output per thread; consecutive threads take consecutive ROWS of C (uncoalesced A/C rows).
template <int BM, int BN>
__global__ void __launch_bounds__(BM * BN) gemm_naive_uncoalesced(GEMM_ARGS) {
    const int row = blockIdx.y * BM + threadIdx.x % BM;
    const int col = blockIdx.x * BN + threadIdx.x / BM;
    if (row < M && col < N) {
        float acc = 0.f;
        for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
        gemm::store_c(C, M, N, row, col, acc, alpha, beta);
    }
}

// One output per thread; consecutive threads take consecutive COLUMNS of C (coalesced B/C).
template <int BM, int BN>
__global__ void __launch_bounds__(BM * BN) gemm_naive(GEMM_ARGS) {
    const int row = blockIdx.y * BM + threadIdx.x / BN;
    const int col = blockIdx.x * BN + threadIdx.x % BN;
    if (row < M && col < N) {
        float acc = 0.f;
        for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
        gemm::store_c(C, M, N, row, col, acc, alpha, beta);
    }
}

template <int BM, int BN, int BK, int PAD, int PIPE, int STAGES>
__global__ void __launch_bounds__(BM * BN) gemm_smem(GEMM_ARGS) {
    constexpr int NT = BM * BN;
    using T = gemm::Tiles<BM, BN, BK, NT, false, PAD, PIPE, STAGES>;
    float* smem = reinterpret_cast<float*>(gemm::dyn_smem4);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    gemm::SmemCompute<T, BK, BN> comp;
    comp.r = threadIdx.x / BN;
    comp.c = threadIdx.x % BN;
    gemm::mainloop<T, BM, BN, BK, NT, PIPE, STAGES>(comp, smem, A, B, M, N, K, row0, col0);
    gemm::store_c(C, M, N, row0 + comp.r, col0 + comp.c, comp.acc, alpha, beta);
}

template <int BM, int BN, int BK, int TM, int PAD, int PIPE, int STAGES>
__global__ void __launch_bounds__((BM / TM) * BN) gemm_reg1d(GEMM_ARGS) {
    constexpr int NT = (BM / TM) * BN;
    using T = gemm::Tiles<BM, BN, BK, NT, false, PAD, PIPE, STAGES>;
    float* smem = reinterpret_cast<float*>(gemm::dyn_smem4);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    gemm::Reg1dCompute<T, BK, BN, TM> comp;
    comp.rg = threadIdx.x / BN;
    comp.c = threadIdx.x % BN;
    gemm::mainloop<T, BM, BN, BK, NT, PIPE, STAGES>(comp, smem, A, B, M, N, K, row0, col0);
#pragma unroll
    for (int i = 0; i < TM; ++i)
        gemm::store_c(C, M, N, row0 + comp.rg * TM + i, col0 + comp.c, comp.acc[i], alpha, beta);
}

template <int BM, int BN, int BK, int TM, int TN, bool VEC, int PAD, int PIPE, int STAGES>
__global__ void __launch_bounds__((BM / TM) * (BN / TN)) gemm_reg2d(GEMM_ARGS) {
    constexpr int NT = (BM / TM) * (BN / TN);
    using T = gemm::Tiles<BM, BN, BK, NT, VEC, PAD, PIPE, STAGES>;
    float* smem = reinterpret_cast<float*>(gemm::dyn_smem4);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    gemm::Reg2dCompute<T, BK, TM, TN> comp;
    comp.tr = threadIdx.x / (BN / TN);
    comp.tc = threadIdx.x % (BN / TN);
    gemm::mainloop<T, BM, BN, BK, NT, PIPE, STAGES>(comp, smem, A, B, M, N, K, row0, col0);
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + comp.tr * TM + i;
        if constexpr (VEC && TN % 4 == 0) {
#pragma unroll
            for (int j = 0; j < TN; j += 4)
                gemm::store_c4(C, M, N, row, col0 + comp.tc * TN + j,
                               make_float4(comp.acc[i][j], comp.acc[i][j + 1], comp.acc[i][j + 2], comp.acc[i][j + 3]),
                               alpha, beta);
        } else {
#pragma unroll
            for (int j = 0; j < TN; ++j) gemm::store_c(C, M, N, row, col0 + comp.tc * TN + j, comp.acc[i][j], alpha, beta);
        }
    }
}

// siboehm's "kernel 10": warps own WM x WN of the block tile, iterated as WMITER x WNITER sub-tiles of
// (WM/WMITER) x (WN/WNITER); inside a sub-tile each lane owns TM x TN outputs.
template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN, bool VEC, int PAD, int PIPE, int STAGES>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32) gemm_warp(GEMM_ARGS) {
    constexpr int NT = (BM / WM) * (BN / WN) * 32;
    constexpr int WMITER = (WM * WN) / (32 * TM * TN * WNITER);
    constexpr int WSUBM = WM / WMITER, WSUBN = WN / WNITER;
    constexpr int TCOLS = WSUBN / TN;  // lanes along N inside a sub-tile
    static_assert(WMITER >= 1 && (WSUBM / TM) * (WSUBN / TN) == 32, "a warp sub-tile must hold 32 lanes");
    using T = gemm::Tiles<BM, BN, BK, NT, VEC, PAD, PIPE, STAGES>;
    float* smem = reinterpret_cast<float*>(gemm::dyn_smem4);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wr = warp / (BN / WN), wc = warp % (BN / WN);
    const int tr = lane / TCOLS, tc = lane % TCOLS;
    gemm::WarpCompute<T, BK, WM, WN, WMITER, WNITER, TM, TN> comp;
    comp.m_base = wr * WM + tr * TM;
    comp.n_base = wc * WN + tc * TN;
    gemm::mainloop<T, BM, BN, BK, NT, PIPE, STAGES>(comp, smem, A, B, M, N, K, row0, col0);
#pragma unroll
    for (int wi = 0; wi < WMITER; ++wi)
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int row = row0 + comp.m_base + wi * WSUBM + i;
#pragma unroll
            for (int wj = 0; wj < WNITER; ++wj) {
                const int col = col0 + comp.n_base + wj * WSUBN;
                if constexpr (VEC && TN % 4 == 0) {
#pragma unroll
                    for (int j = 0; j < TN; j += 4) {
                        const float* a = &comp.acc[wi * TM + i][wj * TN + j];
                        gemm::store_c4(C, M, N, row, col + j, make_float4(a[0], a[1], a[2], a[3]), alpha, beta);
                    }
                } else {
#pragma unroll
                    for (int j = 0; j < TN; ++j)
                        gemm::store_c(C, M, N, row, col + j, comp.acc[wi * TM + i][wj * TN + j], alpha, beta);
                }
            }
        }
}
