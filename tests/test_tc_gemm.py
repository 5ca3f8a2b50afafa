"""The tensor-core GEMM family as stories: knobs rejected with one line, each rung lowered to a tile
program whose costs follow from its layout, and the Hopper pieces (TMA bulk copies, wgmma reading
shared memory, cluster multicast) changing what the engine charges."""

from __future__ import annotations

import pytest

from tilesim.cost import step_cost
from tilesim.hardware import load, with_overrides
from tilesim.kernels import registry
from tilesim.kernels.tc_gemm import TcGemmConfig, check_fits, lower
from tilesim.program import GlobalLoad, Mma, Step, TileRef, lanes

H200 = load("h200")
A100 = load("a100_sxm4")
# the cost stories below check counts (bytes, wavefronts, instructions); the tensor pipe's latency only
# enters the critical path, so any value serves them
H200_COUNTS = with_overrides(H200, **{"pipes.tensor.latency_cycles": 1.0})
SQUARE = dict(m=4096, n=4096, k=4096)
WGMMA = dict(instruction="wgmma", bm=128, bn=256, bk=64, wm=64, wn=256, consumers=2, stages=4)


def _cost(cfg: TcGemmConfig, phase: int = 0):
    prog = lower(cfg)
    return step_cost(prog.phases[phase].step, H200_COUNTS, prog.launch.warps_per_block)


# ----- bad input: one line naming the field, the value and the limit --------------------------------
@pytest.mark.parametrize("knobs, field, limit", [
    (dict(bm=128, wm=48), "wm", "must divide bm = 128"),
    (dict(wm=40, bm=120), "wm", "fragment's m = 16"),
    (dict(WGMMA, shape="m64n264k16"), "shape", "N a multiple of 8 from 8 to 256"),
    (dict(WGMMA, shape="m128n256k16"), "shape", "m64nNk16"),
    (dict(WGMMA, dtype="tf32", b_layout="col", shape="m64n256k16"), "shape", "m64nNk8"),
    (dict(WGMMA, dtype="tf32"), "b_layout", "wgmma transposes only 16-bit types"),
    (dict(instruction="mma_sync", shape="16x16x16"), "shape", "m16n8k16"),
    (dict(stages=6), "stages", "1..5"),
    (dict(cluster=3), "cluster", "power of two"),
    (dict(instruction="mma_sync", consumers=2), "consumers", "wgmma knob"),
    (dict(staging="global"), "staging", "wmma rung only"),
    (dict(WGMMA, layout="padded"), "layout", "128-byte swizzled"),
    (dict(WGMMA, bk=32), "bk", "multiple of 64 (fp16: one 128-byte swizzle row"),
    (dict(WGMMA, bm=256, wm=128), "bn", "256 fp32 accumulators per consumer thread, more than 192"),
    (dict(m=1000, n=1000, k=1001), "k", "16-byte aligned rows of A"),
    (dict(dtype="fp8"), "dtype", "fp16, bf16, tf32"),
    (dict(bm=512, bn=256, wm=32, wn=32), "threads", "1024"),
])
def test_impossible_knobs_are_one_line_naming_field_value_and_limit(knobs, field, limit):
    kw = dict(SQUARE) | knobs
    with pytest.raises(ValueError) as err:
        TcGemmConfig(**kw)
    msg = str(err.value)
    assert "\n" not in msg
    assert f"TcGemmConfig.{field}" in msg and limit in msg


def test_stages_that_do_not_fit_shared_memory_are_rejected_for_the_gpu():
    cfg = TcGemmConfig(**SQUARE, **(WGMMA | {"stages": 5, "bk": 128}))
    with pytest.raises(ValueError, match=r"TcGemmConfig.smem_bytes = \d+ .* exceeds smem_per_block_optin_bytes"):
        check_fits(cfg, H200)


