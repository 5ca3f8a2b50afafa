"""Figures of the source-document studies (:mod:`tilesim.studies`). Every function RETURNS a Figure.

Conventions (as :mod:`tilesim.plots`): bars and lines are the closed-form counts and the simulator's
predictions, black-edged diamonds the measured values, stars the source document's own figures; a
configuration that breaks a hardware limit is drawn as a cross or named in words, never dropped.
Each figure's title names the study, the GEMM shape, the GPU and the units; the one legend sits
below the panels (``outside lower center``), clear of every title. Import only when plotting.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import math  # noqa: E402
import textwrap  # noqa: E402

from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

C_NOCACHE = "#c7c7c7"
C_L2 = "#ff7f0e"
C_HBM = "#d62728"
C_TIME = "#1f77b4"
C_SEED = "#9467bd"
DESIGN_COLORS = ("#8c564b", "#1f77b4")
PIPELINE_COLORS = ("#7f7f7f", "#2ca02c", "#aec7e8", "#6baed6", "#2171b5")


def _nan(v) -> float:
    return float("nan") if v is None else float(v)


def _measured(color="black", label="measured (the validation suite)"):
    return Line2D([], [], marker="D", ls="", markerfacecolor=color, markeredgecolor="black", ms=6, label=label)


def _seed(label="the document's figure"):
    return Line2D([], [], marker="*", ls="", color=C_SEED, ms=11, label=label)


def _plain_log(axis) -> None:
    """Tick labels of a log axis as plain numbers (16, 0.5, 1000), not powers."""
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def _title(fig, result, what: str) -> None:
    fig.suptitle(f"{result.name}: {result.title}, GEMM {result.shape_str} fp32 on {result.hardware}\n{what}",
                 fontsize=10)


def _legend(fig, handles, ncols=3) -> None:
    fig.legend(handles=handles, loc="outside lower center", ncols=ncols, fontsize=8)


# ----- naive vs tiled -------------------------------------------------------------------------------
def naive_vs_tiled_figure(result) -> Figure:
    rows = list(result.rows)
    n = len(rows)
    fig = Figure(figsize=(12, 0.5 * n + 2.6), layout="constrained")
    ax_b, ax_t = fig.subplots(1, 2, sharey=True)
    ys = list(range(n))
    h = 0.27
    for j, (key, color) in enumerate((("nocache_fp32_bytes", C_NOCACHE), ("pred_l2_load_bytes", C_L2),
                                      ("pred_hbm_bytes", C_HBM))):
        ax_b.barh([y + (j - 1) * h for y in ys], [_nan(r.get(key)) for r in rows], height=h, color=color)
        if key != "nocache_fp32_bytes":
            mkey = "meas_l2_load_bytes" if key == "pred_l2_load_bytes" else "meas_dram_bytes"
            ax_b.plot([_nan(r.get(mkey)) for r in rows], [y + (j - 1) * h for y in ys], "D", ms=6,
                      markerfacecolor=color, markeredgecolor="black")
    ax_b.plot([_nan(r.get("seed_bytes")) for r in rows], ys, "*", color=C_SEED, ms=13)
    compulsory = rows[0]["compulsory_hbm_bytes"]
    ax_b.axvline(compulsory, color="black", ls=":", lw=1)
    ax_b.set_xscale("log")
    ax_b.set_xlabel("bytes moved (whole kernel)")
    ax_b.set_title("traffic: no-cache count, L2 -> SMs, HBM", fontsize=9)
    for j, (key, color) in enumerate((("nocache_fp32_time_at_seed_rate_s", C_NOCACHE), ("pred_time_s", C_TIME))):
        ax_t.barh([y + (j - 0.5) * h for y in ys], [_nan(r.get(key)) * 1e3 for r in rows], height=h, color=color)
    ax_t.plot([_nan(r.get("meas_time_s")) * 1e3 for r in rows], [y + 0.5 * h for y in ys], "D", ms=6,
              markerfacecolor=C_TIME, markeredgecolor="black")
    ax_t.plot([_nan(r.get("seed_time_s")) * 1e3 for r in rows], ys, "*", color=C_SEED, ms=13)
    ax_t.set_xscale("log")
    ax_t.set_xlabel("time (ms)")
    ax_t.set_title("time: no-cache bytes at 3.35 TB/s, predicted, measured", fontsize=9)
    ax_b.set_yticks(ys, [r["label"] for r in rows], fontsize=7)
    ax_b.invert_yaxis()
    for ax in (ax_b, ax_t):
        ax.grid(axis="x", which="both", alpha=0.25)
    _title(fig, result, "bytes and milliseconds, log scales")
    _legend(fig, [
        Patch(color=C_NOCACHE, label="no-cache count, fp32 (every use re-read)"),
        Patch(color=C_L2, label="predicted: read from L2"),
        Patch(color=C_HBM, label="predicted: HBM (read + write)"),
        Patch(color=C_TIME, label="predicted time"),
        _measured("white", "measured (diamond, colour of its quantity)"),
        Line2D([], [], color="black", ls=":", label=f"compulsory HBM bytes ({compulsory / 1e6:.0f} MB)"),
        _seed("the document: 137 GB (1 byte/element), 41 ms naive, 3.4 ms tiled"),
    ])
    return fig


# ----- reuse ----------------------------------------------------------------------------------------
def reuse_figure(result) -> Figure:
    rows = list(result.rows)
    fig = Figure(figsize=(9, 6.2), layout="constrained")
    ax = fig.subplots()
    xs = [2.0 / (1.0 / r["bm"] + 1.0 / r["bn"]) for r in rows]
    lo, hi = 0.8, max(xs) * 1.3
    ax.plot([lo, hi], [lo, hi], color=C_SEED, lw=1.5, ls="--")
    ax.plot(xs, [_nan(r["analytic_reuse"]) for r in rows], "o", ms=10, markerfacecolor="none",
            markeredgecolor="black")
    ax.plot(xs, [_nan(r["pred_reuse_l2"]) for r in rows], "o", color=C_L2, ms=6)
    ax.plot(xs, [_nan(r["meas_reuse_l2"]) for r in rows], "D", markerfacecolor=C_L2, markeredgecolor="black", ms=6)
    ax.plot(xs, [_nan(r["pred_reuse_hbm"]) for r in rows], "s", color=C_HBM, ms=6)
    ax.plot(xs, [_nan(r["meas_reuse_hbm"]) for r in rows], "D", markerfacecolor=C_HBM, markeredgecolor="black",
            ms=6)
    for x, r in zip(xs, rows, strict=True):
        ax.annotate(r["tile"], (x, _nan(r["analytic_reuse"])), textcoords="offset points", xytext=(6, -12),
                    fontsize=7)
        if r["limits_broken"]:
            note = ax.annotate("\n".join(textwrap.wrap(f"{r['tile']} not simulated: {r['limits_broken']}", 40)),
                               (x, r["analytic_reuse"]), textcoords="offset points", xytext=(-150, 25),
                               fontsize=7, color=C_HBM, arrowprops=dict(arrowstyle="->", color=C_HBM, lw=0.8))
            note.set_in_layout(False)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlim(lo, hi)
    tops = [_nan(r[c]) for r in rows for c in ("pred_reuse_hbm", "meas_reuse_hbm", "analytic_reuse")]
    ax.set_ylim(0.7, max([v for v in tops if math.isfinite(v)] + [hi]) * 1.6)
    _plain_log(ax.xaxis)
    _plain_log(ax.yaxis)
    ax.set_xlabel("tile T (bm x bn tiles at 2 / (1/bm + 1/bn)); the naive kernel at T = 1")
    ax.set_ylabel("reuse: naive fp32 reads / bytes read (x)")
    ax.grid(which="both", alpha=0.25)
    _title(fig, result, "reuse factor, times fewer bytes than the naive kernel's no-cache count")
    _legend(fig, [
        Line2D([], [], color=C_SEED, ls="--", label="the document: R = T"),
        Line2D([], [], marker="o", ls="", markerfacecolor="none", markeredgecolor="black", ms=10,
               label="closed-form count (global reads)"),
        Line2D([], [], marker="o", ls="", color=C_L2, label="predicted: bytes read from L2"),
        _measured(C_L2, "measured: bytes read from L2"),
        Line2D([], [], marker="s", ls="", color=C_HBM, label="predicted: bytes read from HBM"),
        _measured(C_HBM, "measured: bytes read from DRAM"),
    ])
    return fig


# ----- tradeoff -------------------------------------------------------------------------------------
def tradeoff_figure(result) -> Figure:
    rows = list(result.rows)
    designs = list(dict.fromkeys(r["design"] for r in rows))
    fig = Figure(figsize=(12, 8), layout="constrained")
    axes = fig.subplots(2, 3).ravel()
    panels = (
        ("threads", "threads per block", "max threads per block", "threads/block"),
        ("smem_per_block_bytes", "shared memory per block (KiB)", "opt-in limit per block", "shared memory"),
        ("regs_per_thread", "registers per thread (estimated)", "max registers per thread", "registers"),
        ("blocks_per_sm", "resident blocks per SM", None, None),
        ("flop_per_l2_byte", "FLOP per L2 byte, about R / 4 (closed form)", None, None),
        ("pred_time_s", "time (ms)", None, None),
    )
    limits = _limits(rows)
    for ax, (key, ylabel, limit_label, _) in zip(axes, panels, strict=True):
        for color, design in zip(DESIGN_COLORS, designs, strict=True):
            rs = [r for r in rows if r["design"] == design]
            scale = 1 / 1024 if key == "smem_per_block_bytes" else 1e3 if key == "pred_time_s" else 1
            ok = [(r["tile"], _nan(r[key]) * scale) for r in rs if not r["limits_broken"]]
            bad = [(r["tile"], _nan(r[key]) * scale) for r in rs if r["limits_broken"]]
            ax.plot(*zip(*ok, strict=True), "o-", color=color, ms=5)
            if key == "flop_per_l2_byte":  # a closed form: drawn for every tile, launchable or not
                ax.plot(*zip(*bad, strict=True), "o", color=color, ms=5, markerfacecolor="none") if bad else None
            elif bad and key != "pred_time_s":
                ax.plot(*zip(*bad, strict=True), "X", color=color, ms=10, markeredgecolor=C_HBM)
            if key == "pred_time_s":
                ax.plot([r["tile"] for r in rs], [_nan(r["meas_time_s"]) * 1e3 for r in rs], "D", ms=6,
                        markerfacecolor=color, markeredgecolor="black")
        if limit_label:
            value = limits[key]
            ax.axhline(value, color=C_HBM, ls="--", lw=1)
            ax.annotate(f"{limit_label} {value:g}{' KiB' if key == 'smem_per_block_bytes' else ''}", (16, value), textcoords="offset points", xytext=(2, 3),
                        fontsize=7, color=C_HBM)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({r["tile"] for r in rows}), [str(t) for t in sorted({r["tile"] for r in rows})])
        if key in ("threads", "smem_per_block_bytes", "flop_per_l2_byte"):
            ax.set_yscale("log", base=2 if key == "flop_per_l2_byte" else 10)
            _plain_log(ax.yaxis)
        ax.set_xlabel("tile T (T x T outputs per block)", fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.grid(which="both", alpha=0.25)
    broken = [r for r in rows if r["limits_broken"]]
    axes[5].set_title("predicted; not simulated: " + ", ".join(f"{r['label']}" for r in broken), fontsize=7,
                      wrap=True)
    axes[3].set_title("0 = does not launch (breaks a limit)", fontsize=7)
    axes[4].set_title("hollow: a tile that does not launch", fontsize=7)
    _title(fig, result, "per tile size T: launch resources, reuse and time (two designs)")
    _legend(fig, [*(Line2D([], [], color=c, marker="o", label=d) for c, d in zip(DESIGN_COLORS, designs, strict=True)),
                  Line2D([], [], marker="X", ls="", color="grey", markeredgecolor=C_HBM, ms=10,
                         label="breaks a hardware limit (not simulated)"),
                  Line2D([], [], color=C_HBM, ls="--", label=f"the {result.hardware}'s per-block limit"),
                  _measured("white", "measured time (colour of its design)")], ncols=2)
    return fig


def _limits(rows) -> dict:
    """The per-block limits named in the rows' broken-limit texts, falling back to CUDA's."""
    out = {"threads": 1024, "smem_per_block_bytes": 227, "regs_per_thread": 255}
    for r in rows:
        for part in (r["limits_broken"] or "").split("; "):
            try:
                if part.startswith("threads per block"):
                    out["threads"] = float(part.split("> ")[1])
                elif part.startswith("shared memory per block"):
                    out["smem_per_block_bytes"] = float(part.split("> ")[1].split()[0])
                elif part.startswith("registers per thread"):
                    out["regs_per_thread"] = float(part.split("> ")[1])
            except (IndexError, ValueError):
                continue
    return out


# ----- double buffering -----------------------------------------------------------------------------
def double_buffering_figure(result) -> Figure:
    rows = list(result.rows)
    tilings = list(dict.fromkeys(r["tiling"] for r in rows))
    pipes = list(dict.fromkeys((r["pipeline"], r["stages"]) for r in rows))
    fig = Figure(figsize=(11, 5.8), layout="constrained")
    ax = fig.subplots()
    w = 0.8 / len(pipes)
    top = 0.0
    for i, tiling in enumerate(tilings):
        for j, (p, s) in enumerate(pipes):
            r = next(x for x in rows if x["tiling"] == tiling and (x["pipeline"], x["stages"]) == (p, s))
            x = i + (j - (len(pipes) - 1) / 2) * w
            t = _nan(r["pred_time_s"]) * 1e3
            ax.bar(x, t, width=w * 0.95, color=PIPELINE_COLORS[j % len(PIPELINE_COLORS)])
            if r["meas_time_s"] is not None:
                ax.plot(x, r["meas_time_s"] * 1e3, "D", ms=6, markerfacecolor="white", markeredgecolor="black")
            if r["pred_gain"] is not None and p != "none":
                gain = f"predicted {r['pred_gain']:+.0%}"
                if r["meas_gain"] is not None:
                    gain += f", measured {r['meas_gain']:+.0%}"
                ax.text(x, 0.1, gain, rotation=90, ha="center", va="bottom", fontsize=7)
            top = max(top, t, _nan(r["meas_time_s"]) * 1e3 if r["meas_time_s"] else 0.0)
    ax.set_xticks(range(len(tilings)), tilings, fontsize=8)
    ax.set_ylim(0, top * 1.15)
    ax.set_ylabel("time (ms)")
    ax.grid(axis="y", alpha=0.25)
    _title(fig, result, "predicted (bars) and measured (diamonds) time per pipeline, ms; in each bar its gain over no pipeline")
    names = {"none": "no pipeline (one buffer)", "regs": "the document's double buffering (register prefetch, 2 buffers)"}
    _legend(fig, [*(Patch(color=PIPELINE_COLORS[j % len(PIPELINE_COLORS)],
                          label=names.get(p, f"cp.async, {s} stages")) for j, (p, s) in enumerate(pipes)),
                  _measured("white", "measured")])
    return fig


# ----- register tiling ------------------------------------------------------------------------------
def register_tiling_figure(result) -> Figure:
    rows = list(result.rows)
    n = len(rows)
    fig = Figure(figsize=(12, 0.55 * n + 2.8), layout="constrained")
    ax_b, ax_t = fig.subplots(1, 2, sharey=True)
    ys = list(range(n))
    h = 0.38
    ax_b.barh([y - h / 2 for y in ys], [_nan(r["global_load_bytes"]) for r in rows], height=h, color=C_L2)
    ax_b.barh([y + h / 2 for y in ys], [_nan(r["smem_load_bytes"] or None) for r in rows], height=h, color="#2ca02c")
    ax_b.axvline(rows[0]["register_operand_bytes"], color="black", ls=":", lw=1)
    for y, r in zip(ys, rows, strict=True):
        ax_b.annotate(f"block reuse {r['block_reuse']:g}", (r["global_load_bytes"], y - h / 2), fontsize=7,
                      textcoords="offset points", xytext=(3, 0), va="center")
        if r["smem_load_bytes"]:
            ax_b.annotate(f"register reuse {r['register_reuse']:g}", (r["smem_load_bytes"], y + h / 2), fontsize=7,
                          textcoords="offset points", xytext=(3, 0), va="center")
    ax_b.set_xscale("log")
    ax_b.set_xlim(min(r["global_load_bytes"] for r in rows) / 4, rows[0]["register_operand_bytes"] * 3)
    ax_b.set_xlabel("bytes (closed-form count, whole kernel)")
    ax_b.set_title("global loads and shared-memory loads", fontsize=9)
    ax_t.barh(ys, [_nan(r["pred_time_s"]) * 1e3 for r in rows], height=0.5, color=C_TIME)
    ax_t.plot([_nan(r["meas_time_s"]) * 1e3 for r in rows], ys, "D", ms=6, markerfacecolor=C_TIME,
              markeredgecolor="black")
    for y, r in zip(ys, rows, strict=True):
        if r["limits_broken"]:
            note = ax_t.annotate("\n".join(textwrap.wrap(f"does not launch: {r['limits_broken']}", 70)),
                                 (0.02, y), xycoords=("axes fraction", "data"), va="center", fontsize=7,
                                 color=C_HBM)
            note.set_in_layout(False)
    ax_t.set_xlabel("time (ms)")
    ax_t.set_title("time", fontsize=9)
    labels = [f"{r['label']}\n{r['threads']} threads, {r['thread_tile']} per thread, {r['regs_per_thread']} regs"
              for r in rows]
    ax_b.set_yticks(ys, labels, fontsize=7)
    ax_b.invert_yaxis()
    for ax in (ax_b, ax_t):
        ax.grid(axis="x", which="both", alpha=0.25)
    _title(fig, result, "bytes per level and time, ms")
    _legend(fig, [Patch(color=C_L2, label="global loads (L2 -> SMs): / block reuse"),
                  Patch(color="#2ca02c", label="shared-memory loads: / register reuse"),
                  Line2D([], [], color="black", ls=":", label="register operands (3 per FFMA)"),
                  Patch(color=C_TIME, label="predicted time"), _measured(C_TIME, "measured time")])
    return fig


FIGURES = {
    "naive-vs-tiled": naive_vs_tiled_figure,
    "reuse": reuse_figure,
    "tradeoff": tradeoff_figure,
    "double-buffering": double_buffering_figure,
    "register-tiling": register_tiling_figure,
}


def study_figure(result) -> Figure:
    """The figure of a :class:`~tilesim.studies.StudyResult`."""
    if result.name not in FIGURES:
        raise ValueError(f"result.name = {result.name!r}: no figure; known: {', '.join(FIGURES)}")
    return FIGURES[result.name](result)
