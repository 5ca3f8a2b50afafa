"""Apple's cost rules: what one step of a tile program asks of each resource of an Apple GPU core.

Same inputs and output as :func:`tilesim.cost.nvidia.step_cost` (a :class:`~tilesim.cost.nvidia.StepCost`
per block and step), derived from the lane offsets of the step's SIMD-group instructions (32 lanes:
Apple's SIMD width, every Apple GPU family) and a :class:`~tilesim.hardware.HardwareSpec`.

What is sourced, and what is a stated assumption (Apple publishes no memory-pipeline details; the
microbenchmarks found cover the M1 generation):

* **Device-memory lines.** Global loads and stores are counted in cache lines of
  ``levels.l1.line_bytes`` (128 B on the M1 Max: metal-benchmarks; :data:`LINE_BYTES` where a GPU's
  file does not give it, *assumed* unchanged since). What a block's step asks of the system-level
  cache is its distinct lines (the L1 merges repeated lines within a step, as on NVIDIA); stores
  send each instruction's lines.
* **The core's memory port.** A GPU core moves :data:`CORE_IO_BYTES_PER_CLK` bytes per clock to and
  from the memory system (metal-benchmarks: "its I/O bus width is the same (32 bytes)" as a CPU
  core's, "32 bytes/cycle of L2 bandwidth"). A load or store instruction holds the "l1" channel (one
  unit per clock) for its lines' bytes at that width. L1 hits are not told apart (no L1 model: 8 KB).
* **Threadgroup memory.** No bank count or width of Apple's threadgroup memory is published, so no
  bank conflicts are modelled: *assumption*, an access moves :data:`TG_BYTES_PER_CLK` bytes per
  clock (one 4-byte word per lane of a SIMD-group), i.e. ``ceil(active bytes / 128)`` passes
  ("wavefronts") per instruction, at least one.
* **simdgroup_matrix.** ``Mma`` instructions cost ``flops / hw.mma_flops_per_clk(shape, dtype)``
  cycles of the "tensor" channel (on Apple: the FP32/FP16 ALUs running the 8x8 multiply-accumulate,
  at the rate metal-benchmarks measured); a dtype the GPU has no rate for raises naming it.
* **Barriers** are one instruction per SIMD-group. Their latency is the GPU's ``pipes.barrier``
  latency where its file gives one, else one threadgroup-memory latency (the NVIDIA rule's
  fallback), else nothing (a GPU whose file sources no such latency gets none added: stated, not
  guessed).
* **Critical path** of one SIMD-group through a step: the threadgroup-memory latency when the step
  reads threadgroup memory, the barriers' latency, ``chain`` dependent round trips of each global
  load to the level its data comes from (the L1 latency where given, else the system-level cache's),
  and ``chain`` times each dependent operation's pipe latency; a latency the GPU's file does not
  give counts as zero (and the engine, which needs the memory latencies itself, names it).
* Warp shuffles (``simd_shuffle``) go to the "shuffle" pipe at its rate (metal-benchmarks), not to
  the threadgroup-memory pipe as on NVIDIA.
"""

from __future__ import annotations

from tilesim.cost.access import useful_bytes
from tilesim.cost.nvidia import StepCost
from tilesim.program import Compute, Mma, Shuffle, Step, WarpAccess

LINE_BYTES = 128
"""Device-memory cache line (metal-benchmarks, M1 Max: 128-byte lines), used when a GPU's file has no
``levels.l1.line_bytes`` (an assumption for later generations)."""

CORE_IO_BYTES_PER_CLK = 32
"""Bytes per clock between one GPU core and the memory system (metal-benchmarks overview: the GPU
core's I/O bus is 32 bytes wide, "32 bytes/cycle of L2 bandwidth"; measured on the M1 generation)."""

TG_BYTES_PER_CLK = 128
"""Threadgroup-memory bytes per clock per core: an assumption (one 4-byte word for each of 32 lanes),
not a published figure; no bank conflicts are modelled."""


def _line_bytes(hw) -> int:
    return int(hw.get("levels.l1.line_bytes")) if hw.has("levels.l1.line_bytes") else LINE_BYTES


def _latency(hw, key: str) -> float:
    """A latency field of ``hw``, 0 when the GPU's file does not source it (see the module docstring)."""
    return float(hw.get(key)) if hw.has(key) else 0.0


