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
from pathlib import Path

from validation.public import report as common
from validation.public.report import parse_size, stats  # noqa: F401  (the same statistics for both sets)
from validation.public.tc import kernels as K

DEFAULT_RESULTS = Path(__file__).resolve().parents[2] / "results" / "h200" / "public" / "tc"
MODES = ("blind", "informed")


def _size(text: str) -> tuple[int, int, int]:
    return parse_size(text)


def load_rows(results_dir: Path) -> list[dict]:
    return common.load_rows(results_dir)


def predict_rows(rows: list[dict], hardware: str = "h200", simulate=None, jobs: int = 1) -> tuple[list[dict], list[dict]]:
    """(predictions, skipped): a prediction per ok row with its blind and informed times (``jobs``
    processes)."""
    return common.predict_rows(rows, hardware, simulate, kernels=K, jobs=jobs)


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
