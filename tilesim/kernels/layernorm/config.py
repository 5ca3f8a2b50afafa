"""The layernorm family's knobs: one frozen, validated configuration for prediction and measurement.

LayerNorm forward, fp32, row-major ``rows x cols``: ``y = (x - mean) / sqrt(var + eps) * w + b``
per row, ``w`` and ``b`` of length ``cols`` (the CUDA source is
``validation/families/layernorm/layernorm.cu``).

=============== ==================================================================================
``variant``     ``thread_row`` (a thread per row), ``warp_row`` (a warp per row, ``threads / 32``
                rows per block, shuffle tree), ``block_row`` (a block per row: shuffles within
                warps, then shared memory across warps)
``passes``      ``two`` (mean, then the variance around it: a second pass over the row) or ``one``
                (sum and sum of squares together, ``var = E[x^2] - mean^2``)
``cache``       ``none`` (every pass re-reads x from global memory), ``registers`` (each thread
                keeps its slice of the row in registers: ``slice_vectors`` loads, all in flight),
                ``shared`` (the first pass stores the row in shared memory, later passes read it)
``vector``      1 (4-byte accesses) or 4 (``float4``, 16-byte accesses; needs ``cols % 4 == 0``)
``threads``     threads per block
``unroll``      vectors each thread loads per loop iteration (cache ``none`` and ``shared``)
=============== ==================================================================================

Every rule is checked in ``__post_init__``; a broken one raises ``ValueError`` naming the field,
the value and the limit. Hardware limits are checked by :func:`check_fits`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilesim.analytic.occupancy import occupancy

VARIANTS = ("thread_row", "warp_row", "block_row")
PASSES = ("two", "one")
CACHES = ("none", "registers", "shared")
VECTORS = (1, 4)
UNROLLS = (1, 2, 4, 8)
WARP_LANES = 32
FLOAT_BYTES = 4

REGISTER_SLICE_MAX_FLOATS = 64
"""Largest row slice (floats per thread) the register cache holds: by the register estimate
(:attr:`LayerNormConfig.estimated_regs`) 110 registers, measured 80-106 (ptxas, H200), below the
255 a thread can have; a larger slice would crowd the register file (spills, low occupancy)."""

SHARED_ROW_MAX_BYTES = 232448
"""227 KiB: the largest shared memory one block can opt into on compute capability 9.0 (CUDA C++
Programming Guide, "Technical Specifications per Compute Capability"; ``sharedMemPerBlockOptin``
read on the H200, REFERENCE.md). :func:`check_fits` checks the actual GPU's limit."""

MAX_GRID_X = 2**31 - 1
"""Largest ``gridDim.x`` (CUDA C++ Programming Guide, compute capability 3.0 and later)."""

# The blind register estimate (see LayerNormConfig.estimated_regs), from the kernel's structure
# (validation/families/layernorm/layernorm.cu): what a thread keeps live at its busiest point.
REGS_POINTERS = 8  # x, w, b, y: four 64-bit addresses
REGS_SCALARS = 6  # row offset (2, 64-bit), lane index, nvec, 1/cols, and the two moments (sum and sum
                 # of squares, then mean and rstd in the same registers)
REGS_LOOP = 8  # the streaming loops (cache none/shared): trip count, loop index, base index, the 64-bit
               # addresses of the step's x and of its w/b/y (2 each), the shared-row address
REGS_PER_LIVE_FLOAT = 1  # every value loaded and not yet consumed holds one register
WB_GROUP_VECTORS = 4  # with float4, one vector each of w and b in flight per 4 x-vectors held


