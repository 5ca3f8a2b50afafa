"""Scenario sweeps as data: a TOML file names a kernel family, problem shapes and knob sets.

Scenario file format (``scenarios/<name>.toml``)::

    name = "tile_sizes"                 # defaults to the file stem
    description = "..."
    family = "gemm"                     # a registered kernel family (`tilesim families`);
                                        # default "gemm", so files written before families existed
                                        # keep working
    hardware = "h200"                   # default "h200"
    shapes = [[4096, 4096, 4096], [2048, 2048, 2048]]   # the family's problem fields, in order
    # or, naming them:  shapes = [{ m = 4096, n = 4096, k = 4096 }]
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
it runs ``base`` alone. Knobs are the family's configuration fields other than its problem fields
(``KernelFamily.problem_fields``, e.g. m, n, k for GEMM); a family without problem fields needs no
``shapes``. Configurations are built by ``registry.get(family).make(**fields)`` and checked by the
family's ``check_fits``; combinations either rejects are kept as skipped rows carrying the
``ValueError`` text, never dropped. Duplicate configurations of one shape run once.

This module prints nothing; it writes only the CSV a caller asks for (:class:`SweepCSV`, row by row
as rows finish, resumable). Sweeps run in worker processes (``run_sweep(jobs=N)``) or on a Dask
cluster (``run_sweep(client=...)``).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import os
import tomllib
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import tilesim
from tilesim.api import resolve_hardware, simulate
from tilesim.hardware import HardwareSpec
from tilesim.kernels import registry
from tilesim.result import SimResult

Shape = tuple
"""The values of a family's problem fields, in ``problem_fields`` order (e.g. (m, n, k))."""

DEFAULT_FAMILY = "gemm"
"""The family of a scenario that names none (scenarios predate kernel families and were all GEMM)."""

COMPUTE_BOUND_FLOP_PER_BYTE = 8.0
"""Below this many useful FLOPs per compulsory HBM byte no GPU of the catalog is compute-bound:
the lowest FP32 ridge point there is the A100 SXM4's, 19.5 TFLOP/s / 2.04 TB/s = 9.6 FLOP/B
(datasheet values in tilesim/hardware/data/). Sweeps of such families (reductions, softmax,
layernorm) are ranked by effective bandwidth rather than TFLOP/s."""

_TOP_KEYS = ("name", "description", "family", "hardware", "shapes", "base", "grid", "configs")


def scenarios_dir() -> Path:
    """The built-in scenarios: ``tilesim/scenarios`` (in the repository a link to the top-level
    ``scenarios/`` folder; a wheel carries the files themselves, so a non-editable install has them)."""
    return Path(tilesim.__file__).parent / "scenarios"


def _freeze(d: Mapping[str, Any]) -> MappingProxyType:
    return MappingProxyType(dict(d))


def _is_scalar(v) -> bool:
    return isinstance(v, (int, float, str, bool))


