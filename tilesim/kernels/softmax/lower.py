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

Instruction counts are per warp, read from the SASS of ``softmax.cu`` as the validation runner
builds it: CuPy compiles with ``-ftz=true`` (cupy.cuda.compiler), so ``__expf`` is FADD (x - m),
FMUL (log2 e) and MUFU.EX2 with no range fix-up, and ``__fdividef(1, s)`` is one MUFU.RCP (the
SASS of the 50 suite kernels, recompiled through CuPy on the H200 and dumped with ``cuobjdump
-sass``). Each instruction counts on the pipe that Nsight Compute's ``smsp__inst_executed_pipe_*``
counters put it on (matched opcode by opcode over the 252 softmax and layernorm suite
configurations, ``validation/studies/row_kernels_fidelity.md``):

* "int" (the ALU: 16 lanes per SM sub-partition): IADD3, ISETP, LEA, LOP3, SHF, MOV, CS2R, P2R,
  PLOP3, R2UR, FSETP, FSEL and **FMNMX**;
* "fma" (the FP32 pipe): FADD, FMUL, FFMA and the integer IMAD (all forms) and VIADD;
* "sfu" (XU): MUFU;
* issue slots only (:data:`ISSUE_ONLY_PIPE`): the uniform datapath (UIADD3, UMOV, ULEA, ...),
  branches and convergence (BRA, BSSY, BSYNC, EXIT), constant loads (LDC, ULDC), special
  registers (S2R, S2UR) and the HFMA2.MMA register moves.

