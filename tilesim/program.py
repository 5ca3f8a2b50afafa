"""The tile program (v2): what every thread block of a tiled kernel does, as plain data.

Every kernel family lowers to a :class:`TileProgram`; the engine executes only this description and
knows no family by name. A program carries **no costs and no GPU numbers**: accesses are given as
the byte offsets the lanes of each warp instruction touch (:class:`WarpAccess`), and the engine's
per-vendor cost model (:mod:`tilesim.cost`) derives sectors, cache-line cycles, bank wavefronts and
the critical path from them and a :class:`~tilesim.hardware.HardwareSpec`. So one program runs on
every GPU of the catalog.

A program is a :class:`Launch` and an ordered tuple of :class:`Phase` s. A phase is a loop of
``trips`` identical :class:`Step` s (a GEMM's k-loop is one phase; a two-pass softmax is two; a
prologue that loads a tile once is a phase of one trip; an epilogue that writes the output is a
phase of one trip). One step runs, in this order:

1. its global loads (``loads``), issued ``pipeline_depth - 1`` steps ahead when the phase is
   pipelined, and waited for (the loads ``pipeline_depth - 1`` steps ahead are issued once the step's
   own have landed: the buffer they refill is freed by that wait); loads with ``dest="shared"`` are then stored to shared memory through
   registers (the stores are derived from the load's ``shared_offsets``), ``dest="async"`` copies
   land in shared memory by themselves (cp.async), and ``dest="bulk"`` tiles are copied by the
   copy engine (Hopper's TMA: one instruction per tile, no lanes, no L1);
2. its explicit shared-memory stores (``shared_stores``) and ``barriers`` block-wide barriers;
   ``cluster_arrives`` mbarrier arrivals with cluster-scope release on another block of a thread-block
   cluster (a consumer handing a ring stage back to the pair) sit on each warp's critical path;
3. its math in ``rounds`` load-then-use rounds: each round waits for its share of the shared loads
   (``shared_loads``), then issues its share of the ``compute`` operations (FP32 FMA, special
   functions, integer work, tensor-core MMA, warp shuffles) and shared-memory ``atomics``;
4. its global ``stores`` and global atomics, posted (the block does not wait for them).

Counts are per block and per step: each operation lists its warp instructions' lane offsets once
and a ``repeat`` factor (how many times the same instructions run on other data, e.g. once per warp).

Tile coordinates say which data a block touches, so that the L2 model can tell when blocks share
it: each coordinate is an int, the name of a block index ("bx", "by", "bz"), the phase's loop index
(``Phase.index``, "k" by default), or an :class:`Affine` combination of those.
"""

from __future__ import annotations

from dataclasses import dataclass

BLOCK_INDICES = ("bx", "by", "bz")
WARP_LANES = 32  # threads per warp instruction in the description (CUDA warps, Apple SIMD-groups)
LOAD_DESTS = ("register", "shared", "async", "bulk")
MMA_OPERANDS = ("registers", "shared")
MMA_SCOPES = ("warp", "warpgroup")
COMPUTE_PIPES = ("fma", "sfu", "int", "fp64", "issue")
COMPUTE_DTYPES = ("fp32", "fp16", "bf16", "tf32", "fp64", "int32")
ATOMIC_SPACES = ("shared", "global")


def _require(cond: bool, owner: str, name: str, value, rule: str) -> None:
    if not cond:
        raise ValueError(f"{owner}.{name} = {value!r}: {rule}")


def _nonneg(owner: str, **values) -> None:
    for name, v in values.items():
        _require(isinstance(v, (int, float)) and v >= 0, owner, name, v, "must be >= 0")


@dataclass(frozen=True)
class Affine:
    """``const + sum(coefficient * index)`` over block indices and the loop index."""

    terms: tuple[tuple[str, int], ...] = ()
    const: int = 0

    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.terms)

    def evaluate(self, values: dict) -> int:
        """The value with every index in ``values`` substituted (all must be given)."""
        return self.const + sum(c * values[n] for n, c in self.terms)


def _coord_names(c) -> tuple[str, ...]:
    if isinstance(c, Affine):
        return c.names()
    if isinstance(c, str):
        return (c,)
    return ()


