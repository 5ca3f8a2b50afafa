"""Microbenchmarks of the H200's tensor cores, the paths that feed them and the SM clock under load (sm_90a).

``python -m validation.calibration.tensor_probe [--out DIR] [--quick] [--only GROUP[,GROUP]]`` runs
them on the current GPU (CuPy), prints a summary and writes ``<DIR>/tensor.json`` (default DIR:
``validation/results/<gpu>/calibration``). With ``--only`` the groups run replace theirs in an existing
tensor.json and the others stay (``group_runs`` says which run each group comes from:
:func:`merge_results`). Without a GPU it says so in one line and exits 2. The whole probe is meant to
take under about 120 s on an H200 (``--quick``: a few seconds, for tests).

The kernels are in ``tensor_probe.cu``, compiled by nvcc to an ``sm_90a`` cubin (wgmma needs the
``a`` target) and loaded by ``cupy.RawModule``; without nvcc, NVRTC through CuPy with
``--gpu-architecture=sm_90a``. When cuobjdump is there, each loop's SASS is read and its key
instruction counted (``sass`` in every result): a count that is not a whole multiple of the source's is
flagged ``sass_ok: false`` and :func:`fields` leaves that result out.

Every kernel writes one record per block (``REC`` longs: clock64 cycles and %globaltimer ns of its
timed part, between two ``__syncthreads``, and its %smid: :func:`parse_records`); the launches ask for
enough dynamic shared memory that one block runs per SM. Each configuration runs ``reps`` timed
launches (CUDA events around each, the launch queued behind a spin so the host's latency stays out),
after a sizing launch that scales ``iters`` to about ``target_s`` per launch. A rate "inside" is the
block's work over its clock64 cycles (median over blocks), one "outside" the whole grid's work over
the event time times the clock rate read from the device (clock64 / globaltimer); both are kept, with
median, p10, p90, min and max over the reps. ``value`` is the inside rate's median; ``clock_hz`` the
rows' clock64 / globaltimer clock.

Groups (``results[group][name]``):

* ``clock``: the SM clock under load, by clock64 / %globaltimer per block over launches of about
  ``CLOCK_HOLD_S`` and by nvidia-smi sampled every 50 ms in the background (``nvidia_smi``: every sample,
  and a summary of those stamped during the launch: clock, power, clock-limit reasons). Rows:
  ``spin_like_clock_probe`` (calibrate.py's clock_probe repeated: 5 ms of clock64 spinning),
  ``spin_all_sms`` (the same held long), ``ffma_all_sms``, ``ffma_one_warp_one_sm``,
  ``mma_sync_all_sms`` (full-rate mma.sync, random operands), ``wgmma_all_sms_zeros`` and
  ``wgmma_all_sms_random`` (full-rate wgmma m64n128k16), and ``globaltimer_resolution`` (ns per tick).
  ``clock_methods`` (top level) says what each method measures.
* ``mma_sync``: ``mma.sync.aligned`` m16n8k16 fp16 and bf16 with fp32 accumulation, m16n8k16 fp16
  with fp16 accumulation, m16n8k8 tf32; throughput with 1..32 warps per SM (``MMA_CHAINS`` independent
  accumulators per warp, ``MMA_CHAINS * MMA_ROUNDS`` mma per warp per iteration): FLOP/clk/SM and
  warp instructions/clk/SM; latency: one warp, one dependent chain, cycles per mma.
* ``wgmma``: ``wgmma.mma_async`` m64nNk16 fp16/bf16 and m64nNk8 tf32 (fp32 accumulation), N = 64,
  128, 256, A and B in shared memory through 128-byte-swizzle K-major descriptors (``_ss``), plus
  m64n128k16 fp16 with A from registers (``_rs``); throughput with 1, 2, 3 warpgroups per SM
  (``WG_PER_GROUP`` wgmma per commit group, ``wait_group 1``: up to two groups in flight): FLOP/clk/SM;
  latency (one warpgroup, ``wait_group 0`` after each wgmma): cycles per wgmma.
* ``ldmatrix``: ``.x1/.x2/.x4`` and their ``.trans``, rows conflict-free or 2-, 4-, 8-way conflicted
  (rows of a matrix 128 bytes apart on the same banks), 1..32 warps per SM, ``LD_UNROLL`` loads per warp
  per iteration, each at its own address (a shift common to all lanes, varied per iteration) and every
  result XORed into a sink: warp instructions per clock per SM, ``cycles_per_instr_per_sm`` (at one
  shared-memory wavefront per clock, tilesim.hardware.spec.SMEM_WAVEFRONTS_PER_CLK, the wavefronts an
  instruction costs once enough warps saturate the pipe; ``ideal_wavefronts``: matrices x ways) and
  ``bytes_per_clk_per_sm`` (128 bytes per matrix).
* ``cp_async``: 16-byte ``cp.async.cg`` into a G-stage shared ring from a 16 MiB (L2-resident) buffer,
  8, 16, 32 warps per SM x G = 1, 2, 4, 8 commit groups in flight per thread (``bytes_in_flight_per_sm``;
  configurations over the shared memory a block may have are skipped), every SM, and 1 SM with G = 4:
  bytes/clk/SM and ``chip_bytes_per_s``.
* ``tma``: ``cp.async.bulk.tensor.2d`` with mbarrier ``complete_tx``, one thread issuing through a ring
  of ``stages`` = 1..8 boxes in flight per SM (an mbarrier and expect_tx per stage; rings over the shared
  memory a block may have are skipped), boxes 64x64, 64x128 and 64x256 fp16 (rows x 64 halves) with
  128-byte swizzle, one block per SM: ``l2_same`` (every SM walks the whole 16 MiB L2-resident tensor,
  starts spread), ``l2_disjoint`` (each SM cycles through its own 1/132 of it), ``l2`` (one SM), ``hbm``
  (a 4 GiB tensor, every box read once: fresh tiles each launch), on every SM (``sms132``) and on one
  (``sms1``): bytes/clk/SM, ``cycles_per_box``, ``chip_bytes_per_s`` and ``clock_hz`` per row; ``.lat``
  rows: one SM, one box in flight (cycles per load, issue to mbarrier completion); ``box8x64`` rows
  (1 KiB boxes, 8 in flight): the issuing loop's own limit, to compare ``cycles_per_box`` with. The tensor maps come
  from ``cuTensorMapEncodeTiled`` (libcuda.so.1 through ctypes: :func:`encode_tensor_map_2d`).
  ``mbarrier.round_trip``: one thread's ``mbarrier.arrive`` + ``try_wait.parity``, cycles per pair.

:func:`fields` maps the results onto the calibrated profile's keys (``mma.<shape>.<dtype>`` FLOP/clk/SM
and ``pipes.tensor.latency_cycles``); validation/calibration/calibrate.py merges them
(``--from-json`` with ``tensor.json`` beside ``calibration.json``).
"""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from validation.calibration import probe_common as pc
from validation.calibration.probe_common import REPO_ROOT, ptxas_warnings, summarize
from validation.calibration.probe_common import gpu_missing as _gpu_missing

KERNEL_SRC = Path(__file__).resolve().with_suffix(".cu")
RESULT_FILE = "tensor.json"
ARCH = "sm_90a"  # wgmma.mma_async and the tensor-map fences need the sm_90a target (PTX ISA)

# must match the #defines of tensor_probe.cu (tests/test_tensor_probe.py checks that they do)
REC = 4  # TP_REC
MMA_CHAINS = 8
MMA_ROUNDS = 2
LAT_STEPS = 32
WG_PER_GROUP = 4
WG_A_BYTES = 8192
LD_UNROLL = 8
LD_MATRIX_STRIDE = 2048
LD_SMEM_BYTES = 8192
CPA_UNROLL = 2
TMA_TILES_X_SHIFT = 6
MBAR_STEPS = 8
CLK_CHAINS = 8
CLK_STEPS = 16
GT_SAMPLES = 4096

ONE_BLOCK_SMEM_BYTES = 120 * 1024  # > half of the 228 KiB an SM has (H100 whitepaper): one block per SM
MAX_BLOCK_SMEM_BYTES = 227 * 1024  # the most dynamic shared memory one block may opt in to (CUDA C++ guide, cc 9.0)
SMEM_ALIGN_PAD_BYTES = 1024  # the wgmma and TMA kernels align their tiles to 1024 bytes (128-byte swizzle)
GATE_SPIN_CYCLES = 200_000  # about 100 us at 2 GHz: covers the host's enqueueing of the timed launch
REPS = 10
QUICK_REPS = 3
TARGET_S = 1.0e-3  # each timed launch lasts about this long
QUICK_TARGET_S = 0.2e-3
MAX_ITERS = 1 << 22
SIZING_STEPS = 3  # sizing launches at most (each rescales iters towards target_s)

