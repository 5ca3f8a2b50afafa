"""Tuning: search a family's whole knob space for the fastest configuration of one problem.

:func:`tune` enumerates the family's knob space (``tilesim/kernels/<family>/space.py``, a function
``space(problem) -> Iterable[knobs]`` yielding knob mappings, or configuration objects), builds each
configuration (those whose constructor raises ``ValueError`` are counted as *invalid*, by reason),
drops those the GPU cannot launch (``family.check_fits``, the launch limits and the device memory of
:func:`tilesim.analytic.checks.check_program`: *unfit*, by reason), computes a lower bound of the
simulator's time for each survivor (:func:`lower_bound`), and simulates them in order of increasing
bound, in worker processes (the sweep's), until the next bound is no less than the ``top``-th best
simulated time: every configuration left then is *pruned*, since it cannot enter the top ``top``.
Pruning never drops the simulator's best, because the bound never exceeds the simulated time
(``tests/test_tune.py`` checks it on samples of every family's space).

The lower bound (:func:`lower_bound`) is the largest of these times, plus the launch overhead, summed
over the kernel's launches; each is a floor the engine (:mod:`tilesim.engine.sim`) cannot beat, since
its time is at least the busy time of every channel:

* per-SM channels (issue slots, shared-memory wavefronts, L1 cycles, each math pipe and the tensor
  cores): one block's amounts over every step (the cost model's :func:`tilesim.cost.step_cost`, the
  numbers the engine itself uses) times the block groups each SM runs, ``ceil(blocks / SMs)``, at
  the GPU's top SM clock (the engine may lower it under tensor load, never raise it);
* latency: each step takes at least its critical path, steps of one block run in turn and each
  block slot runs ``ceil(ceil(blocks / SMs) / blocks per SM)`` blocks in turn;
* L2: the bytes of loads that bypass the L1 (cp.async, TMA) and of stores, at the L2 rate;
* HBM: the compulsory input bytes (every input read once: ``min_hbm_bytes`` less the bytes
  written) plus the share of the output the L2 cannot keep dirty, at the rate of the kernel's
  read/write mix (:meth:`~tilesim.hardware.HardwareSpec.hbm_rate_at`);
* FP32: the useful FP32 FLOPs at the chip's peak.

This module prints nothing and writes nothing; ``tilesim tune`` (:mod:`tilesim.cli.tune`) does.
"""

from __future__ import annotations

import dataclasses
import heapq
import importlib
import importlib.util
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from tilesim import sweep as sweep_mod
from tilesim.api import resolve_hardware
from tilesim.engine.floors import program_terms
from tilesim.hardware import HardwareSpec
from tilesim.kernels import registry
from tilesim.sweep import SweepRow

DEFAULT_TOP = 5
BOUND_CHUNK = 64  # configurations per bound task sent to a worker process
BOUND_REL_SLACK = 1e-6
"""The bound is lowered by this fraction: the engine's channel times and these terms are float sums
of the same amounts in another order (an L2-bound kernel's bound equals its simulated time to ~1e-16)."""


# ----------------------------------------------------------------------------------------------
# the lower bound

@dataclass(frozen=True)
class LowerBound:
    """A floor of the simulator's time for one configuration: ``time_s``, the term that sets it
    (``limiter``) and every term in seconds (``terms``, summed over the kernel's launches)."""

    time_s: float
    limiter: str
    terms: dict[str, float]


def lower_bound(cfg, hardware: str | HardwareSpec = "h200") -> LowerBound:
    """A lower bound of ``simulate(cfg, hardware).time_s`` from the configuration's tile programs
    and the cost model alone (no simulation; a few milliseconds). Raises ``ValueError`` (one line)
    when the configuration cannot run on the GPU, as :func:`tilesim.simulate` would."""
    hw = resolve_hardware(hardware)
    fam = registry.family_of(cfg)
    fam.check_fits(cfg, hw)
    progs = fam.lower(cfg)
    progs = progs if isinstance(progs, tuple) else (progs,)
    total = 0.0
    terms: dict[str, float] = {}
    limiter, worst = "", -1.0
    for p in progs:
        t = program_terms(p, hw)
        name = max(t, key=t.get)
        total += t[name] + hw.launch_overhead_s
        if t[name] > worst:
            limiter, worst = name, t[name]
        for k, v in t.items():
            terms[k] = terms.get(k, 0.0) + v
    return LowerBound(time_s=total * (1.0 - BOUND_REL_SLACK), limiter=limiter, terms=terms)


