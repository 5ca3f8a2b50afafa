"""Where a tile lies for each block of a group: its coordinates with the block indices substituted and
the loop index kept symbolic, as the caches know it."""

from __future__ import annotations

from tilesim.program import Affine

LOOP = "@"  # the loop index in a tile's projection (phases share tiles by position, not by name)


def _form_column(form: tuple, first: int, count: int, column) -> list:
    """One coordinate of a tile (a form of :func:`_linear_forms`) for each of the ``count`` blocks from
    ``first`` (``column(first, count, axis)`` gives their ``bx``, ``by`` or ``bz``, axis 0, 1 or 2):
    what :func:`_project` gives for it, block by block (a column itself when the coordinate is one
    index: not to be changed)."""
    cx, cy, cz, f, step = form
    if cx is None:
        return [f] * count
    if (cx, cy, cz, f) == (1, 0, 0, 0):
        values = column(first, count, 0)
    elif (cx, cy, cz, f) == (0, 1, 0, 0):
        values = column(first, count, 1)
    else:
        values = [cx * bx + cy * by + cz * bz + f for bx, by, bz in zip(
            column(first, count, 0), column(first, count, 1), column(first, count, 2), strict=True)]
    return values if step is None else [(LOOP, step, v) for v in values]


def _project(coord, named: dict, index: str):
    """One coordinate of a tile for a block: block indices substituted, the loop index kept
    symbolic (as ``LOOP``, so phases with other index names share tiles by position)."""
    if isinstance(coord, Affine):
        rest = sum(c * named[n] for n, c in coord.terms if n != index) + coord.const
        step = sum(c for n, c in coord.terms if n == index)
        return (LOOP, step, rest) if step else rest
    if coord == index:
        return LOOP
    if isinstance(coord, str):
        return named[coord]
    return coord


def _linear_forms(coords: tuple, index: str) -> list | None:
    """Each coordinate of a tile as ``(cx, cy, cz, const, step)``: ``cx*bx + cy*by + cz*bz + const``,
    wrapped as ``(LOOP, step, ...)`` when the loop index enters with ``step`` (``step`` None when it
    does not); ``(None, None, None, value, None)`` for a coordinate that is ``value`` whatever the
    block. What :func:`_project` gives, with the integer arithmetic done per coefficient; None when
    a coordinate names an index other than the block indices and ``index``."""
    forms = []
    for coord in coords:
        if isinstance(coord, Affine):
            co = {"bx": 0, "by": 0, "bz": 0}
            step = 0
            for n, c in coord.terms:
                if n == index:
                    step += c
                elif n in co:
                    co[n] += c
                else:
                    return None
            forms.append((co["bx"], co["by"], co["bz"], coord.const, step or None))
        elif coord == index:
            forms.append((None, None, None, LOOP, None))
        elif isinstance(coord, str):
            if coord not in ("bx", "by", "bz"):
                return None
            forms.append((int(coord == "bx"), int(coord == "by"), int(coord == "bz"), 0, None))
        else:
            forms.append((None, None, None, coord, None))
    return forms
