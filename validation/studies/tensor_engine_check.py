"""Does the engine predict its own tensor-core microbenchmarks? The mma_feed probe's loops written as
tile programs and simulated on the H200's profile, against what the probe measured.

``python -m validation.studies.tensor_engine_check`` prints, per probe row, the measured and predicted
HMMA per clock per SM and the error, and the MAPE per group:

* ``feed``: an ldmatrix-fed mma.sync loop (warp tiles 64x64 / 64x32 / 32x32, 4 or 8 warps per block,
  1 or 2 blocks per SM, a barrier never / every slice / every 2 slices; the rows without fragment
  double buffering, which a tile program cannot say) with no global memory in the loop;
* ``gemm_traffic``: the GEMM-like loop (64x64 warp tiles, a barrier per k-step of 2 slices) with the
  GEMM's k-step copies put back: none, 16-byte cp.async from L2, and the same with the GEMM's address
  arithmetic, from L2 (every block's tiles resident, as the probe's 16 MiB problem is); in each row's geometry (read from the row: 8 warps of a 128x256 tile, 1 block per SM,
  a 4-stage copy ring; the gemm_traffic_w4 rows: 4 warps of a 128x128 tile, 2 or 1 blocks per SM, a
  3-stage ring). Each copy's address instructions are the row's own SASS: its loop's instructions less
  those of the same geometry's loop without copies (mode none), its cp.async bookkeeping (DEPBAR,
  LDGDEPBAR) and the copies, per copy. The A copies read rows of the row's ``k_elems`` pitch (2048 halves
  unless the row says otherwise: the gemm_traffic_ragged rows take 2008 and 2032), into tc_gemm's padded
  layout for mode gemm_pad, whose B is copied row-major into the padded layout (rows of 17 chunks), as the
  probe's load_tile does (BCOL false).

``gemm_traffic_hbm``: the same loop's HBM rows (``data`` "hbm": every block streams its own bm rows of A and
bn columns of B from 1 GiB, each k-step's tiles read once), the copies named by the block and the k-step.

``gemm_path`` (printed after them): the gemm_path rows whose copies straddle sector boundaries (A, or A
and B, rows 4016 B apart) against their aligned controls, as the same loop (:func:`path_check`): what the
straddling adds to the k-step, measured and predicted.

Both groups take the k-step's fragment loads in one round ahead of its MMAs, as the compiler
schedules them (the SASS order of each row).

``tma`` (:func:`tma_check`): tensor_probe's TMA stream rows (``tensor.json``, group ``tma``: boxes of 64/128/256 x 64
fp16 with 1-3 in flight, on every SM or one, from L2 or HBM) as a bulk-load loop, cycles per box.

``tma_pair`` (:func:`tma_pair_check`): tma_pair_probe's rows (``tma_pair.json``: a GEMM k-step's A and B boxes,
16 / 32 / 48 KiB, on one mbarrier, 1 or 2 pairs in flight, on every SM or one, from L2 (each SM its own tiles
or all the same) or HBM) as a bulk-load loop of both boxes a step, issue-to-landing cycles of a pair.

``ring`` (:func:`ring_check`): cluster_probe's GEMM-shaped wgmma ring rows (``cluster_wgmma.json``: a 16
MiB L2-resident tensor; ``cluster_wgmma_1024mib.json``: 1 GiB, every block its own rows from HBM), each
as tc_gemm's wgmma k-step (lowered from a TcGemmConfig of the ring's geometry: 1 or 2 consumer
warpgroups of m64n256k16, bk 64, 2 or 4 stages, B multicast in the c2_mc modes, one release on the
peer per k-step in the remote modes) on the ring's boxes (A 128 x 64, B 256 x 64 of a 4096-half-wide
tensor), 2048 k-steps at the row's recorded clock, in cycles per k-step, under each cluster-release rule
of ``RELEASE_RULES``: the profile's (``const``: the ring's whole release, 1059 cycles, no hold), the
fence alone (687, cluster_fence.json sync rows) with no hold, or held until the block's last / oldest
in-flight bulk copy issued before it lands. The rules differ only on the remote-release rows; the c1
and c2_own_local rows are the control. ``rel_all`` rows (every thread arrives on both blocks: not the
GEMM's form) are encoded as two cluster arrives and printed apart.

``wmma_feed`` (:func:`wmma_feed_check`): wmma_feed_probe's rows (``wmma_feed.json``: tc_gemm's staged-WMMA k-step,
128x128x32 padded, B N x K, 8 warps of 64x32 or (``*_w4`` rows, ldmatrix only) 4 warps of 64x64, as each row's
``geometry`` records, 3-stage cp.async ring, L2-resident 2048^3 data) with its fragments
loaded by generic LD.E (the suite's), LDS or ldmatrix (+ mma.sync), with the copies or none, at 2 or 1 blocks per
SM (rows not measured yet, without ``cycles_per_kstep``, left out): the suite kernel's lowered k-step with the row's own SASS for the instructions beside loads, MMAs and the
barrier, cycles per k-step per block.

Rows come from ``validation/results/h200/calibration/mma_feed.json`` (and the files named above); nothing here
needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path
from unittest import mock

from tilesim import cost
from tilesim.cost import nvidia
from tilesim.engine.sim import Engine, check_program, simulate_program
from tilesim.hardware import load, with_overrides
from tilesim.kernels.tc_gemm.config import TcGemmConfig
from tilesim.kernels.tc_gemm.lower import _fragment_reads, _operand_loads, lower
from tilesim.program import (
    Affine,
    Compute,
    GlobalLoad,
    Launch,
    Mma,
    Phase,
    SharedAccess,
    Step,
    TileProgram,
    TileRef,
    WarpAccess,
)

FEED = Path(__file__).resolve().parents[1] / "results" / "h200" / "calibration" / "mma_feed.json"
RINGS = {"l2": FEED.with_name("cluster_wgmma.json"), "hbm": FEED.with_name("cluster_wgmma_1024mib.json")}
TENSOR = FEED.with_name("tensor.json")
TMA_STEPS = 256  # boxes each block waits for in the tma rows' programs (the steady state is reached well before)
SLICES = 512  # k16 slices each block runs (the probe's loop length does not matter in the steady state)
HMMA = (16, 8, 16)


def _reads(cfg: TcGemmConfig, slices: int) -> list:
    (ra, ca), _ = cfg.smem_tile_shapes
    b_base = ra * cfg.smem_row_bytes(ca)
    out = []
    for j in range(slices):
        out += _fragment_reads(cfg, b_base, (j % max(1, cfg.bk // 16)) * 16)
    return out


def _feed_program(row: dict) -> tuple[TileProgram, float]:
    wm, wn = row["warp_tile"]
    bm, bn = row["block_tile"]
    warps, blocks, sync = row["warps_per_block"], row["blocks_per_sm"], row["sync_every_slices"]
    cfg = TcGemmConfig(m=4096, n=4096, k=4096, bm=bm, bn=bn, bk=32, wm=wm, wn=wn, b_layout="col")
    slices = sync or 1
    mma = Mma(HMMA, "fp16", warps * (wm // 16) * (wn // 8) * slices, chain=slices)
    step = Step(shared_loads=(SharedAccess(tuple(_reads(cfg, slices)), repeat=warps),), barriers=1 if sync else 0,
                compute=(mma,))
    smem = (120 if blocks == 1 else 100) * 1024  # as the probe asks, to hold 1 or 2 blocks per SM
    prog = TileProgram(row["kernel"], Launch((132 * blocks, 1, 1), 32 * warps, 128, smem),
                       (Phase("loop", SLICES // slices, step, warp_groups=1 if sync else warps),))
    return prog, mma.count * (SLICES // slices) * blocks


def _address_instructions(row: dict, control: dict | None) -> float:
    """Address instructions per copy in ``row``'s SASS loop: its instructions less the control loop's
    (same geometry and loop, no copies, no cp.async: mode none), its DEPBAR and LDGDEPBAR, and the copies
    themselves, per copy."""
    per_thread = row["copies_per_thread_per_kstep"]
    if not per_thread or control is None:
        return 0.0
    s = row["sass"]
    books = s.get("depbar", 0) + s.get("ldgdepbar", 0)
    return (s["instructions"] - control["sass"]["instructions"] - books - per_thread) / per_thread


def _geometry(row: dict) -> tuple:
    return row["warps_per_block"], row["blocks_per_sm"], row["slices_per_kstep"], row["compute_ring_stages"]


def _traffic_program(row: dict, control: dict | None = None) -> tuple[TileProgram, float]:
    """The row's loop on its own geometry: warps, block tile, blocks per SM (the grid, 132 SMs' worth
    when the row does not say), copy ring depth and shared memory a block, as the probe launched it."""
    warps, slices, blocks = row["warps_per_block"], row["slices_per_kstep"], row["blocks_per_sm"]
    bm, bn = row["block_tile"]
    wm, wn = row["warp_tile"]
    ring = row["copy_ring_stages"] or 1  # 0: mode none, no ring
    cfg = TcGemmConfig(m=2048, n=2048, k=2048, bm=bm, bn=bn, bk=16 * slices, wm=wm, wn=wn, b_layout="col",
                       stages=max(ring, 2))
    # A's rows at the row's pitch (k_elems), into the copy layout of its mode; the fragment reads stay on
    # the probe's swizzled compute ring
    a_cfg = replace(cfg, k=row.get("k_elems", 2048), layout="padded" if row["mode"] == "gemm_pad" else cfg.layout)
    addr = _address_instructions(row, control)
    # the probe's L2 rows re-read a 16 MiB problem (its k wraps every 64 k-steps): every k-step's tiles
    # are resident in L2. The program's k-loop is longer than that problem's k, and the engine's L2
    # knows a tile by its k-step, so each k-step's A and B tiles are given to every block alike: the
    # L2 serves all but their first touch, and its channel still carries every block's bytes
    # B as the probe copies it: row-major (bk rows of bn halves; load_tile's BCOL false): the padded layout
    # tells it apart (rows of 17 chunks, not 5), and the global lines a warp's copy reads (4 whole lines,
    # not a column tile's 8 half-lines: ldgsts16_line_cycles); the gemm_bcol rows' n_x_k copies are column-major
    b_cfg = replace(cfg, layout=a_cfg.layout, b_layout="col" if row.get("b_layout") == "n_x_k" else "row")
    la, lb = _operand_loads(a_cfg, "async")[0], _operand_loads(b_cfg, "async")[1]
    # the HBM rows (1 GiB): every block streams its own bm rows of A and bn columns of B (gt_problem), each
    # k-step's tiles read once: named by the block and the k-step
    coords = ("bx", "k") if row.get("data") == "hbm" else (0, "k")
    loads = tuple(replace(ld, address_instructions=addr, tile=TileRef(ld.tile.tensor, coords, ld.tile.tile_bytes))
                  for ld in (la, lb)) if row["copies_per_thread_per_kstep"] else ()
    mma = Mma(HMMA, "fp16", warps * (wm // 16) * (wn // 8) * slices, chain=slices)
    step = Step(loads=loads, shared_loads=(SharedAccess(tuple(_reads(cfg, slices)), repeat=warps),), barriers=1,
                compute=(mma,))
    launch = Launch((row.get("grid") or 132 * blocks, 1, 1), 32 * warps, 210, row.get("smem_bytes") or 120 * 1024)
    prog = TileProgram(row["kernel"], launch, (Phase("loop", SLICES // slices, step, pipeline_depth=ring if loads else 1),))
    return prog, mma.count * (SLICES // slices) * blocks


#: gemm_path rows whose copies straddle sector boundaries (rows 4016 B apart), each with its aligned control
#: (same kernel): path_check
PATH_PAIRS = (("gp_w8b1_K2008ab_copy_r6", "gp_w8b1_bcolK2048_copy_r6"), ("gp_w8b1_K2008a_copy_r6", "gp_w8b1_l2_copy_r6"),
              ("gp_w4b2_K2008ab_copy_r8", "gp_w4b2_bcolK2048_copy_r8"), ("gp_w4b2_K2008a_copy_r8", "gp_w4b2_l2_copy_r8"),
              ("gp_w4b1_K2008a_copy_r8", "gp_w4b1_l2_copy_r8"))
#: the gemm_traffic gemm-mode row (tc_gemm's load_tile loop without the clock stamps) of each gemm_path geometry
PATH_LOOP = {"w8b1": "gt_gemm_l2_k2", "w4b2": "gt_w4b2_gemm_l2_k2", "w4b1": "gt_w4b1_gemm_l2_k2"}


def _path_program(row: dict, traffic: dict) -> tuple[TileProgram, int]:
    """A gemm_path row (copies first, L2 data) as a tile program: its geometry's gemm_traffic loop (the
    copies' address instructions from that loop's SASS, as _traffic_program takes them) with the row's
    own B layout and pitches, and the instructions its SASS loop has beyond that loop (the clock stamps
    and their stores, the zero-fill choice) issued with the math. Returns the program and its k-steps."""
    loop = traffic[PATH_LOOP[row["geometry"]]]
    control = {_geometry(r): r for r in traffic.values() if r["mode"] == "none"}.get(_geometry(loop))
    addr = _address_instructions(loop, control)
    extra = row["sass"]["instructions"] - loop["sass"]["instructions"]
    warps, blocks, slices, ring = row["warps_per_block"], row["blocks_per_sm"], 2, row["copy_ring_stages"]
    bm, bn = row["block_tile"]
    wm, wn = loop["warp_tile"]
    b_layout = "col" if row["b_layout"] == "n_x_k" else "row"
    cfg = TcGemmConfig(m=2048, n=row["n_elems"], k=row["k_elems"], bm=bm, bn=bn, bk=16 * slices, wm=wm, wn=wn,
                       b_layout=b_layout, stages=max(ring, 2))
    frag = replace(cfg, n=2048, k=2048)  # the fragment reads stay on the probe's swizzled compute ring
    la, lb, _ = _operand_loads(cfg, "async")
    real = row["real_copies_per_thread"]
    if real != row["copies_per_thread"]:
        raise ValueError(f"{row['kernel']}: {real} of {row['copies_per_thread']} copies with data")
    # every k-step's tiles resident in L2 for every block, as in _traffic_program
    loads = tuple(replace(ld, address_instructions=addr, tile=TileRef(ld.tile.tensor, (0, "k"), ld.tile.tile_bytes))
                  for ld in (la, lb))
    mma = Mma(HMMA, "fp16", warps * (wm // 16) * (wn // 8) * slices, chain=slices)
    compute = (mma, Compute("issue", extra * warps, "int32")) if extra > 0 else (mma,)
    step = Step(loads=loads, shared_loads=(SharedAccess(tuple(_reads(frag, slices)), repeat=warps),), barriers=1,
                compute=compute)
    launch = Launch((132 * blocks, 1, 1), 32 * warps, 210, row["smem_bytes"])
    trips = SLICES // slices
    return TileProgram(row["kernel"], launch, (Phase("loop", trips, step, pipeline_depth=ring),)), trips


def path_check(path: Path = FEED, hardware: str = "h200") -> list[tuple[str, str, float, float, float, float]]:
    """Per PATH_PAIRS pair: (row, control, measured k-step of each, engine's k-step of each), block cycles
    per k-step. The gemm_path kernels run clock stamps the engine knows only as instructions, so their
    absolute k-steps are not the claim; what the straddling copies add over the control is."""
    hw = load(hardware)
    rec = json.loads(Path(path).read_text())
    gp, traffic = rec.get("gemm_path", {}), rec.get("gemm_traffic", {})
    out = []
    for key, ctl in PATH_PAIRS:
        if key not in gp or ctl not in gp:
            continue
        got = []
        for k in (key, ctl):
            prog, trips = _path_program(gp[k], traffic)
            res = simulate_program(prog, hw)
            got.append((res.time_s - hw.launch_overhead_s) * res.sm_clock_hz / trips)
        out.append((key, ctl, float(gp[key]["cycles_per_kstep"]["value"]), float(gp[ctl]["cycles_per_kstep"]["value"]),
                    got[0], got[1]))
    return out


#: the gemm_traffic row whose geometry and loop the gemm_bcol rows share (mma_feed_probe GB_CONFIGS)
GB_BASE = "gt_gemm_l2_k2"


def check(path: Path = FEED, hardware: str = "h200") -> dict[str, list[tuple[str, float, float]]]:
    """``{group: [(row, measured, predicted HMMA/clk/SM), ...]}``."""
    hw = load(hardware)
    rec = json.loads(Path(path).read_text())
    out: dict[str, list] = {"feed": [], "gemm_traffic": []}
    rows = [("feed", r, _feed_program) for r in rec["configs"].values()
            if r["loads"] and not r["double_buffered"] and "noise" not in r["kernel"]]
    traffic = rec.get("gemm_traffic", {}).values()
    controls = {_geometry(r): r for r in traffic if r["mode"] == "none"}
    rows += [("gemm_traffic", r, partial(_traffic_program, control=controls.get(_geometry(r))))
             for r in traffic if r.get("data") in (None, "l2") and r["slices_per_kstep"] == 2]
    out["gemm_traffic_hbm"] = []
    rows += [("gemm_traffic_hbm", r, partial(_traffic_program, control=controls.get(_geometry(r))))
             for r in traffic if r.get("data") == "hbm" and r["slices_per_kstep"] == 2]
    # gemm_bcol: gt_gemm_l2_k2's loop with B's copies K x N or N x K and the fragments read from a fixed ring
    # or from the copy ring (the engine tells only the copies' global lines apart); the suite kernel's own
    # row (gb_suite_1wave) is no loop of this geometry's program
    out["gemm_bcol"] = []
    base = rec.get("gemm_traffic", {}).get(GB_BASE)
    if base is not None:
        for gb in rec.get("gemm_bcol", {}).values():
            if "hmma_per_clk_sm" in gb:
                row = {**base, **{k: gb[k] for k in ("kernel", "b_layout", "sass", "hmma_per_clk_sm")}}
                rows.append(("gemm_bcol", row, partial(_traffic_program, control=controls.get(_geometry(base)))))
    for group, row, build in rows:
        prog, hmma_per_sm = build(row)
        res = simulate_program(prog, hw)
        cycles = (res.time_s - hw.launch_overhead_s) * res.sm_clock_hz
        out[group].append((row["kernel"], float(row["hmma_per_clk_sm"]["value"]), hmma_per_sm / cycles))
    return out



# ----- wmma_feed: the staged-WMMA k-step (wmma_feed_probe) ----------------------------------------------
WMMA_FEED = FEED.with_name("wmma_feed.json")
WMMA_FEED_KSTEPS = 256  # k-steps each block runs (the steady state is reached well before)


def _sass_others(row: dict) -> float:
    """Per warp and k-step, the row's loop instructions that are neither memory, MMA nor barrier ones."""
    s = row["sass"]
    return s["instructions_per_kstep"] - sum(s["per_kstep"].values()) - sum(
        s["histogram"].get(op, 0) for op in ("DEPBAR.LE", "LDGDEPBAR"))


def _wmma_feed_program(row: dict, none_row: dict) -> tuple[TileProgram, int]:
    """The row's k-step as tc_gemm lowers the suite kernel's (wmma: generic fragment loads; lds: the same
    through LDS; ldsm: the mma.sync path), on the row's geometry: copies (tc_gemm's load_tile, every block
    the same L2-resident tiles, as _traffic_program) or none, and the row's own SASS for the instructions
    beside loads, MMAs and the barrier (the copy rows' extra ones as the copies' address instructions). The
    geometry (block tile, warp tile, warps) is the row's ``geometry``: 8 warps of 64x32, or 4 of 64x64."""
    frag, blocks, geo = row["frag"], row["blocks_per_sm"], row["geometry"]
    bm, bn, bk = geo["block_tile"]
    wm, wn = geo["warp_tile"]
    cfg = TcGemmConfig(m=2048, n=2048, k=2048, instruction="mma_sync" if frag == "ldsm" else "wmma", b_layout="col",
                       bm=bm, bn=bn, bk=bk, wm=wm, wn=wn, layout="padded", stages=geo.get("stages", 3))
    step = lower(cfg).phases[0].step
    warps = cfg.warps
    if warps != geo["warps_per_block"]:
        raise ValueError(f"{row['kernel']}: {bm}x{bn} over {wm}x{wn} warp tiles is {warps} warps, the row says "
                         f"{geo['warps_per_block']}")
    shared = tuple(replace(a, generic=frag == "wmma") for a in step.shared_loads)
    loads = ()
    if row["copy"] == "gemm":
        per_warp = row["sass"]["per_kstep"]["LDGSTS"]
        books = sum(row["sass"]["histogram"].get(op, 0) for op in ("DEPBAR.LE", "LDGDEPBAR"))
        addr = (row["sass"]["instructions_per_kstep"] - none_row["sass"]["instructions_per_kstep"] - books
                - per_warp) / per_warp
        loads = tuple(replace(ld, address_instructions=addr, tile=TileRef(ld.tile.tensor, (0, "k"), ld.tile.tile_bytes))
                      for ld in step.loads)
    mma = next(op for op in step.compute if isinstance(op, Mma))
    ints = Compute("int", _sass_others(none_row) * warps)
    loop = Step(loads=loads, shared_loads=shared, barriers=step.barriers, compute=(mma, ints))
    launch = Launch((132 * blocks, 1, 1), 32 * warps, int(row["num_regs"]), int(row["smem_bytes"]))
    return TileProgram(row["kernel"], launch, (Phase("loop", WMMA_FEED_KSTEPS, loop,
                                                     pipeline_depth=3 if loads else 1),)), WMMA_FEED_KSTEPS


def wmma_feed_check(path: Path = WMMA_FEED, hardware: str = "h200") -> list[tuple[str, float, float]]:
    """``[(row, measured, predicted cycles per k-step per block), ...]`` for wmma_feed_probe's rows (the
    zero-fill row left out: its copies read nothing, which a tile program cannot say; so are rows without a
    measurement, ``cycles_per_kstep``, and rows whose copy-free partner (same geometry) has none)."""
    hw = load(hardware)
    rows = json.loads(Path(path).read_text())["rows"]
    out = []
    for key, row in rows.items():
        if row.get("zfill") or "cycles_per_kstep" not in row:
            continue
        none_row = rows.get(row["kernel"].replace(f"_{row['copy']}_b", "_none_b", 1))
        if none_row is None or "sass" not in none_row or "sass" not in row:
            continue
        prog, steps = _wmma_feed_program(row, none_row)
        res = simulate_program(prog, hw)
        out.append((key, float(row["cycles_per_kstep"]["value"]),
                    (res.time_s - hw.launch_overhead_s) * res.sm_clock_hz / steps))
    return out

# ----- ring: cluster_probe's GEMM-shaped wgmma rings ------------------------------------------------------
RING_KSTEPS = 2048  # the probe's iters
RING_BOX_ROWS = 128  # cluster_probe A_ROWS: the A box, and each half of the 256-row B box


def _tma_program(row: dict) -> TileProgram:
    """A tensor_probe ``tma`` row (``tma_tp``: one thread per SM copies ``box`` boxes of fp16 with ``stages``
    in flight and waits for each) as a tile program: one bulk load of the box a step, pipeline depth
    ``stages + 1`` (``stages`` boxes in flight while the thread waits: no slot is held past its wait), nothing else. The box's rows (128 bytes of a 64-wide box, rows of the probe's 8192-byte
    pitch) in 16-byte chunks; ``l2_disjoint``: each SM re-reads its own L2-resident lines (named by ``bx``
    alone: resident after the first read), ``l2`` / ``l2_same``: every SM the same lines, ``hbm``: fresh
    lines every box (named by ``bx`` and the step: never resident)."""
    rows, cols = row["box"]
    row_bytes = cols * 2
    per_row = row_bytes // 16
    offs = [(i // per_row) * 8192 + (i % per_row) * 16 for i in range(rows * per_row)]
    instrs = tuple(WarpAccess(tuple(offs[j:j + 32]), 16, tuple(range(j * 16, (j + len(offs[j:j + 32])) * 16, 16)))
                   for j in range(0, len(offs), 32))
    coords = {"l2_disjoint": ("bx", 0), "l2": (0, 0), "l2_same": (0, 0), "hbm": ("bx", "k")}[row["source"]]
    load = GlobalLoad(TileRef("T", coords, row["box_bytes"]), instrs, dest="bulk")
    launch = Launch((row["grid"], 1, 1), row["threads"], 32, row["smem_bytes"])
    return TileProgram(f"tma_{row['box'][0]}x{row['box'][1]}_{row['source']}_s{row['stages']}", launch,
                       (Phase("loop", TMA_STEPS, Step(loads=(load,)), pipeline_depth=row["stages"] + 1),))


def tma_check(path: Path = TENSOR, hardware: str = "h200", stages: tuple = (1, 2, 3)) -> list[tuple[str, float, float]]:
    """Per tensor_probe ``tma`` row (every SM or one, L2 or HBM, ``stages`` in flight): (row, measured, engine)
    cycles per box at the row's recorded clock."""
    out = []
    for key, row in json.loads(Path(path).read_text())["tma"].items():
        if not key.startswith("tma.box") or key.endswith(".lat") or row.get("stages") not in stages:
            continue
        hw = with_overrides(load(hardware), sm_clock_hz=row["clock_hz"])
        prog = _tma_program(row)
        check_program(prog, hw)
        res = Engine(prog, hw).run()
        out.append((key, float(row["cycles_per_box"]["value"]),
                    (res.time_s - hw.launch_overhead_s) * row["clock_hz"] / TMA_STEPS))
    return out


TMA_PAIR = FEED.with_name("tma_pair.json")
TMA_PAIR_SHARE = FEED.with_name("tma_pair_share.json")
GROUPS = ("feed", "gemm_traffic", "gemm_traffic_hbm", "gemm_bcol", "suite_diff", "gemm_path", "tma", "tma_pair", "ring",
          "wmma_feed")


def _box_load(tensor: str, box_rows: int, coords: tuple, pitch: int = 8192) -> GlobalLoad:
    """A bulk load of a ``box_rows`` x 64 fp16 box (128-byte rows ``pitch`` bytes apart) in 16-byte chunks."""
    per_row = 128 // 16
    offs = [(i // per_row) * pitch + (i % per_row) * 16 for i in range(box_rows * per_row)]
    instrs = tuple(WarpAccess(tuple(offs[j:j + 32]), 16, tuple(range(j * 16, (j + len(offs[j:j + 32])) * 16, 16)))
                   for j in range(0, len(offs), 32))
    return GlobalLoad(TileRef(tensor, coords, box_rows * 128), instrs, dest="bulk")


def _tma_pair_program(row: dict) -> TileProgram:
    """A tma_pair_probe row (one thread per SM issues a GEMM k-step's A and B boxes on one mbarrier, ``stages``
    pairs in flight) as a tile program: both boxes' bulk loads in one step, pipeline depth ``stages + 1``
    (``stages`` pairs in flight while the thread waits).
    Tensors of 4096 halves a row (8192-byte pitch, as the probe's). ``l2_disjoint``: each SM its own
    resident tiles (named by ``bx``), ``l2_same``: every SM the same tiles, ``hbm``: fresh tiles every pair
    (named by ``bx`` and the step: never resident)."""
    grid = (row["grid"], 1, 1)
    if row["source"].startswith("l2_share"):  # G blocks read each pair: a grid of (grid / G, G), tiles by bx
        g = int(row["source"][len("l2_share"):])
        grid, coords = (row["grid"] // g, g, 1), ("bx", 0)
    else:
        coords = {"l2_disjoint": ("bx", 0), "l2_same": (0, 0), "hbm": ("bx", "k")}[row["source"]]
    loads = (_box_load("A", row["a_box"][0], coords), _box_load("B", row["b_box"][0], coords))
    launch = Launch(grid, 32, 32, row["smem_bytes"])
    return TileProgram(f"tma_pair_a{row['a_box'][0]}b{row['b_box'][0]}_{row['source']}_s{row['stages']}", launch,
                       (Phase("loop", TMA_STEPS, Step(loads=loads), pipeline_depth=row["stages"] + 1),))


def tma_pair_check(path: Path = TMA_PAIR, hardware: str = "h200", hw=None) -> list[tuple[str, float, float]]:
    """Per tma_pair_probe row: (row, measured, engine) issue-to-landing cycles of a pair at the row's clock.
    The probe's thread issues pair k as soon as pair k - stages has landed, so a pair's issue-to-landing
    time is ``stages`` periods of the steady loop: the engine's cycles per pair times ``stages``."""
    out = []
    base = hw if hw is not None else load(hardware)
    rows = dict(json.loads(Path(path).read_text())["rows"])
    share = Path(path).with_name(TMA_PAIR_SHARE.name)
    if share.exists():  # tma_pair_probe --only share: the 48 KiB pair read by G blocks
        rows.update(json.loads(share.read_text())["rows"])
    for key, row in rows.items():
        clk = float(row["sm_clock_hz"]["value"])
        h = with_overrides(base, sm_clock_hz=clk)
        prog = _tma_pair_program(row)
        check_program(prog, h)
        res = Engine(prog, h).run()
        out.append((key, float(row["lat_cycles"]["value"]),
                    (res.time_s - h.launch_overhead_s) * clk / TMA_STEPS * row["stages"]))
    return out


def _fence_rule(hold: str):
    def rule(hw) -> tuple[float, str]:
        return hw.get("cluster_release_fence_cycles"), hold
    return rule


#: cluster-release rules the ring rows judge: None is the profile's own (nvidia.cluster_release)
RELEASE_RULES = {"const": None, "fence": _fence_rule(""), "fence_last": _fence_rule("last"),
                 "fence_next": _fence_rule("next")}


def _ring_program(row: dict, source: str, pitch: int = 4096, pitch_b: int | None = None) -> TileProgram:
    """A ringw row as tc_gemm's wgmma k-loop on the ring's boxes. ``source`` "l2": the 16 MiB tensor, every
    k-step's boxes resident in L2 for every block (named as the same tiles every k-step);
    "hbm": the 1 GiB tensor, whose 64-k-step wrap re-reads 132 (c2) or 264 (c1) MiB, more than the L2 keeps:
    each block's own rows, the B box of pair p (c1: block p) being the A boxes of blocks 2p and 2p + 1 (so
    its two halves are named as those A boxes)."""
    c, mc = row["consumers"], row["multicast"]
    cfg = TcGemmConfig(m=64 * c * row["grid"], n=256, k=64 * RING_KSTEPS, instruction="wgmma", b_layout="col",
                       bm=64 * c, bn=256, bk=64, wm=64, wn=256, stages=row["stages"], consumers=c,
                       cluster=2 if mc else 1)
    step = lower(cfg).phases[0].step
    # the probe's boxes: A 128 x 64 whatever the consumers, rows of a 4096-half tensor
    la, lb, _ = _operand_loads(replace(cfg, k=pitch, consumers=2, bm=RING_BOX_ROWS), "bulk",
                               b_fraction=2 if mc else 1)
    if pitch_b is not None and pitch_b != pitch:  # B's rows at a pitch of their own
        lb = _operand_loads(replace(cfg, k=pitch_b, consumers=2, bm=RING_BOX_ROWS), "bulk",
                            b_fraction=2 if mc else 1)[1]
    half = RING_BOX_ROWS * 64 * 2
    if source == "l2":
        # named without the loop index: the same resident data every k-step (the engine's L2 then serves
        # every step after the first, and no copy waits for DRAM; the channel still carries every block's bytes)
        loads = (replace(la, tile=TileRef("A", (0, 0), la.tile.tile_bytes)),
                 replace(lb, tile=TileRef("B", (0, 0), lb.tile.tile_bytes)))
    else:
        if row["cluster"] == 2:  # grid (rank, pair): block 2 * by + bx
            own, pair = Affine((("by", 2), ("bx", 1))), "by"
        else:
            own, pair = "bx", "bx"
        loads = (replace(la, tile=TileRef("T", (own, "k"), half)),)
        if mc:  # each block's share of the multicast box: its own half (the other block's A box)
            loads += (replace(lb, tile=TileRef("T", (own, "k"), half)),)
        else:
            n = len(lb.instructions) // 2
            loads += (replace(lb, tile=TileRef("T", (Affine(((pair, 2),)), "k"), half), instructions=lb.instructions[:n]),
                      replace(lb, tile=TileRef("T", (Affine(((pair, 2),), 1), "k"), half),
                              instructions=lb.instructions[n:]))
    remote = row["remote_arrive"]
    arrives = (2 if row["release_all"] else 1) if remote else 0
    step = replace(step, loads=loads, cluster_arrives=arrives)
    grid = (2, row["grid"] // 2, 1) if row["cluster"] == 2 else (row["grid"], 1, 1)
    launch = Launch(grid, 128 * (1 + c), cfg.estimated_regs, row["smem_bytes"])
    return TileProgram(row["kernel"], launch, (Phase("loop", RING_KSTEPS, step, pipeline_depth=row["stages"]),))


def ring_cycles(row: dict, source: str, rule: str = "const", hardware: str = "h200", pitch: int = 4096,
                pitch_b: int | None = None) -> float:
    """The engine's cycles per k-step for a ring row at the row's recorded clock under a release rule (the
    boxes' rows ``pitch`` halves apart, B's ``pitch_b`` where given)."""
    hw = with_overrides(load(hardware), sm_clock_hz=row["clock_hz"])
    prog = _ring_program(row, source, pitch, pitch_b)
    check_program(prog, hw)
    fn = RELEASE_RULES[rule]
    if fn is None:
        res = Engine(prog, hw).run()  # at the recorded clock: no settling
    else:
        # the rule in place of the profile's, at every ring depth (a flat release-against-copies-in-flight
        # curve); the cost cache must not keep (or hand out) the other rule's steps
        cycles = fn(hw)[0]
        if hw.has("cluster_release_cycles_by_inflight"):
            hw = with_overrides(hw, cluster_release_cycles_by_inflight=((1, cycles), (4, cycles)))
        cost._cache.clear()
        try:
            with mock.patch.object(nvidia, "cluster_release", fn):
                res = Engine(prog, hw).run()
        finally:
            cost._cache.clear()
    return (res.time_s - hw.launch_overhead_s) * row["clock_hz"] / RING_KSTEPS


#: cluster_probe's suite_diff record: its ring (ringd_c2) moved toward the suite's cluster kernel one difference
#: at a time; the rows on L2-resident data are judged here (the streamed ones walk fresh tiles the ring
#: program does not name, the .flushed ones start behind a flushed L2, and the suite_1wave rows are the suite
#: kernel itself)
SUITE_DIFF = FEED.with_name("cluster_suite_diff.json")


def suite_diff_check(path: Path = SUITE_DIFF, hardware: str = "h200") -> list[tuple[str, float, float]]:
    """``[(row, measured, engine cycles per k-step)]`` for suite_diff's L2 rows: 2 consumers, 4 stages, a cluster
    of 2 with one remote release a consumer, B multicast or each block's own, the boxes' rows k halves apart (k_a
    and k_b: A's and B's)."""
    rows = json.loads(Path(path).read_text()).get("suite_diff", {})
    out = []
    for key, r in sorted(rows.items()):
        if r.get("src") != "l2" or r.get("l2_flushed"):  # the flushed rows start from HBM behind a dirty L2
            continue
        ring = {"consumers": r["consumers"], "multicast": r["multicast"], "grid": r["grid"], "stages": r["stages"],
                "cluster": 2, "remote_arrive": True, "release_all": r["release"] == "all",
                "smem_bytes": r["smem_bytes"], "kernel": f"{r['kernel']}.{key}", "clock_hz": r["clock_hz"]}
        pitch_a, pitch_b = (r["k"], r["k"]) if "k" in r else (r["k_a"], r["k_b"])  # ringd_ab_c2: each its own
        out.append((key, float(r["value"]), ring_cycles(ring, "l2", hardware=hardware, pitch=pitch_a, pitch_b=pitch_b)))
    return out


def ring_check(rings: dict = RINGS, hardware: str = "h200") -> list[dict]:
    """Per ring row: {source, row, key, measured, engine: {rule: cycles per k-step}}."""
    out = []
    for source, path in rings.items():
        for key, row in json.loads(Path(path).read_text())["wgmma"].items():
            out.append({"source": source, "key": key, "row": row, "measured": float(row["value"]),
                        "engine": {r: ring_cycles(row, source, r, hardware) for r in RELEASE_RULES}})
    return out


def ring_groups(got: list[dict]) -> dict[str, list[dict]]:
    """The rows each rule is judged on: the GEMM's release (remote, one thread per destination), its
    L2 / HBM and 2- / 4-stage parts, the rel_all rows, and the controls no rule touches."""
    rem = [g for g in got if g["row"]["remote_arrive"] and not g["row"]["release_all"]]
    return {"remote rel_one": rem,
            "  from L2": [g for g in rem if g["source"] == "l2"],
            "  from HBM": [g for g in rem if g["source"] == "hbm"],
            "  2 stages": [g for g in rem if g["row"]["stages"] == 2],
            "  4 stages": [g for g in rem if g["row"]["stages"] == 4],
            "remote rel_all": [g for g in got if g["row"]["remote_arrive"] and g["row"]["release_all"]],
            "controls (c1, c2_own_local)": [g for g in got if not g["row"]["remote_arrive"]]}


def ring_mape(rows: list[dict], rule: str) -> tuple[float, float]:
    """(MAPE, mean signed error) of ``rule`` over ``rows``."""
    e = [g["engine"][rule] / g["measured"] - 1 for g in rows]
    return statistics.mean(abs(x) for x in e), statistics.mean(e)

def mape(rows) -> float:
    return statistics.mean(abs(p / m - 1) for _, m, p in rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.studies.tensor_engine_check",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(FEED))
    ap.add_argument("--group", action="append", choices=GROUPS,
                    help="only these groups (repeatable; default all)")
    args = ap.parse_args(argv)
    want = set(args.group or GROUPS)
    if "tma_pair" in want:
        pair = tma_pair_check()
        s1 = [r for r in pair if r[0].endswith(".s1")]
        print(f"== tma_pair: tma_pair_probe's A+B box pairs on one mbarrier, issue to landing cycles: MAPE "
              f"{mape(pair) * 100:.1f}% over {len(pair)} rows (one in flight: {mape(s1) * 100:.1f}% over {len(s1)})")
        for sub in ("l2_disjoint.sms132", "l2_disjoint.sms1", "l2_share", "l2_same.sms132", "hbm.sms132", "hbm.sms1"):
            rows = [r for r in pair if f".{sub}." in r[0] or (sub == "l2_share" and ".l2_share" in r[0])]
            print(f"  MAPE {sub:20s} {mape(rows) * 100:5.1f}%  (bias {statistics.mean(p / m - 1 for _, m, p in rows) * 100:+5.1f}%)")
        for name, m, p in pair:
            print(f"  {name:42s} measured {m:6.0f}  engine {p:6.0f}  {(p / m - 1) * 100:+6.1f}%")
    if "wmma_feed" in want:
        wf = wmma_feed_check()
        print(f"== wmma_feed: wmma_feed_probe's staged-WMMA k-step (wmma / lds / ldsm fragments, copies or none, 2 or 1 "
              f"blocks per SM), cycles per k-step per block: MAPE {mape(wf) * 100:.1f}% over {len(wf)} rows")
        for name, m, p in wf:
            print(f"  {name:28s} measured {m:7.0f}  engine {p:7.0f}  {(p / m - 1) * 100:+6.1f}%")
    if not want & {"feed", "gemm_traffic", "gemm_traffic_hbm", "gemm_bcol", "suite_diff", "gemm_path", "tma", "ring"}:
        return 0
    try:
        got = check(Path(args.results)) if want & {"feed", "gemm_traffic", "gemm_traffic_hbm", "gemm_bcol"} else {}
    except (OSError, KeyError, ValueError) as e:
        print(f"tensor_engine_check: {e}", file=sys.stderr)
        return 2
    got = {g: r for g, r in got.items() if g in want}
    for group, rows in got.items():
        print(f"== {group}: MAPE {mape(rows) * 100:.1f}% over {len(rows)} rows")
        for name, m, p in rows:
            print(f"  {name:28s} measured {m:.3f}  predicted {p:.3f} HMMA/clk/SM  {(p / m - 1) * 100:+6.1f}%")
    if "suite_diff" in want:
        sd = suite_diff_check()
        print(f"== suite_diff: cluster_probe's ring moved toward the suite's cluster kernel (L2 rows), cycles per "
              f"k-step: MAPE {mape(sd) * 100:.1f}% over {len(sd)} rows")
        for name, m, p in sd:
            print(f"  {name:28s} measured {m:7.0f}  engine {p:7.0f}  {(p / m - 1) * 100:+6.1f}%")
    if "gemm_path" in want:
        _print_path(args.results)
    if "tma" in want:
        _print_tma()
    if "ring" in want:
        _print_ring()
    return 0


def _print_path(results) -> None:
    print("== gemm_path: what copies straddling sector boundaries add to the k-step (block cycles), row - control")
    for key, ctl, m, mc, p, pcl in path_check(Path(results)):
        print(f"  {key:26s} - {ctl:26s} measured {m:6.0f} - {mc:6.0f} = {m - mc:+5.0f}  "
              f"engine {p:6.0f} - {pcl:6.0f} = {p - pcl:+5.0f}")


def _print_tma() -> None:
    tma = tma_check()
    print(f"== tma: tensor_probe's TMA stream rows (1-3 boxes in flight), cycles per box: MAPE {mape(tma) * 100:.1f}% "
          f"over {len(tma)} rows")
    for name, m, p in tma:
        print(f"  {name:40s} measured {m:7.0f}  engine {p:7.0f}  {(p / m - 1) * 100:+6.1f}%")


def _print_ring() -> None:
    ring = ring_check()
    rules = list(RELEASE_RULES)
    print("== ring: cluster_probe wgmma rings, cycles per k-step at the row's clock, engine under each release rule")
    print(f"  {'row':46s} {'measured':>8s} " + " ".join(f"{r:>16s}" for r in rules))
    for g in ring:
        print(f"  {g['source'] + ' ' + g['key']:46s} {g['measured']:8.0f} "
              + " ".join(f"{g['engine'][r]:8.0f} ({(g['engine'][r] / g['measured'] - 1) * 100:+5.1f})" for r in rules))
    for name, rows in ring_groups(ring).items():
        print(f"  MAPE (bias) {name:28s} n={len(rows):2d} " + "  ".join(
            f"{r} {ring_mape(rows, r)[0] * 100:5.1f} ({ring_mape(rows, r)[1] * 100:+5.1f})" for r in rules))


if __name__ == "__main__":
    sys.exit(main())