# ----------------------------------------------------------------------------------------------
# the space, the problem


def load_space(family: str) -> Callable[[dict], Iterable]:
    """The family's ``space`` function (``tilesim.kernels.<family>.space.space``); ``ValueError``
    for an unknown family or one that offers no knob space."""
    fam = registry.get(family)
    module = f"tilesim.kernels.{fam.name}.space"
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:
            raise
        with_space = [n for n in registry.families() if _has_space(n)]
        raise ValueError(f"family {fam.name!r} offers no knob space to tune (no {module.replace('.', '/')}.py); "
                         f"families with one: {', '.join(with_space) or 'none'}") from None
    fn = getattr(mod, "space", None)
    if not callable(fn):
        raise ValueError(f"{module}: has no function space(problem)")
    return fn


def _has_space(family: str) -> bool:
    return importlib.util.find_spec(f"tilesim.kernels.{family}.space") is not None


def parse_problem(family: str, shape: str | Iterable[int]) -> dict[str, int]:
    """The problem fields of ``family`` from ``"4096x4096x4096"`` (the ``problem_fields`` in order)
    or a sequence of ints; ``ValueError`` naming the shape and the fields wanted."""
    fam = registry.get(family)
    fields = fam.problem_fields
    want = "x".join(fields) or "(none)"
    if isinstance(shape, str):
        parts = [s.strip() for s in shape.lower().split("x")] if shape.strip() else []
        try:
            values = [int(s) for s in parts]
        except ValueError:
            raise ValueError(f"shape {shape!r}: {family} needs {len(fields)} positive integers {want} "
                             f"separated by 'x', e.g. {'x'.join(['4096'] * len(fields))}") from None
    else:
        values = list(shape)
    if len(values) != len(fields) or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                                             for v in values):
        raise ValueError(f"shape {shape!r}: {family} needs {len(fields)} positive integers {want} "
                         f"separated by 'x', e.g. {'x'.join(['4096'] * len(fields))}")
    return dict(zip(fields, values, strict=True))


def reason_key(message: str) -> str:
    """A rejection message with its numbers replaced by ``#``: configurations rejected for the same
    rule count together."""
    return re.sub(r"-?\d[\d,._]*(e[-+]?\d+)?", "#", message)


# ----------------------------------------------------------------------------------------------
# the search


@dataclass(frozen=True)
class Candidate:
    """A configuration of the search: its row (``result`` when simulated) and its lower bound."""

    row: SweepRow
    bound: LowerBound
    rank: int = 0  # 1-based rank of the simulated time (0: not simulated)

    @property
    def time_s(self) -> float | None:
        return self.row.result.time_s if self.row.result is not None else None