@dataclass(frozen=True)
class TileRef:
    """A tile of a named tensor: ``coords`` place it (see the module docstring), ``tile_bytes`` its size."""

    tensor: str
    coords: tuple
    tile_bytes: int

    def __post_init__(self) -> None:
        for c in self.coords:
            _require(isinstance(c, (int, str, Affine)) and not isinstance(c, bool), f"TileRef({self.tensor})",
                     "coords", self.coords, "entries must be ints, index names or Affine")
        _require(isinstance(self.tile_bytes, int) and self.tile_bytes > 0, f"TileRef({self.tensor})",
                 "tile_bytes", self.tile_bytes, "must be a positive int")

    def index_names(self) -> set[str]:
        return {n for c in self.coords for n in _coord_names(c)}


@dataclass(frozen=True)
class WarpAccess:
    """One warp instruction: the byte offset each lane touches (``None``: lane inactive), each
    ``width_bytes`` wide (4, 8 or 16). Global offsets are relative to the tile's origin and may be
    any layout (row strides included); shared offsets are addresses in the block's shared memory.

    ``shared_offsets`` (global loads with ``dest`` "shared" or "async" only) says where each lane's
    data lands in shared memory; a lane whose entry is a tuple scatters its ``width_bytes`` in
    4-byte pieces to those addresses (a transposed layout)."""

    offsets: tuple
    width_bytes: int = 4
    shared_offsets: tuple | None = None

    def __post_init__(self) -> None:
        _require(self.width_bytes in (1, 2, 4, 8, 16), "WarpAccess", "width_bytes", self.width_bytes,
                 "must be 1, 2, 4, 8 or 16")
        _require(0 < len(self.offsets) <= WARP_LANES, "WarpAccess", "offsets", len(self.offsets),
                 f"must list 1..{WARP_LANES} lanes")
        if self.shared_offsets is not None:
            _require(len(self.shared_offsets) == len(self.offsets), "WarpAccess", "shared_offsets",
                     len(self.shared_offsets), f"must list as many lanes as offsets ({len(self.offsets)})")

    @property
    def active_lanes(self) -> int:
        return sum(1 for a in self.offsets if a is not None)


def lanes(width_bytes: int = 4, *, base: int = 0, stride_bytes: int | None = None, active: int = WARP_LANES,
          shared_base: int | None = None, shared_stride_bytes: int | None = None) -> WarpAccess:
    """A warp instruction whose lane ``i`` touches ``base + i * stride_bytes`` (contiguous by default:
    the stride is the width), with the first ``active`` lanes active. ``shared_base`` adds where the
    data lands in shared memory (contiguous unless ``shared_stride_bytes`` says otherwise)."""
    stride = width_bytes if stride_bytes is None else stride_bytes
    offs = tuple(base + i * stride if i < active else None for i in range(WARP_LANES))
    shared = None
    if shared_base is not None:
        sstride = width_bytes if shared_stride_bytes is None else shared_stride_bytes
        shared = tuple(shared_base + i * sstride if i < active else None for i in range(WARP_LANES))
    return WarpAccess(offs, width_bytes, shared)


@dataclass(frozen=True)
class GlobalLoad:
    """Global-memory reads of a block in one step: the ``instructions`` (times ``repeat``) into ``tile``.

    The loads of one step are merged by the L1: what reaches L2 is the distinct sectors the
    instructions touch (times ``repeat``). ``dest`` says where the data goes: "register" (used
    directly), "shared" (stored to shared memory through registers at ``shared_offsets``), "async"
    (copied straight into shared memory, cp.async), "bulk" (one bulk tensor copy of the whole tile
    into shared memory by the copy engine, Hopper's TMA: the instructions still give the bytes and
    their layout, but no warp issues them lane by lane). ``chain`` is how many dependent round trips one
    warp makes through these loads per step (a loop that re-reads L1-resident data), for the
    critical path. ``address_instructions`` is how many integer instructions the kernel issues per
    warp instruction to compute its address and bounds predicate. Cp.async copies (``dest="async"``)
    issue them after the step's barrier, in program order before the copies and the step's math:
    they hold the warps' issue before any math starts (mma_feed_probe gemm_traffic: the GEMM's copy
    code, 82 more such instructions per warp than the plain copy, adds 165 cycles per k-step, one per
    instruction and scheduler). Other loads issue them with the load instructions.

    ``bypass_l1`` loads are cached in L2 only (``ld.global.cg``, CUDA's ``__ldcg``): they neither
    hit in nor allocate lines in the SM's L1, so a re-read tile comes from L2 with the L2's latency
    every time. Loads with ``dest`` "async" or "bulk" never use the L1 anyway. A GPU without such a
    cache hint (Apple's cost model has no L1 lookups) takes the flag as a hint and ignores it.

    ``isolated_sectors`` says that the sectors this load's step touches alone in their DRAM fetch unit
    (the calibrated ``hbm_read_granularity_bytes``, 64 bytes on the H200: a sector pair) have a partner
    that no step of this load reads (32 bytes of a fresh line per row each k-step): an L2 miss then
    reads the whole unit from DRAM for nothing more. False (the default): the partner is read at
    another k-step, where it hits in the L2 (a row-major tile advancing 32 bytes a k-step), so a
    tile's own bytes are its DRAM bytes."""

    tile: TileRef
    instructions: tuple[WarpAccess, ...]
    repeat: int = 1
    dest: str = "register"
    chain: float = 0.0
    address_instructions: float = 0.0
    bypass_l1: bool = False
    isolated_sectors: bool = False

    def __post_init__(self) -> None:
        owner = f"GlobalLoad({self.tile.tensor})"
        _require(len(self.instructions) > 0, owner, "instructions", len(self.instructions), "must not be empty")
        _require(isinstance(self.repeat, int) and self.repeat >= 1, owner, "repeat", self.repeat, "must be an int >= 1")
        _require(self.dest in LOAD_DESTS, owner, "dest", self.dest, f"must be one of {', '.join(LOAD_DESTS)}")
        _nonneg(owner, chain=self.chain, address_instructions=self.address_instructions)
        _require(isinstance(self.bypass_l1, bool), owner, "bypass_l1", self.bypass_l1, "must be a bool")
        _require(isinstance(self.isolated_sectors, bool), owner, "isolated_sectors", self.isolated_sectors,
                 "must be a bool")
        if self.dest != "register":
            _require(all(w.shared_offsets is not None for w in self.instructions), owner, "dest", self.dest,
                     "needs shared_offsets on every instruction")


