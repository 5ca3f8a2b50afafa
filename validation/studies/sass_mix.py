"""The GEMM suite's k-loops read from the SASS against the family's estimates (issue #10).

CPU only: compiler output, not a GPU measurement. For every distinct configuration of the recorded
H200 GEMM suite (``validation/results/h200/gemm/times.csv``, rows measured ok) it compiles the
kernel the runner builds (``validation.harness.compile.compiled_resources``: nvcc -cubin
-arch=sm_90), disassembles it with nvdisasm, finds the k-loop (the backward branch's body with the
most FFMA) and counts its instructions per class (``validation.harness.sass``). It writes one row per
kernel to ``validation/results/h200/studies/sass_mix/sass_mix.csv``: the model's and the SASS's
warp instructions per warp and k-step for FFMA, global loads (LDG), cp.async copies (LDGSTS),
shared loads (LDS + LDSM), shared stores (STS), barriers (BAR) and the integer overhead ("other":
not math, memory or barrier; the family estimates it as ``OTHER_FIXED_PER_WARP_STEP`` +
``OTHER_PER_GLOBAL_LOAD`` x global loads per warp), the SASS's split of "other" by class, the unroll
factor (model k-steps per SASS loop iteration, from the FFMA counts: 2 for the naive kernels, whose
k-loop nvcc unrolls 16 times against the model's 8-wide step), registers and spills.

``python -m validation.studies.sass_mix`` (about 20 s on 2 cores; the compiles are cached in the
user's cache, see ``validation.harness.compile.cache_dir``). Prints a summary.

``--times`` also predicts every measured row of the suite twice, with the recorded (NVRTC) register
counts as the accuracy report's informed mode does: with the family's integer estimate and with the
SASS count in its place, and prints both errors against the measured medians (the measured times
are read, never changed, and nothing is fitted to them); it writes ``sass_mix_times.csv`` beside.
"""

from __future__ import annotations

import csv
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import tilesim
from validation.harness import compile as nvcc
from validation.harness import report, rows, sass

RESULTS = Path(__file__).resolve().parents[1] / "results" / "h200"
OUT = RESULTS / "studies" / "sass_mix" / "sass_mix.csv"
CLASSES = ("FFMA", "LDG", "LDGSTS", "LDS", "STS", "BAR", "other")
OTHER_SPLIT = ("IMAD", "IADD", "ISETP", "LOP3/SHF/LEA", "MOV/SEL", "uniform", "branch", "unclassified")
HEADER = ("# Compiler output, not a GPU measurement: nvcc {nvcc} -arch=sm_90 and nvdisasm on the GEMM suite's "
          "kernels (validation/results/h200/gemm/times.csv), per warp and k-step. Written by "
          "python -m validation.studies.sass_mix\n")


def suite_configs(family: str = "gemm") -> list[tuple[str, object]]:
    """``(label, config)`` of each distinct configuration measured ok in the recorded suite."""
    out, seen = [], set()
    for row in rows.read_rows(RESULTS / family / "times.csv"):
        if row.get("status") != "ok" or row["label"] in seen:
            continue
        seen.add(row["label"])
        try:
            out.append((row["label"], report.config_from_row(family, row)))
        except ValueError:  # a reference row (cuBLAS), not a kernel of the family
            continue
    return out


def sass_per_step(mix: dict, unroll: float) -> dict[str, float]:
    c = mix["classes"]
    per = {"FFMA": c.get("FFMA", 0), "LDG": c.get("LDG", 0), "LDGSTS": c.get("LDGSTS", 0),
           "LDS": c.get("LDS", 0) + c.get("LDSM", 0), "STS": c.get("STS", 0), "BAR": c.get("BAR", 0),
           "other": mix["other"]}
    return {k: v / unroll for k, v in per.items()}


def row_for(label: str, cfg, compiled: dict) -> dict:
    (name, k), = compiled["kernels"].items()
    mix = k["loop_mix"]
    program = tilesim.lower(cfg)[0]
    model = sass.program_mix(program)
    row = {"label": label, "variant": cfg.variant, "threads": program.launch.threads_per_block,
           "regs_nvcc": k["regs_per_thread"], "spill_store_bytes": k["spill_store_bytes"],
           "spill_load_bytes": k["spill_load_bytes"], "static_smem_bytes": k["static_smem_bytes"]}
    if mix is None:
        return {**row, "loop_found": False}
    # one loop iteration holds `unroll` model steps (naive kernels: 1/8 of one)
    unroll = mix["classes"].get("FFMA", 0) / model["FFMA"] if model["FFMA"] else 1.0
    per = sass_per_step(mix, unroll)
    row.update(loop_found=True, unroll=round(unroll, 4), loop_instructions=mix["total"])
    for c in CLASSES:
        row[f"model_{c}"] = round(model[c], 3)
        row[f"sass_{c}"] = round(per[c], 3)
    for c in OTHER_SPLIT:
        row[f"sass_other_{c}"] = round(mix["classes"].get(c, 0) / unroll, 3)
    row["other_ratio_sass_to_model"] = round(per["other"] / model["other"], 4) if model["other"] else ""
    return row


