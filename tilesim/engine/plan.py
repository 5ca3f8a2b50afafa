"""A phase ready to run (:class:`_Plan`): its step's cost on the GPU and what the engine derives from
it, with the counters a phase keeps (:class:`_Tally`) and a warp group's loads in flight (:class:`_Lane`)."""

from __future__ import annotations

from collections import deque

from tilesim.cost import StepCost, step_cost
from tilesim.hardware import HardwareSpec
from tilesim.hardware.spec import interp
from tilesim.program import GlobalLoad, Mma, Phase, TileRef

MAX_WARP_GROUPS = 8  # independent warp groups simulated per block (warps aggregated beyond)
MAX_ROUNDS = 4  # load-then-use rounds simulated per step (rounds beyond are aggregated)
MAX_MATH_GROUPS = 4  # concurrent warp groups simulated per block between barriers
MATH_PIPES = ("fma", "sfu", "int", "fp64", "shuffle")
CHANNELS = ("issue", *MATH_PIPES, "tensor", "smem", "l1", "l2", "hbm", "dispatch", "atomic")
COUNTERS = CHANNELS + ("hbm_read", "hbm_write", "l2_load", "l2_store", "smem_bytes", "smem_ideal", "ffma",
                       "l1_fill", "hbm_flushed_writeback")
COMPUTE_COUNTERS = ("issue", *MATH_PIPES, "tensor", "smem", "smem_bytes", "smem_ideal", "ffma")  # a step's compute adds
POSTED = ("atomic",)  # chip-wide channels whose requests no block waits for: held work is queued, not reserved
PER_SM_COUNTERS = ("issue", *MATH_PIPES, "tensor", "smem", "l1", "dispatch", "smem_bytes", "smem_ideal", "ffma")


class _Tally:
    """Counters of one phase: channel amounts (what a reservation needs) and reporting counts."""

    __slots__ = ("v",)

    def __init__(self) -> None:
        self.v = dict.fromkeys(COUNTERS, 0.0)

    def add(self, other: _Tally, scale: float = 1.0) -> None:
        v = self.v
        if scale == 1.0:  # x * 1.0 is x: the same sums without the products
            for k, x in other.v.items():
                if x:  # adding nothing changes nothing
                    v[k] += x
            return
        for k, x in other.v.items():
            if x:
                v[k] += x * scale


class _Lane:
    """A warp group's load pipeline: the completion times of loads issued ahead."""

    __slots__ = ("pending", "issued", "missed", "l1", "l1_missed", "group", "miss_share")

    def __init__(self, group: int = 0) -> None:
        self.group = group  # the warp group's index in its block (for the timeline)
        self.pending: deque = deque()
        # per pending load, the share of the group's blocks that wait on a tile the L2 missed (the lead group's
        # lookup; 0 otherwise)
        self.miss_share: deque = deque()
        self.issued = 0
        self.missed: dict = {}  # bytes missed per tile prefix in the current window
        self.l1: dict = {}  # step -> (L2 bytes per block the L1 served, every load served): the group's
        self.l1_missed: dict = {}  # L1 misses of the representative SM's block in the current window


