"""Tile program v2: every field of the description changes the prediction, or it would not be there.

Each story builds a small memory-bound program, changes one field, and checks that the simulated
time or traffic moves (in the direction the field's meaning says, where there is one).
"""

from __future__ import annotations

import dataclasses

import pytest

from tilesim import simulate
from tilesim.program import (
    Affine,
    Atomic,
    Compute,
    GlobalLoad,
    GlobalStore,
    Launch,
    Mma,
    Phase,
    SharedAccess,
    Shuffle,
    Step,
    TileProgram,
    TileRef,
    WarpAccess,
    lanes,
)

ROWS = 4096
COL_BYTES = 4096 * 4  # one 16 KiB row per block


def row_load(dest="register", width=16, stride=None, tensor="X", coords=("bx", "k"), repeat=8, chain=0.0):
    """A block reads 8 x 512 bytes of its row per step (8 warps, one 16-byte load each)."""
    shared = 0 if dest != "register" else None
    w = lanes(width, stride_bytes=stride, shared_base=shared)
    return GlobalLoad(TileRef(tensor, coords, 32 * width * repeat), (w,), repeat=repeat, dest=dest, chain=chain)


def program(step: Step | None = None, *, trips=8, phases=None, launch=None, flops=0.0, min_hbm=0.0,
            pipeline_depth=1, warp_groups=1) -> TileProgram:
    step = step or Step(loads=(row_load(),), compute=(Compute("fma", 8 * 16),))
    return TileProgram(
        "test", launch or Launch((ROWS, 1, 1), 256, 32, 0),
        phases or (Phase("loop", trips, step, pipeline_depth=pipeline_depth, warp_groups=warp_groups),),
        flops=flops, min_hbm_bytes=min_hbm)


def t(prog: TileProgram) -> float:
    return simulate(prog, "h200").time_s


def test_barriers_cost_time():
    base = Step(loads=(row_load(),), compute=(Compute("fma", 128),))
    assert t(program(dataclasses.replace(base, barriers=50))) > t(program(base))


def test_load_destination_changes_the_cost():
    reg = t(program(Step(loads=(row_load("register"),))))
    shared = t(program(Step(loads=(row_load("shared"),))))
    assert shared != reg


def test_async_copies_skip_the_register_round_trip():
    shared = simulate(program(Step(loads=(row_load("shared"),))), "h200")
    copied = simulate(program(Step(loads=(row_load("async"),))), "h200")
    assert copied.traffic.instructions < shared.traffic.instructions


def test_strided_lanes_move_more_sectors_than_contiguous_ones():
    contiguous = simulate(program(Step(loads=(row_load(width=4),))), "h200")
    strided = simulate(program(Step(loads=(row_load(width=4, stride=128),))), "h200")
    assert strided.traffic.l2_load_bytes > 4 * contiguous.traffic.l2_load_bytes


def test_repeat_and_trips_scale_the_work():
    one = simulate(program(Step(loads=(row_load(repeat=4),))), "h200")
    two = simulate(program(Step(loads=(row_load(repeat=8),))), "h200")
    assert two.traffic.l2_load_bytes == pytest.approx(2 * one.traffic.l2_load_bytes)
    assert t(program(trips=16)) > t(program(trips=8))


def test_a_dependent_chain_lengthens_the_step():
    assert t(program(Step(loads=(row_load(chain=20),)))) > t(program(Step(loads=(row_load(),))))
    slow = Step(loads=(row_load(),), compute=(Compute("fma", 128, chain=400),))
    assert t(program(slow)) > t(program(Step(loads=(row_load(),), compute=(Compute("fma", 128),))))


@pytest.mark.parametrize("op", [Compute("fma", 4000), Compute("sfu", 4000), Compute("int", 4000),
                                Shuffle(4000), Compute("fma", 100, chain=100), Shuffle(100, chain=100)])
