"""The library's front door: ``simulate(kernel, hardware) -> SimResult``."""

from __future__ import annotations

from dataclasses import fields, replace

from tilesim import hardware as hw_catalog
from tilesim.analytic.checks import check_program
from tilesim.engine import simulate_program
from tilesim.hardware import HardwareSpec
from tilesim.kernels import registry
from tilesim.program import TileProgram
from tilesim.result import SimResult


def resolve_hardware(hardware: str | HardwareSpec) -> HardwareSpec:
    """A spec as given, or the catalog entry (calibrated when a profile exists) for a name."""
    if isinstance(hardware, HardwareSpec):
        return hardware
    if not isinstance(hardware, str):
        raise ValueError(f"hardware must be a name or a HardwareSpec, got {type(hardware).__name__}")
    return hw_catalog.load(hardware)


def lower(kernel, hardware: str | HardwareSpec | None = None) -> tuple[TileProgram, ...]:
    """The tile programs of ``kernel``, one per kernel launch: a TileProgram (or a tuple of them) as
    is, or a registered family's configuration lowered by its family. With ``hardware`` given, the
    configuration is first checked against that GPU's limits (``ValueError`` naming the field), and
    every program against the launch limits, the device memory and its own FLOP counts
    (:func:`tilesim.analytic.checks.check_program`)."""
    hw = resolve_hardware(hardware) if hardware is not None else None
    if isinstance(kernel, TileProgram):
        out = (kernel,)
    elif isinstance(kernel, tuple) and kernel and all(isinstance(p, TileProgram) for p in kernel):
        out = kernel
    else:
        fam = registry.family_of(kernel)
        if hw is not None:
            fam.check_fits(kernel, hw)
        out = fam.lower(kernel)
        out = out if isinstance(out, tuple) else (out,)
    if hw is not None:
        for p in out:
            check_program(p, hw)
    return out


L2_STARTS = ("flushed", "clean")
"""What the L2 holds when the kernel starts: ``flushed``, the dirty lines an earlier write left (the
validation harness's L2 flush writes twice the L2 before every timed run; the measured state, see
validation/calibration/flush_probe.py), or ``clean`` (nothing the kernel must write back)."""


def simulate(kernel, hardware: str | HardwareSpec = "h200", *, timeline: bool = False,
             steady_state: bool = True, on_progress=None, l2_start: str = "flushed") -> SimResult:
    """Predict the time and the traffic per level of ``kernel`` on ``hardware``.

    ``kernel`` is a family configuration (e.g. :class:`~tilesim.kernels.gemm.config.GemmConfig`), a
    hand-written :class:`~tilesim.program.TileProgram`, or a tuple of programs launched in turn. Invalid input raises ``ValueError``
    naming the field before anything runs. ``steady_state=False`` steps every k-step instead of
    holding settled phases (slower, the reference). ``on_progress(fraction)``, when given, is called
    as the simulation advances (fraction of the block steps of all launches done, 0 to 1).
    ``l2_start`` (:data:`L2_STARTS`): the L2 at the first launch's start; later launches find what
    the earlier ones left of the earlier work's dirty lines.
    """
    if l2_start not in L2_STARTS:
        raise ValueError(f"simulate: l2_start = {l2_start!r}: choose from {L2_STARTS}")
    hw = resolve_hardware(hardware)
    programs = lower(kernel, hw)
    results = []
    dirty = None if l2_start == "flushed" else 0.0
    for i, p in enumerate(programs):
        each = None
        if on_progress is not None:
            def each(f, i=i):
                on_progress((i + f) / len(programs))
        r = simulate_program(p, hw, timeline=timeline, steady_state=steady_state, on_progress=each,
                             flushed_dirty_bytes=dirty)
        results.append(r)
        if hw.has("l2_flushed_dirty_bytes"):
            start = hw.get("l2_flushed_dirty_bytes") if dirty is None else dirty
            dirty = max(0.0, start - r.traffic.hbm_flushed_writeback_bytes)
    return results[0] if len(results) == 1 else combine(results)


def combine(results: list[SimResult]) -> SimResult:
    """One result for kernels launched one after another: times, traffic and events add up."""
    first = results[0]
    total_s = sum(r.time_s for r in results)
    traffic = {f.name: sum(getattr(r.traffic, f.name) for r in results) for f in fields(first.traffic)}
    l2_load = traffic["l2_load_bytes"]
    traffic["l2_hit_rate"] = 1.0 - traffic["hbm_read_bytes"] / l2_load if l2_load else 0.0
    util = {k: sum(r.utilization.get(k, 0.0) * r.time_s for r in results) / total_s for k in first.utilization}
    longest = max(results, key=lambda r: r.time_s)
    return replace(longest, kernel="+".join(r.kernel for r in results), time_s=total_s, utilization=util,
                   traffic=type(first.traffic)(**traffic), flops=sum(r.flops for r in results),
                   roofline_s=sum(r.roofline_s for r in results), events=sum(r.events for r in results),
                   timeline=None, loads=None)
