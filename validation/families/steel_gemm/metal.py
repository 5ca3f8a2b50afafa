"""Metal Shading Language source for one :class:`~tilesim.kernels.steel_gemm.SteelGemmConfig` (CPU only).

The kernel follows the structure of MLX's steel GEMM (``mlx/backend/metal/kernels/steel/gemm``),
written afresh and flattened into one function so that every knob is visible in the source:

- **tile constants** are compile-time (``BM``, ``BN``, ``BK``, ``WM``, ``WN``, ``TG_PAD`` at the top,
  as steel's template parameters or ``-D`` defines): one configuration is one compiled kernel;
- **threadgroup memory** holds a ``BM x (BK + TG_PAD)`` slab of A and a ``BK x (BN + TG_PAD)`` slab
  of B, once (``copy = "sync"``) or twice (``"double_buffer"``);
- **simdgroup patch**: SIMD-group ``(sg_m, sg_n)`` owns the contiguous ``BM/WM x BN/WN`` block of C
  as ``TM x TN`` ``simdgroup_float8x8`` accumulators; each 8-deep step of the slab loads ``TM`` A and
  ``TN`` B fragments and issues ``TM * TN`` ``simdgroup_multiply_accumulate``. Accumulation is fp32
  for every dtype (as steel's ``AccumType``); fp16/bf16 fragments are filled element-wise from the
  lane layout of an 8x8 simdgroup matrix, fp32 ones with ``simdgroup_load``;
- **copy**: ``sync`` is load, barrier, compute, barrier; ``double_buffer`` reads the next slab into
  registers, computes on the current one, writes the registers into the other buffer, then one
  barrier per step (no asynchronous copy exists on Apple GPUs; ``cp_async`` is refused before this
  module is reached, by the family's ``check_fits`` or here);
- **edges**: ``aligned`` has no bounds check anywhere (sizes multiples of the tile); ``ragged`` is
  steel's scheme: function constants ``align_M``, ``align_N``, ``align_K`` (ids 200-202, as steel)
  and ``align_ld`` (203: the leading dimensions allow 16-byte vector loads) select at pipeline
  creation the unchecked pipeline for aligned problems; in unaligned ones, inner tiles still take
  the unchecked loop and only edge tiles the checked one, a partial last k-slab is loaded checked and
  zero-filled; ``guards`` checks every load and store of every thread, with no function constant.

The ``naive`` and ``threadgroup`` variants (the first two rungs of the Metal pyramid) are
generated from the same knobs, with the same signature, launch and function constants:

- **naive**: thread ``t`` of the ``BM x BN``-thread threadgroup computes C element
  ``(t / BN, t % BN)`` of its tile with a K-long loop of ``fma`` reading A and B straight from
  device memory; no threadgroup memory, no barrier. ``guards`` and ``ragged`` (when
  ``align_M && align_N`` is false) return threads outside C before the loop.
- **threadgroup**: each k-step the threads copy the ``BM x BK`` slab of A and the ``BK x BN`` slab
  of B element by element (thread ``t`` takes elements ``t, t + THREADS, ...``) into padded
  threadgroup rows, barrier, ``BK`` FMAs from threadgroup memory, barrier (``sync``); or the next
  slab read into registers during the FMAs and written into the other buffer, one barrier per step
  (``double_buffer``). ``guards`` checks every copy and the store; ``ragged`` checks only in tiles
  that cross an edge of C (and in every tile when K is not a multiple of BK, selected by
  ``align_K``); ``aligned`` has no bounds check.

:func:`generate` returns a :class:`MetalSource`: the standalone ``.metal`` text (``full``: function
constants and a ``[[kernel]]`` signature, for ``xcrun metal``) and the ``header`` / ``body`` /
``template`` that ``mlx.core.fast.metal_kernel`` takes (MLX's custom kernels have no function
constants, so the four ``align_*`` become template booleans of the same names: the body is the same
text in both). Nothing here needs a Mac; nothing here has been compiled or run on one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tilesim.kernels.steel_gemm.config import CUDA_ONLY_COPIES, SIMD, SteelGemmConfig

MSL_TYPES = {"fp32": "float", "fp16": "half", "bf16": "bfloat"}
MLX_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
FUNCTION_CONSTANTS = (("align_M", 200), ("align_N", 201), ("align_K", 202), ("align_ld", 203))
INPUT_NAMES = ("A", "B", "mnk")
OUTPUT_NAMES = ("C",)
#: the thread attributes the body uses; MLX adds them to the signature it generates, the standalone
#: kernel declares them with the same names and types
ATTRIBUTES = (("uint3", "threadgroup_position_in_grid"), ("uint", "thread_index_in_threadgroup"),
              ("uint", "simdgroup_index_in_threadgroup"), ("uint", "thread_index_in_simdgroup"))


@dataclass(frozen=True)
class MetalSource:
    """The generated kernel of one configuration and how to launch it.

    ``grid`` is in threads (MLX's ``grid``, Metal's ``dispatchThreads``): ``(tiles_n * threads,
    tiles_m, 1)``; ``threadgroup`` is ``(threads, 1, 1)``. ``function_constants`` names the
    constants the standalone kernel declares (empty unless ``edge = "ragged"``); their values come
    from the problem size at dispatch (:func:`function_constant_values`).
    """

    name: str
    header: str
    body: str
    full: str
    grid: tuple[int, int, int]
    threadgroup: tuple[int, int, int]
    function_constants: tuple[str, ...]
    input_names: tuple[str, ...] = INPUT_NAMES
    output_names: tuple[str, ...] = OUTPUT_NAMES


def kernel_name(cfg: SteelGemmConfig) -> str:
    """A Metal identifier naming the configuration's kernel (its tiling, not its problem size)."""
    if cfg.variant == "naive":
        return f"naive_gemm_{cfg.dtype}_bm{cfg.bm}_bn{cfg.bn}_{cfg.edge}"
    if cfg.variant == "threadgroup":
        return f"tg_gemm_{cfg.dtype}_bm{cfg.bm}_bn{cfg.bn}_bk{cfg.bk}_pad{cfg.tg_pad}_{cfg.copy}_{cfg.edge}"
    pm, pn = cfg.patch
    return (f"steel_gemm_{cfg.dtype}_bm{cfg.bm}_bn{cfg.bn}_bk{cfg.bk}_wm{cfg.wm}_wn{cfg.wn}_p{pm}x{pn}"
            f"_pad{cfg.tg_pad}_{cfg.copy}_{cfg.edge}")


