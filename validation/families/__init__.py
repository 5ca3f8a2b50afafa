"""One package per kernel family: ``<name>.cu`` (the CUDA source), ``runner.py`` (the runner protocol of
:mod:`validation.harness.runners`) and ``suite.toml`` (the measured configurations)."""