def test_a_cluster_larger_than_the_gpu_allows_is_rejected():
    with pytest.raises(ValueError, match="TcGemmConfig.cluster = 16: exceeds max_cluster_blocks = 8 on h200"):
        check_fits(TcGemmConfig(**SQUARE, **(WGMMA | {"cluster": 16})), H200)


def test_wgmma_on_a_gpu_without_it_names_the_instruction():
    with pytest.raises(ValueError, match="TcGemmConfig.instruction = 'wgmma'.*a100_sxm4 has no such"):
        check_fits(TcGemmConfig(**SQUARE, **WGMMA), A100)
    check_fits(TcGemmConfig(**SQUARE), A100)  # mma.sync exists on the A100


def test_the_family_is_registered_with_its_knobs():
    fam = registry.get("tc_gemm")
    names = [k.name for k in fam.knobs()]
    for knob in ("dtype", "out_dtype", "b_layout", "instruction", "staging", "bm", "bn", "bk", "wm", "wn",
                 "shape", "layout", "stages", "consumers", "cluster", "epilogue"):
        assert knob in names
    cfg = fam.make(m="4096", n="4096", k="4096", instruction="wgmma", bm="128", bn="256", bk="64", wm="64",
                   wn="256", consumers="2", stages="4")
    assert cfg.threads == 384 and cfg.mma_shape == (64, 256, 16)


# ----- the lowering ---------------------------------------------------------------------------------
@pytest.mark.parametrize("knobs", [
    dict(instruction="wmma", staging="global", stages=1, bm=64, bn=64, wm=32, wn=32),
    dict(instruction="wmma", stages=1, layout="padded"),
    dict(instruction="mma_sync", layout="naive"),
    dict(instruction="mma_sync", dtype="tf32", b_layout="col"),
    dict(instruction="mma_sync", dtype="bf16", out_dtype="input", epilogue="shared"),
    WGMMA,
    WGMMA | {"cluster": 2, "dtype": "tf32", "b_layout": "col"},
])
def test_every_rung_declares_exactly_the_flops_its_mmas_do(knobs):
    cfg = TcGemmConfig(**SQUARE, **knobs)
    prog = lower(cfg)
    done = sum(op.flops * ph.trips for ph in prog.phases for op in ph.step.compute if isinstance(op, Mma))
    assert done * prog.launch.blocks == pytest.approx(cfg.flops)


def test_a_dense_shared_layout_conflicts_and_padding_or_swizzling_removes_it():
    base = dict(SQUARE, instruction="mma_sync", bk=32)
    waves = {lay: _cost(TcGemmConfig(**base, layout=lay)).shared_load_wavefronts for lay in ("naive", "padded", "swizzled")}
    ideal = _cost(TcGemmConfig(**base, layout="swizzled")).shared_load_ideal
    assert waves["swizzled"] == ideal and waves["padded"] == ideal
    assert waves["naive"] >= 2 * ideal  # 64-byte rows: ldmatrix's 8 rows hit 2 banks groups 4 times


def test_tma_copies_take_one_instruction_per_tile_and_no_l1():
    cost = _cost(TcGemmConfig(**SQUARE, **WGMMA))
    assert cost.load_instructions == 2 and cost.load_l1_cycles == 0
    assert cost.load_l1_cacheable == [False, False]
    assert cost.load_l2_bytes == (128 * 64 + 64 * 256) * 2  # whole tiles, every sector used


def test_a_cluster_of_two_fetches_half_of_b_per_block():
    one = _cost(TcGemmConfig(**SQUARE, **WGMMA)).load_l2_bytes_each
    two = _cost(TcGemmConfig(**SQUARE, **(WGMMA | {"cluster": 2}))).load_l2_bytes_each
    assert two[0] == one[0] and two[1] == one[1] / 2


