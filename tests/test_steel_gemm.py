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


@pytest.mark.xfail(strict=True, reason="2048^3 is predicted 37-50% fast; the published 2048 figures dip for all three "
                                       "implementations (MPS too). Dispatch overhead, waves, SLC and GPU performance "
                                       "state were checked: none is sourced with numbers (validation/families/"
                                       "steel_gemm/README.md, section (a))")
@pytest.mark.parametrize("copy", ["sync", "double_buffer"])
def test_m5_gemm_2048_within_20_percent(copy):
    assert abs(ROWS[(copy, 2048)]["error"]) <= 0.20, ROWS[(copy, 2048)]


@pytest.mark.xfail(strict=True, reason="the spilling 64x64 patch is predicted ~4.9x slower, not ~10x, and most of that "
                                       "is spill stores written back to DRAM (an engine artefact: the scratch is 4.9 MB); "
                                       "sourced rates give 1.9-4.8x (validation/families/steel_gemm/README.md, (b))")
def test_spill_slowdown_within_a_factor_1_5():
    s = P.spill_slowdown()
    assert P.PUBLISHED_SPILL_SLOWDOWN / 1.5 <= s <= P.PUBLISHED_SPILL_SLOWDOWN * 1.5, s


def test_spill_is_slower_at_all():
    assert P.spill_slowdown() > 2.0


def test_spill_report_adds_up():
    hw = P.assumed_spec()
    s = P.spill_report(hw)
    r = simulate(P.configs(4096, "sync", 8), hw)
    assert s["slowdown"] == pytest.approx(P.spill_slowdown(hw))
    assert s["dram_read_bytes"] == r.traffic.hbm_read_bytes and s["dram_write_bytes"] == r.traffic.hbm_write_bytes
    # the resident SIMD-groups' scratch (per core, per SIMD-group slot): 80 registers x 128 B each
    assert s["scratch_footprint_bytes"] == r.blocks_per_sm * 4 * 80 * 128 * hw.sm_count < s["l2_bytes"]
    # the spill bytes alone on the 32 B/clk core ports take less than the predicted time
    assert s["base_time_s"] < s["spill_port_time_s"] < s["time_s"]


# --- the naive and threadgroup-tiled Metal GEMMs (variant knob) -------------------------------------
def _flops_of(p):
    """FLOPs the program's FMAs and MMAs do over the whole grid (FMA: 2 per lane of 32)."""
    from tilesim.program import Compute  # noqa: PLC0415

    total = 0.0
    for ph in p.phases:
        for op in ph.step.compute:
            if isinstance(op, Mma):
                total += op.flops * ph.trips * p.launch.blocks
            elif isinstance(op, Compute) and op.pipe == "fma":
                total += op.count * 32 * 2 * ph.trips * p.launch.blocks
    return total


def test_variant_knob_defaults_to_steel_and_keeps_its_label():
    fam = registry.get("steel_gemm")
    knob = {k.name: k for k in fam.knobs()}["variant"]
    assert knob.default == "steel" and knob.choices == ("naive", "threadgroup", "steel")
    assert SteelGemmConfig(1024, 1024, 1024).label == "steel_64x64x16_w2x2_p32x32_pad4_sync_aligned_fp32"
    assert fam.make(m="64", n="64", k="64", variant="naive", bm="8", bn="8").variant == "naive"


def test_naive_lowering_reads_device_memory_only():
    cfg = SteelGemmConfig(1024, 1024, 1024, variant="naive", bm=16, bn=16)
    p = lower(cfg)
    assert cfg.threads == 256 and cfg.tg_bytes == 0 and p.launch.smem_bytes_per_block == 0
    step = p.phases[0].step
    assert step.barriers == 0 and not step.shared_loads and all(ld.dest == "register" for ld in step.loads)
    assert not any(isinstance(op, Mma) for op in step.compute)
    assert p.phases[0].warp_groups == cfg.simdgroups == 8
    assert _flops_of(p) == pytest.approx(cfg.flops)


@pytest.mark.parametrize("copy, barriers, depth", [("sync", 2, 1), ("double_buffer", 1, 2)])
def test_threadgroup_lowering_stages_slabs(copy, barriers, depth):
    cfg = SteelGemmConfig(1024, 1024, 1024, variant="threadgroup", bm=16, bn=16, bk=16, copy=copy)
    p = lower(cfg)
    step = p.phases[0].step
    assert cfg.tg_bytes == cfg.buffers * (16 * (16 + 4) + 16 * (16 + 4)) * 4 == p.launch.smem_bytes_per_block
    assert all(ld.dest == "shared" for ld in step.loads) and step.shared_loads
    assert step.barriers == barriers and p.phases[0].pipeline_depth == depth
    assert not any(isinstance(op, Mma) for op in step.compute)
    assert _flops_of(p) == pytest.approx(cfg.flops)


