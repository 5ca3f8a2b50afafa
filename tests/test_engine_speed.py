"""The engine's fast paths give what the plain ones give, and the steady-state holds keep the work small."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesim.api import simulate
from tilesim.engine.l2 import L2Cache
from tilesim.kernels import registry


def _script(seed: int):
    """A random mix of batched tile lookups, marks, writes, streams and ranges over a small L2."""
    rng = random.Random(seed)
    now, ops = 0.0, []
    for _ in range(400):
        now += rng.choice((0.0, 0.0, 1e-9, 3e-8))
        kind = rng.random()
        prefixes = tuple(("t", (rng.randrange(12),)) for _ in range(rng.randrange(1, 6)))
        prefixes = tuple(dict.fromkeys(prefixes))  # distinct, as a block group's projections are
        k = rng.randrange(4)
        if kind < 0.6:
            ops.append(("access", prefixes, k, rng.choice((64, 128, 300)), now))
        elif kind < 0.75:
            ops.append(("mark", prefixes, k, now))
        elif kind < 0.85:
            ops.append(("write", rng.choice((50.0, 200.0)), now))
        elif kind < 0.95:
            ops.append(("stream", rng.choice((1e9, 5e9)), now))
        else:
            ops.append(("range", prefixes[0], k, k + rng.randrange(1, 4), now, rng.choice((1e-9, 1e-8))))
    return ops


@pytest.mark.parametrize("seed", range(5))
def test_batched_l2_lookups_match_one_at_a_time(seed):
    one, many = L2Cache(1000), L2Cache(1000)
    streams = [0.0]
    for op in _script(seed):
        if op[0] == "access":
            _, prefixes, k, size, now = op
            hits = [one.access(p, k, size, now) for p in prefixes]
            assert many.access_many(prefixes, k, size, now) == [j for j, h in enumerate(hits) if not h]
        elif op[0] == "mark":
            _, prefixes, k, now = op
            for p in prefixes:
                one.mark(p, k, now)
            many.mark_many(prefixes, k, now)
        elif op[0] == "write":
            one.write(op[1], op[2])
            many.write(op[1], op[2])
        elif op[0] == "stream":
            for c in (one, many):
                c.start_stream(op[1], op[2])
            streams.append(op[1])
        else:
            for c in (one, many):
                c.touch_range(*op[1:])
        assert one.clock(op[-1]) == many.clock(op[-1])
    assert one._t == many._t and one._c == many._c and one._r == many._r


def test_slots_that_alternate_between_two_group_times_settle():
    """A reduction of 2^26 elements (262144 blocks, 1986 block groups) steps a handful of groups per
    slot, not hundreds, and stays within 10% of the exact path. From the flushed L2 it settles twice:
    once while the earlier work's dirty lines are written back, and again once they are gone (2,012
    events from a clean L2, 3,540 from the flushed one)."""
    cfg = registry.get("reduction").make(n=1 << 26)
    fast = simulate(cfg, "h200")
    assert fast.events < 4000
    exact = simulate(cfg, "h200", steady_state=False)
    assert abs(fast.time_s / exact.time_s - 1) < 0.10


def test_window_cycles_are_found_and_transients_are_not():
    from tilesim.engine.steady import MAX_WINDOW_CYCLE, _window_cycle

    first = [5.0]  # the loop's first window never counts
    assert _window_cycle(first + [2.0, 2.0, 2.0], 0.01) == 1
    assert _window_cycle(first + [2.0, 2.0], 0.01) == 0  # two alike may be a chance match
    assert _window_cycle(first + [1.27, 1.238, 1.238], 0.01) == 0  # one of two values, twice in a row
    three = [2.4465, 2.3758, 2.3051]  # three slots taking turns at a channel (reg2d 64x64x8 t4x8 at 4096^3)
    assert _window_cycle(first + three * 3 + three[:1], 0.01) == 3
    assert _window_cycle(first + three * 2 + three[:1], 0.01) == 0  # two runs of the cycle are not enough
    assert _window_cycle(first + three * 3 + [2.6], 0.01) == 0  # a new last window breaks it
    assert _window_cycle(first + [1.015**i for i in range(30)], 0.01) == 0  # a ramp steeper than the tolerance
    assert _window_cycle(first + three * 4, -1.0) == 0  # --exact: never
    assert MAX_WINDOW_CYCLE >= 3


def test_a_loop_whose_windows_cycle_holds_early_and_stays_close_to_stepping_everything():
    """reg2d 64x64x8 4x8 at 2048^3: three slots take turns at a channel, so single windows never
    repeat (18,200 events when only two equal windows in a row counted as settled; 34,856 stepped)."""
    cfg = registry.get("gemm").make(m=2048, n=2048, k=2048, variant="reg2d", bm=64, bn=64, bk=8, tm=4, tn=8)
    fast = simulate(cfg, "h200")
    assert fast.events < 6000
    exact = simulate(cfg, "h200", steady_state=False)
    assert abs(fast.time_s / exact.time_s - 1) < 0.01


def test_group_holds_agree_with_the_exact_path_on_row_kernels():
    """Whole block groups held at a period taken while the chip still ramped up, or at one slot's
    two alike groups while the slots' group times cycle, put these 19-73% off --exact (at 25d7576:
    reduction first_add 2^24 +19.1%, layernorm warp_row two-pass 65536x512 +73.1%). The holds now
    settle on all slots' completions and end together."""
    cases = [registry.get("reduction").make(n=1 << 24, variant="first_add", threads=256),
             registry.get("layernorm").make(rows=65536, cols=512, variant="warp_row", passes="two", cache="none",
                                            vector=4, threads=256, unroll=4)]
    for cfg in cases:
        fast = simulate(cfg, "h200")
        exact = simulate(cfg, "h200", steady_state=False)
        assert abs(fast.time_s / exact.time_s - 1) < 0.02, cfg
        assert fast.events <= exact.events


