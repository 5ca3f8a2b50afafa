"""The real CUDA kernels of tilesim's GEMM family: from a GemmConfig to a compiled, checked kernel.

``kernel_source(cfg)`` maps a :class:`~tilesim.kernels.gemm_config.GemmConfig` to the template
instance in ``validation/kernels/gemm.cu`` and its launch geometry (pure, CPU-only).
``compile_gemm(cfg)`` checks the configuration against the hardware with the simulator's own
:func:`~tilesim.kernels.gemm_config.check_fits` and compiles it with CuPy (NVRTC);
``check_correct(compiled)`` runs it once on random data and compares with a float64 reference.
CuPy is imported lazily, so this module imports on machines without a GPU.

Run ``python -m validation.gemm_cuda --selftest`` on a GPU machine for a correctness table.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilesim.kernels.gemm_config import GemmConfig, check_fits

KERNEL_FILE = Path(__file__).parent / "kernels" / "gemm.cu"
OPTIONS: tuple[str, ...] = ("--std=c++17", "-lineinfo")
PIPELINE_CODES = {"none": 0, "regs": 1, "cp_async": 2}
KERNEL_PARAMS = "int, int, int, float, const float*, const float*, float, float*"
DEFAULT_SMEM_LIMIT_BYTES = 48 * 1024  # above this, dynamic shared memory must be opted into
REL_TOL = 1e-4
_INT32_LIMIT = 2**31

_MODULES: dict[tuple[str, tuple[str, ...]], Any] = {}  # (code, options) -> cupy.RawModule


@dataclass(frozen=True)
class KernelSource:
    """Everything needed to compile and launch one GEMM configuration.

    ``code`` is the whole translation unit (the kernel templates plus an explicit instantiation of
    ``name``), ``name`` the template instance (a CuPy name expression), ``options`` the NVRTC/nvcc
    options, ``dynamic_smem_bytes`` the dynamic shared memory per block (= ``cfg.smem_bytes``).
    """

    code: str
    name: str
    options: tuple[str, ...]
    dynamic_smem_bytes: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]


class GemmCompileError(RuntimeError):
    """NVRTC rejected a kernel. The message shows the kernel name, the options and NVRTC's log."""

    def __init__(self, name: str, options: tuple[str, ...], log: str, source: str):
        super().__init__(f"compiling {name} with options {' '.join(options)} failed:\n{log}")
        self.name = name
        self.options = options
        self.log = log
        self.source = source


def _b(x: bool) -> str:
    return "true" if x else "false"


def kernel_name(cfg: GemmConfig) -> str:
    """The template instance implementing ``cfg``, e.g. ``gemm_reg2d<128, 128, 8, 8, 8, true, 0, 0, 1>``."""
    _require_fp32(cfg)
    v = cfg.variant
    pipe = PIPELINE_CODES[cfg.pipeline]
    if v in ("naive_uncoalesced", "naive"):
        args = [cfg.bm, cfg.bn]
    elif v == "smem":
        args = [cfg.bm, cfg.bn, cfg.bk, cfg.smem_pad, pipe, cfg.stages]
    elif v == "reg1d":
        args = [cfg.bm, cfg.bn, cfg.bk, cfg.tm, cfg.smem_pad, pipe, cfg.stages]
    elif v == "reg2d":
        args = [cfg.bm, cfg.bn, cfg.bk, cfg.tm, cfg.tn, _b(cfg.vectorize), cfg.smem_pad, pipe, cfg.stages]
    else:
        args = [cfg.bm, cfg.bn, cfg.bk, cfg.wm, cfg.wn, cfg.wniter, cfg.tm, cfg.tn,
                _b(cfg.vectorize), cfg.smem_pad, pipe, cfg.stages]
    return f"gemm_{v}<{', '.join(str(a) for a in args)}>"


def _require_fp32(cfg: GemmConfig) -> None:
    if not isinstance(cfg, GemmConfig):
        raise ValueError(f"cfg must be a GemmConfig, got {type(cfg).__name__}")
    if cfg.dtype != "fp32":
        raise ValueError(f"GemmConfig.dtype = {cfg.dtype!r}: the CUDA kernels implement 'fp32' only")


def _instantiation(name: str) -> str:
    return f"template __global__ void {name}({KERNEL_PARAMS});\n"