WARPS = (1, 2, 4, 8, 16, 32)
QUICK_WARPS = (4, 32)
WARPGROUPS = (1, 2, 3)
LD_WAYS = (1, 2, 4, 8)
QUICK_LD_WAYS = (1, 8)
LD_SHIFT_MASK = 7  # ldmatrix address sets per warp: (it & 7) x LD_UNROLL x 16 bytes (tensor_probe.cu)
CPA_WARPS = (8, 16, 32)
CPA_GROUPS = (1, 2, 4, 8)  # commit groups in flight per thread (kernels cpasync_g<G>)
QUICK_CPA = ((8, 4), (32, 4))  # (warps, groups) in --quick

L2_BUFFER_BYTES = 16 << 20  # well inside the ~45 MiB the H200's L2 keeps (validation/calibration/README.md)
HBM_TENSOR_BYTES = 4 << 30
QUICK_HBM_TENSOR_BYTES = 256 << 20
TMA_COLS = 4096  # halves per row of the TMA tensors (8 KiB rows; 1 << TMA_TILES_X_SHIFT boxes per row)
TMA_BOX_COLS = 64  # 64 halves = 128 bytes: the widest box a 128-byte swizzle allows (cuda.h, cuTensorMapEncodeTiled)
TMA_BOX_ROWS = (64, 128, 256)  # 256: the largest box dimension cuTensorMapEncodeTiled accepts
QUICK_TMA_BOX_ROWS = (64, 256)
TMA_STAGES = (1, 2, 3, 4, 5, 6, 7, 8)  # boxes in flight per SM (those whose ring fits in shared memory)
# tma_pitch: the same loads from tensors whose rows lie 8192 + offset bytes apart, so that a box's
# 128-byte rows start off a 128-byte line (offset 16: seven rows in eight straddle two lines; a GEMM
# at K = 2008 fp16 has 4016-byte rows, 48 bytes past a line)
TMA_PITCH_OFFSETS_BYTES = (0, 16, 48, 64)
QUICK_TMA_PITCH_OFFSETS_BYTES = (0, 48)
TMA_PITCH_BOX_ROWS = (64, 128)
TMA_PITCH_STAGES = (2, 4)
# tma_share: 256x64 fp16 boxes (32 KiB, far from the issuing loop's limit) on every SM, each line of the
# 16 MiB L2-resident tensor read by G SMs (l2_share<G>, starts staggered): does the L2 serve a line that
# several SMs read faster than one only its SM reads?
TMA_SHARE_GROUPS = (1, 2, 3, 4, 8, 16, 33, 66, 132)
QUICK_TMA_SHARE_GROUPS = (1, 2, 132)
TMA_SHARE_BOX_ROWS = 256
TMA_SHARE_STAGES = (3, 5)
# tma_lag: the same boxes, blocks in groups of G walking the same tiles with each member `lag` boxes
# ahead of the one before (0: in step, l2_lock's merged reads), the groups total / groups tiles apart:
# how close in time must two SMs' reads of a line come to be served as one? (G, lags) pairs. A slice
# is walked in a cycle (G = 2: 7 boxes, G = 4: 15), so a lag d puts the nearest other reader of a box
# min(d, slice - (G - 1) d) boxes away: lags up to 3. (l2_same and tma_share's staggered readers
# come 3 boxes apart)
TMA_LAG_GROUPS = ((2, (0, 1, 2, 3)), (4, (0, 1, 2, 3)), (33, (0, 1, 2, 3)), (132, (0, 1, 2, 3)))
QUICK_TMA_LAG_GROUPS = ((2, (0, 1, 2, 3)), (132, (0, 1, 2, 3)))  # at 5 in flight only (QUICK_TMA_LAG_STAGES)
QUICK_TMA_LAG_STAGES = (5,)
QUICK_TMA_STAGES = (1, 4)
TMA_ISSUE_BOX_ROWS = 8  # 64x8 boxes (1 KiB): the issue-bound reference rows
TMA_ISSUE_STAGES = 8

# the clock group (run_clock)
CLOCK_HOLD_S = 0.25  # each loaded launch lasts about this long (>= 200 ms: many nvidia-smi samples)
QUICK_CLOCK_HOLD_S = 0.05
CLOCK_PROBE_SPIN_CYCLES = 10_000_000  # calibrate.py bench_clock: clock_probe spins this long (about 5 ms)
CLOCK_PROBE_BLOCKS_PER_SM = 4  # and launches 4 blocks of 128 threads per SM
NOMINAL_CLOCK_HZ = 1.98e9  # only to size the spin launches (the device's max SM clock, H200)
SMI_PERIOD_MS = 50
SMI_LEAD_S = 0.6  # nvidia-smi starts (NVML init) and samples the idle GPU this long before the launch
SMI_TAIL_S = 0.15
SMI_FIELDS = ("timestamp", "clocks.sm", "clocks.max.sm", "power.draw", "clocks_throttle_reasons.active")
SMI_FIELDS_NEW = ("timestamp", "clocks.sm", "clocks.max.sm", "power.draw", "clocks_event_reasons.active")

# cuda.h (CUDA 13.0) enum values for cuTensorMapEncodeTiled
CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6
CU_TENSOR_MAP_INTERLEAVE_NONE = 0
CU_TENSOR_MAP_SWIZZLE_128B = 3
CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3
CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0
TENSOR_MAP_BYTES = 128  # sizeof(CUtensorMap), 64-byte aligned


@dataclass(frozen=True)
class MmaKind:
    """One matrix instruction: its throughput and latency kernels, shape, types and profile key."""

    name: str
    tp_kernel: str
    lat_kernel: str
    shape: tuple[int, int, int]
    in_dtype: str
    acc_dtype: str
    profile_key: str | None  # mma.<shape>.<dtype> of the hardware data files; None: no key (fp16 accumulation)
    sass_op: str
    warpgroup: bool = False  # wgmma: FLOP per warpgroup instruction, 128 threads per unit

    @property
    def flop(self) -> int:
        m, n, k = self.shape
        return 2 * m * n * k


MMA_SYNC = (
    MmaKind("m16n8k16_fp16_f32", "mma_tp_f16_f32", "mma_lat_f16_f32", (16, 8, 16), "fp16", "fp32",
            "mma.m16n8k16.fp16", "HMMA"),
    MmaKind("m16n8k16_bf16_f32", "mma_tp_bf16_f32", "mma_lat_bf16_f32", (16, 8, 16), "bf16", "fp32",
            "mma.m16n8k16.bf16", "HMMA"),
    MmaKind("m16n8k8_tf32_f32", "mma_tp_tf32_f32", "mma_lat_tf32_f32", (16, 8, 8), "tf32", "fp32",
            "mma.m16n8k8.tf32", "HMMA"),
    MmaKind("m16n8k16_fp16_f16", "mma_tp_f16_f16", "mma_lat_f16_f16", (16, 8, 16), "fp16", "fp16", None, "HMMA"),
)

_WG_K = {"fp16": 16, "bf16": 16, "tf32": 8}
_WG_CU = {"fp16": "f16", "bf16": "bf16", "tf32": "tf32"}
WGMMA = tuple(
    MmaKind(f"m64n{n}k{_WG_K[dt]}_{dt}_f32_ss", f"wg_{_WG_CU[dt]}_n{n}", f"wg_{_WG_CU[dt]}_n{n}", (64, n, _WG_K[dt]),
            dt, "fp32", f"mma.m64nNk{_WG_K[dt]}.{dt}", "HGMMA", warpgroup=True)
    for dt in ("fp16", "bf16", "tf32") for n in (64, 128, 256)
) + (MmaKind("m64n128k16_fp16_f32_rs", "wg_f16_rs_n128", "wg_f16_rs_n128", (64, 128, 16), "fp16", "fp32",
             None, "HGMMA", warpgroup=True),)

LDMATRIX = tuple((f"ld_x{m}{'_trans' if t else ''}", m, t) for t in (False, True) for m in (1, 2, 4))
"""(kernel, matrices per instruction, transposed)."""

SASS_KEYS = {  # kernel prefix -> (SASS mnemonic prefix, source instructions of it per loop iteration)
    "mma_tp_": ("HMMA", MMA_CHAINS * MMA_ROUNDS),
    "mma_lat_": ("HMMA", LAT_STEPS),
    "wg_": ("HGMMA", WG_PER_GROUP),
    "ld_": ("LDSM", LD_UNROLL),
    "cpasync_g": ("LDGSTS", CPA_UNROLL),
    "tma_tp": ("UTMALDG", 1),
    "clk_ffma": ("FFMA", CLK_CHAINS * CLK_STEPS),
}
GROUPS = ("clock", "mma_sync", "wgmma", "ldmatrix", "cp_async", "tma", "tma_pitch", "tma_share", "tma_lag")
RATE_GROUPS = GROUPS[1:]  # rows made by _Device.measure (SASS-checked)

DATASHEET_NOTE = "datasheet"


