"""Engine invariants: bounds, traffic against analytic counts, overlap, determinism, event order."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilesim import GemmConfig, hardware, simulate
from tilesim.engine.channel import Channel
from tilesim.engine.l2 import L2Cache
from tilesim.hardware import with_overrides
from tilesim.kernels.gemm.analytic import gemm_traffic
from tilesim.kernels.gemm.config import check_fits

H200 = hardware.load("h200", calibrated=False)

LADDER = [
    GemmConfig(1024, 1024, 1024, "naive_uncoalesced", bm=32, bn=32),
    GemmConfig(1024, 1024, 1024, "naive", bm=32, bn=32),
    GemmConfig(1024, 1024, 1024, "smem", bm=32, bn=32, bk=32),
    GemmConfig(1024, 1024, 1024, "reg1d", bm=64, bn=64, bk=8, tm=8),
    GemmConfig(1024, 1024, 1024, "reg2d"),
    GemmConfig(1024, 1024, 1024, "reg2d", vectorize=True, smem_pad=4),
    GemmConfig(1024, 1024, 1024, "warp", bm=128, bn=128, bk=16, wm=64, wn=64, wniter=4, tm=8, tn=4,
               vectorize=True, pipeline="cp_async", stages=3),
    GemmConfig(3000, 2000, 1000, "reg2d", bm=64, bn=64, tm=4, tn=4),
]


@pytest.mark.parametrize("cfg", LADDER, ids=lambda c: c.label)
def test_time_at_least_roofline_and_hbm_within_l2(cfg):
    r = simulate(cfg, H200)
    assert r.time_s >= r.roofline_s
    assert r.traffic.hbm_read_bytes <= r.traffic.l2_load_bytes
    assert r.traffic.hbm_bytes <= r.traffic.l2_bytes
    assert 0.0 <= r.traffic.l2_hit_rate <= 1.0
    assert r.traffic.ffma * 32 == pytest.approx(cfg.flops / 2, rel=0.2)  # edge tiles padded


@pytest.mark.parametrize("cfg", [LADDER[4], LADDER[6], GemmConfig(2048, 1024, 512, "reg2d", bm=64, bn=64, tm=4, tn=4)],
                         ids=lambda c: c.label)
def test_hbm_traffic_matches_analytic_counts_at_both_l2_extremes(cfg):
    t = gemm_traffic(cfg)
    huge = with_overrides(H200, l2_bytes=10**13)
    exact = simulate(cfg, huge, steady_state=False)
    assert exact.traffic.hbm_read_bytes == pytest.approx(t.hbm_a_bytes + t.hbm_b_bytes, rel=1e-9)
    # held phases count their misses per step on average: within a tile or so of the compulsory bytes
    everything = simulate(cfg, huge)
    assert everything.traffic.hbm_read_bytes == pytest.approx(t.hbm_a_bytes + t.hbm_b_bytes, rel=1e-3)
    nothing = simulate(cfg, with_overrides(H200, l2_bytes=1))
    assert nothing.traffic.hbm_read_bytes == pytest.approx(t.global_a_bytes + t.global_b_bytes, rel=1e-9)
    assert nothing.traffic.hbm_write_bytes == pytest.approx(t.hbm_c_write_bytes, rel=1e-9)


def test_l2_capacity_between_extremes_is_monotone():
    cfg = GemmConfig(4096, 4096, 4096, "reg2d", bm=64, bn=64, tm=4, tn=4)
    hbm = [simulate(cfg, with_overrides(H200, l2_bytes=c)).traffic.hbm_read_bytes for c in (2**20, 2**24, 2**28, 2**34)]
    assert hbm == sorted(hbm, reverse=True)
    assert hbm[0] > hbm[-1]


def test_double_buffering_never_slower_when_loads_dominate():
    slow_mem = with_overrides(H200, l2_latency_cycles=2000, hbm_latency_cycles=4000)
    base = dict(m=2048, n=2048, k=2048, variant="reg2d", vectorize=True)
    plain = simulate(GemmConfig(**base), slow_mem)
    for pipe, stages in (("regs", 2), ("cp_async", 2), ("cp_async", 3), ("cp_async", 4)):
        piped = simulate(GemmConfig(**base, pipeline=pipe, stages=stages), slow_mem)
        assert piped.time_s <= plain.time_s, (pipe, stages)
    deeper = [simulate(GemmConfig(**base, pipeline="cp_async", stages=s), slow_mem).time_s for s in (2, 3, 4)]
    assert deeper[2] <= deeper[0]


def test_latency_matters_without_double_buffering():
    cfg = GemmConfig(2048, 2048, 2048, "reg2d", bm=128, bn=128, bk=8, tm=8, tn=8, regs_per_thread=255)
    fast = simulate(cfg, H200)
    slow = simulate(cfg, with_overrides(H200, hbm_latency_cycles=5000, l2_latency_cycles=3000))
    assert slow.time_s > fast.time_s * 1.2


def test_more_bandwidth_never_slower():
    cfg = GemmConfig(4096, 4096, 4096, "naive", bm=32, bn=32)
    base = simulate(cfg, H200).time_s
    assert simulate(cfg, with_overrides(H200, hbm_bytes_per_s=2 * H200.hbm_bytes_per_s)).time_s <= base * 1.0001
    assert simulate(cfg, with_overrides(H200, l1_bytes_per_clk_per_sm=64)).time_s > base


def test_deterministic():
    for cfg in LADDER[:3] + LADDER[5:7]:
        assert simulate(cfg, H200) == simulate(cfg, H200)


def test_timeline_event_order_per_slot():
    cfg = GemmConfig(1024, 1024, 1024, "reg2d", bm=64, bn=64, tm=4, tn=4)
    r = simulate(cfg, H200, timeline=True)
    assert r.timeline
    for slot in {i.slot for i in r.timeline}:
        spans = sorted((i for i in r.timeline if i.slot == slot), key=lambda i: (i.start_s, i.end_s))
        # with one warp group per block a slot does one thing at a time, in order
        for a, b in zip(spans, spans[1:], strict=False):
            assert b.start_s >= a.end_s - 1e-15, (a, b)
        kinds = [i.kind for i in spans]
        assert kinds[0] in ("load_wait", "compute")
        first_epi = [i.phase for i in spans].index("epilogue")
        assert "compute" in kinds[:first_epi]
    # The first step of slot 0 waits for its loads, then computes.
    s0 = [i for i in r.timeline if i.slot == 0]
    assert s0[0].kind == "load_wait" and s0[1].kind == "compute"
    assert s0[1].start_s == pytest.approx(s0[0].end_s)


def test_steady_state_holds_keep_time_close_to_stepping_everything():
    cfgs = [GemmConfig(1024, 1024, 2048, "reg2d"), GemmConfig(1024, 1024, 1024, "naive", bm=32, bn=32),
            GemmConfig(16384, 256, 1024, "warp", bm=64, bn=64, bk=16, wm=32, wn=32, wniter=1, tm=4, tn=4,
                       vectorize=True, regs_per_thread=72)]
    held = [simulate(c, H200) for c in cfgs]
    stepped = [simulate(c, H200, steady_state=False) for c in cfgs]
    for h, s in zip(held, stepped, strict=True):
        assert h.events < s.events
        assert h.time_s == pytest.approx(s.time_s, rel=0.10)


def test_channel_fifo_queueing_and_reservation():
    ch = Channel("x", rate_per_s=100.0, unit="bytes")
    assert ch.request(0.0, 100.0) == pytest.approx(1.0)
    assert ch.request(0.5, 50.0) == pytest.approx(1.5)  # queued behind the first
    assert ch.request(3.0, 100.0) == pytest.approx(4.0)  # idle channel starts at once
    ch.reserve(50.0)
    assert ch.request(4.0, 50.0) == pytest.approx(5.0)  # half the rate left
    ch.release(50.0, 1.0)
    assert ch.amount == pytest.approx(350.0)
    with pytest.raises(ValueError, match="rate_per_s"):
        Channel("bad", 0, "bytes")


def test_l2_cache_reuse_and_capacity():
    c = L2Cache(100)
    assert not c.access("a", 0, 60)
    assert c.access("a", 0, 60)
    assert not c.access("b", 0, 60)
    assert c.access("b", 0, 60)
    assert not c.access("a", 0, 60)  # 120 bytes brought in since a: evicted
    with pytest.raises(ValueError, match="capacity_bytes"):
        L2Cache(0)


def test_l2_cache_streams_and_ranges_follow_time():
    c = L2Cache(450)
    c.start_stream(40.0, 0.0)  # a steady phase brings in 40 bytes per second
    c.touch_range("t", 0, 10, 0.0, 1.0)  # and touches k-step k at time k + 1
    assert c.clock(10.0) == pytest.approx(400.0)
    c.stop_stream(40.0, 10.0)
    assert c.access("t", 9, 40, 10.0)  # touched at t = 10: just now
    assert c.access("t", 3, 40, 10.0)  # touched at t = 4: 240 bytes ago
    c2 = L2Cache(450)
    c2.start_stream(40.0, 0.0)
    c2.touch_range("t", 0, 10, 0.0, 1.0)
    c2.stop_stream(40.0, 10.0)
    assert c2.access("x", 0, 100, 10.0) is False  # 100 more bytes: clock 500
    assert not c2.access("t", 0, 40, 10.0)  # touched at t = 1 (clock 40): 460 + 40 > 450
    assert c2.access("t", 8, 40, 10.0)  # touched at t = 9 (clock 360)
    assert c2.access("t", 20, 40, 5.0) is False  # never touched


def _valid(cfg):
    try:
        check_fits(cfg, H200)
    except ValueError:
        return False
    return True


@st.composite
def gemm_configs(draw):
    variant = draw(st.sampled_from(["naive", "naive_uncoalesced", "smem", "reg1d", "reg2d", "warp"]))
    m, n, k = (draw(st.integers(1, 700)) for _ in range(3))
    if variant in ("naive", "naive_uncoalesced"):
        bm, bn = draw(st.sampled_from([(32, 32), (16, 16), (8, 32), (32, 8)]))
        return GemmConfig(m, n, k, variant, bm=bm, bn=bn)
    if variant == "smem":
        t = draw(st.sampled_from([8, 16, 32]))
        return GemmConfig(m, n, k, "smem", bm=t, bn=t, bk=t)
    if variant == "reg1d":
        bm, bn, bk, tm = draw(st.sampled_from([(64, 64, 8, 8), (32, 64, 8, 4), (128, 32, 16, 8)]))
        return GemmConfig(m, n, k, "reg1d", bm=bm, bn=bn, bk=bk, tm=tm)
    vec = draw(st.booleans()) and k % 4 == 0 and n % 4 == 0
    pipe = draw(st.sampled_from([("none", 1), ("regs", 2), ("cp_async", 2), ("cp_async", 3)]))
    pad = draw(st.sampled_from([0, 1, 4]))
    if variant == "reg2d":
        bm, bn, bk, tm, tn = draw(st.sampled_from([(64, 64, 8, 4, 4), (128, 128, 8, 8, 8), (128, 64, 16, 8, 4)]))
        return GemmConfig(m, n, k, "reg2d", bm=bm, bn=bn, bk=bk, tm=tm, tn=tn, vectorize=vec,
                          smem_pad=pad, pipeline=pipe[0], stages=pipe[1])
    return GemmConfig(m, n, k, "warp", bm=128, bn=128, bk=16, wm=64, wn=64, wniter=4, tm=8, tn=4,
                      vectorize=vec, smem_pad=pad, pipeline=pipe[0], stages=pipe[1])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(gemm_configs())
def test_property_random_valid_configs(cfg):
    if not _valid(cfg):
        return
    r = simulate(cfg, H200)
    assert r.time_s > 0 and r.time_s >= r.roofline_s
    assert r.traffic.hbm_read_bytes <= r.traffic.l2_load_bytes + 1e-6
    assert 0 <= r.traffic.hbm_write_bytes <= cfg.bm * cfg.bn * cfg.elem_bytes * r.blocks + 1e-6
    assert r.traffic.l2_store_bytes > 0
    assert 1 <= r.blocks_per_sm <= H200.max_blocks_per_sm
    assert r.bound in ("issue", "fma", "int", "smem", "l1", "l2", "hbm", "latency")


def test_last_partial_wave_lands_as_packed_as_the_hardware_says(monkeypatch):
    import tilesim.engine.sim as sim

    sizes = {}
    original = sim.Engine._next_group_size

    def record(self, remaining):  # the size of every block group a slot takes
        count = original(self, remaining)
        sizes.setdefault(self.hw.tail_packing_by_slots, []).append(count)
        return count

    monkeypatch.setattr(sim.Engine, "_next_group_size", record)
    cfg = GemmConfig(3000, 2000, 1000, "reg2d", vectorize=True, regs_per_thread=120)  # 384 blocks, 2 per SM
    spread = with_overrides(H200, tail_packing_by_slots=((1, 0.0),))
    packed = with_overrides(H200, tail_packing_by_slots=((1, 1.0),))
    t_spread = simulate(cfg, spread).time_s
    t_packed = simulate(cfg, packed).time_s
    assert sorted(sizes[((1, 0.0),)]) == [120, 132, 132]  # the tail one block per SM
    assert sorted(sizes[((1, 1.0),)]) == [60, 60, 132, 132]  # the tail two per SM on 60 SMs
    assert t_packed > t_spread


def test_tensor_core_work_runs_on_the_tensor_channel():
    from dataclasses import replace

    from tilesim.kernels.gemm import lower
    from tilesim.program import Compute, Mma

    # the float4 form: 115 registers by nvcc, two blocks per SM (the scalar one takes 159, one block)
    base = lower(GemmConfig(2048, 2048, 2048, "reg2d", vectorize=True))
    kloop = base.phases[0]
    ffma = sum(op.count for op in kloop.step.compute if isinstance(op, Compute) and op.pipe == "fma")
    others = tuple(op for op in kloop.step.compute if not (isinstance(op, Compute) and op.pipe == "fma"))
    # the same math as m16n8k16 matrix instructions (4096 FLOP each), 2 FLOP per lane FMA
    mma_ops = others + (Mma((16, 8, 16), "fp16", ffma * 64 / 4096),)
    mma = replace(base, phases=(replace(kloop, step=replace(kloop.step, compute=mma_ops)), *base.phases[1:]))
    r_ffma, r_mma = simulate(base, H200), simulate(mma, H200)
    assert r_mma.utilization["tensor"] > 0 and r_mma.utilization["fma"] == 0
    assert r_ffma.utilization["tensor"] == 0
    # with the FFMA issue gone the kernel is left to its shared-memory traffic
    assert r_mma.bound == "smem"
    slow = replace(mma, phases=(replace(kloop, step=replace(kloop.step, compute=others + (
        Mma((16, 8, 16), "fp16", ffma * 64 / 4096 * 1000),))), *base.phases[1:]))
    assert simulate(slow, H200).bound == "tensor"


def test_last_partial_wave_puts_equal_blocks_on_the_sms_it_lands_on(monkeypatch):
    """768 blocks at 4 per SM: 240 in the last wave. Landing on about 119 SMs (packing 0.18, as
    the probe measured) means 2 per SM: two groups of 120, not 119 + 119 + a straggler group of 2
    that would stack a third block on the representative SM."""
    import tilesim.engine.sim as sim

    sizes = []
    original = sim.Engine._next_group_size

    def record(self, remaining):  # the size of every block group a slot takes
        count = original(self, remaining)
        sizes.append(count)
        return count

    monkeypatch.setattr(sim.Engine, "_next_group_size", record)
    cfg = GemmConfig(3000, 2000, 1000, "warp", bm=128, bn=64, bk=16, tm=4, tn=4, wm=64, wn=32, wniter=2,
                     vectorize=True, regs_per_thread=127)
    simulate(cfg, with_overrides(H200, tail_packing_by_slots=((4, 0.18),)))
    assert sorted(sizes) == [120, 120, 132, 132, 132, 132]


def test_written_output_beyond_what_l2_keeps_reaches_hbm():
    """3000x2000x1000 touches 44 MB: with l2_dirty_bytes of 36 MB, at least 8 MB of C is written back;
    with room for everything, none; with none, all of C."""
    cfg = GemmConfig(3000, 2000, 1000, "reg2d", vectorize=True, regs_per_thread=120)
    c_bytes = 3000 * 2000 * 4
    some = simulate(cfg, with_overrides(H200, l2_dirty_bytes=36e6)).traffic.hbm_write_bytes
    assert some == pytest.approx(44e6 - 36e6, rel=0.01)
    assert simulate(cfg, with_overrides(H200, l2_dirty_bytes=1e9, l2_bytes=10**9)).traffic.hbm_write_bytes == 0
    assert simulate(cfg, with_overrides(H200, l2_bytes=1)).traffic.hbm_write_bytes >= c_bytes  # edge tiles whole
