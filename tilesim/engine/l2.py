"""The L2 model: which tensor tiles are resident, decided by reuse and capacity.

Tiles are identified by a *prefix* (tensor and the tile coordinates other than the k-step) and a
k-step (0 for a tile that does not depend on the loop index: the same data at every step). The cache is least-recently-used over *bytes brought in*: a byte clock counts every byte
that enters L2; a tile is resident while it and the bytes brought in since it was last touched
fit in ``capacity_bytes``. (This counts the stack distance in missed bytes; hits to older tiles
do not push a tile down, a documented approximation of exact LRU that needs no ordered list.)

The clock is a function of simulated time: a miss makes it jump by the tile's size, and a steady
phase that the engine does not step through *streams* bytes in at a rate for its duration
(:meth:`start_stream` / :meth:`stop_stream`). The tiles such a phase touches are recorded as a
*range* (:meth:`touch_range`): k-steps ``k0 .. k1-1`` touched one per ``period_s`` from
``start_s``; one touched at a time still to come counts as touched now.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate, repeat


class L2Cache:
    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes <= 0:
            raise ValueError(f"L2Cache: capacity_bytes must be > 0, got {capacity_bytes}")
        self.capacity_bytes = capacity_bytes
        self.rate = 0.0  # bytes/s streaming in now
        self._t = [0.0]  # breakpoints of the clock: times, values, rates after them
        self._c = [0.0]
        self._r = [0.0]
        self._last: dict = {}  # k-step -> {prefix: clock when last touched}
        self._ranges: dict = {}

    def clock(self, now_s: float) -> float:
        """Bytes brought in up to ``now_s`` (no earlier than the last breakpoint)."""
        return self._c[-1] + self._r[-1] * (now_s - self._t[-1])

    def _clock_at(self, t_s: float) -> float:
        i = bisect_right(self._t, t_s) - 1
        if i < 0:
            return 0.0
        return self._c[i] + self._r[i] * (t_s - self._t[i])

    def _break(self, now_s: float, jump: float = 0.0) -> None:
        c = self.clock(now_s) + jump
        if self._t[-1] == now_s:
            self._c[-1], self._r[-1] = c, self.rate
        else:
            self._t.append(now_s)
            self._c.append(c)
            self._r.append(self.rate)

    def _last_touch(self, prefix, k: int, now_s: float) -> float | None:
        last = self._last.get(k, {}).get(prefix)
        for k0, k1, start, period in reversed(self._ranges.get(prefix, ())):
            if k0 <= k < k1:
                t = start + (k - k0 + 1) * period
                c = self.clock(now_s) if t >= now_s else self._clock_at(t)
                return c if last is None or c > last else last
        return last

    def access(self, prefix, k: int, size_bytes: int, now_s: float = 0.0) -> bool:
        """Touch a tile at ``now_s``; True on a hit. A miss brings the tile in."""
        last = self._last_touch(prefix, k, now_s)
        now_c = self.clock(now_s)
        hit = last is not None and now_c - last + size_bytes <= self.capacity_bytes
        if not hit:
            self._break(now_s, size_bytes)
            now_c += size_bytes
        self._last.setdefault(k, {})[prefix] = now_c
        return hit

    def access_many(self, prefixes, k: int, size_bytes: int, now_s: float) -> list[int]:
        """:meth:`access` for each of ``prefixes`` in turn (k-step ``k``, tiles of ``size_bytes``);
        returns the positions of the misses. The same arithmetic as one call per tile, in one loop.
        ``prefixes`` are distinct."""
        last_of = self._last.get(k)
        if last_of is None:
            last_of = self._last[k] = {}
        get = last_of.get
        ranges = self._ranges
        ranges_of = ranges.get
        clock_at = self._clock_at
        cap = self.capacity_bytes
        t, c, r = self._t, self._c, self._r
        now_c = c[-1] + r[-1] * (now_s - t[-1])  # self.clock(now_s), kept up to date below
        # the prefixes are distinct (one per tile), so their last touches can be read at once
        lasts = list(map(get, prefixes))
        try:
            oldest = min(lasts)  # None for a tile never touched (compared with a number: TypeError)
        except (TypeError, ValueError):  # ValueError: no tiles
            oldest = None
        if oldest is not None and now_c - oldest + size_bytes <= cap:
            # every tile a hit on its own last touch (the test below is monotonic in ``last``: the
            # earliest passing it, every one does): each is touched now, and nothing else changes
            last_of.update(dict.fromkeys(prefixes, now_c))
            return []
        if oldest is None and lasts and lasts.count(None) == len(lasts) and ranges.keys().isdisjoint(prefixes):
            # no tile touched before, none in a held range: every one a miss, the clock jumping by
            # each tile in turn (the same additions, in the same order, as the loop below)
            clocks = list(accumulate(repeat(size_bytes, len(prefixes)), initial=now_c))
            now_c = clocks[-1]
            if t[-1] == now_s:
                c[-1], r[-1] = now_c, self.rate
            else:
                t.append(now_s)
                c.append(now_c)
                r.append(self.rate)
            last_of.update(zip(prefixes, clocks[1:], strict=True))
            return list(range(len(prefixes)))
        broke = False
        misses = []
        past: dict = {}  # clock at earlier times: tiles of one hold share them (misses now leave them alone)
        for j, (prefix, last) in enumerate(zip(prefixes, lasts, strict=True)):
            if last is not None and now_c - last + size_bytes <= cap:
                # a hit on its own last touch: a held range can only make that touch later
                last_of[prefix] = now_c
                continue
            if ranges:
                for k0, k1, start, period in reversed(ranges_of(prefix, ())):
                    if k0 <= k < k1:
                        tt = start + (k - k0 + 1) * period
                        if tt >= now_s:
                            cc = now_c
                        else:
                            cc = past.get(tt)
                            if cc is None:
                                cc = past[tt] = clock_at(tt)
                        if last is None or cc > last:
                            last = cc
                        break
            if last is None or now_c - last + size_bytes > cap:
                # a miss: the clock jumps by the tile (what _break(now_s, size_bytes) does)
                now_c += size_bytes
                if broke or t[-1] == now_s:
                    c[-1], r[-1] = now_c, self.rate
                else:
                    t.append(now_s)
                    c.append(now_c)
                    r.append(self.rate)
                broke = True
                misses.append(j)
            last_of[prefix] = now_c
        return misses

    def mark_many(self, prefixes, k: int, now_s: float) -> None:
        """:meth:`mark` for each of ``prefixes`` (k-step ``k``)."""
        c = self.clock(now_s)
        last_of = self._last.setdefault(k, {})
        for prefix in prefixes:
            last_of[prefix] = c

    def mark(self, prefix, k: int, now_s: float) -> None:
        """Note that a tile was just written: it is resident (its bytes are counted by :meth:`write`)."""
        self._last.setdefault(k, {})[prefix] = self.clock(now_s)

    def write(self, size_bytes: float, now_s: float) -> None:
        """Written (dirty) data enters L2 and takes its share of the capacity."""
        self._break(now_s, size_bytes)

    def start_stream(self, rate_bytes_per_s: float, now_s: float) -> None:
        """Bytes start entering at ``rate_bytes_per_s`` (a steady phase not stepped tile by tile)."""
        self._break(now_s)
        self.rate += rate_bytes_per_s
        self._r[-1] = self.rate

    def stop_stream(self, rate_bytes_per_s: float, now_s: float) -> None:
        self._break(now_s)
        self.rate = max(0.0, self.rate - rate_bytes_per_s)
        self._r[-1] = self.rate

    def touch_range(self, prefix, k0: int, k1: int, start_s: float, period_s: float) -> list:
        """Record that the tiles of k-steps k0..k1-1 are touched one per ``period_s`` from ``start_s``.

        Returns the record ``[k0, k1, start_s, period_s]``; lowering its k1 cuts the range short."""
        mark = [k0, k1, start_s, period_s]
        if k1 > k0:
            got = self._ranges.setdefault(prefix, [])
            # the oldest ranges whose last touch lies more than the capacity behind now can never make a
            # hit again (the clock only grows): dropped, oldest first, so that the newest range holding a
            # k-step is the one it was, or none holds it and none could have hit
            if got:
                limit = self.clock(start_s) - self.capacity_bytes
                drop = 0
                for r0, r1, t0, period in got:
                    end = t0 + (r1 - r0) * period
                    if end >= start_s or self._clock_at(end) >= limit:
                        break
                    drop += 1
                if drop:
                    del got[:drop]
            got.append(mark)
        return mark
