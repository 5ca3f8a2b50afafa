"""How fast an SM takes new blocks: grids of near-empty blocks, timed with CUDA events.

A kernel whose blocks do (almost) nothing runs as fast as the block scheduler hands blocks to the
SMs and the SMs retire them. Timing grids of 132 x 256 up to 132 x 8192 such blocks at several
block sizes, the slope of time against blocks per SM is the time one SM needs per block, and its
inverse the block rate per SM (``block_launch_per_clk_per_sm``, in blocks per SM clock). The
intercept is the launch overhead, measured separately by calibrate.py.

Each block reads one value and writes it back only if it is negative (never: the buffer holds
ones), so no memory traffic competes. ``python -m validation.calibration.block_rate_probe
[--out DIR]`` writes ``block_rate.json`` (raw times, fits, metadata) and prints the rates; without a
GPU it says so in one line and exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SOURCE = r"""
extern "C" __global__ void near_empty(float* buf) {
    float v = buf[blockIdx.x & 1023];
    if (v < 0.0f && threadIdx.x == 0) buf[blockIdx.x & 1023] = -v;
}
"""
THREADS = (32, 64, 128, 256, 512, 1024)
BLOCKS_PER_SM = (256, 1024, 4096, 8192)
RUNS = 15


def fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares slope and intercept of (x, y) points."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return slope, my - slope * mx


def measure(runs: int = RUNS) -> dict:
    import cupy as cp  # noqa: PLC0415

    from validation.harness.metadata import collect_metadata  # noqa: PLC0415

    dev = cp.cuda.Device()
    sms = dev.attributes["MultiProcessorCount"]
    kernel = cp.RawKernel(SOURCE, "near_empty")
    buf = cp.ones(1024, dtype=cp.float32)
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    out: dict = {"sms": sms, "by_threads": {}}
    for threads in THREADS:
        rows = []
        for per_sm in BLOCKS_PER_SM:
            grid = sms * per_sm
            kernel((grid,), (threads,), (buf,))  # warm-up
            times = []
            for _ in range(runs):
                start.record()
                kernel((grid,), (threads,), (buf,))
                stop.record()
                stop.synchronize()
                times.append(cp.cuda.get_elapsed_time(start, stop) * 1e-3)
            times.sort()
            rows.append({"blocks_per_sm": per_sm, "median_s": times[len(times) // 2], "p10_s": times[len(times) // 10],
                         "p90_s": times[(9 * len(times)) // 10], "runs": times})
        slope, intercept = fit([(r["blocks_per_sm"], r["median_s"]) for r in rows])
        out["by_threads"][str(threads)] = {"rows": rows, "s_per_block_per_sm": slope, "intercept_s": intercept}
    out["meta"] = collect_metadata()
    clock = out["meta"].get("sm_clock_hz") or 1.98e9
    for rec in out["by_threads"].values():
        rec["blocks_per_clk_per_sm"] = 1.0 / (rec["s_per_block_per_sm"] * clock)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.calibration.block_rate_probe", description=__doc__)
    ap.add_argument("--out", default=None, help="directory for block_rate.json (default validation/results/<gpu>/calibration)")
    args = ap.parse_args(argv)
    from validation.harness.suite import gpu_available  # noqa: PLC0415

    why = gpu_available()
    if why:
        print(f"block_rate_probe: needs CuPy and an NVIDIA GPU: {why}", file=sys.stderr)
        return 2
    res = measure()
    if args.out:
        out = Path(args.out)
    else:
        from validation.harness.metadata import current_gpu_slug  # noqa: PLC0415

        out = Path(__file__).resolve().parents[1] / "results" / (current_gpu_slug() or "unknown_gpu") / "calibration"
    out.mkdir(parents=True, exist_ok=True)
    (out / "block_rate.json").write_text(json.dumps(res, indent=2, default=str) + "\n")
    for t, rec in res["by_threads"].items():
        print(f"{t:>5} threads: {rec['s_per_block_per_sm'] * 1e9:7.2f} ns per block per SM "
              f"({rec['blocks_per_clk_per_sm']:.4f} blocks/clk/SM), intercept {rec['intercept_s'] * 1e6:.2f} us")
    print(f"wrote {out / 'block_rate.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
