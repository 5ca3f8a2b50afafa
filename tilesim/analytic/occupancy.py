"""Theoretical occupancy: how many blocks of a kernel fit on one SM at once, by the GPU vendor's rules.

:func:`occupancy` dispatches on ``hw.vendor``: NVIDIA's rules (below) or Apple's
(:func:`apple_occupancy`). Both return an :class:`Occupancy` with the same five limits.

NVIDIA. The rules are those of NVIDIA's occupancy calculator as implemented in ``cuda_occupancy.h``
(``cudaOccMaxActiveBlocksPerMultiprocessor``, the code behind
``cudaOccupancyMaxActiveBlocksPerMultiprocessor``) for compute capability 7.0 and later, with the
default shared-memory carve-out (the whole ``smem_per_sm_bytes`` is available) and the
per-block shared-memory limit opted in (kernels above 48 KB must set
``cudaFuncAttributeMaxDynamicSharedMemorySize``). Five per-SM limits, each in blocks:

``threads``
    ``floor(max_threads_per_sm / (warps_per_block * warp_size))`` (threads are allocated in whole
    warps);
``warps``
    ``floor(max_warps_per_sm / warps_per_block)``;
``registers``
    registers are allocated per warp: ``regs_per_warp = ceil(regs_per_thread * warp_size /
    reg_alloc_unit) * reg_alloc_unit``. The register file is split among the SM's 4
    sub-partitions, so ``warps_per_sm = floor(regs_per_sm / 4 / regs_per_warp) * 4`` (the same as
    the spreadsheet's ``floor(regs_per_sm / regs_per_warp)`` rounded down to the 4-warp allocation
    granularity) and ``blocks = floor(warps_per_sm / warps_per_block)``. A block whose
    ``regs_per_warp * roundup(warps_per_block, 4)`` exceeds the per-block register file
    (``regs_per_sm`` on every GPU in the catalog) cannot launch at all (0 blocks);
``shared_memory``
    ``smem_alloc = ceil((smem_bytes_per_block + smem_reserved_per_block_bytes) /
    smem_alloc_unit_bytes) * smem_alloc_unit_bytes`` and ``blocks = floor(smem_per_sm_bytes /
    smem_alloc)``. The 1 KB reservation of compute capability 8.0+ counts even when the kernel
    uses no shared memory, so this limit is always finite (228 blocks on an H200);
``blocks``
    ``max_blocks_per_sm``.

``blocks_per_sm`` is the minimum of the five; 0 means the block cannot be resident at all.

Apple (a GPU core is an "SM", a SIMD-group a warp, a threadgroup a block, threadgroup memory
shared memory). What is published: at most 1024 threads and 32 KB of threadgroup memory per
threadgroup (Apple, WWDC22 session 10159 and the Metal Feature Set Tables), threadgroup memory
allocated in multiples of 16 bytes (Metal API, ``setThreadgroupMemoryLength``), up to 128 32-bit
registers per thread allocated per SIMD-group (Dougall Johnson's G13 reference: the more registers a
SIMD-group takes, the fewer fit in the register file), a register file of about 208 KB and about
60 KB of threadgroup memory per core, and 768 to 3072 resident threads per core depending on
registers (Philip Turner's metal-benchmarks). The rules used:

``threads``/``warps``
    ``floor(max_threads_per_sm / (warps_per_block * warp_size))`` and
    ``floor(max_warps_per_sm / warps_per_block)`` (3072 threads, 96 SIMD-groups per core);
``registers``
    ``floor(regs_per_sm / (regs_per_thread * warp_size * warps_per_block))``: registers allocated
    exactly per SIMD-group. Apple does not publish an allocation granularity, so this is an upper
    bound on what fits;
``shared_memory``
    ``floor(smem_per_sm_bytes / roundup(smem_bytes_per_block, 16))``, :data:`NO_LIMIT` without
    threadgroup memory (Apple reserves none per threadgroup). ``smem_per_sm_bytes`` is approximate
    (about 60 KB);
``blocks``
    :data:`NO_LIMIT`: a per-core threadgroup limit is not published.
"""

