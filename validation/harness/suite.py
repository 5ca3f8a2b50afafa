"""The generic validation suite: load a family's configurations, then check and time each on the GPU.

``load_suite(family)`` reads ``validation/families/<family>/suite.toml``: ``[[shape]]`` tables (a
``name`` and the family's problem-size fields) and ``[[config]]`` tables (knob values; an optional
``shapes = [...]`` restricts one to those shape names); every config is crossed with every shape
and built by ``tilesim.kernels.registry.get(family).make(**shape, **knobs)``.

``run_suite(family, configs, out_dir)`` drives the family's runner (:mod:`validation.harness.runners`)
for each configuration: ``prepare``, ``check`` (a wrong result is never timed), then
:func:`~validation.harness.timing.time_gpu` on ``case.launch`` (L2 flushed before each repetition).
One CSV row per configuration is appended to ``out_dir/times.csv`` as soon as it is measured (so an
interrupted run keeps its rows; a rerun resumes), and ``out_dir/metadata.json`` is written beside.

Statuses: ``ok`` (timed), ``wrong`` (failed the check; never timed), ``unsupported`` (``prepare``
raised ``ValueError``), ``compile_error``, ``launch_error`` (a CUDA error while running, or the
process died twice while measuring this configuration: a hang or a crash); these are final.
``error`` (any other exception) is retried on resume.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from tilesim.kernels import registry
from validation.harness import runners
from validation.harness.rows import (
    COMPILED_COLUMNS,
    FINAL_STATUSES,
    OVERRIDE_COLUMN,
    OVERRIDE_FIELD,
    TIMING_COLUMNS,
    RowWriter,
    config_columns,
    config_row,
    csv_columns,
    read_done,
    read_rows,
    recorded_rows,
    row_key,
)
from validation.harness.suite_file import load_suite, problem_fields, select

#: what other modules use through this one (the suite runner's vocabulary)
__all__ = ["COMPILED_COLUMNS", "FINAL_STATUSES", "OVERRIDE_COLUMN", "OVERRIDE_FIELD", "TIMING_COLUMNS",
           "ContextLost", "RowWriter", "config_columns", "config_row", "csv_columns", "load_suite",
           "main", "measure_config", "problem_fields", "read_done", "read_rows", "recorded_rows", "row_key", "run_suite",
           "select"]

RESULTS_ROOT = Path(__file__).resolve().parents[1] / "results"
#: timing defaults (a runner's ``TIMING`` overrides them): about a second per configuration
TIMING_DEFAULTS = {"warmup": 3, "reps": 30, "min_reps": 10, "budget_s": 1.0}
#: a configuration found in progress this many times (the process died while measuring it) is
#: recorded as ``launch_error`` instead of being tried again
MAX_ATTEMPTS = 2
_IN_PROGRESS = "in_progress.json"
#: a configuration still running after this long is taken for a hung kernel: its row is written
#: (``launch_error``) and the process exits with :data:`EXIT_HUNG` so that its caller starts it again
CONFIG_TIMEOUT_S = 120.0
EXIT_HUNG = 75
#: the SM clock is read (NVML or nvidia-smi, which takes up to a few tenths of a second) at most this
#: often; a row's ``sm_clock_hz`` is the latest reading
CLOCK_READ_INTERVAL_S = 5.0


class ContextLost(RuntimeError):
    """The CUDA context is unusable after a failed launch; the process must restart to go on."""


# ----- measuring -------------------------------------------------------------------------------------
def is_cuda_error(exc: BaseException) -> bool:
    """A CUDA runtime or driver error raised through CuPy."""
    mod = type(exc).__module__ or ""
    return "cupy" in mod and ("CUDA" in type(exc).__name__ or "cuda" in mod) and not is_compile_error(exc)


def is_compile_error(exc: BaseException) -> bool:
    """NVRTC refused the source (``cupy.cuda.compiler.CompileException`` or a runner's own error)."""
    return any(c.__name__ in ("CompileException", "GemmCompileError") or c.__name__.endswith("CompileError")
               for c in type(exc).__mro__)


def context_ok() -> bool:
    """True when a tiny CuPy computation still runs (the context survived)."""
    try:
        import cupy as cp  # noqa: PLC0415

        float(cp.arange(8, dtype=cp.float32).sum())
        cp.cuda.get_current_stream().synchronize()
        return True
    except Exception:  # noqa: BLE001
        return False


def failure_status(exc: BaseException, stage: str) -> dict:
    """The status and message of a failure at ``stage`` ("prepare": a ``ValueError`` there means the
    kernels cannot run the configuration, ``unsupported``)."""
    msg = f"{stage}: {type(exc).__name__}: {exc}"[:2000]
    if isinstance(exc, ValueError) and stage == "prepare":
        return {"status": "unsupported", "message": msg}
    if is_compile_error(exc):
        return {"status": "compile_error", "message": msg}
    if is_cuda_error(exc):
        return {"status": "launch_error", "message": msg}
    return {"status": "error", "message": msg}


def _failure(exc: BaseException, stage: str) -> dict:
    """:func:`failure_status`, raising :class:`ContextLost` when a CUDA error left the context unusable."""
    res = failure_status(exc, stage)
    if res["status"] == "launch_error" and not context_ok():
        raise ContextLost(res["message"]) from exc
    return res


def _timing_cols(t) -> dict:
    return {c: getattr(t, c) for c in TIMING_COLUMNS}


def family_rates(family: str, runner, cfg, median_s: float) -> dict:
    """The runner's rate columns for one configuration (empty cells where a count is missing)."""
    counts = registry.get(family).counts(cfg)
    out = {}
    for col, (key, scale) in runners.rates_of(runner).items():
        out[col] = counts[key] * scale / median_s if key in counts and median_s > 0 else None
    return out


def measure_config(family: str, runner, cfg, timing_kw: dict, flusher=None, time_fn=None) -> dict:
    """Prepare, check and time one configuration: the measured columns of its row.

    Never raises for a failure of the kernel itself; raises :class:`ContextLost` when the CUDA
    context died (the caller records the row and restarts). ``time_fn(launch, **timing_kw)``
    defaults to :func:`~validation.harness.timing.time_gpu` with ``flusher``."""
    if time_fn is None:
        from validation.harness.timing import time_gpu  # noqa: PLC0415

        def time_fn(fn, **kw):
            return time_gpu(fn, flusher=flusher, **kw)
    try:
        case = runner.prepare(cfg, seed=0)
    except Exception as e:  # noqa: BLE001 - a broken kernel must not stop the suite
        return _failure(e, "prepare")
    row = {k: (case.attributes or {}).get(k) for k in ("regs_per_thread", "static_smem_bytes", "local_bytes")}
    try:
        ok, rel_err, message = case.check()
        row["rel_err"] = rel_err
        if not ok:
            return {**row, "status": "wrong", "message": message or f"rel_err={rel_err}"}
        t = time_fn(case.launch, **timing_kw)
    except ContextLost:
        raise
    except Exception as e:  # noqa: BLE001
        return {**row, **_failure(e, "check/launch")}
    row.update(_timing_cols(t))
    row.update(family_rates(family, runner, cfg, t.median_s))
    return {**row, "status": "ok", "message": ""}


def measure_reference(prepare: Callable[[], object], timing_kw: dict, time_fn) -> dict:
    """Time one reference row (a runner's ``reference_rows``)."""
    try:
        ref = prepare()
        t = time_fn(ref.launch, **timing_kw)
    except Exception as e:  # noqa: BLE001
        return _failure(e, "reference")
    return {**_timing_cols(t), **ref.rates(t.median_s), "status": "ok", "message": ""}


def write_metadata(out_dir: Path, timing_kw: dict, extra: dict | None = None) -> Path:
    """Write ``metadata.json``; earlier runs' entries are kept under ``earlier_runs``."""
    from validation.harness.metadata import collect_metadata  # noqa: PLC0415

    path = Path(out_dir) / "metadata.json"
    meta = {**collect_metadata(), "timing": dict(timing_kw), **(extra or {})}
    earlier: list = []
    if path.exists():
        try:
            old = json.loads(path.read_text())
            earlier = [*old.pop("earlier_runs", []), old]
        except (OSError, ValueError):
            earlier = []
    if earlier:
        meta["earlier_runs"] = earlier
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(meta, indent=2, default=str) + "\n")
    return path