def function_constant_values(cfg: SteelGemmConfig) -> dict[str, bool]:
    """The ragged kernel's function constants for ``cfg``'s problem (what the host sets per dispatch)."""
    vec = _vec(cfg)
    return {"align_M": cfg.m % cfg.bm == 0, "align_N": cfg.n % cfg.bn == 0, "align_K": cfg.k % cfg.bk == 0,
            "align_ld": cfg.k % vec == 0 and cfg.n % vec == 0}


def _vec(cfg: SteelGemmConfig) -> int:
    """Elements per 16-byte device load (steel's loaders), never more than a slab row."""
    return min(cfg.vec, cfg.bk, cfg.bn)


def _check(cfg: SteelGemmConfig) -> None:
    if not isinstance(cfg, SteelGemmConfig):
        raise ValueError(f"cfg must be a SteelGemmConfig, got {type(cfg).__name__}")
    if cfg.copy in CUDA_ONLY_COPIES:
        raise ValueError(f"SteelGemmConfig.copy = {cfg.copy!r}: a CUDA-only knob; the Metal kernel has 'sync' "
                         "and 'double_buffer'")


def _header(cfg: SteelGemmConfig) -> str:
    fm, fn = cfg.frags
    vec = _vec(cfg)
    t = MSL_TYPES[cfg.dtype]
    a_vecs = cfg.bm * cfg.bk // vec
    b_vecs = cfg.bk * cfg.bn // vec
    lines = [
        f"// {kernel_name(cfg)}: generated by validation/families/steel_gemm/metal.py from",
        f"// {cfg.label}. C = A @ B, row-major, fp32 accumulation.",
        "#include <metal_stdlib>",
        "#include <metal_simdgroup>",
        "#include <metal_simdgroup_matrix>",
        "using namespace metal;",
        "",
        "#define TILE_CONST static constant constexpr const",
        f"typedef {t} elem_t;",
        f"TILE_CONST int BM = {cfg.bm};  // threadgroup tile rows",
        f"TILE_CONST int BN = {cfg.bn};  // threadgroup tile columns",
        f"TILE_CONST int BK = {cfg.bk};  // k-slab depth",
        f"TILE_CONST int WM = {cfg.wm};  // SIMD-groups along M",
        f"TILE_CONST int WN = {cfg.wn};  // SIMD-groups along N",
        f"TILE_CONST int TG_PAD = {cfg.tg_pad};  // elements of padding per threadgroup-memory row",
        f"TILE_CONST int THREADS = {cfg.threads};  // WM * WN * {SIMD}",
        f"TILE_CONST int PM = {cfg.patch[0]};  // simdgroup patch rows (BM / WM)",
        f"TILE_CONST int PN = {cfg.patch[1]};  // simdgroup patch columns (BN / WN)",
        f"TILE_CONST int TM = {fm};  // 8x8 fragments of the patch along M",
        f"TILE_CONST int TN = {fn};  // 8x8 fragments of the patch along N",
        f"TILE_CONST int BUFFERS = {cfg.buffers};  // threadgroup slabs ({cfg.copy})",
        "TILE_CONST int LDA_TG = BK + TG_PAD;",
        "TILE_CONST int LDB_TG = BN + TG_PAD;",
        "TILE_CONST int A_SLAB = BM * LDA_TG;",
        "TILE_CONST int B_SLAB = BK * LDB_TG;",
        f"TILE_CONST int VEC = {vec};  // elements per device load (16 bytes)",
        f"TILE_CONST int A_VECS = {a_vecs};  // vectors per A slab",
        f"TILE_CONST int B_VECS = {b_vecs};  // vectors per B slab",
        f"TILE_CONST int A_ITERS = {math.ceil(a_vecs / cfg.threads)};  // A vectors per thread",
        f"TILE_CONST int B_ITERS = {math.ceil(b_vecs / cfg.threads)};  // B vectors per thread",
        "",
        "struct alignas(16) vec_t { elem_t v[VEC]; };",
        "",
        "// The two elements lane `lane` holds of an 8x8 simdgroup matrix: row y, columns x and x + 1.",
        "METAL_FUNC short2 frag_coord(ushort lane) {",
        "  const short quad = lane / 4;",
        "  return short2((quad & 2) * 2 + (lane % 2) * 2, (quad & 4) + (lane / 2) % 4);",
        "}",
        "",
        "// Copy rows x cols of a slab (device, leading dimension ld) into threadgroup memory (ld_tg):",
        "// unchecked, one 16-byte vector per step.",
        "template <int ROWS, int COLS, int LD_TG, int NVEC, int ITERS>",
        "METAL_FUNC void load_unchecked(threadgroup elem_t* dst, const device elem_t* src, int ld, ushort tid) {",
        "  for (int it = 0; it < ITERS; ++it) {",
        "    const int v = tid + it * THREADS;",
        "    if (NVEC % THREADS != 0 && v >= NVEC) break;",
        "    const int r = v / (COLS / VEC), c = (v % (COLS / VEC)) * VEC;",
        "    const vec_t x = *((const device vec_t*)(src + r * ld + c));",
        "    for (int e = 0; e < VEC; ++e) dst[r * LD_TG + c + e] = x.v[e];",
        "  }",
        "}",
        "",
        "// The same copy with every element checked against rows_left x cols_left; outside is zero.",
        "template <int ROWS, int COLS, int LD_TG, int NVEC, int ITERS>",
        "METAL_FUNC void load_checked(threadgroup elem_t* dst, const device elem_t* src, int ld, ushort tid,",
        "                             int rows_left, int cols_left) {",
        "  for (int it = 0; it < ITERS; ++it) {",
        "    const int v = tid + it * THREADS;",
        "    if (NVEC % THREADS != 0 && v >= NVEC) break;",
        "    const int r = v / (COLS / VEC), c = (v % (COLS / VEC)) * VEC;",
        "    for (int e = 0; e < VEC; ++e) {",
        "      const bool in = r < rows_left && c + e < cols_left;",
        "      dst[r * LD_TG + c + e] = in ? src[r * ld + c + e] : elem_t(0);",
        "    }",
        "  }",
        "}",
    ]
    if cfg.copy == "double_buffer":
        lines += [
            "",
            "// Double buffering: the next slab is read into registers (staged) while the current one is",
            "// multiplied, then written to the other buffer.",
            "template <int NVEC, int ITERS>",
            "struct staged_t { vec_t x[ITERS]; };",
            "template <int COLS, int NVEC, int ITERS>",
            "METAL_FUNC void read_unchecked(thread staged_t<NVEC, ITERS>& s, const device elem_t* src, int ld,",
            "                               ushort tid) {",
            "  for (int it = 0; it < ITERS; ++it) {",
            "    const int v = tid + it * THREADS;",
            "    if (NVEC % THREADS != 0 && v >= NVEC) break;",
            "    const int r = v / (COLS / VEC), c = (v % (COLS / VEC)) * VEC;",
            "    s.x[it] = *((const device vec_t*)(src + r * ld + c));",
            "  }",
            "}",
            "template <int COLS, int NVEC, int ITERS>",
            "METAL_FUNC void read_checked(thread staged_t<NVEC, ITERS>& s, const device elem_t* src, int ld,",
            "                             ushort tid, int rows_left, int cols_left) {",
            "  for (int it = 0; it < ITERS; ++it) {",
            "    const int v = tid + it * THREADS;",
            "    if (NVEC % THREADS != 0 && v >= NVEC) break;",
            "    const int r = v / (COLS / VEC), c = (v % (COLS / VEC)) * VEC;",
            "    for (int e = 0; e < VEC; ++e) {",
            "      const bool in = r < rows_left && c + e < cols_left;",
            "      s.x[it].v[e] = in ? src[r * ld + c + e] : elem_t(0);",
            "    }",
            "  }",
            "}",
            "template <int COLS, int LD_TG, int NVEC, int ITERS>",
            "METAL_FUNC void write_staged(threadgroup elem_t* dst, thread const staged_t<NVEC, ITERS>& s,",
            "                             ushort tid) {",
            "  for (int it = 0; it < ITERS; ++it) {",
            "    const int v = tid + it * THREADS;",
            "    if (NVEC % THREADS != 0 && v >= NVEC) break;",
            "    const int r = v / (COLS / VEC), c = (v % (COLS / VEC)) * VEC;",
            "    for (int e = 0; e < VEC; ++e) dst[r * LD_TG + c + e] = s.x[it].v[e];",
            "  }",
            "}",
        ]
    return "\n".join(lines) + "\n"


