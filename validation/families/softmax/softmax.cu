// Row softmax, fp32, row-major rows x cols:  y[r][c] = exp(x[r][c] - max_r) / sum_c exp(x[r][c] - max_r).
//
// One template per variant of tilesim's softmax family (tilesim/kernels/softmax/config.py), each
// instantiated on the family's knobs, so that one configuration is one instantiation:
//
//   softmax_thread_row  <THREADS, VEC, CACHE, UNROLL, NVEC>         one thread per row
//   softmax_warp_shuffle<THREADS, VEC, CACHE, UNROLL, NVEC>         one warp per row, shuffle reductions
//   softmax_block_tree  <THREADS, VEC, CACHE, UNROLL, NVEC, TREE>   one block per row, shared-memory trees
//   softmax_online_warp <THREADS, VEC, CACHE, UNROLL, NVEC>         online (max, sum) in one pass, warp per row
//   softmax_online_block<THREADS, VEC, CACHE, UNROLL, NVEC>         the same, block per row
//
// VEC: floats per load/store (1 or 4: float4, cols % 4 == 0). CACHE: 0 none (every pass re-reads the
// row from global memory), 1 registers (the row is loaded once into registers: NVEC = cols / VEC is then
// a compile-time constant), 2 shared (the first pass stages the row in dynamic shared memory; the later
// passes read it back; each thread re-reads only what it wrote itself, so no barrier is needed).
// UNROLL: vectors each thread loads per loop step (independent loads in flight), CACHE none/shared.
// TREE (block_tree): 0 sequential addressing (stride halves, active threads contiguous), 1 interleaved
// addressing (thread t combines index 2*s*t with 2*s*t + s: lanes 2*s*4 bytes apart, bank conflicts).
//
// The threads of a row ("group" of G threads: 1, 32 or THREADS) visit its vectors c = rank, rank + G, ...
// UNROLL at a time: full steps without bounds checks, then one guarded tail step (ragged columns).
// Ragged rows: the threads/warps past the last row return (no block-wide barrier follows them).
// The exponential is __expf (ex2.approx of x*log2(e)); 1/sum is __fdividef(1, sum), once per row.

#define SOFTMAX_FULL_MASK 0xffffffffu

__device__ __forceinline__ float softmax_neg_inf() { return __int_as_float(0xff800000); }

template <int V>
struct Frag {
  float v[V];
};

template <int V>
__device__ __forceinline__ Frag<V> frag_load(const float* p) {
  Frag<V> f;
  if constexpr (V == 4) {
    const float4 t = *reinterpret_cast<const float4*>(p);
    f.v[0] = t.x; f.v[1] = t.y; f.v[2] = t.z; f.v[3] = t.w;
  } else {
    f.v[0] = *p;
  }
  return f;
}

template <int V>
__device__ __forceinline__ void frag_store(float* p, const Frag<V>& f) {
  if constexpr (V == 4) {
    float4 t;
    t.x = f.v[0]; t.y = f.v[1]; t.z = f.v[2]; t.w = f.v[3];
    *reinterpret_cast<float4*>(p) = t;
  } else {
    *p = f.v[0];
  }
}

template <int V>
__device__ __forceinline__ Frag<V> frag_fill(float x) {
  Frag<V> f;
#pragma unroll
  for (int e = 0; e < V; ++e) f.v[e] = x;
  return f;
}

// Visit the vectors c = rank + G*j (j = 0, 1, ...: the thread's own vector count) of a row of nvec
// vectors, U per step: each(u, c, j, ok) per vector (ok: c < nvec), then step() once per step. Full
// steps carry no bounds check; the tail step runs only for threads whose first tail vector exists.
template <int G, int U, class Each, class Step>
__device__ __forceinline__ void walk_row(int nvec, int rank, Each each, Step step) {
  int base = 0, j = 0;
#pragma unroll 1
  for (; base + G * U <= nvec; base += G * U, j += U) {
#pragma unroll
    for (int u = 0; u < U; ++u) each(u, base + u * G + rank, j + u, true);
    step();
    asm volatile("");  // emits nothing; keeps NVVM's loop vectorizer from interleaving (unrolling) the loop
  }
  if (base + rank < nvec) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = base + u * G + rank;
      each(u, c, j + u, c < nvec);
    }
    step();
  }
}

