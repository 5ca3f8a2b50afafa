"""The reuse pyramid on the H200 and on Apple M-series GPUs: which fp32 GEMM tilings win, and why.

PREDICTED ONLY: every number here is tilesim's prediction (the engine and the hardware files,
with the assumed overlays of the Apple chips); nothing is measured. At 4096^3 fp32:

* H200: the CUDA ``gemm`` family's ladder (naive, shared-memory tiled, 2-D register tiling
  ``reg2d``, warp tiling ``warp``): FP32 FFMAs on the CUDA cores;
* M5 Max (and M1 Max): the ``steel_gemm`` family's ladder (``naive``, ``threadgroup`` tiled, then
  steel's BM x BN x BK threadgroup tiles with WM x WN SIMD-groups owning simdgroup_matrix patches of
  8x8 fragments), including a patch that spills.

Per configuration: predicted TFLOP/s, the bound, bytes per level (DRAM, L2 / SLC, shared /
threadgroup memory, register operands), occupancy and its limiter, registers per thread and spilled
registers' bytes. Register operand bytes are the engine's count for FFMA kernels (3 operands x 4
bytes per lane); for simdgroup_matrix kernels the study counts each 8x8x8 MMA as reading its three
8x8 fp32 fragments (768 bytes), from the lowered program: a like-for-like estimate, not a counter.

Run: ``python -m validation.studies.pyramid_h200_vs_apple --out docs/pyramid_h200_vs_m5.png``
(CPU, a few seconds): writes the figure, a CSV beside it (same stem), and prints the table and a
Markdown paragraph for the README.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from tilesim import hardware, simulate
from tilesim.hardware.fields import MissingHardwareValue
from tilesim.kernels.gemm.config import GemmConfig
from tilesim.kernels.steel_gemm import SteelGemmConfig
from tilesim.kernels.steel_gemm import lower as steel_lower
from tilesim.program import Mma

SIZE = 4096
COMMAND = "python -m validation.studies.pyramid_h200_vs_apple --out docs/pyramid_h200_vs_m5.png"
MMA_FRAG_BYTES_FP32 = 4  # bytes per fp32 element of a simdgroup_matrix fragment
GPUS = (("h200", "gemm"), ("m5_max", "steel_gemm"), ("m1_max", "steel_gemm"))


def h200_configs(s: int = SIZE) -> list[tuple[str, GemmConfig]]:
    """(rung, config): the CUDA fp32 ladder, from one output per thread to warp tiling."""
    g = GemmConfig
    return [
        ("naive", g(s, s, s, variant="naive", bm=32, bn=32)),
        ("shared tile", g(s, s, s, variant="smem", bm=32, bn=32, bk=32)),
        ("register tile", g(s, s, s, variant="reg2d", bm=64, bn=64, bk=8, tm=4, tn=4)),
        ("register tile", g(s, s, s, variant="reg2d", bm=64, bn=64, bk=16, tm=8, tn=8, vectorize=True)),
        ("register tile", g(s, s, s, variant="reg2d", bm=128, bn=128, bk=8, tm=8, tn=8)),
        ("register tile", g(s, s, s, variant="reg2d", bm=128, bn=128, bk=8, tm=8, tn=8, vectorize=True)),
        ("register tile", g(s, s, s, variant="reg2d", bm=128, bn=128, bk=16, tm=8, tn=8, vectorize=True)),
        ("warp tile", g(s, s, s, variant="warp", bm=128, bn=128, bk=16, wm=64, wn=64, wniter=4, tm=8, tn=4,
                        vectorize=True)),
        ("warp tile", g(s, s, s, variant="warp", bm=128, bn=128, bk=8, wm=64, wn=64, wniter=4, tm=8, tn=4,
                        vectorize=True)),
    ]


def apple_configs(s: int = SIZE) -> list[tuple[str, SteelGemmConfig]]:
    """(rung, config): the Metal ladder, naive to steel; MLX's instantiated fp32 tiles and the
    m5-gemm kernels (shared/REFERENCE.md), plus a 64x64 patch that spills."""
    c = SteelGemmConfig
    return [
        ("naive", c(s, s, s, variant="naive", bm=16, bn=16)),
        ("shared tile", c(s, s, s, variant="threadgroup", bm=16, bn=16, bk=16)),
        ("shared tile", c(s, s, s, variant="threadgroup", bm=32, bn=32, bk=32, tg_pad=1)),
        ("simdgroup patch", c(s, s, s, bm=32, bn=32, bk=16, wm=2, wn=2)),
        ("simdgroup patch", c(s, s, s, bm=64, bn=32, bk=32, wm=2, wn=2)),
        ("simdgroup patch", c(s, s, s, bm=64, bn=64, bk=16, wm=1, wn=2)),
        ("simdgroup patch", c(s, s, s, bm=64, bn=64, bk=16, wm=2, wn=2)),
        ("simdgroup patch", c(s, s, s, bm=64, bn=64, bk=16, wm=2, wn=2, copy="double_buffer")),
        ("simdgroup patch", c(s, s, s, bm=64, bn=64, bk=32, wm=2, wn=2)),
        ("spilling patch", c(s, s, s, bm=128, bn=128, bk=16, wm=2, wn=2)),
    ]


def _register_bytes(cfg, r) -> float:
    if r.traffic.register_operand_bytes:
        return float(r.traffic.register_operand_bytes)
    if not isinstance(cfg, SteelGemmConfig):
        return 0.0
    p = steel_lower(cfg)
    total = 0.0
    for ph in p.phases:
        for op in ph.step.compute:
            if isinstance(op, Mma):
                m, n, k = op.shape
                total += op.count * (m * k + k * n + m * n) * MMA_FRAG_BYTES_FP32 * ph.trips * p.launch.blocks
    return total


def row(gpu: str, rung: str, cfg, hw) -> dict:
    """One configuration's predicted figures on ``hw``."""
    r = simulate(cfg, hw)
    is_steel = isinstance(cfg, SteelGemmConfig)
    regs = cfg.estimated_regs
    spilled = cfg.spilled_regs if is_steel else max(0, regs - hw.max_regs_per_thread)
    return {
        "gpu": gpu, "display": hw.display_name, "rung": rung, "config": cfg.label,
        "tflops": r.tflops, "time_ms": r.time_s * 1e3, "bound": r.bound,
        "dram_bytes": r.traffic.hbm_bytes, "l2_slc_bytes": r.traffic.l2_bytes, "shared_tg_bytes": r.traffic.smem_bytes,
        "register_bytes": _register_bytes(cfg, r), "regs_per_thread": regs, "spilled_regs": spilled,
        "spill_bytes": cfg.spill_bytes if is_steel else 0.0, "occupancy": r.occupancy,
        "occupancy_limiter": r.occupancy_limiter, "blocks_per_sm": r.blocks_per_sm, "threads": cfg.threads,
        "smem_per_block_bytes": cfg.tg_bytes if is_steel else cfg.smem_bytes,
    }


