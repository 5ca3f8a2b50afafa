"""Measure held-out public kernels on this GPU:
``python -m validation.public.run sgemm --out DIR [--sizes 1024,2048,4096] [--only NAME ...]``.

``sgemm`` (siboehm/SGEMM_CUDA kernels 1-10, :mod:`validation.public.sgemm.kernels`):

1. compiles all ten kernels with CuPy (NVRTC) as ONE module (:func:`kernels.translation_unit`,
   ``kernels.NVRTC_OPTIONS``) and looks each up by its name expression; records CuPy's
   ``num_regs`` (and ``local_size_bytes`` in the metadata); kernel 3 gets the runner's
   max-shared carveout;
2. per square size M = N = K (default 1024, 2048, 4096, as siboehm's benchmark): a size a kernel
   cannot compute as launched gets status ``unsupported`` (the reason on stderr). Otherwise A, B
   and C0 are drawn seeded (standard normal, fp32), C = C0 is launched on once, and C is compared
   with 0.5 * A @ B + 3.0 * C0 in float64 (rel_err = ||C - ref||_F / ||ref||_F against
   :func:`kernels.tolerance`; non-finite outputs fail): a kernel over it is ``wrong`` and not timed;
3. times it with :func:`validation.harness.timing.time_gpu`: CUDA events, the L2 flushed before
   every repetition, 5 warm-up calls, 30 repetitions (at least 10 once 10 s are spent), median
   and 10th/90th percentiles. As in siboehm's benchmark C is not reset between calls (beta = 3
   grows it by 3x a call: below 1e19 after the 36 calls, far from fp32's overflow).

Writes ``DIR/times.csv`` (kernel,size,label,status,rel_err,median_s,p10_s,p90_s,regs_per_thread,
flops_per_s; label = the mapped GemmConfig's label; flops_per_s = 2 M N K / median) and
``DIR/metadata.json`` (:func:`validation.harness.metadata.collect_metadata` plus the kernels,
options and timing). A failed build or launch is an ``error`` row with the traceback on stderr.
Exit status 1 when any row is neither ``ok`` nor ``unsupported``.

``tc`` hands the remaining arguments to :mod:`validation.public.tc.run` (owned elsewhere).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import traceback
from pathlib import Path

from validation.harness.suite import gpu_available

HEADER = ("kernel", "size", "label", "status", "rel_err", "median_s", "p10_s", "p90_s", "regs_per_thread",
          "flops_per_s")
SGEMM_SIZES = (1024, 2048, 4096)
TIMING = {"warmup": 5, "reps": 30, "min_reps": 10, "budget_s": 10.0}
SEED = 0
#: cudaSharedmemCarveoutMaxShared (CUDA runtime API: cudaSharedCarveout): percent of the unified
#: L1/shared memory given to shared memory
CARVEOUT_MAX_SHARED_PERCENT = 100


def parse_sizes(text: str) -> tuple[int, ...]:
    """``"1024,2048"`` -> (1024, 2048); ``ValueError`` naming the bad entry."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) <= 0:
            raise ValueError(f"--sizes entry {part!r}: must be a positive integer (square M = N = K)")
        out.append(int(part))
    if not out:
        raise ValueError("--sizes: give at least one size")
    return tuple(out)


def _load_module(kernels):
    import cupy

    from validation.public.sgemm import kernels as K

    module = cupy.RawModule(code=K.translation_unit(kernels), options=K.NVRTC_OPTIONS,
                            name_expressions=tuple(k.name_expression for k in kernels))
    fns, info = {}, {}
    for k in kernels:
        fn = module.get_function(k.name_expression)
        attrs = fn.attributes
        carveout = None
        if k.carveout_max_shared:
            try:
                fn.preferred_shared_memory_carveout = CARVEOUT_MAX_SHARED_PERCENT
                carveout = CARVEOUT_MAX_SHARED_PERCENT
            except Exception as err:  # recorded, not fatal: the occupancy does not depend on it here
                print(f"{k.name}: could not set the carveout: {err}", file=sys.stderr)
        fns[k.name] = fn
        info[k.name] = {"regs_per_thread": int(attrs["num_regs"]), "local_bytes": int(attrs["local_size_bytes"]),
                        "static_smem_bytes": int(attrs["shared_size_bytes"]), "carveout_percent": carveout}
    return module, fns, info


def _inputs(s: int, seed: int):
    import cupy

    rs = cupy.random.RandomState(seed)
    a = rs.standard_normal((s, s), dtype=cupy.float32)
    b = rs.standard_normal((s, s), dtype=cupy.float32)
    c0 = rs.standard_normal((s, s), dtype=cupy.float32)
    return a, b, c0