@dataclass(frozen=True)
class Scenario:
    """A sweep as data: shapes x knob sets of one kernel family on one GPU.

    Build with :func:`load_scenario` or directly; the constructor checks the family, the shapes
    and every knob name, and raises ``ValueError`` naming the field."""

    name: str
    description: str = ""
    family: str = DEFAULT_FAMILY
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
        if not isinstance(self.family, str):
            raise ValueError(f"Scenario.family = {self.family!r}: must be a kernel family name")
        fam = registry.get(self.family)  # ValueError listing the known families
        object.__setattr__(self, "shapes", self._check_shapes(fam.problem_fields))
        if not isinstance(self.base, Mapping):
            raise ValueError(f"Scenario.base = {self.base!r}: must be a table of knobs")
        self._check_knobs("Scenario.base", self.base)
        object.__setattr__(self, "base", _freeze(self.base))
        grid = []
        for axis, values in (self.grid.items() if isinstance(self.grid, Mapping) else self.grid):
            if not isinstance(values, (list, tuple)) or not values:
                raise ValueError(f"Scenario.grid.{axis} = {values!r}: must be a non-empty list")
            vals = []
            for v in values:
                if isinstance(v, Mapping):
                    self._check_knobs(f"Scenario.grid.{axis}", v)
                    vals.append(_freeze(v))
                else:
                    self._check_knobs("Scenario.grid", {axis: v})
                    vals.append(v)
            grid.append((axis, tuple(vals)))
        object.__setattr__(self, "grid", tuple(grid))
        configs = []
        for i, c in enumerate(self.configs):
            if not isinstance(c, Mapping):
                raise ValueError(f"Scenario.configs[{i}] = {c!r}: must be a table of knobs")
            self._check_knobs(f"Scenario.configs[{i}]", c)
            configs.append(_freeze(c))
        object.__setattr__(self, "configs", tuple(configs))

    def _check_shapes(self, fields: tuple[str, ...]) -> tuple[Shape, ...]:
        want = f"[{', '.join(fields)}]"
        if not fields:
            if any(s != () and s != [] for s in self.shapes):
                raise ValueError(f"Scenario.shapes = {self.shapes!r}: family {self.family!r} has no "
                                 "problem fields; leave shapes out")
            return ((),)
        if not self.shapes:
            raise ValueError(f"Scenario.shapes: scenario {self.name!r} needs at least one {want} "
                             f"(the problem fields of family {self.family!r})")
        out = []
        for s in self.shapes:
            if isinstance(s, Mapping):
                if set(s) != set(fields):
                    raise ValueError(f"Scenario.shapes: {dict(s)!r} must name exactly {', '.join(fields)}")
                s = tuple(s[f] for f in fields)
            ok = (isinstance(s, (list, tuple)) and len(s) == len(fields) and all(_is_scalar(x) for x in s))
            if not ok:
                raise ValueError(f"Scenario.shapes: {s!r} must be {want} "
                                 f"(the problem fields of family {self.family!r})")
            out.append(tuple(s))
        return tuple(out)

    @property
    def kernel_family(self) -> registry.KernelFamily:
        return registry.get(self.family)

    @property
    def knob_names(self) -> tuple[str, ...]:
        """The keys a scenario may set: the family's configuration fields except the problem fields."""
        fam = self.kernel_family
        return tuple(k.name for k in fam.knobs() if k.name not in fam.problem_fields)

    def _check_knobs(self, where: str, knobs: Mapping[str, Any]) -> None:
        known = self.knob_names
        unknown = [k for k in knobs if k not in known]
        if unknown:
            raise ValueError(f"{where}: unknown {self.family} knob(s) {', '.join(map(repr, unknown))}; "
                             f"known: {', '.join(known)}")

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

        Configurations are built with the family's ``make`` and checked with its ``check_fits``
        against ``hardware`` (default: the scenario's GPU). Duplicates (equal configurations of
        one shape) are dropped; rejected ones are kept with the reason.
        """
        hw = resolve_hardware(hardware if hardware is not None else self.hardware)
        fam = self.kernel_family
        rows: list[SweepRow] = []
        seen: set = set()
        knob_sets = self.knob_sets()
        common = dict(family=fam.name, problem_fields=fam.problem_fields)
        for shape in self.shapes:
            problem = dict(zip(fam.problem_fields, shape, strict=True))
            for knobs in knob_sets:
                try:
                    cfg = fam.make(**problem, **knobs)
                    fam.check_fits(cfg, hw)
                    counts = fam.counts(cfg)
                except ValueError as e:
                    rows.append(SweepRow(shape=shape, knobs=_freeze(knobs), error=str(e), **common))
                    continue
                if cfg in seen:
                    continue
                seen.add(cfg)
                rows.append(SweepRow(shape=shape, knobs=_freeze(knobs), cfg=cfg, label=fam.label(cfg),
                                     full_label=fam.full_label(cfg), counts=_freeze(counts), **common))
        return rows


def is_scenario_file(path: Path) -> bool:
    """Whether ``path`` is a sweep scenario: a TOML file with a top-level ``shapes`` or ``family``
    (a file that is not valid TOML counts, so that loading it reports the error)."""
    try:
        with Path(path).open("rb") as fh:
            raw = tomllib.load(fh)
    except tomllib.TOMLDecodeError:
        return True
    except OSError:
        return False
    return "shapes" in raw or "family" in raw


def available_scenarios() -> list[str]:
    """Names of the sweep scenarios in ``scenarios/`` (files with a top-level ``shapes`` or ``family``)."""
    return [p.stem for p in sorted(scenarios_dir().glob("*.toml")) if is_scenario_file(p)]


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

    Raises ``ValueError`` naming the problem (unknown name or family, bad TOML, unknown key or knob).
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
    shapes = raw.get("shapes", ())
    if not isinstance(shapes, list | tuple):
        raise ValueError(f"{path.name}: shapes must be an array, got {shapes!r}")
    try:
        return Scenario(
            name=str(raw.get("name", path.stem)),
            description=str(raw.get("description", "")),
            family=raw.get("family", DEFAULT_FAMILY),
            hardware=raw.get("hardware", "h200"),
            shapes=tuple(shapes),
            base=raw.get("base", {}),
            grid=tuple(grid.items()),
            configs=tuple(configs),
            path=path,
        )
    except ValueError as e:
        raise ValueError(f"{path.name}: {e}") from e


_RESULT_KEYS = ("time_s", "tflops", "effective_hbm_bytes_per_s", "bound", "roofline_s", "hbm_read_bytes",
                "hbm_write_bytes", "hbm_bytes", "l2_load_bytes", "l2_store_bytes", "l2_bytes", "l2_hit_rate",
                "smem_bytes", "smem_wavefronts", "smem_conflict_wavefronts", "occupancy",
                "occupancy_limiter", "blocks_per_sm", "waves")


@dataclass(frozen=True)
class SweepRow:
    """One (shape, configuration) of a sweep: ``result`` when simulated, ``error`` when rejected.

    ``label`` is the family's short label (without the problem size), ``full_label`` the label with
    it; ``counts`` the family's analytic counts (``flops``, ``min_hbm_bytes``, ...)."""

    shape: Shape
    knobs: Mapping[str, Any]
    family: str = DEFAULT_FAMILY
    problem_fields: tuple[str, ...] = ()
    cfg: Any = None
    label: str = ""
    full_label: str = ""
    counts: Mapping[str, Any] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    result: SimResult | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        if not self.label:
            text = ",".join(f"{k}={v}" for k, v in self.knobs.items()) or "(base)"
            object.__setattr__(self, "label", text)
        if not self.full_label:
            object.__setattr__(self, "full_label", f"{self.label}@{self.shape_str}" if self.shape else self.label)

    @property
    def ok(self) -> bool:
        return self.result is not None

    @property
    def shape_str(self) -> str:
        """The problem size, e.g. ``4096x4096x4096``."""
        return "x".join(map(str, self.shape))

    @property
    def shape_desc(self) -> str:
        """The problem size with the field names, e.g. ``m x n x k = 4096x4096x4096``."""
        if not self.problem_fields:
            return self.shape_str
        return f"{' x '.join(self.problem_fields)} = {self.shape_str}"

    @property
    def effective_hbm_bytes_per_s(self) -> float | None:
        """Compulsory HBM bytes (the family's ``min_hbm_bytes``) over the predicted time."""
        need = self.counts.get("min_hbm_bytes")
        if self.result is None or not need or self.result.time_s <= 0:
            return None
        return float(need) / self.result.time_s

    def to_dict(self) -> dict[str, Any]:
        """A flat record for CSV and JSON: the same keys for every row of one family."""
        d: dict[str, Any] = {"family": self.family, "label": self.label, "full_label": self.full_label}
        fields = [f.name for f in dataclasses.fields(registry.get(self.family).config)]
        problem = dict(zip(self.problem_fields, self.shape, strict=False))
        for f in fields:
            if self.cfg is not None:
                d[f] = getattr(self.cfg, f)
            else:
                d[f] = problem.get(f, self.knobs.get(f))
        d["flops"] = self.counts.get("flops")
        d["min_hbm_bytes"] = self.counts.get("min_hbm_bytes")
        r = self.result
        t = r.traffic if r is not None else None
        values = {} if r is None else {
            "time_s": r.time_s, "tflops": r.tflops,
            "effective_hbm_bytes_per_s": self.effective_hbm_bytes_per_s, "bound": r.bound,
            "roofline_s": r.roofline_s, "hbm_read_bytes": t.hbm_read_bytes,
            "hbm_write_bytes": t.hbm_write_bytes, "hbm_bytes": t.hbm_bytes,
            "l2_load_bytes": t.l2_load_bytes, "l2_store_bytes": t.l2_store_bytes, "l2_bytes": t.l2_bytes,
            "l2_hit_rate": t.l2_hit_rate, "smem_bytes": t.smem_bytes, "smem_wavefronts": t.smem_wavefronts,
            "smem_conflict_wavefronts": t.smem_conflict_wavefronts, "occupancy": r.occupancy,
            "occupancy_limiter": r.occupancy_limiter, "blocks_per_sm": r.blocks_per_sm, "waves": r.waves,
        }
        for key in _RESULT_KEYS:
            d[key] = values.get(key)
        d["error"] = self.error
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