// ---- reductions over the G threads of a row -------------------------------------------------------

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

template <class Op>
__device__ __forceinline__ float warp_allreduce(float v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(SOFTMAX_FULL_MASK, v, o));
  return v;
}

// The classic shared-memory tree over THREADS values; every thread gets the result. `red` holds
// THREADS floats used by this reduction only (so no barrier is needed after reading red[0]).
template <int THREADS, int TREE, class Op>
__device__ __forceinline__ float block_tree_allreduce(float v, float* red, Op op) {
  const int t = threadIdx.x;
  red[t] = v;
  __syncthreads();
  if constexpr (TREE == 0) {
#pragma unroll
    for (int s = THREADS / 2; s > 0; s >>= 1) {
      if (t < s) red[t] = op(red[t], red[t + s]);
      __syncthreads();
    }
  } else {
#pragma unroll
    for (int s = 1; s < THREADS; s <<= 1) {
      const int i = 2 * s * t;
      if (i < THREADS) red[i] = op(red[i], red[i + s]);
      __syncthreads();
    }
  }
  return red[0];
}

// Merge two online-softmax states (max m, sum s of exp(x - m)); an empty state is (-inf, 0).
__device__ __forceinline__ void online_merge(float& m, float& s, float mo, float so) {
  const float mn = fmaxf(m, mo);
  const float a = (m == mn) ? s : s * __expf(m - mn);
  const float b = (mo == mn) ? so : so * __expf(mo - mn);
  m = mn;
  s = a + b;
}

__device__ __forceinline__ void online_warp_merge(float& m, float& s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float mo = __shfl_xor_sync(SOFTMAX_FULL_MASK, m, o);
    const float so = __shfl_xor_sync(SOFTMAX_FULL_MASK, s, o);
    online_merge(m, s, mo, so);
  }
}

// Warps merged through shared memory: lane 0 of each warp posts its state, one barrier, then every
// warp merges the WARPS states with log2(WARPS) shuffle levels and broadcasts lane 0's result.
template <int WARPS>
__device__ __forceinline__ void online_block_merge(float& m, float& s, float* red_m, float* red_s) {
  online_warp_merge(m, s);
  if constexpr (WARPS > 1) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
      red_m[warp] = m;
      red_s[warp] = s;
    }
    __syncthreads();
    m = lane < WARPS ? red_m[lane] : softmax_neg_inf();
    s = lane < WARPS ? red_s[lane] : 0.0f;
#pragma unroll
    for (int o = WARPS / 2; o > 0; o >>= 1) {
      const float mo = __shfl_xor_sync(SOFTMAX_FULL_MASK, m, o);
      const float so = __shfl_xor_sync(SOFTMAX_FULL_MASK, s, o);
      online_merge(m, s, mo, so);
    }
    m = __shfl_sync(SOFTMAX_FULL_MASK, m, 0);
    s = __shfl_sync(SOFTMAX_FULL_MASK, s, 0);
  }
}

// ---- where a row's vectors live in shared memory (CACHE == 2) -------------------------------------
// block and warp units: contiguous (vector c at c*V); thread_row: interleaved across the block's
// threads (vector c of thread t at (c*THREADS + t)*V) so that a warp's accesses are contiguous.

// ---- the row bodies ---------------------------------------------------------------------------------

// Kinds of row group.
#define SOFTMAX_THREAD 0
#define SOFTMAX_WARP 1
#define SOFTMAX_BLOCK 2

