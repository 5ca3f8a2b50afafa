"""Why the engine misses its own fp32 microbenchmarks (issue #10): Nsight Compute on the outer-product loops.

``validation/studies/engine_check.py`` replays the calibration microbenchmarks of
``validation/calibration/microbench.cu`` as tile programs: the engine is too slow on one block of 4 warps
(lds_outer 8x4_4w -16%, gstaged_outer 8x8_4w_R1 -21% in instruction rate) and too fast with many blocks of
4x4 tiles (staged_outer 4x4_4w_R2 +15%, gstaged_outer 4x4_4w_R4 +16%). This probe launches each of those
loops once, as ``calibrate.py`` sizes them (:func:`profile_launches`: lds_outer, staged_outer,
gstaged_outer and dgstaged_outer, every case), so that ``ncu --clock-control none --csv --metrics ...``
(:data:`METRICS`) records per launch where the warps wait: the stall reasons per issued instruction, the
issue slots used, the FMA pipe's activity and the shared-memory wavefronts.

``python -m validation.calibration.outer_stalls_probe --profile [--out DIR]``: the launches, their order in
``DIR/outer_stalls_profile.json`` (GPU). ``--metrics [QUERY]``: the comma-joined :data:`METRICS` (those whose
base name a ``ncu --query-metrics`` listing in QUERY names, when given), for the device script.
``--merge-ncu CSV --out DIR``: ``DIR/outer_stalls.json`` with per launch the metric values and
:func:`row_summary` (no GPU). The engine's figures for the same rows: ``python -m validation.studies.engine_check``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path

from validation.calibration import probe_common as pc

PROFILE_FILE = "outer_stalls_profile.json"
RESULT_FILE = "outer_stalls.json"
VARIANTS = ("staged_outer", "gstaged_outer", "dgstaged_outer")  # calibrate.STAGED_VARIANTS keys profiled
STALLS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle", "long_scoreboard",
          "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction", "not_selected", "selected",
          "short_scoreboard", "sleeping", "tex_throttle", "wait")
STALL_METRIC = "smsp__average_warp_latency_issue_stalled_{}.ratio"
METRICS = (
    *(STALL_METRIC.format(s) for s in STALLS),
    "smsp__inst_executed.sum",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "smsp__warps_active.avg.per_cycle_active",
    "smsp__warps_eligible.avg.per_cycle_active",
    "sm__cycles_elapsed.avg",
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
    "smsp__inst_executed_op_shared_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
)


def metrics_list(query_text: str | None = None) -> list[str]:
    """:data:`METRICS`, keeping only those whose base name (before the first ``.``) a ``ncu --query-metrics``
    listing names, when one is given and names any of them (an unknown metric fails the whole ncu run)."""
    if not query_text:
        return list(METRICS)
    known = {ln.split()[0] for ln in query_text.splitlines() if ln.strip()}
    kept = [m for m in METRICS if m.split(".")[0] in known]
    return kept or list(METRICS)


def profile_launches(out: Path) -> list[str]:
    """Launch every case of calibrate.py's lds_outer and :data:`VARIANTS` once (as its benchmark sizes it;
    the timing loop left out) and write their order to ``out/PROFILE_FILE``; returns the row keys."""
    from validation.calibration import calibrate  # noqa: PLC0415

    class _Once(calibrate._Bench):
        """Each benchmark's own first launch only: no timed repetitions (ncu profiles every launch)."""

        def event_times(self, launch, runs=None, warmup=2, gate=True):
            return [1e-3] * (runs or self.runs)

    b = _Once(calibrate.MIN_RUNS)
    order = [f"lds_outer {k}" for k in calibrate.bench_lds_outer(b)["rows"]]
    for variant in VARIANTS:
        rows = calibrate.bench_staged_outer(b, **calibrate.STAGED_VARIANTS[variant])["rows"]
        order += [f"{variant} {k}" for k in rows]
    out.mkdir(parents=True, exist_ok=True)
    pc.write_json(out / PROFILE_FILE, {"meta": pc.collect_metadata(), "profile_order": order})
    return order


