"""The GEMM family's runner (the protocol of :mod:`validation.harness.runners`): the real CUDA kernels.

``kernel_source(cfg)`` maps a :class:`~tilesim.GemmConfig` to the template instance in
``validation/families/gemm/gemm.cu`` (pure, CPU-only); ``launch_geometry(cfg)`` gives its grid,
block and dynamic shared memory. ``compile_gemm(cfg)`` checks the configuration against the
hardware with the simulator's own ``check_fits`` and compiles it with CuPy (NVRTC);
``check_correct(compiled)`` runs it once on random data and compares with a float64 reference.
``prepare(cfg)`` returns a :class:`GemmCase` for the generic suite and Nsight Compute runners;
``reference_rows`` adds a cuBLAS (``cupy.matmul``) row per shape. CuPy is imported lazily, so this
module imports on machines without a GPU.

``python -m validation.families.gemm.selftest`` prints a correctness table on a GPU machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilesim import GemmConfig
from tilesim.kernels import registry
from validation.harness.source import KernelSource

FAMILY = "gemm"
#: times.csv's throughput column: TFLOP/s from the family's analytic FLOP count
RATES = {"tflops": ("flops", 1e-12)}
#: the recorded suite's timing (the 4096^3 naive kernels take 0.1-0.3 s a launch)
TIMING = {"warmup": 5, "reps": 30, "min_reps": 20, "budget_s": 5.0}
KERNEL_FILE = Path(__file__).parent / "gemm.cu"
OPTIONS: tuple[str, ...] = ("--std=c++17", "-lineinfo")
PIPELINE_CODES = {"none": 0, "regs": 1, "cp_async": 2}
KERNEL_PARAMS = "int, int, int, float, const float*, const float*, float, float*"
DEFAULT_SMEM_LIMIT_BYTES = 48 * 1024  # above this, dynamic shared memory must be opted into
#: fp32 products summed over K <= 4096 terms in varying order: |error| grows like sqrt(K) * 2^-24 per
#: term relative to the norm; 1e-4 leaves a margin of about 10x at K = 4096
REL_TOL = 1e-4
INT32_LIMIT = 2**31

_MODULES: dict[tuple[str, tuple[str, ...]], Any] = {}  # (code, options) -> cupy.RawModule


@dataclass(frozen=True)
class LaunchGeometry:
    """Grid and block of one configuration's kernel, and its dynamic shared memory per block."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem_bytes: int


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
    """The kernel templates (``gemm.cu``) without any instantiation."""
    return KERNEL_FILE.read_text()


def batch_source(cfgs) -> str:
    """One translation unit instantiating every distinct kernel of ``cfgs`` (for offline nvcc checks)."""
    names = dict.fromkeys(kernel_name(c) for c in cfgs)
    return base_source() + "\n" + "".join(_instantiation(n) for n in names)


def kernel_source(cfg: GemmConfig, extra_options: tuple[str, ...] = ()) -> KernelSource:
    """The source, options and name expression of ``cfg`` (no compilation, no GPU).

    ``extra_options`` are appended to :data:`OPTIONS` (e.g. ``("-DGEMM_TRACE",)``)."""
    name = kernel_name(cfg)
    return KernelSource(code=base_source() + "\n" + _instantiation(name), options=OPTIONS + tuple(extra_options),
                        name_expressions=(name,))


def launch_geometry(cfg: GemmConfig) -> LaunchGeometry:
    """Grid, block and dynamic shared memory (``cfg.smem_bytes``) of ``cfg``'s kernel."""
    return LaunchGeometry(grid=cfg.grid, block=(cfg.threads, 1, 1), dynamic_smem_bytes=cfg.smem_bytes)


