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

Instruction counts per warp come from the SASS of the code the suite runs: CuPy's NVRTC build
(NVRTC 13.0, ``-arch=sm_90``, CuPy's default options: FADD.FTZ), read with ``cuobjdump -sass`` from
CuPy's kernel cache on the H200, at 256 threads, vector 4, unroll 4 unless said otherwise; never from
measured times. (nvcc 13.0's code for the same source differs in the run-time ladder loops, e.g. 10
instead of 11 instructions per level of ``sequential``.) Each count is split by the execution pipe
the instruction issues to, as Nsight Compute's ``smsp__inst_executed_pipe_*`` counters of the suite
show (validation/studies/reduction_fidelity.md):

* ``alu``: IADD3, LOP3, ISETP, LEA, SHF, MOV, IABS, CS2R (pipe_alu; the "int" rate the pipes probe
  measured with IADD3/LOP3);
* ``fma``: integer work on the FMA pipe: IMAD in all its forms (IMAD.MOV, IMAD.WIDE, IMAD.SHL,
  IMAD.IADD, IMAD.HI), VIADD (pipe_fma); the reduction's FADDs are counted apart, with their chains;
* ``xu``: I2F, F2I, MUFU.RCP of the interleaved tree's integer modulo (pipe_xu: conversions run at
  the special-function rate, 16/clk/SM, CUDA C++ Programming Guide, arithmetic instruction
  throughput);
* ``other``: instructions of no modelled pipe: uniform datapath (ULDC, UMOV, ULEA, USHF, S2UR),
  constant loads (LDC), S2R, branches (BRA, BRA.DIV), BSSY/BSYNC/WARPSYNC, EXIT, the NOPs of
  ``__syncwarp()``, HFMA2.MMA (a zeroing move).

