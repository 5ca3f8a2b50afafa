"""What a 16-byte cp.async fetches from the L2 (issue #9, the ragged tensor-core shape 3001x4000x2008).

Stories: the L1 fetches a 16-byte cp.async's sectors pair of lanes by pair of lanes, so a row slab that starts
in the middle of a sector fetches its middle sector twice; Nsight Compute's count of the sectors the SMs
receive (tc_feed_probe's copy rows) is exactly that count on every profiled row and the distinct sectors are
not, and the calibrated profile's field is what the record gives; the step cost charges those sectors to the
L2 for 16-byte cp.async only, and a GPU without the measurement keeps the distinct sectors; the engine's L2
traffic of a tensor-core GEMM at K = 2008 follows."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tilesim import hardware, simulate
from tilesim.cost import step_cost
from tilesim.cost.access import grouped_sectors
from tilesim.kernels.tc_gemm.config import TcGemmConfig
from tilesim.program import GlobalLoad, Step, TileRef, WarpAccess
from validation.calibration import tc_feed_probe as t

SPLIT = Path(__file__).resolve().parents[1] / "validation" / "results" / "h200" / "calibration" / "tc_feed_ncu_split"
FIELD = "ldgsts16_sector_group_lanes"


def _without_field(hw):
    return dataclasses.replace(hw, values=tuple((k, v) for k, v in hw.values if k != FIELD))


def _rows(pitch_bytes: int, rows: int = 8) -> tuple[int, ...]:
    """A warp copying ``rows`` row slabs of 64 bytes (4 lanes of 16 bytes a row), rows ``pitch_bytes`` apart."""
    return tuple(r * pitch_bytes + c * 16 for r in range(rows) for c in range(4))


def _record():
    return (SPLIT / "ncu.csv").read_text(), json.loads((SPLIT / "tc_feed.json").read_text())


def test_a_row_starting_mid_sector_fetches_its_middle_sector_once_per_lane_pair():
    aligned = (0, 16, 32, 48)  # 64 bytes from a sector boundary: pairs (0,16) and (32,48), one sector each
    mid = (16, 32, 48, 64)  # from the middle of a sector: pairs (16,32) and (48,64) both touch sector 1
    assert grouped_sectors(aligned, 16, 2) == 2
    assert grouped_sectors(mid, 16, 2) == 4
    assert grouped_sectors(mid, 16, 32) == 3  # the distinct sectors
    assert grouped_sectors((None, None, 16, 32), 16, 2) == 2  # inactive lanes fetch nothing
    with pytest.raises(ValueError, match="group_lanes"):
        grouped_sectors(mid, 16, 0)


def test_the_sms_receive_the_lane_pair_sectors_on_every_profiled_row():
    text, rec = _record()
    rows = t.profiled_copy_rows(text, rec)
    assert {(r["a_pitch"], r["b_pitch"]) for r in rows} == {(2048, 2048), (2008, 2048), (2008, 4000)}
    for r in rows:
        got = r["per_kstep"][t.NCU_XBAR_SECTORS]
        assert t.grouped_copy_sectors(r["a_pitch"], r["b_pitch"], 2, r["ksteps"]) == pytest.approx(got, rel=1e-3)
        if r["a_pitch"] == 2008:  # 640 received, 576 distinct: the distinct count misses by 10%
            assert t.grouped_copy_sectors(r["a_pitch"], r["b_pitch"], 32, r["ksteps"]) < 0.91 * got


def test_the_profile_field_is_what_the_record_gives():
    text, rec = _record()
    got = t.sector_group_fields(text, rec)[FIELD]
    assert got["value"] == 2 and got["n"] == 18
    assert hardware.load("h200").get(FIELD) == got["value"]
    assert t.sector_group_fields("", {"copy": {}, "meta": rec["meta"]}) == {}  # no counters, no field
    with pytest.raises(ValueError, match="launches"):
        t.profiled_copy_rows(text, {**rec, "copy": dict(list(rec["copy"].items())[:3])})


def _copy(pitch_bytes: int, dest: str = "async") -> Step:
    offs = _rows(pitch_bytes)
    return Step(loads=(GlobalLoad(TileRef("A", ("k",), 8 * 64), (WarpAccess(offs, 16, offs),), dest=dest),))


def test_the_step_charges_the_l2_the_lane_pair_sectors_of_16_byte_copies_only():
    hw = hardware.load("h200")
    assert step_cost(_copy(4096), hw, 1).load_l2_bytes == 16 * 32  # aligned rows: 2 sectors a row either way
    # rows 4016 B apart: odd rows start mid-sector, 4 sectors fetched (3 distinct), even rows 2
    assert step_cost(_copy(4016), hw, 1).load_l2_bytes == (4 * 4 + 4 * 2) * 32
    assert step_cost(_copy(4016), _without_field(hw), 1).load_l2_bytes == (4 * 3 + 4 * 2) * 32
    # loads through registers keep the distinct sectors
    assert step_cost(_copy(4016, dest="register"), hw, 1).load_l2_bytes == (4 * 3 + 4 * 2) * 32
    # and so do 4-byte cp.async copies (not measured): 128 bytes from the middle of a sector, 5 sectors
    small = tuple(16 + 4 * lane for lane in range(32))
    four = Step(loads=(GlobalLoad(TileRef("A", ("k",), 128), (WarpAccess(small, 4, small),), dest="async"),))
    assert step_cost(four, hw, 1).load_l2_bytes == 5 * 32


def test_a_ragged_tensor_core_gemm_moves_the_lane_pair_sectors_through_the_l2():
    hw = hardware.load("h200")
    cfg = TcGemmConfig(m=3001, n=4000, k=2008, instruction="mma_sync", bm=128, bn=128, bk=32, wm=64, wn=64,
                       layout="swizzled", stages=3, b_layout="col")
    aligned = dataclasses.replace(cfg, k=2048)
    with_pairs, distinct = simulate(cfg, hw), simulate(cfg, _without_field(hw))
    # A and (column-major) B tiles of 128 rows 4016 B apart: a k-step fetches 2 x 384 sectors a block, not 2 x 320
    # (half the rows start mid-sector: 4 sectors fetched, 3 distinct); the epilogue's stores are the rest
    assert with_pairs.traffic.l2_bytes / distinct.traffic.l2_bytes == pytest.approx(384 / 320, rel=0.02)
    assert simulate(aligned, hw).traffic.l2_bytes == simulate(aligned, _without_field(hw)).traffic.l2_bytes
    assert with_pairs.time_s > distinct.time_s
