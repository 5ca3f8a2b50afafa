"""The SM clock a kernel's run starts from: what the program's floors say it settles at under its tensor
load (the engine's :func:`~tilesim.engine.sim._settle_clock` then runs it to the clock its run settles at)."""

from __future__ import annotations

from tilesim.engine.floors import PER_SM_TERMS, program_terms
from tilesim.hardware import HardwareSpec
from tilesim.program import TileProgram


def _access_bytes(access) -> float:
    """Bytes a block's GlobalLoad or GlobalStore moves in one step: lanes x width x repeat."""
    return access.repeat * sum(w.width_bytes * sum(1 for o in w.offsets if o is not None)
                               for w in access.instructions)


def _bulk_load_share(program: TileProgram) -> float:
    """The share of the program's global load bytes (lanes x width x repeat x trips, over its phases)
    that the TMA brings (``GlobalLoad.dest == "bulk"``): those L2 reads cost the clock at the TMA's
    measured slope, not the load units'."""
    bulk = total = 0.0
    for ph in program.phases:
        for ld in ph.step.loads:
            nbytes = ph.trips * _access_bytes(ld)
            total += nbytes
            if ld.dest == "bulk":
                bulk += nbytes
    return bulk / total if total else 0.0


CLOCK_ITERATIONS = 4  # runs at most to settle the SM clock under tensor load (each a full simulation)
CLOCK_TOLERANCE = 0.005  # a clock within 0.5% of the last run's is settled


def _clock_guess(program: TileProgram, hw: HardwareSpec, tensor_clocks: float, tma_share: float) -> float:
    """A first SM clock for :func:`_settle_clock`, without a run: the fixed point of the same measured
    curve and slopes fed with a busy time from the program's floors (:func:`tilesim.engine.floors.program_terms`:
    the per-SM channels' and the critical path's clocks at the clock tried, the L2, HBM and FP32 floors
    in seconds), L2 reads of every global load byte (the TMA's share at its slope) and stores, and HBM
    bytes of the compulsory traffic. ``tensor_clocks``: the tensor FLOPs (tf32 weighted) over the
    chip's fp16 dense FLOPs per clock. Only where the search starts: the clock kept is a run's."""
    terms = program_terms(program, hw)
    top = hw.sm_clock_hz
    clocks = top * max(v for k, v in terms.items() if k in PER_SM_TERMS or k == "latency")
    floor_s = max((v for k, v in terms.items() if k in ("l2", "hbm", "fp32")), default=0.0)
    load = store = 0.0
    for ph in program.phases:
        load += ph.trips * sum(_access_bytes(ld) for ld in ph.step.loads)
        store += ph.trips * sum(_access_bytes(st) for st in ph.step.stores)
    load *= program.launch.blocks
    store *= program.launch.blocks
    hbm = float(program.min_hbm_bytes)
    clock = top
    for _ in range(8):
        busy_s = max(clocks / clock, floor_s, 1e-12)
        nxt = hw.sm_clock_hz_at_tensor_activity(
            min(1.0, tensor_clocks / (busy_s * clock)), l2_bytes_per_s=((1.0 - tma_share) * load + store) / busy_s,
            l2_tma_bytes_per_s=tma_share * load / busy_s, hbm_bytes_per_s=hbm / busy_s)
        if abs(nxt - clock) <= 1e-4 * clock:
            return min(nxt, top)
        clock = nxt
    return min(clock, top)
