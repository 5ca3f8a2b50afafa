// The reduction family: the sum of an fp32 vector, from Mark Harris's ladder ("Optimizing parallel
// reduction in CUDA", NVIDIA 2007) to a vectorised grid-stride kernel with warp shuffles.
//
// One configuration = one instantiation of
//   reduce_pass<VARIANT, THREADS, VECTOR, UNROLL, ATOMIC>(in, n, out)    (the first pass)
//   reduce_final<VARIANT, THREADS>(partial, m, out)                       (finish "second_pass")
// VARIANT numbers follow tilesim.kernels.reduction.config.VARIANTS:
//   0 interleaved_divergent  interleaved addressing, `if (tid % (2*s) == 0)` (divergent warps)
//   1 interleaved_strided    interleaved addressing, `index = 2*s*tid` (bank conflicts)
//   2 sequential             sequential addressing (`if (tid < s)`)
//   3 first_add              2 elements per thread, added during the load, then as 2
//   4 unroll_last_warp       as 3, the last 6 levels in warp 0 without __syncthreads
//   5 complete_unroll        as 4, every level unrolled at compile time (THREADS known)
//   6 grid_stride            grid-stride loop of VECTOR-wide loads, UNROLL in flight, then as 5
//   7 shuffle                the same loop, then warp shuffles (smem holds one value per warp)
// Variants 0..4 loop over blockDim.x at run time, as in the paper; 5..7 use THREADS.
// ATOMIC: each block atomicAdds its sum into out[0] (zeroed before the launch); otherwise block b
// writes out[b] (the partials) and reduce_final sums them with one block.
//
// The last warp of variants 4..6 uses __syncwarp() between its steps: Harris's `volatile` form
// relies on implicit warp-synchronous execution, which Volta and later do not guarantee (NVIDIA,
// "Using CUDA Warp-Level Primitives", 2018).
//
// Indices are 32-bit: the runner rejects n >= 2^31 - 2^16.

#define RED_INTERLEAVED_DIVERGENT 0
#define RED_INTERLEAVED_STRIDED 1
#define RED_SEQUENTIAL 2
#define RED_FIRST_ADD 3
#define RED_UNROLL_LAST_WARP 4
#define RED_COMPLETE_UNROLL 5
#define RED_GRID_STRIDE 6
#define RED_SHUFFLE 7

// Register budget: __launch_bounds__(THREADS, RED_MIN_BLOCKS(THREADS)) lets ptxas use 64
// registers per thread. Without a minimum block count ptxas aims at 32 registers and splits the U
// loads of one loop step into 2-3 rounds at UNROLL = 8 (SASS of reduce_pass<7, 256, 4, 8, *>,
// nvcc 13.0); with it every step issues its U loads at once.
#define RED_MIN_BLOCKS(T) ((T) >= 1024 ? 1 : 1024 / (T))

#define RED_FINAL_VECTOR 4  // the second pass reads the partials with 16-byte loads,
#define RED_FINAL_UNROLL 4  // 4 in flight per thread

template <int V> struct RedVec;
template <> struct RedVec<1> {
    typedef float type;
    static __device__ __forceinline__ float sum(float x) { return x; }
};
template <> struct RedVec<2> {
    typedef float2 type;
    static __device__ __forceinline__ float sum(float2 x) { return x.x + x.y; }
};
template <> struct RedVec<4> {
    typedef float4 type;
    static __device__ __forceinline__ float sum(float4 x) { return (x.x + x.y) + (x.z + x.w); }
};

// Sum of in[0..n) owned by this thread: chunks of THREADS*V*U elements, chunk c = k*grid + bx; in
// chunk c thread t loads the vectors t, t + THREADS, ..., t + (U-1)*THREADS (coalesced: a warp
// instruction reads 32 consecutive vectors), all U loads issued before their first use. The last,
// partial chunk (n not a multiple of the chunk) is read with V*U guarded scalar loads (element
// tail + j*THREADS + t) by the block that owns it.
template <int THREADS, int V, int U>
__device__ __forceinline__ float red_accumulate(const float* __restrict__ in, int n, int grid, int bx,
                                                int tid) {
    typedef typename RedVec<V>::type vec_t;
    constexpr int CHUNK = THREADS * V * U;
    const int full = n / CHUNK;
    const vec_t* __restrict__ vin = reinterpret_cast<const vec_t*>(in);
    float acc[U];
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] = 0.0f;
#pragma unroll 1
    for (int c = bx; c < full; c += grid) {
        const vec_t* p = vin + c * (THREADS * U) + tid;
        vec_t x[U];
#pragma unroll
        for (int u = 0; u < U; ++u) x[u] = p[u * THREADS];
#pragma unroll
        for (int u = 0; u < U; ++u) acc[u] += RedVec<V>::sum(x[u]);
    }
    const int tail = full * CHUNK;
    if (tail < n && bx == full % grid) {  // the partial chunk: V*U guarded loads, all in flight
        float y[V * U];
#pragma unroll
        for (int j = 0; j < V * U; ++j) {
            const int i = tail + j * THREADS + tid;
            y[j] = i < n ? in[i] : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < V * U; ++j) acc[j % U] += y[j];
    }
#pragma unroll
    for (int u = 1; u < U; ++u) acc[0] += acc[u];
    return acc[0];
}

// Warp 0 finishes the last 64 values of sdata (THREADS >= 64): six levels, lane-synchronous.
__device__ __forceinline__ float red_last_warp(float* sdata, unsigned tid) {
    float v = sdata[tid];
#pragma unroll
    for (int s = 32; s > 0; s >>= 1) {
        v += sdata[tid + s];
        __syncwarp();
        sdata[tid] = v;
        __syncwarp();
    }
    return v;
}