template <int KIND, int THREADS, int TREE>
struct Group {
  static constexpr int G = KIND == SOFTMAX_THREAD ? 1 : (KIND == SOFTMAX_WARP ? 32 : THREADS);
  float* red_max;  // block_tree only
  float* red_sum;
  __device__ __forceinline__ float max(float v) const {
    if constexpr (KIND == SOFTMAX_WARP) return warp_allreduce(v, MaxOp{});
    else if constexpr (KIND == SOFTMAX_BLOCK) return block_tree_allreduce<THREADS, TREE>(v, red_max, MaxOp{});
    else return v;
  }
  __device__ __forceinline__ float sum(float v) const {
    if constexpr (KIND == SOFTMAX_WARP) return warp_allreduce(v, SumOp{});
    else if constexpr (KIND == SOFTMAX_BLOCK) return block_tree_allreduce<THREADS, TREE>(v, red_sum, SumOp{});
    else return v;
  }
};

// Three-pass softmax (max, sum of exponentials, write) of one row by a group of G threads.
// x, y: the row; srow: this thread's base in shared memory and SSTRIDE floats between its vectors.
template <class Grp, int V, int CACHE, int U, int NVEC, int SSTRIDE>
__device__ __forceinline__ void classic_row(const float* __restrict__ x, float* __restrict__ y, int nvec,
                                            int rank, float* srow, const Grp& grp) {
  constexpr int G = Grp::G;
  if constexpr (CACHE == 1) {
    constexpr int CH = (NVEC + G - 1) / G;
    Frag<V> r[CH];
#pragma unroll
    for (int c = 0; c < CH; ++c) {
      const int i = c * G + rank;
      r[c] = ((c + 1) * G <= NVEC || i < NVEC) ? frag_load<V>(x + i * V) : frag_fill<V>(softmax_neg_inf());
    }
    float mv[V];
#pragma unroll
    for (int e = 0; e < V; ++e) mv[e] = r[0].v[e];
#pragma unroll
    for (int c = 1; c < CH; ++c)
#pragma unroll
      for (int e = 0; e < V; ++e) mv[e] = fmaxf(mv[e], r[c].v[e]);
    float m = mv[0];
#pragma unroll
    for (int e = 1; e < V; ++e) m = fmaxf(m, mv[e]);
    m = grp.max(m);
    float sv[V];
#pragma unroll
    for (int e = 0; e < V; ++e) sv[e] = 0.0f;
#pragma unroll
    for (int c = 0; c < CH; ++c)
#pragma unroll
      for (int e = 0; e < V; ++e) {
        r[c].v[e] = __expf(r[c].v[e] - m);  // exp(-inf) = 0 for the padding
        sv[e] += r[c].v[e];
      }
    float s = sv[0];
#pragma unroll
    for (int e = 1; e < V; ++e) s += sv[e];
    const float inv = __fdividef(1.0f, grp.sum(s));
#pragma unroll
    for (int c = 0; c < CH; ++c) {
      const int i = c * G + rank;
      if ((c + 1) * G <= NVEC || i < NVEC) {
#pragma unroll
        for (int e = 0; e < V; ++e) r[c].v[e] *= inv;
        frag_store<V>(y + i * V, r[c]);
      }
    }
  } else {
    float acc[U][V];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int e = 0; e < V; ++e) acc[u][e] = softmax_neg_inf();
    // pass 1: max (and the row staged in shared memory)
    walk_row<G, U>(
        nvec, rank,
        [&](int u, int c, int j, bool ok) {
          const Frag<V> f = ok ? frag_load<V>(x + c * V) : frag_fill<V>(softmax_neg_inf());
          if constexpr (CACHE == 2) {
            if (ok) frag_store<V>(srow + j * SSTRIDE, f);
          }
#pragma unroll
          for (int e = 0; e < V; ++e) acc[u][e] = fmaxf(acc[u][e], f.v[e]);
        },
        [] {});
    float m = acc[0][0];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int e = 0; e < V; ++e) m = fmaxf(m, acc[u][e]);
    m = grp.max(m);
    // pass 2: sum of exponentials
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int e = 0; e < V; ++e) acc[u][e] = 0.0f;
    walk_row<G, U>(
        nvec, rank,
        [&](int u, int c, int j, bool ok) {
          if (ok) {
            const Frag<V> f = CACHE == 2 ? frag_load<V>(srow + j * SSTRIDE) : frag_load<V>(x + c * V);
#pragma unroll
            for (int e = 0; e < V; ++e) acc[u][e] += __expf(f.v[e] - m);
          }
        },
        [] {});
    float s = 0.0f;
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int e = 0; e < V; ++e) s += acc[u][e];
    const float inv = __fdividef(1.0f, grp.sum(s));
    // pass 3: write
    walk_row<G, U>(
        nvec, rank,
        [&](int u, int c, int j, bool ok) {
          if (ok) {
            Frag<V> f = CACHE == 2 ? frag_load<V>(srow + j * SSTRIDE) : frag_load<V>(x + c * V);
#pragma unroll
            for (int e = 0; e < V; ++e) f.v[e] = __expf(f.v[e] - m) * inv;
            frag_store<V>(y + c * V, f);
          }
        },
        [] {});
  }
}

