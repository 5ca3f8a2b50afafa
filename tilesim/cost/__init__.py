"""The per-vendor cost model: what a tile program's steps ask of each resource of a GPU.

:func:`step_cost` dispatches on ``hw.vendor`` to the vendor's rules (sectors, cache-line cycles,
bank wavefronts, staging, critical path). The engine calls it once per phase of a program; a new
vendor is a module here and an entry in :data:`RULES`.
"""

from __future__ import annotations

from tilesim.cost import nvidia
from tilesim.cost.nvidia import StepCost

#: vendor -> step-cost function. Apple GPUs use NVIDIA's rules (32 lanes, 32 banks of 4 bytes,
#: 32-byte sectors as their spec files give them) until their own rules are written (issue #12).
RULES = {"nvidia": nvidia.step_cost, "apple": nvidia.step_cost}


def step_cost(step, hw, warps_per_block: int) -> StepCost:
    """The per-block cost of one step of a phase on ``hw``, for blocks of ``warps_per_block`` warps."""
    rule = RULES.get(hw.vendor)
    if rule is None:
        raise ValueError(f"hardware {hw.name!r}: no cost rules for vendor {hw.vendor!r}; known: {', '.join(RULES)}")
    return rule(step, hw, warps_per_block)


__all__ = ["RULES", "StepCost", "step_cost"]
