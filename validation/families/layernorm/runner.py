"""The layernorm family's runner (the protocol of :mod:`validation.harness.runners`).

``kernel_source(config)`` is pure (no GPU): ``layernorm.cu`` plus one ``extern "C"`` kernel per
configuration, named after its knobs, that instantiates the template body. ``prepare(config)``
compiles it with CuPy, allocates seeded random inputs and returns a :class:`Case` whose
``launch()`` runs the operation (one kernel) and whose ``check()`` compares with a float64
reference. CuPy and NumPy are imported lazily, so this module imports on machines without a GPU.
"""

from __future__ import annotations

from pathlib import Path

from tilesim.kernels.layernorm.config import LayerNormConfig
from validation.harness.source import KernelSource

FAMILY = "layernorm"
KERNEL_FILE = Path(__file__).with_name("layernorm.cu")
OPTIONS: tuple[str, ...] = ("-std=c++17", "-lineinfo")
VARIANT_CODES = {"thread_row": "ln::THREAD_ROW", "warp_row": "ln::WARP_ROW", "block_row": "ln::BLOCK_ROW"}
CACHE_CODES = {"none": "ln::CACHE_NONE", "registers": "ln::CACHE_REGISTERS", "shared": "ln::CACHE_SHARED"}
PARAMS = ("const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, "
          "float* __restrict__ y, int rows, int cols")
DEFAULT_SMEM_LIMIT_BYTES = 48 * 1024  # above this, dynamic shared memory must be opted into
ROW_OFFSET = 3.0  # mean of the per-row offsets added to x: the one-pass variance is tested honestly
ROW_OFFSET_SPREAD = 0.5  # standard deviation of those offsets
EPS = 1e-5  # as ln::EPS in layernorm.cu
# Tolerance on rel_err = ||y - ref|| / ||ref||, per ``passes``. fp32 rounds each addition by up to
# 2^-24 (6e-8); a thread summing m elements serially errs by about sqrt(m) * 6e-8 of the running
# sum (a random walk), the shuffle and shared-memory trees add log2(threads) more roundings. The
# one-pass variance E[x^2] - mean^2 cancels: with the inputs' row offsets (~3 sigma) E[x^2] is ~10
# sigma^2, so its rounding error reaches the variance ten-fold. A float32 emulation of the kernels'
# summation order in numpy (per-thread serial sums, then a pairwise tree; same inputs as here) gave
# worst cases of 2.8e-5 (one pass) and 7.4e-6 (two passes) for a thread summing a whole 65536-column
# row (thread_row), and <= 1e-6 for a warp or block per row. The tolerances keep a factor >= 2.7
# above those; rsqrtf (2 ulp) adds ~1e-7. Any NaN or unwritten element fails on its own.
REL_TOL = {"one": 1e-4, "two": 2e-5}
RATES = {"bytes_per_s": ("min_hbm_bytes", 1.0)}


def kernel_name(config: LayerNormConfig) -> str:
    """The unique kernel of ``config``, e.g. ``layernorm_block_row_one_registers_v4_t256_u1_s4``
    (``s``: the register cache's slice, which depends on cols; 0 without it)."""
    c = config
    return (f"layernorm_{c.variant}_{c.passes}_{c.cache}_v{c.vector}_t{c.threads}"
            f"_u{c.unroll}_s{c.slice_vectors}")


def template_args(config: LayerNormConfig) -> str:
    c = config
    one = 1 if c.passes == "one" else 0
    return (f"{VARIANT_CODES[c.variant]}, {one}, {CACHE_CODES[c.cache]}, {c.vector}, {c.threads}, "
            f"{c.unroll}, {c.slice_vectors}")


def instantiation(config: LayerNormConfig) -> str:
    """The ``extern "C"`` kernel of ``config`` (appended to ``layernorm.cu``)."""
    return (f'extern "C" __global__ void __launch_bounds__({config.threads}) {kernel_name(config)}({PARAMS}) {{\n'
            f"  ln::layernorm<{template_args(config)}>(x, w, b, y, rows, cols);\n}}\n")


def base_source() -> str:
    return KERNEL_FILE.read_text()


