"""The generic accuracy report (validation.harness.report) on fabricated predictions and on the
recorded GEMM rows' configurations. Every time below is a fabricated test input."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from validation.harness import report, suite
from validation.harness.report import FamilyReport, Prediction, error_stats
from validation.harness.report_plot import accuracy_figure


def _pred(size: str, label: str, measured: float, predicted: float) -> Prediction:
    return Prediction(None, label, size, "informed", measured, predicted, "hbm", 32, 4)


ROWS = (_pred("a", "x", 1.0, 1.1), _pred("a", "y", 2.0, 1.8), _pred("a", "z", 3.0, 3.3),
        _pred("b", "x", 10.0, 12.0), _pred("b", "y", 5.0, 4.0))


def test_error_statistics_per_mode_and_size():
    st = error_stats(ROWS)
    assert st["mape"] == pytest.approx((0.1 + 0.1 + 0.1 + 0.2 + 0.2) / 5)
    assert st["bias"] == pytest.approx((0.1 - 0.1 + 0.1 + 0.2 - 0.2) / 5)
    assert st["median_abs_error"] == pytest.approx(0.1) and st["max_abs_error"] == pytest.approx(0.2)
    assert st["spearman"] == {"a": pytest.approx(1.0)}  # b has only two configurations
    assert st["regret"] == {"a": 0.0, "b": 0.0}
    worse = (*ROWS[:3], _pred("b", "x", 10.0, 3.0), ROWS[4])  # predicts x best at b; y is
    assert error_stats(worse)["regret"]["b"] == pytest.approx(10.0 / 5.0 - 1)
    assert math.isnan(report.spearman([1, 1, 1], [1, 2, 3]))


def test_recorded_rows_rebuild_their_configurations():
    rows = suite.read_rows(suite.RESULTS_ROOT / "h200" / "gemm" / "times.csv")
    if not rows:
        pytest.skip("no recorded GEMM results")
    cfgs = suite.load_suite("gemm")
    rebuilt = [report.config_from_row("gemm", r) for r in rows if r["label"] != "cublas"]
    assert set(rebuilt) == set(cfgs)
    with pytest.raises(ValueError):
        report.config_from_row("gemm", next(r for r in rows if r["label"] == "cublas"))


def test_defaults_find_the_recorded_directories():
    dirs = report.recorded_dirs("gemm")
    if not dirs:
        pytest.skip("no recorded GEMM results")
    assert dirs[0].name == "gemm" and "gemm" in report.recorded_families()
    with pytest.raises(ValueError, match="no recorded results at /nonexistent/times.csv"):
        report.compute_report("gemm", Path("/nonexistent"), "h200")


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="workers = 0"):
        report.compute_report("gemm", workers=0)
    with pytest.raises(ValueError, match="modes"):
        report.compute_report("gemm", modes=("psychic",))


def _overlap(a, b) -> bool:
    return not (a.x1 <= b.x0 or b.x1 <= a.x0 or a.y1 <= b.y0 or b.y1 <= a.y0)


def test_figure_has_a_panel_per_family_and_nothing_overlaps(tmp_path):
    reps = [FamilyReport(f, "h200", (), tmp_path, {"informed": ROWS}, (), (), ()) for f in ("softmax", "reduction")]
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = accuracy_figure(reps)
    canvas = FigureCanvasAgg(fig)
    fig.savefig(tmp_path / "acc.png", dpi=60)
    canvas.draw()  # lay out again at the canvas's own dpi, the one the boxes are measured at
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 2
    renderer = canvas.get_renderer()
    boxes = []
    for ax in axes:
        title = ax.figure._suptitle  # the panel's (a subfigure's) title, laid out with it
        assert ax.get_xscale() == "log" and "h200" in title.get_text() and "MAPE" in title.get_text()
        legend = ax.figure.legends[0]  # the panel's (a subfigure's) legend
        boxes += [title.get_window_extent(renderer), legend.get_window_extent(renderer),
                  ax.get_window_extent(renderer), ax.xaxis.label.get_window_extent(renderer)]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not _overlap(a, b)
    with pytest.raises(ValueError, match="nothing to plot"):
        accuracy_figure([])


def test_report_command_reports_what_it_can_and_names_what_it_cannot(monkeypatch, tmp_path, capsys):
    def fake(family, *a, **kw):
        if family == "softmax":
            raise ValueError("h200: no sourced latency for pipe 'shuffle'")
        return FamilyReport(family, "h200", (), tmp_path, {"informed": ROWS}, (), (), ())

    monkeypatch.setattr(report, "compute_report", fake)
    rc = report.main_report(["reduction", "softmax"], csv_path=tmp_path / "acc.csv", plot_path=tmp_path / "acc.png")
    out = capsys.readouterr().out
    assert rc == 2 and "reduction: summary" in out and "error: softmax: h200: no sourced latency" in out
    assert (tmp_path / "acc.csv").read_text().count("\n") == len(ROWS) + 1 and (tmp_path / "acc.png").exists()


# ----- ranking figure (issue #11): measured vs predicted rank per family and size ------------------
def test_rank_figure_has_a_panel_per_family_and_size_with_spearman_and_nothing_overlaps(tmp_path):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from validation.harness.report_plot import rank_figure

    reps = [FamilyReport(f, "h200", (), tmp_path, {"informed": ROWS}, (), (), ()) for f in ("softmax", "reduction")]
    fig = rank_figure(reps)
    canvas = FigureCanvasAgg(fig)
    fig.savefig(tmp_path / "rank.png", dpi=60)
    canvas.draw()
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 4  # two families x sizes a and b
    titles = [ax.get_title() for ax in axes]
    assert titles[0].startswith("softmax a") and "Spearman 1.000" in titles[0]  # 1.1 < 1.8 < 3.3: same order
    assert "Spearman 1.000" in titles[1] and "regret 0.0%" in titles[1]  # size b: 2 configs, 4.0 < 12.0
    assert all(ax.get_xlabel() == "measured rank" and ax.get_ylabel() == "predicted rank" for ax in axes)
    assert "h200" in fig._suptitle.get_text() and "rank 1 = fastest" in fig._suptitle.get_text()
    renderer = canvas.get_renderer()
    boxes = [fig._suptitle.get_window_extent(renderer)]
    for ax in axes:
        boxes += [ax.title.get_window_extent(renderer), ax.get_window_extent(renderer),
                  ax.xaxis.label.get_window_extent(renderer)]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not _overlap(a, b)
    with pytest.raises(ValueError, match="no problem size"):
        rank_figure([FamilyReport("x", "h200", (), tmp_path, {"informed": ROWS[:1]}, (), (), ())])


def test_report_command_writes_the_rank_plot(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from tilesim.cli import cli

    monkeypatch.setattr(report, "compute_report",
                        lambda family, *a, **kw: FamilyReport(family, "h200", (), tmp_path, {"informed": ROWS}, (),
                                                              (), ()))
    png = tmp_path / "out" / "rank.png"
    res = CliRunner().invoke(cli, ["validate", "report", "--family", "gemm", "--summary", "--rank-plot", str(png)])
    assert res.exit_code == 0, res.output
    assert png.exists() and f"wrote {png}" in res.output
    assert report.compute_report.__name__ == "<lambda>"  # the command put the module back as it was