Per value: the max pass one FMNMX; ``__expf(x - m)`` two FP32 and one MUFU; the sum adds an FADD,
the write an FMUL by the reciprocal; an online step also takes the running max (one FMNMX per
value) and rescales the running sum once per step (one more exponential; the product fuses into
the first accumulation). Loop bookkeeping per iteration (:data:`LOOP`) is the median over the SASS
loop bodies of each pass and row unit. A guarded tail is entered by every warp that has a lane in
it, and such a warp issues all ``unroll`` vectors of the step, predicated off where their lanes are
past the row's end: their math is issued (and counted), their loads and stores access no memory
(issue slots only).
"""

from __future__ import annotations

from tilesim.kernels.mix import ISSUE_ONLY_PIPE, Mix
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
"""Where instructions that use no modelled pipe go (uniform datapath, branches, constant loads):
an issue-only class once the tile program has one; until then the integer pipe (which they then
over-load by the share they have, 10-20% of its count in these kernels)."""




NONE = Mix()
MAX = Mix(alu=1)  # FMNMX
ADD = Mix(fma=1)  # FADD
MUL = Mix(fma=1)  # FMUL
EXP = Mix(fma=2, sfu=1)  # __expf(x - m) under -ftz=true: FADD, FMUL by log2(e), MUFU.EX2
RCP = Mix(sfu=1)  # __fdividef(1, s) under -ftz=true: MUFU.RCP
ONLINE_VALUE = MAX + EXP + ADD  # the running max, the exponential and its accumulation
ONLINE_STEP = EXP  # the rescale of the running sum (its product fuses into the first FADD: FFMA)
MERGE_LEVEL = Mix(alu=3, fma=7, sfu=2)  # online_merge: FMNMX, 2 FSETP; 2 exponentials, 2 FMUL, FADD
MERGE_CHAIN = (1, 2 + 2, 1)  # (alu, fma, sfu) on one warp's path per level: FMNMX; exp, FMUL, FADD
# loop bookkeeping per warp iteration (pointer and counter updates, compare, branch), the median over
# the SASS loop bodies: (pass, row unit) for float4 loops, (read or write, row unit) for float loops
# (which index with IMAD/VIADD); a loop of unroll 1 keeps one uniform counter (one "other" less)
LOOP = {("max", "warp"): Mix(alu=5, other=3), ("sum", "warp"): Mix(alu=3, other=3),
        ("write", "warp"): Mix(alu=7, other=3), ("online", "warp"): Mix(alu=5, other=3),
        ("max", "block"): Mix(alu=7, fma=1, other=6), ("sum", "block"): Mix(alu=7, other=5),
        ("write", "block"): Mix(alu=11, other=4), ("online", "block"): Mix(alu=8, other=3)}
LOOP_V1 = {("read", "warp"): Mix(alu=3, fma=2, other=3), ("write", "warp"): Mix(alu=5, fma=3, other=3),
           ("read", "thread"): Mix(alu=3.5, fma=2.5, other=1), ("write", "thread"): Mix(alu=6, fma=3, other=1),
           ("read", "block"): Mix(alu=3, fma=2, other=3), ("write", "block"): Mix(alu=5, fma=2, other=3)}
PASS_ENTRY = Mix(alu=4, fma=2, other=3)  # a loop's entry: row pointer (IMAD.WIDE), counters, branch
TAIL_CHECK = Mix(alu=2, other=3)  # the tail's guard (IADD3, ISETP; BSSY, BRA, BSYNC), run by every warp
TAIL_VECTOR = {4: Mix(alu=5, fma=1), 1: Mix(alu=2, fma=1)}  # per vector of an entered tail: index and
# compare; a float4 vector also its own address (SHF, IMAD.WIDE, LEA), float vectors share one
SETUP = Mix(alu=8, other=8)  # thread and row indices, row bounds, parameters (LDC, S2R, ULDC), exit
TREE_LEVEL = {"sequential": Mix(alu=1), "interleaved": Mix(alu=3)}  # per warp and level: the ISETP of
# the level's predicate; the interleaved tree also computes its slot 2*s*t (SHF, LEA)
TREE_ENTRY = Mix(alu=2, other=3)  # the tree's shared-memory base (S2UR, UMOV, ULEA, LEA), PLOP3
BLOCK_MERGE = Mix(alu=4, other=2)  # the block merge's lane-0 test, lane < warps selects, broadcast
REG_GUARD = Mix(alu=1)  # a register-cache chunk that may be past the row: its ISETP
SHUFFLE_LEVELS = 5  # log2(32): butterfly levels of a warp reduction
SECTOR_BYTES = 32  # the L1's fill granularity from L2 (thread_row steps cover one per lane)


def _ops(mix: Mix, *, alu_chain: float = 0, fma_chain: float = 0, sfu_chain: float = 0) -> list:
    """The Compute operations of ``mix`` (zero classes left out)."""
    ops = []
    if mix.fma:
        ops.append(Compute("fma", mix.fma, chain=fma_chain))
    if mix.alu:
        ops.append(Compute("int", mix.alu, chain=alu_chain))
    if mix.sfu:
        ops.append(Compute("sfu", mix.sfu, chain=sfu_chain))
    if mix.other:
        ops.append(Compute(ISSUE_ONLY_PIPE, mix.other))
    return ops


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


def _loop_mix(cfg: SoftmaxConfig, kind: str) -> Mix:
    """Bookkeeping of one loop iteration of a warp in pass ``kind`` (see :data:`LOOP`)."""
    if cfg.vector == 1:
        return LOOP_V1[("write" if kind == "write" else "read", cfg.row_unit)]
    mix = LOOP[(kind, "block" if cfg.row_unit == "block" else "warp")]
    return mix + Mix(other=-1) if cfg.unroll == 1 else mix


def _stream_pass(cfg: SoftmaxConfig, rows: _Rows, kind: str, *, source: str, stage: bool, write: bool,
                 per_value: Mix, per_step: Mix = NONE, fill: bool = False, chains: dict) -> tuple[list[Phase], Mix]:
    """The phases of one pass over the row (main loop, thread_row's rest, tail) and the pass's fixed
    per-warp instructions (loop entry, tail guard: the caller adds them to the setup).

    ``source`` is "global" or "shared"; ``stage`` stores the loaded vectors to shared memory
    (cache = "shared", first pass); ``write`` stores the result to ``y``. ``per_value`` and
    ``per_step`` are the warp instructions per value of a vector and per loop iteration; ``fill``:
    the pass gives a vector past the row's end -inf (one MOV per value). ``chains`` maps "alu",
    "fma", "sfu" to the dependent instructions on one warp's path per step."""
    W, U, V = cfg.warps, cfg.unroll, cfg.vector
    loop = _loop_mix(cfg, kind)
    phases, fixed = [], TAIL_CHECK
    for suffix, trips, vectors, first, uniform in _segments(cfg):
        tail = suffix == " tail"
        in_loop = suffix == ""
        if tail:  # every warp with a lane in the tail issues all U vectors (predicated off past the row)
            entering = [w for w in ([0] if uniform else range(W)) if rows.global_instr(w, 0, first) is not None]
            instrs = [(w, j, a) for w in entering for j in range(U)
                      if (a := rows.global_instr(w, j, first)) is not None]
            repeat = W if uniform else 1
            warps = len(entering) * repeat
            # reading shared memory, the compiler branches around each vector instead (BSSY, BRA, BSYNC):
            # a warp runs only the vectors it has a lane in
            done = len(instrs) * repeat / warps if source == "shared" and warps else U
            per_warp = (per_value * (done * V) + per_step + TAIL_VECTOR[V] * U
                        + (Mix(alu=V * U) if fill else NONE) + (Mix(other=3 * U) if source == "shared" else NONE))
        else:
            instrs, repeat = _per_block(rows, vectors, first, True)
            warps = W
            iterations = vectors // U
            per_warp = per_value * (vectors * V) + (per_step + loop) * iterations
            if in_loop:
                fixed = fixed + PASS_ENTRY
        accesses = tuple(a for _, _, a in instrs)
        real = len(instrs) * repeat  # warp memory instructions per access kind that move data
        issued = warps * (U if tail and source == "global" else vectors) if not tail or source == "global" else real
        kinds = 1 + (1 if stage else 0) + (1 if write else 0)
        mix = per_warp * warps + Mix(other=(issued - real) * kinds)
        compute = _ops(mix, alu_chain=chains.get("alu", 0), fma_chain=chains.get("fma", 0),
                       sfu_chain=chains.get("sfu", 0))
        loads = shared_loads = shared_stores = stores = ()
        if accesses:
            if source == "global":
                loads = (GlobalLoad(_tile(cfg, "x", first, vectors, in_loop), accesses, repeat=repeat),)
            else:
                shared_loads = (SharedAccess(tuple(rows.shared_instr(w, j, a) for w, j, a in instrs),
                                             repeat=repeat),)
            if stage:
                shared_stores = (SharedAccess(tuple(rows.shared_instr(w, j, a) for w, j, a in instrs),
                                              repeat=repeat),)
            if write:
                stores = (GlobalStore(_tile(cfg, "y", first, vectors, in_loop), accesses, repeat=repeat),)
        step = Step(loads=loads, shared_stores=shared_stores, shared_loads=shared_loads, compute=tuple(compute),
                    stores=stores)
        phases.append(Phase(f"{kind}{suffix}", trips, step, warp_groups=W))
    return phases, fixed


def _compute_phase(name: str, warps: int, mix: Mix, *, shuffles: float = 0, alu_chain: float = 0,
                   fma_chain: float = 0, sfu_chain: float = 0, shuffle_chain: float = 0) -> Phase:
    """A one-step, barrier-free phase of per-warp math (``mix`` and ``shuffles`` per warp, times ``warps``)."""
    ops = _ops(mix * warps, alu_chain=alu_chain, fma_chain=fma_chain, sfu_chain=sfu_chain)
    if shuffles:
        ops.append(Shuffle(shuffles * warps, chain=shuffle_chain))
    return Phase(name, 1, Step(compute=tuple(ops)), warp_groups=warps)


# ---- reductions -------------------------------------------------------------------------------------
def _tree_phases(cfg: SoftmaxConfig, name: str, base_b: int, op: Mix, finish: Mix) -> list[Phase]:
    """The shared-memory tree of ``block_tree``: every thread posts its value, one barrier per
    level, every thread reads the root; one phase per level. A step stores first and loads after
    its barrier, so level L's result store opens step L+1. ``op`` is one combine (FMNMX or FADD),
    ``finish`` what follows the root's load.

    The compiler predicates the levels (no branch): every warp issues each level's loads, its
    combine and its store, the lanes outside the active range switched off (an instruction with
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

    chain = {"alu_chain": 1} if op.alu else {"fma_chain": 1}
    post = SharedAccess((_access([base_b + lane * ELEM_BYTES for lane in range(WARP_THREADS)], ELEM_BYTES),), repeat=W)
    phases = []
    prev_store = post  # step 0 stores every thread's value
    for level, s in enumerate(strides):
        pair = not sequential and s == 1
        loads = per_warp(s, 0, 2 * ELEM_BYTES) if pair else per_warp(s, 0) + per_warp(s, s)
        extra = TREE_ENTRY if level == 0 else NONE
        step = Step(shared_stores=(prev_store,), barriers=1, shared_loads=(SharedAccess(loads),),
                    compute=tuple(_ops((op + TREE_LEVEL[cfg.tree] + extra) * W, **chain)))
        phases.append(Phase(f"{name} tree {level + 1}", 1, step))
        prev_store = SharedAccess(per_warp(s, 0))
    root = SharedAccess((_access([base_b] * WARP_THREADS, ELEM_BYTES),), repeat=W)
    step = Step(shared_stores=(prev_store,), barriers=1, shared_loads=(root,),
                compute=tuple(_ops(finish * W, sfu_chain=finish.sfu)))
    phases.append(Phase(f"{name} tree root", 1, step))
    return phases


def _reduce(cfg: SoftmaxConfig, name: str, op: Mix, combine: int, tree_base_b: int, *, reciprocal: bool) -> list[Phase]:
    """Combine a thread's partial values (``combine`` times ``op``: FMNMX or FADD), reduce over
    the row's threads and, for the sum, take the reciprocal."""
    W = cfg.warps
    rcp = RCP if reciprocal else NONE
    chain = "alu_chain" if op.alu else "fma_chain"
    unit = cfg.row_unit
    if unit == "block":  # block_tree: combine, then the shared-memory tree
        phases = [_compute_phase(f"{name} combine", W, op * combine, **{chain: combine})] if combine else []
        root = rcp if reciprocal else Mix(alu=1, other=1)  # the sum's MUFU.RCP; the max's R2UR, UMOV
        return phases + _tree_phases(cfg, name, tree_base_b, op, root)
    levels = SHUFFLE_LEVELS if unit == "warp" else 0
    return [_compute_phase(name, W, op * (combine + levels) + rcp, shuffles=levels,
                           **{chain: combine + levels}, sfu_chain=rcp.sfu, shuffle_chain=levels)]


def _merge_phase(name: str, warps: int, levels: int, extra: Mix = NONE, shuffles: float = 0) -> Phase:
    a, f, u = MERGE_CHAIN
    return _compute_phase(name, warps, MERGE_LEVEL * levels + extra, shuffles=2 * levels + shuffles,
                          alu_chain=a * levels, fma_chain=f * levels, sfu_chain=u * levels, shuffle_chain=levels)


def _online_merge(cfg: SoftmaxConfig) -> list[Phase]:
    """Merge the threads' (max, sum) states: warp butterfly (2 shuffles and a merge per level);
    block unit: lane 0 of each warp posts its state, one barrier, every warp merges the warps'
    states in log2(warps) levels and broadcasts; then the reciprocal."""
    W = cfg.warps
    L = SHUFFLE_LEVELS
    warp = _merge_phase("merge warp", W, L)
    if cfg.row_unit == "warp" or W == 1:
        return [warp, _compute_phase("reciprocal", W, RCP, sfu_chain=1)]
    lw = (W - 1).bit_length()  # log2(W) levels
    red_m, red_s = 0, W * ELEM_BYTES
    post = SharedAccess(tuple(_access([base + w * ELEM_BYTES] + [None] * (WARP_THREADS - 1), ELEM_BYTES)
                              for base in (red_m, red_s) for w in range(W)))
    read = SharedAccess(tuple(_access([base + lane * ELEM_BYTES if lane < W else None for lane in range(WARP_THREADS)],
                                      ELEM_BYTES) for base in (red_m, red_s)), repeat=W)
    a, f, u = MERGE_CHAIN
    mix = (MERGE_LEVEL * lw + RCP + BLOCK_MERGE) * W
    ops = (*_ops(mix, alu_chain=a * lw, fma_chain=f * lw, sfu_chain=u * lw + 1), Shuffle((2 * lw + 2) * W, chain=lw + 1))
    block = Phase("merge block", 1, Step(shared_stores=(post,), barriers=1, shared_loads=(read,), compute=ops))
    return [warp, block]


# ---- the variants -----------------------------------------------------------------------------------
def _setup(cfg: SoftmaxConfig, fixed: Mix) -> Phase:
    return _compute_phase("setup", cfg.warps, SETUP + fixed)


def _classic_streaming(cfg: SoftmaxConfig, rows: _Rows) -> list[Phase]:
    e = cfg.unroll * cfg.vector
    shared = cfg.cache == "shared"
    src2 = "shared" if shared else "global"
    red_max_b, red_sum_b = 0, cfg.threads * ELEM_BYTES
    fixed = Mix(alu=e) + Mix(alu=e / 2)  # the accumulators' start: -inf (MOV), 0 (CS2R, two at a time)
    p_max, f1 = _stream_pass(cfg, rows, "max", source="global", stage=shared, write=False, per_value=MAX, fill=True,
                             chains={"alu": 1})
    p_sum, f2 = _stream_pass(cfg, rows, "sum", source=src2, stage=False, write=False, per_value=EXP + ADD,
                             chains={"fma": EXP.fma + 1, "sfu": 1})
    p_write, f3 = _stream_pass(cfg, rows, "write", source=src2, stage=False, write=True, per_value=EXP + MUL,
                               chains={"fma": EXP.fma + 1, "sfu": 1})
    return [_setup(cfg, fixed + f1 + f2 + f3), *p_max, *_reduce(cfg, "reduce max", MAX, e - 1, red_max_b, reciprocal=False),
            *p_sum, *_reduce(cfg, "reduce sum", ADD, e, red_sum_b, reciprocal=True), *p_write]


def _online_streaming(cfg: SoftmaxConfig, rows: _Rows) -> list[Phase]:
    e = cfg.unroll * cfg.vector
    shared = cfg.cache == "shared"
    p_on, f1 = _stream_pass(cfg, rows, "online", source="global", stage=shared, write=False, per_value=ONLINE_VALUE,
                            per_step=ONLINE_STEP, fill=True, chains={"alu": e, "fma": EXP.fma + e, "sfu": 2})
    p_write, f2 = _stream_pass(cfg, rows, "write", source="shared" if shared else "global", stage=False, write=True,
                               per_value=EXP + MUL, chains={"fma": EXP.fma + 1, "sfu": 1})
    return [_setup(cfg, f1 + f2), *p_on, *_online_merge(cfg), *p_write]


def _registers(cfg: SoftmaxConfig, rows: _Rows) -> list[Phase]:
    """cache = "registers": the slice is loaded at once (``chunks`` loads per thread), reduced and
    written from registers; a value is exponentiated once (classic: the exponentials are kept) or
    twice (online: once for the sum, once for the output). A chunk that may lie past the row's end
    is guarded (its ISETP; its lanes past the end load -inf: one MOV per value, and warps whose
    lanes are all past it still issue the load and the store, predicated off)."""
    W, V, G = cfg.warps, cfg.vector, cfg.threads_per_row
    held = cfg.chunks * V
    instrs, repeat = _per_block(rows, cfg.chunks, 0, cfg.row_unit != "block")
    accesses = tuple(a for _, _, a in instrs)
    predicated_off = cfg.chunks * W - len(instrs) * repeat  # load (and store) instructions moving no data
    tile_x = TileRef("x", ("bx", "k"), cfg.rows_per_block * cfg.cols * ELEM_BYTES)
    tile_y = TileRef("y", ("bx", "k"), cfg.rows_per_block * cfg.cols * ELEM_BYTES)
    guarded = sum(1 for c in range(cfg.chunks) if (c + 1) * G > cfg.nvec)  # chunks with a bound check
    online = cfg.variant == "online"
    max_ops = held if online else held - 1  # online starts from -inf; classic from the first value
    load_mix = (SETUP + (REG_GUARD + Mix(alu=V)) * guarded + MAX * max_ops) * W + Mix(other=predicated_off)
    load = Phase("load", 1, Step(loads=(GlobalLoad(tile_x, accesses, repeat=repeat),),
                                 compute=tuple(_ops(load_mix, alu_chain=cfg.chunks))), warp_groups=W)
    exp_sum = _compute_phase("exp sum", W, (EXP + ADD) * held + (Mix(other=2) if online else NONE),
                             fma_chain=cfg.chunks + EXP.fma, sfu_chain=1)
    write_mix = ((EXP + MUL) * held if online else MUL * held) + REG_GUARD * guarded
    write_ops = _ops(write_mix * W + Mix(other=predicated_off), fma_chain=EXP.fma + 1 if online else 1,
                     sfu_chain=1 if online else 0)
    write = Phase("write", 1, Step(compute=tuple(write_ops), stores=(GlobalStore(tile_y, accesses, repeat=repeat),)),
                  warp_groups=W)
    if online:
        return [load, exp_sum, *_online_merge(cfg), write]
    red_max_b, red_sum_b = 0, cfg.threads * ELEM_BYTES
    return [load, *_reduce(cfg, "reduce max", MAX, 0, red_max_b, reciprocal=False), exp_sum,
            *_reduce(cfg, "reduce sum", ADD, V - 1, red_sum_b, reciprocal=True), write]


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
