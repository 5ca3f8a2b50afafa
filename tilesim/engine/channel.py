"""A bandwidth channel: a FIFO server that moves ``amount`` units at ``rate_per_s``.

Requests are served one after another in arrival order (a single-server queue), so concurrent
requesters split the channel's bandwidth over time and queue behind each other: contention is
what the queue does, not a formula. A requester that has reached a steady state may *reserve*
a rate for a while (see :meth:`reserve`) instead of sending every request: the channel then
serves everyone else at the remaining rate, which keeps the contention it causes.

The channel holds no simpy process: :meth:`request` returns the simulated time at which the
transfer completes, and the caller waits on a simpy timeout until then.
"""

from __future__ import annotations


class Channel:
    """A FIFO bandwidth server. ``unit`` names what ``amount`` counts (bytes, wavefronts, ...)."""

    #: the smallest share of the rate a requester can be left with while others reserve
    MIN_SHARE = 0.02

    def __init__(self, name: str, rate_per_s: float, unit: str) -> None:
        if not rate_per_s > 0:
            raise ValueError(f"Channel {name}: rate_per_s must be > 0, got {rate_per_s!r}")
        self.name = name
        self.unit = unit
        self.rate_per_s = float(rate_per_s)
        self.reserved_per_s = 0.0
        self._rate_now = self.rate_per_s  # effective_rate(), updated when a reservation changes
        self.next_free_s = 0.0
        self.amount = 0.0  # total units moved (requests plus reserved streams)
        self.busy_s = 0.0  # time the channel spent moving units (requests plus reserved share)

    def effective_rate(self) -> float:
        return max(self.rate_per_s - self.reserved_per_s, self.MIN_SHARE * self.rate_per_s)

    def request(self, now_s: float, amount: float) -> float:
        """Queue a transfer of ``amount`` units at ``now_s``; return its completion time."""
        if amount <= 0:
            return now_s
        start = self.next_free_s if self.next_free_s > now_s else now_s
        finish = start + amount / self._rate_now
        self.next_free_s = finish
        self.amount += amount
        self.busy_s += amount / self.rate_per_s
        return finish

    def reserve(self, rate_per_s: float) -> None:
        """Take ``rate_per_s`` of the channel for a steady stream until :meth:`release`."""
        self.reserved_per_s += rate_per_s
        self._rate_now = self.effective_rate()

    def release(self, rate_per_s: float, duration_s: float) -> None:
        """End a reservation that lasted ``duration_s``, counting what it moved."""
        self.reserved_per_s = max(0.0, self.reserved_per_s - rate_per_s)
        self._rate_now = self.effective_rate()
        self.amount += rate_per_s * duration_s
        self.busy_s += rate_per_s * duration_s / self.rate_per_s

    def utilization(self, elapsed_s: float) -> float:
        return self.busy_s / elapsed_s if elapsed_s > 0 else 0.0


def prepared(channel: Channel, amount: float) -> tuple[Channel, float, float]:
    """A request of ``amount`` (above 0) on ``channel`` made once and sent many times with
    :func:`request_all`: the channel, the amount, and the busy time it adds at the channel's full rate."""
    return channel, amount, amount / channel.rate_per_s


def request_all(now_s: float, requests, done_s: float) -> float:
    """Queue each of ``requests`` (:func:`prepared`) in turn at ``now_s`` and return the latest of
    ``done_s`` and their completion times: :meth:`Channel.request` for each, with its arithmetic in one
    loop (the engine's math rounds send a few requests each, millions a run)."""
    for ch, amount, busy in requests:
        free = ch.next_free_s
        finish = (free if free > now_s else now_s) + amount / ch._rate_now
        ch.next_free_s = finish
        ch.amount += amount
        ch.busy_s += busy
        if finish > done_s:
            done_s = finish
    return done_s