class _Plan:
    """One phase, ready to run: its step's cost on this GPU and what the engine derives from it."""

    def __init__(self, phase: Phase, hw: HardwareSpec, warps_per_block: int, active_warps: float,
                 grid: tuple[int, int, int] = (1, 1, 1)) -> None:
        self.phase = phase
        self.trips = phase.trips
        self.depth = phase.pipeline_depth
        self.window = phase.pipeline_depth + 1
        self.index = phase.index
        cost: StepCost = step_cost(phase.step, hw, warps_per_block)
        self.cost = cost
        clk = hw.sm_clock_hz
        t = _Tally()
        v = t.v
        v["issue"] = cost.issue
        # the math of one step per pipe, in the pipe's cycles at each dtype's rate on this GPU
        self.math: dict[str, float] = {}
        for (pipe, dtype), count in cost.pipe_instructions.items():
            if count:
                rate = hw.pipe_warp_instr_per_clk(pipe, dtype, warps=active_warps if pipe == "fma" else None)
                self.math[pipe] = self.math.get(pipe, 0.0) + count / rate
        if cost.tensor_cycles:
            self.math["tensor"] = cost.tensor_cycles
        for pipe in MATH_PIPES:
            v[pipe] = self.math.get(pipe, 0.0)
        v["tensor"] = cost.tensor_cycles
        v["smem"] = cost.smem_wavefronts
        v["l1"] = cost.load_l1_cycles
        v["l2_load"] = cost.load_l2_bytes
        v["smem_bytes"] = cost.staging_bytes + cost.shared_load_bytes
        v["smem_ideal"] = cost.staging_ideal + cost.shared_load_ideal + cost.shuffle_wavefronts  # shuffles never conflict
        v["ffma"] = cost.ffma
        self.tally = t
        self.crit_s = cost.critical_path_cycles / clk
        # what copies straddling sector boundaries add to the path to the step's fragment loads
        # (StepCost.copy_straddle_cycles)
        self.straddle_s = getattr(cost, "copy_straddle_cycles", 0.0) / clk
        self.groups = min(phase.warp_groups, MAX_WARP_GROUPS)
        self.rounds = min(phase.step.rounds, MAX_ROUNDS)
        # barrier-free loops already run independent warp groups (``warp_groups``). A step whose fragment
        # loads are generic (SharedAccess.generic: LD.E on the SM's global load path) runs its warps as one
        # group: a warp waiting for the LG queue issues nothing behind its loads, MMAs included, so the
        # block's loads and MMAs do not overlap across its warps (wmma_feed_probe, 1 block of 8 warps per SM,
        # tc_gemm's staged-WMMA k-step: 897 cycles with LD.E fragments, 651 with LDS and 475 with ldmatrix
        # at the same wavefronts; validation/studies/tensor_engine_check.py group wmma_feed: the engine 515
        # for all three with overlapping groups, 803 for the LD.E row with one group)
        generic = getattr(cost, "shared_load_l1_cycles", 0.0) > 0
        self.math_groups = min(warps_per_block, MAX_MATH_GROUPS) if self.groups == 1 and not generic else 1
        # a loop body larger than the instruction cache leaves lone warps waiting on fetch
        body_bytes = cost.issue / warps_per_block * hw.instruction_bytes
        self.warp_ipc_per_s = hw.warp_issue_per_clk * hw.code_issue_factor(body_bytes) * clk
        self.loads: tuple[GlobalLoad, ...] = phase.step.loads
        self.stores = phase.step.stores
        self.atomics = tuple(a for a in phase.step.atomics if a.space == "global")
        # whether each load's, store's and global atomic's tile names the loop index: one that does
        # not is the same data every step, looked up in the caches as k-step 0 (_key)
        self.load_varies = tuple(phase.index in ld.tile.index_names() for ld in self.loads)
        self.store_varies = tuple(phase.index in st.tile.index_names() for st in self.stores)
        self.atomic_varies = tuple(phase.index in at.tile.index_names() for at in self.atomics)
        # which loads the L1 caches (their L2 bytes each), when the cost model says
        self.l1_loads = (tuple(zip(range(len(self.loads)), cost.load_l2_bytes_each, cost.load_l1_cacheable,
                                   strict=True)) if len(cost.load_l2_bytes_each) == len(self.loads) else ())
        # what a missed tile of each load costs in DRAM bytes per byte of the tile (StepCost.load_dram_bytes_each
        # over load_l2_bytes_each: above 1 for isolated sectors whose 64-byte pair DRAM reads too), and a step's
        # most DRAM bytes
        l2_each = cost.load_l2_bytes_each
        dram_each = getattr(cost, "load_dram_bytes_each", ())
        same = len(dram_each) == len(self.loads) == len(l2_each)
        self.dram_factor_each = (tuple(d / b if b > 0 else 1.0 for d, b in zip(dram_each, l2_each, strict=True))
                                 if same else (1.0,) * len(self.loads))
        self.load_dram_bytes = sum(dram_each) if same else cost.load_l2_bytes
        # the L2 channel's bytes per L2 byte of the step's loads: lines that several blocks read are served
        # at l2_shared_line_bytes_per_s where measured (tensor_probe tma_share), the others at l2_bytes_per_s
        self.l2_channel_scale = _l2_channel_scale(self.loads, l2_each, grid, hw)
        # what each load's missed DRAM bytes occupy of the HBM channel per byte: 1, or more for reads of
        # less than a line (set by the engine, which knows the channel's rate: Engine._hbm_occupancy)
        self.hbm_access_each = tuple(getattr(cost, "load_hbm_access_bytes_each", ()))
        # a load whose warp instructions touch many lines waits for the last of them: the measured extra
        # latency of such a burst from HBM and from the L2 (HardwareSpec.burst_extra_cycles_at)
        lines = getattr(cost, "load_lines_per_instruction", 0.0)
        self.burst_hbm_s = hw.burst_extra_cycles_at("hbm", lines) / clk if lines > 1 else 0.0
        self.burst_l2_s = hw.burst_extra_cycles_at("l2", lines) / clk if lines > 1 else 0.0
        self.hbm_occupancy_each = (1.0,) * len(self.loads)
        self.hbm_occupancy = False
        # the L1 cycles each load takes beyond load_l1_cycles when it misses in the L1 (the miss path's
        # line a clock, StepCost.load_l1_miss_cycles_each), and all of them (no load served by the L1)
        each = getattr(cost, "load_l1_miss_cycles_each", ())
        self.l1_miss_each = tuple(each) if len(each) == len(self.loads) else (0.0,) * len(self.loads)
        self.l1_miss_all = sum(self.l1_miss_each)
        self.in_loop = phase.trips > 1
        self.bulk = bool(self.loads) and all(ld.dest == "bulk" for ld in self.loads)
        # a step whose arrives with cluster-scope release hold its end until bulk copies issued before them
        # land (StepCost.release_hold: "last" or "next"; "" none)
        self.release_hold = getattr(cost, "release_hold", "") if self.bulk else ""
        # a pipelined ring of bulk copies that wgmma consumers read (a wgmma ring's producer): the copies that
        # refill a stage are issued once the consumers have released it, after its data wait: they issue the step's wgmmas and
        # wait_group (wgmma_refill_path_cycles, where measured), then arrive on the stage's empty barrier: a local
        # arrive (mbarrier_local_release_cycles) or the step's cluster-scope releases (StepCost.release_cycles)
        release = getattr(cost, "release_cycles", 0.0)
        by_inflight = getattr(cost, "release_cycles_by_inflight", ())
        if release and by_inflight and phase.pipeline_depth > 1:
            # a ring's cluster-scope releases wait for the copies its block has in flight: the ring's
            # pipeline_depth - 1 while its steps run (StepCost.release_cycles_by_inflight), in place of the
            # whole release the step's critical path was charged
            at = interp(by_inflight, phase.pipeline_depth - 1)
            self.crit_s += (at - release) / clk
            release = at
        factors = getattr(cost, "load_channel_factor_each", ())
        if release and self.bulk and factors and hw.has("cluster_release_idle_cycles"):
            # what the release waits for beyond its idle cost is the block's copies in flight: a copy that takes
            # the L2 channel longer than aligned boxes of its bytes (rows starting mid-sector:
            # tma_mid_sector_row_cost) holds it longer in proportion, the slowest of the step's copies deciding
            # (cluster_probe suite_diff: 4016-byte rows of A and B, release 949 -> 1252 cycles; of A alone or
            # of B alone, about as long as of both)
            channel = max(factors)
            if channel > 1.0:
                idle = hw.get("cluster_release_idle_cycles")
                longer = max(0.0, release - idle) * (channel - 1.0)
                self.crit_s += longer / clk
                release += longer
        # a ring's cluster-scope release waits longer for copies in flight that come from HBM: by the share of
        # blocks with such a copy among the in-flight steps, up to cluster_release_hbm_extra_cycles_by_inflight at the
        # ring's pipeline_depth - 1 (cluster_probe's reference ring on a 1 GiB tensor against a 16 MiB one:
        # release 1406 against 1059 cycles with 4 stages; none longer with 2); the engine adds it to the step's
        # path and to the refill delay (Engine._steps)
        self.release_hbm_extra_s = 0.0
        if (release and self.bulk and phase.pipeline_depth > 1
                and hw.has("cluster_release_hbm_extra_cycles_by_inflight")):
            self.release_hbm_extra_s = interp(hw.get("cluster_release_hbm_extra_cycles_by_inflight"),
                                              phase.pipeline_depth - 1) / clk
        self.refill_delay_s = 0.0
        consumers = any(isinstance(op, Mma) and op.scope == "warpgroup" for op in phase.step.compute)
        if self.bulk and phase.pipeline_depth > 1 and consumers:
            if not release and hw.has("mbarrier_local_release_cycles"):
                release = hw.get("mbarrier_local_release_cycles")
            path = hw.get("wgmma_refill_path_cycles") if hw.has("wgmma_refill_path_cycles") else 0.0
            self.refill_delay_s = (path + release) / clk
        self.math_issue = cost.math_instructions
        # the tensor time of the step's warp-issued MMAs, which co-resident blocks run in phase
        # (StepCost.lockstep_tensor_cycles); with generic fragment loads, which do not overlap the block's
        # MMAs (math_groups above), their L1 time too: blocks in phase load together, then compute together
        # (wmma_feed_probe at 2 blocks per SM, tc_gemm's staged-WMMA k-step with its copies: 2152 cycles, the
        # engine 2043 with this and 1633 without; without copies 1336 against 1540 / 1013)
        self.lockstep_s = ((cost.lockstep_tensor_cycles + (getattr(cost, "shared_load_l1_cycles", 0.0)
                                                           if cost.lockstep_tensor_cycles else 0.0)) / clk)
        self.math_rounds: dict = {}  # share of the step -> one round's requests (Engine._math_round)
        self.compute_counts: dict = {}  # share of the step -> its COMPUTE_COUNTERS that are not 0 (Engine._compute)
        self.staging: dict = {}  # share of the step -> its staging requests (Engine._staging)


def _read_by_several_blocks(tile: TileRef, grid: tuple[int, int, int]) -> bool:
    """Whether more than one block of ``grid`` reads ``tile``: some grid dimension of more than one
    block is not among the names that place it."""
    names = tile.index_names()
    return any(extent > 1 and dim not in names for dim, extent in zip(("bx", "by", "bz"), grid, strict=True))


def _l2_channel_scale(loads, l2_each, grid: tuple[int, int, int], hw: HardwareSpec) -> float:
    """L2-channel bytes per L2 byte of a step's loads: ``l2_bytes_per_s / l2_shared_line_bytes_per_s`` for
    a load whose tile several blocks read, 1 for the others, weighted by the loads' L2 bytes (1 without
    the measurement)."""
    if not hw.has("l2_shared_line_bytes_per_s") or len(l2_each) != len(loads) or not sum(l2_each):
        return 1.0
    shared = hw.l2_bytes_per_s / hw.get("l2_shared_line_bytes_per_s")
    scaled = sum(b * (shared if _read_by_several_blocks(ld.tile, grid) else 1.0)
                 for ld, b in zip(loads, l2_each, strict=True))
    return scaled / sum(l2_each)
