"""Nsight Compute counters for suite configurations, one ``ncu`` subprocess per configuration.

``profile_configs(configs, out_dir)`` runs, for each configuration::

    ncu --clock-control none --cache-control all --target-processes all --csv --page raw
        --print-units base --profile-from-start off --metrics <METRICS>
        --kernel-name regex:<name> --launch-skip 1 --launch-count 1
        python -m validation.ncu --target '<config json>'

The target (``--target``) compiles the kernel, checks it, then launches it twice between
``cudaProfilerStart``/``cudaProfilerStop``, so only GEMM launches are eligible. ``<name>`` is the
compiled kernel's name when the kernel object exposes one (``kernel_name``), else ``.*``.
Rows go to ``out_dir/counters.csv`` (one per configuration, appended and flushed at once;
resumable: configurations with a final status are skipped). Column names carry units.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from tilesim.kernels.gemm_config import GemmConfig

#: metric -> unit suffix of its column (values are converted to that unit).
METRICS = {
    "gpu__time_duration.sum": "s",
    "dram__bytes_read.sum": "bytes",
    "dram__bytes_write.sum": "bytes",
    "lts__t_bytes.sum": "bytes",
    "lts__t_sector_hit_rate.pct": "pct",
    "l1tex__t_bytes.sum": "bytes",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum": "count",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum": "count",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "pct",
    "launch__registers_per_thread": "count",
    "smsp__inst_executed.sum": "count",
    "sm__cycles_elapsed.avg.per_second": "hz",
}
#: diagnostics (issue activity, stall reasons, theoretical occupancy); TILESIM_NCU_EXTRA=0 drops them
EXTRA_METRICS = {
    "smsp__issue_active.avg.pct_of_peak_sustained_active": "pct",
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active": "pct",
    "sm__maximum_warps_per_active_cycle_pct": "pct",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "count",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "count",
    "lts__t_sectors_srcunit_tex_op_read.sum": "count",
    **{f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio": "count" for r in (
        "short_scoreboard", "long_scoreboard", "mio_throttle", "math_pipe_throttle", "wait",
        "not_selected", "barrier", "dispatch_stall", "lg_throttle", "no_instruction")},
}
if os.environ.get("TILESIM_NCU_EXTRA", "1") != "0":
    METRICS.update(EXTRA_METRICS)
METRIC_COLUMNS = tuple(f"{m}_{u}" for m, u in METRICS.items())
CSV_COLUMNS = ("label", "m", "n", "k", "variant", "status", "message", "kernel_name", *METRIC_COLUMNS,
               "timestamp_utc")
FINAL_STATUSES = frozenset({"ok", "wrong", "unsupported", "compile_error", "launch_error"})

# exit codes of the target
EXIT_WRONG, EXIT_UNSUPPORTED, EXIT_COMPILE, EXIT_LAUNCH = 3, 4, 5, 6
_EXIT_STATUS = {EXIT_WRONG: "wrong", EXIT_UNSUPPORTED: "unsupported", EXIT_COMPILE: "compile_error",
                EXIT_LAUNCH: "launch_error"}

# unit -> (dimension, factor to the base unit of that dimension)
_UNITS = {
    "s": ("s", 1.0), "second": ("s", 1.0), "msecond": ("s", 1e-3), "usecond": ("s", 1e-6),
    "nsecond": ("s", 1e-9), "ms": ("s", 1e-3), "us": ("s", 1e-6), "ns": ("s", 1e-9),
    "byte": ("bytes", 1.0), "kbyte": ("bytes", 1e3), "mbyte": ("bytes", 1e6), "gbyte": ("bytes", 1e9),
    "tbyte": ("bytes", 1e12), "kibyte": ("bytes", 1024.0), "mibyte": ("bytes", 1024.0**2),
    "gibyte": ("bytes", 1024.0**3),
    "%": ("pct", 1.0),
    "hz": ("hz", 1.0), "khz": ("hz", 1e3), "mhz": ("hz", 1e6), "ghz": ("hz", 1e9),
    "cycle/second": ("hz", 1.0), "cycle/msecond": ("hz", 1e3), "cycle/usecond": ("hz", 1e6),
    "cycle/nsecond": ("hz", 1e9), "cycle/s": ("hz", 1.0), "cycle/ns": ("hz", 1e9),
}
_COUNT_UNITS = {"", "inst", "warp", "register/thread", "register", "sector", "request", "cycle",
                "wavefront", "wavefronts", "conflict", "(!)", "thread", "block", "kinst", "minst",
                "ginst"}
_COUNT_SCALE = {"kinst": 1e3, "minst": 1e6, "ginst": 1e9}


def parse_number(text: str) -> float | None:
    """A number as ncu prints it (``"1,234.5"``, ``"n/a"``, ``""``); None when not a number."""
    t = text.strip().replace(",", "")
    if t in ("", "n/a", "N/A", "-", "nan"):
        return None
    try:
        return float(t)
    except ValueError:
        return None


def convert(value: float, unit: str, target: str) -> float:
    """``value`` in ncu's ``unit`` converted to ``target`` ("s", "bytes", "pct", "hz", "count").

    Raises ``ValueError`` naming the unit when it does not fit the target dimension."""
    u = unit.strip()
    if target == "count":
        key = u.lower()
        if key in _COUNT_UNITS or key.startswith("register"):
            return value * _COUNT_SCALE.get(key, 1.0)
        raise ValueError(f"unit {unit!r} is not a count")
    dim = _UNITS.get(u) or _UNITS.get(u.lower())
    if dim is None or dim[0] != target:
        raise ValueError(f"unit {unit!r} cannot be converted to {target!r}")
    return value * dim[1]


def parse_ncu_csv(text: str) -> list[dict]:
    """Parse ``ncu --csv --page raw`` output: a header row, a units row, one row per kernel.

    Lines before the header (``==PROF==`` messages, the program's own output) and non-CSV lines
    after it are skipped. Returns one dict per kernel: ``kernel_name`` plus, for every metric of
    :data:`METRICS` present, its value converted to the column's unit (key = column name);
    missing or unparsable values are None. Raises ``ValueError`` if no header row is found.
    """
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise ValueError("ncu output has no CSV header row (a line starting with \"ID\")")
    body = [ln for ln in lines[start:] if ln.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(body))))
    if len(rows) < 2:
        raise ValueError("ncu CSV has a header but no units row")
    header, units = rows[0], rows[1]
    if len(units) != len(header):
        raise ValueError(f"ncu CSV units row has {len(units)} fields, header has {len(header)}")
    col = {name: i for i, name in enumerate(header)}
    out = []
    for r in rows[2:]:
        if len(r) != len(header):
            continue
        rec: dict = {"kernel_name": r[col["Kernel Name"]] if "Kernel Name" in col else ""}
        for metric, target in METRICS.items():
            name = f"{metric}_{target}"
            if metric not in col:
                rec[name] = None
                continue
            v = parse_number(r[col[metric]])
            rec[name] = None if v is None else convert(v, units[col[metric]], target)
        out.append(rec)
    return out


# ----- the profiled target -----------------------------------------------------------------------------
def config_to_json(cfg: GemmConfig) -> str:
    return json.dumps(cfg.to_dict(), sort_keys=True)


def config_from_json(text: str) -> GemmConfig:
    return GemmConfig(**json.loads(text))


def kernel_name_of(compiled) -> str | None:
    """The compiled kernel's function name when the object exposes it, else None."""
    for attr in ("kernel_name", "name"):
        v = getattr(compiled, attr, None)
        if isinstance(v, str) and v:
            return v
    return None


def target(cfg: GemmConfig) -> int:
    """Compile, check, then launch the kernel twice inside cudaProfilerStart/Stop. Exit status:
    0 ok, 3 wrong, 4 unsupported, 5 compile error, 6 launch error. Prints ``KERNEL_NAME=...``."""
    import cupy as cp  # noqa: PLC0415

    from validation import gemm_cuda  # noqa: PLC0415
    from validation.suite import _inputs  # noqa: PLC0415

    try:
        compiled = gemm_cuda.compile_gemm(cfg)
    except ValueError as e:
        print(f"unsupported: {e}", file=sys.stderr)
        return EXIT_UNSUPPORTED
    except gemm_cuda.GemmCompileError as e:
        print(f"compile error: {e}", file=sys.stderr)
        return EXIT_COMPILE
    print(f"KERNEL_NAME={kernel_name_of(compiled) or ''}", flush=True)
    try:
        res = gemm_cuda.check_correct(compiled, seed=0)
        if not res.ok:
            print(f"wrong: {res.message}", file=sys.stderr)
            return EXIT_WRONG
        dtype = {"fp32": cp.float32, "fp16": cp.float16}.get(cfg.dtype, cp.float32)
        a, b, c = _inputs(cp, cfg.m, cfg.n, cfg.k, dtype)
        cp.cuda.Device().synchronize()
        rt = cp.cuda.runtime
        start = getattr(rt, "profilerStart", None) or cp.cuda.profiler.start
        stop = getattr(rt, "profilerStop", None) or cp.cuda.profiler.stop
        start()
        compiled.launch(a, b, c)
        compiled.launch(a, b, c)
        cp.cuda.Device().synchronize()
        stop()
    except Exception as e:  # noqa: BLE001
        print(f"launch error: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_LAUNCH
    return 0


# ----- driving ncu ---------------------------------------------------------------------------------------
def ncu_command(cfg: GemmConfig, kernel_regex: str = ".*", ncu: str = "ncu",
                python: str = sys.executable) -> list[str]:
    """The ncu command line that profiles one configuration."""
    return [ncu, "--clock-control", "none", "--cache-control", "all", "--target-processes", "all",
            "--csv", "--page", "raw", "--print-units", "base", "--profile-from-start", "off",
            "--metrics", ",".join(METRICS), "--kernel-name", f"regex:{kernel_regex}",
            "--launch-skip", "1", "--launch-count", "1",
            python, "-m", "validation.ncu", "--target", config_to_json(cfg)]


def _kernel_regex(cfg: GemmConfig) -> str:
    """The kernel's name (compiled here, without ncu) as an anchored regex, or ``.*``."""
    import re  # noqa: PLC0415

    try:
        from validation import gemm_cuda  # noqa: PLC0415

        name = kernel_name_of(gemm_cuda.compile_gemm(cfg))
    except Exception:  # noqa: BLE001 - the target reports the failure properly
        name = None
    return f"^{re.escape(name)}$" if name else ".*"


def profile_one(cfg: GemmConfig, *, ncu: str = "ncu", timeout_s: float = 600.0) -> dict:
    """Run ncu on one configuration; the measured columns of its row (never raises)."""
    cmd = ncu_command(cfg, _kernel_regex(cfg), ncu)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"status": "ncu_error", "message": f"ncu timed out after {timeout_s} s"}
    except OSError as e:
        return {"status": "ncu_error", "message": f"could not run ncu: {e}"}
    tail = (p.stderr.strip().splitlines() or [""])[-1][:500]
    if p.returncode in _EXIT_STATUS:
        return {"status": _EXIT_STATUS[p.returncode], "message": tail}
    try:
        recs = parse_ncu_csv(p.stdout)
    except ValueError as e:
        return {"status": "ncu_error", "message": f"rc={p.returncode}: {e}; {tail}"}
    if not recs:
        return {"status": "ncu_error", "message": f"rc={p.returncode}: no kernel profiled; {tail}"}
    rec = recs[0]
    rec.update(status="ok" if p.returncode == 0 else "ncu_error",
               message="" if p.returncode == 0 else f"rc={p.returncode}; {tail}")
    return rec


def profile_configs(configs: Iterable[GemmConfig], out_dir: str | Path, *, resume: bool = True,
                    progress: bool = True, ncu: str = "ncu") -> Path:
    """Profile each configuration with ncu, appending one row per configuration to
    ``out_dir/counters.csv`` right away; returns the CSV path. With ``resume``, configurations
    whose row has a final status are skipped (``ncu_error`` rows are retried)."""
    from validation.metadata import utc_now_iso  # noqa: PLC0415
    from validation.suite import RowWriter, _progress, read_done  # noqa: PLC0415

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "counters.csv"
    if not resume and path.exists():
        path.replace(out / "counters.csv.bak")
    done = read_done(path)
    todo = [c for c in configs if (c.label, c.m, c.n, c.k) not in done]
    with RowWriter(path, CSV_COLUMNS) as w, _progress(progress) as bar:
        task = bar.add_task("ncu", total=len(todo))
        for cfg in todo:
            bar.update(task, description=f"ncu {cfg.label} {cfg.m}x{cfg.n}x{cfg.k}")
            row = {"label": cfg.label, "m": cfg.m, "n": cfg.n, "k": cfg.k, "variant": cfg.variant}
            row.update(profile_one(cfg, ncu=ncu))
            row["timestamp_utc"] = utc_now_iso()
            w.write(row)
            bar.advance(task)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.ncu", description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help="output directory (counters.csv)")
    ap.add_argument("--suite", default=None, help="suite TOML (default scenarios/validation_suite.toml)")
    ap.add_argument("--shape", default=None, help="only this shape, MxNxK (e.g. 4096x4096x4096)")
    ap.add_argument("--only", default=None, help="only labels containing SUBSTRING")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--ncu", default="ncu", help="the ncu executable")
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    if args.target is not None:
        return target(config_from_json(args.target))
    if args.out is None:
        ap.error("--out DIR is required")
    from validation.suite import gpu_available, load_suite, select  # noqa: PLC0415

    configs = select(load_suite(args.suite), only=args.only, shape=args.shape, limit=args.limit)
    why = gpu_available()
    if why:
        print(f"validation.ncu: needs CuPy and an NVIDIA GPU: {why}", file=sys.stderr)
        return 2
    if shutil.which(args.ncu) is None:
        print(f"validation.ncu: Nsight Compute executable {args.ncu!r} not found", file=sys.stderr)
        return 2
    path = profile_configs(configs, args.out, resume=not args.fresh, progress=not args.no_progress,
                           ncu=args.ncu)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ----- microbenchmark probes profiled as a whole -------------------------------------------------------
def probe_rows(module: str, metrics: Sequence[str], *, cache_control: str = "none", ncu: str = "ncu",
               timeout_s: float = 900.0) -> list[dict]:
    """Run ``python -m <module> --target`` under ncu; one dict per profiled kernel launch, in launch
    order: ``kernel_name`` and each metric's number (ncu's base units; None when missing).

    Raises ``RuntimeError`` with ncu's last words when no kernel was profiled."""
    cmd = [ncu, "--clock-control", "none", "--cache-control", cache_control, "--csv", "--page", "raw",
           "--print-units", "base", "--profile-from-start", "off", "--metrics", ",".join(metrics),
           sys.executable, "-m", module, "--target"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    rows = list(csv.reader([ln for ln in p.stdout.splitlines() if ln.startswith('"')]))
    if len(rows) < 3:
        raise RuntimeError(f"ncu gave no rows (rc={p.returncode}): {p.stderr[-800:]}")
    col = {h: i for i, h in enumerate(rows[0])}
    return [{"kernel_name": r[col["Kernel Name"]], **{m: parse_number(r[col[m]]) if m in col else None
                                                       for m in metrics}} for r in rows[2:] if len(r) == len(rows[0])]


def probe_main(prog: str, doc: str, argv, target, measure, out_name: str, extra=None, show=None) -> int:
    """The command line of a probe module: ``--target`` (what ncu runs) or measure and write
    ``<out>/<out_name>`` with metadata; one line and exit 2 without CuPy or ncu."""
    ap = argparse.ArgumentParser(prog=f"python -m {prog}", description=doc.splitlines()[0])
    ap.add_argument("--out", default="validation/results/h200")
    ap.add_argument("--target", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    try:
        import cupy  # noqa: F401, PLC0415
    except ImportError as exc:
        print(f"{prog}: needs CuPy and an NVIDIA GPU: {exc}", file=sys.stderr)
        return 2
    if args.target:
        return target()
    if not shutil.which("ncu"):
        print(f"{prog}: needs Nsight Compute (ncu) on PATH", file=sys.stderr)
        return 2
    from validation.metadata import collect_metadata  # noqa: PLC0415

    res = {"meta": collect_metadata(), **(extra or {}), **measure()}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / out_name).write_text(json.dumps(res, indent=2, default=str) + "\n")
    if show:
        show(res)
    return 0
