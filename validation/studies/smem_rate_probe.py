"""How fast does the shared-memory pipe go for each kind of access? (a GPU microbenchmark, ncu)

``smem_read`` in ``validation/calibrate.py`` measures 16-byte conflict-free loads (about 126 B, one
wavefront, per clock and SM); 16-byte loads are left to it (a loop of them written here did
not execute its loads, for a reason not found). Kernels also issue 4- and 8-byte loads, broadcasts, and stores, and mix
them with FMAs and barriers. Here 16 warps per SM (4 blocks of 128 threads) run a loop of one kind
of shared access. Each warp does 8 independent accesses per iteration; the loaded values are
summed, so the loads cannot be dropped. Nsight Compute counts the shared-memory wavefronts and
instructions, and the SM cycles:

================  ==================================================================================
``lds32``         4-byte loads, consecutive words (1 wavefront each)
``lds32_bcast``   4-byte loads, every lane the same word (1 wavefront)
``lds64``         8-byte loads, consecutive (2 wavefronts)
``sts32``         4-byte stores, consecutive words (1 wavefront)
``sts128``        16-byte stores, consecutive (4 wavefronts)
``gemm_smem``     the tiled GEMM's inner loop: a broadcast load of A, a load of B, one FFMA
``lds32_w32``     ``lds32`` with 32 warps per SM
``lds32_w8``      ``lds32`` with 8 warps per SM
``lds32_bcast_w32`` ``lds32_bcast`` with 32 warps per SM
``lds32_pair``    a broadcast load and a consecutive load, multiplied and added (FMUL + FADD)
================  ==================================================================================

Addresses move with the loop counter, so that no load is loop-invariant (a compiler may hoist those).

``python -m validation.studies.smem_rate_probe --out DIR`` writes ``DIR/smem_rate.json``: per pattern the
wavefronts and shared instructions per clock and SM.
"""

from __future__ import annotations

import sys

SRC = r"""
// Loads through a volatile pointer (never hoisted or merged); one base index per iteration and
// immediate offsets, so that the loop is about one instruction per access besides the access.
template <int P>
__device__ void run(float* s, int iters, float* out) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    for (int i = tid; i < 2048; i += blockDim.x) s[i] = i * 1e-3f;
    __syncthreads();
    volatile float* vs = s;
    const unsigned base = (unsigned)__cvta_generic_to_shared(s);  // vector accesses: PTX, same addresses
    float acc = 0.f;
    for (int it = 0; it < iters; ++it) {
        asm volatile("" ::: "memory");  // no load is hoisted out of the loop
        const int r = it & 7;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            if (P == 0) acc += vs[r * 256 + i * 32 + lane];                       // lds32
            if (P == 1) acc += vs[r * 256 + i * 32 + warp];                       // lds32, broadcast
            if (P == 2) {
                float x, y;
                asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(x), "=f"(y)
                             : "r"(base + ((r & 3) * 256 + i * 32 + lane) * 8));
                acc += x + y;
            }
            if (P == 4) vs[r * 256 + i * 32 + lane] = acc + i;                    // sts32
            if (P == 5)
                asm volatile("st.shared.v4.f32 [%0], {%1, %1, %1, %1};"
                             :: "r"(base + ((r & 1) * 256 + i * 32 + lane) * 16), "f"(acc + i));
            if (P == 6) acc = fmaf(vs[r * 128 + i * 16 + warp], vs[1024 + (r & 3) * 128 + i * 16 + lane], acc);
            if (P == 7) acc += vs[r * 128 + i * 16 + warp] * vs[1024 + (r & 3) * 128 + i * 16 + lane];
        }
    }
    out[blockIdx.x * blockDim.x + tid] = acc;
}

extern "C" __global__ void smem_rate(int pattern, int iters, float* out) {
    __shared__ __align__(16) float s[2048];
    switch (pattern) {
        case 0: run<0>(s, iters, out); break;
        case 1: run<1>(s, iters, out); break;
        case 2: run<2>(s, iters, out); break;
        case 4: run<4>(s, iters, out); break;
        case 5: run<5>(s, iters, out); break;
        case 6: run<6>(s, iters, out); break;
        default: run<7>(s, iters, out); break;
    }
}
"""
THREADS = 128
ITERS = 4000
# name -> (pattern code, blocks per SM)
PATTERNS = {"lds32": (0, 4), "lds32_bcast": (1, 4), "lds64": (2, 4), "sts32": (4, 4),
            "sts128": (5, 4), "gemm_smem": (6, 4), "lds32_w32": (0, 8), "lds32_w8": (0, 2),
            "lds32_pair": (7, 4), "lds32_bcast_w32": (1, 8)}
