"""The Apple chips of the catalog: the five M-series files, their sourced values, nothing invented;
the values the engine needs beyond them come from each chip's assumed overlay, flagged as assumed."""

import json

import pytest
from click.testing import CliRunner

from tilesim import hardware
from tilesim.cli import cli
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
    m5 = hardware.load("m5_max", assumed=False)
    assert not m5.assumed
    with pytest.raises(MissingHardwareValue, match="m5_max: l2_bytes is not known"):
        m5.l2_bytes  # noqa: B018
    with pytest.raises(MissingHardwareValue, match="m5_max has no m8n8k8"):
        m5.mma_flops_per_clk((8, 8, 8), "fp32")


# --- the assumed overlay (tilesim/hardware/assumed/<chip>.toml) ---------------------------------------
@pytest.mark.parametrize("name", CHIPS)
def test_assumed_values_are_flagged_and_never_replace_sourced_ones(name):
    sourced = hardware.load(name, assumed=False)
    hw = hardware.load(name)
    assert hw.assumed and hw.assumed == set(hw.fields()) - set(sourced.fields())
    for key in hw.fields():
        src = hw.source_of(key)
        assert hw.is_assumed(key) == src.startswith("assumption:"), (key, src)
        if not hw.is_assumed(key):
            assert hw.get(key) == sourced.get(key) and src == sourced.source_of(key)
    # what the engine needed and no source gives (the M1 Max's file sources more than the others)
    assert {"instruction_bytes", "warp_issue_per_clk", "l2_latency_cycles", "hbm_latency_cycles",
            "smem_latency_cycles", "smem_banks", "l2_bytes_per_s", "launch_overhead_s"} <= hw.assumed
    assert not hw.has("tail_packing_by_slots")  # NVIDIA's dispatch probe: the engine spreads the tail instead


def test_assumed_values_say_what_they_are_carried_from():
    m5 = hardware.load("m5_max")
    assert "carried to the M5 Max" in m5.source_of("mma.m8n8k8.fp32")
    assert m5.mma_flops_per_clk((8, 8, 8), "fp32") == 203.38  # the M1 Max's sourced rate
    assert m5.get("mma.m8n8k8.fp32") == hardware.load("m1_max").get("mma.m8n8k8.fp32")
    assert m5.l2_latency_cycles == 234e-9 * m5.sm_clock_hz and "234 ns" in m5.source_of("l2_latency_cycles")
    assert m5.l2_bytes_per_s == 32 * m5.sm_count * m5.sm_clock_hz
    m1 = hardware.load("m1_max")
    assert not m1.is_assumed("mma.m8n8k8.fp32") and not m1.is_assumed("l2_bytes")  # sourced there


def test_no_nvidia_gpu_has_assumptions():
    for name in ("h200", "h100_sxm", "a100_sxm4"):
        assert not hardware.load(name).assumed


def test_an_overlay_is_checked(tmp_path):
    (tmp_path / "m5_max.toml").write_text('[l2_bytes]\nvalue = 1\nsource = "a guess"\n')
    with pytest.raises(ValueError, match="m5_max.toml: field 'l2_bytes'.*must start with 'assumption:'"):
        hardware.load("m5_max", assumed_dir=tmp_path)
    (tmp_path / "m5_max.toml").write_text('[sm_count]\nvalue = 1\nsource = "assumption: x"\n')
    with pytest.raises(ValueError, match="m5_max.toml: field 'sm_count' is sourced in the data file"):
        hardware.load("m5_max", assumed_dir=tmp_path)
    (tmp_path / "m5_max.toml").write_text('[nvidia.reg_alloc_unit]\nvalue = 256\nsource = "assumption: x"\n')
    with pytest.raises(ValueError, match="vendor fields go in \\[apple\\]"):
        hardware.load("m5_max", assumed_dir=tmp_path)


def test_calibration_and_overrides_replace_assumptions(tmp_path):
    (tmp_path / "m5_max.toml").write_text(
        '[meta]\ndate = "2000-01-01"\n[l2_latency_cycles]\nvalue = 400.0\nsource = "calibration: test"\n')
    cal = hardware.load("m5_max", calibration_dir=tmp_path)
    assert cal.l2_latency_cycles == 400.0 and cal.is_calibrated("l2_latency_cycles")
    assert not cal.is_assumed("l2_latency_cycles") and cal.is_assumed("hbm_latency_cycles")
    over = hardware.with_overrides(hardware.load("m5_max"), smem_latency_cycles=40)
    assert not over.is_assumed("smem_latency_cycles") and over.source_of("smem_latency_cycles") == "override"
    assert over.is_assumed("smem_banks")


@pytest.mark.parametrize("name", CHIPS)
def test_steel_gemm_simulates_on_every_chip_from_the_command_line(name):
    # 1024 threadgroups: a partial last wave on every chip (the engine's spread-tail fallback)
    args = ["simulate", "steel_gemm", "--m", "2048", "--n", "2048", "--k", "1024", "--hardware", name]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert hardware.load(name).display_name.split(" (")[0] in res.output
    d = json.loads(CliRunner().invoke(cli, [*args, "--json"]).stdout)
    assert d["hardware"] == name and d["time_s"] > d["roofline_s"] > 0


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
