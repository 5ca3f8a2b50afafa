"""The mma.sync GEMM inner loop in isolation: how fast ldmatrix-fed mma.sync m16n8k16 runs (H200, sm_90a).

``python -m validation.calibration.mma_feed_probe [--out DIR] [--quick]`` runs the sweep on the current GPU
(CuPy), prints a table and writes ``<DIR>/mma_feed.json`` (default DIR: ``validation/results/<gpu>/calibration``).
Without a GPU it says so in one line and exits 2. About 5 s of GPU time (``--quick``: about 1 s).

The kernels are in ``mma_feed_probe.cu`` (one per configuration, named by :func:`kernel_name`), compiled by
nvcc to an sm_90a cubin (NVRTC through CuPy when nvcc is missing). Per warp per k-slice: (wm/16)
ldmatrix.x4 (A) and (wn/16) ldmatrix.x4.trans (B) from the swizzled layout of tc_gemm, then (wm/16)*(wn/8)
mma.sync m16n8k16 fp16 -> fp32; everything in shared memory. Knobs: warp tile (64x64, 64x32, 32x32),
warps per block (4, 8), blocks per SM (1, 2: __launch_bounds__ and the dynamic shared memory asked for),
barrier every 0 (none), 1 or 2 slices, fragments double-buffered in registers or not, and a register-fed
control (no loads in the loop). Every configuration runs on every SM: ``reps`` timed launches after a
warm-up and a sizing launch that scales ``iters`` to about ``target_s``.

Per configuration: ``hmma_per_clk_sm`` (blocks per SM x warps x slices x MMAs per slice / block cycles,
median over blocks), ``flop_per_clk_sm`` (x 4096 FLOP per m16n8k16), ``fraction_of_peak`` (over the
register-fed mma.sync peak of tensor.json, ``fields['mma.m16n8k16.fp16']``, else the best
``mma_sync`` m16n8k16 fp16 throughput there, else :data:`FALLBACK_PEAK_FLOP_PER_CLK_SM`), and
``cycles_per_slice_per_warp``; ``blocks_per_sm_seen`` is the largest number of blocks whose timed spans
overlapped on one SM (the records carry each block's start). When cuobjdump is on PATH, each kernel's hot
loop is disassembled: its opcode histogram and the LDSM/HMMA/BAR order (``sass``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
KERNEL_SRC = Path(__file__).resolve().with_suffix(".cu")
RESULTS_ROOT = REPO_ROOT / "validation" / "results"
RESULT_FILE = "mma_feed.json"
TENSOR_JSON = "tensor.json"
ARCH = "sm_90a"

# must match the #defines of mma_feed_probe.cu (tests/test_mma_feed_probe.py checks that they do)
REC = 4  # MF_REC: cycles, ns, smid, start ns
BK = 32  # MF_BK: halves of k per stage, two slices of 16
STAGES = 4  # MF_STAGES
WARPS_M = 2  # MF_WARPS_M

SLICE_K = 16  # k of one m16n8k16 (PTX ISA, mma.sync shapes)
SLICES_PER_ITER = BK // SLICE_K
FLOP_PER_HMMA = 2 * 16 * 8 * 16  # m16n8k16: 4096 FLOP
FALLBACK_PEAK_FLOP_PER_CLK_SM = 2716.0  # tensor_probe on the H200, 8 warps/SM (commit 0a744eb), if tensor.json is absent
SMEM_ONE_BLOCK_BYTES = 120 * 1024  # > half of the 228 KiB of an SM (H100 whitepaper): one block per SM
SMEM_TWO_BLOCKS_BYTES = 100 * 1024  # two fit (2 x (100 KiB + 1 KiB reserved) <= 228 KiB), three do not
GATE_SPIN_CYCLES = 200_000
REPS = 5
QUICK_REPS = 2
TARGET_S = 2.0e-3
QUICK_TARGET_S = 0.5e-3
MAX_ITERS = 1 << 24

TILES = ((64, 64), (64, 32), (32, 32))
WARPS = (4, 8)
BLOCKS = (1, 2)
SYNCS = (0, 1, 2)
DBUFS = (0, 1)
QUICK_TILES = ((64, 64),)


@dataclass(frozen=True)
class Config:
    """One kernel: warp tile wm x wn, warps per block, blocks per SM, barrier every `sync` slices (0: none),
    double-buffered fragments, loads in the loop (False: the register-fed control)."""

    wm: int
    wn: int
    warps: int
    blocks: int
    sync: int
    dbuf: int
    loads: int = 1

    @property
    def name(self) -> str:
        return kernel_name(self)

    @property
    def mma_per_slice(self) -> int:
        return (self.wm // 16) * (self.wn // 8)

    @property
    def ldsm_per_slice(self) -> int:
        return (self.wm // 16 + self.wn // 16) if self.loads else 0

    @property
    def smem_data_bytes(self) -> int:
        bm, bn = WARPS_M * self.wm, (self.warps // WARPS_M) * self.wn
        return STAGES * (bm * BK * 2 + BK * bn * 2)

    @property
    def block_tile(self) -> tuple[int, int]:
        return WARPS_M * self.wm, (self.warps // WARPS_M) * self.wn


def kernel_name(c: Config) -> str:
    return f"mf_{c.wm}x{c.wn}_w{c.warps}_b{c.blocks}_s{c.sync}_d{c.dbuf}_l{c.loads}"


def feasible(wm: int, wn: int, warps: int, blocks: int) -> bool:
    """64x64 with 8 warps x 2 blocks needs > 128 registers a thread at 16 warps/SM: not built."""
    return not (wm * wn >= 64 * 64 and warps * blocks > 8)


def sweep(quick: bool = False) -> list[Config]:
    """Every configuration the .cu builds (quick: the 64x64 tile only)."""
    out = []
    for wm, wn in (QUICK_TILES if quick else TILES):
        for w in WARPS:
            for b in BLOCKS:
                if not feasible(wm, wn, w, b):
                    continue
                out += [Config(wm, wn, w, b, s, d) for s in SYNCS for d in DBUFS]
                out.append(Config(wm, wn, w, b, 0, 0, loads=0))
    return out


# ----- pure: statistics, records, rates ---------------------------------------------------------------
def _percentile(sorted_vals: Sequence[float], q: float) -> float:
    pos = (len(sorted_vals) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] * (1.0 - (pos - lo)) + sorted_vals[hi] * (pos - lo)


def summarize(values: Sequence[float]) -> dict:
    """Median (``value``), p10, p90, min, max and count (ValueError if empty)."""
    vals = sorted(float(v) for v in values)
    if not vals:
        raise ValueError("summarize: values must not be empty")
    return {"value": _percentile(vals, 50), "p10": _percentile(vals, 10), "p90": _percentile(vals, 90),
            "min": vals[0], "max": vals[-1], "n": len(vals)}


def parse_records(raw: Sequence[int], blocks: int) -> dict:
    """Per-block records (cycles, ns, smid, start ns): ``cycles``, ``ns``, ``smids``, ``clock_hz`` (median
    of cycles / s), ``distinct_sms`` and ``max_coresident`` (most blocks whose [start, start + ns] spans
    overlap on one SM). ValueError when the count is not REC x blocks or a block recorded no time."""
    vals = [int(v) for v in raw]
    if blocks < 1 or len(vals) != REC * blocks:
        raise ValueError(f"records: {len(vals)} values for blocks = {blocks}; expected {REC} per block")
    cycles, ns, smids, starts = vals[0::REC], vals[1::REC], vals[2::REC], vals[3::REC]
    bad = [b for b in range(blocks) if cycles[b] <= 0 or ns[b] <= 0]
    if bad:
        raise ValueError(f"records: blocks {bad[:8]} recorded cycles <= 0 or ns <= 0 (kernel did not run?)")
    per_sm: dict[int, list[tuple[int, int]]] = {}
    for s, t0, d in zip(smids, starts, ns, strict=True):
        per_sm.setdefault(s, []).append((t0, t0 + d))
    most = 0
    for spans in per_sm.values():
        events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
        cur = 0
        for _, e in events:
            cur += e
            most = max(most, cur)
    hz = sorted(c / (t * 1e-9) for c, t in zip(cycles, ns, strict=True))
    return {"cycles": cycles, "ns": ns, "smids": smids, "distinct_sms": len(per_sm), "max_coresident": most,
            "clock_hz": _percentile(hz, 50), "cycles_median": _percentile(sorted(cycles), 50)}


def rep_metrics(cfg: Config, rec: dict, iters: int, event_s: float | None, sm_count: int) -> dict:
    """One rep's rates: HMMA/clk/SM from the median block's cycles (x blocks per SM: the blocks of one SM
    run side by side), and ``hmma_per_clk_sm_outside`` from the whole grid over the event time."""
    slices = iters * SLICES_PER_ITER
    hmma_block = cfg.warps * slices * cfg.mma_per_slice
    cyc = rec["cycles_median"]
    inside = cfg.blocks * hmma_block / cyc
    outside = None
    if event_s:
        outside = hmma_block * cfg.blocks * sm_count / (event_s * rec["clock_hz"]) / sm_count
    return {"hmma_per_clk_sm": inside, "hmma_per_clk_sm_outside": outside,
            "cycles_per_slice_per_warp": cyc / slices, "clock_hz": rec["clock_hz"],
            "max_coresident": rec["max_coresident"], "distinct_sms": rec["distinct_sms"], "event_s": event_s}


def summarize_config(cfg: Config, runs: list[dict], peak_flop: float) -> dict:
    """The JSON row of one configuration from its reps (pure)."""
    h = summarize([r["hmma_per_clk_sm"] for r in runs])
    flop = {k: (v * FLOP_PER_HMMA if k != "n" else v) for k, v in h.items()}
    frac = {k: (v / peak_flop if k != "n" else v) for k, v in flop.items()}
    cps = summarize([r["cycles_per_slice_per_warp"] for r in runs])
    outs = [r["hmma_per_clk_sm_outside"] for r in runs if r.get("hmma_per_clk_sm_outside")]
    bm, bn = cfg.block_tile
    return {"kernel": cfg.name, "warp_tile": [cfg.wm, cfg.wn], "block_tile": [bm, bn], "warps_per_block": cfg.warps,
            "blocks_per_sm": cfg.blocks, "warps_per_sm": cfg.warps * cfg.blocks, "sync_every_slices": cfg.sync,
            "double_buffered": bool(cfg.dbuf), "loads": bool(cfg.loads), "mma_per_slice": cfg.mma_per_slice,
            "ldmatrix_x4_per_slice": cfg.ldsm_per_slice,
            "smem_wavefronts_per_slice": 4 * cfg.ldsm_per_slice,  # x4: four 8x8 matrices, conflict-free
            "hmma_per_clk_sm": h, "flop_per_clk_sm": flop, "fraction_of_peak": frac,
            "cycles_per_slice_per_warp": cps,
            "hmma_per_clk_sm_outside": summarize(outs) if outs else None,
            "clock_hz": summarize([r["clock_hz"] for r in runs])["value"],
            "blocks_per_sm_seen": max(r["max_coresident"] for r in runs),
            "distinct_sms": min(r["distinct_sms"] for r in runs), "runs": runs}


def peak_from_tensor_json(path: Path) -> tuple[float, str]:
    """(register-fed mma.sync m16n8k16 fp16 FLOP/clk/SM, where it came from)."""
    if path.exists():
        try:
            d = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            d = {}
        f = d.get("fields", {}).get("mma.m16n8k16.fp16")
        if f and f.get("value"):
            return float(f["value"]), f"{path.name}: fields['mma.m16n8k16.fp16']"
        rows = [v["value"] for k, v in d.get("mma_sync", {}).items()
                if k.startswith("m16n8k16_fp16_f32.tp.") and v.get("value")]
        if rows:
            return float(max(rows)), f"{path.name}: best mma_sync m16n8k16_fp16_f32.tp"
    return FALLBACK_PEAK_FLOP_PER_CLK_SM, "fallback constant (tensor.json absent)"


# ----- SASS ----------------------------------------------------------------------------------------------
def loop_order(ops: Sequence[str]) -> str:
    """Run-length code of a loop body's LDSM (L), HMMA (H) and BAR (B): e.g. ``L8 H32 B1``."""
    out: list[list] = []
    for op in ops:
        k = "L" if op.startswith("LDSM") else "H" if op.startswith("HMMA") else "B" if op.startswith("BAR") else None
        if k is None:
            continue
        if out and out[-1][0] == k:
            out[-1][1] += 1
        else:
            out.append([k, 1])
    return " ".join(f"{k}{n}" for k, n in out)


