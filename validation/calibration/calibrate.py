"""Microbenchmarks that measure what the simulator's hardware model needs (never the validation GEMMs).

CUDA kernels live in ``validation/kernels/microbench.cu``, compiled with nvcc to a cubin that
``cupy.RawModule`` loads, and disassembled (cuobjdump) so that instruction rates count every issued
instruction of a loop body, as the simulator counts a kernel's (NVRTC and source counts when nvcc
or cuobjdump is missing).
Each benchmark repeats at least ``MIN_RUNS`` times and keeps the spread. ``run_calibration()``
returns the raw results (JSON-ready); ``write_profile()`` writes the calibrated TOML profile read by
``tilesim.hardware.load`` (``tilesim/hardware/calibrated/<gpu>.toml``).

Benchmarks and the HardwareSpec fields they give:

=========================== =========================================================================
``clock_probe``             ``sm_clock_hz``: clock64 cycles / %globaltimer ns, every SM spinning
``hbm_copy``                ``hbm_bytes_per_s``: float4 device copy, bytes read + written, 1-4 GiB
``l2_read``                 ``l2_bytes_per_s``: ld.global.cg reads of a 16-25 MiB L2-resident buffer
``l1_read``                 ``l1_bytes_per_clk_per_sm``: ld.global.ca re-reads of a 32 KiB slice/block
``smem_read``               (raw only) shared-memory bytes per clock per SM, float4 conflict-free
``smem_chase``              ``smem_latency_cycles``: one-thread pointer chase in shared memory
``l1_chase``                ``l1_latency_cycles``: chase over 16 KiB, 128 B stride, ld.global.ca
``l2_chase``                ``l2_latency_cycles``: chase over 8 MiB, 128 B stride, ld.global.cg
``hbm_chase``               ``hbm_latency_cycles``: chase over 1 GiB, 2 KiB stride, cold lines
``fma_chains``              ``fp32_lanes_per_sm`` (effective) = FLOP/s / (2 * sm_count * clock)
``issue_mix``               ``issue_warp_instr_per_clk_per_sm``: FFMA + LOP3 2:1, all SASS instr counted
``launch_empty``            ``launch_overhead_s``: empty kernel timed with events, one per pair
=========================== =========================================================================
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from validation.calibration.block_rate_probe import fit as block_rate_fit
from validation.harness.timing import percentile

REPO_ROOT = Path(__file__).resolve().parents[2]
KERNEL_SRC = Path(__file__).resolve().parent / "microbench.cu"
PROFILES_DIR = REPO_ROOT / "tilesim" / "hardware" / "calibrated"
RESULTS_SUBDIR = "calibration"  # validation/results/<gpu>/calibration/

MIN_RUNS = 20
RUNS = 25
MB_THREADS = 256  # must match microbench.cu
FMA_FLOP_PER_ITER = 256  # fma_chains: 16 chains x 8 FMA x 2 FLOP per thread per iteration
FMA_OUTER_FFMA_PER_ITER = 32  # fma_outer: acc[8][4] += a[i] * b[j] per thread per iteration
ISSUE_INSTR_PER_ITER = 96  # issue_mix: 64 FFMA + 32 LOP3 warp instructions per warp per iteration

#: HardwareSpec fields a calibration writes (smem banks/width are deliberately not among them).
#: the per-pipe rates and latencies measured by validation/calibration/pipes_probe.py (pipes.json,
#: merged by --from-json): what the hardware spec accepts in a calibrated profile
PIPE_FIELDS = ("sfu_warp_instr_per_clk_per_sm", "shuffle_warp_instr_per_clk_per_sm", "int_warp_instr_per_clk_per_sm",
               "sfu_latency_cycles", "shuffle_latency_cycles", "fadd_latency_cycles", "int_latency_cycles",
               "barrier_latency_cycles", "barrier_latency_cycles_by_warps",
               "global_atomic_same_address_per_clk", "block_launch_per_clk_per_sm_by_threads",
               "hbm_read_bytes_per_s", "hbm_write_bytes_per_s")
#: the tensor-core rates and latency measured by validation/calibration/tensor_probe.py (tensor.json,
#: merged by --from-json): mma.<shape>.<dtype> in FLOP/clk/SM and the dependent-MMA latency
TENSOR_FIELDS = ("mma.m16n8k16.fp16", "mma.m16n8k16.bf16", "mma.m16n8k8.tf32", "mma.m64nNk16.fp16",
                 "mma.m64nNk16.bf16", "mma.m64nNk8.tf32", "pipes.tensor.latency_cycles")
#: the landing law of a GEMM k-step's TMA box pair (tma_pair_probe, tma_pair.json beside)
TMA_PAIR_FIELDS = ("tma_fixed_latency_cycles", "tma_landing_bytes_per_clk", "tma_hbm_fixed_latency_cycles",
                   "tma_hbm_landing_bytes_per_clk")
#: from the same record's TMA rows and from clock_load_probe (clock_load.json, beside it)
TMA_FIELDS = ("tma_latency_cycles", "tma_hbm_latency_cycles", "wgmma_latency_cycles_by_n", "tma_mid_sector_row_cost",
              "tma_mid_sector_latency_cycles", "l2_shared_line_bytes_per_s", *TMA_PAIR_FIELDS)
CLOCK_LOAD_FIELDS = ("sm_clock_hz_by_tensor_activity", "sm_clock_l2_slope_by_tensor_activity",
                     "sm_clock_hbm_slope_by_tensor_activity", "sm_clock_l2_tma_slope_by_tensor_activity",
                     "tf32_clock_weight_by_mma_m")
#: clock_load_probe's memory-stream loads (the record in calibration/clock_load_mem/): per kind of stream,
#: the stream alone and the stream beside wgmma on random operands
CLOCK_MEMORY_LOADS = {"l2": ("l2_only", "wgmma_rand_l2"), "hbm": ("hbm_only", "wgmma_rand_hbm")}
#: its TMA streams (the record in calibration/clock_load_tma/): the stream alone, and beside wgmma at
#: several rates (one point: the median activity and the median slope of these loads)
CLOCK_TMA_LOADS = ("tma_only", ("wgmma_rand_tma1x16k", "wgmma_rand_tma2x16k", "wgmma_rand_tma2x32k",
                                "wgmma_rand_tma5x32k", "wgmma_rand_tma5x32k_shared"))
FEED_FIELDS = ("ldgsts16_pipe_cycles", "ldgsts16_straddle_cycles_per_sector", "ldgsts16_line_cycles")
#: mma_feed_probe gemm_bcol's pair of loops alike but for B's copies: B stored N x K (every warp copy reads 8
#: half-lines) against K x N (whole lines), each copy writing 4 shared lines
BCOL_LINE_ROWS = ("gb_bcol_fixed", "gb_brow_fixed")
SCHEDULERS_PER_SM = 4  # warp schedulers per SM, one instruction each per clock (H100 whitepaper; h200.toml)
CLUSTER_FIELDS = ("cluster_release_arrive_cycles", "wgmma_consumer_step_cycles", "cluster_release_fence_cycles",
                  "wgmma_refill_path_cycles", "mbarrier_local_release_cycles", "cluster_release_cycles_by_inflight",
                  "cluster_release_hbm_extra_cycles_by_inflight",
                  "cluster_release_idle_cycles")
#: cluster_probe's 2-stage wgmma rings without a cluster (the H200's single-block ring GEMMs: 1 or 2 consumers,
#: one local arrive per consumer and k-step): the consumer's path from its data wait to its stage release
REFILL_ROWS = ("wgmma.c1.s2.c1.rel_one", "wgmma.c2.s2.c1.rel_one")
#: the cluster_probe wgmma ring row like the H200's cluster GEMMs: 2 consumers, 4 stages, B loaded by
#: each block, one thread per warpgroup arriving with cluster-scope release on the other block
CLUSTER_RELEASE_ROW = "wgmma.c2.s4.c2_own_remote.rel_one"
#: the clock_load_probe loads that give the SM clock against tensor activity (random operands, as the
#: GEMMs run, where the probe has them): no tensor work, mma.sync at its full rate, wgmma at 25% duty
#: (zero operands: the probe has no random-operand duty run), wgmma at its full rate
CLOCK_LOADS = ("ffma", "wgmma_duty25", "mma_sync_rand", "wgmma_rand")
#: the TMA box the wgmma GEMMs load (128 rows of 64 fp16): its one-in-flight latency rows
TMA_LATENCY_ROWS = {"tma_latency_cycles": "tma.box128x64.l2.lat", "tma_hbm_latency_cycles": "tma.box128x64.hbm.lat"}
PROFILE_FIELDS = ("sm_clock_hz", "hbm_bytes_per_s", "hbm_latency_cycles", "l2_bytes_per_s",
                  "l2_latency_cycles", "l1_bytes_per_clk_per_sm", "l1_latency_cycles",
                  "smem_latency_cycles", "fp32_lanes_per_sm", "issue_warp_instr_per_clk_per_sm",
                  "launch_overhead_s", "ffma_rate_by_warps", "warp_issue_per_clk", "warp_issue_by_code_bytes",
                  "tail_packing_by_slots", "ldgsts_wavefronts_per_line", "ldgsts_wavefronts_per_conflict",
                  "ldgsts_bypass_wavefronts", "l2_bytes", "l2_dirty_bytes", "l1_lines_per_clk_per_sm",
                  *PIPE_FIELDS, *TENSOR_FIELDS, *TMA_FIELDS, *CLOCK_LOAD_FIELDS, *FEED_FIELDS, *CLUSTER_FIELDS,
                  "l1_miss_lines_per_clk_per_sm", "ldgsts16_sector_group_lanes", "hbm_read_granularity_bytes",
                  "hbm_accesses_per_s", "hbm_burst_extra_cycles_by_lines", "l2_burst_extra_cycles_by_lines",
                  "l2_flushed_dirty_bytes", "l2_flushed_writeback_per_read_byte",
                  "l2_flushed_writeback_per_written_byte")


def summarize(values: Sequence[float]) -> dict:
    """Median, p10, p90, min, max and count of per-run values (raises ValueError if empty)."""
    vals = sorted(float(v) for v in values)
    if not vals:
        raise ValueError("summarize: values must not be empty")
    return {"median": percentile(vals, 50), "p10": percentile(vals, 10),
            "p90": percentile(vals, 90), "min": vals[0], "max": vals[-1], "n": len(vals)}


def _field(benchmark: str, unit: str, per_run: Sequence[float], **extra) -> dict:
    s = summarize(per_run)
    return {"benchmark": benchmark, "unit": unit, "value": s["median"], **s,
            "runs": [float(v) for v in per_run], **extra}


# ----- GPU side --------------------------------------------------------------------------------------
def build_cubin(src: Path, arch: str, workdir: Path) -> tuple[Path, str] | None:
    """Compile ``src`` with nvcc to a cubin for ``arch`` and disassemble it; None when nvcc or
    cuobjdump is missing or fails (the benchmarks then run from NVRTC and count from the source)."""
    nvcc, objdump = shutil.which("nvcc"), shutil.which("cuobjdump")
    if not nvcc or not objdump:
        return None
    cubin = workdir / (src.stem + ".cubin")
    p = subprocess.run([nvcc, "-cubin", f"-arch={arch}", "-O3", "-o", str(cubin), str(src)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None
    d = subprocess.run([objdump, "-sass", str(cubin)], capture_output=True, text=True)
    return (cubin, d.stdout) if d.returncode == 0 else None


def num_regs(kernel) -> int | None:
    """Registers per thread of a loaded kernel (CuPy's ``attributes["num_regs"]``; None where it does not
    say): with the shared memory they decide how many blocks share an SM, which a benchmark's blocks per SM
    assume (validation/studies/engine_check.py reads it)."""
    attrs = getattr(kernel, "attributes", None) or {}
    n = attrs.get("num_regs")
    return int(n) if n is not None else None


def per_iteration(counts: dict[str, int] | None, key: str, key_per_iter: int,
                  opcodes: tuple[str, ...] | None = None) -> float | None:
    """Instructions per source-loop iteration in a (possibly unrolled) SASS loop body: all of them,
    or only ``opcodes``; the unroll factor is the body's ``key`` count over ``key_per_iter``."""
    if not counts or not counts.get(key):
        return None
    unroll = counts[key] / key_per_iter
    n = sum(v for op, v in counts.items() if opcodes is None or op in opcodes)
    return n / unroll


