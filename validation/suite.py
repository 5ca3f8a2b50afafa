"""The GEMM validation suite: load the configurations, then compile, check and time each on the GPU.

``load_suite()`` reads ``scenarios/validation_suite.toml`` (tilings crossed with shapes).
``run_suite()`` measures every configuration and appends one CSV row per configuration to
``out_dir/times.csv`` as soon as it is finished (so an interrupted run keeps its rows; a rerun
resumes), plus cuBLAS (``cupy.matmul``) rows per shape, and writes ``out_dir/metadata.json``.

Statuses: ``ok`` (timed), ``wrong`` (failed the correctness check; never timed), ``unsupported``
(the kernel generator refused the config), ``compile_error``, ``launch_error`` (a CUDA error
while launching); these are final. ``error`` (any other exception) is retried on resume.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import sys
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path

from tilesim.kernels.gemm_config import GemmConfig

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SUITE = REPO_ROOT / "scenarios" / "validation_suite.toml"
DEFAULT_OUT = REPO_ROOT / "validation" / "results" / "h200"

FINAL_STATUSES = frozenset({"ok", "wrong", "unsupported", "compile_error", "launch_error"})
_SHAPE_KEYS = {"name", "m", "n", "k", "exclude"}
_KNOB_FIELDS = tuple(f.name for f in dataclasses.fields(GemmConfig) if f.name not in ("m", "n", "k"))
#: knob columns of the CSV; GemmConfig.regs_per_thread (an estimate override) is renamed so that
#: ``regs_per_thread`` can hold the compiler's measured value.
KNOB_COLUMNS = tuple("regs_per_thread_override" if f == "regs_per_thread" else f for f in _KNOB_FIELDS)
CSV_COLUMNS = ("m", "n", "k", "label", *KNOB_COLUMNS, "status", "message", "median_s", "p10_s",
               "p90_s", "min_s", "reps", "flushed_l2", "tflops", "rel_err", "regs_per_thread",
               "static_smem_bytes", "local_bytes", "sm_clock_hz", "timestamp_utc")


class ContextLost(RuntimeError):
    """The CUDA context is unusable after a failed launch; the process must restart to go on."""


# ----- loading -------------------------------------------------------------------------------------
def load_suite(path: str | Path | None = None) -> list[GemmConfig]:
    """The suite's configurations: every ``[[tiling]]`` crossed with every ``[[shape]]``.

    A tiling's optional ``shapes`` list restricts it to those shape names; a shape's optional
    ``exclude`` list drops configurations by label. Raises ``ValueError`` (naming the entry) for
    unknown keys, unknown shape names, invalid knobs (from GemmConfig) or duplicate label+shape.
    """
    p = Path(path) if path is not None else DEFAULT_SUITE
    with p.open("rb") as fh:
        raw = tomllib.load(fh)
    extra = set(raw) - {"shape", "tiling"}
    if extra:
        raise ValueError(f"{p.name}: unknown top-level keys {sorted(extra)}; expected [[shape]], [[tiling]]")
    shapes = raw.get("shape", [])
    tilings = raw.get("tiling", [])
    if not shapes or not tilings:
        raise ValueError(f"{p.name}: needs at least one [[shape]] and one [[tiling]]")
    names = []
    for i, s in enumerate(shapes):
        bad = set(s) - _SHAPE_KEYS
        if bad or not {"name", "m", "n", "k"} <= set(s):
            raise ValueError(f"{p.name}: shape #{i}: keys must be name, m, n, k [, exclude]; got {sorted(s)}")
        names.append(s["name"])
    if len(set(names)) != len(names):
        raise ValueError(f"{p.name}: duplicate shape names in {names}")
    configs: list[GemmConfig] = []
    seen: set[tuple] = set()
    used_excludes: set[tuple[str, str]] = set()
    for j, t in enumerate(tilings):
        t = dict(t)
        only = t.pop("shapes", None)
        if only is not None:
            unknown = set(only) - set(names)
            if unknown:
                raise ValueError(f"{p.name}: tiling #{j}: unknown shape names {sorted(unknown)}")
        bad = set(t) - set(_KNOB_FIELDS)
        if bad:
            raise ValueError(f"{p.name}: tiling #{j}: unknown keys {sorted(bad)}; knobs: {', '.join(_KNOB_FIELDS)}")
        for s in shapes:
            if only is not None and s["name"] not in only:
                continue
            try:
                cfg = GemmConfig(m=s["m"], n=s["n"], k=s["k"], **t)
            except ValueError as e:
                raise ValueError(f"{p.name}: tiling #{j} on shape {s['name']}: {e}") from e
            if cfg.label in s.get("exclude", []):
                used_excludes.add((s["name"], cfg.label))
                continue
            key = (cfg.label, cfg.m, cfg.n, cfg.k)
            if key in seen:
                raise ValueError(f"{p.name}: tiling #{j}: duplicate configuration {cfg.label} on shape {s['name']}")
            seen.add(key)
            configs.append(cfg)
    for s in shapes:
        for label in s.get("exclude", []):
            if (s["name"], label) not in used_excludes:
                raise ValueError(f"{p.name}: shape {s['name']}: exclude {label!r} matches no tiling")
    return configs


# ----- CSV rows ------------------------------------------------------------------------------------
def config_row(cfg: GemmConfig) -> dict:
    """The shape, label and knob columns of a configuration's CSV row."""
    row = {"m": cfg.m, "n": cfg.n, "k": cfg.k, "label": cfg.label}
    for f, col in zip(_KNOB_FIELDS, KNOB_COLUMNS, strict=True):
        row[col] = getattr(cfg, f)
    return row


