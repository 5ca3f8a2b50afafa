"""The steel-style GEMM as a tile program: a k-loop phase (slabs of A and B through threadgroup
memory, simdgroup_matrix multiply-accumulates) and an epilogue (the patch stored to C).

The ``naive`` and ``threadgroup`` variants lower to the same two phases (see :func:`_naive_step`
and :func:`_threadgroup_step`), with FP32 FMAs on the ALUs instead of simdgroup_matrix, the way
the CUDA ``gemm`` family lowers its ``naive`` and ``smem`` rungs (thread ``t`` of the threadgroup
owns C element (t // bn, t % bn)).

Per threadgroup and k-step:

* global loads of the ``bm x bk`` slab of A and the ``bk x bn`` slab of B, 16-byte vectors, threads
  sweeping rows (steel's loaders), stored to threadgroup memory (``dest="shared"``: device ->
  registers -> threadgroup memory; rows padded by ``tg_pad``); ``double_buffer`` is a two-deep
  pipeline with one barrier per step, ``sync`` two barriers and no pipeline;
* per SIMD-group and 8-deep k-substep, ``simdgroup_load`` of its ``fm`` A fragments and ``fn`` B
  fragments (each lane 2 elements of an 8x8 fragment: lane t holds row t // 4, columns
  2 (t % 4) and 2 (t % 4) + 1, the layout simdgroup_matrix is documented to distribute in pairs),
  then ``fm x fn`` ``Mma((8, 8, 8))`` multiply-accumulates;
* register pressure: a thread needs :attr:`SteelGemmConfig.estimated_regs`; beyond ``reg_limit``
  the excess accumulators are spilled to device memory (thread-private stack, lanes interleaved like
  CUDA local memory): each k-substep reloads and stores every spilled register, as global traffic
  (``spill`` tensor, one tile per threadgroup) and one dependent round trip per substep on the
  critical path. No penalty factor: what it costs comes from the memory levels' rates and latencies.
* integer work: :data:`INT_PER_STEP` per SIMD-group and step plus :data:`INT_PER_LOAD` per load
  instruction (addresses); bounds checks add :data:`INT_PER_GUARD` per load instruction, on every
  threadgroup with ``guards`` and on the edge threadgroups' share with ``ragged``. Assumptions (no
  compiled Metal code is read here: there is no Mac).
"""

from __future__ import annotations

import math

from tilesim.kernels.steel_gemm.config import FRAG, SIMD, SteelGemmConfig
from tilesim.program import (
    Compute,
    GlobalLoad,
    GlobalStore,
    Launch,
    Mma,
    Phase,
    SharedAccess,
    Step,
    TileProgram,
    TileRef,
    WarpAccess,
    lanes,
)

INT_PER_STEP = 8
INT_PER_LOAD = 2
INT_PER_GUARD = 2
NAIVE_KSTEP_BYTES = 32
"""The naive kernel's k-step: 32 bytes of k per row of A (8 fp32 values), as the CUDA gemm family's
naive lowering: the core's L1 is assumed to keep what a step touched, so a row of A is fetched
from the next level once per step, not once per k (an assumption, as there)."""


def _frag_lane(t: int) -> tuple[int, int]:
    """(row, first column) of the two elements lane ``t`` holds in an 8x8 fragment."""
    return t // 4, 2 * (t % 4)


