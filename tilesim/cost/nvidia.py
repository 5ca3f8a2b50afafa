"""NVIDIA's cost rules: what one step of a tile program asks of each per-SM and chip-wide resource.

Derived from the step's lane offsets and a :class:`~tilesim.hardware.HardwareSpec`, once per
program (never in the engine's event loop):

* global loads: the distinct 32-byte sectors of a block's step reach L2 (the L1 merges repeated
  sectors within a step); each instruction occupies the L1 for :func:`~tilesim.cost.access.l1_cycles`;
  loads through registers are cached in the L1 (the engine looks them up there) unless they bypass
  it (``GlobalLoad.bypass_l1``: ``ld.global.cg``, which still passes the L1's request path);
* 16-byte asynchronous copies (cp.async) fetch their sectors from L2 per group of
  ``ldgsts16_sector_group_lanes`` consecutive lanes (:func:`~tilesim.cost.access.grouped_sectors`):
  a sector two groups touch is fetched twice. The H200 fetches per lane pair (tc_feed_probe under
  Nsight Compute, validation/results/h200/calibration/tc_feed_ncu_split/: the SMs receive 512 sectors a
  k-step of a 128x32 + 32x128 fp16 tile pair from aligned rows and 640, not the 576 distinct ones, from
  rows 4016 B apart whose odd rows start mid-sector), and at 2 blocks per SM on every SM both copies
  run at the same 9.5-10.0 TB/s of received sectors (863 and 1089 cycles a k-step). Per 128-byte global line
  the L1 takes at least one sector per 32-byte shared sector the line's bytes are written to
  (:func:`~tilesim.cost.access.ldgsts_fetched_sectors`: copies into padded rows that start mid-sector in
  shared memory; mma_feed_probe gemm_traffic_ragged under Nsight Compute, mma_feed_ncu/: 608 sectors a
  k-step against 512 swizzled for the same global addresses);
* the first fragment load after a step's barrier waits until the L1 has taken the block's 16-byte
  cp.async copies (the compiler reuses the copies' address registers for the ldmatrix addresses: in
  mma_feed_probe's gemm_path kernels an instruction after LDGDEPBAR waits on the copies' read barrier).
  Sector-aligned copies are taken within the time their code takes to issue (gemm_path, 8 warps x 1
  block, 128x256, 48 warp copies a k-step: from the barrier to the copies issued 570-590 cycles and on
  to the first HMMA 125, whether 0 or all of them read data, from L2 or HBM); copies whose lane groups
  straddle sector boundaries (rows that start mid-sector), or whose lines land on more shared sectors than
  they fetch (padded rows), lengthen that path by
  ``ldgsts16_straddle_cycles_per_sector`` for each sector the straddling adds
  (``StepCost.copy_straddle_cycles``, on the block's own path: A and B rows 4016 B apart, +384 sectors a
  k-step, add 355 cycles; A's alone, +128, add 53 there and 129 in gemm_traffic_ragged's 1-block loop);
* a 16-byte copy writes shared memory once per global line it reads, twice where the line's bytes land on more
  shared sectors than they fill (:func:`~tilesim.cost.access.ldgsts_line_writes`: tc_gemm's padded rows), and
  holds the pipe ``ldgsts16_line_cycles`` for each write beyond the shared lines it writes (Nsight Compute's
  wavefronts per LDGSTS: 8 for eight swizzled 64-byte rows, 12 at the padded 80-byte pitch, ldgsts_layout_probe's
  cp.async.ca rows; wmma_feed_probe's padded copy rows 8-16% -> 2-12% short, mma_feed's gemm_pad row +4.3% -> +1.0%);
* register-staged loads (``dest="shared"``) are followed by shared stores at their
  ``shared_offsets`` (a lane whose entry is a tuple scatters 4-byte pieces: one store instruction
  per piece); asynchronous copies (``dest="async"``) write shared memory on arrival, costing
  :func:`~tilesim.cost.access.ldgsts_wavefronts` (a scattered copy is one 4-byte cp.async per piece);
* bulk tensor copies (``dest="bulk"``, Hopper's TMA): one instruction per tile (a single thread
  issues it), no L1 (the copy engine moves L2 data straight into shared memory), the tile's
  distinct sectors from L2, and no wavefronts of the shared-memory (LSU) data pipe: Nsight Compute
  counts none for TMA fills (the wgmma GEMMs' l1tex__data_pipe_lsu_wavefronts_mem_shared is their
  GMMA operand reads plus the epilogue, validation/results/h200/tc_gemm/counters.csv); a row of the
  tile (a contiguous run of its bytes) that starts mid-sector takes the L2 path
  ``tma_mid_sector_row_cost`` times as long as a sector-aligned row of its length, where measured
  (tensor_probe's tma_pitch rows: 128x64 fp16 boxes from rows 8192 + 16 or + 48 bytes apart, half of
  them starting mid-sector, load at 22.1-24.8 B/clk/SM against 36.1-36.2 from aligned rows on every SM;
  +64, every row on a sector, at 35.6-36.9): the extra is charged to the L2 channel
  (``StepCost.load_l2_extra_channel_bytes``), not counted as traffic;
* shared loads and stores: bank wavefronts by :func:`~tilesim.cost.access.smem_wavefronts`; an
  instruction whose lanes are all predicated off still takes one wavefront (Nsight Compute's shared
  wavefronts of the reduction trees count them: validation/studies/reduction_fidelity.md);
* warp shuffles are served by the shared-memory pipe, one wavefront each (Nsight Compute counts
  SHFL among the shared-memory wavefronts, and the pipes probe's SHFL rate, 0.995 per clock, is the
  shared-memory pipe's one wavefront per clock);
* shared atomics: lanes on the same bank serialise, same address included (no broadcast);
* global stores and atomics: each instruction sends its own sectors to L2;
* tensor-core instructions that read their operands from shared memory (``Mma.operands="shared"``,
  wgmma) read the m x k and k x n operand tiles of every instruction at the banks' full width, and
  take no issue slot for it; they read them while they run, beside their tensor cycles
  (``shared_operand_wavefronts``: the engine queues them with the math, not ahead of it as a
  load-then-use round's loads): tensor_probe's wgmma rows with both operands in shared memory
  (``_ss``, m64n64 to m64n256) run at the tensor pipe's full 4,095 FLOP/clk/SM;
* every warp instruction (loads, stores, shared accesses, math, shuffles, barriers, atomics) takes
  an issue slot; a barrier is one instruction per warp;
* warp-issued MMAs (mma.sync, WMMA) of blocks sharing an SM run in phase: each scheduler holds one
  warp of each block and shares its tensor pipe between them instruction by instruction, so neither
  gets ahead, and blocks that start together stay together (an offset neither grows nor shrinks).
  Their copy code, barrier and fragment-load waits then coincide instead of hiding behind the other
  block's MMAs: a step's fragment loads and MMAs take at least the tensor time of the step of every
  block in the loop (``lockstep_tensor_cycles`` times those blocks). mma_feed_probe gemm_traffic_w4
  (validation/results/h200/calibration/mma_feed.json, mma_feed_ncu/): at 2 blocks per SM a block's
  k-step takes 822 / 1022 / 1202 cycles without copies / with plain copies / with the GEMM's copy
  code, 2 x 384 tensor cycles plus 54 / 254 / 434, against 133 / 321 / 456 beside the MMAs at 1
  block per SM; the tensor pipe is busy 86 / 69 / 60% of the time (Nsight Compute), where blocks
  taking turns would keep it busy 100 / 100 / 91%. Generic fragment loads (``SharedAccess.generic``, LD.E
  on the SM's global load path) do not overlap the block's MMAs at all (the engine runs such a step's warps
  as one group), and blocks in phase load them together: the step then takes at least their L1 time and
  tensor time of every block in the loop (the engine adds ``shared_load_l1_cycles`` to the lockstep time;
  wmma_feed_probe, validation/results/h200/calibration/wmma_feed.json: tc_gemm's staged-WMMA k-step at 1 / 2
  blocks per SM, 897 / 1336 cycles without copies and 1384 / 2152 with them, against 475 / 808 and 1024 /
  1471 with ldmatrix). wgmma (warpgroup, asynchronous) is not bound;
* the critical path of one warp through a step: the shared-load latency when the step reads shared
  memory, one barrier latency per barrier, and ``chain`` times the latency of each dependent
  operation.

A barrier's latency is the measured ``__syncthreads()`` latency at the block's warp count
(``barrier_latency_cycles_by_warps``, validation/calibration/pipes_probe.py) where the GPU's
profile has it; on a GPU without that measurement it is taken as one shared-memory latency (the
rule the GEMM model used before the probe, stated as an assumption).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilesim.cost.access import (
    add_sectors,
    global_sectors_and_lines,
    grouped_sectors,
    ideal_wavefronts,
    l1_cycles,
    l1_miss_requests,
    ldgsts_fetched_sectors,
    ldgsts_line_writes,
    ldgsts_wavefronts,
    smem_wavefronts,
    useful_bytes,
)
from tilesim.hardware.fields import MissingHardwareValue
from tilesim.program import Compute, Mma, Shuffle, Step, WarpAccess

#: bytes per element of an MMA operand type as it sits in shared memory (tf32 is stored as fp32)
DTYPE_BYTES = {"fp16": 2, "bf16": 2, "tf32": 4, "fp32": 4, "fp64": 8, "int32": 4}


@dataclass
class StepCost:
    """Per block and per step: amounts for every channel and the counters reported."""

    load_instructions: float = 0.0  # global load (or cp.async) warp instructions
    load_l1_cycles: float = 0.0
    load_l2_bytes: float = 0.0  # sectors requested from L2, in bytes
    # L2-channel time beyond load_l2_bytes, in bytes at the channel's rate: bulk copies' rows that start
    # mid-sector (tma_mid_sector_row_cost; see the module docstring); not traffic
    load_l2_extra_channel_bytes: float = 0.0
    load_useful_bytes: float = 0.0
    # per global load: its L2-channel time (its L2 bytes and the extra above) over its useful bytes: 1 for
    # aligned copies of whole sectors, more for rows that start mid-sector
    load_channel_factor_each: list = field(default_factory=list)
    # per global load of the step, in order: its L2 bytes, and whether it is cached in L1 (loads
    # through registers are, unless they bypass it: GlobalLoad.bypass_l1, ld.global.cg; cp.async
    # copies go straight to shared memory)
    load_l2_bytes_each: list = field(default_factory=list)
    load_l1_cacheable: list = field(default_factory=list)
    # per global load: the DRAM bytes its step reads when it misses in the L2: its L2 bytes, or for a load
    # of isolated sectors (GlobalLoad.isolated_sectors) on a GPU with a measured hbm_read_granularity_bytes,
    # that many bytes for each distinct fetch unit its sectors fall in (hbm_tiles_probe under ncu: a lone
    # 32-byte sector's miss reads its 64-byte pair)
    load_dram_bytes_each: list = field(default_factory=list)
    # per global load: the bytes of each DRAM read its misses make, on a GPU with a measured
    # hbm_read_granularity_bytes: the bytes its step reads of each line it touches, rounded up to that
    # granularity, at most a line (a line read whole: the line). The engine charges reads of less than a
    # line at most hbm_accesses_per_s (hbm_tiles_probe: rows 16 KiB apart read 32 or 64 bytes a k-step
    # reach 1.7-2.2 TB/s, about 33 G reads of 64 bytes a second, against 4.3 for whole lines), counting
    # the reads of the k-steps a pipelined loop has in flight as one (mma_feed_probe's gemm_traffic HBM
    # rows: a 4-stage ring of 64-byte row pieces reaches 3.8 TB/s); 0: no limit
    load_hbm_access_bytes_each: list = field(default_factory=list)
    # the most distinct 128-byte lines one warp instruction of any of the step's global loads touches: a
    # load of many lines waits longer for its last one (HardwareSpec.burst_extra_cycles_at)
    load_lines_per_instruction: float = 0.0
    # per global load: the L1 cycles it takes beyond its share of load_l1_cycles when its lines miss in
    # the L1 (access.l1_miss_requests: the miss path's one line a clock); the engine adds them for the
    # loads its L1 does not serve
    load_l1_miss_cycles_each: list = field(default_factory=list)
    staging_instructions: float = 0.0  # shared stores of register-staged loads and explicit ones
    # address and predicate instructions of the step's cp.async copies, issued after its barrier
    # before anything else of the step (GlobalLoad.address_instructions)
    staging_address_instructions: float = 0.0
    staging_wavefronts: float = 0.0  # shared wavefronts of those stores (or of cp.async arrivals)
    # cycles the shared-memory pipe is busy with them (the wavefronts, except 16-byte cp.async copies:
    # ldgsts16_pipe_cycles each, measured); None: the wavefronts
    staging_pipe_cycles: float | None = None
    staging_ideal: float = 0.0
    staging_bytes: float = 0.0
    async_staging: bool = False  # the staging wavefronts come with the loads (cp.async)
    shared_load_instructions: float = 0.0
    # request slots generic shared loads take on the SM's global load path (SharedAccess.generic)
    shared_load_l1_cycles: float = 0.0
    shared_load_wavefronts: float = 0.0
    # the part of shared_load_wavefronts that MMAs read their operands with (wgmma): they read them as
    # they run, beside the tensor work, not before it as a load-then-use round's loads
    shared_operand_wavefronts: float = 0.0
    shared_load_ideal: float = 0.0
    shared_load_bytes: float = 0.0
    shuffle_wavefronts: float = 0.0  # warp shuffles on the shared-memory pipe
    # warp instructions per (pipe, dtype): ("fma", "fp32"), ("sfu", "fp32"), ("shuffle", "int32") ...
    pipe_instructions: dict = field(default_factory=dict)
    tensor_flops: float = 0.0
    tensor_cycles: float = 0.0  # tensor-core cycles at the instruction shape's and dtype's rate
    # those of warp-issued MMAs (mma.sync, WMMA): the blocks sharing an SM keep them in phase (see
    # the module docstring), so a step's math lasts their tensor cycles times the blocks in the loop
    lockstep_tensor_cycles: float = 0.0
    mma_instructions: float = 0.0
    math_instructions: float = 0.0  # every compute, shuffle and shared-atomic instruction
    atomic_wavefronts: float = 0.0  # shared atomics on the shared-memory pipe
    barriers: float = 0.0
    store_instructions: float = 0.0  # global stores and global atomics
    store_l1_cycles: float = 0.0
    store_l2_bytes: float = 0.0
    store_useful_bytes: float = 0.0
    critical_path_cycles: float = 0.0
    # how long the step's cluster-scope releases hold its end beyond their cycles on the critical path
    # (cluster_release): "" not at all; "last": until the block's last bulk copy issued before them has
    # landed; "next": until its oldest copy still in flight lands. The H200 profile holds nothing (see
    # cluster_release: validation/studies/tensor_engine_check.py's ring group judged the rules)
    release_hold: str = ""
    # cycles the block's 16-byte cp.async copies whose lane groups straddle sector boundaries add to its path
    # from the step's barrier to its fragment loads (ldgsts16_straddle_cycles_per_sector for each sector the
    # straddling adds; see the module docstring); 0 without the measurement
    copy_straddle_cycles: float = 0.0
    # cycles of the step's cluster-scope releases (cluster_arrives x cluster_release): a ring's producer
    # refills the stage they hand back only after them
    release_cycles: float = 0.0
    # the same against the bulk copies the block has in flight, [[copies, cycles], ...], where measured
    # (cluster_release_cycles_by_inflight: the fence waits for them); the engine reads it at its ring's depth
    release_cycles_by_inflight: list = field(default_factory=list)

    @property
    def issue(self) -> float:
        """Every warp instruction of the step."""
        return (self.load_instructions + self.staging_instructions + self.staging_address_instructions
                + self.shared_load_instructions + self.math_instructions + self.barriers + self.store_instructions)

    @property
    def smem_wavefronts(self) -> float:
        return self.staging_wavefronts + self.shared_load_wavefronts + self.atomic_wavefronts + self.shuffle_wavefronts

    @property
    def ffma(self) -> float:
        """FP32 instructions on the FMA pipe (FFMA, FADD, FMUL, FMNMX)."""
        return self.pipe_instructions.get(("fma", "fp32"), 0.0)

    def add_pipe(self, pipe: str, dtype: str, count: float) -> None:
        key = (pipe, dtype)
        self.pipe_instructions[key] = self.pipe_instructions.get(key, 0.0) + count


def _pieces(w: WarpAccess) -> list[tuple[list, list, int]]:
    """The (global offsets, shared offsets, width) of each cp.async instruction of a staged access."""
    shared = w.shared_offsets
    if shared is not None and any(isinstance(s, tuple) for s in shared):
        n = max(len(s) for s in shared if isinstance(s, tuple))
        step = w.width_bytes // n
        return [([None if a is None else a + q * step for a in w.offsets],
                 [None if s is None else s[q] for s in shared], step) for q in range(n)]
    return [(list(w.offsets), list(shared or ()), w.width_bytes)]


def _mid_sector_extra_bytes(ld, sector: int, cost: float) -> float:
    """L2-channel bytes beyond its sectors that a bulk copy ``ld`` takes for its rows (contiguous runs of
    its bytes) that start mid-sector: each such row takes ``cost`` times an aligned row of its length
    (its whole sectors), less the sectors it is already charged."""
    pieces = sorted({(a, w.width_bytes) for w in ld.instructions for a in w.offsets if a is not None})
    runs: list[list[int]] = []
    for a, width in pieces:
        if runs and a <= runs[-1][1]:
            runs[-1][1] = max(runs[-1][1], a + width)
        else:
            runs.append([a, a + width])
    extra = 0.0
    for start, end in runs:
        if start % sector:
            aligned = -(-(end - start) // sector) * sector
            touched = ((end - 1) // sector - start // sector + 1) * sector
            extra += max(0.0, cost * aligned - touched)
    return extra


def mma_latency_cycles(hw, op: Mma) -> float:
    """Clocks from an MMA to one that depends on it: a warpgroup's wgmma at its N from the measured
    ``wgmma_latency_cycles_by_n`` (tensor_probe: issue to wait_group 0), a warp's from the tensor
    pipe's latency (a dependent mma.sync chain)."""
    if op.scope == "warpgroup" and hw.has("wgmma_latency_cycles_by_n"):
        return hw.wgmma_latency_cycles_at(op.shape[1])
    return hw.pipe_latency_cycles("tensor")


