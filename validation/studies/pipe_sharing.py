"""Does fair sharing of an SM's pipes keep blocks that stream HBM tiles in phase? (CPU, issue #10)

``hbm_tiles_probe`` (validation/results/h200/calibration/hbm_tiles.json) measured 4 blocks of 4
warps per SM, each k-step its staging then 512 FFMA per thread: 2802 cycles a k-step without loads
(``none_4b_4w_f512``), 3509 with a fresh HBM tile each k-step (``contig_4b_4w_f512``), about the
blocks' compute together plus one load: as if they loaded in phase and computed together. The
engine, whose slots take the pipes in turn a round at a time, lets one slot compute while the
others wait on their loads and predicts dgstaged_outer 8x8 R4 about 50% fast (engine_check).

This study asks whether *processor sharing* (PS: every slot computing at an instant gets an equal
share of the pipe) would hold the blocks in phase. It is a fluid model, not the engine: ``n`` slots
each repeat "compute ``work`` pipe-cycles, then load a tile (the HBM serves the slots' tiles one
after another, ``transfer`` cycles each, then ``latency`` cycles)". The pipe serves the slots
computing at once either by PS (each at ``min(cap, 1/k)`` of the pipe with ``k`` computing;
``cap`` is what one slot alone can use) or by strict age priority (the earliest-arrived slot first,
each at most ``cap``, the rest to the next: what the age_probe's older-first arbitration tends to).
It prints each policy's steady k-step period from slots started in phase and from slots started a
little apart.

Result (the default arguments: the probe's 4 blocks, 700 pipe-cycles each a k-step, a load of
about 870 cycles, a lone block's 1198 against 700): only slots started *exactly* in phase and
served identically stay in phase under PS (period = all compute + one load); any difference in
when their loads return (the HBM serving one slot's tiles before another's) spreads them apart
and the period falls to about the compute alone, as under age priority. Fair sharing alone does
not give what the probe measured: something must pull the blocks back into phase.

``python -m validation.studies.pipe_sharing [--work 700 --latency 620 --transfer 254 --cap 0.58]``
prints the table. Nothing in the simulator is taken from it.
"""

from __future__ import annotations

import argparse

#: hbm_tiles.json: none_4b_4w_f512 2802 cycles a k-step for 4 blocks (700 a block), none_1b_4w_f512
#: 1198 for one alone (cap 700 / 1198 = 0.58), contig_1b_4w_f512 - none_1b_4w_f512 = 867 cycles a load;
#: one slot group's 132 tiles of 4 KiB at about 4.2 TB/s take about 254 cycles at 1.98 GHz
DEFAULTS = {"work": 700.0, "latency": 613.0, "transfer": 254.0, "cap": 0.58}


def period(policy: str, slots: int = 4, work: float = 700.0, latency: float = 613.0, transfer: float = 254.0,
           cap: float = 1.0, start_gap: float = 0.0, steps: int = 200) -> tuple[float, list[float]]:
    """Steady k-step period (cycles) of ``slots`` slots under ``policy`` ("ps" or "age"), and the gaps
    between their last compute starts. Slot ``i`` starts its first load at ``i * start_gap``."""
    if policy not in ("ps", "age"):
        raise ValueError(f"policy = {policy!r}: must be 'ps' or 'age'")
    if not 0 < cap <= 1:
        raise ValueError(f"cap = {cap!r}: must be in (0, 1]")
    hbm_free = 0.0
    arrive: dict[int, float] = {}
    for i in sorted(range(slots), key=lambda s: s * start_gap):
        hbm_free = max(i * start_gap, hbm_free) + transfer
        arrive[i] = hbm_free + latency
    left: dict[int, float] = {}
    order: list[int] = []
    starts: dict[int, list[float]] = {i: [] for i in range(slots)}
    now = 0.0
    while min(len(s) for s in starts.values()) < steps:
        rates: dict[int, float] = {}
        if policy == "ps":
            rates = {i: min(cap, 1.0 / len(left)) for i in left}
        else:
            spare = 1.0
            for i in order:
                rates[i] = min(cap, spare)
                spare -= rates[i]
        finish = min((now + left[i] / rates[i] for i in left if rates[i] > 0), default=float("inf"))
        t = min(min(arrive.values(), default=float("inf")), finish)
        for i in left:
            left[i] -= (t - now) * rates[i]
        now = t
        for i in [i for i in order if left[i] <= 1e-9]:
            del left[i]
            order.remove(i)
            hbm_free = max(now, hbm_free) + transfer
            arrive[i] = hbm_free + latency
        for i in [i for i, a in arrive.items() if a <= now + 1e-9]:
            del arrive[i]
            left[i] = work
            order.append(i)
            starts[i].append(now)
    last = sorted(s[-1] for s in starts.values())
    runs = 20
    return (starts[0][-1] - starts[0][-1 - runs]) / runs, [b - a for a, b in zip(last, last[1:], strict=False)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation.studies.pipe_sharing", description=__doc__.splitlines()[0])
    for name, value in DEFAULTS.items():
        p.add_argument(f"--{name}", type=float, default=value)
    ns = p.parse_args(argv)
    kw = {k: getattr(ns, k) for k in DEFAULTS}
    print(f"4 slots: compute alone {4 * kw['work']:.0f} cycles a k-step; in phase, compute + one load "
          f"(latency + the slots' transfers)")
    print(f"{'policy':6s} {'transfer':>8s} {'start gap':>9s} {'period':>7s}  gaps between the slots' compute starts")
    for policy in ("ps", "age"):
        for transfer in (0.0, kw["transfer"]):
            for gap in (0.0, 100.0):
                per, gaps = period(policy, work=kw["work"], latency=kw["latency"], transfer=transfer,
                                   cap=kw["cap"], start_gap=gap)
                print(f"{policy:6s} {transfer:8.0f} {gap:9.0f} {per:7.0f}  {' '.join(f'{g:.0f}' for g in gaps)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
