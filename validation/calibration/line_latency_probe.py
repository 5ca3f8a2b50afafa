"""Latency of a warp load whose lanes touch several cache lines: one warp, dependent loads.

Each lane follows its own pointer chain through a region of the buffer, one 128-byte line per hop
(a random order of the region's lines, so no prefetcher helps and the L1 misses); lanes
``i`` and ``i + lines`` share a region, so one load instruction touches ``lines`` distinct lines
(1 to 32). With 32 regions of 512 KiB (16 MiB in all, within the L2, far beyond the L1) each hop
is an L2 hit; with 32 regions of 8 MiB (256 MiB) an HBM access. ``clock64`` around 2048 hops, after
a warm-up pass, gives the cycles per dependent load instruction against the lines it touches.

Recorded on the H200 (line_latency.json, 2026-12-01): 288 cycles for one line, 297 / 309 / 320 /
337 / 370 for 2 / 4 / 8 / 16 / 32 lines (about 2.6 cycles per extra line). The "hbm" rows of that
run are not HBM latencies: the warm-up pass touches only the 2048 lines per region the timed pass
uses (8 MiB in all), which then sit in the L2; they repeat the L2 rows up to 16 lines.

``python -m validation.calibration.line_latency_probe [--out DIR]`` writes ``line_latency.json``;
without a GPU it says so in one line and exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SOURCE = r"""
extern "C" __global__ void chase(const unsigned* __restrict__ buf, int hops, int lines, unsigned region_words,
                                 unsigned long long* cycles, unsigned* sink) {
    unsigned idx = (threadIdx.x % lines) * region_words;
    for (int i = 0; i < hops; ++i) idx = buf[idx];          // warm-up pass (fills L2, not L1)
    idx = (threadIdx.x % lines) * region_words;
    __syncwarp();
    long long t0 = clock64();
    for (int i = 0; i < hops; ++i) idx = buf[idx];
    long long t1 = clock64();
    sink[threadIdx.x] = idx;
    if (threadIdx.x == 0) cycles[0] = (unsigned long long)(t1 - t0);
}
"""
LINE_WORDS = 32  # 128 bytes
LINES = (1, 2, 4, 8, 16, 32)
HOPS = 2048
LEVELS = {"l2": 512 * 1024, "hbm": 8 * 1024 * 1024}  # bytes per region (32 regions)
RUNS = 7


def build(region_bytes: int, seed: int = 0):
    """The chains: 32 regions, each a random cycle over its lines (word indices into the buffer)."""
    import numpy as np  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    region_words = region_bytes // 4
    n_lines = region_bytes // (LINE_WORDS * 4)
    buf = np.zeros(32 * region_words, dtype=np.uint32)
    for r in range(32):
        order = rng.permutation(n_lines)
        base = r * region_words
        src = base + order * LINE_WORDS
        dst = base + np.roll(order, -1) * LINE_WORDS
        buf[src] = dst
    # every chain starts at its region's first word: put line 0 first in its cycle
    return buf, region_words


def measure(runs: int = RUNS) -> dict:
    import cupy as cp  # noqa: PLC0415

    from validation.harness.metadata import collect_metadata  # noqa: PLC0415

    kernel = cp.RawKernel(SOURCE, "chase")
    cycles = cp.zeros(1, dtype=cp.uint64)
    sink = cp.zeros(32, dtype=cp.uint32)
    out: dict = {"hops": HOPS, "levels": {}}
    for level, region_bytes in LEVELS.items():
        host, region_words = build(region_bytes)
        buf = cp.asarray(host)
        rows = []
        for lines in LINES:
            vals = []
            for _ in range(runs):
                kernel((1,), (32,), (buf, cp.int32(HOPS), cp.int32(lines), cp.uint32(region_words), cycles, sink))
                cp.cuda.Device().synchronize()
                vals.append(int(cycles.get()[0]) / HOPS)
            vals.sort()
            rows.append({"lines": lines, "cycles_per_load": vals[len(vals) // 2], "min": vals[0], "max": vals[-1],
                         "runs": vals})
        out["levels"][level] = {"region_bytes": region_bytes, "rows": rows}
        del buf
    out["meta"] = collect_metadata()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.calibration.line_latency_probe", description=__doc__)
    ap.add_argument("--out", default=None, help="directory for line_latency.json")
    args = ap.parse_args(argv)
    from validation.harness.suite import gpu_available  # noqa: PLC0415

    why = gpu_available()
    if why:
        print(f"line_latency_probe: needs CuPy and an NVIDIA GPU: {why}", file=sys.stderr)
        return 2
    res = measure()
    out = Path(args.out) if args.out else Path(__file__).resolve().parents[1] / "results" / "h200" / "calibration"
    out.mkdir(parents=True, exist_ok=True)
    (out / "line_latency.json").write_text(json.dumps(res, indent=2, default=str) + "\n")
    for level, rec in res["levels"].items():
        print(level + ": " + ", ".join(f"{r['lines']} lines {r['cycles_per_load']:.0f}" for r in rec["rows"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
