"""The tc_gemm family's runner (the protocol of :mod:`validation.harness.runners`).

``kernel_source(cfg)`` and ``prepare(cfg)`` dispatch on ``cfg.instruction``: "wgmma" goes to
:mod:`validation.families.tc_gemm.wgmma`, "wmma" and "mma_sync" to
:mod:`validation.families.tc_gemm.mma`. Both backends have ``kernel_source(cfg) -> KernelSource``
and ``build(cfg, a, b, c) -> Built`` (``mma.Built``: ``launch``, ``kernel_names``, ``attributes``).
CuPy is imported lazily, so this module imports on machines without a GPU.

Inputs (seeded, ``cupy.random.RandomState(seed)``, standard normal drawn in fp32, then stored):
fp16 as ``cupy.float16`` (round to nearest even); bf16 as ``uint16`` bit patterns (CuPy has no
bfloat16 dtype we can rely on), rounded to nearest even from the fp32 draw by :func:`bf16_bits`;
tf32 as ``float32`` (the kernels round to tf32 with ``cvt.rna``). B is K x N (b_layout "row") or
N x K (b_layout "col"). C is fp32, or the input's type ("input"; fp16 -> float16, bf16 -> uint16
bits, tf32 -> float32).

``check()``: C is poisoned with NaN (bf16: the bit pattern 0x7FC0), the kernel runs once, and the
output, decoded to float64, is compared with ``A64 @ B64`` in float64 on the GPU, where A64/B64 are
the STORED inputs decoded exactly (so input rounding to fp16/bf16 is not an error).
``rel_err = ||C - ref||_F / ||ref||_F``; any non-finite output fails on its own.

Tolerances (:data:`REL_TOL`, per dtype and stored output type). With standard-normal inputs every
output is a sum of K products with random signs, ``|ref| ~ sqrt(K)``:

* fp16/bf16 in, fp32 out: fp16 x fp16 and bf16 x bf16 products are exact in fp32 (11 + 11 and 8 + 8
  significant bits <= 24), so the error is the fp32 accumulation: about K / 16 (m16n8k16) or K / 16
  per warp k-step additions into an fp32 accumulator, each rounding (or, in the tensor core's
  adder, truncating) by <= 2^-23 of the running sum. A random walk of K/16 = 512 such errors at
  K = 8192 is ~2^-23 * sqrt(512) ~ 3e-6 of |ref|; even a fully biased truncation
  (512 * 2^-24 * E|partial| / |ref| ~ 2e-5) stays 10x below 2e-4.
* fp16 out: the final rounding to fp16 (11 significant bits) has a relative RMS error of about
  2^-11 / sqrt(3) * ~1.2 ~ 3.4e-4 over a binade; tolerance 1.5e-3 (> 4x).
* bf16 out: 8 significant bits: about 2^-8 / sqrt(3) * ~1.2 ~ 2.7e-3; tolerance 1.2e-2 (> 4x).
* tf32 (out fp32; "input" is fp32 too): cvt.rna rounds each operand to 11 significant bits
  (relative RMS ~3.4e-4 each, as for fp16); a product carries two such errors, ~4.9e-4 RMS, and
  independent errors over K terms keep that ratio to |ref|; tolerance 2e-3 (4x).

An indexing bug, a lost k-tile or an unwritten edge gives an error of order 1e-2 to 1 (a missing
k-tile of 32 out of K = 256 alone is ~0.35), far above every tolerance.

``reference_rows(configs)``: cuBLAS (``cublasGemmEx`` through ``cupy.cuda.cublas.gemmEx``, fp32
compute, default algorithm with tensor cores; TF32 compute for tf32) per distinct shape and input
type of the suite, B row-major, C in the input type (fp32 for tf32): the "% of cuBLAS" rows. bf16
goes through gemmEx with CUDA_R_16BF on the uint16 arrays, so it does not need a CuPy bfloat16
dtype.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from tilesim.kernels.tc_gemm.config import TcGemmConfig
from validation.harness.source import KernelSource

FAMILY = "tc_gemm"
#: times.csv's throughput column: the family's analytic FLOP count over the median time
RATES = {"flops_per_s": ("flops", 1.0)}
#: Nsight Compute metrics this family adds (names from `ncu --query-metrics --chip gh100` on the H200):
#: tensor-pipe activity and instructions (HMMA for wmma/mma.sync, GMMA for wgmma) and the shared-memory
#: wavefronts wgmma reads its operands with
NCU_METRICS = {
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active": "pct",
    "sm__inst_executed_pipe_tensor_op_hmma.sum": "count",
    "sm__inst_executed_pipe_tensor_op_gmma.sum": "count",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_gmma.sum": "count",
    "smsp__issue_active.avg.pct_of_peak_sustained_active": "pct",
}
#: a slow suite kernel (WMMA from global memory at 4096^3, a naive shared layout at 8192^3) takes
#: ~2-20 ms a launch; a 2 s budget with at least 5 repetitions bounds every configuration to a few
#: seconds, the fast ones (~1-2 ms at 8192^3) still get 30 repetitions
TIMING = {"warmup": 3, "reps": 30, "min_reps": 5, "budget_s": 2.0}
#: rel_err tolerance per (dtype, stored output type): see the module docstring
REL_TOL = {("fp16", "fp32"): 2e-4, ("bf16", "fp32"): 2e-4, ("fp16", "fp16"): 1.5e-3,
           ("bf16", "bf16"): 1.2e-2, ("tf32", "fp32"): 2e-3}
BF16_NAN_BITS = 0x7FC0  # a quiet NaN in bfloat16
#: cuBLAS constants (cublas_api.h / library_types.h)
CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF = 0, 2, 14
CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32 = 68, 77
CUBLAS_GEMM_DEFAULT = -1
CUBLAS_OP_N, CUBLAS_OP_T = 0, 1


def stored_out_dtype(cfg: TcGemmConfig) -> str:
    """The element type C is stored in: "fp32", "fp16" or "bf16"."""
    if cfg.out_dtype == "fp32" or cfg.dtype == "tf32":
        return "fp32"
    return cfg.dtype


def tolerance(cfg: TcGemmConfig) -> float:
    return REL_TOL[(cfg.dtype, stored_out_dtype(cfg))]


def backend(cfg: TcGemmConfig):
    """The module that builds ``cfg``: ``wgmma`` for instruction "wgmma", else ``mma``."""
    if not isinstance(cfg, TcGemmConfig):
        raise ValueError(f"cfg must be a TcGemmConfig, got {type(cfg).__name__}")
    name = "wgmma" if cfg.instruction == "wgmma" else "mma"
    return importlib.import_module(f"validation.families.tc_gemm.{name}")


def kernel_source(cfg: TcGemmConfig) -> KernelSource:
    """The CUDA source of one configuration (no GPU needed)."""
    return backend(cfg).kernel_source(cfg)


# ----- bf16 bit patterns (numpy or cupy arrays) ---------------------------------------------------------
def _xp(a):
    import numpy as np

    try:
        import cupy
    except ImportError:
        return np
    return cupy.get_array_module(a)


def bf16_bits(x):
    """float32 array -> uint16 bfloat16 bit patterns, rounded to nearest even (finite inputs)."""
    xp = _xp(x)
    u = xp.ascontiguousarray(x, dtype=xp.float32).view(xp.uint32)
    rounded = u + (((u >> 16) & 1) + 0x7FFF)
    return (rounded >> 16).astype(xp.uint16)


def bf16_to_f32(bits):
    """uint16 bfloat16 bit patterns -> float32 (exact)."""
    xp = _xp(bits)
    return (xp.ascontiguousarray(bits, dtype=xp.uint16).astype(xp.uint32) << 16).view(xp.float32)


def decode(arr, kind: str):
    """A stored array ("fp16", "bf16" bits, "fp32"/"tf32") as float64."""
    if kind == "bf16":
        return bf16_to_f32(arr).astype("float64")
    return arr.astype("float64")


def random_inputs(cfg: TcGemmConfig, seed: int = 0):
    """A (M x K) and B (K x N, or N x K for b_layout "col") in their storage types, seeded."""
    import cupy

    rs = cupy.random.RandomState(seed)
    b_shape = (cfg.k, cfg.n) if cfg.b_layout == "row" else (cfg.n, cfg.k)

    def draw(shape):
        x = rs.standard_normal(shape, dtype=cupy.float32)
        if cfg.dtype == "fp16":
            return x.astype(cupy.float16)
        if cfg.dtype == "bf16":
            return bf16_bits(x)
        return x

    return draw((cfg.m, cfg.k)), draw(b_shape)


def allocate_output(cfg: TcGemmConfig):
    import cupy

    dt = {"fp32": cupy.float32, "fp16": cupy.float16, "bf16": cupy.uint16}[stored_out_dtype(cfg)]
    return cupy.empty((cfg.m, cfg.n), dtype=dt)


def poison(c, kind: str) -> None:
    import cupy

    if kind == "bf16":
        c.fill(BF16_NAN_BITS)
    else:
        c.fill(cupy.nan)


def reference(cfg: TcGemmConfig, a, b):
    """``A @ B`` in float64 from the stored inputs (on the GPU)."""
    a64, b64 = decode(a, cfg.dtype), decode(b, cfg.dtype)
    return a64 @ (b64 if cfg.b_layout == "row" else b64.T)


@dataclass(eq=False)
class Case:
    """One configuration built, with its inputs and output on the GPU (see the module docstring)."""

    cfg: TcGemmConfig
    built: Any = field(repr=False)
    a: Any = field(repr=False)
    b: Any = field(repr=False)
    c: Any = field(repr=False)

    @property
    def kernel_names(self) -> tuple[str, ...]:
        return tuple(self.built.kernel_names)

    @property
    def attributes(self) -> dict:
        return dict(self.built.attributes)

    def launch(self) -> None:
        """The GEMM once, asynchronously on the current stream."""
        self.built.launch()

    def check(self) -> tuple[bool, float, str]:
        """Poison C, launch once, compare with the float64 reference: ``(ok, rel_err, message)``."""
        import cupy

        kind = stored_out_dtype(self.cfg)
        poison(self.c, kind)
        self.launch()
        cupy.cuda.get_current_stream().synchronize()
        out = decode(self.c, kind)
        finite = cupy.isfinite(out)
        bad = int(out.size - int(cupy.count_nonzero(finite)))
        ref = reference(self.cfg, self.a, self.b)
        diff = cupy.where(finite, out, 0.0) - ref
        ref_norm = float(cupy.linalg.norm(ref))
        err = float(cupy.linalg.norm(diff)) / (ref_norm if ref_norm > 0 else 1.0)
        tol = tolerance(self.cfg)
        size = f"{self.cfg.m}x{self.cfg.n}x{self.cfg.k}"
        if bad:
            rows = cupy.nonzero(~finite.all(axis=1))[0]
            cols = cupy.nonzero(~finite.all(axis=0))[0]
            where = (f"rows {int(rows[0])}..{int(rows[-1])}, cols {int(cols[0])}..{int(cols[-1])}"
                     if rows.size and cols.size else "")
            return False, float("inf"), (f"{size}: {bad} of {out.size} outputs not finite (unwritten or NaN; "
                                         f"{where}); rel_err of the rest {err:.3g}")
        ok = err <= tol
        msg = f"{size}: rel_err {err:.3g} ({'<=' if ok else '>'} {tol:g})"
        if not ok:  # where is it wrong? the worst row and column blocks help locate a tiling bug
            absdiff = cupy.abs(diff)
            r, c = divmod(int(cupy.argmax(absdiff)), self.cfg.n)
            msg += f"; largest |error| {float(absdiff[r, c]):.3g} at ({r}, {c}), |ref| there {abs(float(ref[r, c])):.3g}"
        return ok, err, msg


def prepare(cfg: TcGemmConfig, seed: int = 0) -> Case:
    """Build ``cfg``'s kernel (``ValueError`` for configurations the kernels do not implement or that do
    not fit this GPU's shared memory) and allocate seeded inputs."""
    mod = backend(cfg)
    import cupy

    if hasattr(mod, "dynamic_smem_bytes"):
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        optin = int(props["sharedMemPerBlockOptin"])
        need = mod.dynamic_smem_bytes(cfg)
        if need > optin:
            raise ValueError(f"TcGemmConfig: the kernel needs {need} B of dynamic shared memory; this GPU's "
                             f"sharedMemPerBlockOptin is {optin}")
    a, b = random_inputs(cfg, seed)
    c = allocate_output(cfg)
    built = mod.build(cfg, a, b, c)
    return Case(cfg=cfg, built=built, a=a, b=b, c=c)


