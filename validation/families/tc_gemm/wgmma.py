"""Rung 5 of the tensor-core GEMM ladder: Hopper kernels (``instruction="wgmma"``) built from
``wgmma.cu``.

``kernel_source(cfg)`` writes one translation unit per configuration: the ``#define TC_*`` constants
of the tiling, the ``wgmma.mma_async`` wrapper of its instruction shape (m64nNk16 for fp16/bf16,
m64nNk8 for tf32; the B-transpose bit for 16-bit ``b_layout="row"``), then ``wgmma.cu`` (TMA into
128-byte-swizzled shared memory, mbarrier full/empty rings, one producer warpgroup that gives its
registers away with ``setmaxnreg``, 1-2 consumer warpgroups, clusters of 2 along M with the B tile
multicast). The kernel is ``extern "C"`` and named after the configuration (:func:`kernel_name`);
shapes are runtime arguments, so every problem size of one tiling shares the module.

``stages=1`` is the rung below the ring: one shared buffer and no producer warpgroup (``consumers x 128``
threads, no ``setmaxnreg``, no cluster). Thread 0 arms the buffer's mbarrier and issues the k-tile's TMA
copies, every thread waits for the barrier, each warpgroup issues its wgmmas and waits for them
(``wait_group 0``), and the block passes ``__syncthreads`` before the next copy. Its source is
``wgmma.cu`` with the ring kernel replaced by the one-buffer kernel at the end of the file (the ring
configurations' sources stop before it, so they are what they were).

``build(cfg, a, b, c)`` compiles with CuPy (NVRTC, ``-arch=sm_90a``: NVRTC keeps the ``a`` target
when CuPy appends its own ``-arch=sm_90``), encodes the two tensor maps (:mod:`.tma`) for the given
arrays and returns a ``Built`` whose ``launch()`` runs C = A @ B once, asynchronously. The tensor
maps travel as ``const __grid_constant__`` kernel parameters (``tensormap="param"``, the default:
CuPy passes NumPy structured scalars by value) or in ``__constant__`` memory
(``tensormap="constant"``: copied before the first launch and again whenever another ``Built`` of the
same module copied its own).

Tiles run in groups of :func:`group_m` tiles along M before moving along N (L2 reuse); the grid is
one-dimensional, ceil(M / bm) rounded up to whole clusters times ceil(N / bn) blocks. Dynamic
shared memory is the ring (or the shared epilogue's padded C tile, if larger) plus 1024 bytes to
align the swizzled tiles; the mbarriers are static shared memory.

CuPy is imported lazily: this module imports and generates sources on machines without a GPU.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilesim.kernels.gemm.config import launch_bound_regs
from tilesim.kernels.tc_gemm.config import WGMMA_ACCUMULATOR_HEADROOM_REGS, WGMMA_CONSUMER_REGS
from validation.families.tc_gemm import tma
from validation.harness.source import KernelSource

KERNEL_FILE = Path(__file__).parent / "wgmma.cu"
ARCH = "sm_90a"  # wgmma and setmaxnreg need the architecture-specific target (PTX ISA: sm_90a)
#: NVRTC options as cupy.RawModule takes them; nvcc takes them too (the last -arch wins there)
OPTIONS: tuple[str, ...] = ("-std=c++17", f"-arch={ARCH}")
TENSORMAP_MODES = ("param", "constant")
ELEM_BYTES = {"fp16": 2, "bf16": 2, "tf32": 4}
PTX_TYPE = {"fp16": "f16", "bf16": "bf16", "tf32": "tf32"}
WGMMA_M = 64
WGMMA_K = {"fp16": 16, "bf16": 16, "tf32": 8}
WGMMA_N_MAX = 256
SWIZZLE_ROW_BYTES = 128     # one 128-byte swizzle row: the TMA box's inner extent
SWIZZLE_ATOM_BYTES = 1024   # 8 swizzle rows: the alignment of every swizzled tile (base slack added)
MN_MAJOR_ATOM = 64          # 16-bit elements in one 128-byte row of an N-major (b_layout row) B tile
MAX_SMEM_PER_BLOCK_BYTES = 227 * 1024  # sm_90 opt-in shared memory per block (CUDA guide, compute 9.0)
#: static shared memory of the kernels: the mbarriers, placed before the 1024-aligned dynamic array
#: (ptxas reports 1024 bytes)
STATIC_SMEM_BYTES = 1024
DEFAULT_SMEM_LIMIT_BYTES = 48 * 1024  # above this the kernel must opt in (max_dynamic_shared_size_bytes)
PRODUCER_REGS = 40  # setmaxnreg.dec in wgmma.cu; the consumers' .inc is the model's WGMMA_CONSUMER_REGS
CONSUMER_REGS = WGMMA_CONSUMER_REGS
#: registers the consumer code may use after setmaxnreg.inc, less what addressing needs: the cap on
#: accumulators per thread (wm / 64 * bn / 2), which the model's configuration checks too
MAX_ACCUMULATORS = WGMMA_CONSUMER_REGS - WGMMA_ACCUMULATOR_HEADROOM_REGS
# (the tile order, GROUP_M, is TcGemmConfig.group_rows)

_MODULES: dict[tuple[str, tuple[str, ...], str], Any] = {}
_CONSTANT_OWNER: dict[int, int] = {}  # id(module) -> id of the Built whose tensor maps are in it


@dataclass(frozen=True)
class Geometry:
    """Launch geometry of one configuration."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem_bytes: int


