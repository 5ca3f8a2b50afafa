"""The softmax family's knobs: one frozen, validated configuration shared by prediction and measurement.

Row softmax, fp32, row-major ``rows x cols``: ``y = exp(x - max) / sum(exp(x - max))`` per row.
The CUDA kernels are ``validation/families/softmax/softmax.cu``, one template per variant.

================ ===============================================================================
``thread_row``   one thread per row, looping over it (lanes of a warp read 32 different rows)
``warp_shuffle`` one warp per row (``threads / 32`` rows per block), butterfly shuffle reductions
``block_tree``   one block per row; max and sum by classic shared-memory trees (``tree``:
                 sequential or interleaved addressing), one barrier per level
``online``       the max and the sum in one pass with online rescaling, then the write pass;
                 ``unit`` "warp" (warp per row) or "block" (block per row: warp shuffles, one
                 barrier, then the warps' partial states merged by shuffles)
================ ===============================================================================

``cache`` says where the later passes find the row: "none" re-reads global memory (three reads for
the classic form, two for online), "registers" loads it once into registers (at most
:data:`REG_CACHE_MAX_FLOATS` floats per thread, a compile-time array), "shared" stages it in
dynamic shared memory during the first pass (each thread re-reads only what it stored itself).
``vector`` is floats per access (4: float4, needs ``cols % 4 == 0``), ``unroll`` the vectors each
thread loads per loop step (independent loads in flight; the registers cache loads its whole
slice at once and takes ``unroll = 1``).

Every rule is checked in ``__post_init__``; a broken one raises ``ValueError`` naming the field,
the value and the limit. Hardware limits are checked by :func:`check_fits`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilesim.analytic.occupancy import occupancy
from tilesim.kernels.gemm.config import launch_bound_regs, register_limited_blocks

VARIANTS = ("thread_row", "warp_shuffle", "block_tree", "online")
UNITS = ("warp", "block")
CACHES = ("none", "registers", "shared")
TREES = ("sequential", "interleaved")
VECTORS = (1, 4)
UNROLLS = (1, 2, 4, 8)
THREAD_CHOICES = (32, 64, 128, 256, 512, 1024)

ELEM_BYTES = 4  # fp32
WARP_THREADS = 32
REG_CACHE_MAX_FLOATS = 64
"""Design bound of the registers cache: floats of the row held per thread. 64 values plus the
kernel's ~25-30 other registers stays far below the 255-register limit of compute capability
9.0 (no spills), and still lets 512-thread blocks launch (64K registers per SM)."""
SMEM_BLOCK_LIMIT_BYTES = 227 * 1024
"""Shared memory one block may use on the H200 (opt-in limit of compute capability 9.0, 227 KiB:
CUDA C++ Programming Guide, "Technical Specifications per Compute Capability"; cupy reports
sharedMemPerBlockOptin = 232448 on the lent H200). :func:`check_fits` checks the actual GPU."""
FLOPS_PER_ELEMENT = 5
"""Useful work per element: the max comparison, the subtraction, the exponential, the sum and the
final scaling (the exponential counted as one operation)."""

REGS_STREAMING_BASE = 16
REGS_CACHED_BASE = 16
"""Registers besides the data values (the blind estimate's constants), the same for every cache:
two 64-bit pointers (x and y rows, 4), the row, the thread's rank in its row, the vectors per row,
the loop counter and bound (or the unrolled chunk index), the max, the sum, the reciprocal, a
64-bit step address (2) and two temporaries (16)."""
REGS_CLASSIC_EXTRA = 8
"""What the classic three-pass form (thread_row, warp_shuffle, block_tree without the registers
cache) keeps beyond the one-pass online form at the same ``unroll x vector``: its ``acc[U][V]``
slots live alongside a step's loads, which the compiler does not fold into the load registers as it
does the online form's running state. Compared with ptxas (issue #10): the suite's NVRTC counts are
40 at unroll x vector = 16, 56 at 32 and 28 / 24 at 4 for the classic kernels (online: 32 at 16); an
offline nvcc 13.0 check of 46 classic configurations outside the suite (threads 128..512, unroll x
vector 4..32, cache none) gave 28-30 at 4, 29-32 at 8, 36-44 at 16 and 56-80 at 32. Against the 112
suite kernels (``tests/test_register_estimates.py``): 96.4% within 8 registers and 81.2% with the
compiler's occupancy (74.1% without this term). The misses left: NVRTC gives 32 rather than 40 to
the classic block_tree with the sequential tree at 128 and 256 threads and to every block_tree at
1024 threads (offline nvcc gives 36 to both trees at 256: a compiler choice, not a structure the
rule sees), and a few registers-cache kernels a step from an occupancy boundary."""


REGS_SINGLE_BLOCK_SNAP = 8
"""ptxas keeps a kernel off a single resident block per SM: when the estimate leaves room for one
block only (registers limiting) and the two-block step is at most this many registers lower, the
kernel is given the step's registers (it rematerializes addresses and reorders loads to fit). Offline
nvcc 13.0 (sm_90) on the classic kernels at unroll x vector = 16, cache none (row kernels' study grid,
``python -m validation.studies.softmax_register_counts``): 36-44 registers at 128..512 threads, 32 at
1024 threads for every variant (block_tree, warp_shuffle, thread_row), where 32 is the two-block step
of a 1024-thread block; at unroll x vector = 32 (56-64 at 128..512) the step is too far and the
1024-thread kernels take the launch bound's 64. The same pull shows in the GEMM family's compiler
counts (:data:`tilesim.kernels.gemm.config.REGS_OCCUPANCY_SNAP`); there it reaches further steps, here
only the single-block one: a classic kernel at 40 registers and 256 threads keeps its 40 (6 blocks,
not 8)."""


def _require(cond: bool, name: str, value, rule: str) -> None:
    if not cond:
        raise ValueError(f"SoftmaxConfig.{name} = {value!r}: {rule}")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class SoftmaxConfig:
    """One row-softmax problem (``rows x cols`` fp32) and kernel; see the module docstring."""

    rows: int = field(default=4096, metadata={"doc": "rows of the input (one softmax each)"})
    cols: int = field(default=1024, metadata={"doc": "elements per row"})
    variant: str = field(default="warp_shuffle", metadata={
        "doc": "who owns a row: thread_row (a thread), warp_shuffle (a warp), block_tree (a block, "
               "shared-memory trees), online (one pass for max and sum; unit says warp or block)",
        "choices": VARIANTS})
    unit: str = field(default="warp", metadata={
        "doc": "online only: a warp or a block per row (the other variants fix their unit)",
        "choices": UNITS})
    tree: str = field(default="sequential", metadata={
        "doc": "block_tree only: shared-memory tree with sequential addressing (conflict-free) or "
               "interleaved addressing (thread t combines 2*s*t and 2*s*t+s: bank conflicts)",
        "choices": TREES})
    cache: str = field(default="none", metadata={
        "doc": "where later passes read the row: none (global memory again), registers, shared",
        "choices": CACHES})
    vector: int = field(default=4, metadata={
        "doc": "floats per load and store (4 = float4; needs cols % 4 == 0)", "choices": VECTORS})
    threads: int = field(default=256, metadata={
        "doc": "threads per block (a power of two, 32..1024)", "choices": THREAD_CHOICES})
    unroll: int = field(default=1, metadata={
        "doc": "vectors each thread loads per loop step (independent loads in flight); 1 for "
               "cache = registers, which loads its whole slice at once", "choices": UNROLLS})
    regs_per_thread: int | None = field(default=None, metadata={
        "doc": "registers per thread if known (the compiler's count); None: the estimate"})

    def __post_init__(self) -> None:
        for name in ("rows", "cols"):
            v = getattr(self, name)
            _require(isinstance(v, int) and not isinstance(v, bool) and 1 <= v < 2**31, name, v,
                     "must be an int in 1..2**31-1")
        _require(self.variant in VARIANTS, "variant", self.variant, f"must be one of {', '.join(VARIANTS)}")
        _require(self.unit in UNITS, "unit", self.unit, f"must be one of {', '.join(UNITS)}")
        _require(self.unit == "warp" or self.variant == "online", "unit", self.unit,
                 f"only the online variant takes unit = 'block' ({self.variant} fixes its own unit)")
        _require(self.tree in TREES, "tree", self.tree, f"must be one of {', '.join(TREES)}")
        _require(self.tree == "sequential" or self.variant == "block_tree", "tree", self.tree,
                 f"only block_tree has a shared-memory tree ({self.variant} must keep 'sequential')")
        _require(self.cache in CACHES, "cache", self.cache, f"must be one of {', '.join(CACHES)}")
        _require(self.vector in VECTORS, "vector", self.vector, "must be 1 or 4")
        _require(self.vector == 1 or self.cols % self.vector == 0, "vector", self.vector,
                 f"needs cols % {self.vector} == 0 (cols = {self.cols})")
        _require(self.threads in THREAD_CHOICES, "threads", self.threads, "must be a power of two in 32..1024")
        _require(self.unroll in UNROLLS, "unroll", self.unroll, "must be 1, 2, 4 or 8")
        _require(self.unroll == 1 or self.cache != "registers", "unroll", self.unroll,
                 "must be 1 with cache = 'registers' (its loads are all issued at once)")
        if self.cache == "registers":
            held = self.chunks * self.vector
            _require(held <= REG_CACHE_MAX_FLOATS, "cache", self.cache,
                     f"holds {held} floats per thread (cols {self.cols} over {self.threads_per_row} "
                     f"thread(s) per row, rounded to vectors of {self.vector}): the limit is "
                     f"{REG_CACHE_MAX_FLOATS}")
        if self.cache == "shared":
            _require(self.smem_bytes <= SMEM_BLOCK_LIMIT_BYTES, "cache", self.cache,
                     f"stages {self.smem_bytes} bytes per block: the limit is {SMEM_BLOCK_LIMIT_BYTES} (227 KiB)")
        if self.regs_per_thread is not None:
            _require(isinstance(self.regs_per_thread, int) and 1 <= self.regs_per_thread <= 255,
                     "regs_per_thread", self.regs_per_thread, "must be None or an int in 1..255")

    # ---- geometry ---------------------------------------------------------------------------------
    @property
    def row_unit(self) -> str:
        """Who owns a row: "thread", "warp" or "block"."""
        if self.variant == "thread_row":
            return "thread"
        if self.variant == "block_tree" or (self.variant == "online" and self.unit == "block"):
            return "block"
        return "warp"

    @property
    def threads_per_row(self) -> int:
        return {"thread": 1, "warp": WARP_THREADS, "block": self.threads}[self.row_unit]

    @property
    def rows_per_block(self) -> int:
        return self.threads // self.threads_per_row

    @property
    def warps(self) -> int:
        return self.threads // WARP_THREADS

    @property
    def nvec(self) -> int:
        """Vectors (of ``vector`` floats) per row."""
        return _ceil_div(self.cols, self.vector)

    @property
    def chunks(self) -> int:
        """Vectors of the row each thread handles (at most; the registers cache's array length)."""
        return _ceil_div(self.nvec, self.threads_per_row)

    @property
    def grid(self) -> tuple[int, int, int]:
        return (_ceil_div(self.rows, self.rows_per_block), 1, 1)

    @property
    def blocks(self) -> int:
        return self.grid[0]

    @property
    def dynamic_smem_bytes(self) -> int:
        """The staged rows of the shared cache (0 otherwise)."""
        if self.cache != "shared":
            return 0
        return self.rows_per_block * self.cols * ELEM_BYTES

    @property
    def static_smem_bytes(self) -> int:
        """The reduction buffers: two trees of ``threads`` floats (block_tree), two floats per warp
        (online, block unit)."""
        if self.variant == "block_tree":
            return 2 * self.threads * ELEM_BYTES
        if self.row_unit == "block":
            return 2 * self.warps * ELEM_BYTES
        return 0

    @property
    def smem_bytes(self) -> int:
        return self.static_smem_bytes + self.dynamic_smem_bytes

    @property
    def estimated_regs(self) -> int:
        """Registers per thread: the override if given, else the blind estimate.

        Rule, what the kernel keeps live (``softmax.cu``): a base of 16 (pointers, indices, loop
        state, max, sum, reciprocal: :data:`REGS_STREAMING_BASE` = :data:`REGS_CACHED_BASE`) plus
        the data values a thread holds at once: with cache = registers its slice of the row
        (``chunks * vector`` floats, live from the first load to the last store); otherwise one
        step's loads in flight (``unroll * vector``), and for the classic three-pass form
        (:attr:`is_classic`) :data:`REGS_CLASSIC_EXTRA` for its per-slot accumulators. Then what ptxas
        does with that demand: pulled down to two blocks per SM from one when that step is within
        :data:`REGS_SINGLE_BLOCK_SNAP` registers. Over the launch bound (``__launch_bounds__(threads)``:
        65536 / threads, in steps of 8) ptxas would cap the count and spill: the demand is returned
        uncapped, so that :func:`check_fits` rejects the kernel."""
        if self.regs_per_thread is not None:
            return self.regs_per_thread
        if self.cache == "registers":
            regs = REGS_CACHED_BASE + self.chunks * self.vector
        else:
            extra = REGS_CLASSIC_EXTRA if self.is_classic else 0
            regs = REGS_STREAMING_BASE + self.unroll * self.vector + extra
        if regs > launch_bound_regs(self.threads):
            return regs  # ptxas would cap it and spill: left over the bound, check_fits rejects the kernel
        if register_limited_blocks(regs, self.threads) == 1:
            two = regs
            while two > 1 and register_limited_blocks(two, self.threads) < 2:
                two -= 1
            if regs - two <= REGS_SINGLE_BLOCK_SNAP:
                regs = two
        return regs

    @property
    def is_classic(self) -> bool:
        """True for the three-pass form with ``acc[U][V]`` slots (every variant but online)."""
        return self.variant != "online"

    @property
    def label(self) -> str:
        """The kernel's knobs without the problem size, e.g. ``block_tree-seq/t256/v4/u4/none``."""
        name = self.variant
        if self.variant == "block_tree":
            name += "-seq" if self.tree == "sequential" else "-int"
        if self.variant == "online":
            name += f"-{self.unit}"
        return f"{name}/t{self.threads}/v{self.vector}/u{self.unroll}/{self.cache}"

    # ---- analytic counts --------------------------------------------------------------------------
    @property
    def elements(self) -> int:
        return self.rows * self.cols

    @property
    def flops(self) -> float:
        return float(FLOPS_PER_ELEMENT * self.elements)

    @property
    def min_hbm_bytes(self) -> float:
        """The input read once and the output written once."""
        return float(2 * self.elements * ELEM_BYTES)

    @property
    def global_reads(self) -> int:
        """How many times the kernel reads each input element from global memory."""
        if self.cache != "none":
            return 1
        return 2 if self.variant == "online" else 3


def check_fits(cfg: SoftmaxConfig, hw) -> None:
    """Raise ``ValueError`` if ``cfg`` cannot launch on ``hw`` (naming field, value, limit)."""
    if cfg.threads > hw.max_threads_per_block:
        raise ValueError(f"SoftmaxConfig.threads = {cfg.threads} exceeds max_threads_per_block = "
                         f"{hw.max_threads_per_block} on {hw.name}")
    if cfg.smem_bytes > hw.smem_per_block_optin_bytes:
        raise ValueError(f"SoftmaxConfig.smem_bytes = {cfg.smem_bytes} exceeds smem_per_block_optin_bytes = "
                         f"{hw.smem_per_block_optin_bytes} on {hw.name}")
    if cfg.estimated_regs > hw.max_regs_per_thread:
        raise ValueError(f"SoftmaxConfig.regs_per_thread = {cfg.estimated_regs} exceeds max_regs_per_thread = "
                         f"{hw.max_regs_per_thread} on {hw.name}")
    occ = occupancy(hw, cfg.threads, cfg.estimated_regs, cfg.smem_bytes)
    if not occ.fits:
        raise ValueError(f"SoftmaxConfig.regs_per_thread = {cfg.estimated_regs}: a block of {cfg.threads} threads "
                         f"cannot be resident on one SM of {hw.name} (limited by {occ.limiter}; "
                         f"regs_per_sm = {hw.regs_per_sm})")

