"""tilesim: a memory-hierarchy simulator for tiled GPU kernels."""

__version__ = "0.1.0"
