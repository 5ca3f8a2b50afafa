"""The steel-style GEMM family's knobs (MLX's steel GEMM and the m5-gemm kernels, Metal).

Three kernels (``variant``), the rungs of the Metal reuse pyramid:

=============== ==========================================================================
``naive``        one output of C per thread, A and B read straight from device memory (no
                 threadgroup memory, no simdgroup_matrix); a threadgroup is ``bm x bn``
                 threads. Reads: bm, bn, edge, dtype (bk, wm, wn, tg_pad are not used).
``threadgroup``  threadgroup-memory tiled, one output per thread: each k-step the ``bm x bn``
                 threads copy a ``bm x bk`` slab of A and a ``bk x bn`` slab of B (rows padded
                 by ``tg_pad``) into threadgroup memory, then each thread runs ``bk`` FMAs.
                 Reads: bm, bn, bk, tg_pad, copy, edge, dtype (wm, wn are not used).
``steel``        (default) the simdgroup_matrix kernel described below; reads every knob.
=============== ==========================================================================

C = A @ B, row-major; A is M x K, B is K x N. A threadgroup computes a ``bm x bn`` tile of C with
``wm x wn`` SIMD-groups (32 threads each); each SIMD-group owns a ``bm/wm x bn/wn`` *simdgroup
patch* built of 8x8 ``simdgroup_matrix`` fragments held in registers. The k-loop stages ``bk``-deep
slabs of A and B in threadgroup memory (rows padded by ``tg_pad`` elements), either synchronously
(``copy = "sync"``: load, barrier, compute, barrier) or double-buffered (``"double_buffer"``: two
slabs, the next one loaded while this one is used, one barrier per step). ``"cp_async"`` (NVIDIA's
asynchronous copy) is a CUDA-only knob: no Apple GPU has it, so :func:`check_fits` refuses it there.

Edges: ``edge = "aligned"`` is the pipeline without bounds checks (M, N, K must be multiples of the
tile; MLX picks it through a function constant), ``"ragged"`` the aligned pipeline for inner tiles
and a checked one for the edge tiles, ``"guards"`` per-thread bounds checks on every load.

Tile shapes are compile-time constants in Metal (steel's template parameters, ``-D`` defines), as
here: one configuration is one compiled kernel. Every rule is checked in ``__post_init__``, and a
broken one raises ``ValueError`` naming the field, the value and the limit; hardware limits
(threadgroup memory, threads, the simdgroup_matrix dtypes of a chip, CUDA-only knobs) are checked by
:func:`check_fits` against a :class:`~tilesim.hardware.HardwareSpec` before anything runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

VARIANTS = ("naive", "threadgroup", "steel")
COPIES = ("sync", "double_buffer", "cp_async")
CUDA_ONLY_COPIES = ("cp_async",)
EDGES = ("aligned", "ragged", "guards")
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}
FRAG = 8  # simdgroup_matrix fragments are 8x8 (Metal Shading Language, simdgroup_float8x8)
SIMD = 32  # threads per SIMD-group (every Apple GPU family)
REG_OVERHEAD = 16
"""Registers per thread besides the fragments and the copy's staging registers (addresses, loop
counters, indices): an assumption, not read off compiled code (there is no Mac here)."""


def _doc(default, doc: str, choices: tuple = ()):
    return field(default=default, metadata={"doc": doc, "choices": choices})


def _fail(name: str, value, rule: str):
    raise ValueError(f"SteelGemmConfig.{name} = {value!r}: {rule}")


@dataclass(frozen=True)
class SteelGemmConfig:
    """One GEMM problem and steel-style tiling (module docstring)."""

    m: int = field(metadata={"doc": "rows of A and C (the problem size)"})
    n: int = field(metadata={"doc": "columns of B and C (the problem size)"})
    k: int = field(metadata={"doc": "columns of A, rows of B (the problem size)"})
    bm: int = _doc(64, "threadgroup tile rows (steel BM)")
    bn: int = _doc(64, "threadgroup tile columns (steel BN)")
    bk: int = _doc(16, "k-slab depth staged in threadgroup memory per step (steel BK); a multiple of 8")
    wm: int = _doc(2, "SIMD-groups along M (steel WM); the patch is bm/wm rows")
    wn: int = _doc(2, "SIMD-groups along N (steel WN); the patch is bn/wn columns")
    tg_pad: int = _doc(4, "elements of padding per threadgroup-memory row (steel: 16 bytes)")
    copy: str = _doc("sync", "sync (load, barrier, compute, barrier), double_buffer (two slabs, one barrier "
                             "per step), cp_async (CUDA only: refused on Apple GPUs)", COPIES)
    edge: str = _doc("aligned", "aligned (no bounds checks; sizes multiples of the tile), ragged (checks in "
                                "edge tiles only), guards (per-thread checks on every load)", EDGES)
    dtype: str = _doc("fp32", "element type of A, B and the simdgroup_matrix fragments", tuple(DTYPE_BYTES))
    reg_limit: int = _doc(128, "registers a thread holds before the compiler spills (Apple G13 ISA: 128 "
                               "32-bit GPRs); checked against the chip's max_regs_per_thread where known")
    variant: str = _doc("steel", "naive (one output per thread, straight from device memory; a bm x bn "
                                 "threadgroup), threadgroup (threadgroup-memory slabs, one output per thread), "
                                 "steel (simdgroup_matrix patches); see the module docstring", VARIANTS)

    def __post_init__(self) -> None:
        for name in ("m", "n", "k", "bm", "bn", "bk", "wm", "wn", "tg_pad", "reg_limit"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                _fail(name, v, "must be an integer")
            if v < (0 if name == "tg_pad" else 1):
                _fail(name, v, "must be >= 0" if name == "tg_pad" else "must be >= 1")
        if self.copy not in COPIES:
            _fail("copy", self.copy, f"must be one of {', '.join(COPIES)}")
        if self.edge not in EDGES:
            _fail("edge", self.edge, f"must be one of {', '.join(EDGES)}")
        if self.dtype not in DTYPE_BYTES:
            _fail("dtype", self.dtype, f"must be one of {', '.join(DTYPE_BYTES)}")
        if self.variant not in VARIANTS:
            _fail("variant", self.variant, f"must be one of {', '.join(VARIANTS)}")
        if self.variant == "steel":
            if self.bm % self.wm or self.bn % self.wn:
                _fail("wm" if self.bm % self.wm else "wn", self.wm if self.bm % self.wm else self.wn,
                      f"must divide the tile (bm = {self.bm}, bn = {self.bn})")
            pm, pn = self.patch
            if pm % FRAG or pn % FRAG:
                _fail("patch", f"{pm}x{pn}", f"the simdgroup patch (bm/wm x bn/wn) must be built of {FRAG}x{FRAG} "
                                             f"fragments: {pm} and {pn} must be multiples of {FRAG}")
            if self.bk % FRAG:
                _fail("bk", self.bk, f"must be a multiple of {FRAG} (the fragments' k)")
            if self.edge == "aligned":
                for dim, tile in (("m", self.bm), ("n", self.bn), ("k", self.bk)):
                    if getattr(self, dim) % tile:
                        _fail(dim, getattr(self, dim), f"edge = 'aligned' needs a multiple of the tile ({tile}); "
                                                        "use edge = 'ragged' or 'guards'")
        else:
            if self.bm * self.bn % SIMD:
                _fail("bm", self.bm, f"variant {self.variant!r} runs bm x bn threads: bm * bn = "
                                     f"{self.bm * self.bn} must be a multiple of {SIMD} (whole SIMD-groups)")
            if self.variant == "naive" and self.copy != "sync":
                _fail("copy", self.copy, "variant 'naive' stages nothing in threadgroup memory; use 'sync'")
            tiled = ("m", "n") if self.variant == "naive" else ("m", "n", "k")
            if self.edge == "aligned":
                for dim in tiled:
                    tile = {"m": self.bm, "n": self.bn, "k": self.bk}[dim]
                    if getattr(self, dim) % tile:
                        _fail(dim, getattr(self, dim), f"edge = 'aligned' needs a multiple of the tile ({tile}); "
                                                        "use edge = 'ragged' or 'guards'")
        if self.tg_pad * self.elem_bytes % 4:
            _fail("tg_pad", self.tg_pad, "padding must keep rows 4-byte aligned")

    # --- derived ------------------------------------------------------------------------------
    @property
    def elem_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def patch(self) -> tuple[int, int]:
        """The simdgroup patch: rows x columns of C one SIMD-group owns."""
        return self.bm // self.wm, self.bn // self.wn

    @property
    def frags(self) -> tuple[int, int]:
        """8x8 fragments of the patch along M and N."""
        return self.patch[0] // FRAG, self.patch[1] // FRAG

    @property
    def threads(self) -> int:
        """Threads per threadgroup: wm x wn SIMD-groups (steel), bm x bn (naive, threadgroup)."""
        if self.variant != "steel":
            return self.bm * self.bn
        return self.wm * self.wn * SIMD

    @property
    def simdgroups(self) -> int:
        return self.threads // SIMD

    @property
    def buffers(self) -> int:
        return 1 if self.copy == "sync" else 2

    @property
    def tg_bytes(self) -> int:
        """Threadgroup memory: the A slab (bm x (bk+pad)) and B slab (bk x (bn+pad)), per buffer."""
        if self.variant == "naive":
            return 0
        e = self.elem_bytes
        return self.buffers * (self.bm * (self.bk + self.tg_pad) + self.bk * (self.bn + self.tg_pad)) * e

    @property
    def grid(self) -> tuple[int, int, int]:
        return math.ceil(self.n / self.bn), math.ceil(self.m / self.bm), 1

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    @property
    def vec(self) -> int:
        """Elements per thread per global load: 16-byte vectors, as steel's loaders."""
        return 16 // self.elem_bytes

    @property
    def estimated_regs(self) -> int:
        """32-bit registers a thread needs: the patch's accumulators (2 per fragment and thread, fp32),
        one k-step's A and B fragments, the copy's staging registers, :data:`REG_OVERHEAD`. The naive
        and threadgroup kernels hold one accumulator, one A and one B value, the double-buffered copy's
        staged elements and :data:`REG_OVERHEAD`."""
        if self.variant != "steel":
            staged = 0
            if self.variant == "threadgroup" and self.copy == "double_buffer":
                staged = math.ceil((self.bm * self.bk + self.bk * self.bn) / self.threads * self.elem_bytes / 4)
            return 3 + staged + REG_OVERHEAD
        fm, fn = self.frags
        acc = fm * fn * 2
        ab = (fm + fn) * 2 * self.elem_bytes // 4 if self.elem_bytes == 4 else (fm + fn)
        staged = math.ceil((self.bm * self.bk + self.bk * self.bn) / self.threads * self.elem_bytes / 4)
        return acc + max(1, ab) + staged + REG_OVERHEAD

    @property
    def spilled_regs(self) -> int:
        """Registers beyond ``reg_limit`` (spilled to device memory: see the lowering)."""
        return max(0, self.estimated_regs - self.reg_limit)

    @property
    def spill_bytes(self) -> float:
        """Device-memory bytes the spilled registers move over the whole kernel (each k-substep
        reloads and stores every spilled register of every thread: see the lowering)."""
        if not self.spilled_regs:
            return 0.0
        gx, gy, _ = self.grid
        steps = math.ceil(self.k / self.bk) * (self.bk // FRAG)
        return 2.0 * self.spilled_regs * 4 * self.threads * steps * gx * gy

    @property
    def label(self) -> str:
        if self.variant == "naive":
            return f"naive_{self.bm}x{self.bn}_{self.edge}_{self.dtype}"
        if self.variant == "threadgroup":
            return f"tgtile_{self.bm}x{self.bn}x{self.bk}_pad{self.tg_pad}_{self.copy}_{self.edge}_{self.dtype}"
        pm, pn = self.patch
        return (f"steel_{self.bm}x{self.bn}x{self.bk}_w{self.wm}x{self.wn}_p{pm}x{pn}_pad{self.tg_pad}"
                f"_{self.copy}_{self.edge}_{self.dtype}")


def check_fits(cfg: SteelGemmConfig, hw) -> None:
    """Raise ``ValueError`` (one line: field, value, limit) if ``cfg`` cannot run on ``hw``."""
    if hw.vendor == "apple" and cfg.copy in CUDA_ONLY_COPIES:
        raise ValueError(f"SteelGemmConfig.copy = {cfg.copy!r}: a CUDA-only knob (NVIDIA's asynchronous copy); "
                         f"{hw.name} is an Apple GPU: use 'sync' or 'double_buffer'")
    if cfg.tg_bytes > hw.smem_per_block_optin_bytes:
        raise ValueError(f"SteelGemmConfig.tg_bytes = {cfg.tg_bytes} (threadgroup memory from bm, bn, bk, tg_pad, "
                         f"copy) exceeds {hw.smem_per_block_optin_bytes} bytes per threadgroup on {hw.name}")
    if cfg.threads > hw.max_threads_per_block:
        raise ValueError(f"SteelGemmConfig.threads = {cfg.threads} (wm x wn x 32) exceeds "
                         f"{hw.max_threads_per_block} threads per threadgroup on {hw.name}")
    if cfg.variant != "steel":  # FP32 FMAs on the ALUs: no simdgroup_matrix rate needed
        if hw.has("max_regs_per_thread") and cfg.reg_limit > hw.max_regs_per_thread:
            raise ValueError(f"SteelGemmConfig.reg_limit = {cfg.reg_limit} exceeds max_regs_per_thread = "
                             f"{hw.max_regs_per_thread} on {hw.name}")
        return
    have = {d for _, d in hw.mma_shapes()} if hw.mma_shapes() else set()
    mma_dtype = cfg.dtype
    if hw.mma_shapes() and mma_dtype not in have:
        raise ValueError(f"SteelGemmConfig.dtype = {cfg.dtype!r}: {hw.name} has no simdgroup_matrix rate for it; "
                         f"it has {', '.join(sorted(have))}")
    if not hw.mma_shapes():
        raise ValueError(f"SteelGemmConfig.dtype = {cfg.dtype!r}: {hw.name}'s data file sources no simdgroup_matrix "
                         "rate (mma.m8n8k8.*); give one with tilesim.hardware.with_overrides")
    if hw.has("max_regs_per_thread") and cfg.reg_limit > hw.max_regs_per_thread:
        raise ValueError(f"SteelGemmConfig.reg_limit = {cfg.reg_limit} exceeds max_regs_per_thread = "
                         f"{hw.max_regs_per_thread} on {hw.name}")