SKIPPED: list[str] = []
"""Configurations a chip's hardware file cannot simulate (a value missing), filled by :func:`rows`."""


def rows(gpus=GPUS, size: int = SIZE) -> list[dict]:
    """Every configuration on every GPU of ``gpus`` ((hardware name, family) pairs). A configuration
    the chip's file lacks a value for (e.g. the M1 Max's L1 latency, which the naive kernel's loads
    need) is left out and named in :data:`SKIPPED`."""
    out = []
    SKIPPED.clear()
    for name, family in gpus:
        hw = hardware.load(name)
        cfgs = h200_configs(size) if family == "gemm" else apple_configs(size)
        for rung, cfg in cfgs:
            try:
                out.append(row(name, rung, cfg, hw))
            except MissingHardwareValue as e:
                SKIPPED.append(f"{name} {cfg.label}: {e}")
    return out


def best(rs: list[dict], gpu: str) -> dict:
    return max((r for r in rs if r["gpu"] == gpu), key=lambda r: r["tflops"])


def _short(label: str) -> str:
    for a, b in (("_aligned", ""), ("_fp32", ""), ("_sync", ""), ("double_buffer", "db"), ("steel_", ""),
                 ("tgtile_", "tg "), ("naive_", "naive "), ("_pad4", ""), ("_pad1", " pad1"), ("_", " ")):
        label = label.replace(a, b)
    return label