def sass_summary(sass: str, kernel: str) -> dict:
    """The hot loop (the backward branch's body with the most HMMA) of ``kernel``: histogram and order."""
    import re  # noqa: PLC0415

    from validation.calibration.pipes_probe import count_prefix, function_instructions  # noqa: PLC0415

    instrs = function_instructions(sass, kernel)
    best = None
    for addr, op, operands in instrs:
        m = re.match(r"(0x[0-9a-f]+)", operands)
        if op == "BRA" and m and int(m.group(1), 16) < addr:
            lo = int(m.group(1), 16)
            ops = [o for a, o, _ in instrs if lo <= a <= addr]
            n = count_prefix(Counter(ops), "HMMA")
            if n and (best is None or n > best[0] or (n == best[0] and len(ops) < len(best[1]))):
                best = (n, ops)
    if best is None:
        return {"ok": False, "problem": "no loop with HMMA"}
    hist = Counter(best[1])
    return {"ok": True, "hmma": count_prefix(hist, "HMMA"), "ldsm": count_prefix(hist, "LDSM"),
            "bar": count_prefix(hist, "BAR"), "instructions": len(best[1]), "order": loop_order(best[1]),
            "histogram": dict(sorted(hist.items()))}


def check_sass(cfg: Config, s: dict) -> dict:
    """``ok`` when the loop's HMMA and LDSM counts are the source's per iteration times a whole unroll."""
    if not s.get("ok"):
        return s
    per_iter_h = SLICES_PER_ITER * cfg.mma_per_slice
    unroll = s["hmma"] / per_iter_h
    ok = unroll == int(unroll) and s["ldsm"] == unroll * SLICES_PER_ITER * cfg.ldsm_per_slice
    return {**s, "unroll": unroll, "ok": ok,
            "problem": "" if ok else f"HMMA {s['hmma']} / LDSM {s['ldsm']} do not match the source per iteration"}


