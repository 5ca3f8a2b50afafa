"""The mma.sync GEMM inner loop in isolation: how fast ldmatrix-fed mma.sync m16n8k16 runs (H200, sm_90a).

``python -m validation.calibration.mma_feed_probe [--out DIR] [--quick] [--only GROUP[,GROUP]]`` runs the
groups (``sweep``, ``gemm_traffic``, ``gemm_traffic_w4``, ``gemm_traffic_ragged``, ``gemm_path``,
``gemm_bcol``; default all) on the current GPU (CuPy), prints a table and writes
``<DIR>/mma_feed.json`` (default DIR: ``validation/results/<gpu>/calibration``). With ``--only`` the groups
run replace theirs in an existing mma_feed.json of DIR, the others stay (:func:`merge_results`). Without a
GPU it says so in one line and exits 2. About 5 s of GPU time for ``sweep`` (``--quick``: about 1 s), well
under 1 s for each ``gemm_traffic`` group (plus the nvcc compile and 1 GiB buffers).

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

Group ``gemm_traffic`` (rows in ``gemm_traffic``, kernels ``mfgt_*`` of the .cu, :data:`GT_CONFIGS`): the
tc_gemm 128x256 / bk 32 loop (64x64 warp tiles, 8 warps, 1 block per SM on every SM, one barrier per k-step
of 2 slices, no fragment double buffering) with the GEMM's global -> shared k-step traffic put back piece by
piece while ldmatrix keeps reading a fixed ring: none (control), cp.async commit/wait_group only, zero-fill
copies (src-size 0), 16-byte cp.async.cg copies of the GEMM's tiles (24 KiB per block per k-step, 6 per
thread) into a 4-stage ring from L2-resident (16 MiB) or HBM-sized (1 GiB) data, tc_gemm's own load_tile
code (address and predicate arithmetic), and 3 slices per barrier (bk 48). Per row: ``hmma_per_clk_sm``,
``cycles_per_kstep`` (per block), achieved global bytes/s, the computed shared-memory wavefronts per k-step
(ldmatrix + cp.async writes, conflict-free counts, not measured) and the hot loop's SASS (``sass``:
histogram, LDSM/HMMA/BAR/LDGSTS/DEPBAR order, counts checked against the source).

Group ``gemm_traffic_w4`` (:data:`GT_W4_CONFIGS`, rows beside the others in ``gemm_traffic``, kernels
``mfgt_<mode>_k2_w4_b<blocks>_c3``): the same loop in the geometry of the suite's mma.sync GEMMs, 128x128
block tiles of 4 warps (64x64 each), bk 32, a 3-stage cp.async ring (wait_group(1)), 2 blocks per SM (as
they run: 112 KiB of shared memory a block) and 1 block per SM (120 KiB: the control that separates "two
blocks share an SM" from "four warps"); modes none, copy and gemm (tc_gemm's load_tile for 128x128x32,
s3), L2 (2048^3 on the 16 x 16 tile grid) or HBM data (1 GiB, every block of the grid its own tiles).

Group ``gemm_traffic_ragged`` (:data:`GT_RAGGED_CONFIGS`, rows beside the others in ``gemm_traffic``): the
w4 geometry at 2 blocks per SM (a 2-stage ldmatrix ring, so that the padded copy ring fits two blocks) with
L2-resident data whose A rows are not aligned as 2048-wide ones are: K = 2008 (the suite's ragged shape,
rows of 4016 bytes: every other row starts in the middle of a 32-byte sector, a 64-byte k-slab touches 2.5
sectors and 1.375 lines a row on average) and K = 2032 (4064 bytes: sector-aligned, a quarter of the slabs
straddle a 128-byte line), against K = 2048; modes copy and gemm, and ``gemm_pad``: tc_gemm's load_tile into
its padded layout (A rows of 5 chunks, B rows of 17) from aligned data. Per row also the distinct sectors
and lines its copies touch per k-step (:meth:`TrafficConfig.copy_sectors_lines_per_kstep`, computed).

Group ``gemm_path`` (:data:`GP_CONFIGS`, section ``gemm_path``, kernels ``mfgp_*``): the post-barrier
critical path of the k-step, per warp. tc_gemm's load_tile loop (8 warps x 1 block, 128x256, 4 stages; 4
warps x 2 or 1 blocks, 128x128, 3 stages) where every warp reads clock64 at the loop top, after the
DEPBAR, after the BAR, after its copies (LDGDEPBAR), after its first HMMA and after its last, and writes
the spans every 16th k-step (:data:`GP_SPANS`; medians, p10, p90 over warps and stamped k-steps per rep).
Rows vary the copies a thread that read data (0/2/4/6 of 6, 0/4/8 of 8; the others zero-fill), the data
(L2-resident aligned, 1 GiB HBM, A rows at K = 2008, A and B (N x K) at 2008, B pitch 8000 B), the order
(copies first, as tc_gemm; fragments first: slice 0's ldmatrix and MMAs before the copies) and the
geometry. :func:`check_path_sass` reads the control codes: in the copy-first kernels an instruction after
LDGDEPBAR waits on the copies' read barrier before the first HMMA. :func:`gemm_path_fields` gives the
per-copy constants it was written for (not merged by calibrate: the rows do not show a per-copy wait);
:func:`copy_straddle_fields` gives ``ldgsts16_straddle_cycles_per_sector`` (merged by calibrate). About 28 rows, a few seconds of GPU time.

Group ``gemm_bcol`` (:data:`GB_CONFIGS`, section ``gemm_bcol``, kernels ``mfgb_*`` and ``mfgt_gemm_k2``): the suite's
``mma_fp16_Bcol_128x256x32_w64x64_swz_s4`` k-step (issue #9: in situ its fragments + MMAs take ~190 cycles more
than the engine, which matches mfgt_gemm_k2) rebuilt from mfgt_gemm_k2 one difference at a time, 8 warps x 1
block, L2-resident 2048^3 data: B copied N x K (every warp cp.async then covers 8 rows x 64 bytes, 8 half
lines, where a K x N B copy covers one 512-byte row, 4 lines: ``ldgsts_lines_computed``), B fragments by
non-transposed ldmatrix of an N x K tile, fragments read from the copy ring's slot (tc_gemm's compute_mma), the
Brow counterpart, and ``gb_bcol_ring0``: the copy ring at the start of dynamic shared memory as tc_gemm's (its
generic address is then the extern __shared__ symbol's: ptxas redoes it every k-step with two S2UR, puts
LDGDEPBAR right after the copies and 12 LDSM before the first HMMA, the suite kernel's SASS loop); cycles per k-step (median block) per row, the hot loop's SASS order, and the suite
kernel itself on one wave (``gb_suite_1wave``: tc_gemm.cu with TC_PARTS on 1408 x 3072 x 3072, one block per
SM, validation/studies/tc_step_parts.py's parts). Prints one JSON line of the rows' cycles per k-step.
About 12 s of GPU time plus the compile.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from validation.calibration import probe_common as pc
from validation.calibration.probe_common import REPO_ROOT, RESULTS_ROOT, count_prefix, summarize
from validation.calibration.probe_common import gpu_missing as _gpu_missing

KERNEL_SRC = Path(__file__).resolve().with_suffix(".cu")
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


# ----- groups gemm_traffic(_w4): configurations (must match the MF_GT_* of mma_feed_probe.cu) ----------
SWEEP_GROUP = "sweep"
GT_GROUP = "gemm_traffic"
GT_W4_GROUP = "gemm_traffic_w4"  # rows in the gemm_traffic section too, beside GT_GROUP's
GT_RAGGED_GROUP = "gemm_traffic_ragged"  # ditto
GROUPS = (SWEEP_GROUP, GT_GROUP, GT_W4_GROUP, GT_RAGGED_GROUP, "gemm_path", "gemm_bcol")
GT_CSTAGES = 4  # MF_GT_CSTAGES: copy ring stages of the 8-warp kernels (tc_gemm's 4-stage configuration)
GT_MODES = ("none", "commit", "zfill", "copy", "gemm", "gemm_pad")  # MF_GT_NONE .. MF_GT_GEMM_PAD
GT_LOAD_TILE_MODES = ("gemm", "gemm_pad")  # tc_gemm's load_tile (bk 32 only)
GT_WM = GT_WN = 64  # warp tile of the mfgt kernels (MfGeom<64, 64, warps>)
GT_WARPS = 8  # the gemm_traffic group's geometry: 8 warps, 1 block per SM
GT_BM, GT_BN = WARPS_M * GT_WM, (GT_WARPS // WARPS_M) * GT_WN  # 128 x 256: the tc_gemm block tile
GT_MMA_PER_SLICE = (GT_WM // 16) * (GT_WN // 8)  # 32 m16n8k16 per warp per slice
GT_LDSM_PER_SLICE = GT_WM // 16 + GT_WN // 16  # 8 ldmatrix.x4 per warp per slice
CHUNK_BYTES = 16  # one cp.async.cg copy (PTX ISA, cp.async: cp-size 16 for .cg)
SECTOR_BYTES, LINE_BYTES = 32, 128  # L2 sector and cache line (CUDA guide, global memory accesses)
GT_L2_MNK = 2048  # M = N = K of the L2-resident data: A + B = 16 MiB, a third of the H200's 50 MiB L2
GT_HBM_BYTES = 1 << 30  # the HBM-sized data: A + B at most 1 GiB (every block its own rows / columns)
GT_KT_LIMIT = 2**31 - 1  # shared_gemm's `nk < ktiles` guard, never false here
WAVEFRONT_BYTES = 128  # shared memory moves at most 128 bytes (32 banks x 4 bytes) per wavefront
LDSM_X4_WAVEFRONTS = 4  # ldmatrix.x4, conflict-free: one wavefront per 8x8 matrix (tensor_probe, commit 4dd232d)
SMEM_MAX_BLOCK_BYTES = 227 * 1024  # dynamic shared memory of one block at most (CUDA guide, cc 9.0)
SMEM_SM_BYTES = 228 * 1024  # shared memory of one SM (CUDA guide, cc 9.0) ...
SMEM_RESERVED_BLOCK_BYTES = 1024  # ... of which the system reserves 1 KiB per resident block (CUDA guide)
REGS_PER_SM = 65536  # 32-bit registers of one SM (CUDA guide, cc 9.0)
SMEM_FLOOR_BYTES = {1: SMEM_ONE_BLOCK_BYTES, 2: SMEM_TWO_BLOCKS_BYTES}  # asked for at least, per blocks/SM


def smem_blocks_per_sm(smem_bytes: int) -> int:
    """Blocks of ``smem_bytes`` dynamic shared memory one SM holds (shared memory alone)."""
    return SMEM_SM_BYTES // (smem_bytes + SMEM_RESERVED_BLOCK_BYTES)


@dataclass(frozen=True)
class TrafficConfig:
    """One gemm_traffic row: copy ``mode`` (GT_MODES), ``slices`` per k-step (= per barrier; bk = 16 x
    slices), ``data`` the copies read ("l2": 16 MiB reused, "hbm": 1 GiB, "": none), ``compute_stages`` of
    the ring ldmatrix reads (stage_mask + 1); the geometry: ``warps`` per block (64x64 warp tiles, block
    tile 128 x (warps / 2 x 64)), ``blocks_per_sm`` (__launch_bounds__ and the dynamic shared memory asked
    for) and ``copy_stages`` of the cp.async ring (wait_group(copy_stages - 2)); ``k_elems``: K of the L2
    data, the A rows' pitch in fp16 elements. ValueError naming the field when the kernel cannot be built or
    the blocks do not fit."""

    key: str
    mode: str
    slices: int
    data: str
    compute_stages: int
    note: str
    warps: int = GT_WARPS
    blocks_per_sm: int = 1
    copy_stages: int = GT_CSTAGES
    k_elems: int = GT_L2_MNK

    def __post_init__(self) -> None:
        def need(ok: bool, name: str, why: str) -> None:
            if not ok:
                raise ValueError(f"TrafficConfig {self.key}: {name} = {getattr(self, name)!r} {why}")

        need(self.mode in GT_MODES, "mode", f"must be one of {GT_MODES}")
        need(self.data in ("", "l2", "hbm"), "data", "must be '', 'l2' or 'hbm'")
        need(self.slices >= 1 and (self.mode not in GT_LOAD_TILE_MODES or self.slices == 2), "slices",
             "must be >= 1 (2 for gemm, gemm_pad)")
        need(self.k_elems % (CHUNK_BYTES // 2) == 0 and self.k_elems >= self.bk * self.copy_stages
             and (self.data in ("", "l2") or self.k_elems == GT_L2_MNK), "k_elems",
             "must be a multiple of 8 (16-byte chunks), hold a ring of k-steps, and stay 2048 for HBM data")
        need(self.warps >= WARPS_M and self.warps % WARPS_M == 0, "warps", f"must be a multiple of {WARPS_M}")
        need(self.copy_stages >= 2, "copy_stages", "must be >= 2 (a cp.async ring)")
        need(self.compute_stages >= 1 and self.compute_stages & (self.compute_stages - 1) == 0, "compute_stages",
             "must be a power of two (stage_mask = stages - 1)")
        need(self.blocks_per_sm in SMEM_FLOOR_BYTES, "blocks_per_sm", f"must be one of {tuple(SMEM_FLOOR_BYTES)}")
        need(self.smem_bytes <= SMEM_MAX_BLOCK_BYTES, "compute_stages", f"gives {self.smem_bytes} bytes a block")
        need(smem_blocks_per_sm(self.smem_bytes) == self.blocks_per_sm, "blocks_per_sm",
             f"but {smem_blocks_per_sm(self.smem_bytes)} blocks of {self.smem_bytes} bytes fit an SM")

    @property
    def geometry(self) -> str:
        """``w<warps>_b<blocks per SM>_c<copy stages>``: the kernel name's suffix (none for the 8-warp one)."""
        return f"w{self.warps}_b{self.blocks_per_sm}_c{self.copy_stages}"

    @property
    def kernel(self) -> str:
        default = (self.warps, self.blocks_per_sm, self.copy_stages) == (GT_WARPS, 1, GT_CSTAGES)
        return f"mfgt_{self.mode}_k{self.slices}" + ("" if default else f"_{self.geometry}")

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def block_tile(self) -> tuple[int, int]:
        return WARPS_M * GT_WM, (self.warps // WARPS_M) * GT_WN

    @property
    def bk(self) -> int:
        return SLICE_K * self.slices

    @property
    def copies_per_thread_ab(self) -> tuple[int, int]:
        """16-byte cp.async per thread per k-step of A (bm x bk) and of B (bk x bn); (0, 0) without copies."""
        bm, bn = self.block_tile
        per = CHUNK_BYTES * self.threads * (self.mode not in ("none", "commit"))
        return (bm * self.bk * 2 // per, self.bk * bn * 2 // per) if per else (0, 0)

    @property
    def copies_per_thread(self) -> int:
        """16-byte cp.async per thread per k-step (0 without copies)."""
        return sum(self.copies_per_thread_ab)

    @property
    def copy_stage_bytes(self) -> int:
        """One slot of the copy ring: dense tiles, or tc_gemm's padded rows (A bm rows, B bk rows, one more
        16-byte chunk each) for gemm_pad."""
        bm, bn = self.block_tile
        if self.mode == "gemm_pad":
            return (bm * (self.bk * 2 // CHUNK_BYTES + 1) + self.bk * (bn * 2 // CHUNK_BYTES + 1)) * CHUNK_BYTES
        return (bm + bn) * self.bk * 2

    def copy_sectors_lines_per_kstep(self) -> dict:
        """Distinct 32-byte sectors and 128-byte lines the block's copies touch per k-step (per warp
        instruction, as the L1 splits a request; summed over the k-step's instructions and averaged over the
        k-steps before k wraps), for A (rows of bk halves at a pitch of ``k_elems``) and B (bk rows of bn
        halves at a pitch of 2048); computed from the addresses, not measured. Zeros without copies."""
        out = {"a_sectors": 0.0, "a_lines": 0.0, "b_sectors": 0.0, "b_lines": 0.0}
        if self.mode in ("none", "commit", "zfill"):
            return out
        bm, bn = self.block_tile
        steps = self.k_elems // self.bk
        for name, rows, row_elems, pitch, k_bytes in (("a", bm, self.bk, self.k_elems, self.bk * 2),
                                                      ("b", self.bk, bn, GT_L2_MNK, self.bk * GT_L2_MNK * 2)):
            per_row = row_elems * 2 // CHUNK_BYTES
            chunks = rows * per_row
            sectors = lines = 0
            for ks in range(steps):
                for w0 in range(0, chunks, 32):
                    addrs = [(i // per_row) * pitch * 2 + (i % per_row) * CHUNK_BYTES + ks * k_bytes
                             for i in range(w0, min(w0 + 32, chunks))]
                    sectors += len({(a + o) // SECTOR_BYTES for a in addrs for o in (0, CHUNK_BYTES - 1)})
                    lines += len({(a + o) // LINE_BYTES for a in addrs for o in (0, CHUNK_BYTES - 1)})
            out[f"{name}_sectors"], out[f"{name}_lines"] = sectors / steps, lines / steps
        return out

    @property
    def compute_stage_bytes(self) -> int:
        """One stage of the ring ldmatrix reads (MfGeom: bk 32)."""
        return sum(self.block_tile) * BK * 2

    @property
    def smem_data_bytes(self) -> int:
        """The compute ring and the copy ring (every mode asks for both: the same shared memory a block)."""
        return self.compute_stages * self.compute_stage_bytes + self.copy_stages * self.copy_stage_bytes

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory asked for: the rings, at least SMEM_FLOOR_BYTES[blocks_per_sm] so that
        no more than ``blocks_per_sm`` blocks fit an SM."""
        return max(self.smem_data_bytes, SMEM_FLOOR_BYTES.get(self.blocks_per_sm, 0))

    @property
    def global_bytes_per_kstep(self) -> int:
        """Bytes read from global memory per block per k-step (zero fill reads none)."""
        return 0 if self.mode == "zfill" else self.copies_per_thread * self.threads * CHUNK_BYTES

    @property
    def hmma_per_kstep(self) -> int:
        """m16n8k16 per block per k-step."""
        return self.warps * self.slices * GT_MMA_PER_SLICE

    def smem_wavefronts_per_kstep(self) -> dict:
        """Computed (not measured), per block per k-step: ldmatrix.x4 one wavefront per 8x8 matrix, a warp's
        16-byte cp.async writes (512 bytes, conflict-free) 512 / 128 wavefronts."""
        ldsm = self.warps * self.slices * GT_LDSM_PER_SLICE * LDSM_X4_WAVEFRONTS
        cp = self.warps * self.copies_per_thread * (32 * CHUNK_BYTES // WAVEFRONT_BYTES)
        return {"ldmatrix": ldsm, "cp_async_writes": cp, "total": ldsm + cp}


GT_CONFIGS = (
    TrafficConfig("gt_none_k2", "none", 2, "", 4, "control: the s2_d0_l1 loop, no copies, no cp.async"),
    TrafficConfig("gt_commit_k2", "commit", 2, "", 4, "commit_group + wait_group(2) only (empty groups)"),
    TrafficConfig("gt_zfill_k2", "zfill", 2, "l2", 4, "6 copies/thread with src-size 0 (zero fill)"),
    TrafficConfig("gt_copy_l2_k2", "copy", 2, "l2", 4, "(a) 6 x 16-byte cp.async.cg/thread, 16 MiB L2 data"),
    TrafficConfig("gt_gemm_l2_k2", "gemm", 2, "l2", 4, "(b) tc_gemm's load_tile code, 16 MiB L2 data"),
    TrafficConfig("gt_copy_hbm_k2", "copy", 2, "hbm", 4, "(c) as (a) from 1 GiB (HBM)"),
    TrafficConfig("gt_gemm_hbm_k2", "gemm", 2, "hbm", 4, "(b) from 1 GiB (HBM)"),
    TrafficConfig("gt_none_k3", "none", 3, "", 2, "control for (d): 3 slices per barrier, 2-stage ldmatrix ring"),
    TrafficConfig("gt_copy_l2_k3", "copy", 3, "l2", 2, "(d) bk 48: 9 copies/thread, 3 slices per barrier"),
)


def _w4_rows(blocks: int) -> tuple[TrafficConfig, ...]:
    """The suite's 4-warp mma.sync GEMM (128x128x32, 64x64 warps, 3-stage ring) at ``blocks`` per SM: 4 + 4
    copies per thread per k-step; a 4-stage ldmatrix ring (4 x 16 KiB + 3 x 16 KiB = 112 KiB a block)."""
    g = {"warps": 4, "blocks_per_sm": blocks, "copy_stages": 3}
    why = "2 blocks share an SM, as the suite runs" if blocks == 2 else "1 block per SM (shared memory): the control"
    p = f"gt_w4b{blocks}_"
    return (
        TrafficConfig(p + "none_k2", "none", 2, "", 4, f"control, no copies; {why}", **g),
        TrafficConfig(p + "copy_l2_k2", "copy", 2, "l2", 4, "8 x 16-byte cp.async.cg/thread, 16 MiB L2 data", **g),
        TrafficConfig(p + "gemm_l2_k2", "gemm", 2, "l2", 4, "tc_gemm's load_tile (128x128x32, s3), 16 MiB L2", **g),
        TrafficConfig(p + "copy_hbm_k2", "copy", 2, "hbm", 4, "as copy_l2 from 1 GiB (HBM)", **g),
        TrafficConfig(p + "gemm_hbm_k2", "gemm", 2, "hbm", 4, "as gemm_l2 from 1 GiB (HBM)", **g),
    )


GT_W4_CONFIGS = _w4_rows(2) + _w4_rows(1)
GT_RAGGED_K = (2048, 2008, 2032)  # A pitch 4096 B (aligned), 4016 B (the suite's K = 2008), 4064 B (sector-aligned)


def _ragged_rows() -> tuple[TrafficConfig, ...]:
    """The suite's 128x128x32 s3 mma.sync GEMM at 2 blocks per SM, copies from L2 data of A pitch K for each
    of GT_RAGGED_K (modes copy and gemm), the padded layout's load_tile (gemm_pad) on aligned data, and the
    control; at 1 block per SM the control and gemm at K = 2048 and 2008; a 2-stage ldmatrix ring (2 x 16
    KiB + 3 copy slots of 16 KiB, or 18.5 KiB padded, a block)."""
    g = {"warps": 4, "blocks_per_sm": 2, "copy_stages": 3}
    why = {2048: "aligned rows (4096 B)", 2008: "the suite's K = 2008: rows of 4016 B, every other one from "
           "mid-sector", 2032: "rows of 4064 B: sector-aligned, a quarter of the k-slabs across a line"}
    rows = [TrafficConfig("gt_w4b2r_none_k2", "none", 2, "", 2, "control, no copies", **g)]
    for mode, what in (("copy", "8 x 16-byte cp.async.cg/thread"), ("gemm", "tc_gemm's load_tile (swizzled)")):
        rows += [TrafficConfig(f"gt_w4b2r_{mode}_l2_k2_K{k}", mode, 2, "l2", 2, f"{what}; {why[k]}", k_elems=k, **g)
                 for k in GT_RAGGED_K]
    rows.append(TrafficConfig("gt_w4b2r_gemm_pad_l2_k2_K2048", "gemm_pad", 2, "l2", 2,
                              "tc_gemm's load_tile into the padded layout; aligned rows", **g))
    # 1 block per SM: half the L2 demand, so that a cost on the SM's side shows apart from the L2's
    g1 = {**g, "blocks_per_sm": 1}
    rows.append(TrafficConfig("gt_w4b1r_none_k2", "none", 2, "", 2, "control, 1 block per SM", **g1))
    rows += [TrafficConfig(f"gt_w4b1r_gemm_l2_k2_K{k}", "gemm", 2, "l2", 2, f"1 block per SM; {why[k]}", k_elems=k,
                           **g1) for k in (2048, 2008)]
    return tuple(rows)


GT_RAGGED_CONFIGS = _ragged_rows()
GT_GROUP_CONFIGS = {GT_GROUP: GT_CONFIGS, GT_W4_GROUP: GT_W4_CONFIGS, GT_RAGGED_GROUP: GT_RAGGED_CONFIGS}


def gt_problem(data: str, blocks: int, bk: int = BK, block_tile: tuple[int, int] = (GT_BM, GT_BN),
               k_elems: int = GT_L2_MNK) -> dict:
    """The matrices and per-block tile origins a gemm_traffic row copies from: ``m``, ``n``, ``k`` (fp16
    elements), ``m0``/``n0`` lists (one per block of the grid, ``blocks`` of them), ``bytes`` of A + B.
    "l2" (and "", whose copies read nothing): 2048 x 2048 x ``k_elems``, blocks on the GEMM's grid of
    ``block_tile`` tiles (128x256: 16 x 8), x over N first; "hbm": every block its own bm rows of A and bn
    columns of B, K the largest multiple of ``bk`` with A + B <= 1 GiB. ValueError for another ``data``,
    blocks < 1 or another ``k_elems`` with HBM data."""
    if blocks < 1:
        raise ValueError(f"blocks = {blocks}: must be >= 1")
    if data == "hbm" and k_elems != GT_L2_MNK:
        raise ValueError(f"k_elems = {k_elems}: HBM data sets its own K")
    bm, bn = block_tile
    if data in ("", "l2"):
        m = n = GT_L2_MNK
        k = k_elems
        tiles_m, tiles_n = GT_L2_MNK // bm, GT_L2_MNK // bn
        m0 = [((b // tiles_n) % tiles_m) * bm for b in range(blocks)]
        n0 = [(b % tiles_n) * bn for b in range(blocks)]
    elif data == "hbm":
        m, n = blocks * bm, blocks * bn
        k = GT_HBM_BYTES // ((m + n) * 2) // bk * bk
        m0 = [b * bm for b in range(blocks)]
        n0 = [b * bn for b in range(blocks)]
    else:
        raise ValueError(f"data = {data!r}: must be '', 'l2' or 'hbm'")
    return {"m": m, "n": n, "k": k, "m0": m0, "n0": n0, "bytes": (m * k + k * n) * 2}


# ----- group gemm_path: the k-step's post-barrier critical path, per warp (must match MF_GP_* of the .cu) --
GP_GROUP = "gemm_path"
GP_REC = 8  # MF_GP_REC: longs per stamped k-step and warp
GP_EVERY = 16  # MF_GP_EVERY: every 16th k-step is stamped
GP_MAXREC = 128  # MF_GP_MAXREC: stamped k-steps kept per warp
GP_ORDERS = ("copy", "ldsm")  # MF_GP_COPY_FIRST 0, MF_GP_LDSM_FIRST 1: the kernel name's <order>
#: the stamp record's spans (cycles) in order, then t0 and the k-step index
GP_SPANS = ("depbar_wait", "barrier", "barrier_to_copies_issued", "copies_issued_to_first_hmma",
            "first_to_last_hmma", "kstep")
GP_GEOMETRIES = {"w8b1": (8, 1, 4), "w4b2": (4, 2, 3), "w4b1": (4, 1, 3)}  # warps, blocks/SM, copy stages


@dataclass(frozen=True)
class PathConfig:
    """One gemm_path row: ``geometry`` (GP_GEOMETRIES: 8 warps x 1 block, 128x256 tiles, 4-stage ring; 4
    warps x 2 or 1 blocks, 128x128, 3 stages), ``order`` ("copy": tc_gemm's copies, then slice 0; "ldsm":
    slice 0's fragments and MMAs before the copies), ``real`` copies per thread that read data (the first
    ``real`` of A_IT + B_IT, A first; the rest zero-fill), ``data`` ("l2": 2048 x ``n_elems`` x ``k_elems``,
    L2-resident; "hbm": 1 GiB, every block its own tiles), ``bcol`` (B stored N x K), ``k_elems`` (A's
    pitch, and B's when ``bcol``), ``n_elems`` (B's pitch when row-major). ValueError naming the field."""

    key: str
    geometry: str
    order: str
    real: int
    data: str = "l2"
    bcol: bool = False
    k_elems: int = GT_L2_MNK
    n_elems: int = GT_L2_MNK
    note: str = ""

    def __post_init__(self) -> None:
        def need(ok: bool, name: str, why: str) -> None:
            if not ok:
                raise ValueError(f"PathConfig {self.key}: {name} = {getattr(self, name)!r} {why}")

        need(self.geometry in GP_GEOMETRIES, "geometry", f"must be one of {tuple(GP_GEOMETRIES)}")
        need(self.order in GP_ORDERS, "order", f"must be one of {GP_ORDERS}")
        need(self.data in ("l2", "hbm"), "data", "must be 'l2' or 'hbm'")
        need(0 <= self.real <= self.copies_per_thread, "real", f"must be 0..{self.copies_per_thread}")
        need(self.k_elems % 8 == 0 and self.k_elems >= BK * self.copy_stages
             and (self.data == "l2" or self.k_elems == GT_L2_MNK), "k_elems",
             "must be a multiple of 8, hold the ring, and stay 2048 for HBM data")
        need(self.n_elems % 8 == 0 and self.n_elems >= self.block_tile[1]
             and (self.data == "l2" or self.n_elems == GT_L2_MNK), "n_elems",
             "must be a multiple of 8, hold a tile, and stay 2048 for HBM data")
        need(smem_blocks_per_sm(self.smem_bytes) == self.blocks_per_sm, "geometry",
             f"but {smem_blocks_per_sm(self.smem_bytes)} blocks of {self.smem_bytes} bytes fit an SM")

    @property
    def warps(self) -> int:
        return GP_GEOMETRIES[self.geometry][0]

    @property
    def blocks_per_sm(self) -> int:
        return GP_GEOMETRIES[self.geometry][1]

    @property
    def copy_stages(self) -> int:
        return GP_GEOMETRIES[self.geometry][2]

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def block_tile(self) -> tuple[int, int]:
        return WARPS_M * GT_WM, (self.warps // WARPS_M) * GT_WN

    @property
    def kernel(self) -> str:
        return (f"mfgp_{self.order}_w{self.warps}_b{self.blocks_per_sm}_c{self.copy_stages}_"
                f"{'bcol' if self.bcol else 'brow'}")

    @property
    def copies_per_thread_ab(self) -> tuple[int, int]:
        bm, bn = self.block_tile
        per = CHUNK_BYTES * self.threads
        return bm * BK * 2 // per, BK * bn * 2 // per

    @property
    def copies_per_thread(self) -> int:
        return sum(self.copies_per_thread_ab)

    @property
    def warp_copies_per_sm(self) -> int:
        """Warp cp.async instructions with data per SM per k-step (all blocks of the SM)."""
        return self.real * self.warps * self.blocks_per_sm

    @property
    def stage_bytes(self) -> int:
        return sum(self.block_tile) * BK * 2

    @property
    def smem_bytes(self) -> int:
        """A 4-stage compute ring and the copy ring, at least SMEM_FLOOR_BYTES[blocks per SM]."""
        return max(STAGES * self.stage_bytes + self.copy_stages * self.stage_bytes,
                   SMEM_FLOOR_BYTES[self.blocks_per_sm])

    def copy_sectors_per_kstep(self) -> dict:
        """Per block and k-step, over the k-steps before k wraps (computed from the addresses): ``sectors``
        (distinct 32-byte sectors per warp instruction, summed; what the L1 requests), ``aligned`` (the
        sectors of the same bytes from sector-aligned rows: bytes / 32) and ``extra`` (their difference),
        counting only the ``real`` copies; ``lines`` likewise for 128-byte lines."""
        hbm = self.data == "hbm"
        steps = (GT_L2_MNK if hbm else self.k_elems) // BK
        sectors = lines = nbytes = 0
        for ks in range(min(steps, 64)):
            k0 = ks * BK
            for j in range(self.real):
                for w in range(self.warps):
                    addrs = self._warp_copy_addresses(k0, j, w)
                    sectors += len({(a + o) // SECTOR_BYTES for a in addrs for o in (0, CHUNK_BYTES - 1)})
                    lines += len({(a + o) // LINE_BYTES for a in addrs for o in (0, CHUNK_BYTES - 1)})
                    nbytes += 32 * CHUNK_BYTES
        nsteps = min(steps, 64)
        s, ln, al = sectors / nsteps, lines / nsteps, nbytes / nsteps / SECTOR_BYTES
        return {"sectors": s, "aligned": al, "extra": s - al, "lines": ln}

    def _warp_copy_addresses(self, k0: int, j: int, w: int) -> list[int]:
        """The byte addresses warp ``w``'s lanes copy in their ``j``-th 16-byte copy of the k-step at ``k0``
        (A first: 4 chunks a row at a pitch of ``k_elems``; then B: rows of bk (column-major) or bn halves)."""
        a_it, _ = self.copies_per_thread_ab
        k, n = self.k_elems, self.n_elems
        b_lc = BK // 8 if self.bcol else self.block_tile[1] // 8
        addrs = []
        for t in range(32 * w, 32 * w + 32):
            i = t + j * self.threads
            if j < a_it:
                r, c = divmod(i, 4)
                addrs.append((r * k + k0 + c * 8) * 2)
            else:
                r, c = divmod(i - a_it * self.threads, b_lc)
                addrs.append(((r * k + k0 + c * 8) if self.bcol else ((k0 + r) * n + c * 8)) * 2)
        return addrs

    def lines_beyond_per_kstep(self) -> float:
        """Per block and k-step, over the k-steps before k wraps: the global 128-byte lines the ``real``
        copies' warps read beyond the 4 shared lines each writes (512 contiguous bytes), summed: what
        ``ldgsts16_line_cycles`` is charged on (computed from the addresses)."""
        hbm = self.data == "hbm"
        steps = min((GT_L2_MNK if hbm else self.k_elems) // BK, 64)
        beyond = 0
        for ks in range(steps):
            for j in range(self.real):
                for w in range(self.warps):
                    addrs = self._warp_copy_addresses(ks * BK, j, w)
                    lines = {a // LINE_BYTES for a in addrs} | {(a + CHUNK_BYTES - 1) // LINE_BYTES for a in addrs}
                    beyond += max(0, len(lines) - 32 * CHUNK_BYTES // LINE_BYTES)
        return beyond / steps

    def received_sectors_per_kstep(self, group_lanes: int) -> dict:
        """Per block and k-step, over the k-steps before k wraps (computed from the addresses, as
        :meth:`copy_sectors_per_kstep`): ``received``, the sectors the SM receives for the ``real`` copies
        when the L1 fetches each group of ``group_lanes`` consecutive lanes' sectors on its own
        (tilesim.cost.access.grouped_sectors; the H200's group is a lane pair, ldgsts16_sector_group_lanes),
        ``aligned`` (bytes / 32) and ``extra`` (their difference: the sectors that lane groups straddling
        a sector boundary add)."""
        from tilesim.cost.access import grouped_sectors  # noqa: PLC0415

        hbm = self.data == "hbm"
        steps = min((GT_L2_MNK if hbm else self.k_elems) // BK, 64)
        received = 0
        for ks in range(steps):
            k0 = ks * BK
            for j in range(self.real):
                for w in range(self.warps):
                    addrs = self._warp_copy_addresses(k0, j, w)
                    received += grouped_sectors(addrs, CHUNK_BYTES, group_lanes, SECTOR_BYTES)
        rec_ = received / steps
        aligned = self.real * self.warps * 32 * CHUNK_BYTES / SECTOR_BYTES
        return {"received": rec_, "aligned": aligned, "extra": rec_ - aligned}


def _gp_rows() -> tuple[PathConfig, ...]:
    """The gemm_path rows (see the module docstring)."""
    rows = []
    for g, full in (("w8b1", 6), ("w4b2", 8)):
        for real in range(0, full + 1, 2 if g == "w8b1" else 4):
            rows.append(PathConfig(f"gp_{g}_l2_copy_r{real}", g, "copy", real,
                                   note=f"{real} of {full} copies a thread with data (rest zero-fill), aligned L2"))
        rows += [PathConfig(f"gp_{g}_l2_ldsm_r0", g, "ldsm", 0, note="fragments first, zero-fill copies"),
                 PathConfig(f"gp_{g}_l2_ldsm_r{full}", g, "ldsm", full, note="fragments first, aligned L2"),
                 PathConfig(f"gp_{g}_hbm_copy_r{full}", g, "copy", full, "hbm", note="1 GiB streamed (HBM)"),
                 PathConfig(f"gp_{g}_hbm_ldsm_r{full}", g, "ldsm", full, "hbm", note="fragments first, HBM"),
                 PathConfig(f"gp_{g}_K2008a_copy_r{full}", g, "copy", full, k_elems=2008,
                            note="A rows of 4016 B (every other one from mid-sector)"),
                 PathConfig(f"gp_{g}_bcolK2048_copy_r{full}", g, "copy", full, bcol=True,
                            note="B stored N x K, aligned rows (control for K2008ab)"),
                 PathConfig(f"gp_{g}_K2008ab_copy_r{full}", g, "copy", full, bcol=True, k_elems=2008,
                            note="A and B (N x K) rows of 4016 B: the suite's Bcol shape")]
    rows += [PathConfig("gp_w8b1_K2008ab_ldsm_r6", "w8b1", "ldsm", 6, bcol=True, k_elems=2008,
                        note="fragments first, A and B rows mid-sector"),
             PathConfig("gp_w8b1_N4000_copy_r6", "w8b1", "copy", 6, n_elems=4000,
                        note="B pitch 8000 B (sector-, not line-aligned): the suite's Brow shape"),
             PathConfig("gp_w4b2_N4000_copy_r8", "w4b2", "copy", 8, n_elems=4000, note="B pitch 8000 B")]
    # 1 block of 4 warps per SM: the same code as w4b2 without a co-resident block
    rows += [PathConfig("gp_w4b1_l2_copy_r0", "w4b1", "copy", 0, note="zero-fill, no co-resident block"),
             PathConfig("gp_w4b1_l2_copy_r8", "w4b1", "copy", 8, note="aligned L2, no co-resident block"),
             PathConfig("gp_w4b1_hbm_copy_r8", "w4b1", "copy", 8, "hbm", note="HBM, no co-resident block"),
             PathConfig("gp_w4b1_K2008a_copy_r8", "w4b1", "copy", 8, k_elems=2008,
                        note="A mid-sector, no co-resident block")]
    return tuple(rows)


GP_CONFIGS = _gp_rows()


def gp_problem(pc_: PathConfig, blocks: int) -> dict:
    """The matrices a gemm_path row copies from: as :func:`gt_problem` ("l2": 2048 x ``n_elems`` x
    ``k_elems``, blocks on the tile grid; "hbm": 1 GiB, every block its own tiles)."""
    if pc_.data == "hbm":
        return gt_problem("hbm", blocks, BK, pc_.block_tile)
    bm, bn = pc_.block_tile
    m, n, k = GT_L2_MNK, pc_.n_elems, pc_.k_elems
    tiles_m, tiles_n = m // bm, n // bn
    return {"m": m, "n": n, "k": k, "m0": [((b // tiles_n) % tiles_m) * bm for b in range(blocks)],
            "n0": [(b % tiles_n) * bn for b in range(blocks)], "bytes": (m * k + k * n) * 2}


def parse_stamps(raw: Sequence[int], warps_total: int, nrec: int) -> dict:
    """The per-warp stamp records (GP_MAXREC slots of GP_REC longs per warp, the first ``nrec`` of each
    written) -> {span: [cycles, ...]} for GP_SPANS, one value per warp and stamped k-step; ValueError when
    the count is wrong or a written record holds a negative span."""
    vals = [int(v) for v in raw]
    if len(vals) != warps_total * GP_MAXREC * GP_REC or not 0 <= nrec <= GP_MAXREC:
        raise ValueError(f"stamps: {len(vals)} values for {warps_total} warps, nrec = {nrec}")
    out: dict[str, list[int]] = {s: [] for s in GP_SPANS}
    for w in range(warps_total):
        for r in range(nrec):
            rec = vals[(w * GP_MAXREC + r) * GP_REC:(w * GP_MAXREC + r + 1) * GP_REC]
            if min(rec[:6]) < 0:
                raise ValueError(f"stamps: warp {w} record {r} has a negative span {rec[:6]}")
            for s, v in zip(GP_SPANS, rec[:6], strict=True):
                out[s].append(v)
    return out


def path_metrics(pc_: PathConfig, rec: dict, stamps: dict, iters: int) -> dict:
    """One rep of a gemm_path row: the block-level cycles per k-step (median block) and, per span of
    GP_SPANS, the median / p10 / p90 over warps and stamped k-steps."""
    if iters < 1:
        raise ValueError(f"iters = {iters}: must be >= 1")
    return {"cycles_per_kstep": rec["cycles_median"] / iters, "clock_hz": rec["clock_hz"],
            "max_coresident": rec["max_coresident"], "distinct_sms": rec["distinct_sms"],
            "spans": {s: summarize(v) for s, v in stamps.items() if v}}


def summarize_path(pc_: PathConfig, runs: list[dict]) -> dict:
    """The JSON row of one gemm_path configuration: per span the median over reps of the reps' median,
    p10 and p90 (``value``/``p10``/``p90``, cycles) and the reps' medians (``rep_medians``); the block
    k-step (``cycles_per_kstep``) and the clock; the row's geometry and computed sectors."""
    spans = {}
    for s in GP_SPANS:
        reps = [r["spans"][s] for r in runs if s in r["spans"]]
        if reps:
            spans[s] = {"value": pc.median([x["value"] for x in reps]), "p10": pc.median([x["p10"] for x in reps]),
                        "p90": pc.median([x["p90"] for x in reps]), "n": sum(x["n"] for x in reps),
                        "rep_medians": [x["value"] for x in reps]}
    return {"kernel": pc_.kernel, "geometry": pc_.geometry, "order": pc_.order, "note": pc_.note,
            "warps_per_block": pc_.warps, "blocks_per_sm": pc_.blocks_per_sm, "copy_ring_stages": pc_.copy_stages,
            "block_tile": list(pc_.block_tile), "data": pc_.data, "b_layout": "n_x_k" if pc_.bcol else "k_x_n",
            "k_elems": pc_.k_elems, "n_elems": pc_.n_elems, "copies_per_thread": pc_.copies_per_thread,
            "real_copies_per_thread": pc_.real, "warp_copies_per_sm_per_kstep": pc_.warp_copies_per_sm,
            "copy_sectors_per_kstep_computed": pc_.copy_sectors_per_kstep(), "smem_bytes": pc_.smem_bytes,
            "spans": spans, "cycles_per_kstep": summarize([r["cycles_per_kstep"] for r in runs]),
            "clock_hz": summarize([r["clock_hz"] for r in runs])["value"],
            "blocks_per_sm_seen": max(r["max_coresident"] for r in runs),
            "distinct_sms": min(r["distinct_sms"] for r in runs), "runs": runs}


# ----- group gemm_bcol: the suite's Bcol k-step against mfgt_gemm_k2 (must match MF_GB_* of the .cu) --------
GB_GROUP = "gemm_bcol"
GB_READS = ("fixed_brow", "fixed_bcol", "ring", "ring0")  # MF_GB_FIXED_BROW, MF_GB_FIXED_BCOL, MF_GB_RING, MF_GB_RING0
#: the suite kernel itself on one wave (one 128x256 block per SM: 11 x 12 tiles), L2-sized operands
GB_SUITE_SHAPE = (11 * GT_BM, 12 * GT_BN, 3072)
GB_SUITE_LABEL = "mma_fp16_Bcol_128x256x32_w64x64_swz_s4"


@dataclass(frozen=True)
class BcolConfig:
    """One gemm_bcol row: ``kernel`` (mfgb_* of the .cu, or mfgt_gemm_k2), the copies' B layout (``bcol``:
    B stored N x K) and where the fragments come from (``read``, GB_READS). 8 warps, 1 block per SM, the
    128x256x32 4-stage ring of mfgt_gemm_k2, L2-resident 2048^3 data on the tile grid."""

    key: str
    kernel: str
    bcol: bool
    read: str
    note: str

    def __post_init__(self) -> None:
        if self.read not in GB_READS:
            raise ValueError(f"BcolConfig {self.key}: read = {self.read!r} must be one of {GB_READS}")

    @property
    def traffic(self) -> TrafficConfig:
        """The gemm_traffic row of the same geometry and data (its smem, copies, HMMA per k-step)."""
        return TrafficConfig(self.key, "gemm", 2, "l2", STAGES, self.note)

    def ldgsts_lines(self, warp: int = 0, k0: int = 0) -> dict:
        """Per warp cp.async of the k-step (A_IT A copies, then B_IT B ones, tc_gemm's load_tile lane map):
        the distinct 128-byte global lines (``global_lines``) and 128-byte shared-memory lines
        (``smem_lines``, the swizzled destination) its 32 lanes touch, and their means over the thread's
        copies (computed from the addresses; data 2048^3, tile origin 0)."""
        threads, bn, k, n = 32 * GT_WARPS, GT_BN, GT_L2_MNK, GT_L2_MNK
        a_it = GT_BM * 4 // threads
        b_rows, b_lc = (bn, 4) if self.bcol else (BK, bn // 8)
        b_it = b_rows * b_lc // threads
        a_elems = GT_BM * 4 * 8

        def swz(r: int, c: int, lc: int) -> int:  # mfgt::chunk_off<SWIZZLED, lc, 8> in chunks
            rpg, m = (1, 7) if lc >= 8 else (8 // lc, lc - 1)
            return r * lc + (c ^ ((r // rpg) & m))

        glob, shr = [], []
        for j in range(a_it + b_it):
            g, s_ = set(), set()
            for t in range(32 * warp, 32 * warp + 32):
                if j < a_it:
                    r, c = divmod(t + j * threads, 4)
                    ga, sa = (r * k + k0 + c * 8) * 2, swz(r, c, 4) * CHUNK_BYTES
                else:
                    r, c = divmod(t + (j - a_it) * threads, b_lc)
                    ga = ((r * k + k0 + c * 8) if self.bcol else ((k0 + r) * n + c * 8)) * 2
                    sa = a_elems * 2 + swz(r, c, b_lc) * CHUNK_BYTES
                g.add(ga // LINE_BYTES)
                s_.add(sa // LINE_BYTES)
            glob.append(len(g))
            shr.append(len(s_))
        return {"global_lines": glob, "smem_lines": shr, "global_lines_mean": sum(glob) / len(glob),
                "smem_lines_mean": sum(shr) / len(shr)}


GB_CONFIGS = (
    BcolConfig("gb_gt_gemm", "mfgt_gemm_k2", False, "fixed_brow", "mfgt_gemm_k2 as in gemm_traffic (gt_gemm_l2_k2)"),
    BcolConfig("gb_brow_fixed", "mfgb_brow_fixed", False, "fixed_brow",
               "the same loop in mf_gb_body: B K x N copies, fixed ring, B by ldmatrix.trans"),
    BcolConfig("gb_bcol_fixed", "mfgb_bcol_fixed", True, "fixed_brow",
               "+ the suite's B N x K copies (every warp copy 8 rows x 64 B), fixed ring as before"),
    BcolConfig("gb_bcol_fixedcol", "mfgb_bcol_fixedcol", True, "fixed_bcol",
               "+ B fragments by non-transposed ldmatrix of an N x K tile (fixed ring)"),
    BcolConfig("gb_bcol_ring", "mfgb_bcol_ring", True, "ring",
               "+ fragments from the copy ring's slot (compute_mma): the suite's Bcol loop"),
    BcolConfig("gb_brow_ring", "mfgb_brow_ring", False, "ring",
               "B K x N copies, fragments from the copy ring: the suite's Brow loop"),
    BcolConfig("gb_bcol_ring0", "mfgb_bcol_ring0", True, "ring0",
               "gb_bcol_ring with the copy ring at the dynamic shared symbol (tc_gemm's ring = smem): ptxas "
               "redoes the ring's generic address (S2UR SR_CgaCtaId, SR_SWINHI) every k-step, LDGDEPBAR right "
               "after the copies, 12 LDSM before the first HMMA: the suite kernel's SASS loop"),
)


def summarize_bcol(bc: BcolConfig, runs: list[dict]) -> dict:
    """The JSON row of one gemm_bcol configuration (compact: per-rep cycles only)."""
    tc = bc.traffic
    return {"kernel": bc.kernel, "note": bc.note, "b_layout": "n_x_k" if bc.bcol else "k_x_n", "read": bc.read,
            "data": "l2", "k_elems": GT_L2_MNK, "copies_per_thread_per_kstep": tc.copies_per_thread,
            "hmma_per_kstep_block": tc.hmma_per_kstep, "ldgsts_lines_computed": bc.ldgsts_lines(),
            "cycles_per_kstep": summarize([r["cycles_per_kstep"] for r in runs]),
            "cycles_per_kstep_reps": [round(r["cycles_per_kstep"], 2) for r in runs],
            "hmma_per_clk_sm": summarize([r["hmma_per_clk_sm"] for r in runs]),
            "clock_hz": summarize([r["clock_hz"] for r in runs])["value"],
            "blocks_per_sm_seen": max(r["max_coresident"] for r in runs),
            "distinct_sms": min(r["distinct_sms"] for r in runs)}


def check_bcol_sass(bc: BcolConfig, s: dict) -> dict:
    """The hot loop's counts per k-step (HMMA 64, LDSM 16, of them .trans 8 where B is read K x N, LDGSTS 6,
    BAR, DEPBAR, LDGDEPBAR 1; S2UR 2 for read ``ring0``, the ring's generic address redone, else 0) and its
    order; ``ok`` when they hold (times a whole unroll)."""
    if not s.get("ok"):
        return s
    hist = Counter(s["histogram"])
    trans = sum(v for k_, v in hist.items() if k_.startswith("LDSM") and ".MT88" in k_)
    read_col = bc.read == "fixed_bcol" or (bc.read in ("ring", "ring0") and bc.bcol)
    unroll = s["hmma"] / (2 * GT_MMA_PER_SLICE)
    want = {"ldsm": 2 * GT_LDSM_PER_SLICE, "ldsm_trans": 0 if read_col else 2 * (GT_WN // 16),
            "bar": 1, "ldgsts": 6, "depbar": 1, "ldgdepbar": 1, "s2ur": 2 if bc.read == "ring0" else 0}
    have = {"ldsm": s["ldsm"], "ldsm_trans": trans, "bar": s["bar"], "ldgsts": count_prefix(hist, "LDGSTS"),
            "depbar": count_prefix(hist, "DEPBAR"), "ldgdepbar": count_prefix(hist, "LDGDEPBAR"),
            "s2ur": count_prefix(hist, "S2UR")}
    bad = [f"{k_} {have[k_]} != {want[k_] * unroll:g}" for k_ in want if have[k_] != want[k_] * unroll]
    ok = unroll == int(unroll) and unroll >= 1 and not bad
    return {"ok": ok, "problem": "" if ok else "; ".join(bad), "instructions": s["instructions"],
            "order": s["order"], **have}


def gb_suite_config():
    """The suite configuration GB_SUITE_LABEL on GB_SUITE_SHAPE (one 128x256 block per SM on 132 SMs)."""
    from tilesim.kernels.tc_gemm.config import TcGemmConfig  # noqa: PLC0415

    m, n, k = GB_SUITE_SHAPE
    return TcGemmConfig(m=m, n=n, k=k, dtype="fp16", out_dtype="fp32", b_layout="col", instruction="mma_sync",
                        bm=128, bn=256, bk=32, wm=64, wn=64, layout="swizzled", stages=4, epilogue="direct")


def run_gb_suite(reps: int) -> dict:
    """The suite kernel itself (tc_gemm.cu with TC_PARTS, validation/studies/tc_step_parts.py) on one wave:
    thread 0's k-loop parts, cycles per k-step (median over blocks, then over reps); compact (no records)."""
    from validation.studies.tc_step_parts import trace_mma_config  # noqa: PLC0415

    cfg = gb_suite_config()
    r = trace_mma_config(cfg, reps=reps)
    out = {"label": GB_SUITE_LABEL, "shape": list(GB_SUITE_SHAPE), "status": r.get("status"),
           "message": r.get("message"), "note": "the suite kernel (TC_PARTS), 132 blocks: one wave; L2 flushed "
           "before each launch (tc_step_parts' timing)"}
    if r.get("status") == "ok":
        out.update(blocks=r["blocks"], ktiles=r["ktiles"], traced_s=r["traced_s"], plain_s=r["plain_s"],
                   parts_per_kstep=r["parts_per_kstep"])
    return out


def control_codes(sass: str, kernel: str) -> list[tuple[int, str, int, int, int]]:
    """(address, instruction text, read barrier, write barrier, wait mask) of every instruction of
    ``kernel`` in a listing with the encodings (``cuobjdump -sass`` or ``nvdisasm -hex``): the control bits
    of the second 64-bit word (bits 41+: stall 4, yield 1, write barrier 3, read barrier 3, wait mask 6;
    barrier 7 is none)."""
    lines = sass.splitlines()
    out, cur = [], None
    for i, line in enumerate(lines):
        f = re.match(r"^\s*Function : (\S+)", line) or re.match(r"^\.text\.(\S+):\s*$", line)
        if f:
            cur = f.group(1)
            continue
        if cur != kernel:
            continue
        m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s*/\* 0x[0-9a-f]+ \*/", line)
        if m and i + 1 < len(lines):
            hi = re.search(r"/\* (0x[0-9a-f]+) \*/", lines[i + 1])
            if hi:
                c = int(hi.group(1), 16) >> 41
                out.append((int(m.group(1), 16), m.group(2), (c >> 8) & 7, (c >> 5) & 7, (c >> 11) & 0x3F))
    return out


def check_path_sass(pc_: PathConfig, sass: str) -> dict:
    """The hot loop (from the k-step's DEPBAR.LE to the BAR after its last HMMA) of the row's kernel: CS2R clock reads (6), LDGSTS
    (copies per thread), HMMA (64), LDSM (16); ``gate_before_first_hmma``: an instruction between the
    k-step's LDGDEPBAR and the first HMMA after it waits on a read barrier the k-step's LDGSTS set (the
    WAR of reused copy registers); ``copies_before_first_hmma``: an LDGSTS precedes the k-step's first
    HMMA. ``ok``: the counts hold, and for order "copy" the gate is there, for "ldsm" no copy precedes the
    first HMMA (its gate, if any, sits before slice 1's first HMMA)."""
    ins = control_codes(sass, pc_.kernel)
    if not ins:
        return {"ok": False, "problem": "no encodings in the listing"}
    dep = [k for k, x in enumerate(ins) if x[1].startswith("DEPBAR.LE")]
    if not dep:
        return {"ok": False, "problem": "no DEPBAR.LE"}
    # from the k-step's t0 (the clock read just before the DEPBAR.LE) on
    starts = [next((k for k in range(max(d - 3, 0), d) if "SR_CLOCKLO" in ins[k][1]), d) for d in dep]
    bodies = [ins[d:e] for d, e in zip(starts, dep[1:] + [len(ins)], strict=True)]
    body = max(bodies, key=lambda b: (sum(x[1].startswith("HMMA") for x in b), -len(b)))
    last_h = max((k for k, x in enumerate(body) if x[1].startswith("HMMA")), default=len(body) - 1)
    body = body[:next((k for k in range(last_h, len(body)) if body[k][1].startswith("BAR")), len(body))]
    ops = [re.sub(r"^@!?U?P\w+\s+", "", x[1]).split()[0] for x in body]
    clocks = sum("SR_CLOCKLO" in x[1] for x in body)
    first_h = next((k for k, o in enumerate(ops) if o.startswith("HMMA")), None)
    ldg = [k for k, o in enumerate(ops) if o.startswith("LDGSTS")]
    depbar = next((k for k, o in enumerate(ops) if o == "LDGDEPBAR"), None)
    gate = False
    if depbar is not None:
        rbs = {body[k][2] for k in ldg if k < depbar and body[k][2] != 7}
        h_after = next((k for k in range(depbar, len(ops)) if ops[k].startswith("HMMA")), len(ops))
        gate = any(body[k][4] >> b & 1 for k in range(depbar + 1, h_after + 1) for b in rbs)
    counts = {"clock": clocks, "ldgsts": len(ldg), "hmma": sum(o.startswith("HMMA") for o in ops),
              "ldsm": sum(o.startswith("LDSM") for o in ops), "bar": sum(o.startswith("BAR") for o in ops)}
    want = {"clock": 6, "ldgsts": pc_.copies_per_thread, "hmma": 2 * GT_MMA_PER_SLICE, "ldsm": 2 * GT_LDSM_PER_SLICE,
            "bar": 1}
    copies_first = bool(ldg) and first_h is not None and min(ldg) < first_h
    bad = [f"{k} {counts[k]} != {want[k]}" for k in want if counts[k] != want[k]]
    if pc_.order == "copy" and not gate:
        bad.append("no wait on the copies' read barrier before the first HMMA")
    if pc_.order == "ldsm" and copies_first:
        bad.append("a copy precedes the first HMMA")
    return {"ok": not bad, "problem": "; ".join(bad), **counts, "gate_before_first_hmma": gate,
            "copies_before_first_hmma": copies_first, "instructions": len(body)}


def _span(row: dict, name: str, rep: int | None = None) -> float:
    s = row["spans"][name]
    return float(s["rep_medians"][rep] if rep is not None else s["value"])


def gemm_path_fields(rec: dict, result_path: str = "mma_feed.json") -> dict:
    """What a model of the mma.sync k-step would use from the gemm_path rows (calibrate.py's field format;
    not merged by calibrate): ``ldgsts_path_cycles_<l2|hbm>``: the copies-issued -> first-HMMA span
    (copy-first, 8 warps x 1 block) with ``real`` = 6 copies a thread from that source less the same
    span with zero-fill copies, per warp copy with data on the SM; ``ldgsts_path_cycles_zfill``: the
    zero-fill span itself per warp copy; ``ldgsts_path_cycles_per_extra_sector``: the span's growth per
    extra (mid-sector) sector per SM and k-step, K2008a against aligned L2 and K2008ab against bcolK2048;
    ``ldgsts_path_hidden_share``: the share of the k-step's copy cost (real-data k-step less zero-fill
    k-step, per SM time) that a co-resident block hides: 1 - (w4b2's / 2) / w4b1's, on L2 data (and
    ``ldgsts_path_hidden_share_2x4_vs_1x8``: w4b2 against w8b1, per 128x256 of work). Each value is the
    median over reps of the per-rep value (medians of warps x stamped k-steps); p10/p90: min/max over
    reps (or over the estimates)."""
    gp = rec.get(GP_GROUP) or {}
    date = rec.get("meta", {}).get("date_utc")
    out: dict = {}

    def reps(*rows: dict) -> range:
        return range(min(len(r["spans"]["copies_issued_to_first_hmma"]["rep_medians"]) for r in rows))

    def field(name: str, vals: list[float], bench: str, how: str) -> None:
        if vals:
            out[name] = {"value": pc.median(vals), "benchmark": f"mma_feed_probe gemm_path ({result_path}: {bench})",
                         "n": len(vals), "p10": min(vals), "p90": max(vals), "how": how, "date": date}

    span = "copies_issued_to_first_hmma"
    zero = gp.get("gp_w8b1_l2_copy_r0")
    if zero:
        z = [_span(zero, span, i) / (zero["copies_per_thread"] * zero["warps_per_block"]) for i in reps(zero)]
        field("ldgsts_path_cycles_zfill", z, f"gp_w8b1_l2_copy_r0 {_span(zero, span):.1f} cycles",
              "per-rep median span over the warp copies on the SM, median over reps")
        for src, key in (("l2", "gp_w8b1_l2_copy_r6"), ("hbm", "gp_w8b1_hbm_copy_r6")):
            row = gp.get(key)
            if not row:
                continue
            n = row["warp_copies_per_sm_per_kstep"]
            v = [(_span(row, span, i) - _span(zero, span, i)) / n for i in reps(row, zero)]
            field(f"ldgsts_path_cycles_{src}", v, f"{key} {_span(row, span):.1f} - gp_w8b1_l2_copy_r0 "
                  f"{_span(zero, span):.1f} cycles over {n} warp copies", "per-rep difference of medians, median over reps")
    est, used = [], []
    for rag, ali in (("gp_w8b1_K2008a_copy_r6", "gp_w8b1_l2_copy_r6"), ("gp_w8b1_K2008ab_copy_r6", "gp_w8b1_bcolK2048_copy_r6")):
        a, b = gp.get(rag), gp.get(ali)
        if not a or not b:
            continue
        ds = a["copy_sectors_per_kstep_computed"]["sectors"] - b["copy_sectors_per_kstep_computed"]["sectors"]
        if ds <= 0:
            continue
        est.append((_span(a, span) - _span(b, span)) / ds)
        used.append(f"{rag} - {ali}: {_span(a, span) - _span(b, span):.1f} cycles over {ds:.0f} sectors")
    field("ldgsts_path_cycles_per_extra_sector", est, "; ".join(used), "median of the estimates (difference of medians)")

    def cost(real: str, zero_key: str, per: float) -> list[float]:
        a, b = gp.get(real), gp.get(zero_key)
        if not a or not b:
            return []
        n = min(len(a["runs"]), len(b["runs"]))
        return [(a["runs"][i]["cycles_per_kstep"] - b["runs"][i]["cycles_per_kstep"]) / per for i in range(n)]

    c2, c1 = cost("gp_w4b2_l2_copy_r8", "gp_w4b2_l2_copy_r0", 2), cost("gp_w4b1_l2_copy_r8", "gp_w4b1_l2_copy_r0", 1)
    c8 = cost("gp_w8b1_l2_copy_r6", "gp_w8b1_l2_copy_r0", 1)
    if c2 and c1:
        v = [1 - a / b for a, b in zip(c2, c1, strict=False) if b > 0]
        field("ldgsts_path_hidden_share", v, "k-step of gp_w4b2_l2_copy_r8 - _r0 (per SM: / 2) against "
              "gp_w4b1_l2_copy_r8 - _r0", "1 - ratio per rep, median over reps")
    if c2 and c8:
        v = [1 - a * 2 / b for a, b in zip(c2, c8, strict=False) if b > 0]
        field("ldgsts_path_hidden_share_2x4_vs_1x8", v, "k-step of gp_w4b2_l2_copy_r8 - _r0 (two blocks' "
              "128x128 = one 128x256) against gp_w8b1_l2_copy_r6 - _r0", "1 - ratio per rep, median over reps")
    return out


#: the gemm_path row whose A and B copies straddle sector boundaries, and its aligned control (same kernel,
#: 8 warps x 1 block, copies first, every copy with data): copy_straddle_fields
STRADDLE_PAIR = ("gp_w8b1_K2008ab_copy_r6", "gp_w8b1_bcolK2048_copy_r6")


def copy_straddle_fields(rec: dict, group_lanes: int, group_source: str, result_path: str = "mma_feed.json",
                         line_cycles: float = 0.0) -> dict:
    """``ldgsts16_straddle_cycles_per_sector`` (calibrate.py's field format): how much longer the path from a
    k-step's barrier to its first HMMA gets per sector that the lane groups of its 16-byte cp.async copies
    add by straddling sector boundaries (PathConfig.received_sectors_per_kstep with ``group_lanes``, named
    by ``group_source``): STRADDLE_PAIR's (b2c + c2h of the row) - (the same of the control), over the
    row's extra sectors per block and k-step (b2c: barrier_to_copies_issued, c2h:
    copies_issued_to_first_hmma), per rep (the reps' medians of warps x stamped k-steps), median over reps,
    less ``line_cycles`` (``ldgsts16_line_cycles``, measured apart) for each global line the row's copies read
    beyond the control's (PathConfig.lines_beyond_per_kstep): a straddling copy reads more lines too.

    Reading of the rows: from the barrier to the copies issued takes the same 570-590 cycles (8 warps x 1
    block) whether 0, 2, 4 or 6 of a thread's copies read data, from L2 or HBM, and the span to the first
    HMMA stays 125 cycles: sector-aligned copies cost the same whatever they fetch. Copies of rows that
    start mid-sector (every other row of 4016 B) lengthen the path to the first HMMA, and the first
    ldmatrix waits on the copies' read barrier (check_path_sass), so the wait is for the L1 taking the
    copies, not for their data (HBM data, a 4-stage ring, leaves the path as it is)."""
    gp = rec.get(GP_GROUP) or {}
    key, ctl_key = STRADDLE_PAIR
    row, ctl = gp.get(key), gp.get(ctl_key)
    cfg = {c.key: c for c in GP_CONFIGS}
    if not row or not ctl:
        return {}
    extra = cfg[key].received_sectors_per_kstep(group_lanes)["extra"] - cfg[ctl_key].received_sectors_per_kstep(
        group_lanes)["extra"]
    if extra <= 0:
        return {}

    def b2h(r: dict, i: int | None = None) -> float:
        return _span(r, "barrier_to_copies_issued", i) + _span(r, "copies_issued_to_first_hmma", i)

    lines = cfg[key].lines_beyond_per_kstep() - cfg[ctl_key].lines_beyond_per_kstep()
    n = min(len(r["spans"]["copies_issued_to_first_hmma"]["rep_medians"]) for r in (row, ctl))
    vals = [(b2h(row, i) - b2h(ctl, i) - line_cycles * lines) / extra for i in range(n)]
    return {"ldgsts16_straddle_cycles_per_sector": {
        "value": pc.median(vals), "n": len(vals), "p10": min(vals), "p90": max(vals),
        "benchmark": f"mma_feed_probe gemm_path ({result_path}: {key} barrier -> first HMMA {b2h(row):.0f} - "
                     f"{ctl_key} {b2h(ctl):.0f} cycles"
                     + (f", less {line_cycles:.3f} cycles for each of {lines:.0f} more global lines read "
                        "(ldgsts16_line_cycles)" if line_cycles and lines else "")
                     + f", over {extra:.0f} extra sectors a block and k-step, lane groups of {group_lanes}: {group_source})",
        "how": "per-rep difference of the spans' medians over the extra sectors, median over reps",
        "date": (rec.get("group_runs", {}).get(GP_GROUP) or rec.get("meta", {})).get("date_utc")}}


# ----- pure: records, rates ---------------------------------------------------------------------------
def parse_records(raw: Sequence[int], blocks: int) -> dict:
    """Per-block records (cycles, ns, smid, start ns): :func:`probe_common.block_records`, with the median
    block's cycles (``cycles_median``)."""
    out = pc.block_records(raw, blocks, REC)
    return {**out, "cycles_median": pc.median(out["cycles"])}


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


def traffic_metrics(tc: TrafficConfig, rec: dict, iters: int, event_s: float | None, sm_count: int) -> dict:
    """One rep of a gemm_traffic row (``blocks_per_sm`` blocks on every SM, side by side): cycles per
    k-step of the median block, HMMA/clk/SM (x blocks per SM), and the global bytes/s the whole GPU moved
    at that rate and the block clock."""
    if iters < 1:
        raise ValueError(f"iters = {iters}: must be >= 1")
    cyc = rec["cycles_median"] / iters
    bps = tc.global_bytes_per_kstep * tc.blocks_per_sm * sm_count * rec["clock_hz"] / cyc
    return {"cycles_per_kstep": cyc, "hmma_per_clk_sm": tc.blocks_per_sm * tc.hmma_per_kstep / cyc,
            "cycles_per_slice_per_warp": cyc / tc.slices, "global_bytes_per_s": bps, "clock_hz": rec["clock_hz"],
            "max_coresident": rec["max_coresident"], "distinct_sms": rec["distinct_sms"], "event_s": event_s}


def summarize_traffic(tc: TrafficConfig, runs: list[dict], peak_flop: float) -> dict:
    """The JSON row of one gemm_traffic configuration from its reps (pure)."""
    h = summarize([r["hmma_per_clk_sm"] for r in runs])
    frac = {k: (v * FLOP_PER_HMMA / peak_flop if k != "n" else v) for k, v in h.items()}
    wf = tc.smem_wavefronts_per_kstep()
    cyc = summarize([r["cycles_per_kstep"] for r in runs])
    return {"kernel": tc.kernel, "mode": tc.mode, "note": tc.note, "data": tc.data or None,
            "geometry": tc.geometry, "warp_tile": [GT_WM, GT_WN], "block_tile": list(tc.block_tile),
            "warps_per_block": tc.warps, "blocks_per_sm": tc.blocks_per_sm, "warps_per_sm": tc.warps * tc.blocks_per_sm,
            "slices_per_kstep": tc.slices, "bk": tc.bk, "barriers_per_kstep": 1, "k_elems": tc.k_elems,
            "a_row_pitch_bytes": 2 * tc.k_elems, "copy_layout": "padded" if tc.mode == "gemm_pad" else
            ("swizzled" if tc.mode == "gemm" else "dense"),
            "copy_sectors_lines_per_kstep_computed": tc.copy_sectors_lines_per_kstep(),
            "compute_ring_stages": tc.compute_stages, "copy_ring_stages": tc.copy_stages if tc.mode != "none" else 0,
            "cp_async_wait_group": tc.copy_stages - 2 if tc.mode != "none" else None,
            "copies_per_thread_per_kstep": tc.copies_per_thread,
            "copies_per_thread_per_kstep_a_b": list(tc.copies_per_thread_ab), "smem_data_bytes": tc.smem_data_bytes,
            "global_bytes_per_kstep_block": tc.global_bytes_per_kstep, "hmma_per_kstep_block": tc.hmma_per_kstep,
            "ldmatrix_x4_per_kstep_block": tc.warps * tc.slices * GT_LDSM_PER_SLICE,
            "smem_wavefronts_per_kstep_computed": wf,
            "smem_wavefronts_per_clk_computed": tc.blocks_per_sm * wf["total"] / cyc["value"],  # per SM
            "hmma_per_clk_sm": h, "flop_per_clk_sm": {k: (v * FLOP_PER_HMMA if k != "n" else v) for k, v in h.items()},
            "fraction_of_peak": frac, "cycles_per_kstep": cyc,
            "cycles_per_slice_per_warp": summarize([r["cycles_per_slice_per_warp"] for r in runs]),
            "global_bytes_per_s": summarize([r["global_bytes_per_s"] for r in runs]),
            "clock_hz": summarize([r["clock_hz"] for r in runs])["value"],
            "blocks_per_sm_seen": max(r["max_coresident"] for r in runs),
            "distinct_sms": min(r["distinct_sms"] for r in runs), "runs": runs}


def check_traffic_sass(tc: TrafficConfig, s: dict) -> dict:
    """``ok`` when the hot loop holds, per iteration times a whole unroll, the source's HMMA, LDSM, one BAR,
    its LDGSTS (cp.async) and, with cp.async bookkeeping, one DEPBAR (wait_group) and one LDGDEPBAR
    (commit_group); adds ``ldgsts``, ``depbar`` and ``ldgdepbar`` counts."""
    if not s.get("ok"):
        return s
    hist = Counter(s["histogram"])
    got = {"ldgsts": count_prefix(hist, "LDGSTS"), "depbar": count_prefix(hist, "DEPBAR"),
           "ldgdepbar": count_prefix(hist, "LDGDEPBAR")}
    unroll = s["hmma"] / (tc.slices * GT_MMA_PER_SLICE)
    books = 0 if tc.mode == "none" else 1
    want = {"ldsm": tc.slices * GT_LDSM_PER_SLICE, "bar": 1, "ldgsts": tc.copies_per_thread,
            "depbar": books, "ldgdepbar": books}
    have = {"ldsm": s["ldsm"], "bar": s["bar"], **got}
    bad = [f"{k} {have[k]} != {want[k] * unroll:g}" for k in want if have[k] != want[k] * unroll]
    ok = unroll == int(unroll) and unroll >= 1 and not bad
    return {**s, **got, "unroll": unroll, "ok": ok,
            "problem": "" if ok else f"loop counts differ from the source per iteration: {', '.join(bad)}"}


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
    """Run-length code of a loop body's LDSM (L), HMMA (H), BAR (B), LDGSTS (G, cp.async) and DEPBAR (D,
    cp.async.wait_group): e.g. ``L8 H32 B1``."""
    out: list[list] = []
    codes = (("LDSM", "L"), ("HMMA", "H"), ("BAR", "B"), ("LDGSTS", "G"), ("DEPBAR", "D"))
    for op in ops:
        k = next((c for p, c in codes if op == p or op.startswith(p + ".")), None)
        if k is None:
            continue
        if out and out[-1][0] == k:
            out[-1][1] += 1
        else:
            out.append([k, 1])
    return " ".join(f"{k}{n}" for k, n in out)


def nvdisasm_as_cuobjdump(text: str) -> str:
    """An ``nvdisasm -c`` listing rewritten as :func:`sass_summary` reads ``cuobjdump -sass``: one
    ``Function : <name>`` line per ``.text.<name>:`` section and every branch to a label as ``BRA 0x<addr>``
    (for machines without cuobjdump, such as the CPU test's)."""
    out, labels, pending = [], {}, []
    for line in text.splitlines():  # first pass: the address of each label's next instruction
        lab = re.match(r"^\s*(\.L_x_\d+):", line)
        if lab:
            pending.append(lab.group(1))
        elif pending and (m := re.search(r"/\*([0-9a-f]{4,})\*/", line)):
            labels.update({k: int(m.group(1), 16) for k in pending})
            pending = []
    for line in text.splitlines():
        f = re.match(r"^\.text\.(\S+):\s*$", line)
        if f:
            out.append(f"        Function : {f.group(1)}")
        elif "/*" in line:
            out.append(re.sub(r"`\((\.L_x_\d+)\)", lambda m: f"0x{labels[m.group(1)]:x}", line))
    return "\n".join(out) + "\n"


def sass_summary(sass: str, kernel: str) -> dict:
    """The hot loop (the backward branch's body with the most HMMA) of ``kernel``: histogram and order."""
    best = None
    for ops in pc.loop_bodies(pc.function_instructions(sass, kernel)):
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

        self.cp = cp
        self.reps, self.target_s = reps, target_s
        self.sm_count = pc.device_facts(cp)[0]
        self._tmp = tempfile.TemporaryDirectory()
        built = pc.build_module(cp, KERNEL_SRC, ARCH, Path(self._tmp.name),
                                nvrtc_options=(f"--gpu-architecture={ARCH}",), want_sass=True)
        self.mod, self.sass = built.module, built.sass
        self.compile = {"arch": ARCH, "source": str(KERNEL_SRC.relative_to(REPO_ROOT)), "note": ""}
        if built.compiled_by == "nvcc":
            self.compile.update(compiled_by="nvcc", ptxas_warnings=pc.ptxas_warnings(built.log))
            if built.sass_error:
                self.compile["note"] = f"{built.sass_error}: no SASS checks"
        else:
            self.compile.update(compiled_by="nvrtc", note=f"{built.error}: compiled by NVRTC, no SASS checks")
        self.out = cp.zeros(1 << 20, dtype=cp.float32)
        self._gt: dict = {}
        spin = cp.RawKernel(
            r'extern "C" __global__ void mf_spin(long long n){long long c=clock64();while(clock64()-c<n){}}',
            "mf_spin")
        self._timer = pc.GatedTimer(cp, spin, GATE_SPIN_CYCLES)

    def launch_timed(self, f, grid: int, threads: int, args: tuple, smem: int) -> float:
        return self._timer.seconds(lambda: f((grid,), (threads,), args, shared_mem=smem))

    def size_iters(self, f, grid: int, threads: int, args, smem: int) -> int:
        """A warm-up launch, then up to 3 timed ones scaling ``iters`` to about ``target_s``."""
        f((grid,), (threads,), args(64), shared_mem=smem)  # warm-up
        return pc.size_iters(lambda it: self.launch_timed(f, grid, threads, args(it), smem), 64, self.target_s,
                             MAX_ITERS, 3)

    def gt_data(self, data: str, bk: int, blocks: int, block_tile: tuple[int, int], k_elems: int = GT_L2_MNK) -> dict:
        """Device buffers of :func:`gt_problem` (cached per argument set): A, B (fp16 bit patterns, a ramp,
        never zeros), the tile-origin tables."""
        key = (data or "l2", bk, blocks, tuple(block_tile), k_elems)
        if key not in self._gt:
            cp = self.cp
            if key[0] == "hbm":  # one 1 GiB set at a time
                self._gt = {k: v for k, v in self._gt.items() if k[0] != "hbm"}
            pr = gt_problem(key[0], blocks, bk, tuple(block_tile), k_elems)
            a = cp.arange(pr["m"] * pr["k"], dtype=cp.uint16)
            b = cp.arange(pr["k"] * pr["n"], dtype=cp.uint16)
            self._gt[key] = {**pr, "a": a, "b": b, "m0_dev": cp.asarray(pr["m0"], dtype=cp.int32),
                             "n0_dev": cp.asarray(pr["n0"], dtype=cp.int32)}
        return self._gt[key]

    def run_traffic(self, tc: TrafficConfig) -> tuple[list[dict], int, dict]:
        cp = self.cp
        smem = tc.smem_bytes
        if smem > SMEM_MAX_BLOCK_BYTES:
            raise ValueError(f"{tc.key}: smem_bytes = {smem} > {SMEM_MAX_BLOCK_BYTES}")
        f = pc.get_kernel(self.mod, tc.kernel, smem)
        grid = tc.blocks_per_sm * self.sm_count
        d = self.gt_data(tc.data, tc.bk, grid, tc.block_tile, tc.k_elems)
        clk = cp.zeros(REC * grid, dtype=cp.int64)
        src_bytes = 0 if tc.mode == "zfill" else CHUNK_BYTES

        def args(iters):
            return (cp.int32(iters), cp.int32(tc.compute_stages - 1), clk, self.out, cp.int32(0), d["a"], d["b"],
                    d["m0_dev"], d["n0_dev"], cp.int32(d["m"]), cp.int32(d["n"]), cp.int32(d["k"]),
                    cp.int32(GT_KT_LIMIT), cp.int32(src_bytes))

        iters = self.size_iters(f, grid, tc.threads, args, smem)
        runs = []
        for _ in range(self.reps):
            s = self.launch_timed(f, grid, tc.threads, args(iters), smem)
            runs.append(traffic_metrics(tc, parse_records(clk.get(), grid), iters, s, self.sm_count))
        info = {**pc.kernel_attributes(f), "smem_bytes": smem, "grid": grid, "threads": tc.threads}
        if tc.data:
            info["problem"] = {"m": d["m"], "n": d["n"], "k": d["k"], "bytes": d["bytes"],
                               "ksteps_before_k_wraps": d["k"] // tc.bk}
        return runs, iters, info

    def run_path(self, row: PathConfig) -> tuple[list[dict], int, dict]:
        cp = self.cp
        f = pc.get_kernel(self.mod, row.kernel, row.smem_bytes)
        grid = row.blocks_per_sm * self.sm_count
        pr = gp_problem(row, grid)
        self._gt = {}  # one data set at a time (the 1 GiB one included)
        a = cp.arange(pr["m"] * pr["k"], dtype=cp.uint16)
        b = cp.arange(pr["k"] * pr["n"], dtype=cp.uint16)
        m0, n0 = cp.asarray(pr["m0"], dtype=cp.int32), cp.asarray(pr["n0"], dtype=cp.int32)
        clk = cp.zeros(REC * grid, dtype=cp.int64)
        warps_total = grid * row.warps
        stamps = cp.full(warps_total * GP_MAXREC * GP_REC, -1, dtype=cp.int64)

        def args(iters):
            return (cp.int32(iters), cp.int32(STAGES - 1), clk, stamps, self.out, a, b, m0, n0, cp.int32(pr["m"]),
                    cp.int32(pr["n"]), cp.int32(pr["k"]), cp.int32(row.real))

        iters = self.size_iters(f, grid, row.threads, args, row.smem_bytes)
        nrec = min(GP_MAXREC, iters // GP_EVERY)
        runs = []
        for _ in range(self.reps):
            s = self.launch_timed(f, grid, row.threads, args(iters), row.smem_bytes)
            rec = parse_records(clk.get(), grid)
            st = parse_stamps(stamps.get(), warps_total, nrec)
            runs.append({**path_metrics(row, rec, st, iters), "event_s": s})
        info = {**pc.kernel_attributes(f), "grid": grid, "threads": row.threads, "stamped_ksteps_per_warp": nrec,
                "problem": {"m": pr["m"], "n": pr["n"], "k": pr["k"], "bytes": pr["bytes"]}}
        return runs, iters, info

    def run_bcol(self, bc: BcolConfig) -> tuple[list[dict], int, dict]:
        """One gemm_bcol row: run_traffic's launch (the MF_GT arguments) of ``bc.kernel``."""
        cp = self.cp
        tc = bc.traffic
        f = pc.get_kernel(self.mod, bc.kernel, tc.smem_bytes)
        grid = self.sm_count
        d = self.gt_data("l2", BK, grid, tc.block_tile, GT_L2_MNK)
        clk = cp.zeros(REC * grid, dtype=cp.int64)

        def args(iters):
            return (cp.int32(iters), cp.int32(STAGES - 1), clk, self.out, cp.int32(0), d["a"], d["b"], d["m0_dev"],
                    d["n0_dev"], cp.int32(d["m"]), cp.int32(d["n"]), cp.int32(d["k"]), cp.int32(GT_KT_LIMIT),
                    cp.int32(CHUNK_BYTES))

        iters = self.size_iters(f, grid, tc.threads, args, tc.smem_bytes)
        runs = []
        for _ in range(self.reps):
            s = self.launch_timed(f, grid, tc.threads, args(iters), tc.smem_bytes)
            runs.append(traffic_metrics(tc, parse_records(clk.get(), grid), iters, s, self.sm_count))
        return runs, iters, {**pc.kernel_attributes(f), "smem_bytes": tc.smem_bytes, "grid": grid}

    def run_config(self, cfg: Config, noise: int = 0) -> tuple[list[dict], int, dict]:
        cp = self.cp
        smem = SMEM_ONE_BLOCK_BYTES if cfg.blocks == 1 else SMEM_TWO_BLOCKS_BYTES
        if cfg.smem_data_bytes > smem:
            raise ValueError(f"{cfg.name}: smem_data_bytes = {cfg.smem_data_bytes} > {smem}")
        f = pc.get_kernel(self.mod, cfg.name, smem)
        grid, threads = cfg.blocks * self.sm_count, 32 * cfg.warps
        clk = cp.zeros(REC * grid, dtype=cp.int64)

        def args(iters):
            return (cp.int32(iters), cp.int32(STAGES - 1), clk, self.out, cp.int32(noise))

        iters = self.size_iters(f, grid, threads, args, smem)
        runs = []
        for _ in range(self.reps):
            s = self.launch_timed(f, grid, threads, args(iters), smem)
            runs.append(rep_metrics(cfg, parse_records(clk.get(), grid), iters, s, self.sm_count))
        return runs, iters, {**pc.kernel_attributes(f), "smem_bytes": smem, "grid": grid, "threads": threads}


def run_probe(quick: bool = False, tensor_json: Path | None = None, only: Sequence[str] | None = None) -> dict:
    """The groups ``only`` (default: all of GROUPS) on the current GPU (JSON-ready): ``configs`` (sweep),
    ``gemm_traffic``, ``errors`` (per row: the others still run), ``meta`` with ``groups_run``."""
    only = tuple(only or GROUPS)
    bad = [g for g in only if g not in GROUPS]
    if bad:
        raise ValueError(f"only = {bad}: groups are {', '.join(GROUPS)}")
    t0 = time.perf_counter()
    from validation.harness.metadata import gpu_slug  # noqa: PLC0415

    meta = pc.collect_metadata()
    dev = _Device(QUICK_REPS if quick else REPS, QUICK_TARGET_S if quick else TARGET_S)
    slug = gpu_slug(meta.get("device_name") or "unknown")
    tj = tensor_json or RESULTS_ROOT / slug / "calibration" / TENSOR_JSON
    peak, peak_src = peak_from_tensor_json(tj)
    res: dict = {"meta": meta, "compile": dev.compile, "peak_flop_per_clk_sm": peak, "peak_source": peak_src,
                 "errors": {}}
    def record(section: str, key: str, run, summarize, check, **extra) -> None:
        """One row: ``run()`` -> (runs, iters, info), ``summarize(runs)``, ``check()`` of its SASS (when
        the SASS was read); an exception is recorded under ``key`` and the other rows still run."""
        try:
            runs, iters, info = run()
            row = summarize(runs)
            row.update(iters=iters, reps=dev.reps, **extra, **info)
            if dev.sass:
                row["sass"] = check()
            res[section][key] = row
        except Exception as exc:  # noqa: BLE001  (recorded, the others still run)
            res["errors"][key] = f"{type(exc).__name__}: {exc}"

    if SWEEP_GROUP in only:
        res["configs"] = {}
        cfgs = sweep(quick)
        # the tc_gemm configuration (64x64, 8 warps, one block, barrier every 2 slices) with random operands
        extra = [(Config(64, 64, 8, 1, 2, 0), 1)]
        for cfg, noise in [(c, 0) for c in cfgs] + extra:
            record("configs", cfg.name + ("_noise" if noise else ""), partial(dev.run_config, cfg, noise),
                   partial(summarize_config, cfg, peak_flop=peak), lambda cfg=cfg: check_sass(cfg, sass_summary(dev.sass, cfg.name)),
                   operands="random fp16" if noise else "zeros")
    for group in [g for g in GT_GROUP_CONFIGS if g in only]:  # both groups' rows in res["gemm_traffic"]
        res.setdefault("gemm_traffic", {})
        t1 = time.perf_counter()
        for tc in GT_GROUP_CONFIGS[group]:
            record("gemm_traffic", tc.key, partial(dev.run_traffic, tc), partial(summarize_traffic, tc, peak_flop=peak),
                   lambda tc=tc: check_traffic_sass(tc, sass_summary(dev.sass, tc.kernel)), operands="zeros")
        res["meta"][f"{group}_wall_s"] = time.perf_counter() - t1
    if GP_GROUP in only:
        res.setdefault(GP_GROUP, {})
        t1 = time.perf_counter()
        for row in GP_CONFIGS:
            record(GP_GROUP, row.key, partial(dev.run_path, row), partial(summarize_path, row),
                   lambda row=row: check_path_sass(row, dev.sass))
        res["meta"][f"{GP_GROUP}_wall_s"] = time.perf_counter() - t1
        res["fields_gemm_path"] = gemm_path_fields(res)
    if GB_GROUP in only:
        res.setdefault(GB_GROUP, {})
        t1 = time.perf_counter()
        for bc in GB_CONFIGS:
            record(GB_GROUP, bc.key, partial(dev.run_bcol, bc), partial(summarize_bcol, bc),
                   lambda bc=bc: check_bcol_sass(bc, sass_summary(dev.sass, bc.kernel)))
        try:
            res[GB_GROUP]["gb_suite_1wave"] = run_gb_suite(dev.reps)
        except Exception as exc:  # noqa: BLE001
            res["errors"]["gb_suite_1wave"] = f"{type(exc).__name__}: {exc}"
        res["meta"][f"{GB_GROUP}_wall_s"] = time.perf_counter() - t1
    res["meta"].update(probe_wall_s=time.perf_counter() - t0, quick=quick, sm_count=dev.sm_count,
                       target_kernel_s=dev.target_s, reps=dev.reps, groups_run=list(only))
    return res


_W4_KEYS = frozenset(tc.key for tc in GT_W4_CONFIGS)
_RAGGED_KEYS = frozenset(tc.key for tc in GT_RAGGED_CONFIGS)
SECTIONS = {SWEEP_GROUP: "configs", GT_GROUP: "gemm_traffic", GT_W4_GROUP: "gemm_traffic",
            GT_RAGGED_GROUP: "gemm_traffic", GP_GROUP: GP_GROUP, GB_GROUP: GB_GROUP}


def _error_group(key: str) -> str:
    """The group of a row or error key (a gemm_traffic key of no other list: gemm_traffic)."""
    if key in _W4_KEYS:
        return GT_W4_GROUP
    if key in _RAGGED_KEYS:
        return GT_RAGGED_GROUP
    if key.startswith("gp_") or key == "fields_gemm_path":
        return GP_GROUP
    if key.startswith("gb_"):
        return GB_GROUP
    return GT_GROUP if key.startswith("gt_") else SWEEP_GROUP


def _has_rows(rec: dict, group: str) -> bool:
    if group == SWEEP_GROUP:
        return "configs" in rec
    if group in (GP_GROUP, GB_GROUP):
        return bool(rec.get(group))
    return any(_error_group(k) == group for k in rec.get("gemm_traffic", {}))


def merge_results(old: dict | None, new: dict) -> dict:
    """``new`` (a run of some groups) over ``old`` (a recorded mma_feed.json): the rows of the groups
    ``new`` ran (``configs`` for sweep; in ``gemm_traffic`` those of gemm_traffic or gemm_traffic_w4) and
    their errors replace the old ones, the others stay; ``group_runs`` says which run (date, revision) each
    group comes from; meta, compile and peak are the new run's."""
    ran = new["meta"].get("groups_run") or list(GROUPS)
    stamp = pc.run_stamp(new["meta"])
    if not old:
        return {**new, "group_runs": {g: stamp for g in ran}}
    out = {**old, **{k: new[k] for k in ("meta", "compile", "peak_flop_per_clk_sm", "peak_source") if k in new}}
    out["errors"] = {k: e for k, e in old.get("errors", {}).items() if _error_group(k) not in ran}
    out["errors"].update(new.get("errors", {}))
    runs = pc.previous_group_runs(old, GROUPS, lambda g: _has_rows(old, g))
    for sec in sorted({SECTIONS[g] for g in ran}):
        kept = {k: r for k, r in old.get(sec, {}).items() if sec == "gemm_traffic" and _error_group(k) not in ran}
        out[sec] = {**kept, **new.get(sec, {})}
    if GP_GROUP in ran and "fields_gemm_path" in new:
        out["fields_gemm_path"] = new["fields_gemm_path"]
    for g in ran:
        runs[g] = stamp
    out["group_runs"] = runs
    return out


def parse_only(text: str | None) -> tuple[str, ...] | None:
    """``--only`` text -> group names (None: every group); ValueError naming an unknown group."""
    return pc.parse_groups(text, GROUPS)


def format_table(res: dict) -> str:
    lines = [f"{'kernel':34s} {'warps/SM':>8s} {'HMMA/clk/SM':>11s} {'FLOP/clk/SM':>11s} {'of peak':>7s} "
             f"{'cyc/slice/warp':>14s} {'blk/SM':>6s} {'LDSM H B (loop)':>16s}"]
    for k, r in res.get("configs", {}).items():
        s = r.get("sass") or {}
        sass = f"{s.get('ldsm', '-')} {s.get('hmma', '-')} {s.get('bar', '-')}" + ("" if s.get("ok", True) else " !")
        lines.append(f"{k:34s} {r['warps_per_sm']:8d} {r['hmma_per_clk_sm']['value']:11.4g} "
                     f"{r['flop_per_clk_sm']['value']:11.5g} {r['fraction_of_peak']['value']:7.1%} "
                     f"{r['cycles_per_slice_per_warp']['value']:14.4g} {r['blocks_per_sm_seen']:6d} {sass:>16s}")
    gt = res.get("gemm_traffic") or {}
    if gt:
        lines.append("")
        lines.append(f"{'gemm_traffic':20s} {'warps':>5s} {'blk/SM':>6s} {'seen':>4s} {'data':4s} {'bk':>3s} "
                     f"{'cp/thr':>6s} {'HMMA/clk/SM':>11s} {'of peak':>7s} {'cyc/kstep/blk':>13s} {'GB/s':>7s} "
                     f"{'wavefr/kstep':>12s} {'wf/clk':>6s}  SASS loop order")
        for k, r in gt.items():
            s = r.get("sass") or {}
            order = (s.get("order", "-") + ("" if s.get("ok", True) else " !")) if s else "-"
            lines.append(f"{k:20s} {r['warps_per_block']:5d} {r['blocks_per_sm']:6d} {r['blocks_per_sm_seen']:4d} "
                         f"{r['data'] or '-':4s} {r['bk']:3d} {r['copies_per_thread_per_kstep']:6d} "
                         f"{r['hmma_per_clk_sm']['value']:11.4g} {r['fraction_of_peak']['value']:7.1%} "
                         f"{r['cycles_per_kstep']['value']:13.1f} {r['global_bytes_per_s']['value'] / 1e9:7.0f} "
                         f"{r['smem_wavefronts_per_kstep_computed']['total']:12d} "
                         f"{r['smem_wavefronts_per_clk_computed']:6.3f}  {order}")
    gp = res.get(GP_GROUP) or {}
    if gp:
        lines.append("")
        lines.append(f"{'gemm_path':26s} {'real':>4s} {'seen':>4s} {'sectors':>7s} {'depbar':>6s} {'bar':>6s} "
                     f"{'->copies':>8s} {'->HMMA1':>8s} (p10..p90) {'HMMAs':>6s} {'kstep/w':>7s} {'kstep/blk':>9s} "
                     f"{'GHz':>5s}  SASS")
        for k, r in gp.items():
            sp = r["spans"]
            s = r.get("sass") or {}
            sass = ("ok" if s.get("ok") else f"! {s.get('problem', '')}") if s else "-"
            gate = " gate" if s.get("gate_before_first_hmma") else ""
            c = sp.get("copies_issued_to_first_hmma", {})
            lines.append(f"{k:26s} {r['real_copies_per_thread']:4d} {r['blocks_per_sm_seen']:4d} "
                         f"{r['copy_sectors_per_kstep_computed']['sectors']:7.0f} "
                         + " ".join(f"{sp[n]['value']:{w}.0f}" for n, w in (("depbar_wait", 6), ("barrier", 6),
                                                                           ("barrier_to_copies_issued", 8)) if n in sp)
                         + f" {c.get('value', float('nan')):8.0f} ({c.get('p10', 0):.0f}..{c.get('p90', 0):.0f})"
                         + f" {sp['first_to_last_hmma']['value']:6.0f} {sp['kstep']['value']:7.0f}"
                         + f" {r['cycles_per_kstep']['value']:9.1f} {r['clock_hz'] / 1e9:5.3f}  {sass}{gate}")
        for name, f in (res.get("fields_gemm_path") or {}).items():
            lines.append(f"  {name} = {f['value']:.4g} ({f['p10']:.4g}..{f['p90']:.4g})")
    gb = res.get(GB_GROUP) or {}
    if gb:
        lines.append("")
        lines.append(f"{'gemm_bcol':18s} {'B copies':8s} {'read':10s} {'lines/cp':>8s} {'cyc/kstep/blk':>13s} "
                     f"{'p10..p90':>15s} {'GHz':>5s}  SASS loop order")
        for k, r in gb.items():
            if k == "gb_suite_1wave":
                pp = r.get("parts_per_kstep") or {}
                lines.append(f"{k:18s} {r.get('status')}: " + " ".join(f"{n} {v['value']:.0f}" for n, v in pp.items())
                             + f" ({r.get('message') or ''})")
                continue
            s = r.get("sass") or {}
            order = (s.get("order", "-") + ("" if s.get("ok", True) else f" ! {s.get('problem')}")) if s else "-"
            c = r["cycles_per_kstep"]
            lines.append(f"{k:18s} {r['b_layout']:8s} {r['read']:10s} "
                         f"{r['ldgsts_lines_computed']['global_lines_mean']:8.2f} {c['value']:13.1f} "
                         f"{c['p10']:7.1f}..{c['p90']:<7.1f} {r['clock_hz'] / 1e9:5.3f}  {order}")
    for k, e in res.get("errors", {}).items():
        lines.append(f"{k:34s} FAILED: {e}")
    return "\n".join(lines)


def compact_summary(res: dict) -> dict:
    """One line for the log: the gemm_bcol rows' cycles per k-step (and the suite kernel's parts)."""
    out = {}
    for k, r in (res.get(GB_GROUP) or {}).items():
        if k == "gb_suite_1wave":
            out[k] = {n: round(v["value"], 1) for n, v in (r.get("parts_per_kstep") or {}).items()} or r.get("status")
        else:
            out[k] = round(r["cycles_per_kstep"]["value"], 1)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = pc.probe_parser("mma_feed_probe", __doc__.splitlines()[0], RESULT_FILE, "the 64x64 tile only, 2 reps, short launches")
    ap.add_argument("--tensor-json", default=None, help="tensor.json with the register-fed peak")
    ap.add_argument("--only", default=None,
                    help=f"comma-separated groups ({', '.join(GROUPS)}); they replace theirs in an existing "
                         "mma_feed.json of --out")
    a = ap.parse_args(argv)
    try:
        only = parse_only(a.only)
    except ValueError as exc:
        ap.error(str(exc))
    why = _gpu_missing()
    if why:
        return pc.no_gpu_exit("mma_feed_probe", why)
    res = run_probe(a.quick, Path(a.tensor_json) if a.tensor_json else None, only)
    path = pc.results_dir(a.out, res["meta"]) / RESULT_FILE
    old = None
    if only and path.exists():
        try:
            old = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            print(f"mma_feed_probe: {path} unreadable ({exc}); writing only this run's groups", file=sys.stderr)
    res = merge_results(old, res)
    pc.write_json(path, res)
    print(format_table(res))
    if GB_GROUP in res["meta"].get("groups_run", []):
        print(json.dumps({"gemm_bcol_cycles_per_kstep": compact_summary(res)}, separators=(",", ":")))
    print(f"peak {res['peak_flop_per_clk_sm']:.5g} FLOP/clk/SM ({res['peak_source']})")
    if res["compile"].get("ptxas_warnings"):
        print("ptxas warnings:\n  " + "\n  ".join(res["compile"]["ptxas_warnings"]))
    print(f"wrote {path} in {res['meta']['probe_wall_s']:.1f} s")
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
