"""The per-vendor cost model: what a tile program's steps ask of each resource of a GPU.

:func:`step_cost` dispatches on ``hw.vendor`` to the vendor's rules (sectors, cache-line cycles,
bank wavefronts, staging, critical path). The engine calls it once per phase of a program; a new
vendor is a module here and an entry in :data:`RULES`.

A step's cost is a pure function of the step, the GPU and the block's warps, so :func:`step_cost`
keeps the costs it has worked out (:data:`CACHE_MAX` of them) and hands out copies: a sweep lowers
the same step at several problem sizes, and a run at a settled SM clock costs the same steps again.
"""

from __future__ import annotations

import copy

from tilesim.cost import apple, nvidia
from tilesim.cost.nvidia import StepCost

#: vendor -> step-cost function (:mod:`tilesim.cost.nvidia`, :mod:`tilesim.cost.apple`).
RULES = {"nvidia": nvidia.step_cost, "apple": apple.step_cost}


CACHE_MAX = 4096
"""Step costs kept by :func:`step_cost` (the cache starts afresh when full)."""

_cache: dict = {}


def step_cost(step, hw, warps_per_block: int) -> StepCost:
    """The per-block cost of one step of a phase on ``hw``, for blocks of ``warps_per_block`` warps
    (a copy of the one worked out before for an equal step, GPU and warp count, by the same rule)."""
    rule = RULES.get(hw.vendor)
    if rule is None:
        raise ValueError(f"hardware {hw.name!r}: no cost rules for vendor {hw.vendor!r}; known: {', '.join(RULES)}")
    key = (rule, step, hw, warps_per_block)
    cost = _cache.get(key)
    if cost is None:
        cost = rule(step, hw, warps_per_block)
        if len(_cache) >= CACHE_MAX:
            _cache.clear()
        _cache[key] = cost
    return _copy(cost)


def _copy(cost: StepCost) -> StepCost:
    """A copy of ``cost`` that shares nothing mutable with it: its lists and dicts hold numbers, flags
    and tuples of strings, so a copy of each container is a deep copy (``copy.deepcopy``'s, cheaper)."""
    out = copy.copy(cost)
    for name, value in vars(cost).items():
        if isinstance(value, (list, dict)):
            setattr(out, name, value.copy())
    return out


__all__ = ["RULES", "StepCost", "step_cost"]
