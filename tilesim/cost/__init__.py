"""The per-vendor cost model: what a tile program's steps ask of each resource of a GPU.

:func:`step_cost` dispatches on ``hw.vendor`` to the vendor's rules (sectors, cache-line cycles,
bank wavefronts, staging, critical path). The engine calls it once per phase of a program; a new
vendor is a module here and an entry in :data:`RULES`.
"""

from __future__ import annotations

from tilesim.cost import apple, nvidia
from tilesim.cost.nvidia import StepCost

#: vendor -> step-cost function (:mod:`tilesim.cost.nvidia`, :mod:`tilesim.cost.apple`).
RULES = {"nvidia": nvidia.step_cost, "apple": apple.step_cost}


def step_cost(step, hw, warps_per_block: int) -> StepCost:
    """The per-block cost of one step of a phase on ``hw``, for blocks of ``warps_per_block`` warps."""
    rule = RULES.get(hw.vendor)
    if rule is None:
        raise ValueError(f"hardware {hw.name!r}: no cost rules for vendor {hw.vendor!r}; known: {', '.join(RULES)}")
    return rule(step, hw, warps_per_block)


__all__ = ["RULES", "StepCost", "step_cost"]
