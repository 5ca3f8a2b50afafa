"""Measure the held-out tensor-core kernels on this GPU: ``python -m validation.public.tc.run --out DIR``.

Builds every kernel of :mod:`validation.public.tc.kernels` with one nvcc call (``-cubin
-arch=sm_90a``), loads each cubin with ``cupy.RawModule(path=...)``, and per size (4096^3 and
8192^3, 2048^3 too unless ``--no-small``):

1. draws A and B (seeded standard normal in fp32, stored as fp16 or as bf16 bit patterns, the
   family runner's :func:`~validation.families.tc_gemm.runner.random_inputs` rules) in the kernel's
   layouts; C is poisoned with NaN;
2. launches once and compares C (decoded to float64) with ``A64 @ B64`` of the stored inputs in
   float64: rel_err = ||C - ref||_F / ||ref||_F against :func:`kernels.tolerance`; a kernel over
   tolerance or with non-finite outputs is recorded as ``wrong`` and not timed;
3. times it with :func:`validation.harness.timing.time_gpu` (CUDA events, L2 flushed before each
   repetition, 3 warm-up calls, 30 repetitions, median and 10th/90th percentiles).

Writes ``DIR/times.csv`` (kernel,size,label,status,rel_err,median_s,p10_s,p90_s,regs_per_thread,
flops_per_s; label = the mapped configuration's label; regs from CuPy's ``num_regs``) and
``DIR/metadata.json`` (:func:`validation.harness.metadata.collect_metadata`, plus the kernels'
sources and mangled names). A size a kernel cannot compute gets status ``unsupported``; a failed
build or launch ``error`` with the message on stderr. A kernel with dynamic shared memory is opted in
to it (``max_dynamic_shared_size_bytes``, as its host code's ``cudaFuncSetAttribute``); ``--only``
picks kernels by name (an unknown name is an error).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import sys
import tempfile
import traceback
from pathlib import Path

from validation.harness.suite import gpu_available
from validation.public.tc import kernels as K

HEADER = ("kernel", "size", "label", "status", "rel_err", "median_s", "p10_s", "p90_s", "regs_per_thread",
          "flops_per_s")
SIZES = (4096, 8192)
SMALL = 2048
TIMING = {"warmup": 3, "reps": 30, "min_reps": 10, "budget_s": 6.0}
BF16_NAN_BITS = 0x7FC0


def _inputs(kernel: K.PublicKernel, m: int, n: int, k: int, seed: int = 0):
    import cupy

    from validation.families.tc_gemm.runner import bf16_bits

    rs = cupy.random.RandomState(seed)

    def draw(shape):
        x = rs.standard_normal(shape, dtype=cupy.float32)
        return x.astype(cupy.float16) if kernel.dtype == "fp16" else bf16_bits(x)

    a = draw((m, k))
    b = draw((k, n) if kernel.b_layout == "row" else (n, k))
    c = cupy.empty((m, n) if kernel.c_layout == "row" else (n, m),
                   dtype=cupy.float16 if kernel.dtype == "fp16" else cupy.uint16)
    return a, b, c


def _decode(arr, dtype: str):
    from validation.families.tc_gemm.runner import decode

    return decode(arr, "bf16" if dtype == "bf16" else "fp16")


def _tensormap_pointer(kernel: K.PublicKernel, name: str, ptr: int, rows: int, k: int, box_rows: int):
    """fast.cu's create_tensor_map<BlockMajor, BlockMinor>: dims {K, rows}, box {bk, box_rows},
    128-byte swizzle, no L2 promotion; copied to a device buffer (its allocate_and_create_tensor_map)."""
    import cupy
    import numpy as np

    from validation.families.tc_gemm import tma

    args = tma.tiled_args(name, kernel.dtype, ptr, (k, rows), (k * 2,), (kernel.box[2], box_rows))
    args = dataclasses.replace(args, l2_promotion=0)  # CU_TENSOR_MAP_L2_PROMOTION_NONE
    raw = tma.encode(args)
    return cupy.asarray(np.frombuffer(bytearray(raw), dtype=np.uint8))


def _launcher(kernel: K.PublicKernel, fn, m, n, k, a, b, c):
    import numpy as np

    grid, block = kernel.grid(m, n, k), kernel.block
    if kernel.tensormaps == "pointer":
        bm, bn, _ = kernel.box
        ta = _tensormap_pointer(kernel, "A", a.data.ptr, m, k, bm)
        tb = _tensormap_pointer(kernel, "B", b.data.ptr, n, k, bn)
        args = (np.int32(m), np.int32(n), np.int32(k), c, ta, tb)
        if kernel.debug_pointer:
            import cupy

            args = (*args, cupy.zeros(1, dtype=cupy.int32))  # fast.cu's DB: never touched with DBG = false
    else:
        args = (a, b, c, np.int32(m), np.int32(n), np.int32(k))

    def launch():
        fn(grid, block, args, shared_mem=kernel.dynamic_smem_bytes)

    launch.keep = args  # the tensor-map buffers live as long as the launcher
    return launch


def check(kernel: K.PublicKernel, launch, m, n, k, a, b, c) -> tuple[bool, float, str]:
    import cupy

    c.fill(cupy.nan if kernel.dtype == "fp16" else BF16_NAN_BITS)
    launch()
    cupy.cuda.get_current_stream().synchronize()
    a64, b64 = _decode(a, kernel.dtype), _decode(b, kernel.dtype)
    ref = a64 @ (b64 if kernel.b_layout == "row" else b64.T)
    out = _decode(c, kernel.dtype)
    if kernel.c_layout == "col":
        out = out.T
    finite = cupy.isfinite(out)
    bad = int(out.size - int(cupy.count_nonzero(finite)))
    err = float(cupy.linalg.norm(cupy.where(finite, out, 0.0) - ref) / cupy.linalg.norm(ref))
    tol = K.tolerance(kernel, k)
    if bad:
        return False, float("inf"), f"{bad} of {out.size} outputs not finite; rel_err of the rest {err:.3g}"
    return err <= tol, err, f"rel_err {err:.3g} ({'<=' if err <= tol else '>'} {tol:.3g})"


def run(out_dir: Path, sizes, names=None) -> list[dict]:
    import cupy

    from validation.harness.metadata import collect_metadata
    from validation.harness.timing import L2Flusher, time_gpu

    chosen = [k for k in K.KERNELS if names is None or k.name in names]
    build_dir = Path(tempfile.mkdtemp(prefix="public_tc_"))
    built = K.compile_all(build_dir, chosen)
    flusher = L2Flusher()
    rows, mangled = [], {}
    for kernel in chosen:
        b = built[kernel.name]
        mangled[kernel.name] = b.mangled
        try:
            fn = cupy.RawModule(path=str(b.cubin)).get_function(b.mangled)
            if kernel.dynamic_smem_bytes:  # the upstream host code's cudaFuncSetAttribute(MaxDynamicSharedMemorySize)
                fn.max_dynamic_shared_size_bytes = kernel.dynamic_smem_bytes
            regs = int(fn.attributes["num_regs"])
        except Exception as err:  # a cubin the driver refuses: one error row per size
            print(f"{kernel.name}: load failed: {err}", file=sys.stderr)
            fn, regs = None, None
        for s in sizes:
            m = n = k = s
            label = kernel.config(m, n, k).label
            row = {"kernel": kernel.name, "size": f"{m}x{n}x{k}", "label": label, "status": "",
                   "rel_err": "", "median_s": "", "p10_s": "", "p90_s": "", "regs_per_thread": regs or "",
                   "flops_per_s": ""}
            why = kernel.supports(m, n, k)
            if why is not None:
                row["status"] = "unsupported"
                print(f"{kernel.name} {row['size']}: {why}", file=sys.stderr)
            elif fn is None:
                row["status"] = "error"
            else:
                try:
                    a, bb, c = _inputs(kernel, m, n, k)
                    launch = _launcher(kernel, fn, m, n, k, a, bb, c)
                    ok, err, msg = check(kernel, launch, m, n, k, a, bb, c)
                    row["rel_err"] = err
                    print(f"{kernel.name} {row['size']}: {msg}", file=sys.stderr)
                    if not ok:
                        row["status"] = "wrong"
                    else:
                        t = time_gpu(launch, flusher=flusher, **TIMING)
                        row.update(status="ok", median_s=t.median_s, p10_s=t.p10_s, p90_s=t.p90_s,
                                   flops_per_s=K.problem_flops(m, n, k) / t.median_s)
                    del a, bb, c, launch
                    cupy.get_default_memory_pool().free_all_blocks()
                except Exception:
                    row["status"] = "error"
                    traceback.print_exc()
            rows.append(row)
            print(",".join(str(row[h]) for h in HEADER), flush=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "times.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=HEADER)
        w.writeheader()
        w.writerows(rows)
    meta = collect_metadata()
    meta["public_tc"] = {"kernels": {k.name: {"source": k.source, "function": k.function,
                                              "template_args": k.template_args, "mangled": mangled.get(k.name),
                                              "notes": k.notes} for k in chosen},
                         "nvcc_options": list(K.NVCC_OPTIONS), "timing": TIMING}
    (out_dir / "metadata.json").write_text(json.dumps(meta, indent=2, default=str))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="results directory (times.csv, metadata.json)")
    ap.add_argument("--no-small", action="store_true", help="skip 2048^3")
    ap.add_argument("--only", nargs="*", help="kernel names (default: all)")
    args = ap.parse_args(argv)
    sizes = SIZES if args.no_small else (SMALL, *SIZES)
    unknown = sorted(set(args.only or ()) - set(K.BY_NAME))
    if unknown:
        ap.error(f"--only: unknown kernel(s) {', '.join(unknown)}; known: {', '.join(K.BY_NAME)}")
    why = gpu_available()
    if why:
        print(f"python -m validation.public.tc.run: needs CuPy and an NVIDIA GPU: {why}", file=sys.stderr)
        return 2
    rows = run(Path(args.out), sizes, set(args.only) if args.only else None)
    bad = [r for r in rows if r["status"] not in ("ok", "unsupported")]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
