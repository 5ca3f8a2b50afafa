"""The held-out tensor-core GEMM kernels: how each public kernel is built, launched and fed, and the
:class:`~tilesim.kernels.tc_gemm.config.TcGemmConfig` that describes it.

Sources (verbatim, under ``src/``; provenance, commits and licences in ``src/README.md``):

* ``deftruth_hgemm_wmma.cu.excerpt``: DefTruth/CUDA-Learn-Notes ``hgemm/hgemm_wmma.cu`` (WMMA
  m16n16k16, fp16 accumulators): the naive one-warp kernel, the 4x2-warp shared-memory kernel and
  the 4x2-warp kernel with 2x4 fragments per warp;
* ``leetcuda_hgemm_mma_stage.cu.excerpt``: xlite-dev/LeetCUDA (the same project, renamed)
  ``kernels/hgemm/mma/basic/hgemm_mma_stage.cu``: ``mma.sync`` m16n8k16 (fp16 accumulators) fed by
  ``ldmatrix``, a ``K_STAGE``-deep ``cp.async`` ring, optional row padding, block swizzle along N;
* ``fastcu_matmul_2.cuh``: pranjalssh/fast.cu ``examples/matmul/matmul_2.cuh``: bf16 ``wgmma``
  m64n64k16 on 128-byte-swizzled TMA tiles, one warpgroup, one buffer.
* ``fastcu_matmul_3.cuh``: fast.cu ``examples/matmul/matmul_3.cuh``: ``wgmma`` m64n256k16, 128x256x64
  tiles, two warpgroups that both compute (thread 0 also issues the TMA), one buffer;
* ``fastcu_matmul_4.cuh``: fast.cu ``examples/matmul/matmul_4.cuh``: the same tile with a producer
  warpgroup (``setmaxnreg`` 24) and two consumer warpgroups (240) on a 3-deep TMA + mbarrier ring.
  (``matmul_5.cuh`` is not taken: a persistent kernel, 128 blocks walking a 16x8-grouped tile
  schedule, tensor maps passed by value as ``__grid_constant__``: the model has no persistent knob.)

Each kernel is a :class:`PublicKernel`: the wrapper header that includes its source, the explicit
template instantiation its own host code launches (template arguments as that host code uses them,
or the template's defaults where we could not read the host code: see ``notes``), the launch
geometry, the operand layouts, its accumulator type and the mapped configuration. The mapping was
made from the source alone, before any time was measured; mismatches with the knobs are in
``notes``.

:func:`translation_unit` is the whole CUDA text of one kernel (wrapper include plus instantiation),
:func:`compile_all` builds every kernel's cubin with ONE nvcc call (``-cubin -arch=sm_90a``: the
wgmma kernel needs the ``a`` target; the others run on it too) and finds each kernel's mangled name
in its cubin (the ``.text.<name>`` section). No GPU is needed here.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tilesim.kernels.tc_gemm.config import TcGemmConfig

SRC_DIR = Path(__file__).resolve().parent / "src"
STUB_DIR = SRC_DIR / "stub"
ARCH = "sm_90a"  # wgmma needs the architecture-specific target (PTX ISA: wgmma requires sm_90a)
#: -diag-suppress 177: upstream's unused ``lane_id`` variables in the DefTruth WMMA kernels; 20044: fast.cu
#: matmul_3's ``extern __shared__ SMem<...> s`` ("extern declaration ... treated as a static definition":
#: its 48 KiB tile is static shared memory). Diagnostics only (not ours to edit; the code is unchanged).
NVCC_OPTIONS: tuple[str, ...] = ("-std=c++17", "-cubin", f"-arch={ARCH}", "-diag-suppress", "177",
                                 "-diag-suppress", "20044", "-Xptxas", "-v", "-I", str(SRC_DIR), "-I", str(STUB_DIR))
NVCC_TIMEOUT_S = 600
#: LeetCUDA's host code swizzles blocks along N in strips of this many columns of C (its
#: ``swizzle_stride`` default, as we recall it from the project's README: not read from this commit)
LEETCUDA_SWIZZLE_STRIDE = 2048
_TEXT_SECTION = re.compile(rb"\.text\.([A-Za-z_][A-Za-z0-9_]*)\x00")
_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_USED = re.compile(r"Used (\d+) registers")


def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


@dataclass(frozen=True)
class PublicKernel:
    """One public kernel as its own host code launches it.

    ``grid(m, n, k)`` and ``block`` are the launch; ``dynamic_smem_bytes`` the dynamic shared
    memory (0: static arrays only). ``a`` is M x K row-major always; ``b_layout`` "row" (K x N
    row-major) or "col" (N x K row-major); ``c_layout`` "row" (M x N row-major) or "col" (M x N
    column-major, i.e. stored as N x M row-major). ``dtype`` of A, B and C ("fp16"/"bf16");
    ``accumulate`` the accumulator type ("fp16" or "fp32"). ``tensormaps`` "pointer": the kernel takes
    two ``const CUtensorMap*`` in global memory (fast.cu's host code: 128-byte swizzle, no L2
    promotion, box {bk, bm} for A and {bk, bn} for B). ``divides``: (bm, bn, bk) that M, N, K must
    be multiples of (the kernels have no edge handling). ``debug_pointer``: the kernel takes a trailing
    ``int*`` its DBG = false instantiation never touches (the runner passes a one-int dummy buffer).
    """

    name: str
    wrapper: str
    function: str            # qualified template name
    template_args: str
    params: str              # the parameter types, for the explicit instantiation
    block: tuple[int, int, int]
    grid: Callable[[int, int, int], tuple[int, int, int]]
    config: Callable[[int, int, int], TcGemmConfig]
    divides: tuple[int, int, int]
    dtype: str = "fp16"
    accumulate: str = "fp16"
    b_layout: str = "row"
    c_layout: str = "row"
    dynamic_smem_bytes: int = 0
    tensormaps: str | None = None
    box: tuple[int, int, int] = (0, 0, 0)  # (bm, bn, bk) of the TMA boxes (tensormaps only)
    debug_pointer: bool = False  # a trailing ``int* DB`` (fast.cu's timing buffer; unused with DBG = false)
    source: str = ""
    notes: str = field(default="")

    @property
    def base_name(self) -> str:
        """The kernel's unqualified name (it appears in the mangled name)."""
        return self.function.split("::")[-1]

    def supports(self, m: int, n: int, k: int) -> str | None:
        """None if the kernel computes an m x n x k problem, else why not."""
        for what, v, d in (("M", m, self.divides[0]), ("N", n, self.divides[1]), ("K", k, self.divides[2])):
            if v % d:
                return f"{what} = {v} is not a multiple of {d} (the kernel has no edge handling)"
        return None


