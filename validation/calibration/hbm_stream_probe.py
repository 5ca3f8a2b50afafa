"""HBM bandwidth of a read-only stream and of a write-only stream, beside the copy of calibrate.py.

A copy (read + write) is what ``hbm_bytes_per_s`` holds. Reading alone and writing alone can run at
other rates (the DRAM turns the bus around between reads and writes). Each kernel streams 1 GiB
with 16-byte accesses, grid-stride, 8 independent loads in flight per thread (reads are summed
and one value per block is written, so the reads cannot be removed); L2 is flushed before each of
the 20 timed runs; the median is recorded. ``python -m validation.calibration.hbm_stream_probe
[--out DIR]`` writes ``hbm_stream.json``; without a GPU it says so in one line and exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

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
extern "C" __global__ void write_stream(float4* __restrict__ y, long long n4, float value) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride)
        y[i] = make_float4(value, value, value, value);
}
"""
BYTES = 1 << 30
RUNS = 20


def measure(runs: int = RUNS) -> dict:
    import cupy as cp  # noqa: PLC0415

    from validation.harness.metadata import collect_metadata  # noqa: PLC0415
    from validation.harness.timing import L2Flusher  # noqa: PLC0415

    mod = cp.RawModule(code=SOURCE)
    read, write = mod.get_function("read_stream"), mod.get_function("write_stream")
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    n4 = BYTES // 16
    x = cp.random.random(n4 * 4, dtype=cp.float32)
    out = cp.zeros(sms * 8, dtype=cp.float32)
    flush = L2Flusher(cp)
    grid, threads = sms * 8, 256
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    res: dict = {}
    for name, launch in (("read", lambda: read((grid,), (threads,), (x, cp.int64(n4), out))),
                         ("write", lambda: write((grid,), (threads,), (x, cp.int64(n4), cp.float32(1.0))))):
        launch()
        times = []
        for _ in range(runs):
            flush()
            start.record()
            launch()
            stop.record()
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop) * 1e-3)
        times.sort()
        med = times[len(times) // 2]
        res[name] = {"bytes": BYTES, "median_s": med, "bytes_per_s": BYTES / med, "p10_s": times[len(times) // 10],
                     "p90_s": times[(9 * len(times)) // 10], "runs": times, "grid": grid, "threads": threads}
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
    for k in ("read", "write"):
        print(f"{k:5s}: {res[k]['bytes_per_s'] / 1e12:.3f} TB/s (median of {RUNS}, "
              f"{res[k]['p10_s'] * 1e6:.0f}..{res[k]['p90_s'] * 1e6:.0f} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
