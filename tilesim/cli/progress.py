"""Progress of long commands, on standard error: a rich bar on a terminal, a line per new whole percent
when standard error is piped (``name: 37% (370/1000)``). Sweeps, ``simulate --exact``, ``validate
report`` and the engine-check and schedule-replay studies share it.

    with progress("naive_vs_tiled") as update:
        for i, x in enumerate(xs, 1):
            ...
            update(i, len(xs))
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def _n(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


class PercentLines:
    """Progress when standard error is not a terminal: one line per new whole percent. ``counts``: add
    ``(done/total)`` to each line (False where the counts mean nothing to a reader, e.g. fractions)."""

    def __init__(self, name: str, *, counts: bool = True, stream=None) -> None:
        self.name = name
        self.counts = counts
        self.stream = stream
        self.last = -1

    def __call__(self, done: float, total: float) -> None:
        pct = int(100 * done // max(total, 1e-300)) if total else 0
        if pct != self.last:
            self.last = pct
            more = f" ({_n(done)}/{_n(total)})" if self.counts else ""
            print(f"{self.name}: {pct}%{more}", file=self.stream or sys.stderr, flush=True)

    def restart(self, name: str) -> None:
        """Start again from 0% under a new name (a second pass of the same work)."""
        self.name = name
        self.last = -1


class _Bar:
    """The terminal's bar, with the same calls as :class:`PercentLines`."""

    def __init__(self, bar, name: str) -> None:
        self.bar = bar
        self.task = bar.add_task(name, total=None)

    def __call__(self, done: float, total: float) -> None:
        self.bar.update(self.task, completed=done, total=total)

    def restart(self, name: str) -> None:
        self.bar.update(self.task, completed=0, description=name)


@contextmanager
def progress(name: str, *, counts: bool = True, terminal: bool | None = None) -> Iterator:
    """Yield ``update(done, total)`` (with ``.restart(name)``): a transient rich bar when standard
    error is a terminal (``terminal`` overrides the check), else :class:`PercentLines`."""
    err = Console(stderr=True)
    if terminal if terminal is not None else err.is_terminal:
        columns = [TextColumn("{task.description}"), BarColumn()]
        columns += [MofNCompleteColumn()] if counts else [TextColumn("{task.percentage:>3.0f}%")]
        with Progress(*columns, TimeElapsedColumn(), console=err, transient=True) as bar:
            yield _Bar(bar, name)
    else:
        yield PercentLines(name, counts=counts)
