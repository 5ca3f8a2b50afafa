"""Access-pattern arithmetic of the cost model: sectors, cache lines and bank conflicts.

These functions look at the byte addresses that the 32 lanes of one warp instruction touch and
count what the memory system must do for it, the way the hardware splits a request:

* global memory: distinct 32-byte sectors (what L2 sees) and distinct 128-byte lines (L1 data-stage
  wavefronts);
* shared memory: wavefronts = the number of passes the 32 banks need: each bank serves one
  4-byte word per wavefront, and lanes reading the same word are broadcast; 16-byte accesses are
  served per half-warp.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache


def add_sectors(sectors: set, addresses: Sequence[int], width_bytes: int, sector_bytes: int) -> None:
    """Add to ``sectors`` the sectors (or lines: units of ``sector_bytes``) that accesses of ``width_bytes``
    at the byte ``addresses`` touch, read 4 bytes at a time: ``(a + off) // sector_bytes`` for ``off`` in
    ``range(0, width_bytes, 4)``; that is every unit from the first such byte's to the last's, since
    steps of 4 bytes skip none of 4 bytes or more."""
    offsets = range(0, width_bytes, 4)
    if not offsets:
        return
    last = offsets[-1]
    if last < sector_bytes:  # at most two units an access: its first byte's and its last's
        sectors.update([a // sector_bytes for a in addresses])
        if last:
            sectors.update([(a + last) // sector_bytes for a in addresses])
    elif sector_bytes >= 4:
        for a in addresses:
            sectors.update(range(a // sector_bytes, (a + last) // sector_bytes + 1))
    else:
        sectors.update((a + off) // sector_bytes for a in addresses for off in offsets)


def global_sectors_and_lines(addresses: Sequence[int], width_bytes: int, sector_bytes: int = 32,
                             line_bytes: int = 128) -> tuple[int, int]:
    """Distinct sectors and lines touched by one warp instruction's lane addresses (byte addresses)."""
    sectors: set[int] = set()
    lines: set[int] = set()
    add_sectors(sectors, addresses, width_bytes, sector_bytes)
    add_sectors(lines, addresses, width_bytes, line_bytes)
    return len(sectors), len(lines)


#: lanes served together per access width: 16-byte accesses are served per half-warp
LANES_PER_PHASE = {4: 32, 8: 32, 16: 16}


def smem_wavefronts(addresses: Sequence[int | None], width_bytes: int, banks: int = 32,
                    bank_width_bytes: int = 4) -> int:
    """Shared-memory wavefronts for one warp instruction; ``None`` marks an inactive lane.

    Within a phase each bank serves one distinct 4-byte word per wavefront, and lanes reading the
    same word share it (broadcast): a phase costs the largest number of distinct words any bank
    must serve. 4- and 8-byte accesses are one phase of 32 lanes; 16-byte accesses are two phases
    of 16 lanes (:data:`LANES_PER_PHASE`), and a phase whose two quarter-warps read a common
    16-byte chunk takes two passes unless the whole phase reads one chunk. (Both read off Nsight
    Compute's wavefront counts of the register- and warp-tiled GEMMs on the H200,
    validation/results/h200/counters.csv, and confirmed pattern by pattern, two patterns never
    fitted, by validation/staging_probe.py's LDS.128 probe.)
    """
    if width_bytes not in LANES_PER_PHASE:
        raise ValueError(f"width_bytes must be 4, 8 or 16, got {width_bytes}")
    return _smem_wavefronts(tuple(addresses), width_bytes, banks, bank_width_bytes)