@dataclass(frozen=True)
class TuneResult:
    """What :func:`tune` found: the simulated candidates fastest first, and the counts.

    ``enumerated`` knob sets came out of the space; ``duplicates`` of them built an equal
    configuration; ``invalid`` maps a rejection reason (numbers as ``#``) to how many the
    configuration's constructor refused, ``unfit`` the same for what the GPU cannot launch;
    ``pruned`` valid configurations were never simulated (their bound was no less than the
    ``top``-th best time); ``simulated`` were, ``failed`` of them raised ``ValueError`` there."""

    family: str
    hardware: str
    problem: Mapping[str, int]
    top: int
    ranked: tuple[Candidate, ...]
    enumerated: int
    duplicates: int
    invalid: Mapping[str, int]
    unfit: Mapping[str, int]
    examples: Mapping[str, str]  # reason key -> one full message
    valid: int
    pruned: int
    simulated: int
    failed: Mapping[str, int]
    wall_s: float
    bound_s: float  # wall time spent on bounds

    @property
    def best(self) -> Candidate | None:
        return self.ranked[0] if self.ranked else None

    @property
    def invalid_count(self) -> int:
        return sum(self.invalid.values())

    @property
    def unfit_count(self) -> int:
        return sum(self.unfit.values())

    def metric(self) -> str:
        """"tflops", "bandwidth" or "time": how to show the rows' speed (:func:`tilesim.sweep.throughput_metric`)."""
        ok = [c.row for c in self.ranked if c.row.ok]
        return sweep_mod.throughput_metric(ok) if ok else "time"

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "hardware": self.hardware, "problem": dict(self.problem), "top": self.top,
                "counts": {"enumerated": self.enumerated, "duplicates": self.duplicates,
                           "invalid": self.invalid_count, "unfit": self.unfit_count, "valid": self.valid,
                           "pruned": self.pruned, "simulated": self.simulated,
                           "failed": sum(self.failed.values())},
                "invalid_reasons": dict(self.invalid), "unfit_reasons": dict(self.unfit),
                "failed_reasons": dict(self.failed), "wall_s": self.wall_s, "bound_wall_s": self.bound_s,
                "ranked": [candidate_record(c) for c in self.ranked]}


def candidate_record(c: Candidate) -> dict[str, Any]:
    """A flat record of one candidate: the sweep row's columns, its rank and its lower bound."""
    d = c.row.to_dict()
    d["rank"] = c.rank
    d["lower_bound_s"] = c.bound.time_s
    d["lower_bound_limiter"] = c.bound.limiter
    return d


def _bound_chunk(cfgs: list, state: dict | None = None) -> list:
    """``("ok", LowerBound)`` or ``("error", text)`` per configuration (runs in a worker)."""
    hw = sweep_mod._spec_from_state(state) if state is not None else sweep_mod._WORKER_HW
    out = []
    for cfg in cfgs:
        try:
            out.append(("ok", lower_bound(cfg, hw)))
        except ValueError as e:
            out.append(("error", str(e)))
    return out


