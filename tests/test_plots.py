"""The study figures render: the tile-size heatmap (hatched cells name the broken limit) and the
hierarchical roofline, through the library and through their one command each."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

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