__device__ __forceinline__ float red_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

// The block's sum of every thread's v, valid in thread 0. sdata: THREADS floats (VARIANT 7:
// THREADS/32).
template <int VARIANT, int THREADS>
__device__ __forceinline__ float red_block(float v, float* sdata) {
    const unsigned tid = threadIdx.x;
    if (VARIANT == RED_SHUFFLE) {
        constexpr int WARPS = THREADS / 32;
        const unsigned lane = tid % 32, warp = tid / 32;
        v = red_warp_sum(v);
        if (lane == 0) sdata[warp] = v;
        __syncthreads();
        if (warp == 0) {
            v = lane < WARPS ? sdata[lane] : 0.0f;
            v = red_warp_sum(v);
        }
        return v;
    }
    sdata[tid] = v;
    __syncthreads();
    if (VARIANT == RED_INTERLEAVED_DIVERGENT) {
        for (unsigned s = 1; s < blockDim.x; s *= 2) {
            if (tid % (2 * s) == 0) sdata[tid] += sdata[tid + s];
            __syncthreads();
        }
        return sdata[0];
    }
    if (VARIANT == RED_INTERLEAVED_STRIDED) {
        for (unsigned s = 1; s < blockDim.x; s *= 2) {
            const unsigned index = 2 * s * tid;
            if (index < blockDim.x) sdata[index] += sdata[index + s];
            __syncthreads();
        }
        return sdata[0];
    }
    if (VARIANT == RED_SEQUENTIAL || VARIANT == RED_FIRST_ADD) {
        for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
            if (tid < s) sdata[tid] += sdata[tid + s];
            __syncthreads();
        }
        return sdata[0];
    }
    if (VARIANT == RED_UNROLL_LAST_WARP) {
        for (unsigned s = blockDim.x / 2; s > 32; s >>= 1) {
            if (tid < s) sdata[tid] += sdata[tid + s];
            __syncthreads();
        }
        if (tid < 32) v = red_last_warp(sdata, tid);
        return v;
    }
    // RED_COMPLETE_UNROLL, RED_GRID_STRIDE: every level known at compile time.
    if (THREADS >= 1024) { if (tid < 512) sdata[tid] = v = v + sdata[tid + 512]; __syncthreads(); }
    if (THREADS >= 512) { if (tid < 256) sdata[tid] = v = v + sdata[tid + 256]; __syncthreads(); }
    if (THREADS >= 256) { if (tid < 128) sdata[tid] = v = v + sdata[tid + 128]; __syncthreads(); }
    if (THREADS >= 128) { if (tid < 64) sdata[tid] = v = v + sdata[tid + 64]; __syncthreads(); }
    if (tid < 32) v = red_last_warp(sdata, tid);
    return v;
}

__device__ __forceinline__ void red_finish(float v, float* __restrict__ out, bool atomic) {
    if (threadIdx.x == 0) {
        if (atomic) atomicAdd(out, v);
        else out[blockIdx.x] = v;
    }
}

template <int VARIANT, int THREADS, int VECTOR, int UNROLL, bool ATOMIC>
__global__ void __launch_bounds__(THREADS, RED_MIN_BLOCKS(THREADS))
reduce_pass(const float* __restrict__ in, int n, float* __restrict__ out) {
    static_assert(THREADS >= 64 && THREADS <= 1024 && (THREADS & (THREADS - 1)) == 0,
                  "THREADS must be a power of two in 64..1024");
    static_assert(VARIANT >= RED_GRID_STRIDE || (VECTOR == 1 && UNROLL == 1),
                  "VECTOR and UNROLL apply to the grid-stride variants only");
    __shared__ float sdata[VARIANT == RED_SHUFFLE ? THREADS / 32 : THREADS];
    const unsigned tid = threadIdx.x;
    float v;
    if (VARIANT <= RED_SEQUENTIAL) {
        const unsigned i = blockIdx.x * blockDim.x + tid;
        v = i < (unsigned)n ? in[i] : 0.0f;
    } else if (VARIANT <= RED_COMPLETE_UNROLL) {
        const unsigned bd = VARIANT == RED_COMPLETE_UNROLL ? THREADS : blockDim.x;
        const unsigned i = blockIdx.x * (2 * bd) + tid;
        v = i < (unsigned)n ? in[i] : 0.0f;
        if (i + bd < (unsigned)n) v += in[i + bd];
    } else {
        v = red_accumulate<THREADS, VECTOR, UNROLL>(in, n, gridDim.x, blockIdx.x, tid);
    }
    v = red_block<VARIANT, THREADS>(v, sdata);
    red_finish(v, out, ATOMIC);
}

// The second pass: one block sums the m partials of the first pass into out[0].
template <int VARIANT, int THREADS>
__global__ void __launch_bounds__(THREADS, RED_MIN_BLOCKS(THREADS))
reduce_final(const float* __restrict__ partial, int m, float* __restrict__ out) {
    __shared__ float sdata[VARIANT == RED_SHUFFLE ? THREADS / 32 : THREADS];
    float v = red_accumulate<THREADS, RED_FINAL_VECTOR, RED_FINAL_UNROLL>(partial, m, 1, 0, threadIdx.x);
    v = red_block<VARIANT, THREADS>(v, sdata);
    if (threadIdx.x == 0) out[0] = v;
}
