"""The wmma and mma_sync kernels of the tc_gemm family: source, launch geometry, build (rungs 1-4).

``kernel_source(cfg)`` (pure, no GPU) is ``tc_gemm.cu`` plus one ``extern "C"`` kernel named after
the knobs that shape it (:func:`kernel_name`, e.g.
``tcg_mma_fp16_of32_Bcol_128x256x32_w64x64_swz_s4_direct``) whose body instantiates
``tcg::global_gemm`` (staging "global") or ``tcg::shared_gemm`` (staging "shared"). Its parameters are
``(const void* A, const void* B, void* C, int M, int N, int K)``; grid ``(ceil(N/bn), ceil(M/bm))``,
``(bm/wm)*(bn/wn)`` warps a block (:func:`launch_geometry`).

Shared memory (:func:`dynamic_smem_bytes`, all dynamic, for staging "shared"): the operand ring
``stages * (A tile + B tile)`` (rows padded by 16 bytes with layout "padded"), or, when larger, what
the epilogue reuses it for: a shared epilogue stages the C tile in fp32 with a row pitch of
``bn + 8`` floats (``bm * (bn + 8) * 4`` bytes, whatever out_dtype is); a WMMA direct epilogue needs
a 16 x 16 fp32 scratch per warp (1 KiB each) for edge fragments and 16-bit output. Staging "global"
uses only static shared memory: a 2 KiB scratch per warp (edge A and B fragments, one C fragment).

``build(cfg, a, b, c)`` compiles with CuPy (NVRTC; modules cached by source) and returns a
:class:`Built`: ``launch()`` (asynchronous, no allocation), ``kernel_names`` (the ``extern "C"``
name, as Nsight Compute prints it) and ``attributes``. ``Built`` is the backend interface the
wgmma kernels (``wgmma.py``) implement too.

What this module rejects with ``ValueError`` beyond :class:`TcGemmConfig`'s own rules: a
non-default instruction shape (only wmma 16x16x16 / 16x16x8 tf32 and mma.sync m16n8k16 / m16n8k8
tf32 are written), wmma with the swizzled layout (``wmma.load`` reads strided matrices only),
mma_sync with ``wn`` not a multiple of 16 (B fragments come in pairs from one ``ldmatrix.x4``),
swizzled rows whose 16-byte chunk count is not a power of two, and dynamic shared memory above the
H200's 227 KiB opt-in limit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilesim.kernels.tc_gemm.config import TcGemmConfig
from validation.harness.source import KernelSource

KERNEL_FILE = Path(__file__).with_name("tc_gemm.cu")
OPTIONS: tuple[str, ...] = ("-std=c++17", "-lineinfo")
PARAMS = "const void* __restrict__ A, const void* __restrict__ B, void* __restrict__ C, int M, int N, int K"
WARP = 32
#: the codes of tc_gemm.cu's namespace tcg
DTYPE_CODES = {"fp16": "tcg::FP16", "bf16": "tcg::BF16", "tf32": "tcg::TF32"}
OUT_CODES = {"fp32": "tcg::OUT_F32", "input": "tcg::OUT_INPUT"}
INSTR_CODES = {"wmma": "tcg::WMMA", "mma_sync": "tcg::MMA_SYNC"}
LAYOUT_CODES = {"naive": "tcg::NAIVE", "padded": "tcg::PADDED", "swizzled": "tcg::SWIZZLED"}
EPI_CODES = {"direct": "tcg::EPI_DIRECT", "shared": "tcg::EPI_SHARED"}
#: the instruction shapes written in tc_gemm.cu: (instruction, dtype) -> (m, n, k)
WRITTEN_SHAPES = {("wmma", "fp16"): (16, 16, 16), ("wmma", "bf16"): (16, 16, 16), ("wmma", "tf32"): (16, 16, 8),
                  ("mma_sync", "fp16"): (16, 8, 16), ("mma_sync", "bf16"): (16, 8, 16),
                  ("mma_sync", "tf32"): (16, 8, 8)}
CHUNK_BYTES = 16  # one cp.async / ldmatrix row / swizzle unit
C_PAD_FLOATS = 8  # tcg::C_PAD_FLOATS: the staged C tile's row pad
WMMA_SCRATCH_BYTES = 16 * 16 * 4  # a 16 x 16 fp32 accumulator fragment
GLOBAL_SCRATCH_BYTES = 2048  # per warp, staging "global": edge A (512 B), edge B (512 B), C (1 KiB)
#: H100/H200 shared memory per block with opt-in (CUDA C++ Programming Guide, "Compute capability 9.0":
#: 227 KB); larger launches fail, so such configurations are rejected before compiling
SMEM_OPTIN_LIMIT_BYTES = 227 * 1024
DEFAULT_SMEM_LIMIT_BYTES = 48 * 1024  # above this, dynamic shared memory must be opted into

_MODULES: dict[tuple[str, tuple[str, ...]], Any] = {}  # (code, options) -> cupy.RawModule


@dataclass(eq=False)
class Built:
    """A compiled configuration bound to its arrays (the backend interface of mma.py and wgmma.py).

    ``launch()`` runs the whole GEMM once, asynchronously on the current stream, allocating nothing;
    ``kernel_names`` are the lowered names of the kernels it launches (as Nsight Compute prints them);
    ``attributes`` holds ``regs_per_thread``, ``static_smem_bytes``, ``local_bytes`` (the maximum over
    the kernels) and ``dynamic_smem_bytes``."""

    launch: Callable[[], None] = field(repr=False)
    kernel_names: tuple[str, ...]
    attributes: dict


@dataclass(frozen=True)
class LaunchGeometry:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem_bytes: int


def _require(cond: bool, name: str, value, rule: str) -> None:
    if not cond:
        raise ValueError(f"TcGemmConfig.{name} = {value!r}: {rule}")


def _pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


def validate(cfg: TcGemmConfig) -> None:
    """Raise ``ValueError`` for configurations tc_gemm.cu does not implement (see the module docstring)."""
    if not isinstance(cfg, TcGemmConfig):
        raise ValueError(f"cfg must be a TcGemmConfig, got {type(cfg).__name__}")
    _require(cfg.instruction in INSTR_CODES, "instruction", cfg.instruction,
             "mma.py builds wmma and mma_sync (wgmma: wgmma.py)")
    want = WRITTEN_SHAPES[(cfg.instruction, cfg.dtype)]
    _require(cfg.shape == "auto" or tuple(cfg.mma_shape) == want, "shape", cfg.shape,
             f"the {cfg.instruction} kernels implement only {'x'.join(map(str, want))} for {cfg.dtype} ('auto')")
    _require(cfg.wm % 16 == 0, "wm", cfg.wm, "must be a multiple of 16")
    _require(cfg.wn % 16 == 0, "wn", cfg.wn, "must be a multiple of 16 (mma_sync: B fragments in pairs "
                                             "from one ldmatrix.x4; wmma: the fragment's n)")
    if cfg.staging == "global":
        return
    e = cfg.elem_bytes
    ce = CHUNK_BYTES // e
    _require(cfg.bk % (2 * ce) == 0, "bk", cfg.bk, f"must be a multiple of {2 * ce} ({cfg.dtype}: whole fragment k steps)")
    if cfg.layout == "swizzled":
        _require(cfg.instruction == "mma_sync", "layout", cfg.layout,
                 "wmma cannot read the swizzled layout (wmma.load reads strided matrices): use naive or padded")
        (_, ca), (_, cb) = cfg.smem_tile_shapes
        _require(_pow2(ca // ce), "bk", cfg.bk, f"swizzled rows need a power-of-two number of 16-byte chunks "
                                                f"({ca // ce})")
        _require(_pow2(cb // ce), "bn" if cfg.b_layout == "row" else "bk", cb,
                 f"swizzled rows need a power-of-two number of 16-byte chunks ({cb // ce})")
    smem = dynamic_smem_bytes(cfg)
    _require(smem <= SMEM_OPTIN_LIMIT_BYTES, "smem_bytes", smem,
             f"the kernel needs {smem} B of dynamic shared memory; the H200 allows {SMEM_OPTIN_LIMIT_BYTES}")


def stage_bytes(cfg: TcGemmConfig) -> int:
    """One ring slot: the A tile and the B tile in their layout (rows padded by 16 B when "padded")."""
    (ra, ca), (rb, cb) = cfg.smem_tile_shapes
    pad = CHUNK_BYTES if cfg.layout == "padded" else 0
    e = cfg.elem_bytes
    return ra * (ca * e + pad) + rb * (cb * e + pad)


def dynamic_smem_bytes(cfg: TcGemmConfig) -> int:
    """Dynamic shared memory of the kernel (see the module docstring); 0 for staging "global"."""
    if cfg.staging == "global":
        return 0
    need = cfg.stages * stage_bytes(cfg)
    if cfg.epilogue == "shared":
        need = max(need, cfg.bm * (cfg.bn + C_PAD_FLOATS) * 4)
    elif cfg.instruction == "wmma":
        need = max(need, cfg.warps * WMMA_SCRATCH_BYTES)
    return need


def static_smem_bytes(cfg: TcGemmConfig) -> int:
    """Static shared memory of the kernel (the per-warp scratch of staging "global")."""
    return cfg.warps * GLOBAL_SCRATCH_BYTES if cfg.staging == "global" else 0


def launch_geometry(cfg: TcGemmConfig) -> LaunchGeometry:
    return LaunchGeometry(grid=(math.ceil(cfg.n / cfg.bn), math.ceil(cfg.m / cfg.bm), 1),
                          block=(cfg.warps * WARP, 1, 1), dynamic_smem_bytes=dynamic_smem_bytes(cfg))


def kernel_name(cfg: TcGemmConfig) -> str:
    """The unique ``extern "C"`` name of ``cfg``'s kernel (the knobs that change the code only)."""
    validate(cfg)
    ins = "wmma" if cfg.instruction == "wmma" else "mma"
    out = "of32" if cfg.out_dtype == "fp32" or cfg.dtype == "tf32" else "oin"
    head = f"tcg_{ins}_{cfg.dtype}_{out}_B{cfg.b_layout}"
    if cfg.staging == "global":
        return f"{head}_global_{cfg.bm}x{cfg.bn}_w{cfg.wm}x{cfg.wn}"
    lay = {"naive": "dense", "padded": "pad", "swizzled": "swz"}[cfg.layout]
    return (f"{head}_{cfg.bm}x{cfg.bn}x{cfg.bk}_w{cfg.wm}x{cfg.wn}_{lay}_s{cfg.stages}_{cfg.epilogue}")