WAVEFRONTS_PER_ACCESS = {"lds32": 1, "lds32_bcast": 1, "lds64": 2, "sts32": 1, "sts128": 4,
                         "gemm_smem": 1, "lds32_w32": 1, "lds32_w8": 1,
                         "lds32_pair": 1, "lds32_bcast_w32": 1}


def _target() -> int:
    import cupy as cp  # noqa: PLC0415

    sms = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    k = cp.RawModule(code=SRC).get_function("smem_rate")
    out = cp.zeros(sms * 8 * THREADS, dtype=cp.float32)
    k((sms,), (THREADS,), (cp.int32(0), cp.int32(10), out))
    cp.cuda.runtime.deviceSynchronize()
    cp.cuda.runtime.profilerStart()
    for code, per_sm in PATTERNS.values():
        k((sms * per_sm,), (THREADS,), (cp.int32(code), cp.int32(ITERS), out))
    cp.cuda.runtime.deviceSynchronize()
    cp.cuda.runtime.profilerStop()
    return 0


METRICS = ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", "smsp__inst_executed_op_shared_ld.sum",
           "smsp__inst_executed_op_shared_st.sum", "sm__cycles_elapsed.avg", "smsp__inst_executed.sum",
           "gpu__time_duration.sum")


def measure(ncu: str = "ncu") -> dict:
    import cupy as cp  # noqa: PLC0415

    from validation.harness.probe import probe_rows  # noqa: PLC0415

    sms = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    rows = probe_rows("validation.studies.smem_rate_probe", METRICS, cache_control="all", ncu=ncu)
    return {"sms": sms, "patterns": rates(rows, sms)}


def rates(rows: list[dict], sms: int) -> dict:
    """Per pattern: wavefronts, shared instructions and all instructions per clock and SM (pure)."""
    out = {}
    for (name, (_, per_sm)), r in zip(PATTERNS.items(), rows, strict=False):
        if r["sm__cycles_elapsed.avg"] is None:
            raise RuntimeError(f"smem_rate_probe: pattern {name} was not profiled (did its launch fail?)")
        cyc = r["sm__cycles_elapsed.avg"] * sms
        sh = (r["smsp__inst_executed_op_shared_ld.sum"] or 0) + (r["smsp__inst_executed_op_shared_st.sum"] or 0)
        out[name] = {"warps_per_sm": per_sm * THREADS // 32,
                     "wavefronts": r["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"],
                     "shared_instructions": sh,
                     "wavefronts_per_clk_per_sm": r["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"] / cyc,
                     "shared_instr_per_clk_per_sm": sh / cyc,
                     "instr_per_clk_per_sm": r["smsp__inst_executed.sum"] / cyc,
                     "time_s": r["gpu__time_duration.sum"] * 1e-9}
    return out


def _show(res: dict) -> None:
    for name, p in res["patterns"].items():
        print(f"{name:12s} {p['warps_per_sm']:2d} warps/SM: {p['wavefronts_per_clk_per_sm']:.3f} wavefronts/clk, "
              f"{p['shared_instr_per_clk_per_sm']:.3f} shared instr/clk, {p['instr_per_clk_per_sm']:.3f} instr/clk "
              f"(wavefronts per shared instr {p['wavefronts'] / max(p['shared_instructions'], 1):.2f})")


def main(argv=None) -> int:
    from validation.harness.probe import probe_main  # noqa: PLC0415

    return probe_main("validation.studies.smem_rate_probe", __doc__, argv, _target, measure, "smem_rate.json", show=_show,
                      results_subdir="studies/smem_rate_probe")


if __name__ == "__main__":
    sys.exit(main())
