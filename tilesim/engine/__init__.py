"""The discrete-event engine (simpy). It executes tile programs and knows no kernel family."""

from tilesim.engine.sim import Engine, simulate_program

__all__ = ["Engine", "simulate_program"]
