"""A quick correctness and speed pass over every distinct tc_gemm kernel of suite.toml (needs a GPU).

``python -m validation.families.tc_gemm.smoke --out DIR [--only SUBSTR] [--top N] [--no-time] [--resume]``

For each distinct kernel of the suite (wmma and mma_sync through ``mma.py``; wgmma through
``wgmma.py`` when it exists), in suite order: the kernel's configuration is moved to each of
:data:`SMALL_SHAPES` (256^3; 257 x 264 x 136, ragged in every dimension; and the block tile itself,
bm x bn x bk, one k-tile) and ``prepare`` + ``check`` run there. Every exception is caught and
recorded with its type and message (a ``ValueError`` from ``prepare`` is "unsupported" for that
shape, anything else "error"); a failed check is "FAIL". Then every kernel that passed is timed
at 8192^3 (:data:`TIME_SHAPE`, 3 repetitions, L2 flushed, no check) and the ``--top`` fastest again
with 20 repetitions. One line per kernel is printed; ``DIR/smoke.json`` holds everything and is
rewritten after each kernel.

A CUDA error that kills the context (illegal address, launch failure) is recorded for the kernel
that caused it and the process re-executes itself with ``--resume`` (at most
:data:`MAX_RESTARTS` times), which skips the kernels already in ``smoke.json``. A kernel still
running after :data:`HANG_S` seconds is recorded as "hang" and the process exits with status 75:
run the same command with ``--resume`` to go on.

Exit status: 0 when every kernel passed every shape it supports, 1 otherwise, 2 without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

SMALL_SHAPES = ((256, 256, 256), (257, 264, 136), "tile")
TIME_SHAPE = (8192, 8192, 8192)
HANG_S = 60.0
MAX_RESTARTS = 10
EXIT_HANG = 75
_RESTART_ENV = "TC_GEMM_SMOKE_RESTARTS"


def kernel_key(cfg) -> str:
    """The identity of ``cfg``'s kernel: its name expressions (unique per distinct kernel)."""
    from validation.families.tc_gemm import runner

    return " ".join(runner.kernel_source(cfg).name_expressions)


def distinct_kernels(configs) -> dict[str, object]:
    """The first suite configuration of each distinct kernel, in suite order (key -> config).

    A configuration whose source cannot be produced (``kernel_source`` raises) is keyed by its label."""
    out: dict[str, object] = {}
    for c in configs:
        try:
            key = kernel_key(c)
        except Exception:  # noqa: BLE001 - reported when the kernel is tried
            key = f"<no source> {c.label}"
        out.setdefault(key, c)
    return out


def small_configs(cfg) -> list[tuple[str, object | None, str]]:
    """(shape text, config at that shape or None, reason when None) for :data:`SMALL_SHAPES`."""
    out = []
    for s in SMALL_SHAPES:
        m, n, k = (cfg.bm, cfg.bn, cfg.bk) if s == "tile" else s
        text = f"{m}x{n}x{k}"
        try:
            out.append((text, cfg.with_(m=m, n=n, k=k), ""))
        except ValueError as e:
            out.append((text, None, str(e)))
    return out


def _describe(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:2000]}"


def context_alive() -> bool:
    """Whether the CUDA context still works after an error."""
    import cupy

    try:
        cupy.cuda.runtime.deviceSynchronize()
        x = cupy.arange(4, dtype=cupy.float32)
        return float((x * 2).sum()) == 12.0
    except Exception:  # noqa: BLE001
        return False


def check_small(cfg) -> list[dict]:
    """prepare + check at each small shape; every failure recorded, never raised (except a dead context)."""
    from validation.families.tc_gemm import runner

    results = []
    for text, c, why in small_configs(cfg):
        rec = {"shape": text}
        if c is None:
            rec.update(status="unsupported", message=why)
            results.append(rec)
            continue
        try:
            case = runner.prepare(c, seed=0)
        except ValueError as e:
            rec.update(status="unsupported", message=_describe(e))
            results.append(rec)
            continue
        except Exception as e:  # noqa: BLE001
            rec.update(status="error", message="prepare: " + _describe(e))
            results.append(rec)
            if not context_alive():
                raise ContextLost(rec["message"]) from e
            continue
        rec["attributes"] = case.attributes
        try:
            ok, err, msg = case.check()
            rec.update(status="ok" if ok else "FAIL", rel_err=err, message=msg)
        except Exception as e:  # noqa: BLE001
            rec.update(status="error", message="check: " + _describe(e))
            results.append(rec)
            if not context_alive():
                raise ContextLost(rec["message"]) from e
            continue
        finally:
            del case
        results.append(rec)
    return results


class ContextLost(RuntimeError):
    """The CUDA context died: the process must restart to go on."""


