"""The pipe-sharing study (issue #10): fair sharing of an SM's pipes holds blocks that stream HBM
tiles in phase only when nothing sets them apart, so it cannot by itself give the in-phase k-step
that hbm_tiles_probe measured (validation/studies/pipe_sharing.py)."""

import pytest

from validation.studies.pipe_sharing import DEFAULTS, period


def test_slots_started_in_phase_and_served_alike_stay_in_phase_under_fair_sharing():
    per, gaps = period("ps", work=700.0, latency=613.0, transfer=0.0, cap=DEFAULTS["cap"])
    assert per == pytest.approx(4 * 700.0 + 613.0)  # all four compute together, then all wait on one load
    assert max(gaps) == pytest.approx(0.0, abs=1e-6)


def test_loads_returning_one_slot_after_another_spread_fair_sharing_to_about_the_compute_alone():
    per, gaps = period("ps", **DEFAULTS)
    assert per < 1.05 * 4 * DEFAULTS["work"]  # the loads now hide behind the other slots' compute
    assert max(gaps) > 300.0


def test_a_slot_started_a_little_late_also_spreads_them():
    in_phase, _ = period("ps", work=700.0, latency=613.0, transfer=0.0, cap=DEFAULTS["cap"])
    late, _ = period("ps", work=700.0, latency=613.0, transfer=0.0, cap=DEFAULTS["cap"], start_gap=100.0)
    assert late < 0.9 * in_phase


def test_age_priority_runs_at_the_compute_alone_whatever_the_start():
    for gap in (0.0, 100.0):
        per, gaps = period("age", **{**DEFAULTS, "transfer": 0.0}, start_gap=gap)
        assert per == pytest.approx(4 * DEFAULTS["work"])
        assert gaps == pytest.approx([700.0] * 3)


def test_bad_policy_or_cap_names_the_field():
    with pytest.raises(ValueError, match="policy"):
        period("fifo")
    with pytest.raises(ValueError, match="cap"):
        period("ps", cap=0.0)