class _Bench:
    """Holds CuPy, the compiled microbenchmark module and device facts."""

    def __init__(self, runs: int = RUNS):
        import cupy as cp  # noqa: PLC0415

        self.cp = cp
        self.runs = max(runs, MIN_RUNS)
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        self.sm_count = int(props["multiProcessorCount"])
        self.l2_bytes = int(props["l2CacheSize"])
        self.stream = cp.cuda.get_current_stream()
        arch = f"sm_{props['major']}{props['minor']}"
        self._tmp = tempfile.TemporaryDirectory()
        built = build_cubin(KERNEL_SRC, arch, Path(self._tmp.name))
        if built:  # what runs is what the loop counts were read from
            cubin, self.sass = built
            self.mod = cp.RawModule(path=str(cubin))
        else:
            self.sass = None
            self.mod = cp.RawModule(code=KERNEL_SRC.read_text())

    def fn(self, name: str):
        return self.mod.get_function(name)

    def loop_counts(self, name: str) -> dict[str, int] | None:
        """Opcode counts of kernel ``name``'s hot loop body (None without nvcc and cuobjdump)."""
        if self.sass is None:
            return None
        from validation.calibration.sass_histogram import hot_loop  # noqa: PLC0415

        return dict(hot_loop(self.sass, name))

    def gate(self) -> None:
        """Enqueue a one-block spin of about 100 us so that the next launch is queued before the
        start event fires (the host's launch latency then stays out of the event time)."""
        cp = self.cp
        if not hasattr(self, "_gate_out"):
            self._gate_out = cp.zeros(2, dtype=cp.int64)
        self.fn("clock_probe")((1,), (32,), (cp.int64(200_000), self._gate_out))

    def event_times(self, launch, runs: int | None = None, warmup: int = 2, gate: bool = True) -> list[float]:
        """Seconds per call of ``launch`` (CUDA events around each call, no L2 flush, gated)."""
        from validation.harness.timing import time_gpu  # noqa: PLC0415

        n = runs or self.runs
        t = time_gpu(launch, warmup=warmup, reps=n, min_reps=n, flush_l2=False, budget_s=60.0,
                     before=self.gate if gate else None)
        return list(t.samples_s)

    def free(self) -> None:
        self.cp.get_default_memory_pool().free_all_blocks()


def bench_clock(b: _Bench) -> dict:
    """SM clock with every SM busy: clock64 cycles over %globaltimer nanoseconds, per block."""
    cp = b.cp
    k = b.fn("clock_probe")
    blocks = b.sm_count * 4
    out = cp.zeros(2 * blocks, dtype=cp.int64)
    spin = 10_000_000  # about 5 ms at 2 GHz
    k((blocks,), (128,), (cp.int64(spin), out))
    per_run = []
    nvml = []
    from validation.harness.timing import read_sm_clock_hz  # noqa: PLC0415

    for _ in range(b.runs):
        k((blocks,), (128,), (cp.int64(spin), out))
        nvml.append(read_sm_clock_hz())  # read while the kernel runs (launch is asynchronous)
        b.stream.synchronize()
        d = out.get().reshape(-1, 2)
        hz = sorted(c / (ns * 1e-9) for c, ns in d if ns > 0)
        per_run.append(percentile(hz, 50))
    return _field("clock_probe", "Hz", per_run, blocks=blocks, spin_cycles=spin,
                  nvml_sm_clock_hz_during=[v for v in nvml if v is not None])


def bench_launch(b: _Bench) -> dict:
    """Empty kernel. ``events``: one launch between two events while the GPU is kept busy by a
    preceding spin (GPU-side cost, the value used); ``events_ungated``: the same from an idle GPU
    (includes the host's launch latency); ``back_to_back``: 1000 launches queued behind a spin,
    GPU time / 1000; ``host``: host wall time per launch."""
    cp = b.cp
    k = b.fn("empty_kernel")

    def launch():
        k((1,), (32,), ())

    nrep = max(b.runs, 100)
    per_event = b.event_times(launch, runs=nrep, warmup=20)
    ungated = b.event_times(launch, runs=nrep, warmup=20, gate=False)
    n = 1000
    start, end = cp.cuda.Event(), cp.cuda.Event()
    gate_out = cp.zeros(2, dtype=cp.int64)
    spin = b.fn("clock_probe")
    b2b, host = [], []
    for _ in range(b.runs):
        b.stream.synchronize()
        spin((1,), (32,), (cp.int64(40_000_000), gate_out))  # about 20 ms: covers the host's enqueueing
        t0 = time.perf_counter()
        start.record(b.stream)
        for _ in range(n):
            launch()
        end.record(b.stream)
        host.append((time.perf_counter() - t0) / n)
        end.synchronize()
        b2b.append(cp.cuda.get_elapsed_time(start, end) * 1e-3 / n)
    return {"events": _field("launch_empty", "s", per_event),
            "events_ungated": _field("launch_empty_ungated", "s", ungated),
            "back_to_back": _field("launch_back_to_back", "s", b2b, launches_per_run=n),
            "host": _field("launch_host", "s", host, launches_per_run=n)}


