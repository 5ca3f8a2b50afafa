"""Scenario sweeps as data: a TOML file names shapes and GEMM tilings; ``run_sweep`` simulates them.

Scenario file format (``scenarios/<name>.toml``)::

    name = "tile_sizes"                 # defaults to the file stem
    description = "..."
    hardware = "h200"                   # default "h200"
    shapes = [[4096, 4096, 4096], [2048, 2048, 2048]]   # [m, n, k] each
    base = { variant = "reg2d" }        # knobs shared by every configuration

    [grid]                              # cartesian product, each point merged over ``base``
    bm = [64, 128]
    tm = [4, 8]
    # An axis whose values are tables merges each table, so coupled knobs move together:
    pipeline = [{ pipeline = "none" }, { pipeline = "cp_async", stages = 3 }]

    [[configs]]                         # explicit configurations, each merged over ``base``
    variant = "warp"
    bm = 128

A scenario may have ``grid``, ``configs`` or both (their union, grid points first); with neither
it runs ``base`` alone. Knobs are :class:`~tilesim.kernels.gemm_config.GemmConfig` fields other
than ``m, n, k``. Every knob set is crossed with every shape; combinations that
:class:`GemmConfig` or :func:`~tilesim.kernels.gemm_config.check_fits` reject are kept as skipped
rows carrying the ``ValueError`` text, not raised. Duplicate configurations of one shape run once.

This module reads the scenario file and nothing else: no printing, no writing.
"""

from __future__ import annotations

import dataclasses
import itertools
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import tilesim
from tilesim.api import resolve_hardware, simulate
from tilesim.hardware import HardwareSpec
from tilesim.kernels.gemm_config import GemmConfig, check_fits
from tilesim.result import SimResult

Shape = tuple[int, int, int]

KNOBS = tuple(f.name for f in dataclasses.fields(GemmConfig) if f.name not in ("m", "n", "k"))
"""The keys a scenario may set: every GemmConfig field except the shape."""

_TOP_KEYS = ("name", "description", "hardware", "shapes", "base", "grid", "configs")


def scenarios_dir() -> Path:
    """The repository's ``scenarios/`` folder (next to the ``tilesim`` package)."""
    return Path(tilesim.__file__).resolve().parents[1] / "scenarios"


def _freeze(d: Mapping[str, Any]) -> MappingProxyType:
    return MappingProxyType(dict(d))


def _check_knobs(where: str, knobs: Mapping[str, Any]) -> None:
    unknown = [k for k in knobs if k not in KNOBS]
    if unknown:
        raise ValueError(f"{where}: unknown knob(s) {', '.join(map(repr, unknown))}; "
                         f"known: {', '.join(KNOBS)}")


