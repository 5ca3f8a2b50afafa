"""The tensor-core GEMM family's lowering: a :class:`TcGemmConfig` as a :class:`TileProgram`: one k-loop
phase and an epilogue phase.

What one block does per k-step, by rung (the thread-to-data mappings are the CUDA kernels' in
``validation/families/tc_gemm``):

* **wmma from global memory** (``staging="global"``): a k-step is one fragment's k (16, or 8 for
  tf32). Every warp loads its A and B fragments with ``load_matrix_sync`` straight from global
  memory, four 4-byte loads per lane and fragment (the mma.sync register layout: rows ``g`` and
  ``g + 8`` of the fragment, two elements per lane), then issues its MMAs. No barriers: warps progress
  independently; the block's L1 merges the sectors its warps share within a step.
* **staged** (wmma or mma_sync with ``staging="shared"``): a k-step is one ``bk`` slab. The block
  copies the bm x bk A tile and the B tile in 16-byte chunks (through registers when ``stages`` is 1,
  by cp.async into a ``stages``-deep ring otherwise) into the shared layout: dense rows, rows padded
  by 16 bytes, or 16-byte chunks XOR-swizzled by row. Each k-slice of the slab, every warp loads its
  fragments with ``ldmatrix.x4`` (8 lanes address the 8 rows of each 8x8 matrix, 16 bytes each; B
  row-major with ``.trans``) and issues its MMAs; tf32 mma.sync loads A, and a K-contiguous B, with
  ``ldmatrix.x4`` too (16 rows of 8 tf32), a row-major B and wmma's tf32 fragments with 4-byte shared
  loads in the m16n8k8 register layout, and rounds every fragment register to tf32. The engine's
  bank arithmetic finds the conflicts of each layout from these addresses.
* **wgmma** (Hopper): a k-step is one ``bk`` slab brought into a ``stages``-deep ring by two TMA bulk
  tensor copies (``dest="bulk"``; with a cluster, each block fetches ``1/cluster`` of the B tile and
  receives the rest by multicast). Each consumer warpgroup issues ``wm/64 x wn/N x bk/K`` wgmma
  instructions that read A and B from shared memory (``Mma.operands="shared"``); the ring replaces
  block-wide barriers with mbarrier waits. With ``stages=1`` (one buffer, no producer warpgroup) the
  k-step's copies are issued and waited for within the step (``pipeline_depth`` 1: no copy ahead):
  thread 0 issues them, every thread waits on the buffer's mbarrier (the measured TMA latency is issue
  to mbarrier completion), the consumers issue their wgmmas, wait for all of them (``wait_group 0``)
  and pass one block barrier (``__syncthreads``) before the next copy overwrites the buffer. Loads and
  math alternate within the block; other resident blocks overlap them.

Epilogue: ``direct`` stores each lane's two adjacent accumulators per row of every 16x8 C fragment
(8-byte fp32 or 4-byte 16-bit stores, rows ``g`` and ``g + 8``); ``shared`` writes them to shared memory,
passes a barrier and stores 16-byte chunks of whole rows.

Instruction counts that are not memory or MMA (addresses, loop, waits) are named below: traced from
the suite's SASS where stated (rung 1, register-staged copies, tf32 rounding and addresses), structural
assumptions otherwise; the compile path (``--compile``) can replace the register count with the compiler's.
Edge blocks are counted as full tiles (out-of-bounds chunks still take their instruction).
"""

from __future__ import annotations

import math
from dataclasses import replace

from tilesim.kernels.tc_gemm.config import (
    MMA_A_FRAG_REGS,
    MMA_B_FRAG_REGS,
    PAD_BYTES,
    WARP,
    WARPGROUP_THREADS,
    TcGemmConfig,
)
from tilesim.program import (
    Compute,
    GlobalLoad,
    GlobalStore,
    Launch,
    Mma,
    Phase,
    SharedAccess,
    Shuffle,
    Step,
    TileProgram,
    TileRef,
    WarpAccess,
)

