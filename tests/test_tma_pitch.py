"""A TMA box whose rows start mid-sector loads slower than its bytes say (tensor_probe's tma_pitch rows):
the cost model charges the L2 channel for it, the traffic counts stay the sectors, and the profile's
value comes from the probe's record."""

from __future__ import annotations

import json

import pytest

from tilesim import hardware, simulate
from tilesim.cost.nvidia import step_cost
from tilesim.hardware.catalog import with_overrides
from tilesim.kernels.tc_gemm.config import TcGemmConfig
from tilesim.program import GlobalLoad, Step, TileRef, WarpAccess
from validation.calibration.calibrate import REPO_ROOT, tma_pitch_field

H200 = hardware.load("h200")


def _box(pitch_bytes: int, rows: int = 128, row_bytes: int = 128) -> Step:
    """One bulk copy of ``rows`` rows of ``row_bytes``, rows ``pitch_bytes`` apart, as 16-byte pieces."""
    pieces = [(r * pitch_bytes + c, r * row_bytes + c) for r in range(rows) for c in range(0, row_bytes, 16)]
    instrs = tuple(WarpAccess(tuple(g for g, _ in pieces[i:i + 32]), 16, tuple(s for _, s in pieces[i:i + 32]))
                   for i in range(0, len(pieces), 32))
    return Step(loads=(GlobalLoad(TileRef("A", ("by", "k"), rows * row_bytes), instrs, dest="bulk"),))


def test_aligned_rows_cost_their_sectors_only():
    c = step_cost(_box(8192), H200, 4)
    assert c.load_l2_bytes == 128 * 128
    assert c.load_l2_extra_channel_bytes == 0.0


def test_rows_starting_mid_sector_take_the_measured_cost():
    cost = H200.get("tma_mid_sector_row_cost")
    c = step_cost(_box(8192 + 16), H200, 4)
    # odd rows start 16 bytes into a sector: 5 sectors each, and each takes `cost` aligned rows' time
    assert c.load_l2_bytes == 64 * 128 + 64 * 160
    assert c.load_l2_extra_channel_bytes == pytest.approx(64 * (cost * 128 - 160))
    # rows 64 bytes off a line start on a sector: no extra (the probe's +64 tensor ran at the aligned rate)
    assert step_cost(_box(8192 + 64), H200, 4).load_l2_extra_channel_bytes == 0.0


def test_a_gpu_without_the_measurement_charges_nothing_extra():
    from tilesim.hardware import catalog

    data_only = catalog.load("h100_sxm")  # datasheet file: no tensor_probe record
    assert not data_only.has("tma_mid_sector_row_cost")
    assert step_cost(_box(8192 + 16), data_only, 4).load_l2_extra_channel_bytes == 0.0


def test_a_wgmma_gemm_at_an_odd_k_runs_slower_but_moves_the_same_bytes():
    cfg = TcGemmConfig(m=3001, n=4000, k=2008, instruction="wgmma", staging="shared", dtype="fp16",
                       bm=128, bn=128, bk=64, wm=64, wn=128, stages=5, layout="swizzled", consumers=2)
    without = with_overrides(H200, tma_mid_sector_row_cost=1.0)
    slow, plain = simulate(cfg, H200), simulate(cfg, without)
    assert slow.time_s > 1.1 * plain.time_s
    assert slow.traffic.l2_load_bytes == pytest.approx(plain.traffic.l2_load_bytes)


def test_the_profile_value_comes_from_the_probe_record():
    rec = json.loads((REPO_ROOT / "validation/results/h200/calibration/tensor.json").read_text())
    got = tma_pitch_field(rec)["tma_mid_sector_row_cost"]
    assert got["value"] == pytest.approx(H200.get("tma_mid_sector_row_cost"))
    assert got["n"] == 4 and 1.5 < got["value"] < 3.0
    # a record without tma_pitch rows gives no field
    assert tma_pitch_field({"meta": {}}) == {}


# ----- lines several SMs read (tensor_probe tma_share) ---------------------------------------------
def test_a_tile_several_blocks_read_is_a_shared_line_load():
    from tilesim.engine.plan import _read_by_several_blocks

    a = TileRef("A", ("by", "k"), 1024)
    assert _read_by_several_blocks(a, (4, 2, 1))  # every block of a row of the grid reads it
    assert not _read_by_several_blocks(a, (1, 8, 1))  # one block per by: its own rows
    assert not _read_by_several_blocks(TileRef("X", ("bx", "by"), 64), (8, 8, 1))
    assert _read_by_several_blocks(TileRef("W", (0,), 64), (2, 1, 1))  # the same tile for every block


