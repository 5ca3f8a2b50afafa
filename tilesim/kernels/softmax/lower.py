"""The softmax family lowered to a tile program: what every block of ``softmax.cu`` does.

One kernel launch. Phases, in order (each pass over the row is a loop phase of ``trips`` steps,
followed by a one-step tail phase when the row has a partial last step):

* classic (thread_row, warp_shuffle, block_tree): ``setup``, ``max`` pass, max reduction, ``sum``
  pass (sum of exponentials), sum reduction (and the reciprocal), ``write`` pass;
* online: ``setup``, ``online`` pass (max and sum together), merge of the (max, sum) states,
  ``write`` pass;
* cache = "registers": the passes are one-step phases (``load``, ``exp``, ``write``) working on
  the thread's slice of the row held in registers.

Data: tensor ``x`` (input) and ``y`` (output). A block's step touches the tile of its rows
(``rows_per_block`` of them) and of the step's columns: coordinates ``("bx", "k")``, the same in
every pass, so that the re-reads of cache = "none" name the tiles the first pass read and the L2
model can serve them; a tail step's tile is ``("bx", main_trips)``. Lane offsets are bytes from the
tile's origin (row stride ``cols * 4``); warps doing the same pattern on other rows or columns are
given once with ``repeat = warps``; the warps of a block-per-row tail, whose lanes differ, are
listed one by one. The last block of a ragged row count is described as a full one (the program
has one kind of block): it over-counts at most ``rows_per_block - 1`` rows.

thread_row: each lane reads its own row, ``unroll * vector * 4`` bytes per loop iteration; a step
groups enough iterations to cover a 32-byte sector of each lane's row (the L1 keeps the sector for
the next iterations: the engine merges sectors within a step only). An assumption to check against
Nsight Compute's L2 traffic.

Instruction counts are per warp, read from the SASS of ``softmax.cu`` (nvcc 13.0, ``-arch=sm_90``,
``cuobjdump -sass``, the 50 distinct kernels of the suite). Per value of a loop step (``e = unroll
* vector`` values per thread): the max pass one FMNMX; ``__expf(x - m)`` is FADD, FMUL by log2(e),
FSETP and two predicated FMUL (the ex2.approx range fix-up) around one MUFU.EX2; the sum adds an
FADD, the write an FMUL by the reciprocal; an online step also takes the running max (one FMNMX
per value) and rescales the running sum once (one more exponential). Loop bookkeeping (pointer
increments, counter, compare, branch) is 6..9 integer instructions per step for the warp and
thread units and 11..16 for the block unit (the SASS ranges; :data:`LOOP_INT` is their middle).
FSETP/FSEL and every address or loop instruction count on the "int" pipe, FADD/FMUL/FMNMX on
"fma", MUFU on "sfu".
"""

from __future__ import annotations

from tilesim.kernels.softmax.config import ELEM_BYTES, WARP_THREADS, SoftmaxConfig
from tilesim.program import (
    Compute,
    GlobalLoad,
    GlobalStore,
    Launch,
    Phase,
    SharedAccess,
    Shuffle,
    Step,
    TileProgram,
    TileRef,
    WarpAccess,
)

# ---- per-warp instruction counts from the SASS (see the module docstring) -------------------------
EXP_FMA = 4  # __expf(x - m): FADD, FMUL (log2 e), two predicated FMUL (range fix-up)
EXP_INT = 1  # FSETP of the range fix-up
EXP_SFU = 1  # MUFU.EX2
RCP_FMA, RCP_INT, RCP_SFU = 2, 2, 1  # __fdividef(1, s): FSETP, FSEL, @FMUL, MUFU.RCP, FMUL
MERGE_FMA = 1 + 2 * EXP_FMA + 3  # online_merge: FMNMX, two exponentials, two FMUL, one FADD
MERGE_INT = 2 + 2 * EXP_INT + 2  # two FSETP (m == mn), the exponentials' FSETP, two FSEL
MERGE_SFU = 2 * EXP_SFU
MERGE_CHAIN_FMA = 1 + EXP_FMA + 2  # FMNMX, one exponential, FMUL, FADD on one warp's path
LOOP_INT = 9  # loop bookkeeping per step (SASS: 6..9 warp/thread unit, 11..16 block unit)
STORE_INT = 3  # a writing step's output pointer increments (SASS: 2..5)
TAIL_INT_PER_VECTOR = 10  # a guarded tail vector: bound check, predicate, address (SASS: 8..14)
SETUP_INT = 20  # thread and row indices, row pointers, constants, accumulator initialisation
SHUFFLE_LEVELS = 5  # log2(32): butterfly levels of a warp reduction
TREE_LEVEL_INT = 1  # per warp and tree level: the ISETP of the next level's predicate
SECTOR_BYTES = 32  # the L1's fill granularity from L2 (thread_row steps cover one per lane)


