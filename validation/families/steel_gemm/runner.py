"""Time the generated steel GEMM kernels on a Mac, through MLX's custom-kernel API (``mlx.core.fast.metal_kernel``).

For users with Apple silicon; nothing has been measured with it here (there is no Mac in this
project's machines), and nothing it prints goes to ``validation/results`` by itself.

The discipline is the CUDA harness's (:mod:`validation.harness.timing`): the configuration is
checked against the chip's hardware file first (the family's ``check_fits``: one line naming the
field, the value and the limit), the output is checked against a float64 numpy reference before any
timing (a wrong kernel is never timed), then ``warmup`` untimed runs and timed repetitions with the
same repetition policy (:func:`validation.harness.timing.measure_loop`), summarised by the median.
Each repetition is one dispatch evaluated with ``mx.eval`` and timed on the host
(``time.perf_counter``), so it includes MLX's dispatch overhead (tens of microseconds; negligible at
2048^3 and above, not at 1024^3). Before each repetition (outside the timed region) a buffer larger
than the system level cache is rewritten, as the CUDA harness flushes the L2.

MLX is imported inside functions: this module imports anywhere, and without MLX every entry point
says in one line that it needs MLX on Apple silicon.

Run: ``python -m validation.families.steel_gemm.runner --size 4096 --copy double_buffer``
(``--emit`` prints the standalone Metal source instead, on any machine).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tilesim.kernels.steel_gemm import SteelGemmConfig, check_fits
from validation.families.steel_gemm.metal import MLX_DTYPES, MetalSource, generate, mlx_template
from validation.harness.timing import Timing, measure_loop

FAMILY = "steel_gemm"
NEEDS_MLX = ("steel_gemm runner: needs MLX on Apple silicon (macOS on an M-series GPU, `pip install mlx`); "
             "{why}")
TIMING = {"warmup": 5, "reps": 30, "min_reps": 20, "budget_s": 5.0}
#: relative Frobenius error against the float64 reference of the (dtype-rounded) inputs: fp32 as the
#: CUDA harness (sums of K <= 8192 products, error ~ sqrt(K) * 2^-24); fp16/bf16 outputs are rounded
#: to 11 / 8 significant bits (2^-11 ~ 4.9e-4, 2^-8 ~ 3.9e-3), with a margin of about 4x
REL_TOL = {"fp32": 1e-4, "fp16": 2e-3, "bf16": 1.6e-2}
#: bytes rewritten between repetitions: more than the largest system level cache of the chips in
#: tilesim/hardware/data (M2 Ultra, 96 MB)
FLUSH_BYTES = 256 << 20


class MlxUnavailable(RuntimeError):
    """MLX (or a Metal device) is missing: the message is one line saying so."""


def require_mlx():
    """``mlx.core`` with a Metal device, or :class:`MlxUnavailable` (one line)."""
    try:
        import mlx.core as mx  # noqa: PLC0415
    except ImportError:
        raise MlxUnavailable(NEEDS_MLX.format(why="mlx.core is not importable here")) from None
    try:
        ok = bool(mx.metal.is_available())
    except Exception:  # an MLX build without the Metal backend (Linux CPU/CUDA wheels)
        ok = False
    if not ok:
        raise MlxUnavailable(NEEDS_MLX.format(why="this MLX has no Metal device"))
    return mx


# ----- correctness (pure numpy; the kernel is any callable) ---------------------------------------------------
@dataclass(frozen=True)
class CorrectnessResult:
    """``ok`` iff every output is finite and ``rel_err`` < ``tol``.

    ``rel_err`` = ||out - ref||_F / ||ref||_F against the float64 reference (non-finite outputs
    counted as 0 in the difference and as ``unwritten``: the check runs with C filled with NaN).
    """

    ok: bool
    rel_err: float
    unwritten: int
    tol: float
    message: str


def random_inputs(cfg: SteelGemmConfig, seed: int = 0):
    """A (m x k) and B (k x n), uniform in [-1, 1), rounded to ``cfg.dtype`` and held as float32 numpy
    arrays (bf16 by truncating the low 16 bits after round-to-nearest-even)."""
    import numpy as np  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    a = rng.uniform(-1.0, 1.0, size=(cfg.m, cfg.k)).astype(np.float32)
    b = rng.uniform(-1.0, 1.0, size=(cfg.k, cfg.n)).astype(np.float32)
    return round_to_dtype(a, cfg.dtype), round_to_dtype(b, cfg.dtype)


def round_to_dtype(x, dtype: str):
    """``x`` (float32) rounded to ``dtype``'s precision, still float32."""
    import numpy as np  # noqa: PLC0415

    if dtype == "fp32":
        return x
    if dtype == "fp16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        bits = x.view(np.uint32).astype(np.uint64)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return bits.astype(np.uint32).view(np.float32)
    raise ValueError(f"dtype = {dtype!r}: must be one of {', '.join(REL_TOL)}")


