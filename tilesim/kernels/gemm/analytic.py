"""Analytic data-movement counts for GEMM, C = alpha * A @ B + beta * C (A is M x K, B is K x N).

Two layers:

* the source document's back-of-envelope numbers (:func:`naive_gemm_reads`,
  :func:`naive_time_s`, :func:`reuse_factor`, :func:`tiled_gemm_reads_elements`), in *elements*;
* :func:`gemm_traffic`, per-level byte counts of one :class:`~tilesim.kernels.gemm.config.GemmConfig`
  (global loads requested, compulsory HBM, shared-memory stores and loads, register operands),
  from which arithmetic intensities per level follow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tilesim.analytic.bounds import Bound, roofline_time_s
from tilesim.analytic.occupancy import occupancy

REGISTER_BYTES = 4
"""Bytes per 32-bit register operand."""


def _pos_int(field: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{field} = {value!r}: must be a positive integer")


def naive_gemm_reads(m: int, n: int, k: int) -> int:
    """Element reads of the naive GEMM: ``2 * m * n * k``.

    Every one of the ``m * n`` outputs reads a row of A and a column of B, ``k`` elements each.
    For M = N = K = 4096 this is 137,438,953,472 reads, which the source document calls
    "137 billion bytes from HBM": it counts one byte per element read. In fp32 (4 bytes per
    element) the same reads are 549.8 GB. Both figures assume no cache catches any reuse; on a
    real GPU the L1 and L2 serve most of these reads, so the naive kernel's true DRAM traffic is
    far lower.
    """
    for f, v in (("m", m), ("n", n), ("k", k)):
        _pos_int(f, v)
    return 2 * m * n * k


def naive_time_s(reads: float, bandwidth_bytes_per_s: float, *, bytes_per_read: float = 1.0) -> float:
    """Time to stream ``reads`` element reads at ``bandwidth_bytes_per_s``.

    ``reads * bytes_per_read / bandwidth_bytes_per_s``. The default ``bytes_per_read = 1``
    reproduces the source document (137.4e9 reads at 3.35 TB/s = 41.0 ms); pass 4 for fp32
    (164 ms).
    """
    if reads < 0:
        raise ValueError(f"reads = {reads!r}: must be >= 0")
    if not bandwidth_bytes_per_s > 0:
        raise ValueError(f"bandwidth_bytes_per_s = {bandwidth_bytes_per_s!r}: must be > 0")
    if not bytes_per_read > 0:
        raise ValueError(f"bytes_per_read = {bytes_per_read!r}: must be > 0")
    return reads * bytes_per_read / bandwidth_bytes_per_s


def reuse_factor(tile: int) -> int:
    """The document's reuse factor of a T x T GEMM tile: ``R = T``.

    Each element staged in shared memory is used by T threads (a row or column of the output
    tile), so global reads drop by a factor T compared with the naive kernel.
    """
    _pos_int("tile", tile)
    return tile


def tiled_gemm_reads_elements(m: int, n: int, k: int, bm: int, bn: int) -> int:
    """Global element reads of a GEMM tiled into bm x bn output blocks.

    A is read once per column of blocks and B once per row of blocks:
    ``ceil(n / bn) * m * k + ceil(m / bm) * k * n``, which equals the document's
    ``m * n * k * (1 / bn + 1 / bm)`` when the tiles divide the matrix. With square T x T
    tiles that is ``naive_gemm_reads / T``.
    """
    for f, v in (("m", m), ("n", n), ("k", k), ("bm", bm), ("bn", bn)):
        _pos_int(f, v)
    return math.ceil(n / bn) * m * k + math.ceil(m / bm) * k * n


@dataclass(frozen=True)
class GemmTraffic:
    """Per-level data movement of one GEMM launch, in bytes unless the name says otherwise.

    ``global_*``: bytes requested by the kernel's global load/store instructions from all
    blocks (what reaches the SM's L1 from L2 for the staged variants; for the naive variants
    these are L1 requests, most of which hit in L1). ``hbm_*``: compulsory DRAM traffic (each
    matrix moved once). ``smem_*``: bytes stored to / loaded from shared memory by threads
    (thread-level bytes, not wavefronts: a warp broadcast still counts each thread's bytes).
    ``register_operand_reads``: 3 source operands per useful FFMA (a count).
    """

    flops: float
    ffma_count: int
    elem_bytes: int
    blocks: int
    k_tiles: int
    global_a_bytes: int
    global_b_bytes: int
    global_c_read_bytes: int
    global_c_write_bytes: int
    hbm_a_bytes: int
    hbm_b_bytes: int
    hbm_c_read_bytes: int
    hbm_c_write_bytes: int
    smem_store_bytes: int
    smem_load_bytes: int
    register_operand_reads: int

    @property
    def global_load_bytes(self) -> int:
        return self.global_a_bytes + self.global_b_bytes + self.global_c_read_bytes

    @property
    def l2_bytes(self) -> int:
        """All global traffic between the SMs and L2: loads plus C stores."""
        return self.global_load_bytes + self.global_c_write_bytes

    @property
    def hbm_compulsory_bytes(self) -> int:
        return self.hbm_a_bytes + self.hbm_b_bytes + self.hbm_c_read_bytes + self.hbm_c_write_bytes

    @property
    def smem_bytes(self) -> int:
        """Shared-memory stores plus loads."""
        return self.smem_store_bytes + self.smem_load_bytes

    @property
    def register_read_bytes(self) -> int:
        return self.register_operand_reads * REGISTER_BYTES

    @property
    def ai_hbm(self) -> float:
        """FLOP per compulsory HBM byte."""
        return self.flops / self.hbm_compulsory_bytes

    @property
    def ai_l2(self) -> float:
        """FLOP per byte moved between L2 and the SMs (:attr:`l2_bytes`)."""
        return self.flops / self.l2_bytes

    @property
    def ai_smem(self) -> float:
        """FLOP per shared-memory byte loaded (``inf`` for variants without shared memory)."""
        return self.flops / self.smem_load_bytes if self.smem_load_bytes else math.inf


def _smem_loads_per_thread_per_k(cfg) -> int:
    """Shared-memory elements one thread loads per dot-product step (one k of a k-tile)."""
    v = cfg.variant
    if v == "smem":
        return 2  # one A and one B value
    if v == "reg1d":
        return cfg.tm + 1  # a column of tm A values, one B value
    if v == "reg2d":
        return cfg.tm + cfg.tn
    if v == "warp":
        return cfg.wmiter * cfg.tm + cfg.wniter * cfg.tn
    return 0


def gemm_traffic(cfg) -> GemmTraffic:
    """Analytic traffic of a :class:`~tilesim.kernels.gemm.config.GemmConfig`.

    With ``e = cfg.elem_bytes``, grid ``gx = ceil(n / bn)`` x ``gy = ceil(m / bm)`` and
    ``k_tiles = ceil(k / bk)``:

    * global loads, staged variants (smem, reg1d, reg2d, warp): every block reads its bm x K
      panel of A and its K x bn panel of B, clipped at the matrix edges (bounds-checked loads
      move nothing), so ``A = gx * m * k * e`` and ``B = gy * k * n * e``;
      naive variants: every output thread reads k elements of A and k of B,
      ``A = B = m * n * k * e``;
    * C: ``m * n * e`` written, and read as well when ``beta != 0``;
    * compulsory HBM: ``(m*k + k*n + m*n * (2 if beta != 0 else 1)) * e``;
    * shared-memory stores: each block stages whole (zero-filled at the edges) tiles,
      ``blocks * k_tiles * (bm*bk + bk*bn) * e``;
    * shared-memory loads: ``blocks * k_tiles * bk * threads * per_step * e`` where per_step,
      the elements one thread loads per k step, is 2 (smem), tm + 1 (reg1d), tm + tn (reg2d),
      wmiter*tm + wniter*tn (warp); 0 for the naive variants;
    * FLOPs ``2*m*n*k``; useful FFMAs ``m*n*k``; register operand reads ``3 * m*n*k``.
    """
    m, n, k, e = cfg.m, cfg.n, cfg.k, cfg.elem_bytes
    gx, gy, _ = cfg.grid
    blocks = gx * gy
    staged = cfg.uses_smem
    k_tiles = math.ceil(k / cfg.bk) if staged else 0
    if staged:
        ga, gb = gx * m * k * e, gy * k * n * e
        smem_store = blocks * k_tiles * (cfg.bm * cfg.bk + cfg.bk * cfg.bn) * e
        smem_load = blocks * k_tiles * cfg.bk * cfg.threads * _smem_loads_per_thread_per_k(cfg) * e
    else:
        ga = gb = m * n * k * e
        smem_store = smem_load = 0
    c_bytes = m * n * e
    c_read = c_bytes if cfg.beta != 0 else 0
    ffma = m * n * k
    return GemmTraffic(
        flops=2.0 * ffma,
        ffma_count=ffma,
        elem_bytes=e,
        blocks=blocks,
        k_tiles=k_tiles,
        global_a_bytes=ga,
        global_b_bytes=gb,
        global_c_read_bytes=c_read,
        global_c_write_bytes=c_bytes,
        hbm_a_bytes=m * k * e,
        hbm_b_bytes=k * n * e,
        hbm_c_read_bytes=c_read,
        hbm_c_write_bytes=c_bytes,
        smem_store_bytes=smem_store,
        smem_load_bytes=smem_load,
        register_operand_reads=3 * ffma,
    )


def gemm_bound(traffic, hw) -> Bound:
    """:func:`roofline_time_s` of a :class:`GemmTraffic`.

    Uses its FLOPs, compulsory HBM bytes, L2 bytes and shared-memory bytes (stores + loads).
    """
    return roofline_time_s(traffic.flops, traffic.hbm_compulsory_bytes, hw,
                           l2_bytes=traffic.l2_bytes, smem_bytes=traffic.smem_bytes)


def gemm_occupancy(cfg, hw):
    """:func:`~tilesim.analytic.occupancy.occupancy` of a :class:`~tilesim.kernels.gemm.config.GemmConfig`
    launch: ``cfg.threads``, ``cfg.estimated_regs`` (the override when given) and ``cfg.smem_bytes``."""
    return occupancy(hw, cfg.threads, cfg.estimated_regs, cfg.smem_bytes)