@lru_cache(maxsize=65536)
def _smem_wavefronts(addresses: tuple, width_bytes: int, banks: int, bank_width_bytes: int) -> int:
    """:func:`smem_wavefronts` of a tuple of lane addresses (a pure function: kept, since the
    lowering repeats a few warp access patterns over many steps and configurations)."""
    per = LANES_PER_PHASE[width_bytes]
    total = 0
    for p in range(0, len(addresses), per):
        phase = addresses[p:p + per]
        words_per_bank: dict[int, set[int]] = {}
        for a in phase:
            if a is None:
                continue
            for off in range(0, width_bytes, bank_width_bytes):
                word = (a + off) // bank_width_bytes
                words_per_bank.setdefault(word % banks, set()).add(word)
        cost = max((len(w) for w in words_per_bank.values()), default=0)
        if width_bytes == 16 and _split_across_quarters(phase):
            cost *= 2
        total += cost
    return total


def _split_across_quarters(phase: Sequence[int | None]) -> bool:
    """A 16-byte half-warp phase in which lanes of both quarter-warps read the same chunk (and the
    half reads more than one chunk) takes two passes: broadcast reaches only within a quarter-warp."""
    q0 = {a for a in phase[:8] if a is not None}
    q1 = {a for a in phase[8:] if a is not None}
    return bool(q0 & q1) and len(q0 | q1) > 1


