"""The tile-program description: what one thread block of a tiled kernel does.

Every kernel family lowers to a :class:`TileProgram`; the engine executes only this description
and knows no family by name. A user can write one by hand for a kernel of their own (see the
README, "Describing your own kernel").

A block runs a *prologue* (nothing but launch in this version), a *k-loop* of ``iterations``
identical steps, and an *epilogue*. One k-loop step is, in order:

1. the global loads of the step (``loads``), issued ``pipeline_depth - 1`` steps ahead when the
   kernel double-buffers (``pipeline_depth >= 2``), otherwise issued and awaited in place;
2. the shared-memory stores that stage register-loaded data (``smem_stores``);
3. ``barriers`` block-wide barriers;
4. the math: shared->register loads (``smem_loads``), FFMA/MMA and other instructions.

Counts are *per block per k-step* and are warp-level (one warp instruction = 32 threads).
Tensor tiles are named by coordinates drawn from the block index and the k-step
(``"bx"``, ``"by"``, ``"bz"``, ``"k"``) or integer constants, so that the engine's L2 model can tell
when two blocks touch the same data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

COORD_NAMES = ("bx", "by", "bz", "k")
LOAD_DESTS = ("register", "shared", "async")


def _positive(owner: str, **values: float) -> None:
    for name, v in values.items():
        if v is None or v < 0:
            raise ValueError(f"{owner}: {name} must be >= 0, got {v!r}")


@dataclass(frozen=True)
class TileRef:
    """A tile of a named tensor. ``coords`` entries are "bx", "by", "bz", "k" or ints."""

    tensor: str
    coords: tuple
    tile_bytes: int

    def __post_init__(self) -> None:
        for c in self.coords:
            if not (isinstance(c, int) or c in COORD_NAMES):
                raise ValueError(f"TileRef {self.tensor}: coordinate {c!r} must be an int or one of {COORD_NAMES}")
        if self.tile_bytes <= 0:
            raise ValueError(f"TileRef {self.tensor}: tile_bytes must be > 0, got {self.tile_bytes}")


@dataclass(frozen=True)
class GlobalAccess:
    """One global-memory access stream of a block per k-step (or per epilogue).

    ``l2_sectors`` is what the block requests from L2 (32-byte sectors, after L1 hits), which is
    more than ``useful_bytes / 32`` when the access is uncoalesced; ``l1_wavefronts`` is the
    L1/LSU work in SM clock cycles (see :func:`tilesim.kernels.access.l1_cycles`);
    ``instructions`` are warp-level.
    ``dest`` says where loaded data goes: "register" (used directly), "shared" (through registers,
    then stored by ``smem_stores``), "async" (cp.async straight into shared memory).
    For stores (epilogue writes) ``dest`` is ignored.
    """

    tile: TileRef
    useful_bytes: int
    l2_sectors: float
    l1_wavefronts: float
    instructions: float
    dest: str = "register"

    def __post_init__(self) -> None:
        _positive(f"access to {self.tile.tensor}", useful_bytes=self.useful_bytes, l2_sectors=self.l2_sectors,
                  l1_wavefronts=self.l1_wavefronts, instructions=self.instructions)
        if self.dest not in LOAD_DESTS:
            raise ValueError(f"access to {self.tile.tensor}: dest must be one of {LOAD_DESTS}, got {self.dest!r}")


@dataclass(frozen=True)
class SharedAccess:
    """Shared-memory traffic of a block per k-step: bytes, warp instructions and wavefronts.

    ``wavefronts`` includes bank-conflict replays; the ideal count is
    ``bytes / (banks * bank_width)``, so ``conflict_degree`` = wavefronts / ideal.
    """

    bytes: int = 0
    instructions: float = 0
    wavefronts: float = 0
    ideal_wavefronts: float | None = None  # conflict-free count; None means "as many as wavefronts"

    def __post_init__(self) -> None:
        _positive("SharedAccess", bytes=self.bytes, instructions=self.instructions, wavefronts=self.wavefronts)
        if self.ideal_wavefronts is None:
            object.__setattr__(self, "ideal_wavefronts", self.wavefronts)


@dataclass(frozen=True)
class Compute:
    """Math of a block per k-step (warp-level instruction counts).

    ``mma`` counts tensor-core (matrix) warp instructions and ``mma_flops`` the FLOPs they do; they
    run on the SM's share of ``tensor_flops_per_s``. (The GEMM family here is FP32 FFMA only.)

    ``critical_path_cycles`` is the latency of one warp's dependent chain through a step (load ->
    use round trips, dependent FMAs): a step can never finish faster, however idle the SM is.
    ``rounds`` is how many times per step a warp must wait for shared-memory loads before the math
    that uses them (one per dot product of a k-step in a GEMM).
    """

    ffma: float = 0
    mma: float = 0
    mma_flops: float = 0
    other: float = 0
    critical_path_cycles: float = 0
    rounds: int = 1

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise ValueError(f"Compute: rounds must be >= 1, got {self.rounds}")
        _positive("Compute", ffma=self.ffma, mma=self.mma, mma_flops=self.mma_flops, other=self.other,
                  critical_path_cycles=self.critical_path_cycles)


@dataclass(frozen=True)
class KStep:
    """One step of the k-loop (all counts per block)."""

    loads: tuple[GlobalAccess, ...] = ()
    smem_stores: SharedAccess = field(default_factory=SharedAccess)
    smem_loads: SharedAccess = field(default_factory=SharedAccess)
    compute: Compute = field(default_factory=Compute)
    barriers: int = 0


@dataclass(frozen=True)
class Epilogue:
    """What a block does once after its k-loop: global reads (C when beta != 0) and writes."""

    reads: tuple[GlobalAccess, ...] = ()
    writes: tuple[GlobalAccess, ...] = ()
    instructions: float = 0


@dataclass(frozen=True)
class Launch:
    """Launch geometry and per-block resources."""

    grid: tuple[int, int, int]
    threads_per_block: int
    regs_per_thread: int
    smem_bytes_per_block: int

    def __post_init__(self) -> None:
        if len(self.grid) != 3 or any(int(g) < 1 for g in self.grid):
            raise ValueError(f"Launch: grid must be three positive ints, got {self.grid!r}")
        if self.threads_per_block < 1:
            raise ValueError(f"Launch: threads_per_block must be >= 1, got {self.threads_per_block}")
        if self.regs_per_thread < 1:
            raise ValueError(f"Launch: regs_per_thread must be >= 1, got {self.regs_per_thread}")
        if self.smem_bytes_per_block < 0:
            raise ValueError(f"Launch: smem_bytes_per_block must be >= 0, got {self.smem_bytes_per_block}")

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]


@dataclass(frozen=True)
class TileProgram:
    """What one thread block does, for every block of the grid.

    ``flops`` is the useful floating-point work of the whole kernel (for rates and rooflines);
    ``min_hbm_bytes`` the compulsory traffic (each input read once, each output written once).
    ``pipeline_depth`` is how many k-steps' loads may be in flight (1: none ahead; 2: double
    buffering). ``warp_groups`` is how many groups of warps progress independently through the
    k-loop (1 when the k-loop has barriers; the warp count for barrier-free kernels).
    """

    name: str
    launch: Launch
    iterations: int
    step: KStep
    epilogue: Epilogue
    pipeline_depth: int = 1
    warp_groups: int = 1
    flops: float = 0.0
    min_hbm_bytes: float = 0.0
    labels: tuple = ()

    def __post_init__(self) -> None:
        if self.iterations < 0:
            raise ValueError(f"TileProgram {self.name}: iterations must be >= 0, got {self.iterations}")
        if not 1 <= self.pipeline_depth <= 8:
            raise ValueError(f"TileProgram {self.name}: pipeline_depth must be in 1..8, got {self.pipeline_depth}")
        if self.warp_groups < 1:
            raise ValueError(f"TileProgram {self.name}: warp_groups must be >= 1, got {self.warp_groups}")