class Watchdog:
    """Calls ``on_hang(what)`` from a thread when ``arm(what)`` is not followed by ``disarm()`` in time."""

    def __init__(self, seconds: float, on_hang):
        self.seconds, self.on_hang = seconds, on_hang
        self._what, self._since = None, 0.0
        self._lock = threading.Lock()
        threading.Thread(target=self._run, daemon=True).start()

    def arm(self, what: str) -> None:
        with self._lock:
            self._what, self._since = what, time.monotonic()

    def disarm(self) -> None:
        with self._lock:
            self._what = None

    def _run(self) -> None:
        while True:
            time.sleep(1.0)
            with self._lock:
                what, since = self._what, self._since
            if what is not None and time.monotonic() - since > self.seconds:
                self.on_hang(what)


def time_kernels(entries: list[dict], configs: dict[str, object], top: int, log) -> None:
    """Time each passing kernel at :data:`TIME_SHAPE` (3 reps), then the ``top`` fastest with 20 reps;
    writes ``time_s``, ``flops_per_s`` (or ``time_error``) into the entries."""
    import cupy

    from validation.families.tc_gemm import runner
    from validation.harness.timing import L2Flusher, time_gpu

    flusher = L2Flusher()
    m, n, k = TIME_SHAPE
    inputs: dict[tuple, tuple] = {}
    timed = []
    for e in entries:
        cfg = configs.get(e["kernel"])
        if cfg is None or e["status"] != "ok" or cfg.staging == "global":
            continue  # global-staging kernels are too slow at 8192^3 (the suite measures them at 4096^3)
        try:
            big = cfg.with_(m=m, n=n, k=k)
            key = (cfg.dtype, cfg.b_layout)
            if key not in inputs:
                inputs.clear()  # keep one input set in memory
                inputs[key] = runner.random_inputs(big, 0)
            a, b = inputs[key]
            c = runner.allocate_output(big)
            built = runner.backend(big).build(big, a, b, c)
            t = time_gpu(built.launch, warmup=1, reps=3, min_reps=3, budget_s=5.0, flusher=flusher)
            e["time_s"] = t.median_s
            e["flops_per_s"] = 2.0 * m * n * k / t.median_s
            timed.append((t.median_s, e, built))
        except Exception as ex:  # noqa: BLE001
            e["time_error"] = _describe(ex)
            if not context_alive():
                log(f"context lost while timing {e['kernel']}: {e['time_error']}")
                return
    timed.sort(key=lambda x: x[0])
    for _, e, built in timed[:top]:
        try:
            t = time_gpu(built.launch, warmup=2, reps=20, min_reps=20, budget_s=10.0, flusher=flusher)
            e["time_s"], e["time_p10_s"], e["time_p90_s"] = t.median_s, t.p10_s, t.p90_s
            e["flops_per_s"] = 2.0 * m * n * k / t.median_s
            e["timed_reps"] = 20
        except Exception as ex:  # noqa: BLE001
            e["time_error"] = _describe(ex)
    cupy.get_default_memory_pool().free_all_blocks()


def cublas_rows(dtypes, log) -> list[dict]:
    """cuBLAS at :data:`TIME_SHAPE` per input type (the reference for "% of cuBLAS")."""
    from validation.families.tc_gemm.runner import CublasCase
    from validation.harness.timing import time_gpu

    m, n, k = TIME_SHAPE
    rows = []
    for dt in dtypes:
        row = {"kernel": f"cublas_{dt}", "dtype": dt}
        try:
            case = CublasCase(m, n, k, dt)
            ok, err = case.check()
            t = time_gpu(case.launch, warmup=2, reps=20, min_reps=20, budget_s=10.0)
            row.update(status="ok" if ok else "FAIL", rel_err=err, time_s=t.median_s,
                       flops_per_s=2.0 * m * n * k / t.median_s)
        except Exception as ex:  # noqa: BLE001
            row.update(status="error", message=_describe(ex))
        rows.append(row)
        log(f"{row['status']:5s} cublas {dt}: " + (f"{row['time_s'] * 1e3:.3f} ms, {row['flops_per_s'] * 1e-12:.1f} TFLOP/s"
                                                    if "time_s" in row else row.get("message", "")))
    return rows


def _line(e: dict) -> str:
    errs = [s.get("rel_err") for s in e["shapes"] if s.get("rel_err") is not None]
    worst = f"rel_err<={max(errs):.2e}" if errs else "rel_err=-"
    tm = (f"{e['time_s'] * 1e3:8.3f} ms {e['flops_per_s'] * 1e-12:6.1f} TFLOP/s" if "time_s" in e
          else " " * 25)
    regs = next((s["attributes"].get("regs_per_thread") for s in e["shapes"] if s.get("attributes")), None)
    head = f"{e['status']:5s} {worst:18s} {tm} regs={regs} {e['kernel']}"
    bad = [f"[{s['shape']} {s['status']}: {s.get('message', '')}]" for s in e["shapes"] if s["status"] != "ok"]
    return head + ("  " + " ".join(bad) if bad else "")


