"""Waves, GEMM traffic counts (the source document's numbers) and roofline bounds."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesim import hardware
from tilesim.analytic import Bound, roofline_time_s, smem_bytes_per_s, waves
from tilesim.kernels.gemm.analytic import (
    gemm_bound,
    gemm_traffic,
    naive_gemm_reads,
    naive_time_s,
    reuse_factor,
    tiled_gemm_reads_elements,
)
from tilesim.kernels.gemm.config import GemmConfig

H200 = hardware.load("h200", calibrated=False)
N = 4096

# ----- the source document's numbers ----------------------------------------------------------


def test_document_naive_reads():
    # 4096^2 outputs x (4096 A + 4096 B) reads = 2 * 4096^3 = 137,438,953,472 ("137 billion")
    assert naive_gemm_reads(N, N, N) == 2 * N**3 == 137_438_953_472
    assert naive_gemm_reads(N, N, N) == pytest.approx(137.4e9, rel=1e-3)


def test_document_naive_time():
    # 137.4e9 "bytes" / 3.35e12 B/s = 41.0 ms
    t = naive_time_s(naive_gemm_reads(N, N, N), 3.35e12)
    assert t == pytest.approx(41.0e-3, rel=0.01)
    # the same reads as fp32 bytes: 4x
    assert naive_time_s(naive_gemm_reads(N, N, N), 3.35e12, bytes_per_read=4) == pytest.approx(4 * t)


def test_reuse_factor_is_tile():
    assert [reuse_factor(t) for t in (1, 32, 128)] == [1, 32, 128]
    with pytest.raises(ValueError, match="tile"):
        reuse_factor(0)


def test_tiled_reads_32x_fewer():
    naive = naive_gemm_reads(N, N, N)
    tiled = tiled_gemm_reads_elements(N, N, N, 32, 32)
    # m*n*k*(1/32 + 1/32) = 2*4096^3/32
    assert tiled == N**3 * 2 // 32
    assert naive / tiled == 32 == reuse_factor(32)
    assert naive / tiled_gemm_reads_elements(N, N, N, 128, 128) == 128


def test_tiled_reads_formula_and_edges():
    # divisible: equals m*n*k*(1/bn + 1/bm)
    m, n, k, bm, bn = 256, 512, 64, 64, 128
    assert tiled_gemm_reads_elements(m, n, k, bm, bn) == m * n * k // bn + m * n * k // bm
    # ragged: A read by ceil(70/32) = 3 column tiles, B by ceil(100/32) = 4 row tiles
    assert tiled_gemm_reads_elements(100, 70, 50, 32, 32) == 3 * 100 * 50 + 4 * 50 * 70


@pytest.mark.parametrize("fn, args, field", [
    (naive_gemm_reads, (0, 1, 1), "m"),
    (naive_gemm_reads, (1, 1, -3), "k"),
    (tiled_gemm_reads_elements, (8, 8, 8, 8, 0), "bn"),
    (naive_time_s, (1.0, 0.0), "bandwidth_bytes_per_s"),
    (naive_time_s, (-1.0, 1.0), "reads"),
])
def test_count_validation(fn, args, field):
    with pytest.raises(ValueError, match=field):
        fn(*args)


# ----- gemm_traffic ---------------------------------------------------------------------------


def test_traffic_reg2d_4096_by_hand():
    cfg = GemmConfig(N, N, N, variant="reg2d", bm=128, bn=128, bk=8, tm=8, tn=8)
    t = gemm_traffic(cfg)
    # grid 32 x 32 = 1024 blocks, k_tiles = 4096/8 = 512, 256 threads
    assert (t.blocks, t.k_tiles) == (1024, 512)
    # A: 32 column tiles x 4096 x 4096 x 4 B = 2 GiB; B likewise
    assert t.global_a_bytes == t.global_b_bytes == 32 * N * N * 4 == 2**31
    assert t.global_c_read_bytes == 0 and t.global_c_write_bytes == N * N * 4
    # compulsory HBM: A + B + C written once = 3 x 64 MiB
    assert t.hbm_compulsory_bytes == 3 * N * N * 4
    # smem stores: 1024 blocks x 512 k-tiles x (128*8 + 8*128) x 4 B = 4 GiB (= global A + B)
    assert t.smem_store_bytes == 1024 * 512 * 2048 * 4 == t.global_a_bytes + t.global_b_bytes
    # smem loads: 1024 x 512 x bk 8 x 256 threads x (8 + 8) x 4 B = 64 GiB
    assert t.smem_load_bytes == 1024 * 512 * 8 * 256 * 16 * 4 == 2**36
    # ... = (tm + tn) / (tm * tn) = 1/4 element per FFMA
    assert t.smem_load_bytes == t.ffma_count // 4 * 4
    assert t.flops == 2 * N**3 and t.register_operand_reads == 3 * N**3
    assert t.register_read_bytes == 12 * N**3
    assert t.ai_hbm == pytest.approx(2 * N**3 / (3 * N * N * 4))  # 682.7 FLOP/B
    assert t.ai_l2 == pytest.approx(2 * N**3 / (2**32 + N * N * 4))  # 31.5 FLOP/B
    assert t.ai_smem == pytest.approx(2.0)  # 2 FLOP per FFMA, 1 B loaded per FFMA


def test_traffic_smem_variant_matches_document():
    cfg = GemmConfig(N, N, N, variant="smem", bm=32, bn=32, bk=32)
    t = gemm_traffic(cfg)
    # global element reads = the document's tiled count; in fp32 bytes x 4
    assert t.global_a_bytes + t.global_b_bytes == 4 * tiled_gemm_reads_elements(N, N, N, 32, 32)
    assert (t.global_a_bytes + t.global_b_bytes) * 32 == 4 * naive_gemm_reads(N, N, N)
    # 2 shared loads per FFMA (one A, one B): the naive kernel's reads, now from shared memory
    assert t.smem_load_bytes == 4 * naive_gemm_reads(N, N, N)


def test_traffic_naive_variant():
    cfg = GemmConfig(512, 256, 128, variant="naive", bm=16, bn=16)
    t = gemm_traffic(cfg)
    assert t.global_a_bytes + t.global_b_bytes == 4 * naive_gemm_reads(512, 256, 128)
    assert t.smem_load_bytes == t.smem_store_bytes == 0 and t.k_tiles == 0
    assert t.ai_smem == math.inf


def test_traffic_reg1d_and_warp_loads():
    # reg1d 64x64x8 tm 8: threads (64/8)*64 = 512, each tm + 1 = 9 loads per k step
    c1 = GemmConfig(256, 256, 64, variant="reg1d", bm=64, bn=64, bk=8, tm=8)
    t1 = gemm_traffic(c1)
    blocks, k_tiles = 16, 8
    assert t1.smem_load_bytes == blocks * k_tiles * 8 * 512 * 9 * 4
    # warp 128x128x16, warp 64x64, wniter 4, tm 8, tn 4: wmiter = 64*64/(32*8*4*4) = 1,
    # 4 warps = 128 threads, per k step 1*8 + 4*4 = 24 loads per thread
    c2 = GemmConfig(256, 256, 64, variant="warp", bm=128, bn=128, bk=16, wm=64, wn=64, wniter=4,
                    tm=8, tn=4)
    assert (c2.wmiter, c2.threads) == (1, 128)
    t2 = gemm_traffic(c2)
    assert t2.smem_load_bytes == 4 * 4 * 128 * 16 * 24 * 4


def test_traffic_edges_clipped_and_beta():
    cfg = GemmConfig(100, 70, 50, variant="smem", bm=32, bn=32, bk=8, beta=1.0)
    t = gemm_traffic(cfg)
    # grid 3 x 4; A read by 3 column tiles, B by 4 row tiles; no bytes past the edges
    assert t.global_a_bytes == 3 * 100 * 50 * 4
    assert t.global_b_bytes == 4 * 50 * 70 * 4
    # beta != 0: C read once and written once
    assert t.global_c_read_bytes == t.hbm_c_read_bytes == 100 * 70 * 4
    assert t.hbm_compulsory_bytes == (100 * 50 + 50 * 70 + 2 * 100 * 70) * 4
    # shared stores are whole tiles: 12 blocks x ceil(50/8) = 7 k-tiles x (32*8 + 8*32) x 4
    assert t.smem_store_bytes == 12 * 7 * 512 * 4


def test_traffic_bytes_and_frozen():
    # GemmConfig is fp32 only (tensor-core GEMM is another family): 4-byte elements
    t = gemm_traffic(GemmConfig(256, 256, 256, variant="reg2d", bm=64, bn=64, bk=8, tm=4, tn=4))
    assert t.elem_bytes == 4 and t.hbm_a_bytes == 256 * 256 * 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.flops = 0  # type: ignore[misc]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 3000), st.integers(1, 3000),
       st.sampled_from([16, 32, 64, 128]), st.sampled_from([16, 32, 64, 128]))
def test_traffic_invariants(m, n, k, bm, bn):
    cfg = GemmConfig(m, n, k, variant="reg2d", bm=bm, bn=bn, bk=8, tm=4, tn=4)
    t = gemm_traffic(cfg)
    # every block level moves at least the compulsory bytes, and tiled reads match the formula
    assert t.global_a_bytes >= t.hbm_a_bytes and t.global_b_bytes >= t.hbm_b_bytes
    assert t.global_a_bytes + t.global_b_bytes == 4 * tiled_gemm_reads_elements(m, n, k, bm, bn)
    assert t.smem_store_bytes >= t.global_a_bytes + t.global_b_bytes
    assert t.ai_hbm >= t.ai_l2


# ----- waves ------------------------------------------------------------------------------------


def test_waves_by_hand():
    # 1024 blocks, 2 per SM on 132 SMs: 264 slots -> 3 full waves (792) + 232 tail, 4 waves
    w = waves(1024, 2, 132)
    assert (w.slots, w.full_waves, w.tail_blocks, w.wave_count) == (264, 3, 232, 4)
    assert w.waves == pytest.approx(1024 / 264)
    assert w.tail_efficiency == pytest.approx(1024 / 1056)
    # exact fit
    w = waves(264, 2, 132)
    assert (w.full_waves, w.tail_blocks, w.wave_count, w.tail_efficiency) == (1, 0, 1, 1.0)
    # fewer blocks than slots
    w = waves(10, 1, 132)
    assert (w.full_waves, w.tail_blocks, w.wave_count) == (0, 10, 1)
    assert w.tail_efficiency == pytest.approx(10 / 132)


@pytest.mark.parametrize("args, field", [((0, 1, 1), "blocks"), ((1, 0, 1), "blocks_per_sm"),
                                         ((1, 1, 0), "sm_count"), ((1.5, 1, 1), "blocks")])
def test_waves_validation(args, field):
    with pytest.raises(ValueError, match=field):
        waves(*args)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 10**6), st.integers(1, 32), st.integers(1, 200))
def test_waves_invariants(blocks, per_sm, sms):
    w = waves(blocks, per_sm, sms)
    assert w.full_waves * w.slots + w.tail_blocks == blocks
    assert 0 <= w.tail_blocks < w.slots
    assert w.wave_count == math.ceil(blocks / w.slots)
    assert w.wave_count - 1 < w.waves <= w.wave_count
    assert 0 < w.tail_efficiency <= 1
    assert (w.tail_efficiency == 1.0) == (w.tail_blocks == 0)


# ----- roofline bounds --------------------------------------------------------------------------


def test_roofline_by_hand_h200():
    # fp32 peak 2 x 128 x 132 x 1.98e9 = 66.9 TFLOP/s; 4096^3 GEMM = 137.4 GFLOP -> 2.05 ms
    flops = 2.0 * N**3
    b = roofline_time_s(flops, 3 * N * N * 4, H200)
    assert b.limiter == "fp32"
    assert b.time_s == pytest.approx(flops / (2 * 128 * 132 * 1.98e9))
    assert b.time_of("hbm") == pytest.approx(3 * N * N * 4 / 4.23e12)
    assert [r for r, _ in b.times] == ["fp32", "hbm"]
    with pytest.raises(ValueError, match="l2"):
        b.time_of("l2")


def test_roofline_limiters():
    # memory bound: 1 GB of HBM traffic, no math
    b = roofline_time_s(0.0, 1e9, H200)
    assert b.limiter == "hbm" and b.time_s == pytest.approx(1e9 / 4.23e12)
    b = roofline_time_s(1.0, 1.0, H200, l2_bytes=1e10)
    assert b.limiter == "l2" and b.time_s == pytest.approx(1e10 / 12.5e12)
    # smem: 128 B/clk/SM x 132 x 1.98e9 = 33.45 TB/s
    assert smem_bytes_per_s(H200) == pytest.approx(128 * 132 * 1.98e9)
    b = roofline_time_s(1.0, 1.0, H200, l2_bytes=1.0, smem_bytes=1e12)
    assert b.limiter == "smem" and b.time_s == pytest.approx(1e12 / (128 * 132 * 1.98e9))
    assert isinstance(b, Bound)


def test_roofline_validation():
    with pytest.raises(ValueError, match="hbm_bytes"):
        roofline_time_s(1.0, -1.0, H200)
    with pytest.raises(ValueError, match="smem_bytes"):
        roofline_time_s(1.0, 1.0, H200, smem_bytes=-5)


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 1e15), st.floats(0, 1e12), st.floats(0, 1e13), st.floats(0, 1e14))
def test_roofline_is_max(flops, hbm, l2, smem):
    b = roofline_time_s(flops, hbm, H200, l2_bytes=l2, smem_bytes=smem)
    assert b.time_s == max(t for _, t in b.times)
    assert b.time_of(b.limiter) == b.time_s


def test_gemm_bound_smem_variant_is_smem_bound():
    # smem 32x32 variant: 550 GB of shared loads at 33.45 TB/s = 16.4 ms > 2.05 ms of math
    t = gemm_traffic(GemmConfig(N, N, N, variant="smem", bm=32, bn=32, bk=32))
    b = gemm_bound(t, H200)
    assert b.limiter == "smem"
    assert b.time_s == pytest.approx((t.smem_store_bytes + t.smem_load_bytes) / smem_bytes_per_s(H200))