def _spec_state(hw: HardwareSpec) -> dict:
    """A picklable form of ``hw`` (its mappings as dicts) for worker processes."""
    state = {}
    for f in dataclasses.fields(hw):
        if not f.init:
            continue
        v = getattr(hw, f.name)
        state[f.name] = dict(v) if isinstance(v, Mapping) else v
    return state


def _spec_from_state(state: dict) -> HardwareSpec:
    return HardwareSpec(**{k: MappingProxyType(v) if isinstance(v, dict) else v for k, v in state.items()})


_WORKER_HW: HardwareSpec | None = None


def _init_worker(state: dict) -> None:
    global _WORKER_HW
    _WORKER_HW = _spec_from_state(state)


def _simulate_one(cfg, steady_state: bool, state: dict | None = None) -> tuple[str, Any]:
    """``("ok", SimResult)`` or ``("error", text)``: runs in a worker process (or inline)."""
    hw = _spec_from_state(state) if state is not None else _WORKER_HW
    try:
        return "ok", simulate(cfg, hw, steady_state=steady_state)
    except ValueError as e:
        return "error", str(e)


def default_jobs() -> int:
    """Worker processes of a sweep when not told: every CPU this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def run_sweep(scenario: Scenario | str | Path, hardware: str | HardwareSpec | None = None,
              on_result: Callable[[SweepRow, int, int], None] | None = None, *, jobs: int = 1,
              done: Mapping[str, SweepRow] | None = None, client=None,
              steady_state: bool = True) -> SweepResult:
    """Simulate every configuration of ``scenario`` (on ``hardware``, default the scenario's GPU).

    ``jobs`` worker processes simulate the configurations (1: in this process); ``client`` (a
    ``dask.distributed.Client``) sends them to a Dask cluster instead. ``done`` maps
    :func:`row_key` to rows finished by an earlier run (see :class:`SweepCSV`): they are kept as
    they are, not simulated again. ``on_result(row, done, total)`` is called as each row finishes
    (rejected and earlier-done rows first), in completion order; the result's rows are in scenario
    order. A ``ValueError`` raised while simulating one configuration becomes that row's
    ``error``; an unknown ``hardware`` raises ``ValueError``.
    """
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    if not (isinstance(jobs, int) and not isinstance(jobs, bool) and jobs >= 1):
        raise ValueError(f"jobs = {jobs!r}: must be an integer >= 1")
    hw = resolve_hardware(hardware if hardware is not None else scenario.hardware)
    rows: list[SweepRow] = scenario.expand(hw)
    total = len(rows)
    finished = 0
    todo: list[int] = []
    done = done or {}
    for i, row in enumerate(rows):
        old = done.get(row_key(row))
        if old is not None:
            rows[i] = old
        elif row.cfg is not None:
            todo.append(i)
            continue
        finished += 1
        if on_result is not None:
            on_result(rows[i], finished, total)

    def land(i: int, outcome: tuple[str, Any]) -> None:
        nonlocal finished
        kind, value = outcome
        rows[i] = dataclasses.replace(rows[i], **({"result": value} if kind == "ok" else {"error": value}))
        finished += 1
        if on_result is not None:
            on_result(rows[i], finished, total)

    if client is not None and todo:
        from distributed import as_completed as dask_completed  # noqa: PLC0415

        state = client.scatter(_spec_state(hw), broadcast=True)
        futures = {client.submit(_simulate_one, rows[i].cfg, steady_state, state, pure=False): i for i in todo}
        for fut in dask_completed(futures):
            land(futures[fut], fut.result())
    elif jobs == 1 or len(todo) <= 1:
        state = _spec_state(hw)
        _init_worker(state)
        for i in todo:
            land(i, _simulate_one(rows[i].cfg, steady_state))
    elif todo:
        with ProcessPoolExecutor(max_workers=min(jobs, len(todo)), initializer=_init_worker,
                                 initargs=(_spec_state(hw),)) as pool:
            futures = {pool.submit(_simulate_one, rows[i].cfg, steady_state): i for i in todo}
            try:
                for fut in as_completed(futures):
                    land(futures[fut], fut.result())
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
    return SweepResult(scenario=scenario, hardware=hw.name, rows=tuple(rows))


def row_key(row: SweepRow) -> str:
    """A row's identity within one sweep (its ``full_label``: the tiling and the problem size)."""
    return row.full_label


def _num(text: str, kind=float):
    return None if text in ("", None) else kind(float(text)) if kind is int else kind(text)


def row_from_record(record: Mapping[str, str], row: SweepRow) -> SweepRow:
    """``row`` (from :meth:`Scenario.expand`) with the outcome a CSV record of it holds: the
    error, or a :class:`SimResult` rebuilt from the recorded columns (counters the CSV does not
    keep are 0, and there is no timeline)."""
    from tilesim.result import SimResult, Traffic  # noqa: PLC0415

    if record.get("error"):
        return dataclasses.replace(row, error=record["error"])
    t = float(record["time_s"])
    traffic = Traffic(hbm_read_bytes=float(record["hbm_read_bytes"]), hbm_write_bytes=float(record["hbm_write_bytes"]),
                      l2_load_bytes=float(record["l2_load_bytes"]), l2_store_bytes=float(record["l2_store_bytes"]),
                      l2_hit_rate=float(record["l2_hit_rate"]), l1_wavefronts=0.0,
                      smem_bytes=float(record["smem_bytes"]), smem_wavefronts=float(record["smem_wavefronts"]),
                      smem_conflict_wavefronts=float(record["smem_conflict_wavefronts"]),
                      register_operand_bytes=0.0, instructions=0.0, ffma=0.0)
    result = SimResult(kernel=row.full_label, hardware="", time_s=t, bound=record["bound"], utilization={},
                       traffic=traffic, flops=float(record["tflops"]) * 1e12 * t, blocks=0,
                       blocks_per_sm=_num(record["blocks_per_sm"], int) or 0,
                       occupancy=float(record["occupancy"]), occupancy_limiter=record["occupancy_limiter"],
                       waves=float(record["waves"]), roofline_s=float(record["roofline_s"]), events=0)
    return dataclasses.replace(row, result=result)


class SweepCSV:
    """A sweep's CSV, written row by row as rows finish, and resumable.

    Each finished row is appended as one line and flushed, so a killed sweep leaves every finished
    row on disk (a line cut short by the kill is dropped on resume). :meth:`done` gives the rows an
    earlier run finished (``run_sweep(done=...)`` skips them); :meth:`finish` rewrites the file in
    scenario order, so a resumed sweep's CSV equals an uninterrupted one. A file whose header is
    not this family's columns is refused (``ValueError``) unless ``fresh``.
    """

    def __init__(self, path: str | Path, family: str, *, fresh: bool = False) -> None:
        self.path = Path(path)
        self.columns = _columns(family)
        self._records: dict[str, dict[str, str]] = {}
        if self.path.exists() and not fresh:
            self._records = self._read()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("w", newline="") as fh:  # header + kept records, no cut line
            w = csv.DictWriter(fh, fieldnames=self.columns)
            w.writeheader()
            w.writerows(self._records.values())
        self._fh = self.path.open("a", newline="")

    def _read(self) -> dict[str, dict[str, str]]:
        text = self.path.read_text()
        if not text.strip():
            return {}
        if not text.endswith("\n"):
            text = text[: text.rfind("\n") + 1]  # the line a kill cut short
        reader = csv.reader(io.StringIO(text))
        header = next(reader, None)
        if header != list(self.columns):
            raise ValueError(f"{self.path}: its columns are not those of this sweep's family; "
                             "choose another --csv or start afresh (--fresh)")
        out = {}
        for values in reader:
            if len(values) == len(header):
                rec = dict(zip(header, values, strict=True))
                out[rec["full_label"]] = rec
        return out

    def done(self, pending: Iterable[SweepRow]) -> dict[str, SweepRow]:
        """The rows of ``pending`` this file already holds, rebuilt from their records."""
        out = {}
        for row in pending:
            rec = self._records.get(row_key(row))
            if rec is not None:
                out[row_key(row)] = row_from_record(rec, row)
        return out

    @staticmethod
    def _record(row: SweepRow) -> dict[str, str]:
        return {k: ("" if v is None else str(v)) for k, v in row.to_dict().items()}

    def write(self, row: SweepRow) -> None:
        key = row_key(row)
        if key in self._records:
            return
        rec = self._record(row)
        self._records[key] = rec
        buf = io.StringIO()
        csv.DictWriter(buf, fieldnames=self.columns).writerow(rec)
        self._fh.write(buf.getvalue())
        self._fh.flush()

    def finish(self, rows: Iterable[SweepRow]) -> Path:
        """Rewrite the file with ``rows``' records in their order (atomically) and close it."""
        self._fh.close()
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=self.columns)
            w.writeheader()
            for row in rows:
                w.writerow(self._records.get(row_key(row)) or self._record(row))
        os.replace(tmp, self.path)
        return self.path

    def close(self) -> None:
        self._fh.close()


