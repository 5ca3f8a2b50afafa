"""Shared loads through a generic pointer (``SharedAccess.generic``): how nvcc compiles WMMA's
load_matrix_sync from shared memory (LD.E), costed on the L1 path with the L1's latency."""

import pytest

from tilesim.cost import step_cost
from tilesim.engine.sim import simulate_program
from tilesim.hardware import load
from tilesim.kernels.tc_gemm import TcGemmConfig, lower
from tilesim.program import Compute, Launch, Phase, SharedAccess, Step, TileProgram, WarpAccess

H200 = load("h200")
ROW = WarpAccess(tuple(4 * lane for lane in range(32)), 4)  # 32 consecutive words: one wavefront


def _program(generic: bool, warps: int = 1) -> TileProgram:
    step = Step(shared_loads=(SharedAccess((ROW,) * 8, repeat=warps, generic=generic),),
                compute=(Compute("fma", 8 * warps, chain=8),))
    return TileProgram("lds" if not generic else "ld_generic", Launch((132, 1, 1), 32 * warps, 32, 0),
                       (Phase("loop", 2000, step),))


def test_a_lone_warp_waits_longer_for_generic_loads_than_for_shared_ones():
    """One warp, latency-bound: the L1's latency (32 cycles on the H200) against shared memory's."""
    lds = simulate_program(_program(False), H200).time_s
    generic = simulate_program(_program(True), H200).time_s
    assert generic > lds


def test_generic_loads_take_a_request_slot_of_the_l1_path():
    c = step_cost(_program(True, warps=4).phases[0].step, H200, 4)
    assert c.shared_load_l1_cycles == pytest.approx(8 * 4 / H200.l1_requests_per_clk_per_sm)
    assert step_cost(_program(False, warps=4).phases[0].step, H200, 4).shared_load_l1_cycles == 0


def test_wmma_fragments_are_generic_loads_and_ldmatrix_ones_are_not():
    wmma = lower(TcGemmConfig(m=4096, n=4096, k=4096, instruction="wmma", bm=128, bn=128, bk=32, wm=64, wn=32,
                              stages=3, layout="padded"))
    mma = lower(TcGemmConfig(m=4096, n=4096, k=4096, instruction="mma_sync", bm=128, bn=128, bk=32, wm=64, wn=32,
                             stages=3, layout="padded"))
    assert wmma.phases[0].step.shared_loads[0].generic
    assert not mma.phases[0].step.shared_loads[0].generic
    # four 4-byte loads per 16x16 fragment (nvcc's LD.E), one ldmatrix.x4 for mma.sync
    frags = (64 // 16 + 32 // 16) * (32 // 16)
    assert len(wmma.phases[0].step.shared_loads[0].instructions) == 4 * frags
    assert len(mma.phases[0].step.shared_loads[0].instructions) == frags


def test_apple_gpus_have_no_generic_pointers_into_threadgroup_memory():
    with pytest.raises(ValueError, match="generic"):
        simulate_program(_program(True), load("m5_max"))


def test_the_flag_must_be_a_bool():
    with pytest.raises(ValueError, match="SharedAccess.generic"):
        SharedAccess((ROW,), generic="yes")
