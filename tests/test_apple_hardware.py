"""The Apple chips of the catalog: the five M-series files, their sourced values, nothing invented."""

import pytest

from tilesim import hardware
from tilesim.cost import RULES, apple
from tilesim.hardware import MissingHardwareValue
from tilesim.program import GlobalLoad, SharedAccess, Step, TileRef, lanes

CHIPS = ("m1_max", "m2_ultra", "m3_max", "m4_max", "m5_max")


def test_the_five_chips_are_in_the_catalog():
    assert set(CHIPS) <= set(hardware.available())


@pytest.mark.parametrize("name", CHIPS)
def test_apple_chip_values_are_sourced_and_plausible(name):
    hw = hardware.load(name)
    assert hw.vendor == "apple" and hw.warp_size == 32 and hw.fp32_lanes_per_sm == 128
    assert hw.smem_per_block_optin_bytes == 32768 and hw.max_threads_per_block == 1024
    assert 5e12 < hw.fp32_flops_per_s < 3e13
    for f in hw.fields():
        assert hw.source_of(f).strip()


def test_unsourced_values_raise_rather_than_being_invented():
    m5 = hardware.load("m5_max")
    with pytest.raises(MissingHardwareValue, match="m5_max: l2_bytes is not known"):
        m5.l2_bytes  # noqa: B018
    with pytest.raises(MissingHardwareValue, match="m5_max has no m8n8k8"):
        m5.mma_flops_per_clk((8, 8, 8), "fp32")


def test_m2_ultra_peak_is_the_published_27_tflops():
    assert hardware.load("m2_ultra").fp32_flops_per_s == pytest.approx(27.2e12, rel=0.01)


def test_apple_rules_are_registered():
    assert RULES["apple"] is apple.step_cost


def test_apple_cost_counts_lines_and_threadgroup_passes():
    hw = hardware.load("m1_max")
    tile = TileRef("A", ("by", "k"), 4096)
    coalesced = GlobalLoad(tile, (lanes(16, shared_base=0),), dest="shared")  # 512 B: 4 lines
    strided = GlobalLoad(tile, (lanes(4, stride_bytes=4096),))  # 32 lanes, 32 lines
    c = apple.step_cost(Step(loads=(coalesced,)), hw, 4)
    assert c.load_l2_bytes == 4 * 128 and c.load_l1_cycles == 4 * 128 / apple.CORE_IO_BYTES_PER_CLK
    assert c.staging_wavefronts == 4  # 512 B at 128 B per pass, no bank conflicts modelled
    s = apple.step_cost(Step(loads=(strided,)), hw, 4)
    assert s.load_l2_bytes == 32 * 128
    sh = apple.step_cost(Step(shared_loads=(SharedAccess((lanes(8),), repeat=3),)), hw, 4)
    assert sh.shared_load_wavefronts == 3 * 2
