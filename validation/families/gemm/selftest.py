"""A correctness table of the representative GEMM kernels on the GPU (and, with ``--bench-4096``, the
fast candidates timed at 4096^3): ``python -m validation.families.gemm.selftest``."""

from __future__ import annotations

import sys

from tilesim import GemmConfig
from validation.families.gemm.runner import (
    GemmCompileError,
    check_correct,
    compile_gemm,
    fast_configs,
    representative_configs,
)


# ----- self-test -----------------------------------------------------------------------------------
def _time_ms(fn, reps: int = 10) -> float:
    import cupy

    fn()
    cupy.cuda.runtime.deviceSynchronize()
    times = []
    for _ in range(reps):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop))
    return sorted(times)[len(times) // 2]


def _selftest(bench_4096: bool) -> int:
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device")
    except Exception as e:  # noqa: BLE001 - any failure here means "no usable GPU"
        print(f"gemm selftest: no usable GPU/CuPy here ({type(e).__name__}: {e})")
        return 1
    shapes = [(333, 257, 129), (333, 260, 132), (1024, 1024, 1024)]
    rows, failures = [], 0
    for m, n, k in shapes:
        for cfg in representative_configs(m, n, k) + representative_configs(m, n, k, alpha=1.5, beta=-0.5)[-3:]:
            rows.append(_run_row(cfg, timed=(m == 1024)))
            failures += rows[-1][2] != "ok"
    if bench_4096:
        for cfg in fast_configs(4096, 4096, 4096):
            rows.append(_run_row(cfg, timed=True))
            failures += rows[-1][2] != "ok"
    for size in (1024, 4096) if bench_4096 else (1024,):
        a = cupy.ones((size, size), cupy.float32)
        ms = _time_ms(lambda a=a: cupy.matmul(a, a))
        rows.append(("cupy.matmul", f"{size}^3", "-", "", "", "", "", f"{ms:.3f}",
                     f"{2 * size**3 / ms / 1e9:.1f}"))
    header = ("config", "shape", "ok", "rel_err", "bad", "regs", "spill_B", "ms", "TFLOP/s")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        print("  ".join(str(x).ljust(w) for x, w in zip(r, widths, strict=True)))
    print(f"{failures} failing configuration(s)")
    return 1 if failures else 0


def _run_row(cfg: GemmConfig, timed: bool) -> tuple:
    import cupy

    shape = f"{cfg.m}x{cfg.n}x{cfg.k}"
    label = cfg.label + (f"_a{cfg.alpha:g}b{cfg.beta:g}" if cfg.beta != 0 or cfg.alpha != 1 else "")
    try:
        comp = compile_gemm(cfg)
    except (ValueError, GemmCompileError) as e:
        return (label, shape, "COMPILE", str(e).splitlines()[0][:80], "", "", "", "", "")
    res = check_correct(comp, seed=0)
    at = comp.attributes
    ms = tflops = ""
    if timed and res.ok:
        a = cupy.ones((cfg.m, cfg.k), cupy.float32)
        b = cupy.ones((cfg.k, cfg.n), cupy.float32)
        c = cupy.zeros((cfg.m, cfg.n), cupy.float32)
        t = _time_ms(lambda: comp.launch(a, b, c))
        ms, tflops = f"{t:.3f}", f"{cfg.flops / t / 1e9:.1f}"
    return (label, shape, "ok" if res.ok else "WRONG", f"{res.rel_err:.1e}", res.unwritten,
            at["regs_per_thread"], at["local_bytes"], ms, tflops)


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m validation.families.gemm.selftest", description=__doc__.splitlines()[0])
    p.add_argument("--selftest", action="store_true", help="compile and check representative configs")
    p.add_argument("--bench-4096", action="store_true", help="also time fast candidates at 4096^3")
    ns = p.parse_args(argv)
    if not ns.selftest:
        p.print_help()
        return 2
    return _selftest(ns.bench_4096)


if __name__ == "__main__":
    sys.exit(main())
