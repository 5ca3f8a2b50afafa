"""Results as plain data: the frozen :class:`SimResult` the engine returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Interval:
    """One span of a resident block slot on the representative SM (for timeline plots).

    In :attr:`SimResult.timeline` a slot's spans follow one another: ``kind`` is "load_wait" (waiting
    for the step's loads), "compute" (the rest of the step: ``parts`` says how long it stored tiles to
    shared memory and waited at the barrier, did its math, waited on its dependency chain, wrote its
    stores) or "steady" (a held run of settled steps or block groups, standing for every warp group
    of the slot). In :attr:`SimResult.loads` a span is one step's loads of a warp group, from issue to
    arrival, overlapping the slot's other spans; ``kind`` says what they are: "loads" (global loads),
    "cp.async" or "tma" copies."""

    slot: int
    kind: str
    start_s: float
    end_s: float
    phase: str = ""  # the program phase it belongs to
    period_s: float = 0.0  # a "steady" hold: the length of the settled step it repeats (0: not a hold)
    warp_group: int = 0  # the warp group of the block (0 where the phase runs its warps as one)
    parts: tuple = ()  # a "compute" span: ((part, seconds), ...) in order: barrier, math, dependency, stores

    @property
    def repetitions(self) -> float:
        """How many settled steps a "steady" hold stands for (0 for other kinds)."""
        return (self.end_s - self.start_s) / self.period_s if self.period_s > 0 else 0.0


@dataclass(frozen=True)
class Traffic:
    """Counters per level of the hierarchy, summed over the whole kernel (all SMs)."""

    hbm_read_bytes: float
    hbm_write_bytes: float
    l2_load_bytes: float  # bytes SMs requested from L2 for loads (sectors x 32)
    l2_store_bytes: float  # bytes SMs sent to L2 for stores
    l2_hit_rate: float  # fraction of L2 load bytes served without going to HBM
    l1_wavefronts: float
    smem_bytes: float  # shared-memory bytes stored plus loaded
    smem_wavefronts: float
    smem_conflict_wavefronts: float  # wavefronts beyond the conflict-free count
    register_operand_bytes: float  # 3 source operands x 4 bytes per FFMA lane
    instructions: float  # warp-level instructions issued
    ffma: float  # warp-level FFMA instructions
    # earlier work's dirty lines (the harness's L2 flush) that the kernel's misses and stores pushed
    # out of the L2 and the HBM wrote during it; not in hbm_bytes (the kernel's own traffic, what
    # Nsight Compute counts with its own cache flush)
    hbm_flushed_writeback_bytes: float = 0.0

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_read_bytes + self.hbm_write_bytes

    @property
    def l2_bytes(self) -> float:
        return self.l2_load_bytes + self.l2_store_bytes


@dataclass(frozen=True)
class SimResult:
    """What the engine predicts for one kernel on one GPU. Equal inputs give equal results."""

    kernel: str
    hardware: str
    time_s: float
    bound: str  # the resource with the highest utilization, or "latency" when none is busy
    utilization: dict  # resource -> busy fraction of the kernel's time
    traffic: Traffic
    flops: float
    blocks: int
    blocks_per_sm: int
    occupancy: float  # active warps / max warps per SM
    occupancy_limiter: str
    waves: float
    roofline_s: float  # analytic lower bound (compulsory HBM bytes, FP32 peak)
    events: int  # simulated k-steps and epilogues (a measure of the engine's work)
    sm_clock_hz: float = 0.0  # the SM clock the kernel ran at (lower than the GPU's under tensor load)
    timeline: tuple[Interval, ...] | None = field(default=None, compare=False)
    loads: tuple[Interval, ...] | None = field(default=None, compare=False)  # loads in flight (timeline=True)

    @property
    def tflops(self) -> float:
        return self.flops / self.time_s / 1e12 if self.time_s > 0 else 0.0

    def to_dict(self, *, with_timeline: bool = False) -> dict[str, Any]:
        d = asdict(self)
        d["traffic"]["hbm_bytes"] = self.traffic.hbm_bytes
        d["traffic"]["l2_bytes"] = self.traffic.l2_bytes
        d["tflops"] = self.tflops
        if not with_timeline:
            d.pop("timeline")
            d.pop("loads")
        return d