def test_each_pipe_costs_time(op):
    assert t(program(Step(loads=(row_load(),), compute=(op,)))) > t(program(Step(loads=(row_load(),))))


def test_special_functions_are_slower_than_fma():
    sfu = t(program(Step(loads=(row_load(),), compute=(Compute("sfu", 4000),))))
    fma = t(program(Step(loads=(row_load(),), compute=(Compute("fma", 4000),))))
    assert sfu > fma


def test_mma_costs_tensor_time_by_shape():
    small = Step(loads=(row_load(),), compute=(Mma((16, 8, 16), "fp16", 2000),))
    assert t(program(small)) > t(program(Step(loads=(row_load(),))))


def test_bank_conflicts_are_derived_from_lane_offsets():
    free = SharedAccess((lanes(4),))
    conflicted = SharedAccess((lanes(4, stride_bytes=128),))
    a = simulate(program(Step(loads=(row_load(),), shared_loads=(free,), rounds=2)), "h200")
    b = simulate(program(Step(loads=(row_load(),), shared_loads=(conflicted,), rounds=2)), "h200")
    assert b.traffic.smem_conflict_wavefronts > a.traffic.smem_conflict_wavefronts == 0
    assert b.time_s >= a.time_s


def test_shared_stores_and_atomics_use_the_shared_pipe():
    st = Step(loads=(row_load(),), shared_stores=(SharedAccess((lanes(4),), repeat=64),))
    assert simulate(program(st), "h200").traffic.smem_wavefronts > 0
    same_address = WarpAccess(tuple([0] * 32), 4)
    at = Step(loads=(row_load(),), atomics=(Atomic("shared", (same_address,), repeat=64),))
    assert t(program(at)) > t(program(Step(loads=(row_load(),))))


def test_global_atomics_reach_l2():
    target = TileRef("out", (0,), 4)
    at = Step(loads=(row_load(),), atomics=(Atomic("global", (lanes(4, active=1),), tile=target),))
    r = simulate(program(at), "h200")
    assert r.traffic.l2_store_bytes > 0


def test_rereading_a_tile_in_a_later_phase_hits_l2():
    """A two-pass row kernel: the second pass names the same tiles, so it reads them from L2."""
    first = Phase("max", 8, Step(loads=(row_load(),)))
    again = Phase("sum", 8, Step(loads=(row_load(coords=("bx", "i")),)), index="i")
    other = Phase("sum", 8, Step(loads=(row_load(tensor="Y", coords=("bx", "i")),)), index="i")
    hit = simulate(program(phases=(first, again)), "h200")
    miss = simulate(program(phases=(first, other)), "h200")
    assert hit.traffic.hbm_read_bytes < 0.75 * miss.traffic.hbm_read_bytes


def test_tiles_shared_by_blocks_are_fetched_once():
    shared_w = Phase("w", 8, Step(loads=(row_load(tensor="W", coords=("k",)),)))
    private = Phase("w", 8, Step(loads=(row_load(tensor="W", coords=("bx", "k")),)))
    assert (simulate(program(phases=(shared_w,)), "h200").traffic.hbm_read_bytes
            < simulate(program(phases=(private,)), "h200").traffic.hbm_read_bytes)


def test_affine_coordinates_tell_grid_stride_blocks_apart():
    mine = row_load(coords=(Affine((("k", 4096), ("bx", 1))),))
    everyone = row_load(coords=(Affine((("k", 1),)),))
    a = simulate(program(Step(loads=(mine,))), "h200").traffic.hbm_read_bytes
    b = simulate(program(Step(loads=(everyone,))), "h200").traffic.hbm_read_bytes
    assert a > 10 * b


