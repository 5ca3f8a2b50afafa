"""The hardware catalog: every GPU is data, every value has a source, calibration overrides, and the
pipes, matrix instructions and memory levels the engine reads come from that data."""

import tomllib

import pytest

from tilesim import GemmConfig, hardware, simulate
from tilesim.hardware import DATA_FIELDS, MissingHardwareValue
from tilesim.hardware.catalog import DATA_DIR, read_table
from tilesim.hardware.fields import NVIDIA_FIELDS

H200 = hardware.load("h200", calibrated=False)
A100 = hardware.load("a100_sxm4", calibrated=False)
M1 = hardware.load("m1_max")


def test_catalog_lists_the_required_gpus():
    assert {"h200", "h100_sxm", "a100_sxm4", "m1_max"} <= set(hardware.available())


@pytest.mark.parametrize("name", hardware.available())
def test_every_value_has_a_source(name):
    for hw in (hardware.load(name, calibrated=False), hardware.load(name)):
        if hw.vendor == "nvidia":
            assert set(DATA_FIELDS) <= set(hw.fields())
        for f in hw.fields():
            assert hw.get(f) is not None
            assert hw.source_of(f).strip(), f"{name}.{f} has no source"
        for level in hw.levels:
            for attr in ("capacity_bytes", "bytes_per_s", "latency_cycles", "line_bytes", "sector_bytes"):
                if getattr(level, attr) is not None:
                    assert level.sources[attr].strip(), f"{name} {level.name}.{attr} has no source"


@pytest.mark.parametrize("name", hardware.available())
def test_every_gpu_simulates_or_names_what_it_lacks(name):
    cfg = GemmConfig(1024, 1024, 1024, "reg2d", bm=64, bn=64, tm=4, tn=4)
    if hardware.load(name).vendor == "nvidia":
        r = simulate(cfg, name)
        assert r.time_s > r.roofline_s > 0
        return
    try:
        r = simulate(cfg, name)
    except MissingHardwareValue as e:
        assert name in str(e)
    else:
        assert r.time_s > r.roofline_s > 0


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match="h200") as e:
        hardware.load("h900")
    assert "unknown hardware 'h900'" in str(e.value)


# --- pipes -------------------------------------------------------------------------------------------
def test_pipe_rates_are_the_old_fields_and_the_guides_table():
    for hw in (H200, hardware.load("h200")):
        assert hw.pipe_warp_instr_per_clk("fma") == hw.fp32_lanes_per_sm / hw.warp_size
        assert hw.pipe_warp_instr_per_clk("issue") == hw.issue_warp_instr_per_clk_per_sm
        for w in (1, 4, 8, 13, 32, 64):
            assert hw.pipe_warp_instr_per_clk("fma", "fp32", warps=w) == hw.ffma_rate_at(w)
        assert hw.pipe_latency_cycles("smem") == hw.smem_latency_cycles
        assert hw.pipe_latency_cycles("l1") == hw.l1_latency_cycles
        assert hw.pipe_latency_cycles("l2") == hw.l2_latency_cycles
        assert hw.pipe_latency_cycles("hbm") == hw.pipe_latency_cycles("dram") == hw.hbm_latency_cycles
    # CUDA programming guide, results per clock per SM / 32 lanes (cc 9.0 and 8.0)
    assert [H200.pipe_warp_instr_per_clk(p, d) for p, d in
            (("fma", "fp32"), ("sfu", "fp32"), ("int", "int32"), ("fp64", "fp64"), ("shuffle", "fp32"))] == \
        [4.0, 0.5, 2.0, 2.0, 1.0]
    assert A100.pipe_warp_instr_per_clk("fma") == 2.0 and A100.pipe_warp_instr_per_clk("fp64", "fp64") == 1.0
    assert H200.pipe_warp_instr_per_clk("smem") == H200.pipe_warp_instr_per_clk("l1") == 1.0
    assert H200.pipe_latency_cycles("fma") == 4


def test_unknown_pipe_dtype_or_latency_is_named():
    with pytest.raises(ValueError, match="'tensor'"):
        H200.pipe_warp_instr_per_clk("tensor")
    with pytest.raises(ValueError, match="'sfu'.*'fp16'.*fp32"):
        H200.pipe_warp_instr_per_clk("sfu", "fp16")
    with pytest.raises(ValueError, match="m1_max has no 'fp64' pipe"):
        M1.pipe_warp_instr_per_clk("fp64", "fp64")
    with pytest.raises(ValueError, match="no sourced latency for pipe 'sfu'"):
        H200.pipe_latency_cycles("sfu")
    with pytest.raises(ValueError, match="'warp9'"):
        H200.pipe_latency_cycles("warp9")