def reference(a, b):
    """C = A @ B in float64."""
    import numpy as np  # noqa: PLC0415

    return np.asarray(a, dtype=np.float64) @ np.asarray(b, dtype=np.float64)


def compare(out, ref, cfg: SteelGemmConfig) -> CorrectnessResult:
    """``out`` (any array-like of shape m x n) against the float64 ``ref``."""
    import numpy as np  # noqa: PLC0415

    tol = REL_TOL[cfg.dtype]
    out = np.asarray(out, dtype=np.float64)
    if out.shape != ref.shape:
        return CorrectnessResult(False, math.inf, int(ref.size), tol,
                                 f"{cfg.label} {cfg.m}x{cfg.n}x{cfg.k}: WRONG shape {out.shape}, expected {ref.shape}")
    finite = np.isfinite(out)
    unwritten = int(out.size - int(finite.sum()))
    diff = np.where(finite, out, 0.0) - ref
    ref_norm = float(np.linalg.norm(ref))
    rel_err = float(np.linalg.norm(diff)) / (ref_norm if ref_norm > 0 else 1.0)
    ok = unwritten == 0 and rel_err < tol
    msg = (f"{cfg.label} {cfg.m}x{cfg.n}x{cfg.k}: " + ("ok" if ok else "WRONG") +
           f", rel_err {rel_err:.2e} (tol {tol:.0e}), {unwritten} non-finite outputs")
    return CorrectnessResult(ok, rel_err, unwritten, tol, msg)


def check_correct(cfg: SteelGemmConfig, run: Callable[[Any, Any], Any], *, seed: int = 0) -> CorrectnessResult:
    """Run ``run(a, b)`` (float32 numpy inputs, dtype-rounded; returns C as an array-like) once and
    compare with the float64 reference. A raised exception is a failed check, not a crash."""
    a, b = random_inputs(cfg, seed)
    try:
        out = run(a, b)
    except Exception as e:  # the kernel failed to build or run: report, do not time
        return CorrectnessResult(False, math.nan, cfg.m * cfg.n, REL_TOL[cfg.dtype],
                                 f"{cfg.label}: launch failed: {type(e).__name__}: {e}")
    return compare(out, reference(a, b), cfg)


# ----- timing (the repetition policy is the CUDA harness's) -----------------------------------------------
@dataclass(frozen=True)
class Measurement:
    """A checked and timed configuration: TFLOP/s from the median."""

    cfg: SteelGemmConfig
    check: CorrectnessResult
    timing: Timing | None

    @property
    def tflops(self) -> float | None:
        return None if self.timing is None else self.cfg.flops / self.timing.median_s * 1e-12

    def line(self) -> str:
        if self.timing is None:
            return f"{self.check.message}: not timed"
        t = self.timing
        return (f"{self.cfg.label} {self.cfg.m}x{self.cfg.n}x{self.cfg.k}: median {t.median_s * 1e3:.3f} ms "
                f"(p10 {t.p10_s * 1e3:.3f}, p90 {t.p90_s * 1e3:.3f}, {t.reps} reps), {self.tflops:.2f} TFLOP/s")


