"""The softmax family's runner (the protocol of :mod:`validation.harness.runners`).

``kernel_source(cfg)`` picks the template instance of ``softmax.cu`` that implements a
:class:`~tilesim.kernels.softmax.config.SoftmaxConfig` (CPU only); ``prepare(cfg)`` compiles it with
CuPy, allocates a seeded standard-normal input and returns a :class:`Case` whose ``launch`` runs
the softmax once and whose ``check`` compares with a float64 reference. CuPy is imported lazily,
so this module imports on machines without a GPU.

Tolerance: ``rel_err = ||y - ref|| / ||ref|| <= 1e-5``. The inputs are exact in fp32 and the
reference is computed in float64 from the same values, so the error is the kernel's own: each
output carries the rounding of ``x - max`` (exact for most inputs: both are fp32 and close),
``__expf`` (ex2.approx of ``x * log2(e)``: about 2 ulp plus the rounding of the product, which
grows with ``|x - max|`` <= ~10 for standard-normal rows: <= ~1e-6 relative), the sum (fp32 sums
of at most ``cols / (unroll * vector * threads per row)`` terms per accumulator, then a tree; for
the worst suite case, a thread_row accumulator of 2**14 positive terms, the random-walk error is
about ``2**-24 * sqrt(2**14 / 3)`` ~ 4e-6) and the final scaling (<= 2 ulp for ``__fdividef`` and
the product). All of these are well below 1e-5; an indexing bug, a missed tail or a wrong max
gives errors of order 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilesim.kernels.softmax.config import SoftmaxConfig, check_fits
from validation.harness.source import KernelSource

FAMILY = "softmax"
KERNEL_FILE = Path(__file__).with_name("softmax.cu")
OPTIONS: tuple[str, ...] = ("-std=c++17",)
KERNEL_PARAMS = "const float*, float*, int, int"
CACHE_CODES = {"none": 0, "registers": 1, "shared": 2}
TREE_CODES = {"sequential": 0, "interleaved": 1}
REL_TOL = 1e-5  # see the module docstring
DEFAULT_SMEM_LIMIT_BYTES = 48 * 1024  # above this, dynamic shared memory must be opted into

_MODULES: dict[tuple[str, tuple[str, ...]], Any] = {}  # (code, options) -> cupy.RawModule


def _template(cfg: SoftmaxConfig) -> tuple[str, list[int]]:
    if not isinstance(cfg, SoftmaxConfig):
        raise ValueError(f"cfg must be a SoftmaxConfig, got {type(cfg).__name__}")
    nvec = cfg.nvec if cfg.cache == "registers" else 0
    args = [cfg.threads, cfg.vector, CACHE_CODES[cfg.cache], cfg.unroll, nvec]
    if cfg.variant == "block_tree":
        args.append(TREE_CODES[cfg.tree])
    base = f"softmax_online_{cfg.unit}" if cfg.variant == "online" else f"softmax_{cfg.variant}"
    return base, args


def kernel_name(cfg: SoftmaxConfig) -> str:
    """The template instance implementing ``cfg``, e.g. ``softmax_block_tree<256, 4, 0, 4, 0, 1>``."""
    base, args = _template(cfg)
    return f"{base}<{', '.join(str(a) for a in args)}>"


def mangled_name(cfg: SoftmaxConfig) -> str:
    """The kernel's lowered (Itanium-mangled) name, as Nsight Compute and ``ptxas -v`` print it:
    ``void base<ints...>(const float*, float*, int, int)``."""
    base, args = _template(cfg)
    return f"_Z{len(base)}{base}I{''.join(f'Li{a}E' for a in args)}EvPKfPfii"


def _instantiation(name: str) -> str:
    return f"template __global__ void {name}({KERNEL_PARAMS});\n"


def base_source() -> str:
    """The kernel templates without any instantiation."""
    return KERNEL_FILE.read_text()


def batch_source(cfgs) -> str:
    """One translation unit instantiating every distinct kernel of ``cfgs`` (for offline nvcc checks)."""
    names = dict.fromkeys(kernel_name(c) for c in cfgs)
    return base_source() + "\n" + "".join(_instantiation(n) for n in names)


def kernel_source(cfg: SoftmaxConfig) -> KernelSource:
    """The source and kernel name of ``cfg`` (no compilation, no GPU)."""
    name = kernel_name(cfg)
    return KernelSource(code=base_source() + "\n" + _instantiation(name), options=OPTIONS,
                        name_expressions=(name,))


def reference(x):
    """Row softmax in float64 (numpy or cupy array in, same kind out)."""
    xd = x.astype("float64")
    e = _xp(x).exp(xd - xd.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _xp(a):
    import numpy as np

    try:
        import cupy
    except ImportError:
        return np
    return cupy.get_array_module(a)


@dataclass(eq=False)
class Case:
    """One compiled configuration with its input and output on the GPU."""

    cfg: SoftmaxConfig
    kernel: Any = field(repr=False)  # cupy.RawKernel
    x: Any = field(repr=False)
    y: Any = field(repr=False)
    kernel_names: tuple[str, ...] = ()
    attributes: dict = field(default_factory=dict)

    def launch(self) -> None:
        """The softmax once, asynchronously on the current stream."""
        import numpy as np

        c = self.cfg
        self.kernel(c.grid, (c.threads, 1, 1), (self.x, self.y, np.int32(c.rows), np.int32(c.cols)),
                    shared_mem=c.dynamic_smem_bytes)

    def check(self) -> tuple[bool, float, str]:
        """Poison the output, launch, compare with the float64 reference: (ok, rel_err, message)."""
        import cupy

        self.y.fill(cupy.nan)
        self.launch()
        cupy.cuda.get_current_stream().synchronize()
        bad = int(cupy.count_nonzero(~cupy.isfinite(self.y)))
        if bad:
            return False, float("inf"), f"{bad} of {self.y.size} outputs not finite (unwritten or NaN)"
        ref = reference(self.x)
        err = float(cupy.linalg.norm(self.y.astype(cupy.float64) - ref) / cupy.linalg.norm(ref))
        ok = err <= REL_TOL
        return ok, err, f"rel_err {err:.3g} ({'<=' if ok else '>'} {REL_TOL:g})"


def prepare(cfg: SoftmaxConfig, seed: int = 0, hw=None) -> Case:
    """Compile ``cfg``'s kernel, allocate a seeded standard-normal input, return a :class:`Case`.

    Raises ``ValueError`` when ``cfg`` does not fit ``hw`` (default: the H200 spec)."""
    if hw is None:
        from tilesim import hardware

        hw = hardware.load("h200")
    check_fits(cfg, hw)
    import cupy

    src = kernel_source(cfg)
    key = (src.code, src.options)
    module = _MODULES.get(key)
    if module is None:
        module = cupy.RawModule(code=src.code, options=src.options, name_expressions=src.name_expressions)
        _MODULES[key] = module
    name = src.name_expressions[0]
    kernel = module.get_function(name)
    if cfg.dynamic_smem_bytes > DEFAULT_SMEM_LIMIT_BYTES:
        kernel.max_dynamic_shared_size_bytes = cfg.dynamic_smem_bytes
    a = kernel.attributes
    attributes = {"regs_per_thread": int(a["num_regs"]), "static_smem_bytes": int(a["shared_size_bytes"]),
                  "local_bytes": int(a["local_size_bytes"])}
    x = cupy.random.RandomState(seed).standard_normal((cfg.rows, cfg.cols), dtype=cupy.float32)
    y = cupy.empty_like(x)
    return Case(cfg=cfg, kernel=kernel, x=x, y=y, kernel_names=(mangled_name(cfg),),
                attributes=attributes)
