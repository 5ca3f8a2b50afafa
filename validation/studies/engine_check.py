"""The engine against its own microbenchmarks (CPU): can it predict the loops it was calibrated on?

``validation/calibration/microbench.cu`` has register-tiled inner loops fed from shared memory
(``lds_outer_<TM>x<TN>``: 8 rounds per iteration, each loading TM values of A and TN of B with
16-byte shared loads and doing TM x TN FFMA) and the same with a non-pipelined GEMM k-step's staging
(``staged_outer_*``: barrier, the block's next tiles stored, barrier), and with those tiles first
loaded from global memory, the block's own lines, L2 hits (``gstaged_outer_*``), as a non-pipelined
GEMM's k-step, with A by 16-byte or by 4-byte loads and stores (``sgstaged_outer_*``, as the
non-vectorized GEMMs), and with a new tile from HBM every k-step (``dgstaged_outer_*``; loaded a
k-step ahead in the source, ``pdgstaged_outer_*``, though not in the binary: :data:`AS_COMPILED`;
block regions padded, ``xdgstaged_outer_*``; the 8x8 one under ``__launch_bounds__``, so that it holds
the blocks its shared memory allows, ``ldgstaged_outer_8x8_<w>w``). Each program carries its kernel's
compiled register count (:data:`REGS_AS_COMPILED`, or the row's recorded ``num_regs``): the 8x8
HBM-streaming kernels' 143 (130) registers hold 3 blocks of 4 warps, or 1 of 8, not the 4 or 2 their
shared memory allows, and the engine runs their grids in as many waves as the GPU did.
``python -m validation.calibration.calibrate --lds-outer`` and ``--staged-outer`` recorded their issue
rates. Here each is written as a :class:`~tilesim.program.TileProgram` (tile program v2: one phase
whose step is one loop iteration, a k-step of 8 rounds, with the benchmark's lane offsets; the
engine's cost model derives wavefronts, sectors and the critical path; the SASS loop's instruction
count as recorded) and simulated; the table compares the engine's warp instructions per clock per
SM with the measured ones.

``python -m validation.studies.engine_check`` prints it (``--results DIR``: other recorded JSON).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from tilesim import hardware
from tilesim.cost import step_cost
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
from validation.calibration.calibrate import STAGED_VARIANTS
from validation.harness.suite import recorded_dir

#: the calibration microbenchmarks it replays (lds_outer.json, staged_outer.json)
DEFAULT_DIR = recorded_dir("calibration")
ROUNDS = 8  # rounds (k values) per loop iteration in microbench.cu
ITERS = 2000
SMEM_PER_SM_BYTES = 227 * 1024  # what the benchmarks divide among the blocks of an SM
LANES = 32
F4 = 16  # bytes of a float4
# what a variant's binary does where it differs from its source: nvcc 13.0 -arch=sm_90 (the recorded
# runs' compiler) issues pdgstaged_outer's next-tile loads (LDG) after the k-step's FFMAs, just before
# the loop's back-edge, its barrier and the shared stores that use them, so the loop does not load
# ahead (the load latency is exposed as in dgstaged_outer; tests/test_loop_invariant_tiles.py reads
# it from the SASS): its rows are simulated as the binary runs
AS_COMPILED = {"pdgstaged_outer": {"prefetch": False}}
# registers per thread of each benchmark kernel as nvcc 13.0 -arch=sm_90 -O3 compiles microbench.cu (the
# recorded runs' compiler, flags and source: ptxas's "Used N registers", tests/test_engine_check_groups.py
# recompiles and compares). They decide how many blocks an SM holds: dgstaged_outer_8x8 and
# xdgstaged_outer_8x8 use 143 (144 a thread once allocated by warp: 3 warps per SM sub-partition of 16384
# registers, so 3 blocks of 4 warps or 1 of 8 share an SM, not the 4 or 2 the shared memory allows; the
# grid of 4 (2) blocks per SM runs as 1.33 (2) waves), pdgstaged_outer_8x8 130 (the same 3 / 1);
# gstaged_outer_8x8 uses 128, exactly 4 blocks of 4 warps
REGS_AS_COMPILED = {
    "lds_outer_8x8": 111, "lds_outer_8x4": 71, "lds_outer_4x4": 47, "lds_outer_rm_8x8": 128,
    "staged_outer_8x8": 121, "staged_outer_4x4": 56,
    "gstaged_outer_8x8": 128, "gstaged_outer_4x4": 56,
    "sgstaged_outer_8x8": 128, "sgstaged_outer_4x4": 56,
    "dgstaged_outer_8x8": 143, "dgstaged_outer_4x4": 56,
    "pdgstaged_outer_8x8": 130, "pdgstaged_outer_4x4": 64,
    "xdgstaged_outer_8x8": 143, "xdgstaged_outer_4x4": 56,
    "ldgstaged_outer_8x8_4w": 125, "ldgstaged_outer_8x8_8w": 125,  # under __launch_bounds__ (4 x 4, 2 x 8 warps)
}
DEFAULT_REGS = 64  # a program written without a kernel's count (tests)


def _warp(offsets, width: int, shared: bool = False) -> WarpAccess:
    """One warp instruction; ``shared``: the data lands at the same offsets in shared memory (the
    benchmarks' tiles are laid out alike in global and shared memory)."""
    offs = tuple(offsets)
    return WarpAccess(offs, width, offs if shared else None)


def outer_program(hw, tm: int, tn: int, warps: int, blocks_per_sm: int, instr_per_iter: float,
                  staged: bool, global_tiles: bool = False, scalar: bool = False,
                  stream: bool = False, iters: int = ITERS, prefetch: bool = False,
                  regs_per_thread: int = DEFAULT_REGS) -> TileProgram:
    """The tile program of ``lds_outer_<tm>x<tn>`` (``staged=False``, one block per SM) or
    ``staged_outer_<tm>x<tn>`` with ``blocks_per_sm`` blocks of ``warps`` warps; ``global_tiles``:
    ``gstaged_outer``, whose tiles are loaded each k-step from the block's own lines (L2 hits: the
    tile's coordinates do not name the k index, and its loads bypass L1 as the benchmark's
    ``__ldcg`` do);
    ``scalar``: ``sgstaged_outer``, A by 4-byte loads and stores; ``stream``: ``dgstaged_outer``, a new
    tile every k-step (HBM reads); ``prefetch``: that tile loaded a k-step ahead (register prefetch,
    as ``pdgstaged_outer``'s source asks; its binary does not, see :data:`AS_COMPILED`);
    ``regs_per_thread``: the compiled kernel's (:data:`REGS_AS_COMPILED`), which with the shared memory
    decides how many blocks share an SM.

    One step is one loop iteration (a k-step of 8 rounds), written with the lane offsets of
    ``microbench.cu``; the engine's cost model derives wavefronts, sectors and the critical path
    (the shared-load latency, the barriers and the FFMA chain of the 8 rounds). The instructions
    the SASS loop has beyond the loads, stores, barriers and FFMA are integer work.
    """
    threads = LANES * warps
    aw = (warps if staged else 32) * 4 * tm  # A row length in floats, as in microbench.cu
    bw = 8 * tn
    b_base = 16 * aw * 4  # Bs follows the 16 rows of As
    # the inner loop's shared loads, warp 0's (the other warps' are the same shifted by a multiple of
    # 16 bytes: the same wavefronts): per round, A fragments (lanes l share row group l // 8) and
    # B fragments (lane l reads columns (l % 8) * tn ..), 16 bytes each
    frag = []
    for k in range(ROUNDS):
        for i in range(0, tm, 4):
            frag.append(_warp(((k * aw + (lane // 8) * tm + i) * 4 for lane in range(LANES)), F4))
        for j in range(0, tn, 4):
            frag.append(_warp((b_base + (k * bw + (lane % 8) * tn + j) * 4 for lane in range(LANES)), F4))
    shared_loads = (SharedAccess(tuple(frag), repeat=warps),)
    ffma = ROUNDS * tm * tn * warps
    # the k-step's staging: each thread tm/4 float4 of A (tm floats by 4-byte accesses when scalar) at
    # consecutive addresses, threads 0 .. 2*tn-1 one float4 of B; from registers (staged_outer) or
    # loaded first from global memory (the block's own lines) through registers (global_tiles)
    a_width = 4 if scalar else F4
    a_instr = [_warp(((q * threads + w * LANES + lane) * a_width for lane in range(LANES)), a_width,
                     shared=True)
               for q in range(tm if scalar else tm // 4) for w in range(warps)]
    b_active = 2 * tn
    b_instr = [_warp((lane * F4 if lane < b_active else None for lane in range(LANES)), F4, shared=True)]
    loads: tuple = ()
    shared_stores: tuple = ()
    if global_tiles:
        a_bytes, b_bytes = (tm if scalar else tm // 4) * threads * a_width, b_active * F4
        coords = ("bx", "k") if stream else ("bx",)
        b_glob = [WarpAccess(tuple(None if o is None else a_bytes + o for o in w.offsets), F4,
                             tuple(None if o is None else b_base + o for o in w.offsets)) for w in b_instr]
        # every global tile load of microbench.cu's lds_outer is __ldcg (ld.global.cg): L2 only
        loads = (GlobalLoad(TileRef("A", coords, a_bytes), tuple(a_instr), dest="shared", bypass_l1=True),
                 GlobalLoad(TileRef("B", coords, b_bytes), tuple(b_glob), dest="shared", bypass_l1=True))
    elif staged:
        b_st = [WarpAccess(tuple(None if o is None else b_base + o for o in w.offsets), F4) for w in b_instr]
        shared_stores = (SharedAccess(tuple(WarpAccess(w.offsets, w.width_bytes) for w in a_instr) + tuple(b_st)),)
    barriers = 2 if staged else 0
    fma = Compute("fma", ffma, chain=ROUNDS)
    step = Step(loads=loads, shared_stores=shared_stores, barriers=barriers, shared_loads=shared_loads,
                compute=(fma,), rounds=ROUNDS)
    # the SASS loop's instructions beyond what the cost model counts (loads, their shared stores,
    # shared loads, barriers, FFMA) are integer work: loop, address and predicate arithmetic
    other = max(0.0, instr_per_iter * warps - step_cost(step, hw, warps).issue)
    step = replace(step, compute=(fma, Compute("int", other)))
    smem = SMEM_PER_SM_BYTES // blocks_per_sm - 2048
    name = f"{'d' if stream else ''}{'g' if global_tiles else ''}{'staged' if staged else 'lds'}_outer_{tm}x{tn}"
    return TileProgram(name=name,
                       launch=Launch(grid=(hw.sm_count * blocks_per_sm, 1, 1), threads_per_block=threads,
                                     regs_per_thread=regs_per_thread, smem_bytes_per_block=smem),
                       phases=(Phase("k-loop", iters, step, pipeline_depth=2 if prefetch else 1,
                                     warp_groups=1 if staged else warps),),
                       flops=2.0 * LANES * ffma * iters)


def check(results: Path = DEFAULT_DIR, hw=None, on_progress=None) -> list[dict]:
    """One row per recorded microbenchmark case: measured and engine instructions per clock per SM,
    ``error`` of the engine's rate (positive: the engine is fast) and ``time_error`` of its loop time
    (negative: fast); ``on_progress(done, total)`` after each case, when given."""
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
            # padding the blocks' regions changes addresses only, which the tile program does not see; the
            # launch bounds change the registers (REGS_AS_COMPILED), not the loop's work
            flags = {"staged": True, **{k: v for k, v in kw.items() if k not in ("padded", "bounded")},
                     **AS_COMPILED.get(part, {})}
            for key, r in rec.get(part, {}).get("rows", {}).items():
                cases.append((f"{part} {key}", r, r["tm"], r["tn"], r["warps_per_block"], r["blocks_per_sm"], flags))
    for i, (name, r, tm, tn, warps, per_sm, flags) in enumerate(cases, 1):
        prog = outer_program(hw, tm, tn, warps, per_sm, r["instr_per_iter"], iters=r.get("iters", ITERS),
                             regs_per_thread=r.get("num_regs") or REGS_AS_COMPILED[r["benchmark"]], **flags)
        res = simulate_program(prog, hw)
        engine = warps * per_sm * prog.phases[0].trips * r["instr_per_iter"] / (res.time_s * hw.sm_clock_hz)
        rows.append({"case": name, "blocks_per_sm": res.blocks_per_sm, "warps_per_block": warps,
                     "measured": r["value"], "engine": engine, "error": engine / r["value"] - 1,
                     "time_error": r["value"] / engine - 1})
        if on_progress is not None:
            on_progress(i, len(cases))
    return rows


STALLS_FILE = "outer_stalls_ncu/outer_stalls.json"  # outer_stalls_probe's record, beside lds_outer.json
STALL_COLUMNS = ("short_scoreboard", "long_scoreboard", "not_selected", "wait", "dispatch_stall", "barrier")


def stall_table(rows: list[dict], stalls: dict) -> str:
    """The engine's error beside where the GPU's warps waited in the same loop (``stalls``: outer_stalls.json,
    its profiled run): warp cycles per issued instruction, issue slots used, and the stalls of
    :data:`STALL_COLUMNS` per issued instruction. Rows without a profile are left out."""
    head = f"{'microbenchmark':30s} {'error':>6s} {'cyc/iss':>7s} {'issue%':>6s}" + "".join(
        f" {c[:11]:>11s}" for c in STALL_COLUMNS)
    lines = [head + "  (stalls: warp cycles per issued instruction, Nsight Compute)"]
    for r in rows:
        got = stalls.get("rows", {}).get(r["case"])
        if got is None:
            continue
        s = got["summary"]
        per = s["stalls_per_issue"]
        lines.append(f"{r['case']:30s} {r['error'] * 100:+5.0f}% {s['cycles_per_issue']:7.2f} {s['issue_active_pct']:6.1f}"
                     + "".join(f" {per.get(c, 0.0):11.2f}" for c in STALL_COLUMNS))
    return "\n".join(lines)


def group_summary(rows: list[dict], bar: float = 0.10) -> list[dict]:
    """Per microbenchmark kind (the case's first word: lds_outer, staged_outer, gstaged_outer ...), in
    order of appearance: rows, mean |error|, the most negative and most positive error, and how many
    rows lie beyond ``bar``. (The error is of the issue rate: positive means the engine is fast.)"""
    groups: dict[str, list[float]] = {}
    for r in rows:
        groups.setdefault(r["case"].split()[0], []).append(r["error"])
    return [{"group": g, "rows": len(e), "mape": sum(abs(x) for x in e) / len(e), "min": min(e), "max": max(e),
             "beyond": sum(abs(x) > bar for x in e)} for g, e in groups.items()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation.studies.engine_check", description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=DEFAULT_DIR)
    p.add_argument("--hbm-tiles", action="store_true",
                   help="also the hbm_tiles_probe rows (validation/studies/hbm_tiles_check.py: k-step cycles, "
                        "and the loads' part of them)")
    p.add_argument("--stalls", action="store_true",
                   help=f"also where the GPU's warps waited in the same loops ({STALLS_FILE}, Nsight Compute: "
                        "validation/calibration/outer_stalls_probe.py)")
    ns = p.parse_args(argv)
    from tilesim.cli.progress import progress  # noqa: PLC0415

    with progress("engine_check: microbenchmarks simulated") as update:
        rows = check(ns.results, on_progress=update)
    if not rows:
        print(f"engine_check: no lds_outer.json / staged_outer.json in {ns.results}", file=sys.stderr)
        return 1
    print(f"{'microbenchmark':30s} {'blocks/SM':>9s} {'measured':>9s} {'engine':>7s} {'error':>7s} {'time':>7s}"
          "  (warp instr/clk/SM; time: the loop's time error)")
    for r in rows:
        print(f"{r['case']:30s} {r['blocks_per_sm']:9d} {r['measured']:9.2f} {r['engine']:7.2f} {r['error'] * 100:+6.0f}% "
              f"{r['time_error'] * 100:+6.0f}%")
    print(f"\n{'group':16s} {'rows':>4s} {'MAPE':>6s} {'min':>6s} {'max':>6s} {'>10%':>5s}")
    for g in group_summary(rows):
        print(f"{g['group']:16s} {g['rows']:4d} {g['mape'] * 100:5.1f}% {g['min'] * 100:+5.0f}% {g['max'] * 100:+5.0f}% "
              f"{g['beyond']:5d}")
    print(f"{'all':16s} {len(rows):4d} {sum(abs(r['error']) for r in rows) / len(rows) * 100:5.1f}%"
          f"{'':14s}{sum(abs(r['error']) > 0.10 for r in rows):5d}")
    stalls = ns.results / STALLS_FILE
    if ns.stalls and stalls.exists():
        print()
        print(stall_table(rows, json.loads(stalls.read_text())))
    tiles = ns.results / "hbm_tiles.json"
    if ns.hbm_tiles and tiles.exists():
        from validation.studies import hbm_tiles_check  # noqa: PLC0415

        print()
        hbm_tiles_check.main(["--results", str(tiles)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
