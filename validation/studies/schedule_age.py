"""Do older blocks on an SM run faster? (CPU; reads validation/studies/schedule_trace.py's data)

For every traced configuration, each block's k-loop is cut at its stamps into 8 segments. A segment
is placed by the blocks resident on the same SM at its midpoint (started, not yet finished): how many
there are (``n``) and how many of them started before this block (its age rank, 0 = the oldest).
The table gives, for the most common ``n``, the median segment time of each age rank over the
oldest's. Blocks sharing an SM alike would give 1.00 throughout; a scheduler that favours the oldest
warps gives more to the younger ranks, which is what spreads the blocks of an SM apart in k (the
DRAM bar: ``validation/studies/gemm_dram_bytes.py``). A diagnostic of the suite's kernels, not a
calibration: nothing in the simulator is taken from it.

``python -m validation.studies.schedule_age [--rep N]`` prints the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from validation.studies.schedule_replay import DEFAULT_DIR


def age_ranks(smid: np.ndarray, stamps_ns: np.ndarray) -> dict[tuple[int, int], list[float]]:
    """(blocks resident, age rank) -> segment times (ns) of one traced kernel (see the module docstring)."""
    start, end = stamps_ns[:, 0], stamps_ns[:, -1]
    by_sm: dict[int, list[int]] = defaultdict(list)
    for b, sm in enumerate(smid.tolist()):
        by_sm[sm].append(b)
    out: dict[tuple[int, int], list[float]] = defaultdict(list)
    for blocks in by_sm.values():
        s, e = start[blocks], end[blocks]
        for b in blocks:
            for j in range(stamps_ns.shape[1] - 1):
                t0, t1 = stamps_ns[b, j], stamps_ns[b, j + 1]
                mid = (t0 + t1) / 2
                resident = (s <= mid) & (mid < e)
                older = int(np.sum(resident & (s < start[b])))
                out[(int(np.sum(resident)), older)].append(float(t1 - t0))
    return out


def table(results: Path = DEFAULT_DIR, rep: int = 0) -> list[dict]:
    """Per traced configuration: the most common number of resident blocks and the median segment
    time of each age rank over the oldest's (with the segments counted)."""
    meta = json.loads((results / "schedule_trace.json").read_text())
    data = np.load(results / "schedule_trace.npz")
    rows = []
    for label, info in meta["configs"].items():
        if info.get("status") != "ok":
            continue
        ranks = age_ranks(data[f"{label}/smid"].astype(int), data[f"{label}/stamps_ns"][rep].astype(float))
        count: Counter = Counter()
        for (n, _), v in ranks.items():
            count[n] += len(v)
        n = count.most_common(1)[0][0]
        med = [(o, float(np.median(ranks[(n, o)])), len(ranks[(n, o)])) for o in range(n) if ranks.get((n, o))]
        rows.append({"label": label, "resident": n,
                     "relative": [m / med[0][1] for _, m, _ in med], "segments": [c for _, _, c in med]})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation.studies.schedule_age", description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=DEFAULT_DIR)
    p.add_argument("--rep", type=int, default=0, help="which of the traced runs")
    ns = p.parse_args(argv)
    if not (ns.results / "schedule_trace.npz").exists():
        print(f"schedule_age: no schedule_trace.npz in {ns.results}", file=sys.stderr)
        return 1
    print(f"{'configuration':45s} {'n':>2s}  segment time by age rank (oldest = 1.00)")
    for r in table(ns.results, ns.rep):
        print(f"{r['label']:45s} {r['resident']:2d}  " + " ".join(f"{x:.2f}" for x in r["relative"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