def _field(cfg, name: str):
    try:
        return getattr(cfg, name)
    except AttributeError:
        raise ValueError(f"cfg has no field {name!r}: expected a TcGemmConfig") from None


def instruction_n(cfg) -> int:
    """N of the wgmma instruction: the shape's n, or bn for ``shape="auto"``."""
    shape = _field(cfg, "shape")
    if shape == "auto":
        return int(cfg.bn)
    from tilesim.kernels.tc_gemm.config import parse_shape

    return parse_shape(shape)[1]


def check(cfg) -> None:
    """Raise ``ValueError`` (field, value, limit) for what ``wgmma.cu`` does not implement."""
    if _field(cfg, "instruction") != "wgmma":
        raise ValueError(f"TcGemmConfig.instruction = {cfg.instruction!r}: wgmma.py builds 'wgmma' only")
    dt = _field(cfg, "dtype")
    if dt not in ELEM_BYTES:
        raise ValueError(f"TcGemmConfig.dtype = {dt!r}: must be one of {sorted(ELEM_BYTES)}")
    e = ELEM_BYTES[dt]
    row = SWIZZLE_ROW_BYTES // e
    if cfg.layout != "swizzled" or cfg.staging != "shared":
        raise ValueError(f"TcGemmConfig.layout = {cfg.layout!r}, staging = {cfg.staging!r}: wgmma needs "
                         "'swizzled' and 'shared'")
    if cfg.consumers not in (1, 2):
        raise ValueError(f"TcGemmConfig.consumers = {cfg.consumers}: must be 1 or 2")
    if cfg.cluster not in (1, 2):
        raise ValueError(f"TcGemmConfig.cluster = {cfg.cluster}: wgmma.cu implements 1 or 2")
    if not 1 <= cfg.stages <= 5:
        raise ValueError(f"TcGemmConfig.stages = {cfg.stages}: must be 1 (one buffer) or 2..5 (TMA ring)")
    if cfg.stages == 1 and cfg.setmaxnreg:
        raise ValueError("TcGemmConfig.setmaxnreg = True: must be False with stages = 1 (the one-buffer kernel "
                         "has no producer warpgroup)")
    if cfg.stages == 1 and cfg.cluster != 1:
        raise ValueError(f"TcGemmConfig.cluster = {cfg.cluster}: must be 1 with stages = 1 (the one-buffer "
                         "kernel has no multicast)")
    if cfg.wm % WGMMA_M or cfg.bm != cfg.consumers * cfg.wm or cfg.wn != cfg.bn:
        raise ValueError(f"TcGemmConfig.wm = {cfg.wm}, wn = {cfg.wn}: wm a multiple of {WGMMA_M}, "
                         f"bm = consumers * wm ({cfg.consumers * cfg.wm}), wn = bn ({cfg.bn})")
    if cfg.bm > 256:
        raise ValueError(f"TcGemmConfig.bm = {cfg.bm}: must be <= 256 (one TMA box)")
    if cfg.bk % row:
        raise ValueError(f"TcGemmConfig.bk = {cfg.bk}: must be a multiple of {row} ({dt}: one 128-byte "
                         "swizzle row)")
    ni = instruction_n(cfg)
    if ni % 8 or not 8 <= ni <= WGMMA_N_MAX or cfg.bn % ni:
        raise ValueError(f"TcGemmConfig.shape = {cfg.shape!r}: its n = {ni} must be a multiple of 8 up to "
                         f"{WGMMA_N_MAX} dividing bn = {cfg.bn}")
    if cfg.bn > 256:
        raise ValueError(f"TcGemmConfig.bn = {cfg.bn}: must be <= 256 (one TMA box, wgmma n <= 256)")
    if cfg.b_layout == "row":
        if e != 2:
            raise ValueError(f"TcGemmConfig.b_layout = 'row' with dtype = {dt!r}: wgmma transposes 16-bit "
                             "operands only; tf32 needs b_layout 'col'")
        if ni % MN_MAJOR_ATOM:
            raise ValueError(f"TcGemmConfig.bn / shape n = {ni} with b_layout 'row': must be a multiple of "
                             f"{MN_MAJOR_ATOM} (one 128-byte N-major swizzle row)")
    acc = cfg.wm // WGMMA_M * cfg.bn // 2
    # without setmaxnreg the consumers keep the launch bound's share, less the same addressing headroom
    nthreads = block_threads(cfg)
    limit = MAX_ACCUMULATORS if cfg.setmaxnreg else launch_bound_regs(nthreads) - (CONSUMER_REGS - MAX_ACCUMULATORS)
    if acc > limit:
        how = (f"setmaxnreg gives consumers {CONSUMER_REGS} registers" if cfg.setmaxnreg else
               f"without setmaxnreg a thread keeps {launch_bound_regs(nthreads)} at {nthreads} threads")
        raise ValueError(f"TcGemmConfig.wm x bn = {cfg.wm} x {cfg.bn}: {acc} fp32 accumulators per consumer "
                         f"thread exceed {limit} ({how})")
    g = geometry(cfg)
    if g.dynamic_smem_bytes + STATIC_SMEM_BYTES > MAX_SMEM_PER_BLOCK_BYTES:
        raise ValueError(f"TcGemmConfig.stages = {cfg.stages}: {g.dynamic_smem_bytes} bytes of dynamic and "
                         f"{STATIC_SMEM_BYTES} of static shared memory exceed {MAX_SMEM_PER_BLOCK_BYTES} "
                         "(sm_90 opt-in limit per block)")


