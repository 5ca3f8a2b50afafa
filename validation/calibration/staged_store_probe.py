"""The register-staged (stages = 1) tc_gemm k-step taken apart: why the padded layout costs more than the swizzle.

Why: tc_gemm's ``mma_fp16_Brow_128x128x32_w64x32_pad_s1`` measured 0.848 ms at 4096^3 against 0.627 ms for its
swizzled twin (the engine: 0.635 and 0.627); Nsight Compute sees the same loads, instructions within 5%, ~10% more
shared wavefronts, and more short-scoreboard stalls per issue (5.6 against 1.9) and long-scoreboard ones (11.3
against 8.1). The SASS of the two suite kernels (``--sass``, nvcc, no GPU) differs in the k-loop's schedule, not
in its instructions: see :func:`compare_suite_sass`.

``python -m validation.calibration.staged_store_probe [--out DIR] [--quick] [--profile] [--only GROUPS]`` writes
``<DIR>/staged_store.json`` (default DIR: ``validation/results/<gpu>/calibration``); without a GPU it says so in
one line and exits 2. About 3 s of GPU time plus the compile (nvcc when on the PATH, else NVRTC; ~40 s).
``--sass`` (no GPU): compile the suite's naive / padded / swizzled stages-1 kernels with nvcc and print
their k-loops side by side (needs nvdisasm or cuobjdump).

Kernels (``staged_store_probe.cu``, appended to ``validation/families/tc_gemm/tc_gemm.cu``, so every piece is the
suite's own code: ``load_tile``, its two halves ``load_regs`` / ``store_regs``, ``compute_mma``, ``shared_gemm``):
the suite's 128x128x32 block, 8 warps of 64x32, fp16, B row-major (``row``) and column-major (``col``), layouts
dense (the suite's "naive"), pad, swz. Group ``loop`` (:data:`MODES`): ``full`` (barrier, load_tile, barrier,
compute_mma: the suite's k-step), ``stores`` (the copy and the barriers, no ldmatrix/mma), ``sts`` (store_regs
from registers loaded once: STS and barriers, no LDG), ``mma`` (one barrier and compute_mma on a tile loaded once:
ldmatrix + mma.sync; without the barrier ptxas reuses the fragments across k-steps); :data:`LOOP_KSTEPS` k-steps over 1 MiB A and B (L2-resident), at 1 and 2 blocks per SM
(1: the dynamic shared memory asked for leaves room for one block). Group ``wrap``: ``tcg::shared_gemm`` itself
between two clock64 reads (``ssp_suite_*``), at K = :data:`SUITE_KS` on a grid of one or two blocks per SM;
cycles per k-step = the difference of the two K's cycles / the difference of their k-steps (prologue and
epilogue cancel). Group ``ref``: the suite's own ``extern "C"`` kernels, built as the suite builds them
(mma.build: NVRTC through CuPy), at 4096^3 timed as the suite times them (CUDA events, L2 flushed).

CAUTION (nvcc 13.0, sm_90, ``--sass``): ptxas schedules the same k-step source in two ways, and which one a
kernel gets depends on the whole kernel, not on the layout: (a) the four LDG.128 issued together, then the
four STS (one global round trip a k-step), and 6-9 ldmatrix issued ahead of the mma.sync (~122-126
registers); (b) two LDG, their two STS, then the other two LDG and their STS (two serial round trips), and one
A fragment at a time (ldmatrix, wait, 4 HMMA; ~102-106 registers). The suite's pad_s1 Brow kernel gets (b), its
swz twin (a); its pad Bcol twin one round trip but the one-fragment compute. The wrappers and the loop kernels
here do NOT all keep the suite kernel's schedule (``ssp_suite_pad_row`` and ``ssp_full_pad_row`` get (a)), so
every row records its loop's SASS summary: compare rows by their ``sass`` entry, not by name alone.

Per row: cycles per k-step per warp (clock64; median, p10, p90 over all warps of the last launch), the largest
number of blocks seen at once on one SM (from the records' SM id and clock spans), the event time (median over
launches) and the hot loop of the kernel's SASS when the probe compiled with nvcc and a disassembler was there
(:func:`loop_summary`: LDG / STS / LDSM / HMMA / BAR counts, their order, and ``copy_rounds``: how many times the
loop goes back from STS to LDG, i.e. the serial global round trips of the copy).

Nsight Compute (``--profile``: the ``loop`` and ``wrap`` rows at :data:`PROFILE_KSTEPS`, each a warm-up launch and
a measured one, in row order): :data:`NCU_METRICS`; the command is :func:`ncu_command`.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from validation.calibration import probe_common as pc

KERNEL_SRC = Path(__file__).resolve().with_suffix(".cu")
RESULT_FILE = "staged_store.json"
ARCH = "sm_90"
REC = 4  # SSP_REC
BM, BN, BK, WM, WN, THREADS = 128, 128, 32, 64, 32, 256
MODES = ("full", "stores", "sts", "mma")
LAYOUTS = ("dense", "pad", "swz")
LAYOUT_KNOB = {"dense": "naive", "pad": "padded", "swz": "swizzled"}
BS = ("row", "col")
GROUPS = ("loop", "wrap", "ref")
BLOCKS_PER_SM = (1, 2)
#: the loop kernels' operands: A M x K, B K x N (or N x K), fp16, 1 MiB each (L2-resident); K / BK a power of two
LOOP_M, LOOP_N, LOOP_K = 1024, 1024, 512
LOOP_KSTEPS, QUICK_KSTEPS, PROFILE_KSTEPS = 512, 128, 64
#: the suite kernels on a grid of blocks-per-SM x SMs blocks (N = 8 tiles, M = blocks / 8 tiles), two K's
SUITE_KS = (1024, 2048)
SUITE_N_TILES = 8
REF_SHAPE = 4096
#: the 1-block-per-SM rows ask for this much dynamic shared memory (two do not fit in the H200's 228 KiB)
ONE_BLOCK_SMEM_BYTES = 120 * 1024
WARMUP, REPS, QUICK_REPS = 2, 10, 3
#: Nsight Compute metrics of --profile (names as the suite's own collection and mma_feed_ncu use them)
NCU_METRICS = (
    "gpu__time_duration.sum", "sm__cycles_elapsed.max", "smsp__inst_executed.sum",
    "smsp__issue_active.avg.pct_of_peak_sustained_active", "sm__warps_active.avg.pct_of_peak_sustained_active",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "lts__t_sectors_srcunit_tex_op_read.sum",
    *(f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio"
      for s in ("short_scoreboard", "long_scoreboard", "mio_throttle", "barrier", "wait", "math_pipe_throttle",
                "lg_throttle", "not_selected")),
)


def kernel_name(group: str, layout: str, b: str, mode: str | None = None) -> str:
    """The probe kernel of a ``loop`` row (``ssp_<mode>_<layout>_<b>``) or a ``wrap`` row (``ssp_suite_...``)."""
    return f"ssp_{mode if group == 'loop' else 'suite'}_{layout}_{b}"


def defines() -> dict[str, int]:
    """The ``#define``s of the CUDA source (tests check them against the constants above)."""
    return {k: int(v) for k, v in re.findall(r"#define (SSP_\w+) (\d+)", KERNEL_SRC.read_text())}


