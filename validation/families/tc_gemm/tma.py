"""TMA tensor maps for the wgmma GEMM kernels: the arguments of ``cuTensorMapEncodeTiled`` (pure, no GPU)
and the encoder (ctypes on ``libcuda.so.1``, CUDA driver API).

:func:`operand_maps` gives, for one configuration and the device addresses of A and B, the two
:class:`TiledMapArgs` the kernels in ``wgmma.cu`` expect (128-byte swizzle, a box one 128-byte
swizzle row wide):

* A (M x K row-major): dims ``{K, M}``, box ``{128 / E, bm}``;
* B with ``b_layout="col"`` (N x K row-major, K contiguous): dims ``{K, N}``, box ``{128 / E, bn}``;
* B with ``b_layout="row"`` (K x N row-major, N contiguous, 16-bit types only): dims ``{N, K}``,
  box ``{64, bk}``.

Out-of-bounds boxes are zero-filled by TMA (``CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE``), so any M and
ragged N/K tiles need no code; the global row strides must be multiples of 16 bytes (checked here
with a ``ValueError`` naming the operand, the stride and the limit).

:func:`encode` calls the driver and returns the 128-byte opaque map; :func:`as_kernel_arg` wraps it
in a NumPy structured scalar that CuPy passes by value to a ``const __grid_constant__`` parameter.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

# cuda.h (CUDA 12/13): CUtensorMapDataType, CUtensorMapInterleave, CUtensorMapSwizzle,
# CUtensorMapL2promotion, CUtensorMapFloatOOBfill
DATA_TYPE_FLOAT16 = 6
DATA_TYPE_FLOAT32 = 7
DATA_TYPE_BFLOAT16 = 9
INTERLEAVE_NONE = 0
SWIZZLE_128B = 3
L2_PROMOTION_256B = 3
OOB_FILL_ZERO = 0  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: out-of-bounds elements read as zero

#: tf32 operands are fp32 in memory (the tensor core ignores the low mantissa bits)
DATA_TYPES = {"fp16": DATA_TYPE_FLOAT16, "bf16": DATA_TYPE_BFLOAT16, "tf32": DATA_TYPE_FLOAT32}
ELEMENT_BYTES = {"fp16": 2, "bf16": 2, "tf32": 4}

# cuTensorMapEncodeTiled's documented limits (cuda.h)
TENSOR_MAP_BYTES = 128           # sizeof(CUtensorMap): CU_TENSOR_MAP_NUM_QWORDS = 16
TENSOR_MAP_ALIGN_BYTES = 64      # "tensorMap address must be aligned to 64 bytes"
GLOBAL_ADDRESS_ALIGN_BYTES = 16  # "globalAddress ... must be 16 byte aligned"
GLOBAL_STRIDE_ALIGN_BYTES = 16   # "globalStrides ... must be a multiple of 16"
GLOBAL_STRIDE_LIMIT_BYTES = 2**40
GLOBAL_DIM_LIMIT = 2**32
BOX_DIM_LIMIT = 256              # "boxDim ... less than or equal to 256"
SWIZZLE_SPAN_BYTES = 128         # SWIZZLE_128B: the box's inner dimension must be <= 128 bytes
MAX_RANK = 5


@dataclass(frozen=True)
class TiledMapArgs:
    """The arguments of one ``cuTensorMapEncodeTiled`` call (dims innermost first, strides in bytes
    for dimensions 1..rank-1)."""

    data_type: int
    global_address: int
    global_dims: tuple[int, ...]
    global_strides_bytes: tuple[int, ...]
    box_dims: tuple[int, ...]
    element_strides: tuple[int, ...]
    element_bytes: int
    interleave: int = INTERLEAVE_NONE
    swizzle: int = SWIZZLE_128B
    l2_promotion: int = L2_PROMOTION_256B
    oob_fill: int = OOB_FILL_ZERO

    @property
    def rank(self) -> int:
        return len(self.global_dims)

    @property
    def box_bytes(self) -> int:
        """Bytes one load of this box writes to shared memory (out-of-bounds parts included)."""
        n = self.element_bytes
        for d in self.box_dims:
            n *= d
        return n


def tiled_args(name: str, dtype: str, address: int, dims, strides_bytes, box) -> TiledMapArgs:
    """Checked :class:`TiledMapArgs` for operand ``name`` (used in error messages) of ``dtype``.

    Raises ``ValueError`` naming the operand, the field, its value and the limit when the driver
    would reject the map."""
    if dtype not in DATA_TYPES:
        raise ValueError(f"{name}: dtype = {dtype!r}: must be one of {sorted(DATA_TYPES)}")
    eb = ELEMENT_BYTES[dtype]
    dims, strides_bytes, box = tuple(int(d) for d in dims), tuple(int(s) for s in strides_bytes), tuple(
        int(b) for b in box)
    if not 1 <= len(dims) <= MAX_RANK or len(box) != len(dims) or len(strides_bytes) != len(dims) - 1:
        raise ValueError(f"{name}: rank {len(dims)} with {len(box)} box dims and {len(strides_bytes)} strides: "
                         f"need 1..{MAX_RANK} dims, as many box dims and one stride fewer")
    if address % GLOBAL_ADDRESS_ALIGN_BYTES:
        raise ValueError(f"{name}: global address {address:#x} must be {GLOBAL_ADDRESS_ALIGN_BYTES}-byte aligned")
    for i, d in enumerate(dims):
        if not 1 <= d <= GLOBAL_DIM_LIMIT:
            raise ValueError(f"{name}: global dim {i} = {d}: must be in 1..{GLOBAL_DIM_LIMIT}")
    for i, s in enumerate(strides_bytes):
        if s % GLOBAL_STRIDE_ALIGN_BYTES or not 0 < s < GLOBAL_STRIDE_LIMIT_BYTES:
            raise ValueError(f"{name}: global stride {i + 1} = {s} bytes: must be a positive multiple of "
                             f"{GLOBAL_STRIDE_ALIGN_BYTES} below 2^40 (TMA); the row length in bytes must be "
                             f"a multiple of {GLOBAL_STRIDE_ALIGN_BYTES}")
    for i, b in enumerate(box):
        if not 1 <= b <= BOX_DIM_LIMIT:
            raise ValueError(f"{name}: box dim {i} = {b}: must be in 1..{BOX_DIM_LIMIT}")
    if (box[0] * eb) % 16 or box[0] * eb > SWIZZLE_SPAN_BYTES:
        raise ValueError(f"{name}: box inner dim {box[0]} x {eb} B = {box[0] * eb} B: must be a multiple of 16 "
                         f"and at most {SWIZZLE_SPAN_BYTES} B (128-byte swizzle)")
    return TiledMapArgs(data_type=DATA_TYPES[dtype], global_address=int(address), global_dims=dims,
                        global_strides_bytes=strides_bytes, box_dims=box, element_strides=(1,) * len(dims),
                        element_bytes=eb)


def operand_maps(cfg, a_address: int, b_address: int) -> tuple[TiledMapArgs, TiledMapArgs]:
    """The tensor maps of A and B for ``cfg`` (a ``TcGemmConfig``: m, n, k, dtype, b_layout, bm, bn,
    bk) at the given device addresses."""
    dtype = cfg.dtype
    eb = ELEMENT_BYTES.get(dtype)
    if eb is None:
        raise ValueError(f"TcGemmConfig.dtype = {dtype!r}: must be one of {sorted(ELEMENT_BYTES)}")
    row_elems = SWIZZLE_SPAN_BYTES // eb
    a = tiled_args("A", dtype, a_address, (cfg.k, cfg.m), (cfg.k * eb,), (row_elems, cfg.bm))
    if cfg.b_layout == "col":
        b = tiled_args("B", dtype, b_address, (cfg.k, cfg.n), (cfg.k * eb,), (row_elems, cfg.bn))
    elif cfg.b_layout == "row":
        if eb != 2:
            raise ValueError(f"TcGemmConfig.b_layout = 'row' with dtype = {dtype!r}: wgmma transposes only "
                             "16-bit operands; use b_layout = 'col' for tf32")
        b = tiled_args("B", dtype, b_address, (cfg.n, cfg.k), (cfg.n * eb,), (row_elems, cfg.bk))
    else:
        raise ValueError(f"TcGemmConfig.b_layout = {cfg.b_layout!r}: must be 'row' or 'col'")
    return a, b


# ----- the driver call ---------------------------------------------------------------------------------
_LIBCUDA = None


def _libcuda():
    global _LIBCUDA
    if _LIBCUDA is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise RuntimeError(f"cannot load libcuda.so.1 (the CUDA driver) for cuTensorMapEncodeTiled: {e}") from None
        fn = lib.cuTensorMapEncodeTiled
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                       ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                       ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
                       ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.cuInit.restype = ctypes.c_int
        lib.cuInit.argtypes = [ctypes.c_uint]
        rc = lib.cuInit(0)
        if rc != 0:
            raise RuntimeError(f"cuInit(0) failed with CUresult {rc}")
        _LIBCUDA = lib
    return _LIBCUDA


def ctypes_arrays(args: TiledMapArgs):
    """The four array arguments as ctypes arrays: global dims, global strides, box dims, element
    strides (no driver needed; what :func:`encode` passes)."""
    dims = (ctypes.c_uint64 * args.rank)(*args.global_dims)
    strides = (ctypes.c_uint64 * max(1, args.rank - 1))(*(args.global_strides_bytes or (0,)))
    box = (ctypes.c_uint32 * args.rank)(*args.box_dims)
    elem = (ctypes.c_uint32 * args.rank)(*args.element_strides)
    return dims, strides, box, elem


def encode(args: TiledMapArgs) -> bytes:
    """The 128-byte ``CUtensorMap`` of ``args`` from the driver's ``cuTensorMapEncodeTiled``.

    Raises ``RuntimeError`` with the CUresult when the driver refuses."""
    lib = _libcuda()
    buf = ctypes.create_string_buffer(TENSOR_MAP_BYTES + TENSOR_MAP_ALIGN_BYTES)
    addr = ctypes.addressof(buf)
    aligned = (addr + TENSOR_MAP_ALIGN_BYTES - 1) // TENSOR_MAP_ALIGN_BYTES * TENSOR_MAP_ALIGN_BYTES
    dims, strides, box, elem = ctypes_arrays(args)
    rc = lib.cuTensorMapEncodeTiled(ctypes.c_void_p(aligned), args.data_type, args.rank,
                                    ctypes.c_void_p(args.global_address), dims, strides, box, elem,
                                    args.interleave, args.swizzle, args.l2_promotion, args.oob_fill)
    if rc != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed with CUresult {rc} for {args}")
    return ctypes.string_at(aligned, TENSOR_MAP_BYTES)


def as_kernel_arg(raw: bytes):
    """``raw`` (128 bytes) as a NumPy structured scalar that CuPy passes by value (a
    ``const __grid_constant__`` 128-byte parameter)."""
    import numpy as np

    if len(raw) != TENSOR_MAP_BYTES:
        raise ValueError(f"tensor map of {len(raw)} bytes: must be {TENSOR_MAP_BYTES}")
    dt = np.dtype([("opaque", "<u8", (TENSOR_MAP_BYTES // 8,))])
    return np.frombuffer(bytearray(raw), dtype=dt)[0]