# ----- cuBLAS reference rows ---------------------------------------------------------------------------
@dataclass(eq=False)
class CublasCase:
    """cublasGemmEx at one shape and input type: C (input type; fp32 for tf32) = A @ B, B row-major."""

    m: int
    n: int
    k: int
    dtype: str

    def __post_init__(self):
        import cupy
        import numpy as np

        cfg = TcGemmConfig(m=self.m, n=self.n, k=self.k, dtype=self.dtype, out_dtype="input", b_layout="row")
        self.a, self.b = random_inputs(cfg, 0)
        self.c = allocate_output(cfg)
        self._alpha = np.array(1.0, dtype=np.float32)
        self._beta = np.array(0.0, dtype=np.float32)
        self._type = {"fp16": CUDA_R_16F, "bf16": CUDA_R_16BF, "tf32": CUDA_R_32F}[self.dtype]
        self._ctype = CUDA_R_32F if self.dtype == "tf32" else self._type
        self._compute = CUBLAS_COMPUTE_32F_FAST_TF32 if self.dtype == "tf32" else CUBLAS_COMPUTE_32F
        self._handle = cupy.cuda.device.get_cublas_handle()

    def launch(self) -> None:
        """Row-major C = A @ B as column-major C^T = B^T A^T (N x M)."""
        from cupy.cuda import cublas

        cublas.gemmEx(self._handle, CUBLAS_OP_N, CUBLAS_OP_N, self.n, self.m, self.k,
                      self._alpha.ctypes.data, self.b.data.ptr, self._type, self.n,
                      self.a.data.ptr, self._type, self.k,
                      self._beta.ctypes.data, self.c.data.ptr, self._ctype, self.n,
                      self._compute, CUBLAS_GEMM_DEFAULT)

    def check(self) -> tuple[bool, float]:
        """Whether cuBLAS computed A @ B (a sanity check of the call's layout): (ok, rel_err)."""
        import cupy

        cfg = TcGemmConfig(m=self.m, n=self.n, k=self.k, dtype=self.dtype, out_dtype="input", b_layout="row")
        self.launch()
        cupy.cuda.get_current_stream().synchronize()
        ref = reference(cfg, self.a, self.b)
        err = float(cupy.linalg.norm(decode(self.c, stored_out_dtype(cfg)) - ref) / cupy.linalg.norm(ref))
        return err <= tolerance(cfg), err

    def rates(self, median_s: float) -> dict:
        return {"flops_per_s": 2.0 * self.m * self.n * self.k / median_s}


def reference_rows(configs) -> list[tuple[dict, Any]]:
    """One cuBLAS row per distinct (shape, dtype) of ``configs`` (label ``cublas_<dtype>``)."""
    keys = dict.fromkeys((c.m, c.n, c.k, c.dtype) for c in configs)
    rows = []
    for m, n, k, dt in keys:
        row = {"m": m, "n": n, "k": k, "label": f"cublas_{dt}", "dtype": dt, "out_dtype": "input",
               "b_layout": "row", "instruction": "cublas"}
        rows.append((row, lambda m=m, n=n, k=k, dt=dt: CublasCase(m, n, k, dt)))
    return rows
