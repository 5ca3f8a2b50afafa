"""The GEMM family: lowers a :class:`GemmConfig` to the shared :class:`TileProgram` description.

The lowering walks the lane addresses of one block's instructions (global loads, shared stores,
the inner loop's shared loads, the epilogue's stores) and counts sectors, cache lines and bank
wavefronts with :mod:`tilesim.kernels.access`. The thread-to-data mappings are the ones the CUDA
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

from tilesim.hardware import HardwareSpec
from tilesim.kernels.access import (
    global_sectors_and_lines,
    ideal_wavefronts,
    l1_cycles,
    ldgsts_wavefronts,
    smem_wavefronts,
)
from tilesim.kernels.gemm_config import GemmConfig, check_fits
from tilesim.program import (
    Compute,
    Epilogue,
    GlobalAccess,
    KStep,
    Launch,
    SharedAccess,
    TileProgram,
    TileRef,
)

FFMA_LATENCY_CYCLES = 4  # dependent FFMA issue-to-issue on Volta..Hopper (CUDA tuning guides)
# Non-memory, non-FMA instructions per warp and k-step of a staged kernel: OTHER_FIXED + OTHER_PER_LOAD
# x (global load or cp.async instructions per warp). From the SASS loop bodies (nvcc 13, sm_90) of
# four validation kernels: 155, 317, 54 and 98 such instructions against 8, 20, 2 and 8 loads.
OTHER_FIXED_PER_WARP_STEP = 24
OTHER_PER_GLOBAL_LOAD = 12


def lower(cfg: GemmConfig, hw: HardwareSpec) -> TileProgram:
    """Describe what one block of this GEMM does, per k-step, for the engine."""
    check_fits(cfg, hw)
    if cfg.variant in ("naive", "naive_uncoalesced"):
        step, iterations, kstep, warp_groups = _naive_step(cfg, hw)
    else:
        step, iterations, kstep, warp_groups = _staged_step(cfg, hw)
    e = cfg.elem_bytes
    epi = _epilogue(cfg, hw)
    min_hbm = (cfg.m * cfg.k + cfg.k * cfg.n + cfg.m * cfg.n * (2 if cfg.beta else 1)) * e
    return TileProgram(
        name=f"gemm_{cfg.label}",
        launch=Launch(grid=cfg.grid, threads_per_block=cfg.threads, regs_per_thread=cfg.estimated_regs,
                      smem_bytes_per_block=cfg.smem_bytes),
        iterations=iterations,
        step=step,
        epilogue=epi,
        pipeline_depth=cfg.stages if cfg.pipeline != "none" else 1,
        warp_groups=warp_groups,
        flops=cfg.flops,
        min_hbm_bytes=float(min_hbm),
        labels=(("family", "gemm"), ("config", cfg.label), ("kstep", kstep)),
    )


# ----------------------------------------------------------------------------------------------
def _warps(cfg: GemmConfig, hw: HardwareSpec) -> int:
    return math.ceil(cfg.threads / hw.warp_size)


def _lanes(warp: int, threads: int, ws: int = 32) -> range:
    return range(warp * ws, min((warp + 1) * ws, threads))


def _naive_step(cfg: GemmConfig, hw: HardwareSpec):
    e, ws = cfg.elem_bytes, hw.warp_size
    kstep = max(1, hw.sector_bytes // e)
    W = _warps(cfg, hw)
    coalesced = cfg.variant == "naive"

    def rc(tid: int) -> tuple[int, int]:
        if coalesced:
            return tid // cfg.bn, tid % cfg.bn  # threadIdx.x walks columns
        return tid % cfg.bm, tid // cfg.bm  # threadIdx.x walks rows

    l1_wavefronts = 0.0
    for w in range(W):
        lanes = [rc(t) for t in _lanes(w, cfg.threads, ws)]
        la = l1_cycles([(r * cfg.k) * e for r, _ in lanes], e, hw)
        lb = l1_cycles([c * e for _, c in lanes], e, hw)
        l1_wavefronts += kstep * (la + lb)
    # Distinct sectors the block needs from L2 in one step (L1 keeps them within the step).
    a_sectors = cfg.bm * math.ceil(kstep * e / hw.sector_bytes)
    b_sectors = kstep * math.ceil(cfg.bn * e / hw.sector_bytes)
    loads = (
        GlobalAccess(TileRef("A", ("by", "k"), cfg.bm * kstep * e), cfg.bm * kstep * e,
                     a_sectors, l1_wavefronts / 2, W * kstep),
        GlobalAccess(TileRef("B", ("k", "bx"), kstep * cfg.bn * e), kstep * cfg.bn * e,
                     b_sectors, l1_wavefronts / 2, W * kstep),
    )
    ffma = W * kstep
    crit = (kstep / 4) * hw.l1_latency_cycles + kstep * FFMA_LATENCY_CYCLES
    step = KStep(loads=loads, compute=Compute(ffma=ffma, other=W * kstep, critical_path_cycles=crit))
    return step, math.ceil(cfg.k / kstep), kstep, W


def _tile_load(cfg, hw, tensor, coords, rows, cols, row_stride_elems, vec, dest, smem_addr):
    """Loads of a rows x cols tile (row-major in global memory) by all threads, ``vec`` elements each.

    Returns the GlobalAccess and the SharedAccess of staging it (``smem_addr(row, col)`` gives the
    shared byte address of an element; transposed layouts store ``vec`` scalars). Register staging
    stores through shared-store instructions. cp.async (``dest == "async"``) cannot scatter a
    chunk: into a transposed layout each thread's chunk is moved by ``vec`` 4-byte copies, one
    instruction per component, and every copy's shared-memory wavefronts follow
    :func:`~tilesim.kernels.access.ldgsts_wavefronts`.
    """
    e, ws, T = cfg.elem_bytes, hw.warp_size, cfg.threads
    row_stride_elems = max(row_stride_elems, cols)  # tiles wider than the matrix: rows do not overlap
    n_elems = rows * cols
    per_round = T * vec
    rounds = math.ceil(n_elems / per_round)
    sectors: set[int] = set()
    l1 = 0
    instr = 0
    st_wave = 0
    st_ideal = 0
    st_instr = 0
    banks, bw = hw.smem_banks, hw.smem_bank_width_bytes
    for r in range(rounds):
        for w in range(math.ceil(T / ws)):
            idxs = [(r * T + t) * vec for t in _lanes(w, T, ws)]
            idxs = [i for i in idxs if i < n_elems]
            if not idxs:
                continue
            addrs = [((i // cols) * row_stride_elems + (i % cols)) * e for i in idxs]
            sectors.update((a + off) // hw.sector_bytes for a in addrs for off in range(0, vec * e, 4))
            saddrs = [smem_addr(i // cols, i % cols) for i in idxs]
            scattered = all(isinstance(s, tuple) for s in saddrs)  # transposed: vec scalar stores
            if dest == "async":
                parts = ([([a + q * e for a in addrs], [s[q] for s in saddrs], e) for q in range(vec)]
                         if scattered else [(addrs, saddrs, vec * e)])
                for g, sa, width in parts:
                    l1 += l1_cycles(g, width, hw)
                    instr += 1
                    st_wave += ldgsts_wavefronts(g, sa, width, hw)
                    st_ideal += ideal_wavefronts(len(sa), width, banks, bw)
                continue
            l1 += l1_cycles(addrs, vec * e, hw)
            instr += 1
            if scattered:
                for q in range(vec):
                    st_wave += smem_wavefronts([s[q] for s in saddrs], e, banks, bw)
                    st_ideal += ideal_wavefronts(len(saddrs), e, banks, bw)
                    st_instr += 1
            else:
                st_wave += smem_wavefronts(saddrs, vec * e, banks, bw)
                st_ideal += ideal_wavefronts(len(saddrs), vec * e, banks, bw)
                st_instr += 1
    access = GlobalAccess(TileRef(tensor, coords, n_elems * e), n_elems * e, len(sectors), l1, instr, dest)
    return access, SharedAccess(bytes=n_elems * e, instructions=st_instr, wavefronts=st_wave, ideal_wavefronts=st_ideal)


def _staged_step(cfg: GemmConfig, hw: HardwareSpec):
    e, ws = cfg.elem_bytes, hw.warp_size
    W = _warps(cfg, hw)
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

    la, sa = _tile_load(cfg, hw, "A", ("by", "k"), cfg.bm, cfg.bk, cfg.k, vec, dest, a_addr)
    lb, sb = _tile_load(cfg, hw, "B", ("k", "bx"), cfg.bk, cfg.bn, cfg.n, vec, dest, b_addr)
    stores = SharedAccess(bytes=sa.bytes + sb.bytes,
                          instructions=0 if dest == "async" else sa.instructions + sb.instructions,
                          wavefronts=sa.wavefronts + sb.wavefronts,
                          ideal_wavefronts=sa.ideal_wavefronts + sb.ideal_wavefronts)

    # Inner loop: shared -> register loads of one k-step, warp 0's pattern times the warp count.
    reads = _fragment_addresses(cfg, ws, a_stride, b_stride, e)
    lds_instr = lds_wave = lds_ideal = 0
    for addrs, width in reads:
        lds_instr += 1
        lds_wave += smem_wavefronts(addrs, width, hw.smem_banks, hw.smem_bank_width_bytes)
        lds_ideal += ideal_wavefronts(len(addrs), width, hw.smem_banks, hw.smem_bank_width_bytes)
    lds_bytes = sum(len(a) * w for a, w in reads)
    smem_loads = SharedAccess(bytes=lds_bytes * W, instructions=lds_instr * W,
                              wavefronts=lds_wave * W, ideal_wavefronts=lds_ideal * W)
    ffma = cfg.bm * cfg.bn * cfg.bk / ws
    barriers = 2 if cfg.pipeline == "none" else 1
    # Integer work per warp and k-step besides the loads, stores and FMAs: bounds-checked address
    # and predicate arithmetic for every global load (or cp.async) and a fixed part (loop, buffer
    # and fragment pointers, barrier). Read off the SASS loop bodies of the validation kernels
    # (cuobjdump -sass; see README, "Where the numbers come from"), never off their times.
    load_instr_per_warp = (la.instructions + lb.instructions) / W
    other = W * (OTHER_FIXED_PER_WARP_STEP + OTHER_PER_GLOBAL_LOAD * load_instr_per_warp)
    crit = hw.smem_latency_cycles * (1 + barriers) + cfg.bk * FFMA_LATENCY_CYCLES
    step = KStep(loads=(la, lb), smem_stores=stores, smem_loads=smem_loads,
                 compute=Compute(ffma=ffma, other=other, critical_path_cycles=crit, rounds=cfg.bk),
                 barriers=barriers)
    return step, math.ceil(cfg.k / cfg.bk), cfg.bk, 1


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


def _epilogue(cfg: GemmConfig, hw: HardwareSpec) -> Epilogue:
    """C writes (and reads when beta != 0): per-instruction sectors of warp 0, times the warps."""
    e, ws = cfg.elem_bytes, hw.warp_size
    W = _warps(cfg, hw)
    vec = 4 if (cfg.vectorize and cfg.tn % 4 == 0) else 1
    per_lane = [_output_coords(cfg, t) for t in range(min(ws, cfg.threads))]
    n_out = len(per_lane[0])
    sectors = lines = instr = 0
    for i in range(0, n_out, vec):
        addrs = [(pl[i][0] * cfg.n + pl[i][1]) * e for pl in per_lane]
        sectors += global_sectors_and_lines(addrs, vec * e, hw.sector_bytes, 4 * hw.sector_bytes)[0]
        lines += l1_cycles(addrs, vec * e, hw)
        instr += 1
    c_bytes = cfg.bm * cfg.bn * e
    tile = TileRef("C", ("by", "bx"), c_bytes)
    write = GlobalAccess(tile, c_bytes, sectors * W, lines * W, instr * W)
    reads = (GlobalAccess(tile, c_bytes, sectors * W, lines * W, instr * W),) if cfg.beta else ()
    return Epilogue(reads=reads, writes=(write,), instructions=2 * instr * W)