def _slab_load(cfg: SteelGemmConfig, tensor: str, coords, rows: int, cols: int, row_stride: int,
               tg_base: int, tg_stride: int) -> GlobalLoad:
    """A rows x cols slab (row-major, ``row_stride`` elements per row in device memory) loaded by all
    threads in ``vec``-element vectors, rows swept by consecutive threads, into threadgroup memory."""
    e, vec, T = cfg.elem_bytes, cfg.vec, cfg.threads
    vec = min(vec, cols)
    n = rows * cols
    instrs = []
    for r in range(math.ceil(n / (T * vec))):
        for w in range(math.ceil(T / SIMD)):
            idx = [(r * T + t) * vec for t in range(w * SIMD, min((w + 1) * SIMD, T))]
            idx = [i for i in idx if i < n]
            if not idx:
                continue
            g = tuple(((i // cols) * max(row_stride, cols) + i % cols) * e for i in idx)
            s = tuple(tg_base + ((i // cols) * tg_stride + i % cols) * e for i in idx)
            instrs.append(WarpAccess(g, vec * e, s))
    return GlobalLoad(TileRef(tensor, coords, n * e), tuple(instrs), dest="shared")


def lower(cfg: SteelGemmConfig) -> TileProgram:
    """What every threadgroup of this GEMM does (see the module docstring)."""
    if cfg.variant != "steel":
        return _lower_scalar(cfg)
    e, W = cfg.elem_bytes, cfg.simdgroups
    fm, fn = cfg.frags
    sub = cfg.bk // FRAG
    a_stride, b_stride = cfg.bk + cfg.tg_pad, cfg.bn + cfg.tg_pad
    b_base = cfg.bm * a_stride * e
    la = _slab_load(cfg, "A", ("by", "k"), cfg.bm, cfg.bk, cfg.k, 0, a_stride)
    lb = _slab_load(cfg, "B", ("k", "bx"), cfg.bk, cfg.bn, cfg.n, b_base, b_stride)
    # SIMD-group 0's fragment loads of one k-step, times the SIMD-groups
    frag_loads = []
    for kk in range(sub):
        for i in range(fm):
            frag_loads.append(WarpAccess(tuple(((i * FRAG + r) * a_stride + kk * FRAG + c) * e
                                               for r, c in map(_frag_lane, range(SIMD))), 2 * e))
        for j in range(fn):
            frag_loads.append(WarpAccess(tuple(b_base + ((kk * FRAG + r) * b_stride + j * FRAG + c) * e
                                               for r, c in map(_frag_lane, range(SIMD))), 2 * e))
    mma_dtype = cfg.dtype
    loads = [la, lb]
    stores = []
    spilled = cfg.spilled_regs
    chain = 0.0
    if spilled:
        spill_tile = TileRef("spill", ("by", "bx"), spilled * 4 * cfg.threads)
        spill_instr = tuple(lanes(4, base=r * 4 * SIMD) for r in range(spilled))
        loads.append(GlobalLoad(spill_tile, spill_instr, repeat=W * sub, chain=float(sub)))
        stores.append(GlobalStore(spill_tile, spill_instr, repeat=W * sub))
    load_instr = len(la.instructions) + len(lb.instructions)
    guard_share = {"aligned": 0.0, "guards": 1.0, "ragged": _edge_share(cfg)}[cfg.edge]
    ints = W * INT_PER_STEP + load_instr * (INT_PER_LOAD + INT_PER_GUARD * guard_share)
    step = Step(
        loads=tuple(loads),
        barriers=2 if cfg.copy == "sync" else 1,
        shared_loads=(SharedAccess(tuple(frag_loads), repeat=W),),
        compute=(Mma((FRAG, FRAG, FRAG), mma_dtype, fm * fn * sub * W, chain=chain), Compute("int", ints)),
        stores=tuple(stores),
        rounds=sub,
    )
    kloop = Phase("k-loop", math.ceil(cfg.k / cfg.bk), step, pipeline_depth=cfg.buffers)
    # epilogue: simdgroup_store of the patch's fragments to C (2 elements per lane each)
    out = tuple(WarpAccess(tuple(((i * FRAG + r) * cfg.n + j * FRAG + c) * e for r, c in map(_frag_lane, range(SIMD))),
                           2 * e) for i in range(fm) for j in range(fn))
    c_tile = TileRef("C", ("by", "bx"), cfg.bm * cfg.bn * e)
    epi = Step(compute=(Compute("int", 2 * len(out) * W),), stores=(GlobalStore(c_tile, out, repeat=W),))
    return TileProgram(
        name=f"steel_gemm_{cfg.label}",
        launch=Launch(grid=cfg.grid, threads_per_block=cfg.threads,
                      regs_per_thread=min(cfg.estimated_regs, cfg.reg_limit), smem_bytes_per_block=cfg.tg_bytes),
        phases=(kloop, Phase("epilogue", 1, epi)),
        flops=cfg.flops,
        min_hbm_bytes=float((cfg.m * cfg.k + cfg.k * cfg.n + cfg.m * cfg.n) * e),
    )


def _edge_share(cfg: SteelGemmConfig) -> float:
    """Share of the threadgroups that hold an edge of C or of K (the ragged pipeline's checked ones)."""
    gx, gy, _ = cfg.grid
    inner_x = gx - (1 if cfg.n % cfg.bn else 0)
    inner_y = gy - (1 if cfg.m % cfg.bm else 0)
    if cfg.k % cfg.bk:
        return 1.0
    return 1.0 - inner_x * inner_y / (gx * gy)


# ----- the naive and threadgroup-tiled kernels (one output per thread, FP32 FMAs) -----------------------
def _guard_share(cfg: SteelGemmConfig) -> float:
    return {"aligned": 0.0, "guards": 1.0, "ragged": _edge_share(cfg)}[cfg.edge]


def _naive_step(cfg: SteelGemmConfig) -> tuple[Step, int, int]:
    """One k-step of ``NAIVE_KSTEP_BYTES / e`` values of k: every SIMD-group reads its A and B
    element at each k straight from device memory (one instruction each), one FMA chain per thread;
    no barriers, so the SIMD-groups progress independently."""
    e, T, W = cfg.elem_bytes, cfg.threads, cfg.simdgroups
    kstep = max(1, NAIVE_KSTEP_BYTES // e)
    a_instr, b_instr = [], []
    for w in range(W):
        rc = [(t // cfg.bn, t % cfg.bn) for t in range(w * SIMD, min((w + 1) * SIMD, T))]
        for kk in range(kstep):
            a_instr.append(WarpAccess(tuple((r * cfg.k + kk) * e for r, _ in rc), e))
            b_instr.append(WarpAccess(tuple((kk * cfg.n + c) * e for _, c in rc), e))
    loads = (GlobalLoad(TileRef("A", ("by", "k"), cfg.bm * kstep * e), tuple(a_instr), chain=kstep / 8),
             GlobalLoad(TileRef("B", ("k", "bx"), kstep * cfg.bn * e), tuple(b_instr), chain=kstep / 8))
    ints = W * kstep * (1 + INT_PER_GUARD * _guard_share(cfg) / 2)
    step = Step(loads=loads, compute=(Compute("fma", W * kstep, chain=kstep), Compute("int", ints)))
    return step, math.ceil(cfg.k / kstep), W


def _merge_width(run: int, stride: int) -> int:
    """Elements per threadgroup load when the unrolled k-loop reads ``run`` consecutive elements of
    rows ``stride`` elements apart: 4 or 2 when both allow it (16 / 8-byte loads), else 1."""
    for w in (4, 2):
        if run % w == 0 and stride % w == 0:
            return w
    return 1


def _threadgroup_step(cfg: SteelGemmConfig) -> tuple[Step, int, int]:
    """One k-step: the bm x bk slab of A and bk x bn slab of B copied element by element (thread
    ``t`` takes elements t, t + T, ...) into padded threadgroup rows; then each thread reads its
    row of the A slab (consecutive k merged into wider loads when the padded stride allows) and its
    column of the B slab, and runs ``bk`` dependent FMAs."""
    e, T, W = cfg.elem_bytes, cfg.threads, cfg.simdgroups
    a_stride, b_stride = cfg.bk + cfg.tg_pad, cfg.bn + cfg.tg_pad
    b_base = cfg.bm * a_stride * e

    def slab(tensor, coords, rows, cols, row_stride, tg_base, tg_stride):
        n = rows * cols
        instrs = []
        for r in range(math.ceil(n / T)):
            for w in range(W):
                idx = [r * T + t for t in range(w * SIMD, (w + 1) * SIMD) if r * T + t < n]
                if not idx:
                    continue
                g = tuple(((i // cols) * max(row_stride, cols) + i % cols) * e for i in idx)
                sh = tuple(tg_base + ((i // cols) * tg_stride + i % cols) * e for i in idx)
                instrs.append(WarpAccess(g, e, sh))
        return GlobalLoad(TileRef(tensor, coords, n * e), tuple(instrs), dest="shared")

    la = slab("A", ("by", "k"), cfg.bm, cfg.bk, cfg.k, 0, a_stride)
    lb = slab("B", ("k", "bx"), cfg.bk, cfg.bn, cfg.n, b_base, b_stride)
    rc = [(t // cfg.bn, t % cfg.bn) for t in range(min(SIMD, T))]
    kw = _merge_width(cfg.bk, a_stride)
    reads = [WarpAccess(tuple((r * a_stride + k0) * e for r, _ in rc), kw * e) for k0 in range(0, cfg.bk, kw)]
    reads += [WarpAccess(tuple(b_base + (kk * b_stride + c) * e for _, c in rc), e) for kk in range(cfg.bk)]
    load_instr = len(la.instructions) + len(lb.instructions)
    ints = W * INT_PER_STEP + load_instr * (INT_PER_LOAD + INT_PER_GUARD * _guard_share(cfg))
    step = Step(loads=(la, lb), barriers=2 if cfg.copy == "sync" else 1,
                shared_loads=(SharedAccess(tuple(reads), repeat=W),),
                compute=(Compute("fma", W * cfg.bk, chain=cfg.bk), Compute("int", ints)), rounds=cfg.bk)
    return step, math.ceil(cfg.k / cfg.bk), 1


def _lower_scalar(cfg: SteelGemmConfig) -> TileProgram:
    """The naive or threadgroup-tiled kernel: its k-loop and an epilogue of one store per thread."""
    e, W = cfg.elem_bytes, cfg.simdgroups
    if cfg.variant == "naive":
        step, trips, groups = _naive_step(cfg)
        depth = 1
    else:
        step, trips, groups = _threadgroup_step(cfg)
        depth = cfg.buffers
    kloop = Phase("k-loop", trips, step, pipeline_depth=depth, warp_groups=groups)
    rc = [(t // cfg.bn, t % cfg.bn) for t in range(min(SIMD, cfg.threads))]
    out = (WarpAccess(tuple((r * cfg.n + c) * e for r, c in rc), e),)
    c_tile = TileRef("C", ("by", "bx"), cfg.bm * cfg.bn * e)
    epi = Step(compute=(Compute("int", 2 * W),), stores=(GlobalStore(c_tile, out, repeat=W),))
    return TileProgram(
        name=f"steel_gemm_{cfg.label}",
        launch=Launch(grid=cfg.grid, threads_per_block=cfg.threads,
                      regs_per_thread=min(cfg.estimated_regs, cfg.reg_limit), smem_bytes_per_block=cfg.tg_bytes),
        phases=(kloop, Phase("epilogue", 1, epi)),
        flops=cfg.flops,
        min_hbm_bytes=float((cfg.m * cfg.k + cfg.k * cfg.n + cfg.m * cfg.n) * e),
    )
