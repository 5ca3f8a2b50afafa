// Empty stand-in: the excerpt includes <torch/extension.h> but its kernels use no torch API (see ../README.md).
