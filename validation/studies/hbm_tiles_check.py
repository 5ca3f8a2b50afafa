"""The engine against hbm_tiles_probe (CPU): does it predict the k-step of blocks streaming HBM tiles?

``validation/calibration/hbm_tiles_probe.cu`` (``ht_tiles``) runs dgstaged_outer_8x8's staging k-step
on every SM with 1-8 blocks of 4 or 8 warps per SM: barrier, two 16-byte ``__ldcg`` loads per thread
of the block's own tile (4 or 8 KiB, a fresh contiguous chunk each k-step: layout ``contig``) or,
layout ``none``, the same stores from registers; their shared stores, barrier, one shared load, then
0 or 512 FFMA per thread in 8 independent chains. The probe records each k-step's clock64 cycles;
here each ``contig`` and ``none`` case is written as a :class:`~tilesim.program.TileProgram` (one
phase, a step per k-step) and the engine's steady k-step (the time of 256 k-steps less that of 128,
over 128) is compared with the recorded k-step of the median block (``block_cycles`` over the k-steps: at 8
blocks per SM the k-steps' median is far from their mean), and the loads' part of it
(``contig`` less ``none``) with the recorded one.

The kernel's SASS loop is not recorded; the integer work beside the loads, stores, barriers, shared
load and FFMA is taken as :data:`OTHER_INSTR_PER_WARP` per warp and k-step (loop counter, addresses,
the clock64 read and the step record). It is the same for ``contig`` and ``none``, so the loads'
part does not depend on it.

``python -m validation.studies.hbm_tiles_check`` prints the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tilesim import hardware
from tilesim.engine import simulate_program
from tilesim.program import (
    Compute,
    GlobalLoad,
    Launch,
    Phase,
    SharedAccess,
    Step,
    TileProgram,
    TileRef,
    WarpAccess,
)
from validation.calibration.hbm_tiles_probe import (
    FFMA_CHAINS,
    LANES,
    VEC_BYTES,
    VEC_PER_THREAD,
    smem_bytes,
    tile_bytes,
)
from validation.harness.suite import recorded_dir

DEFAULT_FILE = recorded_dir("calibration") / "hbm_tiles.json"
OTHER_INSTR_PER_WARP = 16  # integer work a warp and k-step beyond what the program names (see above)
REGS = 32  # the recorded kernel's num_regs (hbm_tiles.json cases' kernel.num_regs)
LAYOUTS = ("none", "contig")


def tiles_program(hw, layout: str, blocks_per_sm: int, warps: int, ffma: int, iters: int) -> TileProgram:
    """The tile program of hbm_tiles_probe case (``layout``, ``blocks_per_sm``, ``warps``, ``ffma``)."""
    threads = warps * LANES
    tb = tile_bytes(warps)
    instr = tuple(WarpAccess(tuple((q * threads + w * LANES + lane) * VEC_BYTES for lane in range(LANES)),
                             VEC_BYTES, tuple((q * threads + w * LANES + lane) * VEC_BYTES for lane in range(LANES)))
                  for q in range(VEC_PER_THREAD) for w in range(warps))
    loads: tuple = ()
    stores: tuple = ()
    if layout == "contig":
        loads = (GlobalLoad(TileRef("T", ("bx", "k"), tb), instr, dest="shared", bypass_l1=True),)
    elif layout == "none":
        stores = (SharedAccess(tuple(WarpAccess(w.offsets, w.width_bytes) for w in instr)),)
    else:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    lds = SharedAccess((WarpAccess(tuple(lane * VEC_BYTES for lane in range(LANES)), VEC_BYTES),), repeat=warps)
    compute = [Compute("int", OTHER_INSTR_PER_WARP * warps)]
    if ffma:
        compute.insert(0, Compute("fma", ffma * warps, chain=ffma / FFMA_CHAINS))
    step = Step(loads=loads, shared_stores=stores, barriers=2, shared_loads=(lds,), compute=tuple(compute))
    return TileProgram(name=f"ht_tiles_{layout}_{blocks_per_sm}b_{warps}w_f{ffma}",
                       launch=Launch(grid=(hw.sm_count * blocks_per_sm, 1, 1), threads_per_block=threads,
                                     regs_per_thread=REGS, smem_bytes_per_block=smem_bytes(blocks_per_sm)),
                       phases=(Phase("k-loop", iters, step),), flops=2.0 * LANES * ffma * warps * iters,
                       min_hbm_bytes=float(hw.sm_count * blocks_per_sm * tb * iters) if loads else 0.0)


def engine_step_cycles(hw, layout: str, blocks_per_sm: int, warps: int, ffma: int, iters: int = 128) -> float:
    """The engine's steady k-step in SM cycles: (time of 2 x ``iters`` k-steps - time of ``iters``) / ``iters``."""
    t = [simulate_program(tiles_program(hw, layout, blocks_per_sm, warps, ffma, n), hw).time_s
         for n in (iters, 2 * iters)]
    return (t[1] - t[0]) / iters * hw.sm_clock_hz


def check(path: Path = DEFAULT_FILE, hw=None) -> list[dict]:
    """One row per recorded contig case: measured and engine k-step cycles (``step``), the same for the
    case's ``none`` twin, and the loads' part (``loads``: contig less none). ``error``: of the engine's
    k-step rate (positive: the engine is fast), as engine_check's."""
    hw = hw or hardware.load("h200")
    rec = json.loads(path.read_text())
    rows = []
    for name, c in rec["cases"].items():
        if c["layout"] != "contig":
            continue
        key = (c["blocks_per_sm"], c["warps"], c["ffma_per_thread"])
        twin = rec["cases"].get(name.replace("contig_", "none_", 1))
        eng = engine_step_cycles(hw, "contig", *key)
        eng_none = engine_step_cycles(hw, "none", *key)
        meas = c["block_cycles"]["value"] / rec["iters"]
        meas_none = twin["block_cycles"]["value"] / rec["iters"] if twin else float("nan")
        rows.append({"case": f"hbm_tiles {name}", "blocks_per_sm": key[0], "warps": key[1], "ffma": key[2],
                     "measured": meas, "engine": eng, "error": meas / eng - 1,
                     "measured_none": meas_none, "engine_none": eng_none,
                     "measured_loads": meas - meas_none, "engine_loads": eng - eng_none})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation.studies.hbm_tiles_check", description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=DEFAULT_FILE)
    ns = p.parse_args(argv)
    rows = check(ns.results)
    print(f"{'case':32s} {'measured':>9s} {'engine':>7s} {'error':>6s} {'none m':>7s} {'none e':>7s} "
          f"{'loads m':>8s} {'loads e':>8s}  (k-step cycles)")
    for r in rows:
        print(f"{r['case']:32s} {r['measured']:9.0f} {r['engine']:7.0f} {r['error'] * 100:+5.0f}% "
              f"{r['measured_none']:7.0f} {r['engine_none']:7.0f} {r['measured_loads']:8.0f} {r['engine_loads']:8.0f}")
    print(f"MAPE {sum(abs(r['error']) for r in rows) / len(rows) * 100:.1f}% over {len(rows)} rows, "
          f"{sum(abs(r['error']) > 0.10 for r in rows)} beyond 10%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
