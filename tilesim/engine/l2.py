"""The L2 model: which tensor tiles are resident, decided by reuse and capacity.

Tiles are identified by (tensor, coordinates). The cache is least-recently-used over *bytes
brought in*: every miss inserts its tile and advances a byte clock; a tile is resident while
it and the bytes brought in since it was last touched fit in ``capacity_bytes``. (This counts the
stack distance in missed bytes; hits to older tiles do not push a tile down, a documented
approximation of exact LRU that needs no ordered list.) Steady streams that the engine does not
simulate access by access advance the clock with :meth:`stream`.
"""

from __future__ import annotations


class L2Cache:
    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes <= 0:
            raise ValueError(f"L2Cache: capacity_bytes must be > 0, got {capacity_bytes}")
        self.capacity_bytes = capacity_bytes
        self.clock_bytes = 0.0
        self._last: dict = {}

    def access(self, key, size_bytes: int) -> bool:
        """Touch a tile; True on a hit. A miss brings the tile in."""
        last = self._last.get(key)
        hit = last is not None and self.clock_bytes - last + size_bytes <= self.capacity_bytes
        if not hit:
            self.clock_bytes += size_bytes
        self._last[key] = self.clock_bytes
        return hit

    def stream(self, size_bytes: float) -> None:
        """Account for bytes brought in by a stream that is not simulated tile by tile."""
        self.clock_bytes += size_bytes
