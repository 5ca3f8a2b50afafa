"""Closed-form analysis of tiled kernels, generic over families: occupancy, waves, roofline bounds.

Pure functions over :class:`~tilesim.hardware.HardwareSpec` and launch numbers; no simulation and
no I/O. A family's own closed-form counts live in its package (GEMM's in
:mod:`tilesim.kernels.gemm.analytic`).
"""

from tilesim.analytic.bounds import RESOURCES, Bound, roofline_time_s, smem_bytes_per_s
from tilesim.analytic.occupancy import LIMIT_NAMES, Occupancy, occupancy
from tilesim.analytic.waves import Waves, waves

__all__ = [
    "LIMIT_NAMES",
    "RESOURCES",
    "Bound",
    "Occupancy",
    "Waves",
    "occupancy",
    "roofline_time_s",
    "smem_bytes_per_s",
    "waves",
]