# ----- GPU side ------------------------------------------------------------------------------------------
class _Device:
    def __init__(self, reps: int, target_s: float):
        import cupy as cp  # noqa: PLC0415

        from validation.calibration.tensor_probe import compile_cubin, ptxas_warnings  # noqa: PLC0415

        self.cp = cp
        self.reps, self.target_s = reps, target_s
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        self.sm_count = int(props["multiProcessorCount"])
        self.stream = cp.cuda.get_current_stream()
        self._tmp = tempfile.TemporaryDirectory()
        self.sass = None
        self.compile = {"arch": ARCH, "source": str(KERNEL_SRC.relative_to(REPO_ROOT)), "note": ""}
        try:
            cubin, log = compile_cubin(Path(self._tmp.name), ARCH, KERNEL_SRC)
            self.mod = cp.RawModule(path=str(cubin))
            self.compile.update(compiled_by="nvcc", ptxas_warnings=ptxas_warnings(log))
            try:
                from validation.calibration.pipes_probe import disassemble  # noqa: PLC0415

                self.sass = disassemble(cubin)
            except RuntimeError as exc:
                self.compile["note"] = f"{exc}: no SASS checks"
        except RuntimeError as exc:
            self.mod = cp.RawModule(code=KERNEL_SRC.read_text(), options=(f"--gpu-architecture={ARCH}",))
            self.compile.update(compiled_by="nvrtc", note=f"{exc}: compiled by NVRTC, no SASS checks")
        self.out = cp.zeros(1 << 20, dtype=cp.float32)
        self._start, self._end = cp.cuda.Event(), cp.cuda.Event()
        self._spin = cp.RawKernel(
            r'extern "C" __global__ void mf_spin(long long n){long long c=clock64();while(clock64()-c<n){}}',
            "mf_spin")

    def launch_timed(self, f, grid: int, threads: int, args: tuple, smem: int) -> float:
        self._spin((1,), (1,), (self.cp.int64(GATE_SPIN_CYCLES),))
        self._start.record(self.stream)
        f((grid,), (threads,), args, shared_mem=smem)
        self._end.record(self.stream)
        self._end.synchronize()
        return self.cp.cuda.get_elapsed_time(self._start, self._end) * 1e-3

    def run_config(self, cfg: Config, noise: int = 0) -> tuple[list[dict], int, dict]:
        cp = self.cp
        f = self.mod.get_function(cfg.name)
        smem = SMEM_ONE_BLOCK_BYTES if cfg.blocks == 1 else SMEM_TWO_BLOCKS_BYTES
        if cfg.smem_data_bytes > smem:
            raise ValueError(f"{cfg.name}: smem_data_bytes = {cfg.smem_data_bytes} > {smem}")
        f.max_dynamic_shared_size_bytes = smem
        grid, threads = cfg.blocks * self.sm_count, 32 * cfg.warps
        clk = cp.zeros(REC * grid, dtype=cp.int64)

        def args(iters):
            return (cp.int32(iters), cp.int32(STAGES - 1), clk, self.out, cp.int32(noise))

        iters = 64
        f((grid,), (threads,), args(iters), shared_mem=smem)  # warm-up
        for _ in range(3):
            t = self.launch_timed(f, grid, threads, args(iters), smem)
            if t >= 0.5 * self.target_s or iters >= MAX_ITERS:
                break
            iters = int(min(MAX_ITERS, max(iters + 1, iters * self.target_s / max(t, 1e-7))))
        runs = []
        for _ in range(self.reps):
            s = self.launch_timed(f, grid, threads, args(iters), smem)
            runs.append(rep_metrics(cfg, parse_records(clk.get(), grid), iters, s, self.sm_count))
        attrs = getattr(f, "attributes", None) or {}
        return runs, iters, {"num_regs": attrs.get("num_regs"), "local_size_bytes": attrs.get("local_size_bytes"),
                             "smem_bytes": smem, "grid": grid, "threads": threads}


