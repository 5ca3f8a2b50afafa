"""The reduction family's runner (the protocol of :mod:`validation.harness.runners`).

``kernel_source(cfg)`` maps a :class:`~tilesim.kernels.reduction.ReductionConfig` to the template
instances of ``reduction.cu`` (CPU only); ``prepare(cfg)`` compiles them with CuPy, allocates a
seeded input uniform in [0, 1) and returns a :class:`Case` whose ``launch`` runs the whole sum:
the 4-byte memset of the output and the first pass (finish "atomic"), or the first pass and the
one-block second pass (finish "second_pass"). CuPy is imported lazily.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilesim.kernels.reduction.config import (
    FINAL_UNROLL,
    FINAL_VECTOR,
    VARIANTS,
    ReductionConfig,
    check_fits,
)
from validation.harness.source import KernelSource

FAMILY = "reduction"
KERNEL_FILE = Path(__file__).with_name("reduction.cu")
OPTIONS: tuple[str, ...] = ("-std=c++17",)
KERNEL_PARAMS = "const float*, int, float*"
# 32-bit indices: the partial chunk's guarded loads reach n + vector*unroll*threads <= n + 2^15.
N_LIMIT = 2**31 - 2**16

# Tolerance of the fp32 sum against the float64 one. Every input reaches the result through at
# most h rounded fp32 additions (its summation depth, :func:`summation_depth`); with inputs in
# [0, 1) (no cancellation) the relative error is at most h*u/(1 - h*u), u = 2^-24 (Higham,
# "Accuracy and Stability of Numerical Algorithms", 2nd ed., section 4.2), and, with rounding
# errors behaving as independent zero-mean variables, about u*sqrt(h)/3 in practice (sequential
# sum of a positive series: each addition rounds by at most half an ulp of the running sum). The
# check allows TOL_SIGMAS * u * sqrt(h), 24 times that typical error, and never less than
# REL_TOL_FLOOR (the family-wide fp32 bar for sums and row operations).
UNIT_ROUNDOFF = 2.0**-24
TOL_SIGMAS = 8.0
REL_TOL_FLOOR = 1e-5

_MODULES: dict[tuple[str, tuple[str, ...]], Any] = {}  # (code, options) -> cupy.RawModule


def _b(x: bool) -> str:
    return "true" if x else "false"


def kernel_names(cfg: ReductionConfig) -> tuple[str, ...]:
    """The template instances ``launch`` runs, in order, e.g. ``reduce_pass<7, 256, 4, 4, false>``
    then ``reduce_final<7, 256>``."""
    if not isinstance(cfg, ReductionConfig):
        raise ValueError(f"cfg must be a ReductionConfig, got {type(cfg).__name__}")
    v = VARIANTS.index(cfg.variant)
    names = [f"reduce_pass<{v}, {cfg.threads}, {cfg.vector}, {cfg.unroll}, {_b(cfg.finish == 'atomic')}>"]
    if cfg.finish == "second_pass":
        names.append(f"reduce_final<{v}, {cfg.threads}>")
    return tuple(names)


def mangled_names(cfg: ReductionConfig) -> tuple[str, ...]:
    """The lowered (Itanium-mangled) names of :func:`kernel_names`, as Nsight Compute prints them."""
    v = VARIANTS.index(cfg.variant)
    names = [f"_Z11reduce_passILi{v}ELi{cfg.threads}ELi{cfg.vector}ELi{cfg.unroll}ELb"
             f"{int(cfg.finish == 'atomic')}EEvPKfiPf"]
    if cfg.finish == "second_pass":
        names.append(f"_Z12reduce_finalILi{v}ELi{cfg.threads}EEvPKfiPf")
    return tuple(names)


def base_source() -> str:
    """The kernel templates without any instantiation."""
    return KERNEL_FILE.read_text()


def _instantiations(names) -> str:
    return "".join(f"template __global__ void {n}({KERNEL_PARAMS});\n" for n in names)


def batch_source(cfgs) -> str:
    """One translation unit instantiating every distinct kernel of ``cfgs`` (for offline nvcc checks)."""
    names = dict.fromkeys(n for c in cfgs for n in kernel_names(c))
    return base_source() + "\n" + _instantiations(names)


def kernel_source(cfg: ReductionConfig) -> KernelSource:
    """The source and kernel names of ``cfg`` (no compilation, no GPU)."""
    names = kernel_names(cfg)
    return KernelSource(code=base_source() + "\n" + _instantiations(names), options=OPTIONS,
                        name_expressions=names)


def summation_depth(cfg: ReductionConfig) -> int:
    """The most rounded fp32 additions between one input and the result (see the tolerance note)."""
    if cfg.is_ladder:
        per_thread = cfg.ladder_elems - 1
    else:  # the loop's accumulator chain, a vector's pairwise sum, the partial chunk, the combination
        per_thread = cfg.trips + int(math.log2(cfg.vector)) + cfg.vector + cfg.unroll - 1
    depth = per_thread + int(math.log2(cfg.threads))
    if cfg.finish == "atomic":
        return depth + cfg.blocks  # the block sums land one after another on the output
    chunk = cfg.threads * FINAL_VECTOR * FINAL_UNROLL
    final = (math.ceil(cfg.blocks / chunk) + int(math.log2(FINAL_VECTOR)) + FINAL_VECTOR
             + FINAL_UNROLL - 1 + int(math.log2(cfg.threads)))
    return depth + final


def tolerance(cfg: ReductionConfig) -> float:
    """The largest relative error ``check`` accepts (see the tolerance note)."""
    return max(REL_TOL_FLOOR, TOL_SIGMAS * UNIT_ROUNDOFF * math.sqrt(summation_depth(cfg)))


@dataclass(eq=False)
class Case:
    """One compiled configuration with its input, partial sums and output on the GPU."""

    cfg: ReductionConfig
    kernels: tuple = field(repr=False)  # cupy.RawKernel per launch: first pass (, second pass)
    x: Any = field(repr=False)
    partial: Any = field(repr=False)  # None with the atomic finish
    out: Any = field(repr=False)
    kernel_names: tuple[str, ...] = ()
    attributes: dict = field(default_factory=dict)
    _ref: float | None = field(default=None, repr=False)

    def launch(self) -> None:
        """The whole sum once, asynchronously on the current stream (no sync, no allocation)."""
        import cupy
        import numpy as np

        c = self.cfg
        block = (c.threads, 1, 1)
        if c.finish == "atomic":
            stream = cupy.cuda.get_current_stream()
            cupy.cuda.runtime.memsetAsync(self.out.data.ptr, 0, self.out.nbytes, stream.ptr)
            self.kernels[0]((c.blocks, 1, 1), block, (self.x, np.int32(c.n), self.out))
        else:
            self.kernels[0]((c.blocks, 1, 1), block, (self.x, np.int32(c.n), self.partial))
            self.kernels[1]((1, 1, 1), block, (self.partial, np.int32(c.blocks), self.out))

    def reference(self) -> float:
        """The float64 sum of the input (computed once)."""
        import cupy

        if self._ref is None:
            self._ref = float(cupy.sum(self.x, dtype=cupy.float64))
        return self._ref

    def check(self) -> tuple[bool, float, str]:
        """Poison the output and the partials (NaN), launch, compare with the float64 sum."""
        import cupy

        self.out.fill(cupy.nan)
        if self.partial is not None:
            self.partial.fill(cupy.nan)
        self.launch()
        cupy.cuda.get_current_stream().synchronize()
        got = float(self.out[0])
        ref = self.reference()
        tol = tolerance(self.cfg)
        if not math.isfinite(got):
            return False, float("inf"), f"sum = {got} (unwritten or NaN; reference {ref:.9g})"
        err = abs(got - ref) / abs(ref) if ref else abs(got)
        ok = err <= tol
        return ok, err, f"sum {got:.9g} vs {ref:.9g}: rel_err {err:.3g} ({'<=' if ok else '>'} {tol:.3g})"


def prepare(cfg: ReductionConfig, seed: int = 0, hw=None) -> Case:
    """Compile ``cfg``'s kernels, allocate a seeded input uniform in [0, 1), return a :class:`Case`.

    Raises ``ValueError`` when ``cfg`` does not fit ``hw`` (default: the H200 spec) or ``n`` is
    beyond the kernels' 32-bit indices."""
    if hw is None:
        from tilesim import hardware

        hw = hardware.load("h200")
    check_fits(cfg, hw)
    if cfg.n >= N_LIMIT:
        raise ValueError(f"ReductionConfig.n = {cfg.n}: the kernels use 32-bit indices (limit {N_LIMIT})")
    import cupy

    src = kernel_source(cfg)
    key = (src.code, src.options)
    module = _MODULES.get(key)
    if module is None:
        module = cupy.RawModule(code=src.code, options=src.options, name_expressions=src.name_expressions)
        _MODULES[key] = module
    kernels = tuple(module.get_function(n) for n in src.name_expressions)
    attrs = [k.attributes for k in kernels]
    attributes = {"regs_per_thread": max(int(a["num_regs"]) for a in attrs),
                  "static_smem_bytes": max(int(a["shared_size_bytes"]) for a in attrs),
                  "local_bytes": max(int(a["local_size_bytes"]) for a in attrs)}
    rng = cupy.random.default_rng(seed)
    x = rng.random(cfg.n, dtype=cupy.float32)
    partial = cupy.empty(cfg.blocks, dtype=cupy.float32) if cfg.finish == "second_pass" else None
    out = cupy.empty(1, dtype=cupy.float32)
    return Case(cfg=cfg, kernels=kernels, x=x, partial=partial, out=out,
                kernel_names=mangled_names(cfg), attributes=attributes)