# ----- the per-block records (pure) -------------------------------------------------------------------
def parse_records(raw: Sequence[int], blocks: int) -> dict:
    """The per-block records a probe kernel wrote (``REC`` longs per block: cycles, ns, smid, 0).

    Returns ``cycles`` and ``ns`` (per block), ``smids``, ``distinct_sms``, ``clock_hz`` (median over
    blocks of cycles / seconds) and ``cycles_median``. ValueError when the record count is not
    ``blocks`` or a block recorded no cycles or no time.
    """
    cycles, ns, smids = pc.record_columns(raw, blocks, REC)[:3]
    pc.check_timed_blocks(cycles, ns)
    return {"cycles": cycles, "ns": ns, "smids": smids, "distinct_sms": len(set(smids)),
            "clock_hz": pc.median(pc.block_clocks_hz(cycles, ns)), "cycles_median": pc.median(cycles)}


def rep_rates(rec: dict, work_per_block: float, event_s: float | None) -> dict:
    """Rates of one rep: ``inside`` = median over blocks of work / cycles (per SM: one block each),
    ``outside`` = all blocks' work / (event seconds x clock) / blocks (None without an event time)."""
    per_block = sorted(work_per_block / c for c in rec["cycles"])
    outside = work_per_block / (event_s * rec["clock_hz"]) if event_s else None
    return {"inside": pc.percentile(per_block, 50), "outside": outside}


# ----- compile and read the SASS (no GPU needed) -------------------------------------------------------
def compile_cubin(workdir: Path, arch: str = ARCH, src: Path = KERNEL_SRC) -> tuple[Path, str]:
    """:func:`probe_common.compile_cubin` of tensor_probe.cu for sm_90a: (cubin, ptxas log)."""
    return pc.compile_cubin(workdir, arch, src)


def sass_checks(sass: str, kernels: Sequence[str]) -> dict:
    """Per kernel: the hot loop's key-instruction count, the source's per iteration, unroll, ok."""
    out = {}
    for k in kernels:
        key = next((v for p, v in SASS_KEYS.items() if k.startswith(p)), None)
        if key is None:
            continue
        op, per_iter = key
        try:
            body: Counter = pc.hot_loop(sass, k, op)
        except ValueError as exc:
            out[k] = {"op": op, "ok": False, "problem": str(exc)}
            continue
        n = pc.count_prefix(body, op)
        unroll = n / per_iter
        ok = n > 0 and unroll == int(unroll)
        out[k] = {"op": op, "count": n, "source_per_iter": per_iter, "unroll": unroll, "ok": ok,
                  "body": dict(sorted(body.items())),
                  "problem": "" if ok else f"{op}: {n} in the loop body, not a multiple of {per_iter}"}
    return out


