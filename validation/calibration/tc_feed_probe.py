"""Tensor-core GEMM operand feeds in isolation: cp.async k-step copies and WMMA loads from global (H200).

``python -m validation.calibration.tc_feed_probe [--out DIR] [--quick] [--profile]`` runs two groups on the
current GPU (CuPy), prints a table and writes ``<DIR>/tc_feed.json`` (default DIR:
``validation/results/<gpu>/calibration``). Without a GPU it says so in one line and exits 2. About 10 s of
GPU time (``--quick``: about 3 s) plus the nvcc compile and 24 MiB of buffers. ``--profile`` (for ``ncu``): the
``--quick`` cases, each a warm-up launch and one measured launch (ncu sees them in pairs, in row order).

Group ``copy`` (kernel ``tcf_copy`` of tc_feed_probe.cu, :data:`COPY_CASES`): the k-step copies of
tc_gemm's cp.async pipeline without the MMAs: per k-step a 128 x 32 fp16 A tile and a 32 x 128 B tile (16
KiB) in 16-byte cp.async.cg copies into a 4-stage ring, wait_group(2) and one barrier a k-step. tc_gemm's
load_tile only ever copies 16 bytes (K = 2008 and N = 4000 are multiples of 8 halves), so the cases vary the
row pitch of the L2-resident sources, not the copy size: A pitch 2048 (4096 B, line-aligned rows), 2008
(4016 B: every other row starts in the middle of a 32-byte sector, the suite's ragged K), 2032 (4064 B,
sector-aligned); B pitch 2048 or 4000 (8000 B, the ragged shape's N: sector-aligned, rows not
line-aligned). Geometry: 256 threads and 1 block per SM, or 128 threads and 2 blocks per SM (the suite's
mma.sync 128x128 kernels), or 256 threads with an 8-stage ring (``_s8``, kernel ``tcf_copy_s8``: seven
k-steps in flight, so the SM's copy throughput rather than the 4-stage ring's latency); on every SM, or one block on one SM (the SM's own throughput, no L2 contention).
Per case: ``cycles_per_kstep`` (per block, median over blocks), ``bytes_per_clk_sm`` (blocks per SM x 16
KiB / cycles per k-step), the aggregate ``bytes_per_s`` (all blocks' bytes over the CUDA-event time and over
the %globaltimer span), and what the model computes for the same copies (:func:`copy_model`): distinct
sectors and lines per k-step and its L1 cycles (:func:`tilesim.cost.access.l1_cycles` per warp copy, as
:func:`tilesim.cost.nvidia.step_cost` charges cp.async) and shared-pipe cycles (``ldgsts16_pipe_cycles``).

Group ``wmma`` (kernel ``tcf_wmma``, :data:`WMMA_CASES`): ``wmma.load.a`` fp16 16x16 row-major fragments
straight from global memory (tc_gemm rung 1), ldm = 2048 or 2008, at 1, 2, 4, 8 and 16 warps (one block per
SM, forced by the dynamic shared memory asked for), from an L1-resident footprint (each warp cycles over 4
fragments of its 16 rows) or an L2-resident one (a warp walks 16 row groups of whole 2048-element rows, 1 MiB
per warp, 16 MiB of data), on every SM; the L2 case also on one SM. Per case: ``cycles_per_fragment_sm``
(block cycles / fragments the block loaded), ``fragments_per_clk_sm`` and the model's L1 cycles per
fragment (:func:`wmma_model`: the four 4-byte loads of tilesim.kernels.tc_gemm.lower._global_step's
``frag``, each charged :func:`~tilesim.cost.access.l1_cycles`).

Nsight Compute records of the ``copy`` group (``--profile`` under ncu, raw CSV pages; see
``validation/results/h200/calibration/tc_feed_ncu_split/README.md``): :func:`profiled_copy_rows` reads them per
block and k-step, ``--ncu-table DIR`` prints them with their rates over ncu's duration, and
:func:`sector_group_fields` gives the calibrated profile's ``ldgsts16_sector_group_lanes``: the lanes of a
16-byte cp.async whose sectors the L1 fetches together (:func:`tilesim.cost.access.grouped_sectors`), the
smallest group for which the sectors the SMs receive (``l1tex__m_xbar2l1tex_read_sectors``) match every
profiled row within :data:`SECTOR_FIT_TOLERANCE`.
"""

from __future__ import annotations

import csv
import functools
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from validation.calibration import probe_common as pc

