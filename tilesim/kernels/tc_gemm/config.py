"""The tensor-core GEMM family's knobs: one frozen, validated configuration shared by prediction and
measurement.

C = A @ B with fp32 accumulation. A is M x K row-major; B is K x N row-major (``b_layout="row"``) or
stored transposed, N x K row-major (``b_layout="col"``); C is M x N row-major, in fp32 or in the input
type (``out_dtype``). ``dtype`` "tf32" keeps A and B as fp32 in memory; the tensor core reads them as
tf32.

The ladder (each rung a knob combination):

==== ====================================================================================== ============
rung what                                                                                   knobs
==== ====================================================================================== ============
1    WMMA fragments loaded straight from global memory, a warp per warp tile                instruction=wmma, staging=global
2    block tiles staged in shared memory, warp tiles of several fragments                   staging=shared, stages=1
3    ``mma.sync`` fed by ``ldmatrix``; dense, padded or XOR-swizzled shared layouts           instruction=mma_sync, layout
4    a ``stages``-deep ``cp.async`` ring (2..5)                                              stages
5    Hopper, one buffer: thread 0 brings the k-tile into 128-byte-swizzled shared memory  instruction=wgmma, stages=1,
     by TMA, every warpgroup waits on its mbarrier, issues its ``wgmma``, waits for them    consumers
     (``wait_group 0``) and passes a block barrier before the next copy; no producer
     warpgroup: loads and math alternate within a block (other resident blocks overlap)
5    Hopper, warp-specialised: a TMA + mbarrier ring (2..5 stages) filled by a producer     instruction=wgmma, stages,
     warpgroup beside the consumer warpgroups, clusters with TMA multicast                 consumers, cluster
==== ====================================================================================== ============

Every rule is checked in ``__post_init__``; a broken one raises ``ValueError`` naming the field, the
value and the limit. Instruction shapes are ISA facts (PTX ISA 8.x, "Warp-level matrix
instructions" and "Asynchronous warpgroup-level matrix instructions"); which of them a GPU runs, and
how fast, is in its hardware file (``[mma]``), checked by :func:`check_fits`.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field, replace

from tilesim.analytic.occupancy import occupancy
from tilesim.kernels.gemm.config import launch_bound_regs, register_limited_blocks

DTYPE_BYTES = {"fp16": 2, "bf16": 2, "tf32": 4}  # storage bytes of A and B (tf32 is stored as fp32)
OUT_DTYPES = ("fp32", "input")
B_LAYOUTS = ("row", "col")
INSTRUCTIONS = ("wmma", "mma_sync", "wgmma")
STAGINGS = ("global", "shared")
LAYOUTS = ("naive", "padded", "swizzled")
EPILOGUES = ("direct", "shared")
STAGES = (1, 2, 3, 4, 5)
CONSUMERS = (1, 2)
WARP = 32
WARPGROUP_THREADS = 128  # a warpgroup is four consecutive warps (PTX ISA, wgmma)
PAD_BYTES = 16  # the padded layout adds one 16-byte chunk per shared row (8 fp16 / 4 fp32 elements)

#: Shapes each instruction has for each input type (PTX ISA 8.x: wmma "Matrix shapes", mma.sync
#: "Matrix shape" tables, wgmma "Matrix shape": m64nNk16 for f16/bf16 and m64nNk8 for tf32 with N a
#: multiple of 8 from 8 to 256). The default ("auto") is the first.
ISA_SHAPES = {
    ("wmma", "fp16"): ((16, 16, 16), (32, 8, 16), (8, 32, 16)),
    ("wmma", "bf16"): ((16, 16, 16), (32, 8, 16), (8, 32, 16)),
    ("wmma", "tf32"): ((16, 16, 8),),
    ("mma_sync", "fp16"): ((16, 8, 16), (16, 8, 8)),
    ("mma_sync", "bf16"): ((16, 8, 16), (16, 8, 8)),
    ("mma_sync", "tf32"): ((16, 8, 8), (16, 8, 4)),
}
WGMMA_K = {"fp16": 16, "bf16": 16, "tf32": 8}
WGMMA_M = 64
WGMMA_N_STEP, WGMMA_N_MAX = 8, 256
#: The hardware instruction a WMMA fragment operation compiles to (one ``wmma::mma_sync`` of
#: 16x16x16 is two HMMA.16816 on sm_80+; 16x16x8 tf32 is two HMMA.1688): what the hardware file rates.
WMMA_LOWERS_TO = {(16, 16, 16): ((16, 8, 16), 2), (32, 8, 16): ((16, 8, 16), 2), (8, 32, 16): ((16, 8, 16), 2),
                  (16, 16, 8): ((16, 8, 8), 2)}
GROUP_TILE_ROWS = 2048  # rows of C per group of tiles in the wgmma kernels' tile order
GLOBAL_SCRATCH_BYTES = 2048  # per warp, staging "global": edge A and B fragments (512 B each), one C fragment
C_PAD_FLOATS = 8  # the wmma/mma_sync shared epilogue's fp32 row pad
WGMMA_ALIGN_BYTES = 1024  # the 128-byte swizzle's atom (8 rows): tiles aligned to it; mbarriers in a static 1 KiB
MAX_CLUSTER = 16  # the largest cluster any CUDA GPU allows (non-portable, sm_90); the GPU's own limit is in check_fits

# ----- the blind register estimate (TcGemmConfig.register_terms / estimated_regs) -------------------------
#: registers of one m16n8k16 / m16n8k8 operand fragment per thread (PTX ISA, "Matrix Fragments for
#: mma.m16n8k16" / ".m16n8k8 .tf32"): A is 16 x 16 halves or 16 x 8 tf32 (4 registers), B 16 x 8 halves
#: or 8 x 8 tf32 (2). A WMMA 16x16 fragment is two of these hardware operands (A shared, B two halves):
#: the compiler keeps the distinct registers only, so wmma and mma_sync hold the same operands.
MMA_A_FRAG_REGS, MMA_B_FRAG_REGS = 4, 2
#: the hardware instruction's k per dtype (m16n8k16 for 16-bit inputs, m16n8k8 for tf32)
MMA_HW_K = {"fp16": 16, "bf16": 16, "tf32": 8}
#: thread, warp and block indices, M/N/K, the A/B/C pointers, shared-memory and ring-slot bases, k-loop
#: counter and bound, the ldmatrix lane offsets: read off the compiler's counts of the suite's kernels
#: whose accumulators and fragments are small (32 accumulators: 122-124 registers for 96 of fragments
#: and accumulators; the rung-1 kernels 40 / 72 for 16 / 48)
TC_REGS_BASE = 28
#: the same for the rung-1 kernels (staging "global"): no cp.async ring, so no ring-slot index, no
#: shared-memory bases and no copy addresses; their per-warp scratch pointers remain (the suite's rung-1
#: counts: 40, 72 and 108 registers for 16, 48 and 88 of accumulators and fragments)
TC_REGS_BASE_GLOBAL = 24
#: registers per 16-byte chunk a thread copies through registers in the synchronous (stages = 1) copy
STAGING_REGS_PER_CHUNK = 4
#: the validation wgmma kernels' setmaxnreg (validation/families/tc_gemm/wgmma.cu: the producer
#: warpgroup drops to 40, the consumers rise to 232). ptxas reports for such a kernel the consumers'
#: count, capped by the launch bound (``__launch_bounds__(threads, 1)``: 65536 / threads in steps of 8):
#: 232 with one consumer warpgroup (256 threads), 168 with two (384 threads), whatever the tile
WGMMA_CONSUMER_REGS = 232
#: registers a wgmma consumer thread keeps for addressing and control beside its accumulators
#: (validation/families/tc_gemm/wgmma.cu: at most 192 accumulators under setmaxnreg's 232)
WGMMA_ACCUMULATOR_HEADROOM_REGS = 40
#: the 128-byte swizzle's row: the TMA box's inner extent, so bk is a multiple of 128 bytes of elements
WGMMA_SWIZZLE_ROW_BYTES = 128


def _require(cond: bool, name: str, value, rule: str) -> None:
    if not cond:
        raise ValueError(f"TcGemmConfig.{name} = {value!r}: {rule}")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _doc(default, doc: str, choices: tuple = ()):
    return field(default=default, metadata={"doc": doc, "choices": choices})


def parse_shape(text: str) -> tuple[int, int, int]:
    """``"m16n8k16"``, ``"m64n128k16"`` or ``"16x16x16"`` as (m, n, k)."""
    t = text.strip().lower()
    m = re.fullmatch(r"m(\d+)n(\d+)k(\d+)", t) or re.fullmatch(r"(\d+)x(\d+)x(\d+)", t)
    if not m:
        raise ValueError(f"TcGemmConfig.shape = {text!r}: must look like m16n8k16 or 16x16x16 (or 'auto')")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


@dataclass(frozen=True)
class TcGemmConfig:
    """One tensor-core GEMM problem and tiling. Sizes in elements; see the module docstring."""

    m: int = field(metadata={"doc": "rows of A and C (the problem size)"})
    n: int = field(metadata={"doc": "columns of B and C (the problem size)"})
    k: int = field(metadata={"doc": "columns of A, rows of B (the problem size)"})
    dtype: str = _doc("fp16", "input type: fp16, bf16 or tf32 (tf32: A and B stored as fp32); fp32 "
                              "accumulation", tuple(DTYPE_BYTES))
    out_dtype: str = _doc("fp32", "C in fp32, or in the input type ('input')", OUT_DTYPES)
    b_layout: str = _doc("row", "B row-major K x N ('row') or stored transposed, N x K ('col')", B_LAYOUTS)
    instruction: str = _doc("mma_sync", "wmma (fragment API), mma_sync (per warp, fed by ldmatrix), wgmma "
                                        "(Hopper, per warpgroup, operands from shared memory)", INSTRUCTIONS)
    staging: str = _doc("shared", "global: fragments loaded straight from global memory (wmma only); "
                                  "shared: block tiles staged in shared memory", STAGINGS)
    bm: int = _doc(128, "block tile rows (of C)")
    bn: int = _doc(128, "block tile columns (of C)")
    bk: int = _doc(32, "k-tile depth staged per k-step")
    wm: int = _doc(64, "warp tile rows (wgmma: the consumer warpgroup's rows, a multiple of 64)")
    wn: int = _doc(64, "warp tile columns (wgmma: the consumer warpgroup's columns, equal to bn)")
    shape: str = _doc("auto", "instruction shape, e.g. m16n8k16, 16x16x16, m64n128k16; auto: the "
                              "instruction's default for the dtype (wgmma: m64n{wn}k16, k8 for tf32)")
    layout: str = _doc("swizzled", "shared layout of the A and B tiles: naive (dense rows), padded (+16 "
                                   "bytes per row), swizzled (XOR of 16-byte chunks; wgmma: the 128-byte "
                                   "swizzle)", LAYOUTS)
    stages: int = _doc(3, "shared-memory buffers: 1 = synchronous copy (wgmma: one TMA buffer, no producer "
                          "warpgroup; each k-step copies, waits, computes, waits for its wgmmas and passes a "
                          "block barrier); 2..5 = a cp.async ring (wmma, mma_sync) or a TMA + mbarrier ring "
                          "filled by a producer warpgroup (wgmma)", STAGES)
    consumers: int = _doc(1, "consumer warpgroups beside the producer warpgroup (wgmma only; 1 otherwise; "
                             "with stages 1 the block's only warpgroups)", CONSUMERS)
    cluster: int = _doc(1, "thread blocks per cluster along M sharing B through TMA multicast (wgmma with "
                           "stages >= 2 only; 1 otherwise)")
    epilogue: str = _doc("direct", "direct: accumulators to global memory; shared: staged through shared "
                                   "memory for 16-byte stores", EPILOGUES)
    setmaxnreg: bool = _doc(True, "wgmma only: the producer warpgroup hands registers to the consumers with "
                                  "setmaxnreg (the validation kernels do); False: every warpgroup keeps what "
                                  "ptxas allocates (registers estimated from the accumulators); must be False "
                                  "with stages 1 (no producer warpgroup)", (True, False))
    regs_per_thread: int | None = _doc(None, "registers per thread (override of the estimate, e.g. the "
                                             "compiler's count); None: estimated_regs")

    def __post_init__(self) -> None:
        for f in ("m", "n", "k", "bm", "bn", "bk", "wm", "wn", "stages", "consumers", "cluster"):
            v = getattr(self, f)
            _require(_is_int(v) and v > 0, f, v, "must be a positive integer")
        for f, choices in (("dtype", tuple(DTYPE_BYTES)), ("out_dtype", OUT_DTYPES), ("b_layout", B_LAYOUTS),
                           ("instruction", INSTRUCTIONS), ("staging", STAGINGS), ("layout", LAYOUTS),
                           ("epilogue", EPILOGUES)):
            _require(getattr(self, f) in choices, f, getattr(self, f), f"must be one of {', '.join(choices)}")
        _require(self.stages in STAGES, "stages", self.stages, f"must be in {STAGES[0]}..{STAGES[-1]}")
        _require(self.consumers in CONSUMERS, "consumers", self.consumers, "must be 1 or 2")
        _require(self.cluster <= MAX_CLUSTER and self.cluster & (self.cluster - 1) == 0, "cluster", self.cluster,
                 f"must be a power of two <= {MAX_CLUSTER}")
        _require(isinstance(self.setmaxnreg, bool), "setmaxnreg", self.setmaxnreg, "must be True or False")
        if self.regs_per_thread is not None:
            _require(_is_int(self.regs_per_thread) and self.regs_per_thread > 0, "regs_per_thread",
                     self.regs_per_thread, "must be a positive integer or None")
        _require(isinstance(self.shape, str), "shape", self.shape, "must be a string such as m16n8k16 or 'auto'")
        fm, fn, fk = self.mma_shape  # validates the shape against the ISA
        ins = self.instruction
        if ins == "wgmma":
            self._check_wgmma(fn)
        else:
            _require(self.consumers == 1, "consumers", self.consumers, f"must be 1 with instruction {ins} "
                                                                       "(consumer warpgroups are a wgmma knob)")
            _require(self.cluster == 1, "cluster", self.cluster, f"must be 1 with instruction {ins} "
                                                                 "(TMA multicast is a wgmma knob)")
            _require(self.setmaxnreg, "setmaxnreg", self.setmaxnreg, f"must be True with instruction {ins} "
                                                                      "(register hand-over is a wgmma knob)")
            _require(self.bm % self.wm == 0, "wm", self.wm, f"must divide bm = {self.bm}")
            _require(self.bn % self.wn == 0, "wn", self.wn, f"must divide bn = {self.bn}")
            _require(self.wm % fm == 0, "wm", self.wm, f"must be a multiple of the fragment's m = {fm}")
            _require(self.wn % fn == 0, "wn", self.wn, f"must be a multiple of the fragment's n = {fn}")
        _require(self.bk % fk == 0, "bk", self.bk, f"must be a multiple of the instruction's k = {fk}")
        if self.staging == "global":
            _require(ins == "wmma", "staging", "global", "fragments straight from global memory are the wmma "
                                                         "rung only; mma_sync and wgmma stage in shared memory")
            _require(self.stages == 1, "stages", self.stages, "must be 1 with staging 'global' (no shared ring)")
            _require(self.epilogue == "direct", "epilogue", self.epilogue,
                     "must be 'direct' with staging 'global' (no shared memory)")
        else:
            e = self.elem_bytes
            _require(self.bk * e % 16 == 0, "bk", self.bk, f"must make 16-byte rows ({16 // e} elements of {self.dtype})")
            # 16-byte copies (cp.async, TMA) need 16-byte aligned global rows (TMA: strides multiple of 16 B,
            # CUDA driver API cuTensorMapEncodeTiled)
            _require(self.k * e % 16 == 0, "k", self.k, f"must be a multiple of {16 // e} ({self.dtype}): "
                                                        "16-byte copies need 16-byte aligned rows of A")
            b_row = self.n if self.b_layout == "row" else self.k
            _require(b_row * e % 16 == 0, "n" if self.b_layout == "row" else "k", b_row,
                     f"must be a multiple of {16 // e} ({self.dtype}): 16-byte copies need 16-byte aligned rows of B")
        if self.threads > 1024:
            raise ValueError(f"TcGemmConfig.threads = {self.threads} (from bm, bn, wm, wn): must be <= 1024 "
                             "(CUDA's limit per block)")

    def _check_wgmma(self, fn: int) -> None:
        _require(self.staging == "shared", "staging", self.staging, "wgmma reads its operands from shared memory")
        _require(self.layout == "swizzled", "layout", self.layout, "wgmma needs the 128-byte swizzled layout")
        if self.stages == 1:  # one buffer, no producer warpgroup: nothing to hand registers over
            _require(not self.setmaxnreg, "setmaxnreg", self.setmaxnreg, "must be False with instruction wgmma "
                                                                         "and stages = 1 (no producer warpgroup "
                                                                         "hands registers over)")
            # a buffer shared by a cluster would need a cluster barrier a k-step before the next multicast
            # overwrites it: neither the kernel nor a probe has one
            _require(self.cluster == 1, "cluster", self.cluster, "must be 1 with instruction wgmma and stages = 1 "
                                                                 "(TMA multicast is the ring's knob)")
        _require(self.wm % WGMMA_M == 0, "wm", self.wm, f"must be a multiple of {WGMMA_M} (wgmma's m)")
        _require(self.wn == self.bn, "wn", self.wn, f"must equal bn = {self.bn} (a consumer warpgroup owns whole rows)")
        _require(self.bm == self.consumers * self.wm, "bm", self.bm,
                 f"must be consumers * wm = {self.consumers * self.wm}")
        _require(self.wn % fn == 0, "shape", self.shape, f"its n = {fn} must divide wn = {self.wn}")
        # wgmma transposes only 16-bit operands (PTX ISA: imm-trans-a/b for .f16/.bf16 only): tf32 B must be K-major
        _require(not (self.dtype == "tf32" and self.b_layout == "row"), "b_layout", self.b_layout,
                 "tf32 wgmma needs K-major B ('col'): wgmma transposes only 16-bit types")
        row = WGMMA_SWIZZLE_ROW_BYTES // DTYPE_BYTES[self.dtype]
        _require(self.bk % row == 0, "bk", self.bk, f"must be a multiple of {row} ({self.dtype}: one "
                                                    f"{WGMMA_SWIZZLE_ROW_BYTES}-byte swizzle row, the TMA box's inner extent)")
        acc = self.wm // WGMMA_M * self.bn // 2
        regs = WGMMA_CONSUMER_REGS if self.setmaxnreg else launch_bound_regs(self.threads)
        limit = regs - WGMMA_ACCUMULATOR_HEADROOM_REGS
        _require(acc <= limit, "bn", self.bn,
                 f"wm x bn = {self.wm} x {self.bn} gives {acc} fp32 accumulators per consumer thread, more than "
                 f"{limit} ({regs} registers {'after setmaxnreg' if self.setmaxnreg else 'under the launch bound'}"
                 f" less {WGMMA_ACCUMULATOR_HEADROOM_REGS} for addressing)")

    # ----- derived geometry ---------------------------------------------------------------
    @property
    def mma_shape(self) -> tuple[int, int, int]:
        """The instruction's (m, n, k), validated against the ISA."""
        ins, dt = self.instruction, self.dtype
        if ins == "wgmma":
            kk = WGMMA_K[dt]
            if self.shape == "auto":
                return (WGMMA_M, self.wn, kk)
            s = parse_shape(self.shape)
            ok = (s[0] == WGMMA_M and s[2] == kk and s[1] % WGMMA_N_STEP == 0 and WGMMA_N_STEP <= s[1] <= WGMMA_N_MAX)
            _require(ok, "shape", self.shape, f"wgmma on {dt} has shapes m64nNk{kk} with N a multiple of "
                                              f"{WGMMA_N_STEP} from {WGMMA_N_STEP} to {WGMMA_N_MAX} (PTX ISA)")
            return s
        shapes = ISA_SHAPES[(ins, dt)]
        if self.shape == "auto":
            return shapes[0]
        s = parse_shape(self.shape)
        _require(s in shapes, "shape", self.shape, f"{ins} on {dt} has shapes "
                 + ", ".join(("{}x{}x{}" if ins == "wmma" else "m{}n{}k{}").format(*x) for x in shapes) + " (PTX ISA)")
        return s

    @property
    def hardware_mma(self) -> tuple[tuple[int, int, int], int]:
        """(shape, count) of the hardware instruction one fragment operation issues."""
        if self.instruction == "wmma":
            return WMMA_LOWERS_TO[self.mma_shape]
        return self.mma_shape, 1

    @property
    def elem_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def out_bytes(self) -> int:
        return 4 if self.out_dtype == "fp32" else self.elem_bytes

    @property
    def warps(self) -> int:
        if self.instruction == "wgmma":  # the consumers, and a producer warpgroup beside a ring
            return (self.consumers + self.has_producer) * WARPGROUP_THREADS // WARP
        return (self.bm // self.wm) * (self.bn // self.wn)

    @property
    def has_producer(self) -> bool:
        """Whether a producer warpgroup fills the operand ring (wgmma with stages >= 2); with stages 1
        thread 0 of the first consumer issues the copies itself."""
        return self.instruction == "wgmma" and self.stages > 1

    @property
    def threads(self) -> int:
        return self.warps * WARP

    @property
    def grid(self) -> tuple[int, int, int]:
        """(blocks along N, blocks along M rounded up to whole clusters, 1)."""
        by = math.ceil(self.m / self.bm)
        by = math.ceil(by / self.cluster) * self.cluster
        return (math.ceil(self.n / self.bn), by, 1)

    @property
    def group_rows(self) -> int:
        """The tile order (:attr:`tilesim.program.Launch.group_rows`): the wgmma kernels walk groups of
        ``GROUP_TILE_ROWS / bm`` tile rows (even, so cluster pairs share their N tile) along N for L2
        reuse; the others start blocks in plain launch order (blockIdx.x along N)."""
        if self.instruction != "wgmma":
            return 1
        return max(2, GROUP_TILE_ROWS // self.bm // 2 * 2)

    def smem_row_bytes(self, cols: int) -> int:
        """Bytes of one shared row of ``cols`` elements in this layout."""
        return cols * self.elem_bytes + (PAD_BYTES if self.layout == "padded" else 0)

    @property
    def smem_tile_shapes(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """(rows, elements per row) of the A and the B tile in shared memory: A is [bm][bk];
        B is [bk][bn] (row) or [bn][bk] (col)."""
        b = (self.bk, self.bn) if self.b_layout == "row" else (self.bn, self.bk)
        return (self.bm, self.bk), b

    @property
    def stage_bytes(self) -> int:
        (ra, ca), (rb, cb) = self.smem_tile_shapes
        return ra * self.smem_row_bytes(ca) + rb * self.smem_row_bytes(cb)

    @property
    def smem_bytes(self) -> int:
        """Shared memory per block, as the validation kernels lay it out (validation/families/tc_gemm):

        * staging "global": a 2 KiB scratch per warp (zero-filled edge fragments and one C fragment);
        * wmma/mma_sync: the operand ring; a shared epilogue stages C as fp32 rows of bn + 8 floats
          reusing the ring; the wmma direct epilogue passes each 16x16 fp32 fragment through 1 KiB
          per warp (``store_matrix_sync`` to shared, then guarded stores);
        * wgmma: the ring (one buffer with stages 1; or a shared epilogue's C tile, rows padded by 32 B
          for fp32 and 16 B for 16-bit outputs) plus 1 KiB of alignment slack for the 1024-byte swizzle
          atoms and 1 KiB of static mbarriers."""
        if self.staging == "global":
            return self.warps * GLOBAL_SCRATCH_BYTES
        ring = self.stages * self.stage_bytes
        if self.instruction == "wgmma":
            if self.epilogue == "shared":
                ring = max(ring, self.bm * (self.bn * self.out_bytes + (32 if self.out_bytes == 4 else 16)))
            return ring + 2 * WGMMA_ALIGN_BYTES
        if self.epilogue == "shared":
            return max(ring, self.bm * (self.bn + C_PAD_FLOATS) * 4)
        if self.instruction == "wmma":
            return max(ring, self.warps * 16 * 16 * 4)
        return ring

    @property
    def accumulator_regs(self) -> int:
        """fp32 accumulator registers per thread of a warp (wmma/mma_sync) or consumer warpgroup (wgmma)."""
        lanes = WARPGROUP_THREADS if self.instruction == "wgmma" else WARP
        return self.wm * self.wn // lanes

    @property
    def register_terms(self) -> dict[str, int]:
        """The named terms of the blind register estimate of a wmma / mma_sync kernel (per thread):

        * ``accumulators``: the warp tile's fp32 accumulators, ``wm * wn / 32``;
        * ``step_fragments``: one k-step's operands, ``wm / 16`` A fragments of
          :data:`MMA_A_FRAG_REGS` and ``wn / 8`` B fragments of :data:`MMA_B_FRAG_REGS` (the hardware
          m16n8 operands; a WMMA fragment's duplicated registers are not kept);
        * ``tile_fragments``: the operands of every k-step of one staged k-tile (``bk / k`` steps with
          k the hardware instruction's :data:`MMA_HW_K`): the k-steps are unrolled between two barriers
          and ptxas hoists their ``ldmatrix`` / ``wmma.load`` ahead of the mma when registers allow
          (staging "global" loads one step at a time: ``tile_fragments`` = ``step_fragments``);
        * ``staging``: stages = 1 only, the 16-byte chunks each thread copies global -> registers ->
          shared, :data:`STAGING_REGS_PER_CHUNK` each; live before the barrier, not with the fragments;
        * ``base``: :data:`TC_REGS_BASE` (staging "global": :data:`TC_REGS_BASE_GLOBAL`).

        wgmma kernels have no such terms (their count is set by ``setmaxnreg``): an empty dict."""
        if self.instruction == "wgmma":
            return {}
        kk = MMA_HW_K[self.dtype]
        step = (self.wm // 16) * MMA_A_FRAG_REGS + (self.wn // 8) * MMA_B_FRAG_REGS
        ksteps = self.bk // kk if self.staging == "shared" else 1
        staging = 0
        if self.staging == "shared" and self.stages == 1:
            chunks = math.ceil((self.bm * self.bk + self.bk * self.bn) * self.elem_bytes / 16 / self.threads)
            staging = STAGING_REGS_PER_CHUNK * chunks
        return {"accumulators": self.accumulator_regs, "step_fragments": step, "tile_fragments": ksteps * step,
                "staging": staging, "base": TC_REGS_BASE if self.staging == "shared" else TC_REGS_BASE_GLOBAL}

    @property
    def estimated_regs(self) -> int:
        """Registers per thread: the override if given, else the blind rule from the kernel's structure.

        wgmma: the consumers' ``setmaxnreg`` count :data:`WGMMA_CONSUMER_REGS`, capped by the launch
        bound (``__launch_bounds__(threads, 1)``); without ``setmaxnreg`` (kernels written elsewhere,
        and the one-buffer rung, stages 1), what a consumer keeps live: its accumulators +
        :data:`TC_REGS_BASE`.

        wmma / mma_sync (:attr:`register_terms`): what the kernel needs at least, accumulators + the
        larger of one k-step's fragments and the synchronous staging + base; what it would use, the
        same with the whole k-tile's hoisted fragments. ptxas hoists only as far as the occupancy step
        of the least it needs allows (the most registers with the same blocks per SM: hoisting never
        costs a resident block), and no further than the launch bound (``__launch_bounds__(threads)``).
        A kernel whose least need is over the launch bound would spill: the estimate is then that need,
        so that check_fits rejects the configuration when it is over 255."""
        if self.regs_per_thread is not None:
            return self.regs_per_thread
        if self.instruction == "wgmma":
            if self.setmaxnreg:
                return min(WGMMA_CONSUMER_REGS, launch_bound_regs(self.threads))
            return self.accumulator_regs + TC_REGS_BASE
        t = self.register_terms
        want = t["accumulators"] + max(t["tile_fragments"], t["staging"]) + t["base"]
        need = t["accumulators"] + max(t["step_fragments"], t["staging"]) + t["base"]
        cap = launch_bound_regs(self.threads)
        if need > cap:
            return need
        step_top = need
        blocks = register_limited_blocks(need, self.threads)
        while step_top < cap and register_limited_blocks(step_top + 1, self.threads) == blocks:
            step_top += 1
        return min(want, step_top)

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    @property
    def min_hbm_bytes(self) -> float:
        return float((self.m * self.k + self.k * self.n) * self.elem_bytes + self.m * self.n * self.out_bytes)

    def with_(self, **changes) -> TcGemmConfig:
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def label(self) -> str:
        """A short readable name, unique for distinct tilings of one shape."""
        ins = {"wmma": "wmma", "mma_sync": "mma", "wgmma": "wgmma"}[self.instruction]
        parts = [ins + ("_global" if self.staging == "global" else ""), self.dtype]
        if self.out_dtype != "fp32":
            parts.append("out16" if self.elem_bytes == 2 else "outin")
        parts.append(f"B{self.b_layout}")
        parts.append(f"{self.bm}x{self.bn}x{self.bk}")
        if self.instruction != "wgmma":
            parts.append(f"w{self.wm}x{self.wn}")
        if self.shape != "auto":
            parts.append(self.shape)
        if self.staging == "shared":
            parts.append({"naive": "dense", "padded": "pad", "swizzled": "swz"}[self.layout])
            parts.append(f"s{self.stages}")
        if self.instruction == "wgmma":
            parts.append(f"c{self.consumers}")
            if self.cluster > 1:
                parts.append(f"cl{self.cluster}")
        if self.epilogue != "direct":
            parts.append("epi_smem")
        return "_".join(parts)


def check_fits(cfg: TcGemmConfig, hw) -> None:
    """Raise ``ValueError`` if the configuration cannot run on ``hw`` (naming field, value, limit)."""
    rate_shape, _ = cfg.hardware_mma
    try:
        hw.mma_flops_per_clk(rate_shape, cfg.dtype)
    except (KeyError, ValueError) as err:
        m, n, k = rate_shape
        raise ValueError(f"TcGemmConfig.instruction = {cfg.instruction!r} ({cfg.dtype}, shape m{m}n{n}k{k}): "
                         f"{hw.name} has no such tensor-core instruction ({err})") from None
    if cfg.instruction == "wgmma" or cfg.cluster > 1:
        limit = int(hw.get("max_cluster_blocks")) if hw.has("max_cluster_blocks") else 1
        if cfg.cluster > limit:
            raise ValueError(f"TcGemmConfig.cluster = {cfg.cluster}: exceeds max_cluster_blocks = {limit} on {hw.name}")
    if cfg.threads > hw.max_threads_per_block:
        raise ValueError(f"TcGemmConfig.threads = {cfg.threads} (from the tile) exceeds max_threads_per_block = "
                         f"{hw.max_threads_per_block} on {hw.name}")
    if cfg.smem_bytes > hw.smem_per_block_optin_bytes:
        raise ValueError(f"TcGemmConfig.smem_bytes = {cfg.smem_bytes} (stages x (A + B tiles)) exceeds "
                         f"smem_per_block_optin_bytes = {hw.smem_per_block_optin_bytes} on {hw.name}")
    what = "given" if cfg.regs_per_thread is not None else "estimated from the tile"
    if cfg.estimated_regs > hw.max_regs_per_thread:
        raise ValueError(f"TcGemmConfig.regs_per_thread = {cfg.estimated_regs} ({what}) exceeds "
                         f"max_regs_per_thread = {hw.max_regs_per_thread} on {hw.name}")
    occ = occupancy(hw, cfg.threads, cfg.estimated_regs, cfg.smem_bytes)
    if not occ.fits:
        raise ValueError(f"TcGemmConfig: a block of {cfg.threads} threads, {cfg.estimated_regs} registers per "
                         f"thread and {cfg.smem_bytes} B of shared memory does not fit on an SM of {hw.name} "
                         f"(limited by {occ.limiter})")
