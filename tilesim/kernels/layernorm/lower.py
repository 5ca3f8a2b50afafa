"""The layernorm family's lowering: a :class:`LayerNormConfig` as one :class:`TileProgram`.

What every block of ``validation/families/layernorm/layernorm.cu`` does, pass by pass. A block owns
``rows_per_block`` rows (one for ``block_row``, one per warp for ``warp_row``, one per thread for
``thread_row``); each pass over its rows is a phase:

* cache ``none`` / ``shared``: a loop of ``full_steps`` unguarded iterations, each thread loading
  ``unroll`` vectors (all in flight), then one guarded iteration for the ``tail_vectors`` left;
  the statistics pass ("stats"), for two-pass the "variance" pass, then the "output" pass (x, w
  and b loaded, y stored). With ``shared``, the stats pass stores x in shared memory (register-
  staged: ``dest="shared"``) and the later passes read it there instead of global memory;
* cache ``registers``: one step loads the whole slice ("stats", ``slice_vectors`` loads per
  thread), the variance pass is register math, the output pass loads w and b and stores y;
* after each statistics pass, the row sum: ``warp_row`` and ``block_row`` shuffle within the warp
  (5 levels, a butterfly, ``passes="one"`` reduces two values at once); ``block_row`` then stores
  one value per warp to shared memory, synchronises once and every warp sums the ``warps`` partial
  sums with ``log2(warps)`` more shuffle levels.

With a thread per row (``thread_row``), a lane's loads of one iteration may cover less than a
32-byte sector of its row; the L1 keeps that sector for the next iterations, so such loops are
described in steps of one sector per lane (:func:`sector_iterations`), as the GEMM family's naive
kernels are.

Tile coordinates: x and y tiles are ``("bx", k)`` (the block's rows, the loop's column chunk); the
later passes name the same x tiles, so the L2 model can tell that a re-read hits. w and b are
``(k,)`` without a block index: every block reads the same vectors, which stay in L2.

Instruction counts are per warp, read from the SASS of the kernels as the validation runner builds
them (CuPy's NVRTC with ``-ftz=true``: ``rsqrtf`` is one MUFU.RSQ, no denormal fix-up; the 47 suite
kernels recompiled through CuPy on the H200 and dumped with ``cuobjdump -sass``), never from measured
times; the fma-pipe counts follow the source exactly (FADD per element for a sum, FADD + FFMA for a
deviation or a moment, FADD + FMUL + FFMA per output element), the other counts are the constants
below, each on the pipe Nsight Compute's ``smsp__inst_executed_pipe_*`` counters put its opcodes on:
"int" (the ALU: IADD3, ISETP, LEA, LOP3, SHF, MOV, CS2R, SEL, I2FP, FMNMX ...), "fma" (FADD, FMUL,
FFMA, IMAD, VIADD), "sfu" (MUFU) and issue slots only (:data:`ISSUE_ONLY_PIPE`: the uniform
datapath, branches, constant loads, S2R/S2UR, HFMA2.MMA moves). Blocks are described as full:
the ragged last block of ``warp_row`` / ``thread_row`` (rows not a multiple of ``rows_per_block``)
is counted like the others.
"""

from __future__ import annotations

import math

from tilesim.kernels.layernorm.analytic import counts
from tilesim.kernels.layernorm.config import FLOAT_BYTES, WARP_LANES, LayerNormConfig
from tilesim.kernels.mix import ISSUE_ONLY_PIPE, Mix
from tilesim.program import (
    Compute,
    GlobalLoad,
    GlobalStore,
    Launch,
    Phase,
    SharedAccess,
    Shuffle,
    Step,
    TileProgram,
    TileRef,
    WarpAccess,
)

"""Where instructions that use no modelled pipe go (uniform datapath, branches, constant loads):
an issue-only class once the tile program has one; until then the integer pipe."""