# --- matrix instructions -----------------------------------------------------------------------------
def test_mma_shapes_are_per_vendor_data():
    assert H200.mma_flops_per_clk((64, 256, 16), "bf16") == H200.mma_flops_per_clk((64, 8, 16), "fp16") == 4096
    assert H200.mma_flops_per_clk((64, 128, 8), "tf32") == 2048
    assert A100.mma_flops_per_clk((16, 8, 16), "fp16") == 2048
    # the A100's per-clock rate is its datasheet peak (312 TFLOP/s at 1.41 GHz on 108 SMs)
    assert A100.mma_flops_per_clk((16, 8, 16), "fp16") * A100.sm_count * A100.sm_clock_hz == \
        pytest.approx(A100.tensor_flops_per_s, rel=0.01)
    assert {s for s, _ in M1.mma_shapes()} == {"m8n8k8"}
    assert M1.mma_flops_per_clk((8, 8, 8), "fp32") < 2 * M1.fp32_lanes_per_sm  # below the FP32 ALU peak


@pytest.mark.parametrize("hw, shape, dtype, match", [
    (H200, (64, 260, 16), "fp16", "m64n260k16"),
    (H200, (64, 12, 16), "fp16", "m64n12k16"),
    (A100, (64, 128, 16), "fp16", "a100_sxm4 has no m64n128k16"),
    (H200, (16, 8, 16), "fp64", "'fp64'"),
    (M1, (16, 8, 16), "fp16", "m1_max has no m16n8k16"),
])
def test_unknown_mma_shape_or_dtype_is_named(hw, shape, dtype, match):
    with pytest.raises(ValueError, match=match):
        hw.mma_flops_per_clk(shape, dtype)


# --- memory levels -----------------------------------------------------------------------------------
def test_levels_are_views_of_the_fields():
    hw = hardware.load("h200")
    assert [lv.name for lv in hw.levels] == ["registers", "shared", "l1", "l2", "dram"]
    assert hw.level("registers").capacity_bytes == 4 * hw.regs_per_sm
    assert hw.level("shared").capacity_bytes == hw.smem_per_sm_bytes
    assert hw.level("threadgroup").bytes_per_clk_per_sm == hw.smem_bytes_per_clk_per_sm
    assert hw.level("l2").capacity_bytes == hw.l2_bytes and hw.level("l2").bytes_per_s == hw.l2_bytes_per_s
    assert hw.level("hbm").bytes_per_s == hw.hbm_bytes_per_s
    assert hw.level("hbm").bytes_per_clk_per_sm == pytest.approx(hw.hbm_bytes_per_s / hw.sm_count / hw.sm_clock_hz)
    assert hw.level("l1").sector_bytes == hw.sector_bytes and hw.level("l1").line_bytes == 128
    assert hw.level("l2").sources["latency_cycles"].startswith("calibration:")
    assert M1.level("slc").label == "system-level cache (SLC)"
    with pytest.raises(ValueError, match="'l2'.*latency_cycles"):
        hardware.load("m1_max", assumed=False).level("l2").require("latency_cycles")
    assert M1.level("l2").sources["latency_cycles"].startswith("assumption:")  # its assumed overlay's
    with pytest.raises(ValueError, match="'l3'"):
        H200.level("l3")


# --- vendor tables -----------------------------------------------------------------------------------
def test_nvidia_fields_live_in_the_nvidia_table():
    with (DATA_DIR / "h200.toml").open("rb") as fh:
        raw = tomllib.load(fh)
    assert set(raw["nvidia"]) == set(NVIDIA_FIELDS)
    assert not set(raw) & set(NVIDIA_FIELDS)
    assert H200.ldgsts_bypass_wavefronts == H200.get("ldgsts_bypass_wavefronts") > 0


def test_the_m1_max_invents_no_nvidia_values():
    with (DATA_DIR / "m1_max.toml").open("rb") as fh:
        raw = tomllib.load(fh)
    assert "nvidia" not in raw and not set(raw) & set(NVIDIA_FIELDS)
    assert not set(M1.fields()) & set(NVIDIA_FIELDS)
    with pytest.raises(MissingHardwareValue, match="m1_max has no cp.async"):
        M1.ldgsts_bypass_wavefronts  # noqa: B018
    with pytest.raises(ValueError, match="m1_max: smem_latency_cycles is not known"):
        hardware.load("m1_max", assumed=False).smem_latency_cycles  # noqa: B018
    assert M1.is_assumed("smem_latency_cycles") and M1.source_of("smem_latency_cycles").startswith("assumption:")
    with pytest.raises(AttributeError):
        M1.warp_speed  # noqa: B018