def parse_ncu_csv(text: str, order: list[str]) -> dict:
    """``ncu --csv --metrics ...`` output (one launch per row key of ``order``, in that order) ->
    {row: {metric: value}}; ValueError when the launch count differs."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise ValueError('no ncu CSV header (a line starting with "ID")')
    launches: dict[int, dict] = {}
    for r in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        try:
            v = float((r.get("Metric Value") or "").replace(",", ""))
            i = int(r["ID"])
        except (ValueError, TypeError, KeyError):
            continue
        launches.setdefault(i, {})[r["Metric Name"]] = v
    if len(launches) != len(order):
        raise ValueError(f"{len(launches)} profiled launches for {len(order)} rows")
    return {key: launches[i] for key, i in zip(order, sorted(launches), strict=True)}


def row_summary(m: dict) -> dict:
    """The figures a row is read by: warp cycles per issued instruction (the stalls summed, ``selected``
    included), each stall's cycles per issued instruction, issue slots used, active and eligible warps a scheduler, the FMA
    pipe's activity, and shared wavefronts and bank conflicts per shared load."""
    # each is a warp's cycles stalled for that reason (a warp's average over the kernel), ``selected`` its
    # issued instructions (one cycle each): over ``selected``, cycles per issued instruction
    total = {s: m[STALL_METRIC.format(s)] for s in STALLS if STALL_METRIC.format(s) in m}
    issued = total.get("selected") or 0.0
    stalls = {s: v / issued for s, v in total.items()} if issued else {}
    per_issue = sum(stalls.values()) if issued else None
    lds = m.get("smsp__inst_executed_op_shared_ld.sum") or 0.0
    wf = m.get("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum")
    bc = m.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum")
    return {
        "cycles_per_issue": per_issue,
        "stalls_per_issue": dict(sorted(stalls.items(), key=lambda kv: -kv[1])),
        "issue_active_pct": m.get("smsp__issue_active.avg.pct_of_peak_sustained_active"),
        "warps_active_per_scheduler": m.get("smsp__warps_active.avg.per_cycle_active"),
        "warps_eligible_per_scheduler": m.get("smsp__warps_eligible.avg.per_cycle_active"),
        "fma_pipe_active_pct": m.get("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"),
        "lsu_pipe_pct": m.get("sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active"),
        "wavefronts_per_shared_load": wf / lds if lds and wf is not None else None,
        "bank_conflicts_per_shared_load": bc / lds if lds and bc is not None else None,
    }


def merge_ncu(csv_path: Path, out: Path) -> dict:
    """``out/RESULT_FILE`` from an ncu CSV of a ``--profile`` run (whose order file lies in ``out``)."""
    prof = json.loads((out / PROFILE_FILE).read_text())
    rows = parse_ncu_csv(Path(csv_path).read_text(), prof["profile_order"])
    res = {"meta": {**prof["meta"], "ncu_csv": Path(csv_path).name, "metrics": list(METRICS)},
           "rows": {k: {"ncu": m, "summary": row_summary(m)} for k, m in rows.items()}}
    pc.write_json(out / RESULT_FILE, res)
    return res


def format_table(res: dict) -> str:
    head = (f"{'row':30s} {'cyc/iss':>7s} {'issue%':>6s} {'warps':>5s} {'elig':>5s} {'fma%':>5s} "
            f"{'wf/lds':>6s}  top stalls per issued instruction")
    lines = [head]
    for k, r in res["rows"].items():
        s = r["summary"]
        top = ", ".join(f"{n} {v:.2f}" for n, v in list(s["stalls_per_issue"].items())[:4])
        num = [s["cycles_per_issue"], s["issue_active_pct"], s["warps_active_per_scheduler"],
               s["warps_eligible_per_scheduler"], s["fma_pipe_active_pct"], s["wavefronts_per_shared_load"]]
        cells = " ".join(f"{v:{w}.2f}" if v is not None else " " * w for v, w in zip(num, (7, 6, 5, 5, 5, 6), strict=True))
        lines.append(f"{k:30s} {cells}  {top}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.calibration.outer_stalls_probe",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--profile", action="store_true", help="launch every case once (run under ncu)")
    ap.add_argument("--metrics", nargs="?", const="", default=None, metavar="QUERY",
                    help="print the metrics to pass to ncu (filtered by a --query-metrics listing in QUERY)")
    ap.add_argument("--merge-ncu", metavar="CSV", default=None, help=f"write {RESULT_FILE} from an ncu CSV")
    ap.add_argument("--out", default=".", help="folder of the order file and the results")
    a = ap.parse_args(argv)
    out = Path(a.out)
    if a.metrics is not None:
        print(",".join(metrics_list(Path(a.metrics).read_text() if a.metrics else None)))
        return 0
    if a.merge_ncu:
        print(format_table(merge_ncu(Path(a.merge_ncu), out)))
        return 0
    if a.profile:
        why = pc.gpu_missing()
        if why:
            return pc.no_gpu_exit(ap.prog, why)
        print("\n".join(profile_launches(out)))
        return 0
    ap.error("one of --profile, --metrics, --merge-ncu")
    return 2


if __name__ == "__main__":
    sys.exit(main())