@dataclass(frozen=True, eq=False)
class CompiledGemm:
    """A compiled GEMM kernel for one configuration; ``launch`` runs it once."""

    cfg: GemmConfig
    source: KernelSource
    geometry: LaunchGeometry
    kernel: Any = field(repr=False)  # cupy.RawKernel
    module: Any = field(repr=False, default=None)  # the cupy.RawModule it came from

    @property
    def name(self) -> str:
        return self.source.name_expressions[0]

    @property
    def attributes(self) -> dict:
        """What the compiled binary uses: registers, static shared memory, spills, thread limit."""
        a = self.kernel.attributes
        return {
            "regs_per_thread": int(a["num_regs"]),
            "static_smem_bytes": int(a["shared_size_bytes"]),
            "dynamic_smem_bytes": self.geometry.dynamic_smem_bytes,
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
        g = self.geometry
        if stream is None:
            self.kernel(g.grid, g.block, args, shared_mem=g.dynamic_smem_bytes)
        else:
            with stream:
                self.kernel(g.grid, g.block, args, shared_mem=g.dynamic_smem_bytes)


def compile_gemm(cfg: GemmConfig, hw=None, *, extra_options: tuple[str, ...] = ()) -> CompiledGemm:
    """Check ``cfg`` against ``hw`` (default: the H200 spec) and compile its kernel with CuPy.

    ``extra_options`` are added to the NVRTC options (``-DGEMM_TRACE`` compiles the schedule trace in).
    Raises the simulator's ``ValueError`` (from the family's ``check_fits``) before compiling,
    ``ValueError`` for non-fp32 or index ranges beyond 32-bit, and :class:`GemmCompileError` when
    NVRTC fails. Modules are cached by source and options.
    """
    if hw is None:
        from tilesim import hardware

        hw = hardware.load("h200")
    _require_fp32(cfg)
    registry.get(FAMILY).check_fits(cfg, hw)
    for f, v in (("m*k", cfg.m * cfg.k), ("k*n", cfg.k * cfg.n), ("m*n", cfg.m * cfg.n)):
        if v >= INT32_LIMIT:
            raise ValueError(f"GemmConfig {f} = {v}: the kernels use 32-bit indices (limit {INT32_LIMIT})")
    src = kernel_source(cfg, extra_options)
    geometry = launch_geometry(cfg)
    name = src.name_expressions[0]
    import cupy

    key = (src.code, src.options)
    module = _MODULES.get(key)
    try:
        if module is None:
            module = cupy.RawModule(code=src.code, options=src.options, name_expressions=src.name_expressions)
        kernel = module.get_function(name)
    except cupy.cuda.compiler.CompileException as e:
        raise GemmCompileError(name, src.options, str(e), src.code) from e
    _MODULES[key] = module
    if geometry.dynamic_smem_bytes > DEFAULT_SMEM_LIMIT_BYTES:
        kernel.max_dynamic_shared_size_bytes = geometry.dynamic_smem_bytes
    return CompiledGemm(cfg=cfg, source=src, geometry=geometry, kernel=kernel, module=module)


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
    return compare(c, ref, cfg)


def compare(out_gpu, ref, cfg: GemmConfig) -> CorrectnessResult:
    """``out_gpu`` (float32) against the float64 ``ref``; non-finite outputs count as unwritten."""
    import cupy

    m, n, k = cfg.m, cfg.n, cfg.k
    out = out_gpu.astype(cupy.float64)
    finite = cupy.isfinite(out)
    unwritten = int(m * n - int(finite.sum()))
    diff = cupy.where(finite, out, 0.0) - ref
    ref_norm = float(cupy.linalg.norm(ref))
    rel_err = float(cupy.linalg.norm(diff)) / (ref_norm if ref_norm > 0 else 1.0)
    ok = unwritten == 0 and rel_err < REL_TOL
    msg = (f"{cfg.label} {m}x{n}x{k}: " + ("ok" if ok else "WRONG") +
           f", rel_err {rel_err:.2e}, {unwritten} non-finite outputs")
    return CorrectnessResult(ok, rel_err, unwritten, msg)


# ----- the runner protocol ----------------------------------------------------------------------------
def random_inputs(cfg: GemmConfig, seed: int = 0):
    """A, B (standard normal, float32, seeded) and C0 (the same; zeros when beta == 0) on the GPU."""
    import cupy

    rs = cupy.random.RandomState(seed)
    a = rs.standard_normal((cfg.m, cfg.k), dtype=cupy.float32)
    b = rs.standard_normal((cfg.k, cfg.n), dtype=cupy.float32)
    c0 = (rs.standard_normal((cfg.m, cfg.n), dtype=cupy.float32) if cfg.beta != 0
          else cupy.zeros((cfg.m, cfg.n), dtype=cupy.float32))
    return a, b, c0


@dataclass(eq=False)
class GemmCase:
    """One configuration compiled, with its inputs on the GPU (see :mod:`validation.harness.runners`)."""

    compiled: CompiledGemm
    a: Any = field(repr=False)
    b: Any = field(repr=False)
    c0: Any = field(repr=False)
    c: Any = field(repr=False)

    @property
    def kernel_names(self) -> tuple[str, ...]:
        return (getattr(self.compiled.kernel, "name", None) or self.compiled.name,)

    @property
    def attributes(self) -> dict:
        return self.compiled.attributes

    def launch(self) -> None:
        self.compiled.launch(self.a, self.b, self.c)

    def check(self) -> tuple[bool, float, str]:
        """Poison C (NaN when beta == 0, else C0), launch, compare with alpha*A@B + beta*C0 in float64."""
        import cupy

        cfg = self.compiled.cfg
        if cfg.beta == 0:
            self.c.fill(cupy.nan)
        else:
            self.c[...] = self.c0
        self.launch()
        cupy.cuda.runtime.deviceSynchronize()
        ref = cfg.alpha * (self.a.astype(cupy.float64) @ self.b.astype(cupy.float64))
        if cfg.beta != 0:
            ref += cfg.beta * self.c0.astype(cupy.float64)
        res = compare(self.c, ref, cfg)
        return res.ok, res.rel_err, res.message


def prepare(cfg: GemmConfig, seed: int = 0) -> GemmCase:
    """Compile ``cfg`` (``ValueError`` when it does not fit or is not fp32) and allocate its inputs."""
    compiled = compile_gemm(cfg)
    a, b, c0 = random_inputs(cfg, seed)
    return GemmCase(compiled, a, b, c0, c0.copy())


@dataclass(eq=False)
class CublasCase:
    """``cupy.matmul`` (fp32; TF32 off unless CUPY_TF32=1) at one shape: the reference rows."""

    m: int
    n: int
    k: int

    def __post_init__(self):
        import cupy

        rs = cupy.random.RandomState(0)
        self.a = rs.standard_normal((self.m, self.k), dtype=cupy.float32)
        self.b = rs.standard_normal((self.k, self.n), dtype=cupy.float32)
        self.c = cupy.zeros((self.m, self.n), dtype=cupy.float32)

    def launch(self) -> None:
        import cupy

        cupy.matmul(self.a, self.b, out=self.c)

    def rates(self, median_s: float) -> dict:
        return {"tflops": 2.0 * self.m * self.n * self.k / median_s * 1e-12}


def reference_rows(configs) -> list[tuple[dict, Any]]:
    """One cuBLAS row per shape of ``configs`` (label and variant ``cublas``, dtype fp32)."""
    shapes = dict.fromkeys((c.m, c.n, c.k) for c in configs)
    return [({"m": m, "n": n, "k": k, "label": "cublas", "variant": "cublas", "dtype": "fp32"},
             lambda m=m, n=n, k=k: CublasCase(m, n, k)) for m, n, k in shapes]


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
