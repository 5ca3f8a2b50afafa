"""The reduction family's knobs: the sum of ``n`` fp32 values, one frozen, validated configuration.

Variants (Mark Harris, "Optimizing parallel reduction in CUDA", NVIDIA 2007, kernels 1-7, plus a
warp-shuffle finish), with the knobs each one reads:

========================= ========================================================================
``interleaved_divergent`` 1 element per thread; tree ``if (tid % (2*s) == 0)``: divergent warps,
                          an integer modulo per level
``interleaved_strided``   1 element per thread; tree ``index = 2*s*tid``: shared-memory bank
                          conflicts
``sequential``            1 element per thread; tree ``if (tid < s)``: sequential addressing
``first_add``             2 elements per thread, added during the load; sequential tree
``unroll_last_warp``      as first_add; the last 6 levels in warp 0 without block barriers
``complete_unroll``       as unroll_last_warp with every level unrolled (block size known)
``grid_stride``           grid-stride loop (``vector``-wide loads, ``unroll`` in flight per
                          thread), then the unrolled tree. ``elems_per_thread`` or ``grid``
``shuffle``               the same loop, then warp shuffles (shared memory: one value per warp)
========================= ========================================================================

``finish``: "second_pass" (block b writes its partial sum; a second launch of one block sums the
partials) or "atomic" (each block atomically adds its sum into the output, zeroed by a 4-byte
memset that is part of the operation).

Every rule is checked in ``__post_init__``; a broken one raises ``ValueError`` naming the field,
the value and the limit. Hardware limits are checked by :func:`check_fits`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from tilesim.analytic.occupancy import occupancy

VARIANTS = ("interleaved_divergent", "interleaved_strided", "sequential", "first_add",
            "unroll_last_warp", "complete_unroll", "grid_stride", "shuffle")
LADDER = VARIANTS[:6]  # one block per chunk of threads x (1 or 2) elements, no loop
GRID_STRIDE = ("grid_stride", "shuffle")
FINISHES = ("second_pass", "atomic")
THREADS = (64, 128, 256, 512, 1024)
VECTORS = (1, 2, 4)
MAX_UNROLL = 8
ELEM_BYTES = 4  # fp32
FINAL_VECTOR = 4  # the second pass reads the partials with 16-byte loads, 4 in flight per thread
FINAL_UNROLL = 4  # (RED_FINAL_VECTOR, RED_FINAL_UNROLL in validation/families/reduction/reduction.cu)
MAX_GRID_X = 2**31 - 1  # gridDim.x limit, CUDA C++ Programming Guide, "Compute capabilities" table

# Registers per thread, the blind estimate (compared with ptxas in the validation records):
# REGS_FIXED for the thread and block index, n, the input and output pointers (2 each), the
# shared-memory address, the running value and one temporary; a ladder kernel adds the values it
# loads and 2 tree temporaries (the partner value and the level); a grid-stride loop adds the
# vector x unroll floats it keeps in flight, its unroll accumulators and REGS_LOOP_POINTER for the
# 64-bit chunk pointer and its 64-bit stride.
REGS_FIXED = 10
REGS_TREE = 2
REGS_LOOP_POINTER = 4
REGS_FINAL_CONSTANT_STRIDE = 2
"""The second pass (``reduce_final``) runs the same loop with ``grid = 1`` and block 0 known at
compile time: its chunk stride is a constant, not a 64-bit register pair."""


def _require(cond: bool, name: str, value, rule: str) -> None:
    if not cond:
        raise ValueError(f"ReductionConfig.{name} = {value!r}: {rule}")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _doc(default, doc: str, choices: tuple = ()):
    return field(default=default, metadata={"doc": doc, "choices": choices})


@dataclass(frozen=True)
class ReductionConfig:
    """One reduction problem (``n`` fp32 values to sum) and kernel; see the module docstring."""

    n: int = field(metadata={"doc": "number of fp32 elements to sum (the problem size)"})
    variant: str = _doc("shuffle", "the kernel of the ladder (see the module docstring)", VARIANTS)
    threads: int = _doc(256, "threads per block (a power of two in 64..1024)", THREADS)
    elems_per_thread: int = _doc(
        0, "elements each thread sums before the block tree. 0: the variant's own (1 for the "
        "interleaved and sequential kernels, 2 for first_add, unroll_last_warp and "
        "complete_unroll; for grid_stride/shuffle one loop step, vector*unroll, or what grid "
        "implies). grid_stride/shuffle: a multiple of vector*unroll; it sets the grid")
    grid: int = _doc(0, "blocks of the first pass (grid_stride/shuffle only; 0: derived from "
                        "elems_per_thread)")
    vector: int = _doc(1, "floats per global load: 1, 2 or 4 (16-byte loads); grid_stride/shuffle "
                          "only", VECTORS)
    unroll: int = _doc(1, "independent loads in flight per thread per loop step, 1..8; "
                          "grid_stride/shuffle only", tuple(range(1, MAX_UNROLL + 1)))
    finish: str = _doc("second_pass", "how the block sums are combined: a second one-block launch "
                                      "or atomicAdd into the zeroed output", FINISHES)
    regs_per_thread: int | None = _doc(None, "registers per thread (override of the estimate, e.g. "
                                             "the compiler's count); None: estimated_regs")

    def __post_init__(self) -> None:
        _require(_is_int(self.n) and self.n >= 1, "n", self.n, "must be a positive integer")
        _require(self.variant in VARIANTS, "variant", self.variant, f"must be one of {', '.join(VARIANTS)}")
        _require(_is_int(self.threads) and self.threads in THREADS, "threads", self.threads,
                 "must be a power of two in 64..1024")
        _require(self.vector in VECTORS and _is_int(self.vector), "vector", self.vector, "must be 1, 2 or 4")
        _require(_is_int(self.unroll) and 1 <= self.unroll <= MAX_UNROLL, "unroll", self.unroll,
                 f"must be an integer in 1..{MAX_UNROLL}")
        _require(_is_int(self.elems_per_thread) and self.elems_per_thread >= 0, "elems_per_thread",
                 self.elems_per_thread, "must be an integer >= 0")
        _require(_is_int(self.grid) and 0 <= self.grid <= MAX_GRID_X, "grid", self.grid,
                 f"must be an integer in 0..{MAX_GRID_X}")
        _require(self.finish in FINISHES, "finish", self.finish, f"must be one of {', '.join(FINISHES)}")
        if self.regs_per_thread is not None:
            _require(_is_int(self.regs_per_thread) and 1 <= self.regs_per_thread <= 255, "regs_per_thread",
                     self.regs_per_thread, "must be an integer in 1..255 or None")
        v = self.variant
        if v in LADDER:
            _require(self.vector == 1, "vector", self.vector, f"must be 1 for variant {v} (scalar loads)")
            _require(self.unroll == 1, "unroll", self.unroll, f"must be 1 for variant {v} (no loop)")
            _require(self.grid == 0, "grid", self.grid, f"must be 0 for variant {v} (one block per "
                     f"{self.ladder_elems * self.threads} elements)")
            _require(self.elems_per_thread in (0, self.ladder_elems), "elems_per_thread",
                     self.elems_per_thread, f"must be 0 or {self.ladder_elems} for variant {v}")
        else:
            step = self.vector * self.unroll
            _require(self.elems_per_thread % step == 0, "elems_per_thread", self.elems_per_thread,
                     f"must be a multiple of vector*unroll = {step}")
            _require(self.grid == 0 or self.elems_per_thread == 0, "grid", self.grid,
                     f"must be 0 when elems_per_thread is set ({self.elems_per_thread}): set one of them")
            _require(self.grid <= self.chunks, "grid", self.grid,
                     f"must be at most the number of chunks of threads*vector*unroll = "
                     f"{self.chunk_elems} elements, {self.chunks} for n = {self.n}")
        _require(self.blocks <= MAX_GRID_X, "n", self.n, f"needs {self.blocks} blocks, over gridDim.x "
                 f"limit {MAX_GRID_X}")

    # ----- geometry ------------------------------------------------------------------------------
    @property
    def is_ladder(self) -> bool:
        """True for the six kernels without a loop (one block per chunk)."""
        return self.variant in LADDER

    @property
    def ladder_elems(self) -> int:
        """Elements one thread of a ladder kernel loads: 1, or 2 from first_add on."""
        return 1 if self.variant in LADDER[:3] else 2

    @property
    def warps(self) -> int:
        return self.threads // 32

    @property
    def chunk_elems(self) -> int:
        """Elements one block reads per loop step (ladder: its whole share)."""
        if self.is_ladder:
            return self.threads * self.ladder_elems
        return self.threads * self.vector * self.unroll

    @property
    def chunks(self) -> int:
        """Chunks of ``chunk_elems`` covering ``n`` (the last one may be partial)."""
        return math.ceil(self.n / self.chunk_elems)

    @property
    def blocks(self) -> int:
        """Blocks of the first launch."""
        if self.is_ladder:
            return self.chunks
        if self.grid:
            return self.grid
        steps = max(1, self.elems_per_thread // (self.vector * self.unroll))
        return math.ceil(self.chunks / steps)

    @property
    def trips(self) -> int:
        """Loop steps of the busiest block: ``ceil(chunks / blocks)`` (1 for the ladder)."""
        return math.ceil(self.chunks / self.blocks)

    @property
    def elements_per_thread(self) -> int:
        """Elements the busiest thread sums before the block tree."""
        if self.is_ladder:
            return self.ladder_elems
        return self.trips * self.vector * self.unroll

    @property
    def smem_bytes(self) -> int:
        """Static shared memory per block: one float per thread (per warp for shuffle)."""
        per = self.warps if self.variant == "shuffle" else self.threads
        return per * ELEM_BYTES

    @property
    def final_blocks(self) -> int:
        """Blocks of the second launch (0 with the atomic finish)."""
        return 1 if self.finish == "second_pass" else 0

    def _regs(self, vector: int, unroll: int, ladder_elems: int) -> int:
        if ladder_elems:
            return REGS_FIXED + ladder_elems + REGS_TREE
        return REGS_FIXED + vector * unroll + unroll + REGS_LOOP_POINTER

    @property
    def estimated_regs(self) -> int:
        """Registers per thread of the first pass: the override if given, else the blind rule
        (see ``REGS_FIXED``): ladder ``10 + elements + 2``; loop ``10 + vector*unroll + unroll + 4``."""
        if self.regs_per_thread is not None:
            return self.regs_per_thread
        if self.is_ladder:
            return self._regs(1, 1, self.ladder_elems)
        return self._regs(self.vector, self.unroll, 0)

    @property
    def estimated_final_regs(self) -> int:
        """Registers per thread of the second pass (its loop: FINAL_VECTOR x FINAL_UNROLL, with a
        constant stride: ``10 + 16 + 4 + 4 - 2 = 32``)."""
        if self.regs_per_thread is not None:
            return self.regs_per_thread
        return self._regs(FINAL_VECTOR, FINAL_UNROLL, 0) - REGS_FINAL_CONSTANT_STRIDE

    @property
    def estimated_launch_regs(self) -> int:
        """The most registers per thread of the kernels one run launches (the first pass, and the
        second with ``finish = "second_pass"``): what the recorded compiler count (the maximum over
        both kernels' ``num_regs``) is compared with."""
        if self.finish == "second_pass":
            return max(self.estimated_regs, self.estimated_final_regs)
        return self.estimated_regs

    @property
    def flops(self) -> float:
        """Useful additions: n - 1."""
        return float(self.n - 1)

    @property
    def min_hbm_bytes(self) -> float:
        """Compulsory traffic: the input read once and the 4-byte sum written once."""
        return float(ELEM_BYTES * (self.n + 1))

    @property
    def label(self) -> str:
        """The knobs without the problem size, e.g. ``shuffle_t256_v4u4_e64_atomic``."""
        parts = [self.variant, f"t{self.threads}"]
        if not self.is_ladder:
            parts.append(f"v{self.vector}u{self.unroll}")
            if self.grid:
                parts.append(f"g{self.grid}")
            elif self.elems_per_thread:
                parts.append(f"e{self.elems_per_thread}")
        parts.append("atomic" if self.finish == "atomic" else "2pass")
        if self.regs_per_thread is not None:
            parts.append(f"r{self.regs_per_thread}")
        return "_".join(parts)

    def with_(self, **changes) -> ReductionConfig:
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return asdict(self)


def check_fits(cfg: ReductionConfig, hw) -> None:
    """Raise ``ValueError`` if a launch of ``cfg`` cannot run on ``hw`` (naming field, value, limit)."""
    if cfg.threads > hw.max_threads_per_block:
        raise ValueError(f"ReductionConfig.threads = {cfg.threads}: exceeds max_threads_per_block = "
                         f"{hw.max_threads_per_block} on {hw.name}")
    if cfg.threads % hw.warp_size:
        raise ValueError(f"ReductionConfig.threads = {cfg.threads}: must be a multiple of the warp size "
                         f"{hw.warp_size} on {hw.name}")
    if cfg.smem_bytes > hw.smem_per_block_default_bytes:
        raise ValueError(f"ReductionConfig.smem_bytes = {cfg.smem_bytes}: exceeds smem_per_block_default_bytes "
                         f"= {hw.smem_per_block_default_bytes} (static shared memory) on {hw.name}")
    for name, regs in (("estimated_regs", cfg.estimated_regs), ("estimated_final_regs", cfg.estimated_final_regs)):
        if regs > hw.max_regs_per_thread:
            raise ValueError(f"ReductionConfig.{name} = {regs}: exceeds max_regs_per_thread = "
                             f"{hw.max_regs_per_thread} on {hw.name}")
        occ = occupancy(hw, cfg.threads, regs, cfg.smem_bytes)
        if not occ.fits:
            raise ValueError(f"ReductionConfig.{name} = {regs}: a block of {cfg.threads} threads does not fit "
                             f"on an SM of {hw.name} (limited by {occ.limiter})")
