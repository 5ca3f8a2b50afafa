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


def test_schedule_age_ranks_a_younger_block_by_the_blocks_started_before_it():
    import numpy as np

    from validation.studies.schedule_age import age_ranks

    # SM 0: block 0 from 0 to 8 (segments of 1), block 1 from 2 to 18 (segments of 2); SM 1: block 2 alone
    stamps = np.array([np.arange(9.0), 2.0 + 2.0 * np.arange(9.0), np.arange(9.0)])
    got = age_ranks(np.array([0, 0, 1]), stamps)
    assert got[(2, 0)] == [1.0] * 6  # block 0's segments from 2 on (block 1 resident), it the oldest
    assert got[(2, 1)] == [2.0] * 3  # block 1's segments while block 0 still runs (midpoints 3, 5, 7)
    assert got[(1, 0)] == [1.0] * 2 + [2.0] * 5 + [1.0] * 8  # alone: block 0 early, block 1 late, block 2
