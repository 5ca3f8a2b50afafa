"""Timelines (issue #11): per warp group, loads in flight, barrier and dependency waits apart from load
waits, double buffering visible, holds drawn as the period they repeat, progress of a simulation."""

from __future__ import annotations

import pytest
from figure_checks import assert_no_overlaps, drawn

import tilesim
from tilesim.kernels import registry

GEMM = registry.get("gemm")
# double buffered through cp.async (3 stages): the next steps' copies are in flight while a step computes
DOUBLE = GEMM.make(m=2048, n=2048, k=2048, variant="warp", bm=128, bn=128, bk=16, wm=64, wn=64, wniter=4, tm=8,
                   tn=4, vectorize=True, pipeline="cp_async", stages=3)
# one buffer: a step's loads are issued when the step starts and waited for at once
SINGLE = GEMM.make(m=1024, n=1024, k=1024, variant="reg2d", bm=64, bn=64, bk=8, tm=4, tn=4)
# a barrier-free loop: its warps run as independent warp groups
NAIVE = GEMM.make(m=1024, n=1024, k=1024, variant="naive", bm=32, bn=32)


@pytest.fixture(scope="module")
def double():
    return tilesim.simulate(DOUBLE, "h200", timeline=True)


@pytest.fixture(scope="module")
def single():
    return tilesim.simulate(SINGLE, "h200", timeline=True, steady_state=False)


@pytest.fixture(scope="module")
def naive():
    return tilesim.simulate(NAIVE, "h200", timeline=True)


def _overlap_s(a, b) -> float:
    return min(a.end_s, b.end_s) - max(a.start_s, b.start_s)


def _steps(r, slot=0, group=0, kind="compute"):
    return [iv for iv in r.timeline if iv.slot == slot and iv.warp_group == group and iv.kind == kind]


def test_recording_is_off_without_the_timeline_and_changes_nothing():
    plain = tilesim.simulate(SINGLE, "h200")
    assert plain.timeline is None and plain.loads is None
    assert "loads" not in plain.to_dict() and "timeline" not in plain.to_dict()
    on = tilesim.simulate(SINGLE, "h200", timeline=True)
    assert on.loads and on.timeline
    assert on.to_dict() == plain.to_dict()  # same prediction, events included


def test_double_buffered_loads_are_in_flight_while_the_previous_step_computes(double):
    loads = [iv for iv in double.loads if iv.slot == 0 and iv.phase == "k-loop"]
    assert loads and {iv.kind for iv in double.loads} == {"cp.async"}
    computes = _steps(double, kind="compute")
    overlapped = [ld for ld in loads if any(_overlap_s(ld, c) > 0 for c in computes)]
    assert len(overlapped) >= len(loads) // 2, (len(overlapped), len(loads))


def test_single_buffered_loads_never_overlap_their_own_slots_math(single):
    loads = [iv for iv in single.loads if iv.slot == 0]
    assert loads and {iv.kind for iv in single.loads} == {"loads"}
    computes = _steps(single, kind="compute")
    assert all(_overlap_s(ld, c) <= 1e-15 for ld in loads for c in computes)
    # and each step waits for them: every load's arrival ends a load wait
    waits = {round(iv.end_s, 15) for iv in _steps(single, kind="load_wait")}
    assert sum(round(ld.end_s, 15) in waits for ld in loads) >= 0.9 * len(loads)


def test_a_steps_parts_fill_it_and_a_staged_step_waits_at_its_barrier(single):
    computes = _steps(single, kind="compute")
    assert computes
    for iv in computes:
        assert iv.parts and all(s > 0 for _, s in iv.parts)
        assert sum(s for _, s in iv.parts) == pytest.approx(iv.end_s - iv.start_s, rel=1e-9)
        names = [p for p, _ in iv.parts]
        assert names == sorted(names, key=["barrier", "math", "dependency", "stores"].index)
    kloop = [iv for iv in computes if iv.phase == "k-loop"]
    assert all(iv.parts[0][0] == "barrier" for iv in kloop)  # registers stored to shared memory, then a barrier


def test_barrier_free_loops_are_recorded_per_warp_group(naive):
    groups = {iv.warp_group for iv in naive.timeline if iv.kind == "load_wait"}
    assert groups == set(range(8))
    assert {iv.warp_group for iv in naive.loads} == set(range(8))
    assert any(p == "dependency" for iv in naive.timeline for p, _ in iv.parts)


def test_progress_goes_from_0_to_1_and_changes_no_result():
    seen: list[float] = []
    r = tilesim.simulate(SINGLE, "h200", steady_state=False, on_progress=seen.append)
    assert r == tilesim.simulate(SINGLE, "h200", steady_state=False)
    assert len(seen) > 10 and seen == sorted(seen) and seen[-1] == pytest.approx(1.0)
    held: list[float] = []
    tilesim.simulate(SINGLE, "h200", on_progress=held.append)  # holds count the steps they stand for
    assert held == sorted(held) and held[-1] == pytest.approx(1.0) and len(held) < len(seen)


# ----- the figure -------------------------------------------------------------------------------------


def test_figure_shows_loads_in_flight_barriers_and_plain_words(double, tmp_path):
    from tilesim.plots import timeline_figure

    fig = timeline_figure(double, kernel=GEMM.full_label(DOUBLE))
    fig.savefig(tmp_path / "t.png", dpi=60)
    renderer = drawn(fig)
    assert len(fig.axes) == 3
    words = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(w.startswith("storing tiles to shared memory, waiting at the barrier") for w in words), words
    assert any(w.startswith("loads in flight") and "cp.async copies" in w for w in words), words
    ax_loads = fig.axes[2]
    assert "loads in flight" in ax_loads.get_title() and "cp.async copies" in ax_loads.get_title()
    assert "µs" in ax_loads.get_xlabel()
    shown = words + [t.get_text() for ax in fig.axes for t in ax.texts] + [ax.get_title() for ax in fig.axes]
    assert not any("steady" in w for w in shown)
    # a hold's label says what its period is made of
    assert any(t.get_text().startswith("repeats every") and "% computing" in t.get_text()
               for ax in fig.axes for t in ax.texts)
    assert_no_overlaps(fig, renderer)


def test_figure_has_a_track_per_warp_group(naive):
    from tilesim.plots import timeline_figure

    fig = timeline_figure(naive)
    renderer = drawn(fig)
    overview = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    zoom = [t.get_text() for t in fig.axes[1].get_yticklabels()]
    assert overview == ["block slot 0", "block slot 1"]
    assert "block slot 1, warp group 7" in zoom and len(zoom) == 16
    words = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(w.startswith("waiting on a dependency chain") for w in words)
    assert_no_overlaps(fig, renderer)


def test_loads_in_flight_inside_a_hold_repeat_the_period_before_it(double):
    from tilesim.plots import loads_in_flight

    hold = next(iv for iv in double.timeline if iv.kind == "steady" and iv.phase == "k-loop"
                and iv.repetitions > 20)
    lo, hi = hold.start_s + 5 * hold.period_s, hold.start_s + 15 * hold.period_s
    t, n = loads_in_flight(double.loads, double.timeline, hold.slot, lo, hi)
    assert not any(ld.slot == hold.slot and lo < ld.start_s < hi for ld in double.loads)  # nothing recorded there
    assert max(n) >= 1
    rises = sum(1 for a, b in zip(n, n[1:], strict=False) if b > a)
    assert 8 <= rises <= 12  # about once per period over ten periods
