"""The engine's steady-state holds against stepping every k-step (``--exact``), over every configuration.

The default path holds a settled k-loop (or whole block groups) at its measured period instead of
stepping it (``tilesim/engine/sim.py``, "Steady states"); ``steady_state=False`` steps everything
and is the reference. This study simulates each configuration both ways on the H200 and writes,
per configuration, both predicted times, their relative difference ``(holds - exact) / exact``, the
events and the wall time of each path:

* every valid configuration of the built-in scenarios (``tilesim/scenarios``, as ``tilesim bench``
  times them), and
* every configuration of the validation suites (``validation/families/<name>/suite.toml``).

``python -m validation.studies.holds_vs_exact [-j 2] [--out holds_vs_exact.csv] [--scenarios-only |
--suites-only] [--family NAME ...]`` writes the CSV (rows as they finish, in input order at the
end) and prints per source (scenarios, each suite) the count, the median and maximum of
``|holds - exact| / exact``, how many exceed the bounds (:data:`BOUNDS`: 2% for the built-in
scenarios, 5% for the suites) and the worst configurations. The exact path is the slow one: the
whole run takes minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

BOUNDS = {"scenarios": 0.02, "suites": 0.05}
"""Relative difference of the held prediction from the exact one that counts as agreeing."""

HARDWARE = "h200"
COLUMNS = ("source", "name", "family", "full_label", "holds_s", "exact_s", "rel_diff", "holds_events",
           "exact_events", "holds_wall_s", "exact_wall_s", "error")


def scenario_jobs(names=None) -> list[tuple[str, str, object]]:
    """(source, scenario or suite name, config) of every valid configuration of the built-in scenarios."""
    from tilesim.api import resolve_hardware
    from tilesim.sweep import available_scenarios, load_scenario

    hw = resolve_hardware(HARDWARE)
    out = []
    for name in names or available_scenarios():
        sc = load_scenario(name)
        for row in sc.expand(hw):
            if row.cfg is not None:
                out.append(("scenarios", sc.name, row.cfg))
    return out


def suite_jobs(families=None) -> list[tuple[str, str, object]]:
    """(source, family, config) of every configuration of the validation suites."""
    from tilesim.kernels import registry
    from validation.harness.suite import load_suite

    out = []
    for fam in families or registry.families():
        try:
            configs = load_suite(fam)
        except (OSError, ValueError):
            continue  # a family without a suite file
        out += [("suites", fam, cfg) for cfg in configs]
    return out


def compare(job: tuple[str, str, object]) -> dict:
    """One configuration simulated with the holds and exactly: a CSV row."""
    from tilesim import simulate
    from tilesim.kernels import registry

    source, name, cfg = job
    fam = next(f for f in registry.families().values() if isinstance(cfg, f.config))
    row = {"source": source, "name": name, "family": fam.name, "full_label": fam.full_label(cfg), "error": ""}
    try:
        t0 = time.perf_counter()
        held = simulate(cfg, HARDWARE)
        t1 = time.perf_counter()
        exact = simulate(cfg, HARDWARE, steady_state=False)
        t2 = time.perf_counter()
    except Exception as e:  # noqa: BLE001  (one configuration's failure is a row, not the end of the study)
        row["error"] = f"{type(e).__name__}: {e}"
        return row
    row.update(holds_s=held.time_s, exact_s=exact.time_s, rel_diff=held.time_s / exact.time_s - 1,
               holds_events=held.events, exact_events=exact.events, holds_wall_s=round(t1 - t0, 4),
               exact_wall_s=round(t2 - t1, 4))
    return row


def summarize(rows: list[dict]) -> list[dict]:
    """Per source and group (each scenario, each suite, and each source's "all"): count, median and max |rel_diff|,
    how many beyond the source's bound, and the worst configuration."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        if r.get("error"):
            continue
        groups.setdefault((r["source"], r["name"]), []).append(r)
    groups.update({("scenarios", "all"): [r for rs in groups.values() for r in rs if r["source"] == "scenarios"],
                   ("suites", "all"): [r for rs in groups.values() for r in rs if r["source"] == "suites"]})
    out = []
    for (source, name), rs in groups.items():
        if not rs:
            continue
        diffs = sorted(abs(r["rel_diff"]) for r in rs)
        worst = max(rs, key=lambda r: abs(r["rel_diff"]))
        out.append({"source": source, "name": name, "count": len(rs), "median": statistics.median(diffs),
                    "max": diffs[-1], "over": sum(d > BOUNDS[source] for d in diffs),
                    "worst": f"{worst['name']} {worst['full_label']}"})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.studies.holds_vs_exact", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-j", "--jobs", type=int, default=2, help="worker processes [default: 2]")
    ap.add_argument("--out", default="holds_vs_exact.csv", help="CSV path [default: holds_vs_exact.csv]")
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--scenarios-only", action="store_true")
    which.add_argument("--suites-only", action="store_true")
    ap.add_argument("--family", action="append", help="only these suites (repeatable)")
    ap.add_argument("--scenario", action="append", help="only these built-in scenarios (repeatable)")
    ap.add_argument("--worst", type=int, default=10, help="worst configurations printed [default: 10]")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f"--jobs = {args.jobs}: must be >= 1")
    out = Path(args.out)
    if not out.parent.is_dir():
        ap.error(f"--out {out}: folder {out.parent} does not exist")
    jobs = [] if args.suites_only else scenario_jobs(args.scenario)
    jobs += [] if args.scenarios_only else suite_jobs(args.family)
    t0 = time.perf_counter()
    rows: list[dict | None] = [None] * len(jobs)
    with out.open("w", newline="") as fh, ProcessPoolExecutor(args.jobs) as pool:
        w = csv.DictWriter(fh, COLUMNS, extrasaction="ignore")
        w.writeheader()
        for i, row in enumerate(pool.map(compare, jobs, chunksize=1)):
            rows[i] = row
            w.writerow(row)
            fh.flush()
            if (i + 1) % 50 == 0:
                print(f"  {i + 1}/{len(jobs)} in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    done = [r for r in rows if r is not None]
    print(f"{len(done)} configurations in {time.perf_counter() - t0:.0f} s on {args.jobs} process(es); CSV: {out}")
    print(f"{'source':10s} {'group':22s} {'configs':>7s} {'median %':>9s} {'max %':>7s} {'over':>5s}  worst")
    for s in summarize(done):
        print(f"{s['source']:10s} {s['name']:22s} {s['count']:7d} {100 * s['median']:9.3f} {100 * s['max']:7.2f} "
              f"{s['over']:5d}  {s['worst']}")
    bad = sorted((r for r in done if not r.get("error")), key=lambda r: -abs(r["rel_diff"]))[:args.worst]
    print("worst:")
    for r in bad:
        print(f"  {100 * r['rel_diff']:+7.2f}%  {r['source']}/{r['name']} {r['full_label']}  "
              f"(events {r['holds_events']} / {r['exact_events']}, wall {r['holds_wall_s']} / {r['exact_wall_s']} s)")
    for r in done:
        if r.get("error"):
            print(f"  error: {r['source']}/{r['name']} {r.get('full_label', '')}: {r['error']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