def _frag_load(cfg: SteelGemmConfig, frag: str, ptr: str, ld: str) -> str:
    if cfg.dtype == "fp32":
        return f"simdgroup_load({frag}, {ptr}, {ld});"
    return (f"{frag}.thread_elements()[0] = float(({ptr})[lc.y * {ld} + lc.x]); "
            f"{frag}.thread_elements()[1] = float(({ptr})[lc.y * {ld} + lc.x + 1]);")


def _mma(cfg: SteelGemmConfig, ind: str, a_tg: str, b_tg: str) -> list[str]:
    """One slab's multiply-accumulate over the patch: BK/8 steps of TM + TN loads, TM * TN MMAs."""
    return [
        f"{ind}for (int kk = 0; kk < BK; kk += 8) {{",
        f"{ind}  for (int i = 0; i < TM; ++i) {{",
        f"{ind}    {_frag_load(cfg, 'a_frag[i]', f'{a_tg} + (sg_row + i * 8) * LDA_TG + kk', 'LDA_TG')}",
        f"{ind}  }}",
        f"{ind}  for (int j = 0; j < TN; ++j) {{",
        f"{ind}    {_frag_load(cfg, 'b_frag[j]', f'{b_tg} + kk * LDB_TG + sg_col + j * 8', 'LDB_TG')}",
        f"{ind}  }}",
        f"{ind}  for (int i = 0; i < TM; ++i)",
        f"{ind}    for (int j = 0; j < TN; ++j)",
        f"{ind}      simdgroup_multiply_accumulate(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);",
        f"{ind}}}",
    ]


