"""The steel-style GEMM family (Apple GPUs): knobs refused in one line before anything runs, the
lowering (simdgroup_matrix fragments, register spills as traffic), and the published m5-gemm results."""

import pytest

from tilesim import hardware, simulate
from tilesim.api import lower as api_lower
from tilesim.kernels import registry
from tilesim.kernels.steel_gemm import SteelGemmConfig, lower
from tilesim.program import Mma
from validation.families.steel_gemm import predict_m5 as P

M1 = hardware.load("m1_max")


def test_registered_by_its_package():
    fam = registry.get("steel_gemm")
    assert fam.config is SteelGemmConfig
    assert {k.name for k in fam.knobs()} >= {"bm", "bn", "bk", "wm", "wn", "tg_pad", "copy", "edge", "dtype"}


@pytest.mark.parametrize("kwargs, hw, match", [
    (dict(bm=128, bn=128, bk=32, copy="double_buffer"), M1, r"SteelGemmConfig\.tg_bytes = \d+ .*exceeds 32768"),
    (dict(bm=128, bn=128, wm=4, wn=16), M1, r"SteelGemmConfig\.threads = 2048 .*exceeds 1024"),
    (dict(bm=40, bn=64, wm=2, wn=2), None, r"SteelGemmConfig\.patch = '20x32': .*8x8 fragments"),
    (dict(dtype="bf16"), M1, r"SteelGemmConfig\.dtype = 'bf16': m1_max has no simdgroup_matrix rate.*fp16, fp32"),
    (dict(copy="cp_async"), M1, r"SteelGemmConfig\.copy = 'cp_async': a CUDA-only knob"),
    (dict(bk=12), None, r"SteelGemmConfig\.bk = 12: must be a multiple of 8"),
])
def test_bad_input_is_one_line_naming_field_value_limit(kwargs, hw, match):
    with pytest.raises(ValueError, match=match) as e:
        cfg = SteelGemmConfig(1024, 1024, 1024, **kwargs)
        api_lower(cfg, hw)
    assert "\n" not in str(e.value)


def test_aligned_needs_multiples_ragged_does_not():
    with pytest.raises(ValueError, match=r"SteelGemmConfig\.m = 1000: edge = 'aligned' needs a multiple of the tile"):
        SteelGemmConfig(1000, 1024, 1024)
    SteelGemmConfig(1000, 1024, 1024, edge="ragged")


def test_lowering_counts_simdgroup_fragments():
    cfg = SteelGemmConfig(1024, 1024, 1024)  # 64x64x16, 2x2 SIMD-groups, 32x32 patch = 4x4 fragments
    p = lower(cfg)
    step = p.phases[0].step
    mma = [op for op in step.compute if isinstance(op, Mma)][0]
    assert mma.shape == (8, 8, 8) and mma.dtype == "fp32"
    assert mma.count == 4 * 4 * 2 * 4  # fm x fn x (bk / 8) x SIMD-groups
    assert mma.flops * p.phases[0].trips * p.launch.blocks == pytest.approx(cfg.flops)
    assert p.phases[0].step.barriers == 2 and p.phases[0].pipeline_depth == 1
    db = lower(SteelGemmConfig(1024, 1024, 1024, copy="double_buffer"))
    assert db.phases[0].step.barriers == 1 and db.phases[0].pipeline_depth == 2
    assert db.launch.smem_bytes_per_block == 2 * p.launch.smem_bytes_per_block


def test_a_patch_that_does_not_fit_spills_as_traffic():
    fits = SteelGemmConfig(1024, 1024, 1024)
    spills = P.configs(1024, "sync", 8)  # 64x64 patch: 128 accumulator registers alone
    assert fits.spilled_regs == 0 and spills.spilled_regs > 0
    assert not any(ld.tile.tensor == "spill" for ld in lower(fits).phases[0].step.loads)
    step = lower(spills).phases[0].step
    spill = [ld for ld in step.loads if ld.tile.tensor == "spill"]
    assert spill and spill[0].chain == spills.bk // 8
    assert any(st.tile.tensor == "spill" for st in step.stores)
    assert lower(spills).launch.regs_per_thread == spills.reg_limit


def test_simulates_on_the_m1_max():
    r = simulate(SteelGemmConfig(1024, 1024, 1024), P.assumed_spec("m1_max"))
    assert r.time_s > r.roofline_s > 0


def test_the_study_uses_the_catalogs_assumptions():
    # the values predict_m5.py once listed itself now live in tilesim/hardware/assumed/m5_max.toml:
    # the study and `tilesim simulate steel_gemm --hardware m5_max` read the same spec
    hw = P.assumed_spec()
    assert hw == hardware.load("m5_max") and set(P.assumed()) == hw.assumed
    assert all(src.startswith("assumption:") for _, src in P.assumed().values())
    assert P.assumed()["launch_overhead_s"][0] == 5e-6 and P.assumed()["smem_latency_cycles"][0] == 32
    assert P.assumed()["hbm_latency_cycles"][0] == 342e-9 * hw.sm_clock_hz


# --- the published m5-gemm results (shared/REFERENCE.md) ---------------------------------------------
ROWS = {(r["copy"], r["size"]): r for r in P.table()}


@pytest.mark.parametrize("key", [k for k in ROWS if k[1] in (4096, 8192)])
def test_m5_gemm_large_sizes_within_20_percent(key):
    assert abs(ROWS[key]["error"]) <= 0.20, ROWS[key]


@pytest.mark.xfail(strict=True, reason="2048^3 is predicted 37-50% fast: the published 2048 figures sit below the "
                                       "4096 ones (sync 7.7, double-buffered 9.0 vs 13.5/13.1) for a reason the model "
                                       "lacks (no launch/ramp, L2 or clock behaviour that would explain it is sourced)")
@pytest.mark.parametrize("copy", ["sync", "double_buffer"])
def test_m5_gemm_2048_within_20_percent(copy):
    assert abs(ROWS[(copy, 2048)]["error"]) <= 0.20, ROWS[(copy, 2048)]


@pytest.mark.xfail(strict=True, reason="the spilling 64x64 patch is predicted ~4.9x slower, not ~10x: the spill's "
                                       "round trips are charged the SLC latency, and its bytes the core's 32 B/clk port")
def test_spill_slowdown_within_a_factor_1_5():
    s = P.spill_slowdown()
    assert P.PUBLISHED_SPILL_SLOWDOWN / 1.5 <= s <= P.PUBLISHED_SPILL_SLOWDOWN * 1.5, s


def test_spill_is_slower_at_all():
    assert P.spill_slowdown() > 2.0
