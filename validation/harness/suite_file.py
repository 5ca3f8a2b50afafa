"""A family's suite file: ``validation/families/<family>/suite.toml``, as configurations.

``[[shape]]`` tables give a ``name`` and the family's problem-size fields; ``[[config]]`` tables give
knob values (every other field of the family's configuration; an optional ``shapes = [...]``
restricts one to those shape names). Every config is crossed with every shape (config-major) and
built by ``tilesim.kernels.registry.get(family).make(**shape, **knobs)``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path

from tilesim.kernels import registry
from validation.harness import runners


def problem_fields(family: str, shapes: Sequence[dict] = ()) -> tuple[str, ...]:
    """The family's problem-size fields (from the registry; else the keys of the suite's shapes)."""
    fam = registry.get(family)
    if fam.problem_fields:
        return tuple(fam.problem_fields)
    return tuple(dict.fromkeys(k for s in shapes for k in s if k != "name"))


def load_suite(family: str, path: str | Path | None = None) -> list:
    """The suite's configurations, config-major (every ``[[config]]`` on each of its shapes).

    Raises ``ValueError`` naming the entry for unknown keys, missing problem fields, unknown shape
    names, knobs the family's config rejects, or a duplicate configuration."""
    fam = registry.get(family)
    p = Path(path) if path is not None else runners.suite_path(family)
    where = f"{p.parent.name}/{p.name}"
    with p.open("rb") as fh:
        raw = tomllib.load(fh)
    extra = set(raw) - {"shape", "config"}
    if extra:
        raise ValueError(f"{where}: unknown top-level keys {sorted(extra)}; expected [[shape]] and [[config]]")
    shapes, entries = raw.get("shape", []), raw.get("config", [])
    if not shapes or not entries:
        raise ValueError(f"{where}: needs at least one [[shape]] and one [[config]]")
    fields = problem_fields(family, shapes)
    names = []
    for i, s in enumerate(shapes):
        want = {"name", *fields}
        if set(s) != want:
            raise ValueError(f"{where}: shape #{i} ({s.get('name', '?')}): keys must be {sorted(want)}; got {sorted(s)}")
        names.append(s["name"])
    if len(set(names)) != len(names):
        raise ValueError(f"{where}: duplicate shape names in {names}")
    configs, seen = [], set()
    for j, entry in enumerate(entries):
        knobs = dict(entry)
        only = knobs.pop("shapes", None)
        if only is not None and set(only) - set(names):
            raise ValueError(f"{where}: config #{j}: unknown shape names {sorted(set(only) - set(names))}; "
                             f"shapes: {', '.join(names)}")
        clash = sorted(set(knobs) & set(fields))
        if clash:
            raise ValueError(f"{where}: config #{j}: {clash} are problem fields; give them in [[shape]]")
        for s in shapes:
            if only is not None and s["name"] not in only:
                continue
            try:
                cfg = fam.make(**{f: s[f] for f in fields}, **knobs)
            except (TypeError, ValueError) as e:
                raise ValueError(f"{where}: config #{j} on shape {s['name']}: {e}") from e
            if cfg in seen:
                raise ValueError(f"{where}: config #{j}: duplicate configuration {fam.full_label(cfg)}")
            seen.add(cfg)
            configs.append(cfg)
    return configs


def select(family: str, configs: Sequence, *, only: str | None = None, shape: str | None = None,
           limit: int | None = None) -> list:
    """Filter: label substring ``only``; ``shape`` the problem size as "x"-joined problem fields
    (e.g. ``4096x4096x4096``); at most ``limit``."""
    fam = registry.get(family)
    out = list(configs)
    if only:
        out = [c for c in out if only in fam.label(c)]
    if shape:
        out = [c for c in out if fam.full_label(c).rsplit("@", 1)[-1] == shape]
    if limit is not None:
        if limit < 0:
            raise ValueError(f"limit = {limit}: must be >= 0")
        out = out[:limit]
    return out