def suite_config(layout: str, b: str, m: int = REF_SHAPE, n: int = REF_SHAPE, k: int = REF_SHAPE):
    """The suite's TcGemmConfig of ``layout`` ("dense" / "pad" / "swz") and B layout ``b`` (stages 1)."""
    from tilesim.kernels.tc_gemm.config import TcGemmConfig  # noqa: PLC0415

    return TcGemmConfig(m=m, n=n, k=k, instruction="mma_sync", dtype="fp16", b_layout=b, bm=BM, bn=BN, bk=BK, wm=WM,
                        wn=WN, layout=LAYOUT_KNOB[layout], stages=1, epilogue="direct")


def probe_source() -> str:
    """tc_gemm.cu + staged_store_probe.cu + the suite's own extern "C" kernels of :func:`suite_config`."""
    from validation.families.tc_gemm import mma  # noqa: PLC0415

    cfgs = [suite_config(lay, b) for b in BS for lay in LAYOUTS]
    return mma.batch_source(cfgs) + "\n" + KERNEL_SRC.read_text()


@dataclass(frozen=True)
class Case:
    group: str
    layout: str
    b: str
    bps: int
    mode: str = ""
    k: int = 0  # suite rows: the K of the launch

    @property
    def kernel(self) -> str:
        if self.group == "ref":
            from validation.families.tc_gemm import mma  # noqa: PLC0415

            return mma.kernel_name(suite_config(self.layout, self.b))
        return kernel_name(self.group, self.layout, self.b, self.mode)

    @property
    def key(self) -> str:
        if self.group == "loop":
            return f"{self.mode}_{self.layout}_{self.b}_b{self.bps}"
        if self.group == "wrap":
            return f"wrap_{self.layout}_{self.b}_b{self.bps}_K{self.k}"
        return f"ref_{self.layout}_{self.b}"


