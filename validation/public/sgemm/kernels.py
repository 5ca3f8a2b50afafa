"""The held-out fp32 SGEMM kernels: siboehm/SGEMM_CUDA's kernels 1-10, how his runner launches each,
and the :class:`~tilesim.kernels.gemm.config.GemmConfig` that describes it.

Sources (verbatim, under ``src/``; repository, paths, commits and licence in ``src/README.md``):
``src/kernels/<n>_*.cuh`` of github.com/siboehm/SGEMM_CUDA. Launch parameters (grid, block,
template arguments) are those of his ``src/runner.cu`` (commit 1d2038c, the one stored version),
for the branch that square sizes >= 128 take; alpha = 0.5 and beta = 3.0 as his ``sgemm.cu``
benchmark passes them (C is read as well as written).

Each kernel is a :class:`PublicKernel`. :func:`translation_unit` is the ONE CUDA text that holds all
ten (``src/nvrtc_prelude.cuh``, each kernel file without its ``#pragma once`` and ``#include <...>``
lines, which NVRTC cannot resolve and no kernel body uses, then the explicit template
instantiations); CuPy compiles it once with :data:`NVRTC_OPTIONS` and looks every kernel up by its
``name_expression``. :func:`compile_all` builds the same text with ONE offline nvcc call
(``-cubin -arch=sm_90 -Xptxas -v``) and reads each kernel's registers and spills (no GPU needed).

The mappings (``config``) were made from the sources alone, before any time was measured; where no
knob of the GEMM family fits exactly, ``notes`` says what differs. Common to all: siboehm's block
indices are the family's (blockIdx.x walks columns of C tiles) except kernels 1-3, whose
blockIdx.x walks ROWS of C tiles (same number of blocks; another launch order, so other blocks
share an SM's and the L2's data at one time); the family's kernels check bounds on every load and
these do not (the sizes must divide the tiles: :meth:`PublicKernel.supports`).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tilesim.kernels.gemm.config import GemmConfig

SRC_DIR = Path(__file__).resolve().parent / "src"
PRELUDE = "nvrtc_prelude.cuh"
#: siboehm's sgemm.cu: ``float alpha = 0.5, beta = 3.0; // GEMM input parameters, C=α*AB+β*C``
ALPHA = 0.5
BETA = 3.0
#: -DNDEBUG: siboehm's Makefile configures CMAKE_BUILD_TYPE=Release (assert() compiled out);
#: C++17 is nvcc's default standard, which his CMakeLists leaves the CUDA sources at
NVRTC_OPTIONS: tuple[str, ...] = ("-std=c++17", "-DNDEBUG")
ARCH = "sm_90"  # the H200 (compute capability 9.0); CuPy passes its own -arch to NVRTC
NVCC_OPTIONS: tuple[str, ...] = (*NVRTC_OPTIONS, "-cubin", f"-arch={ARCH}", "-Xptxas", "-v")
NVCC_TIMEOUT_S = 600
#: the kernels index with 32-bit ``int``/``uint`` (e.g. ``A[x * K + i]``): products must stay below this
INT32_LIMIT = 2**31
#: runner.cu's kernels 5-8 take BM = BN = 128 only when ``M >= 128 and N >= 128`` (else a 64 x 64
#: instance "as a hacky solution to ... not having proper bounds checking"; not instantiated here)
RUNNER_BIG_TILE_MIN = 128

_SKIP_LINE = re.compile(r"^\s*#\s*(pragma\s+once|include\s*<[^>]*>)\s*$")
_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_USED = re.compile(r"Used (\d+) registers")
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")

CONST_PARAMS = "int, int, int, float, const float *, const float *, float, float *"
MUT_PARAMS = "int, int, int, float, float *, float *, float, float *"


def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


@dataclass(frozen=True)
class PublicKernel:
    """One of siboehm's kernels as his runner launches it.

    ``file`` under ``src/``; ``function`` and ``template_args`` ("" for a plain kernel) make the
    ``name_expression``; ``params`` the parameter types (for the explicit instantiation); ``block``
    the block shape; ``grid(m, n, k)`` the grid (no dynamic shared memory: all arrays are static).
    ``divides`` = (along M, along N, along K) the sizes must be multiples of (1: bounds-checked);
    ``min_mn``: the smallest M and N for which the runner launches this instance; ``vector``: 16-byte
    loads of A and B rows (K and N multiples of 4). ``carveout_max_shared``: the runner sets
    cudaFuncAttributePreferredSharedMemoryCarveout = cudaSharedmemCarveoutMaxShared before launching.
    ``mapping`` gives the GemmConfig keywords (besides the size, alpha, beta); ``notes`` what the
    configuration does not describe.
    """

    name: str
    number: int
    file: str
    function: str
    template_args: str
    params: str
    block: tuple[int, int, int]
    grid: Callable[[int, int, int], tuple[int, int, int]]
    divides: tuple[int, int, int]
    mapping: dict
    notes: str
    min_mn: int = 1
    vector: bool = False
    carveout_max_shared: bool = False

    @property
    def name_expression(self) -> str:
        return f"{self.function}<{self.template_args}>" if self.template_args else self.function

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    def config(self, m: int, n: int, k: int) -> GemmConfig:
        """The mapped configuration for an M x N x K problem (C = 0.5 * A @ B + 3 * C)."""
        return GemmConfig(m=m, n=n, k=k, alpha=ALPHA, beta=BETA, **self.mapping)

    def supports(self, m: int, n: int, k: int) -> str | None:
        """None when the kernel computes this size correctly as launched, else why not."""
        for nm, v in (("M", m), ("N", n), ("K", k)):
            if not (isinstance(v, int) and v > 0):
                raise ValueError(f"{self.name}: {nm} = {v!r} must be a positive integer")
        if min(m, n) < self.min_mn:
            return (f"M, N = {m}, {n}: runner.cu launches another instance below {self.min_mn} "
                    "(not instantiated here)")
        for nm, v, d in (("M", m, self.divides[0]), ("N", n, self.divides[1]), ("K", k, self.divides[2])):
            if v % d:
                return f"{nm} = {v} is not a multiple of {d} (the kernel has no bounds checks)"
        if self.vector and (n % 4 or k % 4):
            return f"N, K = {n}, {k}: float4 loads need multiples of 4"
        for nm, v in (("M*K", m * k), ("K*N", k * n), ("M*N", m * n)):
            if v >= INT32_LIMIT:
                return f"{nm} = {v}: the kernels index with 32-bit integers (limit {INT32_LIMIT})"
        return None

    def instantiation(self) -> str:
        """The explicit instantiation (empty for a plain, non-template kernel)."""
        if not self.template_args:
            return ""
        return f"template __global__ void {self.name_expression}({self.params});\n"


def _grid_rows_first(bm: int, bn: int):
    """runner.cu's kernels 1-3: ``gridDim(CEIL_DIV(M, 32), CEIL_DIV(N, 32))`` (blockIdx.x: rows)."""
    return lambda m, n, k: (_cdiv(m, bm), _cdiv(n, bn), 1)