def _access(offsets, width: int) -> WarpAccess:
    return WarpAccess(tuple(offsets), width)


class _Rows:
    """Where a block's threads find their vectors: lane offsets of one warp instruction."""

    def __init__(self, cfg: SoftmaxConfig) -> None:
        self.cfg = cfg
        self.unit = cfg.row_unit
        self.G = cfg.threads_per_row
        self.W = cfg.warps
        self.V = cfg.vector
        self.vb = cfg.vector * ELEM_BYTES  # bytes per vector
        self.row_b = cfg.cols * ELEM_BYTES
        self.nvec = cfg.nvec

    def global_instr(self, warp: int, j: int, base_vec: int) -> WarpAccess | None:
        """Warp ``warp``'s load or store of the thread's ``j``-th vector of a step whose first
        column vector is ``base_vec`` (offsets from the step tile's origin); None when no lane is
        in the row."""
        offs = []
        for lane in range(WARP_THREADS):
            t = warp * WARP_THREADS + lane
            if self.unit == "thread":
                c, row = j, t
            elif self.unit == "warp":
                c, row = j * WARP_THREADS + lane, warp
            else:
                c, row = j * self.G + t, 0
            ok = base_vec + c < self.nvec
            offs.append(row * self.row_b + c * self.vb if ok else None)
        if all(o is None for o in offs):
            return None
        return _access(offs, self.vb)

    def shared_instr(self, warp: int, j: int, like: WarpAccess) -> WarpAccess:
        """Where warp ``warp``'s ``j``-th vector lives in the staged row (cache = "shared"), for
        the lanes active in ``like``: consecutive lanes on consecutive vectors in every layout
        (thread_row interleaves the block's rows vector by vector)."""
        offs = []
        for lane, g in enumerate(like.offsets):
            t = warp * WARP_THREADS + lane
            if self.unit == "warp":
                a = warp * self.row_b + (j * WARP_THREADS + lane) * self.vb
            else:
                a = (j * self.cfg.threads + t) * self.vb
            offs.append(None if g is None else a)
        return _access(offs, self.vb)


def _per_block(rows: _Rows, vectors: int, base_vec: int, uniform: bool):
    """The warp instructions of one step (``vectors`` per thread): a list of (warp, j, access) and
    the repeat factor (warps when every warp does the same, else 1 with every warp listed)."""
    warps = [0] if uniform else range(rows.W)
    out = []
    for w in warps:
        for j in range(vectors):
            a = rows.global_instr(w, j, base_vec)
            if a is not None:
                out.append((w, j, a))
    return out, (rows.W if uniform else 1)