def instantiation(cfg: TcGemmConfig) -> str:
    """The ``extern "C"`` kernel of ``cfg`` (appended to tc_gemm.cu)."""
    name = kernel_name(cfg)
    threads = cfg.warps * WARP
    dt, out = DTYPE_CODES[cfg.dtype], OUT_CODES[cfg.out_dtype]
    bcol = "true" if cfg.b_layout == "col" else "false"
    if cfg.staging == "global":
        body = f"tcg::global_gemm<{dt}, {out}, {bcol}, {cfg.bm}, {cfg.bn}, {cfg.wm}, {cfg.wn}>(A, B, C, M, N, K);"
    else:
        body = (f"tcg::shared_gemm<{dt}, {out}, {bcol}, {INSTR_CODES[cfg.instruction]}, {cfg.bm}, {cfg.bn}, "
                f"{cfg.bk}, {cfg.wm}, {cfg.wn}, {LAYOUT_CODES[cfg.layout]}, {cfg.stages}, "
                f"{EPI_CODES[cfg.epilogue]}>(A, B, C, M, N, K);")
    return f'extern "C" __global__ void __launch_bounds__({threads}) {name}({PARAMS}) {{\n  {body}\n}}\n'


def base_source() -> str:
    """tc_gemm.cu without any kernel."""
    return KERNEL_FILE.read_text()


