"""The generic GPU validation harness: kernel sources, timing, metadata, the suite runner, the Nsight
Compute runner and the accuracy report. It drives every family's ``validation/families/<name>/runner.py``
(found by :mod:`validation.harness.runners`), never a family by name."""
