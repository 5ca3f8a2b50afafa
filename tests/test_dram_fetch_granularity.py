"""A lone 32-byte sector that misses in the L2 reads its 64-byte pair from DRAM (hbm_tiles_probe under
Nsight Compute: pitch_line, 32 bytes of a fresh line per row each k-step, reads twice its bytes; contig
and pitch read exactly theirs). The calibrated ``hbm_read_granularity_bytes`` carries the 64; a load
marked ``isolated_sectors`` pays it on every L2 miss, every other load (the pair read at another k-step,
where it hits) pays its own bytes, as before."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tilesim.cost import step_cost
from tilesim.engine.sim import simulate_program
from tilesim.hardware import load
from tilesim.program import GlobalLoad, Launch, Phase, Step, TileProgram, TileRef, WarpAccess
from validation.calibration import hbm_tiles_probe as h

CAL = Path(__file__).resolve().parents[1] / "validation" / "results" / "h200" / "calibration"
FIELD = "hbm_read_granularity_bytes"
H200 = load("h200")
SMS = H200.sm_count
PITCH_BYTES = 16 * 1024  # the probe's rows: 16 KiB apart
ROWS = 128  # a 4-warp block's tile: 128 rows x 32 bytes
TRIPS = 64


def _without_field(hw):
    return dataclasses.replace(hw, values=tuple((k, v) for k, v in hw.values if k != FIELD))


def _rows_load(isolated: bool, row_bytes: int = 32) -> GlobalLoad:
    """The probe's staging: each row's ``row_bytes`` in 16-byte pieces, two lanes a 32-byte row, rows
    PITCH_BYTES apart, through registers into shared memory."""
    pieces = [r * PITCH_BYTES + c * 16 for r in range(ROWS) for c in range(row_bytes // 16)]
    instr = tuple(WarpAccess(tuple(pieces[i:i + 32]), 16, tuple(range(16 * i, 16 * i + 512, 16)))
                  for i in range(0, len(pieces), 32))
    return GlobalLoad(TileRef("A", ("bx", "k"), ROWS * row_bytes), instr, dest="shared", bypass_l1=True,
                      isolated_sectors=isolated)


def _program(ld: GlobalLoad) -> TileProgram:
    return TileProgram("rows", Launch((SMS, 1, 1), 128, 32, 8 * 1024), (Phase("k-loop", TRIPS, Step(loads=(ld,))),))


def test_the_profile_field_is_what_the_counter_run_gives():
    text = (CAL / "hbm_tiles_ncu" / "ncu_raw.csv").read_text()
    rec = json.loads((CAL / "hbm_tiles.json").read_text())
    got = h.dram_read_granularity_fields(text, rec)[FIELD]
    assert got["value"] == 64 and got["n"] == 12  # 4 pitch_line cases x 3 launches
    assert H200.get(FIELD) == got["value"]
    assert h.dram_read_granularity_fields("", {"cases": {}}) == {}  # no counter run, no field
    with pytest.raises(ValueError, match="launches"):
        h.dram_read_granularity_fields(text, {**rec, "cases": dict(list(rec["cases"].items())[:40])})


def test_a_counter_run_whose_dense_layouts_read_extra_bytes_gives_no_field():
    """If contig read more than it loads, the extra bytes would not be the lone sector's pair."""
    text = (CAL / "hbm_tiles_ncu" / "ncu_raw.csv").read_text()
    rec = json.loads((CAL / "hbm_tiles.json").read_text())
    halved = {k: {**v, "bytes_loaded": v["bytes_loaded"] // 2} if k.startswith("contig_") else v
              for k, v in rec["cases"].items()}
    assert h.dram_read_granularity_fields(text, {**rec, "cases": halved}) == {}


def test_a_step_of_isolated_sectors_reads_their_pairs_from_dram():
    iso = step_cost(Step(loads=(_rows_load(True),)), H200, 4)
    assert iso.load_l2_bytes_each == [ROWS * 32]
    assert iso.load_dram_bytes_each == [ROWS * 64]
    # the pair read at another k-step (the default), or a GPU without the measurement: the sectors' bytes
    assert step_cost(Step(loads=(_rows_load(False),)), H200, 4).load_dram_bytes_each == [ROWS * 32]
    assert step_cost(Step(loads=(_rows_load(True),)), _without_field(H200), 4).load_dram_bytes_each == [ROWS * 32]
    # 64 bytes a row fill each pair: nothing extra even when marked
    assert step_cost(Step(loads=(_rows_load(True, 64),)), H200, 4).load_dram_bytes_each == [ROWS * 64]


@pytest.mark.parametrize("steady_state", [True, False])
def test_streaming_isolated_sectors_moves_twice_their_bytes_from_hbm(steady_state):
    """Every block reads a fresh 128 x 32-byte tile each k-step: pitch_line's layout reads 2x from HBM
    (138.4 MB for 69.2 MB on the H200 at one block per SM), pitch's (isolated=False) 1x."""
    loaded = SMS * ROWS * 32 * TRIPS
    line = simulate_program(_program(_rows_load(True)), H200, steady_state=steady_state)
    pitch = simulate_program(_program(_rows_load(False)), H200, steady_state=steady_state)
    plain = simulate_program(_program(_rows_load(True)), _without_field(H200), steady_state=steady_state)
    assert pitch.traffic.hbm_read_bytes == pytest.approx(loaded)
    assert plain.traffic.hbm_read_bytes == pytest.approx(loaded)
    assert line.traffic.hbm_read_bytes == pytest.approx(2 * loaded)
    assert line.traffic.l2_load_bytes == pytest.approx(pitch.traffic.l2_load_bytes)
    assert line.time_s >= pitch.time_s


def test_isolated_sectors_must_be_a_bool():
    with pytest.raises(ValueError, match="GlobalLoad\\(A\\).isolated_sectors"):
        GlobalLoad(TileRef("A", ("k",), 32), (WarpAccess((0,), 16),), isolated_sectors=1)
