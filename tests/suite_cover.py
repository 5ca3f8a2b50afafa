"""A representative subset of a family's suite: a few configurations that between them take every value
of every knob the suite varies. Tests that compile every suite kernel with nvcc check this subset by
default and the whole suite under the ``slow`` marker (``python -m pytest -m slow``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence


def covering(configs: Sequence, skip: Iterable[str] = (), key: Callable | None = None) -> list:
    """Configurations of ``configs`` (in suite order) that between them take every value each knob (a
    dataclass field, less ``skip``: the problem sizes) takes in the suite: a greedy cover, the one
    adding the most values not yet taken first. ``key`` (e.g. the kernel name) keeps one per kernel."""
    skip = set(skip)
    seen, distinct = set(), []
    for c in configs:
        k = key(c) if key else c
        if k not in seen:
            seen.add(k)
            distinct.append(c)
    names = [f.name for f in dataclasses.fields(distinct[0]) if f.name not in skip]

    def values(c) -> set:
        return {(n, repr(getattr(c, n))) for n in names}

    wanted = set().union(*(values(c) for c in distinct))
    chosen: list = []
    while wanted:
        best = max(distinct, key=lambda c: len(values(c) & wanted))
        chosen.append(best)
        wanted -= values(best)
    return [c for c in distinct if any(c is b for b in chosen)]