class _Watchdog:
    """Writes a configuration's row and calls ``on_hang`` when it runs longer than ``timeout_s``;
    ``finish`` (under the same lock) tells whether the main thread may still write the row."""

    def __init__(self, timeout_s: float | None, on_hang: Callable[[], None]):
        self.timeout_s, self.on_hang = timeout_s, on_hang
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._fired = False

    def arm(self, write_row: Callable[[], None]) -> None:
        self._fired = False
        if self.timeout_s is None:
            return

        def fire() -> None:
            with self._lock:
                if self._fired is None:  # finished meanwhile
                    return
                self._fired = True
                write_row()
            self.on_hang()
        self._timer = threading.Timer(self.timeout_s, fire)
        self._timer.daemon = True
        self._timer.start()

    def finish(self) -> bool:
        """Stop the timer; True when the main thread should write the row (the watchdog did not)."""
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            fired, self._fired = self._fired, None
        return not fired


def _exit_hung() -> None:
    print(f"a configuration ran longer than its timeout: exiting with {EXIT_HUNG} to be restarted", flush=True)
    os._exit(EXIT_HUNG)


class _ClockReader:
    """The SM clock, read at most every :data:`CLOCK_READ_INTERVAL_S`."""

    def __init__(self, read: Callable[[], float | None]):
        self.read, self.value, self.at = read, None, -math.inf

    def __call__(self) -> float | None:
        if time.monotonic() - self.at >= CLOCK_READ_INTERVAL_S:
            self.value, self.at = self.read(), time.monotonic()
        return self.value


