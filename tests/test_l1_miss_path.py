"""The L1's miss path (issue #10): loads whose lanes touch 32 lines, as the thread-per-row kernels
issue them, measured by ``validation/calibration/uncoalesced_probe.py``.

Stories: a load whose 32 lines miss in the L1 holds it one clock a line, wherever its sectors sit;
a further load of the same sectors, on their way already, costs only the tag stage; a GPU whose
profile lacks the measurement pays nothing beyond the tag stage; the engine charges the miss path
only for the loads its L1 does not serve; and the profile's rate is the probe's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilesim import hardware
from tilesim.cost import step_cost
from tilesim.cost.access import l1_cycles, l1_miss_requests
from tilesim.program import GlobalLoad, Step, TileRef, WarpAccess

RECORD = Path(__file__).resolve().parents[1] / "validation" / "results" / "h200" / "calibration" / "uncoalesced.json"
ROW_BYTES = 4000  # rows 4000 B apart: lane l's sector at position l % 4 of its line


def _rows(offset: int = 0) -> tuple[int, ...]:
    return tuple(lane * ROW_BYTES + offset for lane in range(32))


def _load(*offsets: int) -> GlobalLoad:
    return GlobalLoad(TileRef("X", ("k",), 32 * ROW_BYTES), tuple(WarpAccess(_rows(o), 4) for o in offsets))


def test_a_spread_32_line_load_costs_its_lines_on_the_miss_path_and_the_tag_stage_on_a_hit():
    hw = hardware.load("h200")
    rate = hw.get("l1_miss_lines_per_clk_per_sm")
    hit = l1_cycles(_rows(), 4, hw)
    assert hit < 16  # the tag stage serves lines at different sector positions together
    c = step_cost(Step(loads=(_load(0),)), hw, 1)
    assert c.load_l1_cycles == pytest.approx(hit)
    assert hit + c.load_l1_miss_cycles_each[0] == pytest.approx(32 / rate)


def test_loads_of_sectors_already_on_their_way_cost_the_tag_stage_only():
    hw = hardware.load("h200")
    requested: set[int] = set()
    assert l1_miss_requests(_rows(0), 4, hw, requested) == 32
    assert l1_miss_requests(_rows(4), 4, hw, requested) == 0  # same sectors
    assert l1_miss_requests(_rows(32), 4, hw, requested) == 32  # the next sector of each line
    one = step_cost(Step(loads=(_load(0),)), hw, 1).load_l1_miss_cycles_each[0]
    four = step_cost(Step(loads=(_load(0, 4, 8, 12),)), hw, 1).load_l1_miss_cycles_each[0]
    assert four == pytest.approx(one)  # only the first of the four goes down the miss path


def test_without_the_measurement_a_miss_costs_no_more_than_a_hit():
    hw = hardware.load("h100_sxm")
    assert not hw.has("l1_miss_lines_per_clk_per_sm")
    assert step_cost(Step(loads=(_load(0, 32),)), hw, 1).load_l1_miss_cycles_each == [0.0]


def test_lines_at_one_sector_position_cost_the_same_hit_or_miss():
    hw = hardware.load("h200")
    same_position = tuple(lane * 4096 for lane in range(32))
    load = GlobalLoad(TileRef("X", ("k",), 32 * 4096), (WarpAccess(same_position, 4),))
    c = step_cost(Step(loads=(load,)), hw, 1)
    assert c.load_l1_cycles >= 32 / hw.get("l1_miss_lines_per_clk_per_sm")  # the tag stage is the slower
    assert c.load_l1_miss_cycles_each == [0.0]


@pytest.mark.skipif(not RECORD.exists(), reason="no recorded uncoalesced.json")
def test_the_profile_rate_is_the_probes():
    from validation.calibration.uncoalesced_probe import fields

    rec = json.loads(RECORD.read_text())
    field = fields(rec)["l1_miss_lines_per_clk_per_sm"]
    assert hardware.load("h200").get("l1_miss_lines_per_clk_per_sm") == pytest.approx(field["value"])
    # the probe's loads after a miss to their sectors: about one tag-stage pass each, not another miss
    rows = {(r["level"], r["spread"], r["warps"], r["ilp"], r.get("repeat", 1)): r["cycles_per_round"]
            for r in rec["rows"]}
    per_hop = {rep: rows["l2ca", 1, 8, 4, rep] / 32 for rep in (1, 4, 8)}  # 32 hops in flight a round
    assert per_hop[4] - per_hop[1] < 3 * 32 * 0.6


# ----- the latency of a load of many lines (uncoalesced_probe's one-warp rows) --------------------------------
def test_the_burst_curves_are_the_probes():
    from validation.calibration.uncoalesced_probe import burst_fields

    rec = json.loads(RECORD.read_text())
    hw = hardware.load("h200")
    fields = burst_fields(rec, hw.get("l1_miss_lines_per_clk_per_sm"))
    for level in ("hbm", "l2"):
        pts = fields[f"{level}_burst_extra_cycles_by_lines"]["value"]
        got = sorted(hw.get(f"{level}_burst_extra_cycles_by_lines"))
        assert [p[0] for p in got] == [p[0] for p in pts] and [p[1] for p in got] == pytest.approx([p[1] for p in pts])
        assert [p[1] for p in pts] == sorted(p[1] for p in pts)  # more lines never wait less
    # a 32-line load from HBM waits hundreds of clocks more than one line, from the L2 tens
    assert 300 < hw.burst_extra_cycles_at("hbm", 32) < 500 and 20 < hw.burst_extra_cycles_at("l2", 32) < 80
    assert hw.burst_extra_cycles_at("hbm", 1) == 0 and hardware.load("h100_sxm").burst_extra_cycles_at("hbm", 32) == 0


def _chase_time_s(lines: int, hw) -> float:
    """One warp per SM, each step one 4-byte load whose lanes touch ``lines`` lines, never reused."""
    from tilesim.engine import simulate_program
    from tilesim.program import Launch, Phase, TileProgram

    offs = tuple((lane % lines) * 4096 for lane in range(32))
    load = GlobalLoad(TileRef("X", ("bx", "k"), lines * 128), (WarpAccess(offs, 4),))
    prog = TileProgram("burst", Launch(grid=(132, 1, 1), threads_per_block=32, regs_per_thread=32,
                                       smem_bytes_per_block=0), (Phase("k-loop", 256, Step(loads=(load,))),),
                       flops=0, min_hbm_bytes=float(132 * 256 * lines * 128))
    return simulate_program(prog, hw, steady_state=False).time_s


def test_a_step_of_32_line_loads_from_hbm_waits_the_measured_burst():
    hw = hardware.load("h200")
    flat = hardware.with_overrides(hw, hbm_burst_extra_cycles_by_lines=((1, 0.0), (32, 0.0)))
    extra_s = (_chase_time_s(32, hw) - _chase_time_s(32, flat)) / 256
    assert extra_s == pytest.approx(hw.burst_extra_cycles_at("hbm", 32) / hw.sm_clock_hz, rel=0.05)
    assert _chase_time_s(1, hw) == pytest.approx(_chase_time_s(1, flat))  # one line: no burst
