"""The study figures render: the tile-size heatmap (hatched cells name the broken limit) and the
hierarchical roofline, through the library and through their one command each."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from figure_checks import assert_no_overlaps

import tilesim
from tilesim.cli import cli
from tilesim.plots import heatmap_figure, limit_name, roofline_figure
from tilesim.sweep import run_sweep

MAP = """name = "small_map"
family = "gemm"
shapes = [[1024, 1024, 1024]]
base = { variant = "reg2d", tm = 8, tn = 8 }
[grid]
bm = [32, 64, 128, 256]
bn = [32, 256]
bk = [8, 16]
"""


@pytest.fixture(scope="module")
def map_rows(tmp_path_factory):
    p = tmp_path_factory.mktemp("map") / "small_map.toml"
    p.write_text(MAP)
    return run_sweep(p, jobs=1).rows


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def test_heatmap_has_a_panel_per_knob_value_and_names_the_broken_limits(map_rows, tmp_path):
    fig = heatmap_figure(map_rows, "bm", "bn", panel="bk", scenario="small_map", hardware="NVIDIA H200 SXM")
    panels = [ax for ax in fig.axes if ax.get_title().startswith("bk = ")]
    assert [ax.get_title() for ax in panels] == ["bk = 8", "bk = 16"]
    texts = _texts(fig)
    assert "warp size" in texts  # 32x32 with 8x8 per thread: 16 threads, not a whole warp
    assert "SM resources" in texts  # 256x256 with 8x8 per thread: 1,024 threads x 128+ registers
    assert "H200" in fig.get_suptitle() and "1024x1024x1024" in fig.get_suptitle()
    fig.savefig(tmp_path / "heat.png")
    assert (tmp_path / "heat.png").stat().st_size > 10_000


def test_limit_names_are_read_from_the_errors():
    assert limit_name("GemmConfig.smem_bytes = 99 exceeds smem_per_block_optin_bytes = 9 on h200") == "shared mem"
    assert limit_name("GemmConfig.threads = 2048 (from the tile) exceeds max_threads_per_block = 1024") == \
        "threads/block"
    assert limit_name("GemmConfig.tm = 7: must divide bm = 128") == "tm"


def test_heatmap_refuses_a_knob_no_row_has(map_rows):
    with pytest.raises(ValueError, match="knob 'bq'"):
        heatmap_figure(map_rows, "bq", "bn")


def test_hierarchical_roofline_places_every_configuration_at_three_levels(map_rows, tmp_path):
    hw = tilesim.resolve_hardware("h200")
    fig = roofline_figure(map_rows, hw, scenario="small_map", top=3)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    for level in ("HBM", "L2", "smem"):
        assert any(lab.startswith(f"{level} ceiling") for lab in labels)
        assert f"configurations at {level}" in labels
    assert ax.get_xscale() == "log" and "TFLOP/s" in ax.get_ylabel()
    assert "H200" in ax.get_title()
    fig.savefig(tmp_path / "roof.png")
    assert (tmp_path / "roof.png").stat().st_size > 10_000


def test_each_figure_is_one_command(map_rows, tmp_path):
    p = tmp_path / "small_map.toml"
    p.write_text(MAP)
    runner = CliRunner()
    res = runner.invoke(cli, ["plot", "heatmap", str(p), "--panel", "bk", "--out", str(tmp_path / "h.png"), "-j", "1"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["plot", "roofline", str(p), "--out", str(tmp_path / "r.png"), "-j", "1"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "h.png").stat().st_size > 10_000 and (tmp_path / "r.png").stat().st_size > 10_000


def test_a_figure_path_that_is_a_folder_fails_before_the_sweep(tmp_path):
    res = CliRunner().invoke(cli, ["plot", "heatmap", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "is a folder" in res.stderr


# ----- timelines (issue #11): phases, plain words, settled runs as their repeating period ----------
def test_timeline_names_phases_in_plain_words_and_draws_holds_as_periods(tmp_path):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from tilesim.kernels import registry
    from tilesim.plots import timeline_figure

    fam = registry.get("gemm")
    # (8192: 31 waves; whole waves are held once the completions settle, for at least 8 of them)
    cfg = fam.make(m=8192, n=8192, k=4096, bm=128, bn=128, bk=8, tm=8, tn=8)
    r = tilesim.simulate(cfg, "h200", timeline=True)
    holds = [iv for iv in r.timeline if iv.kind == "steady"]
    # k-loop steps settle into a period; with one 159-register block per SM whole waves repeat too
    assert holds and all(iv.period_s > 0 and iv.repetitions >= 2 for iv in holds)
    assert any(iv.phase == "k-loop" and iv.repetitions > 10 for iv in holds)
    assert all(iv.period_s == 0 and iv.repetitions == 0 for iv in r.timeline if iv.kind != "steady")
    fig = timeline_figure(r, kernel=fam.full_label(cfg))
    canvas = FigureCanvasAgg(fig)
    fig.savefig(tmp_path / "t.png", dpi=60)
    canvas.draw()
    title = fig.axes[0].get_title()
    for needle in ("reg2d_128x128x8_t8x8", "8192x8192x4096", "H200", "µs", "ms"):
        assert needle in title, needle
    legend = fig.legends[0]
    words = [t.get_text() for t in legend.get_texts()]
    assert any(w.startswith("waiting for loads") for w in words)
    assert any(w.startswith("computing") for w in words)
    shortest_us = min(iv.period_s for iv in holds) * 1e6
    assert any(w.startswith(f"settled: repeats every {shortest_us:.2f} µs") for w in words), words
    assert "phase: k-loop" in words and "phase: epilogue" in words
    shown = words + [t.get_text() for ax in fig.axes for t in ax.texts] + [ax.get_title() for ax in fig.axes]
    assert not any("steady" in w for w in shown)
    assert any(t.get_text().startswith("repeats every") for t in fig.axes[0].texts)
    assert all("µs" in ax.get_xlabel() for ax in fig.axes)
    assert_no_overlaps(fig, canvas.get_renderer(), legends=[legend])


def test_exact_timeline_has_no_holds_and_zooms_into_steps(tmp_path):
    from tilesim.kernels import registry
    from tilesim.plots import timeline_figure

    cfg = registry.get("gemm").make(m=1024, n=1024, k=1024, bm=128, bn=128, bk=8, tm=8, tn=8)
    r = tilesim.simulate(cfg, "h200", timeline=True, steady_state=False)
    assert not [iv for iv in r.timeline if iv.kind == "steady"]
    fig = timeline_figure(r)
    words = [t.get_text() for t in fig.legends[0].get_texts()]
    assert not any(w.startswith("settled") for w in words)
    lo, hi = fig.axes[1].get_xlim()
    assert 0 < hi - lo < fig.axes[0].get_xlim()[1] / 2  # the zoom is a window, not the whole kernel
    fig.savefig(tmp_path / "t.png", dpi=60)