def batch_source(cfgs) -> str:
    """One translation unit with the kernels of all ``cfgs`` (each distinct kernel once)."""
    seen: dict[str, str] = {}
    for c in cfgs:
        seen.setdefault(kernel_name(c), instantiation(c))
    return base_source() + "\n" + "".join(seen.values())


def kernel_source(cfg: TcGemmConfig, parts: bool = False) -> KernelSource:
    """The CUDA source of one configuration (no GPU needed); ``parts``: with tc_gemm.cu's TC_PARTS (the
    cp.async ring's k-loop cycles by part in the ``tc_parts`` buffer, validation/studies/tc_step_parts.py)."""
    code = batch_source([cfg])
    return KernelSource(code=("#define TC_PARTS 1\n" + code) if parts else code, options=OPTIONS,
                        name_expressions=(kernel_name(cfg),))


def compile_kernel(cfg: TcGemmConfig):
    """The ``cupy.RawKernel`` of ``cfg`` (modules cached by source), with its dynamic shared memory
    opted into when above 48 KiB."""
    import cupy

    src = kernel_source(cfg)
    key = (src.code, src.options)
    module = _MODULES.get(key)
    if module is None:
        module = cupy.RawModule(code=src.code, options=src.options, name_expressions=src.name_expressions)
        _MODULES[key] = module
    kernel = module.get_function(src.name_expressions[0])
    smem = dynamic_smem_bytes(cfg)
    if smem + static_smem_bytes(cfg) > DEFAULT_SMEM_LIMIT_BYTES:
        kernel.max_dynamic_shared_size_bytes = smem
    return kernel


def build(cfg: TcGemmConfig, a, b, c) -> Built:
    """Compile ``cfg`` and bind it to the device arrays ``a`` (M x K), ``b`` (K x N, or N x K for
    b_layout "col") and ``c`` (M x N): a :class:`Built`."""
    import numpy as np

    validate(cfg)
    kernel = compile_kernel(cfg)
    g = launch_geometry(cfg)
    args = (a, b, c, np.int32(cfg.m), np.int32(cfg.n), np.int32(cfg.k))
    at = kernel.attributes
    attributes = {"regs_per_thread": int(at["num_regs"]), "static_smem_bytes": int(at["shared_size_bytes"]),
                  "local_bytes": int(at["local_size_bytes"]), "dynamic_smem_bytes": g.dynamic_smem_bytes}

    def launch() -> None:
        kernel(g.grid, g.block, args, shared_mem=g.dynamic_smem_bytes)

    return Built(launch=launch, kernel_names=(kernel_name(cfg),), attributes=attributes)
