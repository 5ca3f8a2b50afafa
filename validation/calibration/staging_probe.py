"""What staging a tile into shared memory costs the shared-memory pipe (a GPU microbenchmark).

Blocks of 128 threads copy one 8 KiB tile (an L1-resident source) into shared memory again and
again, by one of these patterns (the ones the GEMM kernels use, and controls):

===================  ================================================================================
``a_t_async``        cp.async 4 B, 128x16 tile of a row-major matrix stored transposed (GEMM's A
                     with ``vectorize`` and cp.async): lanes cover 8 rows x 4 chunks, stores 4-way
                     bank-conflicted
``a_lin_async``      the same global reads, stores to consecutive words (no bank conflict)
``contig_async4``    cp.async 4 B, lanes read and store consecutive words (one line per warp)
``b_async16``        cp.async 16 B, consecutive 16-byte chunks (GEMM's B with cp.async)
``a_t_sts``          the register-staged version of ``a_t_async``: 16-byte loads, four 4-byte
                     transposed shared stores
``*_l2``             the same with a source that misses L1 and hits L2 (a tile of a 32 MiB buffer)
``lds128_*``         16-byte shared loads of register fragments: lane l reads chunk f(l) of a row
                     (``LDS_CHUNK``), as the GEMMs' fragment loads do; checks the wavefront rule of
                     ``tilesim.cost.access.smem_wavefronts``
===================  ================================================================================

Nsight Compute counts the shared-memory wavefronts and bank conflicts of each (``--clock-control
none``); dividing by the copy instructions executed gives wavefronts per instruction, the number the
simulator's lowering must reproduce for cp.async. ``python -m validation.calibration.staging_probe --out DIR``
writes ``DIR/staging.json`` (needs a GPU and ``ncu``).
"""

from __future__ import annotations

import sys

SRC = r"""
#define K_STRIDE 1024
// the same instructions as validation/families/gemm/gemm.cu's copies (with a source size)
__device__ __forceinline__ void cp4(float* dst, const float* src) {
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(d), "l"(src), "r"(4) : "memory");
}
__device__ __forceinline__ void cp16(float* dst, const float* src) {
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(d), "l"(src), "r"(16) : "memory");
}
__device__ __forceinline__ void wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

template <int P>
__device__ void stage(float* s, const float* __restrict__ A, int tid) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int c = tid + i * 128;           // 512 chunks of 16 bytes
        const int r = c / 4, kk = (c % 4) * 4;  // GEMM A: 128 rows x 16 columns, 4 chunks a row
        const float* src = A + r * K_STRIDE + kk;
        if (P == 0 || P == 1) {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                if (P == 0) cp4(s + (kk + j) * 128 + r, src + j);
                else cp4(s + j * 512 + c, src + j);
            }
        } else if (P == 2) {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int e = j * 512 + c;     // consecutive lanes, consecutive words
                cp4(s + e, A + (e / 128) * K_STRIDE + (e % 128));
            }
        } else if (P == 3) {
            cp16(s + c * 4, A + (c / 32) * K_STRIDE + (c % 32) * 4);
        } else {
            const float4 v = *reinterpret_cast<const float4*>(src);
            s[(kk + 0) * 128 + r] = v.x; s[(kk + 1) * 128 + r] = v.y;
            s[(kk + 2) * 128 + r] = v.z; s[(kk + 3) * 128 + r] = v.w;
        }
    }
}

template <int P, bool L2>
__device__ void run(const float* __restrict__ A, int iters, float* out) {
    __shared__ __align__(16) float s[2048];
    const int tid = threadIdx.x;
    for (int it = 0; it < iters; ++it) {
        // L1-resident: the same 8 KiB tile every time; L2: a tile of a 32 MiB buffer that moves on
        // each time (misses L1, hits L2)
        const float* src = L2 ? A + ((blockIdx.x * 7 + it) % 64) * 128 * K_STRIDE + ((blockIdx.x + it) % 64) * 16
                              : A + (blockIdx.x % 8) * 16;
        stage<P>(s, src, tid);
        if (P != 4) wait_all();
        __syncthreads();
    }
    if (s[(tid * 7) % 2048] == -1.f) out[blockIdx.x] = 1.f;
}

// 16-byte shared loads (LDS.128) of register fragments: lane l reads 16-byte chunk f(l) of a row,
// a different row at each step (nothing loop-invariant), every value summed and written out
__device__ __forceinline__ int chunk_of(int f, int l) {
    switch (f) {
        case 0: return l / 16;  case 1: return l / 8;  case 2: return l / 4;  case 3: return l / 2;
        case 4: return l % 16;  case 5: return l % 8;  case 6: return l % 4;
        case 7: return (l % 4) * 2 + l / 16;  default: return l;
    }
}
template <int F>
__device__ void lds(int iters, float* out) {
    __shared__ __align__(16) float4 s4[16 * 32];
    for (int i = threadIdx.x; i < 16 * 32; i += blockDim.x) s4[i] = make_float4(i, i + 1, i + 2, i + 3);
    __syncthreads();
    const int c = chunk_of(F, threadIdx.x % 32);
    float acc = 0.f;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int k = 0; k < 16; ++k) {
            const float4 v = s4[((it + k) & 15) * 32 + c];
            acc += v.x * v.y + v.z * v.w;
        }
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
#define LDS_KERNEL(name, F) extern "C" __global__ void __launch_bounds__(128) \
    staging_##name(const float* A, int it, float* o) { lds<F>(it, o); }
LDS_KERNEL(lds128_bcast16, 0)
LDS_KERNEL(lds128_bcast8, 1)
LDS_KERNEL(lds128_bcast4, 2)
LDS_KERNEL(lds128_pairs, 3)
LDS_KERNEL(lds128_mod16, 4)
LDS_KERNEL(lds128_mod8, 5)
LDS_KERNEL(lds128_mod4, 6)
LDS_KERNEL(lds128_mixed, 7)
LDS_KERNEL(lds128_lin, 8)

#define KERNEL(name, P, L2) extern "C" __global__ void __launch_bounds__(128) \
    staging_##name(const float* A, int it, float* o) { run<P, L2>(A, it, o); }
KERNEL(a_t_async, 0, false)
KERNEL(a_lin_async, 1, false)
KERNEL(contig_async4, 2, false)
KERNEL(b_async16, 3, false)
KERNEL(a_t_sts, 4, false)
KERNEL(a_t_async_l2, 0, true)
KERNEL(a_lin_async_l2, 1, true)
KERNEL(b_async16_l2, 3, true)
KERNEL(a_t_sts_l2, 4, true)
"""