// Online softmax of one row: one pass computes (max, sum) together, rescaling the running sum
// whenever the running max grows (once per step of U*V values); a second pass writes the output.
template <int KIND, int THREADS, int V, int CACHE, int U, int NVEC, int SSTRIDE>
__device__ __forceinline__ void online_row(const float* __restrict__ x, float* __restrict__ y, int nvec,
                                           int rank, float* srow, float* red_m, float* red_s) {
  constexpr int G = KIND == SOFTMAX_WARP ? 32 : THREADS;
  float m = softmax_neg_inf(), s = 0.0f;
  if constexpr (CACHE == 1) {
    constexpr int CH = (NVEC + G - 1) / G;
    Frag<V> r[CH];
#pragma unroll
    for (int c = 0; c < CH; ++c) {
      const int i = c * G + rank;
      r[c] = ((c + 1) * G <= NVEC || i < NVEC) ? frag_load<V>(x + i * V) : frag_fill<V>(softmax_neg_inf());
    }
#pragma unroll
    for (int c = 0; c < CH; ++c)
#pragma unroll
      for (int e = 0; e < V; ++e) m = fmaxf(m, r[c].v[e]);
    if (m != softmax_neg_inf()) {  // a thread without data keeps the empty state
#pragma unroll
      for (int c = 0; c < CH; ++c)
#pragma unroll
        for (int e = 0; e < V; ++e) s += __expf(r[c].v[e] - m);
    }
    if constexpr (KIND == SOFTMAX_WARP) online_warp_merge(m, s);
    else online_block_merge<THREADS / 32>(m, s, red_m, red_s);
    const float inv = __fdividef(1.0f, s);
#pragma unroll
    for (int c = 0; c < CH; ++c) {
      const int i = c * G + rank;
      if ((c + 1) * G <= NVEC || i < NVEC) {
#pragma unroll
        for (int e = 0; e < V; ++e) r[c].v[e] = __expf(r[c].v[e] - m) * inv;
        frag_store<V>(y + i * V, r[c]);
      }
    }
  } else {
    Frag<V> f[U];
    walk_row<G, U>(
        nvec, rank,
        [&](int u, int c, int j, bool ok) {
          f[u] = ok ? frag_load<V>(x + c * V) : frag_fill<V>(softmax_neg_inf());
          if constexpr (CACHE == 2) {
            if (ok) frag_store<V>(srow + j * SSTRIDE, f[u]);
          }
        },
        [&] {
          float mn = m;
#pragma unroll
          for (int u = 0; u < U; ++u)
#pragma unroll
            for (int e = 0; e < V; ++e) mn = fmaxf(mn, f[u].v[e]);
          float t = s * __expf(m - mn);  // the first step: 0 * exp(-inf) = 0
#pragma unroll
          for (int u = 0; u < U; ++u)
#pragma unroll
            for (int e = 0; e < V; ++e) t += __expf(f[u].v[e] - mn);
          m = mn;
          s = t;
        });
    if constexpr (KIND == SOFTMAX_WARP) online_warp_merge(m, s);
    else online_block_merge<THREADS / 32>(m, s, red_m, red_s);
    const float inv = __fdividef(1.0f, s);
    walk_row<G, U>(
        nvec, rank,
        [&](int u, int c, int j, bool ok) {
          if (ok) {
            Frag<V> g = CACHE == 2 ? frag_load<V>(srow + j * SSTRIDE) : frag_load<V>(x + c * V);
#pragma unroll
            for (int e = 0; e < V; ++e) g.v[e] = __expf(g.v[e] - m) * inv;
            frag_store<V>(y + c * V, g);
          }
        },
        [] {});
  }
}