def test_a_cluster_pair_misses_its_whole_b_tile_in_l2_so_dram_reads_are_those_without_a_cluster():
    """Each block of a pair copies its own half of the B tile (and receives the other half by
    multicast): the pair reads the whole tile, so the L2 misses the whole tile once, as without a
    cluster. Nsight Compute on the H200 (validation/results/h200/tc_gemm/counters.csv) counts
    203 MB of DRAM reads for wgmma_fp16_Bcol_128x256x64_swz_s4_c2 at 4096^3 with or without cl2."""
    from tilesim.api import simulate
    knobs = dict(m=4096, n=4096, k=4096, instruction="wgmma", b_layout="col", bm=128, bn=256, bk=64, wm=64,
                 wn=256, stages=4, consumers=2)
    one = simulate(TcGemmConfig(**knobs), H200).traffic
    two = simulate(TcGemmConfig(**knobs, cluster=2), H200).traffic
    assert two.hbm_read_bytes == pytest.approx(one.hbm_read_bytes, rel=0.02)
    assert two.l2_load_bytes == pytest.approx(one.l2_load_bytes * 2 / 3, rel=0.01)  # B halved: 16 + 16 of 48 KiB


def test_wgmma_reads_its_operands_from_shared_memory_without_instructions():
    cost = _cost(TcGemmConfig(**SQUARE, **WGMMA))
    # two consumers x (64x64 A + 64x256 B) fp16 per k-step of 64, at 128 bytes per wavefront
    assert cost.shared_load_bytes == 2 * (64 * 64 + 64 * 256) * 2
    assert cost.shared_load_wavefronts == cost.shared_load_bytes / 128
    assert cost.shared_load_instructions == 0


def test_bulk_copies_and_shared_operands_exist_only_where_the_hardware_has_them():
    step = Step(loads=(GlobalLoad(TileRef("A", ("by", "k"), 512), (lanes(16, shared_base=0),), dest="bulk"),))
    with pytest.raises(ValueError, match="dest = 'bulk'.*no bulk tensor copy"):
        step_cost(step, load("m5_max"), 4)
    step = Step(compute=(Mma((8, 8, 8), "fp16", 4, operands="shared"),))
    with pytest.raises(ValueError, match="Mma.operands = 'shared'"):
        step_cost(step, load("m5_max"), 4)
    with pytest.raises(ValueError, match="Mma.operands = 'tmem'"):
        Mma((64, 256, 16), "fp16", 1, operands="tmem")


def test_the_ladder_table_reads_the_recorded_suite_and_names_every_rung():
    from validation.families.tc_gemm import ladder  # noqa: PLC0415

    lad = ladder.ladder("h200", "4096x4096x4096")
    rungs = [r["rung"] for r in lad["rows"]]
    assert rungs[0].startswith("1 WMMA") and rungs[-1].startswith("5 wgmma")
    assert lad["cublas_s"] > 0
    table = ladder.markdown(lad)
    assert table.count("\n") == len(rungs) + 3  # header, rule, rungs, cuBLAS, datasheet
    best = min(lad["rows"], key=lambda r: r["measured_s"])
    assert best["rung"].startswith("5 wgmma")  # measured: the Hopper rung is the fastest


def test_bulk_copies_wait_for_the_measured_tma_latency():
    from tilesim.engine.sim import Engine  # noqa: PLC0415

    cfg = TcGemmConfig(**SQUARE, **WGMMA)
    # the profile lands a k-step's copies by tma_pair's law (fixed part + bytes over the landing rate)
    slow = with_overrides(H200_COUNTS, tma_latency_cycles=5000.0, tma_hbm_latency_cycles=9000.0,
                          tma_fixed_latency_cycles=5000.0, tma_hbm_fixed_latency_cycles=9000.0)
    assert Engine(lower(cfg), slow).bulk_l2_lat_s == pytest.approx(5000.0 / slow.sm_clock_hz)
    assert Engine(lower(cfg), slow).bulk_landing["l2"][1] == pytest.approx(5000.0 / slow.sm_clock_hz)
    two = TcGemmConfig(**SQUARE, **(WGMMA | {"stages": 2}))
    import tilesim  # noqa: PLC0415

    assert tilesim.simulate(two, slow).time_s > tilesim.simulate(two, H200_COUNTS).time_s


