"""The engine against its own microbenchmarks (CPU): can it predict the loops it was calibrated on?

``validation/kernels/microbench.cu`` has register-tiled inner loops fed from shared memory
(``lds_outer_<TM>x<TN>``: 8 rounds per iteration, each loading TM values of A and TN of B with
16-byte shared loads and doing TM x TN FFMA) and the same with a non-pipelined GEMM k-step's staging
(``staged_outer_*``: barrier, the block's next tiles stored, barrier), and with those tiles first
loaded from global memory, the block's own lines, L2 hits (``gstaged_outer_*``), as a non-pipelined
GEMM's k-step, with A by 16-byte or by 4-byte loads and stores (``sgstaged_outer_*``, as the
non-vectorized GEMMs). ``calibrate.py --lds-outer`` and ``--staged-outer`` recorded their issue rates. Here each is written as a
:class:`~tilesim.program.TileProgram` (one iteration = one k-step; the SASS loop's instruction count
as recorded) and simulated; the table compares the engine's warp instructions per clock per SM with
the measured ones.

``python -m validation.studies.engine_check`` prints it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tilesim import hardware
from tilesim.cost.access import l1_cycles, smem_wavefronts
from tilesim.engine import simulate_program
from tilesim.program import (
    Compute,
    Epilogue,
    GlobalAccess,
    KStep,
    Launch,
    SharedAccess,
    TileProgram,
    TileRef,
)
from validation.calibration.calibrate import STAGED_VARIANTS
from validation.harness.suite import recorded_dir

#: the calibration microbenchmarks it replays (lds_outer.json, staged_outer.json)
DEFAULT_DIR = recorded_dir("calibration")
ROUNDS = 8  # rounds (k values) per loop iteration in microbench.cu
ITERS = 2000
SMEM_PER_SM_BYTES = 227 * 1024  # what the benchmarks divide among the blocks of an SM


def outer_program(hw, tm: int, tn: int, warps: int, blocks_per_sm: int, instr_per_iter: float,
                  staged: bool, global_tiles: bool = False, scalar: bool = False,
                  stream: bool = False, iters: int = ITERS, prefetch: bool = False) -> TileProgram:
    """The tile program of ``lds_outer_<tm>x<tn>`` (``staged=False``, one block per SM) or
    ``staged_outer_<tm>x<tn>`` with ``blocks_per_sm`` blocks of ``warps`` warps; ``global_tiles``:
    ``gstaged_outer``, whose tiles are loaded each k-step from the block's own lines (L2 hits);
    ``scalar``: ``sgstaged_outer``, A by 4-byte loads and stores; ``stream``: ``dgstaged_outer``, a new
    tile every k-step (HBM reads); ``prefetch``: ``pdgstaged_outer``, that tile loaded a k-step ahead."""
    aw = (warps if staged else 32) * 4 * tm  # A row length in floats, as in microbench.cu
    bw = 8 * tn
    banks, width = hw.smem_banks, hw.smem_bank_width_bytes
    lds_instr = lds_wave = 0.0
    for w in range(warps):
        for k in range(ROUNDS):
            for i in range(0, tm, 4):  # A fragment: lanes l share row group l // 8
                addrs = [(k * aw + (w * 4 + lane // 8) * tm + i) * 4 for lane in range(32)]
                lds_instr += 1
                lds_wave += smem_wavefronts(addrs, 16, banks, width)
            for j in range(0, tn, 4):  # B fragment: lane l reads columns (l % 8) * tn ..
                addrs = [(16 * aw + k * bw + (lane % 8) * tn + j) * 4 for lane in range(32)]
                lds_instr += 1
                lds_wave += smem_wavefronts(addrs, 16, banks, width)
    ffma = ROUNDS * tm * tn * warps
    stores = SharedAccess()
    if staged:  # each thread stores tm/4 float4 of A (tm floats when scalar); 2*tn threads one float4 of B
        a_st = tm * warps if scalar else (tm // 4) * warps
        b_st = -(-2 * tn // 32)
        stores = SharedAccess(bytes=(ROUNDS * aw + ROUNDS * bw) * 4, instructions=a_st + b_st,
                              wavefronts=(1 if scalar else 4) * a_st + 4 * b_st)
    loads: tuple = ()
    if global_tiles:  # 16-byte L2 loads of the block's own lines: A (tm/4 per thread), B (2 tn threads)
        width = 4 if scalar else 16
        a_instr, b_instr = (tm // 4) * warps * (4 if scalar else 1), -(-2 * tn // 32)
        a_bytes, b_bytes = a_instr * 32 * width, 2 * tn * 16
        a_l1 = a_instr * l1_cycles([lane * width for lane in range(32)], width, hw)
        b_l1 = b_instr * l1_cycles([lane * 16 for lane in range(2 * tn)], 16, hw)
        coords = ("bx", "k") if stream else ("bx",)
        loads = (GlobalAccess(TileRef("A", coords, a_bytes), a_bytes, a_bytes / hw.sector_bytes, a_l1, a_instr,
                              dest="shared"),
                 GlobalAccess(TileRef("B", coords, b_bytes), b_bytes, b_bytes / hw.sector_bytes, b_l1, b_instr,
                              dest="shared"))
    other = max(0.0, instr_per_iter * warps - ffma - lds_instr - stores.instructions
                - sum(ld.instructions for ld in loads))
    crit = hw.smem_latency_cycles * (3 if staged else 1) + ROUNDS * 4
    step = KStep(loads=loads, smem_stores=stores,
                 smem_loads=SharedAccess(bytes=int(lds_instr * 512), instructions=lds_instr, wavefronts=lds_wave),
                 compute=Compute(ffma=ffma, other=other, critical_path_cycles=crit, rounds=ROUNDS),
                 barriers=2 if staged else 0)
    smem = SMEM_PER_SM_BYTES // blocks_per_sm - 2048
    return TileProgram(name=f"{'d' if stream else ''}{'g' if global_tiles else ''}{'staged' if staged else 'lds'}_outer_{tm}x{tn}",
                       launch=Launch(grid=(hw.sm_count * blocks_per_sm, 1, 1), threads_per_block=32 * warps,
                                     regs_per_thread=64, smem_bytes_per_block=smem),
                       iterations=iters, step=step, epilogue=Epilogue(), flops=2.0 * ffma * iters,
                       warp_groups=1 if staged else warps, pipeline_depth=2 if prefetch else 1)


def check(results: Path = DEFAULT_DIR, hw=None) -> list[dict]:
    """One row per recorded microbenchmark case: measured and engine instructions per clock per SM."""
    hw = hw or hardware.load("h200")
    rows = []
    cases = []
    lds = results / "lds_outer.json"
    if lds.exists():
        for key, r in json.loads(lds.read_text())["lds_outer"]["rows"].items():
            if not key.startswith("rm_"):  # the row-major variant has a different fragment pattern
                cases.append((f"lds_outer {key}", r, r["tm"], r["tn"], r["warps_per_sm"], 1, {"staged": False}))
    staged = results / "staged_outer.json"
    if staged.exists():
        rec = json.loads(staged.read_text())
        for part, kw in STAGED_VARIANTS.items():
            # padding the blocks' regions changes addresses only, which the tile program does not see
            flags = {"staged": True, **{k: v for k, v in kw.items() if k != "padded"}}
            for key, r in rec.get(part, {}).get("rows", {}).items():
                cases.append((f"{part} {key}", r, r["tm"], r["tn"], r["warps_per_block"], r["blocks_per_sm"], flags))
    for name, r, tm, tn, warps, per_sm, flags in cases:
        prog = outer_program(hw, tm, tn, warps, per_sm, r["instr_per_iter"], iters=r.get("iters", ITERS), **flags)
        res = simulate_program(prog, hw)
        engine = warps * per_sm * prog.iterations * r["instr_per_iter"] / (res.time_s * hw.sm_clock_hz)
        rows.append({"case": name, "blocks_per_sm": res.blocks_per_sm, "warps_per_block": warps,
                     "measured": r["value"], "engine": engine, "error": engine / r["value"] - 1})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation.studies.engine_check", description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=DEFAULT_DIR)
    ns = p.parse_args(argv)
    rows = check(ns.results)
    if not rows:
        print(f"engine_check: no lds_outer.json / staged_outer.json in {ns.results}", file=sys.stderr)
        return 1
    print(f"{'microbenchmark':30s} {'blocks/SM':>9s} {'measured':>9s} {'engine':>7s} {'error':>7s}  (warp instr/clk/SM)")
    for r in rows:
        print(f"{r['case']:30s} {r['blocks_per_sm']:9d} {r['measured']:9.2f} {r['engine']:7.2f} {r['error'] * 100:+6.0f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