def _save(path: Path, doc: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    os.replace(tmp, path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation.families.tc_gemm.smoke", description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="directory for smoke.json")
    p.add_argument("--only", "--family-filter", dest="only", default=None,
                   help="only kernels whose name or suite label contains this substring")
    p.add_argument("--suite", default=None, help="suite file (default: validation/families/tc_gemm/suite.toml)")
    p.add_argument("--top", type=int, default=8, help="re-time the N fastest kernels with 20 repetitions")
    p.add_argument("--no-time", action="store_true", help="correctness only")
    p.add_argument("--resume", action="store_true", help="skip kernels already in DIR/smoke.json")
    args = p.parse_args(argv)
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001
        print(f"smoke: no GPU / CuPy: {_describe(e)}", file=sys.stderr)
        return 2
    from validation.harness.metadata import collect_metadata
    from validation.harness.suite_file import load_suite

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "smoke.json"
    configs = distinct_kernels(load_suite("tc_gemm", args.suite))
    if args.only:
        configs = {k: c for k, c in configs.items() if args.only in k or args.only in c.label}
    doc = {"metadata": collect_metadata(), "small_shapes": [str(s) for s in SMALL_SHAPES],
           "time_shape": "x".join(map(str, TIME_SHAPE)), "kernels": []}
    if args.resume and path.exists():
        try:
            old = json.loads(path.read_text())
            doc["kernels"] = [e for e in old.get("kernels", []) if e.get("status") != "hang"] + \
                [e for e in old.get("kernels", []) if e.get("status") == "hang"]
        except (OSError, ValueError):
            pass
    done = {e["kernel"] for e in doc["kernels"]}
    current: dict = {}

    def on_hang(what: str) -> None:
        doc["kernels"].append({"kernel": what, "label": current.get("label", ""), "status": "hang",
                               "shapes": [{"shape": "?", "status": "hang",
                                           "message": f"still running after {HANG_S:.0f} s"}]})
        _save(path, doc)
        print(f"hang  {what}: still running after {HANG_S:.0f} s; rerun with --resume", flush=True)
        os._exit(EXIT_HANG)

    watchdog = Watchdog(HANG_S, on_hang)
    for key, cfg in configs.items():
        if key in done:
            continue
        current["label"] = cfg.label
        watchdog.arm(key)
        entry = {"kernel": key, "label": cfg.label, "instruction": cfg.instruction, "dtype": cfg.dtype}
        try:
            entry["shapes"] = check_small(cfg)
        except ContextLost as e:
            entry["shapes"] = [{"shape": "?", "status": "error", "message": f"CUDA context lost: {e}"}]
            entry["status"] = "error"
            doc["kernels"].append(entry)
            _save(path, doc)
            print(_line(entry), flush=True)
            restarts = int(os.environ.get(_RESTART_ENV, "0"))
            if restarts >= MAX_RESTARTS:
                print(f"smoke: {restarts} restarts after lost contexts; stopping (rerun with --resume)", flush=True)
                return 1
            os.environ[_RESTART_ENV] = str(restarts + 1)
            argv2 = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--resume"] + ["--resume"]
            os.execv(sys.executable, [sys.executable, "-m", "validation.families.tc_gemm.smoke", *argv2])
        finally:
            watchdog.disarm()
        statuses = {s["status"] for s in entry["shapes"]}
        entry["status"] = ("ok" if statuses <= {"ok", "unsupported"} and "ok" in statuses
                           else "FAIL" if "FAIL" in statuses else "error" if "error" in statuses else "unsupported")
        doc["kernels"].append(entry)
        _save(path, doc)
        print(_line(entry), flush=True)
    if not args.no_time:
        watchdog.arm("timing at " + doc["time_shape"])
        try:
            time_kernels(doc["kernels"], configs, args.top, lambda s: print(s, flush=True))
            doc["cublas"] = cublas_rows(sorted({c.dtype for c in configs.values()}), lambda s: print(s, flush=True))
        finally:
            watchdog.disarm()
        _save(path, doc)
        print(f"--- timed at {doc['time_shape']} (fastest first) ---")
        for e in sorted((e for e in doc["kernels"] if "time_s" in e), key=lambda e: e["time_s"]):
            print(_line(e))
    n_ok = sum(e["status"] == "ok" for e in doc["kernels"])
    print(f"smoke: {n_ok} of {len(doc['kernels'])} kernels ok; {path}")
    return 0 if n_ok == len(doc["kernels"]) else 1


if __name__ == "__main__":
    sys.exit(main())
