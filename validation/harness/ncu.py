"""Nsight Compute counters for a family's suite: all configurations in one ``ncu`` process per chunk.

``profile_family(family, configs, out_dir)`` runs, per chunk of configurations::

    ncu --clock-control none --cache-control all --target-processes all --csv --page raw
        --print-units base --print-kernel-base mangled --profile-from-start off --metrics <METRICS>
        python -m validation.harness.ncu --target FAMILY --jobs JOBS.json --manifest MANIFEST.jsonl

The target prepares each configuration in turn (outside the profiled range), then, inside
``cudaProfilerStart``/``cudaProfilerStop``, runs ``case.launch()`` once followed by a one-thread
marker kernel (:data:`MARKER`). Every profiled kernel is therefore a configuration's kernel or a
marker, and the rows between two markers belong to one configuration (all of them are counted;
names other than the case's ``kernel_names`` are noted in the message): they are mapped back in
launch order through the manifest the target writes (one JSON line per configuration: its index
and status). ``--cache-control all`` flushes the caches before each kernel, so DRAM bytes are
those of a cold launch. A configuration of several kernels sums their counts and times
(:func:`aggregate`). Rows go to ``out_dir/counters.csv`` (config columns, then status, message,
kernel names, metrics with their unit in the column name); resumable: configurations with a final
status are skipped, ``ncu_error`` rows are retried. A crash of the target costs only the
configuration it was running (recorded as ``ncu_error``); the chunk goes on after it.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import io
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tilesim.kernels import registry
from validation.harness import runners, suite

#: metric -> unit of its column (values are converted to that unit); the column is ``<metric>_<unit>``
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
#: diagnostics (issue activity, stall reasons, occupancy): more replay passes; ``--extra`` adds them
EXTRA_METRICS = {
    "smsp__issue_active.avg.pct_of_peak_sustained_active": "pct",
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active": "pct",
    "sm__maximum_warps_per_active_cycle_pct": "pct",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "count",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "count",
    "lts__t_sectors_srcunit_tex_op_read.sum": "count",
    "lts__t_sectors_srcunit_tex_op_write.sum": "count",
    "l1tex__t_sector_hit_rate.pct": "pct",
    # warp instructions per execution pipe (which pipe each SASS opcode class really uses)
    **{f"smsp__inst_executed_pipe_{p}.sum": "count" for p in (
        "alu", "fma", "fmaheavy", "fp64", "xu", "lsu", "adu", "cbu", "uniform", "tensor")},
    **{f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio": "count" for r in (
        "short_scoreboard", "long_scoreboard", "mio_throttle", "math_pipe_throttle", "wait",
        "not_selected", "barrier", "dispatch_stall", "lg_throttle", "no_instruction")},
}
TIME_METRIC = "gpu__time_duration.sum"
#: how a configuration's kernels combine: max for per-launch settings, a weighted mean for rates and
#: percentages (by the named metric; time when None), a sum for everything else
MAX_METRICS = frozenset({"launch__registers_per_thread"})
WEIGHTED_METRICS = {"lts__t_sector_hit_rate.pct": "lts__t_bytes.sum"}
MARKER = "tilesim_ncu_marker"
MARKER_SOURCE = f'extern "C" __global__ void {MARKER}(int* flag) {{ if (flag) flag[0] = 1; }}\n'
FINAL_STATUSES = suite.FINAL_STATUSES
CHUNK = 32  # configurations per ncu process (a lost process costs at most one chunk's rows)
EXIT_CONTEXT = 7  # the target's exit status when the CUDA context died
MIN_CHUNK_S = 20.0  # with a time budget, no ncu process starts with less than this left


def family_metrics(family: str, *, extra: bool = False) -> dict[str, str]:
    """:data:`METRICS`, the family runner's own ``NCU_METRICS`` (e.g. tensor-pipe activity) and, with
    ``extra``, :data:`EXTRA_METRICS`."""
    own = getattr(runners.get_runner(family), "NCU_METRICS", {})
    return {**METRICS, **own, **(EXTRA_METRICS if extra else {})}


def metric_columns(metrics: dict[str, str]) -> tuple[str, ...]:
    return tuple(f"{m}_{u}" for m, u in metrics.items())


def csv_columns(family: str, metrics: dict[str, str] = METRICS) -> tuple[str, ...]:
    return (*suite.config_columns(family), "status", "message", "kernels", "kernel_names",
            *metric_columns(metrics), "timestamp_utc")


# ----- parsing ncu's CSV -----------------------------------------------------------------------------
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


def parse_ncu_csv(text: str, metrics: dict[str, str] = METRICS) -> list[dict]:
    """Parse ``ncu --csv --page raw`` output: a header row, a units row, one row per kernel launch.

    Lines before the header (``==PROF==`` messages, the program's own output) and non-CSV lines
    after it are skipped. Returns one dict per launch in profiling order (by ``ID``):
    ``kernel_name`` plus each metric's value converted to its column's unit (key = column name;
    None when missing or unparsable). Raises ``ValueError`` if no header row is found."""
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
        if "ID" in col:
            rec["id"] = parse_number(r[col["ID"]])
        for metric, target in metrics.items():
            name = f"{metric}_{target}"
            v = parse_number(r[col[metric]]) if metric in col else None
            rec[name] = None if v is None else convert(v, units[col[metric]], target)
        out.append(rec)
    if all(rec.get("id") is not None for rec in out):
        out.sort(key=lambda rec: rec["id"])
    return out


def aggregate(records: Sequence[dict], metrics: dict[str, str] = METRICS) -> dict:
    """One configuration's counters from its kernels' records (see :data:`MAX_METRICS` and
    :data:`WEIGHTED_METRICS`; percentages and rates are weighted by time). A metric missing from
    any kernel is None."""
    col = {m: f"{m}_{u}" for m, u in metrics.items()}
    out: dict = {}
    for m, u in metrics.items():
        vals = [r.get(col[m]) for r in records]
        if not vals or any(v is None for v in vals):
            out[col[m]] = None
        elif m in MAX_METRICS:
            out[col[m]] = max(vals)
        elif u in ("pct", "hz") or m in WEIGHTED_METRICS:
            wm = WEIGHTED_METRICS.get(m, TIME_METRIC)
            ws = [r.get(col.get(wm, "")) for r in records]
            if any(w is None for w in ws) or sum(ws) <= 0:
                ws = [1.0] * len(vals)
            out[col[m]] = sum(v * w for v, w in zip(vals, ws, strict=True)) / sum(ws)
        else:
            out[col[m]] = sum(vals)
    return out


def split_at_markers(records: Sequence[dict]) -> list[list[dict]]:
    """The records between markers, one group per marker (a trailing group without its marker, i.e.
    a configuration cut short, is dropped)."""
    groups, cur = [], []
    for r in records:
        if MARKER in r.get("kernel_name", ""):
            groups.append(cur)
            cur = []
        else:
            cur.append(r)
    return groups


def assign(manifest: Sequence[dict], records: Sequence[dict], metrics: dict[str, str] = METRICS) -> dict[int, dict]:
    """Map the profiled records back to configurations: index -> measured columns of its row.

    ``manifest`` lists, in launch order, ``{"index", "status", "message", "kernel_names"}`` per
    configuration the target reached; entries with ``marker`` (every ``ok`` one, and a failed launch
    whose range was closed) own one group of records, in order."""
    groups = split_at_markers(records)
    out: dict[int, dict] = {}
    ran = [e for e in manifest if e.get("marker", e["status"] == "ok")]
    for n, entry in enumerate(ran):
        if entry["status"] != "ok":
            continue
        if n >= len(groups):
            out[entry["index"]] = {"status": "ncu_error", "message": "no counters: the profiled launch did not finish"}
            continue
        own = groups[n]  # only this configuration's launch ran in its profiler range
        wanted = set(entry.get("kernel_names") or ())
        other = sorted({r["kernel_name"] for r in own} - wanted)
        note = f"kernels not in the runner's kernel_names (counted): {', '.join(other)[:300]}" if wanted and other else ""
        if not own:
            out[entry["index"]] = {"status": "ncu_error", "message": "no kernel profiled for this configuration"}
            continue
        out[entry["index"]] = {**aggregate(own, metrics), "status": "ok", "message": note, "kernels": len(own),
                               "kernel_names": " ".join(dict.fromkeys(r["kernel_name"] for r in own))}
    for entry in manifest:
        if entry["status"] != "ok":
            out[entry["index"]] = {"status": entry["status"], "message": entry.get("message", "")}
    return out


# ----- the profiled target -----------------------------------------------------------------------------
def config_fields(cfg) -> dict:
    """The configuration as keyword values of ``KernelFamily.make``."""
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}


def _record(fh, entry: dict) -> None:
    fh.write(json.dumps(entry) + "\n")
    fh.flush()
    os.fsync(fh.fileno())


def target(family: str, jobs_path: Path, manifest_path: Path) -> int:
    """What ncu runs: each job's configuration prepared, then launched once plus the marker inside
    the profiler range; one manifest line per configuration (``begin`` first, so that a crash names
    the configuration it happened in). Exits :data:`EXIT_CONTEXT` when the CUDA context died."""
    import cupy as cp  # noqa: PLC0415

    from validation.harness import runners  # noqa: PLC0415

    runner = runners.get_runner(family)
    fam = registry.get(family)
    jobs = json.loads(Path(jobs_path).read_text())
    marker = cp.RawKernel(MARKER_SOURCE, MARKER)
    flag = cp.zeros(1, dtype=cp.int32)
    rt = cp.cuda.runtime
    start = getattr(rt, "profilerStart", None) or cp.cuda.profiler.start
    stop = getattr(rt, "profilerStop", None) or cp.cuda.profiler.stop
    with Path(manifest_path).open("a") as fh:
        for job in jobs:
            idx = job["index"]
            _record(fh, {"index": idx, "status": "begin"})
            try:
                cfg = fam.make(**job["fields"])
                case = runner.prepare(cfg, seed=0)
                cp.cuda.Device().synchronize()
            except Exception as e:  # noqa: BLE001 - a broken kernel must not stop the chunk
                _record(fh, {"index": idx, **suite.failure_status(e, "prepare")})
                if suite.is_cuda_error(e) and not suite.context_ok():
                    return EXIT_CONTEXT
                continue
            try:
                start()
                case.launch()
                marker((1,), (1,), (flag,))
                cp.cuda.Device().synchronize()
                stop()
            except Exception as e:  # noqa: BLE001
                if not suite.context_ok():
                    _record(fh, {"index": idx, **suite.failure_status(e, "launch")})
                    return EXIT_CONTEXT
                try:  # close the range so that kernels it may have run are not counted for the next one
                    marker((1,), (1,), (flag,))
                    cp.cuda.Device().synchronize()
                    stop()
                    closed = True
                except Exception:  # noqa: BLE001
                    closed = False
                _record(fh, {"index": idx, **suite.failure_status(e, "launch"), "marker": closed})
                if not closed:
                    return EXIT_CONTEXT
                continue
            _record(fh, {"index": idx, "status": "ok", "marker": True,
                         "kernel_names": list(getattr(case, "kernel_names", ()))})
            print(f"profiled {fam.full_label(cfg)}", flush=True)
            del case
    return 0


def read_manifest(path: Path) -> list[dict]:
    """The target's manifest: the last state of each configuration, in launch order; a configuration
    that began and never ended (the target died in it) reads as ``ncu_error``."""
    entries: dict[int, dict] = {}
    if Path(path).exists():
        for line in Path(path).read_text().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            entries[e["index"]] = e
    out = []
    for idx, e in entries.items():
        if e["status"] == "begin":
            e = {"index": idx, "status": "ncu_error", "message": "the profiled process died in this configuration"}
        out.append(e)
    return out


# ----- driving ncu ---------------------------------------------------------------------------------------
def run_in_group(cmd: Sequence[str], *, capture_output: bool = True, text: bool = True,
                 timeout: float | None = None) -> subprocess.CompletedProcess:
    """``subprocess.run`` in a new process group, the whole group killed on timeout (ncu and the
    Python process it profiles); raises ``TimeoutExpired`` carrying the output so far."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE if capture_output else None,
                            stderr=subprocess.PIPE if capture_output else None, text=text, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err) from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def ncu_command(family: str, jobs: Path, manifest: Path, metrics: dict[str, str] = METRICS, ncu: str = "ncu",
                python: str = sys.executable) -> list[str]:
    """The ncu command line that profiles one chunk of a family's configurations."""
    return [ncu, "--clock-control", "none", "--cache-control", "all", "--target-processes", "all",
            "--csv", "--page", "raw", "--print-units", "base", "--print-kernel-base", "mangled",
            "--profile-from-start", "off", "--metrics", ",".join(metrics),
            python, "-m", "validation.harness.ncu", "--target", family, "--jobs", str(jobs),
            "--manifest", str(manifest)]


