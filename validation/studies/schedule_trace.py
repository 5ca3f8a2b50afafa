"""When does each block of a GEMM run, and how far has it got? (a diagnostic trace on the GPU)

The suite's kernels for one shape are compiled with ``-DGEMM_TRACE``: thread 0 of every block
records its SM and ``%globaltimer`` when k-tiles ``0, nk/8, 2nk/8, ...`` start and when its k-loop
ends (``validation/families/gemm/gemm.cu``). Each traced kernel is checked against a float64 reference
first, then run ``REPS`` times on random inputs with the L2 flushed before each run (as Nsight
Compute runs it). The untraced kernel is timed the same way, so the cost of the stamps is on record.

This is a diagnostic, not calibration: it shows how the blocks that share an SM progress against
each other (and so which blocks touch the same tiles at the same time), to be compared with the
schedule the simulator assumes (:mod:`validation.studies.schedule_replay` replays the recorded schedules
through an LRU L2). Nothing in the simulator is fitted to it.

``python -m validation.studies.schedule_trace --shape 4096x4096x4096`` writes (in validation/results/<gpu>/studies/schedule_trace/)
``schedule_trace.npz`` (per label: ``<label>/smid`` [blocks] and ``<label>/stamps_ns`` [reps, blocks,
9], ns since the kernel's first stamp) and ``schedule_trace.json`` (metadata and per-label times).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

MARKS = 8  # GEMM_TRACE_MARKS in gemm.cu: stamps at k-tiles j * nk / MARKS, j < MARKS, and the end
REPS = 3
TRACED_VARIANTS = ("smem", "reg1d", "reg2d", "warp")
TRACE_OPTION = "-DGEMM_TRACE"


def mark_tiles(nk: int) -> list[int]:
    """The k-tiles at which stamps 0..MARKS-1 are taken (the first kt with kt*MARKS//nk == j); the
    last stamp (index MARKS) is taken at the end of the loop, i.e. at k-tile ``nk``."""
    out = []
    for j in range(MARKS):
        kt = -(-j * nk // MARKS)
        out.append(kt)
    return out + [nk]


def trace_config(cfg, reps: int = REPS, flusher=None) -> dict:
    """Trace one configuration; returns {"status", "message", "smid", "stamps_ns", times...}."""
    import cupy as cp
    import numpy as np

    from validation.families.gemm import runner as gemm_cuda
    from validation.harness.timing import L2Flusher

    flusher = flusher or L2Flusher(cp)
    blocks = cfg.grid[0] * cfg.grid[1] * cfg.grid[2]
    try:
        traced = gemm_cuda.compile_gemm(cfg, extra_options=(TRACE_OPTION,))
        plain = gemm_cuda.compile_gemm(cfg)
    except (ValueError, gemm_cuda.GemmCompileError) as e:
        return {"status": "unsupported", "message": str(e).splitlines()[0]}
    buf = cp.zeros(blocks * (MARKS + 2), dtype=cp.uint64)
    ptr = traced.module.get_global("gemm_trace")
    ptr.copy_from_host(np.array([buf.data.ptr], dtype=np.uint64).ctypes.data, 8)
    res = gemm_cuda.check_correct(traced, seed=0)
    if not res.ok:
        return {"status": "wrong", "message": res.message}
    a, b, c = gemm_cuda.random_inputs(cfg, seed=0)

    got = traced_runs(cp, flusher, lambda: traced.launch(a, b, c), lambda: plain.launch(a, b, c), buf, blocks,
                      MARKS + 2, reps)
    if got["status"] == "ok":
        got.update(message="", grid=list(cfg.grid))
    return got


def event_seconds(cp, flusher, launch) -> float:
    """One ``launch()`` timed by CUDA events, the L2 flushed (``flusher()``) before it."""
    flusher()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    launch()
    stop.record()
    stop.synchronize()
    return cp.cuda.get_elapsed_time(start, stop) * 1e-3


def traced_runs(cp, flusher, launch_traced, launch_plain, buf, blocks: int, width: int, reps: int) -> dict:
    """Time the traced and the plain kernel in turn (the L2 flushed before each, two warm-up pairs), ``reps``
    times, reading after each traced run the stamp buffer ``buf`` of ``blocks`` rows of ``width`` words (word
    0 the block's SM, the rest its stamps, none left 0): {"status", "smid", "stamps_ns" (reps x blocks x
    width - 1, from the run's first stamp), "traced_s", "plain_s", "blocks"}, or {"status": "error", ...}."""
    import numpy as np

    def timed(launch) -> float:
        return event_seconds(cp, flusher, launch)

    for _ in range(2):
        timed(launch_traced)
        timed(launch_plain)
    stamps, traced_s, plain_s = [], [], []
    smid = None
    for _ in range(reps):
        buf.fill(0)
        traced_s.append(timed(launch_traced))
        host = cp.asnumpy(buf).reshape(blocks, width)
        if (host[:, 1:] == 0).any():
            return {"status": "error", "message": "some blocks left stamps unwritten"}
        smid = host[:, 0].astype(np.uint16)
        t = host[:, 1:]
        stamps.append((t - t.min()).astype(np.uint32))
        plain_s.append(timed(launch_plain))
    return {"status": "ok", "smid": smid, "stamps_ns": np.stack(stamps), "traced_s": traced_s,
            "plain_s": plain_s, "blocks": blocks}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation.studies.schedule_trace", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=None,
                   help="output directory (default validation/results/<gpu>/studies/schedule_trace)")
    p.add_argument("--shape", default="4096x4096x4096", help="MxNxK of the suite to trace")
    p.add_argument("--reps", type=int, default=REPS)
    ns = p.parse_args(argv)
    from validation.harness.suite import gpu_available, load_suite

    why = gpu_available()
    if why:
        print(f"schedule_trace: {why}", file=sys.stderr)
        return 1
    import numpy as np

    from validation.harness.metadata import collect_metadata

    m, n, k = (int(x) for x in ns.shape.split("x"))
    cfgs = [c for c in load_suite("gemm") if (c.m, c.n, c.k) == (m, n, k) and c.variant in TRACED_VARIANTS]
    arrays, rows = {}, {}
    for cfg in cfgs:
        r = trace_config(cfg, ns.reps)
        print(f"{cfg.label:55s} {r['status']:8s} "
              + (f"traced {np.median(r['traced_s'])*1e3:.3f} ms plain {np.median(r['plain_s'])*1e3:.3f} ms"
                 if r["status"] == "ok" else r["message"]), flush=True)
        if r["status"] == "ok":
            arrays[f"{cfg.label}/smid"] = r.pop("smid")
            arrays[f"{cfg.label}/stamps_ns"] = r.pop("stamps_ns")
        rows[cfg.label] = r
    if ns.out is None:
        from validation.harness.suite import default_results_root

        ns.out = default_results_root() / "studies" / "schedule_trace"
    ns.out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(ns.out / "schedule_trace.npz", **arrays)
    meta = collect_metadata()
    (ns.out / "schedule_trace.json").write_text(json.dumps(
        {"meta": meta, "shape": [m, n, k], "marks": MARKS, "configs": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
