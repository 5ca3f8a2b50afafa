"""Lowering of a reduction configuration: what every block of ``reduction.cu`` does, as tile programs.

``lower(cfg)`` returns one :class:`~tilesim.program.TileProgram` per launch, run one after another:
the first pass (``reduce_pass``), then either the second pass (``reduce_final``, one block) or,
with the atomic finish, the 4-byte memset of the output *before* the first pass (modelled as a
one-warp kernel storing 4 bytes: the driver's memset is a launch of its own).

What a block does, in order (the CUDA source is ``validation/families/reduction/reduction.cu``):

* ladder kernels: one load step (``threads`` x 1 or 2 scalar loads, coalesced), ``sdata[tid] = v``,
  a barrier, one phase per tree level (shared loads, the add, the store, a barrier; the lane
  offsets give the engine the bank conflicts of the interleaved trees), warp 0's last six levels
  for unroll_last_warp/complete_unroll, thread 0's partial store or atomic;
* grid_stride/shuffle: a set-up phase, the loop (``trips`` steps of ``unroll`` loads of ``vector``
  floats per thread; no barrier, so every warp progresses on its own: ``warp_groups`` = warps),
  then the tree (shared memory, or 5 warp shuffles + 5 adds per warp and a second round in warp 0).

Approximations, all of the identical-blocks kind: the engine runs ``blocks`` identical blocks, so
each does the busiest block's ``trips = ceil(chunks / blocks)`` loop steps, and the partial last
chunk (ragged ``n``) counts as a full one; blocks of a ladder kernel past ``n`` load as if full.
Predicated-off shared loads, stores and adds of warps with no active lane still take issue slots;
they are counted on the "int" pipe.

Instruction counts per warp come from the SASS of the kernels (nvcc 13.0, ``-arch=sm_90``,
``cuobjdump -sass``) at 256 threads, vector 4, unroll 4 unless said otherwise; never from measured
times. Pipes: FADD on "fma" (the FP32 pipe); MUFU.RCP and the I2F/F2I conversions of the integer
modulo on "sfu" (conversions run at the special-function rate, 16/clk/SM: CUDA C++ Programming
Guide, arithmetic instruction throughput); everything else (integer, address, compare, branch,
NOP from ``__syncwarp``, uniform-datapath) on "int".
"""

from __future__ import annotations

import math

from tilesim.kernels.reduction.config import ELEM_BYTES, FINAL_UNROLL, FINAL_VECTOR, ReductionConfig
from tilesim.program import (
    WARP_LANES,
    Affine,
    Atomic,
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
    lanes,
)

# ----- SASS counts (warp instructions per warp; see the module docstring) --------------------------
LADDER_PROLOGUE_INT = 20  # index math and guards before the tree: 19-25 over the six ladder kernels
LEVEL_INT = {  # per tree level of the run-time loops (besides 2 LDS, FADD, STS, BAR)
    "interleaved_divergent": 20,  # tid % (2*s): IMAD/IADD3/ISETP of a 32-bit unsigned division
    "interleaved_strided": 9,
    "sequential": 5,
    "first_add": 5,
    "unroll_last_warp": 6,
}
LEVEL_SFU = {"interleaved_divergent": 3}  # I2F.U32.RP, MUFU.RCP, F2I.FTZ.U32.TRUNC per level
PREDICATED_OFF = 4  # LDS, LDS, FADD, STS issued by a warp with no active lane (unrolled: 3)
UNROLLED_LEVEL_INT = 1  # ISETP per level of complete_unroll/grid_stride (1 LDS: v is in a register)
LAST_WARP_ENTRY_INT = 5  # ISETP, BRA, UMOV, BRA.DIV, BSSY
LAST_WARP_LEVEL_INT = 2  # the two __syncwarp() of a level (NOP)
LAST_WARP_LEVELS = 6  # s = 32, 16, 8, 4, 2, 1
GRID_PROLOGUE_INT = 27  # set-up of the grid-stride loop (chunk count, pointers)
LOOP_INT = 6  # per loop step: pointer copy and increment, compare, branch (5-7 over the suite)
FINAL_LOOP_INT = 7  # the same in reduce_final (grid = 1)
RAGGED_INT, RAGGED_SFU = 22, 3  # bx == full % grid: a signed 32-bit modulo, when n is ragged
GUARDED_LOAD_INT = 2  # per guarded scalar load of the partial chunk: index add, compare
SHUFFLE_WARP_INT = 8  # lane/warp ids and lane 0's shared address around the first shuffle round
SHUFFLE_BLOCK_INT = 10  # warp 0's guard, address and predicated load before the second round
SHUFFLE_LEVELS = 5  # log2(32)
EPILOGUE_INT = 3  # BSYNC, ISETP tid == 0, EXIT (every warp)
WRITE_INT = 2  # thread 0: LDC of the output pointer, IMAD.WIDE of the address
LADDER_WRITE_INT = 5  # thread 0 of the ladder kernels: S2UR, UMOV, ULEA (shared base), LDC, IMAD
MEMSET_REGS = 8  # the memset's one-warp kernel: a placeholder, it stores 4 bytes

