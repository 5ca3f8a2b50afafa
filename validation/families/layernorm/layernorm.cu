// LayerNorm forward, fp32, row-major rows x cols, with weight and bias (length cols):
//   y[r][c] = (x[r][c] - mean_r) * rsqrt(var_r + eps) * w[c] + b[c],  eps = 1e-5, biased variance.
//
// One template body for every configuration of tilesim's "layernorm" family; runner.py appends one
// extern "C" kernel per configuration (a unique, unmangled name) that calls it. The knobs:
//   VARIANT  THREAD_ROW: one thread per row (serial sums, no reduction);
//            WARP_ROW:   one warp per row, THREADS/32 rows per block, __shfl_xor_sync tree;
//            BLOCK_ROW:  one block per row, shuffles within warps, then shared memory across warps.
//   ONE_PASS 0: mean first, then the variance around it (a second pass over the row);
//            1: sum and sum of squares together, var = E[x^2] - mean^2 (one pass).
//   CACHE    CACHE_NONE:      every pass (statistics and output) re-reads x from global memory;
//            CACHE_REGISTERS: the row slice of a thread is loaded once into SLICE registers
//                             (compile-time bound; all SLICE loads in flight together);
//            CACHE_SHARED:    the first pass stores the row in (dynamic) shared memory, later passes
//                             read it back from there (each thread re-reads what it stored itself).
//   VEC      1 (float) or 4 (float4: 16-byte loads and stores; needs cols % 4 == 0).
//   THREADS  threads per block.
//   UNROLL   vectors each thread loads per loop iteration (independent loads in flight), CACHE_NONE
//            and CACHE_SHARED; the register cache loads its whole slice at once (UNROLL = 1).
//   SLICE    vectors per thread of the register cache (0 otherwise).
// Any rows and cols (cols % VEC == 0): full loop iterations run unguarded, the last partial one
// is guarded element by element. No includes: compiles with NVRTC (CuPy) and with nvcc.

namespace ln {

enum { THREAD_ROW = 0, WARP_ROW = 1, BLOCK_ROW = 2 };
enum { CACHE_NONE = 0, CACHE_REGISTERS = 1, CACHE_SHARED = 2 };
constexpr float EPS = 1e-5f;
constexpr unsigned FULL_MASK = 0xffffffffu;

template <int VEC> struct Vec;
template <> struct Vec<1> {
  typedef float T;
  static __device__ __forceinline__ T zero() { return 0.f; }
};
template <> struct Vec<4> {
  typedef float4 T;
  static __device__ __forceinline__ T zero() { return make_float4(0.f, 0.f, 0.f, 0.f); }
};

// sum += v; sq += v * v (per component)
__device__ __forceinline__ void acc_moments(float v, float& sum, float& sq) {
  sum += v;
  sq = fmaf(v, v, sq);
}
__device__ __forceinline__ void acc_moments(float4 v, float& sum, float& sq) {
  acc_moments(v.x, sum, sq); acc_moments(v.y, sum, sq);
  acc_moments(v.z, sum, sq); acc_moments(v.w, sum, sq);
}
// sum += v
__device__ __forceinline__ void acc_sum(float v, float& sum) { sum += v; }
__device__ __forceinline__ void acc_sum(float4 v, float& sum) { sum += v.x; sum += v.y; sum += v.z; sum += v.w; }
// sq += (v - mean)^2
__device__ __forceinline__ void acc_dev(float v, float mean, float& sq) { const float d = v - mean; sq = fmaf(d, d, sq); }
__device__ __forceinline__ void acc_dev(float4 v, float mean, float& sq) {
  acc_dev(v.x, mean, sq); acc_dev(v.y, mean, sq); acc_dev(v.z, mean, sq); acc_dev(v.w, mean, sq);
}
// (v - mean) * rstd * w + b
__device__ __forceinline__ float norm(float v, float w, float b, float mean, float rstd) {
  return fmaf((v - mean) * rstd, w, b);
}
__device__ __forceinline__ float4 norm(float4 v, float4 w, float4 b, float mean, float rstd) {
  return make_float4(norm(v.x, w.x, b.x, mean, rstd), norm(v.y, w.y, b.y, mean, rstd),
                     norm(v.z, w.z, b.z, mean, rstd), norm(v.w, w.w, b.w, mean, rstd));
}

// Sum N values over the threads of a row. red: 2 * (THREADS / 32) floats of shared memory.
template <int VARIANT, int THREADS, int N>
__device__ __forceinline__ void row_sum(float (&v)[N], float* red) {
  if constexpr (VARIANT != THREAD_ROW) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
      for (int n = 0; n < N; ++n) v[n] += __shfl_xor_sync(FULL_MASK, v[n], o);
    }
  }
  if constexpr (VARIANT == BLOCK_ROW && THREADS > 32) {
    constexpr int WARPS = THREADS / 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
#pragma unroll
      for (int n = 0; n < N; ++n) red[n * WARPS + warp] = v[n];
    }
    __syncthreads();
    // every lane reads the partial sum of warp (lane % WARPS): the tree below leaves the total in all
