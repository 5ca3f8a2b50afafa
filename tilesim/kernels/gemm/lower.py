"""The GEMM family's lowering: a :class:`GemmConfig` as a :class:`TileProgram` (one k-loop phase and
an epilogue phase).

The lowering lists the lane byte offsets of one block's instructions (global loads with where they
land in shared memory, the inner loop's shared loads, the epilogue's stores); the engine's cost
model counts sectors, cache lines and bank wavefronts from them. The thread-to-data mappings are the ones the CUDA
kernels in ``validation/kernels`` use (siboehm's ladder: kernels 1, 2, 3, 4, 5, 6, 10, plus
register-prefetch and cp.async pipelines).

Modelling choices, stated once:

* The naive kernels run their k-loop in steps of one sector's worth of k (8 fp32 values), and a
  block's L1 is assumed to keep the sectors it touched within one step (so a row of A is fetched
  from L2 once per step, not once per k). Naive kernels have no barriers: their warps progress
  independently (``warp_groups``).
* Stores are counted per instruction at L2 (partial-sector writes are not merged by L1); loads
  are counted as the distinct sectors of the block's step.
* Edge blocks are counted as full tiles (predicated-off lanes are not subtracted).
"""

from __future__ import annotations

import math

from tilesim.kernels.gemm.config import GemmConfig
from tilesim.program import (
    Compute,
    GlobalLoad,
    GlobalStore,
    Launch,
    Phase,
    SharedAccess,
    Step,
    TileProgram,
    TileRef,
    WarpAccess,
)

WARP = 32  # lanes per warp: the CUDA kernels' thread-to-data mapping is written for it
SECTOR_BYTES = 32  # the naive kernels' k-step: one sector's worth of k (8 fp32 values)
# Non-memory, non-FMA instructions per warp and k-step of a staged kernel: OTHER_FIXED + OTHER_PER_LOAD
# x (global load or cp.async instructions per warp). From the SASS loop bodies (nvcc 13, sm_90) of
# four validation kernels: 155, 317, 54 and 98 such instructions against 8, 20, 2 and 8 loads.
OTHER_FIXED_PER_WARP_STEP = 24
OTHER_PER_GLOBAL_LOAD = 12


def lower(cfg: GemmConfig) -> TileProgram:
    """Describe what one block of this GEMM does, per k-step, and its epilogue."""
    if cfg.variant in ("naive", "naive_uncoalesced"):
        step, iterations, warp_groups = _naive_step(cfg)
    else:
        step, iterations, warp_groups = _staged_step(cfg)
    e = cfg.elem_bytes
    min_hbm = (cfg.m * cfg.k + cfg.k * cfg.n + cfg.m * cfg.n * (2 if cfg.beta else 1)) * e
    kloop = Phase("k-loop", iterations, step, pipeline_depth=cfg.stages if cfg.pipeline != "none" else 1,
                  warp_groups=warp_groups)
    return TileProgram(
        name=f"gemm_{cfg.label}",
        launch=Launch(grid=cfg.grid, threads_per_block=cfg.threads, regs_per_thread=cfg.estimated_regs,
                      smem_bytes_per_block=cfg.smem_bytes),
        phases=(kloop, Phase("epilogue", 1, _epilogue(cfg))),
        flops=cfg.flops,
        min_hbm_bytes=float(min_hbm),
    )


# ----------------------------------------------------------------------------------------------
def _warps(cfg: GemmConfig) -> int:
    return math.ceil(cfg.threads / WARP)


def _lanes(warp: int, threads: int, ws: int = WARP) -> range:
    return range(warp * ws, min((warp + 1) * ws, threads))