def block_threads(cfg) -> int:
    """Threads per block: the consumer warpgroups, and the producer warpgroup beside a ring (stages >= 2)."""
    return (cfg.consumers + (1 if cfg.stages > 1 else 0)) * 128


def group_m(cfg) -> int:
    """Tiles along M per group of the tile order (even, so that cluster pairs share their N tile)."""
    return cfg.group_rows  # the model's tile order (tilesim.kernels.tc_gemm.config), one source


def out_bytes(cfg) -> int:
    return 4 if cfg.out_dtype == "fp32" else ELEM_BYTES[cfg.dtype]


def ring_bytes(cfg) -> int:
    e = ELEM_BYTES[cfg.dtype]
    return cfg.stages * (cfg.bm + cfg.bn) * cfg.bk * e


def epilogue_tile_bytes(cfg) -> int:
    """The shared epilogue's staged C tile: bm rows of bn outputs plus a pad (32 B for fp32, 16 B for
    16-bit outputs) that spreads the fragment stores of 8 rows over the banks."""
    ob = out_bytes(cfg)
    return cfg.bm * (cfg.bn * ob + (32 if ob == 4 else 16))


def geometry(cfg) -> Geometry:
    tiles_m = math.ceil(cfg.m / cfg.bm)
    tiles_m = math.ceil(tiles_m / cfg.cluster) * cfg.cluster
    tiles_n = math.ceil(cfg.n / cfg.bn)
    smem = ring_bytes(cfg)
    if cfg.epilogue == "shared":
        smem = max(smem, epilogue_tile_bytes(cfg))
    return Geometry(grid=(tiles_m * tiles_n, 1, 1), block=(block_threads(cfg), 1, 1),
                    dynamic_smem_bytes=smem + SWIZZLE_ATOM_BYTES)


def kernel_name(cfg, tensormap: str = "param") -> str:
    """``extern "C"`` name of the configuration's kernel (the knobs, not the problem size)."""
    out = "o32" if cfg.out_dtype == "fp32" else "oin"
    shape = "" if cfg.shape == "auto" else f"_n{instruction_n(cfg)}"
    name = (f"tc_wgmma_{cfg.dtype}_{out}_B{cfg.b_layout}_{cfg.bm}x{cfg.bn}x{cfg.bk}{shape}_s{cfg.stages}"
            f"_c{cfg.consumers}_cl{cfg.cluster}_{cfg.epilogue}")
    return name + ("" if cfg.setmaxnreg else "_nosetmaxnreg") + ("_cmap" if tensormap == "constant" else "")


