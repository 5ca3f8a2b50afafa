"""The GEMM family's knobs: one frozen, validated configuration shared by prediction and measurement.

C = alpha * A @ B + beta * C, all row-major; A is M x K, B is K x N, C is M x N.

Variants (the classic optimisation ladder), with the knobs each one reads:

================== ===========================================================================
``naive_uncoalesced`` one output per thread; threadIdx.x walks rows of C (uncoalesced). bm, bn
``naive``             one output per thread; threadIdx.x walks columns of C (coalesced). bm, bn
``smem``              shared-memory tiled, one output per thread. bm, bn, bk (threads = bm*bn)
``reg1d``             1-D register tiling: each thread a column of tm outputs. bm, bn, bk, tm
``reg2d``             2-D register tiling: each thread tm x tn outputs. bm, bn, bk, tm, tn
``warp``              warp tiling: warps own wm x wn, iterated in wmiter x wniter sub-tiles of
                      (tm x tn per thread). bm, bn, bk, wm, wn, wniter, tm, tn
================== ===========================================================================

Orthogonal knobs for the shared-memory variants: ``vectorize`` (16-byte global loads and A stored
transposed in shared memory; reg2d and warp only), ``smem_pad`` (elements of padding per shared
row), ``pipeline`` ("none", "regs" = register-prefetch double buffering with two shared buffers,
"cp_async" = a ``stages``-deep asynchronous-copy pipeline, 2..4 stages). ``stages`` left out (None)
is 1 without a pipeline and 2 with one; the configuration stores the resolved number.

The family is the fp32 FFMA ladder: ``dtype`` must be "fp32" (tensor-core GEMMs in fp16, bf16 or
tf32 are another family).

Every rule is checked in ``__post_init__`` and a broken one raises ``ValueError`` naming the field,
the value and the limit. Hardware limits (threads, registers, shared memory) are checked by
:func:`check_fits` against a :class:`~tilesim.hardware.HardwareSpec`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from tilesim.analytic.occupancy import occupancy

VARIANTS = ("naive_uncoalesced", "naive", "smem", "reg1d", "reg2d", "warp")
STAGED = ("smem", "reg1d", "reg2d", "warp")
PIPELINES = ("none", "regs", "cp_async")
STAGES = (1, 2, 3, 4)
#: stages when ``stages`` is left out: 1 without a pipeline, double buffering with one
DEFAULT_STAGES = {"none": 1, "regs": 2, "cp_async": 2}
#: element bytes per dtype: fp32 only (the FFMA ladder; tensor-core GEMM is another family)
DTYPE_BYTES = {"fp32": 4}
MAX_SMEM_PAD = 32

# ----- the blind register estimate (GemmConfig.register_terms / estimated_regs) -----------------------
# The constants were chosen on ptxas's counts of 2,047 configurations outside the suite (nvcc 13.0,
# sm_90; validation/studies/gemm_register_counts.py, fit.csv), term by term from the kernels' SASS
# (validation/families/gemm/gemm.cu); no measured time was read.
#: thread and block indices, M/N/K, alpha/beta, the A/B/C pointers, the shared-memory bases, k-loop state
REGS_BASE = 22
#: ptxas's count for every naive kernel (and the least of nearly every smem one) in fit.csv
REGS_FLOOR = 32
#: per global load of a k-tile: its 64-bit address and bounds predicate (pipelines none and regs)
REGS_PER_LOAD = 3
#: per global load while a k-tile's loads are in flight (pipeline none): its 64-bit address (the
#: bounds test is a predicate register); the loaded values are live beside it until the shared stores.
#: Chosen on fit.csv among the forms of validation/studies/gemm_register_forms.py (load_phase_max)
REGS_PER_LOAD_IN_FLIGHT = 2
#: per cp.async instruction of a k-tile: shared address, 64-bit global address, source size
REGS_PER_COPY = 3
#: per A fragment register when A rows are read as float4 along k (4 k-steps per load): the later
#: k-steps' A values stay live; half of the 3 extra on average at the peak (fit.csv)
REGS_KVEC_A_EXTRA = 1.5
#: ptxas lands on a register-limited occupancy step when the kernel is at most this many registers
#: over it (fit.csv: 127/128 registers for 128-thread blocks, 64 for 256, 32 for 1024 recur)
REGS_OCCUPANCY_SNAP = 8
# Register-file facts of the targets (the same on sm_80 and sm_90): CUDA C++ Programming Guide,
# "Technical Specifications per Compute Capability" (64K 32-bit registers per SM, 255 per thread,
# 2048 threads and 32 blocks per SM) and the CUDA occupancy calculator (allocation unit 256 registers
# per warp, four scheduler partitions).
REGS_PER_SM = 65536
REG_ALLOC_UNIT_PER_WARP = 256
REG_PARTITIONS = 4
MAX_REGS_PER_THREAD = 255
MAX_THREADS_PER_SM = 2048
MAX_BLOCKS_PER_SM = 32
WARP_SIZE = 32


def launch_bound_regs(threads: int) -> int:
    """The most registers per thread ptxas gives a kernel with ``__launch_bounds__(threads)``: one
    block must fit the register file (65536 / threads, in units of 8), at most 255."""
    per_thread = REGS_PER_SM // threads
    return MAX_REGS_PER_THREAD if per_thread > MAX_REGS_PER_THREAD else per_thread - per_thread % 8


def register_limited_blocks(regs: int, threads: int) -> int:
    """Blocks per SM allowed by registers (and the SM's thread and block limits) at ``regs`` per thread."""
    warps_per_block = math.ceil(threads / WARP_SIZE)
    per_warp = math.ceil(regs * WARP_SIZE / REG_ALLOC_UNIT_PER_WARP) * REG_ALLOC_UNIT_PER_WARP
    warps = REG_PARTITIONS * ((REGS_PER_SM // REG_PARTITIONS) // per_warp)
    return min(warps // warps_per_block, MAX_THREADS_PER_SM // threads, MAX_BLOCKS_PER_SM)


def snap_to_occupancy_step(regs: int, threads: int, slack: int = REGS_OCCUPANCY_SNAP) -> int:
    """``regs``, or the most registers that allow one more block per SM when that is at most
    ``slack`` fewer (and one more block is possible at all)."""
    blocks = register_limited_blocks(regs, threads)
    if blocks >= min(MAX_THREADS_PER_SM // threads, MAX_BLOCKS_PER_SM):
        return regs
    step = regs
    while step > 1 and register_limited_blocks(step, threads) == blocks:
        step -= 1
    return step if regs - step <= slack else regs


def regs_from_terms(terms: dict[str, float], threads: int) -> int:
    """The blind estimate from named register terms (:attr:`GemmConfig.register_terms`): their sum,
    rounded, at least :data:`REGS_FLOOR`; left as it is over the launch bound
    (:func:`launch_bound_regs`: ptxas would cap and spill, :func:`check_fits` rejects the tiling),
    else snapped down to an occupancy step within :data:`REGS_OCCUPANCY_SNAP`
    (:func:`snap_to_occupancy_step`)."""
    regs = max(round(sum(terms.values())), REGS_FLOOR)
    if regs > launch_bound_regs(threads):
        return regs
    return snap_to_occupancy_step(regs, threads)


def _require(cond: bool, name: str, value, rule: str) -> None:
    if not cond:
        raise ValueError(f"GemmConfig.{name} = {value!r}: {rule}")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_real(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _doc(default, doc: str, choices: tuple = ()):
    return field(default=default, metadata={"doc": doc, "choices": choices})


@dataclass(frozen=True)
class GemmConfig:
    """One GEMM problem and tiling. Sizes in elements; see the module docstring for the knobs."""

    m: int = field(metadata={"doc": "rows of A and C (the problem size)"})
    n: int = field(metadata={"doc": "columns of B and C (the problem size)"})
    k: int = field(metadata={"doc": "columns of A, rows of B (the problem size)"})
    variant: str = _doc("reg2d", "the kernel of the ladder: naive_uncoalesced / naive (one output per "
                                 "thread), smem (shared-memory tiled), reg1d / reg2d (1-D / 2-D register "
                                 "tiling), warp (warp tiling); see the module docstring", VARIANTS)
    bm: int = _doc(128, "block tile rows (of C); the naive kernels' block is bm x bn threads")
    bn: int = _doc(128, "block tile columns (of C)")
    bk: int = _doc(8, "k-tile depth staged in shared memory per k-step (smem, reg1d, reg2d, warp)")
    tm: int = _doc(8, "outputs per thread along M (reg1d, reg2d, warp); must divide bm")
    tn: int = _doc(8, "outputs per thread along N (reg2d, warp); must divide bn")
    wm: int = _doc(64, "warp tile rows (warp); must divide bm")
    wn: int = _doc(64, "warp tile columns (warp); must divide bn")
    wniter: int = _doc(4, "warp sub-tile iterations along N (warp); wmiter follows from "
                          "wm*wn / (32*tm*tn*wniter)")
    vectorize: bool = _doc(False, "16-byte global loads and A stored transposed in shared memory "
                                  "(reg2d and warp; bk, bn, k and n multiples of 4)")
    smem_pad: int = _doc(0, f"elements of padding per shared-memory row (0..{MAX_SMEM_PAD}; shared-memory "
                            "variants)")
    pipeline: str = _doc("none", "none; regs = register-prefetch double buffering (two shared buffers); "
                                 "cp_async = a stages-deep asynchronous-copy pipeline (shared-memory variants)",
                         PIPELINES)
    stages: int | None = _doc(None, "shared-memory buffers of the pipeline: 1 with pipeline none, 2 with "
                                    "regs, 2..4 with cp_async; None: 1 without a pipeline, 2 with one",
                              STAGES)
    dtype: str = _doc("fp32", "element type: fp32 only (this family is the FP32 FFMA ladder; tensor-core "
                              "GEMM is another family)", tuple(DTYPE_BYTES))
    alpha: float = _doc(1.0, "C = alpha * A @ B + beta * C: the scale of the product (a finite number)")
    beta: float = _doc(0.0, "the scale of the old C (a finite number); nonzero: C is read as well as written")
    regs_per_thread: int | None = _doc(None, "registers per thread (override of the estimate, e.g. the "
                                             "compiler's count); None: estimated_regs")

    def __post_init__(self) -> None:
        for f in ("m", "n", "k", "bm", "bn", "bk", "tm", "tn", "wm", "wn", "wniter"):
            v = getattr(self, f)
            _require(_is_int(v) and v > 0, f, v, "must be a positive integer")
        _require(self.variant in VARIANTS, "variant", self.variant, f"must be one of {', '.join(VARIANTS)}")
        _require(self.dtype in DTYPE_BYTES, "dtype", self.dtype,
                 "must be 'fp32': this family is the FP32 FFMA ladder (tensor-core GEMM in fp16/bf16/tf32 "
                 "is another family)")
        _require(self.pipeline in PIPELINES, "pipeline", self.pipeline, f"must be one of {', '.join(PIPELINES)}")
        if self.stages is None:  # resolved once: labels, rows and equality see the number
            object.__setattr__(self, "stages", DEFAULT_STAGES[self.pipeline])
        _require(_is_int(self.stages), "stages", self.stages, "must be an integer (or None for the default)")
        _require(isinstance(self.vectorize, bool), "vectorize", self.vectorize, "must be True or False")
        _require(_is_int(self.smem_pad) and 0 <= self.smem_pad <= MAX_SMEM_PAD, "smem_pad", self.smem_pad,
                 f"must be an integer in 0..{MAX_SMEM_PAD}")
        for f in ("alpha", "beta"):
            _require(_is_real(getattr(self, f)), f, getattr(self, f), "must be a finite number")
        if self.regs_per_thread is not None:
            _require(_is_int(self.regs_per_thread) and self.regs_per_thread > 0,
                     "regs_per_thread", self.regs_per_thread, "must be a positive integer or None")
        v = self.variant
        if v not in STAGED:
            _require(self.pipeline == "none", "pipeline", self.pipeline, f"variant {v} has no shared-memory pipeline; use 'none'")
            _require(not self.vectorize, "vectorize", self.vectorize, f"variant {v} has no vectorized form")
            _require(self.smem_pad == 0, "smem_pad", self.smem_pad, f"variant {v} uses no shared memory")
        if self.pipeline == "none":
            _require(self.stages == 1, "stages", self.stages, "must be 1 when pipeline is 'none'")
        elif self.pipeline == "regs":
            _require(self.stages == 2, "stages", self.stages, "must be 2 for register-prefetch double buffering")
        else:
            _require(2 <= self.stages <= 4, "stages", self.stages, "must be in 2..4 for a cp_async pipeline")
        if v in ("reg1d",):
            _require(self.bm % self.tm == 0, "tm", self.tm, f"must divide bm = {self.bm}")
        if v in ("reg2d", "warp"):
            _require(self.bm % self.tm == 0, "tm", self.tm, f"must divide bm = {self.bm}")
            _require(self.bn % self.tn == 0, "tn", self.tn, f"must divide bn = {self.bn}")
        if self.vectorize:
            _require(v in ("reg2d", "warp"), "vectorize", True, "applies to variants reg2d and warp only")
            _require(self.bk % 4 == 0, "bk", self.bk, "must be a multiple of 4 with vectorize (float4 loads)")
            _require(self.bn % 4 == 0, "bn", self.bn, "must be a multiple of 4 with vectorize")
            _require(self.k % 4 == 0 and self.n % 4 == 0, "k" if self.k % 4 else "n",
                     self.k if self.k % 4 else self.n, "must be a multiple of 4 with vectorize (16-byte aligned rows)")
        if v == "warp":
            _require(self.bm % self.wm == 0, "wm", self.wm, f"must divide bm = {self.bm}")
            _require(self.bn % self.wn == 0, "wn", self.wn, f"must divide bn = {self.bn}")
            _require(self.wn % self.wniter == 0, "wniter", self.wniter, f"must divide wn = {self.wn}")
            per_iter = self.wm * self.wn
            denom = 32 * self.tm * self.tn * self.wniter
            _require(per_iter % denom == 0, "wniter", self.wniter,
                     f"wm*wn = {per_iter} must be a multiple of 32*tm*tn*wniter = {denom}")
            wmiter = per_iter // denom
            _require(self.wm % wmiter == 0, "wm", self.wm, f"must be a multiple of wmiter = {wmiter}")
            sub_m, sub_n = self.wm // wmiter, self.wn // self.wniter
            _require(sub_m % self.tm == 0 and sub_n % self.tn == 0, "tm", self.tm,
                     f"warp sub-tile {sub_m}x{sub_n} must be a multiple of tm x tn = {self.tm}x{self.tn}")
            _require((sub_m // self.tm) * (sub_n // self.tn) == 32, "tn", self.tn,
                     f"warp sub-tile {sub_m}x{sub_n} must hold 32 threads of tm x tn = {self.tm}x{self.tn}")

    # ----- derived geometry ---------------------------------------------------------------
    @property
    def elem_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def wmiter(self) -> int:
        """Warp sub-tile iterations along M (warp variant)."""
        return (self.wm * self.wn) // (32 * self.tm * self.tn * self.wniter)

    @property
    def threads(self) -> int:
        v = self.variant
        if v in ("naive_uncoalesced", "naive", "smem"):
            return self.bm * self.bn
        if v == "reg1d":
            return (self.bm // self.tm) * self.bn
        if v == "reg2d":
            return (self.bm // self.tm) * (self.bn // self.tn)
        return (self.bm // self.wm) * (self.bn // self.wn) * 32


    @property
    def grid(self) -> tuple[int, int, int]:
        """(blocks along N, blocks along M, 1): blockIdx.x walks columns of C tiles."""
        return (math.ceil(self.n / self.bn), math.ceil(self.m / self.bm), 1)

    @property
    def uses_smem(self) -> bool:
        return self.variant in STAGED

    @property
    def smem_buffers(self) -> int:
        return {"none": 1, "regs": 2, "cp_async": self.stages}[self.pipeline]

    @property
    def smem_a_shape(self) -> tuple[int, int]:
        """(rows, row stride in elements) of one A buffer: [bk][bm+pad] transposed, else [bm][bk+pad]."""
        if self.vectorize:
            return (self.bk, self.bm + self.smem_pad)
        return (self.bm, self.bk + self.smem_pad)

    @property
    def smem_b_shape(self) -> tuple[int, int]:
        return (self.bk, self.bn + self.smem_pad)

    @property
    def smem_bytes(self) -> int:
        """Static shared memory per block (all pipeline buffers)."""
        if not self.uses_smem:
            return 0
        ra, sa = self.smem_a_shape
        rb, sb = self.smem_b_shape
        return self.smem_buffers * (ra * sa + rb * sb) * self.elem_bytes

    @property
    def register_terms(self) -> dict[str, float]:
        """The named terms of the blind register estimate (registers per thread), before the
        launch-bound cap and the occupancy snap of :attr:`estimated_regs`:

        * ``base``: :data:`REGS_BASE` (indices, sizes, alpha/beta, pointers, shared bases, k-loop);
        * ``accumulators``: the outputs a thread owns (1; tm; tm*tn; wmiter*wniter*tm*tn);
        * ``fragments``: one k-step's A and B operands (1+1; tm+1; tm+tn; wmiter*tm + wniter*tn);
        * ``a_kvec``: :data:`REGS_KVEC_A_EXTRA` per A fragment register when A sits in shared memory
          as [bm][bk] rows readable as 16-byte vectors along k (not vectorized, row stride and bk
          multiples of 4): each float4 carries 4 k-steps of one A row, so later k-steps' A stays live;
        * ``staging``: the global->shared transfers of one k-tile, ``loads`` = ceil(bm*bk/(w*threads))
          + ceil(bk*bn/(w*threads)) per thread (w = 4 vectorized, else 1): pipeline none
          :data:`REGS_PER_LOAD` per load (the 64-bit address and its bounds predicate; the loaded
          values are dead before the inner product starts); regs the same plus the w values each
          load keeps live across the inner product (the prefetched tile); cp_async
          :data:`REGS_PER_COPY` per cp.async instruction (4 per vectorized A load, A being stored
          transposed by 4-byte copies; 1 per vectorized B load when the B buffer rows are 16-byte
          aligned, else 4);
        * ``load_phase``: pipeline none only: what the load phase needs beyond the inner product's
          peak (``fragments + a_kvec + staging``), when a k-tile's loads are all in flight with their
          values (:data:`REGS_PER_LOAD_IN_FLIGHT` + w per load) before the shared stores; the peak
          is the larger phase, not their sum (the values are dead before the inner product).

        naive kernels: ``base`` only, floored at :data:`REGS_FLOOR` by :attr:`estimated_regs`."""
        v = self.variant
        if v in ("naive_uncoalesced", "naive"):
            return {"base": REGS_BASE, "accumulators": 1, "fragments": 2, "a_kvec": 0, "staging": 0,
                    "load_phase": 0}
        if v == "smem":
            acc, a, b = 1, 1, 1
        elif v == "reg1d":
            acc, a, b = self.tm, self.tm, 1
        elif v == "reg2d":
            acc, a, b = self.tm * self.tn, self.tm, self.tn
        else:
            acc = self.wmiter * self.wniter * self.tm * self.tn
            a, b = self.wmiter * self.tm, self.wniter * self.tn
        lda = self.smem_a_shape[1]
        kvec = v != "smem" and not self.vectorize and lda % 4 == 0 and self.bk % 4 == 0
        w = 4 if self.vectorize else 1
        a_loads = math.ceil(self.bm * self.bk / (w * self.threads))
        b_loads = math.ceil(self.bk * self.bn / (w * self.threads))
        load_phase = 0
        if self.pipeline == "none":
            staging = REGS_PER_LOAD * (a_loads + b_loads)
            in_flight = (REGS_PER_LOAD_IN_FLIGHT + w) * (a_loads + b_loads)
            load_phase = max(0, in_flight - (a + b + (REGS_KVEC_A_EXTRA * a if kvec else 0) + staging))
        elif self.pipeline == "regs":
            staging = (REGS_PER_LOAD + w) * (a_loads + b_loads)
        else:
            b_aligned = (self.bn + self.smem_pad) % 4 == 0
            copies = a_loads * w + b_loads * (1 if (not self.vectorize or b_aligned) else 4)
            staging = REGS_PER_COPY * copies
        return {"base": REGS_BASE, "accumulators": acc, "fragments": a + b,
                "a_kvec": REGS_KVEC_A_EXTRA * a if kvec else 0, "staging": staging, "load_phase": load_phase}

    @property
    def estimated_regs(self) -> int:
        """Registers per thread: the override if given, else the blind rule from the kernel's structure.

        The sum of :attr:`register_terms` (rounded), at least :data:`REGS_FLOOR`. Over the kernel's
        launch bound (``__launch_bounds__(threads)``, :func:`launch_bound_regs`) ptxas would cap the
        count and spill; the estimate is then returned uncapped, so that :func:`check_fits` rejects
        the tiling as before. Otherwise it is snapped down to the next register-limited occupancy step
        when that step lies within :data:`REGS_OCCUPANCY_SNAP` registers (:func:`snap_to_occupancy_step`:
        ptxas schedules a kernel that is a few registers over a step into it).

        Chosen on the compiler's counts of 2,047 kernels outside the suite
        (``validation/results/h200/studies/gemm_regs/fit.csv``, nvcc 13.0 sm_90, from
        ``python -m validation.studies.gemm_register_counts fit``); no time was read. Figures against
        the suite's NVRTC counts and a held-out set: ``tests/test_register_estimates.py``.
        """
        if self.regs_per_thread is not None:
            return self.regs_per_thread
        return regs_from_terms(self.register_terms, self.threads)

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    def with_(self, **changes) -> GemmConfig:
        """A copy with ``changes``; a new ``pipeline`` without ``stages`` takes its default stages."""
        if "pipeline" in changes and "stages" not in changes:
            changes["stages"] = None
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def label(self) -> str:
        """A short readable name, unique for distinct tilings of one shape."""
        v = self.variant
        parts = [v]
        if v in ("naive_uncoalesced", "naive"):
            parts.append(f"{self.bm}x{self.bn}")
        elif v == "smem":
            parts.append(f"{self.bm}x{self.bn}x{self.bk}")
        elif v == "reg1d":
            parts.append(f"{self.bm}x{self.bn}x{self.bk}_t{self.tm}")
        elif v == "reg2d":
            parts.append(f"{self.bm}x{self.bn}x{self.bk}_t{self.tm}x{self.tn}")
        else:
            parts.append(f"{self.bm}x{self.bn}x{self.bk}_w{self.wm}x{self.wn}i{self.wniter}_t{self.tm}x{self.tn}")
        if self.vectorize:
            parts.append("vec")
        if self.smem_pad:
            parts.append(f"pad{self.smem_pad}")
        if self.pipeline != "none":
            parts.append(f"{self.pipeline}{self.stages}")
        return "_".join(parts)


def check_fits(cfg: GemmConfig, hw) -> None:
    """Raise ``ValueError`` if the configuration cannot launch on ``hw`` (naming field, value, limit)."""
    if cfg.threads > hw.max_threads_per_block:
        raise ValueError(f"GemmConfig.threads = {cfg.threads} (from the tile) exceeds max_threads_per_block = "
                         f"{hw.max_threads_per_block} on {hw.name}")
    if cfg.threads % hw.warp_size and cfg.variant not in ("naive_uncoalesced", "naive", "smem"):
        raise ValueError(f"GemmConfig.threads = {cfg.threads} must be a multiple of the warp size {hw.warp_size}")
    if cfg.smem_bytes > hw.smem_per_block_optin_bytes:
        raise ValueError(f"GemmConfig.smem_bytes = {cfg.smem_bytes} exceeds smem_per_block_optin_bytes = "
                         f"{hw.smem_per_block_optin_bytes} on {hw.name}")
    what = "given" if cfg.regs_per_thread is not None else "estimated from the tile"
    if cfg.estimated_regs > hw.max_regs_per_thread:
        raise ValueError(f"GemmConfig.regs_per_thread = {cfg.estimated_regs} ({what}) exceeds "
                         f"max_regs_per_thread = {hw.max_regs_per_thread} on {hw.name}")
    occ = occupancy(hw, cfg.threads, cfg.estimated_regs, cfg.smem_bytes)
    if not occ.fits:  # within every per-block limit, yet no block is resident (e.g. the register file)
        name, value = {"registers": ("regs_per_thread", f"{cfg.estimated_regs} ({what})"),
                       "shared_memory": ("smem_bytes", cfg.smem_bytes)}.get(occ.limiter, ("threads", cfg.threads))
        raise ValueError(f"GemmConfig.{name} = {value}: a block of {cfg.threads} threads, {cfg.estimated_regs} "
                         f"registers per thread and {cfg.smem_bytes} B of shared memory does not fit on an SM "
                         f"of {hw.name} (limited by {occ.limiter})")