def cases(groups: Sequence[str] = GROUPS) -> list[Case]:
    out = []
    if "loop" in groups:
        out += [Case("loop", lay, b, bps, mode) for mode in MODES for b in BS for bps in BLOCKS_PER_SM for lay in LAYOUTS]
    if "wrap" in groups:
        out += [Case("wrap", lay, b, bps, k=k) for b in BS for bps in BLOCKS_PER_SM for lay in LAYOUTS for k in SUITE_KS]
    if "ref" in groups:
        out += [Case("ref", lay, b, 0) for b in BS for lay in LAYOUTS]
    return out


def smem_bytes(layout: str, bps: int) -> int:
    """Dynamic shared memory of a loop / suite launch: the A and B tiles (rows + 16 B when padded), or
    :data:`ONE_BLOCK_SMEM_BYTES` for one block per SM."""
    pad = 16 if layout == "pad" else 0
    need = BM * (BK * 2 + pad) + BK * (BN * 2 + pad)  # B row-major: BK rows; column-major: BN rows of BK
    need = max(need, BM * (BK * 2 + pad) + BN * (BK * 2 + pad))
    return max(need, ONE_BLOCK_SMEM_BYTES) if bps == 1 else need


# ----- records (pure) -------------------------------------------------------------------------------------
def per_kstep(records: Sequence[Sequence[int]], ksteps: int) -> dict:
    """Cycles per k-step over warps: median, p10, p90 (records: SSP_REC longs a warp)."""
    v = sorted(r[0] / ksteps for r in records)
    return {"value": pc.median(v), "p10": pc.percentile(v, 10), "p90": pc.percentile(v, 90), "n": len(v)}


def max_coresident(records: Sequence[Sequence[int]], warps_per_block: int = THREADS // 32) -> int:
    """The most blocks whose [start, end] clock spans overlap on one SM (warp 0 of each block)."""
    best = 0
    by_sm: dict[int, list[tuple[int, int]]] = {}
    for i in range(0, len(records), warps_per_block):
        r = records[i]
        by_sm.setdefault(int(r[1]), []).append((int(r[2]), int(r[3])))
    for spans in by_sm.values():
        events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda x: (x[0], x[1]))
        cur = 0
        for _, d in events:
            cur += d
            best = max(best, cur)
    return best


def suite_slope(lo: dict, hi: dict) -> float | None:
    """Cycles per k-step of a suite pair: (median cycles at the larger K - at the smaller) / their k-step difference."""
    dk = (hi["k"] - lo["k"]) // BK
    if dk <= 0:
        return None
    return (hi["cycles_per_warp"]["value"] - lo["cycles_per_warp"]["value"]) / dk


