"""Access-pattern arithmetic: wavefronts of shared-memory accesses and cp.async copies."""

from __future__ import annotations

import pytest

from tilesim import hardware
from tilesim.cost.access import l1_cycles, ldgsts_wavefronts, smem_wavefronts


def _lds128(chunk_of_lane):
    return smem_wavefronts([chunk_of_lane(lane) * 16 for lane in range(32)], 16)


def test_16_byte_loads_pass_per_half_warp_and_split_when_quarters_share_a_chunk():
    assert _lds128(lambda lane: lane // 16) == 2  # each half reads one chunk: one pass each
    assert _lds128(lambda lane: lane // 4) == 2  # quarters read different chunks: one pass per half
    assert _lds128(lambda lane: lane % 8) == 4  # both quarters of a half read chunks 0-7: two passes
    assert _lds128(lambda lane: lane % 4) == 4  # only 64 distinct bytes, still two passes per half
    assert _lds128(lambda lane: lane) == 4  # 256 distinct bytes per half


def test_4_byte_accesses_count_bank_conflicts_and_broadcast():
    assert smem_wavefronts([lane * 4 for lane in range(32)], 4) == 1
    assert smem_wavefronts([lane * 128 for lane in range(32)], 4) == 32  # one bank, 32 words
    assert smem_wavefronts([0] * 32, 4) == 1  # broadcast
    with pytest.raises(ValueError, match="width_bytes"):
        smem_wavefronts([0], 12)


def test_ldgsts_costs_lines_plus_conflict_surcharge():
    hw = hardware.with_overrides(hardware.load("h200"), ldgsts_wavefronts_per_line=1.0,
                                 ldgsts_wavefronts_per_conflict=2.0, ldgsts_bypass_wavefronts=0.5)
    contiguous = [lane * 4 for lane in range(32)]
    assert ldgsts_wavefronts(contiguous, contiguous, 4, hw) == 1.0
    rows = [(lane // 4) * 4096 + (lane % 4) * 16 for lane in range(32)]  # 8 lines
    transposed = [((lane % 4) * 4) * 512 + (lane // 4) * 4 for lane in range(32)]  # 4-way conflicts
    assert ldgsts_wavefronts(rows, contiguous, 4, hw) == 8.0
    assert ldgsts_wavefronts(rows, transposed, 4, hw) == 8.0 + 3 * 2.0
    assert ldgsts_wavefronts(rows, contiguous, 16, hw) == 0.5


def test_l1_cycles_serialise_a_sector_position_and_cap_distinct_lines_per_clock():
    hw = hardware.with_overrides(hardware.load("h200"), l1_bytes_per_clk_per_sm=128.0,
                                 l1_requests_per_clk_per_sm=1.0, l1_lines_per_clk_per_sm=2.0)
    aliased = [lane * 16384 for lane in range(32)]  # every lane's sector at position 0: 32 clocks
    spread = [lane * 4000 for lane in range(32)]  # 125 sectors apart: 8 lanes per position
    coalesced = [lane * 4 for lane in range(32)]  # one line
    assert l1_cycles(aliased, 4, hw) == pytest.approx(32.0)
    assert l1_cycles(spread, 4, hw) == pytest.approx(16.0)  # 32 lines at 2 per clock, not 8 by positions
    assert l1_cycles(coalesced, 4, hw) == pytest.approx(1.0)
    four = hardware.with_overrides(hw, l1_lines_per_clk_per_sm=4.0)
    assert l1_cycles(spread, 4, four) == pytest.approx(8.0)  # then the positions decide


def _copy_pattern(rows: int, shared_pitch: int, global_pitch: int = 4096, swizzle: bool = False):
    """One 16-byte cp.async warp instruction: lane i copies row i // (32 / rows), chunk i % (32 / rows)."""
    per_row = 32 // rows
    g, s = [], []
    for i in range(32):
        r, c = divmod(i, per_row)
        g.append(r * global_pitch + c * 16)
        if swizzle:  # tc_gemm's XOR of 16-byte chunks within 128-byte spans
            chunks = min(per_row * 16, 128) // 16
            high, low = divmod(c, chunks)
            low ^= (r // max(1, 128 // (per_row * 16))) % chunks
            c = high * chunks + low
        s.append(r * shared_pitch + c * 16)
    return g, s


def test_a_copy_writes_shared_memory_once_per_line_twice_where_a_line_lands_mid_sector():
    """Nsight Compute's shared wavefronts per LDGSTS (ldgsts_layout_probe's cp.async.ca rows): one 512-byte row 4,
    two 256-byte rows 4, eight 64-byte rows swizzled 8, the same at tc_gemm's padded 80-byte pitch 12."""
    from tilesim.cost.access import ldgsts_line_writes

    assert ldgsts_line_writes(*_copy_pattern(1, 512), 16) == 4
    assert ldgsts_line_writes(*_copy_pattern(2, 256), 16) == 4
    assert ldgsts_line_writes(*_copy_pattern(8, 64, swizzle=True), 16) == 8
    assert ldgsts_line_writes(*_copy_pattern(8, 80), 16) == 12
    # rows that start mid-sector in global memory land on fewer shared sectors than they fill: one write a
    # line (their cost is the straddle rule's, StepCost.copy_straddle_cycles)
    g, s = _copy_pattern(8, 64, global_pitch=4016)
    assert ldgsts_line_writes(g, s, 16) == len({(a + o) // 128 for a in g for o in (0, 15)})