def cublas_row(m: int, n: int, k: int) -> dict:
    """Shape and label columns of a cuBLAS (``cupy.matmul``, fp32) row; knob columns empty."""
    row = {"m": m, "n": n, "k": k, "label": "cublas"}
    row.update({c: "" for c in KNOB_COLUMNS})
    row["variant"] = "cublas"
    row["dtype"] = "fp32"
    return row


def read_done(csv_path: Path) -> set[tuple[str, int, int, int]]:
    """(label, m, n, k) of the rows of an existing CSV that carry a final status."""
    done: set[tuple[str, int, int, int]] = set()
    if not csv_path.exists():
        return done
    with csv_path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            try:
                if r.get("status") in FINAL_STATUSES:
                    done.add((r["label"], int(r["m"]), int(r["n"]), int(r["k"])))
            except (KeyError, TypeError, ValueError):
                continue  # a torn last line from an interrupted write
    return done


class RowWriter:
    """Appends rows to a CSV (header written once), flushing and fsyncing after each row."""

    def __init__(self, path: Path, columns: Sequence[str]):
        self.path = Path(path)
        self.columns = tuple(columns)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        if not fresh:
            with self.path.open(newline="") as fh:
                header = next(csv.reader(fh), None)
            if header is not None and tuple(header) != self.columns:
                raise ValueError(f"{self.path}: existing header differs from the expected columns; "
                                 "move the old file away or use a new --out directory")
            data = self.path.read_bytes()
            if not data.endswith(b"\n"):  # drop a torn last row left by an interrupted write
                with self.path.open("r+b") as fh:
                    fh.truncate(data.rfind(b"\n") + 1)
        self._fh = self.path.open("a", newline="")
        self._w = csv.DictWriter(self._fh, fieldnames=self.columns, extrasaction="raise")
        if fresh:
            self._w.writeheader()
            self._flush()

    def _flush(self) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def write(self, row: dict) -> None:
        full = {c: row.get(c, "") for c in self.columns}
        full = {c: ("" if v is None else v) for c, v in full.items()}
        self._w.writerow(full)
        self._flush()

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> RowWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ----- measuring -------------------------------------------------------------------------------------
def _is_cuda_error(exc: BaseException) -> bool:
    mod = type(exc).__module__ or ""
    return "cupy" in mod and ("CUDA" in type(exc).__name__ or "cuda" in mod)


def _context_ok() -> bool:
    try:
        import cupy as cp  # noqa: PLC0415
        x = cp.arange(8, dtype=cp.float32)
        float(x.sum())
        cp.cuda.get_current_stream().synchronize()
        return True
    except Exception:
        return False


def _timing_cols(t, flops: float) -> dict:
    return {"median_s": t.median_s, "p10_s": t.p10_s, "p90_s": t.p90_s, "min_s": t.min_s,
            "reps": t.reps, "flushed_l2": t.flushed_l2, "tflops": flops / t.median_s / 1e12}


def _inputs(cp, m: int, n: int, k: int, dtype, seed: int = 0):
    rs = cp.random.RandomState(seed)
    a = rs.standard_normal((m, k), dtype=cp.float32).astype(dtype)
    b = rs.standard_normal((k, n), dtype=cp.float32).astype(dtype)
    c = cp.zeros((m, n), dtype=dtype)
    return a, b, c