@pytest.mark.parametrize("kwargs, hw, match", [
    (dict(variant="naive", bm=4, bn=4), None, r"SteelGemmConfig\.bm = 4: .*bm \* bn = 16 must be a multiple of 32"),
    (dict(variant="naive", bm=16, bn=16, copy="double_buffer"), None, r"SteelGemmConfig\.copy = 'double_buffer'"),
    (dict(variant="threadgroup", bm=64, bn=32), M1, r"SteelGemmConfig\.threads = 2048 .*exceeds 1024"),
    (dict(variant="threadgroup", bm=32, bn=32, bk=64, copy="double_buffer"), M1,
     r"SteelGemmConfig\.tg_bytes = 35840 .*exceeds 32768"),
    (dict(variant="threadgroup", bm=16, bn=16, copy="cp_async"), M1, r"SteelGemmConfig\.copy = 'cp_async'"),
    (dict(variant="tiled"), None, r"SteelGemmConfig\.variant = 'tiled': must be one of naive, threadgroup, steel"),
])
def test_variant_bad_input_is_one_line(kwargs, hw, match):
    with pytest.raises(ValueError, match=match) as e:
        api_lower(SteelGemmConfig(1024, 1024, 1024, **kwargs), hw)
    assert "\n" not in str(e.value)


def test_naive_needs_no_k_alignment_threadgroup_does():
    SteelGemmConfig(1024, 1024, 1000, variant="naive", bm=16, bn=16, bk=16)
    with pytest.raises(ValueError, match=r"SteelGemmConfig\.k = 1000: edge = 'aligned'"):
        SteelGemmConfig(1024, 1024, 1000, variant="threadgroup", bm=16, bn=16, bk=16)
    SteelGemmConfig(1024, 1024, 1000, variant="threadgroup", bm=16, bn=16, bk=16, edge="ragged")


def test_the_pyramid_ranks_naive_threadgroup_steel_on_the_m5_max():
    hw = P.assumed_spec()
    naive = simulate(SteelGemmConfig(4096, 4096, 4096, variant="naive", bm=16, bn=16), hw)
    tg = simulate(SteelGemmConfig(4096, 4096, 4096, variant="threadgroup", bm=16, bn=16, bk=16), hw)
    steel = simulate(SteelGemmConfig(4096, 4096, 4096), hw)
    assert naive.time_s > tg.time_s > steel.time_s
    assert naive.traffic.l2_bytes > tg.traffic.l2_bytes > steel.traffic.l2_bytes


def test_naive_and_threadgroup_metal_source():
    from validation.families.steel_gemm import metal, runner  # noqa: PLC0415

    naive = metal.generate(SteelGemmConfig(1024, 1024, 1024, variant="naive", bm=16, bn=16))
    assert "threadgroup elem_t" not in naive.body and "simdgroup" not in naive.body
    assert "threadgroup_barrier" not in naive.body
    assert "acc = fma(float(A[r * K + k]), float(B[k * N + c]), acc);" in naive.body
    assert naive.threadgroup == (256, 1, 1) and naive.grid == (64 * 256, 64, 1)
    assert "max_total_threads_per_threadgroup(256)" in naive.full
    assert "rows_left &&" not in naive.body and "r >= rows_left" not in naive.body  # aligned: no check
    guarded = metal.generate(SteelGemmConfig(1000, 1000, 1000, variant="naive", bm=16, bn=16, edge="guards"))
    assert "r >= rows_left || c >= cols_left" in guarded.body
    for copy, barriers in (("sync", 2), ("double_buffer", 2)):  # db: one before the loop, one per step
        cfg = SteelGemmConfig(1024, 1024, 1024, variant="threadgroup", bm=16, bn=16, bk=16, copy=copy)
        s = metal.generate(cfg)
        assert f"TILE_CONST int BUFFERS = {cfg.buffers};" in s.header
        assert "threadgroup elem_t As[BUFFERS * A_SLAB];" in s.body and "simdgroup" not in s.body
        assert s.body.count("threadgroup_barrier(") == barriers
        assert "acc = fma(float(As_cur[r * LDA_TG + kk]), float(Bs_cur[kk * LDB_TG + c]), acc);" in s.body
        assert ("elem_t sa[A_ITERS];" in s.body) == (copy == "double_buffer")
        assert "< K" not in s.body and "rows_left &&" not in s.body  # aligned: no bounds check
        assert s.full.count("{") == s.full.count("}") and s.full.count("(") == s.full.count(")")
    ragged = metal.generate(SteelGemmConfig(1000, 1000, 1000, variant="threadgroup", bm=16, bn=16, bk=16,
                                            edge="ragged"))
    assert ragged.function_constants == ("align_M", "align_N", "align_K", "align_ld")
    assert "constant bool align_K [[function_constant(202)]];" in ragged.full
    assert "const bool edge_tile = !align_K" in ragged.body
    assert metal.kernel_name(SteelGemmConfig(64, 64, 64, variant="naive", bm=8, bn=8)) != metal.kernel_name(
        SteelGemmConfig(64, 64, 64, variant="threadgroup", bm=8, bn=8, bk=8))
    cfg = runner.config_from_args(["--variant", "threadgroup", "--bm", "16", "--bn", "16", "--size", "256"])
    assert cfg.variant == "threadgroup" and metal.generate(cfg).name.startswith("tg_gemm_")
