"""HBM delivery to many blocks that each stream their own tile a k-step: bandwidth and k-step latency.

``python -m validation.calibration.hbm_tiles_probe [--out DIR] [--quick]`` writes ``<DIR>/hbm_tiles.json``
(default DIR: ``validation/results/<gpu>/calibration``); without a GPU it says so in one line and exits 2.
About 20 s of GPU time (``--quick``: 2 timed runs a case instead of :data:`REPS`; ``--select a,b``: only
the cases whose names contain ``a`` or ``b``, e.g. ``f512`` or ``contig_``).

The kernel (``ht_tiles`` in ``hbm_tiles_probe.cu``) is dgstaged_outer_8x8's staging k-step without the FFMA:
barrier, :data:`VEC_PER_THREAD` 16-byte ``__ldcg`` loads per thread of the block's tile (4 warps: 4 KiB =
128 rows x 32 bytes; 8 warps: 8 KiB), their shared stores, barrier. Cases: :data:`LAYOUTS` x
:data:`BLOCKS_PER_SM` x :data:`WARPS` x :data:`FFMA_PER_THREAD` (after the staging, that many FFMA
per thread in :data:`FFMA_CHAINS` independent chains: 0, the staging alone; 512, dgstaged_outer_8x8's math,
which the SM's blocks issue in turn, so each SM asks HBM for tiles at dgstaged's pace), on every SM (``blocks_per_sm`` x SMs blocks, held to that many per SM
by their shared memory, as engine_check's benchmarks are: :func:`smem_bytes`). Layouts (:func:`layout_params`):

- ``none``: no loads (the stored values come from registers): the k-step's cost without HBM;
- ``contig``: each k-step a fresh contiguous tile (dgstaged's layout; block regions ``iters`` tiles apart);
- ``pitch``: the block's rows :data:`PITCH_BYTES` apart, each k-step the next 32 bytes of every row (a
  row-major GEMM's A tile: four k-steps share each 128-byte line, so ``step_by_phase4`` tells whether the
  L2 fetched the whole line from DRAM at the first of them);
- ``pitch_line``: rows :data:`PITCH_BYTES` apart, each k-step 32 bytes of a line never touched before.

L2 flushed (validation/harness/timing.py L2Flusher) before every timed run; each run is queued behind a
clock64 spin (probe_common.GatedTimer) and timed by CUDA events. Per case: the bytes loaded over the event
time (``event_bytes_per_s``, median over runs) and over the span of the blocks' %globaltimer windows
(``span_bytes_per_s``), the blocks found on each SM (%smid), and from the last run the clock64 cycles of
every block's every k-step (thread 0, barrier to barrier): ``step_cycles`` (median, p10, p90 over blocks
and k-steps after the first), ``first_step_cycles``, ``block_median_step_cycles`` (over blocks of each
block's median) and ``step_by_phase4`` (medians of k-steps ``it % 4`` = 0..3). Raw: the event times, the
per-block records and block 0's k-step cycles.

Counters (optional; the probe runs without them): under Nsight Compute,
``ncu --clock-control none --cache-control all -k regex:ht_tiles --csv --page raw --metrics``
:data:`NCU_METRICS` ``python -m validation.calibration.hbm_tiles_probe --quick --select _4w_f512 --out DIR``
gives, one CSV row per launch in the JSON's case order (1 warm-up + :data:`QUICK_REPS` launches a case), each launch's DRAM bytes read
(whether the pitched layouts read whole lines or sectors from DRAM), the L2 sectors the loads looked up and
missed, and the DRAM and SM clocks over the kernel.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from validation.calibration import probe_common as pc

KERNEL_SRC = Path(__file__).resolve().with_suffix(".cu")
RESULT_FILE = "hbm_tiles.json"
ARCH = "sm_90"

# must match the #defines of hbm_tiles_probe.cu (tests/test_hbm_tiles_probe.py checks that they do)
REC = 6
VEC_PER_THREAD = 2  # dgstaged_outer_8x8's TM / 4 float4 of A per thread per k-step (microbench.cu)
FFMA_CHAINS = 8  # independent FFMA chains of the k-step's math

LANES = 32
VEC_BYTES = 16
ROW_BYTES = 32  # one k-step's 8 floats of a tile row (dgstaged's k-step: 8 k)
LINE_BYTES = 128  # an L2 line (four 32-byte sectors; H100 tuning guide / REFERENCE.md)
PITCH_BYTES = 16 * 1024  # a row of a 4096-float row-major matrix: rows far apart (other DRAM pages)
ITERS = 128  # k-steps per block; pitch_line's 128 x 128 bytes fill one PITCH_BYTES row
SMEM_PER_SM_BYTES = 227 * 1024  # as engine_check.SMEM_PER_SM_BYTES: what the benchmarks divide among blocks
SMEM_SLACK_BYTES = 2048  # as engine_check's outer_program: smem per block = SMEM_PER_SM_BYTES // bps - 2048
LAYOUTS = ("none", "contig", "pitch", "pitch_line", "pitch64", "pitch128")
#: the pitched layouts with wider row slices a k-step: 64 bytes (half a line) and 128 (a whole line) of
#: each row, rows PITCH_BYTES apart (how the DRAM rate of pitched streams depends on the slice)
SLICE_BYTES = {"pitch64": 64, "pitch128": 128}
BLOCKS_PER_SM = (1, 2, 4, 8)
WARPS = (4, 8)
#: FFMA per thread per k-step: none (the staging alone) and dgstaged_outer_8x8's 8 rounds x 8 x 8
FFMA_PER_THREAD = (0, 512)
REPS = 5
QUICK_REPS = 2
SPIN_CYCLES = 200_000  # ~0.1 ms at 1.98 GHz: the launch's enqueueing hides behind it
#: Nsight Compute metrics for the optional counter run, each one this repository's ncu runs already
#: collected on the H200 (validation/harness/ncu.py, the calibration probes): DRAM bytes read (more than
#: the tile bytes: DRAM reads whole lines or 64-byte pairs for 32-byte requests), the L2 sectors and requests
#: of the SMs' loads (srcunit tex: the LSU path of ld.global) and the sectors that missed, the DRAM and SM
#: clocks, the kernel's time. No DRAM row-buffer (page) hit metric is named: none is in the repository's
#: runs or known to be valid on sm_90 here, and ``ncu --query-metrics`` cannot be run on this side.
NCU_METRICS = ("dram__bytes_read.sum", "dram__bytes_read.sum.per_second",
               "lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum",
               "lts__t_requests_srcunit_tex_op_read.sum", "dram__cycles_elapsed.avg.per_second",
               "sm__cycles_elapsed.avg.per_second", "gpu__time_duration.sum")


# ----- pure ----------------------------------------------------------------------------------------------
def tile_bytes(warps: int) -> int:
    """Bytes of a block's k-step tile: :data:`VEC_PER_THREAD` float4 per thread (ValueError: warps < 1)."""
    if warps < 1:
        raise ValueError(f"warps must be >= 1, got {warps}")
    return VEC_PER_THREAD * warps * LANES * VEC_BYTES


