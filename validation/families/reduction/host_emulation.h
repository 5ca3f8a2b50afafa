// CUDA keywords and builtins for running reduction.cu's kernels on the CPU (tests only: g++ -std=c++20
// -pthread). One std::thread per CUDA thread of a block; the blocks of a grid run one after
// another, so a `static` array stands for a block's shared memory; __syncthreads is a std::barrier
// of the block, each warp has its own barrier for __syncwarp and the shuffles (every lane of the warp
// takes part, as the kernels guarantee), and atomicAdd is an atomic_ref fetch_add.
#pragma once
#include <atomic>
#include <barrier>
#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict

struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct uint3 { unsigned x, y, z; };

inline thread_local uint3 threadIdx, blockIdx, blockDim, gridDim;

namespace host_emu {
struct Warp {
  std::barrier<> bar{32};
  float val[32];
};
inline thread_local std::barrier<>* block_barrier = nullptr;
inline thread_local Warp* warp = nullptr;

// Run kernel(args...) on a grid of `blocks` blocks of `threads` threads (a multiple of 32). The threads
// of one block are kept for every block of the grid (creating threads is what an emulated launch spends
// its time on): a block starts when every thread of the one before has finished.
template <class Kernel, class... Args>
void launch(Kernel kernel, unsigned blocks, unsigned threads, Args... args) {
  std::barrier<> bar(threads);
  std::vector<std::unique_ptr<Warp>> warps;
  for (unsigned w = 0; w < threads / 32; ++w) warps.push_back(std::make_unique<Warp>());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      threadIdx = uint3{t, 0, 0};
      blockDim = uint3{threads, 1, 1};
      gridDim = uint3{blocks, 1, 1};
      block_barrier = &bar;
      warp = warps[t / 32].get();
      for (unsigned b = 0; b < blocks; ++b) {
        blockIdx = uint3{b, 0, 0};
        kernel(args...);
        bar.arrive_and_wait();  // the block is done before the next one starts
      }
    });
  }
  for (auto& th : pool) th.join();
}
}  // namespace host_emu

#define __shared__ static
inline void __syncthreads() { host_emu::block_barrier->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { host_emu::warp->bar.arrive_and_wait(); }
inline float __shfl_down_sync(unsigned, float v, int delta) {
  const unsigned lane = threadIdx.x & 31;
  host_emu::warp->val[lane] = v;
  host_emu::warp->bar.arrive_and_wait();
  const float got = lane + delta < 32 ? host_emu::warp->val[lane + delta] : v;
  host_emu::warp->bar.arrive_and_wait();
  return got;
}
inline float atomicAdd(float* address, float v) { return std::atomic_ref<float>(*address).fetch_add(v); }