def measure(cfg: SteelGemmConfig, run: Callable[[Any, Any], Any], time_one: Callable[[], float], *,
            flush: Callable[[], None] | None = None, seed: int = 0, warmup: int = TIMING["warmup"],
            reps: int = TIMING["reps"], min_reps: int = TIMING["min_reps"], budget_s: float = TIMING["budget_s"],
            clock: Callable[[], float] = time.perf_counter) -> Measurement:
    """Check first (``run``), then time (``time_one`` runs one dispatch and returns its seconds).
    A configuration whose output is wrong is not timed (``timing`` is None)."""
    check = check_correct(cfg, run, seed=seed)
    if not check.ok:
        return Measurement(cfg, check, None)
    samples = measure_loop(time_one, flush, warmup=warmup, reps=reps, min_reps=min_reps, budget_s=budget_s,
                           clock=clock)
    return Measurement(cfg, check, Timing.from_samples(samples, flushed_l2=flush is not None))


# ----- MLX --------------------------------------------------------------------------------------------------
@dataclass(eq=False)
class MlxSteelKernel:
    """One configuration's kernel built with ``mx.fast.metal_kernel`` (:func:`build`)."""

    cfg: SteelGemmConfig
    source: MetalSource
    kernel: Any = field(repr=False)
    mx: Any = field(repr=False)

    def __call__(self, a, b, *, init_value: float | None = None):
        """C for MLX (or numpy) inputs ``a``, ``b``; lazy: evaluate with ``mx.eval``."""
        mx, cfg = self.mx, self.cfg
        dt = getattr(mx, MLX_DTYPES[cfg.dtype])
        a = mx.array(a).astype(dt) if not isinstance(a, mx.array) else a
        b = mx.array(b).astype(dt) if not isinstance(b, mx.array) else b
        mnk = mx.array([cfg.m, cfg.n, cfg.k], dtype=mx.int32)
        kw = {"init_value": init_value} if init_value is not None else {}
        if mlx_template(cfg):
            kw["template"] = mlx_template(cfg)
        (c,) = self.kernel(inputs=[a, b, mnk], grid=self.source.grid,
                           threadgroup=self.source.threadgroup, output_shapes=[(cfg.m, cfg.n)],
                           output_dtypes=[dt], **kw)
        return c


def build(cfg: SteelGemmConfig, hw=None) -> MlxSteelKernel:
    """Check ``cfg`` against ``hw`` (a HardwareSpec or a hardware name; default ``m5_max``), then build its
    kernel with MLX. Raises ``ValueError`` (one line) for a configuration the chip cannot run,
    :class:`MlxUnavailable` without MLX."""
    from tilesim import hardware  # noqa: PLC0415

    hw = hardware.load(hw or "m5_max") if hw is None or isinstance(hw, str) else hw
    check_fits(cfg, hw)
    src = generate(cfg)
    mx = require_mlx()
    kernel = mx.fast.metal_kernel(name=src.name, input_names=list(src.input_names),
                                  output_names=list(src.output_names), source=src.body, header=src.header,
                                  ensure_row_contiguous=True)
    return MlxSteelKernel(cfg, src, kernel, mx)


