"""The simulator's own speed: one representative configuration per registered kernel family.

A family's representative configuration is, in this order: its configuration defaults with the
problem fields from :data:`BENCH_PROBLEMS`; its configuration defaults alone (when every field has
one); or the first configuration of its validation suite (when a ``suite`` loader is given: the
CLI passes the validation harness's ``load_suite``, imported only there). A family with none of
these is reported, not silently skipped. Each case is timed ``repeat`` times, lowering included,
and again with every integer problem field :data:`SCALE` times larger: the steady-state holds make
the simulator's time nearly independent of the problem size, and :data:`TARGETS` say by how much.

Beside them: every configuration of the built-in scenarios timed once each
(:func:`time_scenario_configs`, :func:`summarize_walls`, against :data:`SCENARIO_TARGETS`), and a
benchmark sweep of 1,188 configurations (:func:`bench_sweep_scenario`, against
:data:`SWEEP_TARGET_S_PER_1000`).

No printing here: the CLI prints.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tilesim.api import simulate
from tilesim.kernels import registry

BENCH_PROBLEMS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # family: (representative problem, smoke-test problem); the other knobs take the defaults
    "gemm": ({"m": 4096, "n": 4096, "k": 4096}, {"m": 256, "n": 256, "k": 256}),
    "reduction": ({"n": 1 << 26}, {"n": 1 << 16}),
    "softmax": ({"rows": 4096, "cols": 1024}, {"rows": 256, "cols": 256}),
    "layernorm": ({"rows": 4096, "cols": 1024}, {"rows": 256, "cols": 256}),
}
"""Problem sizes of the benchmark cases: the README's 4096^3 GEMM, and sizes of the built-in
scenarios (scenarios/reduction_ladder.toml, softmax_variants.toml, layernorm_variants.toml)."""

SCALE = 4
"""How much larger every integer problem field is in the scaling case (4096^3 -> 16384^3 for GEMM)."""

TARGETS = {"median_s": 0.25, "scaling_ratio": 3.0}
"""The speed targets of the project (README, "Speed of the simulator"): a case's median wall time
at most 0.25 s, and the scaled case at most 3x the representative one."""


@dataclass(frozen=True)
class BenchCase:
    """One family's benchmark: its configuration and the scaled one (``None``: none, ``reason``)."""

    family: str
    config: Any = None
    scaled: Any = None
    reason: str = ""


@dataclass(frozen=True)
class BenchTiming:
    """Wall times (seconds) of ``repeat`` simulations of one configuration, lowering included."""

    walls_s: tuple[float, ...]
    predicted_s: float

    @property
    def median_s(self) -> float:
        return statistics.median(self.walls_s)

    @property
    def min_s(self) -> float:
        return min(self.walls_s)


def _required(fam: registry.KernelFamily) -> list[str]:
    return [f.name for f in dataclasses.fields(fam.config)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]


def _representative(fam: registry.KernelFamily, smoke: bool, suite: Callable | None):
    """(the family's benchmark configuration, "") or (None, why there is none)."""
    try:
        if fam.name in BENCH_PROBLEMS:
            return fam.make(**BENCH_PROBLEMS[fam.name][1 if smoke else 0]), ""
        if not _required(fam):
            return fam.make(), ""
    except ValueError as e:
        return None, str(e)
    if suite is not None:
        try:
            first = suite(fam.name)
        except (ValueError, OSError, ImportError) as e:
            return None, f"no bench problem, and its validation suite gives none ({e})"
        if first is not None:
            return first, ""
    return None, f"no bench problem for {', '.join(_required(fam))} (add one to tilesim.bench.BENCH_PROBLEMS)"


def bench_cases(smoke: bool = False, suite: Callable | None = None) -> list[BenchCase]:
    """One case per registered family. ``suite(name)`` may return the first configuration of the
    family's validation suite (or ``None``); it is consulted only for families not in
    :data:`BENCH_PROBLEMS` whose problem fields have no defaults."""
    cases = []
    for fam in registry.families().values():
        cfg, why = _representative(fam, smoke, suite)
        if cfg is None:
            cases.append(BenchCase(fam.name, reason=why))
            continue
        scaled, reason = None, ""
        big = {f: getattr(cfg, f) * SCALE for f in fam.problem_fields
               if isinstance(getattr(cfg, f), int) and not isinstance(getattr(cfg, f), bool)}
        if big:
            try:
                scaled = dataclasses.replace(cfg, **big)
            except ValueError as e:
                reason = f"scaled problem rejected: {e}"
        else:
            reason = "no integer problem field to scale"
        cases.append(BenchCase(fam.name, cfg, scaled, reason))
    return cases


def time_config(config, hardware, repeat: int) -> BenchTiming:
    """Simulate ``config`` ``repeat`` times (lowering included) and keep the wall times."""
    if repeat < 1:
        raise ValueError(f"repeat = {repeat}: must be >= 1")
    walls = []
    result = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = simulate(config, hardware)
        walls.append(time.perf_counter() - t0)
    return BenchTiming(tuple(walls), result.time_s)


