"""Kernel families. Each lowers a frozen configuration to one :class:`~tilesim.program.TileProgram`."""
