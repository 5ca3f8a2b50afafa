"""The softmax and layernorm lowerings' warp instructions per pipe class against the SASS that ran.

CPU only. Reads the dynamic opcode histograms Nsight Compute recorded for every suite configuration
(``sass__inst_executed_per_opcode_with_modifier_all``, ``validation/results/h200/studies/row_kernels/
sass_opcodes_<family>.csv``) and the per-pipe counters of ``diagnostics.csv``, then

1. checks the opcode -> pipe map (:data:`PIPE_OF_OPCODE`): for every configuration the opcodes of a
   class must add up to ``smsp__inst_executed_pipe_<pipe>`` (exactly, for alu, fma, xu and cbu);
2. compares each family's lowering, per class (ALU, FMA pipe, SFU, shuffles, memory, issue only,
   total), with those histograms, configuration by configuration.

``python -m validation.studies.row_kernels_counts [softmax|layernorm] [-v]`` prints the medians and
maxima (``-v``: every configuration). How the histograms were taken (on the H200, once):
``ncu --metrics sass__inst_executed_per_opcode,... --print-metric-instances details`` over
``python -m validation.harness.ncu --target <family>`` (the suite's kernels built by the runners,
i.e. CuPy's NVRTC with ``-ftz=true``); see ``row_kernels_fidelity.md``.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import sys
from collections import defaultdict

from tilesim import hardware
from tilesim.cost.nvidia import step_cost
from tilesim.kernels import registry
from tilesim.program import COMPUTE_PIPES, Compute, Shuffle
from validation.harness.report import config_from_row
from validation.harness.suite import RESULTS_ROOT

DATA = RESULTS_ROOT / "h200" / "studies" / "row_kernels"
#: opcode (without modifiers) -> class; the class of an NCU pipe where one holds it exactly
PIPE_OF_OPCODE = {
    **dict.fromkeys(("IADD3", "ISETP", "LEA", "LOP3", "SHF", "MOV", "CS2R", "P2R", "PLOP3", "R2UR", "FSETP",
                     "FSEL", "SEL", "I2FP", "FMNMX", "IMNMX", "PRMT"), "alu"),
    **dict.fromkeys(("FADD", "FMUL", "FFMA", "IMAD", "VIADD"), "fma"),
    "MUFU": "sfu",
    "SHFL": "shfl",
    **dict.fromkeys(("LDG", "STG", "LDS", "STS", "LDL", "STL"), "mem"),
    "BAR": "bar",
}
CLASSES = ("alu", "fma", "sfu", "shfl", "mem", "bar", "other", "total")
NCU_PIPE = {"alu": ("alu",), "fma": ("fma",), "sfu": ("xu",), "cbu": ("cbu",)}


def opcode_class(op_with_modifiers: str) -> str:
    return PIPE_OF_OPCODE.get(op_with_modifiers.split(".")[0], "other")


def measured_classes(hist: dict) -> dict:
    out: dict = defaultdict(float)
    for op, n in hist.items():
        out[opcode_class(op)] += n
        out["total"] += n
    return out


def lowered_classes(family: str, cfg, hw) -> dict:
    """The lowering's warp instructions per class over the whole kernel (the engine's issue count)."""
    prog = registry.get(family).lower(cfg)
    warps = prog.launch.threads_per_block // hw.warp_size
    blocks = prog.launch.grid[0] * prog.launch.grid[1] * prog.launch.grid[2]
    out: dict = defaultdict(float)
    for ph in prog.phases:
        c = step_cost(ph.step, hw, warps)
        n = ph.trips * blocks
        for op in ph.step.compute:
            if isinstance(op, Shuffle):
                out["shfl"] += op.count * n
            elif isinstance(op, Compute):
                out[{"int": "alu", "issue": "other"}.get(op.pipe, op.pipe)] += op.count * n
        out["mem"] += (c.load_instructions + c.store_instructions + c.staging_instructions
                       + c.shared_load_instructions) * n
        out["bar"] += ph.step.barriers * warps * n
        out["total"] += c.issue * n
    return out


def _rows(family: str) -> list[dict]:
    with (DATA / f"sass_opcodes_{family}.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


def _recorded(family: str, name: str) -> dict:
    with (RESULTS_ROOT / "h200" / family / name).open(newline="") as fh:
        return {(r["label"], r["rows"], r["cols"]): r for r in csv.DictReader(fh) if r["status"] == "ok"}


def check_pipe_map(family: str) -> dict:
    """Largest relative difference, per NCU pipe, between the class sums and the pipe counters."""
    diag = _recorded(family, "diagnostics.csv")
    worst: dict = {}
    for r in _rows(family):
        hist = json.loads(r["sass__inst_executed_per_opcode_with_modifier_all"])
        d = diag.get((r["label"], r["rows"], r["cols"]))
        if d is None:
            continue
        got = measured_classes(hist)
        cbu = sum(n for op, n in hist.items() if op.split(".")[0] in ("BSSY", "BSYNC", "EXIT"))
        for cls, pipes in NCU_PIPE.items():
            meas = sum(float(d[f"smsp__inst_executed_pipe_{p}.sum_count"]) for p in pipes)
            mine = cbu if cls == "cbu" else got[cls]
            worst[cls] = max(worst.get(cls, 0.0), abs(mine - meas) / max(meas, 1.0))
    return worst


def compare(family: str, verbose: bool = False) -> dict:
    """Per class, the lowering's relative errors against the recorded histograms."""
    hw = hardware.load("h200")
    times = _recorded(family, "times.csv")
    issue_only_separate = "issue" in COMPUTE_PIPES
    errs: dict = defaultdict(list)
    for r in _rows(family):
        t = times[(r["label"], r["rows"], r["cols"])]
        cfg = config_from_row(family, t)
        cfg = dataclasses.replace(cfg, regs_per_thread=int(float(t["regs_per_thread"])))
        m = measured_classes(json.loads(r["sass__inst_executed_per_opcode_with_modifier_all"]))
        p = lowered_classes(family, cfg, hw)
        if not issue_only_separate:  # the lowering's issue-only instructions are on the int pipe
            m["alu"] += m.pop("other", 0.0)
            p.pop("other", None)
        line = []
        for c in CLASSES:
            if m.get(c):
                errs[c].append((p.get(c, 0.0) - m[c]) / m[c])
                line.append(f"{c}={p.get(c, 0.0) / m[c]:5.2f}")
        if verbose:
            print(f"  {r['label']:38s} {r['rows']:>6s}x{r['cols']:<6s} " + " ".join(line))
    return errs


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    fams = [a for a in args if not a.startswith("-")] or ["softmax", "layernorm"]
    for fam in fams:
        worst = check_pipe_map(fam)
        print(f"{fam}: opcode classes against smsp__inst_executed_pipe_* (worst relative difference): "
              + ", ".join(f"{k} {v * 100:.3f}%" for k, v in worst.items()))
        errs = compare(fam, verbose="-v" in args)
        for c in CLASSES:
            v = sorted(abs(e) for e in errs.get(c, ()) if not math.isnan(e))
            if v:
                print(f"  {c:6s} lowering vs SASS: median |err| {v[len(v) // 2] * 100:5.1f}%, max {v[-1] * 100:6.1f}% "
                      f"({len(v)} configurations)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