def _loop(cfg: SteelGemmConfig, ind: str, checked: str) -> list[str]:
    """The k-loop over full slabs. ``checked``: "" (no checks), or a C++ bool expression saying whether
    this tile's loads are checked (the ragged kernel's edge tiles, the guarded kernel's every tile)."""
    a_rows, b_cols = "rows_left", "cols_left"

    def load(buf: str, k0: str, kleft: str) -> list[str]:
        unchecked = [f"load_unchecked<BM, BK, LDA_TG, A_VECS, A_ITERS>(As + {buf} * A_SLAB, A + {k0}, K, tid);",
                     f"load_unchecked<BK, BN, LDB_TG, B_VECS, B_ITERS>(Bs + {buf} * B_SLAB, B + {k0} * N, N, tid);"]
        guarded = [f"load_checked<BM, BK, LDA_TG, A_VECS, A_ITERS>(As + {buf} * A_SLAB, A + {k0}, K, tid, "
                   f"{a_rows}, {kleft});",
                   f"load_checked<BK, BN, LDB_TG, B_VECS, B_ITERS>(Bs + {buf} * B_SLAB, B + {k0} * N, N, tid, "
                   f"{kleft}, {b_cols});"]
        if not checked:
            return unchecked
        if checked == "true":
            return guarded
        return [f"if ({checked}) {{", *["  " + s for s in guarded], "} else {", *["  " + s for s in unchecked],
                "}"]

    def read(k0: str, kleft: str) -> list[str]:
        unchecked = ["read_unchecked<BK, A_VECS, A_ITERS>(sa, A + k0n, K, tid);",
                     "read_unchecked<BN, B_VECS, B_ITERS>(sb, B + k0n * N, N, tid);"]
        guarded = [f"read_checked<BK, A_VECS, A_ITERS>(sa, A + k0n, K, tid, {a_rows}, {kleft});",
                   f"read_checked<BN, B_VECS, B_ITERS>(sb, B + k0n * N, N, tid, {kleft}, {b_cols});"]
        if not checked:
            return unchecked
        if checked == "true":
            return guarded
        return [f"if ({checked}) {{", *["  " + s for s in guarded], "} else {", *["  " + s for s in unchecked],
                "}"]

    out: list[str] = []
    if cfg.copy == "sync":
        out += ["for (int kt = 0; kt < k_tiles; ++kt) {",
                "  const int k0 = kt * BK;",
                *["  " + s for s in load("0", "k0", "K - k0")],
                "  threadgroup_barrier(mem_flags::mem_threadgroup);",
                *_mma(cfg, "  ", "As", "Bs"),
                "  threadgroup_barrier(mem_flags::mem_threadgroup);",
                "}"]
    else:
        out += ["// double buffer: slab 0 first, then one barrier per step",
                "staged_t<A_VECS, A_ITERS> sa;",
                "staged_t<B_VECS, B_ITERS> sb;",
                "if (k_tiles > 0) {",
                *["  " + s for s in load("0", "0", "K")],
                "}",
                "threadgroup_barrier(mem_flags::mem_threadgroup);",
                "for (int kt = 0; kt < k_tiles; ++kt) {",
                "  const int cur = kt & 1;",
                "  const bool more = kt + 1 < k_tiles;",
                "  const int k0n = (kt + 1) * BK;",
                "  if (more) {",
                *["    " + s for s in read("k0n", "K - k0n")],
                "  }",
                *_mma(cfg, "  ", "(As + cur * A_SLAB)", "(Bs + cur * B_SLAB)"),
                "  if (more) {",
                "    write_staged<BK, LDA_TG, A_VECS, A_ITERS>(As + (cur ^ 1) * A_SLAB, sa, tid);",
                "    write_staged<BN, LDB_TG, B_VECS, B_ITERS>(Bs + (cur ^ 1) * B_SLAB, sb, tid);",
                "  }",
                "  threadgroup_barrier(mem_flags::mem_threadgroup);",
                "}"]
    return [ind + s if s else s for s in out]