# ----------------------------------------------------------------------------------------------
# every configuration of the built-in scenarios, and a sweep of 1,000 configurations

SCENARIO_TARGETS = {"worst_s": 0.1, "median_s": 0.020}
"""Issue #11's targets for every configuration of the built-in scenarios (``tilesim/scenarios``),
each simulated once, lowering included: none above 0.1 s, a median at most 20 ms."""

SWEEP_TARGET_S_PER_1000 = 30.0
"""Issue #11's target for a whole sweep: 1,000 configurations in at most 30 s on 2 cores."""


def bench_sweep_scenario():
    """The benchmark sweep: 2-D register tilings, block tiles 32 to 128, k-steps 8 to 32, thread
    tiles 4 or 8, plain or vectorized loads, on six GEMM shapes (1,188 valid configurations of
    1,296: the register estimate rejects 18 tilings a shape; the kind of grid issue #11 timed:
    1,152 reg2d tilings, tiles 32 to 128, four shapes)."""
    from tilesim.sweep import Scenario

    grid = {"bm": [32, 64, 128], "bn": [32, 64, 128], "bk": [8, 16, 32], "tm": [4, 8], "tn": [4, 8],
            "vectorize": [False, True]}
    return Scenario(name="bench_1000", family="gemm", hardware="h200",
                    description="reg2d tilings 32-128 x k 8-32 x thread tiles 4/8 x vectorize, six shapes",
                    shapes=((4096, 4096, 4096), (2048, 2048, 2048), (3000, 2000, 1000), (16384, 256, 4096),
                            (1024, 1024, 1024), (8192, 8192, 1024)),
                    base={"variant": "reg2d"}, grid=tuple(grid.items()))


@dataclass(frozen=True)
class ConfigWall:
    """The wall time of one simulation of one configuration of a scenario, lowering included."""

    scenario: str
    label: str
    wall_s: float


def time_scenario_configs(scenarios, hardware=None,
                          on_result: Callable[[ConfigWall], None] | None = None) -> list[ConfigWall]:
    """Simulate every valid configuration of each scenario once, in this process, in scenario
    order (on ``hardware``, default each scenario's GPU); the wall time of each, lowering included.
    Configurations a scenario rejects (they break a hardware limit) are not timed."""
    from tilesim.api import resolve_hardware

    out = []
    for sc in scenarios:
        hw = resolve_hardware(hardware if hardware is not None else sc.hardware)
        for row in sc.expand(hw):
            if row.cfg is None:
                continue
            t0 = time.perf_counter()
            simulate(row.cfg, hw)
            got = ConfigWall(sc.name, row.full_label, time.perf_counter() - t0)
            out.append(got)
            if on_result is not None:
                on_result(got)
    return out


SUITE_MEDIAN_TARGETS_S = {"tc_gemm": 0.050}
"""Issue #9's target for the tensor-core family: simulating any configuration takes at most 50 ms, the
median over every configuration of its validation suite (``tilesim bench --suite tc_gemm``)."""


def time_configs(family: str, configs, hardware, on_result: Callable[[ConfigWall], None] | None = None
                 ) -> list[ConfigWall]:
    """Simulate each of a family's ``configs`` once, in this process and in order, on ``hardware``: the
    wall time of each, lowering included (``ConfigWall.scenario`` names the family)."""
    fam = registry.get(family)
    out = []
    for cfg in configs:
        t0 = time.perf_counter()
        simulate(cfg, hardware)
        got = ConfigWall(family, fam.full_label(cfg), time.perf_counter() - t0)
        out.append(got)
        if on_result is not None:
            on_result(got)
    return out


def percentile(sorted_values, q: float) -> float:
    """The ``q``-th percentile (0-100) of ascending values, linearly interpolated."""
    if not sorted_values:
        raise ValueError("percentile: no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile: q = {q}: must be within 0..100")
    pos = (len(sorted_values) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclass(frozen=True)
class WallSummary:
    """Median, 90th percentile and worst of some configurations' wall times (seconds)."""

    count: int
    median_s: float
    p90_s: float
    worst_s: float
    worst: ConfigWall
    over: tuple[ConfigWall, ...]  # above SCENARIO_TARGETS["worst_s"], slowest first

    @property
    def meets_targets(self) -> bool:
        return not self.over and self.median_s <= SCENARIO_TARGETS["median_s"]


def summarize_walls(walls: list[ConfigWall]) -> WallSummary:
    """The summary of ``walls`` (at least one) against :data:`SCENARIO_TARGETS`."""
    if not walls:
        raise ValueError("summarize_walls: no configurations timed")
    ordered = sorted(walls, key=lambda w: w.wall_s)
    values = [w.wall_s for w in ordered]
    over = tuple(w for w in reversed(ordered) if w.wall_s > SCENARIO_TARGETS["worst_s"])
    return WallSummary(len(values), percentile(values, 50), percentile(values, 90), values[-1], ordered[-1], over)
