"""The engine's own fast path through simpy 4: its events, processes and run loop, scheduled as simpy's.

simpy's Environment, Timeout, Process and AllOf do what the engine needs, at a cost per event the engine
pays millions of times a run. These stand-ins schedule the same events at the same times, priorities and
places in the environment's order (so a run is the one simpy's classes give), with fewer calls and
objects: :func:`_wait` advances the clock in place where no other event is due first."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from heapq import heappop, heappush

import simpy
from simpy.events import NORMAL, PENDING, URGENT, Event, Timeout

GC_THRESHOLD = 100_000  # allocations between the garbage collector's young-generation runs during a run (Engine.run)


@contextmanager
def _fewer_collections():
    """The garbage collector's young generation runs every GC_THRESHOLD allocations (at least) inside.

    A run allocates many short-lived objects that reference counting frees, and keeps large tables
    (tile ids, the caches' last touches) that every collection walks again: the collector runs less
    often meanwhile. Nested uses keep the outermost's threshold until it ends; the collector sees
    the same objects either way (no prediction depends on it)."""
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], GC_THRESHOLD), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def _timeout(env: simpy.Environment, delay_s: float) -> Timeout:
    """``env.timeout(delay_s)``: the same event, scheduled alike (at ``now + delay_s``, normal priority,
    the environment's next id), without the calls of its constructor (simpy 4's Timeout.__init__ and
    Environment.schedule, inlined)."""
    if delay_s < 0:
        raise ValueError(f"Negative delay {delay_s}")
    ev = _new_event(Timeout)
    ev.env = env
    ev.callbacks = []
    ev._value = None
    ev._delay = delay_s
    ev._ok = True
    heappush(env._queue, (env._now + delay_s, NORMAL, next(env._eid), ev))
    return ev


_new_event = object.__new__


def _process(env: simpy.Environment, generator) -> _Sub:
    """``env.process(generator)`` for the engine's sub-processes (warp groups, math groups): started
    alike (a start event scheduled now, urgent, with the environment's next id, as simpy's Initialize
    is) and, when the generator ends, scheduled alike as the event others wait on (now, normal
    priority, the next id, as simpy's Process is); a :class:`_Sub`, with what simpy's run loop and
    :class:`_AllDone` read of an event, in slots."""
    proc = _Sub(env, generator)
    heappush(env._queue, (env._now, URGENT, next(env._eid), _Start(proc._resume)))
    return proc


class _Start:
    """The event that starts a :class:`_Sub` (simpy's Initialize, in a slot: only the process waits on it)."""

    __slots__ = ("callbacks",)
    _ok = True
    _value = None

    def __init__(self, resume) -> None:
        self.callbacks = [resume]


class _Sub:
    """A process of the engine's own (:func:`_process`): simpy 4's ``Process._resume`` without the
    environment's active-process bookkeeping (nothing here reads it), and an event in slots. What it
    sends its generator, when it is scheduled, and at which priority and place, are simpy's."""

    __slots__ = ("env", "callbacks", "_generator", "_ok", "_value", "_defused")

    def __init__(self, env: simpy.Environment, generator) -> None:
        self.env = env
        self.callbacks = []
        self._generator = generator
        self._ok = True
        self._value = PENDING

    def _resume(self, event) -> None:
        gen = self._generator
        while True:
            try:
                if event._ok:
                    event = gen.send(event._value)
                else:
                    event._defused = True
                    exc = type(event._value)(*event._value.args)
                    exc.__cause__ = event._value
                    event = gen.throw(exc)
            except StopIteration as e:
                self._value = e.args[0] if e.args else None
                env = self.env
                heappush(env._queue, (env._now, NORMAL, next(env._eid), self))
                return
            except BaseException as e:
                self._ok = False
                self._value = e
                env = self.env
                heappush(env._queue, (env._now, NORMAL, next(env._eid), self))
                return
            callbacks = event.callbacks
            if callbacks is not None:
                callbacks.append(self._resume)
                return


class _AllDone(Event):
    """``simpy.AllOf(env, events)`` for waiting on all of them: triggered (scheduled) at the same
    moment, the same way; its value is None, not a ConditionValue (nobody reads it)."""

    def __init__(self, env: simpy.Environment, events: list) -> None:
        self.env = env
        self.callbacks = []
        self._value = PENDING
        self._left = len(events)
        if not events:
            self.succeed()
            return
        for event in events:
            if event.callbacks is None:
                self._check(event)
            else:
                event.callbacks.append(self._check)

    def _check(self, event: Event) -> None:
        if self._value is not PENDING:
            return
        self._left -= 1
        if not event._ok:
            event._defused = True
            self.fail(event._value)
        elif not self._left:
            self.succeed()


def _run(env: simpy.Environment) -> None:
    """``env.run()`` until no event is left: simpy 4's Environment.step in one loop (the engine never
    stops a run early)."""
    queue = env._queue
    while queue:
        env._now, _, _, event = heappop(queue)
        callbacks, event.callbacks = event.callbacks, None
        for callback in callbacks:
            callback(event)
        if not event._ok and not hasattr(event, "_defused"):
            exc = type(event._value)(*event._value.args)
            exc.__cause__ = event._value
            raise exc


def _wait(env: simpy.Environment, delay_s: float) -> _Wake | None:
    """What a process waits on for ``delay_s``: None where the clock is advanced in place because no
    event is due until then, else a timeout (scheduled), for the process to yield.

    Advancing in place is the same simulation as the timeout: the waiting process would be the next
    to run, at ``now + delay_s`` (the very sum the timeout would be scheduled at), and simpy's
    tie-breaking counter only orders events due at one instant, so every other event keeps its place
    and time; what is saved is the Timeout, its heap push and pop, and the resumption of the process's
    chain of generators. The timeout, where one is needed, is scheduled here too (as :func:`_timeout`
    schedules its event, but a :class:`_Wake`), one call for both: the engine's hot loops wait
    millions of times a run. (It reads and sets the environment's ``_now`` and ``_queue``, simpy 4's.)"""
    at = env._now + delay_s
    queue = env._queue
    if not queue or queue[0][0] > at:
        env._now = at
        return None
    if delay_s < 0:
        raise ValueError(f"Negative delay {delay_s}")
    ev = _new_event(_Wake)
    ev.callbacks = []
    heappush(queue, (at, NORMAL, next(env._eid), ev))
    return ev


class _Wake:
    """The timeout :func:`_wait` schedules: only the process that yields it waits on it, so it carries
    just what simpy's ``Process._resume`` and the run loop (:func:`_run`) read of an event (its
    callbacks, ``_ok`` and ``_value``), in a slot, without an Event's attribute dictionary; scheduled
    as :func:`_timeout`'s event is (same time, priority and place in the environment's order)."""

    __slots__ = ("callbacks",)
    _ok = True
    _value = None