def bench_hbm(b: _Bench, sizes_gib: Sequence[int] = (1, 2, 4)) -> dict:
    """Device-to-device float4 copy; bandwidth counts bytes read + written; the best size is the value."""
    cp = b.cp
    k = b.fn("copy_f4")
    blocks = b.sm_count * 8
    by_size = {}
    for gib in sizes_gib:
        nbytes = gib << 30
        src = cp.ones(nbytes // 4, dtype=cp.float32)
        dst = cp.empty_like(src)
        n_vec = nbytes // 16
        secs = b.event_times(lambda s=src, d=dst, nv=n_vec: k((blocks,), (MB_THREADS,), (s, d, cp.uint64(nv))))
        by_size[f"{gib}GiB"] = _field("hbm_copy", "B/s", [2 * nbytes / t for t in secs],
                                      buffer_bytes=nbytes, blocks=blocks)
        del src, dst
        b.free()
    best = max(by_size, key=lambda key: by_size[key]["value"])
    return {"by_size": by_size, "best": {**by_size[best], "size": best}}


def bench_l2(b: _Bench, units: Sequence[int] = (2, 3)) -> dict:
    """ld.global.cg reads of an L2-resident buffer (units of 4 x blocks x 256 float4 = 8.25 MiB at 132 SMs)."""
    cp = b.cp
    k = b.fn("read_l2")
    blocks = b.sm_count * 4
    unit_vec = 4 * blocks * MB_THREADS
    out = cp.zeros(blocks * MB_THREADS, dtype=cp.float32)
    by_size = {}
    for u in units:
        n_vec = u * unit_vec
        nbytes = n_vec * 16
        if nbytes > b.l2_bytes // 2:
            continue
        buf = cp.ones(n_vec * 4, dtype=cp.float32)
        passes = max(1, math.ceil(4e9 / nbytes))
        secs = b.event_times(lambda bb=buf, nv=n_vec, p=passes: k((blocks,), (MB_THREADS,), (bb, cp.uint64(nv), cp.int32(p), out)))
        by_size[f"{nbytes / 2**20:.2f}MiB"] = _field("l2_read", "B/s", [nbytes * passes / t for t in secs],
                                                     buffer_bytes=nbytes, passes=passes, blocks=blocks)
        del buf
        b.free()
    best = max(by_size, key=lambda key: by_size[key]["value"])
    return {"by_size": by_size, "best": {**by_size[best], "size": best}}


def _per_sm_per_clk(bytes_per_run: float, secs: Sequence[float], sm_count: int, clock_hz: float) -> list[float]:
    return [bytes_per_run / (t * clock_hz * sm_count) for t in secs]


def bench_l1(b: _Bench, clock_hz: float) -> dict:
    """Each block (2 per SM) re-reads its own 32 KiB slice with ld.global.ca: bytes per clock per SM."""
    cp = b.cp
    k = b.fn("read_l1")
    blocks, iters = b.sm_count * 2, 2000
    slice_bytes = 8 * MB_THREADS * 16
    buf = cp.ones(blocks * slice_bytes // 4, dtype=cp.float32)
    out = cp.zeros(blocks * MB_THREADS, dtype=cp.float32)
    secs = b.event_times(lambda bb=buf: k((blocks,), (MB_THREADS,), (bb, cp.int32(iters), out)))
    total = float(blocks) * iters * slice_bytes
    r = _field("l1_read", "B/clk/SM", _per_sm_per_clk(total, secs, b.sm_count, clock_hz),
               blocks=blocks, iters=iters, slice_bytes=slice_bytes, clock_hz_used=clock_hz)
    del buf
    b.free()
    return r


def bench_l1_req(b: _Bench, clock_hz: float) -> dict:
    """Coalesced 32-bit loads that hit in L1 (one 128-byte line per warp instruction): requests
    per clock per SM."""
    cp = b.cp
    k = b.fn("read_l1_req")
    blocks, iters = b.sm_count * 2, 2000
    buf = cp.ones(blocks * 8 * MB_THREADS * 4, dtype=cp.float32)
    out = cp.zeros(blocks * MB_THREADS, dtype=cp.float32)
    secs = b.event_times(lambda bb=buf: k((blocks,), (MB_THREADS,), (bb, cp.int32(iters), out)))
    reqs = float(blocks) * (MB_THREADS // 32) * iters * 8
    r = _field("l1_req", "requests/clk/SM", [reqs / (t * clock_hz * b.sm_count) for t in secs],
               blocks=blocks, iters=iters, clock_hz_used=clock_hz)
    del buf
    b.free()
    return r


def bench_l1_scatter(b: _Bench, clock_hz: float, stride_bytes: int) -> dict:
    """L1-resident loads where each lane touches a different 128-byte line, lanes ``stride_bytes``
    apart: lines per clock per SM (the L1's rate for uncoalesced hits)."""
    cp = b.cp
    k = b.fn("read_l1_scatter")
    blocks, iters = b.sm_count * 2, 500
    stride = stride_bytes // 4
    buf = cp.ones(blocks * 32 * stride + 8 * 32, dtype=cp.float32)
    out = cp.zeros(blocks * MB_THREADS, dtype=cp.float32)
    secs = b.event_times(lambda bb=buf: k((blocks,), (MB_THREADS,), (bb, cp.int32(iters), cp.int32(stride), out)))
    lines = float(blocks) * (MB_THREADS // 32) * iters * 8 * 32
    r = _field(f"l1_scatter_{stride_bytes}B", "lines/clk/SM", [lines / (t * clock_hz * b.sm_count) for t in secs],
               blocks=blocks, iters=iters, stride_bytes=stride_bytes, clock_hz_used=clock_hz)
    del buf
    b.free()
    return r


SPREAD_STRIDES_BYTES = (1056, 4000, 4128)  # 33, 125 and 129 sectors: lanes cycle through the 4 positions


def bench_l1_spread(b: _Bench, clock_hz: float) -> dict:
    """Scattered L1-resident loads whose lanes' sectors spread evenly over a line's four 32-byte
    positions (strides of an odd number of sectors): how many distinct lines per clock the L1
    serves when the positions do not collide (``l1_lines_per_clk_per_sm``)."""
    rows = {str(s): bench_l1_scatter(b, clock_hz, s) for s in SPREAD_STRIDES_BYTES}
    pooled = [v for r in rows.values() for v in r["runs"]]
    return {**_field(f"l1_scatter at strides {', '.join(str(s) for s in SPREAD_STRIDES_BYTES)} B "
                     "(lanes spread over the sector positions)", "lines/clk/SM", pooled),
            "by_stride": {k: {kk: vv for kk, vv in v.items() if kk != "runs"} for k, v in rows.items()}}


def bench_smem_bw(b: _Bench, clock_hz: float) -> dict:
    """Conflict-free float4 shared-memory reads, 2 blocks of 256 threads per SM: bytes per clock per SM."""
    cp = b.cp
    k = b.fn("read_smem")
    blocks, iters = b.sm_count * 2, 4000
    out = cp.zeros(blocks * MB_THREADS, dtype=cp.float32)
    secs = b.event_times(lambda: k((blocks,), (MB_THREADS,), (cp.int32(iters), out)))
    total = float(blocks) * iters * 8 * MB_THREADS * 16
    return _field("smem_read", "B/clk/SM", _per_sm_per_clk(total, secs, b.sm_count, clock_hz),
                  blocks=blocks, iters=iters, clock_hz_used=clock_hz)


def _global_chain(cp, nbytes: int, stride: int):
    """A uint64 buffer where word i*stride/8 holds the address of word ((i+1) mod lines)*stride/8."""
    lines = nbytes // stride
    buf = cp.zeros(nbytes // 8, dtype=cp.uint64)
    base = int(buf.data.ptr)
    idx = cp.arange(lines, dtype=cp.int64)
    buf[idx * (stride // 8)] = (base + ((idx + 1) % lines) * stride).astype(cp.uint64)
    cp.cuda.get_current_stream().synchronize()
    return buf, base, lines


def bench_chase(b: _Bench, name: str, nbytes: int, stride: int, mode: int, steps: int,
                warm_steps: int, fresh_lines: bool, warm_launch_steps: int = 0) -> dict:
    """One-thread pointer chase; cycles per load from clock64. ``fresh_lines`` starts each run
    where the previous stopped (so no line is revisited); otherwise every run starts at line 0."""
    cp = b.cp
    k = b.fn("chase_global")
    buf, base, lines = _global_chain(cp, nbytes, stride)
    cyc = cp.zeros(1, dtype=cp.int64)
    sink = cp.zeros(1, dtype=cp.uint64)
    if warm_launch_steps:
        k((1,), (1,), (cp.uint64(base), cp.int32(0), cp.int32(warm_launch_steps), cp.int32(mode), cyc, sink))
    if fresh_lines:  # evict whatever building the chain left in L2
        from validation.harness.timing import L2Flusher  # noqa: PLC0415

        L2Flusher(cp)()
        b.stream.synchronize()
    per_run = []
    pos = 0
    for _ in range(b.runs):
        start = base + (pos % lines) * stride
        k((1,), (1,), (cp.uint64(start), cp.int32(warm_steps), cp.int32(steps), cp.int32(mode), cyc, sink))
        per_run.append(float(cyc.get()[0]) / steps)
        if fresh_lines:
            pos += steps + warm_steps + 1
    del buf
    b.free()
    return _field(name, "cycles", per_run, buffer_bytes=nbytes, stride_bytes=stride, steps=steps,
                  warm_steps=warm_steps, load="ld.global.ca" if mode == 0 else "ld.global.cg")


def bench_smem_chase(b: _Bench) -> dict:
    """One-thread pointer chase through 16 KiB of shared memory (byte offsets, 132 B stride)."""
    cp = b.cp
    k = b.fn("chase_smem")
    words, stride_words = 4096, 33
    idx = cp.arange(words, dtype=cp.uint32)
    chain = ((idx + stride_words) % words) * 4
    cyc = cp.zeros(1, dtype=cp.int64)
    sink = cp.zeros(1, dtype=cp.uint32)
    steps = 10000
    per_run = []
    chain = chain.astype(cp.uint32)
    for _ in range(b.runs):
        k((1,), (256,), (chain, cp.int32(steps), cyc, sink))
        per_run.append(float(cyc.get()[0]) / steps)
    return _field("smem_chase", "cycles", per_run, words=words, stride_words=stride_words, steps=steps)


def _clocked_cycles(b: _Bench, launch, clk) -> list[float]:
    """SM cycles of MIN_RUNS timed launches: each one's event time times the clock its blocks saw."""
    return [b.event_times(launch, runs=1, warmup=0)[0] * _clock_runs(clk) for _ in range(MIN_RUNS)]


def _clock_runs(clk) -> float:
    d = clk.get().reshape(-1, 2)
    return percentile(sorted(c / (ns * 1e-9) for c, ns in d if ns > 0), 50)


def bench_fma(b: _Bench) -> dict:
    """16 independent FFMA chains per thread, 64 warps per SM; lanes = FLOP/s / (2 * SMs * clock)."""
    cp = b.cp
    k = b.fn("fma_chains")
    blocks, iters = b.sm_count * 8, 2000
    threads = blocks * MB_THREADS
    out = cp.zeros(threads, dtype=cp.float32)
    clk = cp.zeros(2 * blocks, dtype=cp.int64)
    args = (cp.float32(0.999), cp.float32(0.001), cp.int32(iters), out, clk)
    k((blocks,), (MB_THREADS,), args)
    lanes, rates, clocks = [], [], []
    for _ in range(b.runs):
        t = b.event_times(lambda: k((blocks,), (MB_THREADS,), args), runs=1, warmup=0)[0]
        hz = _clock_runs(clk)
        flops = float(threads) * iters * FMA_FLOP_PER_ITER
        rates.append(flops / t)
        clocks.append(hz)
        lanes.append(flops / t / (2.0 * b.sm_count * hz))
    return {"lanes": _field("fma_chains", "lanes/SM", lanes, blocks=blocks, iters=iters),
            "flops_per_s": _field("fma_chains", "FLOP/s", rates),
            "clock_hz_during": _field("fma_chains", "Hz", clocks)}


def bench_issue(b: _Bench) -> dict:
    """FFMA + LOP3 (2:1) independent chains: warp instructions per clock per SM (loop overhead not counted)."""
    cp = b.cp
    k = b.fn("issue_mix")
    blocks, iters = b.sm_count * 8, 2000
    out = cp.zeros(blocks * MB_THREADS, dtype=cp.float32)
    clk = cp.zeros(2 * blocks, dtype=cp.int64)
    u = cp.uint32
    args = (cp.float32(0.999), cp.float32(0.001), u(0x12345678), u(0x9ABCDEF0), u(0x0F0F0F0F),
            u(0x33CC33CC), cp.int32(iters), out, clk)
    k((blocks,), (MB_THREADS,), args)
    per_run, clocks = [], []
    warps = blocks * MB_THREADS // 32
    body = b.loop_counts("issue_mix")
    # every issued instruction of the loop (constant loads, counter, branch too), as the simulator
    # counts a kernel's; the 64 FFMA + 32 LOP3 of the source when no SASS could be read
    instr = per_iteration(body, "FFMA", 64) or ISSUE_INSTR_PER_ITER
    for _ in range(b.runs):
        t = b.event_times(lambda: k((blocks,), (MB_THREADS,), args), runs=1, warmup=0)[0]
        hz = _clock_runs(clk)
        clocks.append(hz)
        per_run.append(float(warps) * iters * instr / (t * hz * b.sm_count))
    name = f"issue_mix ({instr:g} issued instructions per iteration{', SASS' if body else ''})"
    return {"rate": _field(name, "warp instr/clk/SM", per_run, blocks=blocks, iters=iters,
                           instr_per_iter=instr, sass_loop_body=body),
            "clock_hz_during": _field("issue_mix", "Hz", clocks)}


def bench_fma_by_warps(b: _Bench, warps_list: Sequence[int] = (4, 8, 12, 16, 24, 32)) -> dict:
    """FFMA rate (warp instructions per clock per SM) of an outer-product update, one block per SM
    with ``warps`` warps: how well few resident warps keep the FMA pipes busy."""
    cp = b.cp
    k = b.fn("fma_outer")
    smem = 200 * 1024  # one block per SM
    k.max_dynamic_shared_size_bytes = smem
    iters = 4000
    body = b.loop_counts("fma_outer")
    # FMA-pipe instructions (FFMA and the FMUL that renews the operands) and all issued
    # instructions per iteration, from the SASS loop body (FFMA only when no SASS could be read)
    pipe = per_iteration(body, "FFMA", FMA_OUTER_FFMA_PER_ITER, ("FFMA", "FMUL", "FADD")) or FMA_OUTER_FFMA_PER_ITER
    instr = per_iteration(body, "FFMA", FMA_OUTER_FFMA_PER_ITER) or FMA_OUTER_FFMA_PER_ITER
    out_rows, issue_rows = {}, {}
    for warps in warps_list:
        threads = 32 * warps
        blocks = b.sm_count
        out = cp.zeros(blocks * threads, dtype=cp.float32)
        clk = cp.zeros(2 * blocks, dtype=cp.int64)
        args = (cp.float32(1.0001), cp.int32(iters), out, clk)
        k((blocks,), (threads,), args, shared_mem=smem)
        rates, issued = [], []

        def launch(threads=threads, args=args, blocks=blocks):
            k((blocks,), (threads,), args, shared_mem=smem)

        cycles = _clocked_cycles(b, launch, clk)
        rates += [float(warps) * iters * pipe / c for c in cycles]
        issued += [float(warps) * iters * instr / c for c in cycles]
        out_rows[str(warps)] = _field("fma_outer", "FMA-pipe warp instr/clk/SM", rates, warps_per_sm=warps,
                                      iters=iters, pipe_instr_per_iter=pipe, sass_loop_body=body)
        issue_rows[str(warps)] = _field("fma_outer", "warp instr/clk/SM", issued, warps_per_sm=warps,
                                        iters=iters, instr_per_iter=instr)
    return {"by_warps": out_rows, "issue_by_warps": issue_rows,
            "value": [[int(w), out_rows[w]["value"]] for w in out_rows],
            "benchmark": f"fma_outer (one block per SM; {pipe:g} FMA-pipe instructions per iteration"
                         f"{', SASS' if body else ''})", "n": MIN_RUNS,
            "p10": min(r["p10"] for r in out_rows.values()), "p90": max(r["p90"] for r in out_rows.values())}


LDS_OUTER_SHAPES = ((8, 8), (8, 4), (4, 4), ("rm", 8, 8))  # lds_outer_<TM>x<TN>; "rm": A row-major


def bench_lds_outer(b: _Bench, warps_list: Sequence[int] = (4, 8, 16)) -> dict:
    """Outer products fed from shared memory (a register-tiled GEMM's inner loop without its global
    loads and barriers), one block per SM with ``warps`` warps: all issued warp instructions and
    FFMA per clock per SM, per (TM, TN) and warp count."""
    cp = b.cp
    smem = 200 * 1024  # one block per SM
    iters = 2000
    out_rows: dict = {}
    for shape in LDS_OUTER_SHAPES:
        rm = shape[0] == "rm"
        tm, tn = shape[-2:]
        name = f"lds_outer_{'rm_' if rm else ''}{tm}x{tn}"
        k = b.fn(name)
        k.max_dynamic_shared_size_bytes = smem
        body = b.loop_counts(name)
        ffma = 8 * tm * tn  # per iteration (8 rounds)
        instr = per_iteration(body, "FFMA", ffma) or ffma * (1 + (tm + tn) / 4 / (tm * tn))
        lds = per_iteration(body, "FFMA", ffma, ("LDS",)) or 8 * (tm + tn) / 4
        for warps in warps_list:
            threads = 32 * warps
            blocks = b.sm_count
            out = cp.zeros(blocks * threads, dtype=cp.float32)
            clk = cp.zeros(2 * blocks, dtype=cp.int64)
            args = (cp.int32(iters), out, clk)

            def launch(k=k, threads=threads, args=args, blocks=blocks):
                k((blocks,), (threads,), args, shared_mem=smem)

            launch()
            cycles = _clocked_cycles(b, launch, clk)
            issued = [float(warps) * iters * instr / c for c in cycles]
            ffmas = [float(warps) * iters * ffma / c for c in cycles]
            out_rows[f"{'rm_' if rm else ''}{tm}x{tn}_{warps}w"] = {
                **_field(name, "warp instr/clk/SM", issued, warps_per_sm=warps, iters=iters, tm=tm, tn=tn,
                         instr_per_iter=instr, lds_per_iter=lds, ffma_per_iter=ffma, sass_loop_body=body,
                         num_regs=num_regs(k)),
                "ffma_per_clk_per_sm": summarize(ffmas)["median"]}
    return {"rows": out_rows}


STAGED_OUTER_CASES = ((8, 8, 4, 1), (8, 8, 4, 2), (8, 8, 4, 4), (8, 8, 8, 1), (8, 8, 8, 2),
                      (4, 4, 4, 1), (4, 4, 4, 2), (4, 4, 4, 4), (4, 4, 4, 7))  # TM, TN, warps per block, blocks per SM


# the staged_outer variants: JSON key -> bench_staged_outer's keyword arguments (validation/engine_check.py
# writes each as a tile program from the same table)
STAGED_VARIANTS = {
    "staged_outer": {},
    "gstaged_outer": {"global_tiles": True},
    "sgstaged_outer": {"global_tiles": True, "scalar": True},
    "dgstaged_outer": {"global_tiles": True, "stream": True},
    "pdgstaged_outer": {"global_tiles": True, "stream": True, "prefetch": True},
    "xdgstaged_outer": {"global_tiles": True, "stream": True, "padded": True},
    "ldgstaged_outer": {"global_tiles": True, "stream": True, "bounded": True},
}
GSTAGED_OUTER_CASES = ((8, 8, 4, 1), (8, 8, 4, 2), (8, 8, 4, 4), (8, 8, 8, 2), (4, 4, 4, 2), (4, 4, 4, 4),
                       (4, 4, 4, 7))
# ldgstaged_outer: dgstaged_outer_8x8 compiled under __launch_bounds__ for 4 blocks of 4 warps or 2 of 8
# (125 registers, no spills, against dgstaged's 143, which hold only 3 or 1): the HBM-streaming loop at the
# residency its shared memory asks for, and at 1 block (the same binary) for reference
BOUNDED_OUTER_CASES = ((8, 8, 4, 1), (8, 8, 4, 2), (8, 8, 4, 4), (8, 8, 8, 1), (8, 8, 8, 2))


def staged_kernel_name(tm: int, tn: int, warps: int, global_tiles: bool = False, scalar: bool = False,
                       stream: bool = False, prefetch: bool = False, padded: bool = False,
                       bounded: bool = False) -> str:
    """The microbench.cu kernel of a staged_outer variant (:data:`STAGED_VARIANTS`) and case; the
    launch-bounded kernels are one per warp count (``ldgstaged_outer_8x8_4w``)."""
    if bounded:
        return f"ldgstaged_outer_{tm}x{tn}_{warps}w"
    prefix = ("pd" if prefetch else "xd" if padded else "d") if stream else "s" if scalar else ""
    return f"{prefix}{'g' if global_tiles else ''}staged_outer_{tm}x{tn}"


def bench_staged_outer(b: _Bench, global_tiles: bool = False, scalar: bool = False, stream: bool = False,
                       prefetch: bool = False, padded: bool = False, bounded: bool = False) -> dict:
    """The shared-memory-fed outer products with a non-pipelined GEMM's staging per k-step (barrier,
    the block's next tiles stored, barrier; no global loads), ``R`` blocks of ``warps`` warps per SM
    (shared memory sized so that no more than R fit; the kernel's registers, ``num_regs``, can allow
    fewer: dgstaged_outer_8x8's 143 hold 3 of 4 warps, or 1 of 8, and the grid then runs in more than
    one wave): warp instructions per clock per SM. A check of how
    the engine treats barriers and staging between blocks that share an SM. ``global_tiles``: the
    tiles are first loaded from global memory (the block's own lines, L2 hits), as a GEMM's;
    ``scalar``: A by 4-byte loads and stores, as the non-vectorized GEMMs; ``stream``: a new tile every
    k-step, read from HBM (1000 iterations); ``prefetch``: that tile loaded into registers a k-step
    ahead (register double buffering); ``padded``: the blocks' regions 528 bytes further apart each;
    ``bounded``: the streaming 8x8 loop under ``__launch_bounds__`` (:data:`BOUNDED_OUTER_CASES`)."""
    cp = b.cp
    smem_sm = 227 * 1024
    iters = 1000 if stream else 2000
    rows: dict = {}
    plan = BOUNDED_OUTER_CASES if bounded else GSTAGED_OUTER_CASES if global_tiles else STAGED_OUTER_CASES
    for tm, tn, warps, per_sm in plan:
        name = staged_kernel_name(tm, tn, warps, global_tiles, scalar, stream, prefetch, padded, bounded)
        k = b.fn(name)
        smem = smem_sm // per_sm - 2048  # leaves room for the per-block reservation, not for one more block
        k.max_dynamic_shared_size_bytes = smem
        body = b.loop_counts(name)
        ffma = 8 * tm * tn
        instr = per_iteration(body, "FFMA", ffma) or ffma
        threads = 32 * warps
        blocks = b.sm_count * per_sm
        out = cp.zeros(blocks * threads, dtype=cp.float32)
        clk = cp.zeros(2 * blocks, dtype=cp.int64)
        args = (cp.int32(iters), out, clk)
        if global_tiles:  # per block (and per k-step with stream) 8 x (bm + 8 tn) floats, bm = 4 tm per warp
            tiles = blocks * (iters if stream else 1) + (blocks * 33 // (2 * warps * 4 * tm + 16 * tn) + 1 if padded else 0)
            g = cp.ones(tiles * 4 * (2 * warps * 4 * tm + 16 * tn), dtype=cp.float32)
            args = (g, *args)

        def launch(k=k, threads=threads, args=args, blocks=blocks, smem=smem):
            k((blocks,), (threads,), args, shared_mem=smem)

        launch()
        issued = [float(warps) * per_sm * iters * instr / c for c in _clocked_cycles(b, launch, clk)]
        rows[f"{tm}x{tn}_{warps}w_R{per_sm}"] = _field(
            name, "warp instr/clk/SM", issued, tm=tm, tn=tn, warps_per_block=warps, blocks_per_sm=per_sm,
            iters=iters, instr_per_iter=instr, smem_per_block_bytes=smem, sass_loop_body=body,
            num_regs=num_regs(k))
    return {"rows": rows}


LOADED_LATENCY_CASES = ((0, 1), (8, 1), (16, 1), (33, 1), (66, 1), (132, 1), (264, 1), (528, 4))  # (background blocks, ILP)


def bench_loaded_latency(b: _Bench, steps: int = 1500) -> dict:
    """DRAM latency under load: a one-thread chase of fresh lines (each hop a DRAM miss) while the
    other blocks (8 to 528 of them, 256 threads each) stream 16-byte loads from a 4 GiB buffer, 4 GB in
    all. Per case: cycles
    per hop and the background's bandwidth (its bytes over the kernel's time)."""
    cp = b.cp
    threads = 256
    chain_bytes, stride = 1 << 30, 2048
    buf, base, lines = _global_chain(cp, chain_bytes, stride)
    bg = cp.ones((4 << 30) // 4, dtype=cp.float32)
    cyc = cp.zeros(1, dtype=cp.int64)
    sink = cp.zeros(1, dtype=cp.uint64)
    out = cp.zeros(8 * b.sm_count * threads + threads, dtype=cp.float32)
    from validation.harness.timing import L2Flusher  # noqa: PLC0415

    flush = L2Flusher(cp)
    rows = {}
    pos = 0
    total_bytes = 4e9
    for nbg, ilp in LOADED_LATENCY_CASES:
        k = b.fn(f"loaded_chase_{ilp}")
        slice_vec4 = (bg.size // 4) // max(nbg, 1)
        bg_iters = max(1, int(total_bytes / max(nbg * threads, 1) / (16 * ilp))) if nbg else 0
        lat, bw = [], []
        for _ in range(MIN_RUNS):
            flush()
            start = base + (pos % lines) * stride
            pos += steps + 65
            args = (cp.uint64(start), cp.int32(steps), bg, cp.int64(slice_vec4), cp.int32(bg_iters), cyc, sink, out)
            t = b.event_times(lambda a=args, n=nbg, kk=k: kk((1 + n,), (threads,), a), runs=1, warmup=0)[0]
            lat.append(float(cyc.get()[0]) / steps)
            bw.append(nbg * threads * bg_iters * ilp * 16 / t if nbg else 0.0)
        rows[f"{nbg}blk_ilp{ilp}"] = {**_field("loaded_chase", "cycles", lat, background_blocks=nbg,
                                                  ilp=ilp, steps=steps, stride_bytes=stride),
                                         "background_bytes_per_s": summarize(bw)["median"]}
    del buf, bg
    b.free()
    return {"rows": rows}


def fields_from_benchmarks(bm: dict) -> dict:
    """The HardwareSpec fields a set of microbenchmark results calibrates (pure: no GPU)."""
    fields = {
        "sm_clock_hz": bm["clock_probe"],
        "hbm_bytes_per_s": bm["hbm_copy"]["best"],
        "hbm_latency_cycles": bm["hbm_chase"],
        "l2_bytes_per_s": bm["l2_read"]["best"],
        "l2_latency_cycles": bm["l2_chase"],
        "l1_bytes_per_clk_per_sm": bm["l1_read"],
        "l1_latency_cycles": bm["l1_chase"],
        "smem_latency_cycles": bm["smem_chase"],
        "fp32_lanes_per_sm": bm["fma"]["lanes"],
        "issue_warp_instr_per_clk_per_sm": bm["issue"]["rate"],
        "launch_overhead_s": bm["launch"]["events"],
    }
    if "value" in bm.get("l1_scatter_spread", {}):
        fields["l1_lines_per_clk_per_sm"] = bm["l1_scatter_spread"]
    if "value" in bm["fma_by_warps"]:
        fields["ffma_rate_by_warps"] = bm["fma_by_warps"]
        # all issued instructions (older results counted FFMA only and have no issue_by_warps)
        one = bm["fma_by_warps"].get("issue_by_warps", bm["fma_by_warps"]["by_warps"]).get("4")
        if one:  # 4 warps on 4 schedulers: what one warp alone issues per clock
            fields["warp_issue_per_clk"] = {**{k: v for k, v in one.items() if k != "runs"},
                                            "value": one["value"] / 4, "p10": one["p10"] / 4,
                                            "p90": one["p90"] / 4, "unit": "instr/clk/warp",
                                            "benchmark": f"fma_outer, 4 warps per SM (one per scheduler), "
                                                         f"{one.get('instr_per_iter', FMA_OUTER_FFMA_PER_ITER):g} "
                                                         "instructions per iteration"}
    if "rows" in bm.get("icache", {}):
        rows = bm["icache"]["rows"]
        curve = [[int(k.split("B_")[0]), v["value"]] for k, v in rows.items() if k.endswith("B_4w")]
        fields["warp_issue_by_code_bytes"] = {
            "benchmark": "fma_code_8k..64k (4 warps per SM, one per scheduler)", "unit": "FFMA/clk/warp",
            "value": sorted(curve), "n": MIN_RUNS,
            "p10": min(v["p10"] for k, v in rows.items() if k.endswith("B_4w")),
            "p90": max(v["p90"] for k, v in rows.items() if k.endswith("B_4w"))}
    if "probes" in bm.get("dispatch", {}):
        fields["tail_packing_by_slots"] = tail_packing_field(bm["dispatch"]["probes"])
    if "cases" in bm.get("l2_probe", {}):
        from validation.calibration.l2_probe import capacity_field, dirty_field  # noqa: PLC0415

        fields["l2_bytes"] = capacity_field(bm["l2_probe"]["cases"])
        if bm["l2_probe"].get("writeback"):
            fields["l2_dirty_bytes"] = dirty_field(bm["l2_probe"]["writeback"])
    if "patterns" in bm.get("staging", {}):
        from validation.calibration.staging_probe import profile_fields  # noqa: PLC0415

        fields.update(profile_fields(bm["staging"]["patterns"]))
    return {k: {kk: vv for kk, vv in v.items() if kk != "runs"} for k, v in fields.items()}


def tail_packing_field(probes: list[dict]) -> dict:
    """Packing of a last partial wave from validation/dispatch_probe.py: 0 when its blocks land one
    per SM, 1 when they fill all slots of as few SMs as possible."""
    pts = []
    for p in probes:
        slots, late, sms = p["blocks_per_sm"], p["late_blocks"], p["sms"]
        widest, narrowest = min(sms, late), -(-late // slots)
        if slots > 1 and widest > narrowest:
            pts.append([slots, (widest - p["sms_hosting_late_blocks"]) / (widest - narrowest)])
    n = min(p.get("runs", 1) for p in probes)
    work = {"spin": "equal spin blocks", "ffma": "equal FFMA blocks sharing their SM"}[probes[0].get("work", "spin")]
    return {"benchmark": f"dispatch_probe ({work}, 1.45 waves; median launch)", "unit": "packing 0..1",
            "value": pts, "n": n, "p10": min(v for _, v in pts), "p90": max(v for _, v in pts)}


CODE_KERNELS = {8192: ("fma_code_8k", 16), 16384: ("fma_code_16k", 32), 32768: ("fma_code_32k", 64),
                65536: ("fma_code_64k", 128)}  # loop-body bytes -> (kernel, REPS of 32 FFMA)


def bench_icache(b: _Bench, warps_list: Sequence[int] = (4, 8)) -> dict:
    """FFMA per clock per warp for loop bodies of 8 to 64 KiB of SASS, one block per SM: where the
    instruction caches stop feeding a lone warp."""
    cp = b.cp
    smem = 200 * 1024
    rows = {}
    for body_bytes, (name, reps) in CODE_KERNELS.items():
        k = b.fn(name)
        k.max_dynamic_shared_size_bytes = smem
        iters = max(4, 3_000_000 // (reps * 32))
        for warps in warps_list:
            threads = 32 * warps
            blocks = b.sm_count
            out = cp.zeros(blocks * threads, dtype=cp.float32)
            clk = cp.zeros(2 * blocks, dtype=cp.int64)
            args = (cp.float32(0.999), cp.float32(0.001), cp.int32(iters), out, clk)

            def launch(k=k, threads=threads, args=args, blocks=blocks):
                k((blocks,), (threads,), args, shared_mem=smem)

            launch()
            per_warp = [float(iters) * reps * 32 / c for c in _clocked_cycles(b, launch, clk)]
            rows[f"{body_bytes}B_{warps}w"] = _field(name, "FFMA/clk/warp", per_warp, body_bytes=body_bytes,
                                                     warps_per_sm=warps, iters=iters)
    curve = [[bb, rows[f"{bb}B_4w"]["value"]] for bb in sorted(CODE_KERNELS)]
    return {"rows": rows,
            "by_code_bytes": {"benchmark": "fma_code_8k..64k (4 warps per SM, one per scheduler)",
                              "unit": "FFMA/clk/warp", "value": curve, "n": MIN_RUNS,
                              "p10": min(rows[f"{bb}B_4w"]["p10"] for bb in CODE_KERNELS),
                              "p90": max(rows[f"{bb}B_4w"]["p90"] for bb in CODE_KERNELS)}}


def run_calibration(runs: int = RUNS) -> dict:
    """Run every microbenchmark on the current GPU; return raw results and the profile fields.

    The result has ``meta`` (collect_metadata), ``benchmarks`` (every measurement, per-run values
    included) and ``fields`` (HardwareSpec field -> {value, benchmark, n, p10, p90, unit, ...}).
    """
    from validation.harness.metadata import collect_metadata  # noqa: PLC0415

    t0 = time.perf_counter()
    b = _Bench(runs)
    bm: dict = {}
    bm["clock_probe"] = bench_clock(b)
    clock_hz = bm["clock_probe"]["value"]
    bm["launch"] = bench_launch(b)
    bm["hbm_copy"] = bench_hbm(b)
    bm["l2_read"] = bench_l2(b)
    bm["l1_read"] = bench_l1(b, clock_hz)
    bm["smem_read"] = bench_smem_bw(b, clock_hz)
    bm["l1_req"] = bench_l1_req(b, clock_hz)
    bm["l1_scatter"] = bench_l1_scatter(b, clock_hz, 1152)
    bm["l1_scatter_aliased"] = bench_l1_scatter(b, clock_hz, 16384)
    bm["l1_scatter_spread"] = bench_l1_spread(b, clock_hz)
    bm["smem_chase"] = bench_smem_chase(b)
    bm["l1_chase"] = bench_chase(b, "l1_chase", 16 << 10, 128, mode=0, steps=10000, warm_steps=256,
                                 fresh_lines=False)
    bm["l2_chase"] = bench_chase(b, "l2_chase", 8 << 20, 128, mode=1, steps=10000, warm_steps=0,
                                 fresh_lines=False, warm_launch_steps=(8 << 20) // 128 + 1)
    bm["hbm_chase"] = bench_chase(b, "hbm_chase", 1 << 30, 2048, mode=1, steps=4000, warm_steps=0,
                                  fresh_lines=True)
    bm["fma"] = bench_fma(b)
    bm["issue"] = bench_issue(b)
    try:  # where the block scheduler puts a last partial wave
        from validation.calibration.dispatch_probe import probes  # noqa: PLC0415

        bm["dispatch"] = probes()
    except Exception as exc:  # a failed extra benchmark must not lose the others
        bm["dispatch"] = {"error": repr(exc)}
    try:  # cp.async wavefronts (Nsight Compute, when on PATH)
        if shutil.which("ncu"):
            from validation.calibration.staging_probe import measure  # noqa: PLC0415

            bm["staging"] = {"patterns": measure()}
    except Exception as exc:  # a failed extra benchmark must not lose the others
        bm["staging"] = {"error": repr(exc)}
    try:  # the L2 capacity re-read data sees (Nsight Compute, when on PATH)
        if shutil.which("ncu"):
            from validation.calibration.l2_probe import measure as measure_l2  # noqa: PLC0415

            bm["l2_probe"] = measure_l2()
    except Exception as exc:  # a failed extra benchmark must not lose the others
        bm["l2_probe"] = {"error": repr(exc)}
    try:
        bm["icache"] = bench_icache(b)
    except Exception as exc:  # a failed extra benchmark must not lose the others
        bm["icache"] = {"error": repr(exc)}
    try:
        bm["fma_by_warps"] = bench_fma_by_warps(b)
    except Exception as exc:  # a failed extra benchmark must not lose the others
        bm["fma_by_warps"] = {"error": repr(exc)}
    fields = fields_from_benchmarks(bm)
    meta = collect_metadata()
    meta["calibration_wall_s"] = time.perf_counter() - t0
    meta["runs_per_benchmark"] = b.runs
    return {"meta": meta, "benchmarks": bm, "fields": fields,
            "derived": {"smem_bytes_per_clk_per_sm": bm["smem_read"]["value"],
                        # recorded, not written to the profile: the scattered-line rates (equal at both
                        # strides, so no set aliasing) support the sector-position rule of
                        # tilesim.cost.access.l1_cycles; the 32-bit request rate (0.37/clk)
                        # contradicts the 0.73/clk Nsight Compute reads from naive GEMMs, so it
                        # stays out until understood
                        "l1_scatter_lines_per_clk_per_sm": bm["l1_scatter"]["value"],
                        "l1_scatter_aliased_lines_per_clk_per_sm": bm["l1_scatter_aliased"]["value"],
                        "l1_requests_per_clk_per_sm": bm["l1_req"]["value"]}}


# ----- the profile TOML ----------------------------------------------------------------------------------
def _toml_str(s: str) -> str:
    return json.dumps(str(s), ensure_ascii=False)


def _toml_num(v) -> str:
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_num(x) for x in v) + "]"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"profile value {v!r} must be a number")
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"profile value {v!r} must be finite")
    return repr(v) if isinstance(v, int) else repr(float(v))


def hbm_stream_fields(rec: dict) -> dict:
    """The profile fields of an hbm_stream_probe record: read-only and write-only HBM rates, and the
    copy's (``hbm_bytes_per_s``) when recorded. From the clean-start runs when the record has them
    (the engine charges the flush's dirty lines itself: flush_probe), else the flushed ones."""
    out = {}
    clean = rec.get("clean") or {}
    names = {"read": "hbm_read_bytes_per_s", "write": "hbm_write_bytes_per_s", "copy": "hbm_bytes_per_s"}
    for kind, field in names.items():
        r = clean.get(kind) or rec.get(kind)
        if r is None:
            continue
        start = ("L2 flushed, then its dirty lines written back by a read sweep" if kind in clean
                 else "L2 flushed")
        what = "copy, bytes read + written" if kind == "copy" else f"{kind}-only"
        rates = sorted(r["bytes"] / t for t in r["runs"])
        out[field] = {
            "value": r["bytes_per_s"], "benchmark": f"hbm_stream {what} (1 GiB, 16-byte accesses, {start})",
            "n": len(rates), "p10": rates[len(rates) // 10], "p90": rates[(9 * len(rates)) // 10],
            "unit": "bytes/s", "date": rec.get("meta", {}).get("date_utc")}
    return out


def block_rate_field(rec: dict) -> dict:
    """The profile field of a block_rate_probe record: blocks per SM clock against threads per block."""
    pts = sorted((int(t), r["blocks_per_clk_per_sm"]) for t, r in rec["by_threads"].items())
    vals = [v for _, v in pts]
    n = len(next(iter(rec["by_threads"].values()))["rows"])
    return {"value": [list(p) for p in pts], "benchmark": "block_rate (near-empty blocks, slope of time against "
            f"blocks per SM over {n} grid sizes)", "n": n, "p10": min(vals), "p90": max(vals),
            "unit": "blocks/clk/SM", "date": rec.get("meta", {}).get("date_utc"),
            "how": f"one fit per block size, each point the median of {len(n_runs)} runs" if (n_runs := next(iter(
                rec["by_threads"].values()))["rows"][0].get("runs")) else "one fit per block size"}


def group_day(rec: dict, group: str) -> str | None:
    """When a probe record's ``group`` ran: its ``group_runs`` entry (a record re-run for some groups keeps
    the others' runs), else the record's own date."""
    return rec.get("group_runs", {}).get(group, {}).get("date_utc") or rec.get("meta", {}).get("date_utc")


def tensor_fields(rec: dict, gpu: str, result_path: str = "tensor.json") -> dict:
    """The profile fields of a tensor_probe record (``tensor.json``): ``mma.<shape>.<dtype>`` FLOP/clk/SM
    and ``pipes.tensor.latency_cycles`` (:func:`validation.calibration.tensor_probe.fields`), each
    source naming the probe, the file and the raw value with the data file's (datasheet) value beside it,
    dated by the run of the group that measured it."""
    from validation.calibration import tensor_probe  # noqa: PLC0415

    got = tensor_probe.fields(rec, datasheet=tensor_probe.datasheet_values(gpu), result_path=result_path)
    return {k: {**v, "date": group_day(rec, "wgmma" if k.startswith("mma.m64") else "mma_sync")}
            for k, v in got.items() if k in TENSOR_FIELDS}


def tma_fields(rec: dict, result_path: str = "tensor.json") -> dict:
    """``tma_latency_cycles`` and ``tma_hbm_latency_cycles``: one 128x64 fp16 box in flight on one SM,
    issue to mbarrier completion, from L2-resident and from HBM data (tensor_probe's TMA rows)."""
    out = {}
    day = group_day(rec, "tma")
    for field, row in TMA_LATENCY_ROWS.items():
        r = rec.get("tma", {}).get(row)
        if not r or not r.get("value"):
            continue
        out[field] = {"value": float(r["value"]), "benchmark": f"tensor_probe {row} ({result_path})",
                      "n": int(r.get("n", 1)), "p10": float(r.get("p10", r["value"])),
                      "p90": float(r.get("p90", r["value"])), "date": day}
    return out


def tma_pitch_field(rec: dict, result_path: str = "tensor.json") -> dict:
    """``tma_mid_sector_row_cost``: how much longer a TMA box row (128 bytes) that starts mid-sector takes
    than one on a sector, from tensor_probe's tma_pitch rows: 128x64 fp16 boxes on every SM from L2-resident
    rows ``8192 + offset`` bytes apart, each SM reading its own tiles (``l2_disjoint``: the L2 path, not the
    one-thread issuing loop, limits them). For an offset whose rows start mid-sector in a fraction ``f`` of
    a box (row ``r`` at ``r * pitch``), and the aligned tensor's rate over its rate ``R`` at the same ring
    depth, a mid-sector row costs ``1 + (R - 1) / f`` aligned rows; the value is the median over offsets
    and depths (offsets whose rows all start on a sector, ``f = 0``, give none)."""
    rows = rec.get("tma_pitch", {})
    sector = 32
    costs, used = [], []
    for key, r in sorted(rows.items()):
        m = re.fullmatch(r"tma_pitch\.box(\d+)x64\.off(\d+)\.l2_disjoint\.sms(\d+)\.s(\d+)", key)
        if not m or int(m.group(1)) != 128 or int(m.group(2)) == 0 or not r.get("value"):
            continue
        box_rows, off = int(m.group(1)), int(m.group(2))
        base = rows.get(f"tma_pitch.box{box_rows}x64.off0.l2_disjoint.sms{m.group(3)}.s{m.group(4)}")
        if not base or not base.get("value"):
            continue
        pitch = 8192 + off
        f = sum((i * pitch) % sector != 0 for i in range(box_rows)) / box_rows
        if f == 0:
            continue
        ratio = float(base["value"]) / float(r["value"])
        costs.append(1.0 + (ratio - 1.0) / f)
        used.append(f"off{off}.s{m.group(4)} {float(base['value']):.4g}/{float(r['value']):.4g} B/clk/SM, "
                    f"f {f:.3g} -> {costs[-1]:.3g}")
    if not costs:
        return {}
    s = summarize(costs)
    day = group_day(rec, "tma_pitch")
    # the one-box latency of the same 128x64 boxes from the offsets whose rows start mid-sector
    lats = [(k, float(r["value"])) for k, r in sorted(rows.items())
            if re.fullmatch(r"tma_pitch\.box128x64\.off(\d+)\.l2\.lat", k) and r.get("value")
            and any((i * (8192 + int(k.split(".off")[1].split(".")[0]))) % sector for i in range(128))]
    latency = {}
    if lats:
        ls = summarize([v for _, v in lats])
        latency = {"tma_mid_sector_latency_cycles": {
            "value": ls["median"], "benchmark": f"tensor_probe tma_pitch one-box latency rows ({result_path}: "
                                                f"{', '.join(f'{k} {v:.4g}' for k, v in lats)} cycles)",
            "n": ls["n"], "p10": ls["p10"], "p90": ls["p90"], "how": "median over offsets", "date": day}}
    return {**latency, "tma_mid_sector_row_cost": {
        "value": s["median"], "benchmark": f"tensor_probe tma_pitch 128x64 l2_disjoint rows ({result_path}: "
                                           f"aligned / offset rate; {'; '.join(used)})",
        "n": len(costs), "p10": s["p10"], "p90": s["p90"], "how": "median over offsets and ring depths",
        "date": day}}


def tma_pair_fields(rec: dict, result_path: str = "tma_pair.json") -> dict:
    """The landing law of a GEMM k-step's TMA box pair (A and B boxes on one mbarrier), from tma_pair_probe's
    one-SM, one-in-flight rows (nothing else loads: the copy's own latency): issue-to-landing cycles against
    the pair's bytes, a least-squares line over the pairs (16, 32, 48 KiB). ``tma_fixed_latency_cycles`` /
    ``tma_landing_bytes_per_clk``: from L2-resident tiles (``l2_disjoint.sms1.s1``; every pair's median);
    ``tma_hbm_fixed_latency_cycles`` / ``tma_hbm_landing_bytes_per_clk``: from fresh tiles (``hbm.sms1.s1``),
    the mean of the per-pair cycles the record keeps (``raw``: the one block's pairs of the last launch, the
    first left out): those alternate between two values (every second pair finds some of its lines brought
    by its neighbour's; e.g. 712 and 1476 for 16 KiB), so the median is one of the two and the mean is what a
    stream of pairs pays. The wait loop polls the mbarrier: values come in steps of ~190 cycles."""
    rows, raw = rec.get("rows", {}), rec.get("raw", {})
    day = rec.get("meta", {}).get("date_utc")
    out = {}
    for field_l0, field_rate, source, use_mean in (
            ("tma_fixed_latency_cycles", "tma_landing_bytes_per_clk", "l2_disjoint", False),
            ("tma_hbm_fixed_latency_cycles", "tma_hbm_landing_bytes_per_clk", "hbm", True)):
        pts, used = [], []
        for key, r in sorted(rows.items()):
            m = re.fullmatch(rf"tma_pair\.a(\d+)b(\d+)\.{source}\.sms1\.s1", key)
            if not m or not r.get("lat_cycles", {}).get("value"):
                continue
            nbytes = float(r["pair_bytes"])
            if use_mean:
                per_pair = raw.get(key, {}).get("block0_lat_cycles", [])[1:]
                if not per_pair:
                    continue
                y = sum(per_pair) / len(per_pair)
                used.append(f"{key} mean {y:.4g} (median {float(r['lat_cycles']['value']):.4g}, n {len(per_pair)})")
            else:
                y = float(r["lat_cycles"]["value"])
                used.append(f"{key} {y:.4g} (p10 {float(r['lat_cycles']['p10']):.4g}, "
                            f"p90 {float(r['lat_cycles']['p90']):.4g})")
            pts.append((nbytes, y))
        if len(pts) < 2 or len({x for x, _ in pts}) < 2:
            continue
        slope, l0 = block_rate_fit(pts)  # least-squares slope and intercept
        if l0 <= 0 or slope <= 0:
            continue
        bench = (f"tma_pair_probe one SM, one pair in flight, {source} ({result_path}: "
                 f"{'; '.join(used)} cycles against {', '.join(f'{x / 1024:.0f}' for x, _ in pts)} KiB)")
        out[field_l0] = {"value": l0, "unit": "cycles", "benchmark": bench, "n": len(pts), "p10": l0, "p90": l0,
                         "how": "least-squares intercept over the pairs' bytes", "date": day}
        out[field_rate] = {"value": 1.0 / slope, "unit": "B/clk", "benchmark": bench, "n": len(pts),
                           "p10": 1.0 / slope, "p90": 1.0 / slope,
                           "how": "1 / least-squares slope over the pairs' bytes", "date": day}
    return out


def tma_share_field(rec: dict, result_path: str = "tensor.json") -> dict:
    """``l2_shared_line_bytes_per_s``: the chip's L2 read rate for lines that several SMs read, from
    tensor_probe's tma_share rows at the deepest ring it ran (the GEMMs keep 2 to 5 stages of 16-48 KiB in
    flight): the median over G >= 2 readers of a line, beside the G = 1 row of the same ring (each SM its
    own lines, the case ``l2_bytes_per_s``'s l2_read measures)."""
    rows = rec.get("tma_share", {})
    parsed = []
    for key, r in rows.items():
        m = re.fullmatch(r"tma_share\.box(\d+)x64\.g(\d+)\.sms(\d+)\.s(\d+)", key)
        if m and r.get("chip_bytes_per_s", {}).get("value"):
            parsed.append((int(m.group(4)), int(m.group(2)), float(r["chip_bytes_per_s"]["value"])))
    if not parsed:
        return {}
    deepest = max(s for s, _, _ in parsed)
    shared = [(g, v) for s, g, v in parsed if s == deepest and g >= 2]
    own = [v for s, g, v in parsed if s == deepest and g == 1]
    if not shared:
        return {}
    st = summarize([v for _, v in shared])
    return {"l2_shared_line_bytes_per_s": {
        "value": st["median"], "unit": "B/s",
        "benchmark": (f"tensor_probe tma_share 256x64 boxes, {deepest} in flight per SM on every SM ({result_path}: "
                      f"lines read by G SMs: {', '.join(f'G {g} {v / 1e12:.3g}' for g, v in sorted(shared))} TB/s; "
                      f"by one SM: {', '.join(f'{v / 1e12:.3g}' for v in own) or 'not run'} TB/s)"),
        "n": st["n"], "p10": st["p10"], "p90": st["p90"], "how": "median over G >= 2",
        "date": group_day(rec, "tma_share")}}


def wgmma_latency_field(rec: dict, result_path: str = "tensor.json") -> dict:
    """``wgmma_latency_cycles_by_n``: [N, cycles] of one wgmma m64nNk16 fp16 (operands in shared memory)
    from issue to wait_group 0, one warpgroup (tensor_probe's wgmma latency rows)."""
    pts = []
    for key, row in rec.get("wgmma", {}).items():
        m = re.fullmatch(r"m64n(\d+)k16_fp16_f32_ss\.lat", key)
        if m and row.get("value"):
            pts.append([int(m.group(1)), float(row["value"])])
    if len(pts) < 2:
        return {}
    pts.sort()
    ys = [p[1] for p in pts]
    return {"wgmma_latency_cycles_by_n": {
        "value": pts, "benchmark": f"tensor_probe wgmma m64nNk16 fp16 latency rows ({result_path})", "n": len(pts),
        "p10": min(ys), "p90": max(ys), "how": "one point per N", "date": group_day(rec, "wgmma")}}


def clock_load_fields(rec: dict, result_path: str = "clock_load.json") -> dict:
    """``sm_clock_hz_by_tensor_activity``: [tensor activity, SM clock Hz] pairs, activity being the
    tensor FLOP per clock per SM over the fp16 dense rate (4096), from the clock_load_probe loads in
    :data:`CLOCK_LOADS` (clock64 over %globaltimer, per-block median over 0.5 s on all SMs)."""
    loads = rec.get("loads", {})
    pts, used = [], []
    for name in CLOCK_LOADS:
        ld = loads.get(name)
        if not ld:
            continue
        pts.append([round(float(ld["tensor_duty"]), 4), float(ld["clock_hz"]["value"])])
        used.append(f"{name} {pts[-1][0]:.3f} -> {pts[-1][1] / 1e9:.3f} GHz")
    if len(pts) < 2:
        return {}
    pts.sort()
    clocks = [p[1] for p in pts]
    return {"sm_clock_hz_by_tensor_activity": {
        "value": pts, "benchmark": f"clock_load_probe ({result_path}: {'; '.join(used)})", "n": len(pts),
        "p10": min(clocks), "p90": max(clocks), "how": "one point per load",
        "date": rec.get("meta", {}).get("date_utc")}}


def clock_memory_fields(rec: dict, result_path: str = "clock_load_mem/clock_load.json") -> dict:
    """``sm_clock_l2_slope_by_tensor_activity`` and ``sm_clock_hbm_slope_by_tensor_activity``: [tensor
    activity, Hz of SM clock lost per byte/s of L2 (HBM) reads] pairs, from clock_load_probe's memory-stream
    loads (:data:`CLOCK_MEMORY_LOADS`): at each load's tensor activity, the clock the record's own curve
    of bare loads (:func:`clock_load_fields`) gives, less the clock measured beside the stream, over the
    stream's bytes/s. The stream alone gives the point at activity 0, the stream beside wgmma the one at
    its activity (about 0.85); the HBM stream's bytes are its loads' bytes (some of them may hit the L2)."""
    curve = clock_load_fields(rec, result_path).get("sm_clock_hz_by_tensor_activity")
    loads = rec.get("loads", {})
    if not curve:
        return {}
    from tilesim.hardware.spec import interp as curve_at  # noqa: PLC0415

    pts_curve = curve["value"]

    def interp(x: float) -> float:
        return curve_at(pts_curve, x)

    out = {}
    for kind, names in CLOCK_MEMORY_LOADS.items():
        pts, used = [], []
        for name in names:
            ld = loads.get(name)
            if not ld or not ld.get("stream_bytes_per_s") or ld.get("stream_source") != kind:
                continue
            act = float(ld["tensor_duty"])
            clock = float(ld["clock_hz"]["value"])
            slope = max(0.0, interp(act) - clock) / float(ld["stream_bytes_per_s"])
            pts.append([round(act, 4), slope])
            used.append(f"{name}: activity {act:.3f}, {ld['stream_bytes_per_s'] / 1e12:.3g} TB/s, "
                        f"{clock / 1e9:.4g} GHz against {interp(act) / 1e9:.4g} on the curve")
        if len(pts) < 2:
            continue
        pts.sort()
        out[f"sm_clock_{kind}_slope_by_tensor_activity"] = {
            "value": pts, "unit": "Hz per B/s", "benchmark": f"clock_load_probe ({result_path}: {'; '.join(used)})",
            "n": len(pts), "p10": min(p[1] for p in pts), "p90": max(p[1] for p in pts), "how": "one point per load",
            "date": rec.get("meta", {}).get("date_utc")}
    return out


def clock_tma_fields(rec: dict, result_path: str = "clock_load_tma/clock_load.json") -> dict:
    """``sm_clock_l2_tma_slope_by_tensor_activity``: [tensor activity, Hz of SM clock lost per byte/s of L2
    reads brought by the TMA] pairs, from clock_load_probe's TMA streams (:data:`CLOCK_TMA_LOADS`: 1D bulk
    copies of an L2-resident buffer into shared memory, 1-5 in flight), as :func:`clock_memory_fields` does
    (the record's own curve of bare loads, less the clock beside the stream, over the stream's bytes/s):
    the stream alone at activity 0, and beside wgmma on random operands the median activity and median
    slope of the loads at their several rates (3-9 TB/s)."""
    curve = clock_load_fields(rec, result_path).get("sm_clock_hz_by_tensor_activity")
    loads = rec.get("loads", {})
    if not curve:
        return {}
    from tilesim.hardware.spec import interp as curve_at  # noqa: PLC0415

    def slope_of(name: str) -> tuple[float, float, str] | None:
        ld = loads.get(name)
        if not ld or not ld.get("stream_bytes_per_s") or ld.get("stream_source") != "l2_tma":
            return None
        act, clock = float(ld["tensor_duty"]), float(ld["clock_hz"]["value"])
        on_curve = curve_at(curve["value"], act)
        return (act, max(0.0, on_curve - clock) / float(ld["stream_bytes_per_s"]),
                f"{name}: activity {act:.3f}, {ld['stream_bytes_per_s'] / 1e12:.3g} TB/s, {clock / 1e9:.4g} GHz "
                f"against {on_curve / 1e9:.4g} on the curve")

    alone_name, beside_names = CLOCK_TMA_LOADS
    alone = slope_of(alone_name)
    beside = [r for r in (slope_of(n) for n in beside_names) if r is not None]
    if alone is None or not beside:
        return {}
    import statistics  # noqa: PLC0415

    pts = [[round(alone[0], 4), alone[1]],
           [round(statistics.median(r[0] for r in beside), 4), statistics.median(r[1] for r in beside)]]
    slopes = [alone[1]] + [r[1] for r in beside]
    return {"sm_clock_l2_tma_slope_by_tensor_activity": {
        "value": pts, "unit": "Hz per B/s",
        "benchmark": f"clock_load_probe TMA streams ({result_path}: {'; '.join([alone[2]] + [r[2] for r in beside])})",
        "n": len(slopes), "p10": min(slopes), "p90": max(slopes),
        "how": "the stream alone; beside wgmma, the median activity and the median slope over the loads",
        "date": rec.get("meta", {}).get("date_utc")}}


#: clock_load_probe's tf32 loads at full rate (the record in calibration/clock_load_dtype/), by the M of
#: their instruction: mma.sync m16n8k8 and wgmma m64n256k8
CLOCK_TF32_LOADS = {16: "mma_sync_tf32_rand", 64: "wgmma_tf32_rand"}


def clock_tf32_fields(rec: dict, result_path: str = "clock_load_dtype/clock_load.json") -> dict:
    """``tf32_clock_weight_by_mma_m``: [instruction M, weight] pairs: at each tf32 load of
    :data:`CLOCK_TF32_LOADS` (random operands, full rate), the tensor activity at which the record's own curve
    of fp16 loads (:func:`clock_load_fields`) gives the clock measured, over the load's own activity (its
    FLOP per clock per SM over the fp16 dense rate): how many fp16 FLOPs one tf32 FLOP weighs on the clock."""
    curve = clock_load_fields(rec, result_path).get("sm_clock_hz_by_tensor_activity")
    loads = rec.get("loads", {})
    if not curve:
        return {}
    pts_curve = sorted(curve["value"])
    pts, used = [], []
    for m, name in sorted(CLOCK_TF32_LOADS.items()):
        ld = loads.get(name)
        if not ld or not ld.get("tensor_duty"):
            continue
        act, clock = float(ld["tensor_duty"]), float(ld["clock_hz"]["value"])
        on_curve = _activity_at_clock(pts_curve, clock)
        if on_curve is None:
            continue
        pts.append([m, on_curve / act])
        used.append(f"{name}: activity {act:.3f}, {clock / 1e9:.4g} GHz, which the fp16 curve gives at {on_curve:.3f}")
    if not pts:
        return {}
    ws = [p[1] for p in pts]
    return {"tf32_clock_weight_by_mma_m": {
        "value": pts, "benchmark": f"clock_load_probe tf32 loads ({result_path}: {'; '.join(used)})", "n": len(pts),
        "p10": min(ws), "p90": max(ws), "how": "one point per load", "date": rec.get("meta", {}).get("date_utc")}}


def _activity_at_clock(curve: list, clock: float) -> float | None:
    """The activity at which a falling curve of [activity, clock] points passes ``clock`` (linear between
    points); None outside it."""
    for (a0, c0), (a1, c1) in zip(curve, curve[1:], strict=False):
        if min(c0, c1) <= clock <= max(c0, c1) and c0 != c1:
            return a0 + (c0 - clock) / (c0 - c1) * (a1 - a0)
    return None


def _cycles_per_kstep(row: dict) -> float:
    """An mma_feed row's cycles per k-step (its median, or the plain number of older records)."""
    v = row["cycles_per_kstep"]
    return float(v["value"] if isinstance(v, dict) else v)


def mma_feed_fields(rec: dict, result_path: str = "mma_feed.json") -> dict:
    """``ldgsts16_pipe_cycles``: how long one warp's 16-byte cp.async keeps the shared-memory pipe
    from the fragment loads behind it: the cycles per k-step the ldmatrix-fed mma.sync loop gains when
    6 zero-fill copies per thread are issued after its barrier (gt_zfill_k2, no bytes read) over the
    same loop with only the commit/wait (gt_commit_k2), per warp copy (mma_feed_probe gemm_traffic),
    less the issue of the copies' address arithmetic (the loop's extra SASS instructions besides the
    copies, one per cycle and scheduler: the engine charges them apart, GlobalLoad.address_instructions)."""
    gt = rec.get("gemm_traffic", {})
    with_copies, without = gt.get("gt_zfill_k2"), gt.get("gt_commit_k2")
    if not with_copies or not without:
        return {}

    fields = copy_line_fields(rec, result_path)
    per_thread = with_copies["copies_per_thread_per_kstep"]
    warps = with_copies["warps_per_block"] * with_copies["blocks_per_sm"]
    copies = per_thread * warps
    extra = with_copies["sass"]["instructions"] - without["sass"]["instructions"] - per_thread
    issue = extra * warps / SCHEDULERS_PER_SM
    value = (_cycles_per_kstep(with_copies) - _cycles_per_kstep(without) - issue) / copies
    return {"ldgsts16_pipe_cycles": {
        "value": value, "benchmark": f"mma_feed_probe gemm_traffic ({result_path}: gt_zfill_k2 {_cycles_per_kstep(with_copies):.1f} - "
                                     f"gt_commit_k2 {_cycles_per_kstep(without):.1f} cycles per k-step, less {issue:.0f} cycles of "
                                     f"issue for {extra} address instructions per warp, over {copies} warp copies)",
        "n": 1, "p10": value, "p90": value, "how": "difference of two medians",
        "date": (rec.get("group_runs", {}).get("gemm_traffic") or rec.get("meta", {})).get("date_utc")}, **fields}


def copy_line_fields(rec: dict, result_path: str = "mma_feed.json") -> dict:
    """``ldgsts16_line_cycles``: what each global line a warp's 16-byte cp.async reads beyond the shared lines
    it writes adds to the k-step of an ldmatrix-fed mma.sync loop (the L1 writes a copy into shared memory
    once per global line it reads: a half line costs a wavefront as a whole one does; Nsight Compute's shared
    wavefronts per LDGSTS are the lines per copy, 5.33 and 6.0, in mma_feed's gemm_traffic rows): the cycles per
    k-step the B N x K copies (8 half-lines a warp copy) add over B K x N ones (4 lines) in mma_feed_probe's
    gemm_bcol pair of otherwise alike loops, over the extra lines of the block's warp copies a k-step
    (the records' ``ldgsts_lines_computed``, from the copies' addresses)."""
    rows = rec.get("gemm_bcol", {})
    more, fewer = (rows.get(name) for name in BCOL_LINE_ROWS)
    if not more or not fewer:
        return {}

    def beyond(row):  # global lines beyond the shared lines written, over one thread's copies of a k-step
        lines = row["ldgsts_lines_computed"]
        return sum(max(0, g - s) for g, s in zip(lines["global_lines"], lines["smem_lines"], strict=True))

    from validation.calibration.mma_feed_probe import GT_WARPS  # noqa: PLC0415  (the gemm_bcol loops' warps a block)

    extra = (beyond(more) - beyond(fewer)) * GT_WARPS * more.get("blocks_per_sm_seen", 1)
    if extra <= 0:
        return {}
    value = (_cycles_per_kstep(more) - _cycles_per_kstep(fewer)) / extra
    return {"ldgsts16_line_cycles": {
        "value": value, "benchmark": f"mma_feed_probe gemm_bcol ({result_path}: {BCOL_LINE_ROWS[0]} {_cycles_per_kstep(more):.1f} - "
                                     f"{BCOL_LINE_ROWS[1]} {_cycles_per_kstep(fewer):.1f} cycles per k-step over {extra} more "
                                     "global lines than shared lines in the block's warp copies)",
        "n": 1, "p10": value, "p90": value, "how": "difference of two medians",
        "date": rec.get("group_runs", {}).get("gemm_bcol", {}).get("date_utc") or rec.get("meta", {}).get("date_utc")}}


def cluster_fields(rec: dict, result_path: str = "cluster_wgmma.json") -> dict:
    """``cluster_release_arrive_cycles``: the cycles a consumer spends per k-step in its release arrive on
    the other block of a cluster pair (cluster_probe, :data:`CLUSTER_RELEASE_ROW`)."""
    row = rec.get("wgmma", {}).get(CLUSTER_RELEASE_ROW)
    if not row or "release_per_step" not in row:
        return {}
    r = row["release_per_step"]
    date = rec.get("meta", {}).get("date_utc")
    out = {"cluster_release_arrive_cycles": {
        "value": float(r["value"]), "benchmark": f"cluster_probe {CLUSTER_RELEASE_ROW} release_per_step ({result_path})",
        "n": int(r["n"]), "p10": float(r["p10"]), "p90": float(r["p90"]), "date": date}}
    # the rest of the consumer's k-step: its full-barrier wait, issuing its 4 wgmma m64n256k16, wait_group 1
    # (the ring's cycles per k-step less the release); with the release on the same thread, nothing else
    # overlaps them
    if "full_wait_per_step" in row:
        period, rel = float(row["value"]), float(r["value"])
        parts = ", ".join(f"{k} {float(row[k]['value']):.1f}" for k in ("full_wait_per_step", "wait_group_per_step"))
        out["wgmma_consumer_step_cycles"] = {
            "value": period - rel, "n": int(r["n"]), "p10": period - rel, "p90": period - rel, "date": date,
            "how": "difference of two medians",
            "benchmark": f"cluster_probe {CLUSTER_RELEASE_ROW} ({result_path}): {period:.1f} cycles per k-step less the "
                         f"release's {rel:.1f} (of which {parts})"}
    return {**out, **refill_fields(rec, result_path), **release_hbm_fields(rec, result_path)}


#: cluster_probe's rings with the reference row's geometry (two consumers, own B, remote release) at 2 and 4
#: stages: 1 and 3 copies in flight at a release
RELEASE_HBM_ROWS = ((1, "wgmma.c2.s2.c2_own_remote.rel_one"), (3, CLUSTER_RELEASE_ROW))
#: the same probe run on a 1 GiB tensor (every block its own rows, each k-step's boxes from HBM), beside
RELEASE_HBM_FILE = "cluster_wgmma_1024mib.json"


def release_hbm_fields(rec: dict, result_path: str = "cluster_wgmma.json") -> dict:
    """``cluster_release_hbm_extra_cycles_by_inflight``: how much longer a ring's cluster-scope release takes
    when the copies in flight come from HBM than from L2, by copies in flight: the reference ring's
    release_per_step on the 1 GiB tensor (:data:`RELEASE_HBM_FILE`, beside ``result_path``) less on the
    16 MiB one, at 2 and 4 stages (:data:`RELEASE_HBM_ROWS`). A release is never shorter for where its copies
    come from: a 2-stage difference below 0 (the one copy in flight issued a k-step earlier has landed either
    way) is taken as 0. ``{}`` without both files' rows."""
    path = Path(result_path)
    beside = (path if path.is_absolute() else REPO_ROOT / path).with_name(RELEASE_HBM_FILE)
    if not beside.exists():
        return {}
    hbm = json.loads(beside.read_text()).get("wgmma", {})
    l2 = rec.get("wgmma", {})
    v = lambda r: float(r["release_per_step"]["value"]) if isinstance(r["release_per_step"], dict) \
        else float(r["release_per_step"])  # noqa: E731
    points, used = [], []
    for inflight, key in RELEASE_HBM_ROWS:
        if "release_per_step" not in hbm.get(key, {}) or "release_per_step" not in l2.get(key, {}):
            return {}
        d = v(hbm[key]) - v(l2[key])
        points.append([inflight, max(0.0, d)])
        used.append(f"{key} {v(hbm[key]):.1f} - {v(l2[key]):.1f}")
    ys = [y for _, y in points]
    return {"cluster_release_hbm_extra_cycles_by_inflight": {
        "value": points, "unit": "cycles", "n": len(points), "p10": min(ys), "p90": max(ys),
        "date": rec.get("meta", {}).get("date_utc"), "how": "one point per row (copies in flight, 1 GiB - 16 MiB release)",
        "benchmark": f"cluster_probe rings on a 1 GiB and a 16 MiB tensor ({RELEASE_HBM_FILE} and {result_path}: "
                     + "; ".join(used) + " cycles per k-step; below 0 taken as 0)"}}


def refill_fields(rec: dict, result_path: str = "cluster_wgmma.json") -> dict:
    """What a wgmma ring's producer waits for between a stage's data landing in the next step and its refill:
    the consumers issue that step's wgmmas, wait_group(1) and arrive on the stage's empty barrier. From the
    2-stage rings without a cluster (:data:`REFILL_ROWS`), where every k-step waits for its data:
    ``wgmma_refill_path_cycles``, the k-step less the consumer's full-barrier wait and its release (the wgmma
    issue, wait_group and loop), and ``mbarrier_local_release_cycles``, the release (a local arrive); medians
    over the rows (1 and 2 consumers)."""
    rows = [(k, rec.get("wgmma", {}).get(k)) for k in REFILL_ROWS]
    rows = [(k, r) for k, r in rows if r and all(f in r for f in ("full_wait_per_step", "release_per_step"))]
    if not rows:
        return {}
    v = lambda r, f: float(r[f]["value"]) if isinstance(r[f], dict) else float(r[f])  # noqa: E731
    paths = sorted(v(r, "value") - v(r, "full_wait_per_step") - v(r, "release_per_step") for _, r in rows)
    rels = sorted(v(r, "release_per_step") for _, r in rows)
    used = "; ".join(f"{k} {v(r, 'value'):.1f} - full wait {v(r, 'full_wait_per_step'):.1f} - release "
                     f"{v(r, 'release_per_step'):.1f}" for k, r in rows)
    date = rec.get("meta", {}).get("date_utc")
    bench = f"cluster_probe 2-stage rings without a cluster ({result_path}: {used} cycles per k-step)"
    return {"wgmma_refill_path_cycles": {"value": statistics.median(paths), "unit": "cycles", "benchmark": bench,
                                         "n": len(paths), "p10": paths[0], "p90": paths[-1], "date": date,
                                         "how": "median over the rows of the k-step less its full wait and release"},
            "mbarrier_local_release_cycles": {"value": statistics.median(rels), "unit": "cycles", "benchmark": bench,
                                              "n": len(rels), "p10": rels[0], "p90": rels[-1], "date": date,
                                              "how": "median over the rows of release_per_step"}}


def cluster_fence_fields(rec: dict, result_path: str = "cluster_fence.json") -> dict:
    """``cluster_release_fence_cycles`` from cluster_probe's fence rows
    (:func:`validation.calibration.cluster_probe.release_model_fields`)."""
    from validation.calibration.cluster_probe import release_by_inflight_field, release_model_fields  # noqa: PLC0415

    return {**release_model_fields(rec, result_path), **release_by_inflight_field(rec, result_path)}


def source_text(entry: dict, date: str) -> str:
    """``calibration: <benchmark>, <date>, median of N runs (p10..p90)``."""
    how = entry.get("how") or f"median of {entry['n']} runs"
    date = entry.get("date") or date  # a probe recorded on its own day carries its date
    return f"calibration: {entry['benchmark']}, {date}, {how} ({entry['p10']:.4g}..{entry['p90']:.4g})"


def write_profile(results: dict, path: str | Path) -> Path:
    """Write the calibrated profile TOML (``[meta]`` then one ``[field] value/source`` table each).

    ``results`` is what :func:`run_calibration` returns: ``meta`` (date_utc, device_name,
    git_revision) and ``fields``. Only fields in :data:`PROFILE_FIELDS` are accepted (ValueError
    otherwise); each must have value, benchmark, n, p10, p90, with value > 0.
    """
    meta = results.get("meta", {})
    fields = results.get("fields", {})
    if not fields:
        raise ValueError("write_profile: results['fields'] is empty")
    unknown = [f for f in fields if f not in PROFILE_FIELDS]
    if unknown:
        raise ValueError(f"write_profile: fields {unknown} are not calibrated fields ({', '.join(PROFILE_FIELDS)})")
    date = str(meta.get("date_utc") or "")
    if not date:
        raise ValueError("write_profile: results['meta']['date_utc'] is missing")
    lines = ["# Calibrated hardware profile, written by validation/calibrate.py from measurements.",
             "# Do not edit by hand: rerun `python -m validation.calibration.calibrate` on the GPU.",
             "[meta]", f"date = {_toml_str(date)}",
             f"device = {_toml_str(meta.get('device_name') or 'unknown')}",
             f"git_revision = {_toml_str(meta.get('git_revision') or 'unknown')}", ""]
    for name in PROFILE_FIELDS:
        if name not in fields:
            continue
        e = fields[name]
        missing = [k for k in ("value", "benchmark", "n", "p10", "p90") if k not in e]
        if missing:
            raise ValueError(f"write_profile: field {name} lacks {missing}")
        if isinstance(e["value"], list):
            if not e["value"] or not all(isinstance(p, list) and len(p) == 2 and p[1] >= 0 for p in e["value"]):
                raise ValueError(f"write_profile: field {name} value must be [[x, y >= 0], ...]")
        elif not (isinstance(e["value"], (int, float)) and e["value"] > 0):
            raise ValueError(f"write_profile: field {name} value = {e['value']!r} must be > 0")
        lines += [f"[{name}]", f"value = {_toml_num(e['value'])}", f"source = {_toml_str(source_text(e, date))}"]
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("\n".join(lines) + "\n")
    return p


def _standalone(args, filename: str, measure) -> dict:
    """Run one group of benchmarks alone (``measure(bench)`` returns their results) and write them,
    after this machine's metadata, to ``<out>/<filename>``."""
    from validation.harness.metadata import collect_metadata  # noqa: PLC0415

    b = _Bench(args.runs)
    res = {"meta": collect_metadata(), **measure(b)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / filename).write_text(json.dumps(res, indent=2, default=str) + "\n")
    return res


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.calibration.calibrate", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None,
                    help="directory for calibration.json (default validation/results/<gpu>/calibration)")
    ap.add_argument("--profile", default=None,
                    help="calibrated profile TOML to write (default tilesim/hardware/calibrated/<gpu>.toml)")
    ap.add_argument("--no-profile", action="store_true", help="only write calibration.json")
    ap.add_argument("--runs", type=int, default=RUNS, help=f"runs per benchmark (>= {MIN_RUNS})")
    ap.add_argument("--l1-spread", action="store_true",
                    help="measure only the spread-lane L1 rate into <out>/l1_spread.json (merged by --from-json)")
    ap.add_argument("--lds-outer", action="store_true",
                    help="measure only the shared-memory-fed outer products into <out>/lds_outer.json")
    ap.add_argument("--staged-outer", action="store_true",
                    help="measure only the staged outer products (R blocks per SM) into <out>/staged_outer.json")
    ap.add_argument("--loaded-latency", action="store_true",
                    help="measure only DRAM latency under background load into <out>/loaded_latency.json")
    ap.add_argument("--from-json", default=None,
                    help="rebuild the profile from a recorded calibration.json (no GPU needed)")
    args = ap.parse_args(argv)
    if args.from_json:
        results = json.loads(Path(args.from_json).read_text())
        # probes recorded beside calibration.json (standalone runs, or older calibrations without them):
        # (file, benchmark key, a key the full result has, the part of the file that is the result)
        for fname, key, full, part in (("dispatch.json", "dispatch", "probes", None),
                                       ("l2_probe.json", "l2_probe", "writeback", None),
                                       ("l1_spread.json", "l1_scatter_spread", "value", "l1_scatter_spread"),
                                       ("staging.json", "staging", "patterns", None)):
            beside = Path(args.from_json).with_name(fname)
            if full not in results["benchmarks"].get(key, {}) and beside.exists():
                rec = json.loads(beside.read_text())
                results["benchmarks"][key] = rec[part] if part else rec
        results["fields"] = fields_from_benchmarks(results["benchmarks"])
        pipes = Path(args.from_json).with_name("pipes.json")
        if pipes.exists():  # the pipes probe (validation/calibration/pipes_probe.py), recorded beside
            from validation.calibration.pipes_probe import fields as pipe_fields  # noqa: PLC0415

            rec = json.loads(pipes.read_text())
            day = rec.get("meta", {}).get("date_utc")
            measured = {k: {**v, "date": day} for k, v in pipe_fields(rec).items() if k in PIPE_FIELDS}
            results["fields"].update(measured)
        streams = Path(args.from_json).with_name("hbm_stream.json")
        if streams.exists():  # validation/calibration/hbm_stream_probe.py, recorded beside
            results["fields"].update(hbm_stream_fields(json.loads(streams.read_text())))
        rate = Path(args.from_json).with_name("block_rate.json")
        if rate.exists():  # validation/calibration/block_rate_probe.py, recorded beside
            results["fields"]["block_launch_per_clk_per_sm_by_threads"] = block_rate_field(json.loads(rate.read_text()))
        # recorded as validation/results/<gpu>/calibration/calibration.json: the profile is <gpu>.toml
        gpu = Path(args.from_json).resolve().parent.parent.name
        # the tensor-core probes' records, each beside it when recorded (validation/calibration/*_probe.py)
        from validation.calibration.uncoalesced_probe import burst_fields  # noqa: PLC0415
        from validation.calibration.uncoalesced_probe import fields as uncoalesced_fields  # noqa: PLC0415

        def uncoalesced_with_bursts(rec: dict, rel: str) -> dict:
            miss = uncoalesced_fields(rec, rel)
            rate = miss["l1_miss_lines_per_clk_per_sm"]["value"] if miss else 1.0
            return {**miss, **burst_fields(rec, rate, rel)}


        beside = {"tensor.json": lambda rec, rel: {**tensor_fields(rec, gpu, rel), **tma_fields(rec, rel),
                                                   **wgmma_latency_field(rec, rel), **tma_pitch_field(rec, rel),
                                                   **tma_share_field(rec, rel)},
                  "tma_pair.json": tma_pair_fields,
                  "mma_feed.json": mma_feed_fields, "cluster_wgmma.json": cluster_fields,
                  "cluster_fence.json": cluster_fence_fields,
                  "clock_load.json": clock_load_fields, "uncoalesced.json": uncoalesced_with_bursts,
                  # clock_load_probe's memory-stream, tf32 and TMA-stream loads, each run in its own folder beside
                  "clock_load_mem/clock_load.json": clock_memory_fields,
                  "clock_load_dtype/clock_load.json": clock_tf32_fields,
                  "clock_load_tma/clock_load.json": clock_tma_fields}
        for name, fields_of in beside.items():
            path = Path(args.from_json).parent / name
            if path.exists():
                rel = path.resolve().relative_to(REPO_ROOT) if path.resolve().is_relative_to(REPO_ROOT) else path
                results["fields"].update(fields_of(json.loads(path.read_text()), str(rel)))
        # tc_feed_probe's copy rows under Nsight Compute (raw CSV beside the probe's --profile record)
        split = Path(args.from_json).with_name("tc_feed_ncu_split")
        if (split / "ncu.csv").exists() and (split / "tc_feed.json").exists():
            from validation.calibration.tc_feed_probe import sector_group_fields  # noqa: PLC0415

            rel = split.resolve().relative_to(REPO_ROOT) if split.resolve().is_relative_to(REPO_ROOT) else split
            results["fields"].update(sector_group_fields((split / "ncu.csv").read_text(),
                                                         json.loads((split / "tc_feed.json").read_text()),
                                                         f"{rel}/ncu.csv"))
        # mma_feed_probe's gemm_path rows: what 16-byte cp.async copies whose lane groups straddle sector
        # boundaries add to the k-step's path, per sector counted in the lane groups measured just above
        feed = Path(args.from_json).with_name("mma_feed.json")
        group = results["fields"].get("ldgsts16_sector_group_lanes")
        if feed.exists() and group:
            from validation.calibration.mma_feed_probe import copy_straddle_fields  # noqa: PLC0415

            rel = feed.resolve().relative_to(REPO_ROOT) if feed.resolve().is_relative_to(REPO_ROOT) else feed
            line = results["fields"].get("ldgsts16_line_cycles", {}).get("value", 0.0)
            results["fields"].update(copy_straddle_fields(json.loads(feed.read_text()), int(group["value"]),
                                                          "ldgsts16_sector_group_lanes, tc_feed_ncu_split", str(rel),
                                                          line_cycles=line))
        # hbm_tiles_probe's _4w_f512 cases under Nsight Compute (raw CSV in hbm_tiles_ncu/, the record beside)
        tiles_ncu = Path(args.from_json).with_name("hbm_tiles_ncu") / "ncu_raw.csv"
        tiles = Path(args.from_json).with_name("hbm_tiles.json")
        if tiles_ncu.exists() and tiles.exists():
            from validation.calibration.hbm_tiles_probe import dram_read_granularity_fields  # noqa: PLC0415

            rel = (tiles_ncu.resolve().relative_to(REPO_ROOT) if tiles_ncu.resolve().is_relative_to(REPO_ROOT)
                   else tiles_ncu)
            results["fields"].update(dram_read_granularity_fields(tiles_ncu.read_text(),
                                                                  json.loads(tiles.read_text()), str(rel)))
        # hbm_tiles_probe's records (hbm_tiles.json, and its pitch64/pitch128 run hbm_tiles_slices.json)
        recs = [json.loads(f.read_text()) for f in (tiles, Path(args.from_json).with_name("hbm_tiles_slices.json"))
                if f.exists()]
        if recs:
            from validation.calibration.hbm_tiles_probe import dram_access_rate_fields  # noqa: PLC0415

            results["fields"].update(dram_access_rate_fields(recs))
        # flush_probe's counter run: the dirty lines the harness's L2 flush leaves for the timed kernel
        flush_ncu = Path(args.from_json).with_name("flush_ncu") / "ncu_raw.csv"
        if flush_ncu.exists():
            from validation.calibration.flush_probe import flush_fields  # noqa: PLC0415

            rel = (flush_ncu.resolve().relative_to(REPO_ROOT) if flush_ncu.resolve().is_relative_to(REPO_ROOT)
                   else flush_ncu)
            timed = Path(args.from_json).with_name("flush.json")  # the timed run of the same day
            day = json.loads(timed.read_text()).get("meta", {}).get("date_utc") if timed.exists() else None
            results["fields"].update(flush_fields(flush_ncu.read_text(), str(rel), day))
        profile = args.profile or PROFILES_DIR / f"{gpu}.toml"
        print(f"wrote {write_profile(results, profile)} from {args.from_json}")
        return 0
    from validation.harness.suite import gpu_available  # noqa: PLC0415

    why = gpu_available()
    if why:
        print(f"validation.calibration.calibrate: needs CuPy and an NVIDIA GPU: {why}", file=sys.stderr)
        return 2
    from validation.harness.metadata import current_gpu_slug  # noqa: PLC0415
    from validation.harness.suite import default_results_root  # noqa: PLC0415

    args.out = args.out or str(default_results_root() / RESULTS_SUBDIR)
    args.profile = args.profile or str(PROFILES_DIR / f"{current_gpu_slug()}.toml")
    if args.l1_spread:
        def spread(b: _Bench) -> dict:
            clock = bench_clock(b)
            return {"clock_probe": clock, "l1_scatter_spread": bench_l1_spread(b, clock["value"])}

        res = _standalone(args, "l1_spread.json", spread)
        for k, v in res["l1_scatter_spread"]["by_stride"].items():
            print(f"  stride {k} B: {v['value']:.4g} lines/clk/SM (p10 {v['p10']:.4g}, p90 {v['p90']:.4g})")
        return 0
    if args.loaded_latency:
        res = _standalone(args, "loaded_latency.json", lambda b: {"loaded_latency": bench_loaded_latency(b)})
        for key, v in res["loaded_latency"]["rows"].items():
            print(f"  {key:12s} {v['value']:8.1f} cycles per hop (p10 {v['p10']:.1f}, p90 {v['p90']:.1f}) "
                  f"with {v['background_bytes_per_s'] / 1e12:.2f} TB/s of background reads")
        return 0
    if args.staged_outer:
        res = _standalone(args, "staged_outer.json", lambda b: {
            part: bench_staged_outer(b, **kw) for part, kw in STAGED_VARIANTS.items()})
        for part in STAGED_VARIANTS:
            for key, v in res[part]["rows"].items():
                print(f"  {part[:-13] or '-':3s} {key:14s} {v['value']:.3f} instr/clk/SM ({v['instr_per_iter']:g} instr per iteration)")
        return 0
    if args.lds_outer:
        res = _standalone(args, "lds_outer.json", lambda b: {"lds_outer": bench_lds_outer(b)})
        for key, v in res["lds_outer"]["rows"].items():
            print(f"  {key:10s} {v['value']:.3f} instr/clk/SM, {v['ffma_per_clk_per_sm']:.3f} FFMA/clk/SM "
                  f"({v['instr_per_iter']:g} instr, {v['lds_per_iter']:g} LDS per iteration)")
        return 0
    results = run_calibration(args.runs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "calibration.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(f"wrote {out / 'calibration.json'} in {results['meta']['calibration_wall_s']:.1f} s")
    if not args.no_profile:
        print(f"wrote {write_profile(results, args.profile)}")
    for name, e in results["fields"].items():
        val = e["value"] if isinstance(e["value"], list) else f"{e['value']:.4g}"
        print(f"  {name:34s} {val} {e.get('unit', '')}  (p10 {e['p10']:.4g}, p90 {e['p90']:.4g}, n={e['n']})")
    print(f"  {'smem_bytes_per_clk_per_sm (raw only)':34s} {results['derived']['smem_bytes_per_clk_per_sm']:.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
