"""The ``tilesim`` command line: simulate one kernel of any registered family, list the families,
sweep a scenario, run the source document's GEMM studies, inspect hardware, benchmark the simulator,
forward to the validation harness.

This package is the only part of ``tilesim`` that prints or writes files; it parses, calls the
library and prints, one module per command. Kernel families come from
:mod:`tilesim.kernels.registry`: ``tilesim simulate <family>`` has one option per configuration
field (``--bm 128``, ``--smem-pad 4``, ``--vectorize``), so the options follow the family's config
class. Invalid input, click's usage errors included, prints one line ``error: <reason>`` on stderr
and exits with status 2. matplotlib is imported only when a plot is written, and the validation
package only inside ``tilesim validate``.
"""

from tilesim.cli import bench, hardware, plot, simulate, study, sweep, tune, validate  # noqa: F401  (they add their commands)
from tilesim.cli.base import cli, main

__all__ = ["cli", "main"]
