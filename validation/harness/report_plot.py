"""The accuracy report's figure: predicted against measured time, one log-log panel per family."""

from __future__ import annotations

import math
from collections.abc import Sequence

BANDS = (0.10, 0.25)  # the error bands drawn around predicted = measured
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def accuracy_figure(reports: Sequence, mode: str = "informed"):
    """A matplotlib Figure (no pyplot state): per family, the ``mode`` predictions against the
    measured medians in microseconds, coloured by problem size, with y = x and the +-10 % and
    +-25 % bands; the title names the GPU and the family's MAPE. Each legend sits below its panel."""
    import matplotlib  # noqa: PLC0415
    from matplotlib.figure import Figure  # noqa: PLC0415

    if not reports:
        raise ValueError("reports: nothing to plot")
    n = len(reports)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(5.2 * cols, 6.0 * rows), layout="constrained")
    panels = fig.subfigures(rows, cols, squeeze=False).ravel()
    cmap = matplotlib.colormaps["tab10"]
    for panel, rep in zip(panels, reports, strict=False):
        ax = panel.subplots()
        preds = rep.predictions.get(mode) or rep.rows
        sizes = list(dict.fromkeys(p.size for p in preds))
        for i, size in enumerate(sizes):
            pts = [p for p in preds if p.size == size]
            ax.scatter([p.measured_s * 1e6 for p in pts], [p.predicted_s * 1e6 for p in pts],
                       marker=_MARKERS[i % len(_MARKERS)], color=cmap(i % 10), label=size, alpha=0.85,
                       edgecolors="none", s=22)
        lo = min(min(p.measured_s, p.predicted_s) for p in preds) * 1e6 / 1.6
        hi = max(max(p.measured_s, p.predicted_s) for p in preds) * 1e6 * 1.6
        line = [lo, hi]
        ax.plot(line, line, "k-", lw=1, label="predicted = measured")
        for band, alpha in zip(BANDS, (0.25, 0.12), strict=True):
            ax.fill_between(line, [v * (1 - band) for v in line], [v * (1 + band) for v in line],
                            color="gray", alpha=alpha, lw=0, label=f"±{band:.0%}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        ax.set_xlabel("measured time (µs)")
        ax.set_ylabel(f"predicted time, {mode} (µs)")
        st = rep.stats(mode if mode in rep.predictions else next(iter(rep.predictions)))
        panel.suptitle(f"{rep.family} on {rep.hardware}\nMAPE {st['mape'] * 100:.1f}%, bias {st['bias'] * 100:+.1f}%, "
                     f"{st['configs']} configs", fontsize=10)
        panel.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=2, fontsize=7,
                     frameon=False)
    return fig
