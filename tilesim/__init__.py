"""tilesim: a memory-hierarchy simulator for tiled GPU kernels.

>>> from tilesim import simulate, GemmConfig
>>> r = simulate(GemmConfig(4096, 4096, 4096, "reg2d"), "h200")
"""

from tilesim.api import L2_STARTS, lower, resolve_hardware, simulate
from tilesim.kernels.gemm import GemmConfig
from tilesim.result import SimResult, Traffic

__version__ = "0.1.0"
__all__ = ["GemmConfig", "L2_STARTS", "SimResult", "Traffic", "lower", "resolve_hardware", "simulate", "__version__"]
