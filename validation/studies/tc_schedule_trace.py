"""How far apart in time do the blocks of a wgmma GEMM read the same tile? (a diagnostic trace on the GPU)

``tensor_probe --only tma_lag`` found that the L2 serves two SMs' TMA reads of the same box as one
when they come within about one box's time of each other (400-800 cycles), and as two when they come
two or more boxes apart. Whether a GEMM's reads merge so depends on how closely the blocks that
share an A or B tile keep in step. This study measures that: the suite's wgmma kernels compiled with
``TC_TRACE`` (``validation/families/tc_gemm/wgmma.cu``), whose producer thread records its SM and
``%globaltimer`` as it issues the TMA loads of every k-tile. Each traced kernel is checked against
the float64 reference first, then run ``REPS`` times on random inputs with the L2 flushed before
each run; the untraced kernel is timed the same way, so the cost of the stamps is on record.

For every k-tile and every A (B) tile, the blocks that read it are sorted by issue time; each read
after the first has a *lag*: the time since the previous read of that tile at that k-tile
(:func:`reader_lags`). A cluster's B tile is read once, by its rank-0 block (multicast), so only
those reads count for B. :func:`lag_summary` gives the share of the operand bytes read within a
window of the previous read of the same tile, for a few windows.

This is a diagnostic, not calibration: nothing in the simulator is fitted to it.

``python -m validation.studies.tc_schedule_trace --shape 8192x8192x8192 [--labels a,b] --out DIR``
writes ``tc_schedule_trace_<shape>.npz`` (per label: ``<label>/smid`` [blocks] and
``<label>/stamps_ns`` [reps, blocks, k-tiles + 1]: issue times of every k-tile and the end of
consumer 0's k-loop, ns since the run's first stamp) and ``tc_schedule_trace_<shape>.json``
(metadata, times and the lag summaries). ``--summary FILE.npz`` prints the summaries of a recorded trace.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

REPS = 3
WINDOWS_NS = (100, 200, 400, 800, 1600, 3200)
#: the configurations traced by default per shape: single-block and cluster-2 kernels of the suite
DEFAULT_LABELS = {
    (8192, 8192, 8192): ("wgmma_fp16_Bcol_128x256x64_swz_s4_c2", "wgmma_fp16_Bcol_128x256x64_swz_s4_c2_cl2",
                         "wgmma_fp16_Bcol_64x256x64_swz_s4_c1"),
    (4096, 4096, 4096): ("wgmma_fp16_Bcol_128x256x64_swz_s4_c2", "wgmma_fp16_Bcol_128x256x64_swz_s4_c2_cl2",
                         "wgmma_bf16_out16_Bcol_128x128x64_swz_s4_c2_epi_smem",
                         "wgmma_fp16_Bcol_64x256x64_swz_s4_c1"),
}


def block_tiles(m: int, n: int, bm: int, bn: int, cluster: int, group_m: int):
    """(tile_m, tile_n) of every block of the wgmma kernel's 1-D grid, as wgmma.cu works them out:
    ``group_m`` tiles along M, then along N (numpy arrays indexed by blockIdx.x)."""
    import numpy as np

    tiles_m = math.ceil(math.ceil(m / bm) / cluster) * cluster
    tiles_n = math.ceil(n / bn)
    pid = np.arange(tiles_m * tiles_n)
    per_group = group_m * tiles_n
    first_m = (pid // per_group) * group_m
    group_size = np.minimum(tiles_m - first_m, group_m)
    return first_m + (pid % per_group) % group_size, (pid % per_group) // group_size


def reader_lags(issue_ns, keys):
    """Lags of the reads of shared tiles: ``issue_ns`` [blocks, k-tiles] (when each block issued
    each k-tile's loads), ``keys`` [blocks] (the tile each block reads, the same at every k-tile; -1:
    the block does not read it). For every k-tile, the blocks reading one tile sorted by time, each
    read after the first gives the time since the one before it (ns). Returns (lags, reads): every
    such lag, and the number of reads in all."""
    import numpy as np

    issue_ns = np.asarray(issue_ns, dtype=np.int64)
    keys = np.asarray(keys)
    rows = keys >= 0
    t, k = issue_ns[rows], keys[rows]
    lags = []
    for kt in range(t.shape[1]):
        order = np.lexsort((t[:, kt], k))
        ks, ts = k[order], t[order, kt]
        same = ks[1:] == ks[:-1]
        lags.append(np.diff(ts)[same])
    return (np.concatenate(lags) if lags else np.zeros(0, dtype=np.int64)), int(t.size)


def lag_summary(cfg, issue_ns, group_m: int, windows_ns=WINDOWS_NS) -> dict:
    """Per operand and for both together: the reads, the median and 10th/90th percentile lag of the
    reads that follow another of the same tile, and for each window the share of the operand's
    TMA bytes read within it of the previous read (what the L2 could serve as one read)."""
    import numpy as np

    elem = {"fp16": 2, "bf16": 2, "tf32": 4}[cfg.dtype]
    tm, tn = block_tiles(cfg.m, cfg.n, cfg.bm, cfg.bn, cfg.cluster, group_m)
    rank0 = (np.arange(tm.size) % cfg.cluster) == 0
    operands = {"A": (tm, cfg.bm * cfg.bk * elem), "B": (np.where(rank0, tn, -1), cfg.bn * cfg.bk * elem)}
    out: dict = {}
    total_bytes = 0.0
    merged = dict.fromkeys(windows_ns, 0.0)
    for name, (keys, box_bytes) in operands.items():
        lags, reads = reader_lags(issue_ns, keys)
        total_bytes += reads * box_bytes
        row = {"reads": reads, "box_bytes": box_bytes, "shared_reads": int(lags.size)}
        if lags.size:
            row.update(lag_ns_p10=float(np.percentile(lags, 10)), lag_ns_median=float(np.median(lags)),
                       lag_ns_p90=float(np.percentile(lags, 90)))
        row["bytes_within"] = {}
        for w in windows_ns:
            within = int((lags < w).sum())
            row["bytes_within"][str(w)] = within / reads if reads else 0.0
            merged[w] += within * box_bytes
        out[name] = row
    out["both"] = {"bytes_within": {str(w): merged[w] / total_bytes if total_bytes else 0.0 for w in windows_ns}}
    return out


def trace_config(cfg, reps: int = REPS, flusher=None) -> dict:
    """Trace one wgmma configuration on the GPU; returns {"status", "message", "smid", "stamps_ns", times...}."""
    import cupy as cp
    import numpy as np

    from validation.families.tc_gemm import runner, wgmma
    from validation.harness.timing import L2Flusher
    from validation.studies.schedule_trace import traced_runs

    flusher = flusher or L2Flusher(cp)
    try:
        plain = runner.prepare(cfg)
        traced_built = wgmma.build(cfg, plain.a, plain.b, plain.c, trace=True)
    except (ValueError, RuntimeError) as e:
        return {"status": "unsupported", "message": str(e).splitlines()[0]}
    traced = runner.Case(cfg=cfg, built=traced_built, a=plain.a, b=plain.b, c=plain.c)
    blocks = wgmma.geometry(cfg).grid[0]
    ktiles = -(-cfg.k // cfg.bk)
    buf = cp.zeros(blocks * (ktiles + 2), dtype=cp.uint64)
    sym = traced_built.launch.module.get_global("tc_trace")
    sym.copy_from_host(np.array([buf.data.ptr], dtype=np.uint64).ctypes.data, 8)
    ok, err, msg = traced.check()
    if not ok:
        return {"status": "wrong", "message": msg}

    got = traced_runs(cp, flusher, traced.launch, plain.launch, buf, blocks, ktiles + 2, reps)
    if got["status"] == "ok":
        got.update(message=f"check: {msg}", ktiles=ktiles)
    return got


def summarize_file(npz_path: Path) -> dict:
    """The lag summaries of a recorded trace (CPU): label -> [one summary per rep]."""
    import numpy as np

    from validation.families.tc_gemm.wgmma import group_m
    from validation.harness.suite import load_suite

    meta = json.loads(npz_path.with_suffix(".json").read_text())
    shape = tuple(meta["shape"])
    cfgs = {c.label: c for c in load_suite("tc_gemm") if (c.m, c.n, c.k) == shape}
    data = np.load(npz_path)
    out = {}
    for label in meta["configs"]:
        key = f"{label}/stamps_ns"
        if key not in data:
            continue
        cfg = cfgs[label]
        out[label] = [lag_summary(cfg, rep[:, :-1], group_m(cfg)) for rep in data[key]]
    return out


def _print(summaries: dict) -> None:
    for label, reps in summaries.items():
        s = reps[len(reps) // 2]
        both = s["both"]["bytes_within"]
        print(f"{label}: bytes read within " + ", ".join(f"{w} ns {100 * v:.0f}%" for w, v in both.items()))
        for op in ("A", "B"):
            r = s[op]
            if "lag_ns_median" in r:
                print(f"   {op}: {r['reads']} reads, {r['shared_reads']} after another of the tile, lag p10 / median / "
                      f"p90 {r['lag_ns_p10']:.0f} / {r['lag_ns_median']:.0f} / {r['lag_ns_p90']:.0f} ns")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="8192x8192x8192", help="MxNxK of the suite's wgmma rows to trace")
    ap.add_argument("--labels", default=None, help="comma-separated suite labels (default: DEFAULT_LABELS)")
    ap.add_argument("--out", default=None, help="folder for the npz and json (default: results/<gpu>/studies/...)")
    ap.add_argument("--summary", default=None, help="print the lag summaries of a recorded .npz (CPU)")
    args = ap.parse_args(argv)
    if args.summary:
        _print(summarize_file(Path(args.summary)))
        return 0
    try:
        m, n, k = (int(x) for x in args.shape.lower().split("x"))
    except ValueError:
        print(f"--shape {args.shape!r}: expected MxNxK, e.g. 8192x8192x8192", file=sys.stderr)
        return 2
    try:
        import cupy  # noqa: F401  (the trace needs it: say so before any work)
        import numpy as np
    except ImportError as e:
        print(f"tc_schedule_trace needs CuPy and an NVIDIA GPU: {e}", file=sys.stderr)
        return 2
    from validation.harness.metadata import collect_metadata, gpu_slug
    from validation.harness.suite import load_suite

    labels = args.labels.split(",") if args.labels else DEFAULT_LABELS.get((m, n, k), ())
    cfgs = {c.label: c for c in load_suite("tc_gemm") if (c.m, c.n, c.k) == (m, n, k)}
    missing = [lb for lb in labels if lb not in cfgs or cfgs[lb].instruction != "wgmma"]
    if missing or not labels:
        print(f"--labels: no wgmma suite row at {args.shape} named {missing or '(none given)'}", file=sys.stderr)
        return 2
    meta = collect_metadata()
    out_dir = Path(args.out) if args.out else (Path(__file__).resolve().parents[1] / "results"
                                               / gpu_slug(meta.get("device_name", "gpu")) / "studies" / "tc_schedule_trace")
    out_dir.mkdir(parents=True, exist_ok=True)
    arrays, configs = {}, {}
    for i, label in enumerate(labels):
        print(f"[{i + 1}/{len(labels)}] {label}", file=sys.stderr, flush=True)
        r = trace_config(cfgs[label])
        configs[label] = {kk: v for kk, v in r.items() if kk not in ("smid", "stamps_ns")}
        if r["status"] == "ok":
            arrays[f"{label}/smid"] = r["smid"]
            arrays[f"{label}/stamps_ns"] = r["stamps_ns"]
        print(f"    {r['status']}: {r['message']}", file=sys.stderr)
    stem = f"tc_schedule_trace_{m}x{n}x{k}"
    np.savez_compressed(out_dir / f"{stem}.npz", **arrays)
    (out_dir / f"{stem}.json").write_text(json.dumps({"meta": meta, "shape": [m, n, k], "reps": REPS,
                                                      "configs": configs}, indent=1) + "\n")
    summaries = summarize_file(out_dir / f"{stem}.npz")
    data = json.loads((out_dir / f"{stem}.json").read_text())
    data["lag_summaries"] = {lb: s[len(s) // 2] for lb, s in summaries.items()}
    (out_dir / f"{stem}.json").write_text(json.dumps(data, indent=1) + "\n")
    _print(summaries)
    print(f"wrote {out_dir / stem}.npz and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
