"""A toy kernel family for tests of the generic glue (CLI, sweeps, bench): a streaming copy.

Each block copies ``threads`` 4-byte elements (16-byte ones with ``vec``) from x to y. Registered
only inside a test, through the :func:`register_toy` fixture helper, never on import.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilesim.kernels import registry
from tilesim.program import (
    GlobalLoad,
    GlobalStore,
    Launch,
    Phase,
    Step,
    TileProgram,
    TileRef,
    lanes,
)

THREAD_CHOICES = (64, 128, 256, 512)


@dataclass(frozen=True)
class ToyConfig:
    n: int = field(metadata={"doc": "elements to copy"})
    threads: int = field(default=256, metadata={"doc": "threads per block", "choices": THREAD_CHOICES})
    vec: bool = field(default=False, metadata={"doc": "16-byte accesses (4 elements per thread)"})

    def __post_init__(self) -> None:
        if not isinstance(self.n, int) or self.n <= 0:
            raise ValueError(f"ToyConfig.n = {self.n!r}: must be a positive integer")
        if self.threads not in THREAD_CHOICES:
            raise ValueError(f"ToyConfig.threads = {self.threads!r}: must be one of "
                             f"{', '.join(map(str, THREAD_CHOICES))}")
        if self.n % self.per_block:
            raise ValueError(f"ToyConfig.n = {self.n}: must be a multiple of {self.per_block} (elements per block)")

    @property
    def per_block(self) -> int:
        return self.threads * (4 if self.vec else 1)


def lower(cfg: ToyConfig) -> TileProgram:
    width = 16 if cfg.vec else 4
    tile_bytes = cfg.per_block * 4
    warps = cfg.threads // 32
    ld = GlobalLoad(TileRef("x", ("bx",), tile_bytes), (lanes(width),), repeat=warps)
    st = GlobalStore(TileRef("y", ("bx",), tile_bytes), (lanes(width),), repeat=warps)
    launch = Launch(grid=(cfg.n // cfg.per_block, 1, 1), threads_per_block=cfg.threads, regs_per_thread=16,
                    smem_bytes_per_block=0)
    return TileProgram(name=f"toy_{label(cfg)}", launch=launch,
                       phases=(Phase("copy", 1, Step(loads=(ld,), stores=(st,))),),
                       flops=0.0, min_hbm_bytes=8.0 * cfg.n)


def check_fits(cfg: ToyConfig, hw) -> None:
    if cfg.threads > hw.max_threads_per_block:
        raise ValueError(f"ToyConfig.threads = {cfg.threads}: exceeds max_threads_per_block = "
                         f"{hw.max_threads_per_block} on {hw.name}")


def counts(cfg: ToyConfig) -> dict:
    return {"flops": 0.0, "min_hbm_bytes": 8.0 * cfg.n}


def label(cfg: ToyConfig) -> str:
    return f"copy_t{cfg.threads}" + ("_vec" if cfg.vec else "")


TOY = registry.KernelFamily(name="toy", config=ToyConfig, lower=lower, check_fits=check_fits, counts=counts,
                            label=label, description="a streaming copy (a test family)", problem_fields=("n",))


def register_toy(monkeypatch) -> registry.KernelFamily:
    """Register :data:`TOY` for the duration of one test (``monkeypatch`` undoes it)."""
    registry.discover()
    monkeypatch.setitem(registry._FAMILIES, TOY.name, TOY)
    monkeypatch.setitem(registry._BY_CONFIG, ToyConfig, TOY)
    return TOY
