"""The GEMM suite's DRAM bytes, model against Nsight Compute, for every register-tiled configuration.

``python -m validation.studies.gemm_dram_bytes`` simulates (informed: the compiler's registers of the
recorded row, as ``tilesim validate report``) each register-tiled GEMM (reg1d, reg2d, warp) of
``times.csv`` that has Nsight Compute counters in ``validation/results/h200/gemm/counters.csv`` and prints, per configuration: blocks per SM, waves,
the compulsory bytes (A + B + C once), DRAM reads and writes measured (``dram__bytes_read.sum``,
``dram__bytes_write.sum``) and predicted, and the error of their sum (the quantity of the accuracy
test ``test_gemm_dram_bytes_every_register_tiled_within_25_percent``). Nothing here needs a GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from tilesim import hardware, simulate
from tilesim.kernels import registry
from validation.harness import suite
from validation.harness.report import _counter_index, _metric, config_from_row
from validation.harness.suite import recorded_dir

DEFAULT_DIR = recorded_dir("gemm")
REG_TILED = ("reg1d", "reg2d", "warp")  # as tests/test_accuracy.py


def rows(results: Path = DEFAULT_DIR, hw=None) -> list[dict]:
    """One row per register-tiled configuration with counters: measured and predicted DRAM bytes."""
    hw = hw or hardware.load("h200")
    fam = registry.get("gemm")
    out = []
    index, cols = _counter_index("gemm", Path(results))
    for times_row in suite.read_rows(Path(results) / "times.csv"):
        if times_row.get("status") != "ok" or times_row.get("variant") not in REG_TILED:
            continue
        row = index.get(suite.row_key(times_row, cols)) if cols else None
        if row is None:
            continue
        cfg = config_from_row("gemm", times_row)
        if times_row.get("regs_per_thread"):  # informed, as the report's counters
            cfg = dataclasses.replace(cfg, **{suite.OVERRIDE_FIELD: int(float(times_row["regs_per_thread"]))})
        res = simulate(cfg, hw)
        t = res.traffic
        meas_r, meas_w = _metric(row, "dram__bytes_read.sum"), _metric(row, "dram__bytes_write.sum")
        meas = meas_r + meas_w
        pred = t.hbm_read_bytes + t.hbm_write_bytes
        out.append({"label": fam.label(cfg), "size": fam.full_label(cfg).rsplit("@", 1)[-1],
                    "blocks_per_sm": res.blocks_per_sm, "waves": res.waves,
                    "compulsory_bytes": fam.counts(cfg)["min_hbm_bytes"],
                    "meas_read_bytes": meas_r, "meas_write_bytes": meas_w,
                    "pred_read_bytes": t.hbm_read_bytes, "pred_write_bytes": t.hbm_write_bytes,
                    "error": pred / meas - 1.0})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation.studies.gemm_dram_bytes", description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=DEFAULT_DIR)
    ns = p.parse_args(argv)
    got = rows(ns.results)
    if not got:
        print(f"gemm_dram_bytes: no register-tiled rows with counters in {ns.results}", file=sys.stderr)
        return 1
    mb = 1e6
    print(f"{'configuration':40s} {'size':16s} {'R':>2s} {'waves':>5s} {'compul':>7s} {'meas rd':>8s} "
          f"{'meas wr':>8s} {'pred rd':>8s} {'pred wr':>8s} {'error':>7s}  (MB)")
    for r in sorted(got, key=lambda r: (r["size"], r["error"])):
        print(f"{r['label']:40s} {r['size']:16s} {r['blocks_per_sm']:2d} {r['waves']:5.2f} "
              f"{r['compulsory_bytes'] / mb:7.0f} {r['meas_read_bytes'] / mb:8.0f} {r['meas_write_bytes'] / mb:8.0f} "
              f"{r['pred_read_bytes'] / mb:8.0f} {r['pred_write_bytes'] / mb:8.0f} {r['error'] * 100:+6.1f}%")
    bad = [r for r in got if abs(r["error"]) > 0.25]
    print(f"{len(bad)} of {len(got)} beyond 25%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