def base_source() -> str:
    """The kernel templates (``validation/kernels/gemm.cu``) without any instantiation."""
    return KERNEL_FILE.read_text()


def batch_source(cfgs) -> str:
    """One translation unit instantiating every distinct kernel of ``cfgs`` (for offline nvcc checks)."""
    names = dict.fromkeys(kernel_name(c) for c in cfgs)
    return base_source() + "\n" + "".join(_instantiation(n) for n in names)


def kernel_source(cfg: GemmConfig, extra_options: tuple[str, ...] = ()) -> KernelSource:
    """The source, kernel name, options and launch geometry of ``cfg`` (no compilation, no GPU).

    ``extra_options`` are appended to :data:`OPTIONS` (e.g. ``("-DGEMM_TRACE",)``)."""
    name = kernel_name(cfg)
    return KernelSource(
        code=base_source() + "\n" + _instantiation(name),
        name=name,
        options=OPTIONS + tuple(extra_options),
        dynamic_smem_bytes=cfg.smem_bytes,
        grid=cfg.grid,
        block=(cfg.threads, 1, 1),
    )


@dataclass(frozen=True, eq=False)
class CompiledGemm:
    """A compiled GEMM kernel for one configuration; ``launch`` runs it once."""

    cfg: GemmConfig
    source: KernelSource
    kernel: Any = field(repr=False)  # cupy.RawKernel
    module: Any = field(repr=False, default=None)  # the cupy.RawModule it came from

    @property
    def attributes(self) -> dict:
        """What the compiled binary uses: registers, static shared memory, spills, thread limit."""
        a = self.kernel.attributes
        return {
            "regs_per_thread": int(a["num_regs"]),
            "static_smem_bytes": int(a["shared_size_bytes"]),
            "dynamic_smem_bytes": self.source.dynamic_smem_bytes,
            "local_bytes": int(a["local_size_bytes"]),
            "max_threads_per_block": int(a["max_threads_per_block"]),
        }

    def launch(self, a, b, c, stream=None) -> None:
        """Run C = alpha*A@B + beta*C once (asynchronously) on C-contiguous cupy float32 arrays."""
        import cupy
        import numpy as np

        cfg = self.cfg
        for nm, arr, shape in (("a", a, (cfg.m, cfg.k)), ("b", b, (cfg.k, cfg.n)), ("c", c, (cfg.m, cfg.n))):
            if not isinstance(arr, cupy.ndarray):
                raise ValueError(f"{nm} must be a cupy.ndarray, got {type(arr).__name__}")
            if tuple(arr.shape) != shape:
                raise ValueError(f"{nm}.shape = {tuple(arr.shape)}: expected {shape} for {cfg.label}")
            if arr.dtype != cupy.float32:
                raise ValueError(f"{nm}.dtype = {arr.dtype}: expected float32")
            if not arr.flags.c_contiguous:
                raise ValueError(f"{nm} must be C-contiguous")
            if cfg.vectorize and arr.data.ptr % 16:
                raise ValueError(f"{nm} must be 16-byte aligned for vectorized kernels")
        if c.data.ptr in (a.data.ptr, b.data.ptr):
            raise ValueError("c must not alias a or b")
        args = (np.int32(cfg.m), np.int32(cfg.n), np.int32(cfg.k), np.float32(cfg.alpha),
                a, b, np.float32(cfg.beta), c)
        src = self.source
        if stream is None:
            self.kernel(src.grid, src.block, args, shared_mem=src.dynamic_smem_bytes)
        else:
            with stream:
                self.kernel(src.grid, src.block, args, shared_mem=src.dynamic_smem_bytes)