def wgmma_wrapper(dtype: str, n: int, trans_b: bool) -> str:
    """``wgmma_tile(float* d, u64 desc_a, u64 desc_b)``: one ``wgmma.mma_async`` m64n{n}k{16|8} with
    fp32 accumulators d[0 .. n/2 - 1] (scale-d 1: accumulate)."""
    k = WGMMA_K[dtype]
    t = PTX_TYPE[dtype]
    regs = n // 2
    dlist = ", ".join(f"%{i}" for i in range(regs))
    if dtype == "tf32":  # no transpose operands for 32-bit types
        tail = f"%{regs}, %{regs + 1}, 1, 1, 1"
    else:
        tail = f"%{regs}, %{regs + 1}, 1, 1, 1, 0, {1 if trans_b else 0}"
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    return (
        "__device__ __forceinline__ void wgmma_tile(float* d, u64 desc_a, u64 desc_b) {\n"
        "    asm volatile(\n"
        f'        "wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{t}.{t} "\n'
        f'        "{{{dlist}}}, {tail};"\n'
        f"        : {outs}\n"
        '        : "l"(desc_a), "l"(desc_b));\n'
        "}\n")


def _defines(cfg, tensormap: str, trace: bool = False) -> str:
    e = ELEM_BYTES[cfg.dtype]
    vals = {
        "TC_KERNEL_NAME": kernel_name(cfg, tensormap),
        "TC_ELEM_BYTES": e, "TC_OUT_BYTES": out_bytes(cfg),
        "TC_DTYPE_BF16": int(cfg.dtype == "bf16"),
        "TC_B_KMAJOR": int(cfg.b_layout == "col"),
        "TC_BM": cfg.bm, "TC_BN": cfg.bn, "TC_BK": cfg.bk, "TC_WM": cfg.wm, "TC_NI": instruction_n(cfg),
        "TC_STAGES": cfg.stages, "TC_CONSUMERS": cfg.consumers, "TC_CLUSTER": cfg.cluster,
        "TC_EPILOGUE_SHARED": int(cfg.epilogue == "shared"),
        "TC_TMAP_CONSTANT": int(tensormap == "constant"),
        "TC_GROUP_M": group_m(cfg),
        "TC_SETMAXNREG": int(cfg.setmaxnreg),
        "TC_TRACE": int(trace),
    }
    return "".join(f"#define {k} {v}\n" for k, v in vals.items())


_UNDEFS = ("TC_KERNEL_NAME", "TC_ELEM_BYTES", "TC_OUT_BYTES", "TC_DTYPE_BF16", "TC_B_KMAJOR", "TC_BM", "TC_BN",
           "TC_BK", "TC_WM", "TC_NI", "TC_STAGES", "TC_CONSUMERS", "TC_CLUSTER", "TC_EPILOGUE_SHARED",
           "TC_TMAP_CONSTANT", "TC_GROUP_M", "TC_SETMAXNREG", "TC_TRACE", "TMAP_A", "TMAP_B", "TMAP_PARAMS")
_MARKER = "// ----- PTX helpers"
#: where the one-buffer kernel (stages = 1) begins in wgmma.cu, and the ring kernel's first line
_ONE_BUFFER_MARKER = "// ===== the one-buffer kernel (TC_STAGES == 1)"
_RING_KERNEL_START = 'extern "C" __global__ void __launch_bounds__(THREADS, 1)\n'


def kernel_source(cfg, tensormap: str = "param", trace: bool = False) -> KernelSource:
    """The whole translation unit of ``cfg`` (no GPU, no compilation); ``trace``: with the schedule
    trace (wgmma.cu's TC_TRACE: the producer's time at each k-tile, with stages 1 thread 0's, in the
    ``tc_trace`` buffer); ``trace=2``: the k-loop's cycles by part instead (ring kernels only, wgmma.cu's
    TC_TRACE 2, validation/studies/tc_step_parts.py)."""
    if tensormap not in TENSORMAP_MODES:
        raise ValueError(f"tensormap = {tensormap!r}: must be one of {TENSORMAP_MODES}")
    if int(trace) not in (0, 1, 2):
        raise ValueError(f"trace = {trace!r}: must be 0 (none), 1 (schedule stamps) or 2 (k-loop parts)")
    if int(trace) == 2 and cfg.stages < 2:
        raise ValueError(f"trace = 2: the k-loop parts are recorded by the ring kernel only (stages >= 2), "
                         f"got stages = {cfg.stages}")
    check(cfg)
    body = KERNEL_FILE.read_text()
    for marker in (_MARKER, _ONE_BUFFER_MARKER, _RING_KERNEL_START):
        if body.count(marker) != 1:
            raise RuntimeError(f"{KERNEL_FILE.name}: marker {marker!r} missing or repeated")
    ring, one_buffer = body.split(_ONE_BUFFER_MARKER, 1)
    # a ring's source is the file up to the one-buffer kernel; stages 1: the ring kernel left out
    body = ring if cfg.stages > 1 else ring.split(_RING_KERNEL_START, 1)[0] + _ONE_BUFFER_MARKER + one_buffer
    head, tail = body.split(_MARKER, 1)
    wrapper = wgmma_wrapper(cfg.dtype, instruction_n(cfg), cfg.b_layout == "row")
    code = f"// configuration\n{_defines(cfg, tensormap, trace)}\n{head}{wrapper}\n{_MARKER}{tail}"
    return KernelSource(code=code, options=OPTIONS, name_expressions=(kernel_name(cfg, tensormap),))


