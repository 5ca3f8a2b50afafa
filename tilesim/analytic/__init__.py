"""Closed-form analysis of tiled kernels: occupancy, waves, GEMM traffic counts, roofline bounds.

Pure functions over :class:`~tilesim.hardware.HardwareSpec` and
:class:`~tilesim.kernels.gemm_config.GemmConfig`; no simulation and no I/O.
"""

from tilesim.analytic.bounds import RESOURCES, Bound, gemm_bound, roofline_time_s, smem_bytes_per_s
from tilesim.analytic.counts import (
    GemmTraffic,
    gemm_traffic,
    naive_gemm_reads,
    naive_time_s,
    reuse_factor,
    tiled_gemm_reads_elements,
)
from tilesim.analytic.occupancy import LIMIT_NAMES, Occupancy, gemm_occupancy, occupancy
from tilesim.analytic.waves import Waves, waves

__all__ = [
    "LIMIT_NAMES",
    "RESOURCES",
    "Bound",
    "GemmTraffic",
    "Occupancy",
    "Waves",
    "gemm_bound",
    "gemm_occupancy",
    "gemm_traffic",
    "naive_gemm_reads",
    "naive_time_s",
    "occupancy",
    "reuse_factor",
    "roofline_time_s",
    "smem_bytes_per_s",
    "tiled_gemm_reads_elements",
    "waves",
]
