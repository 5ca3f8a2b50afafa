"""Occupancy against hand-worked cases of the CUDA occupancy calculator's rules.

Facts used (tilesim/hardware/data, uncalibrated):
  both GPUs: warp 32, regs_per_sm 65536 (4 sub-partitions of 16384), reg unit 256 per warp,
             2048 threads / 64 warps / 32 blocks per SM, 1024 threads per block, 255 regs/thread,
             1024 B reserved shared memory per block, 128 B shared allocation unit.
  H200: smem_per_sm 233472 (228 KiB), opt-in per block 232448 (227 KiB).
  A100: smem_per_sm 167936 (164 KiB), opt-in per block 166912 (163 KiB).
Notation: W = warps per block, R = registers allocated per warp, S = shared bytes allocated.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesim import hardware
from tilesim.analytic import LIMIT_NAMES, Occupancy, occupancy
from tilesim.analytic.occupancy import NO_LIMIT, apple_occupancy, nvidia_occupancy
from tilesim.kernels.gemm.analytic import gemm_occupancy
from tilesim.kernels.gemm.config import GemmConfig

H200 = hardware.load("h200", calibrated=False)
A100 = hardware.load("a100_sxm4", calibrated=False)
# A what-if GPU whose warp slots (48) bind before its thread slots (2048), as on cc 8.6 parts.
H200_W48 = hardware.with_overrides(H200, max_warps_per_sm=48)

# (id, hw, threads, regs, smem) -> (blocks_per_sm, limiter, active warps, occupancy, R, S)
CASES = [
    # 256 thr, 128 regs: W = 8, R = 128*32 = 4096; per sub-partition 16384 // 4096 = 4 warps,
    # x4 = 16 warps/SM, 16 // 8 = 2 blocks. threads 2048//256 = 8, warps 64//8 = 8,
    # S = ceil((0+1024)/128)*128 = 1024 -> 233472//1024 = 228, blocks 32. min = 2 (registers).
    ("h200_regs_128", H200, 256, 128, 0, 2, "registers", 16, 0.25, 4096, 1024),
    # 256 thr, 64 regs: R = 2048; 16384//2048 = 8 -> 32 warps/SM -> 32//8 = 4 blocks (registers).
    ("h200_regs_64", H200, 256, 64, 0, 4, "registers", 32, 0.5, 2048, 1024),
    # 96 thr, 40 regs: W = 3, R = 1280 (exact multiple of 256); 16384//1280 = 12 -> 48 warps/SM,
    # 48//3 = 16 blocks. (floor(65536/1280) = 51 warps would give 17: the sub-partition / 4-warp
    # granularity rounding matters here.) threads 2048//96 = 21, warps 64//3 = 21. -> 16, regs.
    ("h200_regs_subpartition", H200, 96, 40, 0, 16, "registers", 48, 0.75, 1280, 1024),
    # 128 thr, 33 regs: 33*32 = 1056 -> rounded up to 1280 = R; 12*4 = 48 warps/SM, W = 4,
    # 48//4 = 12 blocks. threads 16, warps 16, smem 228, blocks 32 -> 12 (registers).
    ("h200_regs_rounding", H200, 128, 33, 0, 12, "registers", 48, 0.75, 1280, 1024),
    # 128 thr, 32 regs, 48 KiB smem: S = ceil((49152+1024)/128)*128 = 50176;
    # 233472//50176 = 4 (4.65). regs: R = 1024, 16 per sub-partition -> 64 warps -> 16 blocks.
    # threads 16, warps 16, blocks 32 -> 4 (shared_memory), 16 warps.
    ("h200_smem_48k", H200, 128, 32, 49152, 4, "shared_memory", 16, 0.25, 1024, 50176),
    # 64 thr, 16 regs, 20000 B: S = ceil(21024/128) = 165 units = 21120 B; 233472//21120 = 11.
    # W = 2: threads 32, warps 32; R = 512 -> 32 per sub-partition -> 128 warps -> 64 blocks;
    # blocks 32 -> 11 (shared_memory), 22 warps, 22/64 = 0.34375.
    ("h200_smem_rounding", H200, 64, 16, 20000, 11, "shared_memory", 22, 0.34375, 512, 21120),
    # 1024 thr, 32 regs, 232448 B (the opt-in max): S = 232448+1024 = 233472 -> 1 block.
    # threads 2, warps 2, regs: R = 1024 -> 64 warps -> 64//32 = 2. -> 1 (shared_memory).
    ("h200_smem_optin_max", H200, 1024, 32, 232448, 1, "shared_memory", 32, 0.5, 1024, 233472),
    # 1024 thr, 16 regs: W = 32; threads 2048//1024 = 2, warps 64//32 = 2; R = 512 -> 128 warps
    # -> 4 blocks; smem 228; blocks 32. -> 2, limited by threads (tied with warps), 100 %.
    ("h200_threads", H200, 1024, 16, 0, 2, "threads", 64, 1.0, 512, 1024),
    # 32 thr, 16 regs: W = 1; threads 64, warps 64, regs 128 warps -> 128 blocks, smem 228,
    # blocks 32 -> 32 (blocks), 32 warps = 50 %.
    ("h200_blocks", H200, 32, 16, 0, 32, "blocks", 32, 0.5, 512, 1024),
    # 100 thr (not a warp multiple): W = ceil(100/32) = 4; threads 2048//128 = 16, warps 16;
    # 20 regs: 640 -> R = 768; 16384//768 = 21 -> 84 warps -> 21 blocks. -> 16 (threads), 64 warps.
    ("h200_partial_warp", H200, 100, 20, 0, 16, "threads", 64, 1.0, 768, 1024),
    # what-if 48 warp slots: 256 thr, 32 regs: threads 8, warps 48//8 = 6, regs R = 1024 ->
    # 64 warps -> 8; smem 228; blocks 32 -> 6 (warps), 48 warps = 48/48 = 100 %.
    ("w48_warps", H200_W48, 256, 32, 0, 6, "warps", 48, 1.0, 1024, 1024),
    # A100 512 thr, 96 regs: W = 16, R = 3072; 16384//3072 = 5 -> 20 warps -> 20//16 = 1 block.
    # threads 4, warps 4, smem 167936//1024 = 164. -> 1 (registers), 16 warps = 25 %.
    ("a100_regs_96", A100, 512, 96, 0, 1, "registers", 16, 0.25, 3072, 1024),
    # A100 1024 thr, 64 regs: R = 2048, 8 per sub-partition -> 32 warps -> 32//32 = 1 block;
    # threads 2, warps 2 -> 1 (registers), 32 warps = 50 %.
    ("a100_regs_64_1024", A100, 1024, 64, 0, 1, "registers", 32, 0.5, 2048, 1024),
    # A100 128 thr, 255 regs: 255*32 = 8160 -> R = 8192; 16384//8192 = 2 -> 8 warps, W = 4 -> 2.
    # threads 16, warps 16, smem 164 -> 2 (registers), 8 warps = 12.5 %.
    ("a100_regs_255", A100, 128, 255, 0, 2, "registers", 8, 0.125, 8192, 1024),
    # A100 256 thr, 32 regs, 40 KiB: S = 40960+1024 = 41984 (= 328 units); 167936//41984 = 4
    # exactly. threads 8, warps 8, regs R = 1024 -> 64 warps -> 8. -> 4 (shared_memory), 32 warps.
    ("a100_smem_40k", A100, 256, 32, 40960, 4, "shared_memory", 32, 0.5, 1024, 41984),
    # Same launch on the H200: 233472//41984 = 5 (5.56) -> 5 blocks, 40 warps = 62.5 %.
    ("h200_smem_40k", H200, 256, 32, 40960, 5, "shared_memory", 40, 0.625, 1024, 41984),
    # A100 opt-in max 166912 B: S = 167936 -> 1 block; 256 thr, 32 regs -> 8 warps = 12.5 %.
    ("a100_smem_optin_max", A100, 256, 32, 166912, 1, "shared_memory", 8, 0.125, 1024, 167936),
    # A100 1024 thr, 65 regs: 2080 -> R = 2304; R*32 = 73728 > 65536 registers per block ->
    # cannot launch: 0 blocks (registers).
    ("a100_regs_too_many", A100, 1024, 65, 0, 0, "registers", 0, 0.0, 2304, 1024),
    # H200 800 thr, 80 regs: W = 25, R = 2560; 25*2560 = 64000 <= 65536, but the hardware check
    # rounds W up to 28 (a multiple of 4 sub-partitions): 28*2560 = 71680 > 65536 -> 0 blocks
    # (equivalently 16384//2560 = 6 -> 24 warps/SM < 25).
    ("h200_regs_subpartition_zero", H200, 800, 80, 0, 0, "registers", 0, 0.0, 2560, 1024),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_hand_worked_cases(case):
    _, hw, threads, regs, smem, blocks, limiter, warps, occ, rpw, smem_alloc = case
    o = occupancy(hw, threads, regs, smem)
    assert o.blocks_per_sm == blocks
    assert o.limiter == limiter
    assert o.active_warps_per_sm == warps
    assert o.occupancy == pytest.approx(occ)
    assert o.regs_per_warp_allocated == rpw
    assert o.regs_per_block_allocated == rpw * o.warps_per_block
    assert o.smem_per_block_allocated_bytes == smem_alloc
    assert o.fits == (blocks >= 1)


def test_limits_of_one_case_in_full():
    # 96 thr, 40 regs, 0 smem on H200 (see h200_regs_subpartition)
    o = occupancy(H200, 96, 40, 0)
    assert o.limits == (("threads", 21), ("warps", 21), ("registers", 16),
                        ("shared_memory", 228), ("blocks", 32))
    assert o.limit("registers") == 16
    with pytest.raises(ValueError, match="limit name"):
        o.limit("l2")


def test_ties_are_all_reported():
    o = occupancy(H200, 1024, 16, 0)
    assert o.limiters == ("threads", "warps")
    o = occupancy(H200, 1024, 32, 0)  # R = 1024 -> 64 warps -> 2 blocks: three-way tie
    assert o.limiters == ("threads", "warps", "registers")


def test_gemm_occupancy_uses_config():
    cfg = GemmConfig(4096, 4096, 4096, variant="reg2d", bm=128, bn=128, bk=8, tm=8, tn=8,
                     regs_per_thread=128)
    # 256 threads, 128 regs, smem (128*8 + 8*128)*4 = 8192 B -> as h200_regs_128: 2 blocks.
    o = gemm_occupancy(cfg, H200)
    assert (o.threads_per_block, o.blocks_per_sm, o.limiter) == (256, 2, "registers")
    assert o.smem_per_block_allocated_bytes == 8192 + 1024


@pytest.mark.parametrize("field, args, limit", [
    ("threads_per_block", (0, 32, 0), "1024"),
    ("threads_per_block", (1025, 32, 0), "max_threads_per_block = 1024"),
    ("regs_per_thread", (128, 0, 0), "255"),
    ("regs_per_thread", (128, 256, 0), "max_regs_per_thread = 255"),
    ("smem_bytes_per_block", (128, 32, -1), "232448"),
    ("smem_bytes_per_block", (128, 32, 232449), "smem_per_block_optin_bytes = 232448"),
    ("threads_per_block", (128.0, 32, 0), "integer"),
    ("regs_per_thread", (128, True, 0), "integer"),
])
def test_validation_names_field_value_limit(field, args, limit):
    with pytest.raises(ValueError) as ei:
        occupancy(H200, *args)
    msg = str(ei.value)
    assert field in msg and limit in msg


def test_result_is_frozen():
    o = occupancy(H200, 128, 32, 0)
    assert isinstance(o, Occupancy)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.blocks_per_sm = 3  # type: ignore[misc]


# ----- properties over random valid inputs --------------------------------------------------

GPUS = st.sampled_from([H200, A100])
THREADS = st.integers(1, 1024)
REGS = st.integers(1, 255)


def _smem(hw):
    return st.integers(0, hw.smem_per_block_optin_bytes)


@st.composite
def launches(draw):
    hw = draw(GPUS)
    return hw, draw(THREADS), draw(REGS), draw(_smem(hw))


def _round_up(a, u):
    return -(-a // u) * u


@settings(max_examples=300, deadline=None)
@given(launches())
def test_fields_consistent(launch):
    hw, t, r, s = launch
    o = occupancy(hw, t, r, s)
    lim = dict(o.limits)
    assert tuple(lim) == LIMIT_NAMES
    assert o.blocks_per_sm == min(lim.values())
    assert o.limiter in o.limiters and o.limiters[0] == o.limiter
    assert all(lim[n] == o.blocks_per_sm for n in o.limiters)
    assert o.warps_per_block == -(-t // hw.warp_size)
    assert o.active_warps_per_sm == o.blocks_per_sm * o.warps_per_block
    assert o.active_warps_per_sm <= hw.max_warps_per_sm
    assert 0.0 <= o.occupancy <= 1.0
    assert o.occupancy == o.active_warps_per_sm / hw.max_warps_per_sm
    assert o.regs_per_warp_allocated % hw.reg_alloc_unit == 0
    assert r * hw.warp_size <= o.regs_per_warp_allocated < r * hw.warp_size + hw.reg_alloc_unit
    assert o.smem_per_block_allocated_bytes % hw.smem_alloc_unit_bytes == 0
    assert o.smem_per_block_allocated_bytes >= s + hw.smem_reserved_per_block_bytes
    # resources actually used by the resident blocks fit the SM
    assert o.blocks_per_sm * o.regs_per_block_allocated <= hw.regs_per_sm
    assert o.blocks_per_sm * o.smem_per_block_allocated_bytes <= hw.smem_per_sm_bytes
    assert o.blocks_per_sm <= hw.max_blocks_per_sm


@settings(max_examples=300, deadline=None)
@given(launches(), st.integers(1, 254))
def test_more_registers_never_raise_blocks(launch, extra):
    hw, t, r, s = launch
    r2 = min(255, r + extra)
    assert occupancy(hw, t, r2, s).blocks_per_sm <= occupancy(hw, t, r, s).blocks_per_sm


@settings(max_examples=300, deadline=None)
@given(launches(), st.integers(1, 232448))
def test_more_smem_never_raises_blocks(launch, extra):
    hw, t, r, s = launch
    s2 = min(hw.smem_per_block_optin_bytes, s + extra)
    assert occupancy(hw, t, r, s2).blocks_per_sm <= occupancy(hw, t, r, s).blocks_per_sm


@settings(max_examples=300, deadline=None)
@given(launches())
def test_fits_iff_block_resources_fit(launch):
    hw, t, r, s = launch
    o = occupancy(hw, t, r, s)
    w = -(-t // hw.warp_size)
    rpw = _round_up(r * hw.warp_size, hw.reg_alloc_unit)
    # registers: the hardware assumes the block's warps spread over all 4 sub-partitions
    regs_ok = rpw * _round_up(w, 4) <= hw.regs_per_sm
    smem_ok = _round_up(s + hw.smem_reserved_per_block_bytes, hw.smem_alloc_unit_bytes) <= hw.smem_per_sm_bytes
    assert o.fits == (regs_ok and smem_ok)
    assert (o.blocks_per_sm >= 1) == o.fits


# ----- Apple rules (tilesim/hardware/data/m1_max.toml) ----------------------------------------
# M1 Max core: 3072 threads / 96 SIMD-groups, 53248 registers, 61440 B threadgroup memory, 16-byte
# allocation unit, 1024 threads and 32768 B per threadgroup, 128 registers per thread; no reservation
# per threadgroup and no published per-core threadgroup limit (NO_LIMIT).
M1 = hardware.load("m1_max")

APPLE_CASES = [
    # 256 thr, 32 regs: W = 8; threads 3072//256 = 12, warps 96//8 = 12; registers
    # 53248 // (32*32*8 = 8192) = 6; no threadgroup memory -> 6 (registers), 48 of 96 = 50 %.
    ("m1_regs_32", 256, 32, 0, 6, "registers", 48, 0.5, 1024, 0),
    # 1024 thr, 16 regs: W = 32; threads 3, warps 3; registers 53248 // 16384 = 3 -> 3, tied.
    ("m1_threads", 1024, 16, 0, 3, "threads", 96, 1.0, 512, 0),
    # 128 thr, 8 regs, 20000 B: S = 20000 rounded to 16 = 20000; 61440 // 20000 = 3;
    # threads 24, warps 24, registers 53248 // (8*32*4 = 1024) = 52 -> 3 (shared_memory), 12 warps.
    ("m1_tgmem", 128, 8, 20000, 3, "shared_memory", 12, 0.125, 256, 20000),
    # 64 thr, 128 regs: W = 2, 4096 registers per warp -> 53248 // 8192 = 6; 32 KB -> 61440 // 32768 = 1.
    ("m1_tgmem_max", 64, 128, 32768, 1, "shared_memory", 2, 2 / 96, 4096, 32768),
]


@pytest.mark.parametrize("case", APPLE_CASES, ids=[c[0] for c in APPLE_CASES])
def test_apple_hand_worked_cases(case):
    _, threads, regs, smem, blocks, limiter, warps, occ, rpw, smem_alloc = case
    o = occupancy(M1, threads, regs, smem)
    assert (o.blocks_per_sm, o.limiter, o.active_warps_per_sm) == (blocks, limiter, warps)
    assert o.occupancy == pytest.approx(occ)
    assert o.regs_per_warp_allocated == rpw and o.smem_per_block_allocated_bytes == smem_alloc


def test_apple_limits_that_are_not_published_do_not_bind():
    o = occupancy(M1, 32, 4, 0)
    assert o.limit("blocks") == NO_LIMIT and o.limit("shared_memory") == NO_LIMIT
    assert o.blocks_per_sm == o.limit("threads") == 96


@pytest.mark.parametrize("args, match", [
    ((1025, 32, 0), "threads_per_block = 1025: must be in 1..1024"),
    ((256, 129, 0), "regs_per_thread = 129: must be in 1..128"),
    ((256, 32, 32769), "smem_bytes_per_block = 32769: must be in 0..32768"),
])
def test_apple_validation_names_field_value_limit(args, match):
    with pytest.raises(ValueError, match=match):
        occupancy(M1, *args)


def test_rules_are_chosen_by_vendor():
    assert occupancy(H200, 256, 32, 0) == nvidia_occupancy(H200, 256, 32, 0)
    assert occupancy(M1, 256, 32, 0) == apple_occupancy(M1, 256, 32, 0)
    assert apple_occupancy(M1, 256, 32, 0).smem_per_block_allocated_bytes == 0  # no per-block reservation
