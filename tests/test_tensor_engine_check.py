"""The engine against its own tensor-core microbenchmarks (validation/studies/tensor_engine_check.py):
the ldmatrix-fed mma.sync loops of the mma_feed probe, written as tile programs."""

import pytest

from validation.studies import tensor_engine_check as tec


@pytest.fixture(scope="module")
def got():
    return tec.check()


def test_the_ldmatrix_fed_mma_loops_are_predicted_within_10_percent_on_average(got):
    assert len(got["feed"]) >= 30
    assert tec.mape(got["feed"]) <= 0.10


def test_cp_async_copies_after_the_barrier_slow_the_loop_as_measured(got):
    """Six 16-byte copies per thread after the barrier cost the loop about a quarter of its MMA rate on
    the GPU (0.519 -> 0.402 HMMA/clk/SM); the engine must see most of that drop."""
    rows = {name: (m, p) for name, m, p in got["gemm_traffic"]}
    (m0, p0), (m1, p1) = rows["mfgt_none_k2"], rows["mfgt_copy_k2"]
    assert p1 / p0 == pytest.approx(m1 / m0, abs=0.05)


def test_no_gemm_traffic_row_is_off_by_more_than_30_percent(got):
    worst = max(abs(p / m - 1) for _, m, p in got["gemm_traffic"])
    assert worst <= 0.30


@pytest.mark.xfail(strict=True, reason="the GEMM-like loop with a barrier per k-step is predicted 13-27% fast: "
                                       "the engine overlaps one warp group's fragment loads with another's MMAs "
                                       "more than the GPU does after a barrier (a block-wide first round fits these "
                                       "rows but not the barrier-every-slice rows, so it was not kept)")
def test_every_gemm_traffic_row_within_15_percent(got):
    assert max(abs(p / m - 1) for _, m, p in got["gemm_traffic"]) <= 0.15