def batch_source(configs) -> str:
    """One translation unit with the kernels of all ``configs`` (each distinct kernel once)."""
    seen: dict[str, str] = {}
    for c in configs:
        seen.setdefault(kernel_name(c), instantiation(c))
    return base_source() + "\n" + "".join(seen.values())


def kernel_source(config: LayerNormConfig) -> KernelSource:
    """The CUDA source of one configuration (no GPU needed)."""
    return KernelSource(code=batch_source([config]), options=OPTIONS, name_expressions=(kernel_name(config),))


def prepare(config: LayerNormConfig, seed: int = 0) -> Case:
    """Compile ``config``'s kernel and allocate seeded random inputs (needs CuPy)."""
    import cupy as cp  # noqa: PLC0415

    if not isinstance(config, LayerNormConfig):
        raise ValueError(f"config = {type(config).__name__}: must be a LayerNormConfig")
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    optin = int(props["sharedMemPerBlockOptin"])
    if config.smem_bytes > optin:
        raise ValueError(f"LayerNormConfig.smem_bytes = {config.smem_bytes}: exceeds this GPU's "
                         f"sharedMemPerBlockOptin = {optin}")
    src = kernel_source(config)
    module = cp.RawModule(code=src.code, options=src.options, name_expressions=src.name_expressions)
    kernel = module.get_function(src.name_expressions[0])
    if config.smem_bytes > DEFAULT_SMEM_LIMIT_BYTES:  # static + dynamic above 48 KiB: opt in
        kernel.max_dynamic_shared_size_bytes = config.row_smem_bytes
    return Case(config, kernel, seed)


class Case:
    """One configuration compiled, with its inputs on the GPU (see the module docstring)."""

    def __init__(self, config: LayerNormConfig, kernel, seed: int):
        import cupy as cp  # noqa: PLC0415

        self.config = config
        self._kernel = kernel
        self.kernel_names = (kernel_name(config),)
        attrs = kernel.attributes
        self.attributes = {"regs_per_thread": int(attrs["num_regs"]),
                           "static_smem_bytes": int(attrs["shared_size_bytes"]),
                           "local_bytes": int(attrs["local_size_bytes"])}
        rng = cp.random.default_rng(seed)
        r, n = config.rows, config.cols
        offsets = ROW_OFFSET + ROW_OFFSET_SPREAD * rng.standard_normal((r, 1), dtype=cp.float32)
        self.x = rng.standard_normal((r, n), dtype=cp.float32) + offsets.astype(cp.float32)
        self.w = rng.standard_normal(n, dtype=cp.float32)
        self.b = rng.standard_normal(n, dtype=cp.float32)
        self.y = cp.empty((r, n), dtype=cp.float32)
        self._args = (self.x, self.w, self.b, self.y, cp.int32(r), cp.int32(n))
        self._grid = config.grid
        self._block = (config.threads, 1, 1)
        self._smem = config.row_smem_bytes

    def launch(self) -> None:
        """The whole operation once (one kernel), asynchronously on the current stream."""
        self._kernel(self._grid, self._block, self._args, shared_mem=self._smem)

    def reference(self):
        """y in float64, from the same inputs."""
        x = self.x.astype("float64")
        mean = x.mean(axis=1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
        return (x - mean) / (var + EPS) ** 0.5 * self.w.astype("float64") + self.b.astype("float64")

    def check(self) -> tuple[bool, float, str]:
        """Poison y, launch, compare with the float64 reference: ``(ok, rel_err, message)``."""
        import cupy as cp  # noqa: PLC0415

        self.y.fill(float("nan"))
        self.launch()
        cp.cuda.get_current_stream().synchronize()
        y = self.y.astype(cp.float64)
        bad = int(cp.count_nonzero(~cp.isfinite(y)))
        ref = self.reference()
        rel = float(cp.linalg.norm(y - ref) / cp.linalg.norm(ref)) if bad == 0 else float("inf")
        label = f"{self.kernel_names[0]} on {self.config.rows}x{self.config.cols}"
        if bad:
            return False, rel, f"{label}: {bad} non-finite or unwritten element(s) of {y.size}"
        tol = REL_TOL[self.config.passes]
        ok = rel <= tol
        verdict = "within" if ok else "above"
        return ok, rel, f"{label}: rel_err {rel:.2e} {verdict} tolerance {tol:.0e}"