KERNEL_SRC = Path(__file__).resolve().with_suffix(".cu")
RESULT_FILE = "tc_feed.json"
ARCH = "sm_90a"

# must match the #defines of tc_feed_probe.cu
REC = 4  # TCF_REC: cycles, ns, smid, start ns
BM = BN = 128  # TCF_BM, TCF_BN
BK = 32  # TCF_BK
STAGES = 4  # TCF_STAGES
DEEP_STAGES = 8  # TCF_DEEP_STAGES (tcf_copy_s8)
RG_ROWS = 256  # TCF_RG_ROWS
A_LC, B_LC = BK * 2 // 16, BN * 2 // 16  # 16-byte chunks a row of the A and B tiles
CHUNK_BYTES = 16  # cp.async.cg copy size (PTX ISA, cp.async)
ELEM_BYTES = 2  # fp16
KSTEP_BYTES = (BM * BK + BK * BN) * ELEM_BYTES  # 16 KiB a k-step
WARP = 32

SMEM_ONE_BLOCK_BYTES = 120 * 1024  # > half of the 228 KiB of an SM: one block per SM (as mma_feed_probe)
SMEM_TWO_BLOCKS_BYTES = 100 * 1024  # two fit, three do not (as mma_feed_probe)
SMEM_BY_BLOCKS = {1: SMEM_ONE_BLOCK_BYTES, 2: SMEM_TWO_BLOCKS_BYTES}
A_ROWS = 2048  # rows of the copy group's A (16 row tiles); B has 2048 rows (k)
KSTEPS_PER_PASS = 62  # k-steps walked before wrapping: 2008 // 32, the same for every pitch
WMMA_A_ROWS = 4096  # rows of the wmma group's A: 4096 x 2048 fp16 = 16 MiB (L2-resident)
WMMA_L1_KFRAGS = 4  # L1-resident: 4 fragments of a warp's 16 rows (16 rows x 128 B, 8 KiB at most ... per warp)
WMMA_L2_RGROUPS = 16  # L2-resident: 16 row groups of whole rows a warp (16 x 16 rows x 4 KiB = 1 MiB)
GATE_SPIN_CYCLES = 200_000
REPS, QUICK_REPS = 5, 2
COPY_KSTEPS, QUICK_COPY_KSTEPS = 4096, 1024  # per block per launch (about 1 ms at 64 B/clk/SM)
WMMA_ITERS, QUICK_WMMA_ITERS = 8192, 2048  # fragments per warp per launch
PROFILE_COPY_KSTEPS, PROFILE_WMMA_ITERS = 256, 2048