def summarize(res: dict) -> dict:
    """Per (mode, B layout, blocks per SM): cycles per k-step of each layout and pad - swz, pad / swz; per suite
    pair the k-step slope; per ref pair the event-time ratio pad / swz."""
    rows = res.get("cases", {})
    out: dict = {"loop": {}, "wrap": {}, "ref": {}}
    for mode in MODES:
        for b in BS:
            for bps in BLOCKS_PER_SM:
                c = {lay: rows.get(f"{mode}_{lay}_{b}_b{bps}") for lay in LAYOUTS}
                if not (c["pad"] and c["swz"]):
                    continue
                v = {lay: r["cycles_per_kstep"]["value"] for lay, r in c.items() if r}
                out["loop"][f"{mode}_{b}_b{bps}"] = {**v, "pad_minus_swz": v["pad"] - v["swz"],
                                                     "pad_over_swz": v["pad"] / v["swz"] if v["swz"] else None}
    for b in BS:
        for bps in BLOCKS_PER_SM:
            s = {}
            for lay in LAYOUTS:
                lo, hi = (rows.get(f"wrap_{lay}_{b}_b{bps}_K{k}") for k in SUITE_KS)
                if lo and hi:
                    s[lay] = suite_slope(lo, hi)
            if s.get("pad") and s.get("swz"):
                out["wrap"][f"{b}_b{bps}"] = {**s, "pad_minus_swz": s["pad"] - s["swz"], "pad_over_swz": s["pad"] / s["swz"]}
        r = {lay: rows.get(f"ref_{lay}_{b}") for lay in LAYOUTS}
        if r["pad"] and r["swz"]:
            out["ref"][b] = {lay: x["event_median_s"] for lay, x in r.items() if x}
            out["ref"][b]["pad_over_swz"] = r["pad"]["event_median_s"] / r["swz"]["event_median_s"]
    return out


def format_table(res: dict) -> str:
    s = summarize(res)
    lines = [f"{'loop row':16s} {'dense':>8s} {'pad':>8s} {'swz':>8s} {'pad-swz':>8s} {'pad/swz':>8s}   cycles per k-step"]
    for k, r in s["loop"].items():
        lines.append(f"{k:16s} {r.get('dense', float('nan')):8.0f} {r['pad']:8.0f} {r['swz']:8.0f} "
                     f"{r['pad_minus_swz']:8.0f} {r['pad_over_swz']:8.3f}")
    for k, r in s["wrap"].items():
        lines.append(f"wrap_{k:11s} {r.get('dense') or float('nan'):8.0f} {r['pad']:8.0f} {r['swz']:8.0f} "
                     f"{r['pad_minus_swz']:8.0f} {r['pad_over_swz']:8.3f}")
    for k, r in s["ref"].items():
        lines.append(f"ref_{k:12s} {r.get('dense', float('nan')) * 1e3:8.3f} {r['pad'] * 1e3:8.3f} "
                     f"{r['swz'] * 1e3:8.3f} {'':8s} {r['pad_over_swz']:8.3f}   ms at {REF_SHAPE}^3")
    for k, e in res.get("errors", {}).items():
        lines.append(f"{k}: FAILED {e}")
    return "\n".join(lines)


# ----- SASS (pure on a listing; --sass compiles with nvcc) ------------------------------------------------
_CLASSES = (("LDG", "G"), ("STS", "S"), ("LDSM", "L"), ("HMMA", "H"), ("BAR", "B"), ("LDC", "C"))