def _grid_cols_first(bm: int, bn: int):
    """runner.cu's kernels 4-10: ``gridDim(CEIL_DIV(N, BN), CEIL_DIV(M, BM))`` (blockIdx.x: columns)."""
    return lambda m, n, k: (_cdiv(n, bn), _cdiv(m, bm), 1)


_ROWS_FIRST = ("blockIdx.x walks rows of C tiles (the family's walks columns): same blocks, another "
               "launch order. ")
_REG2D_128 = dict(variant="reg2d", bm=128, bn=128, bk=8, tm=8, tn=8)

KERNELS: tuple[PublicKernel, ...] = (
    PublicKernel(
        name="siboehm_k01_naive", number=1, file="1_naive.cuh", function="sgemm_naive", template_args="",
        params=CONST_PARAMS, block=(32, 32, 1), grid=_grid_rows_first(32, 32), divides=(1, 1, 1),
        mapping=dict(variant="naive_uncoalesced", bm=32, bn=32),
        notes=_ROWS_FIRST + "A 2-D block (32, 32) whose threadIdx.x walks rows of C: a warp is 32 rows "
              "of one column, as the family's 1-D naive_uncoalesced block of 1024."),
    PublicKernel(
        name="siboehm_k02_coalesce", number=2, file="2_kernel_global_mem_coalesce.cuh",
        function="sgemm_global_mem_coalesce", template_args="32", params=CONST_PARAMS, block=(1024, 1, 1),
        grid=_grid_rows_first(32, 32), divides=(1, 1, 1), mapping=dict(variant="naive", bm=32, bn=32),
        notes=_ROWS_FIRST + "Otherwise the family's naive 32x32 (threadIdx.x % 32 walks columns)."),
    PublicKernel(
        name="siboehm_k03_smem", number=3, file="3_kernel_shared_mem_blocking.cuh",
        function="sgemm_shared_mem_block", template_args="32", params=CONST_PARAMS, block=(1024, 1, 1),
        grid=_grid_rows_first(32, 32), divides=(32, 32, 32), carveout_max_shared=True,
        mapping=dict(variant="smem", bm=32, bn=32, bk=32),
        notes=_ROWS_FIRST + "Static shared memory (8 KiB), carveout set to max shared by the runner (the "
              "model has no carveout knob; 2 blocks of 1024 threads fit an SM either way)."),
    PublicKernel(
        name="siboehm_k04_1d_blocktiling", number=4, file="4_kernel_1D_blocktiling.cuh",
        function="sgemm1DBlocktiling", template_args="64, 64, 8, 8", params=CONST_PARAMS, block=(512, 1, 1),
        grid=_grid_cols_first(64, 64), divides=(64, 64, 8),
        mapping=dict(variant="reg1d", bm=64, bn=64, bk=8, tm=8),
        notes="As the family's reg1d: A staged [BM][BK], B [BK][BN], one scalar load of each per thread "
              "and k-step, a column of TM = 8 outputs per thread."),
    PublicKernel(
        name="siboehm_k05_2d_blocktiling", number=5, file="5_kernel_2D_blocktiling.cuh",
        function="sgemm2DBlocktiling", template_args="128, 128, 8, 8, 8", params=CONST_PARAMS,
        block=(256, 1, 1), grid=_grid_cols_first(128, 128), divides=(128, 128, 8), min_mn=RUNNER_BIG_TILE_MIN,
        mapping=dict(_REG2D_128),
        notes="Scalar loads, A staged [BM][BK] untransposed: the family's reg2d without vectorize. "
              "__launch_bounds__(256, 1)."),
    PublicKernel(
        name="siboehm_k06_vectorize", number=6, file="6_kernel_vectorize.cuh", function="sgemmVectorize",
        template_args="128, 128, 8, 8, 8", params=MUT_PARAMS, block=(256, 1, 1),
        grid=_grid_cols_first(128, 128), divides=(128, 128, 8), min_mn=RUNNER_BIG_TILE_MIN, vector=True,
        mapping=dict(_REG2D_128, vectorize=True),
        notes="float4 global loads, A stored transposed [BK][BM], float4 C epilogue: the family's reg2d "
              "vectorize. Its shared-memory reads are scalar in the source (the compiler may widen them)."),
    PublicKernel(
        name="siboehm_k07_bank_linearize", number=7, file="7_kernel_resolve_bank_conflicts.cuh",
        function="sgemmResolveBankConflicts", template_args="128, 128, 8, 8, 8", params=MUT_PARAMS,
        block=(256, 1, 1), grid=_grid_cols_first(128, 128), divides=(128, 128, 8),
        min_mn=RUNNER_BIG_TILE_MIN, vector=True, mapping=dict(_REG2D_128, vectorize=True),
        notes="NO KNOB: B is stored 'linearized' (element (r, c) at ((c / 4 % 2) * 4 + r * 8 + c % 4) * 16 "
              "+ c / 8, hard-coded for BN = 128, TN = 8) with scalar shared stores, so each thread's TN reads of B "
              "are 16 consecutive words across the warp (no bank conflicts) instead of kernel 6's "
              "stride-8 reads. Mapped as kernel 6 (same label): the model sees the same tiling."),
    PublicKernel(
        name="siboehm_k08_bank_extra_col", number=8, file="8_kernel_bank_extra_col.cuh",
        function="sgemmResolveBankExtraCol", template_args="128, 128, 8, 8, 8", params=MUT_PARAMS,
        block=(256, 1, 1), grid=_grid_cols_first(128, 128), divides=(128, 128, 8),
        min_mn=RUNNER_BIG_TILE_MIN, vector=True, mapping=dict(_REG2D_128, vectorize=True, smem_pad=5),
        notes="B rows padded by 5 floats (extraCols = 5) with scalar shared stores; A unpadded. The "
              "family's smem_pad pads A's rows too (A [BK][BM+5]: 8512 B of shared memory against the "
              "kernel's 8352 B) and keeps float4 B stores: the closest knob, not exact."),
    PublicKernel(
        name="siboehm_k09_autotuned", number=9, file="9_kernel_autotuned.cuh", function="sgemmAutotuned",
        template_args="64, 64, 16, 4, 4", params=MUT_PARAMS, block=(256, 1, 1), grid=_grid_cols_first(64, 64),
        divides=(64, 64, 16), vector=True,
        mapping=dict(variant="reg2d", bm=64, bn=64, bk=16, tm=4, tn=4, vectorize=True),
        notes="runner.cu (1d2038c) instantiates K9_BM = K9_BN = 64, BK = 16, TM = TN = 4 with "
              "K9_NUM_THREADS = 256: WM = WN = 64, so WMITER = WNITER = 1 and thread (r, c) = (tid / 16, "
              "tid % 16) owns a 4x4 tile: exactly the family's reg2d 64x64x16 t4x4 vectorize."),
    PublicKernel(
        name="siboehm_k10_warptiling", number=10, file="10_kernel_warptiling.cuh", function="sgemmWarptiling",
        template_args="64, 128, 8, 32, 64, 2, 4, 4, 128", params=MUT_PARAMS, block=(128, 1, 1),
        grid=_grid_cols_first(64, 128), divides=(64, 128, 8), vector=True,
        mapping=dict(variant="warp", bm=64, bn=128, bk=8, wm=32, wn=64, wniter=2, tm=4, tn=4, vectorize=True),
        notes="runner.cu (1d2038c): K10_BM = 64, BN = 128, BK = 8, WM = 32, WN = 64, WNITER = 2 "
              "(WMITER = 2), TM = TN = 4, 128 threads; single shared buffer (this commit of kernel 10 "
              "has no double buffering): the family's warp variant with vectorize, pipeline none."),
)