def _require(cond: bool, name: str, value, rule: str) -> None:
    if not cond:
        raise ValueError(f"LayerNormConfig.{name} = {value!r}: {rule}")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class LayerNormConfig:
    """One LayerNorm problem (``rows x cols``, fp32) and its kernel's knobs."""

    rows: int = field(metadata={"doc": "rows of x (independent normalisations)"})
    cols: int = field(metadata={"doc": "columns of x: the normalised length, and the length of w and b"})
    variant: str = field(default="block_row", metadata={
        "doc": "threads per row: thread_row (one thread), warp_row (one warp), block_row (one block)",
        "choices": VARIANTS})
    passes: str = field(default="one", metadata={
        "doc": "two: mean, then variance around it; one: sum and sum of squares together",
        "choices": PASSES})
    cache: str = field(default="registers", metadata={
        "doc": "where later passes read the row: none (global memory again), registers, shared",
        "choices": CACHES})
    vector: int = field(default=4, metadata={
        "doc": "floats per access: 1, or 4 (16-byte float4 accesses; cols must be a multiple of 4)",
        "choices": VECTORS})
    threads: int = field(default=256, metadata={
        "doc": "threads per block (a power of two, 32..1024)",
        "choices": (32, 64, 128, 256, 512, 1024)})
    unroll: int = field(default=1, metadata={
        "doc": "vectors per thread per loop iteration, loaded together (cache none or shared; 1 with registers)",
        "choices": UNROLLS})
    regs_per_thread: int | None = field(default=None, metadata={
        "doc": "registers per thread, overriding the estimate (e.g. the compiler's count)"})

    def __post_init__(self) -> None:
        _require(_is_int(self.rows) and 1 <= self.rows, "rows", self.rows, "must be an int >= 1")
        _require(_is_int(self.cols) and 1 <= self.cols, "cols", self.cols, "must be an int >= 1")
        _require(self.variant in VARIANTS, "variant", self.variant, f"must be one of {', '.join(VARIANTS)}")
        _require(self.passes in PASSES, "passes", self.passes, f"must be one of {', '.join(PASSES)}")
        _require(self.cache in CACHES, "cache", self.cache, f"must be one of {', '.join(CACHES)}")
        _require(self.vector in VECTORS and _is_int(self.vector), "vector", self.vector, "must be 1 or 4")
        _require(_is_int(self.threads) and 32 <= self.threads <= 1024
                 and self.threads & (self.threads - 1) == 0,
                 "threads", self.threads, "must be a power of two in 32..1024")
        _require(self.unroll in UNROLLS and _is_int(self.unroll), "unroll", self.unroll,
                 f"must be one of {', '.join(map(str, UNROLLS))}")
        _require(self.regs_per_thread is None or (_is_int(self.regs_per_thread) and self.regs_per_thread >= 1),
                 "regs_per_thread", self.regs_per_thread, "must be None or an int >= 1")
        _require(self.cols % self.vector == 0, "vector", self.vector,
                 f"needs cols a multiple of {self.vector} (cols = {self.cols})")
        _require(self.grid[0] <= MAX_GRID_X, "rows", self.rows,
                 f"needs {self.grid[0]} blocks, more than gridDim.x allows ({MAX_GRID_X})")
        if self.cache == "registers":
            _require(self.unroll == 1, "unroll", self.unroll,
                     "must be 1 with cache = 'registers' (the whole slice is loaded at once)")
            floats = self.slice_vectors * self.vector
            _require(floats <= REGISTER_SLICE_MAX_FLOATS, "cache", self.cache,
                     f"a slice of {floats} floats per thread (cols = {self.cols} over {self.row_threads} "
                     f"threads) exceeds {REGISTER_SLICE_MAX_FLOATS}")
        if self.cache == "shared":
            _require(self.row_smem_bytes <= SHARED_ROW_MAX_BYTES, "cache", self.cache,
                     f"{self.rows_per_block} row(s) of {self.cols} floats need {self.row_smem_bytes} bytes of "
                     f"shared memory per block, more than {SHARED_ROW_MAX_BYTES} (227 KiB)")

    # -- the mapping of threads to rows -----------------------------------------------------------
    @property
    def row_threads(self) -> int:
        """Threads that share one row."""
        return {"thread_row": 1, "warp_row": WARP_LANES, "block_row": self.threads}[self.variant]

    @property
    def rows_per_block(self) -> int:
        return self.threads // self.row_threads

    @property
    def warps(self) -> int:
        return self.threads // WARP_LANES

    @property
    def row_vectors(self) -> int:
        """Vectors (of ``vector`` floats) in one row."""
        return self.cols // self.vector

    @property
    def slice_vectors(self) -> int:
        """Vectors each thread keeps with the register cache (the kernel's ``SLICE``); 0 otherwise."""
        if self.cache != "registers":
            return 0
        return _ceil_div(self.row_vectors, self.row_threads)

    @property
    def step_vectors(self) -> int:
        """Vectors of one row one loop iteration covers (all threads of the row, ``unroll`` each);
        with the register cache, the whole slice."""
        per_thread = self.slice_vectors if self.cache == "registers" else self.unroll
        return self.row_threads * per_thread

    @property
    def full_steps(self) -> int:
        """Unguarded loop iterations per pass over a row (0 with the register cache)."""
        return 0 if self.cache == "registers" else self.row_vectors // self.step_vectors

    @property
    def tail_vectors(self) -> int:
        """Vectors of a row left to the guarded last iteration (all of them with the register cache)."""
        return self.row_vectors - self.full_steps * self.step_vectors

    # -- launch ------------------------------------------------------------------------------------
    @property
    def grid(self) -> tuple[int, int, int]:
        return (_ceil_div(self.rows, self.rows_per_block), 1, 1)

    @property
    def row_smem_bytes(self) -> int:
        """Dynamic shared memory: the rows of a block, with cache = 'shared'."""
        return self.rows_per_block * self.cols * FLOAT_BYTES if self.cache == "shared" else 0

    @property
    def reduce_smem_bytes(self) -> int:
        """The kernel's static shared memory: with block_row of several warps, two buffers (one per
        reduction) of 2 floats per warp; the other variants reduce without shared memory."""
        if self.variant != "block_row" or self.warps == 1:
            return 0
        return 2 * 2 * self.warps * FLOAT_BYTES

    @property
    def smem_bytes(self) -> int:
        """Shared memory per block (static + dynamic)."""
        return self.row_smem_bytes + self.reduce_smem_bytes

    @property
    def live_floats(self) -> int:
        """Data values (floats) a thread holds in registers at its busiest point (the blind register
        estimate's variable part, see :attr:`estimated_regs`)."""
        if self.cache == "registers":
            x = self.slice_vectors * self.vector
            wb_vectors = _ceil_div(self.slice_vectors, WB_GROUP_VECTORS) if self.vector > 1 else 1
            return x + 2 * wb_vectors * self.vector
        return self.unroll * self.vector

    @property
    def estimated_regs(self) -> int:
        """Registers per thread: ``regs_per_thread`` when given, else a blind estimate.

        The rule, what the kernel keeps live (``layernorm.cu``): four 64-bit pointers (8) and six
        scalars (the 64-bit row offset, lane index, vectors per row, 1/cols, the two moments that
        become mean and rstd) -- 14 -- plus the data values held at once
        (:attr:`live_floats`):

        * cache ``registers``: the thread's slice of x (``slice_vectors * vector`` floats, live
          from the first load to the last store) plus the w and b loads of the output pass in
          flight. The source issues every w and b load of the slice together, but ptxas streams
          them against the stores: with scalar loads one value each of w and b (2 floats), with
          float4 one vector each per :data:`WB_GROUP_VECTORS` vectors of the slice
          (``2 * ceil(slice_vectors / 4) * 4`` floats). Assuming the whole slice's w and b live
          at once (the former rule, 3x the slice) over-estimated ptxas by a median 47%, up to 2x.
        * cache ``none`` / ``shared``: the streaming loops add their loop state (:data:`REGS_LOOP`:
          trip count, index, base, the step's 64-bit address, the shared-row address) and one
          step's loads in flight, ``unroll * vector`` floats. The output pass does not hold x, w
          and b of a whole step at once: ptxas consumes each x vector with its w and b as they
          arrive, so the first pass's ``unroll`` loads are the peak.

        Capped at 255 (the architectural limit)."""
        if self.regs_per_thread is not None:
            return self.regs_per_thread
        fixed = REGS_POINTERS + REGS_SCALARS + (0 if self.cache == "registers" else REGS_LOOP)
        return min(255, fixed + REGS_PER_LIVE_FLOAT * self.live_floats)

    @property
    def label(self) -> str:
        """The knobs without the problem size, e.g. ``block_row.one.registers.v4.t256``."""
        base = f"{self.variant}.{self.passes}.{self.cache}.v{self.vector}.t{self.threads}"
        return base if self.cache == "registers" else f"{base}.u{self.unroll}"