#: pattern -> (copy instructions per warp and iteration, what they are)
PATTERNS = {
    "a_t_async": (16, "LDGSTS.32, transposed destination"),
    "a_lin_async": (16, "LDGSTS.32, linear destination"),
    "contig_async4": (16, "LDGSTS.32, consecutive words"),
    "b_async16": (4, "LDGSTS.128, consecutive chunks"),
    "a_t_sts": (16, "STS.32 (after LDG.128), transposed destination"),
    "a_t_async_l2": (16, "LDGSTS.32, transposed destination, source in L2 (L1 misses)"),
    "a_lin_async_l2": (16, "LDGSTS.32, linear destination, source in L2 (L1 misses)"),
    "b_async16_l2": (4, "LDGSTS.128, consecutive chunks, source in L2"),
    "a_t_sts_l2": (16, "STS.32 (after LDG.128), transposed destination, source in L2"),
    # LDS.128 of register fragments: lane l reads 16-byte chunk f(l) (LDS_CHUNK gives f)
    **{f"lds128_{n}": (16, f"LDS.128, lane l reads chunk {f}") for n, f in (
        ("bcast16", "l/16"), ("bcast8", "l/8"), ("bcast4", "l/4"), ("pairs", "l/2"), ("mod16", "l%16"),
        ("mod8", "l%8"), ("mod4", "l%4"), ("mixed", "(l%4)*2 + l/16"), ("lin", "l"))},
}
#: the chunk each lane reads in the lds128 patterns (as in SRC's chunk_of)
LDS_CHUNK = {"bcast16": lambda lane: lane // 16, "bcast8": lambda lane: lane // 8, "bcast4": lambda lane: lane // 4,
             "pairs": lambda lane: lane // 2, "mod16": lambda lane: lane % 16, "mod8": lambda lane: lane % 8, "mod4": lambda lane: lane % 4,
             "mixed": lambda lane: (lane % 4) * 2 + lane // 16, "lin": lambda lane: lane}
#: the GEMM-A pattern, per warp instruction: 8 rows x 64 aligned bytes = 8 lines; its transposed
#: stores are 4-way bank-conflicted = 3 wavefronts beyond the ideal one (tests/test_validation_harness.py
#: recomputes both with tilesim.cost.access from the probe's addresses)
A_LINES_PER_COPY = 8
A_T_EXTRA_STORE_WAVEFRONTS = 3
BLOCKS_PER_SM = 8
ITERS = 200
METRICS = ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
           "smsp__inst_executed.sum", "gpu__time_duration.sum", "sm__cycles_elapsed.avg")


