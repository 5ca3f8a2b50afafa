"""The hardware catalog: one TOML data file per GPU, overlaid by its assumptions and its calibrated profile.

A data file (``tilesim/hardware/data/<name>.toml``) has a ``[meta]`` table (``display_name``,
``vendor``) and one table per value with ``value`` and ``source`` (the layout is in
:mod:`tilesim.hardware.fields`); it holds only sourced values.

An assumed overlay (``tilesim/hardware/assumed/<name>.toml``, same form, no ``[meta]`` needed) adds
the values the engine needs that no source gives for that GPU: each one's source starts with
``assumption:`` and says what it is carried from (another chip's measurement, another vendor's
figure) or that it is bare. It may only add keys the data file lacks (an assumption never replaces
a sourced value); the loaded spec records which values are assumed (:attr:`HardwareSpec.assumed`).
``load(name, assumed=False)`` leaves the overlay out: then reading such a value raises.

A calibrated profile (``tilesim/hardware/calibrated/<name>.toml``, machine-written by
``validation/calibrate.py``) has the same form and is applied last: its values replace the data
file's and the assumptions (a calibrated value is no longer assumed), the loaded spec records which
were calibrated and when. A profile may carry any key a data file may (the flat fields, and
per-pipe ones such as ``[pipes.sfu.latency_cycles]``).
"""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tilesim.hardware import fields as F
from tilesim.hardware.spec import HardwareSpec

DATA_DIR = Path(__file__).parent / "data"
CALIBRATED_DIR = Path(__file__).parent / "calibrated"
ASSUMED_DIR = Path(__file__).parent / "assumed"
ASSUMPTION_PREFIX = "assumption:"
"""How every source in an assumed overlay begins (and no source in a data file)."""


def _leaves(path: Path, node: dict, prefix: str = "") -> list[tuple[str, Any, str]]:
    """``(key, value, source)`` of every ``{value, source}`` table under ``node``."""
    out = []
    for name, entry in node.items():
        key = f"{prefix}{name}"
        if not isinstance(entry, dict):
            raise ValueError(f"{path.name}: {key!r} must be a table with 'value' and 'source'")
        if "value" in entry or "source" in entry:
            extra = set(entry) - {"value", "source"}
            if "value" not in entry or "source" not in entry or extra:
                raise ValueError(f"{path.name}: field {key!r} must be a table with exactly 'value' and 'source'")
            if not str(entry["source"]).strip():
                raise ValueError(f"{path.name}: field {key!r} has an empty source")
            val = entry["value"]
            if isinstance(val, list):
                val = tuple(tuple(x) if isinstance(x, list) else x for x in val)
            out.append((key, val, str(entry["source"])))
        else:
            out.extend(_leaves(path, entry, f"{key}."))
    return out


def read_table(path: Path, vendor: str | None = None) -> tuple[dict[str, Any], dict[str, str], dict[str, Any]]:
    """Values, sources and ``[meta]`` of one TOML file; keys are checked against ``vendor``'s
    vocabulary (the file's own ``[meta] vendor`` when ``vendor`` is None).

    A vendor table's fields (``[nvidia.reg_alloc_unit]``) are keyed by their bare name, like the
    flat fields a calibrated profile writes. Raises ``ValueError`` naming the file and key.
    """
    raw = dict(_parsed(path))  # a shallow copy: the parsed tables are shared, and only read
    meta = dict(raw.pop("meta", {}))
    vendor = vendor or str(meta.get("vendor", ""))
    if vendor not in F.VENDORS:
        raise ValueError(f"{path.name}: [meta] vendor = {vendor!r}: must be one of {', '.join(F.VENDORS)}")
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key, val, src in _leaves(path, raw):
        try:
            F.check_key(key, vendor)
        except ValueError as e:
            raise ValueError(f"{path.name}: {e}") from None
        bare = F.bare_key(key)
        values[bare] = val
        sources[bare] = src
    return values, sources, meta


_PARSED: dict = {}