# ----- the tensor map (libcuda through ctypes) ---------------------------------------------------------
def encode_tensor_map_2d(global_address: int, cols: int, rows: int, box_cols: int, box_rows: int,
                         elem_bytes: int = 2, libcuda: ctypes.CDLL | None = None,
                         pitch_bytes: int | None = None) -> bytes:
    """The 128-byte CUtensorMap of a row-major fp16 ``rows x cols`` tensor at ``global_address``, rows
    ``pitch_bytes`` apart (default: ``cols`` elements, dense), boxes of ``box_rows x box_cols``, 128-byte
    swizzle, L2 promotion 256 B (cuTensorMapEncodeTiled, cuda.h). ValueError on an argument the driver
    would refuse; RuntimeError with the driver's code otherwise."""
    pitch_bytes = cols * elem_bytes if pitch_bytes is None else pitch_bytes
    if pitch_bytes < cols * elem_bytes:
        raise ValueError(f"pitch_bytes = {pitch_bytes}: less than a row of {cols * elem_bytes} bytes")
    if elem_bytes != 2:
        raise ValueError(f"elem_bytes = {elem_bytes}: only fp16 (2) tensors are encoded here")
    if box_cols * elem_bytes > 128:
        raise ValueError(f"box_cols = {box_cols}: a 128-byte swizzle allows at most {128 // elem_bytes}")
    if not (1 <= box_rows <= 256 and 1 <= box_cols <= 256):
        raise ValueError(f"box = {box_rows}x{box_cols}: each box dimension must be in 1..256")
    if pitch_bytes % 16 or global_address % 16:
        raise ValueError("the row pitch and the address must be multiples of 16 bytes")
    lib = libcuda or ctypes.CDLL("libcuda.so.1")
    fn = lib.cuTensorMapEncodeTiled
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                   ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                   ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
                   ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    raw = ctypes.create_string_buffer(TENSOR_MAP_BYTES + 64)  # the map must be 64-byte aligned
    addr = (ctypes.addressof(raw) + 63) & ~63
    dims = (ctypes.c_uint64 * 2)(cols, rows)
    strides = (ctypes.c_uint64 * 1)(pitch_bytes)
    box = (ctypes.c_uint32 * 2)(box_cols, box_rows)
    estr = (ctypes.c_uint32 * 2)(1, 1)
    rc = fn(ctypes.c_void_p(addr), CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, ctypes.c_void_p(global_address), dims,
            strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if rc != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled returned CUresult {rc}")
    return ctypes.string_at(addr, TENSOR_MAP_BYTES)


# ----- GPU side ----------------------------------------------------------------------------------------
class _Device:
    """CuPy, the compiled module and device facts."""

    def __init__(self, reps: int, target_s: float):
        import cupy as cp  # noqa: PLC0415

        self.cp = cp
        self.reps = reps
        self.target_s = target_s
        self.sm_count, self.arch = pc.device_facts(cp)
        self._tmp = tempfile.TemporaryDirectory()
        built = pc.build_module(cp, KERNEL_SRC, ARCH, Path(self._tmp.name),
                                nvrtc_options=(f"--gpu-architecture={ARCH}",), want_sass=True)
        self.mod, self.sass = built.module, built.sass
        self.compile = {"arch": ARCH, "source": str(KERNEL_SRC.relative_to(REPO_ROOT)), "note": ""}
        if built.compiled_by == "nvcc":
            self.compile.update(compiled_by="nvcc", ptxas_warnings=ptxas_warnings(built.log))
            if built.sass_error:
                self.compile["note"] = f"{built.sass_error}: no SASS checks"
        else:  # no nvcc: NVRTC through CuPy
            self.compile.update(compiled_by="nvrtc", note=f"{built.error}: compiled by NVRTC, no SASS checks")
        self.out = cp.zeros(1 << 18, dtype=cp.float32)  # >= blocks x threads of any launch
        self._timer = pc.GatedTimer(cp, self.mod.get_function("tp_spin"), GATE_SPIN_CYCLES)

    def fn(self, name: str, smem: int):
        return pc.get_kernel(self.mod, name, smem)

    def launch_timed(self, f, grid: int, threads: int, args: tuple, smem: int) -> float:
        """Seconds of one launch between CUDA events, queued behind a spin (the host latency stays out)."""
        return self._timer.seconds(lambda: f((grid,), (threads,), args, shared_mem=smem))

    def measure(self, kernel: str, grid: int, threads: int, smem: int,
                args: Callable[[int, int], tuple], work_per_block: Callable[[int], float], *,
                iters0: int = 8, max_iters: int = MAX_ITERS, fixed_iters: int | None = None) -> dict:
        """``reps`` timed launches of ``kernel`` (after a warm-up); ``args(iters, rep)`` -> (its integer
        parameter, further arguments...): the launch passes (iters, param, clk, out, further...) (rep -1:
        warm-up and sizing). ``work_per_block(iters)`` -> work units of one block. ``iters`` is sized so
        that one launch lasts about ``target_s`` (unless ``fixed_iters``)."""
        cp = self.cp
        f = self.fn(kernel, smem)
        clk = cp.zeros(REC * grid, dtype=cp.int64)
        self.out.fill(0)

        def full(iters: int, rep: int) -> tuple:
            a = args(iters, rep)
            return (cp.int32(iters), cp.int32(a[0]), clk, self.out, *a[1:])

        f((grid,), (threads,), full(fixed_iters or iters0, -1), shared_mem=smem)  # warm-up (and caches)
        # a short launch overstates its time: resize
        iters = pc.size_iters(lambda it: self.launch_timed(f, grid, threads, full(it, -1), smem),
                              fixed_iters or iters0, self.target_s, max_iters, 0 if fixed_iters else SIZING_STEPS)
        runs = []
        for rep in range(self.reps):
            s = self.launch_timed(f, grid, threads, full(iters, rep), smem)
            rec = parse_records(clk.get(), grid)
            r = rep_rates(rec, work_per_block(iters), s)
            runs.append({"event_s": s, "clock_hz": rec["clock_hz"], "cycles_median": rec["cycles_median"],
                         "distinct_sms": rec["distinct_sms"], "rate_inside": r["inside"],
                         "rate_outside": r["outside"]})
        if float(self.out[:grid].max().get()) != 0.0:
            raise RuntimeError(f"{kernel}: a block reported an mbarrier wait that timed out")
        return {"kernel": kernel, "grid": grid, "threads": threads, "smem_bytes": smem, "iters": iters,
                "reps": self.reps, "runs": runs,
                **summarize([r["rate_inside"] for r in runs]),
                "outside": summarize([r["rate_outside"] for r in runs]),
                "clock_hz": summarize([r["clock_hz"] for r in runs])["value"],
                "cycles": summarize([r["cycles_median"] for r in runs]),
                "distinct_sms": min(r["distinct_sms"] for r in runs),
                **pc.kernel_attributes(f)}


def _scaled(res: dict, factor: float, unit: str, key: str) -> dict:
    """A second view of a rate: every summary statistic times ``factor``."""
    return {"unit": unit, **{k: res[k] * factor for k in ("value", "p10", "p90", "min", "max")}, "n": res["n"],
            "what": key}


def run_mma_sync(dev: _Device, warps_list: Sequence[int]) -> dict:
    out: dict = {}
    per_iter = MMA_CHAINS * MMA_ROUNDS
    for kind in MMA_SYNC:
        for w in warps_list:
            r = dev.measure(kind.tp_kernel, dev.sm_count, 32 * w, ONE_BLOCK_SMEM_BYTES,
                            lambda it, rep: (0,),
                            lambda it, w=w, kind=kind: float(w * it * per_iter * kind.flop))
            r.update(kind=kind.name, shape=list(kind.shape), in_dtype=kind.in_dtype, acc_dtype=kind.acc_dtype,
                     warps_per_sm=w, chains_per_warp=MMA_CHAINS, mma_per_warp_per_iter=per_iter,
                     flop_per_instr=kind.flop, unit="FLOP/clk/SM",
                     warp_instr_per_clk=_scaled(r, 1.0 / kind.flop, "warp instr/clk/SM", "mma.sync per clock"))
            out[f"{kind.name}.tp.w{w}"] = r
        r = dev.measure(kind.lat_kernel, 1, 32, 0, lambda it, rep: (0,),
                        lambda it: float(it * LAT_STEPS))
        lat = _latency(r, "cycles per dependent mma.sync")
        lat.update(kind=kind.name, shape=list(kind.shape), in_dtype=kind.in_dtype, acc_dtype=kind.acc_dtype,
                   steps_per_iter=LAT_STEPS)
        out[f"{kind.name}.lat"] = lat
    return out


def _latency(r: dict, what: str) -> dict:
    """A latency from a measure() whose work is dependent steps: cycles per step = 1 / (steps / cycles)."""
    inv = [1.0 / run["rate_inside"] for run in r["runs"]]
    return {**r, **summarize(inv), "unit": "cycles", "what": what, "outside": None}


def run_wgmma(dev: _Device, warpgroups: Sequence[int]) -> dict:
    out: dict = {}
    for kind in WGMMA:
        n = kind.shape[1]
        smem = max(ONE_BLOCK_SMEM_BYTES, WG_A_BYTES + n * 128 + SMEM_ALIGN_PAD_BYTES)
        for g in warpgroups:
            # the kernel's first wgmma (scale-d false, zeroing the accumulators) is timed too
            r = dev.measure(kind.tp_kernel, dev.sm_count, 128 * g, smem,
                            lambda it, rep: (0,),
                            lambda it, g=g, kind=kind: float(g * (it * WG_PER_GROUP + 1) * kind.flop))
            r.update(kind=kind.name, shape=list(kind.shape), in_dtype=kind.in_dtype, acc_dtype=kind.acc_dtype,
                     warpgroups_per_sm=g, wgmma_per_commit_group=WG_PER_GROUP, wait_group=1,
                     a_operand="registers" if kind.name.endswith("_rs") else "shared (descriptor)",
                     swizzle="128B", major="K", flop_per_instr=kind.flop, unit="FLOP/clk/SM",
                     instr_per_clk=_scaled(r, 1.0 / kind.flop, "warpgroup instr/clk/SM", "wgmma per clock"))
            out[f"{kind.name}.tp.wg{g}"] = r
        r = dev.measure(kind.lat_kernel, 1, 128, smem,
                        lambda it, rep: (1,),
                        lambda it: float(it + 1))
        lat = _latency(r, "cycles per wgmma, wait_group 0 after each (issue to completion)")
        lat.update(kind=kind.name, shape=list(kind.shape), in_dtype=kind.in_dtype, acc_dtype=kind.acc_dtype)
        out[f"{kind.name}.lat"] = lat
    return out


def run_ldmatrix(dev: _Device, ways_list: Sequence[int], warps_list: Sequence[int]) -> dict:
    out: dict = {}
    for kernel, mats, trans in LDMATRIX:
        for ways in ways_list:
            for w in warps_list:
                r = dev.measure(kernel, dev.sm_count, 32 * w, ONE_BLOCK_SMEM_BYTES,
                                lambda it, rep, ways=ways: (ways, dev.cp.int32(LD_SHIFT_MASK)),
                                lambda it, w=w: float(w * it * LD_UNROLL))
                r.update(ldmatrix_row(r, mats, trans, ways, w))
                out[f"{kernel}.ways{ways}.w{w}"] = r
    return out


def ldmatrix_row(r: dict, mats: int, trans: bool, ways: int, warps: int) -> dict:
    """The derived views of an ldmatrix rate row (warp instructions per clock per SM): cycles per
    instruction per SM (= shared-memory wavefronts per instruction once the pipe is saturated, at one
    wavefront per clock) and bytes per clock per SM (128 bytes per 8x8 b16 matrix)."""
    cyc = [1.0 / run["rate_inside"] for run in r["runs"]]
    return {"matrices": mats, "trans": trans, "conflict_ways": ways, "warps_per_sm": warps,
            "unit": "warp instr/clk/SM", "ideal_wavefronts": mats * ways, "loads_per_warp_per_iter": LD_UNROLL,
            "cycles_per_instr_per_sm": {"unit": "cycles (= wavefronts at one per clock)", **summarize(cyc)},
            "bytes_per_clk_per_sm": _scaled(r, 128.0 * mats, "bytes/clk/SM", "matrix bytes delivered per clock")}


def run_cp_async(dev: _Device, configs: Sequence[tuple[int, int, int]]) -> dict:
    """``configs``: (sms, warps per SM, commit groups in flight per thread)."""
    cp = dev.cp
    src = cp.zeros(L2_BUFFER_BYTES // 4, dtype=cp.uint32)  # 16 MiB, read as uint4
    mask16 = L2_BUFFER_BYTES // 16 - 1
    int(src.sum())  # read once: L2-resident before the first timed launch
    out: dict = {}
    for grid, w, groups in configs:
        threads = 32 * w
        ring = groups * threads * CPA_UNROLL * 16
        if ring > MAX_BLOCK_SMEM_BYTES:
            continue
        grid = dev.sm_count if grid == 0 else grid
        r = dev.measure(f"cpasync_g{groups}", grid, threads, max(ONE_BLOCK_SMEM_BYTES, ring),
                        lambda it, rep: (mask16, src),
                        lambda it, threads=threads: float(threads * it * CPA_UNROLL * 16))
        r.update(warps_per_sm=w, sms=grid, bytes_per_instr=16, groups_in_flight=groups,
                 bytes_in_flight_per_sm=ring, unit="bytes/clk/SM", source="l2", source_bytes=L2_BUFFER_BYTES,
                 chip_bytes_per_s=_chip_rate(r, threads * r["iters"] * CPA_UNROLL * 16 * grid))
        out[f"cp_async16.sms{grid}.w{w}.g{groups}"] = r
    return out


def cp_async_configs(quick: bool) -> list[tuple[int, int, int]]:
    """(sms, warps, groups) of the cp.async group; sms 0 means every SM."""
    if quick:
        return [(0, w, g) for w, g in QUICK_CPA] + [(1, 32, 4)]
    return [(0, w, g) for w in CPA_WARPS for g in CPA_GROUPS] + [(1, w, 4) for w in CPA_WARPS]


def _chip_rate(r: dict, bytes_per_launch: float) -> dict:
    return {"unit": "bytes/s", **summarize([bytes_per_launch / run["event_s"] for run in r["runs"]])}


def tma_walk(source: str, total_tiles: int, grid: int) -> tuple[int, int]:
    """(block_stride, period) of the tiles each block walks (tensor_probe.cu, TmaWalk): ``l2_same``:
    every block walks the whole tensor, the blocks' starts spread evenly; ``l2_disjoint``: block b
    cycles through its own 1/grid of the tensor; ``l2_share<G>``: block b cycles through slices
    b .. b + G - 1, so that G blocks read every slice, each starting at a different one (G = 1:
    disjoint); ``l2_lock``: every block walks the whole tensor from the same tile, in step (the same
    line asked for by every SM at about the same time); ``l2_lag<G>x<d>``: blocks in groups of G (see
    :func:`tma_lock_group`) each cycle through their group's slice of total / groups tiles; ``hbm`` is
    sized per launch by run_tma (fresh tiles)."""
    share = max(1, total_tiles // grid)
    if source.startswith("l2_lag"):
        group, _lag = tma_lock_group(source)
        slice_tiles = max(1, total_tiles // -(-grid // group))
        return slice_tiles, slice_tiles
    if source == "l2_same":
        return share, total_tiles
    if source == "l2_disjoint":
        return share, share
    if source == "l2_lock":
        return 0, total_tiles
    if source.startswith("l2_share") and source[len("l2_share"):].isdigit() and int(source[len("l2_share"):]) >= 1:
        return share, min(total_tiles, share * int(source[len("l2_share"):]))
    raise ValueError(f"source = {source!r}: expected l2_same, l2_disjoint, l2_lock, l2_share<G> or l2_lag<G>x<d>")


def tma_lock_group(source: str) -> tuple[int, int]:
    """(lock_group, lag_tiles) of tma_tp for a walk ``source``: ``l2_lag<G>x<d>``: blocks b in groups of
    G (b // G) share a slice, member b % G starting d tiles ahead of the member before it (d = 0: in
    step); every other walk (1, 0): each block its own start."""
    if not source.startswith("l2_lag"):
        return 1, 0
    g, sep, d = source[len("l2_lag"):].partition("x")
    if not (sep and g.isdigit() and d.isdigit() and int(g) >= 1):
        raise ValueError(f"source = {source!r}: expected l2_lag<G>x<d> with G >= 1 and d >= 0")
    return int(g), int(d)


def tma_ring_bytes(stages: int, box_bytes: int) -> int:
    """Dynamic shared memory of tma_tp: the ring, the 1024-byte alignment pad, one mbarrier per stage."""
    return stages * box_bytes + SMEM_ALIGN_PAD_BYTES + 8 * stages


def _tma_map(dev: _Device, t, box_rows: int) -> tuple:
    """(the tensor map of ``t`` in global memory, tiles of ``box_rows`` x 64 halves in ``t``)."""
    import numpy  # noqa: PLC0415

    rows = t.size // TMA_COLS
    tmap_bytes = encode_tensor_map_2d(t.data.ptr, TMA_COLS, rows, TMA_BOX_COLS, box_rows)
    return dev.cp.asarray(numpy.frombuffer(tmap_bytes, dtype=numpy.uint8)), (TMA_COLS // TMA_BOX_COLS) * (rows // box_rows)


def _tma_row(dev: _Device, t, tmap, total: int, box_rows: int, source: str, grid: int, stages: int,
             hbm_cursor: dict) -> dict:
    """One TMA configuration through _Device.measure, with its derived views."""
    cp = dev.cp
    box_bytes = TMA_BOX_COLS * box_rows * 2
    smem = max(ONE_BLOCK_SMEM_BYTES, tma_ring_bytes(stages, box_bytes))
    if source == "hbm":
        def args(it, rep):
            base = hbm_cursor["base"]  # block b reads tiles base + b * it + [0, it): each once, fresh
            hbm_cursor["base"] = (base + it * grid) % total
            return (stages, tmap, cp.int32(total), cp.int32(it), cp.int32(max(it, 1)), cp.int32(base),
                    cp.int32(box_rows), cp.int32(box_bytes), cp.int32(1), cp.int32(0))
        cap = max(stages, total // grid)
    else:
        int(t.view(cp.uint32).sum())  # every line read once: L2-resident again
        stride, period = tma_walk("l2_same" if source == "l2" else source, total, grid)
        lock_group, lag = tma_lock_group(source)

        def args(it, rep):
            return (stages, tmap, cp.int32(total), cp.int32(stride), cp.int32(period), cp.int32(0),
                    cp.int32(box_rows), cp.int32(box_bytes), cp.int32(lock_group), cp.int32(lag))
        cap = MAX_ITERS
    r = dev.measure("tma_tp", grid, 32, smem, args, lambda it: float(it * box_bytes), iters0=4 * stages, max_iters=cap)
    cyc = [box_bytes / run["rate_inside"] for run in r["runs"]]
    r.update(box=[box_rows, TMA_BOX_COLS], box_bytes=box_bytes, dtype="fp16", swizzle="128B", source=source,
             source_bytes=t.size * 2, stages=stages, bytes_in_flight_per_sm=stages * box_bytes, sms=grid,
             unit="bytes/clk/SM",
             cycles_per_box={"unit": "cycles per box per SM (stages 1: the latency)", **summarize(cyc)},
             chip_bytes_per_s=_chip_rate(r, r["iters"] * box_bytes * grid))
    return r


def run_tma(dev: _Device, hbm_bytes: int, box_rows_list: Sequence[int], stages_list: Sequence[int]) -> dict:
    cp = dev.cp
    out: dict = {}
    tensors = {"l2": cp.zeros(L2_BUFFER_BYTES // 2, dtype=cp.float16),
               "hbm": cp.zeros(hbm_bytes // 2, dtype=cp.float16)}
    hbm_cursor = {"base": 0}  # fresh HBM tiles for every launch (the cursor runs through the tensor)
    for box_rows in box_rows_list:
        box_bytes = TMA_BOX_COLS * box_rows * 2
        for tname, t in tensors.items():
            tmap, total = _tma_map(dev, t, box_rows)
            runs = ([(dev.sm_count, "l2_same"), (dev.sm_count, "l2_disjoint"), (1, "l2")] if tname == "l2"
                    else [(dev.sm_count, "hbm"), (1, "hbm")])
            for grid, source in runs:
                for stages in stages_list:
                    if tma_ring_bytes(stages, box_bytes) > MAX_BLOCK_SMEM_BYTES:
                        continue
                    r = _tma_row(dev, t, tmap, total, box_rows, source, grid, stages, hbm_cursor)
                    out[f"tma.box{box_rows}x{TMA_BOX_COLS}.{source}.sms{grid}.s{stages}"] = r
                    if grid == 1 and stages == 1:
                        lat = _latency({**r, "runs": [{**x, "rate_inside": x["rate_inside"] / box_bytes}
                                                      for x in r["runs"]]},
                                       "cycles per TMA load, one in flight (issue to mbarrier completion)")
                        lat.update(box=[box_rows, TMA_BOX_COLS], box_bytes=box_bytes, source=source, stages=1)
                        out[f"tma.box{box_rows}x{TMA_BOX_COLS}.{source}.lat"] = lat
    # the issuing loop's own limit: boxes so small (1 KiB) that no memory path limits them
    t = tensors["l2"]
    tmap, total = _tma_map(dev, t, TMA_ISSUE_BOX_ROWS)
    for grid, source in ((1, "l2"), (dev.sm_count, "l2_same")):
        r = _tma_row(dev, t, tmap, total, TMA_ISSUE_BOX_ROWS, source, grid, TMA_ISSUE_STAGES, hbm_cursor)
        r["what"] = ("issue-bound reference: cycles_per_box is the one-thread issuing loop's (and the TMA "
                     "unit's per-box) cost; a box row whose cycles_per_box is near it is issue-bound")
        out[f"tma.box{TMA_ISSUE_BOX_ROWS}x{TMA_BOX_COLS}.{source}.sms{grid}.s{TMA_ISSUE_STAGES}"] = r
    del tensors
    dev.cp.get_default_memory_pool().free_all_blocks()
    r = dev.measure("mbar_rt", 1, 32, 0, lambda it, rep: (0,),
                    lambda it: float(it * MBAR_STEPS))
    out["mbarrier.round_trip"] = _latency(r, "cycles per mbarrier.arrive + try_wait.parity (one thread)")
    return out


def run_tma_pitch(dev: _Device, offsets: Sequence[int], box_rows_list: Sequence[int],
                  stages_list: Sequence[int]) -> dict:
    """TMA loads of L2-resident boxes from tensors of 4096 halves a row whose rows lie ``8192 + offset``
    bytes apart (:data:`TMA_PITCH_OFFSETS_BYTES`), every SM (``l2_same``, ``l2_disjoint``) and one SM
    with one box in flight (``.lat``): does a box row that straddles two 128-byte lines cost more than
    its bytes?"""
    import numpy  # noqa: PLC0415

    cp = dev.cp
    out: dict = {}
    t = cp.zeros((L2_BUFFER_BYTES + 2 * max(offsets) * L2_BUFFER_BYTES // (TMA_COLS * 2)) // 2, dtype=cp.float16)
    for off in offsets:
        pitch = TMA_COLS * 2 + off
        for box_rows in box_rows_list:
            rows = min(t.size * 2 // pitch, L2_BUFFER_BYTES // (TMA_COLS * 2))
            rows -= rows % box_rows
            tmap_bytes = encode_tensor_map_2d(t.data.ptr, TMA_COLS, rows, TMA_BOX_COLS, box_rows, pitch_bytes=pitch)
            tmap = cp.asarray(numpy.frombuffer(tmap_bytes, dtype=numpy.uint8))
            total = (TMA_COLS // TMA_BOX_COLS) * (rows // box_rows)
            name = f"tma_pitch.box{box_rows}x{TMA_BOX_COLS}.off{off}"
            for source in ("l2_same", "l2_disjoint"):
                for stages in stages_list:
                    r = _tma_row(dev, t, tmap, total, box_rows, source, dev.sm_count, stages, {})
                    r.update(pitch_bytes=pitch, pitch_offset_bytes=off)
                    out[f"{name}.{source}.sms{dev.sm_count}.s{stages}"] = r
            r = _tma_row(dev, t, tmap, total, box_rows, "l2", 1, 1, {})
            lat = _latency({**r, "runs": [{**x, "rate_inside": x["rate_inside"] / r["box_bytes"]} for x in r["runs"]]},
                           "cycles per TMA load, one in flight (issue to mbarrier completion)")
            lat.update(box=[box_rows, TMA_BOX_COLS], box_bytes=r["box_bytes"], source="l2", stages=1,
                       pitch_bytes=pitch, pitch_offset_bytes=off)
            out[f"{name}.l2.lat"] = lat
    del t
    cp.get_default_memory_pool().free_all_blocks()
    return out


def run_tma_share(dev: _Device, groups: Sequence[int], box_rows: int, stages_list: Sequence[int]) -> dict:
    """TMA loads of L2-resident boxes on every SM, each line read by ``G`` SMs (:func:`tma_walk`'s
    ``l2_share<G>``) for each G of ``groups``: bytes/clk/SM and the chip's bytes/s per row."""
    cp = dev.cp
    out: dict = {}
    t = cp.zeros(L2_BUFFER_BYTES // 2, dtype=cp.float16)
    tmap, total = _tma_map(dev, t, box_rows)
    for g in groups:
        for stages in stages_list:
            if tma_ring_bytes(stages, TMA_BOX_COLS * box_rows * 2) > MAX_BLOCK_SMEM_BYTES:
                continue
            r = _tma_row(dev, t, tmap, total, box_rows, f"l2_share{g}", dev.sm_count, stages, {})
            r.update(readers_per_line=g)
            out[f"tma_share.box{box_rows}x{TMA_BOX_COLS}.g{g}.sms{dev.sm_count}.s{stages}"] = r
    for stages in stages_list:  # every SM on the same tile at the same time
        if tma_ring_bytes(stages, TMA_BOX_COLS * box_rows * 2) > MAX_BLOCK_SMEM_BYTES:
            continue
        r = _tma_row(dev, t, tmap, total, box_rows, "l2_lock", dev.sm_count, stages, {})
        r.update(readers_per_line=dev.sm_count, in_step=True)
        out[f"tma_share.box{box_rows}x{TMA_BOX_COLS}.lock.sms{dev.sm_count}.s{stages}"] = r
    del t
    cp.get_default_memory_pool().free_all_blocks()
    return out


def run_tma_lag(dev: _Device, groups: Sequence[tuple[int, Sequence[int]]], box_rows: int,
                stages_list: Sequence[int]) -> dict:
    """TMA loads of L2-resident boxes on every SM, blocks in groups of G cycling through their group's
    slice, each member ``lag`` boxes ahead of the one before (:func:`tma_walk`'s ``l2_lag<G>x<d>``),
    for each (G, lags) of ``groups``: bytes/clk/SM and the chip's bytes/s per row. Lag 0 is every
    member on the same box at once; a lag the L2 no longer serves as one read shows the rate of
    ``tma_share``'s staggered readers."""
    cp = dev.cp
    out: dict = {}
    t = cp.zeros(L2_BUFFER_BYTES // 2, dtype=cp.float16)
    tmap, total = _tma_map(dev, t, box_rows)
    for group, lags in groups:
        for lag in lags:
            for stages in stages_list:
                if tma_ring_bytes(stages, TMA_BOX_COLS * box_rows * 2) > MAX_BLOCK_SMEM_BYTES:
                    continue
                source = f"l2_lag{group}x{lag}"
                r = _tma_row(dev, t, tmap, total, box_rows, source, dev.sm_count, stages, {})
                slice_tiles, _ = tma_walk(source, total, dev.sm_count)
                r.update(lock_group=group, lag_boxes=lag, slice_boxes=slice_tiles)
                out[f"tma_lag.box{box_rows}x{TMA_BOX_COLS}.g{group}.lag{lag}.sms{dev.sm_count}.s{stages}"] = r
    del t
    cp.get_default_memory_pool().free_all_blocks()
    return out


# ----- the SM clock under load ---------------------------------------------------------------------------
CLOCK_METHODS = {
    "clock64_over_globaltimer": (
        "Per block: clock64 cycles / %globaltimer ns between two __syncthreads around the timed loop of a "
        "launch of about CLOCK_HOLD_S. clock64 counts the SM's own clock cycles; %globaltimer is the GPU's "
        "ns timer (its resolution: globaltimer_resolution). So the ratio is the SM clock averaged over that "
        "window while that work runs, on that SM."),
    "nvidia_smi": (
        "nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,<throttle/event reasons> -lms 50 in a "
        "background process: the driver's view (NVML) of the graphics/SM clock at each sample, the board "
        "power and the active clock-limit reasons (bit mask, nvml.h nvmlClocksEventReason*); 'during' keeps "
        "the samples stamped between the launch and its end."),
    "calibrate_clock_probe": (
        "validation/calibration/calibrate.py bench_clock: kernel clock_probe (microbench.cu), "
        "4 blocks of 128 threads per SM spinning on clock64 for 10M cycles (about 5 ms), per-block "
        "cycles / %globaltimer ns, median over blocks; one NVML clock reading right after each launch. "
        "It measures the SM clock of a short, nearly powerless load (no arithmetic, no memory): the row "
        "spin_like_clock_probe repeats it here, spin_all_sms holds it for CLOCK_HOLD_S."),
}


def parse_smi_csv(text: str, fields: Sequence[str]) -> list[dict]:
    """nvidia-smi ``--format=csv,noheader,nounits`` lines -> samples: ``t_s`` (epoch seconds, from the
    local-time stamp), ``sm_clock_hz``, ``max_sm_clock_hz``, ``power_w``, ``reasons`` (int mask, None when
    not reported). Lines that do not parse are skipped (nvidia-smi may print a warning line)."""
    out = []
    for line in text.splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) != len(fields):
            continue
        rec = dict(zip(fields, parts, strict=True))
        try:
            ts = pc.parse_smi_timestamp(rec["timestamp"])
            sample = {"t_s": ts, "sm_clock_hz": float(rec["clocks.sm"]) * 1e6,
                      "max_sm_clock_hz": float(rec["clocks.max.sm"]) * 1e6}
        except ValueError:
            continue
        try:
            sample["power_w"] = float(rec["power.draw"])
        except ValueError:
            sample["power_w"] = None
        reason = rec.get(fields[-1], "")
        try:
            sample["reasons"] = int(reason, 16)
        except ValueError:
            sample["reasons"] = None
        out.append(sample)
    return out


def smi_summary(samples: Sequence[dict], t0_s: float, t1_s: float) -> dict:
    """The samples stamped within [t0_s, t1_s] (the launch): count, SM clock and power summaries, the
    reason masks seen (hex) and their names."""
    during = [s for s in samples if t0_s <= s["t_s"] <= t1_s]
    out: dict = {"n": len(during), "n_all": len(samples)}
    if not during:
        return out
    out["sm_clock_hz"] = summarize([s["sm_clock_hz"] for s in during])
    out["max_sm_clock_hz"] = during[0]["max_sm_clock_hz"]
    power = [s["power_w"] for s in during if s.get("power_w") is not None]
    if power:
        out["power_w"] = summarize(power)
    masks = sorted({s["reasons"] for s in during if s.get("reasons") is not None})
    out["reasons_hex"] = [f"0x{m:x}" for m in masks]
    out["reasons"] = sorted({name for m in masks for name in pc.clock_reason_names(m)})
    return out


class _SmiSampler:
    """nvidia-smi -lms in the background for one launch (``start`` / ``stop`` -> samples)."""

    def __init__(self, pci_bus_id: str | None):
        self.exe = shutil.which("nvidia-smi")
        self.dev = ["-i", pci_bus_id] if pci_bus_id else []
        self.fields: tuple[str, ...] = SMI_FIELDS
        self.problem = "" if self.exe else "nvidia-smi is not on PATH"
        if self.exe:  # the older field name first (drivers that dropped it take the new one); the GPU
            # by PCI bus id, else nvidia-smi's default (the only GPU of the device machine)
            tries = [(d, f) for d in (self.dev, []) for f in (SMI_FIELDS, SMI_FIELDS_NEW)]
            for d, f in tries:
                p = subprocess.run([self.exe, *d, *pc.smi_query_args(f)], capture_output=True, text=True, timeout=30)
                if p.returncode == 0 and parse_smi_csv(p.stdout, f):
                    self.dev, self.fields = d, f
                    break
            else:
                self.problem = f"nvidia-smi query failed: {(p.stderr or p.stdout).strip()[-300:]}"
        self.proc: subprocess.Popen | None = None
        self._out = None

    def start(self) -> None:
        if self.problem:
            return
        self._out = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([self.exe, *self.dev, *pc.smi_query_args(self.fields), "-lms", str(SMI_PERIOD_MS)],
                                     stdout=self._out, stderr=subprocess.DEVNULL, text=True)

    def stop(self) -> list[dict]:
        if self.proc is None:
            return []
        pc.stop_process(self.proc, timeout_s=10)
        self._out.seek(0)
        text = self._out.read()
        self._out.close()
        self.proc = None
        return parse_smi_csv(text, self.fields)


def clock_row(name: str, kernel: str, grid: int, threads: int, iters: int, event_s: float, rec: dict,
              tick_ns: float | None, samples: list[dict], t0_s: float, t1_s: float, what: str) -> dict:
    """One clock row: per-block clock64 / globaltimer (``value``: median over blocks, Hz), the window,
    the globaltimer's share of the error, the whole launch's cycles over the event time, nvidia-smi."""
    hz = pc.block_clocks_hz(rec["cycles"], rec["ns"])
    window_ns = pc.percentile(sorted(rec["ns"]), 50)
    return {"kernel": kernel, "grid": grid, "threads": threads, "iters": iters, "what": what, "unit": "Hz",
            **summarize(hz), "distinct_sms": rec["distinct_sms"], "event_s": event_s,
            "window_ns_median": window_ns,
            "globaltimer_rel_error_bound": (2.0 * tick_ns / window_ns) if tick_ns else None,
            "event_clock_hz": rec["cycles_median"] / event_s,  # includes launch and drain: a lower bound
            "nvidia_smi": {"during": smi_summary(samples, t0_s, t1_s), "samples": samples,
                           "launch_t_s": [t0_s, t1_s]}}


def run_clock(dev: _Device, hold_s: float) -> dict:
    """The SM clock under several loads (CLOCK_METHODS says what each method measures)."""
    cp = dev.cp
    out: dict = {}
    gt = cp.zeros(REC, dtype=cp.int64)
    dev.mod.get_function("clk_gtick")((1,), (32,), (cp.int32(0), cp.int32(0), gt, dev.out))
    lo, hi, steps, span = (int(v) for v in gt.get())
    tick = float(lo) if lo > 0 else None
    out["globaltimer_resolution"] = {"value": float(lo), "unit": "ns", "p10": float(lo), "p90": float(hi),
                                     "min": float(lo), "max": float(hi), "n": steps, "reads": GT_SAMPLES,
                                     "span_ns": span, "what": "smallest (value) and largest nonzero step of "
                                     "%globaltimer over back-to-back reads by one thread"}
    try:
        pci = cp.cuda.Device().pci_bus_id
    except Exception:  # noqa: BLE001
        pci = None
    smi = _SmiSampler(pci)
    wg = next(k for k in WGMMA if k.tp_kernel == "wg_f16_n128")
    wg_smem = max(ONE_BLOCK_SMEM_BYTES, WG_A_BYTES + 128 * 128 + SMEM_ALIGN_PAD_BYTES)
    spin_blocks = CLOCK_PROBE_BLOCKS_PER_SM * dev.sm_count
    # name, kernel, grid, threads, smem, param, what, fixed iters (None: sized to hold_s)
    runs = (
        ("spin_like_clock_probe", "clk_spin", spin_blocks, 128, 0, 0,
         "clock64 spin, 4 blocks x 128 threads per SM, 10M cycles: calibrate.py's clock_probe",
         max(1, CLOCK_PROBE_SPIN_CYCLES // 1024)),
        ("spin_all_sms", "clk_spin", spin_blocks, 128, 0, 0, "clock64 spin as clock_probe, held for hold_s",
         max(1, int(hold_s * NOMINAL_CLOCK_HZ / 1024))),
        ("ffma_all_sms", "clk_ffma", dev.sm_count, 1024, ONE_BLOCK_SMEM_BYTES, 0,
         "FFMA only, 32 warps per SM x 8 chains, every SM", None),
        ("ffma_one_warp_one_sm", "clk_ffma", 1, 32, ONE_BLOCK_SMEM_BYTES, 0, "FFMA only, one warp on one SM", None),
        ("mma_sync_all_sms", "mma_tp_f16_f32", dev.sm_count, 256, ONE_BLOCK_SMEM_BYTES, 1,
         "mma.sync m16n8k16 fp16->fp32, 8 warps per SM x 8 chains (full rate), random operands, every SM", None),
        ("wgmma_all_sms_zeros", wg.tp_kernel, dev.sm_count, 256, wg_smem, 0,
         "wgmma m64n128k16 fp16->fp32, 2 warpgroups per SM (full rate), zero operands (as the rate rows), every SM",
         None),
        ("wgmma_all_sms_random", wg.tp_kernel, dev.sm_count, 256, wg_smem, 2,
         "wgmma m64n128k16 fp16->fp32, 2 warpgroups per SM (full rate), random operands, every SM", None),
    )
    for name, kernel, grid, threads, smem, param, what, fixed in runs:
        f = dev.fn(kernel, smem)
        clk = cp.zeros(REC * grid, dtype=cp.int64)

        def call(iters, f=f, grid=grid, threads=threads, smem=smem, param=param, clk=clk):
            return dev.launch_timed(f, grid, threads, (cp.int32(iters), cp.int32(param), clk, dev.out), smem)

        iters = fixed
        if iters is None:  # size to hold_s from a ~5 ms launch
            iters = 64
            for _ in range(6):
                t = call(iters)
                if t >= 4e-3:
                    break
                iters *= 4
            iters = int(min(2**31 - 1, max(1, iters * hold_s / t)))
        smi.start()
        time.sleep(SMI_LEAD_S)
        t0 = time.time()
        event_s = call(iters)
        t1 = time.time()
        time.sleep(SMI_TAIL_S)
        samples = smi.stop()
        rec = parse_records(clk.get(), grid)
        out[name] = clock_row(name, kernel, grid, threads, iters, event_s, rec, tick, samples, t0, t1, what)
    if smi.problem:
        out["globaltimer_resolution"]["nvidia_smi_problem"] = smi.problem
    return out


def run_probes(quick: bool = False, only: Sequence[str] | None = None) -> dict:
    """The probe groups ``only`` (default: all of GROUPS) on the current GPU (JSON-ready): ``meta``,
    ``compile``, the groups, ``errors``, ``group_wall_s``, ``clock_methods``."""
    t0 = time.perf_counter()
    only = tuple(only or GROUPS)
    bad = [g for g in only if g not in GROUPS]
    if bad:
        raise ValueError(f"only = {bad}: groups are {', '.join(GROUPS)}")
    meta = pc.collect_metadata()  # first: a failing probe below may leave the CUDA context unusable
    dev = _Device(QUICK_REPS if quick else REPS, QUICK_TARGET_S if quick else TARGET_S)
    warps = QUICK_WARPS if quick else WARPS
    res: dict = {"meta": meta, "compile": dev.compile, "errors": {}, "clock_methods": CLOCK_METHODS}
    runners = {
        "clock": lambda: run_clock(dev, QUICK_CLOCK_HOLD_S if quick else CLOCK_HOLD_S),
        "mma_sync": lambda: run_mma_sync(dev, warps),
        "wgmma": lambda: run_wgmma(dev, (1, 3) if quick else WARPGROUPS),
        "ldmatrix": lambda: run_ldmatrix(dev, QUICK_LD_WAYS if quick else LD_WAYS, warps),
        "cp_async": lambda: run_cp_async(dev, cp_async_configs(quick)),
        "tma": lambda: run_tma(dev, QUICK_HBM_TENSOR_BYTES if quick else HBM_TENSOR_BYTES,
                               QUICK_TMA_BOX_ROWS if quick else TMA_BOX_ROWS,
                               QUICK_TMA_STAGES if quick else TMA_STAGES),
        "tma_pitch": lambda: run_tma_pitch(dev, QUICK_TMA_PITCH_OFFSETS_BYTES if quick else TMA_PITCH_OFFSETS_BYTES,
                                           TMA_PITCH_BOX_ROWS, TMA_PITCH_STAGES),
        "tma_share": lambda: run_tma_share(dev, QUICK_TMA_SHARE_GROUPS if quick else TMA_SHARE_GROUPS,
                                           TMA_SHARE_BOX_ROWS, TMA_SHARE_STAGES),
        "tma_lag": lambda: run_tma_lag(dev, QUICK_TMA_LAG_GROUPS if quick else TMA_LAG_GROUPS,
                                       TMA_SHARE_BOX_ROWS, QUICK_TMA_LAG_STAGES if quick else TMA_SHARE_STAGES),
    }
    for name in GROUPS:  # TMA last: a fault there cannot spoil the others
        if name not in only:
            continue
        g0 = time.perf_counter()
        try:
            res[name] = runners[name]()
        except Exception as exc:  # noqa: BLE001  (recorded, the other groups still run)
            res[name] = {}
            res["errors"][name] = f"{type(exc).__name__}: {exc}"
        res.setdefault("group_wall_s", {})[name] = time.perf_counter() - g0
    if dev.sass:
        ran = [g for g in RATE_GROUPS if g in res]
        kernels = sorted({r["kernel"] for g in ran for r in res[g].values()}
                         | ({r["kernel"] for r in res.get("clock", {}).values() if "kernel" in r}))
        checks = sass_checks(dev.sass, kernels)
        res["compile"]["sass_checks"] = checks
        for g in (*ran, *(["clock"] if "clock" in res else [])):
            for r in res[g].values():
                c = checks.get(r.get("kernel", ""))
                r["sass_ok"] = None if c is None else c["ok"]
    res["meta"].update({"probe_wall_s": time.perf_counter() - t0, "reps": dev.reps, "quick": quick,
                        "target_kernel_s": dev.target_s, "sm_count": dev.sm_count, "groups_run": list(only)})
    return res


def merge_results(old: dict | None, new: dict) -> dict:
    """``new`` (a run of some groups) over ``old`` (a recorded tensor.json): the groups ``new`` ran replace
    old ones (with their errors and wall times), the others stay; ``group_runs`` says which run (date,
    revision) each group comes from; meta and compile are the new run's."""
    ran = new["meta"].get("groups_run") or [g for g in GROUPS if g in new]
    stamp = pc.run_stamp(new["meta"])
    if not old:
        return {**new, "group_runs": {g: stamp for g in ran}}
    out = {**old, "meta": new["meta"], "compile": new["compile"], "clock_methods": new.get("clock_methods")}
    out["errors"] = {g: e for g, e in old.get("errors", {}).items() if g not in ran} | new.get("errors", {})
    out["group_wall_s"] = {**old.get("group_wall_s", {}), **new.get("group_wall_s", {})}
    runs = pc.previous_group_runs(old, GROUPS, lambda g: g in old)
    for g in ran:
        out[g] = new.get(g, {})
        runs[g] = stamp
    out["group_runs"] = runs
    return out


# ----- results -> calibrated-profile fields (pure) -------------------------------------------------------
def _best(results: dict, group: str, kind: MmaKind) -> tuple[str, dict] | None:
    """The throughput configuration of ``kind`` with the highest median (SASS check not failed)."""
    rows = [(k, r) for k, r in results.get(group, {}).items()
            if r.get("kind") == kind.name and ".tp." in k and r.get("sass_ok") is not False]
    return max(rows, key=lambda kr: kr[1]["value"]) if rows else None


def fields(results: dict, datasheet: dict | None = None, result_path: str = RESULT_FILE) -> dict:
    """Calibrated-profile key -> ``{value, unit, benchmark, n, p10, p90, min, max}`` from the results of
    :func:`run_probes` (or a recorded ``tensor.json``). Pure: no GPU, no I/O.

    ``mma.<shape>.<dtype>`` (FLOP/clk/SM): the best throughput configuration of the instructions that
    key covers (mma.sync per shape; wgmma over N = 64..256 and 1..3 warpgroups, shared-memory
    operands), its benchmark text naming the probe, ``result_path``, the configuration and the raw
    value, the other configurations' medians, and ``datasheet[key]`` (the data file's value) beside it.
    ``pipes.tensor.latency_cycles``: the dependent mma.sync m16n8k16 fp16 (fp32 accumulation) chain.
    """
    datasheet = datasheet or {}
    out: dict = {}
    for group, kinds in (("mma_sync", MMA_SYNC), ("wgmma", WGMMA)):
        for key in sorted({k.profile_key for k in kinds if k.profile_key}):
            cands = [b for k in kinds if k.profile_key == key and (b := _best(results, group, k))]
            if not cands:
                continue
            name, r = max(cands, key=lambda kr: kr[1]["value"])
            key_of = {m.name: m.profile_key for m in kinds}
            others = sorted((k, v["value"]) for k, v in results[group].items()
                            if ".tp." in k and k != name and key_of.get(v.get("kind")) == key)
            ds = datasheet.get(key)
            cfg = (f"{r.get('warps_per_sm')} warps/SM" if group == "mma_sync"
                   else f"{r.get('warpgroups_per_sm')} warpgroups/SM")
            bench = (f"tensor_probe {r['kernel']} ({result_path}: {group}[{name}] = {r['value']:.6g} FLOP/clk/SM, "
                     f"{cfg}, {r['iters']} iters x {r['reps']} reps, clock {r['clock_hz'] / 1e9:.4g} GHz"
                     + (f"; {DATASHEET_NOTE} {ds:g}" if ds is not None else "")
                     + (f"; others: {', '.join(f'{k} {v:.4g}' for k, v in others[:6])}" if others else "") + ")")
            out[key] = {"value": r["value"], "unit": "FLOP/clk/SM", "benchmark": bench,
                        **{k: r[k] for k in ("n", "p10", "p90", "min", "max")}, DATASHEET_NOTE: ds}
    lat = results.get("mma_sync", {}).get("m16n8k16_fp16_f32.lat")
    if lat and lat.get("sass_ok") is not False:
        out["pipes.tensor.latency_cycles"] = {
            "value": lat["value"], "unit": "cycles",
            "benchmark": f"tensor_probe {lat['kernel']} ({result_path}: mma_sync[m16n8k16_fp16_f32.lat] = "
                         f"{lat['value']:.6g} cycles per dependent mma.sync m16n8k16 fp16->fp32, one warp)",
            **{k: lat[k] for k in ("n", "p10", "p90", "min", "max")}}
    return out


def _extra(g: str, r: dict) -> str:
    """The second view a row carries, for the table: cycles per ldmatrix, chip bytes/s and clock of the
    copies, nvidia-smi's clock, power and reasons beside the clock rows."""
    if g == "ldmatrix" and "cycles_per_instr_per_sm" in r:
        return f"  {r['cycles_per_instr_per_sm']['value']:.3g} cyc/instr/SM"
    if g in ("cp_async", "tma", "tma_pitch", "tma_share", "tma_lag") and "chip_bytes_per_s" in r:
        return f"  chip {r['chip_bytes_per_s']['value'] / 1e12:.3g} TB/s @ {r.get('clock_hz', 0) / 1e9:.3g} GHz"
    if g == "clock" and "nvidia_smi" in r:
        d = r["nvidia_smi"]["during"]
        if not d.get("n"):
            return f"  nvidia-smi: no samples during ({d.get('n_all', 0)} in all)"
        pw = f", {d['power_w']['value']:.0f} W" if "power_w" in d else ""
        return (f"  nvidia-smi {d['sm_clock_hz']['value'] / 1e9:.3g} GHz ({d['n']} samples{pw}, "
                f"reasons {','.join(d['reasons']) or 'none'})")
    return ""


def format_table(results: dict) -> str:
    """One line per measurement: group, name, median, unit, p10..p90, a second view."""
    lines = [f"{'group':9s} {'measurement':44s} {'value':>11s} {'unit':22s} {'p10..p90':>23s}"]
    for g in GROUPS:
        for k, r in results.get(g, {}).items():
            ok = "" if r.get("sass_ok") is not False else "  SASS CHECK FAILED"
            lines.append(f"{g:9s} {k:44s} {r['value']:11.5g} {r['unit']:22s} "
                         f"{r['p10']:11.5g}..{r['p90']:<11.5g}{_extra(g, r)}{ok}")
    for g, e in results.get("errors", {}).items():
        lines.append(f"{g:9s} FAILED: {e}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = pc.probe_parser("tensor_probe", __doc__.splitlines()[0], RESULT_FILE, "few reps, short launches, fewer configurations")
    ap.add_argument("--only", default=None,
                    help=f"comma-separated groups to run ({','.join(GROUPS)}); the others in an existing "
                         "tensor.json are kept")
    args = ap.parse_args(argv)
    only = parse_only(args.only)
    why = _gpu_missing()
    if why:
        return pc.no_gpu_exit("tensor_probe", why)
    new = run_probes(quick=args.quick, only=only)
    from validation.harness.metadata import gpu_slug  # noqa: PLC0415

    slug = gpu_slug(new["meta"].get("device_name") or "unknown")
    path = pc.results_dir(args.out, new["meta"]) / RESULT_FILE
    old = json.loads(path.read_text()) if (only and path.exists()) else None
    results = merge_results(old, new)
    results["fields"] = fields(results, datasheet=datasheet_values(slug))
    pc.write_json(path, results)
    print(format_table(new))
    for k, e in results["fields"].items():
        print(f"field {k} = {e['value']:.6g} {e['unit']}" + (f" (datasheet {e[DATASHEET_NOTE]:g})"
                                                           if e.get(DATASHEET_NOTE) is not None else ""))
    if results["compile"].get("ptxas_warnings"):
        print("ptxas warnings:\n  " + "\n  ".join(results["compile"]["ptxas_warnings"]))
    print(f"wrote {path} in {results['meta']['probe_wall_s']:.1f} s")
    return 1 if new["errors"] else 0


def parse_only(text: str | None) -> tuple[str, ...] | None:
    """``--only`` text -> group names (None: every group); ValueError naming an unknown group."""
    return pc.parse_groups(text, GROUPS)


def datasheet_values(gpu: str) -> dict:
    """``mma.<shape>.<dtype>`` -> value of the GPU's data file (tilesim/hardware/data/<gpu>.toml), read-only;
    {} when there is no such file."""
    import tomllib  # noqa: PLC0415

    path = REPO_ROOT / "tilesim" / "hardware" / "data" / f"{gpu}.toml"
    if not path.exists():
        return {}
    raw = tomllib.loads(path.read_text())
    return {f"mma.{shape}.{dt}": float(e["value"])
            for shape, by_dt in raw.get("mma", {}).items() for dt, e in by_dt.items()}


if __name__ == "__main__":
    sys.exit(main())
