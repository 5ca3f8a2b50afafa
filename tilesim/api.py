"""The library's front door: ``simulate(kernel, hardware) -> SimResult``."""

from __future__ import annotations

from tilesim import hardware as hw_catalog
from tilesim.engine import simulate_program
from tilesim.hardware import HardwareSpec
from tilesim.program import TileProgram
from tilesim.result import SimResult


def resolve_hardware(hardware: str | HardwareSpec) -> HardwareSpec:
    """A spec as given, or the catalog entry (calibrated when a profile exists) for a name."""
    if isinstance(hardware, HardwareSpec):
        return hardware
    if not isinstance(hardware, str):
        raise ValueError(f"hardware must be a name or a HardwareSpec, got {type(hardware).__name__}")
    return hw_catalog.load(hardware)


def lower(kernel, hardware: str | HardwareSpec) -> TileProgram:
    """The tile program of ``kernel``: a TileProgram as is, or any family config with ``.lower(hw)``."""
    hw = resolve_hardware(hardware)
    if isinstance(kernel, TileProgram):
        return kernel
    lower_fn = getattr(kernel, "lower", None)
    if lower_fn is None:
        raise ValueError(f"kernel must be a TileProgram or a kernel config with .lower(hw), got {type(kernel).__name__}")
    return lower_fn(hw)


def simulate(kernel, hardware: str | HardwareSpec = "h200", *, timeline: bool = False,
             steady_state: bool = True) -> SimResult:
    """Predict the time and the traffic per level of ``kernel`` on ``hardware``.

    ``kernel`` is a family configuration (e.g. :class:`~tilesim.kernels.gemm_config.GemmConfig`) or
    a hand-written :class:`~tilesim.program.TileProgram`. Invalid input raises ``ValueError``
    naming the field before anything runs. ``steady_state=False`` steps every k-step instead of
    holding settled phases (slower, the reference).
    """
    hw = resolve_hardware(hardware)
    return simulate_program(lower(kernel, hw), hw, timeline=timeline, steady_state=steady_state)