def measure_mlx(cfg: SteelGemmConfig, hw=None, *, seed: int = 0, flush_bytes: int = FLUSH_BYTES,
                **timing) -> Measurement:
    """Build, check against float64 numpy, then time ``cfg`` on this Mac's GPU."""
    k = build(cfg, hw)
    mx = k.mx
    import numpy as np  # noqa: PLC0415

    def run(a, b):
        c = k(a, b, init_value=float("nan"))  # unwritten outputs stay NaN
        mx.eval(c)
        return np.array(c.astype(mx.float32))

    a, b = random_inputs(cfg, seed)
    dt = getattr(mx, MLX_DTYPES[cfg.dtype])
    a_mx, b_mx = mx.array(a).astype(dt), mx.array(b).astype(dt)
    mx.eval(a_mx, b_mx)

    def time_one() -> float:
        t0 = time.perf_counter()
        mx.eval(k(a_mx, b_mx))
        return time.perf_counter() - t0

    flush = None
    if flush_bytes:
        buf = [mx.zeros((flush_bytes // 4,), dtype=mx.float32)]
        mx.eval(buf[0])

        def flush() -> None:
            buf[0] = buf[0] + 1.0
            mx.eval(buf[0])
    mx.synchronize()
    return measure(cfg, run, time_one, flush=flush, seed=seed, **{**TIMING, **timing})


# ----- command line -----------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m validation.families.steel_gemm.runner",
                                description="Check and time a generated steel GEMM kernel through MLX (Mac only).")
    p.add_argument("--size", type=int, nargs="+", default=[4096], help="square sizes m = n = k")
    p.add_argument("--mnk", type=int, nargs=3, metavar=("M", "N", "K"), help="one problem, instead of --size")
    for knob, default in (("bm", 64), ("bn", 64), ("bk", 16), ("wm", 2), ("wn", 2), ("tg-pad", 4)):
        p.add_argument(f"--{knob}", type=int, default=default)
    p.add_argument("--variant", default="steel", choices=("naive", "threadgroup", "steel"),
                   help="naive (device memory), threadgroup (threadgroup-memory slabs) or steel (simdgroup_matrix)")
    p.add_argument("--copy", default="sync", choices=("sync", "double_buffer"))
    p.add_argument("--edge", default="aligned", choices=("aligned", "ragged", "guards"))
    p.add_argument("--dtype", default="fp32", choices=tuple(MLX_DTYPES))
    p.add_argument("--hardware", default="m5_max", help="the chip's hardware file (limits checked before running)")
    p.add_argument("--emit", action="store_true", help="print the standalone Metal source and exit (any machine)")
    p.add_argument("--reps", type=int, default=TIMING["reps"])
    p.add_argument("--warmup", type=int, default=TIMING["warmup"])
    return p


def configs_from_args(argv) -> tuple[list[SteelGemmConfig], argparse.Namespace]:
    args = _parser().parse_args(argv)
    shapes = [tuple(args.mnk)] if args.mnk else [(s, s, s) for s in args.size]
    knobs = dict(bm=args.bm, bn=args.bn, bk=args.bk, wm=args.wm, wn=args.wn, tg_pad=args.tg_pad, copy=args.copy,
                 edge=args.edge, dtype=args.dtype, variant=args.variant)
    return [SteelGemmConfig(m, n, k, **knobs) for m, n, k in shapes], args


def config_from_args(argv) -> SteelGemmConfig:
    """The first configuration the command line names (``metal.py``'s ``__main__``)."""
    return configs_from_args(argv)[0][0]


def main(argv=None, out=sys.stdout) -> int:
    """0 when every configuration is correct (and timed), 1 when one is wrong, 2 for bad input or no MLX."""
    try:
        cfgs, args = configs_from_args(argv)
        if args.emit:
            out.write(generate(cfgs[0]).full)
            return 0
        from tilesim import hardware  # noqa: PLC0415

        hw = hardware.load(args.hardware)
        for c in cfgs:
            check_fits(c, hw)
        require_mlx()
        rc = 0
        for c in cfgs:
            m = measure_mlx(c, hw, reps=args.reps, warmup=args.warmup)
            print(m.line(), file=out)
            rc = rc or (0 if m.check.ok else 1)
        return rc
    except (ValueError, KeyError, MlxUnavailable) as e:
        print(str(e).splitlines()[0] if str(e) else type(e).__name__, file=out)
        return 2


if __name__ == "__main__":
    sys.exit(main())