BY_NAME = {k.name: k for k in KERNELS}


def _kernel_text(file: str) -> str:
    """A kernel file as compiled: the verbatim text without ``#pragma once`` and ``#include <...>``."""
    text = (SRC_DIR / file).read_text(encoding="utf-8")
    kept = [line for line in text.splitlines() if not _SKIP_LINE.match(line)]
    return "\n".join(kept) + "\n"


def translation_unit(kernels=KERNELS) -> str:
    """The whole CUDA text of ``kernels``: prelude, kernel files, explicit instantiations."""
    parts = [(SRC_DIR / PRELUDE).read_text(encoding="utf-8")]
    for k in kernels:
        parts.append(f"\n// ---- {k.file} (siboehm/SGEMM_CUDA src/kernels/{k.file}) ----\n")
        parts.append(_kernel_text(k.file))
    parts.append("\n// ---- instantiations as src/runner.cu launches them ----\n")
    parts.extend(k.instantiation() for k in kernels)
    return "".join(parts)


def problem_flops(m: int, n: int, k: int) -> float:
    """2 M N K: the count siboehm's benchmark divides by (the beta * C term not counted)."""
    return 2.0 * m * n * k


def tolerance(k: int) -> float:
    """Relative Frobenius error allowed against the float64 reference: the GEMM family's 1e-4 (fp32
    products summed over K <= 4096 terms; about 10x margin), widened by sqrt(K / 4096) beyond."""
    return 1e-4 * max(1.0, (k / 4096) ** 0.5)


