"""How fast can one SM serve warp loads whose 32 lanes touch 32 different lines? (a GPU microbenchmark)

The thread-per-row softmax and LayerNorm kernels issue loads whose lanes each read their own row,
so one load instruction touches 32 cache lines; a step of 4 such loads takes about 1600 cycles on
the GPU against about 800 in the engine (``validation/studies/row_kernels_fidelity.md``, item 5),
while one such load alone, dependent on the last, takes 370 cycles against 288 for one line
(``line_latency_probe``). What is missing is how such requests overlap: this probe measures it.

One block on one SM; each of its ``warps`` warps runs ``ilp`` independent pointer chains per lane.
A round issues the ``ilp`` loads of a lane (each depends only on its own chain's last load, so they
are in flight together), and the next round waits for them. Lane ``l`` of chain ``j`` of warp ``w``
walks its own region (a random cycle over the region's 128-byte lines), and lanes ``l`` and
``l + lines`` share a region, so each load instruction touches ``lines`` distinct lines (32: the
thread-per-row pattern; 1: a coalesced control). ``clock64`` around ``HOPS`` rounds, after a
warm-up pass, gives cycles per round; per warp and instruction, the time one more 32-line request
adds when many are in flight is the SM's throughput for them.

Levels: ``l2``: ``ld.global.cg`` (L1 bypassed), regions of 64 lines, everything within the L2;
``l1``: plain loads over regions of 2 lines, small enough to stay in the L1 after the warm-up;
``hbm``: ``ld.global.cg``, no warm-up, the L2 flushed before each run, every hop a line not seen before.
Spread: the lanes' lines all at sector position 0 (rows a multiple of 128 bytes apart), or lane ``l``
at position ``l % 4`` (rows 4000 bytes apart, say), which the L1 can serve several lines a clock.

``python -m validation.calibration.uncoalesced_probe --out DIR`` writes ``DIR/uncoalesced.json``
(raw cycles of every run, per case); without a GPU it says so in one line and exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SOURCE = r"""
#ifndef ILP
#define ILP 1
#endif
#ifndef REPEAT
#define REPEAT 1
#endif
#ifdef BYPASS_L1
#define LOAD(p) __ldcg(p)
#else
#define LOAD(p) (*(p))
#endif
// one hop of chain j: the line's first word leads on; REPEAT - 1 more loads of the next words of the same
// sector (zeros in the buffer), issued with it, as a thread-per-row kernel's unrolled loads of one row
#define HOP(j) { unsigned v = LOAD(buf + idx[j]); _Pragma("unroll") for (int r = 1; r < REPEAT; ++r) v += LOAD(buf + idx[j] + r); idx[j] = v; }
extern "C" __global__ void chase_ilp(const unsigned* __restrict__ buf, int hops, int lines, unsigned region_words,
                                     int spread, int warm, unsigned long long* cycles, unsigned* sink) {
    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    // spread: lane l's chain sits at sector position (l % lines) % 4 of its lines (the buffer is built so)
    const unsigned start = spread ? ((lane % lines) % 4) * 8 : 0;
    unsigned idx[ILP];
#pragma unroll
    for (int j = 0; j < ILP; ++j) idx[j] = ((warp * ILP + j) * 32 + lane % lines) * region_words + start;
    for (int i = 0; i < hops * warm; ++i) {
#pragma unroll
        for (int j = 0; j < ILP; ++j) HOP(j)
    }
#pragma unroll
    for (int j = 0; j < ILP; ++j) idx[j] = ((warp * ILP + j) * 32 + lane % lines) * region_words + start;
    __syncthreads();
    long long t0 = clock64();
    for (int i = 0; i < hops; ++i) {
#pragma unroll
        for (int j = 0; j < ILP; ++j) HOP(j)
    }
    long long t1 = clock64();
    unsigned s = 0;
#pragma unroll
    for (int j = 0; j < ILP; ++j) s += idx[j];
    sink[threadIdx.x] = s;
    if (lane == 0) cycles[warp] = (unsigned long long)(t1 - t0);
}
"""
LINE_WORDS = 32  # 128 bytes
HOPS = 512
RUNS = 5
WARPS = (1, 2, 4, 8)
ILPS = (1, 2, 4, 8)
LINES = (1, 32)
#: lines a load touches in the hbm and l2 levels' latency cases (one warp, ilp 1 and 4): how a burst's
#: latency grows with its lines
HBM_LATENCY_LINES = (2, 4, 8, 16)
# level: (lines per region, bypass the L1, warm-up pass). "hbm": no warm-up and the L2 flushed before each
# run, each chain visiting HBM_HOPS distinct lines once (cold misses); "l2ca": cached loads over regions
# far larger than the L1 (L1 misses, L2 hits), run with REPEATS loads a hop
LEVELS = {"l2": (64, True, True), "l1": (2, False, True), "hbm": (256, True, False), "l2ca": (256, False, True)}
REPEATS = (1, 2, 4, 8)  # loads of one sector a hop (l2ca only): how the loads after a miss to its sector cost
HBM_HOPS = 256
FLUSH_BYTES = 256 * 1024 * 1024  # written before each hbm run: evicts the chains' lines from the L2
L1_FOOTPRINT_MAX_BYTES = 160 * 1024  # l1 cases larger than this would not stay in the L1: skipped
# spread: 0, every lane's line at sector position 0 (rows at a multiple of 128 B, as thread-per-row
# kernels with power-of-two rows); 1, lane l at position l % 4 (rows such as 4000 B apart)
SPREADS = (0, 1)


def build(regions: int, lines_per_region: int, spread: bool = False, seed: int = 0):
    """``regions`` random cycles, each over its ``lines_per_region`` lines (word indices into the buffer);
    with ``spread`` region r's chain sits at sector position ``r % 4`` of its lines."""
    import numpy as np  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    region_words = lines_per_region * LINE_WORDS
    buf = np.zeros(regions * region_words, dtype=np.uint32)
    for r in range(regions):
        order = rng.permutation(lines_per_region)
        order = np.roll(order, -int(np.argmin(order)))  # the chain starts at the region's first line
        base = r * region_words + ((r % 4) * 8 if spread else 0)
        buf[base + order * LINE_WORDS] = base + np.roll(order, -1) * LINE_WORDS
    return buf, region_words