def _tail(ind: str) -> list[str]:
    """A partial last k-slab (K not a multiple of BK): loaded checked and zero-filled, then one MMA pass."""
    out = ["if (k_tail) {",
           "  const int k0 = k_tiles * BK;",
           "  load_checked<BM, BK, LDA_TG, A_VECS, A_ITERS>(As, A + k0, K, tid, rows_left, K - k0);",
           "  load_checked<BK, BN, LDB_TG, B_VECS, B_ITERS>(Bs, B + k0 * N, N, tid, K - k0, cols_left);",
           "  threadgroup_barrier(mem_flags::mem_threadgroup);",
           "  MMA_SLAB(As, Bs)",
           "  threadgroup_barrier(mem_flags::mem_threadgroup);",
           "}"]
    return [ind + s for s in out]


def _store(cfg: SteelGemmConfig, ind: str, checked: bool) -> list[str]:
    if not checked and cfg.dtype == "fp32":
        return [f"{ind}for (int i = 0; i < TM; ++i)",
                f"{ind}  for (int j = 0; j < TN; ++j)",
                f"{ind}    simdgroup_store(acc[i][j], C + (sg_row + i * 8) * N + sg_col + j * 8, N);"]
    guard = "if (r < rows_left && c + e < cols_left) " if checked else ""
    return [f"{ind}for (int i = 0; i < TM; ++i)",
            f"{ind}  for (int j = 0; j < TN; ++j) {{",
            f"{ind}    const int r = sg_row + i * 8 + lc.y, c = sg_col + j * 8 + lc.x;",
            f"{ind}    for (int e = 0; e < 2; ++e) {{",
            f"{ind}      {guard}C[r * N + c + e] = elem_t(acc[i][j].thread_elements()[e]);",
            f"{ind}    }}",
            f"{ind}  }}"]


