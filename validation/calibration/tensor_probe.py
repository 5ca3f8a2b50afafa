"""Microbenchmarks of the H200's tensor cores and of the paths that feed them (sm_90a).

``python -m validation.calibration.tensor_probe [--out DIR] [--quick]`` runs them on the current GPU
(CuPy), prints a summary and writes ``<DIR>/tensor.json`` (default DIR:
``validation/results/<gpu>/calibration``). Without a GPU it says so in one line and exits 2. The whole
probe takes well under 90 s on an H200 (``--quick``: a few seconds, for tests).

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
median, p10, p90, min and max over the reps. ``value`` is the inside rate's median.

Groups (``results[group][name]``):

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
  (rows of a matrix 128 bytes apart on the same banks), 1..32 warps per SM: warp instructions per clock
  per SM and cycles per instruction per SM, which at one shared-memory wavefront per clock
  (tilesim.hardware.spec.SMEM_WAVEFRONTS_PER_CLK) is the wavefronts an instruction costs once enough
  warps saturate the pipe (``ideal_wavefronts``: matrices x ways).
* ``cp_async``: 16-byte ``cp.async.cg`` into a shared ring from a 16 MiB (L2-resident) buffer, 8, 16,
  32 warps, one SM alone and every SM: bytes/clk/SM (and bytes/s of the chip).
* ``tma``: ``cp.async.bulk.tensor.2d`` with mbarrier ``complete_tx``, boxes 64x64 and 64x128 fp16
  with 128-byte swizzle, from a 16 MiB tensor (L2-resident after a warm-up) and from a 2 GiB one
  (HBM: fresh boxes every launch), one SM alone and every SM: bytes/clk/SM and bytes/s of the chip;
  latency: one box in flight (issue to mbarrier completion), cycles per load. The tensor maps come
  from ``cuTensorMapEncodeTiled`` (libcuda.so.1 through ctypes: :func:`encode_tensor_map_2d`).
* ``mbarrier``: one thread's ``mbarrier.arrive`` + ``try_wait.parity`` round trip, cycles per pair.

:func:`fields` maps the results onto the calibrated profile's keys (``mma.<shape>.<dtype>`` FLOP/clk/SM
and ``pipes.tensor.latency_cycles``); validation/calibration/calibrate.py merges them
(``--from-json`` with ``tensor.json`` beside ``calibration.json``).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
KERNEL_SRC = Path(__file__).resolve().with_suffix(".cu")
RESULTS_ROOT = REPO_ROOT / "validation" / "results"
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
CPA_UNROLL = 2
CPA_STAGES = 4
MBAR_STEPS = 8

ONE_BLOCK_SMEM_BYTES = 120 * 1024  # > half of the 228 KiB an SM has (H100 whitepaper): one block per SM
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
CPA_WARPS = (8, 16, 32)

L2_BUFFER_BYTES = 16 << 20  # well inside the ~45 MiB the H200's L2 keeps (validation/calibration/README.md)
HBM_TENSOR_BYTES = 2 << 30
QUICK_HBM_TENSOR_BYTES = 256 << 20
TMA_COLS = 4096  # halves per row of the TMA tensors (8 KiB rows)
TMA_BOX_COLS = 64  # 64 halves = 128 bytes: the widest box a 128-byte swizzle allows (cuda.h, cuTensorMapEncodeTiled)
TMA_BOX_ROWS = (64, 128)
TMA_INFLIGHT_BYTES = 128 * 1024  # the throughput ring: stages = this / box bytes
TMA_LAT_ITERS = 512

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
    "cpasync_tp": ("LDGSTS", CPA_UNROLL),
    "tma_tp": ("UTMALDG", 1),
}

DATASHEET_NOTE = "datasheet"


# ----- statistics and the per-block records (pure) ---------------------------------------------------
def _percentile(sorted_vals: Sequence[float], q: float) -> float:
    pos = (len(sorted_vals) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] * (1.0 - (pos - lo)) + sorted_vals[hi] * (pos - lo)


def summarize(values: Sequence[float]) -> dict:
    """Median (``value``), p10, p90, min, max and count of per-rep values (ValueError if empty)."""
    vals = sorted(float(v) for v in values)
    if not vals:
        raise ValueError("summarize: values must not be empty")
    return {"value": _percentile(vals, 50), "p10": _percentile(vals, 10), "p90": _percentile(vals, 90),
            "min": vals[0], "max": vals[-1], "n": len(vals)}


def parse_records(raw: Sequence[int], blocks: int) -> dict:
    """The per-block records a probe kernel wrote (``REC`` longs per block: cycles, ns, smid, 0).

    Returns ``cycles`` and ``ns`` (per block), ``smids``, ``distinct_sms``, ``clock_hz`` (median over
    blocks of cycles / seconds) and ``cycles_median``. ValueError when the record count is not
    ``blocks`` or a block recorded no cycles or no time.
    """
    vals = [int(v) for v in raw]
    if blocks < 1 or len(vals) != REC * blocks:
        raise ValueError(f"records: {len(vals)} values for blocks = {blocks}; expected {REC} per block")
    cycles = vals[0::REC]
    ns = vals[1::REC]
    smids = vals[2::REC]
    bad = [b for b in range(blocks) if cycles[b] <= 0 or ns[b] <= 0]
    if bad:
        raise ValueError(f"records: blocks {bad[:8]} recorded cycles <= 0 or ns <= 0 (kernel did not run?)")
    hz = sorted(c / (t * 1e-9) for c, t in zip(cycles, ns, strict=True))
    return {"cycles": cycles, "ns": ns, "smids": smids, "distinct_sms": len(set(smids)),
            "clock_hz": _percentile(hz, 50), "cycles_median": _percentile(sorted(cycles), 50)}


def rep_rates(rec: dict, work_per_block: float, event_s: float | None) -> dict:
    """Rates of one rep: ``inside`` = median over blocks of work / cycles (per SM: one block each),
    ``outside`` = all blocks' work / (event seconds x clock) / blocks (None without an event time)."""
    per_block = sorted(work_per_block / c for c in rec["cycles"])
    outside = work_per_block / (event_s * rec["clock_hz"]) if event_s else None
    return {"inside": _percentile(per_block, 50), "outside": outside}