_ONE_LANE = WarpAccess((0,) + (None,) * (WARP_LANES - 1), ELEM_BYTES)


def _pattern(fn) -> WarpAccess:
    """A 4-byte warp access whose lane ``l`` touches ``fn(l)`` (``None``: inactive)."""
    return WarpAccess(tuple(fn(lane) for lane in range(WARP_LANES)), ELEM_BYTES)


def _int(count: float) -> Compute:
    return Compute("int", count)


class _Phases:
    """Builds phases in source order. A stage's shared store and barrier are emitted at the start
    of the next phase's step (a step runs its stores and barriers before its loads and math)."""

    def __init__(self) -> None:
        self.phases: list[Phase] = []
        self.store: tuple[SharedAccess, ...] = ()
        self.barrier = 0

    def add(self, name: str, *, trips: int = 1, loads=(), shared_loads=(), compute=(), stores=(),
            atomics=(), store: tuple[SharedAccess, ...] = (), barrier: bool = False,
            warp_groups: int = 1) -> None:
        step = Step(loads=tuple(loads), shared_stores=self.store, barriers=self.barrier,
                    shared_loads=tuple(shared_loads), compute=tuple(c for c in compute if c.count > 0),
                    atomics=tuple(atomics), stores=tuple(stores))
        groups = warp_groups if (self.barrier == 0 and trips > 1) else 1
        self.phases.append(Phase(name, trips, step, warp_groups=groups))
        self.store, self.barrier = tuple(store), int(barrier)


# ----- the block trees ------------------------------------------------------------------------------
def _level_sets(variant: str, threads: int, s: int) -> tuple[int, WarpAccess, WarpAccess, WarpAccess]:
    """(warps with an active lane, and warp 0's accesses: first operand, second operand, store)
    of one level with stride ``s`` of a run-time tree."""
    if variant == "interleaved_divergent":  # threads tid % (2s) == 0 add sdata[tid + s]
        if 2 * s <= WARP_LANES:
            def on(lane):
                return lane % (2 * s) == 0
            a = _pattern(lambda lane: lane * 4 if on(lane) else None)
            b = _pattern(lambda lane: (lane + s) * 4 if on(lane) else None)
            return threads // WARP_LANES, a, b, a
        b = WarpAccess((s * 4,) + (None,) * (WARP_LANES - 1), ELEM_BYTES)
        return threads // (2 * s), _ONE_LANE, b, _ONE_LANE
    if variant == "interleaved_strided":  # the first threads/(2s) threads: index = 2*s*tid
        active = threads // (2 * s)
        a = _pattern(lambda lane: 2 * s * lane * 4 if lane < active else None)
        b = _pattern(lambda lane: (2 * s * lane + s) * 4 if lane < active else None)
        return math.ceil(active / WARP_LANES), a, b, a
    # sequential addressing: threads tid < s add sdata[tid + s]
    a = lanes(ELEM_BYTES, active=min(WARP_LANES, s))
    b = lanes(ELEM_BYTES, base=s * 4, active=min(WARP_LANES, s))
    return math.ceil(s / WARP_LANES), a, b, a


def _runtime_levels(variant: str, threads: int) -> list[int]:
    if variant in ("interleaved_divergent", "interleaved_strided"):
        return [1 << i for i in range(int(math.log2(threads)))]
    floor = 32 if variant == "unroll_last_warp" else 0
    return [s for s in (threads >> i for i in range(1, 11)) if s > floor]


