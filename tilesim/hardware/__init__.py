"""The hardware catalog: every GPU is data, every value has a source, calibration overrides.

``load(name)`` gives a :class:`HardwareSpec` (``spec.py``) read from ``data/<name>.toml`` (sourced
values), its assumed overlay ``assumed/<name>.toml`` (what no source gives, each flagged in
``spec.assumed``) and its calibrated profile (``catalog.py``); the vocabulary of the files is
``fields.py``, the memory hierarchy ``levels.py``.
"""

from tilesim.hardware.catalog import available, load, with_overrides
from tilesim.hardware.fields import DATA_FIELDS
from tilesim.hardware.levels import MemoryLevel
from tilesim.hardware.spec import HardwareSpec, MissingHardwareValue

__all__ = ["DATA_FIELDS", "HardwareSpec", "MemoryLevel", "MissingHardwareValue", "available", "load",
           "with_overrides"]
