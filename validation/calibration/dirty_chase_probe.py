"""Latency of L2 misses while the L2 holds the harness flush's dirty lines, against a clean L2.

Why: ``flush_probe`` measured the *bytes* the flush's dirty lines cost a kernel (``l2_flushed_*``), and the
engine queues them on its HBM channel, where a latency-bound kernel hides them in its idle gaps. The suite's
own kernels timed both ways (``validation.studies.flush_check``) say otherwise: the flushed start costs
LayerNorm 8192x1024 +2.0 to +5.2 us whatever the variant (the engine: 0.0 to +7.4 us, least where the kernel
is latency-bound), thread-per-row kernels moving < 0.5 TB/s +4.5 to +10.1 us (engine: 0). This probe asks
whether a read miss that finds dirty lines to evict waits longer, per miss, than on a clean L2.

``python -m validation.calibration.dirty_chase_probe [--out DIR] [--quick]`` writes ``<DIR>/dirty_chase.json``
(default DIR: ``validation/results/<gpu>/calibration``); without a GPU it says so in one line and exits 2.
About 10 s of GPU time.

Kernel (``dirty_chase_probe.cu``): every warp's lane 0 follows a pointer chain of :data:`STEPS` nodes 2 KiB
apart in a region of its own (each load a fresh line, ``ld.global.cg``), clock64 per chase and per quarter.
Cases :data:`SHAPES` (blocks x warps per block: one warp alone; one warp on every SM; 8 and 32 warps on
every SM, the suite's resident warps) x :data:`CONDITIONS`, each enqueued after the harness's L2 flush
(``dirty``: a write of twice the L2, as every suite time) or after it and a read sweep of twice the L2
that writes the dirty lines back first (``clean``), as ``flush_probe``. Per case: cycles per load (median,
p10, p90 over warps, last repetition; and per quarter of the chase), the event time (median over
repetitions), the SM clock; ``extra_cycles`` = dirty - clean per load.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from validation.calibration import probe_common as pc

KERNEL_SRC = Path(__file__).resolve().with_suffix(".cu")
RESULT_FILE = "dirty_chase.json"
ARCH = "sm_90"
REC = 6  # longs per warp record (DC_REC)
STRIDE = 2048  # bytes between nodes (DC_STRIDE)
STEPS = 64  # dependent loads per chase (4 quarters of 16)
#: (name, blocks per SM or None for one block in all, warps per block)
SHAPES = (("w1", None, 1), ("sm1w", 1, 1), ("sm8w", 1, 8), ("sm32w", 1, 32))
CONDITIONS = ("dirty", "clean")
WARMUP, REPS, MIN_REPS = 2, 10, 5
QUICK_REPS = 3


def defines() -> dict[str, int]:
    """The ``#define``s of the CUDA source (tests check them against the constants above)."""
    return {k: int(v) for k, v in re.findall(r"#define (DC_\w+) (\d+)", KERNEL_SRC.read_text())}


def case_name(shape: str, condition: str) -> str:
    return f"{shape}_{condition}"


def chains(shape: tuple, sms: int) -> tuple[int, int, int]:
    """(blocks, warps per block, chains) of a shape on ``sms`` SMs."""
    _, per_sm, warps = shape
    blocks = 1 if per_sm is None else per_sm * sms
    return blocks, warps, blocks * warps


