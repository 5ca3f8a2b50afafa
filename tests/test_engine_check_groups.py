"""validation/studies/engine_check.py's summary by microbenchmark kind, and
validation/studies/gemm_dram_bytes.py's table of the register-tiled GEMMs' DRAM bytes."""

from __future__ import annotations

import math

import pytest

from validation.studies import engine_check, gemm_dram_bytes


def test_group_summary_counts_every_row_once():
    rows = [{"case": "lds_outer 8x8_4w", "error": 0.04}, {"case": "lds_outer 8x4_4w", "error": -0.16},
            {"case": "dgstaged_outer 8x8_4w_R4", "error": 0.52}]
    got = {g["group"]: g for g in engine_check.group_summary(rows)}
    assert list(got) == ["lds_outer", "dgstaged_outer"]
    assert got["lds_outer"]["rows"] == 2 and got["lds_outer"]["beyond"] == 1
    assert got["lds_outer"]["mape"] == pytest.approx(0.10)
    assert (got["lds_outer"]["min"], got["lds_outer"]["max"]) == (-0.16, 0.04)
    assert got["dgstaged_outer"]["beyond"] == 1


def test_engine_check_time_error_is_the_rate_error_inverted():
    rows = engine_check.check()
    if not rows:
        pytest.skip("no recorded lds_outer / staged_outer microbenchmarks")
    for r in rows:
        assert (1 + r["time_error"]) * (1 + r["error"]) == pytest.approx(1.0)
    assert sum(g["rows"] for g in engine_check.group_summary(rows)) == len(rows)


def test_gemm_dram_bytes_rows_are_the_register_tiled_configurations_with_counters():
    if not (gemm_dram_bytes.DEFAULT_DIR / "counters.csv").exists():
        pytest.skip("no recorded GEMM counters")
    rows = gemm_dram_bytes.rows()
    assert len(rows) >= 21  # every register-tiled configuration at 4096^3 at least
    assert all(r["label"].split("_")[0] in gemm_dram_bytes.REG_TILED for r in rows)
    for r in rows:
        pred = r["pred_read_bytes"] + r["pred_write_bytes"]
        meas = r["meas_read_bytes"] + r["meas_write_bytes"]
        assert meas > 0 and not math.isnan(meas)
        assert r["error"] == pytest.approx(pred / meas - 1.0)
