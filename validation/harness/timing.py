"""GPU timing with CUDA events: warm-up, optional L2 flush between repetitions, raw samples kept.

``time_gpu(fn)`` times only the calls of ``fn`` (one CUDA event pair around each call); the L2
flush (a write over a buffer twice the L2 size) runs before each repetition, outside the timed
region. ``read_sm_clock_hz()`` reads the current SM clock through NVML or ``nvidia-smi``.
CuPy is imported lazily so that this module imports on machines without a GPU.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass


def percentile(sorted_vals: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of already sorted values."""
    if not sorted_vals:
        raise ValueError("percentile of an empty sample")
    pos = (len(sorted_vals) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    frac = pos - lo
    return sorted_vals[lo] * (1.0 - frac) + sorted_vals[hi] * frac


@dataclass(frozen=True)
class Timing:
    """Timed repetitions of one GPU call: raw samples (seconds) and their summary."""

    samples_s: tuple
    median_s: float
    p10_s: float
    p90_s: float
    min_s: float
    reps: int
    flushed_l2: bool

    @classmethod
    def from_samples(cls, samples_s: Sequence[float], *, flushed_l2: bool) -> Timing:
        """Summarise raw samples; raises ``ValueError`` (field ``samples_s``) if empty or not finite > 0."""
        vals = tuple(float(s) for s in samples_s)
        if not vals:
            raise ValueError("Timing.samples_s: need at least one sample")
        if any(not (math.isfinite(v) and v >= 0.0) for v in vals):
            raise ValueError(f"Timing.samples_s: samples must be finite and >= 0, got {vals!r}")
        srt = sorted(vals)
        return cls(samples_s=vals, median_s=percentile(srt, 50), p10_s=percentile(srt, 10),
                   p90_s=percentile(srt, 90), min_s=srt[0], reps=len(vals), flushed_l2=bool(flushed_l2))


def _check_args(warmup: int, reps: int, min_reps: int, budget_s: float) -> None:
    if not (isinstance(warmup, int) and warmup >= 0):
        raise ValueError(f"time_gpu: warmup = {warmup!r} must be an integer >= 0")
    if not (isinstance(reps, int) and reps >= 1):
        raise ValueError(f"time_gpu: reps = {reps!r} must be an integer >= 1")
    if not (isinstance(min_reps, int) and 1 <= min_reps):
        raise ValueError(f"time_gpu: min_reps = {min_reps!r} must be an integer >= 1")
    if not budget_s > 0:
        raise ValueError(f"time_gpu: budget_s = {budget_s!r} must be > 0")


def measure_loop(time_one: Callable[[], float], flush: Callable[[], None] | None, *, warmup: int,
                 reps: int, min_reps: int, budget_s: float,
                 clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """The repetition policy, independent of CUDA (so it is testable on a CPU).

    Runs ``warmup`` untimed calls (each preceded by ``flush`` when given), then timed repetitions
    until ``reps`` are done, stopping early once the wall-clock ``budget_s`` (counted from the first
    timed repetition) is spent but never before ``min(min_reps, reps)`` samples exist.
    ``time_one()`` runs one call and returns its duration in seconds.
    """
    _check_args(warmup, reps, min_reps, budget_s)
    floor = min(min_reps, reps)
    for _ in range(warmup):
        if flush is not None:
            flush()
        time_one()
    samples: list[float] = []
    t0 = clock()
    while len(samples) < reps:
        if flush is not None:
            flush()
        samples.append(time_one())
        if len(samples) >= floor and clock() - t0 > budget_s:
            break
    return samples


class L2Flusher:
    """Evicts the L2 by writing a device buffer of twice the L2 size (call the instance)."""

    def __init__(self, cp=None):
        if cp is None:
            import cupy as cp  # noqa: PLC0415
        self._cp = cp
        dev = cp.cuda.Device()
        l2_bytes = int(cp.cuda.runtime.getDeviceProperties(dev.id)["l2CacheSize"])
        self.nbytes = 2 * max(l2_bytes, 1 << 20)
        self._buf = cp.empty(self.nbytes // 4, dtype=cp.float32)
        self._count = 0

    def __call__(self) -> None:
        self._count += 1
        self._buf.fill(float(self._count % 1000 + 1))  # a non-zero fill is a kernel, not a memset


def time_gpu(fn: Callable[[], object], *, warmup: int = 5, reps: int = 30, min_reps: int = 20,
             flush_l2: bool = True, budget_s: float = 5.0, flusher: L2Flusher | None = None,
             before: Callable[[], object] | None = None) -> Timing:
    """Time ``fn`` (which enqueues GPU work on the current stream) with CUDA events.

    One event pair brackets each call; the L2 flush (when ``flush_l2``) and then ``before`` (if
    given) are enqueued before each repetition, outside the event pair and without waiting for
    them, so the GPU is still busy with them while the host records the start event and launches
    ``fn`` (this keeps the host's launch latency out of the measurement). Warm-up calls come
    first. At most ``reps`` and at least ``min(min_reps, reps)`` repetitions run; repetitions stop
    once ``budget_s`` seconds of wall time are spent. Pass ``flusher`` to reuse one flush buffer.
    """
    _check_args(warmup, reps, min_reps, budget_s)
    import cupy as cp  # noqa: PLC0415

    flushers = []
    if flush_l2:
        flushers.append(flusher if flusher is not None else L2Flusher(cp))
    if before is not None:
        flushers.append(before)

    def flush() -> None:
        for f in flushers:
            f()
    stream = cp.cuda.get_current_stream()
    start, end = cp.cuda.Event(), cp.cuda.Event()

    def time_one() -> float:
        start.record(stream)
        fn()
        end.record(stream)
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end) * 1e-3

    samples = measure_loop(time_one, flush if flushers else None, warmup=warmup, reps=reps, min_reps=min_reps,
                           budget_s=budget_s)
    return Timing.from_samples(samples, flushed_l2=flush_l2)


def _nvml_clock_hz(device_index: int, which: str) -> float | None:
    try:
        import pynvml  # noqa: PLC0415  (nvidia-ml-py)
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            h = pynvml.nvmlDeviceGetHandleByIndex(device_index)
            clk = {"sm": pynvml.NVML_CLOCK_SM, "mem": pynvml.NVML_CLOCK_MEM}[which]
            mhz = pynvml.nvmlDeviceGetClockInfo(h, clk)
            return float(mhz) * 1e6
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # NVML missing or refusing: fall back to nvidia-smi
        return None


def query_nvidia_smi(fields: Sequence[str], device_index: int = 0) -> list[str] | None:
    """Values of ``nvidia-smi --query-gpu=<fields>`` for one GPU, or None when unavailable."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, f"--id={device_index}", f"--query-gpu={','.join(fields)}",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    line = out.strip().splitlines()[0] if out.strip() else ""
    vals = [v.strip() for v in line.split(",")]
    return vals if len(vals) == len(fields) else None


def mhz_to_hz(text: str | None) -> float | None:
    try:
        return float(text) * 1e6 if text is not None else None
    except ValueError:
        return None


def read_sm_clock_hz(device_index: int = 0) -> float | None:
    """Current SM clock in Hz (NVML if importable, else nvidia-smi), or None when neither works."""
    hz = _nvml_clock_hz(device_index, "sm")
    if hz is not None:
        return hz
    vals = query_nvidia_smi(["clocks.sm"], device_index)
    return mhz_to_hz(vals[0]) if vals else None