def test_written_tiles_are_resident_for_later_reads():
    tile = TileRef("X", ("bx",), 32 * 16 * 8)
    w = lanes(16)
    write = Phase("write", 1, Step(stores=(GlobalStore(tile, (w,), repeat=8),)))
    read_same = Phase("read", 1, Step(loads=(GlobalLoad(tile, (w,), repeat=8),)))
    read_other = Phase("read", 1, Step(loads=(GlobalLoad(dataclasses.replace(tile, tensor="Y"), (w,), repeat=8),)))
    a = simulate(program(phases=(write, read_same)), "h200").traffic.hbm_read_bytes
    b = simulate(program(phases=(write, read_other)), "h200").traffic.hbm_read_bytes
    assert a < b


def test_pipelining_and_warp_groups_overlap_latency():
    """On a latency-bound launch (one block on each of the H200's 132 SMs): loads issued ahead, or more
    warp groups, hide latency. A step's loads ``pipeline_depth - 1`` ahead are issued once its own data
    is in (the buffer they refill is freed by that wait), so double buffering hides the step's math
    behind the next load (20.8 -> 19.6 us) and a third buffer the next load's latency behind the one
    before (11.3 us). The 4096-block grid of the other tests is HBM-bound: there --exact gives
    pipelining nothing (139.1 us both ways)."""
    latency_bound = Launch((132, 1, 1), 256, 32, 0)
    base = t(program(trips=32, launch=latency_bound))
    double = t(program(trips=32, pipeline_depth=2, launch=latency_bound))
    assert double < base
    assert t(program(trips=32, pipeline_depth=3, launch=latency_bound)) < 0.7 * double
    assert t(program(trips=32, warp_groups=8, launch=latency_bound)) < base


def test_launch_resources_limit_occupancy():
    few = program(launch=Launch((ROWS, 1, 1), 256, 255, 0))
    many = program(launch=Launch((ROWS, 1, 1), 256, 32, 0))
    assert simulate(few, "h200").blocks_per_sm < simulate(many, "h200").blocks_per_sm
    big_smem = program(launch=Launch((ROWS, 1, 1), 256, 32, 200_000))
    assert simulate(big_smem, "h200").blocks_per_sm == 1


def test_flops_and_compulsory_bytes_matter():
    from tilesim.analytic.checks import executed_flops

    fma_flops = executed_flops(program())[1]  # declared flops may not exceed what the counts do
    assert simulate(program(flops=fma_flops), "h200").tflops > 0 == simulate(program(), "h200").tflops
    # the compulsory bytes give the HBM its read/write mix: this program only reads, so with them
    # declared it streams at the measured read-only rate, faster than the copy rate assumed without
    read_only = simulate(program(min_hbm=ROWS * 8 * 4096.0, trips=32), "h200")
    unknown_mix = simulate(program(trips=32), "h200")
    assert read_only.time_s < unknown_mix.time_s
    assert read_only.time_s >= read_only.roofline_s


def test_the_same_program_runs_on_every_nvidia_gpu():
    prog = program()
    times = {gpu: simulate(prog, gpu).time_s for gpu in ("h200", "h100_sxm", "a100_sxm4")}
    assert times["a100_sxm4"] > times["h200"]


def test_constructors_name_the_bad_field():
    with pytest.raises(ValueError, match="Step.barriers"):
        Step(barriers=-1)
    with pytest.raises(ValueError, match="Phase\\(loop\\).trips"):
        Phase("loop", 0, Step())
    with pytest.raises(ValueError, match="GlobalLoad\\(X\\).dest"):
        GlobalLoad(TileRef("X", ("bx",), 4), (lanes(4),), dest="l3")
    with pytest.raises(ValueError, match="needs shared_offsets"):
        GlobalLoad(TileRef("X", ("bx",), 4), (lanes(4),), dest="shared")
    with pytest.raises(ValueError, match="coordinates may use only"):
        Phase("loop", 2, Step(loads=(row_load(coords=("bx", "j")),)))
    with pytest.raises(ValueError, match="Compute.pipe"):
        Compute("tensor", 1)
    with pytest.raises(ValueError, match="WarpAccess.width_bytes"):
        WarpAccess((0,), 3)