def measure_config(cfg: GemmConfig, timing_kw: dict, flusher=None) -> dict:
    """Compile, check and time one configuration; the measured columns of its row (never raises
    for a failure of the kernel itself; raises :class:`ContextLost` if the GPU context died)."""
    import cupy as cp  # noqa: PLC0415

    from validation import gemm_cuda  # noqa: PLC0415
    from validation.timing import read_sm_clock_hz, time_gpu  # noqa: PLC0415

    row: dict = {}
    try:
        compiled = gemm_cuda.compile_gemm(cfg)
    except ValueError as e:
        return {"status": "unsupported", "message": str(e)}
    except gemm_cuda.GemmCompileError as e:
        return {"status": "compile_error", "message": str(e)}
    attrs = dict(getattr(compiled, "attributes", {}) or {})
    for key in ("regs_per_thread", "static_smem_bytes", "local_bytes"):
        row[key] = attrs.get(key)
    try:
        res = gemm_cuda.check_correct(compiled, seed=0)
        row["rel_err"] = res.rel_err
        if not res.ok:
            row.update(status="wrong", message=res.message or f"rel_err={res.rel_err} unwritten={res.unwritten}")
            return row
        dtype = {"fp32": cp.float32, "fp16": cp.float16}.get(cfg.dtype, cp.float32)
        a, b, c = _inputs(cp, cfg.m, cfg.n, cfg.k, dtype)
        t = time_gpu(lambda: compiled.launch(a, b, c), flusher=flusher, **timing_kw)
    except Exception as e:  # noqa: BLE001 - a broken kernel must not stop the suite
        if _is_cuda_error(e):
            row.update(status="launch_error", message=f"{type(e).__name__}: {e}")
            if not _context_ok():
                raise ContextLost(row["message"]) from e
            return row
        row.update(status="error", message=f"{type(e).__name__}: {e}")
        return row
    row.update(_timing_cols(t, cfg.flops))
    row["sm_clock_hz"] = read_sm_clock_hz()
    row.update(status="ok", message="")
    return row


def measure_cublas(m: int, n: int, k: int, timing_kw: dict, flusher=None) -> dict:
    """Time ``cupy.matmul`` (fp32, TF32 off unless CUPY_TF32=1) at one shape."""
    import cupy as cp  # noqa: PLC0415

    from validation.timing import read_sm_clock_hz, time_gpu  # noqa: PLC0415

    try:
        a, b, c = _inputs(cp, m, n, k, cp.float32)
        t = time_gpu(lambda: cp.matmul(a, b, out=c), flusher=flusher, **timing_kw)
    except Exception as e:  # noqa: BLE001
        status = "launch_error" if _is_cuda_error(e) else "error"
        return {"status": status, "message": f"{type(e).__name__}: {e}"}
    row = _timing_cols(t, 2.0 * m * n * k)
    row.update(status="ok", message="", sm_clock_hz=read_sm_clock_hz())
    return row


def write_metadata(out_dir: Path, timing_kw: dict, extra: dict | None = None) -> Path:
    """Write ``metadata.json`` (collect_metadata + timing settings); earlier runs' entries are kept
    under ``earlier_runs`` when the file already exists."""
    from validation.metadata import collect_metadata  # noqa: PLC0415

    path = Path(out_dir) / "metadata.json"
    meta = collect_metadata()
    meta["timing"] = dict(timing_kw)
    if extra:
        meta.update(extra)
    earlier: list = []
    if path.exists():
        try:
            old = json.loads(path.read_text())
            earlier = old.pop("earlier_runs", [])
            earlier.append(old)
        except (OSError, ValueError):
            earlier = []
    if earlier:
        meta["earlier_runs"] = earlier
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(meta, indent=2, default=str) + "\n")
    return path


def _progress(enabled: bool):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: PLC0415

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), disable=not enabled)