def test_a_data_file_is_checked_against_its_vendor(tmp_path):
    bad = tmp_path / "x.toml"
    bad.write_text('[meta]\nvendor = "apple"\n[ldgsts_bypass_wavefronts]\nvalue = 1.0\nsource = "s"\n')
    with pytest.raises(ValueError, match="x.toml: field 'ldgsts_bypass_wavefronts' belongs to nvidia"):
        read_table(bad)
    bad.write_text('[meta]\nvendor = "nvidia"\n[pipes.tensor_core.fp16]\nvalue = 1.0\nsource = "s"\n')
    with pytest.raises(ValueError, match="unknown pipe 'tensor_core'"):
        read_table(bad)
    bad.write_text('[meta]\nvendor = "nvidia"\n[sm_count]\nvalue = 1\nsource = " "\n')
    with pytest.raises(ValueError, match="empty source"):
        read_table(bad)
    bad.write_text('[meta]\nvendor = "nvidia"\n[nvidia.reg_alloc_unit]\nvalue = 256\nsource = "s"\n')
    assert read_table(bad)[0] == {"reg_alloc_unit": 256}


# --- calibration and overrides -----------------------------------------------------------------------
def test_calibrated_profile_overrides_and_says_so():
    base = hardware.load("h200", calibrated=False)
    cal = hardware.load("h200")
    assert not base.calibrated
    assert "hbm_bytes_per_s" in cal.calibrated and cal.calibration_date and cal.is_calibrated("hbm_bytes_per_s")
    assert cal.source_of("hbm_bytes_per_s").startswith("calibration:")
    assert base.source_of("hbm_bytes_per_s") != cal.source_of("hbm_bytes_per_s")
    assert cal.sm_count == base.sm_count  # structural facts are not calibrated


def test_a_profile_carries_measured_pipe_fields(tmp_path):
    # synthetic numbers, far from any real rate: only the round trip is tested
    (tmp_path / "h200.toml").write_text(
        '[meta]\ndate = "2000-01-01"\n'
        '[sfu_latency_cycles]\nvalue = 99.0\nsource = "calibration: test"\n'
        '[shuffle_warp_instr_per_clk_per_sm]\nvalue = 0.125\nsource = "calibration: test"\n'
        '[barrier_latency_cycles_by_warps]\nvalue = [[1, 10.0], [32, 330.0]]\nsource = "calibration: test"\n'
        '[pipes.int.latency_cycles]\nvalue = 7.0\nsource = "calibration: test"\n')
    hw = hardware.load("h200", calibration_dir=tmp_path)
    assert hw.pipe_latency_cycles("sfu") == 99.0 and hw.pipe_latency_key("sfu") == "sfu_latency_cycles"
    assert hw.pipe_warp_instr_per_clk("shuffle") == 0.125
    assert hw.pipe_latency_cycles("int") == 7.0
    assert hw.barrier_latency_cycles_at(16.5) == pytest.approx(170.0)
    assert hw.calibrated == {"sfu_latency_cycles", "shuffle_warp_instr_per_clk_per_sm",
                             "barrier_latency_cycles_by_warps", "pipes.int.latency_cycles"}
    assert hw.sfu_latency_cycles == 99.0 and hw.source_of("sfu_latency_cycles") == "calibration: test"
    assert hw.pipe_warp_instr_per_clk("sfu") == H200.pipe_warp_instr_per_clk("sfu")  # not calibrated: datasheet


def test_overrides_and_validation():
    hw = H200
    fast = hardware.with_overrides(hw, hbm_bytes_per_s=2 * hw.hbm_bytes_per_s)
    assert fast.hbm_bytes_per_s == 2 * hw.hbm_bytes_per_s and fast.source_of("hbm_bytes_per_s") == "override"
    slow_sfu = hardware.with_overrides(hw, **{"pipes.sfu.fp32": 8})
    assert slow_sfu.pipe_warp_instr_per_clk("sfu") == 0.25
    with pytest.raises(ValueError, match="unknown hardware field"):
        hardware.with_overrides(hw, warp_speed=9)
    with pytest.raises(ValueError, match="belongs to nvidia"):
        hardware.with_overrides(M1, ldgsts_bypass_wavefronts=1.0)
    with pytest.raises(ValueError, match="l2_bytes must be > 0"):
        hardware.with_overrides(hw, l2_bytes=0)


def test_specs_compare_and_hash_by_value():
    assert hardware.load("h200") == hardware.load("h200") != H200
    assert len({hardware.load("h200"), hardware.load("h200"), H200}) == 2
