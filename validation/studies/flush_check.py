"""The flush's dirty lines on the suites' own kernels: measured both ways, and what the model says.

The suites are timed after the harness's L2 flush (a write of twice the L2), which leaves dirty lines
the kernel writes back (validation/calibration/flush_probe.py measured the mechanism on plain streams;
the engine models it, ``simulate(..., l2_start="flushed")``, the default). This study times suite
kernels of the small memory-bound shapes, where the effect is largest, both after that flush (as the
suite) and after the flush plus a read sweep that writes the dirty lines back first (``clean``), each
kernel's two timings interleaved in one process, and compares the measured difference with the
engine's (``flushed`` minus ``clean`` predictions; nothing in the model was set from these times).

Recorded (session 11, 95 kernels, medians per shape of flushed - clean): LayerNorm 8192x1024 measured
+3.19 us, predicted +3.04; 3000x1000 +1.63 / +2.19; 16384x4096 +4.36 / +7.43; softmax 4096x1024
+1.34 / +2.42; reduction 4194304 +1.26 / +0.00. The model's MAPE on the same kernels is lower against
the flushed times than against the clean ones for every shape (e.g. softmax 8.1% against 16.5%).
``python -m validation.studies.flush_check --measure --out DIR`` (GPU) writes ``DIR/flush_check.csv``
with metadata; ``python -m validation.studies.flush_check [--csv FILE]`` (CPU) prints the comparison of
the recorded ``validation/results/h200/studies/flush_check/flush_check.csv``.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import statistics
import sys
from pathlib import Path

from validation.harness import suite
from validation.harness.report import config_from_row

RECORDED = suite.RESULTS_ROOT / "h200" / "studies" / "flush_check" / "flush_check.csv"
#: (family, size, every n-th row of that size in times.csv): the small memory-bound shapes, and one
#: that is large for contrast
PLAN = (("layernorm", "8192x1024", 1), ("layernorm", "3000x1000", 2), ("softmax", "4096x1024", 1),
        ("reduction", "4194304", 3), ("layernorm", "16384x4096", 3))
REPS = 30
COLUMNS = ("family", "label", "size", "regs_per_thread", "flushed_median_s", "flushed_p10_s", "flushed_p90_s",
           "clean_median_s", "clean_p10_s", "clean_p90_s")


def planned_rows() -> list[tuple[str, dict, str]]:
    """(family, times.csv row, size) of the configurations :data:`PLAN` picks (status ok only)."""
    from tilesim.kernels import registry  # noqa: PLC0415

    out = []
    for family, size, every in PLAN:
        fam = registry.get(family)
        picked = 0
        for row in suite.read_rows(suite.RESULTS_ROOT / "h200" / family / "times.csv"):
            try:
                cfg = config_from_row(family, row)
            except (TypeError, ValueError):
                continue
            if row.get("status") != "ok" or fam.full_label(cfg).rsplit("@", 1)[-1] != size:
                continue
            if picked % every == 0:
                out.append((family, row, size))
            picked += 1
    return out


def measure(out_dir: Path) -> Path:
    import cupy as cp  # noqa: PLC0415

    from validation.calibration.flush_probe import read_kernel_source  # noqa: PLC0415
    from validation.harness import runners  # noqa: PLC0415
    from validation.harness.metadata import collect_metadata  # noqa: PLC0415
    from validation.harness.timing import L2Flusher, time_gpu  # noqa: PLC0415

    flush = L2Flusher(cp)
    other = cp.random.random(flush.nbytes // 4, dtype=cp.float32)
    sink = cp.zeros(132 * 8, dtype=cp.float32)
    sweep_kernel = cp.RawModule(code=read_kernel_source("fc_sweep")).get_function("fc_sweep")

    def sweep():
        sweep_kernel((132 * 8,), (256,), (other, cp.int64(other.size // 4), sink))

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "flush_check.csv"
    plan = planned_rows()
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for i, (family, row, size) in enumerate(plan):
            cfg = config_from_row(family, row)
            try:
                case = runners.get_runner(family).prepare(cfg, seed=0)
                ok, _, message = case.check()
                if not ok:
                    print(f"{family} {row['label']} {size}: wrong ({message})", file=sys.stderr)
                    continue
                flushed = time_gpu(case.launch, reps=REPS, flusher=flush)
                clean = time_gpu(case.launch, reps=REPS, flusher=flush, before=sweep)
            except Exception as exc:  # noqa: BLE001 - one broken kernel must not stop the study
                print(f"{family} {row['label']} {size}: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            w.writerow({"family": family, "label": row["label"], "size": size,
                        "regs_per_thread": (case.attributes or {}).get("regs_per_thread"),
                        "flushed_median_s": flushed.median_s, "flushed_p10_s": flushed.p10_s,
                        "flushed_p90_s": flushed.p90_s, "clean_median_s": clean.median_s,
                        "clean_p10_s": clean.p10_s, "clean_p90_s": clean.p90_s})
            fh.flush()
            print(f"[{i + 1}/{len(plan)}] {family} {row['label']} {size}: flushed {flushed.median_s * 1e6:.1f} us, "
                  f"clean {clean.median_s * 1e6:.1f} us")
    (out_dir / "metadata.json").write_text(json.dumps(collect_metadata(), indent=2, default=str) + "\n")
    return path


def compare(csv_path: Path = RECORDED) -> list[dict]:
    """Per measured row: measured and predicted (informed) times after both starts."""
    from tilesim import simulate  # noqa: PLC0415

    rows = {(f, r["label"], s): r for f, r, s in planned_rows()}
    out = []
    with csv_path.open(newline="") as fh:
        for m in csv.DictReader(fh):
            row = rows.get((m["family"], m["label"], m["size"]))
            if row is None:
                continue
            cfg = config_from_row(m["family"], row)
            if row.get("regs_per_thread"):
                cfg = dataclasses.replace(cfg, **{suite.OVERRIDE_FIELD: int(float(row["regs_per_thread"]))})
            pf, pc = simulate(cfg, "h200").time_s, simulate(cfg, "h200", l2_start="clean").time_s
            out.append({"family": m["family"], "label": m["label"], "size": m["size"],
                        "measured_flushed_s": float(m["flushed_median_s"]), "measured_clean_s": float(m["clean_median_s"]),
                        "predicted_flushed_s": pf, "predicted_clean_s": pc})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.studies.flush_check", description=__doc__.splitlines()[0])
    ap.add_argument("--measure", action="store_true", help="time the planned kernels both ways (needs a GPU)")
    ap.add_argument("--out", default=None, help="with --measure: the directory for flush_check.csv")
    ap.add_argument("--csv", default=str(RECORDED), help="the recorded measurements to compare with")
    args = ap.parse_args(argv)
    if args.measure:
        from validation.calibration.probe_common import gpu_missing, no_gpu_exit  # noqa: PLC0415

        why = gpu_missing()
        if why:
            return no_gpu_exit("flush_check", why)
        print(f"wrote {measure(Path(args.out or RECORDED.parent))}")
        return 0
    if not Path(args.csv).exists():
        print(f"flush_check: no measurements at {args.csv} (not recorded yet: run --measure on a GPU)",
              file=sys.stderr)
        return 2
    got = compare(Path(args.csv))
    if not got:
        print(f"flush_check: nothing to compare in {args.csv}", file=sys.stderr)
        return 1
    print(f"{'family':9s} {'size':10s} {'kernel':40s} {'measured us flushed/clean (diff)':>34s} "
          f"{'predicted us flushed/clean (diff)':>34s}")
    for r in got:
        md = r["measured_flushed_s"] - r["measured_clean_s"]
        pd = r["predicted_flushed_s"] - r["predicted_clean_s"]
        print(f"{r['family']:9s} {r['size']:10s} {r['label'][:40]:40s} {r['measured_flushed_s'] * 1e6:9.1f} /"
              f"{r['measured_clean_s'] * 1e6:7.1f} ({md * 1e6:+5.1f}) {r['predicted_flushed_s'] * 1e6:12.1f} /"
              f"{r['predicted_clean_s'] * 1e6:7.1f} ({pd * 1e6:+5.1f})")
    for key in sorted({(r["family"], r["size"]) for r in got}):
        sel = [r for r in got if (r["family"], r["size"]) == key]
        md = statistics.median(r["measured_flushed_s"] - r["measured_clean_s"] for r in sel)
        pd = statistics.median(r["predicted_flushed_s"] - r["predicted_clean_s"] for r in sel)
        ef = statistics.mean(abs(r["predicted_flushed_s"] / r["measured_flushed_s"] - 1) for r in sel)
        ec = statistics.mean(abs(r["predicted_clean_s"] / r["measured_clean_s"] - 1) for r in sel)
        print(f"{key[0]} {key[1]} ({len(sel)}): flushed - clean measured {md * 1e6:+.2f} us, predicted "
              f"{pd * 1e6:+.2f} us; MAPE flushed {100 * ef:.1f}%, clean {100 * ec:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