def _lines(w: WarpAccess, line: int) -> set[int]:
    return {(a + off) // line for a in w.offsets if a is not None for off in range(0, max(w.width_bytes, 4), 4)}


def _tg_passes(w: WarpAccess) -> int:
    """Threadgroup-memory passes of one SIMD-group access (at least one, predicated-off included)."""
    return max(1, -(-(w.active_lanes * w.width_bytes) // TG_BYTES_PER_CLK))


def _tg_pieces(w: WarpAccess) -> list[WarpAccess]:
    """The threadgroup stores of a register-staged load: one per 4-byte piece of a scattered lane."""
    shared = w.shared_offsets
    if shared is not None and any(isinstance(s, tuple) for s in shared):
        n = max(len(s) for s in shared if isinstance(s, tuple))
        return [WarpAccess(tuple(None if s is None else s[q] for s in shared), w.width_bytes // n)
                for q in range(n)]
    return [WarpAccess(tuple(shared), w.width_bytes)] if shared is not None else []


def step_cost(step: Step, hw, warps_per_block: int) -> StepCost:
    """What one block's step costs on an Apple GPU (see the module docstring)."""
    c = StepCost()
    line = _line_bytes(hw)
    io_clk = line / CORE_IO_BYTES_PER_CLK  # port clocks per line
    mem_latency = _latency(hw, "l1_latency_cycles") or _latency(hw, "l2_latency_cycles")
    smem_latency = _latency(hw, "smem_latency_cycles")
    crit = 0.0
    for ld in step.loads:
        if ld.dest == "bulk":
            raise ValueError(f"GlobalLoad({ld.tile.tensor}).dest = 'bulk': {hw.name} has no bulk tensor copy "
                             "engine (TMA is NVIDIA Hopper's)")
        r = ld.repeat
        lines: set[int] = set()
        for w in ld.instructions:
            wl = _lines(w, line)
            lines |= wl
            c.load_instructions += (1 + ld.address_instructions) * r  # Apple has no async copy
            c.load_l1_cycles += len(wl) * io_clk * r
            if ld.dest != "register":  # sync copy: device -> registers -> threadgroup memory
                for piece in _tg_pieces(w):
                    c.staging_instructions += r
                    c.staging_wavefronts += _tg_passes(piece) * r
                    c.staging_ideal += _tg_passes(piece) * r
        c.load_l2_bytes += len(lines) * line * r
        c.load_useful_bytes += useful_bytes(ld.instructions) * r
        if ld.dest != "register":
            c.staging_bytes += useful_bytes(ld.instructions) * r
        crit += ld.chain * mem_latency
    for acc in step.shared_stores:
        for w in acc.instructions:
            c.staging_instructions += acc.repeat
            c.staging_wavefronts += _tg_passes(w) * acc.repeat
            c.staging_ideal += _tg_passes(w) * acc.repeat
        c.staging_bytes += useful_bytes(acc.instructions) * acc.repeat
    for acc in step.shared_loads:
        if acc.generic:
            raise ValueError(f"SharedAccess.generic = True: {hw.name} has no generic pointers into threadgroup "
                             "memory (Metal's address spaces are explicit)")
        for w in acc.instructions:
            c.shared_load_instructions += acc.repeat
            c.shared_load_wavefronts += _tg_passes(w) * acc.repeat
            c.shared_load_ideal += _tg_passes(w) * acc.repeat
        c.shared_load_bytes += sum(w.active_lanes * w.width_bytes for w in acc.instructions) * acc.repeat
    if step.shared_loads:
        crit += smem_latency
    for op in step.compute:
        if isinstance(op, Mma):
            if op.operands != "registers":
                raise ValueError(f"Mma.operands = {op.operands!r}: {hw.name}'s simdgroup matrices take their "
                                 "operands from registers")
            c.tensor_flops += op.flops
            c.tensor_cycles += op.flops / hw.mma_flops_per_clk(op.shape, op.dtype)
            c.mma_instructions += op.count
            c.math_instructions += op.count
            crit += op.chain * _latency(hw, "pipes.tensor.latency_cycles")
        elif isinstance(op, Shuffle):
            c.add_pipe("shuffle", "any", op.count)
            c.math_instructions += op.count
            crit += op.chain * _latency(hw, "pipes.shuffle.latency_cycles")
        elif isinstance(op, Compute):
            if op.pipe != "issue":
                c.add_pipe(op.pipe, op.dtype, op.count)
            c.math_instructions += op.count
            crit += op.chain * _latency(hw, f"pipes.{op.pipe}.latency_cycles")
    for at in step.atomics:
        for w in at.instructions:
            if at.space == "shared":
                c.atomic_wavefronts += _tg_passes(w) * at.repeat
                c.math_instructions += at.repeat
            else:
                c.store_instructions += at.repeat
                c.store_l2_bytes += len(_lines(w, line)) * line * at.repeat
    c.barriers = float(step.barriers * warps_per_block)
    if step.barriers:
        lat = _latency(hw, "pipes.barrier.latency_cycles") or smem_latency
        crit += step.barriers * lat
    for st in step.stores:
        for w in st.instructions:
            wl = _lines(w, line)
            c.store_instructions += st.repeat
            c.store_l2_bytes += len(wl) * line * st.repeat
            c.store_l1_cycles += len(wl) * io_clk * st.repeat
        c.store_useful_bytes += useful_bytes(st.instructions) * st.repeat
    c.critical_path_cycles = crit
    return c