NONE = Mix()
# Per warp, from the SASS (block_row one none v4 t256 u4 and its siblings):
SETUP = Mix(alu=11, fma=3, sfu=1, other=10)  # indices, row pointers, parameters (LDC, ULDC, S2R, S2UR),
# 1/cols (I2FP and its range check; MUFU.RCP, FFMA, FADD, FFMA), exit
# per loop iteration (pass, cache): pointer and counter updates, compare, branch; the median over the
# loop bodies of every variant x passes x unroll with float4 accesses (the range of the totals in brackets)
LOOP = {("stats", "none"): Mix(alu=4, other=2),  # [6, 8]
        ("stats", "shared"): Mix(alu=5, other=2),  # [7, 9]
        ("variance", "none"): Mix(alu=4, other=2),  # [6, 8]
        ("variance", "shared"): Mix(alu=3, other=2),  # [5, 5]
        ("output", "none"): Mix(alu=12, other=2),  # [12, 14]: x, w, b and y pointers
        ("output", "shared"): Mix(alu=9, other=2)}  # [11, 13]
LOOP_OUTPUT_UNROLL1 = Mix(alu=10, fma=1, other=2)  # the output loop at unroll 1 (the w, b, y pointers
# move every iteration): [12, 20]
LOOP_V1 = {"stats": Mix(alu=3, fma=2, other=2), "variance": Mix(alu=3, fma=1, other=2),
           "output": Mix(alu=8, fma=4, other=2)}  # float loops index with IMAD/VIADD
LOOP_V1_THREAD_ROW = {"stats": Mix(alu=2, fma=2, other=1), "variance": Mix(alu=3, fma=2, other=1),
                      "output": Mix(alu=4, fma=10, other=5)}  # a thread per row: x, w, b, y by IMAD
PASS_ENTRY = Mix(alu=8, fma=3, other=3)  # a loop's entry: row pointer (IMAD, IMAD.WIDE), trip count, branch
TAIL = Mix(alu=9, fma=3, other=1)  # the guarded last iteration's addresses (it always runs)
TAIL_PER_VECTOR = Mix(alu=2)  # per vector of the guarded last iteration: index, compare
REGISTER_PASS = Mix(alu=6, fma=1, other=2)  # per pass of the register cache: base addresses (w, b, y),
# slice-complete test
REGISTER_PER_VECTOR = Mix(alu=2)  # per slice vector and pass with memory: bounds compare and index
REGISTER_RAGGED_OUTPUT = Mix(alu=3.5, other=4.5)  # per slice vector of the output pass when a float4
# slice is not complete: each vector branched (BSSY, BRA, BSYNC), w and b addressed one by one (ULDC.64,
# IADD3, IADD3.X)
BRANCH_GUARD = Mix(alu=2, other=2)  # a guarded vector the compiler branches around: index, ISETP, BRA
REDUCE_BLOCK = Mix(alu=5, other=3)  # block_row cross-warp step: the shared window (S2UR, UMOV, ULEA),
# lane/warp index, shared address
FINISH_ONE_PASS = Mix(alu=1, fma=4, sfu=1)  # mean (FMUL), mean^2, E[x^2] - mean^2 (FFMA), FMNMX, + eps, MUFU.RSQ
FINISH_TWO_PASS = (Mix(fma=1), Mix(fma=1, sfu=1))  # mean (FMUL); then var * 1/cols + eps (FFMA), MUFU.RSQ
SHUFFLE_LEVELS_WARP = 5  # butterfly over 32 lanes
SECTOR_BYTES = 32  # the unit the L1 keeps between a thread_row loop's iterations (NVIDIA's sector)

# FP32-pipe instructions per element of a pass (the source's arithmetic, one instruction each)
FMA_PER_ELEMENT = {"sum": 1, "moments": 2, "deviation": 2, "output": 3}


def lower(config: LayerNormConfig) -> TileProgram:
    """The tile program of ``config``: one kernel launch (see the module docstring)."""
    c = config
    phases: list[Phase] = [Phase("setup", 1, Step(compute=tuple(_ops((SETUP + _loop_entries(c)) * c.warps,
                                                                     fma_chain=SETUP.fma,
                                                                     sfu_chain=SETUP.sfu))),
                                 warp_groups=c.warps)]
    if c.passes == "one":
        phases += _pass(c, "stats", "moments")
        phases += _reduce(c, "stats", values=2, finish=FINISH_ONE_PASS, buffer=0)
    else:
        phases += _pass(c, "stats", "sum")
        phases += _reduce(c, "stats", values=1, finish=FINISH_TWO_PASS[0], buffer=0)
        phases += _pass(c, "variance", "deviation")
        phases += _reduce(c, "variance", values=1, finish=FINISH_TWO_PASS[1], buffer=1)
    phases += _pass(c, "output", "output")
    n = counts(c)
    return TileProgram(
        name=f"layernorm_{c.label}",
        launch=Launch(grid=c.grid, threads_per_block=c.threads, regs_per_thread=c.estimated_regs,
                      smem_bytes_per_block=c.smem_bytes),
        phases=tuple(phases),
        flops=float(n["flops"]),
        min_hbm_bytes=float(n["min_hbm_bytes"]),
    )


