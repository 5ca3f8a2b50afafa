"""Replay recorded block schedules through an LRU L2 (CPU; reads validation/schedule_trace.py's data).

For every traced configuration, each block's k-tiles are placed in time by interpolating its
stamps (k-tiles ``j * nk / 8`` and the loop's end); each k-tile touches the block's A tile
``(by, kt)`` and B tile ``(bx, kt)``. The time-ordered accesses go through a least-recently-used
cache of whole tiles of ``capacity_bytes``; the bytes it misses are the DRAM reads this schedule
implies, beside Nsight Compute's measured DRAM reads.

If the replay of the recorded schedule lands near Nsight Compute where the simulator (whose blocks
sharing an SM start together and advance alike) does not, the missing effect is the schedule, not
the cache.
``python -m validation.studies.schedule_replay`` prints the table.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np

from validation.harness.suite import recorded_dir
from validation.studies.schedule_trace import mark_tiles

#: the recorded trace (schedule_trace.json/.npz); GEMM's counters.csv is read from ../../gemm/
DEFAULT_DIR = recorded_dir("studies/schedule_trace")


def tile_times(stamps_ns: np.ndarray, nk: int) -> np.ndarray:
    """[blocks, nk] start time of every k-tile, linear between the stamps."""
    marks = np.array(mark_tiles(nk), dtype=float)
    kt = np.arange(nk, dtype=float)
    out = np.empty((stamps_ns.shape[0], nk))
    for b in range(stamps_ns.shape[0]):
        out[b] = np.interp(kt, marks, stamps_ns[b].astype(float))
    return out


def lru_miss_bytes(times: np.ndarray, gx: int, a_bytes: int, b_bytes: int, capacity_bytes: float,
                   c_bytes: int = 0) -> float:
    """Bytes read on misses of an LRU cache of whole tiles when block ``b`` touches A ``(b // gx, kt)``
    and B ``(b % gx, kt)`` at ``times[b, kt]`` (ties in block order). With ``c_bytes``, each block's
    output tile enters the cache when its last k-tile starts (written lines take capacity too; they
    are not reads)."""
    blocks, nk = times.shape
    cols = nk + (1 if c_bytes else 0)
    if c_bytes:
        times = np.concatenate([times, times[:, -1:]], axis=1)
    order = np.argsort(times, axis=None, kind="stable")
    cache: OrderedDict = OrderedDict()
    size = 0.0
    missed = 0.0
    for flat in order.tolist():
        b, kt = divmod(flat, cols)
        if kt == nk:  # the output tile
            cache[("C", b)] = c_bytes
            size += c_bytes
            while size > capacity_bytes:
                size -= cache.popitem(last=False)[1]
            continue
        for key, nbytes in ((("A", b // gx, kt), a_bytes), (("B", b % gx, kt), b_bytes)):
            if key in cache:
                cache.move_to_end(key)
                continue
            missed += nbytes
            cache[key] = nbytes
            size += nbytes
            while size > capacity_bytes:
                size -= cache.popitem(last=False)[1]
    return missed


def measured_dram_reads(results: Path) -> dict:
    """Nsight Compute's DRAM read bytes per GEMM configuration, from ``<gpu>/gemm/counters.csv``
    beside ``<gpu>/studies/schedule_trace/`` (or ``results/counters.csv`` when given a flat directory)."""
    out = {}
    path = results / "counters.csv"
    if not path.exists():
        path = Path(results).resolve().parents[1] / "gemm" / "counters.csv"
    if path.exists():
        for r in csv.DictReader(path.open()):
            key = (r["label"], int(r["m"]), int(r["n"]), int(r["k"]))
            try:
                out[key] = float(r["dram__bytes_read.sum_bytes"])
            except (KeyError, ValueError):
                pass
    return out


def replay(results: Path = DEFAULT_DIR, capacity_bytes: float | None = None, rep: int = 0,
           with_output: bool = True, on_progress=None) -> list[dict]:
    """One row per traced configuration (see the module docstring); ``on_progress(done, total)`` after
    each traced configuration, when given."""
    from tilesim import hardware
    from validation.harness.suite import load_suite

    meta = json.loads((results / "schedule_trace.json").read_text())
    data = np.load(results / "schedule_trace.npz")
    m, n, k = meta["shape"]
    cap = capacity_bytes or hardware.load("h200").l2_bytes
    cfgs = {c.label: c for c in load_suite("gemm") if (c.m, c.n, c.k) == (m, n, k)}
    measured = measured_dram_reads(results)
    rows = []
    traced = [(label, info) for label, info in meta["configs"].items()
              if info.get("status") == "ok" and label in cfgs]
    for i, (label, info) in enumerate(traced, 1):
        cfg = cfgs[label]
        stamps = data[f"{label}/stamps_ns"][rep]
        nk = -(-k // cfg.bk)
        gx = cfg.grid[0]
        a_bytes, b_bytes = cfg.bm * cfg.bk * 4, cfg.bk * cfg.bn * 4
        rec = lru_miss_bytes(tile_times(stamps, nk), gx, a_bytes, b_bytes, cap,
                             cfg.bm * cfg.bn * 4 if with_output else 0)
        rows.append({
            "label": label, "variant": cfg.variant,
            "measured_read_bytes": measured.get((label, m, n, k)),
            "replay_read_bytes": rec,
            "traced_s": float(np.median(info["traced_s"])), "plain_s": float(np.median(info["plain_s"])),
        })
        if on_progress is not None:
            on_progress(i, len(traced))
    return rows


PLOT_LABELS = ("warp_128x128x16_w64x64i4_t8x4_vec", "reg2d_64x64x16_t4x4_vec", "warp_128x64x16_w64x32i2_t4x4_vec")


def progress_panels(results: Path = DEFAULT_DIR, labels=PLOT_LABELS, sm: int = 0, rep: int = 0,
                    window_s: float = 2.0e-3) -> list:
    """For :func:`tilesim.plots.block_progress_figure`: the blocks SM ``sm`` ran in the first
    ``window_s`` of each traced kernel, as (times_s, fractions of the k-loop)."""
    meta = json.loads((results / "schedule_trace.json").read_text())
    data = np.load(results / "schedule_trace.npz")
    marks = np.array(mark_tiles(meta["marks"]), dtype=float) / meta["marks"]
    panels = []
    for label in labels:
        if f"{label}/stamps_ns" not in data:
            continue
        stamps = data[f"{label}/stamps_ns"][rep].astype(float) * 1e-9
        smid = data[f"{label}/smid"]
        mine = [b for b in np.where(smid == sm)[0] if stamps[b, 0] < window_s]
        panels.append((f"{label} (SM {sm})", [(stamps[b].tolist(), marks.tolist()) for b in mine]))
    return panels


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation.studies.schedule_replay", description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=DEFAULT_DIR)
    p.add_argument("--capacity-mb", type=float, default=None, help="L2 capacity (default: the profile's l2_bytes)")
    p.add_argument("--plot", type=Path, default=None,
                   help="also draw the progress of one SM's blocks for three kernels to this PNG")
    ns = p.parse_args(argv)
    if ns.capacity_mb is not None and not ns.capacity_mb > 0:  # checked before any work
        p.error(f"--capacity-mb = {ns.capacity_mb:g}: must be > 0 (megabytes of L2)")
    if not (ns.results / "schedule_trace.npz").exists():
        print(f"schedule_replay: no schedule_trace.npz in {ns.results} (run validation.studies.schedule_trace on a GPU)",
              file=sys.stderr)
        return 1
    if ns.plot:
        from tilesim.plots import block_progress_figure

        fig = block_progress_figure(progress_panels(ns.results),
                                    title="Blocks of one SM on the H200, 4096^3 (validation/schedule_trace.py)")
        ns.plot.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(ns.plot, dpi=110)
        print(f"wrote {ns.plot}")
    from tilesim.cli.progress import progress  # noqa: PLC0415

    with progress("schedule_replay: traced configurations replayed") as update:
        rows = replay(ns.results, ns.capacity_mb * 1e6 if ns.capacity_mb is not None else None, on_progress=update)
    print(f"{'configuration':55s} {'ncu read MB':>11s} {'replay MB':>10s} {'err':>7s} {'trace cost':>10s}")
    for r in rows:
        meas = r["measured_read_bytes"]
        err = f"{(r['replay_read_bytes'] - meas) / meas * 100:+.1f}%" if meas else "-"
        cost = f"{(r['traced_s'] - r['plain_s']) / r['plain_s'] * 100:+.1f}%"
        print(f"{r['label']:55s} {(meas or 0)/1e6:11.1f} {r['replay_read_bytes']/1e6:10.1f} {err:>7s} {cost:>10s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
