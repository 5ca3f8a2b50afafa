"""How much of a TMA read stream the L2 request coalescer (LRC) serves as one read: Nsight Compute's
LRC counters on the tma_lag probe and on wgmma GEMMs of the suite (a diagnostic, CPU only).

Reads what the H200 recorded (nothing here runs on a GPU):

* ``calibration/tma_lag_ncu/ncu_raw.csv``: ``ncu --cache-control none --kernel-name tma_tp --csv
  --metrics <LRC> python -m validation.calibration.tensor_probe --only tma_lag --quick`` (its own
  output, with the iterations of each row, in ``tensor_quick_under_ncu.json``): the probe's launches
  in row order, one row after the other (the rows of the quick run: pairs and all SMs, lags 0-3).
* ``tc_gemm/lrc_ncu/counters.csv``: ``python -m validation.harness.ncu tc_gemm --only
  wgmma_fp16_Bcol_128x256x64_swz_s4_c2 --add-metrics <LRC>`` (single-block and cluster-2 kernels).

For each launch or configuration: ``coalesced`` = lrc__request_sectors_op_read_coalescing_achieved_type_hardware
/ lrc__request_sectors_op_read_coalescable (the share of the sectors asked for that the LRC served
from another request's read), and ``slice_share`` = lrc__lts2lrc_sectors_op_read /
lrc__xbar2gpc_sectors_op_read (the L2 slices' sectors per sector delivered to the SMs).

``python -m validation.studies.lrc_merge``
"""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results" / "h200"
COALESCED = "lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum"
COALESCABLE = "lrc__request_sectors_op_read_coalescable.sum"
SLICES = "lrc__lts2lrc_sectors_op_read.sum"
DELIVERED = "lrc__xbar2gpc_sectors_op_read.sum"


def parse_ncu_raw(text: str) -> list[dict]:
    """Launches of an ``ncu --csv`` (default page) output, in order: {metric: value}."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith('"ID"'))
    launches: dict[int, dict] = {}
    for r in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        launches.setdefault(int(r["ID"]), {})[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
    return [launches[i] for i in sorted(launches)]


def shares(m: dict) -> tuple[float, float]:
    """(coalesced, slice_share) of one launch's or configuration's counters (see the module docstring)."""
    able, deliv = m.get(COALESCABLE, 0.0), m.get(DELIVERED, 0.0)
    return (m.get(COALESCED, 0.0) / able if able else 0.0), (m.get(SLICES, 0.0) / deliv if deliv else 0.0)


def probe_rows(raw: list[dict], rows: list[str]) -> dict[str, list[tuple[float, float]]]:
    """The launches split evenly over the probe's ``rows`` (each row the same number of launches)."""
    if not rows or len(raw) % len(rows):
        raise ValueError(f"{len(raw)} launches do not split over {len(rows)} rows")
    per = len(raw) // len(rows)
    return {name: [shares(m) for m in raw[i * per:(i + 1) * per]] for i, name in enumerate(rows)}


def main(argv: list[str] | None = None) -> int:
    lag_dir = RESULTS / "calibration" / "tma_lag_ncu"
    raw = parse_ncu_raw((lag_dir / "ncu_raw.csv").read_text())
    rows = list(json.loads((lag_dir / "tensor_quick_under_ncu.json").read_text())["tma_lag"])
    print("tma_lag under Nsight Compute (256x64 boxes, 5 in flight): coalesced share of the sectors asked for")
    for name, got in probe_rows(raw, rows).items():
        last = got[1:]  # the first launch of a row is its warm-up
        print(f"  {name:40s} coalesced {min(c for c, _ in last):.3f}-{max(c for c, _ in last):.3f}, "
              f"slice sectors per delivered {min(s for _, s in last):.3f}-{max(s for _, s in last):.3f}")
    print("wgmma GEMMs (Nsight Compute, suite kernels):")
    with open(RESULTS / "tc_gemm" / "lrc_ncu" / "counters.csv") as f:
        for r in csv.DictReader(f):
            m = {k.rsplit("_", 1)[0]: float(v) for k, v in r.items() if k.startswith("lrc__") and v}
            c, s = shares(m)
            print(f"  {r['label']:52s} {r['m']}x{r['n']}x{r['k']:6s} coalesced {c:.3f}, slice sectors per delivered {s:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
