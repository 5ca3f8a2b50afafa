"""The tensor-core ladder as the README shows it: for each rung, the fastest measured fp16 configuration at
one shape, its measured and predicted TFLOP/s, beside cuBLAS and the datasheet peak.

``python -m validation.families.tc_gemm.ladder [--shape 4096x4096x4096] [--plot docs/tc_ladder.png]`` reads
the recorded ``times.csv`` (validation/results/<gpu>/tc_gemm), simulates each rung's configuration with the
compiler's register count (informed) and without it (blind), prints a Markdown table and writes the figure.
CPU only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tilesim.hardware import load
from tilesim.kernels import registry
from validation.harness.rows import recorded_rows

RESULTS = Path(__file__).resolve().parents[2] / "results"
#: (rung name, predicate on a TcGemmConfig), bottom to top
RUNGS = (
    ("1 WMMA from global memory", lambda c: c.instruction == "wmma" and c.staging == "global"),
    ("2 WMMA, shared tiles, sync copy", lambda c: c.instruction == "wmma" and c.staging == "shared" and c.stages == 1),
    ("2 WMMA, shared tiles, cp.async", lambda c: c.instruction == "wmma" and c.staging == "shared" and c.stages > 1),
    ("3 mma.sync + ldmatrix, dense rows", lambda c: c.instruction == "mma_sync" and c.layout == "naive"),
    ("3 mma.sync + ldmatrix, padded", lambda c: c.instruction == "mma_sync" and c.layout == "padded"),
    ("3 mma.sync + ldmatrix, swizzled, sync copy",
     lambda c: c.instruction == "mma_sync" and c.layout == "swizzled" and c.stages == 1),
    ("4 mma.sync, swizzled, cp.async ring",
     lambda c: c.instruction == "mma_sync" and c.layout == "swizzled" and c.stages > 1),
    ("5 wgmma + TMA, one buffer, no producer", lambda c: c.instruction == "wgmma" and c.stages == 1),
    ("5 wgmma + TMA, 1 consumer",
     lambda c: c.instruction == "wgmma" and c.stages > 1 and c.consumers == 1 and c.cluster == 1),
    ("5 wgmma + TMA, 2 consumers",
     lambda c: c.instruction == "wgmma" and c.stages > 1 and c.consumers == 2 and c.cluster == 1),
    ("5 wgmma + TMA, 2 consumers, cluster 2", lambda c: c.instruction == "wgmma" and c.cluster == 2),
)
DATASHEET_FP16_TFLOPS = 989.4  # NVIDIA H100/H200 SXM dense FP16 tensor (the data file's tensor_flops_per_s)


def ladder(gpu: str = "h200", shape: str = "4096x4096x4096", dtype: str = "fp16") -> dict:
    """Rows of the ladder: rung, label, measured s, predicted s (informed, blind), TFLOP/s; and cuBLAS."""
    import tilesim  # noqa: PLC0415

    fam = registry.get("tc_gemm")
    hw = load(gpu)
    m, n, k = (int(x) for x in shape.split("x"))
    rows = recorded_rows(RESULTS / gpu / "tc_gemm", "times.csv")  # the main rows, then later runs' (parts/)
    cublas = [r for r in rows if r["label"] == f"cublas_{dtype}" and (r["m"], r["n"], r["k"]) == (str(m), str(n), str(k))]
    measured = []
    for r in rows:
        if r["status"] != "ok" or r["label"].startswith("cublas") or (int(r["m"]), int(r["n"]), int(r["k"])) != (m, n, k):
            continue
        if r["dtype"] != dtype:
            continue
        knobs = {f: r[f] for f in ("m", "n", "k", "dtype", "out_dtype", "b_layout", "instruction", "staging", "bm",
                                   "bn", "bk", "wm", "wn", "shape", "layout", "stages", "consumers", "cluster",
                                   "epilogue")}
        if r.get("setmaxnreg"):  # a column of results recorded since the knob (the one-buffer rung's False)
            knobs["setmaxnreg"] = r["setmaxnreg"]
        measured.append((fam.make(**knobs), float(r["median_s"]), int(r["regs_per_thread"])))
    out = []
    for name, pred in RUNGS:
        cands = [x for x in measured if pred(x[0])]
        if not cands:
            continue
        cfg, t, regs = min(cands, key=lambda x: x[1])
        informed = tilesim.simulate(cfg.with_(regs_per_thread=regs), hw).time_s
        blind = tilesim.simulate(cfg, hw).time_s
        out.append({"rung": name, "label": cfg.label, "measured_s": t, "informed_s": informed, "blind_s": blind,
                    "flops": cfg.flops})
    ref = float(cublas[0]["median_s"]) if cublas else None
    return {"rows": out, "cublas_s": ref, "flops": 2.0 * m * n * k, "shape": shape, "gpu": gpu, "dtype": dtype}


def markdown(lad: dict) -> str:
    tf = lambda s, f: f / s / 1e12  # noqa: E731
    lines = [f"| rung ({lad['dtype']}, {lad['shape']}) | fastest measured | measured TFLOP/s | predicted informed | "
             "predicted blind |", "|---|---|---|---|---|"]
    for r in lad["rows"]:
        lines.append(f"| {r['rung']} | `{r['label']}` | {tf(r['measured_s'], r['flops']):.0f} | "
                     f"{tf(r['informed_s'], r['flops']):.0f} | {tf(r['blind_s'], r['flops']):.0f} |")
    if lad["cublas_s"]:
        lines.append(f"| cuBLAS (`cublasGemmEx`) | | {tf(lad['cublas_s'], lad['flops']):.0f} | | |")
    lines.append(f"| datasheet dense peak | | {DATASHEET_FP16_TFLOPS:.0f} | | |")
    return "\n".join(lines)


def figure(lad: dict):
    """Horizontal bars per rung: measured and predicted (informed) TFLOP/s, with cuBLAS and the datasheet."""
    from matplotlib.figure import Figure  # noqa: PLC0415

    rows = lad["rows"]
    fig = Figure(figsize=(9, 0.45 * len(rows) + 1.8), layout="constrained")
    ax = fig.add_subplot()
    ys = range(len(rows))
    meas = [r["flops"] / r["measured_s"] / 1e12 for r in rows]
    pred = [r["flops"] / r["informed_s"] / 1e12 for r in rows]
    ax.barh([y + 0.2 for y in ys], meas, height=0.4, label="measured (H200)", color="#1f77b4")
    ax.barh([y - 0.2 for y in ys], pred, height=0.4, label="predicted (tilesim, informed)", color="#ff7f0e")
    if lad["cublas_s"]:
        ax.axvline(lad["flops"] / lad["cublas_s"] / 1e12, color="k", ls="--", lw=1, label="cuBLAS measured")
    ax.axvline(DATASHEET_FP16_TFLOPS, color="grey", ls=":", lw=1, label="datasheet dense fp16")
    ax.set_yticks(list(ys), [r["rung"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("TFLOP/s")
    ax.set_title(f"tensor-core GEMM ladder, {lad['dtype']} {lad['shape']}, {lad['gpu'].upper()}: "
                 "fastest measured configuration per rung", fontsize=9)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, fontsize=8, frameon=False)
    return fig


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.families.tc_gemm.ladder", description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="h200")
    ap.add_argument("--shape", default="4096x4096x4096")
    ap.add_argument("--dtype", default="fp16")
    ap.add_argument("--plot", default=None, help="write the figure to this PNG")
    args = ap.parse_args(argv)
    try:
        lad = ladder(args.gpu, args.shape, args.dtype)
    except (OSError, ValueError) as e:
        print(f"ladder: {e}", file=sys.stderr)
        return 2
    print(markdown(lad))
    if args.plot:
        figure(lad).savefig(args.plot, dpi=130)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