def _body(cfg: SteelGemmConfig) -> str:
    fm, fn = cfg.frags
    head = [
        "// ---- body (the same text in the standalone kernel and in mlx.core.fast.metal_kernel) ----",
        "const int M = mnk[0], N = mnk[1], K = mnk[2];",
        "const int tile_m = threadgroup_position_in_grid.y, tile_n = threadgroup_position_in_grid.x;",
        "const ushort tid = thread_index_in_threadgroup;",
        "const ushort sg = simdgroup_index_in_threadgroup;",
        "const short2 lc = frag_coord(thread_index_in_simdgroup);",
        "const int sg_row = (sg / WN) * PM, sg_col = (sg % WN) * PN;  // the SIMD-group's patch in the tile",
        "const int rows_left = M - tile_m * BM, cols_left = N - tile_n * BN;",
        "if (rows_left <= 0 || cols_left <= 0) return;",
        "A += tile_m * BM * K;",
        "B += tile_n * BN;",
        "C += tile_m * BM * N + tile_n * BN;",
        "",
        "threadgroup elem_t As[BUFFERS * A_SLAB];",
        "threadgroup elem_t Bs[BUFFERS * B_SLAB];",
        f"// the simdgroup patch: {cfg.patch[0]}x{cfg.patch[1]} of C as {fm}x{fn} fragments (fp32 accumulators)",
        "simdgroup_float8x8 acc[TM][TN];",
        "simdgroup_float8x8 a_frag[TM];",
        "simdgroup_float8x8 b_frag[TN];",
        "for (int i = 0; i < TM; ++i)",
        "  for (int j = 0; j < TN; ++j) acc[i][j] = make_filled_simdgroup_matrix<float, 8, 8>(0.f);",
        "",
    ]
    if cfg.edge == "aligned":
        body = [*head,
                "// aligned pipeline: M, N, K multiples of the tile; no bounds check anywhere",
                "const int k_tiles = K / BK;",
                *_loop(cfg, "", ""),
                *_store(cfg, "", False)]
    elif cfg.edge == "guards":
        body = [*head,
                "// guarded pipeline: every thread checks every load and store",
                "const int k_tiles = (K + BK - 1) / BK;",
                *_loop(cfg, "", "true"),
                *_store(cfg, "", True)]
    else:
        mma_macro = " ".join(s.strip() for s in _mma(cfg, "", "As", "Bs"))
        body = [*head,
                "// ragged pipeline (steel's): align_M / align_N / align_K / align_ld are function constants",
                "// (template booleans under MLX), so the branches below are resolved at pipeline creation.",
                f"#define MMA_SLAB(As, Bs) {mma_macro}",
                "const int k_tiles = K / BK;  // full slabs; a partial last one is the tail",
                "const bool k_tail = !align_K && (K % BK) != 0;",
                "if (align_M && align_N && align_K && align_ld) {",
                "  // aligned problem: the unchecked pipeline, no bounds check",
                *_loop(cfg, "  ", ""),
                *_store(cfg, "  ", False),
                "} else {",
                "  // unaligned problem: inner tiles take the unchecked loop, edge tiles the checked one",
                "  const bool edge_tile = !align_ld || (!align_M && rows_left < BM) || (!align_N && cols_left < BN);",
                *_loop(cfg, "  ", "edge_tile"),
                *_tail("  "),
                "  if (edge_tile) {",
                *_store(cfg, "    ", True),
                "  } else {",
                *_store(cfg, "    ", False),
                "  }",
                "}",
                "#undef MMA_SLAB"]
    return "\n".join(body) + "\n"


def generate(cfg: SteelGemmConfig) -> MetalSource:
    """The MSL source of ``cfg``'s kernel (deterministic: the same configuration gives the same text)."""
    _check(cfg)
    name = kernel_name(cfg)
    if cfg.variant == "steel":
        header, body = _header(cfg), _body(cfg)
    else:
        header, body = _scalar_header(cfg), _scalar_body(cfg)
    t = MSL_TYPES[cfg.dtype]
    fcs = tuple(n for n, _ in FUNCTION_CONSTANTS) if cfg.edge == "ragged" else ()
    decl = [f"constant bool {n} [[function_constant({i})]];" for n, i in FUNCTION_CONSTANTS if n in fcs]
    params = [f"    const device {t}* A [[buffer(0)]],", f"    const device {t}* B [[buffer(1)]],",
              "    const device int* mnk [[buffer(2)]],", f"    device {t}* C [[buffer(3)]],"]
    params += [f"    {ty} {nm} [[{nm}]]," for ty, nm in ATTRIBUTES]
    params[-1] = params[-1].rstrip(",")
    indented = "\n".join(("  " + s if s and not s.startswith("#") else s) for s in body.splitlines())
    full = (header + ("\n" + "\n".join(decl) + "\n" if decl else "") + "\n"
            f"[[kernel, max_total_threads_per_threadgroup({cfg.threads})]] void {name}(\n"
            + "\n".join(params) + ") {\n" + indented + "\n}\n")
    tiles_n, tiles_m, _ = cfg.grid
    return MetalSource(name=name, header=header, body=body, full=full, grid=(tiles_n * cfg.threads, tiles_m, 1),
                       threadgroup=(cfg.threads, 1, 1), function_constants=fcs)


