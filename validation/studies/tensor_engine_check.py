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
  layout for mode gemm_pad; B is copied as in the other rows.

Both groups take the k-step's fragment loads in one round ahead of its MMAs, as the compiler
schedules them (the SASS order of each row).

Rows come from ``validation/results/h200/calibration/mma_feed.json``; nothing here needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

from tilesim.engine.sim import simulate_program
from tilesim.hardware import load
from tilesim.kernels.tc_gemm.config import TcGemmConfig
from tilesim.kernels.tc_gemm.lower import _fragment_reads, _operand_loads
from tilesim.program import Launch, Mma, Phase, SharedAccess, Step, TileProgram, TileRef

FEED = Path(__file__).resolve().parents[1] / "results" / "h200" / "calibration" / "mma_feed.json"
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
    la, lb = _operand_loads(a_cfg, "async")[0], _operand_loads(replace(cfg, layout=a_cfg.layout), "async")[1]
    loads = tuple(replace(ld, address_instructions=addr, tile=TileRef(ld.tile.tensor, (0, "k"), ld.tile.tile_bytes))
                  for ld in (la, lb)) if row["copies_per_thread_per_kstep"] else ()
    mma = Mma(HMMA, "fp16", warps * (wm // 16) * (wn // 8) * slices, chain=slices)
    step = Step(loads=loads, shared_loads=(SharedAccess(tuple(_reads(cfg, slices)), repeat=warps),), barriers=1,
                compute=(mma,))
    launch = Launch((row.get("grid") or 132 * blocks, 1, 1), 32 * warps, 210, row.get("smem_bytes") or 120 * 1024)
    prog = TileProgram(row["kernel"], launch, (Phase("loop", SLICES // slices, step, pipeline_depth=ring if loads else 1),))
    return prog, mma.count * (SLICES // slices) * blocks


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
    for group, row, build in rows:
        prog, hmma_per_sm = build(row)
        res = simulate_program(prog, hw)
        cycles = (res.time_s - hw.launch_overhead_s) * res.sm_clock_hz
        out[group].append((row["kernel"], float(row["hmma_per_clk_sm"]["value"]), hmma_per_sm / cycles))
    return out


def mape(rows) -> float:
    return statistics.mean(abs(p / m - 1) for _, m, p in rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.studies.tensor_engine_check",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(FEED))
    args = ap.parse_args(argv)
    try:
        got = check(Path(args.results))
    except (OSError, KeyError, ValueError) as e:
        print(f"tensor_engine_check: {e}", file=sys.stderr)
        return 2
    for group, rows in got.items():
        print(f"== {group}: MAPE {mape(rows) * 100:.1f}% over {len(rows)} rows")
        for name, m, p in rows:
            print(f"  {name:28s} measured {m:.3f}  predicted {p:.3f} HMMA/clk/SM  {(p / m - 1) * 100:+6.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
