"""The discrete-event engine: executes a :class:`~tilesim.program.TileProgram` on a GPU, on simpy.

The engine knows no kernel family: it runs a program's phases in order, and what each step asks of
each resource comes from the per-vendor cost model (:func:`tilesim.cost.step_cost`).

What is simulated
-----------------
* **SMs and resident blocks.** Occupancy gives ``R`` block slots per SM. All SMs are alike, so one
  *representative SM* is simulated with its ``R`` slots; each slot runs a *block group*: up to
  ``sm_count`` blocks of consecutive launch order, one per SM, advancing in step. The per-SM
  resources (issue, FMA pipe, shared-memory wavefronts, L1 wavefronts) are channels of the
  representative SM, shared by its slots; the chip-wide ones (L2, HBM) see each group's demand
  multiplied by the number of blocks it stands for.
* **Block scheduler.** Blocks are handed out in launch order as slots free up. A last partial
  wave lands on fewer SMs than one block each, as measured on the device
  (``tail_packing_by_slots``), so its groups are smaller and its SMs more crowded.
* **Phases.** A block group runs the program's phases in order; each is a loop of identical steps.
  A step waits for its data, then issues the global loads of the step ``pipeline_depth - 1`` ahead
  when the phase is pipelined (the slot they refill is the one the wait frees: cp.async's wait and
  barrier, a register prefetch after the barrier, a wgmma ring's release after the next step's wait),
  stages its data in shared memory, computes, and posts its stores. Loads
  queue on the issue, L1, L2 and HBM channels and come back after the L2 or HBM latency; compute
  queues on the issue, math-pipe (FMA, SFU, integer, FP64, shuffle, tensor) and shared-memory
  channels and never takes less than the step's critical path. Barrier-free loops run
  ``warp_groups`` independent warp groups. Stores are posted: they queue on L2 (and on HBM for
  the share of the output the L2 cannot keep dirty) but the block does not wait for them.
* **L2.** :class:`~tilesim.engine.l2.L2Cache` decides per tile whether the data is resident:
  reuse among blocks in flight together, and capacity, decide what reaches HBM. The caches know a
  tile by its projection and the k-step; a tile whose coordinates do not name the phase's loop
  index is the same data at every step, and is known by k-step 0 throughout (a block that re-reads
  it every step finds it resident after the first, as the GPU does).

Steady states (what keeps it fast)
----------------------------------
When a k-loop's step period has settled (three windows in a row within ``STEADY_TOL``; or, where slots taking
turns at a channel make the windows repeat in a cycle of a few, three runs of the cycle alike, see
``MAX_WINDOW_CYCLE``: it holds at the cycle's mean; or, where the windows jitter without
repeating, the standard error of the mean of its last windows is within the tolerance and they
show no ramp, see ``_window_mean``: it holds at that mean; or, in a slot whose previous block group held
the same phase, once a window after the loop's first takes the period that group held at, see
``_repeats_prior``) and the other slots
in a k-loop have settled too, the rest of the loop is not stepped: the group holds, for the
skipped time, a reservation on every channel equal to its measured consumption rate (so it still
contends), streams its misses into the L2, and its counters grow by the measured per-step amounts.
A hold ends early when a slot enters or leaves a k-loop, since the contention it was measured
under has changed; the group then steps and settles again. A slot between its group's last loop
phase and its next group's first, while blocks remain, still counts as in a loop (it will be back),
so group boundaries in a steady grid do not cut the others' holds.
Likewise whole block groups repeat once full groups complete at a steady rate over all slots
(runs of a few rounds of completions, each slot's first group, which carries the launch's ramp, left
out, agree within ``GROUP_STEADY_TOL``, taken ending at every recent completion so that a cycle of
rounds is averaged over; see ``_groups_settled``; or once the completions repeat after a number of
completions that need not be whole rounds, see ``_completion_cycle``): every slot then holds whole groups until one
common end, where all the holds release their channels at once, so that none idles or steps among
the others' reservations; each slot steps about a last group, and the tail, after it.
The work therefore grows with the number of distinct phases, not with the number of tiles.
Holding is an approximation: ``steady_state=False`` steps everything (slower; the reference the
holds are checked against).
"""

from __future__ import annotations

from collections import Counter, deque

import simpy

from tilesim.analytic.bounds import roofline_time_s
from tilesim.analytic.checks import check_not_faster_than_roofline, check_program
from tilesim.analytic.occupancy import occupancy as occupancy_of
from tilesim.analytic.waves import waves as waves_of
from tilesim.engine.channel import Channel, prepared, request_all
from tilesim.engine.clock import CLOCK_ITERATIONS, CLOCK_TOLERANCE, _bulk_load_share, _clock_guess
from tilesim.engine.events import _AllDone, _fewer_collections, _process, _run, _timeout, _wait
from tilesim.engine.l2 import L2Cache
from tilesim.engine.plan import (
    CHANNELS,
    COMPUTE_COUNTERS,
    MATH_PIPES,
    PER_SM_COUNTERS,
    POSTED,
    _Lane,
    _Plan,
    _Tally,
)
from tilesim.engine.projection import _form_column, _linear_forms, _project
from tilesim.engine.steady import (
    FALLBACK_WINDOWS,
    GROUP_AVERAGE_ROUNDS,
    GROUP_CYCLE_ROUNDS,
    GROUP_SAMPLES,
    GROUP_STEADY_SHARE,
    GROUP_STEADY_TOL,
    MAX_GROUP_CYCLE,
    MAX_WINDOW_CYCLE,
    MIN_GROUP_HOLD,
    STEADY_TOL,
    WINDOW_SAMPLES,
    _completion_cycle,
    _repeats_prior,
    _window_cycle,
    _window_mean,
)
from tilesim.hardware import HardwareSpec, with_overrides
from tilesim.program import Mma, TileProgram, TileRef
from tilesim.result import Interval, SimResult, Traffic

MAX_TIMELINE = 20000


