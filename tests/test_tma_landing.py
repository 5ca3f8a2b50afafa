"""When a TMA copy lands (tilesim/engine/sim.py, ``bulk_landing``): at the later of (the channel's finish +
L0) and (issue + L0 + the block's bytes of the step over the landing rate), L0 and the rate fitted on
tma_pair_probe's one-SM, one-in-flight pair rows (validation/results/h200/calibration/tma_pair.json); from HBM
nothing after the channel's finish."""

import json
from dataclasses import replace

import pytest

from tilesim.engine.sim import Engine
from tilesim.hardware import load, with_overrides
from validation.calibration.calibrate import tma_pair_fields
from validation.studies import tensor_engine_check as tec

H200 = load("h200")
FIELDS = ("tma_fixed_latency_cycles", "tma_landing_bytes_per_clk", "tma_hbm_fixed_latency_cycles",
          "tma_hbm_landing_bytes_per_clk")


def _row(a: int, b: int, source: str, grid: int, stages: int = 1) -> dict:
    return {"a_box": [a, 64], "b_box": [b, 64], "source": source, "grid": grid, "stages": stages,
            "smem_bytes": 122880}


def _cycles(row: dict, hw) -> float:
    res = Engine(tec._tma_pair_program(row), hw).run()
    return (res.time_s - hw.launch_overhead_s) * hw.sm_clock_hz / tec.TMA_STEPS


def test_the_fields_are_the_one_sm_pair_rows_line():
    """16 / 32 / 48 KiB pairs from L2 land in 521 / 712 / 903 cycles (one SM): 330 cycles + 85.8 B/clk;
    from HBM the per-pair means 1098 / 1257 / 1416: 939 cycles + 103 B/clk."""
    rec = json.loads(tec.TMA_PAIR.read_text())
    f = tma_pair_fields(rec)
    assert f["tma_fixed_latency_cycles"]["value"] == pytest.approx(330.0, abs=1)
    assert f["tma_landing_bytes_per_clk"]["value"] == pytest.approx(85.8, abs=0.1)
    assert f["tma_hbm_fixed_latency_cycles"]["value"] == pytest.approx(938.5, abs=1)
    assert f["tma_hbm_landing_bytes_per_clk"]["value"] == pytest.approx(102.9, abs=0.1)
    for k in FIELDS:  # the profile holds what the record gives
        assert H200.get(k) == pytest.approx(f[k]["value"])


def test_one_sm_lands_a_pair_at_its_own_latency():
    """Nothing else loads: a pair lands L0 + bytes / rate after its issue (the channel is idle)."""
    hw = with_overrides(H200, sm_clock_hz=1.98e9)
    l0, rate = H200.get("tma_fixed_latency_cycles"), H200.get("tma_landing_bytes_per_clk")
    for a, b in ((64, 64), (128, 128), (128, 256)):
        want = l0 + (a + b) * 128 / rate
        assert _cycles(_row(a, b, "l2_disjoint", 1), hw) == pytest.approx(want, rel=0.02)


def test_every_sm_lands_after_the_channel_and_l0():
    """Every SM loading 48 KiB pairs from its own L2 lines: the channel's 132 pairs at l2_bytes_per_s, then L0
    (not the whole one-box latency on top of the channel: that counted the transfer twice)."""
    hw = with_overrides(H200, sm_clock_hz=1.98e9)
    channel = 132 * 49152 / H200.l2_bytes_per_s * 1.98e9
    got = _cycles(_row(128, 256, "l2_disjoint", 132), hw)
    assert got == pytest.approx(channel + H200.get("tma_fixed_latency_cycles"), rel=0.03)
    assert got < channel + H200.get("tma_latency_cycles")


def test_from_hbm_nothing_follows_the_channel():
    """Every SM loading fresh 48 KiB pairs: the HBM channel's time, no latency after it."""
    hw = with_overrides(H200, sm_clock_hz=1.98e9)
    channel = 132 * 49152 / H200.hbm_bytes_per_s * 1.98e9
    got = _cycles(_row(128, 256, "hbm", 132), hw)
    assert channel * 0.98 < got < channel * 1.05


