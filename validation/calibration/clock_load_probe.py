"""The H200's SM clock versus load: idle, FFMA, mma.sync, wgmma at full rate and at duty cycles, wgmma + HBM or L2 streams.

``python -m validation.calibration.clock_load_probe [--out DIR] [--quick]`` runs each load on every SM for
about ``target_s`` (0.5 s; ``--quick``: 0.1 s) and writes ``<DIR>/clock_load.json`` (default DIR:
``validation/results/<gpu>/calibration``); without a GPU it says so in one line and exits 2. About 10 s of
GPU time in all (``--quick``: about 3 s).

Per load (kernels in ``clock_load_probe.cu``, one block per SM): the clock from each block's clock64
cycles over its %globaltimer ns across the whole run (median, min, max over blocks), block 0's clock over
1 ms windows (its (ns, clock64) samples: ``series_hz``), the tensor work per SM as FLOP/clk/SM and the
tensor duty (wgmma m64n256k16 count x 128 cycles / elapsed cycles, i.e. FLOP/clk/SM over
:data:`TENSOR_PEAK_FLOP_PER_CLK_SM`), the HBM stream's bytes/s where one runs, and nvidia-smi sampled
every 50 ms in a background process (``clocks.sm``, ``power.draw`` and the other fields of
:data:`SMI_FIELDS` that this nvidia-smi knows; the throttle-reason bit mask decoded with
:data:`THROTTLE_BITS`), summarised over the middle of the run (the first :data:`SMI_SKIP_FRACTION` left
out). A missing nvidia-smi leaves those fields None.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
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
MMA_TF32_FLOP = 2 * 16 * 8 * 8  # m16n8k8 tf32
WG_TF32_FLOP = 2 * 64 * 256 * 8  # m64n256k8 tf32: 128 cycles at the tf32 rate (2048 FLOP/clk/SM)
TF32_MODE = 8  # cl_wg mode bit (cl_mma_tf32: the mma.sync kernel in tf32)
ONE_BLOCK_SMEM_BYTES = 120 * 1024
HBM_BUFFER_BYTES = 2 << 30  # far beyond the L2 (~50 MiB): every load comes from HBM
L2_STREAM_BYTES = 16 << 20  # the L2 streams read the buffer's first 16 MiB over and over: L2-resident
STREAM_ONLY = ("hbm_only", "l2_only")  # loads of the streaming warpgroup alone
STREAMING = ("wgmma_hbm", "hbm_only", "wgmma_rand_hbm", "wgmma_rand_l2", "l2_only")
# The TMA streams beside wgmma on random operands (the wgmma GEMMs' case: their operands come by TMA, at
# several rates): (in flight, bytes per 1D bulk copy, every SM the same lines?) per load, from the L2-resident
# 16 MiB; the last one alone as well (``tma_only``). CL_BULK_MAX_INFLIGHT copies at most.
BULK_MAX_INFLIGHT = 8
TMA_STREAMS = {"wgmma_rand_tma1x16k": (1, 16384, 0), "wgmma_rand_tma2x16k": (2, 16384, 0),
               "wgmma_rand_tma2x32k": (2, 32768, 0), "wgmma_rand_tma5x32k": (5, 32768, 0),
               "wgmma_rand_tma5x32k_shared": (5, 32768, 1)}
TMA_ONLY = ("tma_only", (5, 32768, 0))
TMA_SMEM_BYTES = 220 * 1024  # operands, alignment and 5 x 32 KiB buffers, under the 227 KiB opt-in limit with the static shared memory
QUICK_HBM_BUFFER_BYTES = 512 << 20
BURST_GROUPS = 32  # commit groups per wgmma burst (32 x 4 x 128 cycles x 2 warpgroups: ~17 us at 1.9 GHz)
DUTIES = (0.25, 0.5, 0.75)
TARGET_S = 0.5
QUICK_TARGET_S = 0.1
SIZING_S = 0.02
MAX_SAMPLES = 4096
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


def load_row(name: str, rec: dict, *, flop_per_block: float = 0.0, wgmma_per_block: int = 0,
             stream_bytes_per_block: list[int] | None = None, event_s: float | None = None,
             stream_source: str = "hbm") -> dict:
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
        row["stream_bytes_per_s"] = total / secs
        row["stream_source"] = stream_source
        if stream_source == "hbm":
            row["hbm_bytes_per_s"] = total / secs
    return row


def format_table(res: dict) -> str:
    lines = [f"{'load':18s} {'clock GHz':>9s} {'(min..max)':>13s} {'smi GHz':>7s} {'power W':>8s} "
             f"{'tensor duty':>11s} {'strm GB/s':>9s}  throttle"]
    for r in res.get("loads", {}).values():
        smi = r.get("smi") or {}
        c = r["clock_hz"]
        sc = (smi.get("sm_clock_hz") or {}).get("value")
        pw = (smi.get("power_w") or {}).get("value")
        bw = r.get("stream_bytes_per_s")
        lines.append(f"{r['load']:18s} {c['value'] / 1e9:9.4f} {c['min'] / 1e9:6.3f}..{c['max'] / 1e9:<6.3f} "
                     f"{sc / 1e9 if sc else float('nan'):7.3f} {pw if pw else float('nan'):8.1f} "
                     f"{r['tensor_duty']:11.1%} {bw / 1e9 if bw else float('nan'):9.0f}  "
                     f"{','.join(sorted((smi.get('throttle_reasons_seen') or {}).keys()))}")
    for k, e in res.get("errors", {}).items():
        lines.append(f"{k:18s} FAILED: {e}")
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


# ----- GPU side ------------------------------------------------------------------------------------------
class _Device:
    def __init__(self, quick: bool):
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
        n = (QUICK_HBM_BUFFER_BYTES if quick else HBM_BUFFER_BYTES) // 16
        self.hbm = cp.zeros(4 * n, dtype=cp.uint32)
        self.hbm_mask16 = n - 1
        self._start, self._end = cp.cuda.Event(), cp.cuda.Event()

    def launch(self, name: str, threads: int, args: tuple, smem_bytes: int = ONE_BLOCK_SMEM_BYTES
               ) -> tuple[float, float, float]:
        """(event seconds, host start epoch s, host end epoch s) of one launch on every SM."""
        f = self.mod.get_function(name)
        f.max_dynamic_shared_size_bytes = smem_bytes
        self.rec.fill(0)
        self.stream.synchronize()
        h0 = time.time()
        self._start.record(self.stream)
        f((self.sm_count,), (threads,), args, shared_mem=smem_bytes)
        self._end.record(self.stream)
        self._end.synchronize()
        h1 = time.time()
        return self.cp.cuda.get_elapsed_time(self._start, self._end) * 1e-3, h0, h1

    def sized(self, name: str, threads: int, make_args, iters0: int = 16,
              smem_bytes: int = ONE_BLOCK_SMEM_BYTES) -> tuple[int, float]:
        """iters for about target_s: two sizing launches (the second about SIZING_S long)."""
        iters = iters0
        for _ in range(2):
            s, _, _ = self.launch(name, threads, make_args(iters), smem_bytes)
            iters = max(1, int(iters * min(SIZING_S / max(s, 1e-6), 1e4))) if s < SIZING_S else iters
        s, _, _ = self.launch(name, threads, make_args(iters), smem_bytes)
        return max(1, int(iters * self.target_s / max(s, 1e-6))), s / iters


def run_probe(quick: bool = False) -> dict:
    t0 = time.perf_counter()
    meta = pc.collect_metadata()
    dev = _Device(quick)
    cp = dev.cp
    smi = SmiSampler(int(cp.cuda.Device().id))
    res: dict = {"meta": meta, "compile": dev.compile, "smi_fields": smi.fields, "smi_note": smi.note,
                 "loads": {}, "errors": {}}
    n = dev.sm_count
    null = 0  # a null device pointer for the samples / hbm arguments

    def wg_args(iters, mode, off_ns=0, dur_ns=0, burst=BURST_GROUPS, sample=True, l2=False, bulk=(0, 0, 0)):
        mask = L2_STREAM_BYTES // 16 - 1 if l2 else dev.hbm_mask16  # the stream's first 16 MiB: L2-resident
        return (cp.int32(iters), cp.int32(mode), dev.rec, dev.out, cp.int32(burst), cp.int64(off_ns),
                cp.int64(dur_ns), dev.samples if sample else cp.uint64(null), cp.int32(MAX_SAMPLES),
                dev.hbm, cp.int64(mask), cp.int32(bulk[1]), cp.int32(bulk[0]), cp.int32(bulk[2]))

    def record(name, event, h0, h1, **kw):
        rec = parse_records(dev.rec.get(), n)
        row = load_row(name, rec, event_s=event, **kw)
        row["host_window_epoch_s"] = [h0, h1]
        row["smi"] = smi_window(smi.samples, h0, h1) if smi.samples else None
        res["loads"][name] = row
        return rec

    smi.start()
    try:
        time.sleep(0.3)  # idle samples before the first load
        loads = []
        dur_ns = int(dev.target_s * 1e9)
        loads.append(("idle_spin", lambda: (dev.launch("cl_spin", 32, (cp.int64(dur_ns), dev.rec, dev.out)), {})))

        def simple(kernel, threads, noise, flop_fn):
            def go():
                it, _ = dev.sized(kernel, threads, lambda i: (cp.int32(i), cp.int32(noise), dev.rec, dev.out))
                r = dev.launch(kernel, threads, (cp.int32(it), cp.int32(noise), dev.rec, dev.out))
                return r, {"flop_per_block": flop_fn(it), "iters": it}
            return go

        loads.append(("ffma", simple("cl_ffma", 1024, 0, lambda it: 0.0)))
        loads.append(("mma_sync", simple("cl_mma", 256, 0, lambda it: 8 * it * MMA_CHAINS * MMA_ROUNDS * MMA_FLOP)))
        loads.append(("mma_sync_rand", simple("cl_mma", 256, 1,
                                              lambda it: 8 * it * MMA_CHAINS * MMA_ROUNDS * MMA_FLOP)))
        loads.append(("mma_sync_tf32_rand", simple("cl_mma_tf32", 256, 1,
                                                   lambda it: 8 * it * MMA_CHAINS * MMA_ROUNDS * MMA_TF32_FLOP)))
        per_group_s = {}

        def wg(name, mode, duty=1.0, threads=256, l2=False, bulk=(0, 0, 0)):
            smem = TMA_SMEM_BYTES if bulk[0] else ONE_BLOCK_SMEM_BYTES

            def go():
                if duty < 1.0:
                    ns_group = per_group_s.get("full")
                    if ns_group is None:
                        raise RuntimeError("duty runs need the full-rate wgmma run first")
                    on_s = BURST_GROUPS * ns_group
                    off_ns = int(on_s * (1.0 - duty) / duty * 1e9)
                    it = max(1, int(dev.target_s / (on_s / duty)))
                else:
                    off_ns = 0
                    it, s_per_iter = dev.sized("cl_wg", threads,
                                               lambda i: wg_args(i, mode, sample=False, l2=l2, bulk=bulk),
                                               smem_bytes=smem)
                    if mode == 0 and threads == 256:
                        per_group_s["full"] = s_per_iter / BURST_GROUPS
                dev.samples.fill(0)
                r = dev.launch("cl_wg", threads, wg_args(it, mode, off_ns, l2=l2, bulk=bulk), smem)
                wg_count = 2 * (it * BURST_GROUPS * WG_PER_GROUP + 1)
                flop = WG_TF32_FLOP if mode & TF32_MODE else WG_FLOP
                extra = {"flop_per_block": float(wg_count * flop), "wgmma_per_block": wg_count, "iters": it,
                         "off_ns": off_ns, "burst_groups": BURST_GROUPS, "target_duty": duty}
                return r, extra
            return go

        loads.append(("wgmma", wg("wgmma", 0)))
        loads.append(("wgmma_rand", wg("wgmma_rand", 1)))
        loads.append(("wgmma_tf32_rand", wg("wgmma_tf32_rand", 1 | TF32_MODE)))
        for d in DUTIES:
            loads.append((f"wgmma_duty{int(d * 100)}", wg(f"wgmma_duty{int(d * 100)}", 0, d)))
        loads.append(("wgmma_hbm", wg("wgmma_hbm", 0, threads=384)))
        loads.append(("hbm_only", None))
        # the GEMMs' case: random operands beside a stream from HBM or from the L2 (what the memory traffic's
        # power takes from the clock), and the L2 stream alone
        loads.append(("wgmma_rand_hbm", wg("wgmma_rand_hbm", 1, threads=384)))
        loads.append(("wgmma_rand_l2", wg("wgmma_rand_l2", 1, threads=384, l2=True)))
        loads.append(("l2_only", None))
        for name, bulk in TMA_STREAMS.items():
            loads.append((name, wg(name, 1, threads=384, l2=True, bulk=bulk)))
        loads.append((TMA_ONLY[0], None))
        for name, go in loads:
            try:
                bulk = TMA_STREAMS.get(name) or (TMA_ONLY[1] if name == TMA_ONLY[0] else None)
                if name == TMA_ONLY[0]:
                    (ev, h0, h1) = dev.launch("cl_wg", 384, wg_args(0, 2, dur_ns=dur_ns, sample=False, l2=True,
                                                                     bulk=bulk), TMA_SMEM_BYTES)
                    extra = {}
                elif name in STREAM_ONLY:
                    (ev, h0, h1) = dev.launch("cl_wg", 384, wg_args(0, 2, dur_ns=dur_ns, sample=False,
                                                                     l2=name == "l2_only"))
                    extra = {}
                else:
                    (ev, h0, h1), extra = go()
                meta_keys = {k: extra.pop(k) for k in ("iters", "off_ns", "burst_groups", "target_duty") if k in extra}
                rec = dev.rec.get()
                if bulk:
                    stream = [int(v) * bulk[1] for v in rec[3::REC]]
                    source = "l2_tma"
                else:
                    loops = [int(v) for v in rec[3::REC]] if name in STREAMING else None
                    stream = [x * 128 * STREAM_UNROLL * 16 for x in loops] if loops else None
                    source = "l2" if name in ("wgmma_rand_l2", "l2_only") else "hbm"
                record(name, ev, h0, h1, stream_bytes_per_block=stream, stream_source=source, **extra)
                res["loads"][name].update(meta_keys)
                if bulk:
                    res["loads"][name].update(bulk_inflight=bulk[0], bulk_bytes=bulk[1], bulk_shared=bool(bulk[2]))
                if name.startswith("wgmma"):
                    raw = [int(v) for v in dev.samples.get()]
                    pairs = [(raw[2 * i], raw[2 * i + 1]) for i in range(MAX_SAMPLES) if raw[2 * i]]
                    res["loads"][name]["series_hz"] = series_hz(pairs)
            except Exception as exc:  # noqa: BLE001  (recorded, the others still run)
                res["errors"][name] = f"{type(exc).__name__}: {exc}"
        time.sleep(0.3)
    finally:
        smi.stop()
    res["smi_samples"] = smi.samples
    res["meta"].update(probe_wall_s=time.perf_counter() - t0, quick=quick, sm_count=n, target_s=dev.target_s)
    return res


def main(argv: Sequence[str] | None = None) -> int:
    ap = pc.probe_parser("clock_load_probe", __doc__.splitlines()[0], RESULT_FILE, "0.1 s per load, a smaller HBM buffer")
    a = ap.parse_args(argv)
    why = _gpu_missing()
    if why:
        return pc.no_gpu_exit("clock_load_probe", why)
    res = run_probe(a.quick)
    return pc.write_probe_result(a.out, RESULT_FILE, res, format_table(res))


if __name__ == "__main__":
    sys.exit(main())