def mma_chain_cycles(hw, op: Mma) -> float:
    """Clocks of a step's dependent MMA chain on one warp's (warpgroup's) critical path: ``chain``
    times the latency, and for a warpgroup's wgmma step at least what the consumer's whole k-step
    takes besides its stage release (``wgmma_consumer_step_cycles``, cluster_probe's wgmma ring:
    the full-barrier wait, issuing the step's wgmmas, wait_group), where measured."""
    cycles = op.chain * mma_latency_cycles(hw, op)
    if op.scope == "warpgroup" and hw.has("wgmma_consumer_step_cycles"):
        cycles = max(cycles, hw.get("wgmma_consumer_step_cycles"))
    return cycles


RELEASE_HOLDS = ("", "last", "next")


def cluster_release(hw) -> tuple[float, str]:
    """What one thread's mbarrier arrive with cluster-scope release on another block of its cluster costs a
    k-step: (clocks on the step's critical path, hold: one of ``RELEASE_HOLDS``, see StepCost.release_hold).

    The GEMM-shaped ring's whole release, ``cluster_release_arrive_cycles`` (cluster_probe's wgmma ring:
    1059 against 67 for a local arrive), and no hold; a ring's producer refills the stage only once it is
    released (``StepCost.release_cycles``, after the consumer's path to it, ``wgmma_refill_path_cycles``: the
    engine's refill delay), and where ``cluster_release_cycles_by_inflight`` is measured (the fence waits for
    the copies its SM has in flight: 835 / 1059 / 1038 cycles with 1 / 2 / 4 boxes, cluster_fence.json's
    stream rows) the engine reads that at its ring's depth - 1 in place of this
    (StepCost.release_cycles_by_inflight). Session 17's judgement, with copies issued once the step's data is
    in and that refill delay: over the 16 GEMM-shaped ring rows with remote releases, the release against
    copies in flight 9.8% (bias -3.7%; 2-stage 7.5%, 4-stage 12.1%), this constant at every depth 12.9%, the
    fence alone 18.2%, holding until the oldest copy in flight lands 19.1%, until the last 25.7%; the 32
    rings without remote releases 8.1%. The suite's
    cluster kernels spend 1146-1443 cycles a k-step in the release (validation/results/h200/studies/
    tc_step_parts, not used here). The figures before session 17 follow. The release's own fence was measured apart
    (``cluster_release_fence_cycles``: 687 in the fence sync rows), and holding the step until the block's
    bulk copies land after it ("last" or "next") was weighed against the same probe's 16 GEMM-shaped ring
    rows with remote releases (wgmma.c{1,2}.s{2,4}.c2_{own,mc}_remote.rel_one, 16 MiB and 1 GiB tensors:
    validation/studies/tensor_engine_check.py, group ``ring``): MAPE 16.7% with this constant (bias -16.6%;
    it was read off one of them, c2.s4.c2_own_remote from L2: 17.8% over the other 15), 24.1% with the fence
    and "last" (the 4-stage rows +22..+66%: a ring whose every release waits for the copy issued at its
    step's start runs at one copy latency a step, the GPU does not), 17.9% with "next" (the 4-stage
    multicast rows still +22..+40%), 29.9% with the fence and no hold. The holds fit the 2-stage rows
    better (8.0% against 21.8%), the constant the 4-stage ones (11.5% against 27.8-40.2%): no rule of the
    three fits both. The fence stream rows (cluster_fence.json) show a plateau, not a wait for the newest
    copy: 990-1059 cycles from L2 with 2 or 4 boxes in flight on the SM.
    Session 19: where ``cluster_release_hbm_extra_cycles_by_inflight`` is measured the engine lengthens the
    release by it (at the ring's depth - 1) times the share of the block group's blocks waiting on a tile the
    L2 missed among the copies in flight (a missed tile keeps every block that reads it waiting for DRAM):
    cluster_probe's reference ring on a 1 GiB tensor releases in 1406 cycles against 1059 on the 16 MiB one
    (4 stages; 2 stages no longer), and its 1 GiB rows, whose B boxes are other blocks' A boxes (a third of
    the bytes from DRAM, every block waiting on one), go from 10-22% fast to within 5% (the 16 remote rel_one
    rows 9.8% -> 5.9%).
    A GPU without clusters or the measurement cannot run such a step."""
    if not hw.has("cluster_release_arrive_cycles"):
        raise MissingHardwareValue(f"{hw.name}: no measured cluster_release_arrive_cycles (cluster_probe) for a "
                                   "step with cluster_arrives")
    return hw.get("cluster_release_arrive_cycles"), ""


