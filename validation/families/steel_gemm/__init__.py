"""The steel-style GEMM on Apple GPUs: the m5-gemm comparison (predict_m5.py); nothing measured here (no Mac)."""
