"""How many global-load requests per clock does an SM's L1 serve when they hit? (a GPU microbenchmark, ncu)

``read_l1_req`` in ``validation/calibrate.py`` measured 0.37 requests per clock for coalesced 4-byte
loads, but its loop spends several integer instructions on each load's address, and Nsight Compute
reads twice that rate off naive GEMMs; so the profile kept the datasheet lead (1.0). Here each warp
issues 8 loads per iteration from one address register with immediate offsets, so the loop is
little more than its loads. All data is L1-resident (8 KiB per block, read again and
again). Nsight Compute counts the L1 requests and sectors for global loads and the SM cycles:

================  ==================================================================================
``ld32``          4-byte loads, lanes consecutive: one 128-byte line per request
``ld32_bcast``    4-byte loads, every lane the same word: one sector per request
``ld32_w64``      ``ld32`` with 64 warps per SM (the others run 32)
``ld32_w16``      ``ld32`` with 16 warps per SM
================  ==================================================================================

``python -m validation.l1_rate_probe --out DIR`` writes ``DIR/l1_rate.json``: per pattern the
requests, sectors and instructions per clock and SM.
"""

from __future__ import annotations

import sys
from pathlib import Path

_ASM_LOADS = "\n".join(f'            "ld.global.ca.f32 %{i}, [%8+{i * 1024}];\\n"' for i in range(8))
SRC = r"""
// 8 L1-resident loads per iteration from one address register (offsets 1 KiB apart: different
// lines). PTX loads in one volatile asm block: a plain C++ loop of them had its loads removed by
// NVRTC (the first version of this probe measured 19 "loads" per clock), and a PTX block without a
// memory clobber, whose address repeated every 4 iterations, ran its loads only 4 times.
extern "C" __global__ void l1_rate(const float* __restrict__ buf, int pattern, int iters, float* out) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const float* block = buf + blockIdx.x * 2048;  // 8 KiB per block
    const float* p0 = block + (pattern == 1 ? warp : lane);
    const int step = 1 + (int)(out[blockIdx.x * blockDim.x] * 0.f);  // 1, unknown to the compiler
    float acc = 0.f;
    for (int it = 0; it < iters; ++it) {
        const float* p = p0 + ((it * step) & 3) * 32;  // the next 128 bytes of each 1-KiB row
        float v0, v1, v2, v3, v4, v5, v6, v7;
        asm volatile(
LOADS
            : "=f"(v0), "=f"(v1), "=f"(v2), "=f"(v3), "=f"(v4), "=f"(v5), "=f"(v6), "=f"(v7)
            : "l"(p) : "memory");
        acc += ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7));
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
""".replace("LOADS", _ASM_LOADS)
THREADS = 256
ITERS = 4000
# name -> (pattern code, blocks per SM)
PATTERNS = {"ld32": (0, 4), "ld32_bcast": (1, 4), "ld32_w64": (0, 8), "ld32_w16": (0, 2)}
METRICS = ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
           "sm__cycles_elapsed.avg", "smsp__inst_executed.sum", "gpu__time_duration.sum")


def _module(cp, arch: str):
    """The probe compiled by nvcc (as validation/calibrate.py's microbenchmarks are: its SASS was
    read and has the loads in the loop), NVRTC when nvcc is missing."""
    import tempfile  # noqa: PLC0415

    from validation.calibrate import build_cubin  # noqa: PLC0415

    tmp = Path(tempfile.mkdtemp())
    src = tmp / "l1_rate.cu"
    src.write_text(SRC)
    built = build_cubin(src, arch, tmp)
    return cp.RawModule(path=str(built[0])) if built else cp.RawModule(code=SRC)


def _target() -> int:
    import cupy as cp  # noqa: PLC0415

    props = cp.cuda.runtime.getDeviceProperties(0)
    sms = props["multiProcessorCount"]
    k = _module(cp, f"sm_{props['major']}{props['minor']}").get_function("l1_rate")
    blocks = sms * max(per for _, per in PATTERNS.values())
    buf = cp.random.rand(blocks * 2048 + 8 * 1024, dtype=cp.float32) + 0.5
    out = cp.zeros(blocks * THREADS, dtype=cp.float32)
    k((sms,), (THREADS,), (buf, cp.int32(0), cp.int32(10), out))
    cp.cuda.runtime.deviceSynchronize()
    cp.cuda.runtime.profilerStart()
    for code, per_sm in PATTERNS.values():
        k((sms * per_sm,), (THREADS,), (buf, cp.int32(code), cp.int32(ITERS), out))
    cp.cuda.runtime.deviceSynchronize()
    cp.cuda.runtime.profilerStop()
    return 0


def rates(rows: list[dict], sms: int) -> dict:
    """Per pattern: requests, sectors and instructions per clock and SM, and the loads the loop
    issues per clock by its time (the two agree when every load ran and was counted) (pure)."""
    out = {}
    for (name, (_, per_sm)), r in zip(PATTERNS.items(), rows, strict=False):
        if r["sm__cycles_elapsed.avg"] is None:
            raise RuntimeError(f"l1_rate_probe: pattern {name} was not profiled (did its launch fail?)")
        cyc = r["sm__cycles_elapsed.avg"] * sms
        req = r["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"]
        out[name] = {"warps_per_sm": per_sm * THREADS // 32, "requests": req,
                     "requests_per_clk_per_sm": req / cyc,
                     "sectors_per_clk_per_sm": r["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] / cyc,
                     "instr_per_clk_per_sm": r["smsp__inst_executed.sum"] / cyc,
                     "loop_loads_per_clk_per_sm": per_sm * THREADS // 32 * ITERS * 8 * sms / cyc,
                     "time_s": r["gpu__time_duration.sum"] * 1e-9}
    return out


def measure(ncu: str = "ncu") -> dict:
    import cupy as cp  # noqa: PLC0415

    from validation.ncu import probe_rows  # noqa: PLC0415

    sms = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    return {"sms": sms, "patterns": rates(probe_rows("validation.l1_rate_probe", METRICS, cache_control="all",
                                                     ncu=ncu), sms)}


def _show(res: dict) -> None:
    for name, p in res["patterns"].items():
        print(f"{name:11s} {p['warps_per_sm']:2d} warps/SM: {p['requests_per_clk_per_sm']:.3f} requests/clk, "
              f"{p['sectors_per_clk_per_sm']:.3f} sectors/clk, {p['instr_per_clk_per_sm']:.3f} instr/clk, "
              f"loop loads {p['loop_loads_per_clk_per_sm']:.3f}/clk")


def main(argv=None) -> int:
    from validation.ncu import probe_main  # noqa: PLC0415

    return probe_main("validation.l1_rate_probe", __doc__, argv, _target, measure, "l1_rate.json", show=_show)


if __name__ == "__main__":
    sys.exit(main())