def barrier_latency_cycles(hw, warps_per_block: int) -> float:
    """One ``__syncthreads()`` of a block of ``warps_per_block`` warps (see the module docstring)."""
    if hw.has("barrier_latency_cycles_by_warps"):
        return hw.barrier_latency_cycles_at(warps_per_block)
    return hw.smem_latency_cycles


def step_cost(step: Step, hw, warps_per_block: int) -> StepCost:
    """What one block's step costs on an NVIDIA GPU (see the module docstring)."""
    c = StepCost()
    banks, bank_w, sector = hw.smem_banks, hw.smem_bank_width_bytes, hw.sector_bytes
    crit = 0.0
    # the L1's miss path, lines a clock (inf without the measurement: no cost beyond the tag stage)
    miss_rate = hw.get("l1_miss_lines_per_clk_per_sm") if hw.has("l1_miss_lines_per_clk_per_sm") else float("inf")
    # lanes of a 16-byte cp.async whose sectors the L1 fetches together (measured; None: the step's distinct
    # sectors, as for every other load)
    group = int(hw.get("ldgsts16_sector_group_lanes")) if hw.has("ldgsts16_sector_group_lanes") else None
    # DRAM's read unit for a lone sector's L2 miss (measured; None: the sector)
    dram_unit = int(hw.get("hbm_read_granularity_bytes")) if hw.has("hbm_read_granularity_bytes") else None
    # the path a sector adds that the lane groups of a 16-byte cp.async fetch by straddling a sector boundary
    # (measured; None: not charged)
    straddle = (hw.get("ldgsts16_straddle_cycles_per_sector")
                if group is not None and hw.has("ldgsts16_straddle_cycles_per_sector") else None)
    # a bulk copy's row that starts mid-sector, against an aligned one (measured; None: no extra)
    mid_sector_cost = hw.get("tma_mid_sector_row_cost") if hw.has("tma_mid_sector_row_cost") else None
    for ld in step.loads:
        r = ld.repeat
        sectors: set[int] = set()
        # sectors the L1 fetches for the load's 16-byte cp.async pieces, lane group by lane group, and
        # whether every piece of the load is one (then they, not the distinct sectors, are its L2 sectors)
        grouped, all_grouped = 0, ld.dest == "async" and group is not None
        instr = l1 = 0.0
        # when the load misses in the L1, each instruction takes the longer of its tag-stage cycles and its
        # new lines on the miss path (access.l1_miss_requests); later instructions to sectors already on
        # their way take the tag stage only (uncoalesced_probe l2ca: 32 + 12.5 per further instruction)
        miss_extra = 0.0
        requested: set[int] = set()
        st_instr = st_wave = st_ideal = 0.0
        st_pipe = 0.0  # pipe cycles beyond the wavefronts (16-byte cp.async, measured)
        for w in ld.instructions:
            active = [a for a in w.offsets if a is not None]
            add_sectors(sectors, active, max(w.width_bytes, 4), sector)
            if ld.dest != "bulk" and active:
                last, line = max(w.width_bytes, 4) - 1, sector * 4
                lines_now = len({a // line for a in active}.union([(a + last) // line for a in active]))
                c.load_lines_per_instruction = max(c.load_lines_per_instruction, float(lines_now))
            if ld.dest == "bulk":
                continue
            if ld.dest == "async":
                for g, sa, width in _pieces(w):
                    ga = [a for a in g if a is not None]
                    instr += 1
                    if width >= 16 and group is not None:
                        # what the L1 takes in: the lane groups' sectors, and at least a sector per shared
                        # sector a line's bytes land on (access.ldgsts_fetched_sectors)
                        got = (ldgsts_fetched_sectors(g, sa, width, group, sector) if len(sa) == len(g)
                               else grouped_sectors(g, width, group, sector))
                        grouped += got
                        if straddle is not None and ga:
                            c.copy_straddle_cycles += straddle * max(0.0, got - len(ga) * width / sector) * r
                    else:
                        all_grouped = False
                    hit = l1_cycles(ga, width, hw)
                    l1 += hit
                    miss_extra += max(0.0, l1_miss_requests(ga, width, hw, requested) / miss_rate - hit)
                    waves = ldgsts_wavefronts(ga, sa, width, hw)
                    st_wave += waves
                    if width >= 16 and hw.has("ldgsts16_pipe_cycles"):
                        st_pipe += max(0.0, hw.get("ldgsts16_pipe_cycles") - waves)
                    if width >= 16 and ga and hw.has("ldgsts16_line_cycles"):
                        # the L1 writes a copy into shared memory once per global line it reads (a half
                        # line as a whole one), twice where the line's bytes land on more shared sectors than
                        # they fill (access.ldgsts_line_writes): writes beyond the shared lines it writes hold
                        # the pipe longer
                        read = ldgsts_line_writes(g, sa, width, sector)
                        _, written = global_sectors_and_lines([s for s in sa if s is not None], width, sector,
                                                              4 * sector)
                        st_pipe += max(0, read - written) * hw.get("ldgsts16_line_cycles")
                    st_ideal += ideal_wavefronts(sum(1 for s in sa if s is not None), width, banks, bank_w)
                continue
            instr += 1
            hit = l1_cycles(active, w.width_bytes, hw)
            l1 += hit
            miss_extra += max(0.0, l1_miss_requests(active, w.width_bytes, hw, requested) / miss_rate - hit)
            if ld.dest == "shared":
                for _, sa, width in _pieces(w):
                    st_instr += 1
                    st_wave += smem_wavefronts(sa, width, banks, bank_w)
                    st_ideal += ideal_wavefronts(sum(1 for s in sa if s is not None), width, banks, bank_w)
        extra_channel = 0.0
        if ld.dest == "bulk":
            instr = 1.0
            if mid_sector_cost is not None:
                extra_channel = _mid_sector_extra_bytes(ld, sector, mid_sector_cost) * r
                c.load_l2_extra_channel_bytes += extra_channel
        c.load_instructions += instr * r
        if ld.dest == "async":
            c.staging_address_instructions += ld.address_instructions * instr * r
        else:
            c.load_instructions += ld.address_instructions * instr * r
        c.load_l1_cycles += l1 * r
        n_sectors = grouped if all_grouped and ld.instructions else len(sectors)
        c.load_l2_bytes += n_sectors * sector * r
        c.load_l2_bytes_each.append(float(n_sectors * sector * r))
        if ld.isolated_sectors and dram_unit is not None and dram_unit > sector:
            c.load_dram_bytes_each.append(float(len({s * sector // dram_unit for s in sectors}) * dram_unit * r))
        else:
            c.load_dram_bytes_each.append(float(n_sectors * sector * r))
        line = sector * 4
        if dram_unit is not None and sectors:
            per_line = len(sectors) * sector / len({s // 4 for s in sectors})
            c.load_hbm_access_bytes_each.append(float(min(line, -(-per_line // dram_unit) * dram_unit)))
        else:
            c.load_hbm_access_bytes_each.append(0.0)
        c.load_l1_cacheable.append(ld.dest in ("register", "shared") and not ld.bypass_l1)
        c.load_l1_miss_cycles_each.append(miss_extra * r)
        useful = useful_bytes(ld.instructions)
        c.load_useful_bytes += useful * r
        c.load_channel_factor_each.append((n_sectors * sector * r + extra_channel) / (useful * r) if useful * r else 1.0)
        c.staging_instructions += st_instr * r
        c.staging_wavefronts += st_wave * r
        if st_pipe:
            c.staging_pipe_cycles = (c.staging_pipe_cycles or 0.0) + st_pipe * r
        c.staging_ideal += st_ideal * r
        if ld.dest != "register":
            c.staging_bytes += useful * r
        c.async_staging = c.async_staging or ld.dest in ("async", "bulk")
        crit += ld.chain * hw.l1_latency_cycles
    for acc in step.shared_stores:
        for w in acc.instructions:
            c.staging_instructions += acc.repeat
            c.staging_wavefronts += _wavefronts(w, banks, bank_w) * acc.repeat
            c.staging_ideal += ideal_wavefronts(w.active_lanes, w.width_bytes, banks, bank_w) * acc.repeat
        c.staging_bytes += useful_bytes(acc.instructions) * acc.repeat
    for acc in step.shared_loads:
        if acc.generic:
            c.shared_load_l1_cycles += len(acc.instructions) * acc.repeat / hw.l1_requests_per_clk_per_sm
        for w in acc.instructions:
            c.shared_load_instructions += acc.repeat
            c.shared_load_wavefronts += _wavefronts(w, banks, bank_w) * acc.repeat
            c.shared_load_ideal += ideal_wavefronts(w.active_lanes, w.width_bytes, banks, bank_w) * acc.repeat
        c.shared_load_bytes += sum(w.active_lanes * w.width_bytes for w in acc.instructions) * acc.repeat
    if step.shared_loads:
        crit += (hw.l1_latency_cycles if any(a.generic for a in step.shared_loads) else hw.smem_latency_cycles)
    for op in step.compute:
        if isinstance(op, Mma):
            c.tensor_flops += op.flops
            c.tensor_cycles += op.flops / hw.mma_flops_per_clk(op.shape, op.dtype)
            if op.scope == "warp":
                c.lockstep_tensor_cycles += op.flops / hw.mma_flops_per_clk(op.shape, op.dtype)
            c.mma_instructions += op.count
            c.math_instructions += op.count
            if op.operands == "shared":
                m, n, k = op.shape
                operand_bytes = op.count * (m * k + k * n) * DTYPE_BYTES[op.dtype]
                c.shared_load_wavefronts += operand_bytes / (banks * bank_w)
                c.shared_operand_wavefronts += operand_bytes / (banks * bank_w)
                c.shared_load_ideal += operand_bytes / (banks * bank_w)
                c.shared_load_bytes += operand_bytes
            if op.chain:
                crit += mma_chain_cycles(hw, op)
        elif isinstance(op, Shuffle):
            c.shuffle_wavefronts += op.count
            c.math_instructions += op.count
            if op.chain:
                crit += op.chain * hw.pipe_latency_cycles("shuffle")
        elif isinstance(op, Compute):
            if op.pipe != "issue":
                c.add_pipe(op.pipe, op.dtype, op.count)
            c.math_instructions += op.count
            if op.chain:
                crit += op.chain * hw.pipe_latency_cycles(op.pipe)
    for at in step.atomics:
        for w in at.instructions:
            if at.space == "shared":
                c.atomic_wavefronts += _atomic_wavefronts(w, banks, bank_w) * at.repeat
                c.math_instructions += at.repeat
            else:
                active = [a for a in w.offsets if a is not None]
                s, _ = global_sectors_and_lines(active, w.width_bytes, sector, 4 * sector)
                c.store_instructions += at.repeat
                c.store_l2_bytes += s * sector * at.repeat
    if step.cluster_arrives:
        cycles, c.release_hold = cluster_release(hw)
        crit += step.cluster_arrives * cycles
        c.release_cycles = step.cluster_arrives * cycles
        if hw.has("cluster_release_cycles_by_inflight"):
            c.release_cycles_by_inflight = [[n, step.cluster_arrives * y]
                                            for n, y in hw.get("cluster_release_cycles_by_inflight")]
    c.barriers = float(step.barriers * warps_per_block)
    if step.barriers:
        crit += step.barriers * barrier_latency_cycles(hw, warps_per_block)
    for st in step.stores:
        for w in st.instructions:
            active = [a for a in w.offsets if a is not None]
            s, _ = global_sectors_and_lines(active, w.width_bytes, sector, 4 * sector)
            c.store_instructions += st.repeat
            c.store_l2_bytes += s * sector * st.repeat
            c.store_l1_cycles += l1_cycles(active, w.width_bytes, hw) * st.repeat
        c.store_useful_bytes += useful_bytes(st.instructions) * st.repeat
    c.critical_path_cycles = crit
    return c


def _wavefronts(w: WarpAccess, banks: int, bank_w: int) -> int:
    """Bank wavefronts of a shared load or store; one when every lane is predicated off."""
    return smem_wavefronts(list(w.offsets), w.width_bytes, banks, bank_w) or 1


def _atomic_wavefronts(w: WarpAccess, banks: int, bank_w: int) -> int:
    """Passes a shared atomic needs: lanes on one bank serialise, same address too."""
    per_bank: dict[int, int] = {}
    for a in w.offsets:
        if a is not None:
            b = (a // bank_w) % banks
            per_bank[b] = per_bank.get(b, 0) + 1
    return max(per_bank.values(), default=0)
