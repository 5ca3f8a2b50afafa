"""The tensor-core GEMMs' clock against Nsight Compute's (validation/studies/tc_clock.py). Session 12
put the memory traffic's power into the clock (clock_load_probe's memory streams): the engine's clock is
now near the counter's, which uncovers the single-block wgmma kernels' too-slow k-loop that a too-high
clock had hidden."""

import statistics

import pytest

from validation.studies.tc_clock import COUNTERS, rows


def test_the_engine_clock_is_near_nsight_computes_and_the_wgmma_loops_at_its_clock():
    """The default rows (8192^3): the engine's clock within 13% of Nsight Compute's for every row, 5% on
    average. The single-block 128x256 wgmma kernels' k-loops, whose operand reads no longer wait ahead of
    their MMAs, are within 3% at Nsight Compute's clock; what is left of their error is the engine's
    clock, 12% low there (1.30 against 1.48 GHz: the L2 slope of sm_clock_l2_slope_by_tensor_activity,
    measured with 4.6 TB/s of LDG reads, taken on to the 7-8 TB/s these kernels move by TMA)."""
    got = rows()
    assert len(got) >= 20
    off = [r["model_clock_hz"] / r["ncu_clock_hz"] - 1 for r in got]
    assert max(map(abs, off)) < 0.13 and statistics.mean(map(abs, off)) < 0.05
    wide = [r for r in got if r["label"].startswith("wgmma") and "_cl2" not in r["label"] and "128x256x64" in r["label"]]
    assert len(wide) >= 3
    assert all(abs(r["error_ncu_clock"]) < 0.03 for r in wide)
    assert all(r["model_clock_hz"] / r["ncu_clock_hz"] - 1 < -0.10 for r in wide)  # the known gap, named above


@pytest.mark.slow
def test_on_every_timed_row_the_engine_clock_is_near_nsight_computes_on_average():
    """``--all``: the 172 rows of counters.csv (the same clock counter): on average the engine's clock
    is within 4% of Nsight Compute's (it was 7.8% above before the memory traffic's power)."""
    got = rows(counters=COUNTERS)
    assert len(got) >= 150
    assert abs(statistics.mean(r["model_clock_hz"] / r["ncu_clock_hz"] for r in got) - 1) < 0.04