:data:`PIPE_OF` maps the classes to the engine's pipes. Predicated-off shared loads and stores of
warps without an active lane are shared accesses with no active lane, and their FADDs FMA-pipe
instructions (every warp issues them; Nsight Compute counts them on pipe_lsu and pipe_fma).
"""

from __future__ import annotations

import math
from typing import NamedTuple

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


# ----- SASS counts (warp instructions per warp, by pipe class; see the module docstring) -----------
class Ops(NamedTuple):
    """Warp instructions one warp issues for a piece of a kernel, by pipe class."""

    alu: float = 0.0
    fma: float = 0.0  # integer work on the FMA pipe (IMAD, VIADD); not the reduction's FADDs
    xu: float = 0.0
    other: float = 0.0

    @property
    def total(self) -> float:
        return self.alu + self.fma + self.xu + self.other


#: the engine's pipe for each class. "other" (uniform datapath, branches, constant loads) takes
#: issue slots and no pipe the model has a rate for: the issue-only class (Nsight Compute's
#: pipe_alu holds none of them: validation/studies/reduction_fidelity.md).
PIPE_OF = {"alu": "int", "fma": "fma", "xu": "sfu", "other": "issue"}

# the ladder kernels: everything before the block tree besides the loads, the first-add FADD,
# ``sdata[tid] = v`` and its barrier (prologue), per run-time tree level besides 2 LDS, FADD, STS,
# BAR (level), and after the tree
LADDER_PROLOGUE = {
    "interleaved_divergent": Ops(alu=4, fma=3, other=12),
    "interleaved_strided": Ops(alu=4, fma=3, other=12),
    "sequential": Ops(alu=4, fma=3, other=12),
    "first_add": Ops(alu=5, fma=4, other=15),
    "unroll_last_warp": Ops(alu=6, fma=3, other=14),
    "complete_unroll": Ops(alu=5, fma=2, other=11),
}
LEVEL = {  # tid % (2*s): an unsigned 32-bit division (I2F.U32.RP, MUFU.RCP, F2I, IMAD.HI ...)
    "interleaved_divergent": Ops(alu=10, fma=8, xu=3, other=3),
    "interleaved_strided": Ops(alu=4, fma=2, other=3),
    "sequential": Ops(alu=3, fma=1, other=2),
    "first_add": Ops(alu=3, fma=1, other=2),
    "unroll_last_warp": Ops(alu=6, other=1),
}
LEVEL_ATOMIC = {"unroll_last_warp": Ops(alu=5, fma=1, other=1)}  # IMAD.IADD for one IADD3
UNROLLED_LEVEL = Ops(alu=1)  # complete_unroll/grid_stride: the ISETP tid < s (v is in a register)
LADDER_EXIT = Ops(other=1)  # @P0 EXIT: every warp of the run-time trees but thread 0's
LADDER_WRITE = Ops(fma=1, other=5)  # thread 0: S2UR, UMOV, ULEA (shared base), LDC, IMAD.WIDE, EXIT
LAST_WARP_ENTRY = Ops(alu=1, other=2)  # every warp: ISETP tid < 32, BSSY, BRA
LAST_WARP_HEAD = Ops(other=2)  # warp 0: UMOV, BRA.DIV (with LDS, LDS, FADD)
LAST_WARP_LEVEL = Ops(other=2)  # the two __syncwarp() of a level (NOP), with STS, LDS, FADD
LAST_WARP_TAIL = Ops(other=2)  # UMOV, BRA.DIV after the last level
LAST_WARP_LEVELS = 6  # s = 32, 16, 8, 4, 2, 1
BLOCK_TAIL = Ops(alu=1, other=2)  # every warp: BSYNC, ISETP tid == 0, EXIT
WRITE = Ops(fma=1, other=2)  # thread 0: LDC of the output pointer, IMAD.WIDE, EXIT
# the grid-stride kernels: set-up before the loop (chunk count, pointers), by (variant, vector,
# unroll) as in the suite's SASS (any block size); other shapes take their variant's 4 x 4 figures
GRID_PROLOGUE = {
    ("grid_stride", 4, 4): Ops(alu=12, fma=6, other=11), ("grid_stride", 1, 1): Ops(alu=12, fma=4, other=8),
    ("grid_stride", 2, 4): Ops(alu=13, fma=5, other=10), ("grid_stride", 4, 1): Ops(alu=11, fma=5, other=12),
    ("grid_stride", 4, 8): Ops(alu=16, fma=4, other=10),
    ("shuffle", 4, 4): Ops(alu=12, fma=6, other=9), ("shuffle", 1, 1): Ops(alu=12, fma=4, other=8),
    ("shuffle", 1, 4): Ops(alu=15, fma=4, other=8), ("shuffle", 1, 8): Ops(alu=17, fma=4, other=9),
    ("shuffle", 2, 4): Ops(alu=13, fma=5, other=8), ("shuffle", 2, 8): Ops(alu=14, fma=6, other=9),
    ("shuffle", 4, 1): Ops(alu=10, fma=4, other=9), ("shuffle", 4, 2): Ops(alu=11, fma=6, other=9),
    ("shuffle", 4, 8): Ops(alu=14, fma=6, other=9),
}
LOOP_STEP = Ops(alu=3, fma=2, other=1)  # pointer copy and advance, c += grid, compare, branch
LOOP_STEP_SHORT = Ops(alu=2, fma=3, other=1)  # the same with one more IMAD for an IADD3, at:
SHORT_STEPS = {"grid_stride": ((1, 1),), "shuffle": ((1, 1), (4, 1), (1, 4))}
FINAL_PROLOGUE = Ops(alu=10, fma=2, other=9)  # reduce_final (grid = 1): 9-10 alu, 2-3 fma, 8-9 other
FINAL_LOOP_STEP = Ops(alu=4, fma=1, other=2)  # (3, 2, 2) for unroll_last_warp and shuffle
RAGGED = Ops(alu=12, fma=8, xu=3, other=2)  # bx == full % grid: a signed 32-bit modulo, ragged n
GUARDED_LOAD = Ops(alu=1.5, fma=0.5)  # per guarded scalar load: index add (IADD3 or VIADD), ISETP
COMBINE = {"grid_stride": Ops(alu=1, other=3), "shuffle": Ops(alu=1, other=2)}  # loop exit, BSSY ...
SHUFFLE_WARP = Ops(alu=3, fma=1, other=1)  # lane/warp ids, lane 0's shared address (S2R) in round 1
SHUFFLE_BLOCK_ENTRY = Ops(alu=1, other=1)  # every warp after the barrier: ISETP warp == 0, BRA
SHUFFLE_BLOCK = Ops(alu=5, other=3)  # warp 0: the guard, address and predicated load of round 2
SHUFFLE_LEVELS = 5  # log2(32)
MEMSET_REGS = 8  # the memset's one-warp kernel: a placeholder, it stores 4 bytes

_ONE_LANE = WarpAccess((0,) + (None,) * (WARP_LANES - 1), ELEM_BYTES)
_NO_LANE = WarpAccess((None,) * WARP_LANES, ELEM_BYTES)  # an instruction of a warp with no active lane


def _pattern(fn) -> WarpAccess:
    """A 4-byte warp access whose lane ``l`` touches ``fn(l)`` (``None``: inactive)."""
    return WarpAccess(tuple(fn(lane) for lane in range(WARP_LANES)), ELEM_BYTES)


def _ops(*parts: tuple[Ops, float]) -> tuple[Compute, ...]:
    """The compute of ``(ops, warps)`` pairs: each class on its engine pipe (:data:`PIPE_OF`)."""
    per: dict[str, float] = {}
    for ops, times in parts:
        for cls, count in ops._asdict().items():
            if count and times:
                per[PIPE_OF[cls]] = per.get(PIPE_OF[cls], 0.0) + count * times
    return tuple(Compute(pipe, count) for pipe, count in per.items())


def _shared(active: WarpAccess, active_warps: int, warps: int, per_warp: int = 1) -> tuple[SharedAccess, ...]:
    """``per_warp`` shared accesses of ``active_warps`` warps, and the same instructions with no
    active lane in the other warps of the block (they are issued all the same)."""
    out = [SharedAccess((active,) * per_warp, repeat=active_warps)] if active_warps else []
    if warps > active_warps:
        out.append(SharedAccess((_NO_LANE,) * per_warp, repeat=warps - active_warps))
    return tuple(out)


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
                       *_ops((SHUFFLE_BLOCK_ENTRY, warps), (SHUFFLE_BLOCK, 1), (BLOCK_TAIL, warps), (WRITE, 1))),
              **write)
        return
    if variant in LEVEL:
        level = LEVEL_ATOMIC.get(variant, LEVEL[variant]) if atomics else LEVEL[variant]
        for s in _runtime_levels(variant, threads):
            active, a, bb, st = _level_sets(variant, threads, s)
            # every warp issues the level's instructions; those of warps with no active lane do nothing
            b.add(f"level_s{s}", shared_loads=_shared_pair(a, bb, active, warps),
                  compute=(Compute("fma", warps, chain=1), *_ops((level, warps))),
                  store=_shared(st, active, warps), barrier=True)
    else:  # complete_unroll, grid_stride: levels known at compile time, v kept in a register
        for s in (512, 256, 128, 64):
            if threads >= 2 * s:
                active = s // WARP_LANES
                b.add(f"level_s{s}", shared_loads=_shared(lanes(ELEM_BYTES, base=s * 4), active, warps),
                      compute=(Compute("fma", warps, chain=1), *_ops((UNROLLED_LEVEL, warps))),
                      store=_shared(lanes(ELEM_BYTES), active, warps), barrier=True)
    if variant in ("unroll_last_warp", "complete_unroll", "grid_stride"):
        warp0 = (SharedAccess((lanes(ELEM_BYTES),)),)
        b.add("last_warp_entry", shared_loads=(SharedAccess((lanes(ELEM_BYTES), lanes(ELEM_BYTES, base=32 * 4))),),
              compute=(Compute("fma", 1, chain=1), *_ops((LAST_WARP_ENTRY, warps), (LAST_WARP_HEAD, 1),
                                                         (LAST_WARP_LEVEL, 1))),
              store=warp0)
        b.add("last_warp", trips=LAST_WARP_LEVELS - 1,
              shared_loads=(SharedAccess((lanes(ELEM_BYTES, base=16 * 4),)),),
              compute=(Compute("fma", 1, chain=1), *_ops((LAST_WARP_LEVEL, 1))), store=warp0)
        b.add("write", compute=_ops((LAST_WARP_TAIL, 1), (BLOCK_TAIL, warps), (WRITE, 1)),
              **write)
        return
    b.add("write", shared_loads=(SharedAccess((_ONE_LANE,)),),
          compute=_ops((LADDER_EXIT, warps), (LADDER_WRITE, 1)), **write)


def _shared_pair(a: WarpAccess, b: WarpAccess, active: int, warps: int) -> tuple[SharedAccess, ...]:
    """The two operand loads of a run-time tree level (``a``, ``b``), with no active lane in the
    warps past ``active``."""
    out = [SharedAccess((a, b), repeat=active)] if active else []
    if warps > active:
        out.append(SharedAccess((_NO_LANE, _NO_LANE), repeat=warps - active))
    return tuple(out)


# ----- the passes -----------------------------------------------------------------------------------
def _stream(b: _Phases, cfg: ReductionConfig, tensor: str, total: int, blocks: int, vector: int,
            unroll: int, prologue: Ops, step: Ops) -> int:
    """The set-up and the grid-stride loop over the chunks of ``total`` floats of ``tensor`` with
    ``blocks`` blocks; returns the chunk size in elements."""
    threads, warps = cfg.threads, cfg.warps
    chunk = threads * vector * unroll
    b.add("setup", compute=_ops((prologue, warps)))
    if total <= 0:
        return chunk
    trips = math.ceil(math.ceil(total / chunk) / blocks)
    coord = "k" if blocks == 1 else Affine((("k", blocks), ("bx", 1)))
    tile = TileRef(tensor, (coord,), chunk * ELEM_BYTES)
    width = vector * ELEM_BYTES
    instr = tuple(lanes(width, base=u * threads * width) for u in range(unroll))
    b.add("stream", trips=trips, loads=(GlobalLoad(tile, instr, repeat=warps),),
          compute=(Compute("fma", unroll * vector * warps, chain=int(math.log2(vector)) + 1),
                   *_ops((step, warps))), warp_groups=warps)
    return chunk


def _combine(b: _Phases, cfg: ReductionConfig, unroll: int, extra: tuple[tuple[Ops, float], ...] = ()) -> None:
    """The sum of the ``unroll`` accumulators, then the first shuffle round (shuffle) or
    ``sdata[tid] = v`` (the others), and a barrier."""
    warps = cfg.warps
    tree = cfg.variant if cfg.variant in COMBINE else "grid_stride"
    compute = [Compute("fma", (unroll - 1) * warps, chain=unroll - 1), *_ops((COMBINE[tree], warps), *extra)]
    if cfg.variant == "shuffle":
        compute += [Shuffle(SHUFFLE_LEVELS * warps, chain=SHUFFLE_LEVELS),
                    Compute("fma", SHUFFLE_LEVELS * warps, chain=SHUFFLE_LEVELS), *_ops((SHUFFLE_WARP, warps))]
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
              compute=(Compute("fma", (e - 1) * warps, chain=e - 1), *_ops((LADDER_PROLOGUE[cfg.variant], warps))),
              store=(SharedAccess((lanes(ELEM_BYTES),), repeat=warps),), barrier=True)
    else:
        shape = (cfg.vector, cfg.unroll)
        step = LOOP_STEP_SHORT if shape in SHORT_STEPS[cfg.variant] else LOOP_STEP
        prologue = GRID_PROLOGUE.get((cfg.variant, *shape), GRID_PROLOGUE[(cfg.variant, 4, 4)])
        _stream(b, cfg, "x", cfg.n, cfg.blocks, cfg.vector, cfg.unroll, prologue, step)
        ragged = cfg.n % cfg.chunk_elems != 0  # every thread computes bx == full % grid
        _combine(b, cfg, cfg.unroll, ((RAGGED, warps * ragged),))
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
    chunk = _stream(b, cfg, "partial", m - tail, 1, FINAL_VECTOR, FINAL_UNROLL, FINAL_PROLOGUE, FINAL_LOOP_STEP)
    if tail:
        guarded = FINAL_VECTOR * FINAL_UNROLL
        used = math.ceil(tail / threads)
        tile = TileRef("partial", (full,), chunk * ELEM_BYTES)
        instr = tuple(lanes(ELEM_BYTES, base=j * threads * ELEM_BYTES) for j in range(used))
        # the guarded loads past the used ones are predicated off: counted as ALU work
        b.add("partial_chunk", loads=(GlobalLoad(tile, instr, repeat=warps),),
              compute=(Compute("fma", guarded * warps, chain=guarded // FINAL_UNROLL),
                       *_ops((Ops(alu=guarded - used), warps), (GUARDED_LOAD, guarded * warps))))
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
