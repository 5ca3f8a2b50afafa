"""What a 16-byte cp.async into tc_gemm's padded shared rows takes into the L1 (issue #9, the padded layout).

Stories: the same global addresses copied into padded rows (pitch LC + 1 chunks: every other row starts 16
bytes into a shared sector) take more sectors than into dense or swizzled rows; per 128-byte global line the
L1 takes the larger of its lane pairs' sectors and the shared sectors the line's bytes land on; Nsight
Compute's l1tex__t_sectors of mma_feed_probe's gemm_pad row (tc_gemm's load_tile into the padded layout)
against its swizzled twin is exactly that count; rows starting mid-sector in global memory keep the lane-pair
count."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tilesim.cost.access import grouped_sectors, ldgsts_fetched_sectors

NCU = (Path(__file__).resolve().parents[1] / "validation" / "results" / "h200" / "calibration" / "mma_feed_ncu"
       / "ncu_ragged_b2_gemm_and_pad.csv")


def _warp(w: int, lc: int, shared_pitch: int, global_pitch: int, swizzle: bool = False):
    """Warp ``w`` of load_tile's loop over a tile of ``lc`` 16-byte chunks a row: lane i copies chunk
    32 w + i (row i // lc, chunk i % lc) from rows ``global_pitch`` bytes apart into rows of ``shared_pitch``
    chunks (swizzled as tc_gemm's LC = 4 rows when ``swizzle``)."""
    g, s = [], []
    for lane in range(32):
        i = 32 * w + lane
        r, c = divmod(i, lc)
        g.append(r * global_pitch + 16 * c)
        s.append(16 * (r * shared_pitch + ((c ^ ((r // 2) & 3)) if swizzle else c)))
    return g, s


def _kstep(lc_a, pitch_a, lc_b, pitch_b, global_a=4096, global_b=4096, swizzle=False, fn=ldgsts_fetched_sectors):
    """Sectors of one k-step of the probe's 128x32 A and 32x128 B (row-major) fp16 tiles, 16 warps each."""
    total = 0
    for lc, pitch, gp in ((lc_a, pitch_a, global_a), (lc_b, pitch_b, global_b)):
        for w in range(16):
            g, s = _warp(w, lc, pitch, gp, swizzle and lc == 4)
            total += fn(g, s, 16, 2) if fn is ldgsts_fetched_sectors else fn(g, 16, 2)
    return total


def test_aligned_shared_rows_take_the_lane_pair_sectors():
    assert _kstep(4, 4, 16, 16, swizzle=True) == 512
    assert _kstep(4, 4, 16, 16) == 512
    # A rows 4016 B apart (every other one from mid-sector): the lane-pair count, unchanged
    ragged = _kstep(4, 4, 16, 16, global_a=4016, swizzle=True)
    assert ragged == _kstep(4, 4, 16, 16, global_a=4016, fn=grouped_sectors) == 640


def test_padded_rows_take_a_sector_more_a_line_of_an_odd_row():
    odd_row = ([0, 16, 32, 48], [80, 96, 112, 128])  # a 64-byte row into shared bytes 80..143: 3 shared sectors
    assert ldgsts_fetched_sectors(*odd_row, 16, 2) == 3
    assert grouped_sectors(odd_row[0], 16, 2) == 2
    assert _kstep(4, 5, 16, 17) == 512 + 64 + 32  # A: +1 an odd 64-byte row; B: +1 a line of an odd 256-byte row
    with pytest.raises(ValueError, match="group_lanes"):
        ldgsts_fetched_sectors(*odd_row, 16, 0)


def test_nsight_compute_t_sectors_of_the_probe_padded_row_against_swizzled():
    rows = list(csv.reader(NCU.open()))
    head = rows[0]
    name, sec = head.index("Kernel Name"), head.index("l1tex__t_sectors.sum")
    data = [r for r in rows[2:] if r[name].startswith("mfgt_")]
    val = [float(r[sec].replace(",", "")) for r in data]
    # launches in the probe's row order (mma_feed_ncu/README.md): K = 2048 (7 launches), 2008, 2032, then padded
    aligned, padded = val[0], val[-1]
    assert [r[name] for r in data][-1] == "mfgt_gemm_pad_k2_w4_b2_c3"
    assert padded / aligned == pytest.approx(_kstep(4, 5, 16, 17) / _kstep(4, 4, 16, 16, swizzle=True), rel=1e-3)