def time_rows(compiled: dict) -> list[dict]:
    """Per measured row: the measured median and the two informed predictions (see ``--times``)."""
    import dataclasses

    out = []
    for row in rows.read_rows(RESULTS / "gemm" / "times.csv"):
        if row.get("status") != "ok" or row["label"] not in compiled:
            continue
        cfg = report.config_from_row("gemm", row)
        if row.get("regs_per_thread"):
            cfg = dataclasses.replace(cfg, regs_per_thread=int(float(row["regs_per_thread"])))
        program = tilesim.lower(cfg)[0]
        (k,) = compiled[row["label"]]["kernels"].values()
        informed = sass.apply_loop_mix(program, k["loop_mix"])[0] if k["loop_mix"] else program
        measured = float(row["median_s"])
        est, sas = (tilesim.simulate(p, "h200").time_s for p in (program, informed))
        out.append({"label": row["label"], "size": f"{cfg.m}x{cfg.n}x{cfg.k}", "measured_s": measured,
                    "predicted_estimate_s": est, "predicted_sass_s": sas,
                    "error_estimate": round(est / measured - 1, 5), "error_sass": round(sas / measured - 1, 5)})
    return out


def _errors(out: list[dict], key: str) -> str:
    errs = [r[key] for r in out]
    return (f"MAPE {100 * statistics.mean(abs(e) for e in errs):.1f}%, mean signed {100 * statistics.mean(errs):+.1f}%, "
            f"max {100 * max(abs(e) for e in errs):.1f}%")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        version = nvcc.nvcc_version()
        tool = sass.disassembler()
    except (nvcc.CompileError, sass.SassUnavailable) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    configs = suite_configs()
    with ThreadPoolExecutor(4) as ex:
        compiled = list(ex.map(lambda lc: nvcc.compiled_resources("gemm", lc[1], "sm_90"), configs))
    out = [row_for(label, cfg, c) for (label, cfg), c in zip(configs, compiled, strict=True)]
    fields = list(dict.fromkeys(k for r in out for k in r))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", newline="") as f:
        f.write(HEADER.format(nvcc=version))
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(out)
    print(f"wrote {OUT.relative_to(RESULTS.parents[1])} ({len(out)} kernels; nvcc {version}, {Path(tool[0]).name})")
    staged = [r for r in out if r.get("loop_found") and not r["variant"].startswith("naive")]
    print(f"{'variant':<18}{'n':>3}{'model other':>13}{'SASS other':>12}{'SASS/model':>12}  (median per warp, k-step)")
    for v in sorted({r["variant"] for r in out}):
        rs = [r for r in out if r["variant"] == v and r.get("loop_found")]
        if not rs:
            continue
        print(f"{v:<18}{len(rs):>3}{statistics.median(r['model_other'] for r in rs):>13.1f}"
              f"{statistics.median(r['sass_other'] for r in rs):>12.1f}"
              f"{statistics.median(r['other_ratio_sass_to_model'] for r in rs if r['other_ratio_sass_to_model']):>12.2f}")
    if staged:
        ratios = [r["other_ratio_sass_to_model"] for r in staged]
        print(f"staged kernels: SASS/model integer overhead median {statistics.median(ratios):.2f}, "
              f"range {min(ratios):.2f}-{max(ratios):.2f}; FFMA equal in "
              f"{sum(r['sass_FFMA'] == r['model_FFMA'] for r in staged)}/{len(staged)}")
    if "--times" in argv:
        t = time_rows({label: c for (label, _), c in zip(configs, compiled, strict=True)})
        path = OUT.with_name("sass_mix_times.csv")
        with path.open("w", newline="") as f:
            f.write("# Predictions (tilesim, informed by the recorded NVRTC registers) against the recorded H200 "
                    "medians, with the GEMM family's integer estimate and with the SASS k-loop's count "
                    f"(nvcc {version}). Written by python -m validation.studies.sass_mix --times\n")
            w = csv.DictWriter(f, fieldnames=list(t[0]))
            w.writeheader()
            w.writerows(t)
        print(f"wrote {path.relative_to(RESULTS.parents[1])}: {len(t)} measured rows")
        print(f"  family's integer estimate: {_errors(t, 'error_estimate')}")
        print(f"  SASS integer count:        {_errors(t, 'error_sass')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