# ----- the naive and threadgroup-tiled kernels --------------------------------------------------------------
def _scalar_header(cfg: SteelGemmConfig) -> str:
    t = MSL_TYPES[cfg.dtype]
    lines = [
        f"// {kernel_name(cfg)}: generated by validation/families/steel_gemm/metal.py from",
        f"// {cfg.label}. C = A @ B, row-major, fp32 accumulation, one output per thread.",
        "#include <metal_stdlib>",
        "using namespace metal;",
        "",
        "#define TILE_CONST static constant constexpr const",
        f"typedef {t} elem_t;",
        f"TILE_CONST int BM = {cfg.bm};  // threadgroup tile rows (threads along M)",
        f"TILE_CONST int BN = {cfg.bn};  // threadgroup tile columns (threads along N)",
        f"TILE_CONST int THREADS = {cfg.threads};  // BM * BN: one output per thread",
    ]
    if cfg.variant == "threadgroup":
        lines += [
            f"TILE_CONST int BK = {cfg.bk};  // k-slab depth",
            f"TILE_CONST int TG_PAD = {cfg.tg_pad};  // elements of padding per threadgroup-memory row",
            f"TILE_CONST int BUFFERS = {cfg.buffers};  // threadgroup slabs ({cfg.copy})",
            "TILE_CONST int LDA_TG = BK + TG_PAD;",
            "TILE_CONST int LDB_TG = BN + TG_PAD;",
            "TILE_CONST int A_SLAB = BM * LDA_TG;",
            "TILE_CONST int B_SLAB = BK * LDB_TG;",
            f"TILE_CONST int A_ITERS = {math.ceil(cfg.bm * cfg.bk / cfg.threads)};  // A elements per thread",
            f"TILE_CONST int B_ITERS = {math.ceil(cfg.bk * cfg.bn / cfg.threads)};  // B elements per thread",
        ]
    return "\n".join(lines) + "\n"


