"""Figures of sweeps and timelines (the validation harness draws its own accuracy figure). Every
function RETURNS a matplotlib Figure.

Nothing here saves or shows a figure (the caller does ``fig.savefig(path)``); matplotlib runs on
the non-interactive Agg backend. Import this module only when plotting: it imports matplotlib.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from tilesim.sweep import throughput_metric  # noqa: E402

BOUND_COLORS = {
    "hbm": "#d62728",
    "l2": "#ff7f0e",
    "l1": "#bcbd22",
    "smem": "#2ca02c",
    "fma": "#1f77b4",
    "issue": "#9467bd",
    "int": "#8c564b",
    "sfu": "#e377c2",
    "shuffle": "#17becf",
    "tensor": "#aec7e8",
    "fp64": "#c5b0d5",
    "latency": "#7f7f7f",
}
"""Bar colour per bound resource (others fall back to black)."""

KIND_COLORS = {"load_wait": "#d62728", "compute": "#1f77b4", "steady": "#2ca02c", "epilogue": "#ff7f0e"}
"""Colour per timeline interval kind."""

LEVEL_COLORS = {"HBM": "#d62728", "L2": "#ff7f0e", "smem": "#2ca02c"}


METRICS = {
    "tflops": "predicted TFLOP/s (useful FLOPs / predicted time)",
    "bandwidth": "effective HBM bandwidth, TB/s (compulsory bytes / predicted time)",
    "time": "predicted time (ms)",
}
"""What a sweep figure can plot, with its axis label (units included)."""


def _shape_str(shape) -> str:
    return "x".join(map(str, shape))


def _shape_desc(row) -> str:
    desc = getattr(row, "shape_desc", None)
    return desc if desc else _shape_str(row.shape)


def _ok_rows_by_shape(rows) -> dict:
    by: dict = {}
    for r in rows:
        if getattr(r, "result", None) is not None:
            by.setdefault(tuple(r.shape), []).append(r)
    if not by:
        raise ValueError("rows: no simulated rows to plot")
    return by


def _metric_values(row, metric: str) -> tuple[float, float]:
    """(the row's value, the value its roofline time would give) in the metric's unit."""
    r = row.result
    roof_s = r.roofline_s if r.roofline_s > 0 else float("nan")
    if metric == "time":
        return r.time_s * 1e3, roof_s * 1e3
    counts = getattr(row, "counts", None) or {}
    if metric == "tflops":
        work = float(counts.get("flops", r.flops) or 0.0)
    else:
        work = float(counts.get("min_hbm_bytes", 0.0) or 0.0)
    return work / r.time_s / 1e12, work / roof_s / 1e12


def sweep_figure(rows: Iterable, *, top: int | None = None, title: str | None = None,
                 scenario: str | None = None, hardware: str | None = None,
                 metric: str = "auto") -> Figure:
    """Per shape, horizontal bars of one throughput metric per configuration, fastest on top.

    ``metric``: "tflops", "bandwidth" (compulsory HBM bytes per second), "time" (ms) or "auto"
    (:func:`tilesim.sweep.throughput_metric`: TFLOP/s for compute-heavy families, bandwidth else).
    Bars are coloured by the bound resource; the dashed black line is each configuration's
    roofline (the analytic lower-bound time in the same unit). ``top`` keeps the N fastest per shape. The title says the scenario and the GPU (``title`` replaces it), each
    panel the family and the problem size. ``rows`` are :class:`~tilesim.sweep.SweepRow`; rejected
    rows are ignored.
    """
    rows = list(rows)
    by = _ok_rows_by_shape(rows)
    if metric == "auto":
        metric = throughput_metric(rows)
    if metric not in METRICS:
        raise ValueError(f"metric = {metric!r}: must be auto or one of {', '.join(METRICS)}")
    panels = []
    for shape, rs in by.items():
        rs = sorted(rs, key=lambda r: r.result.time_s)
        if top:
            rs = rs[:top]
        panels.append((shape, rs))
    heights = [max(1.5, 0.22 * len(rs) + 0.9) for _, rs in panels]
    fig = Figure(figsize=(10, sum(heights) + 1.0), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
    bounds_seen: list[str] = []
    for ax, (_, rs) in zip(axes, panels, strict=True):
        rs = rs[::-1]  # fastest at the top
        y = list(range(len(rs)))
        vals = [_metric_values(r, metric) for r in rs]
        colors = [BOUND_COLORS.get(r.result.bound, "black") for r in rs]
        for r in rs:
            if r.result.bound not in bounds_seen:
                bounds_seen.append(r.result.bound)
        ax.barh(y, [v for v, _ in vals], color=colors, height=0.75)
        ax.plot([roof for _, roof in vals], y, "k--", lw=1.2, marker="|", ms=8)
        ax.set_yticks(y, [r.label for r in rs], fontsize=7)
        ax.set_ylim(-0.6, len(rs) - 0.4)
        ax.set_xlabel(METRICS[metric])
        family = getattr(rs[0], "family", "")
        ax.set_title(f"{family} {_shape_desc(rs[0])} ({len(rs)} configurations)".strip(), fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    handles = [Patch(color=BOUND_COLORS.get(b, "black"), label=f"{b}-bound") for b in bounds_seen]
    handles.append(Line2D([], [], color="k", ls="--", label="roofline (analytic lower bound)"))
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4), fontsize=8)
    if title is None:
        where = f" on {hardware}" if hardware else ""
        title = f"{scenario or 'sweep'}{where}: predicted (tilesim)"
    fig.suptitle(title)
    return fig


def timeline_figure(result, *, kernel: str | None = None) -> Figure:
    """Per resident block slot of the representative SM, its load_wait/compute/steady/epilogue spans.

    ``result`` is a :class:`~tilesim.result.SimResult` simulated with ``timeline=True``; the title
    names ``kernel`` (default ``result.kernel``; give the label with the problem size) and the GPU.
    """
    if getattr(result, "timeline", None) is None:
        raise ValueError("result.timeline is None: simulate with timeline=True")
    slots = sorted({iv.slot for iv in result.timeline})
    fig = Figure(figsize=(11, 1.2 + 0.45 * max(1, len(slots))), layout="constrained")
    ax = fig.subplots()
    kinds_seen: list[str] = []
    for iv in result.timeline:
        if iv.kind not in kinds_seen:
            kinds_seen.append(iv.kind)
    for slot in slots:
        for kind in kinds_seen:
            spans = [((iv.start_s) * 1e6, (iv.end_s - iv.start_s) * 1e6)
                     for iv in result.timeline if iv.slot == slot and iv.kind == kind]
            if spans:
                ax.broken_barh(spans, (slot - 0.4, 0.8), facecolors=KIND_COLORS.get(kind, "gray"))
    ax.set_yticks(slots, [f"slot {s}" for s in slots])
    ax.set_xlabel("time (µs)")
    ax.set_title(f"{kernel or result.kernel} on {result.hardware}: block slots of one SM "
                 f"({result.time_s * 1e3:.3f} ms, {result.bound}-bound)", fontsize=10)
    fig.legend(handles=[Patch(color=KIND_COLORS.get(k, "gray"), label=k) for k in kinds_seen],
               loc="outside lower center", fontsize=8, ncols=len(kinds_seen))
    ax.grid(axis="x", alpha=0.3)
    return fig


def traffic_figure(rows: Iterable, *, scenario: str | None = None, hardware: str | None = None) -> Figure:
    """Bytes moved per level (HBM, L2, shared memory) per configuration, log scale.

    ``rows`` are :class:`~tilesim.sweep.SweepRow` (rejected ones ignored); configurations are
    named ``label`` (with the shape when rows span several shapes). The title says the scenario,
    the GPU and the problem size.
    """
    by = _ok_rows_by_shape(rows)
    multi = len(by) > 1
    rs = [r for shape_rows in by.values() for r in shape_rows]
    names = [f"{r.label} @ {_shape_str(r.shape)}" if multi else r.label for r in rs]
    levels = {
        "HBM": [r.result.traffic.hbm_bytes for r in rs],
        "L2": [r.result.traffic.l2_bytes for r in rs],
        "smem": [r.result.traffic.smem_bytes for r in rs],
    }
    n = len(rs)
    fig = Figure(figsize=(10, max(2.8, 0.42 * n + 1.6)), layout="constrained")
    ax = fig.subplots()
    h = 0.27
    for j, (level, vals) in enumerate(levels.items()):
        ys = [i + (j - 1) * h for i in range(n)]
        ax.barh(ys, [v if v > 0 else float("nan") for v in vals], height=h,
                color=LEVEL_COLORS[level], label=level)
    positive = [v for vals in levels.values() for v in vals if v > 0]
    ax.set_yticks(range(n), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    if positive:
        ax.set_xlim(min(positive) / 3, max(positive) * 3)
    ax.set_xlabel("bytes moved (whole kernel, all SMs; a missing bar is zero)")
    family = getattr(rs[0], "family", "")
    size = "several problem sizes" if multi else _shape_desc(rs[0])
    where = f" on {hardware}" if hardware else ""
    ax.set_title(f"{scenario or 'sweep'}{where}: traffic per memory level, {family} {size}".replace("  ", " "),
                 fontsize=10)
    fig.legend(loc="outside lower center", ncols=len(levels), fontsize=8)
    ax.grid(axis="x", which="both", alpha=0.25)
    return fig


def block_progress_figure(panels: Sequence[tuple[str, Sequence[tuple[Sequence[float], Sequence[float]]]]],
                          *, title: str | None = None) -> Figure:
    """Progress through the k-loop against time of the blocks of one SM, one panel per kernel.

    ``panels``: (panel title, [(times_s, fractions of the k-loop done), one per block]). Blocks that
    share an SM and advance in step draw on top of each other; staggered ones fan out."""
    if not panels:
        raise ValueError("block_progress_figure: no panels")
    fig = Figure(figsize=(4.2 * len(panels), 3.4), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    cmap = matplotlib.colormaps["tab10"]
    for ax, (name, blocks) in zip(axes, panels, strict=True):
        for i, (t, f) in enumerate(blocks):
            ax.plot([x * 1e3 for x in t], f, color=cmap(i % 10), lw=1.2, marker=".", ms=3)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("time (ms)")
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("fraction of the k-loop done")
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