@dataclass(frozen=True)
class Scenario:
    """A sweep as data: shapes x knob sets on one GPU. Build with :func:`load_scenario` or directly."""

    name: str
    description: str = ""
    hardware: str = "h200"
    shapes: tuple[Shape, ...] = ()
    base: Mapping[str, Any] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    grid: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    configs: tuple[Mapping[str, Any], ...] = ()
    path: Path | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Scenario.name = {self.name!r}: must be a non-empty string")
        if not isinstance(self.hardware, str) or not self.hardware:
            raise ValueError(f"Scenario.hardware = {self.hardware!r}: must be a GPU name")
        if not self.shapes:
            raise ValueError(f"Scenario.shapes: scenario {self.name!r} needs at least one [m, n, k]")
        shapes = []
        for s in self.shapes:
            ok = (isinstance(s, (list, tuple)) and len(s) == 3
                  and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in s))
            if not ok:
                raise ValueError(f"Scenario.shapes: {s!r} must be [m, n, k] of positive integers")
            shapes.append(tuple(s))
        object.__setattr__(self, "shapes", tuple(shapes))
        if not isinstance(self.base, Mapping):
            raise ValueError(f"Scenario.base = {self.base!r}: must be a table of knobs")
        _check_knobs("Scenario.base", self.base)
        object.__setattr__(self, "base", _freeze(self.base))
        grid = []
        for axis, values in (self.grid.items() if isinstance(self.grid, Mapping) else self.grid):
            if not isinstance(values, (list, tuple)) or not values:
                raise ValueError(f"Scenario.grid.{axis} = {values!r}: must be a non-empty list")
            vals = []
            for v in values:
                if isinstance(v, Mapping):
                    _check_knobs(f"Scenario.grid.{axis}", v)
                    vals.append(_freeze(v))
                else:
                    _check_knobs("Scenario.grid", {axis: v})
                    vals.append(v)
            grid.append((axis, tuple(vals)))
        object.__setattr__(self, "grid", tuple(grid))
        configs = []
        for i, c in enumerate(self.configs):
            if not isinstance(c, Mapping):
                raise ValueError(f"Scenario.configs[{i}] = {c!r}: must be a table of knobs")
            _check_knobs(f"Scenario.configs[{i}]", c)
            configs.append(_freeze(c))
        object.__setattr__(self, "configs", tuple(configs))

    def knob_sets(self) -> list[dict[str, Any]]:
        """Every knob set (base merged with each grid point, then each config), in file order."""
        out: list[dict[str, Any]] = []
        if self.grid:
            axes = [a for a, _ in self.grid]
            for point in itertools.product(*(vals for _, vals in self.grid)):
                knobs = dict(self.base)
                for axis, v in zip(axes, point, strict=True):
                    knobs.update(v if isinstance(v, Mapping) else {axis: v})
                out.append(knobs)
        for c in self.configs:
            out.append({**self.base, **c})
        if not self.grid and not self.configs:
            out.append(dict(self.base))
        return out

    def expand(self, hardware: str | HardwareSpec | None = None) -> list[SweepRow]:
        """All (shape, knob set) rows, pending ones with ``cfg`` set, rejected ones with ``error``.

        Configurations are checked with :func:`check_fits` against ``hardware`` (default: the
        scenario's GPU). Duplicates (equal GemmConfig for one shape) are dropped.
        """
        hw = resolve_hardware(hardware if hardware is not None else self.hardware)
        rows: list[SweepRow] = []
        seen: set[GemmConfig] = set()
        knob_sets = self.knob_sets()
        for shape in self.shapes:
            for knobs in knob_sets:
                try:
                    cfg = GemmConfig(*shape, **knobs)
                    check_fits(cfg, hw)
                except ValueError as e:
                    rows.append(SweepRow(shape=shape, knobs=_freeze(knobs), error=str(e)))
                    continue
                if cfg in seen:
                    continue
                seen.add(cfg)
                rows.append(SweepRow(shape=shape, knobs=_freeze(knobs), cfg=cfg))
        return rows


def available_scenarios() -> list[str]:
    """Names of the sweep scenarios in ``scenarios/`` (files with a top-level ``shapes`` key)."""
    names = []
    for p in sorted(scenarios_dir().glob("*.toml")):
        try:
            with p.open("rb") as fh:
                if "shapes" in tomllib.load(fh):
                    names.append(p.stem)
        except (OSError, tomllib.TOMLDecodeError):
            continue
    return names


def _resolve_path(path_or_name: str | Path) -> Path:
    p = Path(path_or_name)
    if p.suffix == ".toml" or p.exists() or len(p.parts) > 1:
        if not p.is_file():
            raise ValueError(f"scenario file {str(p)!r} does not exist")
        return p
    q = scenarios_dir() / f"{p.name}.toml"
    if not q.is_file():
        raise ValueError(f"unknown scenario {str(path_or_name)!r}; known: {', '.join(available_scenarios())}")
    return q


def load_scenario(path_or_name: str | Path) -> Scenario:
    """Read a scenario: a path to a TOML file, or a name in ``scenarios/`` ("tile_sizes").

    Raises ``ValueError`` naming the problem (unknown name, bad TOML, unknown key or knob).
    """
    path = _resolve_path(path_or_name)
    try:
        with path.open("rb") as fh:
            raw = tomllib.load(fh)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path.name}: invalid TOML: {e}") from e
    unknown = [k for k in raw if k not in _TOP_KEYS]
    if unknown:
        raise ValueError(f"{path.name}: unknown key(s) {', '.join(map(repr, unknown))}; "
                         f"a scenario has {', '.join(_TOP_KEYS)}")
    configs = raw.get("configs", [])
    if not isinstance(configs, list):
        raise ValueError(f"{path.name}: configs must be an array of tables ([[configs]])")
    grid = raw.get("grid", {})
    if not isinstance(grid, dict):
        raise ValueError(f"{path.name}: grid must be a table of knob = [values]")
    try:
        return Scenario(
            name=str(raw.get("name", path.stem)),
            description=str(raw.get("description", "")),
            hardware=raw.get("hardware", "h200"),
            shapes=tuple(raw.get("shapes", ())),
            base=raw.get("base", {}),
            grid=tuple(grid.items()),
            configs=tuple(configs),
            path=path,
        )
    except ValueError as e:
        raise ValueError(f"{path.name}: {e}") from e