def run_suite(configs: Iterable[GemmConfig], out_dir: str | Path, *, resume: bool = True,
              progress: bool = True, reps: int = 30, min_reps: int = 20, warmup: int = 5,
              budget_s: float = 5.0, flush_l2: bool = True, cublas: bool = True) -> Path:
    """Measure every configuration (plus cuBLAS per shape) into ``out_dir/times.csv``; returns its path.

    One row is appended (and flushed) right after each configuration. With ``resume``, rows
    already present with a final status are skipped; without it an existing ``times.csv`` is
    renamed to ``times.csv.bak`` first. Raises :class:`ContextLost` (after writing the row) when a
    kernel leaves the CUDA context unusable; rerunning resumes after it.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "times.csv"
    if not resume and csv_path.exists():
        csv_path.replace(out / "times.csv.bak")
    configs = list(configs)
    timing_kw = {"warmup": warmup, "reps": reps, "min_reps": min_reps, "budget_s": budget_s,
                 "flush_l2": flush_l2}
    write_metadata(out, timing_kw, {"suite_configs": len(configs), "cublas_tf32": os.environ.get("CUPY_TF32", "0")})
    done = read_done(csv_path)
    shapes = list(dict.fromkeys((c.m, c.n, c.k) for c in configs))
    jobs: list = [c for c in configs if (c.label, c.m, c.n, c.k) not in done]
    if cublas:
        jobs += [s for s in shapes if ("cublas", *s) not in done]

    from validation.metadata import utc_now_iso  # noqa: PLC0415
    from validation.timing import L2Flusher  # noqa: PLC0415

    flusher = L2Flusher() if flush_l2 else None
    with RowWriter(csv_path, CSV_COLUMNS) as writer, _progress(progress) as bar:
        task = bar.add_task("suite", total=len(jobs))
        for job in jobs:
            if isinstance(job, GemmConfig):
                bar.update(task, description=f"{job.label} {job.m}x{job.n}x{job.k}")
                base = config_row(job)
                try:
                    meas = measure_config(job, timing_kw, flusher)
                except ContextLost as e:
                    writer.write({**base, "status": "launch_error", "message": str(e),
                                  "timestamp_utc": utc_now_iso()})
                    raise
            else:
                m, n, k = job
                bar.update(task, description=f"cublas {m}x{n}x{k}")
                base = cublas_row(m, n, k)
                meas = measure_cublas(m, n, k, timing_kw, flusher)
            writer.write({**base, **meas, "timestamp_utc": utc_now_iso()})
            bar.advance(task)
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


def select(configs: Sequence[GemmConfig], *, only: str | None = None, shape: str | None = None,
           limit: int | None = None) -> list[GemmConfig]:
    """Filter configurations: label substring ``only``, ``shape`` "MxNxK", at most ``limit``."""
    out = list(configs)
    if only:
        out = [c for c in out if only in c.label]
    if shape:
        try:
            m, n, k = (int(x) for x in shape.lower().split("x"))
        except ValueError as e:
            raise ValueError(f"shape = {shape!r}: expected MxNxK, e.g. 4096x4096x4096") from e
        out = [c for c in out if (c.m, c.n, c.k) == (m, n, k)]
    if limit is not None:
        if limit < 0:
            raise ValueError(f"limit = {limit}: must be >= 0")
        out = out[:limit]
    return out


_RESTARTS_ENV = "TILESIM_SUITE_RESTARTS"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.suite", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="output directory (times.csv, metadata.json)")
    ap.add_argument("--suite", default=None, help="suite TOML (default scenarios/validation_suite.toml)")
    ap.add_argument("--limit", type=int, default=None, help="measure at most N configurations")
    ap.add_argument("--only", default=None, help="only configurations whose label contains SUBSTRING")
    ap.add_argument("--shape", default=None, help="only one shape, MxNxK")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--no-flush", action="store_true", help="do not flush L2 between repetitions")
    ap.add_argument("--no-cublas", action="store_true")
    ap.add_argument("--fresh", action="store_true", help="do not resume (moves times.csv to times.csv.bak)")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    configs = select(load_suite(args.suite), only=args.only, shape=args.shape, limit=args.limit)
    why = gpu_available()
    if why:
        print(f"validation.suite: needs CuPy and an NVIDIA GPU: {why}", file=sys.stderr)
        return 2
    try:
        path = run_suite(configs, args.out, resume=not args.fresh, progress=not args.no_progress,
                         reps=args.reps, min_reps=min(20, args.reps), flush_l2=not args.no_flush,
                         cublas=not args.no_cublas)
    except ContextLost as e:
        n = int(os.environ.get(_RESTARTS_ENV, "0"))
        if n >= 20:
            print(f"validation.suite: CUDA context lost ({e}); too many restarts, stopping", file=sys.stderr)
            return 3
        print(f"validation.suite: CUDA context lost ({e}); restarting to resume", file=sys.stderr)
        os.environ[_RESTARTS_ENV] = str(n + 1)
        argv_new = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--fresh"]
        os.execv(sys.executable, [sys.executable, "-m", "validation.suite", *argv_new])
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