from __future__ import annotations

from dataclasses import dataclass

LIMIT_NAMES = ("threads", "warps", "registers", "shared_memory", "blocks")
"""The limits, in the order used to break ties when naming :attr:`Occupancy.limiter`."""

REG_SUBPARTITIONS = 4
"""SM sub-partitions sharing the register file (4 on compute capability 7.0 to 9.0)."""

NO_LIMIT = 2**31 - 1
"""The blocks a limit allows when it does not bind (Apple: no threadgroup memory, no published
per-core threadgroup limit)."""


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, unit: int) -> int:
    return _ceil_div(a, unit) * unit


@dataclass(frozen=True)
class Occupancy:
    """Result of :func:`occupancy` for one kernel launch shape on one GPU.

    ``limits`` holds ``(name, blocks)`` for every limit in :data:`LIMIT_NAMES` order;
    ``limiter`` is the first name whose limit equals ``blocks_per_sm`` and ``limiters`` all of
    them (ties are common: 1024-thread blocks are limited by threads and warps alike).
    ``occupancy`` is ``active_warps_per_sm / max_warps_per_sm``.
    """

    threads_per_block: int
    warps_per_block: int
    blocks_per_sm: int
    active_warps_per_sm: int
    occupancy: float
    limiter: str
    limiters: tuple[str, ...]
    limits: tuple[tuple[str, int], ...]
    regs_per_warp_allocated: int
    regs_per_block_allocated: int
    smem_per_block_allocated_bytes: int

    @property
    def fits(self) -> bool:
        """True when at least one block can be resident on an SM."""
        return self.blocks_per_sm >= 1

    def limit(self, name: str) -> int:
        """Blocks per SM allowed by the limit ``name`` (one of :data:`LIMIT_NAMES`)."""
        for n, v in self.limits:
            if n == name:
                return v
        raise ValueError(f"limit name {name!r} is not one of {', '.join(LIMIT_NAMES)}")


