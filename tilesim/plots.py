"""Figures of sweeps and timelines (the validation harness draws its own accuracy figure). Every
function RETURNS a matplotlib Figure.

Nothing here saves or shows a figure (the caller does ``fig.savefig(path)``); matplotlib runs on
the non-interactive Agg backend. Import this module only when plotting: it imports matplotlib.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import matplotlib
import matplotlib.patches

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

KIND_COLORS = {"load_wait": "#d62728", "compute": "#1f77b4", "steady": "#2ca02c", "epilogue": "#ff7f0e",
               "barrier": "#9467bd", "dependency": "#17becf", "loads": "#7f7f7f"}
"""Colour per timeline interval kind (and per part of a step: barrier, dependency)."""

KIND_WORDS = {"load_wait": "waiting for loads (nothing to compute until they arrive)",
              "compute": "computing (math and shared-memory reads)",
              "barrier": "storing tiles to shared memory, waiting at the barrier",
              "dependency": "waiting on a dependency chain (results the next instructions need)",
              "epilogue": "writing results",
              "loads": "loads in flight: a line per step's loads, from issue to arrival"}
"""What a timeline interval kind means, in the legend's words ("steady" holds get their own line)."""

PART_KINDS = {"barrier": "barrier", "math": "compute", "dependency": "dependency", "stores": "epilogue"}
"""The colour (kind) of each part of a step (:attr:`~tilesim.result.Interval.parts`)."""

LOAD_WORDS = {"loads": "global loads", "cp.async": "cp.async copies", "tma": "TMA copies"}

PHASE_COLORS = ("#c7c7c7", "#f7b6d2", "#dbdb8d", "#9edae5", "#c49c94", "#ffbb78")
"""Colour of the thin phase strip under each slot, by the order phases first appear."""

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


def _fmt_us(t_us: float) -> str:
    return f"{t_us:.3g} µs" if t_us >= 0.1 else f"{t_us * 1e3:.3g} ns"