# ----- what the recorded H200 suite shows (validation/results/h200/tc_gemm) -------------------------------
def _recorded(name: str) -> list[dict]:
    import csv  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    path = Path(__file__).resolve().parents[1] / "validation" / "results" / "h200" / "tc_gemm" / name
    return list(csv.DictReader(path.open()))


def test_the_recorded_suite_covers_the_issue_shapes_dtypes_and_rungs():
    rows = [r for r in _recorded("times.csv") if not r["label"].startswith("cublas")]
    assert len(rows) >= 80 and all(r["status"] == "ok" and float(r["rel_err"]) >= 0 for r in rows)
    shapes = {(int(r["m"]), int(r["n"]), int(r["k"])) for r in rows}
    assert len(shapes) >= 3
    assert any(m % 128 or n % 128 or k % 64 for m, n, k in shapes)  # non-divisible
    assert any(m >= 16 * n for m, n, _ in shapes)  # tall-skinny
    assert any(m * n * k >= 8192 ** 3 for m, n, k in shapes)  # large enough to be compute-bound
    assert {r["dtype"] for r in rows} == {"fp16", "bf16", "tf32"}
    assert {r["instruction"] for r in rows} == {"wmma", "mma_sync", "wgmma"}
    counted = {(r["label"], r["m"], r["n"], r["k"]) for r in _recorded("counters.csv") if r["status"] == "ok"}
    assert {(r["label"], r["m"], r["n"], r["k"]) for r in rows} <= counted  # Nsight Compute for every one


def test_the_best_fp16_kernel_reaches_the_issue_share_of_cublas():
    rows = _recorded("times.csv")
    for size, share in (("8192", 0.70), ("4096", 0.60)):
        at = [r for r in rows if r["m"] == r["n"] == r["k"] == size and r["dtype"] == "fp16" and r["status"] == "ok"]
        cublas = min(float(r["median_s"]) for r in at if r["label"] == "cublas_fp16")
        ours = min(float(r["median_s"]) for r in at if not r["label"].startswith("cublas"))
        assert cublas / ours >= share, f"{size}^3: {cublas / ours:.2f} of cuBLAS"


def test_the_sm_clock_falls_under_tensor_load_as_measured():
    """The calibrated curve (clock_load_probe) gives the FFMA clock without tensor work and a lower clock
    the busier the tensor cores; a program without MMAs keeps the GPU's clock."""
    assert H200.sm_clock_hz_at_tensor_activity(0.0) == pytest.approx(H200.sm_clock_hz, rel=0.01)
    assert H200.sm_clock_hz_at_tensor_activity(1.0) < 0.8 * H200.sm_clock_hz
    import tilesim  # noqa: PLC0415

    busy = tilesim.simulate(TcGemmConfig(**SQUARE, **WGMMA), H200)
    assert busy.sm_clock_hz < 0.95 * H200.sm_clock_hz
    from tilesim.kernels.gemm import GemmConfig  # noqa: PLC0415

    assert tilesim.simulate(GemmConfig(m=1024, n=1024, k=1024), H200).sm_clock_hz == H200.sm_clock_hz


def test_a_cluster_pair_pays_the_measured_remote_release_every_k_step():
    """Each consumer of a cluster pair hands every stage back to both blocks with a cluster-scope
    release arrive: the GEMM-shaped ring's whole release (cluster_release_arrive_cycles, 1059 cycles)
    sits on the step's critical path, and nothing holds the step beyond it (the ring rows judged the
    holds: validation/studies/tensor_engine_check.py, group ring)."""
    one = _cost(TcGemmConfig(**SQUARE, **WGMMA))
    two = _cost(TcGemmConfig(**SQUARE, **(WGMMA | {"cluster": 2})))
    assert two.critical_path_cycles - one.critical_path_cycles == pytest.approx(
        H200.get("cluster_release_arrive_cycles"))
    assert two.release_hold == one.release_hold == ""
    with pytest.raises(ValueError, match="Step.cluster_arrives = -1"):
        Step(cluster_arrives=-1)


