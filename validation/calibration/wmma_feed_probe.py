"""The staged-WMMA GEMM k-step in isolation: what it costs when its fragment loads are generic LD.E (H200, sm_90a).

The suite kernel ``wmma_fp16_Bcol_128x128x32_w64x32_pad_s3`` (validation/families/tc_gemm/tc_gemm.cu: INSTR
wmma, LAYOUT padded, STAGES 3, BCOL, 128x128x32 block tile, 8 warps of 64x32, 2 blocks per SM) stalls mostly on
"LG throttle" in Nsight Compute (about 2384 cycles per k-step of an SM's two blocks against ~1460 modelled):
tc_gemm's ``wmma_load_a`` / ``wmma_load_b`` give inline PTX ``wmma.load`` a generic address, so ptxas emits four
LD.E per 16x16 fragment, which share the LG path with the k-step's cp.async (wmma_frag_probe's frag_generic_cp
rows). This probe (kernels ``wf_*`` of ``wmma_feed_probe.cu``) rebuilds that k-step exactly (tc_gemm's padded
shared layout, A rows and B (N x K) rows of 80 bytes, a 3-stage ring of 20 KiB slots, per k-step
cp.async.wait_group(1), one __syncthreads, the copy of the k-tile two ahead, commit_group, then the current
slot's 2 k-slices of fragments + MMAs) and varies, one kernel each:

==========  =================================================================================================
FRAG        ``wmma``: tc_gemm's own wmma_load_a/b + wmma.mma (copied into the .cu): 4 LD.E a fragment, 48 a warp
            and k-step, 32 HMMA.16816; ``lds``: the same fragment words by ld.shared.b32 from cvta'd addresses
            (48 LDS) + the same wmma.mma; ``ldsm``: tc_gemm's mma.sync path for Bcol (ldmatrix.x4, 12 a warp and
            k-step; mma.sync m16n8k16, 32): the control the model already knows
COPY        ``none``: no copies (the ring keeps its noise; wait_group, barrier and empty commit_group stay);
            ``gemm``: tc_gemm's load_tile (128x128x32 padded Bcol fp16, 4 x 16-byte cp.async a thread and
            k-step) from L2-resident data, M = N = K = 2048, each block its own (m0, n0) of the 16 x 16 tile grid
            (block b: tile b mod 256), k wrapping at K; row ``wf_wmma_gemm_b1_zfill``: the same kernel with
            M = N = 0, so that load_tile's bounds check makes every copy a zero fill (src-size 0, nothing read)
blocks/SM   2 (as the suite: __launch_bounds__(256, 2), 61,440 bytes of dynamic shared memory) or 1
            (120 KiB asked for, so only one block fits)
geometry    8 warps of 64x32 (256 threads: the wmma suite kernel's; every FRAG) or, rows ``*_w4``, the suite
            kernel ``mma_fp16_Bcol_128x128x32_w64x64_pad_s3``'s 4 warps of 64x64 (128 threads; INSTR mma_sync,
            so FRAG ``ldsm`` only, tc_gemm's compute_mma for 64x64: 16 ldmatrix.x4 and 64 mma.sync a warp and
            k-step; load_tile: 8 x 16-byte cp.async a thread and k-step); 2 blocks per SM (the suite's 61,440
            bytes, __launch_bounds__(128, 2); 199 / 244 registers keep a third block out) or 1 (120 KiB)
==========  =================================================================================================

Every SM gets its blocks (grid = SMs x blocks per SM); each block times its ``iters`` k-steps with clock64 from
loop start to loop end and records them with its %globaltimer span, %smid and start (:data:`REC` longs); a
warm-up launch, up to 3 sizing launches scaling ``iters`` towards ``target_s``, then ``reps`` timed launches.

Per row (``rows[<key>]``, keys ``wf_<frag>_<copy>_b<blocks>``, ``wf_ldsm_<copy>_b<blocks>_w4`` for the 64x64
geometry, which ``geometry`` records: ``warp_tile``, ``warps_per_block``): ``cycles_per_kstep`` (per block: every block's
cycles / iters over all reps; value = median, p10, p90), ``cycles_per_kstep_rep_medians``, ``hmma_per_clk_sm``
(blocks per SM x 256 m16n8k16 a block and k-step, either geometry / the median block's cycles per k-step, summarised over reps),
``blocks_per_sm_seen`` (most blocks whose timed spans overlapped on one SM), ``clock_hz``, ``num_regs``, the
computed ``per_kstep`` counts (fragment loads, HMMA, cp.async, global bytes) and ``sass``: the hot loop's
histogram (never-executed ``@!PT`` padding left out) and its counts per k-step (over the loop's BAR count: ptxas
unrolls some loops) checked against ``expected_sass`` (``ok``). A model would read ``cycles_per_kstep.value``
of each row and the differences wmma - lds (the generic path), lds - ldsm (LDS vs LDSM) and gemm - none (the
copies) at 2 and 1 blocks per SM.

The rebuild against the suite kernel (tc_gemm.cu + its instantiation, nvcc 13 -O3 sm_90a, 128 registers): its
hot loop holds per warp and k-step the same 48 LD.E, 32 HMMA.16816, 4 LDGSTS a thread and 1 BAR in 205
instructions; wf_wmma_gemm_b2's 213 (the tile origins come from a table, the k offset wraps).

``python -m validation.calibration.wmma_feed_probe [--out DIR] [--quick]`` writes ``DIR/wmma_feed.json``
(default DIR ``validation/results/<gpu>/calibration``) and prints a table; about 1 s of launches plus the
nvcc build (``--quick``: 2 reps, shorter launches). Without a GPU it says so in one line and exits 2.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from validation.calibration import probe_common as pc
from validation.calibration.probe_common import count_prefix, summarize

KERNEL_SRC = Path(__file__).resolve().with_suffix(".cu")
RESULT_FILE = "wmma_feed.json"
ARCH = "sm_90a"

REC = 4  # WF_REC: cycles, ns, smid, start ns
STAGES = 3  # WF_STAGES
BM = BN = 128
BK = 32
WM, WN = 64, 32
WARPS = (BM // WM) * (BN // WN)  # 8
THREADS = 32 * WARPS
SLICES = BK // 16  # 16-deep k-slices a k-step
PITCH_HALVES = BK + 8  # tc_gemm's padded rows: BK + one 16-byte chunk (80 bytes)
SLOT_BYTES = (BM + BN) * PITCH_HALVES * 2  # A (BM rows) + B (BN rows, N x K): 20,480
RING_BYTES = STAGES * SLOT_BYTES  # 61,440: the suite kernel's dynamic shared memory
SMEM_BYTES = {2: RING_BYTES, 1: 120 * 1024}  # blocks per SM -> dynamic shared memory asked for
CHUNK_BYTES = 16
L2_MNK = 2048  # M = N = K of the gemm rows' data (A + B = 16 MiB: L2-resident)
TILES = (L2_MNK // BM) * (L2_MNK // BN)  # 256 block tiles
HMMA_PER_KSTEP_WARP = (WM // 16) * (WN // 8) * SLICES  # 32 m16n8k16 (a wmma m16n16k16 is 2 HMMA.16816)
FRAG_LOADS_PER_SLICE = WM // 16 + WN // 16  # 4 A + 2 B fragments of 16x16
LDGSTS_PER_THREAD = (BM + BN) * BK * 2 // CHUNK_BYTES // THREADS  # 4
# warps a block -> warp tile (WM, WN): 8 (the wmma suite kernel's 64 x 32, every frag) or 4 (64 x 64, the suite
# kernel mma_fp16_Bcol_128x128x32_w64x64_pad_s3's: frag ldsm only; keys and kernels end in "_w4")
GEOMETRIES = {8: (WM, WN), 4: (64, 64)}
W4_FRAGS = ("ldsm",)

FRAGS = ("wmma", "lds", "ldsm")
COPIES = ("none", "gemm")
BLOCKS = (2, 1)
REPS, QUICK_REPS = 7, 2
TARGET_S, QUICK_TARGET_S = 5e-3, 1e-3
FIRST_ITERS, MAX_ITERS = 64, 1 << 22
GATE_SPIN_CYCLES = 200_000
SASS_OPS = ("LD.E", "LDS", "LDSM", "HMMA", "LDGSTS", "BAR")


@dataclass(frozen=True)
class Row:
    """One row: fragment path ``frag`` (:data:`FRAGS`), copies ``copy`` (:data:`COPIES`), ``blocks_per_sm``;
    ``zfill``: the gemm kernel with M = N = 0 (every copy zero-fills); ``warps``: the block's warps
    (:data:`GEOMETRIES`: 8 of 64 x 32, or 4 of 64 x 64 with ``ldsm`` only)."""

    frag: str
    copy: str
    blocks_per_sm: int
    zfill: bool = False
    warps: int = WARPS

    def __post_init__(self) -> None:
        if self.frag not in FRAGS or self.copy not in COPIES or self.blocks_per_sm not in BLOCKS:
            raise ValueError(f"Row({self.frag!r}, {self.copy!r}, {self.blocks_per_sm}): unknown knob")
        if self.zfill and self.copy != "gemm":
            raise ValueError("zfill: only with copy = 'gemm'")
        if self.warps not in GEOMETRIES or (self.warps != WARPS and (self.frag not in W4_FRAGS or self.zfill)):
            raise ValueError(f"Row(..., warps={self.warps}): only {W4_FRAGS} rows (no zfill) in the 64 x 64 geometry")

    @property
    def wm(self) -> int:
        return GEOMETRIES[self.warps][0]

    @property
    def wn(self) -> int:
        return GEOMETRIES[self.warps][1]

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def hmma_per_kstep_warp(self) -> int:
        """m16n8k16 per warp per k-step."""
        return (self.wm // 16) * (self.wn // 8) * SLICES

    @property
    def ldgsts_per_thread(self) -> int:
        """16-byte cp.async per thread per k-step (load_tile: the block's chunks over its threads)."""
        return (BM + BN) * BK * 2 // CHUNK_BYTES // self.threads

    @property
    def kernel(self) -> str:
        suffix = "" if self.warps == WARPS else f"_w{self.warps}"
        return f"wf_{self.frag}_{self.copy}_b{self.blocks_per_sm}{suffix}"

    @property
    def key(self) -> str:
        return self.kernel + ("_zfill" if self.zfill else "")

    @property
    def smem_bytes(self) -> int:
        return SMEM_BYTES[self.blocks_per_sm]

    @property
    def hmma_per_kstep(self) -> int:
        """m16n8k16 per block per k-step."""
        return self.warps * self.hmma_per_kstep_warp

    @property
    def global_bytes_per_kstep(self) -> int:
        """Bytes a block reads from global memory per k-step (none for zero fill)."""
        return 0 if self.copy == "none" or self.zfill else self.ldgsts_per_thread * self.threads * CHUNK_BYTES

    def expected_sass(self) -> dict:
        """Per warp (thread, for LDGSTS) per k-step, what the hot loop must hold."""
        frag_ops = SLICES * (self.wm // 16 + self.wn // 16) * 4  # 4 words a lane and 16x16 fragment
        # one ldmatrix.x4 a 16x16 A fragment, one a pair of n8 B fragments
        ldsm = SLICES * (self.wm // 16 + self.wn // 16)
        return {"LD.E": frag_ops if self.frag == "wmma" else 0, "LDS": frag_ops if self.frag == "lds" else 0,
                "LDSM": ldsm if self.frag == "ldsm" else 0, "HMMA": self.hmma_per_kstep_warp,
                "LDGSTS": self.ldgsts_per_thread if self.copy == "gemm" else 0, "BAR": 1}

    def note(self) -> str:
        what = {"wmma": "tc_gemm's wmma.load on generic addresses (LD.E) + wmma.mma",
                "lds": "the same words by ld.shared (LDS) + wmma.mma",
                "ldsm": "ldmatrix.x4 + mma.sync m16n8k16 (the known path)"}[self.frag]
        copy = {"none": "no copies", "gemm": "tc_gemm's load_tile from L2 (2048^3)"}[self.copy]
        if self.zfill:
            copy = "tc_gemm's load_tile, every copy a zero fill (M = N = 0)"
        geo = "" if self.warps == WARPS else f"; {self.warps} warps of {self.wm}x{self.wn} (mma_sync w64x64 suite kernel)"
        return f"{what}; {copy}; {self.blocks_per_sm} block(s) per SM{geo}"


ROWS = (tuple(Row(f, c, b) for b in BLOCKS for c in COPIES for f in FRAGS) + (Row("wmma", "gemm", 1, zfill=True),)
        + tuple(Row("ldsm", c, b, warps=4) for b in BLOCKS for c in COPIES))
KERNELS = tuple(dict.fromkeys(r.kernel for r in ROWS))


def tile_origins(blocks: int) -> tuple[list[int], list[int]]:
    """(m0, n0) of each block of the grid: block b takes tile b mod 256 of the 16 x 16 grid, x over N first."""
    tn = L2_MNK // BN
    tiles = [b % TILES for b in range(blocks)]
    return [(t // tn) * BM for t in tiles], [(t % tn) * BN for t in tiles]


# ----- the SASS (no GPU needed) ---------------------------------------------------------------------------

def loop_sass(sass: str, kernel: str) -> dict:
    """The hot loop (the backward branch's body with the most HMMA, the shortest on a tie) of ``kernel``, the
    ``@!PT`` padding left out: ``histogram``, ``ksteps_per_body`` (its BAR count), ``per_kstep`` counts of
    :data:`SASS_OPS`, ``instructions_per_kstep``. ValueError when no loop holds an HMMA."""
    body = pc.loop_body(sass, kernel, "HMMA")
    ksteps = max(1, count_prefix(body, "BAR"))
    return {"histogram": dict(sorted(body.items())), "ksteps_per_body": ksteps,
            "per_kstep": {op: count_prefix(body, op) / ksteps for op in SASS_OPS},
            "instructions_per_kstep": sum(body.values()) / ksteps}


def check_row_sass(row: Row, sass: str) -> dict:
    """:func:`loop_sass` of the row's kernel with ``expected_sass`` and ``ok`` (every count as expected)."""
    try:
        s = loop_sass(sass, row.kernel)
    except ValueError as e:
        return {"ok": False, "problem": str(e)}
    want = row.expected_sass()
    return {**s, "expected_sass": want, "ok": all(s["per_kstep"][k] == v for k, v in want.items())}


def sass_checks(workdir: Path) -> dict:
    """Compile the .cu (nvcc, cuobjdump on PATH) and check every row's loop: {"registers", "rows": {key:
    check}}, or {"error": ...} when nvcc or cuobjdump fails."""
    try:
        cubin, log = pc.compile_cubin(workdir, ARCH, KERNEL_SRC)
        sass = pc.disassemble(cubin)
    except RuntimeError as e:
        return {"error": str(e)}
    return {"registers": pc.ptxas_registers(log), "ptxas_warnings": pc.ptxas_warnings(log),
            "rows": {r.key: check_row_sass(r, sass) for r in ROWS}}


# ----- records and rows (pure) ----------------------------------------------------------------------------
def parse_records(raw: Sequence[int], blocks: int) -> dict:
    """Per-block records (cycles, ns, smid, start ns): :func:`probe_common.block_records`."""
    return pc.block_records(raw, blocks, REC)


def rep_metrics(row: Row, rec: dict, iters: int, event_s: float | None) -> dict:
    """One rep: every block's cycles per k-step, the median's HMMA/clk/SM (x blocks per SM: side by side)."""
    if iters < 1:
        raise ValueError(f"iters = {iters}: must be >= 1")
    per_block = [c / iters for c in rec["cycles"]]
    med = pc.median(per_block)
    return {"cycles_per_kstep_blocks": per_block, "cycles_per_kstep": med,
            "hmma_per_clk_sm": row.blocks_per_sm * row.hmma_per_kstep / med, "clock_hz": rec["clock_hz"],
            "max_coresident": rec["max_coresident"], "distinct_sms": rec["distinct_sms"], "event_s": event_s}


def summarize_row(row: Row, runs: list[dict]) -> dict:
    """The JSON row of one configuration from its reps."""
    every = [c for r in runs for c in r["cycles_per_kstep_blocks"]]
    return {"kernel": row.kernel, "frag": row.frag, "copy": row.copy, "zfill": row.zfill,
            "blocks_per_sm": row.blocks_per_sm, "note": row.note(),
            "geometry": {"block_tile": [BM, BN, BK], "warp_tile": [row.wm, row.wn], "warps_per_block": row.warps,
                         "stages": STAGES, "pitch_bytes": 2 * PITCH_HALVES, "b_layout": "N x K (Bcol)"},
            "per_kstep": {"frag_loads_per_warp": row.expected_sass()["LD.E"] + row.expected_sass()["LDS"]
                          + row.expected_sass()["LDSM"], "hmma_m16n8k16_per_warp": row.hmma_per_kstep_warp,
                          "hmma_per_block": row.hmma_per_kstep, "ldgsts_per_thread": row.expected_sass()["LDGSTS"],
                          "global_bytes_per_block": row.global_bytes_per_kstep, "barriers": 1},
            "cycles_per_kstep": summarize(every),
            "cycles_per_kstep_rep_medians": [r["cycles_per_kstep"] for r in runs],
            "hmma_per_clk_sm": summarize([r["hmma_per_clk_sm"] for r in runs]),
            "blocks_per_sm_seen": max(r["max_coresident"] for r in runs),
            "distinct_sms": min(r["distinct_sms"] for r in runs),
            "clock_hz": summarize([r["clock_hz"] for r in runs])["value"],
            "event_s": [r["event_s"] for r in runs]}


def format_table(res: dict) -> str:
    """One line a row: cycles per k-step (median, p10, p90), HMMA/clk/SM, blocks seen, registers, SASS."""
    lines = [f"{'row':27s} {'cyc/kstep':>9s} {'p10':>8s} {'p90':>8s} {'hmma/clk/SM':>11s} {'blk/SM':>6s} "
             f"{'regs':>4s} {'GHz':>5s}  sass per k-step (LD.E LDS LDSM HMMA LDGSTS BAR)"]
    for k, r in res.get("rows", {}).items():
        c, s = r["cycles_per_kstep"], r.get("sass", {})
        counts = " ".join(f"{s['per_kstep'][op]:g}" for op in SASS_OPS) if "per_kstep" in s else s.get("problem", "-")
        flag = "" if not s else (" ok" if s.get("ok") else " MISMATCH")
        lines.append(f"{k:27s} {c['value']:9.1f} {c['p10']:8.1f} {c['p90']:8.1f} {r['hmma_per_clk_sm']['value']:11.3f} "
                     f"{r['blocks_per_sm_seen']:6d} {r.get('num_regs') or 0:4d} {r['clock_hz'] / 1e9:5.2f}  {counts}{flag}")
    for k, e in res.get("errors", {}).items():
        lines.append(f"ERROR {k}: {e}")
    return "\n".join(lines)


# ----- GPU side -------------------------------------------------------------------------------------------
class _Device:
    def __init__(self, reps: int, target_s: float):
        import cupy as cp  # noqa: PLC0415

        self.cp, self.reps, self.target_s = cp, reps, target_s
        self.sm_count = pc.device_facts(cp)[0]
        self._tmp = tempfile.TemporaryDirectory()
        built = pc.build_module(cp, KERNEL_SRC, ARCH, Path(self._tmp.name),
                                nvrtc_options=(f"--gpu-architecture={ARCH}", "-std=c++17"), want_sass=True)
        self.mod, self.sass = built.module, built.sass
        self.compile = pc.compile_record(built, KERNEL_SRC, ARCH)
        rng = cp.random.default_rng(1)
        n = L2_MNK * L2_MNK  # A (M x K) and B (N x K), fp16 in (-0.5, 0.5)
        self.a = (rng.random(n, dtype=cp.float32) - 0.5).astype(cp.float16).view(cp.uint16)
        self.b = (rng.random(n, dtype=cp.float32) - 0.5).astype(cp.float16).view(cp.uint16)
        spin = cp.RawKernel(
            r'extern "C" __global__ void wf_spin(long long n){long long c=clock64();while(clock64()-c<n){}}', "wf_spin")
        self._timer = pc.GatedTimer(cp, spin, GATE_SPIN_CYCLES)

    def run_row(self, row: Row) -> tuple[list[dict], int, dict]:
        cp = self.cp
        f = pc.get_kernel(self.mod, row.kernel, row.smem_bytes)
        grid = row.blocks_per_sm * self.sm_count
        m0, n0 = tile_origins(grid)
        m0_dev, n0_dev = cp.asarray(m0, dtype=cp.int32), cp.asarray(n0, dtype=cp.int32)
        rec = cp.zeros(REC * grid, dtype=cp.int64)
        out = cp.zeros(grid * row.threads, dtype=cp.float32)
        mn = 0 if row.zfill else L2_MNK

        def launch(iters: int) -> None:
            f((grid,), (row.threads,), (cp.int32(iters), rec, out, self.a, self.b, m0_dev, n0_dev, cp.int32(mn),
                                    cp.int32(mn), cp.int32(L2_MNK)), shared_mem=row.smem_bytes)

        launch(FIRST_ITERS)  # warm-up (and the L2 fill)
        cp.cuda.Device().synchronize()
        iters = pc.size_iters(lambda it: self._timer.seconds(lambda: launch(it)), FIRST_ITERS, self.target_s,
                              MAX_ITERS, 3)
        runs = []
        for _ in range(self.reps):
            s = self._timer.seconds(lambda: launch(iters))
            runs.append(rep_metrics(row, parse_records(rec.get(), grid), iters, s))
        info = {**pc.kernel_attributes(f), "smem_bytes": row.smem_bytes, "grid": grid, "threads": row.threads}
        return runs, iters, info


def run_probe(quick: bool = False) -> dict:
    """Every row on the current GPU (JSON-ready): ``rows``, ``errors`` (per row; the others still run), ``meta``,
    ``compile``."""
    t0 = time.perf_counter()
    meta = pc.collect_metadata()
    dev = _Device(QUICK_REPS if quick else REPS, QUICK_TARGET_S if quick else TARGET_S)
    res: dict = {"meta": meta, "compile": dev.compile, "rows": {}, "errors": {}}
    for row in ROWS:
        try:
            runs, iters, info = dev.run_row(row)
            r = summarize_row(row, runs)
            r.update(iters=iters, reps=dev.reps, **info)
            if dev.sass:
                r["sass"] = check_row_sass(row, dev.sass)
                if not r["sass"].get("ok"):
                    res["errors"][row.key + ".sass"] = "the hot loop does not hold what the row claims"
            res["rows"][row.key] = r
        except Exception as exc:  # noqa: BLE001  (recorded, the others still run)
            res["errors"][row.key] = f"{type(exc).__name__}: {exc}"
    res["meta"].update(probe_wall_s=time.perf_counter() - t0, quick=quick, sm_count=dev.sm_count,
                       target_kernel_s=dev.target_s, reps=dev.reps)
    return res


def main(argv: Sequence[str] | None = None) -> int:
    ap = pc.probe_parser("wmma_feed_probe", __doc__.splitlines()[0], RESULT_FILE,
                         f"{QUICK_REPS} reps and launches of about {QUICK_TARGET_S * 1e3:g} ms")
    a = ap.parse_args(argv)
    why = pc.gpu_missing()
    if why:
        return pc.no_gpu_exit("wmma_feed_probe", why)
    res = run_probe(a.quick)
    return pc.write_probe_result(a.out, RESULT_FILE, res, format_table(res))


if __name__ == "__main__":
    sys.exit(main())
