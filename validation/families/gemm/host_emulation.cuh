// CUDA keywords and builtins for running gemm.cu's kernels on the CPU, one std::thread per CUDA
// thread and a std::barrier per block (tests only: g++ -std=c++20 -DGEMM_HOST_EMULATION).
// cp.async copies are deferred until wait_group retires their group, so a kernel that reads a
// stage before waiting for it sees stale data; shared memory starts as NaN.
#pragma once
#include <barrier>
#include <cstring>
#include <deque>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __restrict__ __restrict

struct alignas(16) float4 { float x, y, z, w; };
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
struct uint3 { unsigned x, y, z; };

inline thread_local uint3 threadIdx, blockIdx;
inline thread_local std::barrier<>* host_emu_barrier = nullptr;
inline thread_local float4* dyn_smem4 = nullptr;
inline void __syncthreads() { host_emu_barrier->arrive_and_wait(); }

namespace host_emu {
struct Copy { float* dst; const float* src; int n; bool valid; };
inline thread_local std::vector<Copy> open_group;
inline thread_local std::deque<std::vector<Copy>> pending;
inline void cp_async(float* dst, const float* src, int n, bool valid) { open_group.push_back({dst, src, n, valid}); }
inline void commit() { pending.push_back(std::move(open_group)); open_group.clear(); }
inline void wait_group(int n) {
    while (static_cast<int>(pending.size()) > n) {
        for (const Copy& c : pending.front())
            for (int j = 0; j < c.n; ++j) c.dst[j] = c.valid ? c.src[j] : 0.f;
        pending.pop_front();
    }
}
}  // namespace host_emu