def test_the_cluster_release_fence_constant_comes_from_the_recorded_sync_rows():
    """calibrate derives cluster_release_fence_cycles from cluster_fence.json's sync release rows (the
    loader's boxes in flight or landed, every gap): 685-700 cycles, median 687, each row named."""
    import json  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    from validation.calibration import cluster_probe  # noqa: PLC0415

    path = Path(__file__).resolve().parents[1] / "validation/results/h200/calibration/cluster_fence.json"
    f = cluster_probe.release_model_fields(json.loads(path.read_text()))["cluster_release_fence_cycles"]
    assert f["value"] == pytest.approx(H200.get("cluster_release_fence_cycles"))
    assert 680 <= f["p10"] <= f["value"] <= f["p90"] <= 710 and f["n"] == 24
    assert "l2.b256.if4.gap0.loader 690" in f["benchmark"] and "hbm.b256.if2.landed.loader 687" in f["benchmark"]


def test_a_wgmma_consumer_step_takes_at_least_its_measured_loop():
    """Besides its release, a consumer's k-step waits for its stage, issues its wgmmas and waits for the
    previous group: cluster_probe's ring measures that as the ring's k-step less the release (352
    cycles), longer than one wgmma's dependent latency (201 at N = 256), so it bounds the step's chain;
    the calibration derives it from the recorded probe."""
    import json  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    from validation.calibration import calibrate  # noqa: PLC0415

    ring = Path(__file__).resolve().parents[1] / "validation/results/h200/calibration/cluster_wgmma.json"
    got = calibrate.cluster_fields(json.loads(ring.read_text()))
    assert got["wgmma_consumer_step_cycles"]["value"] == pytest.approx(H200.get("wgmma_consumer_step_cycles"))
    wg = _cost(TcGemmConfig(**SQUARE, **WGMMA))
    assert wg.critical_path_cycles >= H200.get("wgmma_consumer_step_cycles")
    assert H200.get("wgmma_consumer_step_cycles") > H200.wgmma_latency_cycles_at(256)


# ----- the one-buffer wgmma rung (stages = 1: no producer warpgroup) ---------------------------------------
ONE_BUFFER = WGMMA | {"bn": 128, "wn": 128, "stages": 1, "setmaxnreg": False, "b_layout": "col"}


@pytest.mark.parametrize("knobs, field, limit", [
    (ONE_BUFFER | {"setmaxnreg": True}, "setmaxnreg", "must be False with instruction wgmma and stages = 1"),
    (ONE_BUFFER | {"cluster": 2}, "cluster", "must be 1 with instruction wgmma and stages = 1"),
])
def test_the_one_buffer_rung_rejects_what_it_lacks_in_one_line(knobs, field, limit):
    with pytest.raises(ValueError) as err:
        TcGemmConfig(**SQUARE, **knobs)
    msg = str(err.value)
    assert "\n" not in msg and f"TcGemmConfig.{field}" in msg and limit in msg


def test_the_one_buffer_rung_has_no_producer_warpgroup_and_one_buffer():
    one = TcGemmConfig(**SQUARE, **ONE_BUFFER)
    ring = one.with_(stages=2, setmaxnreg=True)
    assert one.threads == 2 * 128 and ring.threads == 3 * 128 and not one.has_producer and ring.has_producer
    assert one.smem_bytes == (128 * 64 + 128 * 64) * 2 + 2048 and ring.smem_bytes == 2 * (128 * 64 + 128 * 64) * 2 + 2048
    # blind registers: a consumer's accumulators and base, under the launch bound (no setmaxnreg)
    assert one.estimated_regs == 64 * 128 // 128 + 28
    assert one.label == "wgmma_fp16_Bcol_128x128x64_swz_s1_c2"
    check_fits(one, H200)
    tall = TcGemmConfig(**SQUARE, **(ONE_BUFFER | {"consumers": 1, "wm": 128}))
    assert tall.threads == 128 and tall.estimated_regs == 128 * 128 // 128 + 28