def test_shared_lines_take_the_measured_rate_on_the_l2_channel():
    from tilesim.engine.plan import _l2_channel_scale

    shared, own = _box(8192), Step(loads=(GlobalLoad(TileRef("X", ("bx", "by"), 128 * 128),
                                                   _box(8192).loads[0].instructions, dest="bulk"),))
    scale = H200.l2_bytes_per_s / H200.get("l2_shared_line_bytes_per_s")
    assert 0.8 < scale < 0.95
    assert _l2_channel_scale(shared.loads, [16384.0], (4, 4, 1), H200) == pytest.approx(scale)
    assert _l2_channel_scale(own.loads, [16384.0], (4, 4, 1), H200) == 1.0
    both = shared.loads + own.loads
    assert _l2_channel_scale(both, [16384.0, 16384.0], (4, 4, 1), H200) == pytest.approx((scale + 1) / 2)
    without = with_overrides(H200, l2_shared_line_bytes_per_s=H200.l2_bytes_per_s)
    assert _l2_channel_scale(shared.loads, [16384.0], (4, 4, 1), without) == 1.0


def test_the_shared_line_rate_comes_from_the_probe_record():
    from validation.calibration.calibrate import tma_share_field

    rec = json.loads((REPO_ROOT / "validation/results/h200/calibration/tensor.json").read_text())
    got = tma_share_field(rec)["l2_shared_line_bytes_per_s"]
    assert got["value"] == pytest.approx(H200.get("l2_shared_line_bytes_per_s"))
    assert got["value"] > H200.l2_bytes_per_s  # several readers: faster than each SM's own lines
    assert tma_share_field({"meta": {}}) == {}


# ----- the clock beside memory traffic (clock_load_probe's memory streams) ---------------------------
def test_memory_traffic_lowers_the_clock_at_the_measured_slopes():
    act = 0.85
    bare = H200.sm_clock_hz_at_tensor_activity(act)
    l2 = H200.sm_clock_hz_at_tensor_activity(act, l2_bytes_per_s=4.62e12)
    hbm = H200.sm_clock_hz_at_tensor_activity(act, hbm_bytes_per_s=3.79e12)
    # the probe: 1.513 GHz beside the L2 stream, 1.498 beside the HBM one, at this activity
    assert l2 == pytest.approx(1.513e9, rel=0.015) and hbm == pytest.approx(1.498e9, rel=0.015)
    assert hbm < l2 < bare
    # with no tensor work the L2 stream costs about 2% (1.941 against 1.980 GHz)
    assert H200.sm_clock_hz_at_tensor_activity(0.0, l2_bytes_per_s=9.22e12) == pytest.approx(1.941e9, rel=0.005)


def test_the_clock_slopes_come_from_the_probe_record():
    from validation.calibration.calibrate import clock_memory_fields

    rec = json.loads((REPO_ROOT / "validation/results/h200/calibration/clock_load_mem/clock_load.json").read_text())
    got = clock_memory_fields(rec)
    for kind in ("l2", "hbm"):
        pts = got[f"sm_clock_{kind}_slope_by_tensor_activity"]["value"]
        assert [tuple(p) for p in pts] == [tuple(p) for p in H200.get(f"sm_clock_{kind}_slope_by_tensor_activity")]
        assert pts[0][0] == 0.0 and pts[1][1] > pts[0][1] > 0  # the traffic costs more under tensor load
    assert clock_memory_fields({"loads": {}}) == {}


def test_a_box_with_mid_sector_rows_waits_the_measured_latency():
    from tilesim.api import lower
    from tilesim.engine.sim import Engine

    assert H200.get("tma_mid_sector_latency_cycles") > H200.get("tma_latency_cycles")
    cfg = TcGemmConfig(m=3001, n=4000, k=2008, instruction="wgmma", staging="shared", dtype="fp16",
                       bm=128, bn=128, bk=64, wm=64, wn=128, stages=2, layout="swizzled", consumers=2)
    eng = Engine(lower(cfg, H200)[0], H200)
    assert eng.bulk_l2_mid_sector_lat_s * H200.sm_clock_hz == pytest.approx(922.1, rel=1e-3)
    # at 2 stages the longer latency shows: slower than with the aligned rows' latency
    plain = with_overrides(H200, tma_mid_sector_latency_cycles=H200.get("tma_latency_cycles"))
    assert simulate(cfg, H200).time_s > simulate(cfg, plain).time_s