# -- accesses ------------------------------------------------------------------------------------
def _thread_vectors(c: LayerNormConfig, warp: int, u: int, base_vector: int) -> list[tuple[int, int]]:
    """(local row, vector index in the row) of each lane of ``warp`` for its ``u``-th vector of an
    iteration starting at vector ``base_vector`` of the row (the kernel's ``base + u * ROW_THREADS``)."""
    out = []
    for lane in range(WARP_LANES):
        tid = warp * WARP_LANES + lane
        row, t = divmod(tid, c.row_threads)
        out.append((row, base_vector + t + u * c.row_threads))
    return out


def _instructions(c: LayerNormConfig, warp: int, base_vector: int, per_thread: int, *, row_major: bool,
                  origin_vector: int, shared: bool = False, smem_row_base: int = 0) -> tuple[WarpAccess, ...]:
    """One warp's ``per_thread`` vector accesses of an iteration: lane offsets relative to the tile
    origin (column ``origin_vector`` of the block's first row) or, for w and b (``row_major`` False),
    to the vector ``origin_vector`` of the weight; lanes past the row's end are inactive; with
    ``shared``, the row cache's shared addresses. Instructions with no active lane are left out
    (predicated off: no memory access)."""
    vb = c.vector * FLOAT_BYTES
    row_bytes = c.cols * FLOAT_BYTES
    out = []
    for u in range(per_thread):
        offs, soffs = [], []
        for row, v in _thread_vectors(c, warp, u, base_vector):
            if v >= c.row_vectors:
                offs.append(None)
                soffs.append(None)
                continue
            col = (v - origin_vector) * vb
            offs.append(row * row_bytes + col if row_major else col)
            soffs.append(smem_row_base + row * row_bytes + v * vb)
        if any(o is not None for o in offs):
            out.append(WarpAccess(tuple(offs), vb, tuple(soffs) if shared else None))
    return tuple(out)


def _block_instructions(c: LayerNormConfig, base_vector: int, per_thread: int, **kw) -> tuple[tuple, int]:
    """Every warp's accesses of an iteration as ``(instructions, repeat)``: warp 0's with ``repeat =
    warps`` when every warp has the same pattern relative to its data (x and y of full iterations,
    and tails of warp_row / thread_row), else all warps listed."""
    first = _instructions(c, 0, base_vector, per_thread, **kw)
    last = _instructions(c, c.warps - 1, base_vector, per_thread, **kw)
    if len(first) == len(last) and all(a.active_lanes == b.active_lanes for a, b in zip(first, last, strict=True)):
        return first, c.warps
    return tuple(w for warp in range(c.warps) for w in _instructions(c, warp, base_vector, per_thread, **kw)), 1


def _weight_instructions(c: LayerNormConfig, base_vector: int, per_thread: int) -> tuple[WarpAccess, ...]:
    """w (or b) accesses of all warps of an iteration, listed one by one: warp_row and thread_row
    warps read the same vectors (the L1 merges them within the step), block_row warps neighbouring ones."""
    return tuple(w for warp in range(c.warps)
                 for w in _instructions(c, warp, base_vector, per_thread, row_major=False, origin_vector=base_vector))