def ideal_wavefronts(active_lanes: int, width_bytes: int, banks: int = 32, bank_width_bytes: int = 4) -> int:
    """Wavefronts a conflict-free access of this width needs (ceil of bytes / bank row; one for an
    instruction whose lanes are all predicated off, which still takes a pass)."""
    return max(1, -(-(active_lanes * width_bytes) // (banks * bank_width_bytes)))


def ldgsts_wavefronts(global_addresses: Sequence[int], shared_addresses: Sequence[int | None],
                      width_bytes: int, hw) -> float:
    """Shared-memory wavefronts of one warp's cp.async (LDGSTS) instruction.

    A 16-byte copy bypasses L1 and costs ``hw.ldgsts_bypass_wavefronts``. A 4-byte copy is
    allocated in L1 and written line by line: ``ldgsts_wavefronts_per_line`` per 128-byte global
    line the warp touches, plus ``ldgsts_wavefronts_per_conflict`` per extra wavefront its shared
    stores' bank conflicts add. (Rule and rates from validation/staging_probe.py: with the same
    global reads, conflict-free stores cost one wavefront per line, and 4-way conflicted ones add
    about twice their extra store wavefronts.)
    """
    if width_bytes >= 16:
        return hw.ldgsts_bypass_wavefronts
    _, lines = global_sectors_and_lines(global_addresses, width_bytes, hw.sector_bytes, 4 * hw.sector_bytes)
    active = [a for a in shared_addresses if a is not None]
    extra = (smem_wavefronts(shared_addresses, width_bytes, hw.smem_banks, hw.smem_bank_width_bytes)
             - ideal_wavefronts(len(active), width_bytes, hw.smem_banks, hw.smem_bank_width_bytes))
    return lines * hw.ldgsts_wavefronts_per_line + max(0, extra) * hw.ldgsts_wavefronts_per_conflict


def l1_cycles(addresses: Sequence[int], width_bytes: int, hw) -> float:
    """L1 cycles one warp load instruction occupies on its SM.

    The L1's data stage reads one sector per clock from each of the four sector positions of a
    128-byte line (four 32-byte banks: ``l1_bytes_per_clk_per_sm`` in all), so an instruction costs
    the largest number of distinct sectors sharing one position, and at least one request slot
    (``l1_requests_per_clk_per_sm``). Lanes in different lines at the same offset (a column walk
    with a row stride that is a multiple of 128 bytes) serialise; a coalesced 128-byte access
    takes one clock. However the sectors spread over the positions, the L1 serves at most
    ``l1_lines_per_clk_per_sm`` distinct lines per clock. (Checked by validation/calibrate.py:
    scattered 4-byte loads at strides of 1152 B and 16 KiB, all lanes at one position, run at one
    line per clock; ``l1_scatter_spread`` measures strides that spread the lanes over the positions.)
    """
    return _l1_cycles(tuple(addresses), width_bytes, hw.sector_bytes, hw.l1_requests_per_clk_per_sm,
                      hw.l1_bytes_per_clk_per_sm, hw.l1_lines_per_clk_per_sm)


@lru_cache(maxsize=65536)
def _l1_cycles(addresses: tuple, width_bytes: int, sector: int, requests_per_clk: float, bytes_per_clk: float,
               lines_per_clk: float) -> float:
    """:func:`l1_cycles` of a tuple of lane addresses and the L1's rates (kept, as
    :func:`_smem_wavefronts` is)."""
    positions = 4
    sectors: set[int] = set()
    add_sectors(sectors, addresses, width_bytes, sector)
    per_pos: dict[int, int] = {}
    for sc in sectors:
        per_pos[sc % positions] = per_pos.get(sc % positions, 0) + 1
    worst = max(per_pos.values(), default=0)
    lines = len({sc // positions for sc in sectors})
    return max(1.0 / requests_per_clk, worst * sector * positions / bytes_per_clk, lines / lines_per_clk)


def grouped_sectors(addresses: Sequence[int | None], width_bytes: int, group_lanes: int, sector_bytes: int = 32) -> int:
    """Sectors one warp instruction fetches from the L2 when the L1 fetches its lanes in groups of
    ``group_lanes`` consecutive lanes (lane ``i`` in group ``i // group_lanes``; ``None`` marks an
    inactive lane): each group fetches the distinct sectors its own lanes touch, so a sector that two
    groups touch is fetched twice. With ``group_lanes`` = 32 this is the instruction's distinct sectors.

    For 16-byte cp.async the H200 fetches per pair of lanes (``ldgsts16_sector_group_lanes`` = 2,
    tc_feed_probe: Nsight Compute's l1tex__m_xbar2l1tex_read_sectors is 640 a k-step for fp16 rows 4016 B
    apart, whose odd rows start mid-sector, against 576 distinct sectors, and 512 for aligned rows)."""
    if group_lanes < 1:
        raise ValueError(f"group_lanes must be >= 1, got {group_lanes}")
    total = 0
    for g in range(0, len(addresses), group_lanes):
        total += len({(a + off) // sector_bytes for a in addresses[g:g + group_lanes] if a is not None
                      for off in range(0, max(width_bytes, 4), 4)})
    return total


def ldgsts_line_writes(addresses: Sequence[int | None], shared: Sequence[int | None], width_bytes: int,
                       sector_bytes: int = 32) -> int:
    """Shared-memory writes of one 16-byte cp.async warp instruction: one per 128-byte global line it reads,
    two where that line's bytes land on more shared sectors than they fill in the line (a 64-byte row of
    tc_gemm's padded layout starting 16 bytes into a sector: 3 shared sectors for 2 global ones; an XOR
    swizzle of 16-byte chunks keeps a sector's two chunks in one sector, and rows that start mid-sector in
    global memory spread fewer shared sectors than global ones: one write). Nsight Compute's shared
    wavefronts per LDGSTS in ldgsts_layout_probe's cp.async.ca rows
    (validation/results/h200/calibration/ldgsts_layout.json): one 512-byte row 4, two 256-byte rows 4, eight
    64-byte rows swizzled 8, at the padded 80-byte pitch 12 (its four odd rows start mid-sector); the suite's
    own copies, 7.3 swizzled and 13.3 padded (calibration/wmma_feed_ncu/)."""
    got: dict[int, set] = {}  # global line -> its global sectors
    put: dict[int, set] = {}  # global line -> the shared sectors its bytes land on
    for a, s in zip(addresses, shared, strict=True):
        if a is None or s is None:
            continue
        for off in range(0, max(width_bytes, 4), 4):
            line = (a + off) // (4 * sector_bytes)
            got.setdefault(line, set()).add((a + off) // sector_bytes)
            put.setdefault(line, set()).add((s + off) // sector_bytes)
    return sum(2 if len(put[line]) > len(got[line]) else 1 for line in got)


def ldgsts_fetched_sectors(addresses: Sequence[int | None], shared: Sequence[int | None], width_bytes: int,
                           group_lanes: int, sector_bytes: int = 32) -> int:
    """Sectors the L1 takes in for one 16-byte cp.async warp instruction whose lane ``i`` copies global
    offset ``addresses[i]`` to shared offset ``shared[i]``: per 128-byte global line (4 sectors), the larger
    of the sectors its lane groups fetch there (:func:`grouped_sectors`, each group's sectors in that line)
    and the 32-byte shared-memory sectors the line's bytes are written to. With sector-aligned shared
    destinations (dense or XOR-swizzled rows) the second is never the larger and this is
    :func:`grouped_sectors`; a row slab whose shared copy starts mid-sector (tc_gemm's padded rows,
    pitch LC + 1 chunks, every other row 16 bytes into a sector) spreads a line's 2 or 4 sectors over 3 or
    5 shared sectors.

    Measured (mma_feed_probe group gemm_traffic_ragged, Nsight Compute
    validation/results/h200/calibration/mma_feed_ncu/ncu_ragged_b2_gemm_and_pad.csv): tc_gemm's load_tile of
    the same aligned global addresses into the swizzled layout takes l1tex__t_sectors 67,608 an SM, into
    the padded one (A rows of 80 B, B rows of 272 B) 80,280: 2 blocks x 66 k-steps x (512 + 96) sectors,
    and this rule gives 512 + 96 (A +64: one a 64-byte odd row; B +32: one a line of a 256-byte odd row)."""
    if group_lanes < 1:
        raise ValueError(f"group_lanes must be >= 1, got {group_lanes}")
    per_line = sector_bytes * 4
    lane_sectors: dict[int, int] = {}  # line -> sectors the lane groups fetch in it
    for g in range(0, len(addresses), group_lanes):
        got = {(a + off) // sector_bytes for a in addresses[g:g + group_lanes] if a is not None
               for off in range(0, max(width_bytes, 4), 4)}
        for sc in got:
            line = sc * sector_bytes // per_line
            lane_sectors[line] = lane_sectors.get(line, 0) + 1
    written: dict[int, set[int]] = {}  # line -> shared sectors its bytes are written to
    for a, s in zip(addresses, shared, strict=True):
        if a is None or s is None:
            continue
        for off in range(0, max(width_bytes, 4), 4):
            written.setdefault((a + off) // per_line, set()).add((s + off) // sector_bytes)
    return sum(max(n, len(written.get(line, ()))) for line, n in lane_sectors.items())


def l1_miss_requests(addresses: Sequence[int], width_bytes: int, hw, requested: set[int]) -> int:
    """Requests one warp load instruction sends down the L1's miss path when its lines are not in
    the L1: one per line holding a sector that no earlier instruction of the same load asked for
    (``requested``, the sectors asked for so far, which this updates; a later instruction reading a
    sector already on its way waits for it and sends nothing). The miss path sends one line a clock
    to the L2 (``l1_miss_lines_per_clk_per_sm``, uncoalesced_probe: 32-line loads from the L2 take 32
    clocks each whether the lanes' sectors sit at one position of their lines or spread over four,
    while L1 hits of the spread ones take 8.5)."""
    sectors: set[int] = set()
    add_sectors(sectors, addresses, width_bytes, hw.sector_bytes)
    new = sectors - requested
    requested |= new
    return len({sc // 4 for sc in new})


def useful_bytes(instructions) -> int:
    """Distinct bytes a set of warp instructions (:class:`~tilesim.program.WarpAccess`) touches."""
    seen: dict[int, set] = {}  # width -> the distinct addresses accessed at that width
    for w in instructions:
        got = seen.get(w.width_bytes)
        if got is None:
            got = seen[w.width_bytes] = set()
        got.update(w.offsets)
    return sum(width * len(addresses - {None}) for width, addresses in seen.items())