def batch_source(cfgs, tensormap: str = "param", prefix: str = "ns") -> tuple[str, tuple[str, ...]]:
    """(one translation unit with every distinct kernel of ``cfgs``, their names), for offline nvcc
    checks: each configuration's unit in its own namespace ``<prefix>_<i>`` (the kernels stay
    ``extern "C"``), its macros undefined after it."""
    parts, names = [], []
    for cfg in cfgs:
        src = kernel_source(cfg, tensormap)
        name = src.name_expressions[0]
        if name in names:
            continue
        lines = src.code.splitlines(keepends=True)
        defines = "".join(ln for ln in lines if ln.startswith("#define TC_"))
        rest = "".join(ln for ln in lines if not ln.startswith("#define TC_"))
        undefs = "".join(f"#undef {u}\n" for u in _UNDEFS)
        parts.append(f"{defines}namespace {prefix}_{len(names)} {{\n{rest}}}\n{undefs}")
        names.append(name)
    return "".join(parts), tuple(names)


# ----- building and launching (CuPy) --------------------------------------------------------------------
def _built_class():
    try:
        from validation.families.tc_gemm.mma import Built  # helper A's dataclass
        return Built
    except ImportError:
        return _FallbackBuilt


@dataclass(frozen=True, eq=False)
class _FallbackBuilt:
    """Stand-in for ``validation.families.tc_gemm.mma.Built`` while that module is absent."""

    launch: Any
    kernel_names: tuple[str, ...]
    attributes: dict