def check_fits(config: LayerNormConfig, hw) -> None:
    """Raise ``ValueError`` if ``config`` cannot launch on ``hw`` (naming field, value and limit)."""
    if config.threads > hw.max_threads_per_block:
        raise ValueError(f"LayerNormConfig.threads = {config.threads}: exceeds max_threads_per_block = "
                         f"{hw.max_threads_per_block} on {hw.name}")
    if config.smem_bytes > hw.smem_per_block_optin_bytes:
        raise ValueError(f"LayerNormConfig.smem_bytes = {config.smem_bytes}: exceeds smem_per_block_optin_bytes = "
                         f"{hw.smem_per_block_optin_bytes} on {hw.name}")
    regs = config.estimated_regs
    if regs > hw.max_regs_per_thread:
        raise ValueError(f"LayerNormConfig.regs_per_thread = {regs} (estimated): exceeds max_regs_per_thread = "
                         f"{hw.max_regs_per_thread} on {hw.name}")
    occ = occupancy(hw, config.threads, regs, config.smem_bytes)
    if not occ.fits:
        raise ValueError(f"LayerNormConfig.threads = {config.threads}: a block of {config.threads} threads x "
                         f"{regs} registers does not fit on an SM of {hw.name} "
                         f"(limited by {occ.limiter}: regs_per_sm = {hw.regs_per_sm})")