class Engine:
    """One simulation run. Build it, call :meth:`run`, read the returned :class:`SimResult`."""

    def __init__(self, program: TileProgram, hw: HardwareSpec, *, timeline: bool = False,
                 steady_state: bool = True, on_progress=None, flushed_dirty_bytes: float | None = None) -> None:
        self.p = program
        self.miss_share = 0.0  # the share of the group's blocks the last issued step's L2 misses hold (_issue_loads)
        self.missing_blocks = 0
        self.hw = hw
        self._flushed_writeback_setup(flushed_dirty_bytes)
        self.tol = STEADY_TOL if steady_state else -1.0
        self.group_tol = GROUP_STEADY_TOL if steady_state else -1.0
        lc = program.launch
        self.occ = occupancy_of(hw, lc.threads_per_block, lc.regs_per_thread, lc.smem_bytes_per_block)
        if self.occ.blocks_per_sm < 1:
            raise ValueError(f"{program.name}: no block fits on an SM of {hw.name} (limited by {self.occ.limiter})")
        self.env = simpy.Environment()
        clk = hw.sm_clock_hz
        self.warps_per_block = -(-lc.threads_per_block // hw.warp_size)
        self.plans = [_Plan(ph, hw, self.warps_per_block, self.occ.active_warps_per_sm, program.launch.grid)
                      for ph in program.phases]
        # math pipes count in their own cycles (each dtype at its rate, see _Plan); a pipe's rate
        # is looked up only when the program uses it (a GPU may lack one)
        self.ch = {pipe: Channel(pipe, clk, f"{pipe} cycles") for pipe in (*MATH_PIPES, "tensor")}
        self.ch.update({
            "issue": Channel("issue", hw.issue_warp_instr_per_clk_per_sm * clk, "warp instructions"),
            "smem": Channel("smem", hw.pipe_warp_instr_per_clk("smem") * clk, "wavefronts"),
            "l1": Channel("l1", clk, "L1 cycles"),
            "l2": Channel("l2", hw.l2_bytes_per_s, "bytes"),
            # reads and writes share the HBM: the rate follows the kernel's compulsory mix of them
            "hbm": Channel("hbm", hw.hbm_rate_at(self._write_fraction()), "bytes"),
            # an SM takes in new blocks at a measured rate (validation/calibration/block_rate_probe.py);
            # atomics on one address from every block serialise at a measured chip-wide rate
            # (pipes_probe tp_red_same). Unmeasured on a GPU: neither limits anything.
            "dispatch": Channel("dispatch", (hw.block_launch_rate_at(lc.threads_per_block) or 1e9) * clk, "blocks"),
            "atomic": Channel("atomic", (hw.get("global_atomic_same_address_per_clk")
                                         if hw.has("global_atomic_same_address_per_clk") else 1e9) * clk,
                              "same-address atomics"),
        })
        for pl in self.plans:
            self._hbm_occupancy(pl)
        self.cache = L2Cache(hw.l2_bytes)
        self.l1 = self._l1_cache()
        self.l1_lat_s = hw.l1_latency_cycles / clk if self.l1 is not None else 0.0
        self.total = _Tally()
        self.next_block = 0
        self.events = 0
        self.want_timeline = timeline
        self.timeline: list[Interval] = []
        self.loads: list[Interval] = []  # with the timeline: each step's loads, from issue to arrival
        # on_progress(fraction done): called as block steps are simulated (or held), when given
        self.on_progress = on_progress
        self.units_total = max(1, program.launch.blocks * sum(pl.trips for pl in self.plans))
        self.units_done = 0
        self._proj_cache: dict = {}
        self._forms_cache: dict = {}  # (id(tile), loop index) -> _linear_forms of its coordinates
        self._where_cache: dict = {}  # (first, count) -> the blocks' (bx, by, bz) in launch order; (first, count, axis) -> one column
        # tensor -> {projection: the integer the L2 and L1 know it by}; numbered 0, 1, ... over all tensors in
        # first-seen order (_prefix_count of them so far)
        self._prefix_ids: dict = {}
        self._prefix_count = 0
        # tensors whose tiles are looked up in L2 (loads, global atomics): only theirs are tracked
        self.read_tensors = {t.tile.tensor for pl in self.plans for t in (*pl.loads, *pl.atomics)}
        self.l2_lat_s = hw.l2_latency_cycles / clk
        self.hbm_lat_s = hw.hbm_latency_cycles / clk
        self.smem_lat_s = hw.smem_latency_cycles / clk
        # SharedAccess.generic loads return with the L1's latency
        self.generic_smem_lat_s = (hw.l1_latency_cycles / clk if any(pl.cost.shared_load_l1_cycles for pl in self.plans)
                                   else self.smem_lat_s)
        # bulk tensor copies (TMA) complete on an mbarrier: their measured latency from issue to
        # completion, from L2 and from HBM (validation/calibration/tensor_probe.py); a GPU without the
        # measurement takes the load latencies
        self.bulk_l2_lat_s = (hw.get("tma_latency_cycles") if hw.has("tma_latency_cycles")
                              else hw.l2_latency_cycles) / clk
        self.bulk_hbm_lat_s = (hw.get("tma_hbm_latency_cycles") if hw.has("tma_hbm_latency_cycles")
                               else hw.hbm_latency_cycles) / clk
        # a box with rows that start mid-sector, from L2 (tensor_probe tma_pitch: 922 cycles against 731;
        # from HBM not measured: the aligned latency)
        self.bulk_l2_mid_sector_lat_s = (hw.get("tma_mid_sector_latency_cycles") / clk
                                         if hw.has("tma_mid_sector_latency_cycles") else self.bulk_l2_lat_s)
        # where the profile has the landing law of a k-step's copies (tma_pair_probe, tma_pair.json): the
        # step's copies land at the later of (the channel's finish + ``after``) and (issue + L0 + the
        # block's bytes of the step over the landing rate), L0 and the rate from the one-SM, one-in-flight
        # pair rows (the copy's own latency, its transfer included: adding that latency to the chip-wide
        # channel's finish counted the transfer twice, tensor_engine_check tma / tma_pair). From L2,
        # ``after`` is L0 (the part of the latency no transfer hides: tma_pair's every-SM 16 KiB pairs land in
        # 903 cycles, the channel's 490 cycles plus more than L0); from HBM it is 0: tma_pair's every-SM HBM
        # rows land at the chip's transfer time at their 4.16-4.27 TB/s (48 KiB pairs, one in flight: 2813
        # cycles, under 132 pairs' 3120 cycles at 4.16 TB/s). Without the fields: the channel's finish + the
        # whole one-box latency, as before
        self.bulk_landing = None
        if hw.has("tma_fixed_latency_cycles") and hw.has("tma_landing_bytes_per_clk"):
            l0 = hw.get("tma_fixed_latency_cycles")
            per_byte = 1.0 / (hw.get("tma_landing_bytes_per_clk") * clk)
            hbm_l0 = (hw.get("tma_hbm_fixed_latency_cycles") if hw.has("tma_hbm_fixed_latency_cycles") else l0)
            hbm_per_byte = (1.0 / (hw.get("tma_hbm_landing_bytes_per_clk") * clk)
                            if hw.has("tma_hbm_landing_bytes_per_clk") else per_byte)
            # a box whose rows start mid-sector: its measured one-box latency's excess over the aligned one
            mid = (max(0.0, hw.get("tma_mid_sector_latency_cycles") - hw.get("tma_latency_cycles"))
                   if hw.has("tma_mid_sector_latency_cycles") and hw.has("tma_latency_cycles") else 0.0)
            # (after, L0, seconds per byte) by where the data comes from
            self.bulk_landing = {"l2": (l0 / clk, l0 / clk, per_byte),
                                 "l2_mid": ((l0 + mid) / clk, (l0 + mid) / clk, per_byte),
                                 "hbm": (0.0, hbm_l0 / clk, hbm_per_byte)}
        out_bytes = program.launch.blocks * sum(pl.cost.store_useful_bytes * pl.trips for pl in self.plans)
        self.dirty_bytes = min(hw.l2_dirty_bytes, hw.l2_bytes)  # never more than the whole L2
        self.writeback_share = max(0.0, 1.0 - self.dirty_bytes / out_bytes) if out_bytes else 0.0
        self.writes: list[tuple[float, float]] = []
        # completion times of full block groups, from the end of the last slot's first group on
        self.group_ends: deque = deque(maxlen=2 * MAX_GROUP_CYCLE * self.occ.blocks_per_sm + GROUP_SAMPLES + 1)
        self.first_groups_done = 0  # slots that have completed their first group
        self.group_period_s = 0.0  # a slot's group time once the completions have settled
        self.group_end_s = 0.0  # when every slot's group hold ends (the same for all: no slot idles early)
        self.group_end: simpy.Event | None = None  # the event that ends them
        self.group_end_writeback = False  # they end early, when the earlier work's dirty lines run out
        self.group_window_start_s = 0.0  # the first completion the settled group time was measured from
        self.tail_sms: int | None = None  # SMs a last partial wave lands on
        self.in_loop: set[int] = set()  # slots inside a loop phase
        # slots the loops' contention is measured with: those in a loop phase, and those between their
        # group's last loop phase and the next group's first while blocks remain to be handed out
        # (they will be back); holds are cut when this set changes (_loop_set_changed)
        self.looping: set[int] = set()
        self.group_holding: set[int] = set()  # slots holding whole groups
        loops = [i for i, pl in enumerate(self.plans) if pl.in_loop]
        self.last_loop_phase = loops[-1] if loops else -1
        self.steady: dict[int, float] = {}  # steady slots -> their step period
        self.holding: dict[int, float] = {}  # holding slots -> the period they hold at
        self.changed = self.env.event()  # fires when the set of slots in a loop changes
        self.held_period: dict = {}  # (slot, plan id) -> the period the slot's last hold of that phase held at

    def _flushed_writeback_setup(self, dirty_bytes: float | None) -> None:
        """The dirty lines the kernel finds in the L2 at its start, left by earlier work.

        The validation harness times every kernel after an L2 flush that *writes* a buffer of twice
        the L2 (validation/harness/timing.py), which leaves the L2 at its limit of dirty lines;
        ``validation/calibration/flush_probe.py`` measured what a kernel then writes back
        (``l2_flushed_dirty_bytes`` in all; ``l2_flushed_writeback_per_read_byte`` of them per byte
        its read misses bring in, ``..._per_written_byte`` per byte it writes). ``dirty_bytes`` None
        takes that measured state (0 on a GPU without the measurement); 0 is a clean L2."""
        hw = self.hw
        measured = hw.has("l2_flushed_dirty_bytes")
        if dirty_bytes is None:
            dirty_bytes = hw.get("l2_flushed_dirty_bytes") if measured else 0.0
        if dirty_bytes < 0:
            raise ValueError(f"Engine: flushed_dirty_bytes = {dirty_bytes!r}: must be >= 0")
        self.flushed_dirty_left = float(dirty_bytes) if measured else 0.0
        self.flushed_last_s = -1.0  # when write-back of those lines was last queued (-1: never)
        self.flushed_per_read = hw.get("l2_flushed_writeback_per_read_byte") if measured else 0.0
        self.flushed_per_written = hw.get("l2_flushed_writeback_per_written_byte") if measured else 0.0

    def _flushed_writeback(self, now_s: float, read_bytes: float, written_bytes: float, tally: _Tally) -> float:
        """Write back the earlier work's dirty lines that ``read_bytes`` of misses and ``written_bytes``
        of stores push out of the L2: queued on the HBM (posted: nobody waits for them, but the reads
        behind them do), counted apart from the kernel's own traffic. Returns the bytes."""
        if self.flushed_dirty_left <= 0:
            return 0.0
        out = min(self.flushed_dirty_left,
                  self.flushed_per_read * read_bytes + self.flushed_per_written * written_bytes)
        if out > 0:
            self.flushed_last_s = now_s
            self.flushed_dirty_left -= out
            self.ch["hbm"].request(now_s, out)
            tally.v["hbm"] += out
            tally.v["hbm_flushed_writeback"] += out
        return out

    def _hbm_occupancy(self, pl: _Plan) -> None:
        """Each load's HBM channel bytes per DRAM byte: 1, or for reads of less than a line on a GPU with
        a measured ``hbm_accesses_per_s``, the channel's rate over what such reads reach (accesses per
        second x bytes per access, StepCost.load_hbm_access_bytes_each)."""
        hw = self.hw
        if len(pl.hbm_access_each) != len(pl.loads) or not hw.has("hbm_accesses_per_s"):
            return
        line = hw.sector_bytes * 4
        reach = hw.get("hbm_accesses_per_s")
        rate = self.ch["hbm"].rate_per_s
        # a pipelined loop has the reads of its next k-steps in flight while it waits: a tile walking along a
        # line (each k-step the next bytes of the same rows) asks for the rest of each line before its first
        # read is served, so DRAM sees reads of the bytes of all the steps in flight together
        ahead = max(1, pl.depth - 1)
        pl.hbm_occupancy_each = tuple(max(1.0, rate / (reach * min(line, a * ahead))) if 0 < a < line else 1.0
                                      for a in pl.hbm_access_each)
        pl.hbm_occupancy = any(f > 1.0 for f in pl.hbm_occupancy_each)

    def _l1_cache(self) -> L2Cache | None:
        """The representative SM's L1: what of the unified L1/shared memory the resident blocks'
        shared memory leaves (the carveout's granularity is ignored), kept by the same byte-clock
        LRU as the L2; None when the GPU's spec gives no L1 capacity."""
        hw = self.hw
        try:
            unified = hw.level("l1").capacity_bytes
        except ValueError:
            return None
        if not unified:
            return None
        reserved = hw.smem_reserved_per_block_bytes if hw.has("smem_reserved_per_block_bytes") else 0
        smem = self.occ.blocks_per_sm * (self.p.launch.smem_bytes_per_block + reserved)
        left = unified - smem
        return L2Cache(left) if left > 0 else None

    def _write_fraction(self) -> float:
        """The share of the kernel's compulsory HBM bytes that are writes (its output over
        ``min_hbm_bytes``); an even mix, the copy's, when the program gives no compulsory bytes."""
        p = self.p
        out = p.launch.blocks * sum(pl.cost.store_useful_bytes * pl.trips for pl in self.plans)
        return min(1.0, out / p.min_hbm_bytes) if p.min_hbm_bytes > 0 else 0.5

    # ----- which tiles a block group touches ------------------------------------------------------
    def _projections(self, tile: TileRef, index: str, first: int, count: int) -> list[tuple[tuple, int]]:
        """Distinct tile coordinates (the loop index left symbolic) over blocks first..first+count-1,
        with how many of those blocks touch each."""
        return self._tiles(tile, index, first, count)[0]

    def _tiles(self, tile: TileRef, index: str, first: int, count: int) -> tuple[list, tuple, tuple]:
        """:meth:`_projections`, with the L2 prefixes and the block counts as tuples of their own
        (computed once per tile, loop index and block group). A prefix is a small integer standing
        for one ``(tensor, projection)`` for the whole run: the caches hash it at every lookup."""
        key = (id(tile), index, first, count)  # tiles live as long as the program: no hashing of coordinates
        got = self._proj_cache.get(key)
        if got is None:
            fkey = (id(tile), index)
            forms = self._forms_cache.get(fkey, False)
            if forms is False:
                forms = self._forms_cache[fkey] = _linear_forms(tile.coords, index)
            if forms is None:  # names other than the block and loop indices: the general path
                seen: dict = {}
                for bx, by, bz in self._block_indices(first, count):
                    named = {"bx": bx, "by": by, "bz": bz}
                    proj = tuple(_project(c, named, index) for c in tile.coords)
                    seen[proj] = seen.get(proj, 0) + 1
            else:  # the same projections, coordinate by coordinate over the blocks, counted in first-seen order
                columns = [_form_column(form, first, count, self._block_column) for form in forms]
                seen = Counter(zip(*columns, strict=True)) if columns else Counter({(): count})
            items = list(seen.items())
            ids = self._prefix_ids.get(tile.tensor)
            if ids is None:
                ids = self._prefix_ids[tile.tensor] = {}
            get = ids.get
            prefixes = list(map(get, seen))
            if None in prefixes:  # projections seen for the first time take the next numbers
                n = self._prefix_count
                for j, proj in enumerate(seen):
                    if prefixes[j] is None:
                        prefixes[j] = ids[proj] = n
                        n += 1
                self._prefix_count = n
            got = (items, tuple(prefixes), tuple(seen.values()))
            if len(self._proj_cache) > 4096:
                self._proj_cache.clear()
            self._proj_cache[key] = got
        return got

    def _block_column(self, first: int, count: int, axis: int) -> list:
        """``bx`` (``axis`` 0), ``by`` (1) or ``bz`` (2) of blocks ``first .. first+count-1`` in launch
        order (kept per group): a column of :meth:`_block_indices`, worked out over the whole range at
        once where the launch order is plain row-major (``group_rows`` 1). Not to be changed."""
        key = (first, count, axis)
        got = self._where_cache.get(key)
        if got is None:
            launch = self.p.launch
            if launch.group_rows == 1:
                # Launch.block_indices: bz, b = divmod(block, gx * gy); by, bx = divmod(b, gx)
                gx, gy, gz = launch.grid
                blocks = range(first, first + count)
                if axis == 0:
                    got = list(blocks) if gy == gz == 1 else [b % gx for b in blocks]
                elif axis == 1:
                    got = [b // gx % gy for b in blocks]
                else:
                    per_layer = gx * gy
                    got = [b // per_layer for b in blocks]
            else:
                got = [where[axis] for where in self._block_indices(first, count)]
            if len(self._where_cache) > 256:
                self._where_cache.clear()
            self._where_cache[key] = got
        return got

    def _block_indices(self, first: int, count: int) -> list[tuple[int, int, int]]:
        """``(bx, by, bz)`` of blocks ``first .. first+count-1`` in launch order (kept per group)."""
        key = (first, count)
        got = self._where_cache.get(key)
        if got is None:
            where = self.p.launch.block_indices
            got = [where(b) for b in range(first, first + count)]
            if len(self._where_cache) > 256:
                self._where_cache.clear()
            self._where_cache[key] = got
        return got

    def _touch(self, tile: TileRef, index: str, first: int, count: int, k: int,
               missed_tiles: dict | None = None, dram_factor: float = 1.0) -> float:
        """Look the tiles of one access up in L2 for a block group; return the DRAM bytes missed.

        Blocks of the group touching the same tile share one fetch when the tile fits in L2;
        a tile larger than the whole L2 is fetched by every block that touches it. A missed tile
        costs its bytes times ``dram_factor`` (DRAM bytes per byte of the tile: _Plan.dram_factor_each).
        Missed tiles are noted in ``missed_tiles`` (prefix -> bytes) when given.
        """
        missed = 0.0
        size = tile.tile_bytes
        fits = size <= self.cache.capacity_bytes
        _, prefixes, mults = self._tiles(tile, index, first, count)
        for j in self.cache.access_many(prefixes, k, size, self.env._now):
            m = (size if fits else size * mults[j]) * dram_factor
            missed += m
            self.missing_blocks += mults[j]
            if missed_tiles is not None:
                pre = prefixes[j]
                missed_tiles[pre] = missed_tiles.get(pre, 0.0) + m
        return missed

    # ----- processes ----------------------------------------------------------------------------
    def _record(self, slot: int, kind: str, t0: float, t1: float, phase: str = "", period_s: float = 0.0,
                warp_group: int = 0, parts: tuple = ()) -> None:
        if self.want_timeline and len(self.timeline) < MAX_TIMELINE and t1 > t0:
            self.timeline.append(Interval(slot, kind, t0, t1, phase, period_s, warp_group, parts))

    def _record_loads(self, pl: _Plan, slot: int, lane: _Lane, ready: float) -> None:
        """With the timeline: one step's loads of a warp group, in flight from now until ``ready``."""
        now = self.env._now
        if len(self.loads) < MAX_TIMELINE and ready > now:
            what = "tma" if pl.bulk else "cp.async" if any(ld.dest == "async" for ld in pl.loads) else "loads"
            self.loads.append(Interval(slot, what, now, ready, pl.phase.name, 0.0, lane.group))

    def _progress(self, units: int) -> None:
        """``units`` more block steps simulated or held (see ``on_progress``)."""
        self.units_done += units
        self.on_progress(min(1.0, self.units_done / self.units_total))

    def _issue_loads(self, pl: _Plan, k: int, first: int, count: int, share: float, lane: _Lane | None,
                     tally: _Tally, l1_steps: dict) -> float:
        """Send one step's loads of a group; return when the data is in (registers or smem).

        Only the lead warp group (``lane`` given) looks tiles up in L2, noting its misses."""
        env, ch, c = self.env, self.ch, pl.cost
        now = env._now
        if not pl.loads:  # a step without global loads waits for nothing
            return now
        missed = occupied = 0.0
        self.missing_blocks = 0  # blocks of the group that wait on a tile the L2 missed (_touch)
        if lane is not None:  # the lead warp group looks the tiles up, for all of the group's
            served, every, fill = self._l1_lookup(pl, k, first, lane)
            for j, ld in enumerate(pl.loads):
                if j not in every:
                    m = self._touch(ld.tile, pl.index, first, count, _key(pl.load_varies[j], k), lane.missed,
                                    pl.dram_factor_each[j])
                    missed += m
                    occupied += m * pl.hbm_occupancy_each[j]
            miss_l1 = pl.l1_miss_all
            if every and miss_l1:
                miss_l1 -= sum(pl.l1_miss_each[j] for j in every)
            l1_steps[k] = (served, len(every) == len(pl.loads), miss_l1)
            tally.v["l1_fill"] += fill
        served, all_in_l1, miss_l1 = l1_steps.get(k, (0.0, False, pl.l1_miss_all))
        l2_bytes = (c.load_l2_bytes - served) * count * share
        l2_channel_bytes = l2_bytes * pl.l2_channel_scale + c.load_l2_extra_channel_bytes * count * share
        l1_cycles = (c.load_l1_cycles + miss_l1) * share
        done = max(ch["issue"].request(now, c.load_instructions * share),
                   ch["l1"].request(now, l1_cycles),
                   ch["l2"].request(now, l2_channel_bytes))
        # a tile's DRAM bytes never exceed what the group's sectors read from DRAM (tiles named larger
        # than the lanes touch, as in a tiny problem)
        capped = min(missed, pl.load_dram_bytes * count)
        # the HBM channel's share: the bytes, or more for reads of less than a line (_Plan.hbm_occupancy_each)
        occupied = occupied * capped / missed if pl.hbm_occupancy and missed else capped
        missed = capped
        if missed:
            done = max(done, ch["hbm"].request(now, occupied))
            self._flushed_writeback(now, missed, 0.0, tally)
        v = tally.v
        v["l2_load"] += l2_bytes
        v["l2"] += l2_channel_bytes
        v["hbm"] += occupied
        v["hbm_read"] += missed
        v["l1"] += l1_cycles
        if pl.release_hbm_extra_s:
            # the share of the group's blocks with a copy from DRAM in this step (a missed tile keeps every
            # block that reads it waiting for DRAM; blocks reading two missed tiles counted twice, capped)
            self.miss_share = min(1.0, self.missing_blocks / count) if missed else 0.0
        if pl.bulk:
            if self.bulk_landing is not None:
                after, l0, per_byte = self.bulk_landing["hbm" if missed else
                                                        "l2_mid" if c.load_l2_extra_channel_bytes else "l2"]
                return max(done + after, now + l0 + c.load_l2_bytes * share * per_byte)
            if missed:
                return done + self.bulk_hbm_lat_s
            return done + (self.bulk_l2_mid_sector_lat_s if c.load_l2_extra_channel_bytes else self.bulk_l2_lat_s)
        if missed:
            return done + self.hbm_lat_s + pl.burst_hbm_s
        return done + (self.l1_lat_s if all_in_l1 else self.l2_lat_s + pl.burst_l2_s)

    def _l1_lookup(self, pl: _Plan, k: int, first: int, lane: _Lane) -> tuple[float, set, float]:
        """Look the step's cached loads up in the representative SM's L1 (its block is the group's
        first). Returns the L2 bytes per block the L1 serves, which loads it serves, and the bytes
        it brings in; every SM is taken to see what the representative one sees."""
        if self.l1 is None or not pl.l1_loads:
            return 0.0, set(), 0.0
        served, hits, fill = 0.0, set(), 0.0
        now = self.env._now
        for j, l2_bytes, cacheable in pl.l1_loads:
            if not cacheable:
                continue
            tile = pl.loads[j].tile
            prefix = self._tiles(tile, pl.index, first, 1)[1][0]
            if self.l1.access(prefix, _key(pl.load_varies[j], k), tile.tile_bytes, now):
                served += l2_bytes
                hits.add(j)
            else:
                lane.l1_missed[prefix] = lane.l1_missed.get(prefix, 0.0) + tile.tile_bytes
                fill += tile.tile_bytes
        return served, hits, fill

    def _compute(self, pl: _Plan, k: int, first: int, count: int, share: float, tally: _Tally,
                 release_extra_s: float = 0.0):
        """Stage the step's data in shared memory (unless cp.async did), pass its barriers, do its
        math and issue its stores (a process).

        The math runs in ``rounds`` (at most MAX_ROUNDS) load-then-use rounds: each waits for its
        shared loads (wavefronts on the smem channel, then the shared-memory latency) before its
        math instructions. A block that synchronises at barriers splits its warps into up to
        MAX_MATH_GROUPS groups that run their rounds concurrently until the barrier, so one
        group's loads overlap another's math; no warp issues faster than ``warp_issue_per_clk``.
        The cp.async copies a step issues enter the shared-memory queue after its barrier and their
        address arithmetic (on the issue channel, before anything else), ahead of
        its fragment loads, each 16-byte copy holding the pipe ``ldgsts16_pipe_cycles``
        (mma_feed_probe gemm_traffic: 6 zero-fill copies per thread add 266 cycles per k-step to an
        ldmatrix-fed mma.sync loop, validation/results/h200/calibration/mma_feed.json).
        """
        env = self.env
        t0 = env._now
        got = pl.staging.get(share)
        if got is None:
            got = pl.staging[share] = self._staging(pl, share)
        if got:
            # the copies' address arithmetic first: the warps issue nothing else until it is done
            # (GlobalLoad.address_instructions), then the copies reach the shared-memory pipe
            issue, smem, address, staging, staged_issue = got
            start = issue(t0, address)
            # copies straddling sector boundaries hold the fragment loads longer (StepCost.copy_straddle_cycles)
            done = max(smem(start, staging), issue(t0, staged_issue)) + pl.straddle_s * share
            if done > env._now and (wait := _wait(env, done - env._now)) is not None:
                yield wait
        staged = env._now
        groups = pl.math_groups
        if groups == 1:
            yield from self._math(pl, share)
        elif env.peek() > env._now:
            # nothing else happens at this instant, so the first group would run first anyway: it
            # runs in this process (see _together)
            yield from self._together(self._math(pl, share / groups),
                                      [self._math(pl, share / groups) for _ in range(groups - 1)])
        else:
            yield _AllDone(env, [_process(env, self._math(pl, share / groups)) for _ in range(groups)])
        if pl.lockstep_s and pl.in_loop and len(self.in_loop) > 1:
            # blocks in a loop on this SM share each scheduler's tensor pipe in phase: the step's
            # math lasts their MMAs' tensor time together (StepCost.lockstep_tensor_cycles)
            end = staged + len(self.in_loop) * pl.lockstep_s
            if env._now < end and (wait := _wait(env, end - env._now)) is not None:
                yield wait
        computed = env._now
        crit = pl.crit_s + release_extra_s  # the step's cluster release, longer for copies from HBM
        if env._now < t0 + crit and (wait := _wait(env, t0 + crit - env._now)) is not None:
            yield wait
        v = tally.v
        counts = pl.compute_counts.get(share)
        if counts is None:  # the step's compute counters at this share (those of nothing left out)
            it = pl.tally.v
            counts = pl.compute_counts[share] = tuple(
                (key, it[key] * share) for key in COMPUTE_COUNTERS if it[key] * share != 0)
        for key, amount in counts:
            v[key] += amount
        waited = env._now
        if pl.stores or pl.atomics:
            yield from self._stores(pl, k, first, count, share, tally)
        if self.want_timeline:  # the step's parts, in order, for the timeline
            parts = (("barrier", staged - t0), ("math", computed - staged), ("dependency", waited - computed),
                     ("stores", env._now - waited))
            return tuple((what, s) for what, s in parts if s > 0)
        return ()

    def _staging(self, pl: _Plan, share: float) -> tuple:
        """What staging ``share`` of a step asks (kept per plan and share by :meth:`_compute`): the
        issue and smem channels' requests, the copies' address instructions, the register-staged
        stores' wavefronts with those of the cp.async copies the step issues (their writes enter the
        shared-memory queue as the warps issue them after the barrier, ahead of the step's fragment
        loads: mma_feed_probe gemm_traffic rows), and the staging instructions with the barriers;
        () when the step stages nothing and has no barrier."""
        ch, c = self.ch, pl.cost
        staging = c.staging_wavefronts + (c.staging_pipe_cycles or 0.0)
        if not (staging or c.staging_instructions or c.barriers or c.staging_address_instructions):
            return ()
        return (ch["issue"].request, ch["smem"].request, c.staging_address_instructions * share, staging * share,
                (c.staging_instructions + c.barriers) * share)

    def _together(self, first, others: list):
        """Run the generator ``first`` in this process and each of ``others`` as a process of its
        own, and return once all are done: what waiting on all of them as processes does, when
        nothing else is due at this instant (the caller checks), with two events fewer.

        The others start after ``first`` has reached its first wait, as they would behind its
        process's start; ``first``'s end is followed by a zero timeout in place of its process's
        exit where another event is due at that instant (else there is no order to keep)."""
        env = self.env
        procs = [_process(env, gen) for gen in others]
        yield from first
        if env.peek() <= env._now:
            yield _timeout(env, 0)
        yield _AllDone(env, procs)

    def _math(self, pl: _Plan, share: float):
        """One group of warps through the step's load-then-use rounds (a process)."""
        env = self.env
        got = pl.math_rounds.get(share)
        if got is None:
            got = pl.math_rounds[share] = self._math_round(pl, share)
        r, lds, lds_lat, requests, issue_s = got
        for _ in range(r):
            now = env._now  # env._now, without the property's call
            if lds:
                done = request_all(now, lds, now) + lds_lat
                if (wait := _wait(env, done - now)) is not None:
                    yield wait
                now = env._now
            done = request_all(now, requests, now + issue_s)
            if (wait := _wait(env, done - now)) is not None:
                yield wait
            self.events += 1

    def _math_round(self, pl: _Plan, share: float) -> tuple:
        """What one load-then-use round of a group of warps with ``share`` of the block's step asks
        (kept per plan and share by :meth:`_math`): the rounds, the shared loads' requests (channel,
        amount) and their latency, the math's requests in the order they queue (issue, each pipe,
        shared atomics) and the least time the warps take to issue it. Requests of nothing are left
        out (a channel returns the time it is asked at for them and changes nothing)."""
        ch, c = self.ch, pl.cost
        r = pl.rounds
        f = share / r
        warps = max(self.warps_per_block * share, 1e-9)
        # generic shared loads (SharedAccess.generic) also queue on the L1 path and take its latency
        lds_lat = self.generic_smem_lat_s if c.shared_load_l1_cycles else self.smem_lat_s
        lds = ()
        # MMAs that read their operands from shared memory (wgmma) read them as they run: those
        # wavefronts queue with the math, the others are the round's loads, waited for first
        operand = getattr(c, "shared_operand_wavefronts", 0.0)
        if c.shared_load_wavefronts - operand > 0 or c.shared_load_instructions:
            lds = tuple(prepared(ch[name], amount) for name, amount in (
                ("smem", (c.shared_load_wavefronts - operand) * f), ("issue", c.shared_load_instructions * f),
                ("l1", c.shared_load_l1_cycles * f)) if amount > 0)
        instr = pl.math_issue * f
        requests = [(ch["issue"], instr)]
        requests += [(ch[pipe], amount * f) for pipe, amount in pl.math.items()]
        if operand:
            requests.append((ch["smem"], operand * f))
        if c.atomic_wavefronts:
            requests.append((ch["smem"], c.atomic_wavefronts * f))
        requests = tuple(prepared(channel, amount) for channel, amount in requests if amount > 0)
        return r, lds, lds_lat, requests, instr / warps / pl.warp_ipc_per_s

    def _stores(self, pl: _Plan, k: int, first: int, count: int, share: float, tally: _Tally):
        """Issue a step's global stores (and global atomics); L2 and HBM take them posted.

        Written lines stay dirty in L2 (taking its capacity) and reach HBM when evicted: the HBM
        channel carries the share of the kernel's output that cannot stay resident. The written
        tiles are resident for later reads; a global atomic's target is read into L2 first when
        it is not resident."""
        env, ch, c = self.env, self.ch, pl.cost
        t0 = env._now
        for st, varies in zip(pl.stores, pl.store_varies, strict=True):
            # a written tile matters to the L2 only if something reads its tensor again
            if st.tile.tensor in self.read_tensors:
                self.cache.mark_many(self._tiles(st.tile, pl.index, first, count)[1], _key(varies, k), env._now)
        missed = 0.0
        for at, varies in zip(pl.atomics, pl.atomic_varies, strict=True):
            missed += self._touch(at.tile, pl.index, first, count, _key(varies, k))
            # the blocks of the group aiming at one target serialise there with all the others
            lanes = sum(w.active_lanes for w in at.instructions) * at.repeat * share
            for _, blocks in self._projections(at.tile, pl.index, first, count):
                if blocks > 1 or at.tile.index_names() <= {pl.index}:
                    ch["atomic"].request(t0, lanes * blocks)
                    tally.v["atomic"] += lanes * blocks
        if missed:
            ch["hbm"].request(t0, missed)
            tally.v["hbm"] += missed
            tally.v["hbm_read"] += missed
        wr_bytes = c.store_l2_bytes * count * share
        written = c.store_useful_bytes * count * share
        wr_hbm = written * self.writeback_share
        if written:
            self.cache.write(written, env._now)
            self.writes.append((self.cache.clock(env._now), written))
        done = max(ch["issue"].request(t0, c.store_instructions * share),
                   ch["l1"].request(t0, c.store_l1_cycles * share))
        ch["l2"].request(t0, wr_bytes)  # posted: the block does not wait for them
        ch["hbm"].request(t0, wr_hbm)
        self._flushed_writeback(t0, 0.0, written, tally)
        v = tally.v
        v["issue"] += c.store_instructions * share
        v["l1"] += c.store_l1_cycles * share
        v["l2"] += wr_bytes
        v["l2_store"] += wr_bytes
        v["hbm"] += wr_hbm
        v["hbm_write"] += written  # adjusted for what is still resident at the end, in run()
        if done > env._now and (wait := _wait(env, done - env._now)) is not None:
            yield wait

    def _issue_through(self, pl: _Plan, slot: int, lane: _Lane, first: int, count: int, share: float, lead: bool,
                       tally: _Tally, upto: int, delay_s: float) -> None:
        """Issue the warp group's loads of its next steps up to step ``upto`` (excluded), each ready
        ``delay_s`` after its data lands (a ring's refill waits for its consumers' release)."""
        while lane.issued < upto:
            ready = self._issue_loads(pl, lane.issued, first, count, share, lane if lead else None, tally,
                                      lane.l1) + delay_s
            lane.pending.append(ready)
            if pl.release_hbm_extra_s:  # kept beside pending only where a release reads it (_steps)
                lane.miss_share.append(self.miss_share if lead else 0.0)
            if self.want_timeline:
                self._record_loads(pl, slot, lane, ready)
            lane.issued += 1

    def _steps(self, pl: _Plan, slot: int, lane: _Lane, first: int, count: int, share: float, lead: bool,
               start: int, steps: int, tally: _Tally):
        """One warp group runs steps ``start .. start+steps-1`` of a phase (a simpy process)."""
        env = self.env
        n = pl.trips
        depth = pl.depth
        # before a step waits for its data: its own loads, and (at the start of the loop) the ring's first
        # ``depth - 1`` steps'; after the wait: the step ``depth - 1`` ahead, whose slot the wait frees
        before = max(1, depth - 1)
        for i in range(start, start + steps):
            if lane.issued < min(n, i + before):
                self._issue_through(pl, slot, lane, first, count, share, lead, tally, min(n, i + before), 0.0)
            ready = lane.pending.popleft()
            if pl.release_hbm_extra_s:
                lane.miss_share.popleft()
            t0 = env._now
            if ready > t0 and (wait := _wait(env, ready - t0)) is not None:
                yield wait
            t1 = env._now
            # the release waits longer for the copies in flight the L2 missed (_Plan.release_hbm_extra_s)
            extra = (pl.release_hbm_extra_s * sum(lane.miss_share) / len(lane.miss_share)
                     if pl.release_hbm_extra_s and lane.miss_share else 0.0)
            if lane.issued < min(n, i + depth):
                self._issue_through(pl, slot, lane, first, count, share, lead, tally, min(n, i + depth),
                                    pl.refill_delay_s + extra)
            parts = yield from self._compute(pl, i, first, count, share, tally, extra)
            if pl.release_hold and lane.pending:
                # the step's release (at its end) waits for copies issued before it (later steps' stages):
                # the last of them, or the oldest still in flight
                if pl.release_hold == "last":
                    landed = max(lane.pending)
                else:
                    landed = min((t for t in lane.pending if t > env._now), default=0.0)
                if landed > env._now and (wait := _wait(env, landed - env._now)) is not None:
                    t2 = env._now
                    yield wait
                    if self.want_timeline:
                        parts = (*parts, ("release", env._now - t2))
            if self.want_timeline:
                self._record(slot, "load_wait", t0, t1, pl.phase.name, warp_group=lane.group)
                self._record(slot, "compute", t1, env._now, pl.phase.name, warp_group=lane.group, parts=parts)
            self.events += 1

    def _hold(self, slot: int, per: _Tally, period_s: float, times: int, tally: _Tally, ranges=(),
              interruptible: bool = False, phase: str = "", l1_ranges=(), until=None, still=(), l1_still=()):
        """Stand in for ``times`` repetitions of a settled phase of length ``period_s``.

        The phase's channel demand is reserved for its duration, its missed bytes stream into the
        L2 (and its L1 misses into the SM's L1) over it, and the tiles it touches (``ranges``,
        ``l1_ranges``: (prefix, k0, k1)) are recorded as touched one per period, so that groups
        running meanwhile find them resident. The tiles it touches at every step (``still``,
        ``l1_still``: prefixes of tiles that do not name the loop index, k-step 0) count as touched
        throughout the hold and last at its end. An
        ``interruptible`` hold ends early when the set of slots in a k-loop changes (the
        contention it was measured under is gone); it returns how many repetitions it stood for.
        ``until``, an event that fires ``period_s * times`` from now, ends it instead of a timeout
        of its own (holds that end together at one event end at the same instant).
        """
        env = self.env
        t0 = env._now
        if per.v["hbm_flushed_writeback"]:
            # the window's write-back of earlier dirty lines is no part of the steady rate: what the
            # held repetitions push out (at most what is left) is queued once, at the start
            own = _Tally()
            own.add(per)
            own.v["hbm"] -= own.v["hbm_flushed_writeback"]
            own.v["hbm_flushed_writeback"] = 0.0
            per = own
        self._flushed_writeback(t0, per.v["hbm_read"] * times, per.v["hbm_write"] * times, tally)
        rates = {c: per.v[c] / period_s for c in CHANNELS if per.v[c] > 0 and c not in POSTED}
        for c, r in rates.items():
            self.ch[c].reserve(r)
        for c in POSTED:  # work nobody waits for queues up at once (a hold cut short overstates it)
            if per.v[c] > 0:
                self.ch[c].request(t0, per.v[c] * times)
        stream = (per.v["hbm_read"] + per.v["hbm_write"]) / period_s
        self.cache.start_stream(stream, t0)
        marks = [self.cache.touch_range(prefix, k0, k1, t0, period_s) for prefix, k0, k1 in ranges]
        # a tile touched every step: k-step 0 "touched" once, at the hold's end (until then, now)
        still_marks = [self.cache.touch_range(prefix, 0, 1, t0, period_s * times) for prefix in still]
        l1_stream = per.v["l1_fill"] / period_s if self.l1 is not None else 0.0
        if self.l1 is not None:  # the representative SM's L1 keeps filling over the held steps
            self.l1.start_stream(l1_stream, t0)
            marks += [self.l1.touch_range(prefix, k0, k1, t0, period_s) for prefix, k0, k1 in l1_ranges]
            still_marks += [self.l1.touch_range(prefix, 0, 1, t0, period_s * times) for prefix in l1_still]
        end = _timeout(env, period_s * times) if until is None else until
        if interruptible:
            yield end | self.changed
        else:
            yield end
        done = times if end.processed or env._now >= t0 + period_s * times else int((env._now - t0) / period_s)
        duration = period_s * done
        if done < times:  # cut short: the rest is stepped again
            for mark in marks:
                mark[1] = mark[0] + done
            for mark in still_marks:  # last touched at the cut hold's end
                mark[3] = period_s * done
            if env._now < t0 + duration:
                yield _timeout(env, t0 + duration - env._now)
        self.cache.stop_stream(stream, env._now)
        if self.l1 is not None:
            self.l1.stop_stream(l1_stream, env._now)
        for c, r in rates.items():
            self.ch[c].release(r, env._now - t0)
        self._record(slot, "steady", t0, env._now, phase, period_s)
        tally.add(per, done)
        self.events += 1
        return done

    def _still_tiles(self, pl: _Plan, first: int, count: int) -> tuple[dict, dict]:
        """The L2 prefixes (over the group's blocks) and L1 prefixes (the representative SM's block)
        of the tiles a step of ``pl`` touches that do not name the loop index: the same at every
        step. Loads, global atomics, and stores of tensors that are read (the L2 tracks only those)."""
        tiles = [ld.tile for ld, varies in zip(pl.loads, pl.load_varies, strict=True) if not varies]
        tiles += [at.tile for at, varies in zip(pl.atomics, pl.atomic_varies, strict=True) if not varies]
        tiles += [st.tile for st, varies in zip(pl.stores, pl.store_varies, strict=True)
                  if not varies and st.tile.tensor in self.read_tensors]
        l2: dict = {}
        for tile in tiles:
            l2.update(dict.fromkeys(self._tiles(tile, pl.index, first, count)[1]))
        l1: dict = {}
        if self.l1 is not None:
            for j, _, cacheable in pl.l1_loads:
                if cacheable and not pl.load_varies[j]:
                    l1[self._tiles(pl.loads[j].tile, pl.index, first, 1)[1][0]] = None
        return l2, l1

    def _leave_loops(self, slot: int) -> None:
        """``slot`` no longer counts among the slots in a loop (it left one, or has no more groups)."""
        if slot in self.looping:
            self.looping.discard(slot)
            self._loop_set_changed()

    def _loop_set_changed(self) -> None:
        """Wake interruptible holds: a slot entered or left a k-loop."""
        old, self.changed = self.changed, self.env.event()
        old.succeed()

    def _phase(self, pl: _Plan, slot: int, first: int, count: int, tally: _Tally):
        """One phase of a block group.

        The loop runs in windows of ``pipeline_depth + 1`` steps (every warp group finishes a
        window before the next starts). A group is *steady* once three windows take the same time
        (or once a window after the first takes the period the slot's previous group held this phase at).
        It holds the rest of its loop (but one window) once every slot in a loop is steady or
        already holding, at the period the holding slots hold at, else the steady slots' mean
        period (alike slots share the SM alike),
        or alone after FALLBACK_WINDOWS steady windows. A hold that the arrival or departure of
        another slot cuts short leaves the group stepping again until it settles anew.
        """
        env = self.env
        n = pl.trips
        window = pl.window
        share = 1.0 / pl.groups
        lanes = [_Lane(g) for g in range(pl.groups)]
        for ln in lanes[1:]:  # the lead's L1 lookups serve the group's other warp groups
            ln.l1 = lanes[0].l1
        per_step: list[float] = []
        # (tally, L2 misses, L1 misses) of the last windows
        recent: deque = deque(maxlen=max(MAX_WINDOW_CYCLE, WINDOW_SAMPLES))
        # (start, earlier dirty lines left then) of the same windows: the chip's write-back rate
        marks: deque = deque(maxlen=recent.maxlen)
        i = 0
        held = False
        steady_windows = 0
        prior = self.held_period.get((slot, id(pl)), 0.0)  # the period the slot's last group held this phase at
        if pl.in_loop:
            self.in_loop.add(slot)
            if slot not in self.looping:
                self.looping.add(slot)
                self._loop_set_changed()
        while i < n:
            w = min(window, n - i)
            t0 = env._now
            marks.append((t0, self.flushed_dirty_left))
            wt = _Tally()
            lanes[0].missed = {}  # new ones: the last windows' stay in ``recent``
            lanes[0].l1_missed = {}
            if len(lanes) == 1:
                # one warp group: its steps run in this process. The two zero timeouts stand for
                # the events a process of its own would end with (its exit, then the AllOf), so
                # that everything else at this instant runs in the same order as with one
                yield from self._steps(pl, slot, lanes[0], first, count, share, True, i, w, wt)
                for _ in range(2):
                    if env.peek() <= env._now:  # else nothing else happens at this instant: no order to keep
                        yield _timeout(env, 0)
            elif env.peek() > env._now:  # as in _compute
                yield from self._together(self._steps(pl, slot, lanes[0], first, count, share, True, i, w, wt),
                                          [self._steps(pl, slot, ln, first, count, share, False, i, w, wt)
                                           for ln in lanes[1:]])
            else:
                yield _AllDone(env, [_process(env, self._steps(pl, slot, ln, first, count, share, g == 0, i, w, wt))
                                        for g, ln in enumerate(lanes)])
            tally.add(wt)
            per_step.append((env._now - t0) / w)
            recent.append((wt, lanes[0].missed, lanes[0].l1_missed))
            i += w
            if self.on_progress is not None:
                self._progress(w * count)
            if held:
                continue
            cycle = _window_cycle(per_step, self.tol) if w == window else 0
            if not cycle and w == window:
                cycle = _window_mean(per_step, self.tol)
            if not cycle and w == window:  # the period the slot's previous group held this phase at, again
                cycle = _repeats_prior(per_step, prior, self.tol)
            steady = cycle > 0
            a = per_step[-1] if cycle <= 1 else sum(per_step[-cycle:]) / cycle
            left = n - i - window
            if not steady or left <= 0:
                self.steady.pop(slot, None)
                steady_windows = 0
                continue
            steady_windows += 1
            self.steady[slot] = a
            together = all(s in self.steady or s in self.holding or s in self.group_holding for s in self.looping)
            if together or steady_windows >= FALLBACK_WINDOWS:
                n_hold = left
                if together:
                    # alike slots share the SM alike: join the period the holding ones hold at
                    # (measured while they stepped side by side; a slot stepping among holders is
                    # served worse than they are), else the steady ones' mean period
                    periods = [self.holding[s] for s in self.looping if s in self.holding]
                    a = sum(periods) / len(periods) if periods else sum(self.steady.values()) / len(self.steady)
            else:
                n_hold = 0
            per = _Tally()
            if n_hold > 0:
                cycled = list(recent)[-cycle:]
                for wt_j, _, _ in cycled:  # the mean step over the cycle's windows
                    per.add(wt_j, 1.0 / (w * cycle))
                wb = per.v["hbm_flushed_writeback"]
                whole = n_hold
                if wb > 0:
                    # a period measured while the earlier work's dirty lines were written back (by
                    # every slot: the chip's rate over the cycle's windows) holds only while they
                    # last at that rate: then the group steps again and settles anew without them;
                    # with none left, it steps on
                    since, before = marks[-cycle]
                    span = env._now - since
                    rate = (before - self.flushed_dirty_left) / span if span > 0 else 0.0
                    if rate > 0:
                        n_hold = min(n_hold, int(self.flushed_dirty_left / (rate * a)))
                    if n_hold < 1 or self.flushed_dirty_left <= 0:
                        per_step.clear()
                        self.steady.pop(slot, None)
                        steady_windows = 0
                        continue
                # the held steps bring in only the tiles this group was fetching itself (in the
                # cycle's windows); tiles it found resident are someone else's to bring in
                missed = dict.fromkeys(p for _, m, _ in cycled for p in m)
                l1_missed = dict.fromkeys(p for _, _, m in cycled for p in m)
                # tiles that do not name the loop index are touched at every held step, found
                # resident or not
                still, l1_still = self._still_tiles(pl, first, count)
                ranges = [(prefix, i, i + n_hold) for prefix in missed if prefix not in still]
                l1_ranges = [(prefix, i, i + n_hold) for prefix in l1_missed if prefix not in l1_still]
                self.steady.pop(slot, None)
                self.holding[slot] = a
                self.held_period[(slot, id(pl))] = a
                done = yield from self._hold(slot, per, a, n_hold, tally, ranges, interruptible=True,
                                             phase=pl.phase.name, l1_ranges=l1_ranges, still=still,
                                             l1_still=l1_still)
                self.holding.pop(slot, None)
                i += done
                if self.on_progress is not None:
                    self._progress(done * count)
                for ln in lanes:
                    ln.issued += done
                held = done == n_hold == whole
                per_step.clear()
                steady_windows = 0
        if pl.in_loop:
            self.in_loop.discard(slot)
            # a slot that will be back with its next group's loop (blocks remain) stays counted
            if not (pl is self.plans[self.last_loop_phase] and self.next_block < self.p.launch.blocks):
                self._leave_loops(slot)
        self.steady.pop(slot, None)

    def _slot(self, slot: int):
        """One resident-block slot of every SM: takes block groups until the grid is done."""
        env = self.env
        total = self.p.launch.blocks
        sms = self.hw.sm_count
        slots = self.occ.blocks_per_sm
        groups = 0  # this slot's groups so far
        while self.next_block < total:
            count = self._next_group_size(total - self.next_block)
            first = self.next_block
            self.next_block += count
            t0 = env._now
            admitted = self.ch["dispatch"].request(t0, 1.0)  # the SM takes the block in
            if admitted > t0 and (wait := _wait(env, admitted - t0)) is not None:
                yield wait
            # the block group (``count`` blocks, one per SM, from ``first`` in launch order) runs
            # through every phase in turn in this process (one generator less for every event to
            # pass through); the zero timeout stands for its own process's exit
            tally = _Tally()
            for pl in self.plans:
                yield from self._phase(pl, slot, first, count, tally)
            if env.peek() <= env._now:
                yield _timeout(env, 0)
            tally.v["dispatch"] += 1.0
            self._scale_and_add(tally, count)
            if groups == 0:
                self.first_groups_done += 1
            groups += 1
            if count != sms or self.first_groups_done < slots or self.group_tol < 0:
                continue
            if self.group_end is not None and self.group_end.processed and self.group_end_writeback:
                # the holds ended as the earlier work's dirty lines ran out: settle anew without them
                self.group_end, self.group_period_s, self.group_end_writeback = None, 0.0, False
                self.group_ends.clear()
            if not self.group_period_s and not self._groups_settled(env._now, slots):
                continue
            if self.group_end is None:
                # the first hold: every slot holds until one common end, a whole number of group
                # times from now that leaves each slot about a last group to step
                hold_groups = (total - self.next_block) // sms // slots - 1
                if self.flushed_last_s >= self.group_window_start_s:
                    # a group time measured while the earlier work's dirty lines were written back
                    # holds only while they last (every slot writing back as this one did); then, or
                    # if they are gone, the groups settle anew on completions after the last of them
                    wb = tally.v["hbm_flushed_writeback"]
                    lasting = int(self.flushed_dirty_left / (wb * slots)) if wb > 0 else 0
                    if lasting < hold_groups:
                        hold_groups, self.group_end_writeback = lasting, True
                if hold_groups < MIN_GROUP_HOLD:
                    if self.group_end_writeback:
                        self.group_period_s, self.group_end_writeback = 0.0, False
                        while self.group_ends and self.group_ends[0] <= self.flushed_last_s:
                            self.group_ends.popleft()
                    continue
                self.group_end_s = env._now + hold_groups * self.group_period_s
                self.group_end = _timeout(env, hold_groups * self.group_period_s)
            span_s = self.group_end_s - env._now
            j = min(max(1, round(span_s / self.group_period_s)), (total - self.next_block) // sms - 1)
            if span_s > 0 and j >= 1 and not self.group_end.processed:
                # the j groups fill the time to the common end (a slot in another phase than the
                # first holder's stretches or squeezes them by up to half a group), so that all holds
                # end at one instant; each releases its channels before any steps again (the zero
                # timeout), else the first to step would queue behind the others' reservations
                self.next_block += j * sms
                per = _Tally()
                per.add(tally)
                hold = _Tally()
                self.group_holding.add(slot)
                yield from self._hold(slot, per, span_s / j, j, hold, until=self.group_end)
                self.group_holding.discard(slot)
                yield _timeout(env, 0)
                if self.on_progress is not None:
                    self._progress(j * sms * sum(pl.trips for pl in self.plans))
                self._scale_and_add(hold, count)
        self._leave_loops(slot)  # no more groups

    def _groups_settled(self, now_s: float, slots: int) -> bool:
        """Note a full group's completion; True (``group_period_s`` set) once the completions, from
        the end of the last slot's first group on, come at a steady rate.

        For the smallest ``c`` (rounds of ``slots`` completions) up to MAX_GROUP_CYCLE, the runs of
        ``c`` rounds ending at each of the last ``w = max(c * slots, GROUP_SAMPLES)`` completions
        are looked at: settled when the runs of the first and second half of those ``w`` took on
        average the same time within ``group_tol`` (no ramp) and, for ``c`` under
        GROUP_AVERAGE_ROUNDS, at least GROUP_STEADY_SHARE of the runs lie within ``group_tol`` of
        their median (a steady rate, or a cycle of ``c`` rounds: then every run takes the same time;
        a lone late group does not count against it). A slot's group time is then the runs' mean
        over ``c``."""
        ends = self.group_ends
        ends.append(now_s)
        n = len(ends)
        tol = self.group_tol
        for c in range(1, MAX_GROUP_CYCLE + 1):
            span = c * slots  # completions in a run
            w = max(span, GROUP_SAMPLES)
            if n < w + span + 1:
                break
            runs = [ends[i] - ends[i - span] for i in range(n - w, n)]
            half = w // 2
            first, second = sum(runs[:half]) / half, sum(runs[w - half:]) / half
            if not (first > 0 and abs(second - first) <= tol * first):
                continue
            mid = sorted(runs)[w // 2]
            if c >= GROUP_AVERAGE_ROUNDS or sum(abs(r - mid) <= tol * mid for r in runs) >= GROUP_STEADY_SHARE * w:
                self.group_period_s = sum(runs) / w / c
                self.group_window_start_s = ends[n - w - span]
                return True
        cycle = _completion_cycle(ends, slots, tol)
        if cycle:
            self.group_period_s = (ends[-1] - ends[-1 - cycle]) / cycle * slots
            w = max(cycle, GROUP_CYCLE_ROUNDS * slots, GROUP_SAMPLES) + 1
            self.group_window_start_s = ends[n - w - cycle]
            return True
        return False

    def _next_group_size(self, remaining: int) -> int:
        """Blocks (one per SM) the next group of a freed slot takes.

        At launch blocks spread over the SMs. A last partial wave lands on the slots as they free:
        it spreads over fewer SMs, between one block per SM and all slots of as few SMs as
        possible, as the hardware's measured ``tail_packing`` says, with the same number of blocks
        on each SM it lands on (as the probe sees): its groups are equal, and as many as the blocks
        per SM, rounded.
        """
        sms, slots = self.hw.sm_count, self.occ.blocks_per_sm
        if self.env._now == 0 or remaining >= sms * slots:
            return min(sms, remaining)
        if self.tail_sms is None:
            widest, narrowest = min(sms, remaining), -(-remaining // slots)
            # ASSUMPTION for GPUs without the dispatch probe (no tail_packing_by_slots, e.g. Apple's):
            # packing 0.0, a last partial wave spread one block per SM
            packing = self.hw.tail_packing(slots) if self.hw.has("tail_packing_by_slots") else 0.0
            landed = max(1, round(widest - packing * (widest - narrowest)))
            per_sm = max(1, round(remaining / landed))
            while -(-remaining // per_sm) > sms:
                per_sm += 1
            self.tail_sms = -(-remaining // per_sm)
        return min(self.tail_sms, remaining)

    def _scale_and_add(self, tally: _Tally, count: int) -> None:
        """Add a group's tally to the kernel totals: per-SM counters times the blocks it stands for."""
        for k, x in tally.v.items():
            self.total.v[k] += x * count if k in PER_SM_COUNTERS else x

    def run(self) -> SimResult:
        for s in range(self.occ.blocks_per_sm):
            _process(self.env, self._slot(s))
        with _fewer_collections():
            _run(self.env)
        hw, p, v = self.hw, self.p, self.total.v
        # no channel can have done more work than its rate allows in the time: held phases reserve
        # their measured rates, which together may overcommit a channel (the work is still done)
        end = max([self.env._now] + [self.ch[c].next_free_s for c in ("l2", "hbm", "atomic")]
                  + [ch.busy_s for ch in self.ch.values()])
        time_s = end + hw.launch_overhead_s
        util = {c: round(self.ch[c].utilization(end), 6) for c in CHANNELS}
        top = max(util, key=util.get)
        bound = top if util[top] >= 0.6 else "latency"
        l2_load = v["l2_load"]
        end_clock = self.cache.clock(self.env._now)
        # written lines still in L2 at the end: those with fewer than l2_dirty_bytes brought in since;
        # and, since the L2 keeps no more than l2_dirty_bytes in all once written lines are among it
        # (validation/l2_probe.py) while the byte clock does not count hits, at least the kernel's
        # compulsory bytes beyond that reach HBM as written-back output
        resident = sum(b for c, b in self.writes if end_clock - c + b <= self.dirty_bytes)
        floor = min(v["hbm_write"], max(0.0, p.min_hbm_bytes - self.dirty_bytes))
        traffic = Traffic(
            hbm_read_bytes=v["hbm_read"], hbm_write_bytes=max(v["hbm_write"] - resident, floor),
            l2_load_bytes=l2_load, l2_store_bytes=v["l2_store"],
            l2_hit_rate=(1.0 - v["hbm_read"] / l2_load) if l2_load else 0.0,
            l1_wavefronts=v["l1"], smem_bytes=v["smem_bytes"], smem_wavefronts=v["smem"],
            smem_conflict_wavefronts=max(0.0, v["smem"] - v["smem_ideal"]),
            register_operand_bytes=v["ffma"] * hw.warp_size * 3 * 4,
            instructions=v["issue"], ffma=v["ffma"], hbm_flushed_writeback_bytes=v["hbm_flushed_writeback"],
        )
        wv = waves_of(p.launch.blocks, self.occ.blocks_per_sm, hw.sm_count)
        # the roofline of what was executed: its FLOPs, and the bytes the HBM carried during the
        # kernel at the rate of its read/write mix (output the L2 writes back later is not in it)
        # (tensor-core FLOPs at the rates of the instructions that did them)
        tensor_flops = sum(pl.cost.tensor_flops * pl.trips for pl in self.plans) * p.launch.blocks
        tensor_s = v["tensor"] / (hw.sm_count * hw.sm_clock_hz)
        bound_s = roofline_time_s(max(0.0, p.flops - tensor_flops), self.ch["hbm"].amount, hw,
                                  hbm_bytes_per_s=self.ch["hbm"].rate_per_s,
                                  tensor_flops=tensor_flops if tensor_s > 0 else None,
                                  tensor_flops_per_s=tensor_flops / tensor_s if tensor_s > 0 else None).time_s
        return SimResult(
            kernel=p.name, hardware=hw.name, time_s=time_s, bound=bound, utilization=util,
            traffic=traffic, flops=p.flops, blocks=p.launch.blocks,
            blocks_per_sm=self.occ.blocks_per_sm, occupancy=self.occ.occupancy,
            occupancy_limiter=self.occ.limiter, waves=wv.waves, roofline_s=bound_s,
            events=self.events, sm_clock_hz=hw.sm_clock_hz, timeline=tuple(self.timeline) if self.want_timeline else None,
            loads=tuple(self.loads) if self.want_timeline else None,
        )


def _key(varies: bool, k: int) -> int:
    """The k-step the caches know a tile by at step ``k``: ``k`` when the tile's coordinates name
    the loop index (``varies``), else 0: the same data at every step is one tile, not one a step."""
    return k if varies else 0


def simulate_program(program: TileProgram, hw: HardwareSpec, *, timeline: bool = False,
                     steady_state: bool = True, on_progress=None,
                     flushed_dirty_bytes: float | None = None) -> SimResult:
    """Run the discrete-event model of ``program`` on ``hw``.

    ``steady_state=False`` simulates every k-step of every block group instead of holding settled
    phases: the reference the fast path approximates, tens of times slower. ``on_progress(fraction)``,
    when given, is called as the block steps are simulated (a rerun at a settled SM clock, see
    :func:`_settle_clock`, starts again from 0). ``flushed_dirty_bytes``: dirty lines of earlier work
    in the L2 at the start (None: the state the validation harness's L2 flush leaves, as measured,
    see :meth:`Engine._flushed_writeback_setup`; 0: a clean L2).
    """
    check_program(program, hw)
    # the engines are freed (their tables with them) before the collector's usual threshold is back:
    # a collection at that threshold would otherwise walk all they still hold (_fewer_collections)
    with _fewer_collections():
        result = _settle_clock(program, hw, timeline=timeline, steady_state=steady_state,
                               on_progress=on_progress, flushed_dirty_bytes=flushed_dirty_bytes)
    check_not_faster_than_roofline(result)
    return result


def _settle_clock(program: TileProgram, hw: HardwareSpec, **run) -> SimResult:
    """Run the engine at the SM clock the GPU holds under the kernel's tensor load.

    Under sustained tensor-core work the H200 lowers its SM clock (power limiting: 1.98 GHz with FFMA,
    1.81 GHz with mma.sync at its full rate, 1.53 GHz with wgmma at its full rate on random operands;
    validation/calibration/clock_load_probe.py), and lower still beside memory traffic (wgmma on random
    operands: 1.547 GHz alone, 1.513 beside 4.6 TB/s of L2 reads, 1.498 beside 3.8 TB/s of HBM reads at
    a tensor activity of 0.85: the measured slopes, HardwareSpec.sm_clock_hz_at_tensor_activity). The
    kernel's tensor activity (its tensor FLOP per clock per SM over the fp16 dense rate) and its L2 and
    HBM bytes per second depend on the clock it runs at, so the clock is a fixed point: a run at a clock
    gives the clock its load settles at, and the run is kept when that is within CLOCK_TOLERANCE of the
    clock it ran at. The first run is at :func:`_clock_guess` (no run: the tune module's floors of the
    program's channels), the second at the clock the first settled at, the next ones at the secant's
    zero of (settled - clock) through the last two runs. A tf32 FLOP counts as
    HardwareSpec.tensor_clock_weight fp16 FLOPs (measured: tf32 at full rate holds the clock of fp16
    work at 1.7-1.9 times its FLOP rate). Kernels without MMAs, and GPUs without the measured curve,
    run once at ``sm_clock_hz`` (an L2 stream alone costs the clock 2%, not applied: it would take a
    second run of every kernel)."""
    tensor_flops = program.launch.blocks * sum(op.flops * ph.trips * hw.tensor_clock_weight(op.shape, op.dtype)
                                               for ph in program.phases for op in ph.step.compute
                                               if isinstance(op, Mma))
    if not tensor_flops or not hw.has("sm_clock_hz_by_tensor_activity"):
        return Engine(program, hw, **run).run()
    peak = hw.tensor_peak_flops_per_clk() * hw.sm_count
    tma_share = _bulk_load_share(program)
    clock = _clock_guess(program, hw, tensor_flops / peak, tma_share)
    result = Engine(program, with_overrides(hw, sm_clock_hz=clock), **run).run()
    last = None  # (clock, settled - clock) of the run before
    for _ in range(CLOCK_ITERATIONS):
        busy_s = max(result.time_s - hw.launch_overhead_s, 1e-12)
        activity = tensor_flops / (busy_s * clock * peak)
        tr = result.traffic
        settled = hw.sm_clock_hz_at_tensor_activity(
            activity, l2_bytes_per_s=((1.0 - tma_share) * tr.l2_load_bytes + tr.l2_store_bytes) / busy_s,
            l2_tma_bytes_per_s=tma_share * tr.l2_load_bytes / busy_s,
            hbm_bytes_per_s=(tr.hbm_read_bytes + tr.hbm_write_bytes + tr.hbm_flushed_writeback_bytes) / busy_s)
        if abs(settled - clock) <= CLOCK_TOLERANCE * clock:
            break
        step = settled - clock
        nxt = settled
        if last is not None and step != last[1]:
            secant = clock - step * (clock - last[0]) / (step - last[1])
            if 0.5 * hw.sm_clock_hz < secant <= hw.sm_clock_hz:
                nxt = secant
        last = (clock, step)
        clock = nxt
        result = Engine(program, with_overrides(hw, sm_clock_hz=clock), **run).run()
    return result