@dataclass(frozen=True)
class SweepRow:
    """One (shape, configuration) of a sweep: ``result`` when simulated, ``error`` when rejected."""

    shape: Shape
    knobs: Mapping[str, Any]
    cfg: GemmConfig | None = None
    result: SimResult | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.result is not None

    @property
    def label(self) -> str:
        if self.cfg is not None:
            return self.cfg.label
        return ",".join(f"{k}={v}" for k, v in self.knobs.items()) or "(base)"

    @property
    def shape_str(self) -> str:
        return "x".join(map(str, self.shape))

    def to_dict(self) -> dict[str, Any]:
        """A flat record (the same keys for every row) for CSV and JSON."""
        m, n, k = self.shape
        d: dict[str, Any] = {"label": self.label, "m": m, "n": n, "k": k}
        cfg_d = self.cfg.to_dict() if self.cfg is not None else {}
        for knob in KNOBS:
            d[knob] = cfg_d.get(knob, self.knobs.get(knob))
        r = self.result
        t = r.traffic if r is not None else None
        d.update({
            "time_s": r.time_s if r else None,
            "tflops": r.tflops if r else None,
            "bound": r.bound if r else None,
            "roofline_s": r.roofline_s if r else None,
            "hbm_read_bytes": t.hbm_read_bytes if t else None,
            "hbm_write_bytes": t.hbm_write_bytes if t else None,
            "hbm_bytes": t.hbm_bytes if t else None,
            "l2_load_bytes": t.l2_load_bytes if t else None,
            "l2_store_bytes": t.l2_store_bytes if t else None,
            "l2_bytes": t.l2_bytes if t else None,
            "l2_hit_rate": t.l2_hit_rate if t else None,
            "smem_bytes": t.smem_bytes if t else None,
            "smem_wavefronts": t.smem_wavefronts if t else None,
            "smem_conflict_wavefronts": t.smem_conflict_wavefronts if t else None,
            "occupancy": r.occupancy if r else None,
            "occupancy_limiter": r.occupancy_limiter if r else None,
            "blocks_per_sm": r.blocks_per_sm if r else None,
            "waves": r.waves if r else None,
            "error": self.error,
        })
        return d


@dataclass(frozen=True)
class SweepResult:
    """All rows of one sweep, in scenario order (shapes outer, knob sets inner)."""

    scenario: Scenario
    hardware: str
    rows: tuple[SweepRow, ...]

    @property
    def ok(self) -> tuple[SweepRow, ...]:
        return tuple(r for r in self.rows if r.ok)

    @property
    def skipped(self) -> tuple[SweepRow, ...]:
        return tuple(r for r in self.rows if not r.ok)

    def by_shape(self) -> dict[Shape, list[SweepRow]]:
        """Simulated rows per shape, fastest first."""
        out: dict[Shape, list[SweepRow]] = {s: [] for s in self.scenario.shapes}
        for r in self.ok:
            out.setdefault(r.shape, []).append(r)
        for rows in out.values():
            rows.sort(key=lambda r: r.result.time_s)
        return out

    def best(self) -> dict[Shape, SweepRow]:
        return best_per_shape(self.rows)


def run_sweep(scenario: Scenario | str | Path, hardware: str | HardwareSpec | None = None,
              on_result: Callable[[SweepRow, int, int], None] | None = None) -> SweepResult:
    """Simulate every configuration of ``scenario`` (on ``hardware``, default the scenario's GPU).

    ``on_result(row, done, total)`` is called after each row (rejected ones included), e.g. for a
    progress bar. A ``ValueError`` raised while simulating one configuration becomes that row's
    ``error``; an unknown ``hardware`` raises ``ValueError``.
    """
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    hw = resolve_hardware(hardware if hardware is not None else scenario.hardware)
    pending = scenario.expand(hw)
    total = len(pending)
    rows: list[SweepRow] = []
    for i, row in enumerate(pending, start=1):
        if row.cfg is not None:
            try:
                row = dataclasses.replace(row, result=simulate(row.cfg, hw))
            except ValueError as e:
                row = dataclasses.replace(row, error=str(e))
        rows.append(row)
        if on_result is not None:
            on_result(row, i, total)
    return SweepResult(scenario=scenario, hardware=hw.name, rows=tuple(rows))


def best_per_shape(rows: Iterable[SweepRow]) -> dict[Shape, SweepRow]:
    """The fastest simulated row of each shape (shapes in first-seen order; failed rows ignored)."""
    best: dict[Shape, SweepRow] = {}
    for r in rows:
        if not r.ok:
            continue
        cur = best.get(r.shape)
        if cur is None or r.result.time_s < cur.result.time_s:
            best[r.shape] = r
    return best
