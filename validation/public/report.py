"""How well the model predicts held-out public kernels (CPU only):
``python -m validation.public.report sgemm [--results DIR] [--hardware h200]``.

``sgemm``: reads ``DIR/times.csv`` (written by ``python -m validation.public.run sgemm``; default
``validation/results/h200/public/sgemm``), rebuilds each row's mapped
:class:`~tilesim.kernels.gemm.config.GemmConfig` from :mod:`validation.public.sgemm.kernels`
(kernel name and size; the CSV's label must match the mapping, else ``ValueError``), and simulates
it twice: *blind* (the model's own register estimate) and *informed* (``regs_per_thread`` = the
recorded CuPy count). Rows whose status is not ``ok``, and rows the model refuses (its
``ValueError``, e.g. a recorded register count it says cannot fit an SM), are listed as skipped. Prints, per mode, over
all rows and per size: MAPE (mean |predicted / measured - 1|), bias (mean signed error; negative:
predicted too fast) and Spearman's rank correlation of predicted and measured times; then one
table row per kernel and size.

``tc`` hands the remaining arguments to :mod:`validation.public.tc.report` (owned elsewhere).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

from validation.harness.report import spearman

RESULTS_ROOT = Path(__file__).resolve().parents[1] / "results" / "h200" / "public"
DEFAULT_RESULTS = RESULTS_ROOT / "sgemm"
MODES = ("blind", "informed")


def parse_size(text: str) -> tuple[int, int, int]:
    parts = str(text).lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"times.csv size = {text!r}: must look like 4096x4096x4096")
    return int(parts[0]), int(parts[1]), int(parts[2])


def load_rows(results_dir: Path) -> list[dict]:
    path = Path(results_dir) / "times.csv"
    if not path.exists():
        raise ValueError(f"--results = {str(results_dir)!r}: no times.csv there "
                         "(python -m validation.public.run sgemm --out DIR writes it)")
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _both_modes(simulate, cfg, regs, hardware):
    """(blind, informed) predicted seconds of ``cfg``, or the ValueError the model raised."""
    try:
        blind = simulate(cfg, hardware).time_s
        informed = simulate(cfg.with_(regs_per_thread=regs), hardware).time_s if regs else blind
    except ValueError as err:  # e.g. a recorded register count the model says cannot fit an SM
        return err
    return blind, informed


def predict_rows(rows: list[dict], hardware: str = "h200", simulate=None, kernels=None,
                 jobs: int = 1) -> tuple[list[dict], list[dict]]:
    """(predictions, skipped): per ``ok`` row its measured, blind and informed times. ``kernels`` is the
    set's mapping module (``BY_NAME``: kernel name -> its ``config(m, n, k)``); default the SGEMMs'.
    ``jobs`` > 1 simulates the rows in that many processes (same results, in row order)."""
    if kernels is None:
        from validation.public.sgemm import kernels
    K = kernels  # noqa: N806

    if simulate is None:
        from tilesim.api import simulate
    preds, skipped, todo = [], [], []
    for r in rows:
        if r.get("status") != "ok":
            skipped.append(r)
            continue
        kernel = K.BY_NAME.get(r.get("kernel"))
        if kernel is None:
            raise ValueError(f"times.csv kernel = {r.get('kernel')!r}: not in {K.__name__}")
        m, n, k = parse_size(r["size"])
        cfg = kernel.config(m, n, k)
        if r.get("label") and r["label"] != cfg.label:
            raise ValueError(f"times.csv label = {r['label']!r} for {r['kernel']}: the mapping now gives "
                             f"{cfg.label!r} (re-measure, or revert {K.__name__})")
        measured = float(r["median_s"])
        if not (math.isfinite(measured) and measured > 0):
            raise ValueError(f"times.csv median_s = {r['median_s']!r} for {r['kernel']} {r['size']}: must be > 0")
        regs = int(r["regs_per_thread"]) if r.get("regs_per_thread") else None
        todo.append((r, cfg, measured, regs))
    args = [(simulate, cfg, regs, hardware) for _, cfg, _, regs in todo]
    if jobs > 1 and len(args) > 1:
        from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415

        with ProcessPoolExecutor(min(jobs, len(args))) as ex:
            results = list(ex.map(_both_modes, *zip(*args, strict=True)))
    else:
        results = [_both_modes(*a) for a in args]
    for (r, cfg, measured, regs), res in zip(todo, results, strict=True):
        if isinstance(res, ValueError):
            skipped.append({**r, "status": f"model refused: {res}"})
            continue
        blind, informed = res
        preds.append({"kernel": r["kernel"], "size": r["size"], "label": cfg.label, "measured_s": measured,
                      "regs": regs, "est_regs": cfg.estimated_regs, "blind_s": blind, "informed_s": informed})
    return preds, skipped


def stats(preds: list[dict], mode: str) -> dict:
    """n, MAPE, bias and Spearman of ``mode`` ("blind" or "informed") over ``preds``."""
    if mode not in MODES:
        raise ValueError(f"mode = {mode!r}: must be one of {', '.join(MODES)}")
    errs = [p[f"{mode}_s"] / p["measured_s"] - 1.0 for p in preds]
    rho = float("nan")
    if len(preds) >= 2:
        rho = spearman([p[f"{mode}_s"] for p in preds], [p["measured_s"] for p in preds])
    return {"n": len(preds), "mape": sum(abs(e) for e in errs) / len(errs) if errs else float("nan"),
            "bias": sum(errs) / len(errs) if errs else float("nan"), "spearman": rho}


def format_report(preds: list[dict], skipped: list[dict], title: str = "siboehm/SGEMM_CUDA (held out)") -> str:
    lines = [f"{title}: {len(preds)} measured rows, {len(skipped)} skipped"]
    sizes = sorted({p["size"] for p in preds}, key=parse_size)
    for mode in MODES:
        lines.append(f"[{mode}]")
        for group, ps in [("all", preds)] + [(s, [p for p in preds if p["size"] == s]) for s in sizes]:
            st = stats(ps, mode)
            lines.append(f"  {group:>16}  n={st['n']:2d}  MAPE {st['mape'] * 100:6.1f}%  "
                         f"bias {st['bias'] * 100:+6.1f}%  Spearman {st['spearman']:+.3f}")
    lines.append("")
    lines.append(f"{'kernel':<28} {'size':<15} {'measured_ms':>11} {'blind_ms':>9} {'err':>7} "
                 f"{'informed_ms':>11} {'err':>7} {'regs':>4} {'est':>4}  label")
    for p in sorted(preds, key=lambda p: (parse_size(p["size"]), p["kernel"])):
        eb = p["blind_s"] / p["measured_s"] - 1
        ei = p["informed_s"] / p["measured_s"] - 1
        lines.append(f"{p['kernel']:<28} {p['size']:<15} {p['measured_s'] * 1e3:11.3f} {p['blind_s'] * 1e3:9.3f} "
                     f"{eb * 100:+6.1f}% {p['informed_s'] * 1e3:11.3f} {ei * 100:+6.1f}% {p['regs'] or '':>4} "
                     f"{p['est_regs']:>4}  {p['label']}")
    for r in skipped:
        lines.append(f"skipped: {r.get('kernel')} {r.get('size')} status {r.get('status')!r}")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["tc"]:
        from validation.public.tc import report as tc_report

        return tc_report.main(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m validation.public.report", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="family", required=True)
    sp = sub.add_parser("sgemm", help="siboehm/SGEMM_CUDA kernels 1-10 (fp32)")
    sp.add_argument("--results", default=str(DEFAULT_RESULTS), help="directory holding times.csv")
    sp.add_argument("--hardware", default="h200")
    sub.add_parser("tc", help="tensor-core kernels: arguments go to validation.public.tc.report")
    args = ap.parse_args(argv)
    preds, skipped = predict_rows(load_rows(Path(args.results)), args.hardware)
    print(format_report(preds, skipped))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