CHUNK_BYTES = 16  # cp.async / ldmatrix row / TMA swizzle unit
SWIZZLE_SPAN_BYTES = 128  # XOR swizzles permute the 16-byte chunks within 128 bytes of rows
# Integer and control instructions per warp and k-step besides loads and MMAs (assumptions, stated
# once: loop counter, stage pointers, one wait/commit; one address update per ldmatrix or cp.async).
FIXED_PER_WARP_STEP = 12
PER_MEMORY_INSTRUCTION = 1
# Address and bounds-predicate instructions per 16-byte copy of the operand tiles (the kernels'
# load_tile: 64-bit addresses, row and column guards, the swizzled shared offset): the SASS of
# mma_feed_probe's gt_gemm_k2 loop, which runs that code, has 221 instructions per warp and k-step,
# gt_commit_k2 (the same loop without copies) 105, for 6 copies per thread: (221 - 105 - 6) / 6
# (validation/results/h200/calibration/mma_feed.json; nvcc 13 for sm_90a; the suite's
# mma 128x256x32 kernel has 107 for its 6). A compiler fact, no time was read.
COPY_ADDRESS_INSTRUCTIONS = (221 - 105 - 6) / 6
# k-slices of fragment loads nvcc hoists ahead of a k-step's MMAs (SASS of the suite's loops, above)
HOISTED_SLICES = 2
# Rung 1 (wmma from global memory), per warp and k-step, read off the SASS of the suite's five rung-1
# kernels (nvcc 13.0 -arch=sm_90, nvdisasm 13.5; the interior path of one k-loop iteration traced branch
# by branch: 66, 111, 113, 138 and 169 instructions for fp16 Brow w16x16 / w32x32, bf16 Brow w32x32, fp16
# Bcol w32x64 and tf32 Bcol w32x32, which Nsight Compute's smsp__inst_executed over warps x k-steps
# confirms at 4096^3: 64.4, 110.6, 116.8, 139, 167). Besides its 4-byte loads (generic LD.E) and HMMAs,
# a fragment takes its bounds check (VIADD, ISETP, BRA), a WARPSYNC and its 64-bit addresses; the loop
# its counter, constant loads and lane index. A least-squares line through the four 16-bit kernels'
# remaining counts (52, 79, 81, 98 for 2, 4, 4, 6 fragments) gives 31.5 per k-step and 11.5 per
# fragment; tf32 fragments address each of their four loads apart (IMAD.WIDE) and rotate registers
# (the tf32 kernel's 105 for 4 fragments: (105 - 31.5) / 4). A compiler fact, no time was read.
GLOBAL_FIXED_PER_WARP_STEP = 31.5
GLOBAL_PER_FRAGMENT = {2: 11.5, 4: (105 - 31.5) / 4}  # by element bytes: 16-bit, tf32
# tf32 operands are rounded (cvt.rna.tf32.f32) register by register: FSETP + a predicated IADD each
# (SASS above: 16 FSETP and 16 IADD for 16 fragment registers)
TF32_ROUND_PER_REGISTER = 2
# registers per lane of a 16x16 (16-bit) or 16x8 / 8x16 (tf32) WMMA operand fragment (PTX ISA, wmma
# fragments: 8 halves in 4 registers; 4 tf32 values in 4)
WMMA_FRAGMENT_REGISTERS = 4
# A row-major 16-bit B fragment is transposed in registers: one MOVM.16.MT88 per 8x8 matrix (4 a
# fragment, SASS). MOVM runs on the shared-memory pipe, one wavefront each: Nsight Compute's shared
# wavefronts of the rung-1 kernels, per warp and k-step at 4096^3, are 5.0 / 9.0 with 4 / 8 MOVM (Brow
# w16x16 / w32x32) against 1.0 without (Bcol w32x64, tf32 Bcol).
MOVM_PER_ROW_B_FRAGMENT = 4
# Staged k-steps (rungs 2-4), per warp and k-step, read off the SASS of the suite's staged loops at 4096^3
# (nvcc 13.0 -arch=sm_90, nvdisasm 13.0; the k-loop's body from its label to its backward branch, which
# has no inner branch) and checked against Nsight Compute's smsp__inst_executed over warps x k-steps.
# A register-staged (stages = 1) 16-byte copy: the zero fill of its four registers (2 CS2R), its row and
# column guards (ISETP.GE.AND, ISETP.GE.OR) and its 64-bit address under the guard (LDC.64, SHF, IMAD.WIDE,
# LEA, LEA.HI.X): 36 for the 4 copies of the 16-bit s1 loops (mma.sync and wmma, Brow and Bcol), 72 for
# the 8 of the tf32 one. A compiler fact, no time was read.
REGISTER_COPY_ADDRESS_INSTRUCTIONS = 9
# With one shared buffer (stages = 1) ldmatrix and 16-bit wmma loads address by immediate offsets from
# loop-invariant registers: the 16-bit s1 loops issue nothing per fragment load (14 instructions besides
# the copies, loads, MMAs and barriers, whether 12 LDSM or 48 LD.E). In a ring the slot moves each step:
# PER_MEMORY_INSTRUCTION (an assumption) stays.
REGISTER_STAGED_PER_FRAGMENT_LOAD = 0
# A tf32 4-byte fragment load computes its own address: IMAD.WIDE for wmma's generic 64-bit addresses (the
# wmma tf32 s1 loop: 96 for 96 LD.E; as rung 1's tf32 loads), LEA for mma.sync's row-major B (LDS: 64 for
# 64 in the dense and padded Brow loops)
TF32_LOAD_ADDRESS_INSTRUCTIONS = 1
# a wmma tf32 fragment's generic 64-bit base: IADD3 + IMAD.X (23 of each for 24 fragments a k-step)
WMMA_TF32_BASE_PER_FRAGMENT = 2
# the XOR swizzle of mma.sync's tf32 row-major B loads: the swizzled Brow loop issues 971 instructions,
# the dense one 880 (the same loop otherwise: +47 LOP3, +25 LEA, +21 IMAD.IADD), for 64 such loads
TF32_SWIZZLE_PER_ROW_B_LOAD = (971 - 880) / 64
# A wmma m16n16k8 tf32 is four HMMA.1684 (m16n8k4) on sm_90 (SASS: 128 for the 32 wmma of a w64x32 k-step
# of 32), where the model's tensor work is two m16n8k8 (the shape the hardware file rates, config's
# WMMA_LOWERS_TO): the other two take their issue slots
WMMA_TF32_HMMA_PER_FRAGMENT_MMA = 4
# wgmma consumers per warp and k-step: mbarrier wait, wgmma fence, commit, wait_group, the empty-slot
# arrive and the loop (assumption: about 8 instructions). The one-buffer rung (stages 1) has no arrive
# but thread 0's arrive.expect_tx; its __syncthreads is the step's barrier (Step.barriers): the same 8.
WGMMA_SYNC_PER_WARP_STEP = 8


