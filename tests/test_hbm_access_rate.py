"""DRAM reads of less than a line (issue #10), measured by ``validation/calibration/hbm_tiles_probe.py``.

Stories: blocks streaming 32 or 64 bytes of each of many rows a step get about 33 G reads of 64 bytes a
second from HBM (1.7-2.2 TB/s), not the 4.3 TB/s whole lines get; the profile's rate is the probe's;
the cost model gives each load the size of its DRAM reads; the engine charges a load of pitched
32-byte rows that misses the L2 about twice the HBM time of the same bytes in whole lines, and one
of whole lines no more than before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilesim import hardware
from tilesim.cost import step_cost
from tilesim.engine import simulate_program
from tilesim.program import GlobalLoad, Launch, Phase, Step, TileProgram, TileRef, WarpAccess

CAL = Path(__file__).resolve().parents[1] / "validation" / "results" / "h200" / "calibration"
PITCH = 16 * 1024


def _rows_load(slice_bytes: int) -> GlobalLoad:
    """A k-step's tile: ``slice_bytes`` of each of 128 rows PITCH apart, 16 bytes a lane (4 warps, 2 each)."""
    per_row = slice_bytes // 16
    instrs = []
    for i in range(256 // 32):
        offs = []
        for lane in range(32):
            e = i * 32 + lane
            offs.append((e // per_row) * PITCH + (e % per_row) * 16)
        instrs.append(WarpAccess(tuple(offs), 16))
    rows = 256 // per_row
    return GlobalLoad(TileRef("A", ("bx", "k"), rows * slice_bytes), tuple(instrs))


def test_the_profile_rate_is_the_probes_median_over_sub_line_layouts():
    from validation.calibration.hbm_tiles_probe import dram_access_rate_fields

    recs = [json.loads((CAL / f).read_text()) for f in ("hbm_tiles.json", "hbm_tiles_slices.json")]
    field = dram_access_rate_fields(recs)["hbm_accesses_per_s"]
    assert hardware.load("h200").get("hbm_accesses_per_s") == pytest.approx(field["value"])
    # 64-byte reads at that rate: about half of what whole lines reach
    assert 1.5e12 < field["value"] * 64 < 2.5e12
    assert dram_access_rate_fields([]) == {}


@pytest.mark.parametrize("slice_bytes, access", [(32, 64), (64, 64), (128, 128)])
def test_each_load_reads_dram_in_its_bytes_per_line_rounded_to_64(slice_bytes, access):
    c = step_cost(Step(loads=(_rows_load(slice_bytes),)), hardware.load("h200"), 4)
    assert c.load_hbm_access_bytes_each == [access]
    assert step_cost(Step(loads=(_rows_load(slice_bytes),)), hardware.load("h100_sxm"), 4).load_hbm_access_bytes_each == [0.0]


def _stream_time_s(slice_bytes: int) -> float:
    """Every block streams ``slice_bytes`` of each of its rows a step from HBM (nothing reused)."""
    load = _rows_load(slice_bytes)
    prog = TileProgram("rows", Launch(grid=(132 * 8, 1, 1), threads_per_block=128, regs_per_thread=32,
                                      smem_bytes_per_block=24 * 1024),
                       (Phase("k-loop", 64, Step(loads=(load,))),), flops=0,
                       min_hbm_bytes=float(132 * 8 * 64 * load.tile.tile_bytes))
    return simulate_program(prog, hardware.load("h200")).time_s


def test_pitched_32_byte_rows_take_about_twice_the_hbm_time_of_whole_lines():
    t32, t128 = _stream_time_s(32), _stream_time_s(128)
    assert 1.6 < t32 / t128 < 2.4
