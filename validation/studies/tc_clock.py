"""The tensor-core GEMMs' SM clock: the engine's against the one Nsight Compute saw, and what it hides.

Under tensor load the H200 lowers its SM clock; the engine picks the clock from the kernel's own
predicted tensor activity and the measured curve ``sm_clock_hz_by_tensor_activity`` (clock_load_probe:
bare mma.sync / wgmma loops). ``python -m validation.studies.tc_clock`` takes every tc_gemm row with a
Nsight Compute diagnostics record (``validation/results/h200/tc_gemm/diagnostics.csv``, recorded with
``--clock-control none``: ``sm__cycles_elapsed.avg.per_second``; ``--all``: every row of ``counters.csv``,
which has the same counter, and a summary by kind of kernel) and prints the engine's clock beside
it, then the prediction error at the engine's clock and at Nsight Compute's (a what-if: the clock held
at the counter's value). Nothing here needs a GPU, and nothing in the model is set from it: it tells
where the clock is wrong and which errors it hides.

Recorded (session 11): the engine's clock is higher than Nsight Compute's on all 24 rows, by 3-4% for
the mma.sync and the cluster wgmma kernels and by 19-27% for single-block wgmma (1.74-1.84 against
1.45-1.49 GHz): their predicted tensor activity is too low (the engine's 44-78% against the counters'
87-94%), so the curve gives them a high clock, which made up for a k-loop the engine predicts too slow.
At Nsight Compute's clocks the two-consumer ones are 17-21% slow (the one-consumer ones 26-59% at either),
the cluster wgmma kernels 13-18% fast and the mma.sync ones 6-17% fast (mean error -7.7% -> -2.6%,
MAPE 15.8% -> 15.0% over the 24 rows).

Session 12 (``--all``, all 172 timed rows): the engine's clock was 7.8% above the counter's on average.
With the memory traffic's power in the clock (clock_load_probe's L2 and HBM streams beside wgmma:
``sm_clock_l2_slope_by_tensor_activity``, ``sm_clock_hbm_slope_by_tensor_activity``) it is 1.6% above for
mma.sync, 0.4% for single-block wgmma, 4.4% below for the cluster kernels; on the 24 diagnosed rows within
11% everywhere (3.7% mean). The single-block wgmma kernels are now 18-44% slow at 8192^3 (their k-loop,
which the clock had hidden); tc_gemm MAPE 18.2% -> 15.5%.
"""

from __future__ import annotations

import csv
import dataclasses
import statistics
import sys
from pathlib import Path

from tilesim import hardware, simulate
from tilesim.hardware.catalog import with_overrides
from validation.harness import suite
from validation.harness.report import config_from_row
from validation.harness.suite import recorded_dir

DIAGNOSTICS = "diagnostics.csv"
CLOCK_SLOPES = ("sm_clock_l2_slope_by_tensor_activity", "sm_clock_hbm_slope_by_tensor_activity",
                "sm_clock_l2_tma_slope_by_tensor_activity")  # held flat too
COUNTERS = "counters.csv"  # every row timed ok, with the clock counter too (``--all``)
CLOCK_COUNTER = "sm__cycles_elapsed.avg.per_second_hz"


def rows(results: Path | None = None, hw=None, counters: str = DIAGNOSTICS) -> list[dict]:
    """Per row of ``counters`` (the diagnostics run, or ``counters.csv``: every row timed ok): label,
    size, measured time, Nsight Compute's clock, the engine's clock and the errors at the engine's clock
    and at Nsight Compute's (informed: the compiler's registers)."""
    results = Path(results or recorded_dir("tc_gemm"))
    hw = hw or hardware.load("h200")
    times = {(r["label"], r["m"], r["n"], r["k"]): r for r in suite.read_rows(results / "times.csv")}
    out = []
    with (results / counters).open(newline="") as fh:
        for d in csv.DictReader(fh):
            row = times.get((d["label"], d["m"], d["n"], d["k"]))
            if row is None or row.get("status") != "ok" or not d.get(CLOCK_COUNTER):
                continue
            cfg = dataclasses.replace(config_from_row("tc_gemm", row),
                                      **{suite.OVERRIDE_FIELD: int(float(row["regs_per_thread"]))})
            clock = float(d[CLOCK_COUNTER])
            flat = {name: ((0.0, 0.0), (1.0, 0.0)) for name in CLOCK_SLOPES if hw.has(name)}
            held = with_overrides(hw, sm_clock_hz=clock, sm_clock_hz_by_tensor_activity=((0.0, clock), (1.0, clock)),
                                  **flat)
            at_model, at_ncu = simulate(cfg, hw), simulate(cfg, held)
            measured = float(row["median_s"])
            out.append({"label": d["label"], "size": f"{d['m']}x{d['n']}x{d['k']}", "measured_s": measured,
                        "ncu_clock_hz": clock, "model_clock_hz": at_model.sm_clock_hz,
                        "error_model_clock": at_model.time_s / measured - 1,
                        "error_ncu_clock": at_ncu.time_s / measured - 1})
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    got = rows(counters=COUNTERS if "--all" in argv else DIAGNOSTICS)
    if not got:
        print("tc_clock: no diagnosed rows", file=sys.stderr)
        return 1
    print(f"{'kernel':52s} {'size':16s} {'clock GHz model / ncu':>22s} {'error at model clock':>21s} {'at ncu clock':>13s}")
    for r in got:
        print(f"{r['label']:52s} {r['size']:16s} {r['model_clock_hz'] / 1e9:10.3f} / {r['ncu_clock_hz'] / 1e9:.3f} "
              f"{100 * r['error_model_clock']:+20.1f}% {100 * r['error_ncu_clock']:+12.1f}%")
    if "--all" in argv:  # by kind of kernel
        kinds: dict = {}
        for r in got:
            lab = r["label"]
            kind = ("wgmma cluster" if "_cl" in lab else "WMMA from global" if "global" in lab
                    else lab.split("_")[0])
            kinds.setdefault(kind, []).append(r)
        for kind, rs in sorted(kinds.items()):
            ex = statistics.mean(r["model_clock_hz"] / r["ncu_clock_hz"] - 1 for r in rs)
            print(f"{kind:18s} {len(rs):3d} rows: clock {100 * ex:+.1f}% above Nsight Compute's; mean error "
                  f"{100 * statistics.mean(r['error_model_clock'] for r in rs):+.1f}% -> "
                  f"{100 * statistics.mean(r['error_ncu_clock'] for r in rs):+.1f}% at its clock")
    for key, name in (("error_model_clock", "model clock"), ("error_ncu_clock", "Nsight Compute's clock")):
        errs = [r[key] for r in got]
        print(f"at the {name}: MAPE {100 * statistics.mean(map(abs, errs)):.1f}%, "
              f"mean {100 * statistics.mean(errs):+.1f}% over {len(errs)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