def per_load(records: Sequence[Sequence[int]], steps: int = STEPS) -> dict:
    """Cycles per load over warps: total (median, p10, p90) and the median of each quarter."""
    totals = sorted(r[0] / steps for r in records)
    quarters = [pc.median([r[1 + q] / (steps // 4) for r in records]) for q in range(4)]
    return {"value": pc.median(totals), "p10": pc.percentile(totals, 10), "p90": pc.percentile(totals, 90),
            "n": len(totals), "by_quarter": quarters}


def summarize(res: dict) -> dict:
    """Per shape: dirty and clean cycles per load and ``extra_cycles`` = dirty - clean (medians)."""
    out = {}
    for name, _, _ in SHAPES:
        d, c = res["cases"].get(case_name(name, "dirty")), res["cases"].get(case_name(name, "clean"))
        if d and c:
            out[name] = {"dirty_cycles": d["cycles_per_load"]["value"], "clean_cycles": c["cycles_per_load"]["value"],
                         "extra_cycles": d["cycles_per_load"]["value"] - c["cycles_per_load"]["value"],
                         "dirty_by_quarter": d["cycles_per_load"]["by_quarter"],
                         "clean_by_quarter": c["cycles_per_load"]["by_quarter"]}
    return out


def format_table(res: dict) -> str:
    lines = [f"{'shape':8s} {'dirty cyc':>10s} {'clean cyc':>10s} {'extra':>8s}   dirty by quarter"]
    for name, row in summarize(res).items():
        q = " ".join(f"{v:7.0f}" for v in row["dirty_by_quarter"])
        lines.append(f"{name:8s} {row['dirty_cycles']:10.0f} {row['clean_cycles']:10.0f} {row['extra_cycles']:8.0f}   {q}")
    return "\n".join(lines)


# ----- GPU side ------------------------------------------------------------------------------------------
def run_probe(quick: bool = False) -> dict:
    import cupy as cp  # noqa: PLC0415

    from validation.calibration.flush_probe import read_kernel_source  # noqa: PLC0415
    from validation.harness.timing import L2Flusher, time_gpu  # noqa: PLC0415

    sms, _ = pc.device_facts(cp)
    mod = cp.RawModule(code=KERNEL_SRC.read_text() + read_kernel_source("dc_sweep"))
    init, chase, sweep_k = (mod.get_function(n) for n in ("dc_init", "dc_chase", "dc_sweep"))
    flush = L2Flusher(cp)
    sweep_buf = cp.random.random(flush.nbytes // 4, dtype=cp.float32)
    sweep_out = cp.zeros(sms * 8, dtype=cp.float32)

    def sweep():
        sweep_k((sms * 8,), (256,), (sweep_buf, cp.int64(sweep_buf.size // 4), sweep_out))

    reps = QUICK_REPS if quick else REPS
    res: dict = {"meta": pc.collect_metadata(), "sm_count": sms, "steps": STEPS, "stride_bytes": STRIDE,
                 "reps": reps, "flush_bytes": flush.nbytes, "cases": {}, "errors": {}}
    for shape in SHAPES:
        blocks, warps, n = chains(shape, sms)
        buf = cp.zeros(n * STEPS * STRIDE // 8, dtype=cp.uint64)
        init((sms * 4,), (256,), (buf, cp.int64(STEPS), cp.int64(n)))
        rec = cp.zeros(n * REC, dtype=cp.int64)
        for cond in CONDITIONS:
            name = case_name(shape[0], cond)
            try:
                args = (buf, cp.int64(STEPS), cp.int32(STEPS), rec)
                t = time_gpu(lambda a=args, g=blocks, w=warps: chase((g,), (32 * w,), a),
                             warmup=WARMUP, reps=reps, min_reps=min(MIN_REPS, reps), flusher=flush,
                             before=sweep if cond == "clean" else None, budget_s=5.0)
                raw = rec.get().reshape(n, REC).tolist()
                res["cases"][name] = {"shape": shape[0], "blocks": blocks, "warps": warps, "condition": cond,
                                      "cycles_per_load": per_load(raw), "event_median_s": t.median_s,
                                      "event_p10_s": t.p10_s, "event_p90_s": t.p90_s, "reps": t.reps}
            except Exception as exc:  # noqa: BLE001 - one failed case must not lose the others
                res["errors"][name] = f"{type(exc).__name__}: {exc}"
    res["summary"] = summarize(res)
    return res


def main(argv: Sequence[str] | None = None) -> int:
    ap = pc.probe_parser("dirty_chase_probe", __doc__.splitlines()[0], RESULT_FILE,
                         f"{QUICK_REPS} timed runs a case instead of {REPS}")
    args = ap.parse_args(argv)
    why = pc.gpu_missing()
    if why:
        return pc.no_gpu_exit("dirty_chase_probe", why)
    t0 = time.perf_counter()
    res = run_probe(quick=args.quick)
    res["meta"].update(quick=bool(args.quick), probe_wall_s=time.perf_counter() - t0)
    return pc.write_probe_result(args.out, RESULT_FILE, res, format_table(res))


if __name__ == "__main__":
    sys.exit(main())
