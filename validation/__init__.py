"""Validation layer: real CUDA kernels and measurements that check tilesim's predictions."""