def _wmma_cfg(bm, bn, wm, wn, staging="shared"):
    def make(m, n, k):
        return TcGemmConfig(m=m, n=n, k=k, dtype="fp16", out_dtype="input", b_layout="row", instruction="wmma",
                            staging=staging, bm=bm, bn=bn, bk=16, wm=wm, wn=wn, shape="16x16x16",
                            layout="naive", stages=1, epilogue="direct")
    return make


def _mma_cfg(stages, layout):
    def make(m, n, k):
        return TcGemmConfig(m=m, n=n, k=k, dtype="fp16", out_dtype="input", b_layout="row", instruction="mma_sync",
                            staging="shared", bm=128, bn=128, bk=16, wm=64, wn=32, shape="m16n8k16",
                            layout=layout, stages=stages, epilogue="direct")
    return make


def _leetcuda_grid(m, n, k):
    strips = _cdiv(n, LEETCUDA_SWIZZLE_STRIDE)
    return (_cdiv(_cdiv(n, 128), strips), _cdiv(m, 128), strips)


def _fastcu_m2_cfg(m, n, k):
    return TcGemmConfig(m=m, n=n, k=k, dtype="bf16", out_dtype="input", b_layout="col", instruction="wgmma",
                        staging="shared", bm=64, bn=64, bk=64, wm=64, wn=64, shape="m64n64k16", layout="swizzled",
                        stages=1, consumers=1, cluster=1, epilogue="direct", setmaxnreg=False)


