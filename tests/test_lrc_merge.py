"""The L2 request coalescer's counters: parsing, and the story the recorded H200 runs tell."""

import json

import pytest

from validation.studies import lrc_merge as lm


def test_shares_are_coalesced_over_coalescable_and_slice_over_delivered():
    m = {lm.COALESCED: 30.0, lm.COALESCABLE: 100.0, lm.SLICES: 70.0, lm.DELIVERED: 100.0}
    assert lm.shares(m) == (0.3, 0.7)
    assert lm.shares({}) == (0.0, 0.0)


def test_probe_rows_split_launches_evenly_and_refuse_otherwise():
    raw = [{lm.COALESCED: float(i), lm.COALESCABLE: 10.0} for i in range(6)]
    rows = lm.probe_rows(raw, ["a", "b"])
    assert [c for c, _ in rows["b"]] == [0.3, 0.4, 0.5]
    with pytest.raises(ValueError, match="do not split"):
        lm.probe_rows(raw, ["a", "b", "c", "d"])


def test_recorded_reads_merge_only_within_about_a_box():
    """tma_lag under Nsight Compute: SMs reading a box in step are served one read for two (pairs) and
    one for three (all 132); one box apart about 0.4-0.5; two or more apart under 0.1."""
    d = lm.RESULTS / "calibration" / "tma_lag_ncu"
    rows = lm.probe_rows(lm.parse_ncu_raw((d / "ncu_raw.csv").read_text()),
                         list(json.loads((d / "tensor_quick_under_ncu.json").read_text())["tma_lag"]))
    med = {name.split(".")[2] + "." + name.split(".")[3]: sorted(c for c, _ in got[1:])[len(got[1:]) // 2]
           for name, got in rows.items()}
    assert med["g2.lag0"] > 0.45 and med["g132.lag0"] > 0.6
    assert 0.3 < med["g2.lag1"] < med["g2.lag0"] and 0.3 < med["g132.lag1"] < med["g132.lag0"]
    assert max(med["g2.lag2"], med["g2.lag3"], med["g132.lag2"], med["g132.lag3"]) < 0.1