def run_probe(quick: bool = False, tensor_json: Path | None = None) -> dict:
    t0 = time.perf_counter()
    from validation.harness.metadata import collect_metadata, gpu_slug  # noqa: PLC0415

    meta = collect_metadata()
    dev = _Device(QUICK_REPS if quick else REPS, QUICK_TARGET_S if quick else TARGET_S)
    slug = gpu_slug(meta.get("device_name") or "unknown")
    tj = tensor_json or RESULTS_ROOT / slug / "calibration" / TENSOR_JSON
    peak, peak_src = peak_from_tensor_json(tj)
    res: dict = {"meta": meta, "compile": dev.compile, "peak_flop_per_clk_sm": peak, "peak_source": peak_src,
                 "configs": {}, "errors": {}}
    cfgs = sweep(quick)
    # the tc_gemm configuration (64x64, 8 warps, one block, barrier every 2 slices) with random operands
    extra = [(Config(64, 64, 8, 1, 2, 0), 1)]
    for cfg, noise in [(c, 0) for c in cfgs] + extra:
        key = cfg.name + ("_noise" if noise else "")
        try:
            runs, iters, info = dev.run_config(cfg, noise)
            row = summarize_config(cfg, runs, peak)
            row.update(iters=iters, reps=dev.reps, operands="random fp16" if noise else "zeros", **info)
            if dev.sass:
                row["sass"] = check_sass(cfg, sass_summary(dev.sass, cfg.name))
            res["configs"][key] = row
        except Exception as exc:  # noqa: BLE001  (recorded, the others still run)
            res["errors"][key] = f"{type(exc).__name__}: {exc}"
    res["meta"].update(probe_wall_s=time.perf_counter() - t0, quick=quick, sm_count=dev.sm_count,
                       target_kernel_s=dev.target_s, reps=dev.reps)
    return res


