"""When a simulated loop, or the stream of block groups, has settled: the rules the engine holds by.

The engine (:mod:`tilesim.engine.sim`, "Steady states") steps a k-loop in windows and block groups one by
one until these rules say their timing has settled; then it holds the rest at the settled period.
Pure functions of the measured window times and group completion times, with their tolerances."""

from __future__ import annotations

STEADY_TOL = 0.01  # relative difference of two step windows that counts as settled
GROUP_STEADY_TOL = 0.01  # relative difference of group completion runs that counts as settled
# Whole block groups settle on the rate at which full groups complete over all slots, counted from the
# end of the last slot's first group (the first groups carry the launch's ramp), in runs of c rounds
# (c x slots completions; a round is one group a slot): _groups_settled. A run's time is taken ending
# at each of the last max(c x slots, GROUP_SAMPLES) completions, so a lone late group or a cycle of
# rounds (slots taking turns at a channel: 9-round cycles seen, reduction unroll_last_warp 2^26 at 8
# slots) is averaged over instead of two runs matching by chance
GROUP_SAMPLES = 4  # runs looked at, at least (one slot: its last four groups)
# below GROUP_AVERAGE_ROUNDS rounds a run, this share of the runs must lie within GROUP_STEADY_TOL of
# their median (in a cycle longer than the run, runs ending at different completions differ by its swing)
GROUP_STEADY_SHARE = 0.75
GROUP_AVERAGE_ROUNDS = 4  # from this many rounds a run, the runs' mean alone decides (2adea2c's run length)
MAX_GROUP_CYCLE = 12  # rounds a run, at most
# or once the runs of L completions (L any number up to MAX_GROUP_CYCLE rounds') ending at each of the
# last max(L, GROUP_CYCLE_ROUNDS rounds, GROUP_SAMPLES) + 1 completions all take the same time (_completion_cycle):
# the completions repeat every L however the slots take turns
GROUP_CYCLE_ROUNDS = 2
# whole groups are held only for at least this many group times (a slot in another phase than the
# first holder's stretches or squeezes its groups to the common end, by up to half a group)
MIN_GROUP_HOLD = 2
FALLBACK_WINDOWS = 4  # steady windows after which a group holds alone
# a k-loop whose step windows jitter around a steady mean (slots taking turns at a channel repeat
# every few windows) is steady once its windows repeat in runs of c, for some c up to this (the
# last three runs each within STEADY_TOL of the one before); it holds at their mean (_window_cycle)
MAX_WINDOW_CYCLE = 12  # 9-window cycles seen: tile_sizes reg2d 64x128x16 t8x8 vec at 4096^3, 4 slots
# a k-loop whose windows jitter without repeating is steady once the mean of its last windows is
# known well enough (_window_mean): from WINDOW_SAMPLES_MIN to WINDOW_SAMPLES windows, a standard
# error of their mean within WINDOW_SE_TOL x STEADY_TOL of it, and no ramp between their halves
WINDOW_SAMPLES_MIN = 10
WINDOW_SAMPLES = 16
WINDOW_SE_TOL = 1.5
WINDOW_TREND_TOL = 2.0


def _window_cycle(per_step: list[float], tol: float) -> int:
    """How many step windows a k-loop's period spans once settled: the smallest ``c`` (1 to
    MAX_WINDOW_CYCLE) for which the last three runs of ``c`` windows (``per_step``, seconds per
    step) each took what the run before took, within ``tol``, and the last window took what the
    window ``c`` before took (slots taking turns at a channel make single windows jitter around a
    steady mean, repeating every few); 0 when none (a negative ``tol``: never). The loop's first
    window (it fills the pipeline) never counts.

    A period of one window needs three alike too: windows that take one of a few values in no
    fixed order (reg2d 64x64x8 t4x4 vectorized at 4096^3: 1.238 and 1.270 us a step) match two in a
    row by chance, and a hold at that sample missed the mean by 2%."""
    n = len(per_step)
    for c in range(1, MAX_WINDOW_CYCLE + 1):
        if n < 3 * c + 1:
            break
        s0, s1, s2 = (sum(per_step[n - (b + 1) * c:n - b * c]) for b in range(3))
        if (s1 > 0 and s2 > 0 and abs(s0 - s1) <= tol * s1 and abs(s1 - s2) <= tol * s2
                and abs(per_step[-1] - per_step[-1 - c]) <= tol * per_step[-1 - c]):
            return c
    return 0