# -- passes --------------------------------------------------------------------------------------
def sector_iterations(c: LayerNormConfig) -> int:
    """Loop iterations described as one step: with a thread per row, a lane's loads of one
    iteration cover less than a sector of its row when ``unroll * vector * 4 < 32`` bytes, and the
    L1 keeps that sector for the next iterations (the GEMM family's naive kernels are described the
    same way); a step then spans one sector of every lane's row (``chain`` L1 round trips more)."""
    if c.variant != "thread_row" or c.cache == "registers":
        return 1
    return max(1, SECTOR_BYTES // (c.unroll * c.vector * FLOAT_BYTES))


def _iterations(c: LayerNormConfig) -> list[tuple[str, int, int | str, int, int]]:
    """(suffix, trips, chunk coordinate, first vector, loop iterations per step) of a pass's phases:
    the register cache's one step; else the loop of full iterations (when there is one), the full
    iterations left over when a step spans several (:func:`sector_iterations`), and the guarded
    last iteration, which always runs (with no vector left its loads are predicated off)."""
    if c.cache == "registers":
        return [("", 1, 0, 0, 1)]
    m = sector_iterations(c)
    loop, rest = divmod(c.full_steps, m)
    out: list[tuple[str, int, int | str, int, int]] = []
    if loop:
        out.append(("", loop, "k", 0, m))
    if rest:
        out.append(("_rest", 1, loop, loop * m * c.step_vectors, rest))
    out.append(("_tail", 1, loop + (1 if rest else 0), c.full_steps * c.step_vectors, 1))
    return out


def _streams(c: LayerNormConfig, name: str, kind: str) -> tuple[str, ...]:
    """The memory accesses of a pass, per thread and vector: "x" (global load), "x_shared" (the
    row cache read), "w", "b" (global loads), "y" (global store)."""
    if c.cache == "none" or name == "stats":
        x = ("x",)
    elif c.cache == "shared":
        x = ("x_shared",)
    else:
        x = ()  # the register cache after the stats pass
    return x + (("w", "b", "y") if kind == "output" else ())


def _pass(c: LayerNormConfig, name: str, kind: str) -> list[Phase]:
    """The phases of one pass over the rows: a loop of full iterations and the guarded tail.

    Instructions of the guarded tail whose lanes are all out of the row are issued predicated
    off: they access no memory and take issue slots only. At unroll 1 the compiler branches around
    the variance and output passes' single guarded vector instead (BSSY/BRA, or EXIT): a warp with
    no lane in it skips its math and memory instructions and pays the guard only."""
    W = c.warps
    vb = c.vector * FLOAT_BYTES
    smem_row = c.reduce_smem_bytes  # the row cache follows the static reduction buffers
    phases = []
    for suffix, trips, chunk, first, iters in _iterations(c):
        per_thread = c.slice_vectors if c.cache == "registers" else c.unroll * iters
        elems = per_thread * c.vector
        branched = suffix == "_tail" and c.unroll == 1 and name in ("variance", "output") and c.cache != "registers"
        vectors = _active_vectors(c, first, per_thread) if branched else per_thread * W  # whose math is issued
        fma = Compute("fma", FMA_PER_ELEMENT[kind] * c.vector * vectors,
                      chain={"sum": elems, "moments": elems, "deviation": elems + 1, "output": 3 * iters}[kind])
        width = max(0, min(iters * c.step_vectors, c.row_vectors - first))  # vectors of a row in this step
        tile_bytes = c.rows_per_block * width * vb
        loads, stores, shared_loads = [], [], []
        issued = 0  # memory instructions per block that access memory
        for stream in _streams(c, name, kind) if width else ():
            if stream in ("w", "b"):
                instr, rep = _weight_instructions(c, first, per_thread), 1
                loads.append(GlobalLoad(TileRef(stream, (chunk,), width * vb), instr, chain=iters - 1))
            else:
                staged = c.cache == "shared" and stream != "y"
                instr, rep = _block_instructions(c, first, per_thread, row_major=True, origin_vector=first,
                                                 shared=staged, smem_row_base=smem_row)
                if stream == "x":
                    loads.append(GlobalLoad(TileRef("x", ("bx", chunk), tile_bytes), instr, repeat=rep,
                                            dest="shared" if staged else "register", chain=iters - 1))
                elif stream == "x_shared":
                    shared_loads.append(SharedAccess(
                        tuple(WarpAccess(w.shared_offsets, w.width_bytes) for w in instr), repeat=rep))
                else:
                    stores.append(GlobalStore(TileRef("y", ("bx", chunk), tile_bytes), instr, repeat=rep))
            issued += len(instr) * rep
        predicated_off = 0 if branched else len(_streams(c, name, kind)) * per_thread * W - issued
        book = (BRANCH_GUARD if branched else _bookkeeping(c, name, kind, suffix)) * (iters * W) + Mix(other=predicated_off)
        step = Step(loads=tuple(loads), shared_loads=tuple(shared_loads), compute=(fma, *_ops(book)),
                    stores=tuple(stores))
        phases.append(Phase(f"{name}{suffix}", trips, step, warp_groups=W))
    return phases


def _active_vectors(c: LayerNormConfig, first: int, per_thread: int) -> int:
    """Per block, the warp vector instructions of an iteration that have a lane in the row."""
    if first >= c.row_vectors:
        return 0
    instr, rep = _block_instructions(c, first, per_thread, row_major=True, origin_vector=first)
    return len(instr) * rep


def _ops(mix: Mix, *, fma_chain: float = 0, sfu_chain: float = 0) -> list:
    """The Compute operations of ``mix`` (zero classes left out)."""
    ops = []
    if mix.fma:
        ops.append(Compute("fma", mix.fma, chain=fma_chain))
    if mix.alu:
        ops.append(Compute("int", mix.alu))
    if mix.sfu:
        ops.append(Compute("sfu", mix.sfu, chain=sfu_chain))
    if mix.other:
        ops.append(Compute(ISSUE_ONLY_PIPE, mix.other))
    return ops


def _bookkeeping(c: LayerNormConfig, name: str, kind: str, suffix: str) -> Mix:
    """Integer, address, compare and control instructions per warp of one step (see the constants)."""
    if c.cache == "registers":
        touches_memory = name == "stats" or kind == "output"
        mix = REGISTER_PASS + (REGISTER_PER_VECTOR * c.slice_vectors if touches_memory else NONE)
        if kind == "output" and c.vector == 4 and c.slice_vectors * c.row_threads > c.row_vectors:  # ragged
            mix = mix + REGISTER_RAGGED_OUTPUT * c.slice_vectors
        return mix
    if suffix == "_tail":
        return TAIL + TAIL_PER_VECTOR * c.unroll
    if c.vector == 1:
        return (LOOP_V1_THREAD_ROW if c.variant == "thread_row" else LOOP_V1)[name]
    if kind == "output" and c.unroll == 1:
        return LOOP_OUTPUT_UNROLL1
    return LOOP[(name, c.cache)]


def _loop_entries(c: LayerNormConfig) -> Mix:
    """Per warp, the entries of the passes' loops (each pass with full iterations has one)."""
    if c.cache == "registers" or not c.full_steps:
        return NONE
    return PASS_ENTRY * (3 if c.passes == "two" else 2)


def _reduce(c: LayerNormConfig, name: str, *, values: int, finish: Mix, buffer: int) -> list[Phase]:
    """The row sum of ``values`` partial sums and the statistics computed from it."""
    W = c.warps
    fin = _ops(finish * W, fma_chain=finish.fma, sfu_chain=finish.sfu)
    if c.variant == "thread_row":
        return [Phase(f"{name}_finish", 1, Step(compute=tuple(fin)), warp_groups=W)]
    warp_tree = [Shuffle(SHUFFLE_LEVELS_WARP * values * W, chain=SHUFFLE_LEVELS_WARP),
                 Compute("fma", SHUFFLE_LEVELS_WARP * values * W, chain=SHUFFLE_LEVELS_WARP)]
    if c.variant == "warp_row" or W == 1:
        return [Phase(f"{name}_reduce", 1, Step(compute=tuple(warp_tree + fin)), warp_groups=W)]
    levels = int(math.log2(W))
    base = buffer * 2 * W * FLOAT_BYTES
    store = tuple(WarpAccess((base + n * W * FLOAT_BYTES,) + (None,) * (WARP_LANES - 1)) for n in range(values))
    load = tuple(WarpAccess(tuple(base + (n * W + lane % W) * FLOAT_BYTES for lane in range(WARP_LANES)))
                 for n in range(values))
    cross = Step(shared_stores=(SharedAccess(store, repeat=W),), barriers=1,
                 shared_loads=(SharedAccess(load, repeat=W),),
                 compute=(Shuffle(levels * values * W, chain=levels),
                          Compute("fma", levels * values * W, chain=levels),
                          *_ops(REDUCE_BLOCK * W), *fin))
    return [Phase(f"{name}_warp_reduce", 1, Step(compute=tuple(warp_tree)), warp_groups=W),
            Phase(f"{name}_block_reduce", 1, cross)]