class _Attempts:
    """``in_progress.json``: how often each configuration was started without its row being written."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.counts = json.loads(path.read_text()) if path.exists() else {}
        except ValueError:
            self.counts = {}

    def start(self, key: str) -> int:
        n = self.counts.get(key, 0)
        self.counts[key] = n + 1
        self._save()
        return n

    def finish(self, key: str) -> None:
        self.counts.pop(key, None)
        self._save()

    def _save(self) -> None:
        self.path.write_text(json.dumps(self.counts, indent=1) + "\n")


def run_suite(family: str, configs: Iterable, out_dir: str | Path, *, resume: bool = True,
              flush_l2: bool = True, reference: bool = True, log: Callable[[str], None] | None = print,
              time_fn=None, config_timeout_s: float | None = CONFIG_TIMEOUT_S,
              on_hang: Callable[[], None] = _exit_hung, deadline: float | None = None, **timing) -> Path:
    """Measure every configuration into ``out_dir/times.csv`` (plus the runner's reference rows);
    returns the CSV path.

    ``timing`` overrides :data:`TIMING_DEFAULTS` and the runner's ``TIMING``. With ``resume``, rows
    with a final status are kept and never repeated; without it an existing ``times.csv`` is moved
    to ``times.csv.bak``. ``log`` gets one progress line per configuration. Raises
    :class:`ContextLost` (after writing the row) when a kernel leaves the CUDA context unusable;
    rerunning resumes after it. A configuration running longer than ``config_timeout_s`` gets its
    ``launch_error`` row from a watchdog thread, which then calls ``on_hang`` (default: exit the
    process with :data:`EXIT_HUNG`). No configuration starts after ``deadline`` (``time.monotonic()``
    seconds); a rerun goes on from there."""
    runner = runners.get_runner(family)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "times.csv"
    if not resume and csv_path.exists():
        csv_path.replace(out / "times.csv.bak")
    timing_kw = {**TIMING_DEFAULTS, **getattr(runner, "TIMING", {}), **timing}
    configs = list(configs)
    fam = registry.get(family)
    key_cols = config_columns(family)
    jobs = [(config_row(family, c), c, None) for c in configs]
    if reference and hasattr(runner, "reference_rows"):
        jobs += [(row, None, prep) for row, prep in runner.reference_rows(configs)]
    done = read_done(csv_path, key_cols)
    todo = [j for j in jobs if row_key(j[0], key_cols) not in done]
    write_metadata(out, {**timing_kw, "flush_l2": flush_l2},
                   {"family": family, "suite_configs": len(configs), "reference_rows": len(jobs) - len(configs)})
    if time_fn is None:
        from validation.harness.timing import L2Flusher, time_gpu  # noqa: PLC0415

        flusher = L2Flusher() if flush_l2 else None

        def time_fn(fn, **kw):
            return time_gpu(fn, flusher=flusher, flush_l2=flush_l2, **kw)
    from validation.harness.metadata import utc_now_iso  # noqa: PLC0415
    from validation.harness.timing import read_sm_clock_hz  # noqa: PLC0415

    attempts = _Attempts(out / _IN_PROGRESS)
    clock = _ClockReader(read_sm_clock_hz)
    if log:
        log(f"{family}: {len(todo)} to measure, {len(jobs) - len(todo)} already recorded in {csv_path}")
    with RowWriter(csv_path, csv_columns(family, runner)) as writer:
        watchdog = _Watchdog(config_timeout_s, on_hang)
        for i, (base, cfg, prep) in enumerate(todo, 1):
            if deadline is not None and time.monotonic() > deadline:
                if log:
                    log(f"{family}: time budget spent, {len(todo) - i + 1} left for the next run")
                break
            key = json.dumps(row_key(base, key_cols))
            name = fam.full_label(cfg) if cfg is not None else base.get("label", "reference")
            t0 = time.perf_counter()

            def hung(base=base, key=key) -> None:
                writer.write({**base, "status": "launch_error", "timestamp_utc": utc_now_iso(),
                              "message": f"still running after {config_timeout_s} s (a hang): stopped"})
                attempts.finish(key)
            watchdog.arm(hung)
            if attempts.start(key) >= MAX_ATTEMPTS:
                meas = {"status": "launch_error",
                        "message": f"the process died {MAX_ATTEMPTS} times while measuring this configuration (a hang or a crash)"}
            else:
                try:
                    meas = (measure_config(family, runner, cfg, timing_kw, time_fn=time_fn) if cfg is not None
                            else measure_reference(prep, timing_kw, time_fn))
                except ContextLost as e:
                    if watchdog.finish():
                        writer.write({**base, "status": "launch_error", "message": str(e),
                                      "timestamp_utc": utc_now_iso()})
                        attempts.finish(key)
                    raise
            if meas.get("status") == "ok":
                meas["sm_clock_hz"] = clock()
            if not watchdog.finish():
                continue  # the watchdog wrote this configuration's row
            writer.write({**base, **meas, "timestamp_utc": utc_now_iso()})
            attempts.finish(key)
            if log:
                med = meas.get("median_s")
                timed = f" median {med * 1e6:.1f} us" if isinstance(med, float) else ""
                why = f" ({meas.get('message', '')[:160]})" if meas.get("status") != "ok" else ""
                log(f"[{i}/{len(todo)}] {family} {name}: {meas['status']}{timed}{why} "
                    f"[{time.perf_counter() - t0:.1f} s]")
    return csv_path


# ----- command line ------------------------------------------------------------------------------------
def gpu_available() -> str | None:
    """None when CuPy and a GPU are usable, else a one-line reason."""
    try:
        import cupy as cp  # noqa: PLC0415
    except Exception as e:  # noqa: BLE001
        return f"cupy is not importable ({type(e).__name__}: {e})"
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device found"
    except Exception as e:  # noqa: BLE001
        return f"no usable CUDA device ({type(e).__name__}: {e})"
    return None


def default_results_root(gpu: str | None = None) -> Path:
    """``validation/results/<gpu>``, the GPU named after this machine's device when not given."""
    if gpu is None:
        from validation.harness.metadata import current_gpu_slug  # noqa: PLC0415

        gpu = current_gpu_slug()
        if gpu is None:
            raise ValueError("gpu = None: no GPU here to name the results directory; pass --gpu or --results")
    return RESULTS_ROOT / gpu


def recorded_dir(subdir: str, root: Path = RESULTS_ROOT) -> Path:
    """The first ``<root>/<gpu>/<subdir>`` that exists (recorded results for CPU-side tools), else
    the one of the first GPU directory (so that messages name a sensible place)."""
    found = sorted(p for p in Path(root).glob(f"*/{subdir}") if p.is_dir())
    if found:
        return found[0]
    gpus = sorted(p for p in Path(root).glob("*") if p.is_dir())
    return (gpus[0] if gpus else Path(root) / "unknown_gpu") / subdir


_RESTARTS_ENV = "TILESIM_SUITE_RESTARTS"
MAX_RESTARTS = 20


def add_selection_args(ap: argparse.ArgumentParser) -> None:
    """The arguments shared by the suite and Nsight Compute command lines."""
    ap.add_argument("families", nargs="+", help="kernel families (validation/families/<name>/)")
    ap.add_argument("--results", default=None,
                    help="results root (default validation/results/<gpu>); each family writes <root>/<family>/")
    ap.add_argument("--gpu", default=None, help="name of the results directory (default: from the device)")
    ap.add_argument("--out", default=None, help="output directory (only with one family; default <results>/<family>)")
    ap.add_argument("--suite", default=None, help="suite TOML (only with one family)")
    ap.add_argument("--only", default=None, help="only configurations whose label contains SUBSTRING")
    ap.add_argument("--shape", default=None, help="only one problem size, e.g. 4096x4096x4096")
    ap.add_argument("--limit", type=int, default=None, help="at most N configurations per family")
    ap.add_argument("--fresh", action="store_true", help="do not resume (the old CSV becomes .bak)")


def selected(args, family: str) -> list:
    """The configurations the command-line arguments select for one family."""
    return select(family, load_suite(family, args.suite), only=args.only, shape=args.shape, limit=args.limit)


def out_dir(args, family: str) -> Path:
    """Where a family's CSVs go: ``--out``, else ``<results root>/<family>``."""
    if args.out:
        return Path(args.out)
    return (Path(args.results) if args.results else default_results_root(args.gpu)) / family


def restart_or_stop(prog: str, module: str, exc: Exception, argv: Sequence[str] | None) -> int:
    """After :class:`ContextLost`: re-execute the module (it resumes), at most MAX_RESTARTS times."""
    n = int(os.environ.get(_RESTARTS_ENV, "0"))
    if n >= MAX_RESTARTS:
        print(f"{prog}: CUDA context lost ({exc}); too many restarts, stopping", file=sys.stderr)
        return 3
    print(f"{prog}: CUDA context lost ({exc}); restarting to resume", flush=True)
    os.environ[_RESTARTS_ENV] = str(n + 1)
    rest = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--fresh"]
    os.execv(sys.executable, [sys.executable, "-m", module, *rest])
    return 3  # not reached


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.harness.suite", description=__doc__.splitlines()[0])
    add_selection_args(ap)
    ap.add_argument("--reps", type=int, default=None, help="timed repetitions (default: the family's)")
    ap.add_argument("--timing-budget-s", dest="budget_s", type=float, default=None,
                    help="wall-time budget of the timed repetitions per configuration")
    ap.add_argument("--no-flush", action="store_true", help="do not flush L2 between repetitions")
    ap.add_argument("--no-reference", action="store_true", help="skip the runner's reference rows (e.g. cuBLAS)")
    ap.add_argument("--budget-s", dest="wall_budget_s", type=float, default=None,
                    help="start no configuration after this many seconds (all families); a rerun goes on")
    args = ap.parse_args(argv)
    if (args.suite or args.out) and len(args.families) > 1:
        ap.error("--suite and --out need exactly one family")
    try:
        plans = [(f, selected(args, f)) for f in args.families]
    except ValueError as e:
        print(f"validation.harness.suite: {e}", file=sys.stderr)
        return 2
    why = gpu_available()
    if why:
        print(f"validation.harness.suite: needs CuPy and an NVIDIA GPU: {why}", file=sys.stderr)
        return 2
    timing = {k: v for k, v in (("reps", args.reps), ("budget_s", args.budget_s)) if v is not None}
    if args.reps is not None:
        timing["min_reps"] = min(args.reps, TIMING_DEFAULTS["min_reps"])
    deadline = time.monotonic() + args.wall_budget_s if args.wall_budget_s is not None else None
    for family, configs in plans:
        try:
            path = run_suite(family, configs, out_dir(args, family), resume=not args.fresh, flush_l2=not args.no_flush,
                             reference=not args.no_reference, deadline=deadline, **timing)
        except ContextLost as e:
            return restart_or_stop("validation.harness.suite", "validation.harness.suite", e, argv)
        print(f"wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