// ---- the kernels ------------------------------------------------------------------------------------
// Arguments of every kernel: x (input), y (output), rows, cols. Dynamic shared memory (CACHE == 2):
// thread_row THREADS * nvec * VEC floats, warp units (THREADS / 32) * nvec * VEC, block units nvec * VEC.

extern __shared__ float4 softmax_dyn_smem[];

template <int THREADS, int VEC, int CACHE, int UNROLL, int NVEC>
__global__ void __launch_bounds__(THREADS)
softmax_thread_row(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  const int row = blockIdx.x * THREADS + threadIdx.x;
  if (row >= rows) return;
  const size_t off = (size_t)row * cols;
  float* srow = reinterpret_cast<float*>(softmax_dyn_smem) + threadIdx.x * VEC;
  classic_row<Group<SOFTMAX_THREAD, THREADS, 0>, VEC, CACHE, UNROLL, NVEC, THREADS * VEC>(
      x + off, y + off, cols / VEC, 0, srow, Group<SOFTMAX_THREAD, THREADS, 0>{nullptr, nullptr});
}

template <int THREADS, int VEC, int CACHE, int UNROLL, int NVEC>
__global__ void __launch_bounds__(THREADS)
softmax_warp_shuffle(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = blockIdx.x * (THREADS / 32) + warp;
  if (row >= rows) return;
  const size_t off = (size_t)row * cols;
  float* srow = reinterpret_cast<float*>(softmax_dyn_smem) + (size_t)warp * cols + lane * VEC;
  classic_row<Group<SOFTMAX_WARP, THREADS, 0>, VEC, CACHE, UNROLL, NVEC, VEC * 32>(
      x + off, y + off, cols / VEC, lane, srow, Group<SOFTMAX_WARP, THREADS, 0>{nullptr, nullptr});
}

template <int THREADS, int VEC, int CACHE, int UNROLL, int NVEC, int TREE>
__global__ void __launch_bounds__(THREADS)
softmax_block_tree(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float red[2][THREADS];
  const size_t off = (size_t)blockIdx.x * cols;
  float* srow = reinterpret_cast<float*>(softmax_dyn_smem) + threadIdx.x * VEC;
  classic_row<Group<SOFTMAX_BLOCK, THREADS, TREE>, VEC, CACHE, UNROLL, NVEC, VEC * THREADS>(
      x + off, y + off, cols / VEC, threadIdx.x, srow, Group<SOFTMAX_BLOCK, THREADS, TREE>{red[0], red[1]});
}

template <int THREADS, int VEC, int CACHE, int UNROLL, int NVEC>
__global__ void __launch_bounds__(THREADS)
softmax_online_warp(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = blockIdx.x * (THREADS / 32) + warp;
  if (row >= rows) return;
  const size_t off = (size_t)row * cols;
  float* srow = reinterpret_cast<float*>(softmax_dyn_smem) + (size_t)warp * cols + lane * VEC;
  online_row<SOFTMAX_WARP, THREADS, VEC, CACHE, UNROLL, NVEC, VEC * 32>(x + off, y + off, cols / VEC, lane,
                                                                         srow, nullptr, nullptr);
}

template <int THREADS, int VEC, int CACHE, int UNROLL, int NVEC>
__global__ void __launch_bounds__(THREADS)
softmax_online_block(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float red[2][THREADS / 32];
  const size_t off = (size_t)blockIdx.x * cols;
  float* srow = reinterpret_cast<float*>(softmax_dyn_smem) + threadIdx.x * VEC;
  online_row<SOFTMAX_BLOCK, THREADS, VEC, CACHE, UNROLL, NVEC, VEC * THREADS>(
      x + off, y + off, cols / VEC, threadIdx.x, srow, red[0], red[1]);
}