@dataclass(frozen=True)
class GlobalStore:
    """Global-memory writes of a block in one step (posted: the block does not wait for them). Stores
    are not merged across instructions: each instruction sends its own sectors to L2."""

    tile: TileRef
    instructions: tuple[WarpAccess, ...]
    repeat: int = 1

    def __post_init__(self) -> None:
        owner = f"GlobalStore({self.tile.tensor})"
        _require(len(self.instructions) > 0, owner, "instructions", len(self.instructions), "must not be empty")
        _require(isinstance(self.repeat, int) and self.repeat >= 1, owner, "repeat", self.repeat, "must be an int >= 1")


@dataclass(frozen=True)
class SharedAccess:
    """Shared-memory loads or stores of a block in one step: ``instructions`` times ``repeat``.
    Bank conflicts are derived from the lane offsets by the cost model.

    ``generic`` loads reach shared memory through a generic pointer (``LD.E``, as nvcc compiles
    ``wmma::load_matrix_sync`` from shared memory): each instruction also takes a request slot of
    the SM's global-memory load path, where cp.async copies and global loads queue too, and returns
    with the L1's latency (long scoreboard) instead of the shared-memory one. Nsight Compute on the
    H200's WMMA GEMMs: stalls on lg_throttle and long_scoreboard that the ldmatrix kernels do not
    have; shared_generic_probe: alone, 25-26% slower than LDS at 4-8 warps per SM."""

    instructions: tuple[WarpAccess, ...]
    repeat: int = 1
    generic: bool = False

    def __post_init__(self) -> None:
        _require(isinstance(self.repeat, int) and self.repeat >= 1, "SharedAccess", "repeat", self.repeat,
                 "must be an int >= 1")
        _require(isinstance(self.generic, bool), "SharedAccess", "generic", self.generic, "must be a bool")


@dataclass(frozen=True)
class Compute:
    """``count`` warp instructions on one pipe: "fma" (FP32 fused multiply-add), "sfu" (special
    functions: exp2, rsqrt, reciprocal), "int" (integer and other ALU work: addresses, compares,
    moves), "fp64", or "issue" (instructions that take an issue slot but no modelled pipe: uniform
    datapath, branches, constant loads). ``chain`` is the longest dependent sequence of them one
    warp runs per step."""

    pipe: str
    count: float
    dtype: str = "fp32"
    chain: float = 0.0

    def __post_init__(self) -> None:
        _require(self.pipe in COMPUTE_PIPES, "Compute", "pipe", self.pipe, f"must be one of {', '.join(COMPUTE_PIPES)}")
        _require(self.dtype in COMPUTE_DTYPES, "Compute", "dtype", self.dtype,
                 f"must be one of {', '.join(COMPUTE_DTYPES)}")
        _nonneg("Compute", count=self.count, chain=self.chain)


