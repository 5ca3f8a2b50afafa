"""Where a wgmma ring GEMM's k-step goes, measured inside the suite's own kernels (a diagnostic on the GPU).

The engine predicts the suite's cluster-2 wgmma kernels 12-30% fast, while it predicts cluster_probe's
GEMM-shaped rings (the same producer, ring, wgmma and release, no global problem) within 10%
(``tensor_engine_check`` group ``ring``). This study measures the k-step of the real kernels by part:
``validation/families/tc_gemm/wgmma.cu`` compiled with ``TC_TRACE 2`` sums ``clock64`` over the k-loop in
the producer thread (its loop, its empty-barrier waits) and in consumer warpgroup 0's thread 0 (its loop,
its full-barrier waits, the wgmma issue from fence to commit, ``wait_group(1)``, the stage release: the
arrive, with cluster-scope release on both blocks of a cluster). Each kernel is checked against the
float64 reference first, then run ``REPS`` times on random inputs with the L2 flushed before each run;
the plain kernel is timed the same way, so the cost of the clock reads is on record.

The mma.sync and WMMA cp.async ring kernels (``validation/families/tc_gemm/tc_gemm.cu`` with ``TC_PARTS``):
thread 0 sums its k-loop, its waits (``cp.async.wait_group`` and the barrier), its copy issue (the tile
``stages - 1`` ahead and the commit) and its warp's fragment loads and MMAs; the traced kernel's C must equal
the plain kernel's.

Per label: ``parts_per_kstep`` (cycles a k-step: median over blocks of each part's sum over the block's
k-tiles, per repetition, then the median over repetitions) and ``traced_s`` / ``plain_s``. Nothing in the
simulator is fitted to it.

``python -m validation.studies.tc_step_parts --shape 4096x4096x4096 [--labels a,b] --out DIR`` writes
``tc_step_parts_<shape>.json`` (metadata, times, the per-part medians and every block's raw sums);
``--compare FILE`` prints a recorded file's k-steps beside the engine's (CPU, no GPU).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPS = 5
#: the words of a block's record (wgmma.cu, TC_TRACE 2)
PARTS = ("smid", "producer_loop", "producer_empty_wait", "consumer_loop", "consumer_full_wait",
         "consumer_wgmma_issue", "consumer_wait_group", "consumer_release")
#: traced by default: the single-block and cluster-2 ring kernels of one tile, and the 1-consumer kernel
DEFAULT_LABELS = ("wgmma_fp16_Bcol_128x256x64_swz_s4_c2", "wgmma_fp16_Bcol_128x256x64_swz_s4_c2_cl2",
                  "wgmma_fp16_Bcol_128x256x64_swz_s3_c2_cl2", "wgmma_fp16_Bcol_128x256x64_swz_s2_c2",
                  "wgmma_fp16_Bcol_64x256x64_swz_s4_c1")


def summarize(records: list[list[list[int]]], ktiles: int, parts: tuple = PARTS) -> dict:
    """``records``: [rep][block][word] as read back. Per part (not the SM id): cycles a k-step, the median over
    blocks of each repetition, then the median over repetitions; and the p10 / p90 over blocks of the
    median repetition."""
    out = {}
    for j, name in enumerate(parts):
        if name == "smid":
            continue
        per_rep = [statistics.median(b[j] / ktiles for b in rep) for rep in records]
        mid = sorted(range(len(per_rep)), key=per_rep.__getitem__)[len(per_rep) // 2]
        vals = sorted(b[j] / ktiles for b in records[mid])
        out[name] = {"value": statistics.median(per_rep), "p10": vals[len(vals) // 10],
                     "p90": vals[(9 * len(vals)) // 10], "unit": "cycles per k-step"}
    return out


def trace_config(cfg, reps: int = REPS, flusher=None) -> dict:
    """Measure one wgmma ring configuration's k-loop parts on the GPU."""
    import cupy as cp
    import numpy as np

    from validation.families.tc_gemm import runner, wgmma
    from validation.harness.timing import L2Flusher
    from validation.studies.schedule_trace import event_seconds

    flusher = flusher or L2Flusher(cp)
    try:
        plain = runner.prepare(cfg)
        traced_built = wgmma.build(cfg, plain.a, plain.b, plain.c, trace=2)
    except (ValueError, RuntimeError) as e:
        return {"status": "unsupported", "message": str(e).splitlines()[0]}
    traced = runner.Case(cfg=cfg, built=traced_built, a=plain.a, b=plain.b, c=plain.c)
    blocks = wgmma.geometry(cfg).grid[0]
    ktiles = -(-cfg.k // cfg.bk)
    buf = cp.zeros(blocks * len(PARTS), dtype=cp.uint64)
    sym = traced_built.launch.module.get_global("tc_trace")
    sym.copy_from_host(np.array([buf.data.ptr], dtype=np.uint64).ctypes.data, 8)
    ok, _err, msg = traced.check()
    if not ok:
        return {"status": "wrong", "message": msg}

    def timed(launch) -> float:
        return event_seconds(cp, flusher, launch)

    for _ in range(2):  # warm-up pairs
        timed(traced.launch)
        timed(plain.launch)
    records, traced_s, plain_s = [], [], []
    for _ in range(reps):
        buf.fill(0)
        traced_s.append(timed(traced.launch))
        host = cp.asnumpy(buf).reshape(blocks, len(PARTS))
        if (host[:, 1:] == 0).any():
            return {"status": "error", "message": "some blocks left their parts unwritten"}
        records.append(host.astype(np.int64).tolist())
        plain_s.append(timed(plain.launch))
    return {"status": "ok", "message": f"check: {msg}", "blocks": blocks, "ktiles": ktiles,
            "traced_s": traced_s, "plain_s": plain_s, "parts_per_kstep": summarize(records, ktiles),
            "records": records}


#: the words of a block's record in the cp.async ring kernels (tc_gemm.cu, TC_PARTS): thread 0's sums
MMA_PARTS = ("smid", "loop", "wait_barrier", "copy_issue", "fragments_and_mma")


def trace_mma_config(cfg, reps: int = REPS, flusher=None) -> dict:
    """Measure one mma.sync / WMMA cp.async ring configuration's k-loop parts (thread 0) on the GPU."""
    import cupy as cp
    import numpy as np

    from validation.families.tc_gemm import mma, runner
    from validation.harness.timing import L2Flusher
    from validation.studies.schedule_trace import event_seconds

    flusher = flusher or L2Flusher(cp)
    try:
        plain = runner.prepare(cfg)
        src = mma.kernel_source(cfg, parts=True)
        module = cp.RawModule(code=src.code, options=src.options, name_expressions=src.name_expressions)
        kernel = module.get_function(src.name_expressions[0])
    except (ValueError, RuntimeError) as e:
        return {"status": "unsupported", "message": str(e).splitlines()[0]}
    g = mma.launch_geometry(cfg)
    if g.dynamic_smem_bytes + mma.static_smem_bytes(cfg) > mma.DEFAULT_SMEM_LIMIT_BYTES:
        kernel.max_dynamic_shared_size_bytes = g.dynamic_smem_bytes
    blocks = g.grid[0] * g.grid[1]
    ktiles = -(-cfg.k // cfg.bk)
    buf = cp.zeros(blocks * len(MMA_PARTS), dtype=cp.uint64)
    module.get_global("tc_parts").copy_from_host(np.array([buf.data.ptr], dtype=np.uint64).ctypes.data, 8)
    args = (plain.a, plain.b, plain.c, np.int32(cfg.m), np.int32(cfg.n), np.int32(cfg.k))

    def traced_launch() -> None:
        kernel(g.grid, g.block, args, shared_mem=g.dynamic_smem_bytes)

    def timed(launch) -> float:
        return event_seconds(cp, flusher, launch)

    built = mma.Built(launch=traced_launch, kernel_names=src.name_expressions, attributes={})
    ok, _err, msg = runner.Case(cfg=cfg, built=built, a=plain.a, b=plain.b, c=plain.c).check()
    if not ok:  # the traced kernel against the float64 reference, as the suite checks the plain one
        return {"status": "wrong", "message": msg}
    for _ in range(2):
        timed(traced_launch)
        timed(plain.launch)
    records, traced_s, plain_s = [], [], []
    for _ in range(reps):
        buf.fill(0)
        traced_s.append(timed(traced_launch))
        host = cp.asnumpy(buf).reshape(blocks, len(MMA_PARTS))
        if (host[:, 1:] == 0).any():
            return {"status": "error", "message": "some blocks left their parts unwritten"}
        records.append(host.astype(np.int64).tolist())
        plain_s.append(timed(plain.launch))
    return {"status": "ok", "message": f"check: {msg}", "blocks": blocks, "ktiles": ktiles, "parts": MMA_PARTS,
            "traced_s": traced_s, "plain_s": plain_s, "parts_per_kstep": summarize(records, ktiles, MMA_PARTS),
            "records": records}


def compare(path: Path, hardware: str = "h200") -> list[dict]:
    """A recorded file's k-steps against the engine's (CPU): per label, the measured loop and parts (cycles a
    k-step) and the engine's k-step of one block at the clock it predicts (slot 0: the median time from one
    k-step's compute to the next's, data waits included) with its compute's barrier, math and release parts
    (the timeline's, median over the stepped k-steps after the first five)."""
    from tilesim import simulate
    from tilesim.hardware import load
    from validation.harness.suite import load_suite

    rec = json.loads(Path(path).read_text())
    m, n, k = rec["shape"]
    suite = {c.label: c for c in load_suite("tc_gemm") if (c.m, c.n, c.k) == (m, n, k)}
    hw = load(hardware)
    out = []
    for label, r in rec["configs"].items():
        if r.get("status") != "ok" or label not in suite:
            continue
        res = simulate(suite[label], hw, timeline=True)
        clk = res.sm_clock_hz
        first = [e for e in res.timeline if e.kind == "compute" and e.phase == "k-loop" and e.slot == 0
                 and e.warp_group == 0]
        steps = first[5:]
        # a k-step: from one compute's start to the next one's (the data waits between them included)
        gaps = [(b.start_s - a.start_s) * clk for a, b in zip(steps, steps[1:], strict=False)
                if b.start_s - a.start_s < 4 * (a.end_s - a.start_s + 1e-9) + 1e-5]
        row = {"label": label, "measured": {p: v["value"] for p, v in r["parts_per_kstep"].items()},
               "engine_step": statistics.median(gaps) if gaps else None}
        for part in ("barrier", "math", "release"):
            vals = [dict(e.parts).get(part, 0.0) * clk for e in steps]
            row[f"engine_{part}"] = statistics.median(vals) if vals else None
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.studies.tc_step_parts", description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="4096x4096x4096", help="MxNxK of the suite's wgmma rows")
    ap.add_argument("--labels", default=",".join(DEFAULT_LABELS), help="comma-separated suite labels (stages >= 2)")
    ap.add_argument("--reps", type=int, default=REPS)
    ap.add_argument("--out", type=Path, help="output directory")
    ap.add_argument("--compare", type=Path, help="a recorded tc_step_parts_<shape>.json: print its k-steps "
                    "beside the engine's (CPU) and exit")
    args = ap.parse_args(argv)
    if args.compare is not None:
        try:
            rows = compare(args.compare)
        except (OSError, KeyError, ValueError) as e:
            print(f"tc_step_parts --compare {args.compare}: {e}", file=sys.stderr)
            return 2
        for row in rows:
            meas = "  ".join(f"{p} {v:.0f}" for p, v in row["measured"].items())
            eng = "  ".join(f"{p[7:]} {row[p]:.0f}" for p in ("engine_barrier", "engine_math", "engine_release")
                            if row[p])
            print(f"{row['label']}\n  measured: {meas}\n  engine:   step {row['engine_step']:.0f}  {eng}")
        return 0
    if args.out is None:
        ap.error("--out is required (or --compare FILE)")
    try:
        m, n, k = (int(x) for x in args.shape.lower().split("x"))
    except ValueError:
        print(f"--shape {args.shape!r}: expected MxNxK", file=sys.stderr)
        return 2
    if args.reps < 1:
        print(f"--reps {args.reps}: must be >= 1", file=sys.stderr)
        return 2
    try:
        import cupy  # noqa: F401  (the study needs it: say so before any work)

        cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001
        print(f"tc_step_parts needs CuPy and an NVIDIA GPU: {e}", file=sys.stderr)
        return 2
    from validation.harness.metadata import collect_metadata
    from validation.harness.suite import load_suite

    labels = [x for x in args.labels.split(",") if x]
    cfgs = {c.label: c for c in load_suite("tc_gemm") if (c.m, c.n, c.k) == (m, n, k)}
    missing = [lb for lb in labels if lb not in cfgs or cfgs[lb].stages < 2 or cfgs[lb].staging != "shared"]
    if missing or not labels:
        print(f"--labels: no ring suite row (wgmma, or mma.sync / WMMA with cp.async) at {args.shape} named "
              f"{missing or '(none given)'}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    out = {"meta": collect_metadata(), "shape": [m, n, k], "reps": args.reps, "configs": {}}
    for i, label in enumerate(labels):
        print(f"[{i + 1}/{len(labels)}] {label}", file=sys.stderr, flush=True)
        cfg = cfgs[label]
        r = (trace_config if cfg.instruction == "wgmma" else trace_mma_config)(cfg, args.reps)
        out["configs"][label] = r
        parts = r.get("parts_per_kstep", {})
        line = "  ".join(f"{p.replace('consumer_', 'c.').replace('producer_', 'p.')} {v['value']:.0f}"
                         for p, v in parts.items())
        print(f"    {r['status']}: {r.get('message', '')}\n    {line}", file=sys.stderr, flush=True)
    path = args.out / f"tc_step_parts_{m}x{n}x{k}.json"
    # one line: every block's sums of every repetition are kept, and indented they would take megabytes
    path.write_text(json.dumps(out, separators=(",", ":")) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