def run_chunk(family: str, jobs: list[dict], *, metrics: dict[str, str] = METRICS, ncu: str = "ncu",
              timeout_s: float = 600.0, run: Callable = run_in_group) -> dict[int, dict]:
    """Profile ``jobs`` (``{"index", "fields"}``) in one ncu process; index -> measured columns.

    After a crash of the target, the configurations it did not reach are profiled by a further ncu
    process (each crash costs one configuration)."""
    results: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="tilesim_ncu_") as tmp:
        todo = list(jobs)
        while todo:
            jobs_path, manifest_path = Path(tmp) / "jobs.json", Path(tmp) / "manifest.jsonl"
            jobs_path.write_text(json.dumps(todo))
            manifest_path.write_text("")
            try:
                p = run(ncu_command(family, jobs_path, manifest_path, metrics, ncu), capture_output=True,
                        text=True, timeout=timeout_s)
                stdout, tail = p.stdout, (p.stderr.strip().splitlines() or [""])[-1][:300]
            except subprocess.TimeoutExpired as e:
                out = e.stdout or ""
                stdout, tail = (out.decode() if isinstance(out, bytes) else out), f"ncu timed out after {timeout_s} s"
                timed_out = True
            else:
                timed_out = False
            manifest = read_manifest(manifest_path)
            try:
                records = parse_ncu_csv(stdout, metrics)
            except ValueError as e:
                records, tail = [], f"{e}; {tail}"
            got = assign(manifest, records, metrics)
            for res in got.values():
                if res["status"] == "ncu_error" and tail:
                    res["message"] = f"{res['message']}; {tail}"
            results.update(got)
            reached = {e["index"] for e in manifest}
            rest = [j for j in todo if j["index"] not in reached]
            if timed_out or len(rest) == len(todo):  # a timeout or nothing reached: do not loop
                for j in rest:
                    results[j["index"]] = {"status": "ncu_error", "message": f"ncu profiled nothing: {tail}"}
                break
            todo = rest
    return results