def target() -> int:
    """Run every pattern once between cudaProfilerStart/Stop (what ncu profiles)."""
    import cupy as cp  # noqa: PLC0415

    mod = cp.RawModule(code=SRC, options=("-std=c++17",))
    sms = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    a = cp.random.rand(64 * 128 * 1024, dtype=cp.float32) + 0.5  # 32 MiB
    out = cp.zeros(sms * BLOCKS_PER_SM * 128, dtype=cp.float32)
    for name in PATTERNS:  # compile and warm outside the profiled range
        mod.get_function(f"staging_{name}")((sms * BLOCKS_PER_SM,), (128,), (a, cp.int32(1), out))
    cp.cuda.runtime.deviceSynchronize()
    cp.cuda.runtime.profilerStart()
    for name in PATTERNS:
        mod.get_function(f"staging_{name}")((sms * BLOCKS_PER_SM,), (128,), (a, cp.int32(ITERS), out))
    cp.cuda.runtime.deviceSynchronize()
    cp.cuda.runtime.profilerStop()
    return 0


def measure(ncu: str = "ncu") -> dict:
    """Profile the patterns with ncu; wavefronts and conflicts per copy instruction."""
    from validation.harness.probe import probe_rows  # noqa: PLC0415

    rows = probe_rows("validation.calibration.staging_probe", METRICS, ncu=ncu, timeout_s=600)
    import cupy as cp  # noqa: PLC0415

    sms = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    warps = sms * BLOCKS_PER_SM * 4
    res = {}
    for r in rows:
        name = r["kernel_name"].removeprefix("staging_")
        if name not in PATTERNS:
            continue
        per_warp_iter, what = PATTERNS[name]
        copies = warps * ITERS * per_warp_iter
        v = {m: r[m] for m in METRICS}
        wf = v["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"]
        res[name] = {"instruction": what, "copy_instructions": copies, **v,
                     "wavefronts_per_copy": wf / copies,
                     "conflicts_per_copy": v["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"] / copies,
                     "wavefronts_per_clk_per_sm": wf / sms / v["sm__cycles_elapsed.avg"]}
    return res


def profile_fields(patterns: dict) -> dict:
    """The HardwareSpec fields the probe calibrates (sources L2-resident, as in a GEMM)."""
    lin = patterns["a_lin_async_l2"]["wavefronts_per_copy"]
    t = patterns["a_t_async_l2"]["wavefronts_per_copy"]
    b16 = patterns["b_async16_l2"]["wavefronts_per_copy"]

    def f(value, what):
        return {"value": value, "benchmark": f"staging_probe, Nsight Compute wavefronts: {what}", "unit": "wavefronts",
                "n": 1, "p10": value, "p90": value}

    return {"ldgsts_wavefronts_per_line": f(lin / A_LINES_PER_COPY, "a_lin_async_l2 / 8 lines"),
            "ldgsts_wavefronts_per_conflict": f((t - lin) / A_T_EXTRA_STORE_WAVEFRONTS,
                                                "(a_t_async_l2 - a_lin_async_l2) / 3 extra store wavefronts"),
            "ldgsts_bypass_wavefronts": f(b16, "b_async16_l2 per instruction")}


def _show(res: dict) -> None:
    for k, v in res["patterns"].items():
        print(f"{k:14s} wavefronts/copy {v['wavefronts_per_copy']:.2f} conflicts/copy {v['conflicts_per_copy']:.2f}"
              f" wavefronts/clk/SM {v['wavefronts_per_clk_per_sm']:.2f}")


def main(argv=None) -> int:
    from validation.harness.probe import probe_main  # noqa: PLC0415

    return probe_main("validation.calibration.staging_probe", __doc__, argv, target, lambda: {"patterns": measure()},
                      "staging.json", {"iters": ITERS, "blocks_per_sm": BLOCKS_PER_SM}, _show)


if __name__ == "__main__":
    sys.exit(main())
