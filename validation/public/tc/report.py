"""How well the model predicts the held-out tensor-core kernels (CPU only):
``python -m validation.public.tc.report [--results DIR] [--hardware h200]``.

Reads ``DIR/times.csv`` (written by :mod:`validation.public.tc.run`; default
``validation/results/h200/public/tc``), rebuilds each row's mapped :class:`TcGemmConfig` from
:mod:`validation.public.tc.kernels` (kernel name and size; the CSV's label must match), and simulates
it twice: *blind* (registers estimated from the tile) and *informed* (``regs_per_thread`` set to the
recorded count). Rows whose status is not ``ok`` are listed and left out of the statistics. Prints,
per mode and per size: MAPE (mean |predicted / measured - 1|), bias (mean signed error) and Spearman's
rank correlation of predicted and measured times; then one table row per kernel and size.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from validation.harness.report import spearman
from validation.public.tc import kernels as K

DEFAULT_RESULTS = Path(__file__).resolve().parents[2] / "results" / "h200" / "public" / "tc"
MODES = ("blind", "informed")


def _size(text: str) -> tuple[int, int, int]:
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"times.csv size = {text!r}: must look like 4096x4096x4096")
    return int(parts[0]), int(parts[1]), int(parts[2])


def load_rows(results_dir: Path) -> list[dict]:
    path = Path(results_dir) / "times.csv"
    if not path.exists():
        raise ValueError(f"results = {str(results_dir)!r}: no times.csv there (run validation.public.tc.run)")
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def predict_rows(rows: list[dict], hardware: str = "h200", simulate=None) -> tuple[list[dict], list[dict]]:
    """(predictions, skipped): a prediction per ok row with its blind and informed times."""
    if simulate is None:
        from tilesim.api import simulate
    preds, skipped = [], []
    for r in rows:
        if r.get("status") != "ok":
            skipped.append(r)
            continue
        kernel = K.BY_NAME.get(r["kernel"])
        if kernel is None:
            raise ValueError(f"times.csv kernel = {r['kernel']!r}: not in validation.public.tc.kernels")
        m, n, k = _size(r["size"])
        cfg = kernel.config(m, n, k)
        if r.get("label") and r["label"] != cfg.label:
            raise ValueError(f"times.csv label = {r['label']!r} for {r['kernel']}: the mapping now gives "
                             f"{cfg.label!r} (re-measure or revert kernels.py)")
        measured = float(r["median_s"])
        regs = int(r["regs_per_thread"]) if r.get("regs_per_thread") else None
        out = {"kernel": r["kernel"], "size": r["size"], "label": cfg.label, "measured_s": measured,
               "regs": regs, "blind_s": simulate(cfg, hardware).time_s,
               "informed_s": simulate(cfg.with_(regs_per_thread=regs), hardware).time_s if regs else None}
        if out["informed_s"] is None:
            out["informed_s"] = out["blind_s"]
        preds.append(out)
    return preds, skipped


def stats(preds: list[dict], mode: str) -> dict:
    errs = [p[f"{mode}_s"] / p["measured_s"] - 1.0 for p in preds]
    rho = spearman([p[f"{mode}_s"] for p in preds], [p["measured_s"] for p in preds]) if len(preds) >= 2 else float("nan")
    return {"n": len(preds), "mape": sum(abs(e) for e in errs) / len(errs) if errs else float("nan"),
            "bias": sum(errs) / len(errs) if errs else float("nan"), "spearman": rho}


def format_report(preds: list[dict], skipped: list[dict]) -> str:
    lines = []
    sizes = sorted({p["size"] for p in preds}, key=lambda s: _size(s))
    for mode in MODES:
        lines.append(f"[{mode}]")
        for group, ps in [("all", preds)] + [(s, [p for p in preds if p["size"] == s]) for s in sizes]:
            st = stats(ps, mode)
            lines.append(f"  {group:>16}  n={st['n']:2d}  MAPE {st['mape'] * 100:6.1f}%  bias {st['bias'] * 100:+6.1f}%"
                         f"  Spearman {st['spearman']:+.3f}")
    lines.append("")
    lines.append(f"{'kernel':<24} {'size':<16} {'measured_ms':>11} {'blind_ms':>9} {'err':>7} {'informed_ms':>11} "
                 f"{'err':>7} {'regs':>4}  label")
    for p in sorted(preds, key=lambda p: (_size(p["size"]), p["kernel"])):
        eb = p["blind_s"] / p["measured_s"] - 1
        ei = p["informed_s"] / p["measured_s"] - 1
        lines.append(f"{p['kernel']:<24} {p['size']:<16} {p['measured_s'] * 1e3:11.3f} {p['blind_s'] * 1e3:9.3f} "
                     f"{eb * 100:+6.1f}% {p['informed_s'] * 1e3:11.3f} {ei * 100:+6.1f}% {p['regs'] or '':>4}  {p['label']}")
    for r in skipped:
        lines.append(f"skipped: {r.get('kernel')} {r.get('size')} status {r.get('status')!r}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(DEFAULT_RESULTS), help="directory holding times.csv")
    ap.add_argument("--hardware", default="h200")
    args = ap.parse_args(argv)
    preds, skipped = predict_rows(load_rows(Path(args.results)), args.hardware)
    print(format_report(preds, skipped))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
