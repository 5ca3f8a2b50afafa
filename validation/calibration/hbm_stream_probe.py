"""HBM bandwidth of a read-only stream, a write-only stream and a copy.

A copy (read + write) is what ``hbm_bytes_per_s`` holds. Reading alone and writing alone can run at
other rates (the DRAM turns the bus around between reads and writes). Each kernel streams 1 GiB
with 16-byte accesses, grid-stride, 8 independent loads in flight per thread (reads are summed
and one value per block is written, so the reads cannot be removed); L2 is flushed before each of
the 20 timed runs; the median is recorded. ``python -m validation.calibration.hbm_stream_probe
[--out DIR]`` writes ``hbm_stream.json``; without a GPU it says so in one line and exits 2.

Two starts (validation/calibration/flush_probe.py measured why): ``read`` / ``write`` / ``copy`` after
the harness's flush alone, which leaves the L2 full of dirty lines that the stream writes back while
it runs (about 29.5 MB: 3% of a 1 GiB read); ``clean`` after the flush and a read sweep of another
buffer of twice the L2, which writes them back first. The engine models the write-back itself
(``l2_flushed_dirty_bytes``), so the profile's rates come from the ``clean`` runs when recorded.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from validation.calibration.flush_probe import read_kernel_source

SOURCE = r"""
extern "C" __global__ void read_stream(const float4* __restrict__ x, long long n4, float* out) {
    float acc = 0.f;
    long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 7 * stride < n4; i += 8 * stride) {
        float4 v[8];
        #pragma unroll
        for (int u = 0; u < 8; ++u) v[u] = x[i + u * stride];
        #pragma unroll
        for (int u = 0; u < 8; ++u) acc += v[u].x + v[u].y + v[u].z + v[u].w;
    }
    for (; i < n4; i += stride) { float4 v = x[i]; acc += v.x + v.y + v.z + v.w; }
    if (acc == -1.0f) out[blockIdx.x] = acc;  // never true for the inputs: keeps the reads
}
extern "C" __global__ void copy_stream(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
    long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 7 * stride < n4; i += 8 * stride) {
        float4 v[8];
        #pragma unroll
        for (int u = 0; u < 8; ++u) v[u] = x[i + u * stride];
        #pragma unroll
        for (int u = 0; u < 8; ++u) y[i + u * stride] = v[u];
    }
    for (; i < n4; i += stride) y[i] = x[i];
}
extern "C" __global__ void write_stream(float4* __restrict__ y, long long n4, float value) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride)
        y[i] = make_float4(value, value, value, value);
}
"""
SOURCE += read_kernel_source("sweep_stream")  # the clean start's L2 sweep (flush_probe's read kernel)
BYTES = 1 << 30
RUNS = 20


def measure(runs: int = RUNS) -> dict:
    import cupy as cp  # noqa: PLC0415

    from validation.harness.metadata import collect_metadata  # noqa: PLC0415
    from validation.harness.timing import L2Flusher  # noqa: PLC0415

    mod = cp.RawModule(code=SOURCE)
    read, write = mod.get_function("read_stream"), mod.get_function("write_stream")
    copy, sweep = mod.get_function("copy_stream"), mod.get_function("sweep_stream")
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    n4 = BYTES // 16
    x = cp.random.random(n4 * 4, dtype=cp.float32)
    y = cp.empty_like(x)
    out = cp.zeros(sms * 8, dtype=cp.float32)
    flush = L2Flusher(cp)
    other = cp.random.random(flush.nbytes // 4, dtype=cp.float32)
    grid, threads = sms * 8, 256
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    res: dict = {"clean": {}}
    kernels = (("read", BYTES, lambda: read((grid,), (threads,), (x, cp.int64(n4), out))),
               ("write", BYTES, lambda: write((grid,), (threads,), (x, cp.int64(n4), cp.float32(1.0)))),
               ("copy", 2 * BYTES, lambda: copy((grid,), (threads,), (x, y, cp.int64(n4)))))
    for clean in (False, True):
        for name, moved, launch in kernels:
            launch()
            times = []
            for _ in range(runs):
                flush()
                if clean:  # write the flush's dirty lines back before the timed run
                    sweep((grid,), (threads,), (other, cp.int64(other.size // 4), out))
                start.record()
                launch()
                stop.record()
                stop.synchronize()
                times.append(cp.cuda.get_elapsed_time(start, stop) * 1e-3)
            times.sort()
            med = times[len(times) // 2]
            row = {"bytes": moved, "median_s": med, "bytes_per_s": moved / med, "p10_s": times[len(times) // 10],
                   "p90_s": times[(9 * len(times)) // 10], "runs": times, "grid": grid, "threads": threads}
            (res["clean"] if clean else res)[name] = row
    res["meta"] = collect_metadata()
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.calibration.hbm_stream_probe", description=__doc__)
    ap.add_argument("--out", default=None, help="directory for hbm_stream.json")
    args = ap.parse_args(argv)
    from validation.harness.suite import gpu_available  # noqa: PLC0415

    why = gpu_available()
    if why:
        print(f"hbm_stream_probe: needs CuPy and an NVIDIA GPU: {why}", file=sys.stderr)
        return 2
    res = measure()
    out = Path(args.out) if args.out else Path(__file__).resolve().parents[1] / "results" / "h200" / "calibration"
    out.mkdir(parents=True, exist_ok=True)
    (out / "hbm_stream.json").write_text(json.dumps(res, indent=2, default=str) + "\n")
    for start, part in (("flushed", res), ("clean", res["clean"])):
        for k in ("read", "write", "copy"):
            print(f"{start:7s} {k:5s}: {part[k]['bytes_per_s'] / 1e12:.3f} TB/s (median of {RUNS}, "
                  f"{part[k]['p10_s'] * 1e6:.0f}..{part[k]['p90_s'] * 1e6:.0f} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