def _fastcu_2wg_cfg(stages, setmaxnreg=True):
    """fast.cu matmul_3 / matmul_4: 128x256x64 tiles, two warpgroups of 64x256 (m64n256k16), B K-major;
    matmul_3 has no producer warpgroup and no setmaxnreg, matmul_4 both."""
    def make(m, n, k):
        return TcGemmConfig(m=m, n=n, k=k, dtype="bf16", out_dtype="input", b_layout="col", instruction="wgmma",
                            staging="shared", bm=128, bn=256, bk=64, wm=64, wn=256, shape="m64n256k16",
                            layout="swizzled", stages=stages, consumers=2, cluster=1, epilogue="direct",
                            setmaxnreg=setmaxnreg)
    return make


def _fastcu_smem_bytes(bm, bn, bk, stages):
    """sizeof(fast.cu's SMem<BLOCK_M, BLOCK_N, BLOCK_K(, STAGES)>): bf16 A[BM*BK*S] and B[BK*BN*S], both
    128-byte aligned, so no padding: the dynamic shared memory its runKernelN passes and opts in to."""
    return (bm * bk + bk * bn) * stages * 2


_FASTCU_PARAMS_DB = "int, int, int, bf16*, const CUtensorMap*, const CUtensorMap*, int*"
_FASTCU_COMMON = ("C column-major with 2-byte scalar __stwt (write-through) stores straight from the "
                  "accumulators; blocks walk N fastest (blockIdx.x % (N/256); the model groups tiles along "
                  "M); wgmma.wait_group 0 after each k-step's 4 (k16) x 1 (per warpgroup) m64n256k16")
_HALF3 = "half*, half*, half*, int, int, int"
_DEFTRUTH = "DefTruth/CUDA-Learn-Notes hgemm/hgemm_wmma.cu"
_LEETCUDA = "xlite-dev/LeetCUDA kernels/hgemm/mma/basic/hgemm_mma_stage.cu"
_FP16_ACC = ("fp16 accumulators (the model assumes fp32: half the accumulator registers; the H200 "
             "runs HMMA with f16 and f32 accumulation at the same dense rate)")
_LEETCUDA_NOTES = (_FP16_ACC + "; block swizzle along N in strips of 2048 columns (grid.z strips; the "
                   "model walks plain launch order); B read with ldmatrix.trans (row-major B); C stored "
                   "as 32-bit half2 per lane (the model's direct epilogue)")