def _parsed(path: Path) -> dict:
    """The TOML file at ``path``, parsed once per content: every simulation loads its GPU's spec,
    and parsing the files is most of that (reading their bytes is not)."""
    data = path.read_bytes()
    got = _PARSED.get(data)
    if got is None:
        got = tomllib.loads(data.decode())  # what tomllib.load does with the file
        if len(_PARSED) > 64:
            _PARSED.clear()
        _PARSED[data] = got
    return got


def available() -> list[str]:
    """Names of the GPUs in the catalog (data file stems)."""
    return sorted(p.stem for p in DATA_DIR.glob("*.toml"))


def read_assumed(path: Path, vendor: str, sourced: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Values and sources of an assumed overlay: every source must start with ``assumption:`` and
    no key may be one the data file (``sourced``) already gives. Raises ``ValueError`` naming the
    file and key."""
    values, sources, _ = read_table(path, vendor)
    for key, src in sources.items():
        if not src.strip().lower().startswith(ASSUMPTION_PREFIX):
            raise ValueError(f"{path.name}: field {key!r}: an assumed value's source must start with "
                             f"{ASSUMPTION_PREFIX!r}, got {src!r}")
        if key in sourced:
            raise ValueError(f"{path.name}: field {key!r} is sourced in the data file; an assumption may "
                             "not replace it")
    return values, sources


def load(name: str, *, calibrated: bool = True, assumed: bool = True,
         calibration_dir: Path | None = None, assumed_dir: Path | None = None) -> HardwareSpec:
    """Load a GPU's spec by name: its data file, then its assumed overlay (when ``assumed`` and one
    exists), then its calibrated profile (when ``calibrated`` and one exists).

    Raises ``ValueError`` listing the known names when ``name`` is not in the catalog.
    """
    key = name.lower().replace("-", "_")
    path = DATA_DIR / f"{key}.toml"
    if not path.exists():
        raise ValueError(f"unknown hardware {name!r}; known: {', '.join(available())}")
    values, sources, meta = read_table(path)
    vendor = str(meta["vendor"])
    missing = [f for f in F.REQUIRED_FIELDS[vendor] if f not in values]
    if missing:
        raise ValueError(f"{path.name}: missing fields {', '.join(missing)}")
    assumed_fields: set[str] = set()
    assumed_path = (assumed_dir or ASSUMED_DIR) / f"{key}.toml"
    if assumed and assumed_path.exists():
        avals, asrcs = read_assumed(assumed_path, vendor, values)
        values.update(avals)
        sources.update(asrcs)
        assumed_fields = set(avals)
    cal_fields: set[str] = set()
    cal_date = None
    cal_path = (calibration_dir or CALIBRATED_DIR) / f"{key}.toml"
    if calibrated and cal_path.exists():
        cvals, csrcs, cmeta = read_table(cal_path, vendor)
        values.update(cvals)
        sources.update(csrcs)
        cal_fields = set(cvals)
        cal_date = str(cmeta.get("date", "")) or None
    return HardwareSpec(
        name=key,
        display_name=str(meta.get("display_name", key)),
        vendor=vendor,
        values=tuple(sorted(values.items())),
        sources=MappingProxyType(sources),
        calibrated=frozenset(cal_fields),
        calibration_date=cal_date,
        assumed=frozenset(assumed_fields - cal_fields),
    )


def with_overrides(spec: HardwareSpec, **changes: Any) -> HardwareSpec:
    """A copy of ``spec`` with some values replaced or added (for what-if studies and tests).

    Keys are field names (``hbm_bytes_per_s=...``) or dotted keys passed as ``**{"pipes.sfu.fp32": 32}``;
    each is checked against the GPU's vendor (an Apple spec takes no cp.async field).
    """
    for k in changes:
        try:
            F.check_key(k, spec.vendor)
        except ValueError as e:
            raise ValueError(f"unknown hardware field(s): {k} ({e})") from None
    changes = {F.bare_key(k): v for k, v in changes.items()}
    vals = dict(spec.values)
    vals.update(changes)
    srcs = dict(spec.sources)
    srcs.update({k: "override" for k in changes})
    return replace(spec, values=tuple(sorted(vals.items())), sources=MappingProxyType(srcs),
                   assumed=spec.assumed - set(changes))
