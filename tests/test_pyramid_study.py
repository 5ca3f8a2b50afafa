"""The H200-vs-Apple pyramid study (predicted only): rows, winners, CSV, figure and paragraph, on CPU."""

import csv

import pytest

from validation.studies import pyramid_h200_vs_apple as S

SIZE = 1024  # the study's 4096^3 ladders, smaller: same configurations, fast


@pytest.fixture(scope="module")
def rows():
    return S.rows(S.GPUS[:2], SIZE)


def test_rows_cover_both_gpus_with_every_level(rows):
    assert {r["gpu"] for r in rows} == {"h200", "m5_max"}
    assert len(rows) == len(S.h200_configs(SIZE)) + len(S.apple_configs(SIZE))
    for r in rows:
        assert r["tflops"] > 0 and r["dram_bytes"] > 0 and r["l2_slc_bytes"] > 0 and r["register_bytes"] > 0
        assert 0 < r["occupancy"] <= 1
    naive = [r for r in rows if r["rung"] == "naive"]
    assert all(r["shared_tg_bytes"] == 0 for r in naive)


def test_register_tiles_beat_naive_and_spills_cost(rows):
    for gpu in ("h200", "m5_max"):
        b = S.best(rows, gpu)
        naive = [r for r in rows if r["gpu"] == gpu and r["rung"] == "naive"][0]
        assert b["rung"] in ("register tile", "warp tile", "simdgroup patch") and b["tflops"] > naive["tflops"]
    spill = [r for r in rows if r["rung"] == "spilling patch"][0]
    assert spill["spilled_regs"] > 0 and spill["spill_bytes"] > 0
    assert spill["tflops"] < S.best(rows, "m5_max")["tflops"]


def test_main_writes_figure_csv_and_paragraph(tmp_path, capsys):
    out = tmp_path / "pyramid.png"
    assert S.main(["--out", str(out), "--size", str(SIZE), "--no-m1"]) == 0
    assert out.stat().st_size > 10_000
    with open(out.with_suffix(".csv")) as f:
        got = list(csv.DictReader(f))
    assert {"gpu", "config", "tflops", "dram_bytes", "l2_slc_bytes", "shared_tg_bytes", "register_bytes",
            "occupancy", "spill_bytes"} <= set(got[0])
    text = capsys.readouterr().out
    assert "predicted only" in text.lower() and S.COMMAND in text and str(out) in text


def test_figure_title_says_predicted(rows):
    fig = S.figure(rows, SIZE)
    assert "PREDICTED ONLY" in fig._suptitle.get_text()
    assert len([ax for ax in fig.axes if ax.get_title()]) == 4