def _tree(b: _Phases, variant: str, threads: int, *, stores=(), atomics=()) -> None:
    """The block tree of ``variant`` (after ``sdata[tid] = v`` and a barrier, pending in ``b``,
    except for shuffle) and thread 0's write (``stores`` / ``atomics``)."""
    warps = threads // WARP_LANES
    write = dict(stores=stores, atomics=atomics)
    if variant == "shuffle":  # the first round is added by the caller (it follows the loop)
        b.add("block_shuffle", shared_loads=(SharedAccess((lanes(ELEM_BYTES, active=warps),)),),
              compute=(Shuffle(SHUFFLE_LEVELS, chain=SHUFFLE_LEVELS),
                       Compute("fma", SHUFFLE_LEVELS, chain=SHUFFLE_LEVELS),
                       _int(SHUFFLE_BLOCK_INT + EPILOGUE_INT * warps + WRITE_INT)), **write)
        return
    if variant in LEVEL_INT:
        for s in _runtime_levels(variant, threads):
            active, a, bb, st = _level_sets(variant, threads, s)
            b.add(f"level_s{s}", shared_loads=(SharedAccess((a, bb), repeat=active),),
                  compute=(Compute("fma", active, chain=1), Compute("sfu", LEVEL_SFU.get(variant, 0) * warps),
                           _int(LEVEL_INT[variant] * warps + PREDICATED_OFF * (warps - active))),
                  store=(SharedAccess((st,), repeat=active),), barrier=True)
    else:  # complete_unroll, grid_stride: levels known at compile time, v kept in a register
        for s in (512, 256, 128, 64):
            if threads >= 2 * s:
                active = s // WARP_LANES
                b.add(f"level_s{s}", shared_loads=(SharedAccess((lanes(ELEM_BYTES, base=s * 4),), repeat=active),),
                      compute=(Compute("fma", active, chain=1),
                               _int(UNROLLED_LEVEL_INT * warps + (PREDICATED_OFF - 1) * (warps - active))),
                      store=(SharedAccess((lanes(ELEM_BYTES),), repeat=active),), barrier=True)
    if variant in ("unroll_last_warp", "complete_unroll", "grid_stride"):
        warp0 = (SharedAccess((lanes(ELEM_BYTES),)),)
        b.add("last_warp_entry", shared_loads=(SharedAccess((lanes(ELEM_BYTES), lanes(ELEM_BYTES, base=32 * 4))),),
              compute=(Compute("fma", 1, chain=1), _int(LAST_WARP_ENTRY_INT)), store=warp0)
        b.add("last_warp", trips=LAST_WARP_LEVELS - 1,
              shared_loads=(SharedAccess((lanes(ELEM_BYTES, base=16 * 4),)),),
              compute=(Compute("fma", 1, chain=1), _int(LAST_WARP_LEVEL_INT)), store=warp0)
        b.add("write", compute=(_int(LAST_WARP_LEVEL_INT + EPILOGUE_INT * warps + WRITE_INT),),
              **write)
        return
    b.add("write", shared_loads=(SharedAccess((_ONE_LANE,)),),
          compute=(_int(warps + LADDER_WRITE_INT),), **write)


# ----- the passes -----------------------------------------------------------------------------------
def _stream(b: _Phases, cfg: ReductionConfig, tensor: str, total: int, blocks: int, vector: int,
            unroll: int, loop_int: int) -> int:
    """The set-up and the grid-stride loop over the chunks of ``total`` floats of ``tensor`` with
    ``blocks`` blocks; returns the chunk size in elements."""
    threads, warps = cfg.threads, cfg.warps
    chunk = threads * vector * unroll
    b.add("setup", compute=(_int(GRID_PROLOGUE_INT * warps),))
    if total <= 0:
        return chunk
    trips = math.ceil(math.ceil(total / chunk) / blocks)
    coord = "k" if blocks == 1 else Affine((("k", blocks), ("bx", 1)))
    tile = TileRef(tensor, (coord,), chunk * ELEM_BYTES)
    width = vector * ELEM_BYTES
    instr = tuple(lanes(width, base=u * threads * width) for u in range(unroll))
    b.add("stream", trips=trips, loads=(GlobalLoad(tile, instr, repeat=warps),),
          compute=(Compute("fma", unroll * vector * warps, chain=int(math.log2(vector)) + 1),
                   _int(loop_int * warps)), warp_groups=warps)
    return chunk


def _combine(b: _Phases, cfg: ReductionConfig, unroll: int, extra=()) -> None:
    """The sum of the ``unroll`` accumulators, then the first shuffle round (shuffle) or
    ``sdata[tid] = v`` (the others), and a barrier."""
    warps = cfg.warps
    compute = [Compute("fma", (unroll - 1) * warps, chain=unroll - 1), _int(warps), *extra]
    if cfg.variant == "shuffle":
        compute += [Shuffle(SHUFFLE_LEVELS * warps, chain=SHUFFLE_LEVELS),
                    Compute("fma", SHUFFLE_LEVELS * warps, chain=SHUFFLE_LEVELS), _int(SHUFFLE_WARP_INT * warps)]
        b.add("warp_shuffle", compute=compute, store=(SharedAccess((_ONE_LANE,), repeat=warps),), barrier=True)
    else:
        b.add("combine", compute=compute, store=(SharedAccess((lanes(ELEM_BYTES),), repeat=warps),), barrier=True)


def _finish(cfg: ReductionConfig) -> dict:
    if cfg.finish == "atomic":
        return dict(atomics=(Atomic("global", (_ONE_LANE,), tile=TileRef("out", (0,), ELEM_BYTES)),))
    return dict(stores=(GlobalStore(TileRef("partial", ("bx",), ELEM_BYTES), (_ONE_LANE,)),))