KERNELS: tuple[PublicKernel, ...] = (
    PublicKernel(
        name="deftruth_wmma_naive", wrapper="wrap_deftruth_wmma.cuh",
        function="hgemm_wmma_m16n16k16_naive_kernel", template_args="16, 16, 16", params=_HALF3,
        block=(32, 1, 1), grid=lambda m, n, k: (_cdiv(n, 16), _cdiv(m, 16), 1),
        config=_wmma_cfg(16, 16, 16, 16, staging="global"), divides=(16, 16, 16), source=_DEFTRUTH,
        notes=(_FP16_ACC + "; one warp per block, fragments loaded straight from global memory "
               "(staging global); no scratch shared memory (the model reserves 2 KiB per warp); "
               "launch (N/16, M/16) x 32 threads as the upstream host code's dim3 (recalled, not read)")),
    PublicKernel(
        name="deftruth_wmma_mma4x2", wrapper="wrap_deftruth_wmma.cuh",
        function="hgemm_wmma_m16n16k16_mma4x2_kernel", template_args="16, 16, 16, 4, 2", params=_HALF3,
        block=(256, 1, 1), grid=lambda m, n, k: (_cdiv(n, 32), _cdiv(m, 64), 1),
        config=_wmma_cfg(64, 32, 16, 16), divides=(64, 32, 16), source=_DEFTRUTH,
        notes=(_FP16_ACC + "; synchronous register copy (8-byte A, 4-byte B loads per thread) into a "
               "64x16 + 16x32 tile, one buffer (stages 1), dense rows (layout naive); store_matrix_sync "
               "straight to global (the model's wmma epilogue passes through 1 KiB of shared per warp)")),
    PublicKernel(
        name="deftruth_wmma_warp2x4", wrapper="wrap_deftruth_wmma.cuh",
        function="hgemm_wmma_m16n16k16_mma4x2_warp2x4_kernel", template_args="16, 16, 16, 4, 2, 2, 4",
        params=_HALF3, block=(256, 1, 1), grid=lambda m, n, k: (_cdiv(n, 128), _cdiv(m, 128), 1),
        config=_wmma_cfg(128, 128, 32, 64), divides=(128, 128, 16), source=_DEFTRUTH,
        notes=(_FP16_ACC + "; 16-byte synchronous copies into 128x16 + 16x128 tiles, one buffer, "
               "dense rows; 2x4 fragments per warp (warp tile 32x64)")),
    PublicKernel(
        name="leetcuda_mma_s2", wrapper="wrap_leetcuda_mma.cuh",
        function="hgemm_mma_m16n8k16_mma2x4_warp4x4_stages_kernel",
        template_args="16, 8, 16, 2, 4, 4, 4, 0, 0, 2, true", params=_HALF3, block=(256, 1, 1),
        grid=_leetcuda_grid, config=_mma_cfg(2, "naive"), divides=(128, 128, 16), source=_LEETCUDA,
        notes=_LEETCUDA_NOTES + "; A_PAD = B_PAD = 0 (dense rows)"),
    PublicKernel(
        name="leetcuda_mma_s3_pad8", wrapper="wrap_leetcuda_mma.cuh",
        function="hgemm_mma_m16n8k16_mma2x4_warp4x4_stages_kernel",
        template_args="16, 8, 16, 2, 4, 4, 4, 8, 8, 3, true", params=_HALF3, block=(256, 1, 1),
        grid=_leetcuda_grid, config=_mma_cfg(3, "padded"), divides=(128, 128, 16), source=_LEETCUDA,
        notes=_LEETCUDA_NOTES + "; A_PAD = B_PAD = 8 halves (16 bytes per row: the padded layout)"),
    PublicKernel(
        name="leetcuda_mma_s4_pad8", wrapper="wrap_leetcuda_mma.cuh",
        function="hgemm_mma_m16n8k16_mma2x4_warp4x4_stages_kernel",
        template_args="16, 8, 16, 2, 4, 4, 4, 8, 8, 4, true", params=_HALF3, block=(256, 1, 1),
        grid=_leetcuda_grid, config=_mma_cfg(4, "padded"), divides=(128, 128, 16), source=_LEETCUDA,
        notes=_LEETCUDA_NOTES + "; A_PAD = B_PAD = 8 halves, a 4-deep ring"),
    PublicKernel(
        name="fastcu_wgmma_m2", wrapper="wrap_fastcu.cuh", function="M2::matmulKernel2",
        template_args="64, 64, 64, 64, 64, 16, 128",
        params="int, int, int, bf16*, const CUtensorMap*, const CUtensorMap*", block=(128, 1, 1),
        grid=lambda m, n, k: ((m // 64) * (n // 64), 1, 1), config=_fastcu_m2_cfg, divides=(64, 64, 64),
        dtype="bf16", accumulate="fp32", b_layout="col", c_layout="col", tensormaps="pointer",
        box=(64, 64, 64), source="pranjalssh/fast.cu examples/matmul/matmul_2.cuh",
        notes=("one warpgroup (128 threads) that both issues the TMA (thread 0) and computes; ONE "
               "shared buffer, so loads and wgmma alternate (no producer warpgroup, no ring); mapped to "
               "the one-buffer rung, stages 1 (session 16; until then the model had no such rung and this "
               "kernel was mapped to stages 2, which adds a producer warpgroup and overlaps copies with "
               "math); wait_group 0 each k-step; C column-major "
               "with 2-byte scalar stores; blocks walk N fastest (the model groups tiles along M)")),
    PublicKernel(
        name="fastcu_wgmma_m3", wrapper="wrap_fastcu_m3.cuh", function="M3::matmulKernel3",
        template_args="128, 256, 64, 256, false", params=_FASTCU_PARAMS_DB, block=(256, 1, 1),
        grid=lambda m, n, k: ((m // 128) * (n // 256), 1, 1), config=_fastcu_2wg_cfg(1, setmaxnreg=False),
        divides=(128, 256, 64),
        dtype="bf16", accumulate="fp32", b_layout="col", c_layout="col", tensormaps="pointer",
        box=(128, 256, 64), dynamic_smem_bytes=_fastcu_smem_bytes(128, 256, 64, 1), debug_pointer=True,
        source="pranjalssh/fast.cu examples/matmul/matmul_3.cuh",
        notes=("two warpgroups (256 threads, __launch_bounds__(256)), each computing 64 rows x 256 of the "
               "128x256 tile; thread 0 also issues both TMA loads; ONE shared buffer (48 KiB: nvcc makes "
               "its extern __shared__ struct STATIC, so the 48 KiB of dynamic shared memory runKernel3 "
               "still passes is unused and the block holds ~96 KiB; 159 registers x 256 threads allow one "
               "block per SM either way), so "
               "loads and wgmma alternate, with barrier waits and a __syncthreads per k-step (no producer "
               "warpgroup, no ring); mapped to the one-buffer rung, stages 1 with consumers 2 (session "
               "16; until then the model had no such rung and this kernel was mapped to stages 2, which "
               "adds a 128-thread producer warpgroup and overlaps copies with math); "
               + _FASTCU_COMMON)),
    PublicKernel(
        name="fastcu_wgmma_m4", wrapper="wrap_fastcu_m4.cuh", function="M4::matmulKernel4",
        template_args="128, 256, 64, 384, 3, false", params=_FASTCU_PARAMS_DB, block=(384, 1, 1),
        grid=lambda m, n, k: ((m // 128) * (n // 256), 1, 1), config=_fastcu_2wg_cfg(3), divides=(128, 256, 64),
        dtype="bf16", accumulate="fp32", b_layout="col", c_layout="col", tensormaps="pointer",
        box=(128, 256, 64), dynamic_smem_bytes=_fastcu_smem_bytes(128, 256, 64, 3), debug_pointer=True,
        source="pranjalssh/fast.cu examples/matmul/matmul_4.cuh",
        notes=("a producer warpgroup (thread 0 issues A and B TMA onto one full barrier per stage; "
               "setmaxnreg.dec to 24) and 2 consumer warpgroups (setmaxnreg.inc to 240) on a 3-deep ring "
               "(STAGES = 3 in runKernel4; 144 KiB dynamic): the model's knobs exactly, except that "
               "ptxas reports the __launch_bounds__(384) cap (168 per thread, with 40 bytes of spills under "
               "nvcc 13), not the 240 / 24 split after setmaxnreg, so the informed register count is the "
               "cap; each consumer "
               "arrives on empty[stage] only after wait_group 0; " + _FASTCU_COMMON)),
)

BY_NAME = {k.name: k for k in KERNELS}


def translation_unit(kernel: PublicKernel) -> str:
    """The CUDA text of one kernel: its wrapper and the explicit instantiation its host code launches."""
    return (f'#include "{kernel.wrapper}"\n'
            f"template __global__ void {kernel.function}<{kernel.template_args}>({kernel.params});\n")


class BuildError(RuntimeError):
    """nvcc is missing or rejected a translation unit (the message carries its output's tail)."""


@dataclass(frozen=True)
class Built:
    """A kernel's cubin, its mangled entry name and what ptxas reported."""

    kernel: PublicKernel
    cubin: Path
    mangled: str
    ptxas_regs: int | None


def mangled_template_args(template_args: str) -> str | None:
    """The Itanium-ABI encoding of an ``int``/``bool`` template argument list (``"128, 3, false"`` ->
    ``"ILi128ELi3ELb0EE"``); None when an argument is neither an integer literal nor true/false."""
    parts = []
    for a in (x.strip() for x in template_args.split(",")):
        if a in ("true", "false"):
            parts.append(f"Lb{int(a == 'true')}E")
        elif re.fullmatch(r"-?\d+", a):
            parts.append(f"Li{a.replace('-', 'n')}E")
        else:
            return None
    return "I" + "".join(parts) + "E"


def mangled_name(cubin: bytes, base_name: str, template_args: str = "") -> str:
    """The one entry in ``cubin`` (``.text.<name>`` sections) whose name contains ``base_name``; where
    several do (fast.cu's host code also instantiates the DBG = true kernel), the one whose mangled
    template arguments are ``template_args`` (all ``int`` or ``bool``)."""
    names = sorted({m.group(1).decode() for m in _TEXT_SECTION.finditer(cubin)})
    hits = [n for n in names if base_name in n]
    enc = mangled_template_args(template_args) if len(hits) > 1 and template_args else None
    if enc is not None:
        hits = [n for n in hits if base_name + enc in n]
    if len(hits) != 1:
        raise BuildError(f"{base_name}: expected one entry containing it in the cubin, found {hits} among {names}")
    return hits[0]


def _ptxas_regs(log: str) -> dict[str, int]:
    """Registers per entry function from ``ptxas -v`` (the 'Used N registers' after each entry)."""
    out: dict[str, int] = {}
    current = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = m.group(1)
            continue
        u = _USED.search(line)
        if u and current is not None:
            out[current] = int(u.group(1))
            current = None
    return out


def compile_all(out_dir: str | Path, kernels=KERNELS) -> dict[str, Built]:
    """Write each kernel's translation unit to ``out_dir`` and build every cubin with one nvcc call."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise BuildError("nvcc is not on the PATH")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    units = []
    for k in kernels:
        p = out / f"{k.name}.cu"
        p.write_text(translation_unit(k))
        units.append(p)
    cmd = [nvcc, *NVCC_OPTIONS, "-odir", str(out), *map(str, units)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=NVCC_TIMEOUT_S)
    log = r.stdout + r.stderr
    if r.returncode != 0:
        raise BuildError(f"nvcc failed ({' '.join(cmd)}): {log.strip()[-4000:]}")
    regs = _ptxas_regs(log)
    built = {}
    for k, unit in zip(kernels, units, strict=True):
        cubin = unit.with_suffix(".cubin")
        name = mangled_name(cubin.read_bytes(), k.base_name, k.template_args)
        built[k.name] = Built(kernel=k, cubin=cubin, mangled=name, ptxas_regs=regs.get(name))
    return built


def problem_flops(m: int, n: int, k: int) -> float:
    return 2.0 * m * n * k


def fp16_accumulation_tolerance(k: int) -> float:
    """rel_err tolerance of an fp16 output accumulated in fp16 over depth ``k``.

    With standard-normal inputs the partial sum after j k16-steps has RMS sqrt(16 j); each
    instruction rounds it to fp16 (relative RMS error ~2^-11 / sqrt(3) ~ 2.8e-4), so the error's
    variance sums to (2.8e-4)^2 * 16 * n^2 / 2 over n = k/16 steps: RMS ~2.8e-4 * sqrt(8) * k / 16,
    against |ref| ~ sqrt(k): relative ~2.8e-4 * sqrt(k / 32). 4x that: 5e-3 at k = 2048, 1.8e-2 at
    k = 8192; a lost k-tile or a wrong index gives 0.3 and more."""
    return max(1.5e-3, 4 * 2.8e-4 * math.sqrt(k / 32))


#: rel_err tolerance of an fp32-accumulated output stored in the input type (the family runner's
#: REL_TOL for fp16 and bf16 outputs)
FP32_ACC_TOLERANCE = {"fp16": 1.5e-3, "bf16": 1.2e-2}


def tolerance(kernel: PublicKernel, k: int) -> float:
    if kernel.accumulate == "fp16":
        return max(fp16_accumulation_tolerance(k), FP32_ACC_TOLERANCE[kernel.dtype])
    return FP32_ACC_TOLERANCE[kernel.dtype]
