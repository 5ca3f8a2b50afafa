"""The steel-style GEMM on Apple GPUs: the m5-gemm comparison (predict_m5.py), the Metal kernels generated from
the family's knobs (metal.py) and their MLX runner for a Mac (runner.py); nothing measured here (no Mac)."""