def test_rounds_of_group_completions_that_cycle_settle_on_the_cycle():
    """reduction unroll_last_warp 2^26 (8 slots, 993 block groups): the rounds of group completions
    repeat in a 9-round cycle, so two runs of 4 rounds never agreed and every group was stepped
    (at 2adea2c: 49,834 events, the exact path 50,217). Runs taken ending at every recent completion
    settle on the cycle's mean."""
    cfg = registry.get("reduction").make(n=1 << 26, variant="unroll_last_warp", threads=256)
    fast = simulate(cfg, "h200")
    # the completions themselves repeat every 18 (2.25 rounds): held on that cycle's mean, the groups
    # settle after 37 completions, not 65 (8,582 events before, +0.42% against --exact; now 5,982, +0.14%)
    assert fast.events < 6500
    exact = simulate(cfg, "h200", steady_state=False)
    assert abs(fast.time_s / exact.time_s - 1) < 0.005


def test_completion_cycles_are_found_and_jitter_is_not():
    from tilesim.engine.steady import GROUP_CYCLE_ROUNDS, GROUP_SAMPLES, _completion_cycle

    slots = 8
    gaps = [0.41, 0.15, 0.11, 0.016, 0.047, 0.027, 0.02, 0.026, 0.31, 0.26, 0.22, 0.089, 0.064, 0.02, 0.026,
            0.023, 0.035, 0.19]  # 18 completions (2.25 rounds of 8 slots) that repeat
    ends, t = [], 0.0
    for g in gaps * 4:
        t += g
        ends.append(t)
    need = max(len(gaps), GROUP_CYCLE_ROUNDS * slots, GROUP_SAMPLES) + 1 + len(gaps)
    assert _completion_cycle(ends[:need], slots, 0.01) == len(gaps)
    assert _completion_cycle(ends[:need - 1], slots, 0.01) == 0  # too few completions yet
    rng = random.Random(3)  # gaps that jitter without repeating (slots overtaking one another)
    noisy, t = [], 0.0
    for _ in range(4 * len(gaps)):
        t += rng.uniform(0.0, 0.6)
        noisy.append(t)
    assert _completion_cycle(noisy, slots, 0.01) == 0
    assert _completion_cycle(ends, slots, -1.0) == 0  # --exact: never
    # one slot: no fewer groups than runs of one round need (GROUP_SAMPLES + 1 runs of one)
    assert _completion_cycle([1.0, 2.0, 3.0, 4.0, 5.0], 1, 0.01) == 0
    assert _completion_cycle([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 1, 0.01) == 1


def test_group_holds_end_together_and_release_the_channels_before_any_slot_steps():
    """reduction sequential t128 2^22 (16 slots, dispatch-bound: the holds reserve all of the SMs'
    block intake). Slots that ended their holds a group apart, or stepped while the others still
    held, queued behind those reservations: 9.0% slower than --exact with per-slot holds rounded to
    whole groups. The holds now end at one event and every slot releases before any steps."""
    cfg = registry.get("reduction").make(n=1 << 22, variant="sequential", threads=128)
    fast = simulate(cfg, "h200")
    exact = simulate(cfg, "h200", steady_state=False)
    assert fast.events < exact.events / 2
    assert abs(fast.time_s / exact.time_s - 1) < 0.02


def test_step_costs_are_kept_and_handed_out_as_copies():
    """The cost model works a step's cost out once per step, GPU and warp count; a caller that
    changes what it was given does not change what the next caller gets."""
    import tilesim.cost as cost
    from tilesim.api import lower, resolve_hardware
    from tilesim.cost import nvidia

    hw = resolve_hardware("h200")
    step = lower(registry.get("gemm").make(m=256, n=256, k=256), hw)[0].phases[0].step
    cost._cache.clear()
    first = cost.step_cost(step, hw, 8)
    assert first == nvidia.step_cost(step, hw, 8)
    first.load_l2_bytes_each.append(1.0)
    first.shared_load_wavefronts = -1.0
    again = cost.step_cost(step, hw, 8)
    assert again == nvidia.step_cost(step, hw, 8) and again is not first
    assert len(cost._cache) == 1
    assert cost.step_cost(step, hw, 4) == nvidia.step_cost(step, hw, 4)  # another warp count: its own
    assert len(cost._cache) == 2


def test_window_means_settle_jittering_loops_and_not_ramps():
    from tilesim.engine.steady import STEADY_TOL, WINDOW_SAMPLES, WINDOW_SAMPLES_MIN, _window_mean

    rng = random.Random(7)
    first = [5.0]  # the loop's first window never counts
    jitter = [1.0 + rng.uniform(-0.05, 0.05) for _ in range(WINDOW_SAMPLES)]  # +-5%, never two alike
    n = _window_mean(first + jitter, STEADY_TOL)
    assert n == WINDOW_SAMPLES  # the most windows whose mean is known well enough
    mean = sum(jitter[-n:]) / n
    assert abs(mean - 1.0) < 0.03
    assert _window_mean(first + jitter[:WINDOW_SAMPLES_MIN - 1], STEADY_TOL) == 0  # too few windows
    assert _window_mean(first + [1.01**i for i in range(WINDOW_SAMPLES)], STEADY_TOL) == 0  # a ramp of 1% a window
    wide = [1.0 + rng.uniform(-0.3, 0.3) for _ in range(WINDOW_SAMPLES)]  # a mean not yet known within tol
    assert _window_mean(first + wide, STEADY_TOL) == 0
    assert _window_mean(first + jitter, -1.0) == 0  # --exact: never


def test_a_loop_whose_windows_jitter_holds_at_their_mean():
    """reg2d 64x64x8 4x4 vectorized at 4096^3 (5 slots): windows of slots stepping together jitter
    by about 5% without repeating, so two alike came by chance and the loop held at a sample
    (23,703 events, -1.4% against --exact). The mean of the last windows, once known within the
    tolerance, holds sooner and closer (15,883 events from a clean L2; 17,517 from the flushed one,
    whose first holds end when the earlier work's dirty lines are written back)."""
    cfg = registry.get("gemm").make(m=4096, n=4096, k=4096, variant="reg2d", bm=64, bn=64, bk=8, tm=4, tn=4,
                                    vectorize=True)
    fast = simulate(cfg, "h200")
    assert fast.events < 19000
    exact = simulate(cfg, "h200", steady_state=False)
    assert abs(fast.time_s / exact.time_s - 1) < 0.01


_SKIP_CASES = (
    ("gemm", {"m": 1024, "n": 1024, "k": 1024, "variant": "reg2d", "bm": 64, "bn": 64, "bk": 8, "tm": 4, "tn": 4}),
    ("softmax", {"rows": 2048, "cols": 256, "variant": "block_tree"}),
    ("tc_gemm", {"m": 1024, "n": 1024, "k": 1024}),
)


@pytest.mark.parametrize(("family", "knobs"), _SKIP_CASES, ids=[f for f, _ in _SKIP_CASES])
def test_a_wait_that_nothing_precedes_advances_the_clock_and_changes_nothing(monkeypatch, family, knobs):
    """Where no other event is due before a process's wake-up time, the engine moves the clock
    there itself instead of scheduling a timeout (sim._wait): it does so often, and the prediction,
    the traffic and the engine's step count are exactly those of always yielding the timeout."""
    import tilesim.engine.sim as sim

    cfg = registry.get(family).make(**knobs)
    skipped = []
    real_wait = sim._wait

    def counting_wait(env, delay_s):
        got = real_wait(env, delay_s)
        skipped.append(got is None)
        return got

    monkeypatch.setattr(sim, "_wait", counting_wait)
    fast = simulate(cfg, "h200")
    monkeypatch.setattr(sim, "_wait", sim._timeout)
    plain = simulate(cfg, "h200")
    assert any(skipped), "no wait was ever skipped: the fast path is not exercised"
    assert (fast.time_s, fast.events, fast.traffic, fast.utilization) == (
        plain.time_s, plain.events, plain.traffic, plain.utilization)


@pytest.mark.parametrize(("family", "knobs"), [
    ("gemm", {"m": 1000, "n": 3000, "k": 512, "variant": "reg2d", "bm": 64, "bn": 128, "bk": 8, "tm": 8, "tn": 8}),
    ("softmax", {"rows": 4096, "cols": 1024, "variant": "warp_shuffle"}),
    ("tc_gemm", {"m": 2048, "n": 1024, "k": 512}),
], ids=["gemm", "softmax", "tc_gemm"])
def test_tile_projections_worked_out_by_column_match_block_by_block(family, knobs):
    """A block group's distinct tiles, worked out coordinate by coordinate over the group's blocks,
    are those (and in the first-seen order, which the L2 lookups follow) that substituting each
    block's indices into the tile's coordinates gives, with as many blocks each."""
    from tilesim.api import lower, resolve_hardware
    from tilesim.engine.projection import _project
    from tilesim.engine.sim import Engine

    hw = resolve_hardware("h200")
    program = lower(registry.get(family).make(**knobs), hw)[0]
    engine = Engine(program, hw)
    blocks = program.launch.blocks
    groups = [(0, min(132, blocks)), (min(132, blocks - 1), min(97, blocks - min(132, blocks - 1)))]
    checked = 0
    for phase in program.phases:
        tiles = [ld.tile for ld in phase.step.loads] + [st.tile for st in phase.step.stores]
        for tile in tiles:
            for first, count in groups:
                expected: dict = {}
                for b in range(first, first + count):
                    bx, by, bz = program.launch.block_indices(b)
                    proj = tuple(_project(c, {"bx": bx, "by": by, "bz": bz}, phase.index) for c in tile.coords)
                    expected[proj] = expected.get(proj, 0) + 1
                assert engine._projections(tile, phase.index, first, count) == list(expected.items())
                checked += 1
    assert checked >= 4


class _KeepEveryRange:
    """L2Cache.touch_range as it was before held ranges were dropped: every range kept."""

    @staticmethod
    def touch_range(cache, prefix, k0, k1, start_s, period_s):
        mark = [k0, k1, start_s, period_s]
        if k1 > k0:
            cache._ranges.setdefault(prefix, []).append(mark)
        return mark


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["touch", "range", "range", "stream", "stop"]), st.integers(0, 1),
                          st.integers(0, 5), st.integers(1, 8), st.floats(0.1, 3.0)), min_size=5, max_size=60))