def test_without_the_fields_the_old_rule_holds():
    """A profile without the pair fields lands a copy at the channel's finish + the whole one-box latency."""
    old = replace(H200, values=tuple((k, v) for k, v in H200.values if k not in FIELDS))
    hw = with_overrides(old, sm_clock_hz=1.98e9)
    got = _cycles(_row(64, 64, "l2_disjoint", 1), hw)
    assert got == pytest.approx(H200.get("tma_latency_cycles"), rel=0.03)


def test_the_tma_pair_rows():
    """tma_pair group: 43.7% -> 28.0% over the 30 rows of tma_pair.json; the one-SM L2 rows with one pair in
    flight exact (the fit), every-SM L2 rows with each SM its own tiles within 10% for 48 KiB; the every-SM
    same-tile rows stay slow (+64%: the engine's shared-line rate, 9.68 TB/s from tma_share, is below what they
    move). The 10 rows of tma_pair_share.json (tiles read by G = 2..66 blocks) are read too."""
    rows = tec.tma_pair_check()
    got = {k: (m, p) for k, m, p in rows if ".l2_share" not in k}
    assert len(got) == 30 and len(rows) == 40
    assert tec.mape([(k, m, p) for k, (m, p) in got.items()]) == pytest.approx(0.280, abs=0.01)
    for k in ("a64b64", "a128b128", "a128b256"):
        m, p = got[f"tma_pair.{k}.l2_disjoint.sms1.s1"]
        assert p == pytest.approx(m, rel=0.01)
    for s in (1, 2):
        m, p = got[f"tma_pair.a128b256.l2_disjoint.sms132.s{s}"]
        assert p == pytest.approx(m, rel=0.10)


def _ring_cycles(depth: int, hw, spin: int = 64) -> float:
    """One SM, a 48 KiB L2-resident A+B pair a step and ``spin`` FMA cycles of math, ``depth`` buffers."""
    from tilesim.program import Compute, Launch, Phase, Step, TileProgram

    loads = (tec._box_load("A", 128, ("bx", 0)), tec._box_load("B", 256, ("bx", 0)))
    step = Step(loads=loads, compute=(Compute("fma", spin),))
    prog = TileProgram("ring", Launch((1, 1, 1), 32, 32, 122880),
                       (Phase("loop", tec.TMA_STEPS, step, pipeline_depth=depth),))
    res = Engine(prog, hw).run()
    return (res.time_s - hw.launch_overhead_s) * hw.sm_clock_hz / tec.TMA_STEPS


def test_a_ring_refills_a_buffer_once_the_wait_frees_it():
    """A pipelined loop issues the copies ``pipeline_depth - 1`` steps ahead once the step's own data is in
    (the buffer they refill is freed by that wait: cp.async's wait and barrier, a wgmma ring's release
    after the next stage's wait), not as soon as the step before finished its math: a double-buffered
    loop whose copies take longer than its math keeps one pair in flight and takes a pair's latency a
    step; three buffers keep two in flight, half of it; four, a third."""
    hw = with_overrides(H200, sm_clock_hz=1.98e9)
    pair = H200.get("tma_fixed_latency_cycles") + 49152 / H200.get("tma_landing_bytes_per_clk")
    assert _ring_cycles(2, hw) == pytest.approx(pair, rel=0.05)
    assert _ring_cycles(3, hw) == pytest.approx(pair / 2, rel=0.05)
    assert _ring_cycles(4, hw) == pytest.approx(pair / 3, rel=0.05)


def test_tiles_read_by_many_blocks_land_sooner_than_the_engine_says():
    """tma_pair_share.json: the 48 KiB pair on every SM, each read by G blocks. Up to G = 4 it lands as disjoint
    tiles do (1667 cycles with one pair in flight) and the engine's shared-line rate agrees within 10%; from
    G = 33 the L2 serves the repeats faster (1094, 903 at 66) and the engine is 50% or more slow: a recorded
    defect, not modelled."""
    got = {k: (m, p) for k, m, p in tec.tma_pair_check() if ".l2_share" in k}
    assert len(got) == 10
    for g in (2, 4):
        for s in (1, 2):
            m, p = got[f"tma_pair.a128b256.l2_share{g}.sms132.s{s}"]
            assert p == pytest.approx(m, rel=0.10)
    for g in (33, 66):
        m, p = got[f"tma_pair.a128b256.l2_share{g}.sms132.s1"]
        assert p > 1.5 * m
