"""Do the warp schedulers favour the oldest block on an SM? Blocks that share an SM, timed segment by segment.

Issue #10: in the GEMM suite's traces (validation/studies/schedule_age.py) the younger blocks of an SM run
slower per segment than the oldest. The hypothesis is that the warp schedulers pick the oldest ready warp
(greedy-then-oldest), so when the SM is saturated the oldest block's warps take the issue slots first. This
probe isolates that with no DRAM traffic: exactly ``k`` blocks per SM (k in :data:`BLOCKS_PER_SM`, each of
:data:`THREADS` threads; dynamic shared memory pins the count, the carveout is set to all shared memory) all
resident at once, every block running :data:`SEGMENTS` segments of a fixed loop body (``age_probe.cu``):

================  =============================================================================================
``ffma_ilp``      8 independent FFMA chains per thread: issue / FP32-pipe bound at every k (the contended case)
``ffma_chain``    one dependent FFMA chain per thread: latency bound (no contention) while a scheduler holds
                  fewer than 4 warps (k <= 2 at 4 warps per block); contended beyond (k = 8: demand 2x the issue)
``lds``           8 independent conflict-free 4-byte shared loads per trip: shared-memory pipe bound
``l2_chase``      dependent 128-byte loads (ld.global.cg) around a 4 MiB ring that stays in the L2:
                  L2-latency bound (one request per warp in flight; no contention: the control)
================  =============================================================================================

Thread 0 of each block records %smid, clock64 and %globaltimer at loop start (after a barrier), at the end
of each segment (warp 0's progress) and at block end (after a barrier). The analysis (:func:`analyse_runs`,
pure) orders each SM's blocks in two ways, age rank 0 the oldest: by block index (``block``: the grid is one
wave and the block scheduler hands blocks out in index order, so this is the dispatch order) and by start
clock64 after the block's first barrier (``start``, the SM's own counter; the blocks of an SM start within
tens of clocks of each other at k <= 4, so that order says little there). Per (order, body, k), over the
SMs that held exactly k blocks and over the repetitions: the median of each rank's loop time over the
oldest's (``loop_ratio``: 1.00 for equal sharing; oldest-first gives ratios rising with rank, the oldest
done near T/k), each rank's median finish time as a fraction of the SM's span (``finish_frac``), the share
of SMs whose blocks finished in age order (``age_order_finish_share``; a coin toss where blocks finish
together), and each rank's segment times over the oldest's mean segment (``segment_ratio``). Residency:
every SM must hold exactly k blocks and the last block must start before the first one ends
(``resident``); a row where that fails is an error (exit status 1).

``python -m validation.calibration.age_probe [--out DIR] [--quick]`` writes ``DIR/age_probe.json`` (the raw
records, %globaltimer values relative to ``ns_base``, plus the analysis) and prints the tables; about 5 s
on an H200, 2.6 s of it the probe (``--quick``: 4 s), the rest nvcc and the metadata. ``--analyse FILE``
re-runs the analysis on a written file without a GPU. Without a GPU (and no ``--analyse``) it says so and
exits 2.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from validation.calibration import probe_common as pc

KERNEL_SRC = Path(__file__).resolve().with_suffix(".cu")
RESULT_FILE = "age_probe.json"
ARCH = "sm_90"

# must match the #defines of age_probe.cu (tests/test_age_probe.py checks that they do)
THREADS = 128
SEGMENTS = 8
REC = 24
LINE_WORDS = 32

#: record fields (age_probe.cu's layout)
F_SMID, F_START_CLK, F_START_NS = 0, 1, 2
F_MARK_CLK, F_MARK_NS = 3, 3 + SEGMENTS
F_END_CLK, F_END_NS, F_BLOCK = 3 + 2 * SEGMENTS, 4 + 2 * SEGMENTS, 5 + 2 * SEGMENTS
NS_FIELDS = (F_START_NS, *range(F_MARK_NS, F_MARK_NS + SEGMENTS), F_END_NS)

#: body -> (kernel, loop trips per segment, SASS mnemonic of the loop); trips sized for about 1 ms of loop
#: per block at k = 1 (ffma_ilp: 128 FFMA ~ 128 cycles a trip; ffma_chain: 16 x 4 cycles; lds: 4 warps x 8
#: loads at about one per clock; l2_chase: 8 x several hundred cycles)
BODIES = {
    "ffma_ilp": ("age_ffma_ilp", 2000, "FFMA"),
    "ffma_chain": ("age_ffma_chain", 4000, "FFMA"),
    "lds": ("age_lds", 8000, "LDS"),
    "l2_chase": ("age_l2_chase", 64, "LDG"),
}
BLOCKS_PER_SM = (1, 2, 4, 8)
#: the two age orders of an SM's blocks (:func:`by_sm_in_age_order`)
ORDERS = ("block", "start")
ORDER_WORDS = {"block": "block index: the dispatch order of the one-wave grid",
               "start": "start clock64 after the block's first barrier"}
REPS = 3
QUICK_REPS = 2
QUICK_DIVISOR = 4  # --quick: a quarter of the trips
CHASE_LINES = 32768  # 4 MiB ring of 128-byte lines: far beyond the L1, well inside the H200's 50 MiB L2
CHASE_SEED = 10
#: shared memory the SM hands out (bytes) when the device does not say (H100/H200: 228 KiB, CUDA C++
#: guide "Compute Capability 9.0"), and what it reserves per block (1 KiB, ibid.)
DEFAULT_SMEM_PER_SM_BYTES = 228 * 1024
DEFAULT_RESERVED_SMEM_PER_BLOCK_BYTES = 1024
SMEM_ALLOC_UNIT_BYTES = 128  # shared-memory allocation granularity (CUDA occupancy calculator, cc 9.0)
MIN_DYNAMIC_SMEM_BYTES = 16 * 1024  # age_lds reads AGE_LDS_WORDS = 4096 words of it
CARVEOUT_MAX_SHARED = 100  # percent: all of the unified L1/shared memory as shared memory


# ----- pure ----------------------------------------------------------------------------------------------
def smem_for_blocks(k: int, smem_per_sm_bytes: int, reserved_per_block_bytes: int) -> int:
    """Dynamic shared memory per block (bytes) such that exactly ``k`` blocks fit on an SM: each block takes
    about ``smem_per_sm / (k + 0.5)`` with its reserved part (k fit, k + 1 do not, with margin either way),
    rounded down to :data:`SMEM_ALLOC_UNIT_BYTES`. ValueError when ``k`` < 1 or it leaves less than
    :data:`MIN_DYNAMIC_SMEM_BYTES`."""
    if k < 1:
        raise ValueError(f"k = {k}: blocks per SM must be at least 1")
    per_block = int(smem_per_sm_bytes / (k + 0.5)) // SMEM_ALLOC_UNIT_BYTES * SMEM_ALLOC_UNIT_BYTES
    dyn = per_block - reserved_per_block_bytes
    if dyn < MIN_DYNAMIC_SMEM_BYTES:
        raise ValueError(f"k = {k}: {dyn} bytes of shared memory per block, under {MIN_DYNAMIC_SMEM_BYTES}")
    return dyn


def parse_blocks(raw: Sequence[int], blocks: int) -> list[dict]:
    """Per-block dicts (smid, block, start/end clk and ns, mark_clk, mark_ns) of a flat record list;
    ValueError on a bad count or a block that recorded no time."""
    cols = pc.record_columns(raw, blocks, REC)
    out = []
    for b in range(blocks):
        rec = [c[b] for c in cols]
        d = {"smid": rec[F_SMID], "block": rec[F_BLOCK], "start_clk": rec[F_START_CLK], "start_ns": rec[F_START_NS],
             "end_clk": rec[F_END_CLK], "end_ns": rec[F_END_NS],
             "mark_clk": rec[F_MARK_CLK:F_MARK_CLK + SEGMENTS], "mark_ns": rec[F_MARK_NS:F_MARK_NS + SEGMENTS]}
        if d["end_clk"] <= d["start_clk"] or d["block"] != b:
            raise ValueError(f"records: block {b} has no loop time or a wrong block id (kernel did not run?)")
        out.append(d)
    return out


def by_sm_in_age_order(blocks: list[dict], order: str = "block") -> dict[int, list[dict]]:
    """The blocks of each SM, oldest first. ``order`` "block": by block index (the dispatch order: the whole
    grid is one wave and the block scheduler hands blocks out in index order); "start": by start clock64
    (the SM's own counter, ties by block). ValueError naming ``order`` otherwise."""
    if order not in ORDERS:
        raise ValueError(f"order = {order!r}: must be one of {ORDERS}")
    sms: dict[int, list[dict]] = {}
    for b in blocks:
        sms.setdefault(b["smid"], []).append(b)
    key = (lambda b: b["block"]) if order == "block" else (lambda b: (b["start_clk"], b["block"]))
    return {s: sorted(bs, key=key) for s, bs in sorted(sms.items())}


def residency(blocks: list[dict], k: int, sm_count: int) -> dict:
    """Whether all blocks were resident at once: every one of ``sm_count`` SMs held exactly ``k`` blocks and
    the last block started (%globaltimer) before the first one ended; with the start spread (ns)."""
    sms = by_sm_in_age_order(blocks)
    counts = [len(bs) for bs in sms.values()]
    last_start = max(b["start_ns"] for b in blocks)
    first_end = min(b["end_ns"] for b in blocks)
    spread_in_sm = [max(b["start_clk"] for b in bs) - min(b["start_clk"] for b in bs) for bs in sms.values()]
    ok_counts = len(sms) == sm_count and all(c == k for c in counts)
    return {"resident": bool(ok_counts and last_start < first_end), "sms": len(sms),
            "sms_with_k": sum(c == k for c in counts), "max_blocks_on_an_sm": max(counts),
            "start_spread_ns": last_start - min(b["start_ns"] for b in blocks),
            "first_end_after_start_ns": first_end - min(b["start_ns"] for b in blocks),
            "median_start_spread_in_sm_clk": statistics.median(spread_in_sm)}


def sm_ranks(bs: list[dict]) -> dict:
    """One SM's blocks (oldest first) -> per age rank: loop clk, loop ns, finish position (0: first to end),
    finish time as a fraction of the SM's span (first start to last end, clk), segment clks."""
    t0 = min(b["start_clk"] for b in bs)
    span = max(b["end_clk"] for b in bs) - t0
    finish_order = sorted(range(len(bs)), key=lambda r: (bs[r]["end_clk"], r))
    segs = []
    for b in bs:
        marks = [b["start_clk"], *b["mark_clk"]]
        segs.append([marks[m + 1] - marks[m] for m in range(SEGMENTS)])
    return {"loop_clk": [b["end_clk"] - b["start_clk"] for b in bs],
            "loop_ns": [b["end_ns"] - b["start_ns"] for b in bs],
            "finish_pos": [finish_order.index(r) for r in range(len(bs))],
            "finish_frac": [(b["end_clk"] - t0) / span for b in bs],
            "segment_clk": segs,
            "start_is_block_order": sorted(bs, key=lambda b: (b["start_clk"], b["block"])) == sorted(
                bs, key=lambda b: b["block"])}


def analyse_runs(runs: Sequence[list[dict]], k: int, sm_count: int, order: str = "block") -> dict:
    """The analysis of one (body, k) over its repetitions (each a list of block dicts), age rank by ``order``
    (:func:`by_sm_in_age_order`): residency of each run, and over all SMs of resident runs that held exactly ``k`` blocks, per age rank the medians of
    loop time / the oldest's (clk, and ns as a cross-check), loop clk, finish position and fraction, and
    segment time / the oldest's mean segment; the share of SMs that finished in age order."""
    res = [residency(blocks, k, sm_count) for blocks in runs]
    per_sm = [sm_ranks(bs) for blocks, r in zip(runs, res, strict=True) if r["resident"]
              for bs in by_sm_in_age_order(blocks, order).values() if len(bs) == k]
    out = {"k": k, "order": order, "residency": res, "sms_used": len(per_sm)}
    if not per_sm:
        return out
    ranks = range(k)
    med = statistics.median
    out["loop_ratio"] = [med(s["loop_clk"][r] / s["loop_clk"][0] for s in per_sm) for r in ranks]
    out["loop_ratio_ns"] = [med(s["loop_ns"][r] / max(s["loop_ns"][0], 1) for s in per_sm) for r in ranks]
    out["loop_clk"] = [med(s["loop_clk"][r] for s in per_sm) for r in ranks]
    out["finish_pos"] = [med(s["finish_pos"][r] for s in per_sm) for r in ranks]
    out["finish_frac"] = [med(s["finish_frac"][r] for s in per_sm) for r in ranks]
    out["age_order_finish_share"] = sum(s["finish_pos"] == list(ranks) for s in per_sm) / len(per_sm)
    out["start_is_block_order_share"] = sum(s["start_is_block_order"] for s in per_sm) / len(per_sm)
    out["segment_ratio"] = [[med(s["segment_clk"][r][m] / (s["loop_clk"][0] / SEGMENTS) for s in per_sm)
                             for m in range(SEGMENTS)] for r in ranks]
    return out


def analyse_result(data: dict) -> dict:
    """The analysis (:func:`analyse_runs`) of every (body, k) row of a results file's raw records, in each
    age order of :data:`ORDERS`: {order: {row key: analysis}}."""
    sm_count = int(data["meta"]["sm_count"])
    out: dict = {order: {} for order in ORDERS}
    for key, row in data["rows"].items():
        runs = [parse_blocks(raw, row["blocks"]) for raw in row["raw"]]
        for order in ORDERS:
            out[order][key] = analyse_runs(runs, row["k"], sm_count, order)
    return out


def format_table(analysis: dict, order: str) -> str:
    """One line per (body, k) of one age ``order``: residency, each rank's loop ratio and finish fraction,
    the share of SMs finishing in age order."""
    lines = [f"age rank by {order} ({ORDER_WORDS[order]})",
             f"{'body.k':16s} {'resident':9s} {'loop / oldest (by age rank)':38s} {'finish / SM span':38s} in-order"]
    for key, a in analysis[order].items():
        res = "yes" if all(r["resident"] for r in a["residency"]) else "NO"
        if "loop_ratio" not in a:
            lines.append(f"{key:16s} {res:9s} (no SM with exactly {a['k']} blocks in a resident run)")
            continue
        lr = " ".join(f"{v:.2f}" for v in a["loop_ratio"])
        ff = " ".join(f"{v:.2f}" for v in a["finish_frac"])
        lines.append(f"{key:16s} {res:9s} {lr:38s} {ff:38s} {a['age_order_finish_share']:.2f}")
    return "\n".join(lines)


def chase_ring(lines: int, seed: int):
    """The L2 ring (numpy uint32, ``lines`` x :data:`LINE_WORDS`): line 0 holds the line count, lines
    1..lines-1 form one random cycle, every word of a line holding the next line's index."""
    import numpy as np  # noqa: PLC0415

    if lines < 3:
        raise ValueError(f"lines = {lines}: the ring needs at least 3 lines")
    order = np.random.default_rng(seed).permutation(lines - 1).astype(np.uint32) + 1
    nxt = np.zeros(lines, dtype=np.uint32)
    nxt[order] = np.roll(order, -1)
    nxt[0] = lines
    return np.repeat(nxt, LINE_WORDS)


def sass_checks(workdir: Path) -> dict:
    """Per body: the mnemonic counts of its hot loop (needs nvcc and cuobjdump; else the error)."""
    return pc.loop_sass_checks(workdir, ARCH, KERNEL_SRC, {body: (kernel, op) for body, (kernel, _, op) in BODIES.items()})


# ----- GPU -----------------------------------------------------------------------------------------------
def run_rows(cp, module, sm_count: int, smem_per_sm: int, reserved: int, quick: bool,
             reps: int) -> tuple[dict, list[str]]:  # pragma: no cover - needs a GPU
    """Every (body, k) row: ``reps`` launches (after one warm-up) of exactly k blocks per SM, the raw records
    with %globaltimer values relative to the run's first start (``ns_base``); the warnings met (a carveout
    CuPy would not set: the residency check still says whether k blocks fit)."""
    ring = cp.asarray(chase_ring(CHASE_LINES, CHASE_SEED))
    out_buf = cp.zeros(THREADS, dtype=cp.uint32)
    rows, warnings = {}, []
    for body, (kernel, seg_iters, _) in BODIES.items():
        iters = max(1, seg_iters // QUICK_DIVISOR) if quick else seg_iters
        for k in BLOCKS_PER_SM:
            smem = smem_for_blocks(k, smem_per_sm, reserved)
            fn = pc.get_kernel(module, kernel, smem)
            try:
                fn.preferred_shared_memory_carveout = CARVEOUT_MAX_SHARED
            except Exception as exc:  # noqa: BLE001
                warnings.append(f"{body}.k{k}: carveout not set ({type(exc).__name__}: {exc})")
            blocks = k * sm_count
            rec = cp.zeros(REC * blocks, dtype=cp.int64)
            args = (cp.int32(iters), cp.int32(0), rec, out_buf, ring)
            fn((blocks,), (THREADS,), args, shared_mem=smem)  # warm-up (and the ring into the L2)
            cp.cuda.runtime.deviceSynchronize()
            raws, ns_bases = [], []
            for _ in range(reps):
                rec.fill(0)
                fn((blocks,), (THREADS,), args, shared_mem=smem)
                cp.cuda.runtime.deviceSynchronize()
                raw = [int(v) for v in rec.get()]
                base = min(raw[b * REC + F_START_NS] for b in range(blocks))
                for b in range(blocks):
                    for f in NS_FIELDS:
                        raw[b * REC + f] -= base
                raws.append(raw)
                ns_bases.append(base)
            rows[f"{body}.k{k}"] = {"body": body, "kernel": kernel, "k": k, "blocks": blocks, "threads": THREADS,
                                    "seg_iters": iters, "segments": SEGMENTS, "dynamic_smem_bytes": smem,
                                    "attributes": pc.kernel_attributes(fn), "ns_base": ns_bases, "raw": raws}
    return rows, warnings


def run_probe(quick: bool) -> dict:  # pragma: no cover - needs a GPU
    import cupy as cp

    t_start = time.time()
    meta = pc.collect_metadata()
    sm_count, arch = pc.device_facts(cp)
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    smem_per_sm = int(props.get("sharedMemPerMultiprocessor", DEFAULT_SMEM_PER_SM_BYTES))
    reserved = int(props.get("reservedSharedMemPerBlock", DEFAULT_RESERVED_SMEM_PER_BLOCK_BYTES))
    reps = QUICK_REPS if quick else REPS
    with tempfile.TemporaryDirectory() as tmp:  # the cubin must outlive the runs: CuPy loads it lazily
        built = pc.build_module(cp, KERNEL_SRC, ARCH, Path(tmp))
        sass = sass_checks(Path(tmp))
        rows, warnings = run_rows(cp, built.module, sm_count, smem_per_sm, reserved, quick, reps)
    meta = {**meta, "sm_count": sm_count, "arch": arch, "quick": quick, "reps": reps, "rec_longs": REC,
            "smem_per_sm_bytes": smem_per_sm, "reserved_smem_per_block_bytes": reserved,
            "chase_lines": CHASE_LINES, "compiled_by": built.compiled_by, "build_error": built.error,
            "source": KERNEL_SRC.name, "probe_wall_s": time.time() - t_start}
    data = {"meta": meta, "sass": sass, "warnings": warnings, "rows": rows}
    data["analysis"] = analyse_result(data)
    data["errors"] = [f"{key}: not all {a['k']} blocks per SM resident at once" for key, a in
                      data["analysis"]["block"].items() if not all(r["resident"] for r in a["residency"])]
    return data


def main(argv: Sequence[str] | None = None) -> int:
    ap = pc.probe_parser("age_probe", __doc__.splitlines()[0], RESULT_FILE,
                         f"{QUICK_REPS} repetitions of a 1/{QUICK_DIVISOR} loop instead of {REPS} of the full one")
    ap.add_argument("--analyse", metavar="FILE", default=None,
                    help="re-run the analysis on a written age_probe.json (no GPU) and print the table")
    a = ap.parse_args(argv)
    if a.analyse:
        import json  # noqa: PLC0415

        analysis = analyse_result(json.loads(Path(a.analyse).read_text()))
        print("\n\n".join(format_table(analysis, order) for order in ORDERS))
        return 0
    why = pc.gpu_missing()
    if why:
        return pc.no_gpu_exit("age_probe", why)
    data = run_probe(a.quick)
    path = pc.results_dir(a.out, data["meta"]) / RESULT_FILE
    pc.write_json(path, data, indent=None)
    print("\n\n".join(format_table(data["analysis"], order) for order in ORDERS))
    for w in data["warnings"]:
        print(f"warning: {w}")
    for e in data["errors"]:
        print(f"error: {e}")
    print(f"wrote {path} in {data['meta']['probe_wall_s']:.1f} s")
    return 1 if data["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
