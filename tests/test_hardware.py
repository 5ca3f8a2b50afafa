"""The hardware catalog: every GPU is data, every value has a source, calibration overrides."""

import pytest

from tilesim import GemmConfig, hardware, simulate
from tilesim.hardware import DATA_FIELDS


def test_catalog_lists_the_required_gpus():
    assert {"h200", "h100_sxm", "a100_sxm4", "m1_max"} <= set(hardware.available())


@pytest.mark.parametrize("name", hardware.available())
def test_every_field_has_a_value_and_a_source(name):
    hw = hardware.load(name, calibrated=False)
    if hw.vendor == "nvidia":
        assert set(DATA_FIELDS) <= set(hw.fields())
    for f in hw.fields():
        assert hw.get(f) is not None
        assert hw.source_of(f).strip(), f"{name}.{f} has no source"


@pytest.mark.parametrize("name", hardware.available())
def test_every_gpu_simulates_or_names_what_it_lacks(name):
    cfg = GemmConfig(1024, 1024, 1024, "reg2d", bm=64, bn=64, tm=4, tn=4)
    if hardware.load(name).vendor == "nvidia":
        r = simulate(cfg, name)
        assert r.time_s > r.roofline_s > 0
        return
    try:
        r = simulate(cfg, name)
    except hardware.MissingHardwareValue as e:
        assert name in str(e)
    else:
        assert r.time_s > r.roofline_s > 0


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match="h200") as e:
        hardware.load("h900")
    assert "unknown hardware 'h900'" in str(e.value)


def test_calibrated_profile_overrides_and_says_so():
    base = hardware.load("h200", calibrated=False)
    cal = hardware.load("h200")
    assert not base.calibrated
    assert "hbm_bytes_per_s" in cal.calibrated and cal.calibration_date
    assert cal.source_of("hbm_bytes_per_s").startswith("calibration:")
    assert base.source_of("hbm_bytes_per_s") != cal.source_of("hbm_bytes_per_s")
    assert cal.sm_count == base.sm_count  # structural facts are not calibrated


def test_overrides_and_validation():
    hw = hardware.load("h200", calibrated=False)
    fast = hardware.with_overrides(hw, hbm_bytes_per_s=2 * hw.hbm_bytes_per_s)
    assert fast.hbm_bytes_per_s == 2 * hw.hbm_bytes_per_s and fast.source_of("hbm_bytes_per_s") == "override"
    with pytest.raises(ValueError, match="unknown hardware field"):
        hardware.with_overrides(hw, warp_speed=9)
    with pytest.raises(ValueError, match="l2_bytes must be > 0"):
        hardware.with_overrides(hw, l2_bytes=0)