def test_dropping_ranges_that_can_no_longer_hit_changes_no_answer(ops):
    """The L2 drops a tile's oldest held ranges once their last touch lies more than the capacity behind
    (the byte clock only grows): every lookup answers as with every range kept."""
    from tilesim.engine.l2 import L2Cache

    kept, dropped = L2Cache(100), L2Cache(100)
    now = 0.0
    rate = 0.0
    for op, prefix, k, span, dt in ops:
        now += dt
        if op == "touch":
            assert kept.access(prefix, k, 30, now) == dropped.access(prefix, k, 30, now)
            assert kept.access_many([prefix, prefix + 10], k, 30, now) == dropped.access_many(
                [prefix, prefix + 10], k, 30, now)
        elif op == "range":
            _KeepEveryRange.touch_range(kept, prefix, k, k + span, now, dt)
            dropped.touch_range(prefix, k, k + span, now, dt)
        elif op == "stream":
            rate += 40.0
            kept.start_stream(40.0, now)
            dropped.start_stream(40.0, now)
        elif rate > 0:
            rate -= 40.0
            kept.stop_stream(40.0, now)
            dropped.stop_stream(40.0, now)
    assert sum(map(len, dropped._ranges.values())) <= sum(map(len, kept._ranges.values()))


def test_a_window_that_takes_the_period_the_slot_last_held_is_steady():
    """After the loop's first window, one window within the tolerance of the period the slot's previous
    group held the phase at is that steady state; the first window, another period, no prior or --exact
    are not."""
    from tilesim.engine.steady import _repeats_prior

    prior = 1.6718e-6
    assert _repeats_prior([1.79e-6, 1.6720e-6], prior, 0.01) == 1
    assert _repeats_prior([1.6718e-6], prior, 0.01) == 0  # the pipeline's fill
    assert _repeats_prior([1.79e-6, 1.3932e-6], prior, 0.01) == 0  # still ramping
    assert _repeats_prior([1.79e-6, 1.6720e-6], 0.0, 0.01) == 0  # the slot's first group
    assert _repeats_prior([1.79e-6, 1.6718e-6], prior, -1.0) == 0  # --exact: never


def test_groups_after_a_slots_first_hold_their_loop_sooner_at_the_same_answer(monkeypatch):
    """tc_gemm's WMMA from global, 64x64x16, 16 warps in 8 warp groups, 3 blocks per SM, at 4096x4096x1024:
    every group after a slot's first holds its k-loop once a window repeats the period the slot's last
    group held (4,904 events; 6,167 waiting for three windows alike), within 1% of stepping every k-step
    (+0.74%; +0.61% without)."""
    import tilesim.engine.sim as sim

    cfg = registry.get("tc_gemm").make(m=4096, n=4096, k=1024, instruction="wmma", staging="global", bm=64, bn=64,
                                       bk=16, wm=16, wn=16, layout="naive", stages=1)
    fast = simulate(cfg, "h200")
    monkeypatch.setattr(sim, "_repeats_prior", lambda *args: 0)
    waiting = simulate(cfg, "h200")
    monkeypatch.undo()
    assert fast.events < 0.85 * waiting.events
    assert abs(fast.time_s / waiting.time_s - 1) < 0.005
    exact = simulate(cfg, "h200", steady_state=False)
    assert abs(fast.time_s / exact.time_s - 1) < 0.01