def format_table(res: dict) -> str:
    lines = [f"{'kernel':34s} {'warps/SM':>8s} {'HMMA/clk/SM':>11s} {'FLOP/clk/SM':>11s} {'of peak':>7s} "
             f"{'cyc/slice/warp':>14s} {'blk/SM':>6s} {'LDSM H B (loop)':>16s}"]
    for k, r in res.get("configs", {}).items():
        s = r.get("sass") or {}
        sass = f"{s.get('ldsm', '-')} {s.get('hmma', '-')} {s.get('bar', '-')}" + ("" if s.get("ok", True) else " !")
        lines.append(f"{k:34s} {r['warps_per_sm']:8d} {r['hmma_per_clk_sm']['value']:11.4g} "
                     f"{r['flop_per_clk_sm']['value']:11.5g} {r['fraction_of_peak']['value']:7.1%} "
                     f"{r['cycles_per_slice_per_warp']['value']:14.4g} {r['blocks_per_sm_seen']:6d} {sass:>16s}")
    for k, e in res.get("errors", {}).items():
        lines.append(f"{k:34s} FAILED: {e}")
    return "\n".join(lines)


def _gpu_missing() -> str | None:
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


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.calibration.mma_feed_probe",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="directory for mma_feed.json (default: results/<gpu>/calibration)")
    ap.add_argument("--quick", action="store_true", help="the 64x64 tile only, 2 reps, short launches")
    ap.add_argument("--tensor-json", default=None, help="tensor.json with the register-fed peak")
    a = ap.parse_args(argv)
    why = _gpu_missing()
    if why:
        print(f"mma_feed_probe: needs CuPy and an NVIDIA GPU: {why}", file=sys.stderr)
        return 2
    res = run_probe(a.quick, Path(a.tensor_json) if a.tensor_json else None)
    from validation.harness.metadata import gpu_slug  # noqa: PLC0415

    out = Path(a.out) if a.out else RESULTS_ROOT / gpu_slug(res["meta"].get("device_name") or "unknown") / "calibration"
    out.mkdir(parents=True, exist_ok=True)
    path = out / RESULT_FILE
    path.write_text(json.dumps(res, indent=2, default=str) + "\n")
    print(format_table(res))
    print(f"peak {res['peak_flop_per_clk_sm']:.5g} FLOP/clk/SM ({res['peak_source']})")
    if res["compile"].get("ptxas_warnings"):
        print("ptxas warnings:\n  " + "\n  ".join(res["compile"]["ptxas_warnings"]))
    print(f"wrote {path} in {res['meta']['probe_wall_s']:.1f} s")
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
