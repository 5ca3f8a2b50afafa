"""Microbenchmark probes profiled as a whole by Nsight Compute (calibration and studies use them).

``probe_rows(module, metrics)`` runs ``python -m <module> --target`` under ncu and returns one dict
per profiled kernel launch in launch order; ``probe_main`` is the command line every probe shares
(``--target`` for ncu, else measure and write ``<out>/<name>.json`` with metadata).
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from validation.harness.ncu import parse_number


def probe_rows(module: str, metrics: Sequence[str], *, cache_control: str = "none", ncu: str = "ncu",
               timeout_s: float = 900.0) -> list[dict]:
    """Run ``python -m <module> --target`` under ncu; one dict per profiled kernel launch, in launch
    order: ``kernel_name`` and each metric's number (ncu's base units; None when missing).

    Raises ``RuntimeError`` with ncu's last words when no kernel was profiled."""
    cmd = [ncu, "--clock-control", "none", "--cache-control", cache_control, "--csv", "--page", "raw",
           "--print-units", "base", "--profile-from-start", "off", "--metrics", ",".join(metrics),
           sys.executable, "-m", module, "--target"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    rows = list(csv.reader([ln for ln in p.stdout.splitlines() if ln.startswith('"')]))
    if len(rows) < 3:
        raise RuntimeError(f"ncu gave no rows (rc={p.returncode}): {p.stderr[-800:]}")
    col = {h: i for i, h in enumerate(rows[0])}
    return [{"kernel_name": r[col["Kernel Name"]], **{m: parse_number(r[col[m]]) if m in col else None
                                                       for m in metrics}} for r in rows[2:] if len(r) == len(rows[0])]


def probe_main(prog: str, doc: str, argv, target, measure, out_name: str, extra=None, show=None,
               results_subdir: str = "calibration") -> int:
    """The command line of a probe module: ``--target`` (what ncu runs) or measure and write
    ``<out>/<out_name>`` with metadata (``--out`` defaults to ``validation/results/<gpu>/<results_subdir>``);
    one line and exit 2 without CuPy or ncu."""
    ap = argparse.ArgumentParser(prog=f"python -m {prog}", description=doc.splitlines()[0])
    ap.add_argument("--out", required=False, default=None, help=f"output directory (default validation/results/<gpu>/{results_subdir})")
    ap.add_argument("--target", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    try:
        import cupy  # noqa: F401, PLC0415
    except ImportError as exc:
        print(f"{prog}: needs CuPy and an NVIDIA GPU: {exc}", file=sys.stderr)
        return 2
    if args.target:
        return target()
    if not shutil.which("ncu"):
        print(f"{prog}: needs Nsight Compute (ncu) on PATH", file=sys.stderr)
        return 2
    from validation.harness.metadata import collect_metadata  # noqa: PLC0415

    res = {"meta": collect_metadata(), **(extra or {}), **measure()}
    from validation.harness.suite import default_results_root  # noqa: PLC0415

    out = Path(args.out) if args.out else default_results_root() / results_subdir
    out.mkdir(parents=True, exist_ok=True)
    (out / out_name).write_text(json.dumps(res, indent=2, default=str) + "\n")
    if show:
        show(res)
    return 0
