"""Kernel families as plug-ins: each package under ``tilesim/kernels/`` registers one family by name.

A family is a :class:`KernelFamily`: its name, its configuration class (a frozen dataclass whose
``__post_init__`` rejects impossible knobs with a ``ValueError`` naming the field, the value and the
limit; each field documented by ``metadata={"doc": ...}``), and four functions:

* ``lower(config) -> TileProgram``: what every block does (no GPU numbers: the same program runs on
  every GPU);
* ``check_fits(config, hw)``: raises ``ValueError`` when the launch breaks a limit of ``hw``
  (threads, registers, shared memory);
* ``counts(config) -> dict``: analytic counts (``flops``, ``min_hbm_bytes`` and whatever else the
  family knows in closed form);
* ``label(config) -> str``: a short name of the tiling (without the problem size) for tables.

The CLI, sweeps, tuning and the validation harness find families here, never by importing them by
name. :func:`discover` imports every subpackage of ``tilesim.kernels`` once, and each registers
itself with :func:`register` on import, so adding a family touches only its own package.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tilesim.program import TileProgram


@dataclass(frozen=True)
class Knob:
    """One field of a family's configuration, for CLIs and documentation."""

    name: str
    type: str
    default: Any
    doc: str
    choices: tuple = ()


@dataclass(frozen=True)
class KernelFamily:
    name: str
    config: type
    lower: Callable[[Any], TileProgram]
    check_fits: Callable[[Any, Any], None]
    counts: Callable[[Any], dict]
    label: Callable[[Any], str]
    description: str = ""
    problem_fields: tuple[str, ...] = ()  # the fields that give the problem size (e.g. m, n, k)

    def knobs(self) -> list[Knob]:
        """The configuration's fields with their types, defaults, documentation and choices."""
        out = []
        for f in dataclasses.fields(self.config):
            default = f.default if f.default is not dataclasses.MISSING else None
            out.append(Knob(f.name, str(f.type), default, f.metadata.get("doc", ""),
                            tuple(f.metadata.get("choices", ()))))
        return out

    def make(self, **values) -> Any:
        """A configuration from keyword values (strings are converted to the field's type)."""
        known = {f.name: f for f in dataclasses.fields(self.config)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"{self.name}: unknown knob(s) {', '.join(unknown)}; known: {', '.join(known)}")
        return self.config(**{k: _convert(known[k], v) for k, v in values.items()})

    def full_label(self, config) -> str:
        """The label with the problem size, unique within a suite."""
        size = "x".join(str(getattr(config, f)) for f in self.problem_fields)
        return f"{self.label(config)}@{size}" if size else self.label(config)


def _convert(f: dataclasses.Field, value):
    if not isinstance(value, str):
        return value
    t = str(f.type)
    if "bool" in t:
        if value.lower() in ("1", "true", "yes", "on"):
            return True
        if value.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{f.name} = {value!r}: must be true or false")
    if t.startswith("int") or t == "int | None":
        if value.lower() == "none" and "None" in t:
            return None
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{f.name} = {value!r}: must be an integer") from None
    if t.startswith("float"):
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"{f.name} = {value!r}: must be a number") from None
    return value


_FAMILIES: dict[str, KernelFamily] = {}
_BY_CONFIG: dict[type, KernelFamily] = {}
_DISCOVERED = False


def register(family: KernelFamily) -> KernelFamily:
    """Add a family (called by the family's package on import). Names must be unique."""
    old = _FAMILIES.get(family.name)
    if old is not None and old.config is not family.config:
        raise ValueError(f"kernel family {family.name!r} registered twice")
    _FAMILIES[family.name] = family
    _BY_CONFIG[family.config] = family
    return family


def discover() -> None:
    """Import every family package under ``tilesim.kernels`` (each registers itself)."""
    global _DISCOVERED
    if _DISCOVERED:
        return
    import tilesim.kernels as pkg  # noqa: PLC0415

    for mod in pkgutil.iter_modules(pkg.__path__):
        if mod.ispkg:
            importlib.import_module(f"tilesim.kernels.{mod.name}")
    _DISCOVERED = True


def families() -> dict[str, KernelFamily]:
    """Every registered family by name, sorted."""
    discover()
    return dict(sorted(_FAMILIES.items()))


def get(name: str) -> KernelFamily:
    """The family called ``name``; ``ValueError`` lists the known ones."""
    fams = families()
    if name not in fams:
        raise ValueError(f"unknown kernel family {name!r}; known: {', '.join(fams)}")
    return fams[name]


def family_of(config) -> KernelFamily:
    """The family a configuration object belongs to."""
    discover()
    fam = _BY_CONFIG.get(type(config))
    if fam is None:
        raise ValueError(f"{type(config).__name__} is not the configuration of a registered kernel family")
    return fam
