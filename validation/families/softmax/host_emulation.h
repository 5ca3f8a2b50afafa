// CUDA keywords and builtins for running softmax.cu's kernels on the CPU (tests only: g++ -std=c++20
// -pthread). One std::thread per CUDA thread; the blocks of a grid run one after another, so a
// `static` array stands for a block's shared memory; __syncthreads is a std::barrier of the block and
// each warp has its own barrier for the shuffles (every lane of a warp must take part, as the kernels
// guarantee). The source's `extern __shared__` line is replaced by a sized array (see the test).
#pragma once
#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static

struct alignas(16) float4 { float x, y, z, w; };
struct uint3 { unsigned x, y, z; };

inline thread_local uint3 threadIdx, blockIdx;

namespace host_emu {
struct Warp {
  std::barrier<> bar{32};
  float val[32];
};
inline thread_local std::barrier<>* block_barrier = nullptr;
inline thread_local Warp* warp = nullptr;

inline float exchange(float v, int src_lane) {
  const unsigned lane = threadIdx.x & 31;
  warp->val[lane] = v;
  warp->bar.arrive_and_wait();
  const float got = warp->val[src_lane & 31];
  warp->bar.arrive_and_wait();
  return got;
}

// Run kernel(args...) on a grid of `blocks` blocks of `threads` threads.
template <class Kernel, class... Args>
void launch(Kernel kernel, unsigned blocks, unsigned threads, Args... args) {
  for (unsigned b = 0; b < blocks; ++b) {
    std::barrier<> bar(threads);
    std::vector<std::unique_ptr<Warp>> warps;
    for (unsigned w = 0; w < (threads + 31) / 32; ++w) warps.push_back(std::make_unique<Warp>());
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back([&, t, b] {
        threadIdx = uint3{t, 0, 0};
        blockIdx = uint3{b, 0, 0};
        block_barrier = &bar;
        warp = warps[t / 32].get();
        kernel(args...);
      });
    }
    for (auto& th : pool) th.join();
  }
}
}  // namespace host_emu

inline void __syncthreads() { host_emu::block_barrier->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float v, int mask) {
  return host_emu::exchange(v, static_cast<int>(threadIdx.x & 31) ^ mask);
}
inline float __shfl_sync(unsigned, float v, int src) { return host_emu::exchange(v, src); }
inline float __int_as_float(unsigned bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline float __expf(float x) { return std::exp(x); }
inline float __fdividef(float a, float b) { return a / b; }
using std::fmaxf;