def loop_summary(sass: str, kernel: str) -> dict:
    """The hot loop (most HMMA, else most STS, else most LDG) of ``kernel`` in a ``cuobjdump -sass``-style
    listing: counts of LDG / STS / LDSM / HMMA / BAR / LDC, ``instructions``, ``order`` (run-length code of
    G S L H B C) and ``copy_rounds``: 1 + the number of LDG that follow an STS in the loop body (a new
    round of global loads issued only after earlier loads' data was stored: serial round trips)."""
    bodies = pc.loop_bodies(pc.function_instructions(sass, kernel))
    if not bodies:
        return {"ok": False, "problem": "no loop"}
    def score(ops):
        c = Counter(ops)
        return (pc.count_prefix(c, "HMMA"), pc.count_prefix(c, "STS"), pc.count_prefix(c, "LDG"), -len(ops))
    ops = max(bodies, key=score)
    hist = Counter(ops)
    out = {"ok": True, "instructions": len(ops)}
    for op, _ in _CLASSES:
        out[op.lower()] = pc.count_prefix(hist, op)
    seq = [code for o in ops for op, code in _CLASSES if o == op or o.startswith(op + ".")]
    runs: list[list] = []
    for c in seq:
        if runs and runs[-1][0] == c:
            runs[-1][1] += 1
        else:
            runs.append([c, 1])
    out["order"] = " ".join(f"{c}{n}" for c, n in runs)
    copy = [c for c in seq if c in "GS"]
    rounds, seen_sts = (1 if "G" in copy else 0), False
    for prev, c in zip(["S"] + copy, copy, strict=False):
        if c == "S":
            seen_sts = True
        elif seen_sts and prev == "S":
            rounds += 1
    out["copy_rounds"] = rounds
    return out


def nvdisasm_as_cuobjdump(text: str) -> str:
    """nvdisasm's listing in the form :func:`probe_common.function_instructions` reads (see mma_feed_probe)."""
    from validation.calibration.mma_feed_probe import nvdisasm_as_cuobjdump as conv  # noqa: PLC0415

    return conv(text)


def compile_listing(code: str, workdir: Path, arch: str = ARCH) -> tuple[str, str]:
    """nvcc (``-O3 -std=c++17 -lineinfo``, as the suite's NVRTC options) of ``code``: (ptxas -v log, SASS in
    cuobjdump's form); RuntimeError when nvcc or both disassemblers are missing."""
    import shutil  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise RuntimeError("nvcc is not on PATH")
    src, cubin = Path(workdir) / "ssp.cu", Path(workdir) / "ssp.cubin"
    src.write_text(code)
    p = subprocess.run([nvcc, "-cubin", f"-arch={arch}", "-O3", "-std=c++17", "-lineinfo", "-Xptxas", "-v", "-o",
                        str(cubin), str(src)], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"nvcc failed: {p.stderr.strip()[-3000:]}")
    if shutil.which("cuobjdump"):
        return p.stderr, pc.disassemble(cubin)
    if shutil.which("nvdisasm"):
        d = subprocess.run(["nvdisasm", "-c", str(cubin)], capture_output=True, text=True, check=True)
        return p.stderr, nvdisasm_as_cuobjdump(d.stdout)
    raise RuntimeError("neither cuobjdump nor nvdisasm is on PATH")


def compare_suite_sass(sass: str) -> dict:
    """:func:`loop_summary` of the suite's stages-1 kernels (mma.py's names) per B layout and layout."""
    from validation.families.tc_gemm import mma  # noqa: PLC0415

    return {f"{lay}_{b}": loop_summary(sass, mma.kernel_name(suite_config(lay, b))) for b in BS for lay in LAYOUTS}


def ncu_command(out_dir: str = "DIR") -> str:
    """The Nsight Compute run of the ``--profile`` rows (raw CSV page, one warm-up + one measured launch a row)."""
    return ("ncu --clock-control none --csv --page raw --kernel-name regex:ssp_ --metrics "
            + ",".join(NCU_METRICS)
            + f" python3 -m validation.calibration.staged_store_probe --profile --out {out_dir} > {out_dir}/ncu.csv")


