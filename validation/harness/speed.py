"""The simulator's wall time over whole validation suites, not one friendly case.

``python -m validation.harness.speed [FAMILY ...] [--exact]`` simulates every configuration of each
family's suite (``validation/families/<name>/suite.toml``) on the H200 once, lowering included, and
prints per family the median, 90th percentile and worst wall time per configuration and the total.
The figures in the README's speed section come from this command.
"""

from __future__ import annotations

import argparse
import sys
import time

from tilesim import simulate
from tilesim.kernels import registry
from validation.harness.suite import load_suite
from validation.harness.timing import percentile


def time_suite(family: str, hardware: str = "h200", *, steady_state: bool = True) -> list[tuple[float, str]]:
    """(wall seconds, full label) of every configuration of the family's suite, slowest first."""
    fam = registry.get(family)
    out = []
    for cfg in load_suite(family):
        t0 = time.perf_counter()
        simulate(cfg, hardware, steady_state=steady_state)
        out.append((time.perf_counter() - t0, fam.full_label(cfg)))
    return sorted(out, reverse=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.harness.speed", description=__doc__)
    ap.add_argument("families", nargs="*", help="default: every family with a suite")
    ap.add_argument("--hardware", default="h200")
    ap.add_argument("--exact", action="store_true", help="step every loop trip (no steady-state holds)")
    args = ap.parse_args(argv)
    families = args.families or [f for f in registry.families() if _has_suite(f)]
    print(f"{'family':10s} {'configs':>7s} {'median s':>9s} {'p90 s':>8s} {'max s':>8s} {'total s':>8s}  slowest")
    for fam in families:
        rows = time_suite(fam, args.hardware, steady_state=not args.exact)
        walls = sorted(w for w, _ in rows)
        print(f"{fam:10s} {len(rows):7d} {percentile(walls, 50):9.4f} {percentile(walls, 90):8.4f} "
              f"{walls[-1]:8.4f} {sum(walls):8.1f}  {rows[0][1]}", flush=True)
    return 0


def _has_suite(family: str) -> bool:
    try:
        load_suite(family)
    except (OSError, ValueError):
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