def first_pass(cfg: ReductionConfig) -> TileProgram:
    """``reduce_pass``: ``cfg.blocks`` blocks, each summing its share of ``x`` into one value."""
    b = _Phases()
    warps = cfg.warps
    if cfg.is_ladder:
        e = cfg.ladder_elems
        tile = TileRef("x", ("bx",), cfg.chunk_elems * ELEM_BYTES)
        instr = tuple(lanes(ELEM_BYTES, base=i * cfg.threads * ELEM_BYTES) for i in range(e))
        b.add("load", loads=(GlobalLoad(tile, instr, repeat=warps),),
              compute=(Compute("fma", (e - 1) * warps, chain=e - 1), _int(LADDER_PROLOGUE_INT * warps)),
              store=(SharedAccess((lanes(ELEM_BYTES),), repeat=warps),), barrier=True)
    else:
        _stream(b, cfg, "x", cfg.n, cfg.blocks, cfg.vector, cfg.unroll, LOOP_INT)
        ragged = cfg.n % cfg.chunk_elems != 0  # every thread computes bx == full % grid
        _combine(b, cfg, cfg.unroll, (_int(RAGGED_INT * cfg.warps * ragged),
                                      Compute("sfu", RAGGED_SFU * cfg.warps * ragged)))
    _tree(b, cfg.variant, cfg.threads, **_finish(cfg))
    tree_adds = cfg.n - cfg.blocks
    flops = tree_adds + (cfg.blocks - 1 if cfg.finish == "atomic" else 0)
    out_bytes = ELEM_BYTES * (1 if cfg.finish == "atomic" else cfg.blocks)
    return TileProgram(
        name=f"reduce_pass {cfg.label}",
        launch=Launch((cfg.blocks, 1, 1), cfg.threads, cfg.estimated_regs, cfg.smem_bytes),
        phases=tuple(b.phases), flops=float(max(flops, 0)), min_hbm_bytes=float(ELEM_BYTES * cfg.n + out_bytes))


def second_pass(cfg: ReductionConfig) -> TileProgram:
    """``reduce_final``: one block sums the ``cfg.blocks`` partials (16-byte loads, 4 in flight per
    thread, then the partial chunk with guarded scalar loads) and writes the result."""
    b = _Phases()
    m, threads, warps = cfg.blocks, cfg.threads, cfg.warps
    full, tail = divmod(m, threads * FINAL_VECTOR * FINAL_UNROLL)
    chunk = _stream(b, cfg, "partial", m - tail, 1, FINAL_VECTOR, FINAL_UNROLL, FINAL_LOOP_INT)
    if tail:
        guarded = FINAL_VECTOR * FINAL_UNROLL
        used = math.ceil(tail / threads)
        tile = TileRef("partial", (full,), chunk * ELEM_BYTES)
        instr = tuple(lanes(ELEM_BYTES, base=j * threads * ELEM_BYTES) for j in range(used))
        b.add("partial_chunk", loads=(GlobalLoad(tile, instr, repeat=warps),),
              compute=(Compute("fma", guarded * warps, chain=guarded // FINAL_UNROLL),
                       _int(((guarded - used) + GUARDED_LOAD_INT * guarded) * warps)))
    _combine(b, cfg, FINAL_UNROLL)
    _tree(b, cfg.variant, threads, stores=(GlobalStore(TileRef("out", (0,), ELEM_BYTES), (_ONE_LANE,)),))
    return TileProgram(
        name=f"reduce_final {cfg.label}",
        launch=Launch((1, 1, 1), threads, cfg.estimated_final_regs, cfg.smem_bytes),
        phases=tuple(b.phases), flops=float(m - 1), min_hbm_bytes=float(ELEM_BYTES * (m + 1)))


def zero_output() -> TileProgram:
    """The 4-byte memset of the output before an atomic first pass."""
    step = Step(stores=(GlobalStore(TileRef("out", (0,), ELEM_BYTES), (_ONE_LANE,)),))
    return TileProgram(name="memset out", launch=Launch((1, 1, 1), WARP_LANES, MEMSET_REGS, 0),
                       phases=(Phase("store", 1, step),), min_hbm_bytes=float(ELEM_BYTES))


def lower(cfg: ReductionConfig) -> tuple[TileProgram, ...]:
    """The launches of one reduction, in order (see the module docstring)."""
    if not isinstance(cfg, ReductionConfig):
        raise ValueError(f"cfg must be a ReductionConfig, got {type(cfg).__name__}")
    if cfg.finish == "atomic":
        return (zero_output(), first_pass(cfg))
    return (first_pass(cfg), second_pass(cfg))
