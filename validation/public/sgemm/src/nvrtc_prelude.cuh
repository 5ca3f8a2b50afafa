// tilesim's wrapper for siboehm/SGEMM_CUDA's kernels (NOT upstream code; the kernels' files beside it
// are verbatim). validation/public/sgemm/kernels.py builds ONE translation unit from: this prelude,
// each kernel file with its `#pragma once` and `#include <...>` lines left out (NVRTC has no C/C++
// standard library and no cuBLAS headers; none of the kernels' bodies uses them), and the explicit
// template instantiations siboehm's src/runner.cu launches. nvcc (the offline test) and CuPy's
// NVRTC (the device run) compile the same text.

// `uint` is glibc's <sys/types.h> typedef, which the kernels use; NVRTC has no libc headers.
// Under nvcc the same typedef may already exist: a repeated typedef of the same type is legal C++.
typedef unsigned int uint;

// siboehm's Makefile builds with CMAKE_BUILD_TYPE=Release, i.e. -DNDEBUG: assert() is compiled out.
// The build passes -DNDEBUG too; this keeps NVRTC (which has no <cassert>) equivalent.
#ifndef assert
#define assert(e) ((void)0)
#endif