@dataclass(frozen=True)
class CopyCase:
    """One ``copy`` row: A and B row pitches (elements), threads a block, blocks per SM, every SM or one."""

    key: str
    a_pitch: int
    b_pitch: int
    threads: int
    blocks_per_sm: int
    all_sms: bool
    stages: int = STAGES

    def __post_init__(self) -> None:
        if self.stages not in (STAGES, DEEP_STAGES) or (self.stages == DEEP_STAGES and self.blocks_per_sm != 1):
            raise ValueError(f"CopyCase {self.key}: stages = {self.stages} must be {STAGES}, or {DEEP_STAGES} "
                             "at 1 block per SM")
        if self.a_pitch % (CHUNK_BYTES // ELEM_BYTES) or self.a_pitch < KSTEPS_PER_PASS * BK:
            raise ValueError(f"CopyCase {self.key}: a_pitch = {self.a_pitch} must be a multiple of 8 and >= "
                             f"{KSTEPS_PER_PASS * BK}")
        if self.b_pitch % (CHUNK_BYTES // ELEM_BYTES) or self.b_pitch < BN:
            raise ValueError(f"CopyCase {self.key}: b_pitch = {self.b_pitch} must be a multiple of 8 and >= {BN}")
        if self.blocks_per_sm not in SMEM_BY_BLOCKS:
            raise ValueError(f"CopyCase {self.key}: blocks_per_sm = {self.blocks_per_sm} must be 1 or 2")
        if self.threads not in (128, 256):
            raise ValueError(f"CopyCase {self.key}: threads = {self.threads} must be 128 or 256")

    @property
    def kernel(self) -> str:
        return "tcf_copy" if self.stages == STAGES else f"tcf_copy_s{self.stages}"

    @property
    def smem_bytes(self) -> int:
        return max(SMEM_BY_BLOCKS[self.blocks_per_sm], self.stages * KSTEP_BYTES)

    @property
    def b_col_tiles(self) -> int:
        return self.b_pitch // BN


@dataclass(frozen=True)
class WmmaCase:
    """One ``wmma`` row: ``source`` "l1" or "l2", ldm (elements), warps a block (one block per SM), every SM."""

    key: str
    source: str
    ldm: int
    warps: int
    all_sms: bool = True

    def __post_init__(self) -> None:
        if self.source not in ("l1", "l2"):
            raise ValueError(f"WmmaCase {self.key}: source = {self.source!r} must be 'l1' or 'l2'")
        if self.ldm % 8 or self.ldm < 2000:
            raise ValueError(f"WmmaCase {self.key}: ldm = {self.ldm} must be a multiple of 8 and >= 2000")
        if not 1 <= self.warps <= 16:
            raise ValueError(f"WmmaCase {self.key}: warps = {self.warps} must be 1..16")

    @property
    def kfrags(self) -> int:
        return WMMA_L1_KFRAGS if self.source == "l1" else 2000 // 16  # whole rows (k < 2000 for every ldm)

    @property
    def rgroups(self) -> int:
        return 1 if self.source == "l1" else WMMA_L2_RGROUPS


PITCHES = (("a2048_b2048", 2048, 2048), ("a2008_b2048", 2008, 2048), ("a2032_b2048", 2032, 2048),
           ("a2048_b4000", 2048, 4000), ("a2008_b4000", 2008, 4000))
GEOMS = (("t256_b1", 256, 1, STAGES), ("t128_b2", 128, 2, STAGES), ("t256_b1_s8", 256, 1, DEEP_STAGES))
COPY_CASES = tuple(CopyCase(f"copy_{p}_{g}_{'all' if a else 'sm1'}", ap, bp, t, b, a, s)
                   for p, ap, bp in PITCHES for g, t, b, s in GEOMS for a in (True, False))
WMMA_WARPS = (1, 2, 4, 8, 16)
WMMA_CASES = tuple([WmmaCase(f"wmma_{s}_ldm{ldm}_w{w}", s, ldm, w) for s in ("l1", "l2") for ldm in (2048, 2008)
                    for w in WMMA_WARPS]
                   + [WmmaCase(f"wmma_l2_ldm{ldm}_w16_sm1", "l2", ldm, 16, all_sms=False) for ldm in (2048, 2008)])
QUICK_COPY_KEYS = frozenset(c.key for c in COPY_CASES if c.a_pitch in (2048, 2008) and c.b_pitch == 2048
                            or c.key.startswith("copy_a2008_b4000"))
QUICK_WMMA_WARPS = (1, 4, 16)


# ----- what the model computes for the same accesses (pure) --------------------------------------------
def _hw():
    from tilesim.hardware import catalog  # noqa: PLC0415

    return catalog.load("h200")


def copy_warp_instructions(case: CopyCase, kp: int = 0) -> list[list[int]]:
    """Byte offsets (A at 0, B after A's 2048 rows) of each warp cp.async instruction of one block's
    k-step ``kp``: thread t copies chunks t, t + threads, ... of A then of B, as tcf_copy."""
    b_base = A_ROWS * case.a_pitch * ELEM_BYTES
    k0 = kp * BK
    a = [(r * case.a_pitch + k0 + c * 8) * ELEM_BYTES for i in range(BM * A_LC) for r, c in [divmod(i, A_LC)]]
    b = [b_base + ((k0 + r) * case.b_pitch + c * 8) * ELEM_BYTES for i in range(BK * B_LC)
         for r, c in [divmod(i, B_LC)]]
    out = []
    for chunks in (a, b):
        for it in range(0, len(chunks), case.threads):
            block = chunks[it:it + case.threads]
            out += [block[w:w + WARP] for w in range(0, len(block), WARP)]
    return out


def copy_model(case: CopyCase, hw=None) -> dict:
    """:func:`pitch_copy_model` of the case's pitches (the warp copies do not depend on the threads a block)."""
    return dict(pitch_copy_model(case.a_pitch, case.b_pitch, hw or _hw()))


@functools.cache
def pitch_copy_model(a_pitch: int, b_pitch: int, hw) -> tuple:
    """Per k-step of one block, averaged over the KSTEPS_PER_PASS k-steps: distinct 32-byte sectors and
    128-byte lines its copies touch, warp copies, the model's L1 cycles (l1_cycles per warp copy) and
    shared-pipe cycles (ldgsts16_pipe_cycles per warp copy, as step_cost charges 16-byte cp.async)."""
    from tilesim.cost.access import l1_cycles  # noqa: PLC0415

    case = CopyCase("model", a_pitch, b_pitch, 256, 1, True)
    sectors = lines = l1 = 0.0
    n_instr = 0
    for kp in range(KSTEPS_PER_PASS):
        instrs = copy_warp_instructions(case, kp)
        addrs = [a + off for ins in instrs for a in ins for off in range(0, CHUNK_BYTES, 4)]
        sectors += len({a // hw.sector_bytes for a in addrs})
        lines += len({a // (4 * hw.sector_bytes) for a in addrs})
        l1 += sum(l1_cycles(ins, CHUNK_BYTES, hw) for ins in instrs)
        n_instr = len(instrs)
    n = KSTEPS_PER_PASS
    pipe = hw.get("ldgsts16_pipe_cycles") if hw.has("ldgsts16_pipe_cycles") else None
    return (("sectors_per_kstep", sectors / n), ("lines_per_kstep", lines / n), ("warp_copies_per_kstep", n_instr),
            ("model_l1_cycles_per_kstep", l1 / n),
            ("model_smem_pipe_cycles_per_kstep", None if pipe is None else pipe * n_instr),
            ("ideal_sectors_per_kstep", KSTEP_BYTES / hw.sector_bytes))


def grouped_copy_sectors(a_pitch: int, b_pitch: int, group_lanes: int, ksteps: int = KSTEPS_PER_PASS,
                         sector_bytes: int = 32) -> float:
    """Sectors one block's copies fetch from the L2 per k-step, averaged over a launch of ``ksteps`` k-steps
    (k-step ``ks`` copies pass position ``ks % KSTEPS_PER_PASS``), when the L1 fetches each warp copy's lanes
    in groups of ``group_lanes`` (:func:`tilesim.cost.access.grouped_sectors`; 32: distinct sectors per warp
    copy). Which thread copies a chunk does not change a warp's lanes, so the block's threads do not matter."""
    return _grouped_copy_sectors(a_pitch, b_pitch, group_lanes, ksteps, sector_bytes)


@functools.cache
def _grouped_copy_sectors(a_pitch: int, b_pitch: int, group_lanes: int, ksteps: int, sector_bytes: int) -> float:
    from tilesim.cost.access import grouped_sectors  # noqa: PLC0415

    case = CopyCase("sectors", a_pitch, b_pitch, 256, 1, True)
    per_pass = [sum(grouped_sectors(ins, CHUNK_BYTES, group_lanes, sector_bytes)
                    for ins in copy_warp_instructions(case, kp)) for kp in range(KSTEPS_PER_PASS)]
    return sum(per_pass[ks % KSTEPS_PER_PASS] for ks in range(ksteps)) / ksteps


# ----- Nsight Compute records of the copy group (pure) ---------------------------------------------------
#: the counter of sectors the crossbar delivers to an SM's L1 (what the SM's requests fetch from the L2)
NCU_XBAR_SECTORS = "l1tex__m_xbar2l1tex_read_sectors.sum"
#: lane groups tried by :func:`sector_group_fields`, smallest first
SECTOR_GROUP_CANDIDATES = (1, 2, 4, 8, 16, 32)
#: largest relative difference between the sectors a lane group predicts and the recorded ones
SECTOR_FIT_TOLERANCE = 0.01


def read_ncu_raw(text: str) -> list[dict]:
    """The launches of an ``ncu --csv --page raw`` output, in order: one dict per launch, metric name to
    value (numbers as floats, thousands separators dropped; other cells as text). Lines that are not CSV
    rows (ncu's ==PROF== notes, the probe's own table) and the units row are skipped."""
    rows = list(csv.reader([ln for ln in text.splitlines() if ln.startswith('"')]))
    if not rows:
        return []
    header = rows[0]
    out = []
    for r in rows[1:]:
        d = dict(zip(header, r, strict=False))
        if not d.get("ID", "").isdigit():
            continue
        for k, v in d.items():
            try:
                d[k] = float(v.replace(",", ""))
            except ValueError:
                pass
        out.append(d)
    return out


def profiled_copy_rows(ncu_text: str, record: dict) -> list[dict]:
    """Each copy case of a ``--profile`` record with its measured launch (the second of its pair, ncu
    listing only ``tcf_copy*`` launches, in row order): ``key``, ``a_pitch``, ``b_pitch``, ``blocks``,
    ``ksteps``, ``duration_s`` and ``per_kstep`` (every counter divided by blocks x k-steps)."""
    launches = [d for d in read_ncu_raw(ncu_text) if str(d.get("Kernel Name", "")).startswith("tcf_copy")]
    keys = list(record.get("copy", {}))
    if len(launches) != 2 * len(keys):
        raise ValueError(f"profiled_copy_rows: {len(launches)} tcf_copy launches for {len(keys)} copy rows "
                         "(want a warm-up and a measured launch each)")
    ksteps = record["meta"]["copy_ksteps"]
    out = []
    for i, key in enumerate(keys):
        row, m = record["copy"][key], launches[2 * i + 1]
        n = row["blocks"] * ksteps
        out.append({"key": key, "a_pitch": row["a_pitch"], "b_pitch": row["b_pitch"], "blocks": row["blocks"],
                    "ksteps": ksteps, "duration_s": m.get("gpu__time_duration.sum", 0.0) * 1e-9,
                    "per_kstep": {k: v / n for k, v in m.items() if "__" in k and isinstance(v, float)}})
    return out


def sector_group_fields(ncu_text: str, record: dict, result_path: str = "tc_feed_ncu_split/ncu.csv") -> dict:
    """The calibrated profile's ``ldgsts16_sector_group_lanes``: the smallest lane group
    (:data:`SECTOR_GROUP_CANDIDATES`) whose :func:`grouped_copy_sectors` matches the recorded
    ``l1tex__m_xbar2l1tex_read_sectors`` per block and k-step of every profiled copy row within
    :data:`SECTOR_FIT_TOLERANCE`. A record without that counter, or one no group fits, gives no field."""
    rows = [r for r in profiled_copy_rows(ncu_text, record) if NCU_XBAR_SECTORS in r["per_kstep"]]
    if not rows:
        return {}
    for g in SECTOR_GROUP_CANDIDATES:
        errs = [grouped_copy_sectors(r["a_pitch"], r["b_pitch"], g, r["ksteps"]) / r["per_kstep"][NCU_XBAR_SECTORS] - 1
                for r in rows]
        if max(abs(e) for e in errs) <= SECTOR_FIT_TOLERANCE:
            return {"ldgsts16_sector_group_lanes": {
                "value": g, "p10": g, "p90": g, "n": len(rows), "unit": "lanes",
                "benchmark": f"tc_feed_probe copy rows under ncu ({result_path}: {NCU_XBAR_SECTORS} per block and "
                             f"k-step of {len(rows)} rows, A pitch {sorted({r['a_pitch'] for r in rows})}, B pitch "
                             f"{sorted({r['b_pitch'] for r in rows})}, matched within {max(abs(e) for e in errs):.2%})",
                "date": record.get("meta", {}).get("date_utc")}}
    return {}


def ncu_table(ncu_text: str, record: dict, lrc_text: str | None = None, lrc_record: dict | None = None) -> str:
    """Per profiled copy row, per block and k-step: sectors the SMs receive (xbar), requests into the L2
    request coalescer (lrc in) and the sectors it passes on (lrc out), the L2 slices' requests and sectors
    from the SMs (lts tex), and over ncu's duration: the SMs' sectors in TB/s, lts requests in G/s and
    lts sectors in TB/s."""
    rows = profiled_copy_rows(ncu_text, record)
    lrc = profiled_copy_rows(lrc_text, lrc_record) if lrc_text and lrc_record else [None] * len(rows)
    out = [f"{'row':34s} {'xbar':>5s} {'lrc in':>6s} {'lrc out':>7s} {'lts req':>7s} {'lts sec':>7s} "
           f"{'xbar TB/s':>9s} {'lts Greq/s':>10s} {'lts TB/s':>8s}"]
    for r, lr in zip(rows, lrc, strict=True):
        p, n, t = r["per_kstep"], r["blocks"] * r["ksteps"], r["duration_s"]
        xbar = p.get(NCU_XBAR_SECTORS, float("nan"))
        req = p.get("lts__t_requests_srcunit_tex.sum", float("nan"))
        sec = p.get("lts__t_sectors_srcunit_tex.sum", float("nan"))
        lin = lr["per_kstep"].get("lrc__xbar2lrc_requests_op_read.sum", float("nan")) if lr else float("nan")
        lout = lr["per_kstep"].get("lrc__lrc2xbar_sectors_op_read.sum", float("nan")) if lr else float("nan")
        out.append(f"{r['key']:34s} {xbar:5.0f} {lin:6.0f} {lout:7.0f} {req:7.0f} {sec:7.0f} "
                   f"{xbar * 32 * n / t / 1e12:9.2f} {req * n / t / 1e9:10.1f} {sec * 32 * n / t / 1e12:8.2f}")
    return "\n".join(out)


def wmma_fragment_instructions(ldm: int, kf: int = 0) -> list[list[int]]:
    """Byte offsets of the four 4-byte warp loads of one fp16 16x16 row-major A fragment at k = 16 kf, as
    tilesim.kernels.tc_gemm.lower._global_step's ``frag``: lane (g, t) reads row g (+ 8), columns 2t (+ 8)."""
    out = []
    for j in range(4):
        out.append([((ln // 4 + 8 * (j % 2)) * ldm + kf * 16 + 2 * (ln % 4) + 8 * (j // 2)) * ELEM_BYTES
                    for ln in range(WARP)])
    return out


def wmma_model(ldm: int, hw=None) -> dict:
    """The model's L1 cycles, sectors and lines of one fragment (mean over a row's 125 fragments and rows
    16 i for i < 16: the row phase matters when ldm is not a multiple of 64)."""
    from tilesim.cost.access import l1_cycles  # noqa: PLC0415

    hw = hw or _hw()
    l1 = sectors = lines = 0.0
    n = 0
    for i in range(16):
        for kf in range(125):
            ins = [[a + i * 16 * ldm * ELEM_BYTES for a in x] for x in wmma_fragment_instructions(ldm, kf)]
            l1 += sum(l1_cycles(x, 4, hw) for x in ins)
            addrs = [a for x in ins for a in x]
            sectors += len({a // hw.sector_bytes for a in addrs})
            lines += len({a // (4 * hw.sector_bytes) for a in addrs})
            n += 1
    return {"model_l1_cycles_per_fragment": l1 / n, "sectors_per_fragment": sectors / n,
            "lines_per_fragment": lines / n, "loads_per_fragment": 4}


# ----- GPU --------------------------------------------------------------------------------------------
class _Device:
    """Compiled module, buffers and the gated timer."""

    def __init__(self, reps: int):
        import cupy as cp  # noqa: PLC0415

        self.cp, self.reps = cp, reps
        self.sm_count, self.arch = pc.device_facts(cp)
        self._tmp = tempfile.TemporaryDirectory(prefix="tc_feed_probe_")
        built = pc.build_module(cp, KERNEL_SRC, ARCH, Path(self._tmp.name), (f"--gpu-architecture={ARCH}",),
                                want_sass=True)
        self.module, self.sass = built.module, built.sass
        self.compile = {"compiled_by": built.compiled_by, "arch": ARCH, "ptxas_warnings": pc.ptxas_warnings(built.log),
                        "nvcc_error": built.error, "sass_error": built.sass_error}
        self.timer = pc.GatedTimer(cp, self.module.get_function("tcf_spin"), GATE_SPIN_CYCLES)
        max_a = max(p[1] for p in PITCHES)
        max_b = max(p[2] for p in PITCHES)
        self.a = cp.zeros(A_ROWS * max_a, dtype=cp.uint16)
        self.b = cp.zeros(A_ROWS * max_b, dtype=cp.uint16)
        self.wa = cp.zeros(WMMA_A_ROWS * 2048, dtype=cp.uint16)
        self.sink = cp.zeros(self.sm_count * 512, dtype=cp.uint32)
        self.rec = cp.zeros(2 * self.sm_count * REC, dtype=cp.int64)

    def _timed(self, launch, blocks: int) -> tuple[float, dict]:
        self.rec[:] = 0
        s = self.timer.seconds(launch)
        cyc, ns, sm, start = pc.record_columns(self.rec[:blocks * REC].get().tolist(), blocks, REC)
        pc.check_timed_blocks(cyc, ns)
        span_ns = max(t + d for t, d in zip(start, ns, strict=True)) - min(start)
        return s, {"cycles": cyc, "ns": ns, "smid": sm, "span_ns": span_ns}

    def _runs(self, launch, blocks: int, reps: int) -> list[tuple[float, dict]]:
        launch()  # warm-up: brings the data into L2 (and L1)
        return [self._timed(launch, blocks) for _ in range(reps)]

    def run_copy(self, case: CopyCase, ksteps: int, reps: int) -> dict:
        cp = self.cp
        smem = case.smem_bytes
        f = pc.get_kernel(self.module, case.kernel, smem)
        blocks = self.sm_count * case.blocks_per_sm if case.all_sms else 1
        args = (self.a, self.b, cp.int64(case.a_pitch), cp.int64(case.b_pitch), cp.int32(A_ROWS // BM),
                cp.int32(case.b_col_tiles), cp.int32(KSTEPS_PER_PASS), cp.int32(ksteps), self.rec)
        runs = self._runs(lambda: f((blocks,), (case.threads,), args, shared_mem=smem), blocks, reps)
        per_kstep = [pc.median(r["cycles"]) / ksteps for _, r in runs]
        total_bytes = blocks * ksteps * KSTEP_BYTES
        resident = case.blocks_per_sm if case.all_sms else 1
        return {"blocks": blocks, "threads": case.threads, "stages": case.stages, "smem_bytes": smem,
                "ksteps": ksteps, "reps": reps,
                "cycles_per_kstep": pc.summarize(per_kstep),
                "bytes_per_clk_sm": pc.summarize([resident * KSTEP_BYTES / c for c in per_kstep]),
                "bytes_per_s_event": pc.summarize([total_bytes / s for s, _ in runs]),
                "bytes_per_s_span": pc.summarize([total_bytes / (r["span_ns"] * 1e-9) for _, r in runs]),
                "sm_clock_hz": pc.summarize([pc.median(pc.block_clocks_hz(r["cycles"], r["ns"])) for _, r in runs]),
                "distinct_sms": len(set(runs[-1][1]["smid"])), "kernel": pc.kernel_attributes(f)}

    def run_wmma(self, case: WmmaCase, iters: int, reps: int) -> dict:
        cp = self.cp
        f = pc.get_kernel(self.module, "tcf_wmma", SMEM_ONE_BLOCK_BYTES)
        blocks = self.sm_count if case.all_sms else 1
        a_rows = WMMA_A_ROWS * 2048 // case.ldm // 16 * 16  # rows of ldm elements that fit the buffer
        args = (self.wa, cp.int32(case.ldm), cp.int32(a_rows), cp.int32(case.kfrags), cp.int32(case.rgroups),
                cp.int32(iters), self.rec, self.sink)
        runs = self._runs(lambda: f((blocks,), (32 * case.warps,), args, shared_mem=SMEM_ONE_BLOCK_BYTES),
                          blocks, reps)
        per_frag = [pc.median(r["cycles"]) / (iters * case.warps) for _, r in runs]
        return {"blocks": blocks, "warps": case.warps, "iters": iters, "reps": reps, "a_rows": a_rows,
                "kfrags": case.kfrags, "rgroups": case.rgroups,
                "footprint_bytes_per_warp": case.rgroups * 16 * case.kfrags * 16 * ELEM_BYTES,
                "cycles_per_fragment_sm": pc.summarize(per_frag),
                "fragments_per_clk_sm": pc.summarize([1.0 / c for c in per_frag]),
                "cycles_per_fragment_warp": pc.summarize([pc.median(r["cycles"]) / iters for _, r in runs]),
                "bytes_per_s_event": pc.summarize([blocks * case.warps * iters * 512 / s for s, _ in runs]),
                "sm_clock_hz": pc.summarize([pc.median(pc.block_clocks_hz(r["cycles"], r["ns"])) for _, r in runs]),
                "distinct_sms": len(set(runs[-1][1]["smid"])), "kernel": pc.kernel_attributes(f)}


def sass_counts(sass: str | None, kernel: str) -> dict | None:
    """Opcode counts of ``kernel``'s hot loop (LDGSTS, LD, BAR, DEPBAR, ...), None without SASS."""
    if not sass:
        return None
    try:
        body = pc.hot_loop(sass, kernel, kernel)
    except Exception as exc:  # noqa: BLE001  (recorded; the timings stand without it)
        return {"error": f"{type(exc).__name__}: {exc}"}
    return dict(sorted(body.items()))


def run_probe(quick: bool = False, profile: bool = False) -> dict:
    """Both groups on the current GPU (JSON-ready): ``copy``, ``wmma``, ``errors`` (per row), ``meta``."""
    t0 = time.perf_counter()
    meta = pc.collect_metadata()
    reps = 1 if profile else (QUICK_REPS if quick else REPS)
    dev = _Device(reps)
    hw = _hw()
    res: dict = {"meta": meta, "compile": dev.compile, "copy": {}, "wmma": {}, "errors": {},
                 "sass": {k: sass_counts(dev.sass, k) for k in ("tcf_copy", "tcf_copy_s8", "tcf_wmma")}}
    quick = quick or profile
    ksteps = PROFILE_COPY_KSTEPS if profile else (QUICK_COPY_KSTEPS if quick else COPY_KSTEPS)
    iters = PROFILE_WMMA_ITERS if profile else (QUICK_WMMA_ITERS if quick else WMMA_ITERS)
    for case in COPY_CASES:
        if quick and case.key not in QUICK_COPY_KEYS:
            continue
        try:
            row = {"a_pitch": case.a_pitch, "b_pitch": case.b_pitch, "blocks_per_sm": case.blocks_per_sm,
                   "all_sms": case.all_sms, **copy_model(case, hw)}
            row.update(dev.run_copy(case, ksteps, reps))
            res["copy"][case.key] = row
        except Exception as exc:  # noqa: BLE001  (recorded, the others still run)
            res["errors"][case.key] = f"{type(exc).__name__}: {exc}"
    models = {ldm: wmma_model(ldm, hw) for ldm in {c.ldm for c in WMMA_CASES}}
    for case in WMMA_CASES:
        if quick and case.warps not in QUICK_WMMA_WARPS:
            continue
        try:
            row = {"source": case.source, "ldm": case.ldm, "all_sms": case.all_sms, **models[case.ldm]}
            row.update(dev.run_wmma(case, iters, reps))
            res["wmma"][case.key] = row
        except Exception as exc:  # noqa: BLE001
            res["errors"][case.key] = f"{type(exc).__name__}: {exc}"
    res["meta"].update(probe_wall_s=time.perf_counter() - t0, quick=quick, profile=profile, sm_count=dev.sm_count,
                       reps=reps, copy_ksteps=ksteps, wmma_iters=iters)
    return res


def format_table(res: dict) -> str:
    lines = [f"{'copy case':34s} {'cyc/kstep':>10s} {'B/clk/SM':>9s} {'GB/s':>9s} {'sectors':>8s} {'model L1':>9s}"]
    for k, r in res.get("copy", {}).items():
        lines.append(f"{k:34s} {r['cycles_per_kstep']['value']:10.1f} {r['bytes_per_clk_sm']['value']:9.1f} "
                     f"{r['bytes_per_s_event']['value'] / 1e9:9.0f} {r['sectors_per_kstep']:8.1f} "
                     f"{r['model_l1_cycles_per_kstep']:9.1f}")
    lines.append(f"{'wmma case':34s} {'cyc/frag/SM':>11s} {'frag/clk/SM':>11s} {'cyc/frag/warp':>13s} {'model L1':>9s}")
    for k, r in res.get("wmma", {}).items():
        lines.append(f"{k:34s} {r['cycles_per_fragment_sm']['value']:11.2f} {r['fragments_per_clk_sm']['value']:11.3f} "
                     f"{r['cycles_per_fragment_warp']['value']:13.1f} {r['model_l1_cycles_per_fragment']:9.2f}")
    for k, e in res.get("errors", {}).items():
        lines.append(f"ERROR {k}: {e}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = pc.probe_parser("tc_feed_probe", __doc__.splitlines()[0], RESULT_FILE,
                         "fewer cases (pitches 2048/2008, warps 1/4/16), 2 reps, shorter launches")
    ap.add_argument("--profile", action="store_true", help="the quick cases, one warm-up and one measured launch each (for ncu)")
    ap.add_argument("--ncu-table", default=None, metavar="DIR",
                    help="print the copy rows of DIR/ncu.csv + DIR/tc_feed.json (and ncu_lrc.csv + tc_feed_lrc.json) and exit")
    a = ap.parse_args(argv)
    if a.ncu_table:
        d = Path(a.ncu_table)
        lrc = d / "ncu_lrc.csv"
        print(ncu_table((d / "ncu.csv").read_text(), json.loads((d / RESULT_FILE).read_text()),
                        lrc.read_text() if lrc.exists() else None,
                        json.loads((d / "tc_feed_lrc.json").read_text()) if lrc.exists() else None))
        print(sector_group_fields((d / "ncu.csv").read_text(), json.loads((d / RESULT_FILE).read_text())))
        return 0
    why = pc.gpu_missing()
    if why:
        return pc.no_gpu_exit("tc_feed_probe", why)
    res = run_probe(a.quick, a.profile)
    return pc.write_probe_result(a.out, RESULT_FILE, res, format_table(res))


if __name__ == "__main__":
    sys.exit(main())