# ----- compile and read the SASS (no GPU needed) -------------------------------------------------------
def compile_cubin(workdir: Path, arch: str = ARCH, src: Path = KERNEL_SRC) -> tuple[Path, str]:
    """``nvcc -cubin -arch=<arch> -O3 -Xptxas -v`` of ``src`` into ``workdir``: (cubin, ptxas log);
    RuntimeError with nvcc's message when nvcc is missing or fails."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise RuntimeError("nvcc is not on PATH")
    cubin = Path(workdir) / f"{src.stem}.{arch}.cubin"
    p = subprocess.run([nvcc, "-cubin", f"-arch={arch}", "-O3", "-Xptxas", "-v", "-o", str(cubin), str(src)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"nvcc failed: {p.stderr.strip()[-4000:]}")
    return cubin, p.stderr


def ptxas_warnings(log: str) -> list[str]:
    """ptxas lines that warn (spills, wgmma serialization): an empty list means a clean compile."""
    return [ln.strip() for ln in log.splitlines()
            if "warning" in ln.lower() or "serialized" in ln.lower() or re.search(r"[1-9]\d* bytes spill", ln)]


def sass_checks(sass: str, kernels: Sequence[str]) -> dict:
    """Per kernel: the hot loop's key-instruction count, the source's per iteration, unroll, ok."""
    from validation.calibration.pipes_probe import count_prefix, hot_loop  # noqa: PLC0415

    out = {}
    for k in kernels:
        key = next((v for p, v in SASS_KEYS.items() if k.startswith(p)), None)
        if key is None:
            continue
        op, per_iter = key
        try:
            body: Counter = hot_loop(sass, k, op)
        except ValueError as exc:
            out[k] = {"op": op, "ok": False, "problem": str(exc)}
            continue
        n = count_prefix(body, op)
        unroll = n / per_iter
        ok = n > 0 and unroll == int(unroll)
        out[k] = {"op": op, "count": n, "source_per_iter": per_iter, "unroll": unroll, "ok": ok,
                  "body": dict(sorted(body.items())),
                  "problem": "" if ok else f"{op}: {n} in the loop body, not a multiple of {per_iter}"}
    return out


# ----- the tensor map (libcuda through ctypes) ---------------------------------------------------------
def encode_tensor_map_2d(global_address: int, cols: int, rows: int, box_cols: int, box_rows: int,
                         elem_bytes: int = 2, libcuda: ctypes.CDLL | None = None) -> bytes:
    """The 128-byte CUtensorMap of a row-major fp16 ``rows x cols`` tensor at ``global_address``, boxes of
    ``box_rows x box_cols``, 128-byte swizzle, L2 promotion 256 B (cuTensorMapEncodeTiled, cuda.h).
    ValueError on an argument the driver would refuse; RuntimeError with the driver's code otherwise."""
    if elem_bytes != 2:
        raise ValueError(f"elem_bytes = {elem_bytes}: only fp16 (2) tensors are encoded here")
    if box_cols * elem_bytes > 128:
        raise ValueError(f"box_cols = {box_cols}: a 128-byte swizzle allows at most {128 // elem_bytes}")
    if not (1 <= box_rows <= 256 and 1 <= box_cols <= 256):
        raise ValueError(f"box = {box_rows}x{box_cols}: each box dimension must be in 1..256")
    if (cols * elem_bytes) % 16 or global_address % 16:
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
    strides = (ctypes.c_uint64 * 1)(cols * elem_bytes)
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
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        self.sm_count = int(props["multiProcessorCount"])
        self.arch = f"sm_{props['major']}{props['minor']}"
        self.stream = cp.cuda.get_current_stream()
        self._tmp = tempfile.TemporaryDirectory()
        self.sass = None
        self.compile = {"arch": ARCH, "source": str(KERNEL_SRC.relative_to(REPO_ROOT)), "note": ""}
        try:
            cubin, log = compile_cubin(Path(self._tmp.name))
            self.mod = cp.RawModule(path=str(cubin))
            self.compile.update(compiled_by="nvcc", ptxas_warnings=ptxas_warnings(log))
            try:
                from validation.calibration.pipes_probe import disassemble  # noqa: PLC0415

                self.sass = disassemble(cubin)
            except RuntimeError as exc:
                self.compile["note"] = f"{exc}: no SASS checks"
        except RuntimeError as exc:  # no nvcc: NVRTC through CuPy
            self.mod = cp.RawModule(code=KERNEL_SRC.read_text(), options=(f"--gpu-architecture={ARCH}",))
            self.compile.update(compiled_by="nvrtc", note=f"{exc}: compiled by NVRTC, no SASS checks")
        self.out = cp.zeros(1 << 18, dtype=cp.float32)  # >= blocks x threads of any launch
        self._spin = self.mod.get_function("tp_spin")
        self._start, self._end = cp.cuda.Event(), cp.cuda.Event()

    def fn(self, name: str, smem: int):
        f = self.mod.get_function(name)
        if smem > 48 * 1024:
            f.max_dynamic_shared_size_bytes = smem
        return f

    def launch_timed(self, f, grid: int, threads: int, args: tuple, smem: int) -> float:
        """Seconds of one launch between CUDA events, queued behind a spin (the host latency stays out)."""
        self._spin((1,), (1,), (self.cp.int64(GATE_SPIN_CYCLES),))
        self._start.record(self.stream)
        f((grid,), (threads,), args, shared_mem=smem)
        self._end.record(self.stream)
        self._end.synchronize()
        return self.cp.cuda.get_elapsed_time(self._start, self._end) * 1e-3

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
        iters = fixed_iters or iters0
        for _ in range(0 if fixed_iters else SIZING_STEPS):  # a short launch overstates its time: resize
            t = self.launch_timed(f, grid, threads, full(iters, -1), smem)
            if t >= 0.5 * self.target_s or iters >= max_iters:
                break
            iters = int(min(max_iters, max(iters + 1, iters * self.target_s / max(t, 1e-7))))
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
        attrs = getattr(f, "attributes", None) or {}
        return {"kernel": kernel, "grid": grid, "threads": threads, "smem_bytes": smem, "iters": iters,
                "reps": self.reps, "runs": runs,
                **summarize([r["rate_inside"] for r in runs]),
                "outside": summarize([r["rate_outside"] for r in runs]),
                "clock_hz": summarize([r["clock_hz"] for r in runs])["value"],
                "cycles": summarize([r["cycles_median"] for r in runs]),
                "distinct_sms": min(r["distinct_sms"] for r in runs),
                "num_regs": attrs.get("num_regs"), "local_size_bytes": attrs.get("local_size_bytes")}


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
                                lambda it, rep, ways=ways: (ways,),
                                lambda it, w=w: float(w * it * LD_UNROLL))
                cyc = [1.0 / run["rate_inside"] for run in r["runs"]]
                r.update(matrices=mats, trans=trans, conflict_ways=ways, warps_per_sm=w, unit="warp instr/clk/SM",
                         ideal_wavefronts=mats * ways,
                         cycles_per_instr_per_sm={"unit": "cycles (= wavefronts at one per clock)", **summarize(cyc)})
                out[f"{kernel}.ways{ways}.w{w}"] = r
    return out