def tune(family: str, problem: Mapping[str, int] | str, hardware: str | HardwareSpec = "h200", *,
         top: int = DEFAULT_TOP, jobs: int = 1, fixed: Mapping[str, Any] | None = None,
         space: Iterable | None = None, prune: bool = True,
         on_progress: Callable[[str, int, int], None] | None = None) -> TuneResult:
    """Search ``family``'s knob space at ``problem`` on ``hardware`` (see the module docstring).

    ``problem``: the problem fields (a mapping, or a shape string such as ``"4096x4096x4096"``).
    ``top``: how many of the fastest are exact (their ranking is the simulator's). ``jobs``: worker
    processes (1: this process). ``fixed``: knob values merged into every knob set (e.g.
    ``{"dtype": "bf16"}``). ``space``: knob sets (or configurations) to search instead of the
    family's own space. ``prune=False`` simulates every valid configuration (the reference the
    pruned search is checked against). ``on_progress(stage, done, total)`` is called with stage
    "bound" and "simulate". Raises ``ValueError`` (one line) for an unknown family or knob, a bad
    shape, a family without a space, or ``top``/``jobs`` below 1.
    """
    t_start = time.perf_counter()
    fam = registry.get(family)
    if not isinstance(problem, Mapping):
        problem = parse_problem(fam.name, problem)
    else:
        problem = parse_problem(fam.name, [problem.get(f) for f in fam.problem_fields])
    for name, v in (("top", top), ("jobs", jobs)):
        if not (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
            raise ValueError(f"{name} = {v!r}: must be an integer >= 1")
    fixed = dict(fixed or {})
    knob_names = {k.name for k in fam.knobs()} - set(fam.problem_fields)
    unknown = sorted(set(fixed) - knob_names)
    if unknown:
        raise ValueError(f"{fam.name}: unknown knob(s) {', '.join(unknown)} to fix; knobs: {', '.join(sorted(knob_names))}")
    hw = resolve_hardware(hardware)
    if space is None:
        space = load_space(fam.name)({**problem, **fixed})

    invalid: Counter = Counter()
    unfit: Counter = Counter()
    examples: dict[str, str] = {}
    enumerated = duplicates = 0
    seen: set = set()
    cfgs: list = []
    for item in space:
        enumerated += 1
        try:
            if isinstance(item, Mapping):
                cfg = fam.make(**{**item, **fixed, **problem})
            else:
                cfg = dataclasses.replace(item, **fixed, **problem) if fixed else item
        except ValueError as e:
            key = reason_key(str(e))
            invalid[key] += 1
            examples.setdefault(key, str(e))
            continue
        if cfg in seen:
            duplicates += 1
            continue
        seen.add(cfg)
        try:
            fam.check_fits(cfg, hw)
        except ValueError as e:
            key = reason_key(str(e))
            unfit[key] += 1
            examples.setdefault(key, str(e))
            continue
        cfgs.append(cfg)

    # bounds (in worker processes when there are many)
    t_bound = time.perf_counter()
    state = sweep_mod._spec_state(hw)
    outcomes: list = []
    pool = None
    if jobs > 1 and len(cfgs) > BOUND_CHUNK:
        pool = ProcessPoolExecutor(max_workers=jobs, initializer=sweep_mod._init_worker, initargs=(state,))
    try:
        if pool is None:
            sweep_mod._init_worker(state)
            for i in range(0, len(cfgs), BOUND_CHUNK):
                outcomes += _bound_chunk(cfgs[i:i + BOUND_CHUNK])
                if on_progress:
                    on_progress("bound", len(outcomes), len(cfgs))
        else:
            chunks = [cfgs[i:i + BOUND_CHUNK] for i in range(0, len(cfgs), BOUND_CHUNK)]
            futures = [pool.submit(_bound_chunk, ch) for ch in chunks]
            done = 0
            for fut in futures:
                res = fut.result()
                outcomes += res
                done += len(res)
                if on_progress:
                    on_progress("bound", done, len(cfgs))
        bound_s = time.perf_counter() - t_bound

        cands: list[Candidate] = []
        for cfg, (kind, value) in zip(cfgs, outcomes, strict=True):
            if kind == "error":
                key = reason_key(value)
                unfit[key] += 1
                examples.setdefault(key, value)
                continue
            counts = fam.counts(cfg)
            row = SweepRow(shape=tuple(problem[f] for f in fam.problem_fields), knobs=MappingProxyType({}),
                           family=fam.name, problem_fields=fam.problem_fields, cfg=cfg, label=fam.label(cfg),
                           full_label=fam.full_label(cfg), counts=MappingProxyType(dict(counts)))
            cands.append(Candidate(row=row, bound=value))
        cands.sort(key=lambda c: (c.bound.time_s, c.row.label))
        finished, failed = _branch_and_bound(cands, top, jobs, state, prune, pool, on_progress)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    ok = sorted((c for c in finished if c.row.ok), key=lambda c: (c.time_s, c.row.label))
    ranked = tuple(dataclasses.replace(c, rank=i) for i, c in enumerate(ok, start=1))
    return TuneResult(family=fam.name, hardware=hw.name, problem=MappingProxyType(dict(problem)), top=top,
                      ranked=ranked, enumerated=enumerated, duplicates=duplicates,
                      invalid=MappingProxyType(dict(invalid)), unfit=MappingProxyType(dict(unfit)),
                      examples=MappingProxyType(examples), valid=len(cands), pruned=len(cands) - len(finished),
                      simulated=len(finished), failed=MappingProxyType(dict(failed)),
                      wall_s=time.perf_counter() - t_start, bound_s=bound_s)


def _branch_and_bound(cands: list[Candidate], top: int, jobs: int, state: dict, prune: bool, pool,
                      on_progress) -> tuple[list[Candidate], Counter]:
    """Simulate ``cands`` (sorted by bound) until the next bound is no less than the ``top``-th best
    simulated time; returns the simulated candidates (with their result or error) and the failure
    reasons."""
    best: list[float] = []  # the top smallest simulated times, as a max-heap of negatives
    finished: list[Candidate] = []
    failed: Counter = Counter()

    def threshold() -> float:
        return -best[0] if prune and len(best) >= top else math.inf

    def land(c: Candidate, outcome) -> None:
        kind, value = outcome
        if kind == "ok":
            c = dataclasses.replace(c, row=dataclasses.replace(c.row, result=value))
            heapq.heappush(best, -value.time_s)
            if len(best) > top:
                heapq.heappop(best)
        else:
            c = dataclasses.replace(c, row=dataclasses.replace(c.row, error=value))
            failed[reason_key(value)] += 1
        finished.append(c)
        if on_progress:
            on_progress("simulate", len(finished), len(cands))

    if pool is None:
        sweep_mod._init_worker(state)
        for c in cands:
            if c.bound.time_s >= threshold():
                break
            land(c, sweep_mod._simulate_one(c.row.cfg, True))
        return finished, failed
    nxt = 0
    running: dict = {}
    while True:
        while nxt < len(cands) and len(running) < jobs and cands[nxt].bound.time_s < threshold():
            c = cands[nxt]
            running[pool.submit(sweep_mod._simulate_one, c.row.cfg, True)] = c
            nxt += 1
        if not running:
            break
        done, _ = wait(running, return_when=FIRST_COMPLETED)
        for fut in done:
            land(running.pop(fut), fut.result())
    return finished, failed


# ----------------------------------------------------------------------------------------------
# measuring the top configurations on the GPU


@dataclass(frozen=True)
class Measured:
    """One candidate timed on the GPU: ``median_s`` when its status is "ok"."""

    candidate: Candidate
    status: str
    median_s: float | None
    message: str = ""


def measure_top(result: TuneResult, n: int, *, log: Callable[[str], None] | None = None) -> list[Measured]:
    """Compile and time the ``n`` fastest predicted candidates through the family's validation runner
    (:func:`validation.harness.suite.measure_config`, the L2 flushed before each repetition). Needs
    CuPy and a GPU (``ValueError`` with the reason otherwise)."""
    from validation.harness import runners, suite  # noqa: PLC0415

    why = suite.gpu_available()
    if why is not None:
        raise ValueError(f"--measure-top needs a GPU: {why}")
    runner = runners.get_runner(result.family)
    from validation.harness.timing import L2Flusher  # noqa: PLC0415

    timing_kw = {**suite.TIMING_DEFAULTS, **getattr(runner, "TIMING", {})}
    flusher = L2Flusher()
    out = []
    for i, c in enumerate(result.ranked[:n], start=1):
        meas = suite.measure_config(result.family, runner, c.row.cfg, timing_kw, flusher=flusher)
        status = meas.get("status", "error")
        med = meas.get("median_s") if status == "ok" else None
        out.append(Measured(candidate=c, status=status, median_s=med, message=meas.get("message", "") or ""))
        if log:
            timed = f"{med * 1e3:.4f} ms" if med is not None else f"{status}: {meas.get('message', '')[:160]}"
            log(f"[{i}/{min(n, len(result.ranked))}] {c.row.label}: {timed}")
    return out


def regret(measured: list[Measured]) -> float | None:
    """The measured time of the predicted best over the best measured time among those timed, less
    1 (0: the prediction picked the fastest); None when the predicted best or every one failed."""
    times = [m.median_s for m in measured if m.median_s is not None]
    if not measured or measured[0].median_s is None or not times:
        return None
    return measured[0].median_s / min(times) - 1.0