def cases():
    """(level, lines, spread, warps, ilp, repeat) of every case run, the L1 ones only where they fit in the L1;
    the spread ones only with 32 lines (one line needs no spreading)."""
    out = []
    for level, (lines_per_region, _bypass, _warm) in LEVELS.items():
        if level == "l2ca":
            out += [(level, 32, spread, warps, ilp, repeat) for spread in SPREADS for warps in (1, 4, 8)
                    for ilp in (1, 4) for repeat in REPEATS]
            continue
        if level in ("hbm", "l2"):
            out += [(level, lines, 0, 1, ilp, 1) for lines in HBM_LATENCY_LINES for ilp in (1, 4)]
        for lines in LINES:
            for spread in SPREADS:
                if spread and lines == 1:
                    continue
                for warps in WARPS:
                    for ilp in ILPS:
                        footprint = warps * ilp * lines * lines_per_region * LINE_WORDS * 4
                        if level == "l1" and footprint > L1_FOOTPRINT_MAX_BYTES:
                            continue
                        out.append((level, lines, spread, warps, ilp, 1))
    return out


def measure(runs: int = RUNS) -> dict:
    import cupy as cp  # noqa: PLC0415

    from validation.harness.metadata import collect_metadata  # noqa: PLC0415

    kernels = {}
    for level, (_lines_per_region, bypass, _warm) in LEVELS.items():
        for ilp in ILPS:
            for repeat in (REPEATS if level == "l2ca" else (1,)):
                opts = (f"-DILP={ilp}", f"-DREPEAT={repeat}") + (("-DBYPASS_L1",) if bypass else ())
                kernels[level, ilp, repeat] = cp.RawModule(code=SOURCE, options=opts).get_function("chase_ilp")
    cycles = cp.zeros(max(WARPS), dtype=cp.uint64)
    sink = cp.zeros(32 * max(WARPS), dtype=cp.uint32)
    flush = cp.empty(FLUSH_BYTES // 4, dtype=cp.uint32)
    rows = []
    for level, lines, spread, warps, ilp, repeat in cases():
        lines_per_region, _bypass, warm = LEVELS[level]
        hops = HOPS if warm else HBM_HOPS
        host, region_words = build(warps * ilp * 32, lines_per_region, bool(spread))
        buf = cp.asarray(host)
        per_run = []
        for _ in range(runs):
            if not warm:
                flush.fill(0)
            kernels[level, ilp, repeat]((1,), (32 * warps,), (buf, cp.int32(hops), cp.int32(lines), cp.uint32(region_words),
                                                      cp.int32(spread), cp.int32(1 if warm else 0), cycles, sink))
            cp.cuda.Device().synchronize()
            per_run.append([int(c) / hops for c in cycles.get()[:warps]])
        del buf
        worst = sorted(max(r) for r in per_run)
        rows.append({"level": level, "lines": lines, "spread": spread, "warps": warps, "ilp": ilp, "repeat": repeat,
                     "hops": hops,
                     "cycles_per_round": worst[len(worst) // 2], "min": worst[0], "max": worst[-1],
                     "requests_per_round": warps * ilp, "runs_cycles_per_round_per_warp": per_run})
    return {"hops": HOPS, "lines_per_region": {k: v[0] for k, v in LEVELS.items()}, "rows": rows,
            "meta": collect_metadata()}


#: cases whose requests in flight saturate the L1's miss path: 32 lines an instruction, from the L2
#: (L1 bypassed), at least this many warp instructions in flight a round
SATURATED_REQUESTS = 16


def fields(rec: dict, result_path: str = "uncoalesced.json") -> dict:
    """The calibrated profile's ``l1_miss_lines_per_clk_per_sm``: lines per clock an SM's L1 sends on
    to the L2 when every lane of a load misses in its own line, over the saturated ``l2`` cases
    (32 lines an instruction, either sector placement: the rate is the same), from each run's slowest
    warp. A record without them gives no field."""
    rates = []
    for r in rec.get("rows", []):
        if r["level"] == "l2" and r["lines"] == 32 and r.get("repeat", 1) == 1 and r["requests_per_round"] >= SATURATED_REQUESTS:
            for run in r["runs_cycles_per_round_per_warp"]:
                rates.append(r["requests_per_round"] * r["lines"] / max(run))
    if not rates:
        return {}
    rates.sort()
    pick = lambda q: rates[min(len(rates) - 1, int(q * len(rates)))]  # noqa: E731
    return {"l1_miss_lines_per_clk_per_sm": {
        "value": pick(0.5), "p10": pick(0.1), "p90": pick(0.9), "n": len(rates), "unit": "lines/clk/SM",
        "benchmark": f"uncoalesced_probe ({result_path}: 32-line loads from the L2 through a bypassed L1, "
                     f">= {SATURATED_REQUESTS} in flight)",
        "date": rec.get("meta", {}).get("date_utc")}}


def burst_fields(rec: dict, miss_lines_per_clk: float, result_path: str = "uncoalesced.json") -> dict:
    """The calibrated profile's ``hbm_burst_extra_cycles_by_lines`` and ``l2_burst_extra_cycles_by_lines``:
    for one warp with one load in flight (lanes' lines at one sector position), the clocks a load of L
    lines takes beyond a one-line load and beyond the L1 miss path's (L - 1) / ``miss_lines_per_clk``
    (which the engine charges as L1 cycles), at L = 1, 2, 4 ... 32 (points (L, clocks >= 0)). Recorded:
    from HBM 674 -> 1118 clocks for 1 -> 32 lines, from the L2 287 -> 368. A level without every
    point gives no field."""
    out = {}
    for level in ("hbm", "l2"):
        rows = {r["lines"]: r for r in rec.get("rows", []) if r["level"] == level and r["warps"] == 1
                and r["ilp"] == 1 and r.get("spread", 0) == 0 and r.get("repeat", 1) == 1}
        want = (1, *HBM_LATENCY_LINES, 32)
        if not all(n in rows for n in want):
            continue
        base = rows[1]["cycles_per_round"]
        pts = [[n, max(0.0, rows[n]["cycles_per_round"] - base - (n - 1) / miss_lines_per_clk)] for n in want]
        spans = [max(rows[n]["max"] - rows[n]["min"] for n in want)]
        out[f"{level}_burst_extra_cycles_by_lines"] = {
            "value": pts, "p10": min(p[1] for p in pts), "p90": max(p[1] for p in pts), "n": len(pts),
            "unit": "cycles", "how": f"one warp, one load in flight, median of {RUNS} runs a point (widest run "
                                      f"spread {spans[0]:.0f} cycles)",
            "benchmark": f"uncoalesced_probe ({result_path}: {level} loads of 1-32 lines, less the one-line "
                         f"load's {base:.0f} clocks and (lines - 1) / {miss_lines_per_clk:.3f} of the L1 miss path)",
            "date": rec.get("meta", {}).get("date_utc")}
    return out


def table(res: dict) -> str:
    """One line per case: cycles per round, and per request (warp instruction) in flight."""
    lines = []
    for r in res["rows"]:
        per_req = r["cycles_per_round"] / r["requests_per_round"]
        lines.append(f"{r['level']:4} lines {r['lines']:2} spread {r.get('spread', 0)} repeat {r.get('repeat', 1)} warps {r['warps']} ilp {r['ilp']}: "
                     f"{r['cycles_per_round']:7.1f} cycles a round, {per_req:6.1f} a request")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.calibration.uncoalesced_probe", description=__doc__)
    ap.add_argument("--out", default=None, help="directory for uncoalesced.json")
    ap.add_argument("--show", default=None, help="print the table of a recorded uncoalesced.json and exit")
    args = ap.parse_args(argv)
    if args.show:
        print(table(json.loads(Path(args.show).read_text())))
        return 0
    from validation.harness.suite import gpu_available  # noqa: PLC0415

    why = gpu_available()
    if why:
        print(f"uncoalesced_probe: needs CuPy and an NVIDIA GPU: {why}", file=sys.stderr)
        return 2
    res = measure()
    out = Path(args.out) if args.out else Path(__file__).resolve().parents[1] / "results" / "h200" / "calibration"
    out.mkdir(parents=True, exist_ok=True)
    (out / "uncoalesced.json").write_text(json.dumps(res, indent=1, default=str) + "\n")
    print(table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
