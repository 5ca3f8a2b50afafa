"""The H200's SM clock versus load: idle, FFMA, mma.sync and wgmma at full rate and at duty cycles, wgmma + HBM.

``python -m validation.calibration.clock_load_probe [--out DIR] [--quick] [--only LOAD[,LOAD]]`` runs each
load of :data:`LOADS` on every SM for about ``target_s`` (0.5 s; ``--quick``: 0.1 s) and writes
``<DIR>/clock_load.json`` (default DIR: ``validation/results/<gpu>/calibration``); without a GPU it says so
in one line and exits 2. About 10 s of GPU time for all 16 loads (``--quick``: about 4 s). With ``--only``
the loads named run and replace theirs in an existing clock_load.json, the other loads stay
(``group_runs`` says which run each load comes from: :func:`merge_results`).

Per load (kernels in ``clock_load_probe.cu``, one block per SM): the clock from each block's clock64
cycles over its %globaltimer ns across the whole run (median, min, max over blocks), block 0's clock over
1 ms windows for the wgmma loads (its (ns, clock64) samples: ``series_hz``), the tensor work per SM as
FLOP/clk/SM and the tensor duty (FLOP/clk/SM over :data:`TENSOR_PEAK_FLOP_PER_CLK_SM`; for wgmma also
m64n256k16 count x 128 cycles / elapsed cycles), the HBM stream's bytes/s where one runs, and nvidia-smi
sampled every 50 ms in a background process (``clocks.sm``, ``power.draw`` and the other fields of
:data:`SMI_FIELDS` that this nvidia-smi knows; the throttle-reason bit mask decoded with
:data:`THROTTLE_BITS`), summarised over the middle of the run (the first :data:`SMI_SKIP_FRACTION` left
out). A missing nvidia-smi leaves those fields None.

Duty-cycle loads (``target_duty`` < 1): bursts of the full-rate load, each followed by a wait of
(1 - duty) / duty times that burst's own clock64 cycles with the whole SM's tensor work stopped
(:func:`off_per_on_q16`; the kernel comment says how). ``duty_time`` is the achieved fraction of the run
spent in bursts (1 - waited cycles / elapsed cycles, per block: :func:`duty_from_records`); the tensor duty
of a duty load is about ``duty_time`` x the full-rate load's tensor duty (wgmma about 1.0, mma.sync about
0.67 of the 4096 FLOP/clk/SM peak).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from validation.calibration import probe_common as pc
from validation.calibration.probe_common import REPO_ROOT, ptxas_warnings
from validation.calibration.probe_common import gpu_missing as _gpu_missing

KERNEL_SRC = Path(__file__).resolve().with_suffix(".cu")
RESULT_FILE = "clock_load.json"
ARCH = "sm_90a"

# must match the #defines of clock_load_probe.cu (tests/test_clock_load_probe.py checks that they do)
REC = 4
FFMA_CHAINS = 8
FFMA_STEPS = 16
MMA_CHAINS = 8
MMA_ROUNDS = 2
WG_PER_GROUP = 4
STREAM_UNROLL = 16

WG_FLOP = 2 * 64 * 256 * 16  # m64n256k16
TENSOR_PEAK_FLOP_PER_CLK_SM = 4096.0  # dense fp16 per SM per clock (H100/H200 datasheet; tensor_probe's wgmma 4095)
WG_CYCLES = WG_FLOP / TENSOR_PEAK_FLOP_PER_CLK_SM  # 128 cycles of the tensor pipe per m64n256k16
MMA_FLOP = 2 * 16 * 8 * 16
ONE_BLOCK_SMEM_BYTES = 120 * 1024
HBM_BUFFER_BYTES = 2 << 30  # far beyond the L2 (~50 MiB): every load comes from HBM
QUICK_HBM_BUFFER_BYTES = 512 << 20
BURST_GROUPS = 32  # commit groups per wgmma burst (32 x 4 x 128 cycles x 2 warpgroups: ~17 us at 1.9 GHz)
DUTIES = (0.25, 0.5, 0.75)
TARGET_S = 0.5
QUICK_TARGET_S = 0.1
SIZING_S = 0.02
MAX_SAMPLES = 4096
MMA_BURST_ITERS = 128  # cl_mma iterations per mma.sync burst (16 mma.sync per warp each: about 24k cycles at
#                        the 2/3 tensor rate mma.sync reaches, as long as a wgmma burst)
Q16 = 1 << 16  # off_per_on_q16 is (1 - duty) / duty in 16.16 fixed point (the kernel shifts the product right by 16)
SMI_PERIOD_MS = 50
SMI_SKIP_FRACTION = 0.2
SMI_FIELDS = ("timestamp", "clocks.sm", "clocks.max.sm", "power.draw", "power.draw.instant", "power.limit",
              "temperature.gpu", "clocks_throttle_reasons.active", "clocks_event_reasons.active")
THROTTLE_BITS = pc.CLOCK_REASON_BITS  # nvml.h nvmlClocksThrottleReason* / nvmlClocksEventReason*


# ----- pure ----------------------------------------------------------------------------------------------
def summarize(values: Sequence[float]) -> dict | None:
    """:func:`probe_common.summarize` (median ``value``, p10, p90, min, max, n); None when empty."""
    vals = list(values)
    return pc.summarize(vals) if vals else None


def parse_records(raw: Sequence[int], blocks: int) -> dict:
    """Per-block (cycles, ns, smid, extra) -> lists, ``clock_hz`` summary over blocks; ValueError on a bad count
    or a block without time."""
    cycles, ns, smids, extra = pc.record_columns(raw, blocks, REC)
    pc.check_timed_blocks(cycles, ns)
    return {"cycles": cycles, "ns": ns, "smids": smids, "extra": extra, "distinct_sms": len(set(smids)),
            "clock_hz": summarize(pc.block_clocks_hz(cycles, ns)),
            "window_s": summarize([t * 1e-9 for t in ns]), "cycles_median": pc.percentile(sorted(cycles), 50)}


def series_hz(samples: Sequence[tuple[int, int]]) -> list[dict]:
    """Clock over consecutive (ns, clock64) samples: [{t_s (from the first), hz}] (pairs with dt > 0)."""
    out = []
    for (g0, c0), (g1, c1) in zip(samples, samples[1:], strict=False):
        if g1 > g0 and c1 >= c0:
            out.append({"t_s": (g1 - samples[0][0]) * 1e-9, "hz": (c1 - c0) / ((g1 - g0) * 1e-9)})
    return out


decode_throttle = pc.clock_reason_names


def _num(text: str) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def parse_smi_line(line: str, fields: Sequence[str], arrival_s: float) -> dict | None:
    """One CSV line of ``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits`` -> a sample:
    ``t`` (epoch s from the timestamp field, else the arrival time), ``sm_clock_hz``, ``power_w``,
    ``throttle_mask`` and the other fields by name. None when the line has the wrong field count."""
    vals = [v.strip() for v in line.strip().split(",")]
    if len(vals) != len(fields):
        return None
    raw = dict(zip(fields, vals, strict=True))
    t = arrival_s
    ts = raw.get("timestamp")
    if ts:
        try:
            t = pc.parse_smi_timestamp(ts)
        except ValueError:
            pass
    mask_text = raw.get("clocks_throttle_reasons.active") or raw.get("clocks_event_reasons.active")
    mask = None
    if mask_text:
        try:
            mask = int(mask_text, 16)
        except ValueError:
            mask = None
    clk = _num(raw.get("clocks.sm", ""))
    return {"t": t, "sm_clock_hz": clk * 1e6 if clk is not None else None,
            "power_w": _num(raw.get("power.draw", "")), "power_instant_w": _num(raw.get("power.draw.instant", "")),
            "power_limit_w": _num(raw.get("power.limit", "")), "temperature_c": _num(raw.get("temperature.gpu", "")),
            "max_sm_clock_hz": (_num(raw.get("clocks.max.sm", "")) or 0) * 1e6 or None,
            "throttle_mask": mask, "throttle": decode_throttle(mask)}


def smi_window(samples: Sequence[dict], t0: float, t1: float, skip: float = SMI_SKIP_FRACTION) -> dict:
    """Summary of the samples in [t0 + skip x (t1 - t0), t1]: clock, power, throttle reasons seen."""
    lo = t0 + skip * (t1 - t0)
    win = [s for s in samples if lo <= s["t"] <= t1]
    reasons: dict[str, int] = {}
    for s in win:
        for r in s.get("throttle") or []:
            reasons[r] = reasons.get(r, 0) + 1
    return {"samples": len(win), "window_s": [lo, t1],
            "sm_clock_hz": summarize([s["sm_clock_hz"] for s in win if s.get("sm_clock_hz") is not None]),
            "power_w": summarize([s["power_w"] for s in win if s.get("power_w") is not None]),
            "power_instant_w": summarize([s["power_instant_w"] for s in win if s.get("power_instant_w") is not None]),
            "temperature_c": summarize([s["temperature_c"] for s in win if s.get("temperature_c") is not None]),
            "throttle_reasons_seen": reasons}


def off_per_on_q16(duty: float) -> int:
    """The duty-cycle kernels' wait per burst cycle, (1 - duty) / duty in 16.16 fixed point (0: full rate);
    ValueError unless 0 < duty <= 1."""
    if not 0.0 < duty <= 1.0:
        raise ValueError(f"duty = {duty}: must be in (0, 1]")
    return round((1.0 - duty) / duty * Q16)


def duty_from_records(rec: dict) -> dict:
    """Achieved time duty of a duty-cycle run: per block 1 - waited cycles (the record's extra field) / elapsed
    cycles, summarised over blocks; ValueError when a block's waited cycles are below 0 or above its elapsed
    cycles."""
    vals = []
    for b, (cyc, off) in enumerate(zip(rec["cycles"], rec["extra"], strict=True)):
        if not 0 <= off <= cyc:
            raise ValueError(f"block {b}: waited cycles = {off}; must be in 0..{cyc} (its elapsed cycles)")
        vals.append(1.0 - off / cyc)
    return pc.summarize(vals)


def load_row(name: str, rec: dict, *, flop_per_block: float = 0.0, wgmma_per_block: int = 0,
             stream_bytes_per_block: list[int] | None = None, event_s: float | None = None) -> dict:
    """One load's numbers from its block records (pure)."""
    row = {"load": name, "clock_hz": rec["clock_hz"], "window_s": rec["window_s"], "event_s": event_s,
           "distinct_sms": rec["distinct_sms"]}
    cyc = rec["cycles_median"]
    row["flop_per_clk_sm"] = flop_per_block / cyc if flop_per_block else 0.0
    row["tensor_duty"] = row["flop_per_clk_sm"] / TENSOR_PEAK_FLOP_PER_CLK_SM
    if wgmma_per_block:
        row["tensor_duty_wgmma"] = wgmma_per_block * WG_CYCLES / cyc
    if stream_bytes_per_block:
        total = sum(stream_bytes_per_block)
        secs = pc.percentile(sorted(rec["ns"]), 50) * 1e-9
        row["hbm_bytes_per_s"] = total / secs
    return row


def format_table(res: dict) -> str:
    lines = [f"{'load':20s} {'clock GHz':>9s} {'(min..max)':>13s} {'smi GHz':>7s} {'power W':>8s} "
             f"{'tensor duty':>11s} {'time duty':>9s} {'HBM GB/s':>8s}  throttle"]
    for r in res.get("loads", {}).values():
        smi = r.get("smi") or {}
        c = r["clock_hz"]
        sc = (smi.get("sm_clock_hz") or {}).get("value")
        pw = (smi.get("power_w") or {}).get("value")
        bw = r.get("hbm_bytes_per_s")
        dt = (r.get("duty_time") or {}).get("value")
        dt_text = f"{dt:9.1%}" if dt is not None else f"{'':9s}"
        lines.append(f"{r['load']:20s} {c['value'] / 1e9:9.4f} {c['min'] / 1e9:6.3f}..{c['max'] / 1e9:<6.3f} "
                     f"{sc / 1e9 if sc else float('nan'):7.3f} {pw if pw else float('nan'):8.1f} "
                     f"{r['tensor_duty']:11.1%} {dt_text} {bw / 1e9 if bw else float('nan'):8.0f}  "
                     f"{','.join(sorted((smi.get('throttle_reasons_seen') or {}).keys()))}")
    for k, e in res.get("errors", {}).items():
        lines.append(f"{k:20s} FAILED: {e}")
    return "\n".join(lines)


# ----- nvidia-smi in the background ----------------------------------------------------------------------
class SmiSampler:
    """``nvidia-smi -lms 50`` in a background process; ``samples`` are parsed lines. No nvidia-smi: no-op."""

    def __init__(self, device_index: int = 0, period_ms: int = SMI_PERIOD_MS):
        self.exe = shutil.which("nvidia-smi")
        self.device_index, self.period_ms = device_index, period_ms
        self.fields: list[str] = []
        self.samples: list[dict] = []
        self.note = ""
        self._proc = None
        self._thread = None
        if self.exe is None:
            self.note = "nvidia-smi is not on PATH"
            return
        for f in SMI_FIELDS:  # keep the fields this nvidia-smi knows
            if f == "clocks_event_reasons.active" and "clocks_throttle_reasons.active" in self.fields:
                continue
            try:
                p = subprocess.run([self.exe, f"--id={device_index}", f"--query-gpu={f}", "--format=csv,noheader"],
                                   capture_output=True, text=True, timeout=10)
            except (OSError, subprocess.SubprocessError):
                continue
            if p.returncode == 0 and "not a valid field" not in p.stdout.lower() and "invalid" not in p.stdout.lower():
                self.fields.append(f)

    def start(self) -> None:
        if self.exe is None or not self.fields:
            return
        self._proc = subprocess.Popen([self.exe, f"--id={self.device_index}", *pc.smi_query_args(self.fields),
                                       f"-lms={self.period_ms}"],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._proc.stdout:
            s = parse_smi_line(line, self.fields, time.time())
            if s is not None:
                self.samples.append(s)

    def stop(self) -> None:
        if self._proc is not None:
            pc.stop_process(self._proc, timeout_s=5)
            if self._thread is not None:
                self._thread.join(timeout=5)


# ----- the loads, --only and merging (pure) ---------------------------------------------------------------
@dataclass(frozen=True)
class Load:
    """One load: ``kind`` picks the kernel (spin: cl_spin; ffma: cl_ffma; mma: cl_mma; mma_duty: cl_mma_duty;
    wg: cl_wg's wgmma warpgroups; wg_hbm: cl_wg with the HBM streamer; hbm: cl_wg's HBM streamer alone),
    ``rand`` random fp16 operands (else zeros), ``duty`` the target fraction of time in bursts (1: full rate)."""

    name: str
    kind: str
    rand: bool = False
    duty: float = 1.0


def _duty_loads(prefix: str, kind: str, rand: bool, duties: Sequence[float]) -> tuple[Load, ...]:
    return tuple(Load(f"{prefix}_duty{round(d * 100)}", kind, rand, d) for d in duties)


#: every load, in the order they run (the random-operand duty loads after their zero-operand ones)
LOADS: tuple[Load, ...] = (
    Load("idle_spin", "spin"),
    Load("ffma", "ffma"),
    Load("mma_sync", "mma"),
    Load("mma_sync_rand", "mma", rand=True),
    *_duty_loads("mma_sync_rand", "mma_duty", True, (0.25, 0.5)),
    Load("wgmma", "wg"),
    Load("wgmma_rand", "wg", rand=True),
    *_duty_loads("wgmma", "wg", False, DUTIES),
    *_duty_loads("wgmma_rand", "wg", True, DUTIES),
    Load("wgmma_hbm", "wg_hbm"),
    Load("hbm_only", "hbm"),
)
LOAD_NAMES = tuple(ld.name for ld in LOADS)


def parse_only(text: str | None) -> tuple[str, ...] | None:
    """``--only`` text -> load names (None: every load); ValueError naming an unknown load."""
    return pc.parse_groups(text, LOAD_NAMES)


def merge_results(old: dict | None, new: dict) -> dict:
    """``new`` (a run of some loads) over ``old`` (a recorded clock_load.json): the loads ``new`` ran replace
    old ones (rows and errors), the others stay, in :data:`LOAD_NAMES` order; ``group_runs`` says which run
    (date, revision, quick) each load comes from; meta, compile and the nvidia-smi fields are the new run's,
    ``smi_samples`` both runs' (by time: each row's ``host_window_epoch_s`` still picks its own)."""
    ran = list(new["meta"].get("loads_run") or new.get("loads", {}))
    stamp = pc.run_stamp(new["meta"])
    if not old:
        return {**new, "group_runs": {g: stamp for g in ran}}
    old_loads = old.get("loads", {})
    loads = {k: v for k, v in old_loads.items() if k not in ran} | new.get("loads", {})
    order = {k: i for i, k in enumerate(LOAD_NAMES)}
    out = {**old, **{k: new[k] for k in ("meta", "compile", "smi_fields", "smi_note") if k in new}}
    out["loads"] = dict(sorted(loads.items(), key=lambda kv: order.get(kv[0], len(order))))
    out["errors"] = {k: e for k, e in old.get("errors", {}).items() if k not in ran} | new.get("errors", {})
    runs = pc.previous_group_runs(old, LOAD_NAMES, lambda g: g in old_loads)
    runs.update({g: stamp for g in ran})
    out["group_runs"] = {k: runs[k] for k in sorted(runs, key=lambda k: order.get(k, len(order)))}
    out["smi_samples"] = sorted([*old.get("smi_samples", []), *new.get("smi_samples", [])],
                                key=lambda x: x.get("t") or 0.0)
    return out


# ----- GPU side ------------------------------------------------------------------------------------------
class _Device:
    def __init__(self, quick: bool, hbm: bool):
        import cupy as cp  # noqa: PLC0415

        self.cp = cp
        self.target_s = QUICK_TARGET_S if quick else TARGET_S
        self.sm_count = pc.device_facts(cp)[0]
        self.stream = cp.cuda.get_current_stream()
        self._tmp = tempfile.TemporaryDirectory()
        built = pc.build_module(cp, KERNEL_SRC, ARCH, Path(self._tmp.name), nvrtc_options=(f"--gpu-architecture={ARCH}",))
        self.mod = built.module
        self.compile = {"arch": ARCH, "source": str(KERNEL_SRC.relative_to(REPO_ROOT))}
        if built.compiled_by == "nvcc":
            self.compile.update(compiled_by="nvcc", ptxas_warnings=ptxas_warnings(built.log))
        else:
            self.compile.update(compiled_by="nvrtc", note=built.error)
        self.out = cp.zeros(1 << 20, dtype=cp.float32)
        self.rec = cp.zeros(REC * self.sm_count, dtype=cp.int64)
        self.samples = cp.zeros(2 * MAX_SAMPLES, dtype=cp.uint64)
        # the HBM buffer only where an HBM load runs (else 16 x 16 bytes the streamer never reads)
        n = ((QUICK_HBM_BUFFER_BYTES if quick else HBM_BUFFER_BYTES) if hbm else 256) // 16
        self.hbm = cp.zeros(4 * n, dtype=cp.uint32)
        self.hbm_mask16 = n - 1
        self._start, self._end = cp.cuda.Event(), cp.cuda.Event()

    def launch(self, name: str, threads: int, args: tuple) -> tuple[float, float, float]:
        """(event seconds, host start epoch s, host end epoch s) of one launch on every SM."""
        f = pc.get_kernel(self.mod, name, ONE_BLOCK_SMEM_BYTES)
        self.rec.fill(0)
        self.stream.synchronize()
        h0 = time.time()
        self._start.record(self.stream)
        f((self.sm_count,), (threads,), args, shared_mem=ONE_BLOCK_SMEM_BYTES)
        self._end.record(self.stream)
        self._end.synchronize()
        h1 = time.time()
        return self.cp.cuda.get_elapsed_time(self._start, self._end) * 1e-3, h0, h1

    def sized(self, name: str, threads: int, make_args, iters0: int = 16) -> int:
        """iters for about target_s: two sizing launches (the second about SIZING_S long), then one more."""
        iters = iters0
        for _ in range(2):
            s, _, _ = self.launch(name, threads, make_args(iters))
            iters = max(1, int(iters * min(SIZING_S / max(s, 1e-6), 1e4))) if s < SIZING_S else iters
        s, _, _ = self.launch(name, threads, make_args(iters))
        return max(1, int(iters * self.target_s / max(s, 1e-6)))


def _run_load(dev: _Device, ld: Load) -> tuple[tuple[float, float, float], dict]:
    """One load's launch ((event s, host t0, host t1)) and its row arguments and settings."""
    cp = dev.cp
    q16 = off_per_on_q16(ld.duty)
    noise = 1 if ld.rand else 0
    dur_ns = int(dev.target_s * 1e9)
    settings = {"target_duty": ld.duty, "off_per_on_q16": q16, "random_operands": ld.rand}

    def wg_args(iters, mode, duration_ns=0, sample=True):
        return (cp.int32(iters), cp.int32(mode), dev.rec, dev.out, cp.int32(BURST_GROUPS), cp.int64(q16),
                cp.int64(duration_ns), dev.samples if sample else cp.uint64(0), cp.int32(MAX_SAMPLES),
                dev.hbm, cp.int64(dev.hbm_mask16))

    if ld.kind == "spin":
        return dev.launch("cl_spin", 32, (cp.int64(dur_ns), dev.rec, dev.out)), {}
    if ld.kind in ("ffma", "mma"):
        kernel, threads = ("cl_ffma", 1024) if ld.kind == "ffma" else ("cl_mma", 256)
        it = dev.sized(kernel, threads, lambda i: (cp.int32(i), cp.int32(noise), dev.rec, dev.out))
        r = dev.launch(kernel, threads, (cp.int32(it), cp.int32(noise), dev.rec, dev.out))
        flop = 0.0 if ld.kind == "ffma" else float(8 * it * MMA_CHAINS * MMA_ROUNDS * MMA_FLOP)
        return r, {"flop_per_block": flop, "iters": it, "random_operands": ld.rand}
    if ld.kind == "mma_duty":
        def args(i):
            return (cp.int32(i), cp.int32(noise), dev.rec, dev.out, cp.int32(MMA_BURST_ITERS), cp.int64(q16))
        it = dev.sized("cl_mma_duty", 256, args)
        r = dev.launch("cl_mma_duty", 256, args(it))
        flop = float(8 * it * MMA_BURST_ITERS * MMA_CHAINS * MMA_ROUNDS * MMA_FLOP)
        return r, {"flop_per_block": flop, "iters": it, "burst_iters": MMA_BURST_ITERS, **settings}
    if ld.kind == "hbm":
        return dev.launch("cl_wg", 384, wg_args(0, 2, dur_ns, sample=False)), {}
    threads = 384 if ld.kind == "wg_hbm" else 256
    it = dev.sized("cl_wg", threads, lambda i: wg_args(i, noise, sample=False))
    dev.samples.fill(0)
    r = dev.launch("cl_wg", threads, wg_args(it, noise))
    wg_count = 2 * (it * BURST_GROUPS * WG_PER_GROUP + 1)
    return r, {"flop_per_block": float(wg_count * WG_FLOP), "wgmma_per_block": wg_count, "iters": it,
               "burst_groups": BURST_GROUPS, **settings}


def run_probe(quick: bool = False, only: Sequence[str] | None = None) -> dict:
    """The loads ``only`` (default: all of :data:`LOADS`) on the current GPU (JSON-ready): ``meta`` (with
    ``loads_run``), ``compile``, ``loads`` (a row per load), ``errors``, ``smi_samples``."""
    t0 = time.perf_counter()
    only = tuple(only or LOAD_NAMES)
    bad = [g for g in only if g not in LOAD_NAMES]
    if bad:
        raise ValueError(f"only = {bad}: loads are {', '.join(LOAD_NAMES)}")
    meta = pc.collect_metadata()
    run = [ld for ld in LOADS if ld.name in only]
    dev = _Device(quick, hbm=any(ld.kind in ("wg_hbm", "hbm") for ld in run))
    smi = SmiSampler(int(dev.cp.cuda.Device().id))
    res: dict = {"meta": meta, "compile": dev.compile, "smi_fields": smi.fields, "smi_note": smi.note,
                 "loads": {}, "errors": {}}
    n = dev.sm_count
    setting_keys = ("iters", "burst_groups", "burst_iters", "target_duty", "off_per_on_q16", "random_operands")
    smi.start()
    try:
        time.sleep(0.3)  # idle samples before the first load
        for ld in run:
            try:
                (ev, h0, h1), extra = _run_load(dev, ld)
                settings = {k: extra.pop(k) for k in setting_keys if k in extra}
                rec = parse_records(dev.rec.get(), n)
                if ld.kind in ("wg_hbm", "hbm"):
                    extra["stream_bytes_per_block"] = [x * 128 * STREAM_UNROLL * 16 for x in rec["extra"]]
                row = load_row(ld.name, rec, event_s=ev, **extra)
                row.update(settings)
                if ld.duty < 1.0:
                    row["duty_time"] = duty_from_records(rec)
                row["host_window_epoch_s"] = [h0, h1]
                row["smi"] = smi_window(smi.samples, h0, h1) if smi.samples else None
                if ld.kind in ("wg", "wg_hbm"):
                    raw = [int(v) for v in dev.samples.get()]
                    row["series_hz"] = series_hz([(raw[2 * i], raw[2 * i + 1]) for i in range(MAX_SAMPLES)
                                                  if raw[2 * i]])
                res["loads"][ld.name] = row
            except Exception as exc:  # noqa: BLE001  (recorded, the others still run)
                res["errors"][ld.name] = f"{type(exc).__name__}: {exc}"
        time.sleep(0.3)
    finally:
        smi.stop()
    res["smi_samples"] = smi.samples
    res["meta"].update(probe_wall_s=time.perf_counter() - t0, quick=quick, sm_count=n, target_s=dev.target_s,
                       loads_run=list(only))
    return res


def main(argv: Sequence[str] | None = None) -> int:
    ap = pc.probe_parser("clock_load_probe", __doc__.splitlines()[0], RESULT_FILE, "0.1 s per load, a smaller HBM buffer")
    ap.add_argument("--only", default=None,
                    help=f"comma-separated loads to run ({','.join(LOAD_NAMES)}); the others in an existing "
                         f"{RESULT_FILE} are kept")
    a = ap.parse_args(argv)
    only = parse_only(a.only)
    why = _gpu_missing()
    if why:
        return pc.no_gpu_exit("clock_load_probe", why)
    new = run_probe(a.quick, only)
    path = pc.results_dir(a.out, new["meta"]) / RESULT_FILE
    old = json.loads(path.read_text()) if (only and path.exists()) else None
    pc.write_json(path, merge_results(old, new))
    print(format_table(new))
    if new["compile"].get("ptxas_warnings"):
        print("ptxas warnings:\n  " + "\n  ".join(new["compile"]["ptxas_warnings"]))
    print(f"wrote {path} in {new['meta']['probe_wall_s']:.1f} s" + (f" (merged: {','.join(only)})" if only else ""))
    return 1 if new["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
