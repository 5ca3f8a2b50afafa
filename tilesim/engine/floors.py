"""Floors of a tile program's time per resource, from its step costs alone (no simulation).

Used by the tuner's lower bound (:mod:`tilesim.tune`) and by the engine's first guess of the SM clock
under tensor load (:func:`tilesim.engine.clock._clock_guess`). Each term is a time no run of the program
can beat on that resource; their largest is a lower bound of the simulated time.
"""

from __future__ import annotations

import math

from tilesim.analytic.checks import check_program
from tilesim.analytic.occupancy import occupancy
from tilesim.cost import step_cost
from tilesim.hardware import HardwareSpec

PER_SM_TERMS = ("issue", "smem", "l1", "tensor", "fma", "sfu", "int", "fp64", "shuffle")


def program_terms(p, hw: HardwareSpec) -> dict[str, float]:
    """The floor of each resource for one launch of tile program ``p`` (seconds): per-SM channels
    (PER_SM_TERMS: the busiest SM's block groups over the channel's rate), ``latency`` (block rounds x
    the step's critical path), and the chip-wide ``l2``, ``hbm`` and ``fp32`` floors."""
    check_program(p, hw)
    lc = p.launch
    occ = occupancy(hw, lc.threads_per_block, lc.regs_per_thread, lc.smem_bytes_per_block)
    if occ.blocks_per_sm < 1:
        raise ValueError(f"{p.name}: no block fits on an SM of {hw.name} (limited by {occ.limiter})")
    wpb = -(-lc.threads_per_block // hw.warp_size)
    blocks = lc.blocks
    per_sm = dict.fromkeys(PER_SM_TERMS, 0.0)  # per block, in the channel's units
    crit = l2 = out = tensor_flops = 0.0
    for ph in p.phases:
        c = step_cost(ph.step, hw, wpb)
        t = ph.trips
        per_sm["issue"] += t * c.issue
        per_sm["smem"] += t * (c.staging_wavefronts + c.shared_load_wavefronts + c.atomic_wavefronts)
        per_sm["l1"] += t * (c.load_l1_cycles + c.store_l1_cycles)
        per_sm["tensor"] += t * c.tensor_cycles
        for (pipe, dtype), count in c.pipe_instructions.items():
            if count:
                rate = hw.pipe_warp_instr_per_clk(pipe, dtype,
                                                  warps=occ.active_warps_per_sm if pipe == "fma" else None)
                per_sm[pipe] = per_sm.get(pipe, 0.0) + t * count / rate
        crit += t * c.critical_path_cycles
        bypass = 0.0
        if len(c.load_l2_bytes_each) == len(ph.step.loads):
            bypass = sum(b for b, cached in zip(c.load_l2_bytes_each, c.load_l1_cacheable, strict=True) if not cached)
        l2 += t * (bypass + c.store_l2_bytes) * blocks
        out += t * c.store_useful_bytes * blocks
        tensor_flops += t * c.tensor_flops * blocks
    clk = hw.sm_clock_hz
    groups = math.ceil(blocks / hw.sm_count)  # block groups (one block per SM) each SM runs at least
    rates = {"issue": hw.issue_warp_instr_per_clk_per_sm, "smem": hw.pipe_warp_instr_per_clk("smem")}
    terms = {k: groups * v / (rates.get(k, 1.0) * clk) for k, v in per_sm.items() if v > 0}
    terms["latency"] = math.ceil(groups / occ.blocks_per_sm) * crit / clk
    if l2 > 0:
        terms["l2"] = l2 / hw.l2_bytes_per_s
    need = float(p.min_hbm_bytes)
    if need > 0:
        write_fraction = min(1.0, out / need)
        dirty = min(hw.l2_dirty_bytes, hw.l2_bytes)
        writeback = max(0.0, 1.0 - dirty / out) if out else 0.0
        hbm = max(0.0, need - out) + out * writeback
        terms["hbm"] = hbm / hw.hbm_rate_at(write_fraction)
    fp32 = max(0.0, float(p.flops) - tensor_flops)
    if fp32 > 0:
        terms["fp32"] = fp32 / hw.fp32_flops_per_s
    return terms