def _compile_nvcc(code: str, name: str):
    import cupy

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise RuntimeError("compiler='nvcc': nvcc is not on the PATH")
    tmp = Path(tempfile.mkdtemp(prefix="tc_wgmma_"))
    (tmp / "k.cu").write_text(code)
    r = subprocess.run([nvcc, "-cubin", *OPTIONS, "-o", str(tmp / "k.cubin"), str(tmp / "k.cu")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"nvcc failed on {name}: {(r.stderr + r.stdout).strip()[-3000:]}")
    return cupy.RawModule(path=str(tmp / "k.cubin"))


def compile_module(cfg, tensormap: str = "param", compiler: str = "nvrtc", trace: bool = False):
    """(module, kernel, source) of ``cfg``, cached per source; ``compiler`` "nvrtc" (CuPy) or "nvcc"
    (offline cubin loaded by CuPy); ``trace``: see :func:`kernel_source`."""
    import cupy

    src = kernel_source(cfg, tensormap, trace)
    name = src.name_expressions[0]
    key = (src.code, src.options, compiler)
    mod = _MODULES.get(key)
    if mod is None:
        if compiler == "nvrtc":
            mod = cupy.RawModule(code=src.code, options=src.options)
        elif compiler == "nvcc":
            mod = _compile_nvcc(src.code, name)
        else:
            raise ValueError(f"compiler = {compiler!r}: must be 'nvrtc' or 'nvcc'")
        _MODULES[key] = mod
    kernel = mod.get_function(name)
    return mod, kernel, src


def _check_arrays(cfg, a, b, c) -> None:
    import cupy

    storage = {"fp16": cupy.float16, "bf16": cupy.uint16, "tf32": cupy.float32}[cfg.dtype]
    out = cupy.float32 if cfg.out_dtype == "fp32" else storage
    b_shape = (cfg.k, cfg.n) if cfg.b_layout == "row" else (cfg.n, cfg.k)
    for nm, arr, shape, dt in (("a", a, (cfg.m, cfg.k), storage), ("b", b, b_shape, storage),
                               ("c", c, (cfg.m, cfg.n), out)):
        if not isinstance(arr, cupy.ndarray):
            raise ValueError(f"{nm} must be a cupy.ndarray, got {type(arr).__name__}")
        if tuple(arr.shape) != shape:
            raise ValueError(f"{nm}.shape = {tuple(arr.shape)}: expected {shape} for {cfg.label}")
        if arr.dtype != dt:
            raise ValueError(f"{nm}.dtype = {arr.dtype}: expected {cupy.dtype(dt)} for {cfg.label}")
        if not arr.flags.c_contiguous:
            raise ValueError(f"{nm} must be C-contiguous")
        if arr.data.ptr % 16:
            raise ValueError(f"{nm} must be 16-byte aligned (TMA, vector stores)")


def build(cfg, a, b, c, *, tensormap: str | None = None, compiler: str | None = None, trace: bool = False):
    """Compile ``cfg``'s kernel, encode the tensor maps of ``a`` and ``b`` and return a ``Built``
    whose ``launch()`` computes ``c = a @ b`` once (asynchronously, on the current stream).

    ``a`` is M x K, ``b`` K x N (``b_layout="row"``) or N x K (``"col"``), ``c`` M x N, C-contiguous
    CuPy arrays: fp16 as float16, bf16 as uint16 bit patterns, tf32 as float32; ``c`` float32 or the
    input storage type. ``tensormap`` defaults to ``$TC_WGMMA_TENSORMAP`` or "param"; ``compiler``
    to ``$TC_WGMMA_COMPILER`` or "nvrtc". ``trace``: the kernel with the schedule trace
    (:func:`kernel_source`); ``launch.module`` is then its module, whose ``tc_trace`` pointer the
    caller sets to a buffer of ``grid blocks x (k-tiles + 2)`` uint64 before launching."""
    import numpy as np

    tensormap = tensormap or os.environ.get("TC_WGMMA_TENSORMAP", "param")
    compiler = compiler or os.environ.get("TC_WGMMA_COMPILER", "nvrtc")
    check(cfg)
    _check_arrays(cfg, a, b, c)
    mod, kernel, src = compile_module(cfg, tensormap, compiler, trace)
    g = geometry(cfg)
    if g.dynamic_smem_bytes > DEFAULT_SMEM_LIMIT_BYTES:
        kernel.max_dynamic_shared_size_bytes = g.dynamic_smem_bytes
    args_a, args_b = tma.operand_maps(cfg, a.data.ptr, b.data.ptr)
    raw_a, raw_b = tma.encode(args_a), tma.encode(args_b)
    scalars = (np.int32(cfg.m), np.int32(cfg.n), np.int32(cfg.k))
    if tensormap == "param":
        args = (tma.as_kernel_arg(raw_a), tma.as_kernel_arg(raw_b), c, *scalars)
        keep = None
    else:
        args = (c, *scalars)
        keep = (np.frombuffer(bytearray(raw_a), dtype=np.uint8), np.frombuffer(bytearray(raw_b), dtype=np.uint8))
    token = object()
    refs = (a, b, c)  # the tensor maps hold raw addresses of a and b: keep the arrays alive

    def launch() -> None:
        if keep is not None and _CONSTANT_OWNER.get(id(mod)) != id(token):
            for sym, host in (("tc_tmap_a", keep[0]), ("tc_tmap_b", keep[1])):
                mod.get_global(sym).copy_from_host(host.ctypes.data, tma.TENSOR_MAP_BYTES)
            _CONSTANT_OWNER[id(mod)] = id(token)
        kernel(g.grid, g.block, args, shared_mem=g.dynamic_smem_bytes)

    launch.arrays = refs
    launch.module = mod

    attrs = kernel.attributes
    attributes = {
        "regs_per_thread": int(attrs["num_regs"]),
        "static_smem_bytes": int(attrs["shared_size_bytes"]),
        "local_bytes": int(attrs["local_size_bytes"]),
        "dynamic_smem_bytes": g.dynamic_smem_bytes,
    }
    return _built_class()(launch=launch, kernel_names=src.name_expressions, attributes=attributes)


# ----- the proposed suite entries (helper A's suite.toml holds the [[config]] tables) ------------------
#: the suite's shapes these entries name (m, n, k)
SUITE_SHAPES = {"square": (8192, 8192, 8192), "mid": (4096, 4096, 4096), "ragged": (3001, 4000, 2008),
                "tall": (16384, 256, 4096)}


def _e(dtype, b_layout, bm, bn, bk, consumers, stages, cluster, shapes, *, epilogue="direct", out="fp32",
       shape="auto"):
    knobs = {"instruction": "wgmma", "dtype": dtype, "b_layout": b_layout, "bm": bm, "bn": bn, "bk": bk,
             "wm": bm // consumers, "wn": bn, "consumers": consumers, "stages": stages, "cluster": cluster,
             "layout": "swizzled"}
    if out != "fp32":
        knobs["out_dtype"] = out
    if epilogue != "direct":
        knobs["epilogue"] = epilogue
    if shape != "auto":
        knobs["shape"] = shape
    if stages == 1:  # one buffer: no producer warpgroup to hand registers over
        knobs["setmaxnreg"] = False
    knobs["shapes"] = list(shapes)
    return knobs


_ALL = ("square", "mid", "ragged", "tall")
_SM = ("square", "mid")
#: wgmma configurations proposed for validation/families/tc_gemm/suite.toml
PROPOSED_SUITE: tuple[dict, ...] = (
    # fp16, B stored N x K (K-major, no transpose)
    _e("fp16", "col", 128, 256, 64, 2, 4, 1, _ALL),
    _e("fp16", "col", 128, 256, 64, 2, 4, 2, _ALL),
    _e("fp16", "col", 128, 256, 64, 2, 3, 2, _SM),
    _e("fp16", "col", 128, 256, 64, 2, 2, 1, _SM),
    _e("fp16", "col", 128, 256, 64, 2, 4, 2, ("square", "mid", "ragged"), epilogue="shared"),
    _e("fp16", "col", 128, 192, 64, 2, 5, 2, _SM),
    _e("fp16", "col", 128, 128, 64, 2, 5, 1, ("square", "mid", "ragged")),
    _e("fp16", "col", 128, 128, 64, 2, 4, 2, _SM),
    _e("fp16", "col", 128, 128, 64, 1, 4, 1, _SM),
    _e("fp16", "col", 64, 256, 64, 1, 4, 1, _SM),
    _e("fp16", "col", 128, 64, 64, 2, 5, 1, ("mid", "tall")),
    _e("fp16", "col", 256, 128, 64, 2, 4, 2, _SM),
    _e("fp16", "col", 128, 256, 64, 2, 4, 2, _SM, out="input"),
    _e("fp16", "col", 128, 256, 64, 2, 4, 2, _SM, out="input", epilogue="shared"),
    _e("fp16", "col", 128, 256, 64, 2, 4, 1, ("square",), shape="m64n128k16"),
    # fp16, B stored K x N (N-major: the wgmma transpose bit)
    _e("fp16", "row", 128, 256, 64, 2, 4, 2, _ALL),
    _e("fp16", "row", 128, 256, 64, 2, 4, 1, _SM),
    _e("fp16", "row", 128, 128, 64, 2, 5, 1, ("square", "mid", "ragged")),
    _e("fp16", "row", 128, 256, 64, 2, 3, 2, _SM, epilogue="shared"),
    # bf16
    _e("bf16", "col", 128, 256, 64, 2, 4, 2, ("square", "mid", "ragged")),
    _e("bf16", "row", 128, 256, 64, 2, 4, 2, _SM),
    _e("bf16", "col", 128, 128, 64, 2, 4, 1, ("mid", "ragged"), out="input", epilogue="shared"),
    _e("bf16", "row", 128, 128, 64, 1, 3, 1, ("mid",)),
    # tf32 (K-major B only)
    _e("tf32", "col", 128, 256, 32, 2, 4, 2, ("square", "mid", "ragged")),
    _e("tf32", "col", 128, 256, 32, 2, 4, 1, ("mid",)),
    _e("tf32", "col", 128, 128, 32, 2, 5, 1, ("mid", "ragged")),
    _e("tf32", "col", 128, 128, 64, 2, 3, 2, ("mid",), epilogue="shared"),
    _e("tf32", "col", 64, 128, 32, 1, 3, 1, ("mid",)),
    _e("tf32", "col", 128, 64, 32, 2, 2, 1, ("mid", "tall")),
    # one buffer (stages 1): no producer warpgroup, no setmaxnreg, no cluster (new, not yet measured)
    _e("fp16", "col", 64, 64, 64, 1, 1, 1, _SM),
    _e("fp16", "col", 64, 128, 64, 1, 1, 1, ("square", "mid", "tall")),
    _e("fp16", "col", 128, 128, 64, 1, 1, 1, _SM),
    _e("fp16", "col", 128, 128, 64, 2, 1, 1, ("square", "mid", "ragged")),
    _e("fp16", "col", 128, 256, 64, 2, 1, 1, ("square", "mid", "ragged")),
    _e("bf16", "col", 128, 256, 64, 2, 1, 1, _SM),
    _e("bf16", "col", 64, 128, 64, 1, 1, 1, _SM, out="input", epilogue="shared"),
    _e("tf32", "col", 128, 128, 32, 2, 1, 1, ("square", "mid", "ragged")),
    _e("tf32", "col", 64, 128, 32, 1, 1, 1, ("square", "mid", "tall")),
)


def proposed_configs() -> list:
    """Every proposed entry on each of its shapes, as ``TcGemmConfig`` (config-major)."""
    from tilesim.kernels.tc_gemm.config import TcGemmConfig

    out = []
    for entry in PROPOSED_SUITE:
        knobs = {k: v for k, v in entry.items() if k != "shapes"}
        for s in entry["shapes"]:
            m, n, k = SUITE_SHAPES[s]
            out.append(TcGemmConfig(m=m, n=n, k=k, **knobs))
    return out


def proposed_toml() -> str:
    """:data:`PROPOSED_SUITE` as ``[[config]]`` tables."""
    lines = []
    for entry in PROPOSED_SUITE:
        lines.append("[[config]]")
        for key, v in entry.items():
            lines.append(f"{key} = " + (f'"{v}"' if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else
                                        "[" + ", ".join(f'"{x}"' for x in v) + "]" if isinstance(v, list) else str(v)))
        lines.append("")
    return "\n".join(lines)


# ----- a quick device check: correctness, then TFLOP/s against cuBLAS --------------------------------------
BENCH_SHAPES = ((8192, 8192, 8192), (4096, 4096, 4096))


def _bench(launch, reps: int = 10, warmup: int = 3) -> float:
    """Median seconds of one ``launch()`` (CUDA events, after ``warmup`` launches)."""
    import cupy

    for _ in range(warmup):
        launch()
    times = []
    for _ in range(reps):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        launch()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) * 1e-3)
    return sorted(times)[len(times) // 2]


def main(argv=None) -> int:
    """``python -m validation.families.tc_gemm.wgmma [label-substring ...]``: every fp16 proposed
    configuration (or those whose label contains a given substring) checked at 1000 x 1016 x 520 and
    timed at 8192^3 and 4096^3 next to ``cupy.matmul`` (cuBLAS, fp16 in and out). Prints one line each."""
    import sys

    import cupy
    import numpy as np

    from tilesim.kernels.tc_gemm.config import TcGemmConfig

    wanted = list(argv if argv is not None else sys.argv[1:])
    entries = [{k: v for k, v in e.items() if k != "shapes"} for e in PROPOSED_SUITE]
    entries = [e for e in entries if e["dtype"] == "fp16" or wanted]
    cublas = {}
    for m, n, k in BENCH_SHAPES:
        a = cupy.random.standard_normal((m, k), dtype=cupy.float32).astype(cupy.float16)
        b = cupy.random.standard_normal((k, n), dtype=cupy.float32).astype(cupy.float16)
        cublas[(m, n, k)] = _bench(lambda a=a, b=b: cupy.matmul(a, b))
        print(f"cuBLAS fp16 {m}x{n}x{k}: {2 * m * n * k / cublas[(m, n, k)] * 1e-12:.1f} TFLOP/s", flush=True)
        del a, b
    for knobs in entries:
        small = TcGemmConfig(m=1000, n=1016, k=520, **knobs)
        if wanted and not any(w in small.label for w in wanted):
            continue
        try:
            rs = np.random.default_rng(0)
            a = rs.standard_normal((small.m, small.k)).astype(np.float32)
            b = rs.standard_normal((small.k, small.n)).astype(np.float32)
            store = {"fp16": np.float16, "tf32": np.float32}.get(small.dtype)
            if store is None:  # bf16 bits
                def bits(x):
                    u = x.view(np.uint32)
                    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
                a_s, b_s = bits(a), bits(b)
                a_v = (a_s.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
                b_v = (b_s.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
            else:
                a_s, b_s = a.astype(store), b.astype(store)
                a_v, b_v = a_s.astype(np.float64), b_s.astype(np.float64)
            b_dev = b_s if small.b_layout == "row" else np.ascontiguousarray(b_s.T)
            out_t = np.float32 if small.out_dtype == "fp32" else a_s.dtype
            dc = cupy.zeros((small.m, small.n), dtype=out_t)
            build(small, cupy.asarray(a_s), cupy.asarray(b_dev), dc).launch()
            out = dc.get()
            if out.dtype == np.uint16:
                out = (out.astype(np.uint32) << 16).view(np.float32)
            ref = a_v @ b_v
            err = float(np.abs(out - ref).max() / np.abs(ref).max())
            line = [f"{small.label}: rel_err {err:.2e}"]
            for m, n, k in BENCH_SHAPES:
                c = TcGemmConfig(m=m, n=n, k=k, **knobs)
                st = {"fp16": cupy.float16, "bf16": cupy.uint16, "tf32": cupy.float32}[c.dtype]

                def draw(shape, st=st):
                    x = cupy.random.standard_normal(shape, dtype=cupy.float32)
                    return (x.view(cupy.uint32) >> 16).astype(cupy.uint16) if st == cupy.uint16 else x.astype(st)
                A = draw((m, k))
                B = draw((k, n) if c.b_layout == "row" else (n, k))
                C = cupy.zeros((m, n), dtype=cupy.float32 if c.out_dtype == "fp32" else st)
                bt = build(c, A, B, C)
                s = _bench(bt.launch)
                line.append(f"{m}^3 {2 * m * n * k / s * 1e-12:.1f} TFLOP/s ({cublas[(m, n, k)] / s:.0%} of cuBLAS)")
                del A, B, C, bt
            print("; ".join(line), flush=True)
        except Exception as e:  # noqa: BLE001 - report and go on to the next configuration
            print(f"{small.label}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
