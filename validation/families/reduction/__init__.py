"""The reduction family: reduction.cu, runner.py (the runner protocol), suite.toml."""
