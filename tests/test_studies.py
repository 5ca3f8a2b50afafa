"""The source document's GEMM numbers as studies (issue #11): what each study states, and that each
is one command writing a CSV with a header and a figure whose legend overlaps no title."""

import csv
from pathlib import Path

import pytest
from click.testing import CliRunner
from figure_checks import boxes_overlap

import tilesim
from tilesim.cli import cli
from tilesim.cli.study import measured_gemm
from tilesim.studies import (
    DB_PIPELINES,
    DB_TILINGS,
    SEED_HBM_BYTES_PER_S,
    STUDIES,
    broken_limits,
    run_study,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def hw():
    return tilesim.resolve_hardware("h200")


@pytest.fixture(scope="module")
def measured():
    return measured_gemm("h200")


@pytest.fixture(scope="module")
def results(hw, measured):
    """Every study at the document's 4096^3 on the H200, with the suite's measurements."""
    return {name: run_study(name, hw, measured=measured) for name in STUDIES}


def _row(result, **match):
    rows = [r for r in result.rows if all(r.get(k) == v for k, v in match.items())]
    assert len(rows) == 1, (match, len(rows))
    return rows[0]


def test_naive_traffic_is_the_documents_137_gb_and_41_ms_at_one_byte_per_element(results):
    res = results["naive-vs-tiled"]
    naive = _row(res, label="naive_32x32")
    assert naive["nocache_reads"] == 2 * 4096**3
    assert naive["nocache_reads"] * 1.0 == pytest.approx(137e9, rel=0.01)  # the document's "137 GB"
    assert naive["nocache_1b_time_at_seed_rate_s"] == pytest.approx(41e-3, rel=0.01)  # "41 ms at 3.35 TB/s"
    assert naive["seed_bytes"] == 137e9 and naive["seed_time_s"] == 41e-3
    # in fp32 the same reads are four times the bytes, 164 ms at the document's rate
    assert naive["nocache_fp32_bytes"] == 4 * naive["nocache_reads"]
    assert naive["nocache_fp32_time_at_seed_rate_s"] == pytest.approx(4 * naive["nocache_reads"] / SEED_HBM_BYTES_PER_S)
    # tiled rows carry the document's "about 3.4 ms"; the T = 32 tile reads 32x fewer elements
    tiled = _row(res, label="smem_32x32x32")
    assert tiled["seed_time_s"] == 3.4e-3 and tiled["nocache_reads"] * 32 == naive["nocache_reads"]


def test_with_the_caches_the_naive_kernel_moves_far_less_than_the_no_cache_count(results):
    naive = _row(results["naive-vs-tiled"], label="naive_32x32")
    # the L1 and L2 catch the re-reads: the simulator's HBM bytes are a fiftieth of the 550 GB or less
    assert naive["pred_hbm_bytes"] < naive["nocache_fp32_bytes"] / 50
    assert naive["pred_time_s"] < naive["nocache_fp32_time_at_hw_rate_s"] / 3
    # the suite measured the same configuration: its DRAM bytes are of the predicted order
    assert naive["meas_time_s"] and naive["meas_dram_bytes"]
    assert 0.5 < naive["meas_dram_bytes"] / naive["pred_hbm_bytes"] < 2
    assert _row(results["naive-vs-tiled"], label="cublas")["meas_time_s"] < naive["meas_time_s"]


def test_tiled_predictions_reach_the_documents_few_milliseconds(results):
    res = results["naive-vs-tiled"]
    best = min(r["pred_time_s"] for r in res.rows if r["pred_time_s"])
    naive = _row(res, label="naive_32x32")
    assert best < naive["pred_time_s"] / 4 and 1e-3 < best < 6e-3


def test_reuse_equals_the_tile_size_for_square_tiles(results):
    res = results["reuse"]
    for t in (16, 32, 64, 128, 256):
        row = _row(res, tile=f"{t}x{t}")
        assert row["seed_reuse"] == t and row["analytic_reuse"] == pytest.approx(t)
    assert _row(res, tile="256x128")["analytic_reuse"] == pytest.approx(2 / (1 / 256 + 1 / 128))
    # the simulator's bytes read from L2 give the same factor where the tile is the only reuse
    for t in (32, 64, 128):
        assert _row(res, tile=f"{t}x{t}")["pred_reuse_l2"] == pytest.approx(t, rel=0.05)
    # and the L2 multiplies it at HBM: every tiled kernel reads HBM less often than L2 serves it
    for row in res.rows:
        if row["pred_reuse_hbm"]:
            assert row["pred_reuse_hbm"] > row["pred_reuse_l2"]


def test_a_tile_that_breaks_a_limit_stays_in_the_reuse_table_with_the_limit_named(results):
    row = _row(results["reuse"], tile="256x256")
    assert "registers per thread" in row["limits_broken"] and row["pred_time_s"] is None


def test_tradeoff_marks_256x256_over_the_shared_memory_limit(results, hw):
    res = results["tradeoff"]
    assert len(res.rows) == 10  # five tiles, two designs, none dropped
    seed256 = _row(res, label="smem_256x256x256")
    assert "shared memory per block 512 KiB > 227 KiB" in seed256["limits_broken"]
    assert seed256["smem_per_block_bytes"] > hw.smem_per_block_optin_bytes
    assert seed256["pred_time_s"] is None and seed256["blocks_per_sm"] == 0
    # the document's one-output-per-thread kernel stops at 32x32 (1024 threads)
    assert "threads per block 4096 > 1024" in _row(res, label="smem_64x64x64")["limits_broken"]
    assert _row(res, label="smem_32x32x32")["limits_broken"] == ""
    reg256 = _row(res, label="reg2d_256x256x16_t16x16_vec")
    assert "registers per thread" in reg256["limits_broken"]


def test_tradeoff_larger_tiles_cost_resources_and_buy_reuse(results):
    rows = [r for r in results["tradeoff"].rows if r["label"].startswith("reg2d") and not r["limits_broken"]]
    assert [r["tile"] for r in rows] == [16, 32, 64, 128]
    for a, b in zip(rows, rows[1:], strict=False):
        assert b["smem_per_block_bytes"] > a["smem_per_block_bytes"]
        assert b["regs_per_thread"] >= a["regs_per_thread"]
        assert b["blocks_per_sm"] <= a["blocks_per_sm"]
        assert b["reuse"] == 2 * a["reuse"] and b["flop_per_l2_byte"] > a["flop_per_l2_byte"]
        assert b["pred_time_s"] < a["pred_time_s"]


def test_double_buffering_is_predicted_not_slower(results):
    res = results["double-buffering"]
    assert len(res.rows) == len(DB_TILINGS) * len(DB_PIPELINES)
    for tiling in {r["tiling"] for r in res.rows}:
        none = _row(res, tiling=tiling, pipeline="none")
        regs = _row(res, tiling=tiling, pipeline="regs")
        assert regs["pred_time_s"] <= none["pred_time_s"] and regs["pred_gain"] >= 0
        assert none["seed_max_gain"] > 0
    # where the suite measured both, the measured gain has the predicted sign
    both = [r for r in res.rows if r["pipeline"] == "regs" and r["meas_gain"] is not None]
    assert both and all(r["meas_gain"] > 0 for r in both)


def test_double_buffering_study_is_the_double_buffering_scenario(hw):
    from tilesim.sweep import load_scenario

    sc = load_scenario("double_buffering")
    labels = {row.label for row in sc.expand(hw)}
    res = run_study("double-buffering", hw, (1024, 1024, 1024))
    assert {r["label"] for r in res.rows} == labels


def test_register_tiling_128x128_block_8x8_thread(results):
    res = results["register-tiling"]
    ex = _row(res, label="reg2d_128x128x8_t8x8")
    assert ex["threads"] == 256 and ex["accumulator_regs"] == 64
    assert ex["block_reuse"] == 128 and ex["register_reuse"] == 8
    one = _row(res, label="smem_32x32x32")
    assert one["smem_load_bytes"] == 8 * ex["smem_load_bytes"]  # 8x fewer shared loads
    assert one["global_load_bytes"] == 4 * ex["global_load_bytes"]
    assert "threads per block 16384" in _row(res, label="smem_128x128x8")["limits_broken"]
    assert "registers per thread" in _row(res, label="reg2d_128x128x8_t16x16")["limits_broken"]
    assert ex["meas_time_s"] and ex["pred_time_s"] < one["pred_time_s"]


def test_measurements_belong_to_their_gpu(measured):
    assert ("naive_32x32", 4096, 4096, 4096) in measured
    assert measured_gemm("a100_sxm4") == {}  # no suite on that GPU: nothing borrowed from the H200


def test_broken_limits_names_every_limit(hw):
    from tilesim.kernels.gemm.config import GemmConfig

    text = broken_limits(GemmConfig(4096, 4096, 4096, "smem", bm=256, bn=256, bk=256), hw)
    assert "threads per block" in text and "shared memory per block" in text
    assert broken_limits(GemmConfig(4096, 4096, 4096, "smem", bm=32, bn=32, bk=32), hw) == ""


def test_the_core_study_module_reads_no_files_and_imports_no_validation():
    src = (ROOT / "tilesim" / "studies.py").read_text()
    for needle in ("import validation", "from validation", "open(", "read_text", "csv"):
        assert needle not in src, needle


# ----- the command ----------------------------------------------------------------------------------
def test_study_list_names_every_study():
    res = CliRunner().invoke(cli, ["study", "--list"])
    assert res.exit_code == 0
    for name in STUDIES:
        assert name in res.output


def test_an_unknown_study_is_one_line():
    res = CliRunner().invoke(cli, ["study", "nope"])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and "naive-vs-tiled" in res.stderr


def test_every_study_writes_a_csv_with_a_header_and_a_figure(tmp_path):
    for name in STUDIES:
        csv_path, png = tmp_path / f"{name}.csv", tmp_path / f"{name}.png"
        res = CliRunner().invoke(cli, ["study", name, "--shape", "1024x1024x1024", "--csv", str(csv_path),
                                       "--plot", str(png)])
        assert res.exit_code == 0, res.output
        with csv_path.open() as fh:
            rows = list(csv.DictReader(fh))
        assert rows and "label" in rows[0]
        assert png.stat().st_size > 10_000
        assert f"wrote {len(rows)} rows" in res.output


def test_figures_name_study_shape_gpu_and_units_and_legends_overlap_no_title(results):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from tilesim.study_figures import study_figure

    for name, res in results.items():
        fig = study_figure(res)
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        title = fig._suptitle.get_text()
        for needle in (name, "4096x4096x4096", "H200"):
            assert needle in title, (name, needle)
        labels = " ".join(ax.get_xlabel() + ax.get_ylabel() for ax in fig.axes) + title
        assert any(u in labels for u in ("ms", "bytes", "KiB", "(x)")), name
        renderer = canvas.get_renderer()
        legend = fig.legends[0].get_window_extent(renderer)
        boxes = [fig._suptitle.get_window_extent(renderer)]
        for ax in fig.axes:
            boxes += [ax.get_window_extent(renderer), ax.xaxis.label.get_window_extent(renderer)]
            if ax.get_title():
                boxes.append(ax.title.get_window_extent(renderer))
        for b in boxes:
            assert not boxes_overlap(legend, b), (name, legend, b)
