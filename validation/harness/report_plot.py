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


def _rank(xs: Sequence[float]) -> list[float]:
    """1 = the smallest (fastest); ties share their mean rank."""
    from validation.harness.report import _ranks  # noqa: PLC0415

    return [r + 1.0 for r in _ranks(xs)]


def rank_figure(reports: Sequence, mode: str = "informed"):
    """A matplotlib Figure: per family and problem size, each configuration's measured rank (x)
    against its predicted rank (y), 1 = fastest, with y = x; each panel's title gives the
    Spearman rank correlation and the top-1 regret. Sizes with fewer than 2 configurations are left
    out. The figure's title names the GPU and the prediction mode."""
    from matplotlib.figure import Figure  # noqa: PLC0415
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415

    from validation.harness.report import spearman  # noqa: PLC0415

    panels = []
    for rep in reports:
        preds = rep.predictions.get(mode) or rep.rows
        by: dict[str, list] = {}
        for p in preds:
            by.setdefault(p.size, []).append(p)
        for size, ps in by.items():
            if len(ps) >= 2:
                panels.append((rep, size, ps))
    if not panels:
        raise ValueError("reports: no problem size with 2 or more configurations to rank")
    n = len(panels)
    cols = min(n, 4)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(3.3 * cols, 3.4 * rows + 0.8), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, (rep, size, ps) in zip(axes, panels, strict=False):
        meas = _rank([p.measured_s for p in ps])
        pred = _rank([p.predicted_s for p in ps])
        k = len(ps)
        ax.plot([1, k], [1, k], "k-", lw=0.8, alpha=0.6)
        ax.scatter(meas, pred, s=14, color="#1f77b4", alpha=0.8, edgecolors="none")
        best = min(range(k), key=lambda i: ps[i].predicted_s)
        ax.scatter([meas[best]], [pred[best]], s=40, facecolors="none", edgecolors="#d62728", lw=1.2)
        rho = spearman([p.predicted_s for p in ps], [p.measured_s for p in ps])
        regret = ps[best].measured_s / min(p.measured_s for p in ps) - 1.0
        ax.set_xlim(k + 0.5, 0.5)  # fastest at the right and top: the good corner is the upper right
        ax.set_ylim(k + 0.5, 0.5)
        ax.set_aspect("equal")
        ax.set_title(f"{rep.family} {size}\nSpearman {rho:.3f}, {k} configs, regret {regret:.1%}", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=6))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=6))
        ax.set_xlabel("measured rank", fontsize=7)
        ax.set_ylabel("predicted rank", fontsize=7)
    for ax in axes[n:]:
        ax.set_visible(False)
    hw = ", ".join(dict.fromkeys(rep.hardware for rep in reports))
    fig.suptitle(f"Predicted vs measured ranking per problem size on {hw} ({mode} predictions)\n"
                 "rank 1 = fastest (upper right); the line is perfect agreement; red ring: the predicted "
                 "best (regret: its measured time over the measured best's, minus one)", fontsize=9)
    return fig