def _zoom_window(timeline) -> tuple[float, float]:
    """A window (s) a dozen steps wide: around the first settled hold's start if there is one (the
    steps that settled, then the repeating period), else the middle of the kernel."""
    steps = [iv.end_s - iv.start_s for iv in timeline if iv.kind in ("load_wait", "compute")]
    holds = [iv for iv in timeline if iv.kind == "steady" and iv.period_s > 0]
    t_end = max(iv.end_s for iv in timeline)
    t_start = min(iv.start_s for iv in timeline)
    if holds:
        first = min(holds, key=lambda iv: iv.start_s)
        step = first.period_s
        center = first.start_s
    else:
        steps.sort()
        step = 2 * steps[len(steps) // 2] if steps else (t_end - t_start) / 10
        center = (t_start + t_end) / 2
    lo = max(t_start, center - 5 * step)
    return lo, min(t_end, lo + 12 * step)


def _hold_pattern(hold, spans, loads) -> tuple[list, list]:
    """What a settled hold repeats: the spans and loads of its slot in the period before it (the last
    stepped period), as (kind, offset_s, length_s, warp_group) relative to the period's start."""
    t0, t1 = hold.start_s - hold.period_s, hold.start_s

    def clip(ivs):
        return [(iv, max(iv.start_s, t0) - t0, min(iv.end_s, t1) - max(iv.start_s, t0))
                for iv in ivs if iv.slot == hold.slot and iv.end_s > t0 and iv.start_s < t1 and iv is not hold]
    return clip(spans), clip(loads)


def _period_seconds(hold, spans, depth: int = 3) -> dict[str, float]:
    """Seconds per period of a settled hold spent on each activity, in words: from the period before
    it, a settled run inside that period counted by its own period's mix (``depth`` levels)."""
    pattern, _ = _hold_pattern(hold, spans, ())
    share: dict[str, float] = {}
    for iv, _off, length in pattern:
        if iv.kind == "load_wait":
            share["waiting for loads"] = share.get("waiting for loads", 0.0) + length
        elif iv.kind == "compute":
            parts = iv.parts or (("math", iv.end_s - iv.start_s),)
            if iv.phase == "epilogue":
                parts = (("stores", iv.end_s - iv.start_s),)
            scale = length / max(sum(x for _, x in parts), 1e-30)
            for part, x in parts:
                word = {"math": "computing", "barrier": "at the barrier", "dependency": "on dependencies",
                        "stores": "writing"}[part]
                share[word] = share.get(word, 0.0) + x * scale
        elif iv.kind == "steady" and iv.period_s > 0 and depth > 0:
            inner = _period_seconds(iv, spans, depth - 1)
            scale = length / max(sum(inner.values()), 1e-30)
            for word, x in inner.items():
                share[word] = share.get(word, 0.0) + x * scale
    return share


def _hold_mix(hold, spans) -> str:
    """A hold's period in words: the shares of its time waiting for loads, computing and so on."""
    share = _period_seconds(hold, spans)
    total = sum(share.values())
    if total <= 0:
        return ""
    return ", ".join(f"{100 * v / total:.0f}% {k}" for k, v in sorted(share.items(), key=lambda kv: -kv[1])
                     if v >= 0.005 * total)


def _step_bars(ax, iv, y, h, t_off=0.0, alpha=1.0) -> None:
    """One stepped span: waiting for loads, or a step's parts (barrier, math, dependency, stores)."""
    x = (iv.start_s + t_off) * 1e6
    if iv.kind == "load_wait":
        ax.broken_barh([(x, (iv.end_s - iv.start_s) * 1e6)], (y, h), facecolors=KIND_COLORS["load_wait"],
                       edgecolor="none", alpha=alpha)
        return
    if iv.phase == "epilogue" or not iv.parts:
        color = KIND_COLORS["epilogue" if iv.phase == "epilogue" else "compute"]
        ax.broken_barh([(x, (iv.end_s - iv.start_s) * 1e6)], (y, h), facecolors=color, edgecolor="none",
                       alpha=alpha)
        return
    for part, s in iv.parts:
        ax.broken_barh([(x, s * 1e6)], (y, h), facecolors=KIND_COLORS[PART_KINDS[part]], edgecolor="none",
                       alpha=alpha)
        x += s * 1e6


def _load_lines(ax, flights, y0, t_off=0.0, alpha=1.0) -> None:
    """Loads in flight as thin lines above a track, one level per load outstanding at once."""
    ends: list[float] = []
    for start, end in sorted(flights):
        level = next((j for j, e in enumerate(ends) if e <= start), len(ends))
        if level == len(ends):
            ends.append(end)
        else:
            ends[level] = end
        y = y0 + 0.05 * min(level, 3)
        ax.hlines(y, (start + t_off) * 1e6, (end + t_off) * 1e6, color=KIND_COLORS["loads"], lw=1.2, alpha=alpha)


def _tracks(timeline, per_group: bool) -> list[tuple[int, int]]:
    """(slot, warp group) per track: every warp group when ``per_group``, else one track per slot."""
    if per_group:
        return sorted({(iv.slot, iv.warp_group) for iv in timeline if iv.kind != "steady"}
                      | {(iv.slot, 0) for iv in timeline})
    return sorted({(iv.slot, 0) for iv in timeline})


def _draw_slots(ax, timeline, tracks, phases, window=None, loads=(), zoom=False) -> None:
    """Per track (a block slot, or a warp group of one), its stepped spans as bars split into their
    parts, its loads in flight as thin lines above it, its settled holds as hatched bands with a tick
    per period (where the ticks are at least 3 pixels apart) and, in the zoom, the hold's period
    repeated faintly inside it; a thin phase strip beneath each track."""
    lo, hi = window if window else (0.0, max(iv.end_s for iv in timeline))
    ax.set_xlim(lo * 1e6, hi * 1e6)
    width_px = ax.figure.get_figwidth() * ax.figure.dpi * 0.85
    px_per_s = width_px / max(hi - lo, 1e-30)
    per_group = len({g for _, g in tracks}) > 1
    for row, (slot, group) in enumerate(tracks):
        def mine(ivs, slot=slot, group=group):
            return [iv for iv in ivs if iv.slot == slot and iv.end_s > lo and iv.start_s < hi
                    and (iv.warp_group == group or iv.kind == "steady")]
        spans = mine(timeline)
        for iv in spans:
            if iv.kind in ("load_wait", "compute"):
                _step_bars(ax, iv, row - 0.25, 0.5)
        _load_lines(ax, [(iv.start_s, iv.end_s) for iv in mine(loads)], row - 0.45)
        for iv in spans:
            if iv.kind != "steady":
                continue
            ax.broken_barh([(iv.start_s * 1e6, (iv.end_s - iv.start_s) * 1e6)], (row - 0.25, 0.5),
                           facecolors="#dff0d8", edgecolor=KIND_COLORS["steady"], hatch="///", lw=0.8)
            if iv.period_s > 0 and iv.period_s * px_per_s >= 3:
                n0 = max(0, int((lo - iv.start_s) / iv.period_s))
                n1 = min(int(round(iv.repetitions)), int((hi - iv.start_s) / iv.period_s) + 1)
                if zoom and iv.period_s * px_per_s >= 12:  # the period it stands for, repeated faintly
                    pattern, flights = _hold_pattern(iv, [s for s in timeline if s.warp_group == group
                                                          and s.kind != "steady"],
                                                     [f for f in loads if f.warp_group == group])
                    for j in range(n0, min(n1, int(round(iv.repetitions)))):
                        off = iv.start_s + j * iv.period_s - (iv.start_s - iv.period_s)
                        for p, _o, _len in pattern:
                            _step_bars(ax, p, row - 0.25, 0.5, t_off=off, alpha=0.35)
                        _load_lines(ax, [(f.start_s, f.end_s) for f, _o, _len in flights], row - 0.45,
                                    t_off=off, alpha=0.35)
                ticks = [(iv.start_s + j * iv.period_s) * 1e6 for j in range(n0, n1 + 1)]
                ax.vlines(ticks, row - 0.25, row + 0.25, color=KIND_COLORS["steady"], lw=1.0)
            shown = (min(iv.end_s, hi) - max(iv.start_s, lo)) * px_per_s
            if iv.period_s > 0 and shown > 150:
                mid = (max(iv.start_s, lo) + min(iv.end_s, hi)) / 2 * 1e6
                mix = _hold_mix(iv, timeline) if shown > 420 else ""
                ax.text(mid, row, f"repeats every {_fmt_us(iv.period_s * 1e6)} × {iv.repetitions:.0f}"
                        + (f": {mix}" if mix else ""), ha="center", va="center", fontsize=7,
                        bbox={"facecolor": "white", "edgecolor": "none", "pad": 1, "alpha": 0.9})
        for phase in phases:
            ph = [(iv.start_s * 1e6, (iv.end_s - iv.start_s) * 1e6) for iv in spans if iv.phase == phase]
            if ph:
                ax.broken_barh(ph, (row + 0.3, 0.1), facecolors=phases[phase], edgecolor="none")
    names = [f"block slot {s}" + (f", warp group {g}" if per_group else "") for s, g in tracks]
    ax.set_yticks(range(len(tracks)), names, fontsize=8)
    ax.set_ylim(-0.6, len(tracks) - 0.4)
    ax.invert_yaxis()
    ax.set_xlabel("time since the kernel's launch (µs)")
    ax.grid(axis="x", alpha=0.3)


def loads_in_flight(loads, timeline, slot: int, lo: float, hi: float) -> tuple[list[float], list[int]]:
    """Steps of loads of ``slot`` (all its warp groups) issued and not yet arrived, over [lo, hi]:
    ``(times_s, counts)`` of a step function; inside a settled hold the loads of the period before it
    repeat, as the hold stands for."""
    flights = [(iv.start_s, iv.end_s) for iv in loads if iv.slot == slot]
    for hold in (iv for iv in timeline if iv.kind == "steady" and iv.slot == slot and iv.period_s > 0):
        if hold.end_s <= lo or hold.start_s >= hi:
            continue
        _, pattern = _hold_pattern(hold, (), [iv for iv in loads if iv.slot == slot])
        n0 = max(0, int((lo - hold.start_s) / hold.period_s))
        n1 = min(int(round(hold.repetitions)), int((hi - hold.start_s) / hold.period_s) + 1)
        for j in range(n0, n1):
            off = hold.start_s + j * hold.period_s - (hold.start_s - hold.period_s)
            flights += [(f.start_s + off, min(f.end_s + off, hold.end_s)) for f, _o, _len in pattern]
    edges = sorted({lo, hi, *(t for f in flights for t in f if lo < t < hi)})
    counts = [sum(1 for a, b in flights if a <= t < b) for t in edges]
    return edges, counts


def timeline_figure(result, *, kernel: str | None = None) -> Figure:
    """Why a kernel is fast or slow: per resident block slot of the representative SM (per warp group
    where a phase runs its warps as independent groups), when it waits for its loads, stores tiles to
    shared memory and waits at the barrier, computes, waits on a dependency chain, writes results, and
    which program phase it is in; its loads in flight as thin lines above each track (a line starting
    while the track computes is double buffering at work). A settled run of steps that the engine held
    (rather than stepped) is a hatched band with a tick per repetition of its period, labelled with the
    period and what it is made of; in the zoom the period before it is drawn again, faintly, once per
    repetition.

    Three panels: the whole kernel; a zoom a dozen steps wide (around the first settled run, where the
    last stepped steps and the repeating period are side by side); and the loads in flight per block
    slot in that zoom. ``result`` is a :class:`~tilesim.result.SimResult` simulated with
    ``timeline=True``; the title names ``kernel`` (default ``result.kernel``; give the label with the
    problem size), the GPU and the predicted time.
    """
    timeline = getattr(result, "timeline", None)
    if timeline is None:
        raise ValueError("result.timeline is None: simulate with timeline=True")
    if not timeline:
        raise ValueError("result.timeline is empty: nothing to draw")
    loads = getattr(result, "loads", None) or ()
    phases = {p: PHASE_COLORS[i % len(PHASE_COLORS)]
              for i, p in enumerate(dict.fromkeys(iv.phase for iv in timeline if iv.phase))}
    slots_tracks = _tracks(timeline, per_group=False)
    group_tracks = _tracks(timeline, per_group=True)
    h_all, h_zoom = 0.9 + 0.42 * len(slots_tracks), 0.9 + 0.42 * len(group_tracks)
    fig = Figure(figsize=(11, h_all + h_zoom + 2.0 + 2.4), layout="constrained")
    ax_all, ax_zoom, ax_loads = fig.subplots(3, 1, height_ratios=[h_all, h_zoom, 1.5])
    _draw_slots(ax_all, timeline, slots_tracks, phases, loads=loads)
    window = _zoom_window(timeline)
    _draw_slots(ax_zoom, timeline, group_tracks, phases, window, loads=loads, zoom=True)
    ax_all.axvspan(window[0] * 1e6, window[1] * 1e6, color="k", alpha=0.12, lw=0)
    ax_zoom.set_title(f"zoom: {_fmt_us((window[1] - window[0]) * 1e6)} from {window[0] * 1e6:.4g} µs "
                      "(faint inside a settled run: the period it repeats)", fontsize=9)
    top = 0
    for slot, _ in slots_tracks:
        t, n = loads_in_flight(loads, timeline, slot, *window)
        ax_loads.step([x * 1e6 for x in t], n, where="post", lw=1.2, label=f"block slot {slot}")
        top = max([top, *n])
    ax_loads.set_xlim(window[0] * 1e6, window[1] * 1e6)
    ax_loads.set_ylim(-0.2, top + 0.8)
    ax_loads.set_ylabel("steps' loads\nin flight", fontsize=8)
    ax_loads.set_xlabel("time since the kernel's launch (µs)")
    kinds_sent = sorted({LOAD_WORDS.get(iv.kind, iv.kind) for iv in loads})
    ax_loads.set_title("loads in flight in the zoom: steps whose loads are issued and not yet arrived"
                       + (f" ({', '.join(kinds_sent)})" if kinds_sent else " (none)") + ", per block slot",
                       fontsize=9)
    ax_loads.grid(alpha=0.3)
    if len(slots_tracks) > 1:
        ax_loads.legend(fontsize=7, loc="upper right", ncols=min(4, len(slots_tracks)))
    kinds = {iv.kind for iv in timeline}
    used = {PART_KINDS[p] for iv in timeline for p, _ in iv.parts if iv.phase != "epilogue"}
    has_epi = any(iv.phase == "epilogue" for iv in timeline) or "epilogue" in used
    handles = [Patch(color=KIND_COLORS[k], label=KIND_WORDS[k]) for k in ("load_wait", "compute")
               if k in kinds]
    handles += [Patch(color=KIND_COLORS[k], label=KIND_WORDS[k]) for k in ("barrier", "dependency") if k in used]
    if has_epi:
        handles.append(Patch(color=KIND_COLORS["epilogue"], label=KIND_WORDS["epilogue"]))
    if loads:
        handles.append(Line2D([], [], color=KIND_COLORS["loads"], lw=1.2,
                              label=KIND_WORDS["loads"] + f" ({', '.join(kinds_sent)})"))
    holds = [iv for iv in timeline if iv.kind == "steady" and iv.period_s > 0]
    if holds:
        periods = sorted(iv.period_s * 1e6 for iv in holds)
        per = _fmt_us(periods[0]) if periods[-1] <= periods[0] * 1.05 else \
            f"{_fmt_us(periods[0])} to {_fmt_us(periods[-1])}"
        reps = sum(iv.repetitions for iv in holds)
        handles.append(Patch(facecolor="#dff0d8", edgecolor=KIND_COLORS["steady"], hatch="///",
                             label=f"settled: repeats every {per} (a tick per repetition; "
                                   f"{reps:.0f} repetitions not simulated one by one)"))
    handles += [Patch(color=c, label=f"phase: {p}") for p, c in phases.items()]
    fig.legend(handles=handles, loc="outside lower center", fontsize=8, ncols=2, frameon=False)
    hw = getattr(result, "hardware", "")
    try:
        from tilesim.hardware import load as _load_hw  # noqa: PLC0415

        hw = _load_hw(hw).display_name
    except (ValueError, KeyError, OSError):  # not in the catalog: its name is fine in a title
        pass
    # the figure's title is the first panel's (its first line names the kernel with its shape)
    ax_all.set_title(f"{kernel or result.kernel} on {hw}: the resident blocks of one SM, time in µs\n"
                     f"predicted {result.time_s * 1e3:.3f} ms, {result.bound}-bound, {result.blocks_per_sm} "
                     f"block{'s' if result.blocks_per_sm != 1 else ''} per SM, {result.waves:.2f} waves; below, the whole kernel (shaded: the zoom)",
                     fontsize=10)
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


_LIMIT_NAMES = (
    ("max_threads_per_block", "threads/block"),
    ("smem_per_block_optin_bytes", "shared mem"),
    ("max_regs_per_thread", "regs/thread"),
    ("does not fit on an SM", "SM resources"),
    ("warp size", "warp size"),
    ("launch limit", "grid size"),
    ("device memory", "device memory"),
)


def limit_name(error: str) -> str:
    """A short name of the hardware limit (or rule) an error text says was broken."""
    for needle, name in _LIMIT_NAMES:
        if needle in error:
            return name
    m = re.search(r"^\w+\.(\w+) = ", error)
    return m.group(1) if m else "invalid"


def _knob(row, name):
    if getattr(row, "cfg", None) is not None and hasattr(row.cfg, name):
        return getattr(row.cfg, name)
    knobs = getattr(row, "knobs", {}) or {}
    if name in knobs:
        return knobs[name]
    fields = getattr(row, "problem_fields", ()) or ()
    if name in fields:
        return row.shape[list(fields).index(name)]
    return None


def heatmap_figure(rows: Iterable, x: str, y: str, *, panel: str | None = None, metric: str = "auto",
                   scenario: str | None = None, hardware: str | None = None,
                   measured: dict | None = None) -> Figure:
    """Predicted throughput over two knobs ``x`` and ``y``, one panel per value of ``panel`` (a
    knob, or "shape"; default: one panel per shape). A cell shows the best configuration with those
    values (other knobs may vary); a cell whose every configuration breaks a hardware limit is
    hatched and names the limit. ``measured`` maps a row's ``full_label`` to a measured value in
    the same unit, drawn under the prediction in a cell where present.
    """
    import numpy as np  # noqa: PLC0415

    rows = list(rows)
    ok = [r for r in rows if getattr(r, "result", None) is not None]
    if not ok:
        raise ValueError("rows: no simulated rows to plot")
    if metric == "auto":
        metric = throughput_metric(rows)
    if metric not in METRICS:
        raise ValueError(f"metric = {metric!r}: must be auto or one of {', '.join(METRICS)}")
    for name in (x, y) + ((panel,) if panel and panel != "shape" else ()):
        if all(_knob(r, name) is None for r in rows):
            raise ValueError(f"knob {name!r}: no row of this sweep has it")

    def panel_of(r):
        return _shape_desc(r) if panel in (None, "shape") else f"{panel} = {_knob(r, panel)}"

    panels = list(dict.fromkeys(panel_of(r) for r in rows))
    xs = sorted({_knob(r, x) for r in rows if _knob(r, x) is not None})
    ys = sorted({_knob(r, y) for r in rows if _knob(r, y) is not None})
    higher_better = metric != "time"
    fig = Figure(figsize=(4.2 * len(panels) + 1.4, 0.55 * len(ys) + 2.4), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    vmax = max(_metric_values(r, metric)[0] for r in ok)
    cmap = matplotlib.colormaps["viridis"]
    im = None
    for ax, pname in zip(axes, panels, strict=True):
        grid = np.full((len(ys), len(xs)), np.nan)
        best_row: dict = {}
        broken: dict = {}
        for r in rows:
            if panel_of(r) != pname or _knob(r, x) is None or _knob(r, y) is None:
                continue
            i, j = ys.index(_knob(r, y)), xs.index(_knob(r, x))
            if getattr(r, "result", None) is None:
                if r.error:
                    broken.setdefault((i, j), limit_name(r.error))
                continue
            v = _metric_values(r, metric)[0]
            cur = grid[i, j]
            if np.isnan(cur) or (v > cur if higher_better else v < cur):
                grid[i, j] = v
                best_row[(i, j)] = r
        im = ax.imshow(grid, origin="lower", cmap=cmap, vmin=0, vmax=vmax, aspect="auto")
        for (i, j), name in broken.items():
            if not np.isnan(grid[i, j]):
                continue
            ax.add_patch(matplotlib.patches.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///",
                                                      edgecolor="#888888", lw=0))
            ax.text(j, i, name, ha="center", va="center", fontsize=7, color="#444444",
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1, "alpha": 0.85})
        for (i, j), r in best_row.items():
            v = grid[i, j]
            text = f"{v:.1f}" if v >= 10 else f"{v:.2f}"
            meas = (measured or {}).get(getattr(r, "full_label", None))
            if meas is not None:
                text += f"\n({meas:.1f} meas.)"
            ax.text(j, i, text, ha="center", va="center", fontsize=8,
                    color="white" if v < 0.6 * vmax else "black")
        ax.set_xticks(range(len(xs)), [str(v) for v in xs])
        ax.set_yticks(range(len(ys)), [str(v) for v in ys])
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        ax.set_title(pname, fontsize=10)
    cb = fig.colorbar(im, ax=list(axes), shrink=0.9)
    cb.set_label(METRICS[metric], fontsize=8)
    family = getattr(ok[0], "family", "")
    where = f" on {hardware}" if hardware else ""
    shapes = sorted({_shape_desc(r) for r in ok})
    what = f"{family} {shapes[0]}" if len(shapes) == 1 else family
    fig.suptitle(f"{scenario or 'sweep'}: {what}{where}, best per cell (tilesim prediction); "
                 "hatched: breaks the named limit", fontsize=10)
    return fig


