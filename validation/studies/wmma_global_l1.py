"""tc_gemm's WMMA-from-global rung (rung 1) against Nsight Compute's L1 counters (CPU, from a recorded profile).

The rung's fragments come straight from global memory (``wmma::load_matrix_sync`` on generic pointers: LD.E,
8 sectors a warp instruction); the engine charges each instruction the L1 cycles of
:func:`tilesim.cost.access.l1_cycles` and finds these kernels L1-bound, yet predicts them 1-39% fast.
``validation/results/h200/studies/wmma_global_l1/counters.csv`` is ``python -m validation.harness.ncu tc_gemm
--only wmma_global --extra --add-metrics ...`` on the H200 (README there). Per configuration this prints the
measured time error of the informed prediction, and per global-load request (``l1tex__t_requests_pipe_lsu_mem
_global_op_ld``): the sectors, the tag stage's output wavefronts, the L1 data pipe's LSU wavefronts, the engine's
L1 cycles, the L1 hit rate, and the long-scoreboard and LG-throttle stalls per issued instruction.

``python -m validation.studies.wmma_global_l1 [--counters CSV]``
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from validation.harness.suite import recorded_dir

DEFAULT_COUNTERS = recorded_dir("studies") / "wmma_global_l1" / "counters.csv"
REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum_count"


def _value(row: dict, prefix: str) -> float:
    for key, v in row.items():
        if key.startswith(prefix):
            return float(v) if v not in ("", None) else float("nan")
    return float("nan")


def rows(counters: Path = DEFAULT_COUNTERS) -> list[dict]:
    """One dict per profiled configuration: the measured per-request figures and the engine's."""
    from tilesim import lower, simulate  # noqa: PLC0415
    from tilesim.api import resolve_hardware  # noqa: PLC0415
    from tilesim.cost import step_cost  # noqa: PLC0415
    from tilesim.kernels import registry  # noqa: PLC0415
    from validation.harness.suite import load_suite  # noqa: PLC0415

    hw = resolve_hardware("h200")
    fam = registry.get("tc_gemm")
    times = {(r["label"], r["m"], r["n"], r["k"]): r for r in csv.DictReader(open(recorded_dir("tc_gemm") / "times.csv"))}
    configs = {(fam.label(c), str(c.m), str(c.n), str(c.k)): c for c in load_suite("tc_gemm")}
    out = []
    for r in csv.DictReader(open(counters)):
        key = (r["label"], r["m"], r["n"], r["k"])
        cfg, t = configs.get(key), times.get(key)
        if cfg is None or t is None or not r.get(REQUESTS):
            continue
        req = float(r[REQUESTS])
        informed = cfg.__class__(**{**cfg.__dict__, "regs_per_thread": int(float(t["regs_per_thread"]))})
        program = lower(informed, hw)[0]
        loop = next(ph for ph in program.phases if ph.trips > 1)
        cost = step_cost(loop.step, hw, program.launch.threads_per_block // hw.warp_size)
        per_step = sum(ld.repeat * len(ld.instructions) for ld in loop.step.loads)
        out.append({
            "config": fam.full_label(cfg),
            "time_error": simulate(informed, hw).time_s / float(t["median_s"]) - 1,
            "sectors": _value(r, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum") / req,
            "tag_wavefronts": _value(r, "l1tex__t_output_wavefronts_pipe_lsu_mem_global_op_ld") / req,
            "data_wavefronts": _value(r, "l1tex__data_pipe_lsu_wavefronts.sum") / req,
            "engine_l1_cycles": cost.load_l1_cycles / per_step,
            "l1_hit_pct": _value(r, "l1tex__t_sector_hit_rate"),
            "long_scoreboard": _value(r, "smsp__average_warps_issue_stalled_long_scoreboard"),
            "lg_throttle": _value(r, "smsp__average_warps_issue_stalled_lg_throttle"),
            "issue_pct": _value(r, "smsp__issue_active"),
        })
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.studies.wmma_global_l1", description=__doc__.splitlines()[0])
    ap.add_argument("--counters", type=Path, default=DEFAULT_COUNTERS)
    a = ap.parse_args(argv)
    got = rows(a.counters)
    if not got:
        print(f"wmma_global_l1: no profiled rung-1 configuration in {a.counters}", file=sys.stderr)
        return 1
    print(f"{'configuration':58s} {'time':>6s} {'sect':>5s} {'tag wf':>6s} {'data wf':>7s} {'engine':>6s} "
          f"{'hit%':>5s} {'long sb':>7s} {'LG thr':>6s} {'issue%':>6s}   (per global-load request; stalls per instruction)")
    for r in got:
        print(f"{r['config']:58s} {r['time_error'] * 100:+5.0f}% {r['sectors']:5.2f} {r['tag_wavefronts']:6.2f} "
              f"{r['data_wavefronts']:7.2f} {r['engine_l1_cycles']:6.2f} {r['l1_hit_pct']:5.1f} {r['long_scoreboard']:7.2f} "
              f"{r['lg_throttle']:6.2f} {r['issue_pct']:6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
