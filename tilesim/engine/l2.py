"""The L2 model: which tensor tiles are resident, decided by reuse and capacity.

Tiles are identified by a *prefix* (tensor and the tile coordinates other than the k-step) and a
k-step. The cache is least-recently-used over *bytes brought in*: every miss inserts its tile and
advances a byte clock; a tile is resident while it and the bytes brought in since it was last
touched fit in ``capacity_bytes``. (This counts the stack distance in missed bytes; hits to older
tiles do not push a tile down, a documented approximation of exact LRU that needs no ordered
list.)

Steady phases that the engine does not step through are recorded as *ranges*: the tiles of k-steps
``k0 .. k1-1`` of a prefix, touched one after another while ``step_bytes`` were brought in per
step, ending at the current clock (:meth:`touch_range`), after the bytes themselves were counted
with :meth:`stream`.
"""

from __future__ import annotations


class L2Cache:
    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes <= 0:
            raise ValueError(f"L2Cache: capacity_bytes must be > 0, got {capacity_bytes}")
        self.capacity_bytes = capacity_bytes
        self.clock_bytes = 0.0
        self._last: dict = {}
        self._ranges: dict = {}

    def _last_touch(self, prefix, k: int) -> float | None:
        last = self._last.get((prefix, k))
        for k0, k1, end, step in reversed(self._ranges.get(prefix, ())):
            if k0 <= k < k1:
                t = end - (k1 - 1 - k) * step
                return t if last is None or t > last else last
        return last

    def access(self, prefix, k: int, size_bytes: int) -> bool:
        """Touch a tile; True on a hit. A miss brings the tile in."""
        last = self._last_touch(prefix, k)
        hit = last is not None and self.clock_bytes - last + size_bytes <= self.capacity_bytes
        if not hit:
            self.clock_bytes += size_bytes
        self._last[(prefix, k)] = self.clock_bytes
        return hit

    def stream(self, size_bytes: float) -> None:
        """Account for bytes brought in by a stream that is not simulated tile by tile."""
        self.clock_bytes += size_bytes

    def touch_range(self, prefix, k0: int, k1: int, step_bytes: float) -> None:
        """Record that the tiles of k-steps k0..k1-1 were touched in order, ending now."""
        if k1 > k0:
            self._ranges.setdefault(prefix, []).append((k0, k1, self.clock_bytes, step_bytes))
