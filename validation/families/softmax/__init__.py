"""The softmax family's CUDA kernels (``softmax.cu``), runner and suite."""
