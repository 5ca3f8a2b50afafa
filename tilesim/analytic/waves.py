"""Waves: how a grid of blocks is scheduled onto the GPU's resident-block slots.

With ``slots = blocks_per_sm * sm_count`` blocks resident at once, a grid of ``blocks`` runs in
``wave_count = ceil(blocks / slots)`` waves; the last one holds ``tail_blocks`` blocks when it is
partial. ``tail_efficiency = blocks / (wave_count * slots)`` is the fraction of slot-waves that do
useful work (1.0 when the grid is a whole number of waves).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Waves:
    """Result of :func:`waves`. ``tail_blocks`` is 0 when the last wave is full."""

    blocks: int
    slots: int
    full_waves: int
    tail_blocks: int
    waves: float
    wave_count: int
    tail_efficiency: float


def _positive_int(field: str, value, lo: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < lo:
        raise ValueError(f"{field} = {value!r}: must be an integer >= {lo}")


def waves(blocks: int, blocks_per_sm: int, sm_count: int) -> Waves:
    """Wave decomposition of ``blocks`` blocks on ``sm_count`` SMs holding ``blocks_per_sm`` each.

    Raises ``ValueError`` naming the field when an argument is not an integer >= 1.
    """
    _positive_int("blocks", blocks, 1)
    _positive_int("blocks_per_sm", blocks_per_sm, 1)
    _positive_int("sm_count", sm_count, 1)
    slots = blocks_per_sm * sm_count
    full, tail = divmod(blocks, slots)
    count = full + (1 if tail else 0)
    return Waves(
        blocks=blocks,
        slots=slots,
        full_waves=full,
        tail_blocks=tail,
        waves=blocks / slots,
        wave_count=count,
        tail_efficiency=blocks / (count * slots),
    )