def ok_in_times(family: str, out_dir: Path) -> set[tuple[str, ...]] | None:
    """Keys of the configurations timed ``ok`` in ``out_dir/times.csv`` (None without that file)."""
    path = Path(out_dir) / "times.csv"
    if not path.exists():
        return None
    cols = suite.config_columns(family)
    return {suite.row_key(r, cols) for r in suite.read_rows(path) if r.get("status") == "ok"}


def profile_family(family: str, configs: Sequence, out_dir: str | Path, *, resume: bool = True,
                   metrics: dict[str, str] = METRICS, ncu: str = "ncu", chunk: int = CHUNK,
                   timeout_s: float = 600.0, budget_s: float | None = None,
                   log: Callable[[str], None] | None = print, run: Callable = run_in_group) -> Path:
    """Profile the configurations (those timed ``ok`` when ``out_dir/times.csv`` exists) and append
    one row each to ``out_dir/counters.csv``; returns its path. ``timeout_s`` bounds one ncu
    process; with ``budget_s`` no chunk starts after that many seconds and none runs past them."""
    from validation.harness.metadata import utc_now_iso  # noqa: PLC0415

    if chunk < 1:
        raise ValueError(f"chunk = {chunk}: must be >= 1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "counters.csv"
    if not resume and path.exists():
        path.replace(out / "counters.csv.bak")
    cols = suite.config_columns(family)
    done = suite.read_done(path, cols)
    timed_ok = ok_in_times(family, out)
    rows = [suite.config_row(family, c) for c in configs]
    todo = [(i, c) for i, (c, r) in enumerate(zip(configs, rows, strict=True))
            if suite.row_key(r, cols) not in done and (timed_ok is None or suite.row_key(r, cols) in timed_ok)]
    if log:
        log(f"{family}: ncu on {len(todo)} configurations ({len(configs) - len(todo)} recorded or not timed ok)")
    deadline = time.monotonic() + budget_s if budget_s is not None else math.inf
    with suite.RowWriter(path, csv_columns(family, metrics)) as w:
        for s in range(0, len(todo), chunk):
            left = deadline - time.monotonic()
            if left < MIN_CHUNK_S:
                if log:
                    log(f"{family}: time budget spent, {len(todo) - s} configurations left for the next run")
                break
            part = todo[s:s + chunk]
            got = run_chunk(family, [{"index": i, "fields": config_fields(c)} for i, c in part],
                            metrics=metrics, ncu=ncu, timeout_s=min(timeout_s, left), run=run)
            for i, _ in part:
                res = got.get(i, {"status": "ncu_error", "message": "not reached"})
                w.write({**rows[i], **res, "timestamp_utc": utc_now_iso()})
            if log:
                ok = sum(got.get(i, {}).get("status") == "ok" for i, _ in part)
                log(f"[{min(s + chunk, len(todo))}/{len(todo)}] {family}: {ok}/{len(part)} profiled ok in this chunk")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.harness.ncu", description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--jobs", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--manifest", default=None, help=argparse.SUPPRESS)
    if "--target" in (argv if argv is not None else sys.argv[1:]):
        args = ap.parse_args(argv)
        return target(args.target, Path(args.jobs), Path(args.manifest))
    suite.add_selection_args(ap)
    ap.add_argument("--ncu", default="ncu", help="the ncu executable")
    ap.add_argument("--chunk", type=int, default=CHUNK, help="configurations per ncu process")
    ap.add_argument("--extra", action="store_true", help="also the stall and issue diagnostics (slower)")
    ap.add_argument("--add-metrics", default=None,
                    help="comma-separated further metrics (counts; names from `ncu --query-metrics`)")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="stop starting ncu processes after this many seconds (all families); resume later")
    args = ap.parse_args(argv)
    try:
        plans = [(f, suite.selected(args, f)) for f in args.families]
    except ValueError as e:
        print(f"validation.harness.ncu: {e}", file=sys.stderr)
        return 2
    why = suite.gpu_available()
    if why:
        print(f"validation.harness.ncu: needs CuPy and an NVIDIA GPU: {why}", file=sys.stderr)
        return 2
    if shutil.which(args.ncu) is None:
        print(f"validation.harness.ncu: Nsight Compute executable {args.ncu!r} not found", file=sys.stderr)
        return 2
    if (args.suite or args.out) and len(args.families) > 1:
        ap.error("--suite and --out need exactly one family")
    deadline = time.monotonic() + args.budget_s if args.budget_s is not None else None
    for family, configs in plans:
        budget = None if deadline is None else max(0.0, deadline - time.monotonic())
        metrics = family_metrics(family, extra=args.extra)
        if args.add_metrics:
            metrics.update(dict.fromkeys((m.strip() for m in args.add_metrics.split(",") if m.strip()), "count"))
        path = profile_family(family, configs, suite.out_dir(args, family), resume=not args.fresh, metrics=metrics,
                              ncu=args.ncu, chunk=args.chunk, budget_s=budget)
        print(f"wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