def lower(cfg: TcGemmConfig) -> TileProgram:
    """What one block of this GEMM does per k-step, and its epilogue."""
    if cfg.staging == "global":
        step, trips, groups = _global_step(cfg)
        depth = 1
    elif cfg.instruction == "wgmma":
        step, trips, groups = _wgmma_step(cfg)
        depth = cfg.stages
    else:
        step, trips, groups = _staged_step(cfg)
        depth = cfg.stages
    return TileProgram(
        name=f"tc_gemm_{cfg.label}",
        launch=Launch(grid=cfg.grid, threads_per_block=cfg.threads, regs_per_thread=cfg.estimated_regs,
                      smem_bytes_per_block=cfg.smem_bytes, group_rows=cfg.group_rows),
        phases=(Phase("k-loop", trips, step, pipeline_depth=depth, warp_groups=groups),
                Phase("epilogue", 1, _epilogue(cfg))),
        flops=cfg.flops,
        min_hbm_bytes=cfg.min_hbm_bytes,
    )


# ----- shared layouts -----------------------------------------------------------------------------
def shared_address(cfg: TcGemmConfig, base: int, row: int, byte_in_row: int, row_elems: int) -> int:
    """Byte address in shared memory of ``byte_in_row`` of ``row`` of a tile of ``row_elems`` per row."""
    row_bytes = cfg.smem_row_bytes(row_elems)
    if cfg.layout != "swizzled":
        return base + row * row_bytes + byte_in_row
    chunks = max(1, min(row_bytes, SWIZZLE_SPAN_BYTES) // CHUNK_BYTES)  # chunks the XOR permutes
    rows_per_span = max(1, SWIZZLE_SPAN_BYTES // row_bytes)  # rows sharing one 128-byte span
    chunk, within = divmod(byte_in_row, CHUNK_BYTES)
    high, low = divmod(chunk, chunks)
    low ^= (row // rows_per_span) % chunks
    return base + row * row_bytes + (high * chunks + low) * CHUNK_BYTES + within


def _tile_load(cfg: TcGemmConfig, tensor: str, coords, rows: int, row_elems: int, global_row_elems: int,
               base: int, dest: str, fraction: int = 1) -> GlobalLoad:
    """A rows x row_elems tile copied in 16-byte chunks by every thread, chunk ``i`` by thread
    ``i % threads``; with ``fraction`` > 1 only the first ``1/fraction`` of the rows (a multicast share),
    the tile still named whole: the blocks of a cluster each copy their share, so together they miss the
    whole tile in L2 once, as one block without a cluster does (Nsight Compute: equal DRAM reads)."""
    e, T = cfg.elem_bytes, cfg.threads
    per_row = row_elems * e // CHUNK_BYTES
    tile_bytes = rows * row_elems * e
    rows = max(1, rows // fraction)
    n_chunks = rows * per_row
    instrs = []
    for r in range(math.ceil(n_chunks / T)):
        for w in range(math.ceil(T / WARP)):
            idx = [r * T + w * WARP + lane for lane in range(WARP)]
            idx = [i for i in idx if i < n_chunks]
            if not idx:
                continue
            offs = tuple((i // per_row) * global_row_elems * e + (i % per_row) * CHUNK_BYTES for i in idx)
            smem = tuple(shared_address(cfg, base, i // per_row, (i % per_row) * CHUNK_BYTES, row_elems) for i in idx)
            instrs.append(WarpAccess(offs, CHUNK_BYTES, smem))
    return GlobalLoad(TileRef(tensor, coords, tile_bytes), tuple(instrs), dest=dest)


def _operand_loads(cfg: TcGemmConfig, dest: str, b_fraction: int = 1) -> tuple[GlobalLoad, GlobalLoad, int]:
    """The A and B tile loads of one k-step and the B tile's shared base address."""
    (ra, ca), (rb, cb) = cfg.smem_tile_shapes
    b_base = ra * cfg.smem_row_bytes(ca)
    la = _tile_load(cfg, "A", ("by", "k"), ra, ca, cfg.k, 0, dest)
    if cfg.b_layout == "row":
        lb = _tile_load(cfg, "B", ("k", "bx"), rb, cb, cfg.n, b_base, dest, b_fraction)
    else:
        lb = _tile_load(cfg, "B", ("bx", "k"), rb, cb, cfg.k, b_base, dest, b_fraction)
    return la, lb, b_base


# ----- fragment loads from shared memory (warp 0's, one k-slice) ---------------------------------
def _ldmatrix_x4(cfg: TcGemmConfig, base: int, row_elems: int, rows: list[int], chunks: list[int]) -> WarpAccess:
    """One ``ldmatrix.x4``: lane ``ln`` gives the address of row ``rows[ln]`` at 16-byte chunk ``chunks[ln]``."""
    return WarpAccess(tuple(shared_address(cfg, base, r, c * CHUNK_BYTES, row_elems) for r, c in zip(rows, chunks,
                                                                                                      strict=True)),
                      CHUNK_BYTES)


def _wmma_fragment(cfg: TcGemmConfig, base: int, row_elems: int, r0: int, c0: int) -> list[WarpAccess]:
    """The four 4-byte loads of one 16x16 16-bit fragment whose rows start at ``r0`` and columns at ``c0``
    of a shared tile of ``row_elems`` per row: lane (g = lane / 4, t = lane % 4) reads row g + 8 (j % 2),
    columns 2t + 8 (j // 2) and the next."""
    e = cfg.elem_bytes
    return [WarpAccess(tuple(shared_address(cfg, base, r0 + ln // 4 + 8 * (j % 2), (c0 + 2 * (ln % 4) + 8 * (j // 2)) * e,
                                            row_elems) for ln in range(WARP)), 4) for j in range(4)]


def _fragment_reads(cfg: TcGemmConfig, b_base: int, kk: int) -> list[WarpAccess]:
    """Warp 0's shared loads of its A and B fragments for the k-slice starting at ``kk``."""
    fm, fn, fk = cfg.mma_shape
    e = cfg.elem_bytes
    (_, ca), (_, cb) = cfg.smem_tile_shapes
    lanes = range(WARP)
    out: list[WarpAccess] = []
    if e == 2 and cfg.instruction == "wmma":
        # load_matrix_sync from shared memory: nvcc 13 emits four 4-byte generic loads (LD.E) per 16x16
        # fragment, lane (g, t) reading the two elements at row g (+ 8), column 2t (+ 8) of the fragment
        # as it is stored (A [m][k], B [n][k] or [k][n]; a row-major B fragment is then transposed in
        # registers by MOVM); SASS of the suite's wmma 128x128x32 loops: 48 LD.E for 12 fragments
        for i in range(cfg.wm // 16):
            out += _wmma_fragment(cfg, 0, ca, i * 16, kk)
        for j in range(cfg.wn // 16):
            if cfg.b_layout == "row":
                out += _wmma_fragment(cfg, b_base, cb, kk, j * 16)
            else:
                out += _wmma_fragment(cfg, b_base, cb, j * 16, kk)
        return out
    if e == 2:  # ldmatrix.x4: 16 rows x 16 k of A, or 16 k x 16 n of B
        for i in range(cfg.wm // 16):
            rows = [i * 16 + (ln % 16) for ln in lanes]
            chunks = [kk // 8 + ln // 16 for ln in lanes]
            out.append(_ldmatrix_x4(cfg, 0, ca, rows, chunks))
        for j in range(cfg.wn // 16):
            if cfg.b_layout == "row":  # [k][n], .trans
                rows = [kk + (ln % 8) + 8 * ((ln // 8) % 2) for ln in lanes]
                chunks = [(j * 16) // 8 + ln // 16 for ln in lanes]
            else:  # [n][k]
                rows = [j * 16 + (ln % 8) + 8 * (ln // 16) for ln in lanes]
                chunks = [kk // 8 + (ln // 8) % 2 for ln in lanes]
            out.append(_ldmatrix_x4(cfg, b_base, cb, rows, chunks))
        return out
    if cfg.instruction == "mma_sync":
        # tf32 mma.sync (the kernels' compute_mma): A, and B when K-contiguous, by ldmatrix.x4 of 16 rows x
        # two 16-byte chunks (8 tf32 of k), which gives lane l the m16n8k8 fragment's 32-bit element (row
        # l / 4, column l % 4) of each 8x8 matrix; SASS of the suite's tf32 loops: 16 LDSM for 4 k-slices of
        # 4 A fragments (w64x64), 24 for 4 of 4 A and 2 B pairs (Bcol w64x32)
        for i in range(cfg.wm // 16):
            rows = [i * 16 + (ln % 16) for ln in lanes]
            chunks = [kk * e // CHUNK_BYTES + ln // 16 for ln in lanes]
            out.append(_ldmatrix_x4(cfg, 0, ca, rows, chunks))
        if cfg.b_layout == "col":  # [n][k]: 16 n x 8 k a pair of n8 fragments
            for p in range(cfg.wn // 16):
                rows = [p * 16 + (ln % 8) + 8 * (ln // 16) for ln in lanes]
                chunks = [kk * e // CHUNK_BYTES + (ln // 8) % 2 for ln in lanes]
                out.append(_ldmatrix_x4(cfg, b_base, cb, rows, chunks))
            return out
        # B row-major ([k][n]): ldmatrix cannot transpose 32-bit elements; 4-byte loads, below
        for jn in range(cfg.wn // 8):
            for j in range(2):
                out.append(WarpAccess(tuple(shared_address(cfg, b_base, kk + ln % 4 + 4 * j, (jn * 8 + ln // 4) * e, cb)
                                            for ln in lanes), 4))
        return out
    # tf32 wmma: 4-byte loads in the m16n8k8 register layout (g = lane / 4, t = lane % 4)
    for i in range(cfg.wm // 16):
        for j in range(4):
            out.append(WarpAccess(tuple(shared_address(cfg, 0, i * 16 + ln // 4 + 8 * (j % 2),
                                                       (kk + ln % 4 + 4 * (j // 2)) * e, ca) for ln in lanes), 4))
    for jn in range(cfg.wn // 8):
        for j in range(2):
            if cfg.b_layout == "row":
                addrs = [shared_address(cfg, b_base, kk + ln % 4 + 4 * j, (jn * 8 + ln // 4) * e, cb) for ln in lanes]
            else:
                addrs = [shared_address(cfg, b_base, jn * 8 + ln // 4, (kk + ln % 4 + 4 * j) * e, cb) for ln in lanes]
            out.append(WarpAccess(tuple(addrs), 4))
    return out


def _mma(cfg: TcGemmConfig, k_elems: int, operands: str = "registers") -> Mma:
    """The block's MMAs over ``k_elems`` of k, in hardware instructions, with the dependent chain of one
    accumulator (one instruction per instruction-k)."""
    (hm, hn, hk), per_op = cfg.hardware_mma
    fm, fn, fk = cfg.mma_shape
    count = (cfg.bm // fm) * (cfg.bn // fn) * (k_elems // fk) * per_op
    if cfg.instruction == "wgmma":
        count = cfg.consumers * (cfg.wm // fm) * (cfg.wn // fn) * (k_elems // fk)
    if cfg.instruction == "wgmma":  # back-to-back wgmmas accumulate in the pipe; one wait_group a step
        return Mma((hm, hn, hk), cfg.dtype, count, chain=1, operands=operands, scope="warpgroup")
    return Mma((hm, hn, hk), cfg.dtype, count, chain=k_elems / fk, operands=operands)


# ----- the k-loop, by rung ------------------------------------------------------------------------
def _global_step(cfg: TcGemmConfig):
    """wmma fragments loaded from global memory, one fragment-k per step."""
    fm, fn, fk = cfg.mma_shape
    e = cfg.elem_bytes
    W = cfg.warps
    g = [ln // 4 for ln in range(WARP)]
    t = [ln % 4 for ln in range(WARP)]
    pair = 4 // e  # elements per 4-byte load

    def frag(row_stride, r0, c0, rows, cols) -> list[WarpAccess]:
        """A rows x cols fragment's loads: lane (g, t) reads ``pair`` elements at row g (+8), column
        t * pair (+ cols / 2)."""
        out = []
        for j in range(4):
            r = [r0 + gi + 8 * (j % 2) for gi in g]
            c = [c0 + ti * pair + (cols // 2) * (j // 2) for ti in t]
            out.append(WarpAccess(tuple((ri * row_stride + ci) * e for ri, ci in zip(r, c, strict=True)), 4))
        return out

    a_instr, b_instr = [], []
    for i in range(cfg.wm // fm):
        a_instr += frag(cfg.k, i * fm, 0, fm, fk)
    for j in range(cfg.wn // fn):
        if cfg.b_layout == "row":
            b_instr += frag(cfg.n, 0, j * fn, fk, fn)
        else:
            b_instr += frag(cfg.k, j * fn, 0, fn, fk)
    loads = (
        GlobalLoad(TileRef("A", ("by", "k"), cfg.bm * fk * e), tuple(a_instr), repeat=W),
        GlobalLoad(TileRef("B", ("k", "bx") if cfg.b_layout == "row" else ("bx", "k"), fk * cfg.bn * e),
                   tuple(b_instr), repeat=W),
    )
    frags = cfg.wm // fm + cfg.wn // fn
    other = GLOBAL_FIXED_PER_WARP_STEP + GLOBAL_PER_FRAGMENT[e] * frags
    if e == 4:
        other += TF32_ROUND_PER_REGISTER * WMMA_FRAGMENT_REGISTERS * frags
    compute: tuple = (_mma(cfg, fk), Compute("int", W * other))
    if cfg.b_layout == "row" and e == 2:
        compute += (Shuffle(W * MOVM_PER_ROW_B_FRAGMENT * (cfg.wn // fn)),)
    return Step(loads=loads, compute=compute), math.ceil(cfg.k / fk), W


def _staged_step(cfg: TcGemmConfig):
    """wmma or mma_sync on block tiles staged in shared memory, one bk slab per step."""
    fk = cfg.mma_shape[2]
    W = cfg.warps
    dest = "shared" if cfg.stages == 1 else "async"
    la, lb, b_base = _operand_loads(cfg, dest)
    slice_k = 16 if cfg.elem_bytes == 2 else 8  # ldmatrix.x4 covers k16; tf32 fragments k8
    reads: list[WarpAccess] = []
    for kk in range(0, cfg.bk, slice_k):
        reads += _fragment_reads(cfg, b_base, kk)
    slices = max(1, cfg.bk // slice_k)
    # the copy code: cp.async's as the probe measured, register-staged copies' as the s1 loops' SASS
    copy_address = COPY_ADDRESS_INSTRUCTIONS if dest == "async" else REGISTER_COPY_ADDRESS_INSTRUCTIONS
    la, lb = (replace(ld, address_instructions=copy_address) for ld in (la, lb))
    other = FIXED_PER_WARP_STEP + _fragment_address_instructions(cfg, reads, slices)
    if cfg.elem_bytes == 4:  # tf32: every fragment register rounded (cvt.rna.tf32.f32: FSETP + IMAD.IADD)
        other += TF32_ROUND_PER_REGISTER * _fragment_registers(cfg) * slices
    compute: tuple = (_mma(cfg, cfg.bk), Compute("int", W * other))
    if cfg.instruction == "wmma" and cfg.elem_bytes == 4:  # the HMMA.1684 beyond the modelled m16n8k8 pairs
        _, per_op = cfg.hardware_mma
        wmmas = (cfg.bm // 16) * (cfg.bn // 16) * (cfg.bk // cfg.mma_shape[2])
        compute += (Compute("issue", wmmas * (WMMA_TF32_HMMA_PER_FRAGMENT_MMA - per_op)),)
    movm = 0
    if cfg.instruction == "wmma" and cfg.b_layout == "row" and cfg.elem_bytes == 2:
        # a row-major B fragment is transposed in registers: one MOVM.16.MT88 per 8x8 matrix (SASS), on
        # the shared-memory pipe (MOVM_PER_ROW_B_FRAGMENT)
        movm = W * MOVM_PER_ROW_B_FRAGMENT * (cfg.wn // 16) * max(1, cfg.bk // slice_k)
    del fk
    # load-then-use rounds as nvcc orders the loop: up to two k-slices, all of a k-step's fragment
    # loads ahead of its first MMA (SASS: 14 of 16 ldmatrix ahead of the first HMMA in the suite's
    # mma 128x128x32 loop, 11 of 16 in mma_feed_probe's two-slice loops); more slices are loaded
    # slice by slice, the next while the current one's MMAs run (the 128x128x64 loop: 7 of 24 ahead)
    step = Step(loads=(la, lb), barriers=2 if cfg.stages == 1 else 1,
                shared_loads=(SharedAccess(tuple(reads), repeat=W, generic=cfg.instruction == "wmma"),),
                compute=compute + ((Shuffle(movm),) if movm else ()),
                rounds=1 if slices <= HOISTED_SLICES else slices)
    return step, math.ceil(cfg.k / cfg.bk), 1


def _fragment_registers(cfg: TcGemmConfig) -> int:
    """Registers per lane of one warp's A and B fragments for one k-slice."""
    if cfg.instruction == "wmma":
        return (cfg.wm // 16 + cfg.wn // 16) * WMMA_FRAGMENT_REGISTERS
    return (cfg.wm // 16) * MMA_A_FRAG_REGS + (cfg.wn // 8) * MMA_B_FRAG_REGS


def _fragment_address_instructions(cfg: TcGemmConfig, reads: list[WarpAccess], slices: int) -> float:
    """Address instructions per warp and k-step of its fragment loads ``reads`` (see the constants)."""
    if cfg.elem_bytes == 4 and cfg.instruction == "wmma":  # each generic 4-byte load, and each fragment's base
        return (TF32_LOAD_ADDRESS_INSTRUCTIONS * len(reads)
                + WMMA_TF32_BASE_PER_FRAGMENT * (cfg.wm // 16 + cfg.wn // 16) * slices)
    per_load = PER_MEMORY_INSTRUCTION if cfg.stages > 1 else REGISTER_STAGED_PER_FRAGMENT_LOAD
    if cfg.elem_bytes == 4 and cfg.b_layout == "row":  # mma.sync tf32: row-major B by 4-byte loads
        row_b = 2 * (cfg.wn // 8) * slices
        swizzle = TF32_SWIZZLE_PER_ROW_B_LOAD if cfg.layout == "swizzled" else 0.0
        return per_load * (len(reads) - row_b) + (TF32_LOAD_ADDRESS_INSTRUCTIONS + swizzle) * row_b
    return per_load * len(reads)


def _wgmma_step(cfg: TcGemmConfig):
    """TMA copies into the ring (or the one buffer) and wgmma from shared memory, one bk slab per step.

    The ring's stages are the phase's ``pipeline_depth`` (copies ``stages - 1`` k-steps ahead, mbarrier
    waits, no block barrier); one buffer (``stages=1``) is depth 1, the step's copies waited for before
    its wgmmas, and one block barrier a step (the __syncthreads that frees the buffer), as the staged
    rungs' synchronous copy is."""
    la, lb, _ = _operand_loads(cfg, "bulk", b_fraction=cfg.cluster)
    consumer_warps = cfg.consumers * WARPGROUP_THREADS // WARP
    # with a cluster each consumer hands every stage back to both blocks of the pair: one arrive with
    # cluster-scope release on the other block per k-step (the H200 kernels' wgmma.cu)
    step = Step(loads=(la, lb), cluster_arrives=1 if cfg.cluster > 1 else 0,
                barriers=0 if cfg.has_producer else 1,
                compute=(_mma(cfg, cfg.bk, operands="shared"),
                         Compute("issue", consumer_warps * WGMMA_SYNC_PER_WARP_STEP)))
    return step, math.ceil(cfg.k / cfg.bk), 1


# ----- the epilogue ------------------------------------------------------------------------------
def _fragment_rows(cfg: TcGemmConfig) -> list[tuple[int, int]]:
    """(row, first column) in the block's C tile of each 16x8 accumulator fragment of warp 0."""
    if cfg.instruction == "wgmma":  # warp 0 of a consumer: rows 0..15 of each 64-row slice
        return [(i * 64, j * 8) for i in range(cfg.wm // 64) for j in range(cfg.wn // 8)]
    return [(i * 16, j * 8) for i in range(cfg.wm // 16) for j in range(cfg.wn // 8)]


def _epilogue(cfg: TcGemmConfig) -> Step:
    ob = cfg.out_bytes
    W = cfg.consumers * WARPGROUP_THREADS // WARP if cfg.instruction == "wgmma" else cfg.warps
    g = [ln // 4 for ln in range(WARP)]
    t = [ln % 4 for ln in range(WARP)]
    tile = TileRef("C", ("by", "bx"), cfg.bm * cfg.bn * ob)
    frags = _fragment_rows(cfg)
    if cfg.epilogue == "direct":
        instrs = tuple(WarpAccess(tuple(((r0 + gi + 8 * h) * cfg.n + c0 + 2 * ti) * ob
                                        for gi, ti in zip(g, t, strict=True)), 2 * ob)
                       for r0, c0 in frags for h in range(2))
        return Step(compute=(Compute("int", 2 * len(instrs) * W),), stores=(GlobalStore(tile, instrs, repeat=W),))
    row_bytes = cfg.bn * ob + PAD_BYTES
    smem = tuple(WarpAccess(tuple((r0 + gi + 8 * h) * row_bytes + (c0 + 2 * ti) * ob
                                  for gi, ti in zip(g, t, strict=True)), 2 * ob)
                 for r0, c0 in frags for h in range(2))
    per_row = cfg.bn * ob // CHUNK_BYTES
    chunks = cfg.bm * per_row
    T = W * WARP
    out_g, out_s = [], []
    for r in range(math.ceil(chunks / T)):
        idx = [r * T + lane for lane in range(WARP) if r * T + lane < chunks]
        out_g.append(WarpAccess(tuple((i // per_row) * cfg.n * ob + (i % per_row) * CHUNK_BYTES for i in idx),
                                CHUNK_BYTES))
        out_s.append(WarpAccess(tuple((i // per_row) * row_bytes + (i % per_row) * CHUNK_BYTES for i in idx),
                                CHUNK_BYTES))
    return Step(shared_stores=(SharedAccess(smem, repeat=W),), barriers=1,
                shared_loads=(SharedAccess(tuple(out_s), repeat=W),),
                compute=(Compute("int", 2 * (len(smem) + len(out_g)) * W),),
                stores=(GlobalStore(tile, tuple(out_g), repeat=W),))
