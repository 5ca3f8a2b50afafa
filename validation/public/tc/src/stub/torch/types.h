// Empty stand-in: the excerpt includes <torch/types.h> but its kernels use no torch API (see ../README.md).