def compile_gemm(cfg: GemmConfig, hw=None, *, extra_options: tuple[str, ...] = ()) -> CompiledGemm:
    """Check ``cfg`` against ``hw`` (default: the H200 spec) and compile its kernel with CuPy.

    ``extra_options`` are added to the NVRTC options (``-DGEMM_TRACE`` compiles the schedule trace in).
    Raises the simulator's ``ValueError`` (from ``check_fits``) before compiling, ``ValueError`` for
    non-fp32 or index ranges beyond 32-bit, and :class:`GemmCompileError` when NVRTC fails.
    Modules are cached by source and options.
    """
    if hw is None:
        from tilesim import hardware

        hw = hardware.load("h200")
    _require_fp32(cfg)
    check_fits(cfg, hw)
    for f, v in (("m*k", cfg.m * cfg.k), ("k*n", cfg.k * cfg.n), ("m*n", cfg.m * cfg.n)):
        if v >= _INT32_LIMIT:
            raise ValueError(f"GemmConfig {f} = {v}: the kernels use 32-bit indices (limit {_INT32_LIMIT})")
    src = kernel_source(cfg, extra_options)
    import cupy

    key = (src.code, src.options)
    module = _MODULES.get(key)
    try:
        if module is None:
            module = cupy.RawModule(code=src.code, options=src.options, name_expressions=(src.name,))
        kernel = module.get_function(src.name)
    except cupy.cuda.compiler.CompileException as e:
        raise GemmCompileError(src.name, src.options, str(e), src.code) from e
    _MODULES[key] = module
    if src.dynamic_smem_bytes > DEFAULT_SMEM_LIMIT_BYTES:
        kernel.max_dynamic_shared_size_bytes = src.dynamic_smem_bytes
    return CompiledGemm(cfg=cfg, source=src, kernel=kernel, module=module)


@dataclass(frozen=True)
class CorrectnessResult:
    """``ok`` iff every output was written (no NaN/inf) and ``rel_err`` < 1e-4.

    ``rel_err`` = ||out - ref||_F / ||ref||_F against a float64 reference (non-finite outputs
    counted as 0); ``unwritten`` = number of non-finite outputs (NaN-poisoned when beta == 0).
    """

    ok: bool
    rel_err: float
    unwritten: int
    message: str


def check_correct(compiled: CompiledGemm, rng=None, *, seed: int | None = None) -> CorrectnessResult:
    """Run ``compiled`` once on fresh uniform [-1, 1) inputs and compare with a float64 reference.

    ``rng``: a ``cupy.random.Generator`` or ``numpy.random.Generator`` (default: a cupy generator
    seeded with ``seed``). When beta == 0, C is filled with NaN before the launch so that outputs the
    kernel never wrote show up in ``unwritten``; otherwise C holds random values the reference uses.
    """
    import cupy
    import numpy as np

    if rng is not None and seed is not None:
        raise ValueError("check_correct: give rng or seed, not both")
    if rng is None:
        rng = cupy.random.default_rng(seed)
    cfg = compiled.cfg
    m, n, k = cfg.m, cfg.n, cfg.k

    def draw(shape):
        if isinstance(rng, np.random.Generator):
            return cupy.asarray(rng.uniform(-1.0, 1.0, size=shape).astype(np.float32))
        return rng.random(shape, dtype=cupy.float32) * cupy.float32(2) - cupy.float32(1)

    a, b, c0 = draw((m, k)), draw((k, n)), draw((m, n))
    c = c0.copy() if cfg.beta != 0 else cupy.full((m, n), cupy.nan, dtype=cupy.float32)
    try:
        compiled.launch(a, b, c)
        cupy.cuda.runtime.deviceSynchronize()
    except (cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError) as e:
        return CorrectnessResult(False, math.nan, m * n, f"{cfg.label}: launch failed: {e}")
    ref = cfg.alpha * (a.astype(cupy.float64) @ b.astype(cupy.float64))
    if cfg.beta != 0:
        ref += cfg.beta * c0.astype(cupy.float64)
    out = c.astype(cupy.float64)
    finite = cupy.isfinite(out)
    unwritten = int(m * n - int(finite.sum()))
    diff = cupy.where(finite, out, 0.0) - ref
    ref_norm = float(cupy.linalg.norm(ref))
    rel_err = float(cupy.linalg.norm(diff)) / (ref_norm if ref_norm > 0 else 1.0)
    ok = unwritten == 0 and rel_err < REL_TOL
    msg = (f"{cfg.label} {m}x{n}x{k}: " + ("ok" if ok else "WRONG") +
           f", rel_err {rel_err:.2e}, {unwritten} non-finite outputs")
    return CorrectnessResult(ok, rel_err, unwritten, msg)