def _scalar_body(cfg: SteelGemmConfig) -> str:
    head = [
        "// ---- body (the same text in the standalone kernel and in mlx.core.fast.metal_kernel) ----",
        "const int M = mnk[0], N = mnk[1], K = mnk[2];",
        "const int tile_m = threadgroup_position_in_grid.y, tile_n = threadgroup_position_in_grid.x;",
        "const ushort tid = thread_index_in_threadgroup;",
        "const int r = tid / BN, c = tid % BN;  // this thread's output in the tile",
        "const int rows_left = M - tile_m * BM, cols_left = N - tile_n * BN;",
        "if (rows_left <= 0 || cols_left <= 0) return;",
        "A += tile_m * BM * K;",
        "B += tile_n * BN;",
        "C += tile_m * BM * N + tile_n * BN;",
    ]
    if cfg.variant == "naive":
        check = {"aligned": "", "guards": "true", "ragged": "!(align_M && align_N)"}[cfg.edge]
        body = [*head]
        if cfg.edge == "aligned":
            body.append("// aligned: M, N multiples of the tile; no bounds check anywhere")
        elif cfg.edge == "ragged":
            body.append("// ragged: align_M / align_N are function constants (template booleans under MLX)")
        else:
            body.append("// guarded: every thread checks its output")
        if check:
            body.append(f"if (({check}) && (r >= rows_left || c >= cols_left)) return;")
        body += ["// naive: A's row and B's column straight from device memory",
                 "float acc = 0.f;",
                 "for (int k = 0; k < K; ++k) acc = fma(float(A[r * K + k]), float(B[k * N + c]), acc);",
                 "C[r * N + c] = elem_t(acc);"]
        return "\n".join(body) + "\n"
    checked = {"aligned": "", "guards": "true", "ragged": "edge_tile"}[cfg.edge]

    def copy_a(dst: str, k0: str, into: str) -> list[str]:
        src = f"A[i * K + {k0} + j]"
        val = f"(i < rows_left && {k0} + j < K) ? {src} : elem_t(0)" if checked else src
        if checked not in ("", "true"):
            val = f"{checked} ? ({val}) : {src}"
        return ["for (int it = 0; it < A_ITERS; ++it) {",
                "  const int v = tid + it * THREADS;",
                "  if (v < BM * BK) {",
                "    const int i = v / BK, j = v % BK;",
                f"    {into.format(dst=dst, idx='i * LDA_TG + j', it='it')} = {val};",
                "  }",
                "}"]

    def copy_b(dst: str, k0: str, into: str) -> list[str]:
        src = f"B[({k0} + i) * N + j]"
        val = f"({k0} + i < K && j < cols_left) ? {src} : elem_t(0)" if checked else src
        if checked not in ("", "true"):
            val = f"{checked} ? ({val}) : {src}"
        return ["for (int it = 0; it < B_ITERS; ++it) {",
                "  const int v = tid + it * THREADS;",
                "  if (v < BK * BN) {",
                "    const int i = v / BN, j = v % BN;",
                f"    {into.format(dst=dst, idx='i * LDB_TG + j', it='it')} = {val};",
                "  }",
                "}"]

    def write_staged(dst: str, staged: str, iters: str, n: str, cols: str, ld: str) -> list[str]:
        return [f"for (int it = 0; it < {iters}; ++it) {{",
                "  const int v = tid + it * THREADS;",
                f"  if (v < {n}) {dst}[(v / {cols}) * {ld} + v % {cols}] = {staged}[it];",
                "}"]

    fma = ["for (int kk = 0; kk < BK; ++kk)",
           "  acc = fma(float(As_cur[r * LDA_TG + kk]), float(Bs_cur[kk * LDB_TG + c]), acc);"]
    to_tg = "{dst}[{idx}]"
    body = [*head,
            "threadgroup elem_t As[BUFFERS * A_SLAB];",
            "threadgroup elem_t Bs[BUFFERS * B_SLAB];",
            "float acc = 0.f;"]
    if cfg.edge == "aligned":
        body += ["// aligned: M, N, K multiples of the tile; no bounds check anywhere",
                 "const int k_tiles = K / BK;"]
    elif cfg.edge == "guards":
        body += ["// guarded: every copy and the store are checked",
                 "const int k_tiles = (K + BK - 1) / BK;"]
    else:
        body += ["// ragged: align_M / align_N / align_K are function constants (template booleans under MLX):",
                 "// tiles inside C with K a multiple of BK copy unchecked, the others checked",
                 "const bool edge_tile = !align_K || (!align_M && rows_left < BM) || (!align_N && cols_left < BN);",
                 "const int k_tiles = (K + BK - 1) / BK;"]
    if cfg.copy == "sync":
        body += ["for (int kt = 0; kt < k_tiles; ++kt) {",
                 "  const int k0 = kt * BK;",
                 *["  " + x for x in copy_a("As", "k0", to_tg)],
                 *["  " + x for x in copy_b("Bs", "k0", to_tg)],
                 "  threadgroup_barrier(mem_flags::mem_threadgroup);",
                 "  threadgroup const elem_t* As_cur = As;",
                 "  threadgroup const elem_t* Bs_cur = Bs;",
                 *["  " + x for x in fma],
                 "  threadgroup_barrier(mem_flags::mem_threadgroup);",
                 "}"]
    else:
        to_reg = "{dst}[{it}]"
        body += ["// double buffer: slab 0 first; then the next slab read into registers during the FMAs,",
                 "// written into the other buffer, one barrier per step",
                 "elem_t sa[A_ITERS];",
                 "elem_t sb[B_ITERS];",
                 "if (k_tiles > 0) {",
                 *["  " + x for x in copy_a("As", "0", to_tg)],
                 *["  " + x for x in copy_b("Bs", "0", to_tg)],
                 "}",
                 "threadgroup_barrier(mem_flags::mem_threadgroup);",
                 "for (int kt = 0; kt < k_tiles; ++kt) {",
                 "  const int cur = kt & 1;",
                 "  const bool more = kt + 1 < k_tiles;",
                 "  const int k0n = (kt + 1) * BK;",
                 "  if (more) {",
                 *["    " + x for x in copy_a("sa", "k0n", to_reg)],
                 *["    " + x for x in copy_b("sb", "k0n", to_reg)],
                 "  }",
                 "  threadgroup const elem_t* As_cur = As + cur * A_SLAB;",
                 "  threadgroup const elem_t* Bs_cur = Bs + cur * B_SLAB;",
                 *["  " + x for x in fma],
                 "  if (more) {",
                 *["    " + x for x in write_staged("(As + (cur ^ 1) * A_SLAB)", "sa", "A_ITERS", "BM * BK", "BK",
                                                     "LDA_TG")],
                 *["    " + x for x in write_staged("(Bs + (cur ^ 1) * B_SLAB)", "sb", "B_ITERS", "BK * BN", "BN",
                                                     "LDB_TG")],
                 "  }",
                 "  threadgroup_barrier(mem_flags::mem_threadgroup);",
                 "}"]
    if checked == "":
        body.append("C[r * N + c] = elem_t(acc);")
    elif checked == "true":
        body.append("if (r < rows_left && c < cols_left) C[r * N + c] = elem_t(acc);")
    else:
        body.append("if (!edge_tile || (r < rows_left && c < cols_left)) C[r * N + c] = elem_t(acc);")
    return "\n".join(body) + "\n"


def mlx_template(cfg: SteelGemmConfig) -> list[tuple[str, bool]]:
    """The ``template`` argument of the MLX call: the ragged kernel's function constants as booleans."""
    if cfg.edge != "ragged":
        return []
    vals = function_constant_values(cfg)
    return [(n, bool(vals[n])) for n, _ in FUNCTION_CONSTANTS]


if __name__ == "__main__":  # print one configuration's standalone source
    import sys

    from validation.families.steel_gemm.runner import config_from_args

    print(generate(config_from_args(sys.argv[1:])).full, end="")