def test_the_one_buffer_program_copies_nothing_ahead_and_passes_a_barrier_each_step():
    one = lower(TcGemmConfig(**SQUARE, **ONE_BUFFER))
    ring = lower(TcGemmConfig(**SQUARE, **(ONE_BUFFER | {"stages": 3, "setmaxnreg": True})))
    k1, k3 = one.phases[0], ring.phases[0]
    assert k1.pipeline_depth == 1 and k3.pipeline_depth == 3
    assert k1.step.barriers == 1 and k3.step.barriers == 0
    assert all(ld.dest == "bulk" for ld in k1.step.loads) and k1.step.loads == k3.step.loads
    assert k1.step.compute == k3.step.compute and k1.step.cluster_arrives == 0
    assert one.launch.threads_per_block == 256 and ring.launch.threads_per_block == 384
    c1 = step_cost(k1.step, H200, one.launch.warps_per_block)
    c3 = step_cost(k3.step, H200, ring.launch.warps_per_block)
    # the __syncthreads: one issue slot a warp, and the measured barrier latency at 8 warps on the path
    assert c1.barriers == 8 and c3.barriers == 0
    assert c1.critical_path_cycles - c3.critical_path_cycles == pytest.approx(H200.barrier_latency_cycles_at(8))


@pytest.mark.parametrize("knobs, size", [
    (ONE_BUFFER, SQUARE),
    (ONE_BUFFER | {"bn": 256, "wn": 256}, dict(m=8192, n=8192, k=8192)),
    (ONE_BUFFER | {"bm": 64, "wm": 64, "bn": 64, "wn": 64, "consumers": 1}, SQUARE),
])
def test_one_buffer_is_no_faster_than_a_two_stage_ring_of_the_same_tile(knobs, size):
    """Against a ring of the same tile and registers (no setmaxnreg, so the consumers' estimate is the
    same): one buffer waits a TMA latency every k-step and its math, a 2-stage ring only the latency (it
    refills a stage once the next one's wait frees it: one k-step in flight), a 3-stage ring keeps two
    in flight. The ring's producer warpgroup can leave it fewer blocks per SM than the one-buffer
    kernel (128x128 at 128 registers: one against two, whose copies then overlap each other's math):
    there the 3-stage ring is the one that must win. (The validation ring's setmaxnreg, 232 registers a
    thread, does the same to a 64x64 tile.)"""
    import tilesim  # noqa: PLC0415

    one = TcGemmConfig(**size, **knobs)
    two = one.with_(stages=2)
    assert one.estimated_regs == two.estimated_regs
    r1, r2 = tilesim.simulate(one, H200), tilesim.simulate(two, H200)
    if r1.blocks_per_sm == r2.blocks_per_sm:
        assert r1.time_s >= r2.time_s
    else:
        assert r1.blocks_per_sm > r2.blocks_per_sm
        assert r1.time_s >= tilesim.simulate(one.with_(stages=3), H200).time_s


def test_the_tuning_space_holds_the_one_buffer_rung():
    from tilesim.kernels.tc_gemm.space import space  # noqa: PLC0415

    ones = [k for k in space({}) if k["instruction"] == "wgmma" and k["stages"] == 1]
    assert ones and all(k["setmaxnreg"] is False and k["cluster"] == 1 for k in ones)
    built = []
    for k in ones:
        try:
            built.append(TcGemmConfig(**SQUARE, **k))
        except ValueError:  # bk 32 with fp16 (not one 128-byte swizzle row), as for the ring
            continue
    assert {c.consumers for c in built} == {1, 2} and {c.bn for c in built} == {64, 128, 192, 256}
