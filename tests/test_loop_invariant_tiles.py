"""Tiles that do not name the loop index (the same data at every k-step) and loads that bypass L1
(``GlobalLoad.bypass_l1``, ``ld.global.cg`` / ``__ldcg``): the engine check's ``gstaged_outer``
microbenchmarks re-read their block's own tile every k-step through L2 only."""

import pytest

from tilesim.cost import step_cost
from tilesim.engine.sim import simulate_program
from tilesim.hardware import load
from tilesim.program import Compute, GlobalLoad, Launch, Phase, Step, TileProgram, TileRef, lanes

H200 = load("h200")
SMS = H200.sm_count
TILE_BYTES = 16 * 32 * 16  # 16 warp instructions of 32 lanes x 16 bytes, contiguous
TRIPS = 200


def _tile_load(tensor: str, coords: tuple, tile_bytes: int = TILE_BYTES, bypass_l1: bool = False) -> GlobalLoad:
    instr = tuple(lanes(16, base=i * 32 * 16) for i in range(tile_bytes // (32 * 16)))
    return GlobalLoad(TileRef(tensor, coords, tile_bytes), instr, bypass_l1=bypass_l1)


def _program(*loads: GlobalLoad, trips: int = TRIPS, blocks_per_sm: int = 1) -> TileProgram:
    step = Step(loads=loads, compute=(Compute("fma", 64, chain=8),))
    return TileProgram("reread", Launch((SMS * blocks_per_sm, 1, 1), 32, 32, 0), (Phase("k-loop", trips, step),))


@pytest.mark.parametrize("steady_state", [True, False])
@pytest.mark.parametrize("bypass_l1", [True, False])
def test_a_tile_that_does_not_name_the_loop_index_is_read_from_hbm_once_per_block(steady_state, bypass_l1):
    """Each block re-reads its own tile (coordinates ("bx",)) every k-step: one HBM read per block,
    not one per k-step; a tile that names k is a new one every step."""
    blocks = 2 * SMS
    same = simulate_program(_program(_tile_load("A", ("bx",), bypass_l1=bypass_l1), blocks_per_sm=2), H200,
                            steady_state=steady_state)
    assert same.traffic.hbm_read_bytes == pytest.approx(blocks * TILE_BYTES)
    fresh = simulate_program(_program(_tile_load("A", ("bx", "k"), bypass_l1=bypass_l1), blocks_per_sm=2), H200,
                             steady_state=steady_state)
    assert fresh.traffic.hbm_read_bytes == pytest.approx(blocks * TILE_BYTES * TRIPS)


@pytest.mark.parametrize("steady_state", [True, False])
def test_a_held_loop_keeps_its_loop_invariant_tile_resident_while_it_streams_past_the_l2(steady_state):
    """Beside the re-read tile each step streams a new 64 KiB tile per block from HBM: 200 steps move
    about 1.7 GB, many times the L2, while the engine holds the settled loop. The re-read tile is touched
    at every held step, so it is still one HBM read per block."""
    stream_bytes = 64 * 1024
    prog = _program(_tile_load("A", ("bx",)), _tile_load("S", ("bx", "k"), stream_bytes))
    res = simulate_program(prog, H200, steady_state=steady_state)
    assert SMS * stream_bytes * TRIPS > 10 * H200.l2_bytes
    assert res.traffic.hbm_read_bytes == pytest.approx(SMS * (TILE_BYTES + stream_bytes * TRIPS))


def test_a_load_that_bypasses_l1_is_served_by_l2_every_step():
    """A block re-reading its own tile through registers finds it in L1 after the first step; with
    ``bypass_l1`` (ld.global.cg) every step's sectors come from L2, with the L2's latency."""
    cached = simulate_program(_program(_tile_load("A", ("bx",))), H200)
    cg = simulate_program(_program(_tile_load("A", ("bx",), bypass_l1=True)), H200)
    assert cg.traffic.l2_load_bytes == pytest.approx(SMS * TILE_BYTES * TRIPS)
    assert cached.traffic.l2_load_bytes < 0.05 * cg.traffic.l2_load_bytes
    assert cg.time_s > cached.time_s


def test_the_cost_model_says_which_loads_the_l1_caches():
    step = Step(loads=(_tile_load("A", ("bx",)), _tile_load("B", ("bx",), bypass_l1=True)))
    assert step_cost(step, H200, 1).load_l1_cacheable == [True, False]


def test_bypass_l1_must_be_a_bool():
    with pytest.raises(ValueError, match="GlobalLoad\\(A\\).bypass_l1"):
        _tile_load("A", ("bx",), bypass_l1="cg")
    with pytest.raises(ValueError, match="GlobalLoad\\(A\\).bypass_l1"):
        _tile_load("A", ("bx",), bypass_l1=1)


def test_the_engine_check_programs_bypass_l1_as_the_microbenchmark_loads_do():
    """microbench.cu's lds_outer loads every global tile with __ldcg (ld.global.cg)."""
    from validation.studies.engine_check import outer_program

    for flags in ({"global_tiles": True}, {"global_tiles": True, "scalar": True},
                  {"global_tiles": True, "stream": True, "prefetch": True}):
        prog = outer_program(H200, 8, 8, 4, 2, 617.0, staged=True, iters=10, **flags)
        assert all(ld.bypass_l1 for ld in prog.phases[0].step.loads)


def _microbench_sass(tmp_path) -> dict:
    """The functions of validation/calibration/microbench.cu as nvcc -arch=sm_90 compiles it (the
    calibration's compiler and flags), parsed from nvdisasm's or cuobjdump's listing."""
    import shutil
    import subprocess
    from pathlib import Path

    from validation.harness import sass

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    try:
        sass.disassembler()
    except sass.SassUnavailable as exc:
        pytest.skip(str(exc))
    src = Path(__file__).resolve().parents[1] / "validation" / "calibration" / "microbench.cu"
    cubin = tmp_path / "microbench.cubin"
    subprocess.run([nvcc, "-cubin", "-arch=sm_90", "-O3", "-o", str(cubin), str(src)], check=True,
                   capture_output=True, timeout=300)
    return sass.parse_sass(sass.disassemble(str(cubin)))


def test_pdgstaged_binary_loads_its_next_tile_after_the_math_so_the_engine_check_does_not_prefetch(tmp_path):
    """pdgstaged_outer's source loads the next k-step's tile before the k-step's math; the compiled
    loop issues those LDGs after (all but a few of) its FFMAs, next to the back-edge and the barrier
    and stores that use them: no load ahead, which is how the engine check describes its rows."""
    from validation.harness import sass
    from validation.studies.engine_check import AS_COMPILED, outer_program

    funcs = _microbench_sass(tmp_path)
    for name in ("pdgstaged_outer_8x8", "pdgstaged_outer_4x4"):
        instrs = funcs[name]
        first, last = sass.main_loop(instrs)
        ops = [ins["opcode"] for ins in instrs[first:last + 1]]
        ldg = [i for i, op in enumerate(ops) if op == "LDG"]
        ffma = [i for i, op in enumerate(ops) if op == "FFMA"]
        assert ldg and ffma
        after = sum(i > min(ldg) for i in ffma)
        assert after <= 0.05 * len(ffma), (name, after, len(ffma))
    assert AS_COMPILED["pdgstaged_outer"] == {"prefetch": False}
    prog = outer_program(H200, 8, 8, 4, 2, 595.0, staged=True, global_tiles=True, stream=True, iters=10,
                         **AS_COMPILED["pdgstaged_outer"])
    assert prog.phases[0].pipeline_depth == 1