#pragma unroll
    for (int n = 0; n < N; ++n) v[n] = red[n * WARPS + (lane & (WARPS - 1))];
#pragma unroll
    for (int o = WARPS / 2; o > 0; o >>= 1) {
#pragma unroll
      for (int n = 0; n < N; ++n) v[n] += __shfl_xor_sync(FULL_MASK, v[n], o);
    }
  }
}

template <int VARIANT, int ONE_PASS, int CACHE, int VEC, int THREADS, int UNROLL, int SLICE>
__device__ __forceinline__ void layernorm(const float* __restrict__ x, const float* __restrict__ w,
                                          const float* __restrict__ b, float* __restrict__ y,
                                          int rows, int cols) {
  typedef typename Vec<VEC>::T V;
  constexpr int ROW_THREADS = VARIANT == THREAD_ROW ? 1 : (VARIANT == WARP_ROW ? 32 : THREADS);
  constexpr int ROWS_PER_BLOCK = THREADS / ROW_THREADS;
  constexpr int STEP = ROW_THREADS * UNROLL;  // vectors of a row per loop iteration
  static_assert(THREADS % ROW_THREADS == 0, "threads must cover whole rows");
  static_assert(CACHE != CACHE_REGISTERS || (SLICE >= 1 && UNROLL == 1), "register cache: SLICE >= 1, UNROLL 1");
  static_assert(CACHE == CACHE_REGISTERS || SLICE == 0, "SLICE only for the register cache");

  __shared__ float red[2][2 * (THREADS / 32 > 0 ? THREADS / 32 : 1)];  // one buffer per reduction
  extern __shared__ __align__(16) float row_smem[];

  const int local_row = threadIdx.x / ROW_THREADS;
  const int t = threadIdx.x % ROW_THREADS;
  const long long row = (long long)blockIdx.x * ROWS_PER_BLOCK + local_row;
  if (VARIANT != BLOCK_ROW && row >= rows) return;  // whole threads (thread_row) or warps (warp_row)

  const int nvec = cols / VEC;
  const float inv_n = 1.0f / (float)cols;
  const V* __restrict__ xr = reinterpret_cast<const V*>(x + row * cols);
  const V* __restrict__ wv = reinterpret_cast<const V*>(w);
  const V* __restrict__ bv = reinterpret_cast<const V*>(b);
  V* __restrict__ yr = reinterpret_cast<V*>(y + row * cols);
  V* srow = reinterpret_cast<V*>(row_smem) + (CACHE == CACHE_SHARED ? local_row * nvec : 0);

  float mean, rstd;
  if constexpr (CACHE == CACHE_REGISTERS) {
    V v[SLICE];
#pragma unroll
    for (int u = 0; u < SLICE; ++u) {
      const int i = u * ROW_THREADS + t;
      v[u] = i < nvec ? xr[i] : Vec<VEC>::zero();
    }
    float s[2] = {0.f, 0.f};
#pragma unroll
    for (int u = 0; u < SLICE; ++u) {
      if (ONE_PASS) acc_moments(v[u], s[0], s[1]); else acc_sum(v[u], s[0]);
    }
    if (ONE_PASS) {
      row_sum<VARIANT, THREADS, 2>(s, red[0]);
      mean = s[0] * inv_n;
      rstd = rsqrtf(fmaxf(fmaf(s[1], inv_n, -mean * mean), 0.f) + EPS);
    } else {
      float m[1] = {s[0]};
      row_sum<VARIANT, THREADS, 1>(m, red[0]);
      mean = m[0] * inv_n;
      float q[1] = {0.f};
#pragma unroll
      for (int u = 0; u < SLICE; ++u)
        if (u * ROW_THREADS + t < nvec) acc_dev(v[u], mean, q[0]);
      row_sum<VARIANT, THREADS, 1>(q, red[1]);
      rstd = rsqrtf(q[0] * inv_n + EPS);
    }
    if (SLICE * ROW_THREADS <= nvec) {  // every slice complete (uniform): all w, b loads in flight
      V wu[SLICE], bu[SLICE];
#pragma unroll
      for (int u = 0; u < SLICE; ++u) {
        wu[u] = wv[u * ROW_THREADS + t];
        bu[u] = bv[u * ROW_THREADS + t];
      }
#pragma unroll
      for (int u = 0; u < SLICE; ++u) yr[u * ROW_THREADS + t] = norm(v[u], wu[u], bu[u], mean, rstd);
    } else {
#pragma unroll
      for (int u = 0; u < SLICE; ++u) {
        const int i = u * ROW_THREADS + t;
        if (i < nvec) yr[i] = norm(v[u], wv[i], bv[i], mean, rstd);
      }
    }
  } else {
    const int full = nvec / STEP;  // unguarded iterations; then one guarded partial iteration
    // Pass 1: sum (and the sum of squares when ONE_PASS), storing the row when CACHE_SHARED.
    float s[2] = {0.f, 0.f};
    {
      int base = t;
#pragma unroll 1  // exactly UNROLL loads per iteration (no compiler unrolling on top)
      for (int it = 0; it < full; ++it, base += STEP) {
        V v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = xr[base + u * ROW_THREADS];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
          if (CACHE == CACHE_SHARED) srow[base + u * ROW_THREADS] = v[u];
          if (ONE_PASS) acc_moments(v[u], s[0], s[1]); else acc_sum(v[u], s[0]);
        }
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int i = base + u * ROW_THREADS;
        if (i < nvec) {
          const V v = xr[i];
          if (CACHE == CACHE_SHARED) srow[i] = v;
          if (ONE_PASS) acc_moments(v, s[0], s[1]); else acc_sum(v, s[0]);
        }
      }
    }
    if (ONE_PASS) {
      row_sum<VARIANT, THREADS, 2>(s, red[0]);
      mean = s[0] * inv_n;
      rstd = rsqrtf(fmaxf(fmaf(s[1], inv_n, -mean * mean), 0.f) + EPS);
    } else {
      float m[1] = {s[0]};
      row_sum<VARIANT, THREADS, 1>(m, red[0]);
      mean = m[0] * inv_n;
      // Pass 2: the sum of squared deviations.
      float q[1] = {0.f};
      int base = t;
#pragma unroll 1  // exactly UNROLL loads per iteration (no compiler unrolling on top)
      for (int it = 0; it < full; ++it, base += STEP) {
        V v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = CACHE == CACHE_SHARED ? srow[base + u * ROW_THREADS] : xr[base + u * ROW_THREADS];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) acc_dev(v[u], mean, q[0]);
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int i = base + u * ROW_THREADS;
        if (i < nvec) acc_dev(CACHE == CACHE_SHARED ? srow[i] : xr[i], mean, q[0]);
      }
      row_sum<VARIANT, THREADS, 1>(q, red[1]);
      rstd = rsqrtf(q[0] * inv_n + EPS);
    }
    // Output pass.
    int base = t;
#pragma unroll 1
    for (int it = 0; it < full; ++it, base += STEP) {
      V v[UNROLL], wu[UNROLL], bu[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int i = base + u * ROW_THREADS;
        v[u] = CACHE == CACHE_SHARED ? srow[i] : xr[i];
        wu[u] = wv[i];
        bu[u] = bv[i];
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) yr[base + u * ROW_THREADS] = norm(v[u], wu[u], bu[u], mean, rstd);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int i = base + u * ROW_THREADS;
      if (i < nvec) yr[i] = norm(CACHE == CACHE_SHARED ? srow[i] : xr[i], wv[i], bv[i], mean, rstd);
    }
  }
}

}  // namespace ln