@dataclass(frozen=True)
class Mma:
    """``count`` tensor-core instructions of ``shape`` (m, n, k) on ``dtype`` inputs (per warp for
    warp-level instructions, per warpgroup for Hopper's wgmma). ``operands`` says where A and B come
    from: "registers" (loaded by the program's shared loads, e.g. ``ldmatrix``) or "shared" (read by
    the tensor core itself from shared memory, as wgmma does: each instruction reads its m x k and
    k x n operand tiles). ``scope`` is who issues one instruction: a "warp" (mma.sync, WMMA) or a
    "warpgroup" (Hopper's wgmma: four warps); it selects the instruction's measured latency for
    ``chain``."""

    shape: tuple[int, int, int]
    dtype: str
    count: float
    chain: float = 0.0
    operands: str = "registers"
    scope: str = "warp"

    def __post_init__(self) -> None:
        _require(len(self.shape) == 3 and all(isinstance(x, int) and x > 0 for x in self.shape), "Mma", "shape",
                 self.shape, "must be three positive ints (m, n, k)")
        _require(self.dtype in COMPUTE_DTYPES, "Mma", "dtype", self.dtype, f"must be one of {', '.join(COMPUTE_DTYPES)}")
        _nonneg("Mma", count=self.count, chain=self.chain)
        _require(self.operands in MMA_OPERANDS, "Mma", "operands", self.operands,
                 f"must be one of {', '.join(MMA_OPERANDS)}")
        _require(self.scope in MMA_SCOPES, "Mma", "scope", self.scope, f"must be one of {', '.join(MMA_SCOPES)}")

    @property
    def flops(self) -> float:
        m, n, k = self.shape
        return 2.0 * m * n * k * self.count


@dataclass(frozen=True)
class Shuffle:
    """``count`` warp shuffle instructions (``__shfl_*_sync``); ``chain`` dependent ones per warp."""

    count: float
    chain: float = 0.0

    def __post_init__(self) -> None:
        _nonneg("Shuffle", count=self.count, chain=self.chain)


@dataclass(frozen=True)
class Atomic:
    """Atomic read-modify-writes: in shared memory (``instructions`` give the lane offsets, so
    same-address lanes serialise) or in global memory (``tile`` names the target; they go to L2)."""

    space: str
    instructions: tuple[WarpAccess, ...]
    repeat: int = 1
    tile: TileRef | None = None

    def __post_init__(self) -> None:
        _require(self.space in ATOMIC_SPACES, "Atomic", "space", self.space, f"must be one of {', '.join(ATOMIC_SPACES)}")
        _require(isinstance(self.repeat, int) and self.repeat >= 1, "Atomic", "repeat", self.repeat, "must be an int >= 1")
        _require(len(self.instructions) > 0, "Atomic", "instructions", 0, "must not be empty")
        if self.space == "global":
            _require(self.tile is not None, "Atomic", "tile", None, "a global atomic needs its target tile")


ComputeOp = Compute | Mma | Shuffle


@dataclass(frozen=True)
class Step:
    """One step of a phase, per block (see the module docstring for the order)."""

    loads: tuple[GlobalLoad, ...] = ()
    shared_stores: tuple[SharedAccess, ...] = ()
    barriers: int = 0
    shared_loads: tuple[SharedAccess, ...] = ()
    compute: tuple = ()
    atomics: tuple[Atomic, ...] = ()
    stores: tuple[GlobalStore, ...] = ()
    rounds: int = 1
    cluster_arrives: int = 0

    def __post_init__(self) -> None:
        _require(isinstance(self.barriers, int) and self.barriers >= 0, "Step", "barriers", self.barriers,
                 "must be an int >= 0")
        _require(isinstance(self.cluster_arrives, int) and self.cluster_arrives >= 0, "Step", "cluster_arrives",
                 self.cluster_arrives, "must be an int >= 0")
        _require(isinstance(self.rounds, int) and self.rounds >= 1, "Step", "rounds", self.rounds, "must be an int >= 1")
        for op in self.compute:
            _require(isinstance(op, (Compute, Mma, Shuffle)), "Step", "compute", type(op).__name__,
                     "entries must be Compute, Mma or Shuffle")

    def tiles(self) -> list[TileRef]:
        return ([ld.tile for ld in self.loads] + [st.tile for st in self.stores]
                + [a.tile for a in self.atomics if a.tile is not None])