def run_cp_async(dev: _Device, warps_list: Sequence[int]) -> dict:
    cp = dev.cp
    src = cp.zeros(L2_BUFFER_BYTES // 16 * 4, dtype=cp.uint32)  # 16 MiB of uint4
    mask16 = L2_BUFFER_BYTES // 16 - 1
    out: dict = {}
    for grid in (1, dev.sm_count):
        for w in warps_list:
            threads = 32 * w
            smem = max(ONE_BLOCK_SMEM_BYTES, CPA_STAGES * threads * CPA_UNROLL * 16)
            r = dev.measure("cpasync_tp", grid, threads, smem,
                            lambda it, rep: (mask16, src),
                            lambda it, threads=threads: float(threads * it * CPA_UNROLL * 16))
            r.update(warps_per_sm=w, sms=grid, bytes_per_instr=16, stages=CPA_STAGES, unit="bytes/clk/SM",
                     source_bytes=L2_BUFFER_BYTES,
                     chip_bytes_per_s=_chip_rate(r, threads * r["iters"] * CPA_UNROLL * 16 * grid))
            out[f"cp_async16.sms{grid}.w{w}"] = r
    return out


def _chip_rate(r: dict, bytes_per_launch: float) -> dict:
    return {"unit": "bytes/s", **summarize([bytes_per_launch / run["event_s"] for run in r["runs"]])}


def run_tma(dev: _Device, hbm_bytes: int) -> dict:
    import numpy  # noqa: PLC0415

    cp = dev.cp
    out: dict = {}
    tensors = {"l2": cp.zeros(L2_BUFFER_BYTES // 2, dtype=cp.float16),
               "hbm": cp.zeros(hbm_bytes // 2, dtype=cp.float16)}
    for box_rows in TMA_BOX_ROWS:
        box_bytes = TMA_BOX_COLS * box_rows * 2
        for src_name, t in tensors.items():
            rows = t.size // TMA_COLS
            tmap_bytes = encode_tensor_map_2d(t.data.ptr, TMA_COLS, rows, TMA_BOX_COLS, box_rows)
            tmap = cp.asarray(numpy.frombuffer(tmap_bytes, dtype=numpy.uint8))  # the map in global memory
            tiles_x = TMA_COLS // TMA_BOX_COLS
            total = tiles_x * (rows // box_rows)
            cursor = {"t0": 0}

            def args(it, rep, stages, grid, cursor=cursor, tmap=tmap, box_rows=box_rows, box_bytes=box_bytes,
                     total=total, tiles_x=tiles_x, src_name=src_name):
                t0 = 0
                if src_name == "hbm":  # fresh boxes every launch: never re-read from L2
                    t0 = cursor["t0"]
                    cursor["t0"] = (t0 + it * grid) % total
                return (stages, tmap, cp.int32(tiles_x), cp.int32(total), cp.int32(box_rows), cp.int32(box_bytes),
                        cp.int32(t0))

            stages = max(1, TMA_INFLIGHT_BYTES // box_bytes)
            smem = max(ONE_BLOCK_SMEM_BYTES, stages * box_bytes + SMEM_ALIGN_PAD_BYTES + 8 * stages)
            for grid in (1, dev.sm_count):
                cap = max(stages, total // (2 * grid)) if src_name == "hbm" else MAX_ITERS
                r = dev.measure("tma_tp", grid, 32, smem,
                                lambda it, rep, stages=stages, grid=grid, args=args: args(it, rep, stages, grid),
                                lambda it, box_bytes=box_bytes: float(it * box_bytes), iters0=stages,
                                max_iters=cap)
                r.update(box=[box_rows, TMA_BOX_COLS], box_bytes=box_bytes, dtype="fp16", swizzle="128B",
                         source=src_name, source_bytes=t.size * 2, stages=stages, sms=grid, unit="bytes/clk/SM",
                         chip_bytes_per_s=_chip_rate(r, r["iters"] * box_bytes * grid))
                out[f"tma.box{box_rows}x{TMA_BOX_COLS}.{src_name}.sms{grid}"] = r
            lat_iters = min(TMA_LAT_ITERS, total // 2)
            r = dev.measure("tma_tp", 1, 32, smem, lambda it, rep, args=args: args(it, rep, 1, 1),
                            lambda it: float(it), fixed_iters=lat_iters)
            lat = _latency(r, "cycles per TMA load, one in flight (issue to mbarrier completion)")
            lat.update(box=[box_rows, TMA_BOX_COLS], box_bytes=box_bytes, source=src_name, stages=1)
            out[f"tma.box{box_rows}x{TMA_BOX_COLS}.{src_name}.lat"] = lat
    r = dev.measure("mbar_rt", 1, 32, 0, lambda it, rep: (0,),
                    lambda it: float(it * MBAR_STEPS))
    out["mbarrier.round_trip"] = _latency(r, "cycles per mbarrier.arrive + try_wait.parity (one thread)")
    return out


def run_probes(quick: bool = False) -> dict:
    """Every probe on the current GPU (JSON-ready): ``meta``, ``compile``, the groups, ``errors``."""
    t0 = time.perf_counter()
    meta = _metadata()  # first: a failing probe below may leave the CUDA context unusable
    dev = _Device(QUICK_REPS if quick else REPS, QUICK_TARGET_S if quick else TARGET_S)
    warps = QUICK_WARPS if quick else WARPS
    res: dict = {"meta": meta, "compile": dev.compile, "errors": {}}
    groups = (("mma_sync", lambda: run_mma_sync(dev, warps)),
              ("wgmma", lambda: run_wgmma(dev, (1, 3) if quick else WARPGROUPS)),
              ("ldmatrix", lambda: run_ldmatrix(dev, QUICK_LD_WAYS if quick else LD_WAYS, warps)),
              ("cp_async", lambda: run_cp_async(dev, (8, 32) if quick else CPA_WARPS)),
              ("tma", lambda: run_tma(dev, QUICK_HBM_TENSOR_BYTES if quick else HBM_TENSOR_BYTES)))
    for name, run in groups:  # TMA last: a fault there cannot spoil the others
        g0 = time.perf_counter()
        try:
            res[name] = run()
        except Exception as exc:  # noqa: BLE001  (recorded, the other groups still run)
            res[name] = {}
            res["errors"][name] = f"{type(exc).__name__}: {exc}"
        res.setdefault("group_wall_s", {})[name] = time.perf_counter() - g0
    if dev.sass:
        kernels = sorted({r["kernel"] for g in ("mma_sync", "wgmma", "ldmatrix", "cp_async", "tma")
                          for r in res[g].values()})
        checks = sass_checks(dev.sass, kernels)
        res["compile"]["sass_checks"] = checks
        for g in ("mma_sync", "wgmma", "ldmatrix", "cp_async", "tma"):
            for r in res[g].values():
                c = checks.get(r["kernel"])
                r["sass_ok"] = None if c is None else c["ok"]
    res["meta"].update({"probe_wall_s": time.perf_counter() - t0, "reps": dev.reps, "quick": quick,
                        "target_kernel_s": dev.target_s, "sm_count": dev.sm_count})
    return res


def _metadata() -> dict:
    from validation.harness.metadata import collect_metadata  # noqa: PLC0415

    return collect_metadata()


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


def format_table(results: dict) -> str:
    """One line per measurement: group, name, median, unit, p10..p90."""
    lines = [f"{'group':9s} {'measurement':44s} {'value':>11s} {'unit':22s} {'p10..p90':>23s}"]
    for g in ("mma_sync", "wgmma", "ldmatrix", "cp_async", "tma"):
        for k, r in results.get(g, {}).items():
            ok = "" if r.get("sass_ok") is not False else "  SASS CHECK FAILED"
            lines.append(f"{g:9s} {k:44s} {r['value']:11.5g} {r['unit']:22s} "
                         f"{r['p10']:11.5g}..{r['p90']:<11.5g}{ok}")
    for g, e in results.get("errors", {}).items():
        lines.append(f"{g:9s} FAILED: {e}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.calibration.tensor_probe",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None,
                    help="directory for tensor.json (default: validation/results/<gpu>/calibration)")
    ap.add_argument("--quick", action="store_true", help="few reps, short launches, fewer configurations")
    args = ap.parse_args(argv)
    why = _gpu_missing()
    if why:
        print(f"tensor_probe: needs CuPy and an NVIDIA GPU: {why}", file=sys.stderr)
        return 2
    results = run_probes(quick=args.quick)
    from validation.harness.metadata import gpu_slug  # noqa: PLC0415

    slug = gpu_slug(results["meta"].get("device_name") or "unknown")
    results["fields"] = fields(results, datasheet=datasheet_values(slug))
    out = Path(args.out) if args.out else RESULTS_ROOT / slug / "calibration"
    out.mkdir(parents=True, exist_ok=True)
    path = out / RESULT_FILE
    path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(format_table(results))
    for k, e in results["fields"].items():
        print(f"field {k} = {e['value']:.6g} {e['unit']}" + (f" (datasheet {e[DATASHEET_NOTE]:g})"
                                                           if e.get(DATASHEET_NOTE) is not None else ""))
    if results["compile"].get("ptxas_warnings"):
        print("ptxas warnings:\n  " + "\n  ".join(results["compile"]["ptxas_warnings"]))
    print(f"wrote {path} in {results['meta']['probe_wall_s']:.1f} s")
    return 1 if results["errors"] else 0


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


def _gpu_missing() -> str | None:
    """None when CuPy and a CUDA device are usable, else a one-line reason."""
    try:
        import cupy as cp  # noqa: PLC0415
    except Exception as exc:  # noqa: BLE001
        return f"cupy is not importable ({type(exc).__name__}: {exc})"
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device found"
    except Exception as exc:  # noqa: BLE001
        return f"no usable CUDA device ({type(exc).__name__}: {exc})"
    return None


if __name__ == "__main__":
    sys.exit(main())
