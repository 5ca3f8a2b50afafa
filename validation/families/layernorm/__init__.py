"""The layernorm family's validation: layernorm.cu (the CUDA kernels), runner.py (compile, check
against a float64 reference), suite.toml (the measured configurations)."""