@dataclass(frozen=True)
class Phase:
    """A loop of ``trips`` identical steps. ``index`` names its loop variable in tile coordinates.

    ``pipeline_depth`` is how many buffers the loop cycles through (1: none ahead; 2: double
    buffering): a step's loads are issued ``pipeline_depth - 1`` steps ahead, once the step before
    them in the ring has its data (a cp.async ring's wait and barrier, a register prefetch after the
    barrier, a wgmma ring's release after the next stage's wait), so ``pipeline_depth - 1`` steps'
    loads are in flight while a step waits. A loop that keeps ``n`` copies in flight while it waits,
    holding no buffer past the wait, is depth ``n + 1``. ``warp_groups`` is how many groups of warps progress independently through the
    loop (1 when the steps have barriers; up to the warp count for barrier-free loops)."""

    name: str
    trips: int
    step: Step
    pipeline_depth: int = 1
    warp_groups: int = 1
    index: str = "k"

    def __post_init__(self) -> None:
        owner = f"Phase({self.name})"
        _require(isinstance(self.trips, int) and self.trips >= 1, owner, "trips", self.trips, "must be an int >= 1")
        _require(isinstance(self.pipeline_depth, int) and 1 <= self.pipeline_depth <= 8, owner, "pipeline_depth",
                 self.pipeline_depth, "must be in 1..8")
        _require(isinstance(self.warp_groups, int) and self.warp_groups >= 1, owner, "warp_groups",
                 self.warp_groups, "must be an int >= 1")
        _require(self.index not in BLOCK_INDICES, owner, "index", self.index,
                 f"must not be a block index ({', '.join(BLOCK_INDICES)})")
        allowed = set(BLOCK_INDICES) | {self.index}
        for t in self.step.tiles():
            bad = t.index_names() - allowed
            _require(not bad, owner, f"step tile {t.tensor}", sorted(bad),
                     f"coordinates may use only {sorted(allowed)}")


@dataclass(frozen=True)
class Launch:
    """Launch geometry and per-block resources.

    Blocks start in launch order. ``group_rows`` is the tile order a kernel maps its launch order to
    (Triton's ``GROUP_M``, CUTLASS's threadblock swizzle): 1 (the default) walks ``bx`` fastest, then
    ``by``; ``G`` > 1 walks ``G`` values of ``by`` for each ``bx`` before the next ``bx``, one group of
    ``G`` rows at a time (see :meth:`block_indices`)."""

    grid: tuple[int, int, int]
    threads_per_block: int
    regs_per_thread: int
    smem_bytes_per_block: int
    group_rows: int = 1

    def __post_init__(self) -> None:
        _require(len(self.grid) == 3 and all(isinstance(g, int) and g >= 1 for g in self.grid), "Launch", "grid",
                 self.grid, "must be three positive ints")
        _require(self.threads_per_block >= 1, "Launch", "threads_per_block", self.threads_per_block, "must be >= 1")
        _require(self.regs_per_thread >= 1, "Launch", "regs_per_thread", self.regs_per_thread, "must be >= 1")
        _require(self.smem_bytes_per_block >= 0, "Launch", "smem_bytes_per_block", self.smem_bytes_per_block,
                 "must be >= 0")
        _require(isinstance(self.group_rows, int) and self.group_rows >= 1, "Launch", "group_rows", self.group_rows,
                 "must be an int >= 1")

    def block_indices(self, block: int) -> tuple[int, int, int]:
        """``(bx, by, bz)`` of the ``block``-th block to start (see ``group_rows``)."""
        gx, gy, _ = self.grid
        per_layer = gx * gy
        bz, b = divmod(block, per_layer)
        g = self.group_rows
        if g == 1:
            by, bx = divmod(b, gx)
            return bx, by, bz
        per_group = g * gx
        first = (b // per_group) * g
        rows = min(gy - first, g)
        within = b % per_group
        return within // rows, first + within % rows, bz

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def warps_per_block(self) -> int:
        return -(-self.threads_per_block // WARP_LANES)


@dataclass(frozen=True)
class TileProgram:
    """What every block of a grid does: a launch and its phases, run in order.

    ``flops`` is the useful floating-point work of the whole kernel (for rates and rooflines);
    ``min_hbm_bytes`` the compulsory traffic (each input read once, each output written once)."""

    name: str
    launch: Launch
    phases: tuple[Phase, ...]
    flops: float = 0.0
    min_hbm_bytes: float = 0.0

    def __post_init__(self) -> None:
        _require(len(self.phases) >= 1, f"TileProgram({self.name})", "phases", len(self.phases),
                 "needs at least one phase")
        _nonneg(f"TileProgram({self.name})", flops=self.flops, min_hbm_bytes=self.min_hbm_bytes)