def roofline_figure(rows: Iterable, hw, *, scenario: str | None = None, top: int | None = 5) -> Figure:
    """A hierarchical roofline (as Nsight Compute draws it): every simulated configuration placed
    at its arithmetic intensity against HBM, L2 and shared memory (useful FLOPs per byte moved at
    that level), at its predicted FLOP rate; the ceilings are the FP32 peak and each level's
    bandwidth of ``hw``. The ``top`` fastest are labelled and their three points joined."""
    from tilesim.analytic.bounds import smem_bytes_per_s  # noqa: PLC0415

    ok = [r for r in rows if getattr(r, "result", None) is not None and r.result.flops > 0]
    if not ok:
        raise ValueError("rows: no simulated rows with FLOPs to plot")
    levels = (("HBM", hw.hbm_bytes_per_s, lambda t: t.hbm_bytes),
              ("L2", hw.l2_bytes_per_s, lambda t: t.l2_bytes),
              ("smem", smem_bytes_per_s(hw), lambda t: t.smem_bytes))
    peak = hw.fp32_flops_per_s / 1e12
    fig = Figure(figsize=(9, 6.2), layout="constrained")
    ax = fig.add_subplot()
    pts = []
    for r in ok:
        perf = r.result.flops / r.result.time_s / 1e12
        ai = [r.result.flops / f(r.result.traffic) if f(r.result.traffic) > 0 else float("nan")
              for _, _, f in levels]
        pts.append((r, perf, ai))
    finite = [a for _, _, ai in pts for a in ai if a == a and a > 0]
    lo, hi = min(finite) / 3, max(finite) * 3
    import numpy as np  # noqa: PLC0415

    xs = np.geomspace(lo, hi, 200)
    for name, bw, _ in levels:
        ax.plot(xs, np.minimum(xs * bw / 1e12, peak), color=LEVEL_COLORS[name], lw=1.3,
                label=f"{name} ceiling {bw / 1e12:.1f} TB/s")
    ax.axhline(peak, color="k", lw=1.0, ls=":", label=f"FP32 peak {peak:.1f} TFLOP/s")
    for k, (name, _, _) in enumerate(levels):
        ax.scatter([ai[k] for _, _, ai in pts], [p for _, p, _ in pts], s=14, color=LEVEL_COLORS[name],
                   alpha=0.75, label=f"configurations at {name}", edgecolors="none")
    best = sorted(pts, key=lambda t: -t[1])[: top or 0]
    several = len({q.shape for q, _, _ in pts}) > 1
    for n, (r, perf, ai) in enumerate(best):
        ax.plot(ai, [perf] * 3, color="#555555", lw=0.5, alpha=0.6)
        ax.annotate(f"{r.label} @{r.shape_str}" if several else r.label, (ai[0], perf), fontsize=6,
                    xytext=(8, 14 + 11 * n), textcoords="offset points", ha="left",
                    arrowprops={"arrowstyle": "-", "lw": 0.4, "color": "#777777"})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity, FLOP per byte moved at the level (log)")
    ax.set_ylabel("predicted TFLOP/s (log)")
    ax.set_ylim(min(p for _, p, _ in pts) / 3, peak * 2)
    ax.grid(which="both", alpha=0.2)
    ax.legend(loc="lower right", fontsize=7)
    shapes = sorted({_shape_desc(r) for r, _, _ in pts})
    fam = getattr(ok[0], "family", "")
    ax.set_title(f"{scenario or 'sweep'}: {fam} {', '.join(shapes)} on {hw.display_name}\n"
                 "hierarchical roofline (tilesim prediction; the fastest joined across levels)", fontsize=10)
    return fig
