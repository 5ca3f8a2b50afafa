"""The hardware catalog: one TOML data file per GPU, loaded into a frozen :class:`HardwareSpec`."""

from tilesim.hardware.spec import DATA_FIELDS, HardwareSpec, available, load, with_overrides

__all__ = ["DATA_FIELDS", "HardwareSpec", "available", "load", "with_overrides"]