@dataclass(frozen=True)
class Built:
    """One kernel in the offline cubin: its mangled entry name and what ptxas reported."""

    kernel: PublicKernel
    mangled: str
    ptxas_regs: int | None
    spill_bytes: int


def _itanium_name(function: str) -> str:
    return f"{len(function)}{function}"


def compile_all(out_dir: Path, kernels=KERNELS) -> dict[str, Built]:
    """Build every kernel's translation unit with ONE nvcc call and read ptxas's report.

    Raises ``RuntimeError`` with nvcc's output when it fails, ``FileNotFoundError`` without nvcc, and
    ``ValueError`` when a kernel's entry function is missing from the report.
    """
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise FileNotFoundError("nvcc is not on the PATH")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    src = out_dir / "siboehm_sgemm.cu"
    src.write_text(translation_unit(kernels), encoding="utf-8")
    cubin = out_dir / "siboehm_sgemm.cubin"
    proc = subprocess.run([nvcc, *NVCC_OPTIONS, "-o", str(cubin), str(src)], capture_output=True, text=True,
                          timeout=NVCC_TIMEOUT_S)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"nvcc {' '.join(NVCC_OPTIONS)} failed:\n{log}")
    entries: dict[str, tuple[int | None, int]] = {}
    current = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = m.group(1)
            entries[current] = (None, 0)
            continue
        if current is None:
            continue
        s = _SPILL.search(line)
        if s:
            entries[current] = (entries[current][0], int(s.group(1)) + int(s.group(2)))
        u = _USED.search(line)
        if u:
            entries[current] = (int(u.group(1)), entries[current][1])
    built = {}
    for k in kernels:
        hits = [e for e in entries if _itanium_name(k.function) in e]
        if len(hits) != 1:
            raise ValueError(f"{k.name}: expected one entry function for {k.function} in ptxas's report, "
                             f"found {hits or 'none'}")
        regs, spill = entries[hits[0]]
        built[k.name] = Built(kernel=k, mangled=hits[0], ptxas_regs=regs, spill_bytes=spill)
    return built
