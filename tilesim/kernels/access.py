"""Access-pattern arithmetic shared by kernel families: sectors, cache lines and bank conflicts.

These functions look at the byte addresses that the 32 lanes of one warp instruction touch and
count what the memory system must do for it, the way the hardware splits a request:

* global memory: distinct 32-byte sectors (what L2 sees) and distinct 128-byte lines (L1 data-stage
  wavefronts);
* shared memory: wavefronts = the number of passes the 32 banks need: each bank serves one
  4-byte word per wavefront, and lanes reading the same word are broadcast; 16-byte accesses are
  served per half-warp.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def global_sectors_and_lines(addresses: Iterable[int], width_bytes: int, sector_bytes: int = 32,
                             line_bytes: int = 128) -> tuple[int, int]:
    """Distinct sectors and lines touched by one warp instruction's lane addresses (byte addresses)."""
    sectors: set[int] = set()
    lines: set[int] = set()
    for a in addresses:
        for off in range(0, width_bytes, 4):
            sectors.add((a + off) // sector_bytes)
            lines.add((a + off) // line_bytes)
    return len(sectors), len(lines)


#: lanes served together per access width: 16-byte accesses are served per half-warp
LANES_PER_PHASE = {4: 32, 8: 32, 16: 16}


def smem_wavefronts(addresses: Sequence[int | None], width_bytes: int, banks: int = 32,
                    bank_width_bytes: int = 4) -> int:
    """Shared-memory wavefronts for one warp instruction; ``None`` marks an inactive lane.

    Within a phase each bank serves one distinct 4-byte word per wavefront, and lanes reading the
    same word share it (broadcast): a phase costs the largest number of distinct words any bank
    must serve. 4- and 8-byte accesses are one phase of 32 lanes; 16-byte accesses are two phases
    of 16 lanes (:data:`LANES_PER_PHASE`; chosen against Nsight Compute's wavefront counts of
    the register-tiled kernels on the H200, see validation/results/h200/counters.csv).
    """
    if width_bytes not in LANES_PER_PHASE:
        raise ValueError(f"width_bytes must be 4, 8 or 16, got {width_bytes}")
    per = LANES_PER_PHASE[width_bytes]
    total = 0
    for p in range(0, len(addresses), per):
        words_per_bank: dict[int, set[int]] = {}
        for a in addresses[p:p + per]:
            if a is None:
                continue
            for off in range(0, width_bytes, bank_width_bytes):
                word = (a + off) // bank_width_bytes
                words_per_bank.setdefault(word % banks, set()).add(word)
        total += max((len(w) for w in words_per_bank.values()), default=0)
    return total


def ideal_wavefronts(active_lanes: int, width_bytes: int, banks: int = 32, bank_width_bytes: int = 4) -> int:
    """Wavefronts a conflict-free access of this width needs (ceil of bytes / bank row)."""
    return max(1, -(-(active_lanes * width_bytes) // (banks * bank_width_bytes)))


def l1_cycles(addresses: Sequence[int], width_bytes: int, hw) -> float:
    """L1 cycles one warp load instruction occupies on its SM.

    The larger of: one request slot (``l1_requests_per_clk_per_sm``), the bytes over the L1
    bandwidth, the distinct 128-byte lines over the scattered-line rate, and the lines that share
    one set (``l1_set_period_bytes``) over the aliased-line rate. All four rates are measured by
    validation/calibrate.py's microbenchmarks.
    """
    line = 4 * hw.sector_bytes
    lines = {(a + off) // line for a in addresses for off in range(0, width_bytes, 4)}
    sets_per_period = max(1, hw.l1_set_period_bytes // line)
    per_set: dict[int, int] = {}
    for ln in lines:
        per_set[ln % sets_per_period] = per_set.get(ln % sets_per_period, 0) + 1
    worst = max(per_set.values(), default=0)
    cycles = max(1.0 / hw.l1_requests_per_clk_per_sm,
                 len(addresses) * width_bytes / hw.l1_bytes_per_clk_per_sm)
    if len(lines) > 1:
        cycles = max(cycles, len(lines) / hw.l1_lines_per_clk_per_sm,
                     worst / hw.l1_aliased_lines_per_clk_per_sm)
    return cycles
