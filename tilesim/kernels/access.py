"""Access-pattern arithmetic shared by kernel families: sectors, cache lines and bank conflicts.

These functions look at the byte addresses that the 32 lanes of one warp instruction touch and
count what the memory system must do for it, the way the hardware splits a request:

* global memory: distinct 32-byte sectors (what L2 sees) and distinct 128-byte lines (L1 data-stage
  wavefronts);
* shared memory: wavefronts = the number of passes the 32 banks need. Accesses wider than 4 bytes
  are served in phases (8-byte: two half-warps, 16-byte: four quarter-warps); within a phase each
  bank serves one 4-byte word per wavefront, and lanes reading the same word are broadcast.
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


def smem_wavefronts(addresses: Sequence[int | None], width_bytes: int, banks: int = 32,
                    bank_width_bytes: int = 4) -> int:
    """Shared-memory wavefronts for one warp instruction; ``None`` marks an inactive lane."""
    if width_bytes not in (4, 8, 16):
        raise ValueError(f"width_bytes must be 4, 8 or 16, got {width_bytes}")
    lanes_per_phase = {4: 32, 8: 16, 16: 8}[width_bytes]
    total = 0
    for p in range(0, len(addresses), lanes_per_phase):
        words_per_bank: dict[int, set[int]] = {}
        for a in addresses[p:p + lanes_per_phase]:
            if a is None:
                continue
            for off in range(0, width_bytes, bank_width_bytes):
                word = (a + off) // bank_width_bytes
                words_per_bank.setdefault(word % banks, set()).add(word)
        if words_per_bank:
            total += max(len(w) for w in words_per_bank.values())
    return total


def ideal_wavefronts(active_lanes: int, width_bytes: int, banks: int = 32, bank_width_bytes: int = 4) -> int:
    """Wavefronts a conflict-free access of this width needs (ceil of bytes / bank row)."""
    return max(1, -(-(active_lanes * width_bytes) // (banks * bank_width_bytes)))
