"""Where does the block scheduler put the blocks of a last partial wave? (a GPU microbenchmark)

Blocks of equal, fixed work are launched with shared memory sized so that exactly R blocks fit on
an SM, in a grid of about 1.45 waves. Each block records its SM (%smid) and its start and end
(%globaltimer). The blocks that start after the first wave show whether a partial wave lands
spread (one block per SM) or packed (all R slots of the first SMs to free up).

Two kinds of work:

* ``ffma`` (what the calibrated profile uses): a fixed number of independent FFMA chains per
  thread. Blocks on one SM share its issue slots and FMA pipes, as the blocks of a throughput-bound
  kernel do, so how they finish (and free their slots) is set by that sharing.
* ``spin``: a clock64 spin of fixed length. Blocks share nothing, so the R blocks of an SM free
  their slots at the same instant; kept as a reference.

``python -m validation.calibration.dispatch_probe`` writes validation/results/<gpu>/calibration/dispatch.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

SRC = r"""
extern "C" __global__ void dispatch_probe(long long spin, unsigned* smid_out, unsigned long long* t_out) {
    extern __shared__ float pad[];
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    unsigned long long t0, t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    long long c0 = clock64();
    while (clock64() - c0 < spin) { }
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    if (threadIdx.x == 0) {
        smid_out[blockIdx.x] = smid;
        t_out[2 * blockIdx.x] = t0;
        t_out[2 * blockIdx.x + 1] = t1;
        if (spin < 0) pad[0] = 0.f;
    }
}

extern "C" __global__ void dispatch_probe_ffma(int iters, unsigned* smid_out, unsigned long long* t_out,
                                               float* sink) {
    extern __shared__ float pad[];
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    unsigned long long t0, t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    float f[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) f[c] = threadIdx.x * 1e-3f + c;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int c = 0; c < 8; ++c) f[c] = fmaf(f[c], 0.9999f, 1e-4f);
    }
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    float acc = 0.f;
#pragma unroll
    for (int c = 0; c < 8; ++c) acc += f[c];
    if (acc == -1.f) sink[0] = acc + pad[0];
    if (threadIdx.x == 0) {
        smid_out[blockIdx.x] = smid;
        t_out[2 * blockIdx.x] = t0;
        t_out[2 * blockIdx.x + 1] = t1;
    }
}
"""
#: FFMA per thread that keeps one SM's R resident blocks of 4 warps busy about 0.5 ms (about 3 warp
#: FFMA per clock per SM at 2 GHz)
FFMA_PER_THREAD_WAVE = 750_000


SLOTS = (1, 2, 4, 7)  # resident blocks per SM the probes try


def probes() -> dict:
    """Both kinds of work at every ``SLOTS`` value (what dispatch.json and the calibration keep)."""
    return {"probes": [probe(r) for r in SLOTS], "spin_probes": [probe(r, work="spin") for r in SLOTS]}


def probe(per_sm: int, waves: float = 1.45, spin_cycles: int = 2_000_000, threads: int = 128,
          runs: int = 9, work: str = "ffma") -> dict:
    """Median over ``runs`` launches (which SMs free first varies from launch to launch)."""
    results = [probe_once(per_sm, waves, spin_cycles, threads, work) for _ in range(runs)]
    hosting = sorted(r["sms_hosting_late_blocks"] for r in results)
    median = min(results, key=lambda r: abs(r["sms_hosting_late_blocks"] - hosting[len(hosting) // 2]))
    return {**median, "runs": runs, "sms_hosting_late_blocks_per_run": [r["sms_hosting_late_blocks"] for r in results]}


def probe_once(per_sm: int, waves: float = 1.45, spin_cycles: int = 2_000_000, threads: int = 128,
               work: str = "ffma") -> dict:
    if work not in ("ffma", "spin"):
        raise ValueError(f"work = {work!r}: must be 'ffma' or 'spin'")
    import cupy as cp  # noqa: PLC0415

    props = cp.cuda.runtime.getDeviceProperties(0)
    sms = int(props["multiProcessorCount"])
    smem_sm = int(props["sharedMemPerMultiprocessor"])
    smem = (smem_sm // per_sm) - 1024 - 128  # per-block reservation and allocation slack
    k = cp.RawModule(code=SRC).get_function("dispatch_probe" if work == "spin" else "dispatch_probe_ffma")
    k.max_dynamic_shared_size_bytes = smem
    blocks = int(round(waves * sms * per_sm))
    smid = cp.zeros(blocks, dtype=cp.uint32)
    t = cp.zeros(2 * blocks, dtype=cp.uint64)
    if work == "spin":
        args = (cp.int64(spin_cycles), smid, t)
    else:
        args = (cp.int32(FFMA_PER_THREAD_WAVE // (8 * per_sm)), smid, t, cp.zeros(1, dtype=cp.float32))
    k((blocks,), (threads,), args, shared_mem=smem)
    cp.cuda.runtime.deviceSynchronize()
    smid_h = smid.get().tolist()
    t_h = t.get().reshape(-1, 2).tolist()
    t_first = min(a for a, _ in t_h)
    # blocks are dispatched in index order: those past the first sms * per_sm form the last wave
    n_first = min(sms * per_sm, blocks)
    late = range(n_first, blocks)
    late_per_sm = Counter(smid_h[i] for i in late)
    ends = sorted(t_h[i][1] for i in range(n_first))
    return {"work": work, "blocks_per_sm": per_sm, "blocks": blocks, "sms": sms, "smem_per_block_bytes": smem,
            # how spread the first wave's starts and ends are (microseconds, first to last)
            "first_wave_start_spread_us": (max(t_h[i][0] for i in range(n_first)) - t_first) * 1e-3,
            "first_wave_end_spread_us": (ends[-1] - ends[0]) * 1e-3,
            "first_wave_duration_us": (ends[-1] - t_first) * 1e-3,
            "late_blocks": len(late), "sms_hosting_late_blocks": len(late_per_sm),
            "late_blocks_per_sm_histogram": dict(Counter(late_per_sm.values())),
            "first_wave_blocks_per_sm_max": max(Counter(smid_h[:n_first]).values()),
            # every block: [SM, start, end] in microseconds from the first start
            "blocks_sm_start_end_us": [[smid_h[i], round((a - t_first) * 1e-3, 3), round((b - t_first) * 1e-3, 3)]
                                       for i, (a, b) in enumerate(t_h)]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.calibration.dispatch_probe", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="output directory (default validation/results/<gpu>/calibration)")
    args = ap.parse_args(argv)
    try:
        import cupy  # noqa: F401, PLC0415
    except ImportError as exc:
        print(f"validation.calibration.dispatch_probe: needs CuPy and an NVIDIA GPU: {exc}", file=sys.stderr)
        return 2
    from validation.harness.metadata import collect_metadata  # noqa: PLC0415
    from validation.harness.suite import default_results_root  # noqa: PLC0415

    res = {"meta": collect_metadata(), **probes()}
    out = Path(args.out) if args.out else default_results_root() / "calibration"
    out.mkdir(parents=True, exist_ok=True)
    (out / "dispatch.json").write_text(json.dumps(res, indent=2, default=str) + "\n")
    for p in res["probes"]:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