def _naive_step(cfg: GemmConfig):
    """One k-step of ``SECTOR_BYTES / e`` values of k: every warp reads its A and B elements at
    each k (one instruction each); the L1 keeps the step's sectors, so a row of A is fetched from
    L2 once per step (two dependent L1 round trips per step, the FMAs a chain of ``kstep``)."""
    e = cfg.elem_bytes
    kstep = max(1, SECTOR_BYTES // e)
    W = _warps(cfg)
    coalesced = cfg.variant == "naive"

    def rc(tid: int) -> tuple[int, int]:
        if coalesced:
            return tid // cfg.bn, tid % cfg.bn  # threadIdx.x walks columns
        return tid % cfg.bm, tid // cfg.bm  # threadIdx.x walks rows

    a_instr, b_instr = [], []
    for w in range(W):
        lanes = [rc(t) for t in _lanes(w, cfg.threads)]
        for kk in range(kstep):
            a_instr.append(WarpAccess(tuple((r * cfg.k + kk) * e for r, _ in lanes), e))
            b_instr.append(WarpAccess(tuple((kk * cfg.n + c) * e for _, c in lanes), e))
    loads = (
        GlobalLoad(TileRef("A", ("by", "k"), cfg.bm * kstep * e), tuple(a_instr), chain=kstep / 8),
        GlobalLoad(TileRef("B", ("k", "bx"), kstep * cfg.bn * e), tuple(b_instr), chain=kstep / 8),
    )
    compute = (Compute("fma", W * kstep, chain=kstep), Compute("int", W * kstep))
    return Step(loads=loads, compute=compute), math.ceil(cfg.k / kstep), W


def _tile_load(cfg, tensor, coords, rows, cols, row_stride_elems, vec, dest, smem_addr) -> GlobalLoad:
    """Loads of a rows x cols tile (row-major in global memory) by all threads, ``vec`` elements each.

    ``smem_addr(row, col)`` gives the shared byte address of an element (a tuple of ``vec``
    addresses for transposed layouts, which store ``vec`` scalars). ``dest`` is "shared"
    (register-staged) or "async" (cp.async).
    """
    e, T = cfg.elem_bytes, cfg.threads
    row_stride_elems = max(row_stride_elems, cols)  # tiles wider than the matrix: rows do not overlap
    n_elems = rows * cols
    per_round = T * vec
    instrs = []
    for r in range(math.ceil(n_elems / per_round)):
        for w in range(math.ceil(T / WARP)):
            idxs = [(r * T + t) * vec for t in _lanes(w, T)]
            idxs = [i for i in idxs if i < n_elems]
            if not idxs:
                continue
            addrs = tuple(((i // cols) * row_stride_elems + (i % cols)) * e for i in idxs)
            saddrs = tuple(smem_addr(i // cols, i % cols) for i in idxs)
            instrs.append(WarpAccess(addrs, vec * e, saddrs))
    return GlobalLoad(TileRef(tensor, coords, n_elems * e), tuple(instrs), dest=dest)


def _staged_step(cfg: GemmConfig):
    e = cfg.elem_bytes
    W = _warps(cfg)
    vec = 4 if cfg.vectorize else 1
    dest = "async" if cfg.pipeline == "cp_async" else "shared"
    (_, a_stride), (_, b_stride) = cfg.smem_a_shape, cfg.smem_b_shape
    a_base = 0
    b_base = cfg.smem_a_shape[0] * a_stride * e
    if cfg.vectorize:  # A stored transposed: As[k][m]; a float4 of A (4 consecutive k) -> 4 scalars
        def a_addr(r, c):
            return tuple(a_base + ((c + q) * a_stride + r) * e for q in range(vec))
    else:
        def a_addr(r, c):
            return a_base + (r * a_stride + c) * e
    b_vec_ok = (b_stride * e) % (vec * e) == 0

    def b_addr(r, c):
        if b_vec_ok:
            return b_base + (r * b_stride + c) * e
        return tuple(b_base + (r * b_stride + c + q) * e for q in range(vec))

    la = _tile_load(cfg, "A", ("by", "k"), cfg.bm, cfg.bk, cfg.k, vec, dest, a_addr)
    lb = _tile_load(cfg, "B", ("k", "bx"), cfg.bk, cfg.bn, cfg.n, vec, dest, b_addr)
    # Inner loop: shared -> register loads of one k-step, warp 0's pattern times the warp count.
    reads = _fragment_addresses(cfg, WARP, a_stride, b_stride, e)
    smem_loads = SharedAccess(tuple(WarpAccess(tuple(addrs), width) for addrs, width in reads), repeat=W)
    ffma = cfg.bm * cfg.bn * cfg.bk / WARP
    barriers = 2 if cfg.pipeline == "none" else 1
    # Integer work per warp and k-step besides the loads, stores and FMAs: bounds-checked address
    # and predicate arithmetic for every global load (or cp.async) and a fixed part (loop, buffer
    # and fragment pointers). Read off the SASS loop bodies of the validation kernels
    # (cuobjdump -sass; see README, "Where the numbers come from"), never off their times.
    load_instr_per_warp = _load_instructions(la, dest) + _load_instructions(lb, dest)
    other = W * (OTHER_FIXED_PER_WARP_STEP + OTHER_PER_GLOBAL_LOAD * load_instr_per_warp / W)
    compute = (Compute("fma", ffma, chain=cfg.bk), Compute("int", other))
    step = Step(loads=(la, lb), barriers=barriers, shared_loads=(smem_loads,), compute=compute, rounds=cfg.bk)
    return step, math.ceil(cfg.k / cfg.bk), 1


def _load_instructions(ld: GlobalLoad, dest: str) -> int:
    """Warp load instructions of a block's tile load: a cp.async into a transposed layout moves
    each lane's chunk by one 4-byte copy per element."""
    if dest != "async":
        return len(ld.instructions)
    return sum(max((len(s) for s in w.shared_offsets if isinstance(s, tuple)), default=1)
               for w in ld.instructions)


def _fragment_addresses(cfg: GemmConfig, ws: int, a_stride: int, b_stride: int, e: int):
    """Warp 0's shared-load instructions for one whole k-step: lists of (lane byte addresses, width).

    The inner loop over the step's ``bk`` dot products is unrolled by the compiler, which merges
    loads of consecutive, provably aligned elements into 64- or 128-bit loads: along k for A stored
    row-major (``As[row][k..k+3]``), along the fragment for B and for transposed A
    (``Bs[k][col..col+3]``). A padded row stride that breaks the alignment keeps them scalar.
    """
    v = cfg.variant
    lanes = range(min(cfg.threads, ws))
    b_base = cfg.smem_a_shape[0] * a_stride * e
    if v == "smem":
        a_rows = [[t // cfg.bn] for t in lanes]
        b_cols = [[t % cfg.bn] for t in lanes]
    elif v == "reg1d":
        a_rows = [[(t // cfg.bn) * cfg.tm + i for i in range(cfg.tm)] for t in lanes]
        b_cols = [[t % cfg.bn] for t in lanes]
    elif v == "reg2d":
        cols = cfg.bn // cfg.tn
        a_rows = [[(t // cols) * cfg.tm + i for i in range(cfg.tm)] for t in lanes]
        b_cols = [[(t % cols) * cfg.tn + j for j in range(cfg.tn)] for t in lanes]
    else:  # warp tiling, warp 0
        sub_m, sub_n = cfg.wm // cfg.wmiter, cfg.wn // cfg.wniter
        cols = sub_n // cfg.tn
        a_rows = [[w * sub_m + (t // cols) * cfg.tm + i for w in range(cfg.wmiter) for i in range(cfg.tm)]
                  for t in lanes]
        b_cols = [[w * sub_n + (t % cols) * cfg.tn + j for w in range(cfg.wniter) for j in range(cfg.tn)]
                  for t in lanes]
    reads: list = []
    if cfg.vectorize:  # As[k][row]: runs of consecutive rows at each k
        _runs(reads, a_rows, cfg.bk, lambda k, r: (k * a_stride + r) * e, a_stride, e)
    else:  # As[row][k]: consecutive along the unrolled k
        kw = _merge_width(cfg.bk, a_stride)
        for k0 in range(0, cfg.bk, kw):
            for i in range(len(a_rows[0])):
                reads.append(([(rows[i] * a_stride + k0) * e for rows in a_rows], kw * e))
    _runs(reads, b_cols, cfg.bk, lambda k, c: b_base + (k * b_stride + c) * e, b_stride, e)
    return reads


def _merge_width(run: int, stride: int) -> int:
    """Elements per load when merging a run of ``run`` consecutive elements in rows of ``stride``."""
    for w in (4, 2):
        if run % w == 0 and stride % w == 0:
            return w
    return 1


def _runs(out: list, per_lane: list, bk: int, addr, stride: int, e: int) -> None:
    """Loads of each lane's element list at every k: consecutive runs merged when aligned."""
    n = len(per_lane[0])
    starts = [i for i in range(n) if i == 0 or per_lane[0][i] != per_lane[0][i - 1] + 1]
    bounds = starts + [n]
    for k in range(bk):
        for s0, s1 in zip(bounds, bounds[1:], strict=False):
            w = _merge_width(s1 - s0, stride)
            if any(lane[s0] % w for lane in per_lane):
                w = 1
            for i in range(s0, s1, w):
                out.append(([addr(k, lane[i]) for lane in per_lane], w * e))


def _output_coords(cfg: GemmConfig, tid: int) -> list[tuple[int, int]]:
    """The (row, col) outputs of C a thread writes, in instruction order."""
    v = cfg.variant
    if v == "naive":
        return [(tid // cfg.bn, tid % cfg.bn)]
    if v == "naive_uncoalesced":
        return [(tid % cfg.bm, tid // cfg.bm)]
    if v == "smem":
        return [(tid // cfg.bn, tid % cfg.bn)]
    if v == "reg1d":
        return [((tid // cfg.bn) * cfg.tm + i, tid % cfg.bn) for i in range(cfg.tm)]
    if v == "reg2d":
        cols = cfg.bn // cfg.tn
        r0, c0 = (tid // cols) * cfg.tm, (tid % cols) * cfg.tn
        return [(r0 + i, c0 + j) for i in range(cfg.tm) for j in range(cfg.tn)]
    warp, lane = divmod(tid, 32)
    warps_n = cfg.bn // cfg.wn
    wr, wc = warp // warps_n, warp % warps_n
    sub_m, sub_n = cfg.wm // cfg.wmiter, cfg.wn // cfg.wniter
    cols = sub_n // cfg.tn
    out = []
    for wsm in range(cfg.wmiter):
        for wsn in range(cfg.wniter):
            r0 = wr * cfg.wm + wsm * sub_m + (lane // cols) * cfg.tm
            c0 = wc * cfg.wn + wsn * sub_n + (lane % cols) * cfg.tn
            out += [(r0 + i, c0 + j) for i in range(cfg.tm) for j in range(cfg.tn)]
    return out


def _epilogue(cfg: GemmConfig) -> Step:
    """C writes (and reads when beta != 0): warp 0's instructions, times the warps."""
    e = cfg.elem_bytes
    W = _warps(cfg)
    vec = 4 if (cfg.vectorize and cfg.tn % 4 == 0) else 1
    per_lane = [_output_coords(cfg, t) for t in range(min(WARP, cfg.threads))]
    n_out = len(per_lane[0])
    instrs = tuple(WarpAccess(tuple((pl[i][0] * cfg.n + pl[i][1]) * e for pl in per_lane), vec * e)
                   for i in range(0, n_out, vec))
    tile = TileRef("C", ("by", "bx"), cfg.bm * cfg.bn * e)
    reads = (GlobalLoad(tile, instrs, repeat=W),) if cfg.beta else ()
    # address arithmetic and the alpha/beta scaling: two instructions per store instruction
    return Step(loads=reads, compute=(Compute("int", 2 * len(instrs) * W),),
                stores=(GlobalStore(tile, instrs, repeat=W),))