def _check_int(field: str, value, lo: int, hi: int, hi_name: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{field} = {value!r}: must be an integer")
    if value < lo or value > hi:
        raise ValueError(f"{field} = {value}: must be in {lo}..{hi} ({hi_name} = {hi})")


def occupancy(hw, threads_per_block: int, regs_per_thread: int,
              smem_bytes_per_block: int) -> Occupancy:
    """Theoretical occupancy of a kernel on ``hw`` (a :class:`~tilesim.hardware.HardwareSpec`),
    by its vendor's rules (:func:`nvidia_occupancy`, :func:`apple_occupancy`).

    ``smem_bytes_per_block`` is the static plus dynamic shared memory of one block, without the
    driver's per-block reservation (which is added here). Raises ``ValueError`` naming the field,
    the value and the limit when ``threads_per_block`` is outside ``1..max_threads_per_block``,
    ``regs_per_thread`` outside ``1..max_regs_per_thread`` or ``smem_bytes_per_block`` outside
    ``0..smem_per_block_optin_bytes``, and for a vendor without occupancy rules. See the module
    docstring for the rules.
    """
    _check_int("threads_per_block", threads_per_block, 1, hw.max_threads_per_block,
               "max_threads_per_block")
    _check_int("regs_per_thread", regs_per_thread, 1, hw.max_regs_per_thread, "max_regs_per_thread")
    _check_int("smem_bytes_per_block", smem_bytes_per_block, 0, hw.smem_per_block_optin_bytes,
               "smem_per_block_optin_bytes")
    rules = _RULES.get(hw.vendor)
    if rules is None:
        raise ValueError(f"hw.vendor = {hw.vendor!r}: no occupancy rules; known: {', '.join(_RULES)}")
    return rules(hw, threads_per_block, regs_per_thread, smem_bytes_per_block)


def nvidia_occupancy(hw, threads_per_block: int, regs_per_thread: int,
                     smem_bytes_per_block: int) -> Occupancy:
    """NVIDIA's occupancy-calculator rules (module docstring); arguments as :func:`occupancy`, unchecked."""
    warps_per_block = _ceil_div(threads_per_block, hw.warp_size)

    lim_threads = hw.max_threads_per_sm // (warps_per_block * hw.warp_size)
    lim_warps = hw.max_warps_per_sm // warps_per_block

    regs_per_warp = _round_up(regs_per_thread * hw.warp_size, hw.reg_alloc_unit)
    regs_per_block = regs_per_warp * warps_per_block
    regs_per_block_limit = hw.regs_per_sm  # regsPerBlock == regsPerMultiprocessor in the catalog
    regs_assumed = regs_per_warp * _round_up(warps_per_block, REG_SUBPARTITIONS)
    if regs_assumed > regs_per_block_limit or regs_per_block > regs_per_block_limit:
        lim_regs = 0
    else:
        warps_per_subpartition = (hw.regs_per_sm // REG_SUBPARTITIONS) // regs_per_warp
        lim_regs = (warps_per_subpartition * REG_SUBPARTITIONS) // warps_per_block

    smem_alloc = _round_up(smem_bytes_per_block + hw.smem_reserved_per_block_bytes,
                           hw.smem_alloc_unit_bytes)
    lim_smem = hw.smem_per_sm_bytes // smem_alloc

    lim_blocks = hw.max_blocks_per_sm

    limits = (("threads", lim_threads), ("warps", lim_warps), ("registers", lim_regs),
              ("shared_memory", lim_smem), ("blocks", lim_blocks))
    return _result(hw, threads_per_block, warps_per_block, limits, regs_per_warp, regs_per_block, smem_alloc)


def apple_occupancy(hw, threads_per_block: int, regs_per_thread: int,
                    smem_bytes_per_block: int) -> Occupancy:
    """Apple's rules as far as they are published (module docstring); arguments as :func:`occupancy`."""
    warps_per_block = _ceil_div(threads_per_block, hw.warp_size)
    lim_threads = hw.max_threads_per_sm // (warps_per_block * hw.warp_size)
    lim_warps = hw.max_warps_per_sm // warps_per_block
    regs_per_warp = regs_per_thread * hw.warp_size
    regs_per_block = regs_per_warp * warps_per_block
    lim_regs = hw.regs_per_sm // regs_per_block
    smem_alloc = _round_up(smem_bytes_per_block, hw.smem_alloc_unit_bytes)
    lim_smem = hw.smem_per_sm_bytes // smem_alloc if smem_alloc else NO_LIMIT
    limits = (("threads", lim_threads), ("warps", lim_warps), ("registers", lim_regs),
              ("shared_memory", lim_smem), ("blocks", NO_LIMIT))
    return _result(hw, threads_per_block, warps_per_block, limits, regs_per_warp, regs_per_block, smem_alloc)


_RULES = {"nvidia": nvidia_occupancy, "apple": apple_occupancy}


def _result(hw, threads_per_block: int, warps_per_block: int, limits: tuple, regs_per_warp: int,
            regs_per_block: int, smem_alloc: int) -> Occupancy:
    blocks = min(v for _, v in limits)
    limiters = tuple(n for n, v in limits if v == blocks)
    active_warps = blocks * warps_per_block
    return Occupancy(
        threads_per_block=threads_per_block,
        warps_per_block=warps_per_block,
        blocks_per_sm=blocks,
        active_warps_per_sm=active_warps,
        occupancy=active_warps / hw.max_warps_per_sm,
        limiter=limiters[0],
        limiters=limiters,
        limits=limits,
        regs_per_warp_allocated=regs_per_warp,
        regs_per_block_allocated=regs_per_block,
        smem_per_block_allocated_bytes=smem_alloc,
    )