# ----- GPU side ------------------------------------------------------------------------------------------
def run_probe(groups: Sequence[str] = GROUPS, quick: bool = False, profile: bool = False) -> dict:
    import cupy as cp  # noqa: PLC0415

    from validation.families.tc_gemm import mma  # noqa: PLC0415
    from validation.harness.timing import time_gpu  # noqa: PLC0415

    sms, arch = pc.device_facts(cp)
    if profile:
        groups = tuple(g for g in groups if g != "ref")
    reps = 1 if profile else (QUICK_REPS if quick else REPS)
    warmup = 1 if profile else WARMUP
    ksteps = PROFILE_KSTEPS if profile else (QUICK_KSTEPS if quick else LOOP_KSTEPS)
    # the cubin stays on disk while the probe runs: cupy.RawModule(path=...) loads it lazily, at the first
    # get_function (a TemporaryDirectory closed here gave CUDA_ERROR_FILE_NOT_FOUND on the H200)
    tmp = tempfile.mkdtemp(prefix="ssp-")
    src = Path(tmp) / "staged_store_probe_full.cu"
    src.write_text(probe_source())
    built = pc.build_module(cp, src, ARCH, Path(tmp), nvrtc_options=mma.OPTIONS, want_sass=True)
    res: dict = {"meta": pc.collect_metadata(), "sm_count": sms, "arch": arch, "compiled_by": built.compiled_by,
                 "compile_note": built.error or built.sass_error, "ksteps": ksteps, "reps": reps, "profile": profile,
                 "cases": {}, "sass": {}, "errors": {}}
    rng = cp.random.RandomState(1)
    a = rng.standard_normal(LOOP_M * LOOP_K, dtype=cp.float32).astype(cp.float16)
    bmat = rng.standard_normal(LOOP_K * LOOP_N, dtype=cp.float32).astype(cp.float16)
    sink = cp.zeros(2 * sms * THREADS, dtype=cp.float32)
    rec = cp.zeros(2 * sms * (THREADS // 32) * REC, dtype=cp.int64)
    big = {}
    for case in cases(groups):
        try:
            f = pc.get_kernel(built.module, case.kernel, 0)
            if built.sass is not None and case.kernel not in res["sass"]:
                res["sass"][case.kernel] = loop_summary(built.sass, case.kernel)
            row: dict = {"group": case.group, "kernel": case.kernel, "layout": case.layout, "b": case.b,
                         "attributes": pc.kernel_attributes(f)}
            if case.group == "ref":
                cfg = suite_config(case.layout, case.b)
                if "ab" not in big:
                    n = REF_SHAPE * REF_SHAPE
                    big["ab"] = (rng.standard_normal(n, dtype=cp.float32).astype(cp.float16),
                                 rng.standard_normal(n, dtype=cp.float32).astype(cp.float16),
                                 cp.zeros(n, dtype=cp.float32))
                built_ref = mma.build(cfg, *big["ab"])
                t = time_gpu(built_ref.launch, warmup=WARMUP, reps=reps, min_reps=reps, budget_s=5.0)
                row.update(event_median_s=t.median_s, event_p10_s=t.p10_s, event_p90_s=t.p90_s, reps=t.reps,
                           shape=REF_SHAPE, attributes=built_ref.attributes)
                res["cases"][case.key] = row
                continue
            blocks = case.bps * sms
            smem = smem_bytes(case.layout, case.bps)
            f = pc.get_kernel(built.module, case.kernel, smem)
            if case.group == "loop":
                args = (a, bmat, sink, rec, cp.int32(ksteps), cp.int32(LOOP_M), cp.int32(LOOP_N), cp.int32(LOOP_K))
                steps = ksteps
            else:
                m = (blocks // SUITE_N_TILES) * BM
                key = ("wrap", m, case.k)
                if key not in big:
                    big[key] = (rng.standard_normal(m * case.k, dtype=cp.float32).astype(cp.float16),
                                rng.standard_normal(case.k * SUITE_N_TILES * BN, dtype=cp.float32).astype(cp.float16),
                                cp.zeros(m * SUITE_N_TILES * BN, dtype=cp.float32))
                sa, sb, sc = big[key]
                args = (sa, sb, sc, cp.int32(m), cp.int32(SUITE_N_TILES * BN), cp.int32(case.k), rec)
                blocks = (m // BM) * SUITE_N_TILES
                steps = case.k // BK
            grid = (SUITE_N_TILES, blocks // SUITE_N_TILES) if case.group == "wrap" else (blocks,)

            def launch(f=f, grid=grid, args=args, smem=smem):
                f(grid, (THREADS,), args, shared_mem=smem)

            t = time_gpu(launch, warmup=warmup, reps=reps, min_reps=reps, flush_l2=False, budget_s=5.0)
            raw = rec[: blocks * (THREADS // 32) * REC].get().reshape(-1, REC).tolist()
            row.update(mode=case.mode, bps=case.bps, blocks=blocks, smem_bytes=smem, k=case.k, ksteps=steps,
                       cycles_per_warp=per_kstep(raw, 1), cycles_per_kstep=per_kstep(raw, steps),
                       max_coresident=max_coresident(raw), distinct_sms=len({r[1] for r in raw}),
                       event_median_s=t.median_s, event_p10_s=t.p10_s, event_p90_s=t.p90_s, reps=t.reps)
            res["cases"][case.key] = row
        except Exception as exc:  # noqa: BLE001 - one failed case must not lose the others
            res["errors"][case.key] = f"{type(exc).__name__}: {exc}"
    res["summary"] = summarize(res)
    shutil.rmtree(tmp, ignore_errors=True)
    return res


def main(argv: Sequence[str] | None = None) -> int:
    ap = pc.probe_parser("staged_store_probe", __doc__.splitlines()[0], RESULT_FILE,
                         f"{QUICK_REPS} timed launches a row and {QUICK_KSTEPS} k-steps")
    ap.add_argument("--profile", action="store_true",
                    help=f"loop and suite rows, one warm-up and one measured launch each, {PROFILE_KSTEPS} k-steps (for ncu)")
    ap.add_argument("--only", default=None, help=f"comma-separated groups of {', '.join(GROUPS)}")
    ap.add_argument("--sass", action="store_true", help="no GPU: the suite kernels' k-loops (nvcc + disassembler)")
    ap.add_argument("--ncu-command", action="store_true", help="print the Nsight Compute command and exit")
    args = ap.parse_args(argv)
    if args.ncu_command:
        print(ncu_command(args.out or "DIR"))
        return 0
    if args.sass:
        with tempfile.TemporaryDirectory(prefix="ssp-") as tmp:
            try:
                _, sass = compile_listing(probe_source(), Path(tmp))
            except RuntimeError as e:
                print(f"staged_store_probe --sass: {e}", file=sys.stderr)
                return 2
        for k, s in compare_suite_sass(sass).items():
            print(f"{k:10s} " + " ".join(f"{n}={s.get(n)}" for n in ("instructions", "ldg", "sts", "ldsm", "hmma",
                                                                      "bar", "ldc", "copy_rounds"))
                  + f"\n{'':10s} {s.get('order')}")
        return 0
    groups = pc.parse_groups(args.only, GROUPS) or GROUPS
    why = pc.gpu_missing()
    if why:
        return pc.no_gpu_exit("staged_store_probe", why)
    t0 = time.perf_counter()
    res = run_probe(groups, quick=args.quick, profile=args.profile)
    res["meta"].update(quick=bool(args.quick), probe_wall_s=time.perf_counter() - t0)
    return pc.write_probe_result(args.out, RESULT_FILE, res, format_table(res))


if __name__ == "__main__":
    sys.exit(main())