def figure(rs: list[dict], size: int = SIZE):
    """One column per GPU: predicted TFLOP/s (top) and bytes per level (bottom, log scale)."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    from matplotlib.figure import Figure  # noqa: PLC0415

    gpus = list(dict.fromkeys(r["gpu"] for r in rs))
    fig = Figure(figsize=(6.2 * len(gpus), 11), layout="constrained")
    axes = fig.subplots(2, len(gpus), squeeze=False)
    levels = (("dram_bytes", "DRAM", "#d62728"), ("l2_slc_bytes", "L2 / SLC", "#ff7f0e"),
              ("shared_tg_bytes", "shared / threadgroup", "#2ca02c"), ("register_bytes", "register operands", "#1f77b4"),
              ("spill_bytes", "register spill (DRAM/SLC)", "#7f7f7f"))
    for j, gpu in enumerate(gpus):
        g = [r for r in rs if r["gpu"] == gpu]
        names = [_short(r["config"]) for r in g]
        y = range(len(g))
        ax = axes[0][j]
        win = max(range(len(g)), key=lambda i: g[i]["tflops"])
        ax.barh(y, [r["tflops"] for r in g], color=["#2ca02c" if i == win else "#1f77b4" for i in y])
        for i, r in enumerate(g):
            ax.text(r["tflops"], i, f" {r['tflops']:.1f} ({r['bound']}, occ {r['occupancy']:.2f})", va="center",
                    fontsize=7)
        ax.set_yticks(list(y), names, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("predicted TFLOP/s (fp32)")
        ax.set_xlim(0, max(r["tflops"] for r in g) * 1.6)
        ax.set_title(f"{g[0]['display']}\n{'gemm family (FFMA)' if gpu == 'h200' else 'steel_gemm family'}, "
                     f"{size}^3 fp32", fontsize=9)
        ax = axes[1][j]
        h = 0.16
        for li, (key, label, color) in enumerate(levels):
            ax.barh([i + (li - 2) * h for i in y], [r[key] for r in g], height=h, color=color, label=label)
        ax.set_xscale("log")
        ax.set_xlim(1e8, 1e13)  # zero-byte levels (no spill, no threadgroup memory) draw no bar
        ax.set_yticks(list(y), names, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("bytes moved per level, whole kernel (log)")
        ax.set_title(f"{g[0]['display']}: bytes per level", fontsize=9)
    handles, labels = axes[1][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(levels), fontsize=8)
    fig.suptitle(f"PREDICTED ONLY (tilesim, nothing measured): the reuse pyramid, fp32 GEMM {size}x{size}x{size}, "
                 "H200 vs Apple M-series", fontsize=11)
    return fig


def write_csv(rs: list[dict], path: Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rs[0]))
        w.writeheader()
        w.writerows(rs)


def paragraph(rs: list[dict], png: str, csv_name: str, size: int = SIZE) -> str:
    """The README paragraph: the winners and their numbers on each GPU (predicted)."""
    h, m = best(rs, "h200"), best(rs, "m5_max")
    m2 = sorted((r for r in rs if r["gpu"] == "m5_max"), key=lambda r: -r["tflops"])[1]

    def get(gpu, rung):
        return max((r for r in rs if r["gpu"] == gpu and r["rung"] == rung), key=lambda r: r["tflops"])

    hn, hs = get("h200", "naive"), get("h200", "shared tile")
    mn, ms = get("m5_max", "naive"), get("m5_max", "shared tile")
    spill = [r for r in rs if r["gpu"] == "m5_max" and r["rung"] == "spilling patch"][0]
    m1 = [r for r in rs if r["gpu"] == "m1_max"]
    m1_txt = ""
    if m1:
        b1 = best(rs, "m1_max")
        m1_txt = f" On the M1 Max the best is {b1['config']} at {b1['tflops']:.1f} TFLOP/s predicted."
    return (
        f"**The pyramid on the H200 and on the M5 Max (predicted only).** `{COMMAND}` predicts the fp32 GEMM ladders at "
        f"{size}^3 (`{png}`, table in `{csv_name}`). On the H200 the winner is {h['config']} at "
        f"{h['tflops']:.1f} TFLOP/s ({h['bound']}-bound, occupancy {h['occupancy']:.2f}, "
        f"{h['regs_per_thread']} registers per thread): the reuse sits in shared memory and in each thread's "
        f"register tile (a one-output shared tile, {hs['tflops']:.1f}, gains little over the naive kernel's "
        f"{hn['tflops']:.1f}: it is bound by shared memory). "
        f"On the M5 Max the winner is {m['config']} at {m['tflops']:.1f} TFLOP/s ({m['bound']}-bound, "
        f"occupancy {m['occupancy']:.2f}, limited by {m['occupancy_limiter']}), {m2['config']} "
        f"{(m['tflops'] / m2['tflops'] - 1) * 100:.1f}% behind: with 32 KB of threadgroup memory the threadgroup "
        f"tile stays at 64x32-64x64 and the simdgroup patch of 8x8 fragments in registers carries the reuse "
        f"({m['shared_tg_bytes'] / 1e9:.0f} GB of threadgroup traffic against {ms['shared_tg_bytes'] / 1e9:.0f} GB "
        f"for the one-output threadgroup tile at {ms['tflops']:.1f} TFLOP/s, and {mn['tflops']:.2f} for the naive "
        f"kernel). A 64x64 patch needs {spill['regs_per_thread']} registers a thread, spills "
        f"{spill['spilled_regs']} and moves {spill['spill_bytes'] / 1e9:.0f} GB of spill traffic: "
        f"{spill['tflops']:.1f} TFLOP/s.{m1_txt} No Apple number here is measured."
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation.studies.pyramid_h200_vs_apple", description=__doc__.split("\n")[0])
    p.add_argument("--out", default="docs/pyramid_h200_vs_m5.png", help="figure path; the CSV goes beside it")
    p.add_argument("--size", type=int, default=SIZE)
    p.add_argument("--no-m1", action="store_true", help="leave out the M1 Max panel")
    args = p.parse_args(argv)
    gpus = GPUS[:2] if args.no_m1 else GPUS
    rs = rows(gpus, args.size)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    csv_path = out.with_suffix(".csv")
    write_csv(rs, csv_path)
    figure(rs, args.size).savefig(out, dpi=120)
    print(f"{'gpu':<8}{'config':<58}{'TFLOP/s':>8}  {'bound':<7}{'occ':>5}{'DRAM GB':>9}{'L2/SLC GB':>10}"
          f"{'shared GB':>10}{'regs':>5}{'spill GB':>9}")
    for r in rs:
        print(f"{r['gpu']:<8}{r['config']:<58}{r['tflops']:>8.2f}  {r['bound']:<7}{r['occupancy']:>5.2f}"
              f"{r['dram_bytes'] / 1e9:>9.2f}{r['l2_slc_bytes'] / 1e9:>10.1f}{r['shared_tg_bytes'] / 1e9:>10.1f}"
              f"{r['regs_per_thread']:>5}{r['spill_bytes'] / 1e9:>9.1f}")
    for line in SKIPPED:
        print(f"left out: {line}")
    print(f"\nwrote {out} and {csv_path} (predicted only)\n")
    print(paragraph(rs, str(out), str(csv_path), args.size))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