def check(kernel, launch, a, b, c0, c) -> tuple[bool, float, str]:
    """Launch once on C = C0 and compare with ALPHA * A @ B + BETA * C0 in float64."""
    import cupy

    from validation.public.sgemm import kernels as K

    c[...] = c0
    launch()
    cupy.cuda.get_current_stream().synchronize()
    ref = K.ALPHA * (a.astype(cupy.float64) @ b.astype(cupy.float64)) + K.BETA * c0.astype(cupy.float64)
    out = c.astype(cupy.float64)
    finite = cupy.isfinite(out)
    bad = int(out.size - int(cupy.count_nonzero(finite)))
    err = float(cupy.linalg.norm(cupy.where(finite, out, 0.0) - ref) / cupy.linalg.norm(ref))
    tol = K.tolerance(a.shape[1])
    if bad:
        return False, float("inf"), f"{bad} of {out.size} outputs not finite; rel_err of the rest {err:.3g}"
    return err <= tol, err, f"rel_err {err:.3g} ({'<=' if err <= tol else '>'} {tol:.3g})"


def run_sgemm(out_dir: Path, sizes=SGEMM_SIZES, names=None) -> list[dict]:
    """Measure the chosen kernels (all by default) at the square ``sizes``; write times.csv and metadata."""
    import cupy
    import numpy as np

    from validation.harness.metadata import collect_metadata
    from validation.harness.timing import L2Flusher, time_gpu
    from validation.public.sgemm import kernels as K

    chosen = [k for k in K.KERNELS if names is None or k.name in names]
    unknown = set(names or ()) - {k.name for k in K.KERNELS}
    if unknown:
        raise ValueError(f"--only {sorted(unknown)}: not in validation.public.sgemm.kernels "
                         f"({', '.join(k.name for k in K.KERNELS)})")
    _module, fns, info = _load_module(chosen)
    flusher = L2Flusher()
    rows = []
    for s in sizes:
        m = n = k = s
        a = b = c0 = c = None
        for kernel in chosen:
            row = {h: "" for h in HEADER}
            row.update(kernel=kernel.name, size=f"{m}x{n}x{k}", label=kernel.config(m, n, k).label,
                       regs_per_thread=info[kernel.name]["regs_per_thread"])
            why = kernel.supports(m, n, k)
            if why is not None:
                row["status"] = "unsupported"
                print(f"{kernel.name} {row['size']}: {why}", file=sys.stderr)
            else:
                try:
                    if a is None:
                        a, b, c0 = _inputs(s, SEED)
                        c = cupy.empty_like(c0)
                    fn, grid, block = fns[kernel.name], kernel.grid(m, n, k), kernel.block
                    args = (np.int32(m), np.int32(n), np.int32(k), np.float32(K.ALPHA), a, b,
                            np.float32(K.BETA), c)

                    def launch(fn=fn, grid=grid, block=block, args=args):
                        fn(grid, block, args)

                    ok, err, msg = check(kernel, launch, a, b, c0, c)
                    row["rel_err"] = err
                    print(f"{kernel.name} {row['size']}: {msg}", file=sys.stderr)
                    if not ok:
                        row["status"] = "wrong"
                    else:
                        t = time_gpu(launch, flusher=flusher, **TIMING)
                        row.update(status="ok", median_s=t.median_s, p10_s=t.p10_s, p90_s=t.p90_s,
                                   flops_per_s=K.problem_flops(m, n, k) / t.median_s)
                except Exception:
                    row["status"] = "error"
                    traceback.print_exc()
            rows.append(row)
            print(",".join(str(row[h]) for h in HEADER), flush=True)
        del a, b, c0, c
        cupy.get_default_memory_pool().free_all_blocks()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "times.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=HEADER)
        w.writeheader()
        w.writerows(rows)
    meta = collect_metadata()
    meta["public_sgemm"] = {
        "source": "github.com/siboehm/SGEMM_CUDA (validation/public/sgemm/src/README.md)",
        "alpha": K.ALPHA, "beta": K.BETA, "seed": SEED, "sizes": list(sizes), "timing": TIMING,
        "nvrtc_options": list(K.NVRTC_OPTIONS), "c_reset_between_reps": False,
        "kernels": {k.name: {"number": k.number, "file": k.file, "name_expression": k.name_expression,
                             "block": list(k.block), "grid_4096": list(k.grid(4096, 4096, 4096)),
                             "mapping": k.mapping, "notes": k.notes, **info[k.name]} for k in chosen},
    }
    (out_dir / "metadata.json").write_text(json.dumps(meta, indent=2, default=str))
    return rows


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["tc"]:
        from validation.public.tc import run as tc_run

        return tc_run.main(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m validation.public.run", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="family", required=True)
    sp = sub.add_parser("sgemm", help="siboehm/SGEMM_CUDA kernels 1-10 (fp32)")
    sp.add_argument("--out", required=True, help="results directory (times.csv, metadata.json)")
    sp.add_argument("--sizes", default=",".join(str(s) for s in SGEMM_SIZES),
                    help="square sizes M = N = K, comma-separated (default %(default)s)")
    sp.add_argument("--only", nargs="*", help="kernel names (default: all)")
    sub.add_parser("tc", help="tensor-core kernels: arguments go to validation.public.tc.run")
    args = ap.parse_args(argv)
    why = gpu_available()
    if why:
        print(f"python -m validation.public.run sgemm: needs CuPy and an NVIDIA GPU: {why}", file=sys.stderr)
        return 2
    rows = run_sgemm(Path(args.out), parse_sizes(args.sizes), set(args.only) if args.only else None)
    bad = [r for r in rows if r["status"] not in ("ok", "unsupported")]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