def smem_bytes(blocks_per_sm: int) -> int:
    """Dynamic shared memory per block that leaves room for ``blocks_per_sm`` blocks on an SM and no more
    (engine_check's rule), never less than the tile (ValueError: blocks_per_sm < 1)."""
    if blocks_per_sm < 1:
        raise ValueError(f"blocks_per_sm must be >= 1, got {blocks_per_sm}")
    return SMEM_PER_SM_BYTES // blocks_per_sm - SMEM_SLACK_BYTES


def layout_params(layout: str, warps: int, iters: int = ITERS) -> dict:
    """The kernel's address arguments for ``layout``: ``loads`` (0/1), ``row_bytes``, ``pitch``,
    ``step_bytes``, ``block_stride`` (bytes) and ``footprint_bytes`` (one block's span). ValueError on an
    unknown layout or on iters that take pitch_line beyond its row."""
    tb = tile_bytes(warps)
    rows = tb // ROW_BYTES
    if iters < 1:
        raise ValueError(f"iters must be >= 1, got {iters}")
    if layout in ("none", "contig"):
        p = {"loads": int(layout == "contig"), "row_bytes": ROW_BYTES, "pitch": ROW_BYTES, "step_bytes": tb,
             "block_stride": iters * tb}
    elif layout in ("pitch", "pitch_line"):
        step = ROW_BYTES if layout == "pitch" else LINE_BYTES
        if iters * step > PITCH_BYTES:
            raise ValueError(f"iters: {iters} k-steps of {step} bytes pass the {PITCH_BYTES}-byte pitch")
        p = {"loads": 1, "row_bytes": ROW_BYTES, "pitch": PITCH_BYTES, "step_bytes": step,
             "block_stride": rows * PITCH_BYTES}
    elif layout in SLICE_BYTES:
        width = SLICE_BYTES[layout]
        if iters * width > PITCH_BYTES:
            raise ValueError(f"iters: {iters} k-steps of {width} bytes pass the {PITCH_BYTES}-byte pitch")
        p = {"loads": 1, "row_bytes": width, "pitch": PITCH_BYTES, "step_bytes": width,
             "block_stride": (tb // width) * PITCH_BYTES}
    else:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    p["footprint_bytes"] = p["block_stride"]
    return p


def vec_offsets(params: dict, warps: int, block: int, it: int) -> list[int]:
    """Byte offsets of the float4 block ``block`` loads at k-step ``it`` (the kernel's address rule)."""
    threads = warps * LANES
    row_vec = params["row_bytes"] // VEC_BYTES
    base = block * params["block_stride"] + it * params["step_bytes"]
    return [base + (e // row_vec) * params["pitch"] + (e % row_vec) * VEC_BYTES
            for e in range(VEC_PER_THREAD * threads)]


def cases(layouts: Sequence[str] = LAYOUTS) -> list[tuple[str, int, int, int]]:
    """(layout, blocks_per_sm, warps, ffma per thread) of every case, in run order."""
    return [(lay, bps, w, f) for f in FFMA_PER_THREAD for lay in layouts for w in WARPS for bps in BLOCKS_PER_SM]


def case_name(layout: str, blocks_per_sm: int, warps: int, ffma: int) -> str:
    return f"{layout}_{blocks_per_sm}b_{warps}w_f{ffma}"


def summarize_case(rec_raw: Sequence[int], steps_raw: Sequence[int], blocks: int, iters: int,
                   bytes_loaded: int, event_s: Sequence[float]) -> dict:
    """One case's figures from its per-block records, k-step cycles (``blocks`` x ``iters``) and event
    times. ValueError on counts that do not match."""
    cols = pc.record_columns(rec_raw, blocks, REC)
    c0, c1, g0, g1, smid, _ = cols
    steps = [int(v) for v in steps_raw]
    if len(steps) != blocks * iters:
        raise ValueError(f"steps_raw: {len(steps)} values, expected blocks x iters = {blocks * iters}")
    if not event_s:
        raise ValueError("event_s must not be empty")
    per_sm: dict[int, int] = {}
    for s in smid:
        per_sm[s] = per_sm.get(s, 0) + 1
    span_ns = max(g1) - min(g0)
    later = [steps[b * iters + it] for b in range(blocks) for it in range(1, iters)]
    first = [steps[b * iters] for b in range(blocks)]
    block_medians = [pc.median(steps[b * iters + 1:(b + 1) * iters] or steps[b * iters:(b + 1) * iters])
                     for b in range(blocks)]
    # k-steps it % 4 == ph from the second group of four on (the first holds the cold first k-step)
    phases = {str(ph): pc.median([steps[b * iters + it] for b in range(blocks) for it in range(4 + ph, iters, 4)]
                                 or [0])
              for ph in range(4)}
    ev = pc.summarize(event_s)
    return {"bytes_loaded": bytes_loaded, "event_s": ev,
            "event_bytes_per_s": bytes_loaded / ev["value"] if bytes_loaded else 0.0,
            "span_s": span_ns * 1e-9, "span_bytes_per_s": bytes_loaded / (span_ns * 1e-9) if bytes_loaded and span_ns > 0 else 0.0,
            "block_cycles": pc.summarize([b - a for a, b in zip(c0, c1, strict=True)]),
            "step_cycles": pc.summarize(later or first), "first_step_cycles": pc.summarize(first),
            "block_median_step_cycles": pc.summarize(block_medians), "step_by_phase4": phases,
            "sms_used": len(per_sm), "blocks_per_sm_seen": sorted(set(per_sm.values())),
            # blocks that began after the first block ended: the grid did not run as one wave
            "blocks_started_late": sum(1 for g in g0 if g > min(g1))}


def raw_blocks(rec_raw: Sequence[int], blocks: int) -> dict:
    """The per-block raw values kept in the JSON: k-loop clock64 cycles, %globaltimer start ns after the
    earliest block's start, %smid."""
    c0, c1, g0, _, smid, _ = pc.record_columns(rec_raw, blocks, REC)
    t0 = min(g0)
    return {"block_cycles": [b - a for a, b in zip(c0, c1, strict=True)], "start_ns": [g - t0 for g in g0],
            "smid": smid}


def format_table(res: dict) -> str:
    lines = [f"{'case':22s} {'TB/s ev':>8s} {'TB/s span':>9s} {'step clk':>9s} {'p10..p90':>13s} {'first':>7s} "
             f"{'ph0/1/2/3':>20s}  bps seen, late"]
    for name, r in res.get("cases", {}).items():
        s, ph = r["step_cycles"], r["step_by_phase4"]
        lines.append(f"{name:22s} {r['event_bytes_per_s'] / 1e12:8.3f} {r['span_bytes_per_s'] / 1e12:9.3f} "
                     f"{s['value']:9.0f} {s['p10']:6.0f}..{s['p90']:<6.0f} {r['first_step_cycles']['value']:7.0f} "
                     f"{'/'.join(f'{ph[k]:.0f}' for k in '0123'):>20s}  {r['blocks_per_sm_seen']}, "
                     f"{r['blocks_started_late']}")
    for k, e in res.get("errors", {}).items():
        lines.append(f"{k:22s} FAILED: {e}")
    return "\n".join(lines)


SECTOR_BYTES = 32  # the L2's sector (REFERENCE.md): what a load asks of the L2
NCU_LAUNCHES_PER_CASE = 1 + QUICK_REPS  # the counter run's warm-up and timed launches of each case
#: how far the dense layouts' DRAM bytes may stray from the bytes they load before the counter run is
#: taken as not showing the fetch granularity (the H200's contig/pitch rows: within 0.03%)
GRANULARITY_TOLERANCE = 0.02


def dram_read_granularity_fields(ncu_text: str, record: dict,
                                 result_path: str = "hbm_tiles_ncu/ncu_raw.csv") -> dict:
    """The calibrated profile's ``hbm_read_granularity_bytes``: the DRAM bytes one L2 sector miss reads
    when no neighbouring sector is asked for, from the counter run (``ncu --page raw``, one row per launch,
    :data:`NCU_LAUNCHES_PER_CASE` launches a case in the record's order of its profiled cases).

    ``pitch_line`` loads 32 bytes of a line nobody else touches: its ``dram__bytes_read.sum`` over the
    bytes it loads, times :data:`SECTOR_BYTES`, rounded to whole sectors, is the granularity. The field is
    given only when every ``contig`` and ``pitch`` launch (whose sectors' neighbours are all loaded) reads
    its bytes within :data:`GRANULARITY_TOLERANCE` and every ``pitch_line`` launch gives the same
    granularity; otherwise (or without the counter) no field. ValueError when the CSV's ``ht_tiles``
    launches are not :data:`NCU_LAUNCHES_PER_CASE` per profiled case."""
    from validation.calibration.tc_feed_probe import read_ncu_raw  # noqa: PLC0415

    launches = [d for d in read_ncu_raw(ncu_text) if d.get("Kernel Name") == "ht_tiles"]
    profiled = [k for k in record.get("cases", {}) if k.endswith("_4w_f512")]
    if len(launches) != NCU_LAUNCHES_PER_CASE * len(profiled):
        raise ValueError(f"dram_read_granularity_fields: {len(launches)} ht_tiles launches for {len(profiled)} "
                         f"profiled cases (want {NCU_LAUNCHES_PER_CASE} each)")
    ratios: dict[str, list[float]] = {"contig": [], "pitch": [], "pitch_line": []}
    for i, key in enumerate(profiled):
        layout = key.rsplit("_", 3)[0]
        loaded = record["cases"][key]["bytes_loaded"]
        if layout not in ratios or loaded <= 0:
            continue
        for m in launches[NCU_LAUNCHES_PER_CASE * i:NCU_LAUNCHES_PER_CASE * (i + 1)]:
            dram = m.get("dram__bytes_read.sum")
            if not isinstance(dram, float):
                return {}
            ratios[layout].append(dram / loaded)
    dense = ratios["contig"] + ratios["pitch"]
    if not ratios["pitch_line"] or not dense or max(abs(r - 1) for r in dense) > GRANULARITY_TOLERANCE:
        return {}
    sectors = {round(r) for r in ratios["pitch_line"]}
    worst = max(abs(r - round(r)) for r in ratios["pitch_line"])
    if len(sectors) != 1 or worst > GRANULARITY_TOLERANCE:
        return {}
    g = SECTOR_BYTES * sectors.pop()
    return {"hbm_read_granularity_bytes": {
        "value": g, "p10": g, "p90": g, "n": len(ratios["pitch_line"]), "unit": "bytes",
        "benchmark": f"hbm_tiles_probe under ncu ({result_path}: dram__bytes_read.sum of {len(ratios['pitch_line'])} "
                     f"pitch_line launches, 32 bytes of a fresh line per row, over the bytes loaded: "
                     f"{min(ratios['pitch_line']):.4f}..{max(ratios['pitch_line']):.4f}; contig and pitch "
                     f"{min(dense):.4f}..{max(dense):.4f})",
        "date": record.get("meta", {}).get("date_utc")}}


#: DRAM bytes one access brings, by layout, and how many DRAM bytes a loaded byte costs (pitch_line: the
#: sector's 64-byte pair, hbm_tiles_ncu): an access reads at most a line, at least a 64-byte pair
ACCESS_BYTES = {"contig": 128, "pitch": 64, "pitch_line": 64, "pitch64": 64, "pitch128": 128}
DRAM_PER_LOADED = {"pitch_line": 2.0}
SUBLINE_ACCESS_BYTES = 64


def dram_access_rate_fields(records: Sequence[dict], result_path: str = "hbm_tiles.json, hbm_tiles_slices.json") -> dict:
    """The calibrated profile's ``hbm_accesses_per_s``: DRAM reads of less than a line (64-byte pairs) per
    second when every SM streams tiles, over the saturated rows (8 blocks per SM, no FFMA, 4 and 8 warps)
    of the layouts that read less than a line at a time (rows 16 KiB apart read 32 bytes a k-step, whose
    64-byte pairs serve two k-steps; 64 bytes; 32 bytes of a fresh line, whose pair DRAM reads too): each
    row's bytes loaded per second, times the DRAM bytes a loaded byte costs (:data:`DRAM_PER_LOADED`), over
    64. The median is the field (recorded: 26.4-35.6 G/s). Lines read whole (contiguous tiles, 128 bytes
    of each row) are left out: they reach 3.3-4.3 TB/s, limited by the bytes in flight and the bandwidth,
    not by a count of accesses. No rows, no field."""
    rates = []
    for rec in records:
        for case in rec.get("cases", {}).values():
            layout = case.get("layout")
            if (ACCESS_BYTES.get(layout) == SUBLINE_ACCESS_BYTES and case.get("blocks_per_sm") == max(BLOCKS_PER_SM)
                    and case.get("ffma_per_thread") == 0 and case.get("event_bytes_per_s")):
                rates.append(case["event_bytes_per_s"] * DRAM_PER_LOADED.get(layout, 1.0) / ACCESS_BYTES[layout])
    if not rates:
        return {}
    rates.sort()
    mid = len(rates) // 2
    median = rates[mid] if len(rates) % 2 else (rates[mid - 1] + rates[mid]) / 2
    dates = sorted(r.get("meta", {}).get("date_utc") or "" for r in records)
    return {"hbm_accesses_per_s": {
        "value": median, "p10": rates[0], "p90": rates[-1], "n": len(rates), "unit": "accesses/s",
        "how": f"median of {len(rates)} saturated rows (min..max)",
        "benchmark": f"hbm_tiles_probe ({result_path}: 8 blocks/SM, 4 and 8 warps, no FFMA; layouts "
                     f"{', '.join(k for k, v in ACCESS_BYTES.items() if v == SUBLINE_ACCESS_BYTES)})",
        "date": dates[-1] or None}}


# ----- GPU side ------------------------------------------------------------------------------------------
def select_cases(plan: Sequence[tuple[str, int, int, int]], select: str | None) -> list[tuple[str, int, int, int]]:
    """The cases whose name contains one of the comma-separated parts of ``select`` (None: all);
    ValueError when none does."""
    if not select:
        return list(plan)
    parts = [t.strip() for t in select.split(",") if t.strip()]
    chosen = [c for c in plan if any(t in case_name(*c) for t in parts)]
    if not chosen:
        raise ValueError(f"select: no case name contains any of {parts}")
    return chosen


def run_probe(quick: bool = False, select: str | None = None) -> dict:
    import cupy as cp  # noqa: PLC0415

    from validation.harness.timing import L2Flusher  # noqa: PLC0415

    meta = pc.collect_metadata()
    sms, _ = pc.device_facts(cp)
    tmp = tempfile.TemporaryDirectory()  # the cubin stays until the run ends
    built = pc.build_module(cp, KERNEL_SRC, ARCH, Path(tmp.name), nvrtc_options=(f"--gpu-architecture={ARCH}",))
    compile_info = {"arch": ARCH, "compiled_by": built.compiled_by,
                    "ptxas_warnings": pc.ptxas_warnings(built.log) if built.log else [], "note": built.error}
    reps = QUICK_REPS if quick else REPS
    plan = select_cases(cases(), select)
    need = max(sms * bps * layout_params(lay, w)["block_stride"] for lay, bps, w, _ in plan)
    buf = cp.empty(need, dtype=cp.uint8)
    buf.fill(1)  # non-zero data
    rec = cp.zeros(REC * sms * max(BLOCKS_PER_SM), dtype=cp.int64)
    steps = cp.zeros(sms * max(BLOCKS_PER_SM) * ITERS, dtype=cp.int32)
    flush = L2Flusher(cp)
    timer = pc.GatedTimer(cp, built.module.get_function("ht_spin"), SPIN_CYCLES)
    res: dict = {"meta": meta, "compile": compile_info, "sm_count": sms, "iters": ITERS, "reps": reps,
                 "row_bytes": ROW_BYTES, "pitch_bytes": PITCH_BYTES, "vec_per_thread": VEC_PER_THREAD,
                 "ncu_metrics": list(NCU_METRICS), "cases": {}, "raw": {}, "errors": {}}
    for lay, bps, w, ffma in plan:
        name = case_name(lay, bps, w, ffma)
        try:
            p = layout_params(lay, w)
            blocks, threads, smem = sms * bps, w * LANES, smem_bytes(bps)
            f = pc.get_kernel(built.module, "ht_tiles", smem)
            args = (buf, cp.int32(ITERS), cp.int32(p["loads"]), cp.int32(p["row_bytes"]),
                    cp.int64(p["pitch"]), cp.int64(p["step_bytes"]), cp.int64(p["block_stride"]),
                    cp.int32(ffma), cp.float32(-1.0), rec, steps)

            def launch(f=f, blocks=blocks, threads=threads, smem=smem, args=args):
                f((blocks,), (threads,), args, shared_mem=smem)

            flush()
            launch()  # warm-up (module load, first-launch costs)
            times = []
            for _ in range(reps):
                flush()
                times.append(timer.seconds(launch))
            rec_h = [int(v) for v in rec[:REC * blocks].get()]
            steps_h = [int(v) for v in steps[:blocks * ITERS].get()]
            bytes_loaded = blocks * ITERS * tile_bytes(w) * p["loads"]
            row = summarize_case(rec_h, steps_h, blocks, ITERS, bytes_loaded, times)
            row.update(layout=lay, blocks_per_sm=bps, warps=w, ffma_per_thread=ffma, blocks=blocks,
                       threads=threads, smem_bytes=smem, tile_bytes=tile_bytes(w), params=p,
                       kernel=pc.kernel_attributes(f))
            res["cases"][name] = row
            res["raw"][name] = {"event_s": times, **raw_blocks(rec_h, blocks),
                                "block0_step_cycles": steps_h[:ITERS]}
        except Exception as exc:  # noqa: BLE001 - one failed case must not lose the others
            res["errors"][name] = f"{type(exc).__name__}: {exc}"
    tmp.cleanup()
    return res


def main(argv: Sequence[str] | None = None) -> int:
    ap = pc.probe_parser("hbm_tiles_probe", __doc__.splitlines()[0], RESULT_FILE,
                         f"{QUICK_REPS} timed runs a case instead of {REPS}")
    ap.add_argument("--select", default=None,
                    help="comma-separated parts of case names (e.g. f512,contig_): only the cases that contain one")
    args = ap.parse_args(argv)
    try:
        select_cases(cases(), args.select)
    except ValueError as exc:
        ap.error(str(exc))
    why = pc.gpu_missing()
    if why:
        return pc.no_gpu_exit("hbm_tiles_probe", why)
    res = run_probe(quick=args.quick, select=args.select)
    res["meta"]["quick"] = bool(args.quick)
    res["meta"]["select"] = args.select
    out = pc.results_dir(args.out, res["meta"])
    pc.write_json(out / RESULT_FILE, res, indent=None)  # one line: the per-block raw lists are long
    print(format_table(res))
    print(f"wrote {out / RESULT_FILE}")
    return 0 if not res["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
