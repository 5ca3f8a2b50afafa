"""Where the harness finds a family's runner: ``validation/families/<family>/runner.py``, by name.

The runner protocol (every family follows it; nothing here names a family):

* ``FAMILY``: the family's name in :mod:`tilesim.kernels.registry`;
* ``kernel_source(config) -> KernelSource``: the CUDA source of one configuration (no GPU);
* ``prepare(config, seed=0) -> Case``: compiles, allocates seeded random inputs (needs CuPy); raises
  ``ValueError`` for a configuration the kernels cannot run;
* a ``Case`` has ``kernel_names`` (the lowered names of the kernels ``launch`` runs),
  ``attributes`` (``regs_per_thread``, ``static_smem_bytes``, ``local_bytes``: the maximum over the
  kernels), ``launch()`` (the whole operation once, asynchronously, no sync, no allocation) and
  ``check() -> (ok, rel_err, message)`` (poisoned output, one launch, a float64 reference).

Optional hooks, with the default the harness uses when a runner leaves them out:

* ``RATES``: ``{column: (counts key, scale)}``, the throughput columns of ``times.csv``: the
  family's analytic count (``KernelFamily.counts(config)[key]``) times ``scale`` over the median
  time. Default ``{"bytes_per_s": ("min_hbm_bytes", 1.0)}``.
* ``NCU_METRICS``: ``{metric: unit}`` Nsight Compute metrics the family adds to
  :data:`validation.harness.ncu.METRICS` (e.g. tensor-pipe activity). Default none.
* ``TIMING``: keyword overrides of the suite's timing defaults (``warmup``, ``reps``, ``min_reps``,
  ``budget_s``).
* ``reference_rows(configs) -> list[(row, prepare)]``: extra rows timed after the suite (e.g. a
  vendor library at each shape): ``row`` holds the config-side columns (``label`` at least),
  ``prepare()`` returns an object with ``launch()`` and ``rates(median_s) -> dict``.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

FAMILIES_DIR = Path(__file__).resolve().parents[1] / "families"
REQUIRED = ("FAMILY", "kernel_source", "prepare")
DEFAULT_RATES = {"bytes_per_s": ("min_hbm_bytes", 1.0)}


def available() -> list[str]:
    """The families that have a runner (``validation/families/<name>/runner.py``), sorted."""
    return sorted(p.parent.name for p in FAMILIES_DIR.glob("*/runner.py"))


def get_runner(family: str) -> ModuleType:
    """Import ``validation.families.<family>.runner`` and check it follows the protocol.

    Raises ``ValueError`` naming the family and what is missing (or the known families)."""
    if family not in available():
        raise ValueError(f"family = {family!r}: no validation/families/{family}/runner.py; "
                         f"families with a runner: {', '.join(available()) or 'none'}")
    mod = importlib.import_module(f"validation.families.{family}.runner")
    missing = [name for name in REQUIRED if not hasattr(mod, name)]
    if missing:
        raise ValueError(f"validation/families/{family}/runner.py lacks {', '.join(missing)} "
                         "(see validation.harness.runners)")
    if mod.FAMILY != family:
        raise ValueError(f"validation/families/{family}/runner.py: FAMILY = {mod.FAMILY!r}, expected {family!r}")
    return mod


def suite_path(family: str) -> Path:
    """``validation/families/<family>/suite.toml``."""
    return FAMILIES_DIR / family / "suite.toml"


def rates_of(runner: ModuleType) -> dict[str, tuple[str, float]]:
    """The runner's ``RATES`` or the default."""
    return dict(getattr(runner, "RATES", DEFAULT_RATES))