def _window_mean(per_step: list[float], tol: float) -> int:
    """How many of the last step windows (``per_step``, seconds per step) a k-loop's period is
    averaged over once their mean is known within ``tol``: the largest ``n`` from
    WINDOW_SAMPLES_MIN to WINDOW_SAMPLES for which the standard error of the last ``n`` windows'
    mean is at most WINDOW_SE_TOL times ``tol`` of it and the means of their first and second
    halves differ by at most WINDOW_TREND_TOL times ``tol`` of it (no ramp); 0 when none (a
    negative ``tol``: never). The loop's first window (it fills the pipeline) never counts.

    Slots stepping together take turns at the SM's channels, so single windows jitter about a
    steady mean (about 5% seen: reg2d 4x4 tilings at 8 to 10 slots) without repeating: two windows
    alike are then a chance match and hold at a sample, not at the mean."""
    if tol < 0:
        return 0
    samples = per_step[1:]
    for n in range(min(len(samples), WINDOW_SAMPLES), WINDOW_SAMPLES_MIN - 1, -1):
        last = samples[-n:]
        mean = sum(last) / n
        if mean <= 0:
            continue
        var = sum((x - mean) ** 2 for x in last) / (n - 1)
        half = n // 2
        first, second = sum(last[:half]) / half, sum(last[n - half:]) / half
        if (var / n <= (WINDOW_SE_TOL * tol * mean) ** 2
                and abs(second - first) <= WINDOW_TREND_TOL * tol * mean):
            return n
    return 0


def _completion_cycle(ends, slots: int, tol: float) -> int:
    """How many group completions (``ends``, ``slots`` a round) the completions repeat after once
    settled: the smallest ``L`` (1 to MAX_GROUP_CYCLE rounds' worth) for which the runs of ``L``
    completions ending at each of the last ``max(L, GROUP_CYCLE_ROUNDS rounds, GROUP_SAMPLES) + 1``
    completions all took the same time within ``tol`` (then the gaps between completions repeat
    every ``L``, however the slots take turns), with never fewer completions looked at than runs of
    one round need in ``_groups_settled``; 0 when none (a negative ``tol``: never). A slot's group
    time is then a run's time over ``L``, times ``slots``: the mean over the cycle.

    Slots taking turns at a channel can make the completions repeat after a number of completions
    that is no whole number of rounds (18 completions at 8 slots, 2.25 rounds: reduction 2-pass at
    2^26), which runs of whole rounds see as a cycle of 9 rounds."""
    if tol < 0:
        return 0
    n = len(ends)
    for length in range(1, MAX_GROUP_CYCLE * slots + 1):
        # runs looked at: never fewer completions than runs of one round need (GROUP_SAMPLES)
        w = max(length, GROUP_CYCLE_ROUNDS * slots, GROUP_SAMPLES) + 1
        if n < w + max(length, slots):
            break
        lo = hi = ends[-1] - ends[-1 - length]
        for i in range(n - 2, n - w - 1, -1):  # newest first: a run off the others ends the look
            run = ends[i] - ends[i - length]
            lo, hi = min(lo, run), max(hi, run)
            if hi - lo > tol * lo:
                break
        else:
            if lo > 0:
                return length
    return 0


def _repeats_prior(per_step: list[float], prior_s: float, tol: float) -> int:
    """1 when the last step window (``per_step``, seconds per step; not the loop's first, which fills the
    pipeline) took ``prior_s`` within ``tol``: the period at which the slot's previous block group held the
    same phase (the same step, on the same slot, so under the same other slots while none has come or gone:
    the state it held, reached again); 0 otherwise (no prior, a negative ``tol``: never).

    A group that waits for three windows alike (:func:`_window_cycle`) steps, in every group after a slot's
    first, windows whose period it already knows: tc_gemm's WMMA 64x64x16 at 4096^3 holds each group's loop
    two windows sooner (5,477 -> 4,581 events), and the holds agree with ``--exact`` as before over every
    scenario and suite configuration (``python -m validation.studies.holds_vs_exact``)."""
    if tol < 0 or prior_s <= 0 or len(per_step) < 2:
        return 0
    return 1 if abs(per_step[-1] - prior_s) <= tol * prior_s else 0