# ----- representative configurations ----------------------------------------------------------------
_WARP_BIG = dict(variant="warp", bm=128, bn=128, bk=16, wm=64, wn=64, wniter=4, tm=8, tn=4)
REPRESENTATIVE_KNOBS: tuple[dict, ...] = (
    dict(variant="naive_uncoalesced", bm=16, bn=16),
    dict(variant="naive", bm=8, bn=32),
    dict(variant="smem", bm=32, bn=32, bk=32),
    dict(variant="smem", bm=16, bn=16, bk=16, smem_pad=1, pipeline="cp_async", stages=2),
    dict(variant="reg1d", bm=64, bn=64, bk=8, tm=8),
    dict(variant="reg1d", bm=64, bn=64, bk=8, tm=8, pipeline="regs", stages=2),
    dict(variant="reg2d", bm=128, bn=128, bk=8, tm=8, tn=8),
    dict(variant="reg2d", bm=128, bn=128, bk=8, tm=8, tn=8, vectorize=True),
    dict(variant="reg2d", bm=64, bn=64, bk=8, tm=4, tn=4, vectorize=True, smem_pad=1,
         pipeline="cp_async", stages=4),
    dict(_WARP_BIG, vectorize=True),
    dict(_WARP_BIG, vectorize=True, pipeline="cp_async", stages=3),
    dict(variant="warp", bm=128, bn=128, bk=8, wm=32, wn=64, wniter=2, tm=8, tn=4, smem_pad=1,
         pipeline="regs", stages=2),
    dict(variant="warp", bm=128, bn=128, bk=16, wm=64, wn=32, wniter=1, tm=4, tn=4, vectorize=True,
         smem_pad=4, pipeline="cp_async", stages=2),
)

# Fast-configuration candidates for large square problems (to be timed, not assumed).
FAST_KNOBS: tuple[dict, ...] = (
    dict(_WARP_BIG, vectorize=True, pipeline="cp_async", stages=3),
    dict(_WARP_BIG, vectorize=True, pipeline="cp_async", stages=2),
    dict(_WARP_BIG, vectorize=True, pipeline="regs", stages=2),
    dict(_WARP_BIG, vectorize=True, smem_pad=4, pipeline="cp_async", stages=3),
    dict(variant="warp", bm=128, bn=128, bk=16, wm=32, wn=64, wniter=2, tm=8, tn=4, vectorize=True,
         pipeline="cp_async", stages=3),
    dict(variant="warp", bm=128, bn=256, bk=16, wm=64, wn=64, wniter=4, tm=8, tn=4, vectorize=True,
         pipeline="cp_async", stages=3),
    dict(variant="warp", bm=256, bn=128, bk=16, wm=64, wn=64, wniter=4, tm=8, tn=4, vectorize=True,
         pipeline="cp_async", stages=3),
)


def _configs(knobs: tuple[dict, ...], m: int, n: int, k: int, **common) -> list[GemmConfig]:
    out = []
    for kn in knobs:
        if kn.get("vectorize") and (n % 4 or k % 4):
            continue  # vectorized kernels need N and K multiples of 4
        out.append(GemmConfig(m=m, n=n, k=k, **kn, **common))
    return out


def representative_configs(m: int, n: int, k: int, **common) -> list[GemmConfig]:
    """One or more configurations per variant covering every knob, for the shape m x n x k.

    Vectorized configurations are left out when n or k is not a multiple of 4. ``common`` sets
    further fields for all (e.g. ``alpha=1.5, beta=-0.5``).
    """
    return _configs(REPRESENTATIVE_KNOBS, m, n, k, **common)


def fast_configs(m: int, n: int, k: int, **common) -> list[GemmConfig]:
    """Candidate fast configurations (warp-tiled, vectorized, pipelined) for the shape m x n x k."""
    return _configs(FAST_KNOBS, m, n, k, **common)


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
        print(f"gemm_cuda selftest: no usable GPU/CuPy here ({type(e).__name__}: {e})")
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

    p = argparse.ArgumentParser(prog="python -m validation.gemm_cuda", description=__doc__.splitlines()[0])
    p.add_argument("--selftest", action="store_true", help="compile and check representative configs")
    p.add_argument("--bench-4096", action="store_true", help="also time fast candidates at 4096^3")
    ns = p.parse_args(argv)
    if not ns.selftest:
        p.print_help()
        return 2
    return _selftest(ns.bench_4096)


if __name__ == "__main__":
    sys.exit(main())