def _columns(family: str) -> list[str]:
    fields = [f.name for f in dataclasses.fields(registry.get(family).config)]
    return ["family", "label", "full_label", *fields, "flops", "min_hbm_bytes", *_RESULT_KEYS, "error"]


def _work(row: SweepRow, key: str) -> float:
    value = row.counts.get(key)
    if value is None and key == "flops" and row.result is not None:
        value = row.result.flops
    return float(value or 0.0)


def throughput_metric(rows: Iterable[SweepRow]) -> str:
    """How to show the rows' speed: "tflops" when every simulated row does at least
    :data:`COMPUTE_BOUND_FLOP_PER_BYTE` useful FLOPs per compulsory HBM byte (the family's analytic
    counts), "bandwidth" (compulsory bytes per second) when they all know their compulsory bytes,
    else "time". ``ValueError`` when no row was simulated."""
    ok = [r for r in rows if r.ok]
    if not ok:
        raise ValueError("rows: no simulated rows")
    if all(_work(r, "flops") >= COMPUTE_BOUND_FLOP_PER_BYTE * _work(r, "min_hbm_bytes") > 0 for r in ok):
        return "tflops"
    if all(_work(r, "min_hbm_bytes") > 0 for r in ok):
        return "bandwidth"
    return "tflops" if all(_work(r, "flops") > 0 for r in ok) else "time"


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