def _segments(cfg: SoftmaxConfig) -> list[tuple[str, int, int, int, bool]]:
    """The loop pieces of one streaming pass: (suffix, trips, vectors per thread per step, first
    vector of the piece, uniform across warps)."""
    G, U = cfg.threads_per_row, cfg.unroll
    full = cfg.nvec // (G * U)  # full steps of the kernel's loop
    per_iter = U * cfg.vector * ELEM_BYTES
    group = 1
    if cfg.row_unit == "thread":  # one lane per row: cover a sector per step (module docstring)
        group = max(1, -(-SECTOR_BYTES // per_iter))
    segs = []
    main, rest = divmod(full, group)
    if main:
        segs.append(("", main, group * U, 0, True))
    if rest:
        segs.append((" rest", 1, rest * U, main * group * G * U, True))
    done = full * G * U
    if done < cfg.nvec:
        segs.append((" tail", 1, U, done, cfg.row_unit != "block"))
    return segs


def _tile(cfg: SoftmaxConfig, tensor: str, first_vec: int, vectors: int, in_loop: bool) -> TileRef:
    """The block's tile of one step: its rows times the step's columns; the loop's tiles are
    ``("bx", "k")``, a one-step piece's ``("bx", first_vec)``."""
    cols = min(vectors * cfg.threads_per_row, cfg.nvec - first_vec) * cfg.vector
    return TileRef(tensor, ("bx", "k" if in_loop else first_vec), cfg.rows_per_block * cols * ELEM_BYTES)


def _stream_pass(cfg: SoftmaxConfig, rows: _Rows, name: str, *, source: str, stage: bool, write: bool,
                 per_value: tuple[int, int, int], per_step: tuple[int, int, int] = (0, 0, 0),
                 fma_chain: float, sfu_chain: float) -> list[Phase]:
    """The phases of one pass over the row (main loop, thread_row's rest, tail).

    ``source`` is "global" or "shared"; ``stage`` stores the loaded vectors to shared memory
    (cache = "shared", first pass); ``write`` stores the result to ``y``. ``per_value`` and
    ``per_step`` are (fma, sfu, int) warp instructions per value of a vector and per loop
    iteration of a warp."""
    phases = []
    for suffix, trips, vectors, first, uniform in _segments(cfg):
        instrs, repeat = _per_block(rows, vectors, first, uniform)
        tail = suffix == " tail"
        accesses = tuple(a for _, _, a in instrs)
        n_instr = len(instrs) * repeat  # the block's warp instructions per access kind
        warps = len({w for w, _, _ in instrs}) * repeat  # warps with work in this piece
        iterations = warps * (1 if tail else vectors // cfg.unroll)  # warp loop iterations per step
        bookkeeping = (TAIL_INT_PER_VECTOR * n_instr if tail
                       else (LOOP_INT + (STORE_INT if write else 0)) * iterations)
        fma, sfu, int_ = (n_instr * cfg.vector * v + iterations * p for v, p in zip(per_value, per_step, strict=True))
        compute = [Compute("fma", fma, chain=fma_chain), Compute("int", int_ + bookkeeping)]
        if sfu:
            compute.append(Compute("sfu", sfu, chain=sfu_chain))
        in_loop = suffix == ""
        loads = shared_loads = shared_stores = stores = ()
        if source == "global":
            loads = (GlobalLoad(_tile(cfg, "x", first, vectors, in_loop), accesses, repeat=repeat),)
        else:
            shared_loads = (SharedAccess(tuple(rows.shared_instr(w, j, a) for w, j, a in instrs), repeat=repeat),)
        if stage:
            shared_stores = (SharedAccess(tuple(rows.shared_instr(w, j, a) for w, j, a in instrs), repeat=repeat),)
        if write:
            stores = (GlobalStore(_tile(cfg, "y", first, vectors, in_loop), accesses, repeat=repeat),)
        step = Step(loads=loads, shared_stores=shared_stores, shared_loads=shared_loads, compute=tuple(compute),
                    stores=stores)
        phases.append(Phase(f"{name}{suffix}", trips, step, warp_groups=rows.W))
    return phases


def _compute_phase(name: str, warps: int, *, fma: float = 0, sfu: float = 0, int_: float = 0, shuffles: float = 0,
                   fma_chain: float = 0, sfu_chain: float = 0, shuffle_chain: float = 0) -> Phase:
    """A one-step, barrier-free phase of per-warp math (counts per warp, times ``warps``)."""
    ops = []
    if fma:
        ops.append(Compute("fma", fma * warps, chain=fma_chain))
    if sfu:
        ops.append(Compute("sfu", sfu * warps, chain=sfu_chain))
    if int_:
        ops.append(Compute("int", int_ * warps))
    if shuffles:
        ops.append(Shuffle(shuffles * warps, chain=shuffle_chain))
    return Phase(name, 1, Step(compute=tuple(ops)), warp_groups=warps)


# ---- reductions -------------------------------------------------------------------------------------
def _tree_phases(cfg: SoftmaxConfig, name: str, base_b: int, finish: dict) -> list[Phase]:
    """The shared-memory tree of ``block_tree``: every thread posts its value, one barrier per
    level, every thread reads the root; one phase per level. A step stores first and loads after
    its barrier, so level L's result store opens step L+1. ``finish`` adds math to the last step.

    The compiler predicates the levels (no branch): every warp issues each level's loads, its
    FMNMX/FADD and its store, the lanes outside the active range switched off (an instruction with
    no active lane is issued but moves no data). The interleaved tree's first level (stride 1)
    reads ``red[2t]`` and ``red[2t + 1]`` with one 8-byte load (LDS.64 in the SASS)."""
    T, W = cfg.threads, cfg.warps
    sequential = cfg.tree == "sequential"
    strides = []
    s = T // 2 if sequential else 1
    while (s > 0) if sequential else (s < T):
        strides.append(s)
        s = s // 2 if sequential else s * 2

    def slot(t: int, s: int) -> int | None:  # the slot thread t updates at stride s (None: idle)
        if sequential:
            return t if t < s else None
        i = 2 * s * t
        return i if i < T else None

    def per_warp(s: int, extra: int, width: int = ELEM_BYTES) -> tuple[WarpAccess, ...]:
        out = []
        for w in range(W):
            offs = []
            for lane in range(WARP_THREADS):
                i = slot(w * WARP_THREADS + lane, s)
                offs.append(None if i is None else base_b + (i + extra) * ELEM_BYTES)
            out.append(_access(offs, width))
        return tuple(out)

    post = SharedAccess((_access([base_b + lane * ELEM_BYTES for lane in range(WARP_THREADS)], ELEM_BYTES),), repeat=W)
    phases = []
    prev_store = post  # step 0 stores every thread's value
    for level, s in enumerate(strides):
        pair = not sequential and s == 1
        loads = per_warp(s, 0, 2 * ELEM_BYTES) if pair else per_warp(s, 0) + per_warp(s, s)
        step = Step(shared_stores=(prev_store,), barriers=1, shared_loads=(SharedAccess(loads),),
                    compute=(Compute("fma", W, chain=1), Compute("int", TREE_LEVEL_INT * W)))
        phases.append(Phase(f"{name} tree {level + 1}", 1, step))
        prev_store = SharedAccess(per_warp(s, 0))
    root = SharedAccess((_access([base_b] * WARP_THREADS, ELEM_BYTES),), repeat=W)
    ops = [Compute(pipe, finish[pipe] * W, chain=finish[pipe] if pipe != "int" else 0)
           for pipe in ("fma", "sfu", "int") if finish.get(pipe)]
    step = Step(shared_stores=(prev_store,), barriers=1, shared_loads=(root,), compute=tuple(ops))
    phases.append(Phase(f"{name} tree root", 1, step))
    return phases


def _reduce(cfg: SoftmaxConfig, name: str, combine: int, tree_base_b: int, *, reciprocal: bool) -> list[Phase]:
    """Combine a thread's partial values (``combine`` instructions), reduce over the row's threads
    and, for the sum, take the reciprocal."""
    W = cfg.warps
    rcp = {"fma": RCP_FMA, "int": RCP_INT, "sfu": RCP_SFU} if reciprocal else {}
    unit = cfg.row_unit
    if unit == "block":  # block_tree: combine, then the shared-memory tree
        phases = [_compute_phase(f"{name} combine", W, fma=combine, fma_chain=combine)] if combine else []
        return phases + _tree_phases(cfg, name, tree_base_b, rcp)
    levels = SHUFFLE_LEVELS if unit == "warp" else 0
    return [_compute_phase(name, W, fma=combine + levels + rcp.get("fma", 0), sfu=rcp.get("sfu", 0),
                           int_=rcp.get("int", 0), shuffles=levels, fma_chain=combine + levels + rcp.get("fma", 0),
                           sfu_chain=rcp.get("sfu", 0), shuffle_chain=levels)]


def _online_merge(cfg: SoftmaxConfig) -> list[Phase]:
    """Merge the threads' (max, sum) states: warp butterfly (2 shuffles and a merge per level);
    block unit: lane 0 of each warp posts its state, one barrier, every warp merges the warps'
    states in log2(warps) levels and broadcasts; then the reciprocal."""
    W = cfg.warps
    L = SHUFFLE_LEVELS
    warp = _compute_phase("merge warp", W, fma=L * MERGE_FMA, sfu=L * MERGE_SFU, int_=L * MERGE_INT,
                          shuffles=2 * L, fma_chain=L * MERGE_CHAIN_FMA, sfu_chain=L, shuffle_chain=L)
    if cfg.row_unit == "warp" or W == 1:
        return [warp, _compute_phase("reciprocal", W, fma=RCP_FMA, sfu=RCP_SFU, int_=RCP_INT,
                                     fma_chain=RCP_FMA, sfu_chain=1)]
    lw = (W - 1).bit_length()  # log2(W) levels
    red_m, red_s = 0, W * ELEM_BYTES
    post = SharedAccess(tuple(_access([base + w * ELEM_BYTES] + [None] * (WARP_THREADS - 1), ELEM_BYTES)
                              for base in (red_m, red_s) for w in range(W)))
    read = SharedAccess(tuple(_access([base + lane * ELEM_BYTES if lane < W else None for lane in range(WARP_THREADS)],
                                      ELEM_BYTES) for base in (red_m, red_s)), repeat=W)
    fma = lw * MERGE_FMA + RCP_FMA
    ops = (Compute("fma", fma * W, chain=lw * MERGE_CHAIN_FMA + RCP_FMA),
           Compute("sfu", (lw * MERGE_SFU + RCP_SFU) * W, chain=lw + 1),
           Compute("int", (lw * MERGE_INT + RCP_INT + 2) * W),
           Shuffle((2 * lw + 2) * W, chain=lw + 1))
    block = Phase("merge block", 1, Step(shared_stores=(post,), barriers=1, shared_loads=(read,), compute=ops))
    return [warp, block]


# ---- the variants -----------------------------------------------------------------------------------
def _classic_streaming(cfg: SoftmaxConfig, rows: _Rows) -> list[Phase]:
    e = cfg.unroll * cfg.vector
    shared = cfg.cache == "shared"
    src2 = "shared" if shared else "global"
    red_max_b, red_sum_b = 0, cfg.threads * ELEM_BYTES
    phases = [_compute_phase("setup", cfg.warps, int_=SETUP_INT)]
    phases += _stream_pass(cfg, rows, "max", source="global", stage=shared, write=False,
                           per_value=(1, 0, 0), fma_chain=1, sfu_chain=0)
    phases += _reduce(cfg, "reduce max", e - 1, red_max_b, reciprocal=False)
    phases += _stream_pass(cfg, rows, "sum", source=src2, stage=False, write=False,
                           per_value=(EXP_FMA + 1, EXP_SFU, EXP_INT), fma_chain=EXP_FMA + 1, sfu_chain=EXP_SFU)
    phases += _reduce(cfg, "reduce sum", e, red_sum_b, reciprocal=True)
    phases += _stream_pass(cfg, rows, "write", source=src2, stage=False, write=True,
                           per_value=(EXP_FMA + 1, EXP_SFU, EXP_INT), fma_chain=EXP_FMA + 1, sfu_chain=EXP_SFU)
    return phases


def _online_streaming(cfg: SoftmaxConfig, rows: _Rows) -> list[Phase]:
    e = cfg.unroll * cfg.vector
    shared = cfg.cache == "shared"
    phases = [_compute_phase("setup", cfg.warps, int_=SETUP_INT)]
    phases += _stream_pass(cfg, rows, "online", source="global", stage=shared, write=False,
                           per_value=(EXP_FMA + 2, EXP_SFU, EXP_INT), per_step=(EXP_FMA, EXP_SFU, EXP_INT),
                           fma_chain=2 * e + EXP_FMA + 1, sfu_chain=2)
    phases += _online_merge(cfg)
    phases += _stream_pass(cfg, rows, "write", source="shared" if shared else "global", stage=False, write=True,
                           per_value=(EXP_FMA + 1, EXP_SFU, EXP_INT), fma_chain=EXP_FMA + 1, sfu_chain=EXP_SFU)
    return phases


def _registers(cfg: SoftmaxConfig, rows: _Rows) -> list[Phase]:
    """cache = "registers": the slice is loaded at once (``chunks`` loads per thread), reduced and
    written from registers; a value is exponentiated once (classic: the exponentials are kept) or
    twice (online: once for the sum, once for the output)."""
    W, V, G = cfg.warps, cfg.vector, cfg.threads_per_row
    held = cfg.chunks * V
    instrs, repeat = _per_block(rows, cfg.chunks, 0, cfg.row_unit != "block")
    accesses = tuple(a for _, _, a in instrs)
    tile_x = TileRef("x", ("bx", "k"), cfg.rows_per_block * cfg.cols * ELEM_BYTES)
    tile_y = TileRef("y", ("bx", "k"), cfg.rows_per_block * cfg.cols * ELEM_BYTES)
    guarded = sum(1 for c in range(cfg.chunks) if (c + 1) * G > cfg.nvec)  # chunks with a bound check
    addr_int = TAIL_INT_PER_VECTOR * guarded  # the others address by immediate offsets (no instruction)
    online = cfg.variant == "online"
    max_fma = held if online else held - V  # online starts from -inf; classic from the first chunk
    load = Phase("load", 1, Step(
        loads=(GlobalLoad(tile_x, accesses, repeat=repeat),),
        compute=(Compute("fma", max_fma * W, chain=cfg.chunks), Compute("int", (SETUP_INT + addr_int) * W))),
        warp_groups=W)
    exp_sum = _compute_phase("exp sum", W, fma=held * (EXP_FMA + 1), sfu=held * EXP_SFU,
                             int_=held * EXP_INT + (2 if online else 0), fma_chain=cfg.chunks + EXP_FMA,
                             sfu_chain=1)
    if online:
        write_ops = (Compute("fma", held * (EXP_FMA + 1) * W, chain=EXP_FMA + 1),
                     Compute("sfu", held * EXP_SFU * W, chain=1),
                     Compute("int", (held * EXP_INT + addr_int) * W))
    else:
        write_ops = (Compute("fma", held * W, chain=1), Compute("int", addr_int * W))
    write = Phase("write", 1, Step(compute=write_ops, stores=(GlobalStore(tile_y, accesses, repeat=repeat),)),
                  warp_groups=W)
    if online:
        return [load, exp_sum, *_online_merge(cfg), write]
    red_max_b, red_sum_b = 0, cfg.threads * ELEM_BYTES
    return [load, *_reduce(cfg, "reduce max", V - 1, red_max_b, reciprocal=False), exp_sum,
            *_reduce(cfg, "reduce sum", V - 1, red_sum_b, reciprocal=True), write]


def lower(cfg: SoftmaxConfig) -> TileProgram:
    """The tile program of ``cfg`` (see the module docstring)."""
    if not isinstance(cfg, SoftmaxConfig):
        raise ValueError(f"cfg must be a SoftmaxConfig, got {type(cfg).__name__}")
    rows = _Rows(cfg)
    if cfg.cache == "registers":
        phases = _registers(cfg, rows)
    elif cfg.variant == "online":
        phases = _online_streaming(cfg, rows)
    else:
        phases = _classic_streaming(cfg, rows)
    launch = Launch(grid=cfg.grid, threads_per_block=cfg.threads, regs_per_thread=cfg.estimated_regs,
                    smem_bytes_per_block=cfg.smem_bytes)
    return TileProgram(name=f"softmax {cfg.label} {cfg.rows}x{cfg.cols}", launch=launch, phases=tuple(phases),
                       flops=cfg.flops, min_hbm_bytes=cfg.min_hbm_bytes)
