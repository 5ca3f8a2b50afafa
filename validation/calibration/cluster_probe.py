"""What a thread-block cluster of 2 with TMA multicast costs a GEMM-like TMA ring on the H200 (sm_90a).

``python -m validation.calibration.cluster_probe [--out DIR] [--quick]`` runs the kernels of
``cluster_probe.cu`` on the current GPU (CuPy), prints a table and writes ``<DIR>/cluster.json`` (default
DIR: ``validation/results/<gpu>/calibration``) with every rep's raw per-block records, the summaries and
the machine's metadata (validation/harness/metadata.py). Without a GPU it says so in one line and exits 2.
The whole probe is meant to take a few seconds of GPU time (well under 40 s; ``--only fence`` about 10 s;
``--only suite_diff`` well under 3 minutes, most of it compiling).

Why: the validation wgmma GEMM (validation/families/tc_gemm/wgmma.cu) runs 25-35% slower with cluster=2
(B multicast by rank 0 to the pair, each empty barrier counting the consumers of both CTAs) than with
cluster=1. The ring rows separate the candidate mechanisms with the GEMM's synchronization and loads but
no wgmma: a producer thread fills an S-stage ring (one A box of ``A_ROWS`` x 64 fp16 and one B box of
``b_rows`` x 64 per k-step, 128-byte swizzle, TMA 2-D into a full mbarrier with expect_tx), two consumer
warpgroups wait on the full barrier, spin ``spin`` cycles on clock64 (the stand-in for one k-step of
wgmma) and release the stage on its empty barrier; one block per SM on every SM. Source: one 16 MiB
L2-resident fp16 tensor of 4096 halves per row behind both tensor maps (box column = k-step mod 64; A row
block = block index mod tiles, B row block = pair index mod tiles: the two CTAs of a pair share B).

Ring rows ``ring.b<b_rows>.s<S>.spin<cycles>.<mode>``, modes:

* ``c1``: no cluster (``ring_c1``), each CTA loads its B, local empty arrivals: the cluster=1 GEMM.
* ``c2_own_local``: cluster of 2 launched, but each CTA loads its own B and arrives only locally: the two
  CTAs run independently (what the cluster launch alone costs: placement, co-scheduling).
* ``c2_own_remote``: each CTA loads its own B, every consumer arrives on both CTAs' empty barriers
  (mapa + mbarrier.arrive.release.cluster): the pair's lockstep without multicast.
* ``c2_mc_remote``: rank 0 multicasts B to both CTAs, remote arrivals: the cluster=2 GEMM.

Each row: ``cycles_per_step`` (``value``: median over reps of the median over blocks of the block's timed
cycles / k-steps), by rank, ``bytes_per_clk_per_sm`` (A + B bytes landing in each SM's shared memory per
cycle), ``l2_bytes_per_clk_per_sm`` (bytes each SM asks of L2: half the B bytes with multicast),
``empty_wait_per_step`` (producer cycles waiting for the empty barrier, k-steps >= S) and
``full_wait_per_step`` (consumer warpgroup 0, thread 0, waiting for the full barrier), ``vs_c1`` (this
row's cycles_per_step over the c1 row of the same box, S and spin) and ``concurrent`` (every block's timed
window overlapped every other's: one wave).

Latency rows (one cluster of 2 on the otherwise idle GPU):

* ``ping.local_cta``, ``ping.local_cluster_scope``, ``ping.remote``: one token handed back and forth
  between two threads through mbarriers of count 1, ``value`` = cycles of one hand-off (arrive until the
  other thread's try_wait sees the phase) = round trip / 2; local_cta: two warps of one CTA, shared::cta
  instructions; local_cluster_scope: the same two warps with the GEMM's instructions (mapa to the own rank,
  .release.cluster / .acquire.cluster); remote: rank 0 and rank 1 of the pair.
* ``tma_lat.b<rows>.plain_pair`` (each CTA loads its own box at once), ``.multicast`` (rank 0 multicasts
  into both), ``.plain_single`` (rank 0 alone): one box in flight; ``value`` = rank 0's cycles from the
  issue to its own full barrier's completion (median over reps of the mean over boxes), ``pair_cycles`` =
  from the issue until both CTAs have the data and rank 0 saw rank 1's arrive (includes one remote
  hand-off: subtract ``ping.remote``), ``rank1_cycles`` = rank 1's expect_tx to its own completion.

Wgmma rows ``wgmma.c<consumers>.s<S>.<mode>.rel_<one|all>`` (``ringw_c1`` / ``ringw_c2``): the same producer,
ring and boxes (A 128 x 64, B 256 x 64 fp16), but each consumer warpgroup runs the validation GEMM's k-step
of real tensor work instead of the spin: wgmma.fence, 4 x wgmma.mma_async m64n256k16 f32.f16.f16 from the
stage it waited for (wgmma.cu's descriptors, 128-byte swizzle), commit_group, wait_group(1), then the release
of the PREVIOUS stage, with wgmma.cu's setmaxnreg (producer 40, consumers 232). Consumer warpgroup c reads
A rows 64c .. 64c + 63 (with one consumer, rows 64..127 of the A box are loaded but not read). Modes as the
ring's (``c2_own_local`` is the legal local-only release: without multicast; multicast needs remote
arrivals). Release ``one``: one thread per destination CTA (what wgmma.cu does: thread 0 arrives locally
at cluster 1, threads 0 and 1 arrive on CTA 0 and CTA 1 at cluster 2); ``all``: every thread of the
warpgroup arrives on every destination (empty count x 128). The wgmma rows fill the tensor with uniform
random fp16 in [-1, 1] first (the tensor pipe's power and so the clock depend on the data); the other
groups run before on zeros, as before. Each row has the ring's fields plus ``tensor_activity`` (wgmma
issued x WGMMA_CYCLES / the block's timed cycles, median over blocks), ``wait_group_per_step`` (cycles
consumer warpgroup 1 thread 0 spends in wait_group(1)), ``release_per_step`` (its cycles in the release
arrive(s)), ``full_wait_wg2_per_step`` (consumer warpgroup 2's full waits) and ``vs_c1`` against the c1 row
of the same consumers, S and release.

Fence rows (``--only fence``, kernels ``fence_c2_<op>``, written to ``cluster_fence.json``): what the GEMM's
release (mapa + mbarrier.arrive.release.cluster on the peer CTA: MEMBAR.ALL.CTA; MEMBAR.ALL.GPU; ERRBAR;
CGAERRBAR; SYNCS.ARRIVE.TRANS64.RED in SASS, 887-1406 cycles in the wgmma rows) waits for. One CTA per SM in
clusters of 2; thread 128 of a releasing CTA times ``iters`` operations (clock64 around each, every sample
kept), thread 0 of a loading CTA keeps ``inflight`` TMA boxes (``b_rows`` x 64 fp16, the GEMM's box) in
flight from the 16 MiB L2-resident tensor (``l2``) or from a 1 GiB one (``hbm``, every block its own rows).
Operations (``FENCE_OPS``): ``release`` (the GEMM's), ``arrive`` (default-semantics remote arrive, no
MEMBAR: CUTLASS's form), ``fence_rel`` (fence.release.gpu: the release's MEMBAR sequence without the arrive),
``fence_acqrel`` (fence.acq_rel.gpu, plus CCTL.IVALL), ``local`` (an arrive on the CTA's own barrier).
Rows ``fence.stream.<op>.<src>.b<rows>.if<N>.load_<own|others|all|none>.rel_<pair|all>``: pair 0 (or every
CTA) times back-to-back operations while N boxes stay in flight on its own SMs, only on the other SMs, or
everywhere; ``fence.sync.<op>.<src>.b256.if<N>.<gap0|gap500|gap1500|landed>.<loader|self>``: pair 0 alone,
per operation N fresh boxes issued (by the loader thread, or by the timed thread itself), then the
operation after ``gap`` cycles or once they landed, so that the release's cost can be set against the
time its SM's loads still needed. Each row: ``value`` (median over reps of the median operation, first
FENCE_SKIP_OPS left out), ``op_cycles`` (pooled median/p10/p90/mean), boxes in flight at the operation,
the loads' bytes/s per loading SM and over the GPU, the sync rows' issue-to-landed cycles
(``load_cycles_per_op``) and the releaser's wait for landing (``land_wait_per_op``), how much of pair 0's
window the loaders covered, the clock. :func:`fence_fields` turns the rows into model fields (not wired
into calibrate.py). Every wait is bounded (CP_WAIT_LIMIT_CYCLES, flag[block] reported by the host); the
group gives up after FENCE_MAX_FAILURES failed rows in a row.

Suite-difference rows (``--only suite_diff``, not part of the default run; kernel ``ringd_c2``, written to
``cluster_suite_diff.json``, one JSON line ``{"suite_diff": {row: {step, release, full, empty}}}`` printed): why
the suite's cluster wgmma GEMM (``wgmma_fp16_Bcol_128x256x64_swz_s4_c2_cl2``, tc_step_parts: release 1146-1178
cycles a k-step) releases slower than the wgmma ring above (1059). ``ringd_c2`` is ``ringw_c2`` at S = 4, 2
consumers, rel_one (the same release SASS as wgmma.cu: MEMBAR.ALL.CTA; MEMBAR.ALL.GPU; ERRBAR; CGAERRBAR;
SYNCS.ARRIVE.TRANS64.RED, tests/test_cluster_suite_diff.py), with switches that each move it one step toward
wgmma.cu (:data:`SD_CONFIGS`): ``mc`` rank 0 multicasts B (the suite's loads); ``sync`` the suite's sync code form
(tight try_wait loops, the producer warpgroup's idle threads parked in the closing barrier.cluster.wait);
``stream`` the suite's data walk on one wave (12 x 11 tiles, fresh A and B tiles every 64 k-steps from a 2 GiB
tensor: each box read once from HBM, then from L2 by the wave's other blocks, as a 4096^3 wave does);
``k2008`` rows of 4016 bytes (the ragged shape's K). ``value`` = cycles per k-step, ``release_per_step`` its
release part, as the wgmma rows. The ``sd.l2.mc.a<KA>.b<KB>`` rows (:data:`SD_AB_CONFIGS`, kernel
``ringd_ab_c2``: ringd_c2 with B's row pitch its own) give A's and B's rows their pitch independently on the
L2-resident tensor with B multicast: A-only and B-only mid-sector rows (a2008.b4096, a4096.b2008), and both
corners again on the same kernel (a4096.b4096 ~ sd.l2.mc, a2008.b2008 ~ sd.l2.mc.k2008). Every ringd row
records each operand's pitch (``k_a``, ``k_b``, halves); the SD_CONFIGS rows keep ``k`` (both operands), the
a/b rows have none. The ``.flushed`` rows (:data:`SD_FLUSHED`: ``sd.stream.mc.sync.flushed``,
``sd.l2.mc.sync.flushed``) repeat ``sd.stream.mc.sync`` / ``sd.l2.mc.sync`` (same kernel, walk and arguments) with
the L2 flushed before every launch as the suite_1wave flushed rows are (validation.harness.timing.L2Flusher: a fill
of twice the L2 size, which leaves the L2 full of dirty lines; enqueued after the gate spin, right ahead of the
launch; recorded as ``l2_flushed``, ``l2_flush``, ``repeats``): does the flush alone lengthen the release?
Then the suite kernel itself on one wave (``suite_1wave.*``: wgmma.cu with
TC_TRACE 2 on 1536 x 2816 x K, validation/studies/tc_step_parts.trace_config, checked against float64; L2
flushed before each launch, or warm with K = 2048), whose parts are the suite's.

Records (``REC`` longs per block, cluster_probe.cu write_record): cycles, ns, smid, rank, a, b,
globaltimer start, count; a/b are the ring's empty/full waits, the TMA latency's pair sum.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from validation.calibration import probe_common as pc
from validation.calibration.probe_common import REPO_ROOT, ptxas_warnings, record_columns, summarize
from validation.calibration.probe_common import gpu_missing as _gpu_missing
from validation.calibration.probe_common import median as _median

KERNEL_SRC = Path(__file__).resolve().with_suffix(".cu")
RESULT_FILE = "cluster.json"
ARCH = "sm_90a"  # cp.async.bulk.tensor .multicast::cluster and the cluster mbarrier forms (PTX ISA: sm_90)

# must match the #defines of cluster_probe.cu (tests/test_cluster_probe.py checks that they do)
REC = 8  # CP_REC
MAX_STAGES = 8  # CP_MAX_STAGES
BOX_COLS = 64  # CP_BOX_COLS: 64 halves = 128 bytes, the widest box a 128-byte swizzle allows (cuda.h)
TILES_X_SHIFT = 6  # CP_TILES_X_SHIFT: 64 boxes per 4096-half row
AUX = 4  # CP_AUX: longs per block of the wgmma rows' second record
WG_N = 256  # CP_WG_N: n of the wgmma instruction = rows of the B box
WG_KSLICES = 4  # CP_WG_KSLICES: k16 instructions per 64-half k-step

TENSOR_COLS = 4096  # halves per row: 1 << TILES_X_SHIFT boxes of BOX_COLS
L2_TENSOR_BYTES = 16 << 20  # well inside the ~45 MiB the H200's L2 keeps (validation/calibration/README.md)
ELEM_BYTES = 2  # fp16
BOX_ROW_BYTES = BOX_COLS * ELEM_BYTES  # 128
CONSUMERS = 2  # consumer warpgroups (the 128x256 tile's 2 consumers of wgmma.cu)
THREADS = 128 * (1 + CONSUMERS)
CLUSTER = 2
A_ROWS = 128  # bm = 2 consumers x 64 rows
B_ROWS = (128, 256)  # bn of the 128x128 and 128x256 tiles
STAGES = (2, 4)
SPINS = (0, 500, 1000)  # cycles per k-step standing in for wgmma
QUICK_B_ROWS = (256,)
QUICK_SPINS = (0, 1000)
MODES = {  # name -> (kernel, multicast, remote arrivals)
    "c1": ("ring_c1", 0, 0),
    "c2_own_local": ("ring_c2", 0, 0),
    "c2_own_remote": ("ring_c2", 0, 1),
    "c2_mc_remote": ("ring_c2", 1, 1),
}
WGMMA_MODES = {  # name -> (kernel, multicast, remote arrivals); multicast without remote arrivals is illegal
    "c1": ("ringw_c1", 0, 0),
    "c2_own_local": ("ringw_c2", 0, 0),
    "c2_own_remote": ("ringw_c2", 0, 1),
    "c2_mc_remote": ("ringw_c2", 1, 1),
}
WGMMA_CONSUMERS = (1, 2)
WGMMA_STAGES = (2, 4)
RELEASES = {"one": 0, "all": 1}  # one: one thread per destination CTA (wgmma.cu); all: every thread
QUICK_WGMMA_CONSUMERS = (2,)
# cycles of one m64n256k16 fp16 wgmma at the SM's tensor peak: 64 * 256 * 16 * 2 flops / 4096 flops/clk/SM
# (dense fp16 peak per SM per clock, reached by the tensor probe: validation/calibration/README.md)
TENSOR_FLOPS_PER_CLK_PER_SM = 4096
WGMMA_CYCLES = 64 * WG_N * 16 * 2 // TENSOR_FLOPS_PER_CLK_PER_SM  # 128
GROUPS = ("ping", "tma_lat", "ring", "wgmma", "fence", "fence_gap")
EXTRA_GROUPS = ("suite_diff",)  # run only when named with --only (not part of the default run)
RING_ITERS = 2048  # k-steps per launch (about 1 ms at spin 1000)
QUICK_RING_ITERS = 256
PING_MODES = {"local_cta": 0, "local_cluster_scope": 1, "remote": 2}
PING_ITERS = 4096
LAT_MODES = {"plain_pair": 0, "multicast": 1, "plain_single": 2}
LAT_ITERS = 512
QUICK_LAT_ITERS = 64
REPS = 5
QUICK_REPS = 2

# ----- the fence rows (fence_c2_<op>): what the release's MEMBAR.ALL.GPU waits for ------------------------
# must match the #defines of cluster_probe.cu
FENCE_SLOTS = 6  # CP_FENCE_SLOTS: boxes in flight at most
FENCE_MAX_ITERS = 1024  # CP_FENCE_MAX_ITERS: timed operations per block at most
FENCE_AUX = 6  # CP_FENCE_AUX: longs per block of the fence rows' second record
FENCE_LANDED = -1  # CP_FENCE_LANDED: gap value "wait until the boxes landed"
FENCE_OPS = {  # name -> (kernel, CP_OP_* value)
    "release": ("fence_c2_release", 0),  # mapa + mbarrier.arrive.release.cluster on the peer: the GEMM's release
    "arrive": ("fence_c2_arrive", 1),  # mapa + mbarrier.arrive.shared::cluster, default semantics (no MEMBAR)
    "fence_rel": ("fence_c2_fence_rel", 2),  # fence.release.gpu alone: the release's MEMBAR sequence, no arrive
    "fence_acqrel": ("fence_c2_fence_acqrel", 3),  # fence.acq_rel.gpu alone (plus CCTL.IVALL)
    "local": ("fence_c2_local", 4),  # mbarrier.arrive.shared::cta on its own barrier
}
FENCE_THREADS = 256  # warp 0 lane 0: loader; thread 128 (warpgroup 1): releaser
FENCE_B_ROWS = 256  # the GEMM's B box (256 x 64 fp16 = 32 KiB)
FENCE_SMALL_B_ROWS = 128  # the GEMM's A box: the same bytes in flight as twice as many boxes
FENCE_INFLIGHT = (1, 2, 4)
QUICK_FENCE_INFLIGHT = (2,)
FENCE_LOADS = {"none": 0, "own": 1, "others": 2, "all": 3}  # load_mask: bit 0 pair 0, bit 1 the other pairs
FENCE_RELS = {"pair": 1, "all": 3}  # rel_mask: which CTAs time operations
FENCE_SOURCES = ("l2", "hbm")
FENCE_HBM_BYTES = 1 << 30  # 1 GiB: every block streams its own rows from HBM
FENCE_GAPS = {"gap0": 0, "gap500": 500, "gap1500": 1500, "landed": FENCE_LANDED}
FENCE_SYNC_OPS = ("release", "arrive", "fence_rel")
FENCE_STREAM_GAPS = (500, 1500, 3000)  # fence_gap rows: cycles the releaser spins between operations (a k-step's work)
QUICK_FENCE_STREAM_GAPS = (1500,)
FENCE_STREAM_ITERS = 512  # timed operations per block and launch (about 0.4 ms at 1400 cycles)
FENCE_SYNC_ITERS = 256
QUICK_FENCE_ITERS = 64
FENCE_SKIP_OPS = 16  # the first operations of a launch are left out of the statistics (the loaders' ramp)
FENCE_REPS = 3
FENCE_MAX_FAILURES = 3  # consecutive failed fence rows after which the group gives up (a hang costs ~1 s/wait)
FENCE_SAMPLES_KEPT_BLOCKS = 2  # rows with at most this many releasers keep their raw samples in the JSON
FENCE_FLAGS = {1: "an mbarrier wait timed out", 3: "a loader ran past CP_WAIT_LIMIT_CYCLES without its stop signal",
               4: "bad kernel arguments"}

# ----- the suite_diff rows (ringd_c2 and the suite kernel): the probe's ring moved toward wgmma.cu ---------
# must match the #defines of cluster_probe.cu
SD_SUITE_SYNC = 1  # CP_SD_SUITE_SYNC: wgmma.cu's tight try_wait loops, producer threads parked at the cluster barrier
SD_WALK = 2  # CP_SD_WALK: the suite's tile walk on one wave, fresh tiles every kboxes k-steps (HBM + L2 sharing)
SD_TRY_LIMIT = 1 << 20  # CP_SD_TRY_LIMIT
SD_GROUP = "suite_diff"
SD_STREAM_BYTES = 2 << 30  # the walk's tensor: A rows in the first half, B rows in the second, never re-read
SD_WAVE_TM = 12  # tiles along M of the walk's wave (even: a cluster pair shares its B tile); 12 x 11 = 132 blocks
SD_RAGGED_K = 2008  # the suite's ragged K: rows of 4016 B (box rows straddle two 128-byte lines)
SD_ITERS = 2048
SD_REPS = 5
#: name -> (multicast, sd bits, source "l2" | "stream", K of the tensor rows: 4096 or SD_RAGGED_K)
SD_CONFIGS = {
    "sd.l2.own": (0, 0, "l2", TENSOR_COLS),  # = wgmma.c2.s4.c2_own_remote.rel_one (the engine's anchor, 1412)
    "sd.l2.mc": (1, 0, "l2", TENSOR_COLS),  # + the suite's B multicast by rank 0 (= c2_mc_remote)
    "sd.l2.mc.sync": (1, SD_SUITE_SYNC, "l2", TENSOR_COLS),  # + the suite's wait loops and parked producer threads
    "sd.l2.mc.k2008": (1, 0, "l2", SD_RAGGED_K),  # + the ragged shape's 4016-byte rows (L2-resident)
    "sd.stream.own": (0, SD_WALK, "stream", TENSOR_COLS),  # the anchor on the suite's data walk
    "sd.stream.mc": (1, SD_WALK, "stream", TENSOR_COLS),  # + multicast: the suite's loads
    "sd.stream.mc.sync": (1, SD_WALK | SD_SUITE_SYNC, "stream", TENSOR_COLS),  # + the suite's sync code form
    "sd.stream.mc.k2008": (1, SD_WALK, "stream", SD_RAGGED_K),  # the ragged shape's rows, streamed
}
SD_AB_KERNEL = "ringd_ab_c2"  # ringd_c2 with B's row pitch its own (kboxes_b): A and B mid-sector independently
#: name -> (multicast, sd bits, source "l2", A's row pitch k_a, B's row pitch k_b; halves): kernel SD_AB_KERNEL
SD_AB_CONFIGS = {
    "sd.l2.mc.a4096.b4096": (1, 0, "l2", TENSOR_COLS, TENSOR_COLS),  # = sd.l2.mc on ringd_ab_c2 (kernel control)
    "sd.l2.mc.a2008.b4096": (1, 0, "l2", SD_RAGGED_K, TENSOR_COLS),  # A only mid-sector (the suite's Brow shape)
    "sd.l2.mc.a4096.b2008": (1, 0, "l2", TENSOR_COLS, SD_RAGGED_K),  # B only mid-sector
    "sd.l2.mc.a2008.b2008": (1, 0, "l2", SD_RAGGED_K, SD_RAGGED_K),  # = sd.l2.mc.k2008 on ringd_ab_c2
}
#: rows that repeat a SD_CONFIGS row (same kernel, walk and arguments) with the L2 flushed before every launch
#: (warm-up and timed) as the suite_1wave.*.flushed rows are: name -> the SD_CONFIGS row it repeats. The flush is
#: SD_L2_FLUSH (tc_step_parts.trace_config's default flusher: a fill of twice the L2 size, so the L2 is left full of
#: the fill's dirty lines), enqueued after the probe's gate spin, right ahead of the launch.
SD_FLUSHED = {
    "sd.stream.mc.sync.flushed": "sd.stream.mc.sync",  # the streamed walk on an L2 full of dirty lines (the suite's)
    "sd.l2.mc.sync.flushed": "sd.l2.mc.sync",  # the 16 MiB tensor evicted: first reads from HBM, then L2 re-reads
}
SD_L2_FLUSH = "validation.harness.timing.L2Flusher"
SD_SUITE_LABEL = "wgmma_fp16_Bcol_128x256x64_swz_s4_c2_cl2"
#: the suite kernel itself (wgmma.cu with TC_TRACE 2, validation/studies/tc_step_parts.py) on one wave of 132
#: blocks (12 x 11 tiles of 128 x 256): name -> (M, N, K, L2 flushed before each launch)
SD_SUITE_RUNS = {
    "suite_1wave.k4096.flushed": (12 * 128, 11 * 256, 4096, True),  # one 4096^3 tile's K, cold L2 (the suite)
    "suite_1wave.k2048.flushed": (12 * 128, 11 * 256, 2048, True),
    "suite_1wave.k2048.warm": (12 * 128, 11 * 256, 2048, False),  # A + B 17 MiB: L2-resident after warm-up
}

ONE_BLOCK_SMEM_BYTES = 120 * 1024  # > half of the 228 KiB an SM has (H100 whitepaper): one block per SM
MAX_BLOCK_SMEM_BYTES = 227 * 1024  # the most shared memory one block may opt in to (CUDA C++ guide, cc 9.0)
STATIC_SMEM_BYTES = 1024  # ptxas -v of cluster_probe.cu: the mbarriers, padded by the 1024-aligned extern array
SMEM_ALIGN_PAD_BYTES = 1024  # the kernels align the ring to 1024 bytes (128-byte swizzle atom)
GATE_SPIN_CYCLES = 200_000  # about 100 us at 2 GHz: covers the host's enqueueing of the timed launch


# ----- pure helpers ------------------------------------------------------------------------------------
def ring_smem_bytes(stages: int, b_rows: int, a_rows: int = A_ROWS) -> int:
    """Dynamic shared memory of a ring launch: S stages of A + B boxes, the alignment pad, at least
    ONE_BLOCK_SMEM_BYTES (one block per SM). ValueError naming stages when it does not fit."""
    if not 1 <= stages <= MAX_STAGES:
        raise ValueError(f"stages = {stages}: must be in 1..{MAX_STAGES} (CP_MAX_STAGES mbarriers)")
    ring = stages * (a_rows + b_rows) * BOX_ROW_BYTES + SMEM_ALIGN_PAD_BYTES
    if ring + STATIC_SMEM_BYTES > MAX_BLOCK_SMEM_BYTES:
        raise ValueError(f"stages = {stages} with boxes of {a_rows} + {b_rows} rows: {ring} bytes of ring exceed "
                         f"{MAX_BLOCK_SMEM_BYTES - STATIC_SMEM_BYTES} bytes of shared memory per block")
    return max(ONE_BLOCK_SMEM_BYTES, ring)


def ring_configs(quick: bool = False) -> list[dict]:
    """Every ring configuration: b_rows x stages x spin x mode (the c1 row first in each group)."""
    return [{"b_rows": b, "stages": s, "spin": sp, "mode": m}
            for b in (QUICK_B_ROWS if quick else B_ROWS) for s in STAGES
            for sp in (QUICK_SPINS if quick else SPINS) for m in MODES]


def wgmma_configs(quick: bool = False) -> list[dict]:
    """Every wgmma-ring configuration: consumers x stages x release x mode (the c1 row first in each group)."""
    return [{"consumers": c, "stages": s, "release": rel, "mode": m}
            for c in (QUICK_WGMMA_CONSUMERS if quick else WGMMA_CONSUMERS) for s in WGMMA_STAGES
            for rel in RELEASES for m in WGMMA_MODES]


def wgmma_name(cfg: dict) -> str:
    return f"wgmma.c{cfg['consumers']}.s{cfg['stages']}.{cfg['mode']}.rel_{cfg['release']}"


def ring_name(cfg: dict) -> str:
    return f"ring.b{cfg['b_rows']}.s{cfg['stages']}.spin{cfg['spin']}.{cfg['mode']}"


def parse_records(raw: Sequence[int], blocks: int, idle_blocks: Sequence[int] = ()) -> list[dict]:
    """The per-block records (``REC`` longs each) -> dicts: cycles, ns, smid, rank, a, b, start_ns, count.
    ValueError when the count of values is not ``REC * blocks`` or a block recorded ns <= 0 (except the
    ``idle_blocks``, which do nothing timed: their window can fall within one globaltimer tick)."""
    out = []
    for b, r in enumerate(zip(*record_columns(raw, blocks, REC), strict=True)):
        if r[1] <= 0 and b not in idle_blocks:
            raise ValueError(f"records: block {b} recorded ns = {r[1]} (kernel did not run?)")
        out.append(dict(zip(RECORD_FIELDS, r, strict=True)))
    return out


RECORD_FIELDS = ("cycles", "ns", "smid", "rank", "a", "b", "start_ns", "count")


def compact(recs: list[dict]) -> list[list[int]]:
    """Records as lists in RECORD_FIELDS order (what cluster.json keeps per rep)."""
    return [[r[k] for k in RECORD_FIELDS] for r in recs]


def ring_rep(recs: list[dict], iters: int, b_rows: int, multicast: bool, a_rows: int = A_ROWS) -> dict:
    """One launch of the ring -> its per-rep numbers (medians over blocks). ValueError when a block's
    producer did not complete ``iters`` k-steps."""
    short = [i for i, r in enumerate(recs) if r["count"] != iters]
    if short:
        raise ValueError(f"ring: blocks {short[:8]} completed fewer than iters = {iters} k-steps")
    stage_bytes = (a_rows + b_rows) * BOX_ROW_BYTES
    l2_bytes = a_rows * BOX_ROW_BYTES + b_rows * BOX_ROW_BYTES * (0.5 if multicast else 1.0)
    cps = [r["cycles"] / iters for r in recs]
    by_rank = {}
    for rank in sorted({r["rank"] for r in recs}):
        by_rank[str(rank)] = _median([r["cycles"] / iters for r in recs if r["rank"] == rank])
    ends = [r["start_ns"] + r["ns"] for r in recs]
    c = _median(cps)
    return {"cycles_per_step": c, "cycles_per_step_by_rank": by_rank,
            "cycles_per_step_max": max(cps), "cycles_per_step_min": min(cps),
            "bytes_per_clk_per_sm": stage_bytes / c, "l2_bytes_per_clk_per_sm": l2_bytes / c,
            "empty_wait_per_step": _median([r["a"] / iters for r in recs]),
            "full_wait_per_step": _median([r["b"] / iters for r in recs]),
            "clock_hz": _median([r["cycles"] / (r["ns"] * 1e-9) for r in recs]),
            "concurrent": max(r["start_ns"] for r in recs) < min(ends),
            "distinct_sms": len({r["smid"] for r in recs})}


def _stat(reps: list[dict], key: str, unit: str) -> dict:
    """``unit`` and the summary over reps of ``key``."""
    return {"unit": unit, **summarize([r[key] for r in reps])}


def _reps_tail(reps: list[dict]) -> dict:
    """The last fields of a ring or wgmma row: cycles per step by rank and clock (medians over reps),
    concurrent (every rep), distinct SMs (fewest) and the reps themselves."""
    return {"cycles_per_step_by_rank": {k: _median([r["cycles_per_step_by_rank"][k] for r in reps])
                                        for k in reps[0]["cycles_per_step_by_rank"]},
            "clock_hz": _median([r["clock_hz"] for r in reps]),
            "concurrent": all(r["concurrent"] for r in reps),
            "distinct_sms": min(r["distinct_sms"] for r in reps),
            "runs": reps}


def ring_row(cfg: dict, reps: list[dict], iters: int, grid: int, smem: int) -> dict:
    """The summary of a ring configuration's reps (``reps``: ring_rep dicts plus event_s and records)."""
    kernel, mc, remote = MODES[cfg["mode"]]

    return {**cfg, "kernel": kernel, "multicast": bool(mc), "remote_arrive": bool(remote),
            "cluster": 1 if kernel == "ring_c1" else CLUSTER, "a_rows": A_ROWS, "consumers": CONSUMERS,
            "iters": iters, "grid": grid, "threads": THREADS, "smem_bytes": smem,
            "stage_bytes": (A_ROWS + cfg["b_rows"]) * BOX_ROW_BYTES,
            "unit": "cycles per k-step", **summarize([r["cycles_per_step"] for r in reps]),
            "bytes_per_clk_per_sm": _stat(reps, "bytes_per_clk_per_sm", "bytes/clk/SM"),
            "l2_bytes_per_clk_per_sm": _stat(reps, "l2_bytes_per_clk_per_sm", "bytes/clk/SM asked of L2"),
            "empty_wait_per_step": _stat(reps, "empty_wait_per_step", "producer cycles per k-step"),
            "full_wait_per_step": _stat(reps, "full_wait_per_step", "consumer cycles per k-step"),
            **_reps_tail(reps)}


def add_ratios(ring: dict) -> None:
    """``vs_c1`` on every ring row: its cycles_per_step over the c1 row of the same box, S and spin."""
    for row in ring.values():
        base = ring.get(ring_name({**row, "mode": "c1"}))
        row["vs_c1"] = row["value"] / base["value"] if base and base["value"] > 0 else None


AUX_FIELDS = ("wait_group", "release", "full_wait_wg2", "consumer_count")


def parse_aux(raw: Sequence[int], blocks: int) -> list[dict]:
    """The wgmma rows' second per-block record (``AUX`` longs each) -> dicts of AUX_FIELDS. ValueError when
    the count of values is not ``AUX * blocks``."""
    try:
        cols = record_columns(raw, blocks, AUX)
    except ValueError as exc:
        raise ValueError(f"aux {exc}") from None
    return [dict(zip(AUX_FIELDS, r, strict=True)) for r in zip(*cols, strict=True)]


def wgmma_rep(recs: list[dict], aux: list[dict], iters: int, consumers: int, multicast: bool) -> dict:
    """One launch of the wgmma ring -> ring_rep's numbers plus tensor activity and the consumer's
    wait_group / release / second consumer's full-wait cycles per k-step (medians over blocks). ValueError
    when a block's consumer did not complete ``iters`` k-steps or the records disagree in length."""
    if len(aux) != len(recs):
        raise ValueError(f"wgmma: {len(aux)} aux records for {len(recs)} blocks")
    short = [i for i, x in enumerate(aux) if x["consumer_count"] != iters]
    if short:
        raise ValueError(f"wgmma: consumers of blocks {short[:8]} completed fewer than iters = {iters} k-steps")
    if consumers < 1:
        raise ValueError(f"wgmma: consumers = {consumers}: must be >= 1")
    rep = ring_rep(recs, iters, WG_N, multicast)
    busy = consumers * WG_KSLICES * iters * WGMMA_CYCLES
    rep.update({"tensor_activity": _median([busy / r["cycles"] for r in recs]),
                "wait_group_per_step": _median([x["wait_group"] / iters for x in aux]),
                "release_per_step": _median([x["release"] / max(iters - 1, 1) for x in aux]),
                "full_wait_wg2_per_step": _median([x["full_wait_wg2"] / iters for x in aux])})
    return rep


def wgmma_row(cfg: dict, reps: list[dict], iters: int, grid: int, smem: int) -> dict:
    """The summary of a wgmma-ring configuration's reps (``reps``: wgmma_rep dicts plus event_s, records)."""
    kernel, mc, remote = WGMMA_MODES[cfg["mode"]]

    return {**cfg, "kernel": kernel, "multicast": bool(mc), "remote_arrive": bool(remote),
            "release_all": bool(RELEASES[cfg["release"]]),
            "cluster": 1 if kernel == "ringw_c1" else CLUSTER, "a_rows": A_ROWS, "b_rows": WG_N,
            "instruction": f"wgmma.mma_async m64n{WG_N}k16 f32.f16.f16", "wgmma_per_step": cfg["consumers"] * WG_KSLICES,
            "wgmma_cycles": WGMMA_CYCLES, "iters": iters, "grid": grid, "threads": 128 * (1 + cfg["consumers"]),
            "smem_bytes": smem, "stage_bytes": (A_ROWS + WG_N) * BOX_ROW_BYTES,
            "unit": "cycles per k-step", **summarize([r["cycles_per_step"] for r in reps]),
            "tensor_activity": _stat(reps, "tensor_activity", "wgmma x WGMMA_CYCLES / elapsed cycles per SM"),
            "bytes_per_clk_per_sm": _stat(reps, "bytes_per_clk_per_sm", "bytes/clk/SM"),
            "l2_bytes_per_clk_per_sm": _stat(reps, "l2_bytes_per_clk_per_sm", "bytes/clk/SM asked of L2"),
            "empty_wait_per_step": _stat(reps, "empty_wait_per_step", "producer cycles per k-step"),
            "full_wait_per_step": _stat(reps, "full_wait_per_step", "consumer 1 cycles per k-step"),
            "full_wait_wg2_per_step": _stat(reps, "full_wait_wg2_per_step", "consumer 2 cycles per k-step"),
            "wait_group_per_step": _stat(reps, "wait_group_per_step", "consumer 1 cycles in wait_group(1) per k-step"),
            "release_per_step": _stat(reps, "release_per_step", "consumer 1 cycles in the release per k-step"),
            **_reps_tail(reps)}


def add_wgmma_ratios(rows: dict) -> None:
    """``vs_c1`` on every wgmma row: its cycles_per_step over the c1 row of the same consumers, S, release."""
    for row in rows.values():
        base = rows.get(wgmma_name({**row, "mode": "c1"}))
        row["vs_c1"] = row["value"] / base["value"] if base and base["value"] > 0 else None


def ping_rep(recs: list[dict], iters: int) -> float:
    """Cycles of one hand-off: rank 0's (thread A's) loop cycles / iters / 2."""
    r0 = next((r for r in recs if r["rank"] == 0), None)
    if r0 is None or r0["count"] != iters or r0["cycles"] <= 0:
        raise ValueError(f"ping: rank 0 did not complete iters = {iters} round trips")
    return r0["cycles"] / iters / 2.0


def tma_lat_rep(recs: list[dict], iters: int) -> dict:
    """Rank 0's mean cycles per box (issue -> own completion), its issue -> pair hand-shake, rank 1's own."""
    by = {r["rank"]: r for r in recs}
    if set(by) != {0, 1} or any(r["count"] != iters for r in recs):
        raise ValueError(f"tma_lat: both ranks must complete iters = {iters} boxes")
    return {"own": by[0]["cycles"] / iters, "pair": by[0]["a"] / iters, "rank1_own": by[1]["cycles"] / iters}


# ----- the fence rows: configurations, records, fields (pure) ------------------------------------------
def fence_configs(quick: bool = False) -> list[dict]:
    """Every fence configuration (dicts of kind, op, src, b_rows, inflight, loads, rels, gap, issuer):

    * stream, nothing loading (src "none"): every op, releasers on pair 0 or on every CTA;
    * stream, pair 0 releasing while `inflight` boxes stay in flight on its own SMs, on the other SMs or
      on all: every op x source x inflight;
    * stream, every CTA releasing and loading (the GEMM's situation): release x source x inflight;
    * stream, 128-row boxes on its own SMs (the same bytes as half as many 256-row boxes): release;
    * sync, pair 0 alone: `inflight` fresh boxes issued by the loader thread, then the operation after a
      gap or once they landed: release / arrive / fence_rel x source x inflight x gap; and the same with
      the timed thread issuing its own boxes (issuer self): release, gap0 and landed."""
    ins = QUICK_FENCE_INFLIGHT if quick else FENCE_INFLIGHT
    srcs = FENCE_SOURCES
    ops = ("release", "arrive", "fence_rel") if quick else tuple(FENCE_OPS)
    base = {"kind": "stream", "b_rows": FENCE_B_ROWS, "rels": "pair", "gap": 0, "issuer": "loader"}
    out = [{**base, "op": op, "src": "none", "inflight": 0, "loads": "none", "rels": rels}
           for op in ops for rels in FENCE_RELS]
    out += [{**base, "op": op, "src": src, "inflight": n, "loads": loads}
            for op in ops for src in srcs for n in ins for loads in ("own", "others", "all")]
    out += [{**base, "op": "release", "src": src, "inflight": n, "loads": "all", "rels": "all"}
            for src in srcs for n in ins]
    out += [{**base, "op": "release", "src": src, "inflight": n, "loads": "own", "b_rows": FENCE_SMALL_B_ROWS}
            for src in srcs for n in ins]
    sync = {**base, "kind": "sync", "loads": "own"}
    gaps = ("gap0", "landed") if quick else tuple(FENCE_GAPS)
    out += [{**sync, "op": op, "src": src, "inflight": n, "gap": g}
            for op in FENCE_SYNC_OPS for src in srcs for n in ins for g in gaps]
    out += [{**sync, "op": "release", "src": src, "inflight": n, "gap": g, "issuer": "self"}
            for src in srcs for n in (ins if quick else (1, 4)) for g in ("gap0", "landed")]
    return out


def fence_gap_configs(quick: bool = False) -> list[dict]:
    """The ``fence_gap`` group: stream rows (the loaders keep ``inflight`` boxes in flight without pause) whose
    releaser spins ``gap`` cycles before each operation, as a GEMM's consumer does a k-step's work between two
    releases: release and fence_rel x source x inflight (2, 4) x own / all loading x FENCE_STREAM_GAPS, and
    every CTA releasing and loading (the GEMM's situation) for the release."""
    gaps = QUICK_FENCE_STREAM_GAPS if quick else FENCE_STREAM_GAPS
    ins = QUICK_FENCE_INFLIGHT if quick else (2, 4)
    base = {"kind": "stream", "b_rows": FENCE_B_ROWS, "rels": "pair", "issuer": "loader"}
    out = [{**base, "op": op, "src": src, "inflight": n, "loads": loads, "gap": g}
           for op in ("release", "fence_rel") for src in FENCE_SOURCES for n in ins for loads in ("own", "all")
           for g in gaps]
    out += [{**base, "op": "release", "src": src, "inflight": n, "loads": "all", "rels": "all", "gap": g}
            for src in FENCE_SOURCES for n in ins for g in gaps]
    return out


def fence_name(cfg: dict) -> str:
    """``fence.stream.<op>.<src>.b<rows>.if<N>.load_<who>.rel_<who>`` (``.gap<cycles>`` appended when the
    releaser spins between operations) or ``fence.sync.<op>.<src>.b<rows>.if<N>.<gap>.<issuer>``."""
    head = f"fence.{cfg['kind']}.{cfg['op']}.{cfg['src']}.b{cfg['b_rows']}.if{cfg['inflight']}"
    if cfg["kind"] == "sync":
        return f"{head}.{cfg['gap']}.{cfg['issuer']}"
    tail = f".gap{cfg['gap']}" if cfg.get("gap") else ""
    return f"{head}.load_{cfg['loads']}.rel_{cfg['rels']}{tail}"


def fence_smem_bytes(b_rows: int = FENCE_B_ROWS, iters: int = FENCE_MAX_ITERS) -> int:
    """Dynamic shared memory of a fence launch: the alignment pad, FENCE_SLOTS boxes, the samples, at least
    ONE_BLOCK_SMEM_BYTES. ValueError when it does not fit."""
    need = SMEM_ALIGN_PAD_BYTES + FENCE_SLOTS * b_rows * BOX_ROW_BYTES + 4 * iters
    if need + STATIC_SMEM_BYTES > MAX_BLOCK_SMEM_BYTES:
        raise ValueError(f"fence: {FENCE_SLOTS} boxes of {b_rows} rows and {iters} samples need {need} bytes of "
                         f"shared memory; at most {MAX_BLOCK_SMEM_BYTES - STATIC_SMEM_BYTES}")
    return max(ONE_BLOCK_SMEM_BYTES, need)


def fence_roles(cfg: dict, grid: int) -> tuple[list[int], list[int]]:
    """(releasing blocks, loading blocks) of a fence configuration on ``grid`` blocks (pair 0 = blocks 0, 1)."""
    def blocks(mask: int) -> list[int]:
        return [b for b in range(grid) if mask & (1 if b < CLUSTER else 2)]

    rel = blocks(FENCE_RELS[cfg["rels"]])
    load = blocks(FENCE_LOADS[cfg["loads"]]) if cfg["inflight"] > 0 else []
    if cfg["kind"] == "sync" and cfg["issuer"] == "self":
        load = [b for b in load if b in rel]
    return rel, load


def fence_flag_message(flags: Sequence[int]) -> str | None:
    """What the per-block flags of a fence launch say (None when every flag is 0)."""
    bad = {int(f) for f in flags if int(f)}
    if not bad:
        return None
    blocks = [b for b, f in enumerate(flags) if int(f)]
    return "; ".join(FENCE_FLAGS.get(f, f"flag {f}") for f in sorted(bad)) + f" (blocks {blocks[:8]})"


FENCE_AUX_FIELDS = ("op_cycles", "boxes", "load_start_ns", "load_end_ns", "load_cycles", "land_wait")


def parse_fence_aux(raw: Sequence[int], blocks: int) -> list[dict]:
    """The fence rows' second per-block record (``FENCE_AUX`` longs each) -> dicts of FENCE_AUX_FIELDS."""
    try:
        cols = record_columns(raw, blocks, FENCE_AUX)
    except ValueError as exc:
        raise ValueError(f"fence aux {exc}") from None
    return [dict(zip(FENCE_AUX_FIELDS, r, strict=True)) for r in zip(*cols, strict=True)]


def fence_rep(cfg: dict, recs: list[dict], aux: list[dict], samples: Sequence[int], iters: int, skip: int) -> dict:
    """One fence launch -> its numbers: the timed operations' cycles pooled over the releasing blocks (the
    first ``skip`` of each left out): median, p10, p90, mean; per-block medians; boxes in flight and ns since
    the loader's last issue at each operation (means); the releasers' clock; the loads' bytes/s per loading
    SM (median) and over the GPU (all boxes over the loaders' span); sync rows: cycles from the issue until
    the boxes landed and the releaser's wait for them, per operation; how much of pair 0's timed window
    the loaders covered (the least over loading blocks). ValueError when a releaser did not complete
    ``iters`` operations or the records disagree in length."""
    grid = len(recs)
    if len(aux) != grid or len(samples) != grid * iters:
        raise ValueError(f"fence: {len(aux)} aux records and {len(samples)} samples for {grid} blocks x {iters}")
    if not 0 <= skip < iters:
        raise ValueError(f"fence: skip = {skip}: must be in 0..{iters - 1}")
    rel, load = fence_roles(cfg, grid)
    short = [b for b in rel if recs[b]["count"] != iters]
    if short:
        raise ValueError(f"fence: releasers of blocks {short[:8]} completed fewer than iters = {iters} operations")
    pooled, per_block = [], []
    for b in rel:
        s = [int(v) for v in samples[b * iters + skip:(b + 1) * iters]]
        pooled += s
        per_block.append(_median(s))
    ops = sorted(pooled)
    box = cfg["b_rows"] * BOX_ROW_BYTES
    out = {"op_median": pc.percentile(ops, 50), "op_p10": pc.percentile(ops, 10), "op_p90": pc.percentile(ops, 90),
           "op_mean": sum(ops) / len(ops), "n_ops": len(ops),
           "block_median_min": min(per_block), "block_median_max": max(per_block),
           "inflight_mean": sum(recs[b]["a"] for b in rel) / (iters * len(rel)),
           "age_ns_mean": sum(recs[b]["b"] for b in rel) / (iters * len(rel)),
           "clock_hz": _median([recs[b]["cycles"] / (recs[b]["ns"] * 1e-9) for b in rel]),
           "load_bytes_per_s_per_sm": None, "load_bytes_per_s_gpu": None, "loads_cover_min": None,
           "load_cycles_per_op": None, "land_wait_per_op": None}
    spans = [(aux[b]["load_start_ns"], aux[b]["load_end_ns"], aux[b]["boxes"]) for b in load]
    spans = [s for s in spans if s[1] > s[0]]
    if spans:
        out["load_bytes_per_s_per_sm"] = _median([n * box / ((e - s) * 1e-9) for s, e, n in spans])
        t0, t1 = min(s for s, _, _ in spans), max(e for _, e, _ in spans)
        out["load_bytes_per_s_gpu"] = sum(n for _, _, n in spans) * box / ((t1 - t0) * 1e-9)
        w0 = min(recs[b]["start_ns"] for b in rel if b < CLUSTER)
        w1 = max(recs[b]["start_ns"] + recs[b]["ns"] for b in rel if b < CLUSTER)
        out["loads_cover_min"] = min(max(0, min(e, w1) - max(s, w0)) / max(w1 - w0, 1) for s, e, _ in spans)
    if cfg["kind"] == "sync":
        out["load_cycles_per_op"] = _median([aux[b]["load_cycles"] / iters for b in rel])
        out["land_wait_per_op"] = _median([aux[b]["land_wait"] / iters for b in rel])
    return out


def fence_row(cfg: dict, reps: list[dict], iters: int, skip: int, grid: int, smem: int) -> dict:
    """The summary of a fence configuration's reps (fence_rep dicts plus event_s and the raw records):
    ``value`` etc. = :func:`summarize` over reps of each rep's median operation; ``op_cycles``: the median
    over reps of the pooled median, p10, p90 and mean; the rest medians over reps."""
    kernel, op_id = FENCE_OPS[cfg["op"]]

    def med(key: str):
        vals = [r[key] for r in reps if r.get(key) is not None]
        return _median(vals) if vals else None

    return {**cfg, "kernel": kernel, "op_id": op_id, "cluster": CLUSTER, "grid": grid, "threads": FENCE_THREADS,
            "smem_bytes": smem, "iters": iters, "skip_ops": skip, "box_bytes": cfg["b_rows"] * BOX_ROW_BYTES,
            "inflight_bytes": cfg["inflight"] * cfg["b_rows"] * BOX_ROW_BYTES,
            "gap_cycles": FENCE_GAPS[cfg["gap"]] if cfg["kind"] == "sync" else cfg["gap"],
            "unit": "cycles per timed operation (clock64 around it)", **summarize([r["op_median"] for r in reps]),
            "op_cycles": {"median": med("op_median"), "p10": med("op_p10"), "p90": med("op_p90"),
                          "mean": med("op_mean"), "n_ops_per_rep": reps[0]["n_ops"]},
            "block_median_range": [min(r["block_median_min"] for r in reps), max(r["block_median_max"] for r in reps)],
            "inflight_mean": med("inflight_mean"), "age_ns_mean": med("age_ns_mean"), "clock_hz": med("clock_hz"),
            "load_bytes_per_s_per_sm": med("load_bytes_per_s_per_sm"), "load_bytes_per_s_gpu": med("load_bytes_per_s_gpu"),
            "loads_cover_min": min((r["loads_cover_min"] for r in reps if r.get("loads_cover_min") is not None),
                                   default=None),
            "load_cycles_per_op": med("load_cycles_per_op"), "land_wait_per_op": med("land_wait_per_op"),
            "runs": reps}


def timed_windows(instrs: Sequence[tuple[int, str, str]]) -> list[list[str]]:
    """The mnemonics between each two consecutive ``CS2R <r>, SR_CLOCKLO`` reads of a function (clock64
    pairs: what a timed operation compiled to), in address order."""
    out, cur = [], None
    for _, op, operands in instrs:
        if op.startswith("CS2R") and "SR_CLOCKLO" in operands:
            if cur is not None:
                out.append(cur)
            cur = []
        elif cur is not None:
            cur.append(op)
    return out


def _fit(points: Sequence[tuple[float, float]]) -> tuple[float, float, float]:
    """Least-squares line through (x, y) points: (slope, intercept, rms residual)."""
    n = len(points)
    mx, my = sum(p[0] for p in points) / n, sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    slope = sum((p[0] - mx) * (p[1] - my) for p in points) / sxx if sxx else 0.0
    icpt = my - slope * mx
    rms = (sum((p[1] - icpt - slope * p[0]) ** 2 for p in points) / n) ** 0.5
    return slope, icpt, rms


def release_model_fields(rec: dict, result_path: str = "cluster_fence.json") -> dict:
    """The fields of the engine's cluster-release rule (calibrate.py merges them; field format as
    :func:`fence_fields`):

    * ``cluster_release_fence_cycles``: what the GEMM's release (arrive.release.cluster on the peer) costs
      when bulk loads have passed through its SM since the previous release but it is not held by one still
      arriving: the median over the sync release rows issued by the loader thread (every source, boxes in
      flight, gap; 685-700 cycles whether the boxes landed or not). The stream rows with the SM's own boxes
      in flight end where one of those boxes lands (boxes in flight read 0 right after a release with one
      box streaming), which the engine models by holding the release until the block's bulk loads issued
      before it have landed (tilesim/engine/sim.py); the release with no load at all (280 cycles,
      ``cluster_release_base_cycles``) is not what a GEMM's release sees."""
    rows = rec.get("fence", {})
    date = rec.get("meta", {}).get("date_utc")
    sync = [(name, r) for name, r in sorted(rows.items())
            if r.get("kind") == "sync" and r.get("op") == "release" and r.get("issuer") == "loader"]
    if not sync:
        return {}
    vals = [float(r["value"]) for _, r in sync]
    raw = ", ".join(f"{name.removeprefix('fence.sync.release.')} {float(r['value']):.0f}" for name, r in sync)
    return {"cluster_release_fence_cycles": {
        "value": _median(vals), "unit": "cycles", "n": len(vals), "p10": min(vals), "p90": max(vals),
        "how": f"median over {len(vals)} rows (p10/p90: the least and most)", "date": date,
        "benchmark": f"cluster_probe fence.sync.release.*.loader rows ({result_path}: {raw})"}}


#: the fence stream row with nothing loading anywhere: the release alone
IDLE_RELEASE_ROW = "fence.stream.release.none.b256.if0.load_none.rel_pair"


def release_by_inflight_field(rec: dict, result_path: str = "cluster_fence.json") -> dict:
    """``cluster_release_cycles_by_inflight``: the GEMM's release (arrive.release.cluster on the peer) against
    the copies its SM has in flight while every SM streams L2-resident 256 x 64 boxes and releases (the
    stream rows ``fence.stream.release.l2.b256.if<N>.load_all.rel_pair``): [[boxes in flight, cycles], ...];
    and ``cluster_release_idle_cycles``, the same release with nothing in flight anywhere (IDLE_RELEASE_ROW)."""
    pts, used = [], []
    for name, r in sorted(rec.get("fence", {}).items()):
        m = re.fullmatch(r"fence\.stream\.release\.l2\.b256\.if(\d+)\.load_all\.rel_pair", name)
        if m and r.get("value"):
            pts.append([int(m.group(1)), float(r["value"])])
            used.append(f"if{m.group(1)} {float(r['value']):.0f}")
    if len(pts) < 2:
        return {}
    pts.sort()
    vals = [y for _, y in pts]
    idle = rec.get("fence", {}).get(IDLE_RELEASE_ROW, {}).get("value")
    out = {"cluster_release_idle_cycles": {
        "value": float(idle), "unit": "cycles", "n": 1, "p10": float(idle), "p90": float(idle), "how": "one row",
        "date": rec.get("meta", {}).get("date_utc"),
        "benchmark": f"cluster_probe {IDLE_RELEASE_ROW} ({result_path}: nothing in flight anywhere)"}} if idle else {}
    return {**out, "cluster_release_cycles_by_inflight": {
        "value": pts, "unit": "cycles", "n": len(pts), "p10": min(vals), "p90": max(vals),
        "how": "one point per row (boxes in flight, median release)", "date": rec.get("meta", {}).get("date_utc"),
        "benchmark": f"cluster_probe fence.stream.release.l2.b256.if*.load_all.rel_pair ({result_path}: "
                     f"{', '.join(used)} cycles)"}}


def fence_fields(rec: dict, result_path: str = "cluster_fence.json") -> dict:
    """What a model of the cluster release would take from the fence rows (calibrate.py's field format:
    value, benchmark, n, p10, p90, how, date; only the fields the record has rows for):

    * ``cluster_release_base_cycles``: the GEMM's release (arrive.release.cluster on the peer) with nothing
      in flight anywhere, one pair timing; ``cluster_release_all_sms_cycles``: the same with every CTA
      releasing at once; ``cluster_arrive_default_cycles``, ``cluster_fence_release_gpu_cycles``: the
      default-semantics remote arrive and fence.release.gpu alone, idle GPU;
    * per source (l2, hbm), from the stream rows with the pair's own loads in flight:
      ``cluster_release_cycles_per_inflight_kib_<src>`` (least-squares slope over the 256- and 128-row box
      rows and the base at 0 KiB) and ``cluster_release_cycles_per_inflight_box_<src>`` (the same against
      boxes in flight); each says the rms residual of its fit: the smaller one says which explains the rows;
    * ``cluster_release_cycles_per_gpu_tbps_others_<src>``: the extra cycles over the base per TB/s the
      OTHER SMs load (pair 0 loading nothing), slope through 0;
    * ``cluster_release_own_load_wait_fraction_<src>``: sync rows, (release right after the issue - release
      once the boxes landed) / the cycles the boxes still needed to land: 1 = the release waits for the
      SM's outstanding bulk loads, 0 = it does not (median over inflight; p10/p90 = min/max)."""
    rows = rec.get("fence", {})
    date = rec.get("meta", {}).get("date_utc")
    out: dict = {}

    def row(cfg: dict) -> dict | None:
        return rows.get(fence_name(cfg))

    stream = {"kind": "stream", "b_rows": FENCE_B_ROWS, "rels": "pair", "gap": 0, "issuer": "loader"}
    idle = {**stream, "src": "none", "inflight": 0, "loads": "none"}

    def entry(name: str, r: dict, what: str) -> None:
        out[name] = {"value": float(r["value"]), "unit": "cycles",
                     "benchmark": f"cluster_probe {fence_name({**r})} ({result_path}): {what}",
                     "n": int(r["n"]), "p10": float(r["p10"]), "p90": float(r["p90"]),
                     "how": f"median over reps of the median over {r['op_cycles']['n_ops_per_rep']} operations "
                            f"(operations' p10..p90 {r['op_cycles']['p10']:.0f}..{r['op_cycles']['p90']:.0f})",
                     "date": date}

    base = row({**idle, "op": "release"})
    for name, cfg, what in (("cluster_release_base_cycles", {**idle, "op": "release"}, "release, idle GPU, one pair"),
                            ("cluster_release_all_sms_cycles", {**idle, "op": "release", "rels": "all"},
                             "release, every CTA releasing, no loads"),
                            ("cluster_arrive_default_cycles", {**idle, "op": "arrive"}, "default-semantics remote arrive"),
                            ("cluster_fence_release_gpu_cycles", {**idle, "op": "fence_rel"}, "fence.release.gpu alone")):
        r = row(cfg)
        if r:
            entry(name, r, what)
    if not base:
        return out
    b0 = float(base["value"])
    for src in FENCE_SOURCES:
        pts = []  # (KiB in flight, boxes in flight, cycles, name)
        for b_rows in (FENCE_B_ROWS, FENCE_SMALL_B_ROWS):
            for n in range(1, FENCE_SLOTS + 1):
                r = row({**stream, "op": "release", "src": src, "inflight": n, "loads": "own", "b_rows": b_rows})
                if r:
                    pts.append((n * b_rows * BOX_ROW_BYTES / 1024, n, float(r["value"]), fence_name(r)))
        if pts:
            for unit, i in (("kib", 0), ("box", 1)):
                slope, icpt, rms = _fit([(0.0, b0)] + [(p[i], p[2]) for p in pts])
                per = [(p[2] - b0) / p[i] for p in pts]
                out[f"cluster_release_cycles_per_inflight_{unit}_{src}"] = {
                    "value": slope, "unit": f"cycles per {'KiB' if i == 0 else 'box'} in flight on the SM",
                    "benchmark": f"cluster_probe fence stream release load_own rows ({result_path}: "
                                 + ", ".join(f"{p[3]} {p[2]:.0f}" for p in pts) + f"; base {b0:.0f})",
                    "n": len(pts) + 1, "p10": min(per), "p90": max(per),
                    "how": f"least-squares line with the base at 0: intercept {icpt:.0f}, rms residual {rms:.0f} "
                           "cycles (p10/p90: the least and most single-row slope)", "date": date}
        others = []
        for n in range(1, FENCE_SLOTS + 1):
            r = row({**stream, "op": "release", "src": src, "inflight": n, "loads": "others"})
            if r and r.get("load_bytes_per_s_gpu"):
                others.append((r["load_bytes_per_s_gpu"] / 1e12, float(r["value"]) - b0, fence_name(r)))
        if others:
            sxx = sum(t * t for t, _, _ in others)
            slope = sum(t * c for t, c, _ in others) / sxx if sxx else 0.0
            per = [c / t for t, c, _ in others if t > 0] or [slope]
            out[f"cluster_release_cycles_per_gpu_tbps_others_{src}"] = {
                "value": slope, "unit": "extra cycles per TB/s loaded by the other SMs",
                "benchmark": f"cluster_probe fence stream release load_others rows ({result_path}: "
                             + ", ".join(f"{nm} +{c:.0f} at {t:.2f} TB/s" for t, c, nm in others) + ")",
                "n": len(others), "p10": min(per), "p90": max(per),
                "how": "least-squares slope through 0 of (cycles - base) against the others' TB/s", "date": date}
        fr, used = [], []
        sync = {**stream, "kind": "sync", "loads": "own", "op": "release", "src": src}
        for n in range(1, FENCE_SLOTS + 1):
            now, later = row({**sync, "inflight": n, "gap": "gap0"}), row({**sync, "inflight": n, "gap": "landed"})
            if now and later and later.get("land_wait_per_op"):
                fr.append((float(now["value"]) - float(later["value"])) / float(later["land_wait_per_op"]))
                used.append(f"if{n}: {float(now['value']):.0f} - {float(later['value']):.0f} over "
                            f"{float(later['land_wait_per_op']):.0f}")
        if fr:
            out[f"cluster_release_own_load_wait_fraction_{src}"] = {
                "value": _median(fr), "unit": "fraction of the outstanding load time",
                "benchmark": f"cluster_probe fence sync release rows ({result_path}: {'; '.join(used)})",
                "n": len(fr), "p10": min(fr), "p90": max(fr), "how": "median over inflight", "date": date}
    return out


# ----- the suite_diff group: ringd_c2 moved toward the suite kernel, and the suite kernel on one wave ----------
def sd_geometry(src: str, k: int, grid: int, iters: int, tensor_bytes: int = L2_TENSOR_BYTES) -> dict:
    """ringd_c2's data arguments for source ``src`` ("l2": the probe's tensor of ``tensor_bytes``, read over and
    over; "stream": SD_STREAM_BYTES, the suite's tile walk on a wave of SD_WAVE_TM tiles along M) with rows of
    ``k`` halves: rows, a_tiles, b_tiles, kboxes (box columns per row), tm, tn, b_row_base. ValueError when
    ``k`` holds no box, or the walk of ``iters`` k-steps would come back to tiles it already read."""
    kboxes = k // BOX_COLS
    if kboxes < 1 or (k * ELEM_BYTES) % 16:
        raise ValueError(f"suite_diff: k = {k}: rows must hold a {BOX_COLS}-half box and be 16-byte multiples")
    if src == "l2":
        rows = tensor_bytes // (k * ELEM_BYTES)
        return {"rows": rows, "a_tiles": rows // A_ROWS, "b_tiles": rows // WG_N, "kboxes": kboxes, "tm": 1,
                "tn": 1, "b_row_base": 0}
    if src != "stream":
        raise ValueError(f"suite_diff: source {src!r}: must be 'l2' or 'stream'")
    if SD_WAVE_TM % CLUSTER:
        raise ValueError(f"suite_diff: SD_WAVE_TM = {SD_WAVE_TM} must be a multiple of the cluster ({CLUSTER})")
    rows = SD_STREAM_BYTES // (k * ELEM_BYTES)
    a_tiles = rows // 2 // A_ROWS
    b_row_base = a_tiles * A_ROWS
    b_tiles = (rows - b_row_base) // WG_N
    tn = -(-grid // SD_WAVE_TM)
    rounds = -(-iters // kboxes)
    if rounds * SD_WAVE_TM > a_tiles or rounds * tn > b_tiles:
        raise ValueError(f"suite_diff: {iters} k-steps walk {rounds} rounds of {SD_WAVE_TM} A and {tn} B tiles: more "
                         f"than the {a_tiles} A / {b_tiles} B tiles of the {SD_STREAM_BYTES >> 20} MiB tensor")
    return {"rows": rows, "a_tiles": a_tiles, "b_tiles": b_tiles, "kboxes": kboxes, "tm": SD_WAVE_TM, "tn": tn,
            "b_row_base": b_row_base}


def sd_ab_geometry(src: str, k_a: int, k_b: int, grid: int, iters: int, tensor_bytes: int = L2_TENSOR_BYTES) -> dict:
    """ringd_ab_c2's data arguments: A's rows ``k_a`` halves apart, B's ``k_b`` (two tensor maps over the same
    L2-resident tensor): {"a": sd_geometry of k_a, "b": sd_geometry of k_b}; A's a_tiles and kboxes, B's b_tiles
    and kboxes (kboxes_b) go to the kernel. ValueError for any source but "l2" (the walk has one K)."""
    if src != "l2":
        raise ValueError(f"suite_diff: source {src!r}: the a/b pitch rows run on 'l2' only")
    return {"a": sd_geometry(src, k_a, grid, iters, tensor_bytes), "b": sd_geometry(src, k_b, grid, iters, tensor_bytes)}


def sd_config(name: str) -> tuple[str, int, int, str, int, int]:
    """(kernel, multicast, sd bits, source, k_a, k_b) of a ringd row of SD_CONFIGS, SD_FLUSHED (its SD_CONFIGS
    row's) or SD_AB_CONFIGS."""
    name = SD_FLUSHED.get(name, name)
    if name in SD_CONFIGS:
        mc, sd, src, k = SD_CONFIGS[name]
        return "ringd_c2", mc, sd, src, k, k
    mc, sd, src, k_a, k_b = SD_AB_CONFIGS[name]
    return SD_AB_KERNEL, mc, sd, src, k_a, k_b


def sd_row(name: str, reps: list[dict], iters: int, grid: int, smem: int, geo: dict) -> dict:
    """The summary of a ringd_c2 / ringd_ab_c2 row's reps (wgmma_rep dicts plus event_s and the raw records):
    ``k_a`` / ``k_b`` each operand's row pitch (halves); SD_CONFIGS and SD_FLUSHED rows also ``k`` (both operands'
    pitch); SD_FLUSHED rows also ``l2_flushed`` (True), ``l2_flush`` (SD_L2_FLUSH) and ``repeats`` (their row)."""
    kernel, mc, sd, src, k_a, k_b = sd_config(name)
    pitch = {"k": k_a} if name in SD_CONFIGS or name in SD_FLUSHED else {}
    if name in SD_FLUSHED:
        pitch.update(l2_flushed=True, l2_flush=SD_L2_FLUSH, repeats=SD_FLUSHED[name])
    return {"kernel": kernel, "multicast": bool(mc), "suite_sync": bool(sd & SD_SUITE_SYNC),
            "walk": bool(sd & SD_WALK), "sd": sd, "src": src, **pitch, "k_a": k_a, "k_b": k_b,
            "a_row_bytes": k_a * ELEM_BYTES, "b_row_bytes": k_b * ELEM_BYTES, "geometry": geo, "stages": 4,
            "consumers": CONSUMERS, "release": "one", "a_rows": A_ROWS, "b_rows": WG_N, "iters": iters, "grid": grid,
            "threads": THREADS, "smem_bytes": smem, "unit": "cycles per k-step",
            **summarize([r["cycles_per_step"] for r in reps]),
            "release_per_step": _stat(reps, "release_per_step", "consumer 1 cycles in the release per k-step"),
            "full_wait_per_step": _stat(reps, "full_wait_per_step", "consumer 1 cycles per k-step"),
            "full_wait_wg2_per_step": _stat(reps, "full_wait_wg2_per_step", "consumer 2 cycles per k-step"),
            "empty_wait_per_step": _stat(reps, "empty_wait_per_step", "producer cycles per k-step"),
            "wait_group_per_step": _stat(reps, "wait_group_per_step", "consumer 1 cycles in wait_group(1) per k-step"),
            "tensor_activity": _stat(reps, "tensor_activity", "wgmma x WGMMA_CYCLES / elapsed cycles per SM"),
            **_reps_tail(reps)}


def sd_compact(rows: dict) -> dict:
    """One line for the log: per suite_diff row, cycles per k-step and the release part (ringd rows: step,
    release, full and empty waits; suite rows: tc_step_parts' consumer loop, release, full wait, producer
    empty wait), rounded to the cycle; failed rows say their status."""
    out = {}
    for k, r in rows.items():
        if "parts_per_kstep" in r or "status" in r:
            p = r.get("parts_per_kstep") or {}
            out[k] = ({"step": round(p["consumer_loop"]["value"]), "release": round(p["consumer_release"]["value"]),
                       "full": round(p["consumer_full_wait"]["value"]),
                       "empty": round(p["producer_empty_wait"]["value"])} if p else r.get("status"))
        else:
            out[k] = {"step": round(r["value"]), "release": round(r["release_per_step"]["value"]),
                      "full": round(r["full_wait_per_step"]["value"]), "empty": round(r["empty_wait_per_step"]["value"])}
    return out


# ----- compile (no GPU needed) -----------------------------------------------------------------------
def compile_cubin(workdir: Path, arch: str = ARCH, src: Path = KERNEL_SRC) -> tuple[Path, str]:
    """:func:`probe_common.compile_cubin` of cluster_probe.cu for sm_90a: (cubin, ptxas log)."""
    return pc.compile_cubin(workdir, arch, src)


# ----- GPU side --------------------------------------------------------------------------------------
class _Device:
    """CuPy, the compiled module, the L2-resident tensor and its two tensor maps."""

    def __init__(self, tensor_bytes: int = L2_TENSOR_BYTES):
        import cupy as cp  # noqa: PLC0415

        from validation.families.tc_gemm import tma  # noqa: PLC0415

        self.cp, self.tma = cp, tma
        self.sm_count = pc.device_facts(cp)[0]
        self.stream = cp.cuda.get_current_stream()
        self._tmp = tempfile.TemporaryDirectory()
        built = pc.build_module(cp, KERNEL_SRC, ARCH, Path(self._tmp.name), nvrtc_options=("-std=c++17", f"-arch={ARCH}"))
        self.mod = built.module
        self.compile = {"arch": ARCH, "source": str(KERNEL_SRC.relative_to(REPO_ROOT))}
        if built.compiled_by == "nvcc":
            self.compile.update(compiled_by="nvcc", ptxas_warnings=ptxas_warnings(built.log), ptxas_log=built.log[-4000:])
        else:  # no nvcc: NVRTC through CuPy
            self.compile.update(compiled_by="nvrtc", note=f"{built.error}: compiled by NVRTC")
        self.tensor = cp.zeros(tensor_bytes // ELEM_BYTES, dtype=cp.float16)
        self.rows = self.tensor.size // TENSOR_COLS
        self.maps = {}
        for rows in sorted({A_ROWS, *B_ROWS}):
            args = tma.tiled_args(f"box{rows}", "fp16", self.tensor.data.ptr, (TENSOR_COLS, self.rows),
                                  (TENSOR_COLS * ELEM_BYTES,), (BOX_COLS, rows))
            self.maps[rows] = tma.as_kernel_arg(tma.encode(args))
        self._timer = pc.GatedTimer(cp, self.mod.get_function("cp_spin"), GATE_SPIN_CYCLES)
        self.flag = cp.zeros(self.sm_count, dtype=cp.int32)

    def fill_random(self) -> None:
        """Uniform random fp16 in [-1, 1] (seeded): operands for the wgmma rows."""
        cp = self.cp
        self.tensor[...] = cp.random.RandomState(1).uniform(-1.0, 1.0, self.tensor.size).astype(cp.float16)
        self.stream.synchronize()

    def warm_l2(self) -> None:
        int(self.tensor.view(self.cp.uint32).sum())  # every line read once: L2-resident

    def launch(self, name: str, grid: int, threads: int, smem: int, args: tuple, before=None) -> float:
        """Seconds of one launch between CUDA events, queued behind a spin (the host latency stays out);
        ``before()`` (an L2 flush) runs after the spin, outside the events. RuntimeError when a block's mbarrier
        wait timed out."""
        cp = self.cp
        f = pc.get_kernel(self.mod, name, smem)
        self.flag.fill(0)
        seconds = self._timer.seconds(lambda: f((grid,), (threads,), args, shared_mem=smem), before=before)
        if int(self.flag.max().get()) != 0:
            raise RuntimeError(f"{name}: an mbarrier wait timed out, or (flag 2, ringw) the accumulators were NaN "
                               f"(blocks {cp.nonzero(self.flag)[0].get()[:8]})")
        return seconds


def run_ring(dev: _Device, cfg: dict, iters: int, reps: int) -> dict:
    cp = dev.cp
    kernel, mc, remote = MODES[cfg["mode"]]
    grid = dev.sm_count - dev.sm_count % CLUSTER  # one block per SM, whole clusters
    smem = ring_smem_bytes(cfg["stages"], cfg["b_rows"])
    rec = cp.zeros(REC * grid, dtype=cp.int64)
    a_tiles, b_tiles = dev.rows // A_ROWS, dev.rows // cfg["b_rows"]
    args = (cp.int32(iters), cp.int32(cfg["stages"]), cp.int32(cfg["spin"]), cp.int32(mc), cp.int32(remote), rec,
            dev.flag, dev.maps[A_ROWS], dev.maps[cfg["b_rows"]], cp.int32(A_ROWS), cp.int32(cfg["b_rows"]),
            cp.int32(a_tiles), cp.int32(b_tiles))
    dev.launch(kernel, grid, THREADS, smem, args)  # warm-up
    runs = []
    for _ in range(reps):
        event_s = dev.launch(kernel, grid, THREADS, smem, args)
        recs = parse_records(rec.get(), grid)
        runs.append({**ring_rep(recs, iters, cfg["b_rows"], bool(mc)), "event_s": event_s,
                     "records": compact(recs)})
    return ring_row(cfg, runs, iters, grid, smem)


def run_wgmma(dev: _Device, cfg: dict, iters: int, reps: int) -> dict:
    cp = dev.cp
    kernel, mc, remote = WGMMA_MODES[cfg["mode"]]
    grid = dev.sm_count - dev.sm_count % CLUSTER
    smem = ring_smem_bytes(cfg["stages"], WG_N)
    threads = 128 * (1 + cfg["consumers"])
    rec = cp.zeros(REC * grid, dtype=cp.int64)
    aux = cp.zeros(AUX * grid, dtype=cp.int64)
    args = (cp.int32(iters), cp.int32(cfg["stages"]), cp.int32(mc), cp.int32(remote),
            cp.int32(RELEASES[cfg["release"]]), rec, aux, dev.flag, dev.maps[A_ROWS], dev.maps[WG_N],
            cp.int32(A_ROWS), cp.int32(dev.rows // A_ROWS), cp.int32(dev.rows // WG_N))
    runs = _wgmma_reps(dev, kernel, (grid, threads, smem, args), rec, aux, reps, iters, cfg["consumers"], bool(mc))
    return wgmma_row(cfg, runs, iters, grid, smem)


def _wgmma_reps(dev: _Device, kernel: str, launch: tuple, rec, aux, reps: int, iters: int, consumers: int,
                mc: bool, before=None) -> list[dict]:
    """A warm-up and ``reps`` timed launches of a wgmma ring kernel (``launch``: grid, threads, shared bytes,
    arguments; ``before`` runs ahead of each, as _Device.launch says), each rep's summary (wgmma_rep) with its
    event time, block records and aux words."""
    grid, threads, smem, args = launch
    dev.launch(kernel, grid, threads, smem, args, before=before)  # warm-up
    runs = []
    for _ in range(reps):
        event_s = dev.launch(kernel, grid, threads, smem, args, before=before)
        recs = parse_records(rec.get(), grid)
        auxs = parse_aux(aux.get(), grid)
        runs.append({**wgmma_rep(recs, auxs, iters, consumers, mc), "event_s": event_s,
                     "records": compact(recs), "aux": [[x[f] for f in AUX_FIELDS] for x in auxs]})
    return runs


def _sd_fill_random(cp, t, seed: int) -> None:
    """Uniform random fp16 in [-1, 1] into ``t`` in chunks (the 2 GiB tensor without a float64 temporary)."""
    rs = cp.random.RandomState(seed)
    flat = t.ravel()
    step = 1 << 26
    for i in range(0, flat.size, step):
        n = min(step, flat.size - i)
        flat[i:i + n] = (rs.random_sample(n, dtype=cp.float32) * 2.0 - 1.0).astype(cp.float16)


def run_sd_suite(name: str, reps: int) -> dict:
    """The suite kernel SD_SUITE_LABEL on one wave (validation/studies/tc_step_parts.trace_config: checked
    against float64, then TC_TRACE 2 parts), the L2 flushed before each launch or left warm."""
    import dataclasses  # noqa: PLC0415

    from validation.harness.suite import load_suite  # noqa: PLC0415
    from validation.studies.tc_step_parts import trace_config  # noqa: PLC0415

    m, n, k, flushed = SD_SUITE_RUNS[name]
    base = next((c for c in load_suite("tc_gemm") if c.label == SD_SUITE_LABEL), None)
    if base is None:
        raise ValueError(f"suite_diff: no suite row {SD_SUITE_LABEL}")
    cfg = dataclasses.replace(base, m=m, n=n, k=k)
    r = trace_config(cfg, reps=reps, flusher=None if flushed else (lambda: None))
    return {"label": SD_SUITE_LABEL, "shape": [m, n, k], "l2_flushed": flushed, **r,
            "note": "the suite kernel (wgmma.cu, TC_TRACE 2) on 132 blocks: one wave"}


def run_sd_group(dev: _Device, reps: int, iters: int = SD_ITERS) -> tuple[dict, dict]:
    """Every SD_CONFIGS row on ringd_c2, the SD_AB_CONFIGS rows on ringd_ab_c2, the SD_FLUSHED rows (ringd_c2,
    the L2 flushed by SD_L2_FLUSH before every launch), then the SD_SUITE_RUNS: (rows, errors)."""
    from validation.harness.timing import L2Flusher  # noqa: PLC0415  (the flusher trace_config uses)

    cp, tma = dev.cp, dev.tma
    rows, errors = {}, {}
    grid = dev.sm_count - dev.sm_count % CLUSTER
    smem = ring_smem_bytes(4, WG_N)
    dev.fill_random()
    stream = cp.empty(SD_STREAM_BYTES // ELEM_BYTES, dtype=cp.float16)
    _sd_fill_random(cp, stream, 2)
    tensors = {"l2": (dev.tensor, L2_TENSOR_BYTES), "stream": (stream, SD_STREAM_BYTES)}
    rec = cp.zeros(REC * grid, dtype=cp.int64)
    aux = cp.zeros(AUX * grid, dtype=cp.int64)
    flusher = L2Flusher(cp)
    for name in (*SD_CONFIGS, *SD_AB_CONFIGS, *SD_FLUSHED):
        try:
            kernel, mc, sd, src, k_a, k_b = sd_config(name)
            before = flusher if name in SD_FLUSHED else None
            if name in SD_CONFIGS or name in SD_FLUSHED:
                geo = sd_geometry(src, k_a, grid, iters)
                geo_a = geo_b = geo
            else:
                geo = sd_ab_geometry(src, k_a, k_b, grid, iters)
                geo_a, geo_b = geo["a"], geo["b"]
            t, _ = tensors[src]
            maps = {}
            for box, k, g in ((A_ROWS, k_a, geo_a), (WG_N, k_b, geo_b)):
                a = tma.tiled_args(f"sd_{src}_k{k}_box{box}", "fp16", t.data.ptr, (k, g["rows"]),
                                   (k * ELEM_BYTES,), (BOX_COLS, box))
                maps[box] = tma.as_kernel_arg(tma.encode(a))
            args = (cp.int32(iters), cp.int32(4), cp.int32(mc), cp.int32(sd), rec, aux, dev.flag, maps[A_ROWS],
                    maps[WG_N], cp.int32(A_ROWS), cp.int32(geo_a["a_tiles"]), cp.int32(geo_b["b_tiles"]),
                    cp.int32(geo_a["kboxes"]), cp.int32(geo_a["tm"]), cp.int32(geo_a["tn"]),
                    cp.int32(geo_a["b_row_base"]))
            if kernel == SD_AB_KERNEL:
                args += (cp.int32(geo_b["kboxes"]),)  # kboxes_b: B's box columns per row
            if src == "l2" and before is None:
                dev.warm_l2()
            runs = _wgmma_reps(dev, kernel, (grid, THREADS, smem, args), rec, aux, reps, iters, CONSUMERS, bool(mc),
                               before=before)
            rows[name] = sd_row(name, runs, iters, grid, smem, geo)
        except Exception as exc:  # noqa: BLE001  (recorded; the others still run)
            errors[name] = f"{type(exc).__name__}: {exc}"
    del stream, tensors, flusher
    cp.get_default_memory_pool().free_all_blocks()
    for name in SD_SUITE_RUNS:
        try:
            rows[name] = run_sd_suite(name, reps)
            if rows[name].get("status") != "ok":
                errors[name] = f"{rows[name].get('status')}: {rows[name].get('message')}"
        except Exception as exc:  # noqa: BLE001
            errors[name] = f"{type(exc).__name__}: {exc}"
    return rows, errors


def run_ping(dev: _Device, mode: int, iters: int, reps: int) -> dict:
    cp = dev.cp
    rec = cp.zeros(REC * CLUSTER, dtype=cp.int64)
    args = (cp.int32(iters), cp.int32(mode), rec, dev.flag)
    dev.launch("ping_c2", CLUSTER, 64, 0, args)
    runs = []
    for _ in range(reps):
        dev.launch("ping_c2", CLUSTER, 64, 0, args)
        # the local modes run inside rank 0: rank 1 only waits at the cluster barriers
        recs = parse_records(rec.get(), CLUSTER, idle_blocks=(1,) if mode != PING_MODES["remote"] else ())
        runs.append({"handoff_cycles": ping_rep(recs, iters), "records": compact(recs)})
    return {"kernel": "ping_c2", "mode": mode, "iters": iters, "unit": "cycles per hand-off (round trip / 2)",
            **summarize([r["handoff_cycles"] for r in runs]), "runs": runs}


def run_tma_lat(dev: _Device, b_rows: int, mode: int, iters: int, reps: int) -> dict:
    cp = dev.cp
    rec = cp.zeros(REC * CLUSTER, dtype=cp.int64)
    smem = b_rows * BOX_ROW_BYTES + SMEM_ALIGN_PAD_BYTES
    args = (cp.int32(iters), cp.int32(mode), rec, dev.flag, dev.maps[b_rows], cp.int32(b_rows),
            cp.int32(dev.rows // b_rows))
    dev.launch("tma_lat_c2", CLUSTER, 32, smem, args)
    runs = []
    for _ in range(reps):
        dev.warm_l2()
        dev.launch("tma_lat_c2", CLUSTER, 32, smem, args)
        recs = parse_records(rec.get(), CLUSTER)
        runs.append({**tma_lat_rep(recs, iters), "records": compact(recs)})
    return {"kernel": "tma_lat_c2", "mode": mode, "box": [b_rows, BOX_COLS], "box_bytes": b_rows * BOX_ROW_BYTES,
            "iters": iters, "unit": "cycles per box, issue to own full barrier (rank 0)",
            **summarize([r["own"] for r in runs]),
            "pair_cycles": {"unit": "cycles, issue to pair hand-shake (rank 0)", **summarize([r["pair"] for r in runs])},
            "rank1_cycles": {"unit": "cycles, expect_tx to own full barrier (rank 1)",
                             **summarize([r["rank1_own"] for r in runs])},
            "runs": runs}


class _FenceBuffers:
    """The fence rows' sources: a 16 MiB L2-resident tensor and a 1 GiB one (HBM), each with a tensor map
    per box height (4096 fp16 per row, as the rings')."""

    def __init__(self, dev: _Device):
        cp, tma = dev.cp, dev.tma
        self.cp = cp
        self.tensors, self.maps, self.rows = {}, {}, {}
        for src, nbytes in (("l2", L2_TENSOR_BYTES), ("hbm", FENCE_HBM_BYTES)):
            t = cp.zeros(nbytes // ELEM_BYTES, dtype=cp.float16)
            self.tensors[src], self.rows[src] = t, t.size // TENSOR_COLS
            for b_rows in (FENCE_B_ROWS, FENCE_SMALL_B_ROWS):
                args = tma.tiled_args(f"fence_{src}_box{b_rows}", "fp16", t.data.ptr, (TENSOR_COLS, self.rows[src]),
                                      (TENSOR_COLS * ELEM_BYTES,), (BOX_COLS, b_rows))
                self.maps[src, b_rows] = tma.as_kernel_arg(tma.encode(args))

    def warm_l2(self) -> None:
        int(self.tensors["l2"].view(self.cp.uint32).sum())


def run_fence(dev: _Device, bufs: _FenceBuffers, cfg: dict, iters: int, reps: int) -> dict:
    cp = dev.cp
    kernel, _ = FENCE_OPS[cfg["op"]]
    grid = dev.sm_count - dev.sm_count % CLUSTER  # one block per SM, whole clusters
    smem = fence_smem_bytes(cfg["b_rows"], FENCE_MAX_ITERS)
    skip = min(FENCE_SKIP_OPS, iters // 4)
    src = cfg["src"] if cfg["src"] != "none" else "l2"
    rel, _ = fence_roles(cfg, grid)
    idle = [b for b in range(grid) if b not in rel and b not in fence_roles(cfg, grid)[1]]
    rec = cp.zeros(REC * grid, dtype=cp.int64)
    aux = cp.zeros(FENCE_AUX * grid, dtype=cp.int64)
    samples = cp.zeros(grid * iters, dtype=cp.int32)
    done = cp.zeros(1, dtype=cp.int32)
    gap = FENCE_GAPS[cfg["gap"]] if cfg["kind"] == "sync" else int(cfg["gap"])
    args = (cp.int32(iters), cp.int32(cfg["kind"] == "sync"), cp.int32(gap), cp.int32(cfg["inflight"]),
            cp.int32(FENCE_RELS[cfg["rels"]]), cp.int32(FENCE_LOADS[cfg["loads"]]),
            cp.int32(cfg["issuer"] == "self"), rec, aux, samples, dev.flag, done, bufs.maps[src, cfg["b_rows"]],
            cp.int32(cfg["b_rows"]), cp.int32(bufs.rows[src] // cfg["b_rows"]))
    f = pc.get_kernel(dev.mod, kernel, smem)

    def launch() -> float:
        dev.flag.fill(0)
        done.fill(0)
        rec.fill(0)
        aux.fill(0)
        if src == "l2":
            bufs.warm_l2()
        seconds = dev._timer.seconds(lambda: f((grid,), (FENCE_THREADS,), args, shared_mem=smem))
        msg = fence_flag_message(dev.flag.get().tolist())
        if msg:
            raise RuntimeError(f"{kernel}: {msg}")
        return seconds

    launch()  # warm-up
    runs = []
    for _ in range(reps):
        event_s = launch()
        recs = parse_records(rec.get(), grid, idle_blocks=idle)
        auxs = parse_fence_aux(aux.get(), grid)
        smp = samples.get().tolist()
        rep = fence_rep(cfg, recs, auxs, smp, iters, skip)
        # the releasers' raw records only (the loaders' are summed up in the rep): the JSON stays a few MB
        run = {**rep, "event_s": event_s, "record_blocks": rel, "records": compact([recs[b] for b in rel]),
               "aux": [[auxs[b][k] for k in FENCE_AUX_FIELDS] for b in rel]}
        if len(rel) <= FENCE_SAMPLES_KEPT_BLOCKS:
            run["samples"] = {str(b): smp[b * iters:(b + 1) * iters] for b in rel}
        runs.append(run)
    return fence_row(cfg, runs, iters, skip, grid, smem)


def run_fence_group(dev: _Device, quick: bool, reps: int, configs: Sequence[dict] | None = None) -> tuple[dict, dict]:
    """Every fence configuration (``configs``, default :func:`fence_configs`): (rows, errors). Gives up after FENCE_MAX_FAILURES failed rows in a row
    (each failure may have waited CP_WAIT_LIMIT_CYCLES several times)."""
    rows, errors, failed = {}, {}, 0
    bufs = _FenceBuffers(dev)
    for cfg in fence_configs(quick) if configs is None else configs:
        key = fence_name(cfg)
        if failed >= FENCE_MAX_FAILURES:
            errors[key] = f"skipped: the previous {FENCE_MAX_FAILURES} fence rows failed"
            continue
        iters = QUICK_FENCE_ITERS if quick else FENCE_SYNC_ITERS if cfg["kind"] == "sync" else FENCE_STREAM_ITERS
        try:
            rows[key] = run_fence(dev, bufs, cfg, iters, reps)
            failed = 0
        except Exception as exc:  # noqa: BLE001  (recorded; the others still run)
            errors[key] = f"{type(exc).__name__}: {exc}"
            failed += 1
    del bufs
    return rows, errors


def run_probes(quick: bool = False, only: Sequence[str] = GROUPS, tensor_bytes: int = L2_TENSOR_BYTES) -> dict:
    """The groups ``only`` (default: every group) on the current GPU (JSON-ready): meta, compile, ring, ping,
    tma_lat, wgmma, errors. ValueError naming an unknown group."""
    bad = [g for g in only if g not in GROUPS + EXTRA_GROUPS]
    if bad:
        raise ValueError(f"only = {bad}: groups are {list(GROUPS + EXTRA_GROUPS)}")
    t0 = time.perf_counter()
    meta = pc.collect_metadata()
    dev = _Device(tensor_bytes)
    reps = QUICK_REPS if quick else REPS
    res: dict = {"meta": meta, "compile": dev.compile, "ring": {}, "ping": {}, "tma_lat": {}, "wgmma": {},
                 "fence": {}, SD_GROUP: {}, "errors": {}}
    dev.warm_l2()
    for name, mode in PING_MODES.items() if "ping" in only else ():
        try:
            res["ping"][f"ping.{name}"] = run_ping(dev, mode, PING_ITERS, reps)
        except Exception as exc:  # noqa: BLE001  (recorded; the others still run)
            res["errors"][f"ping.{name}"] = f"{type(exc).__name__}: {exc}"
    for b_rows in B_ROWS if "tma_lat" in only else ():
        for name, mode in LAT_MODES.items():
            key = f"tma_lat.b{b_rows}.{name}"
            try:
                res["tma_lat"][key] = run_tma_lat(dev, b_rows, mode, QUICK_LAT_ITERS if quick else LAT_ITERS, reps)
            except Exception as exc:  # noqa: BLE001
                res["errors"][key] = f"{type(exc).__name__}: {exc}"
    dev.warm_l2()
    for cfg in ring_configs(quick) if "ring" in only else ():
        key = ring_name(cfg)
        try:
            res["ring"][key] = run_ring(dev, cfg, QUICK_RING_ITERS if quick else RING_ITERS, reps)
        except Exception as exc:  # noqa: BLE001
            res["errors"][key] = f"{type(exc).__name__}: {exc}"
    add_ratios(res["ring"])
    if "wgmma" in only:
        dev.fill_random()  # after the other groups: they keep running on zeros
        dev.warm_l2()
        for cfg in wgmma_configs(quick):
            key = wgmma_name(cfg)
            try:
                res["wgmma"][key] = run_wgmma(dev, cfg, QUICK_RING_ITERS if quick else RING_ITERS, reps)
            except Exception as exc:  # noqa: BLE001
                res["errors"][key] = f"{type(exc).__name__}: {exc}"
        add_wgmma_ratios(res["wgmma"])
    if "fence" in only:
        res["fence"], errors = run_fence_group(dev, quick, QUICK_REPS if quick else FENCE_REPS)
        res["errors"].update(errors)
    if "fence_gap" in only:
        rows, errors = run_fence_group(dev, quick, QUICK_REPS if quick else FENCE_REPS, fence_gap_configs(quick))
        res["fence"].update(rows)
        res["errors"].update(errors)
    if SD_GROUP in only:
        res[SD_GROUP], errors = run_sd_group(dev, QUICK_REPS if quick else SD_REPS,
                                             QUICK_RING_ITERS if quick else SD_ITERS)
        res["errors"].update(errors)
    res["meta"].update({"probe_wall_s": time.perf_counter() - t0, "reps": reps, "quick": quick,
                        "sm_count": dev.sm_count, "tensor_bytes": tensor_bytes, "tensor_cols": TENSOR_COLS,
                        "a_rows": A_ROWS, "consumers": CONSUMERS, "record_fields": list(RECORD_FIELDS),
                        "aux_fields": list(AUX_FIELDS), "fence_aux_fields": list(FENCE_AUX_FIELDS),
                        "fence_hbm_bytes": FENCE_HBM_BYTES if {"fence", "fence_gap"} & set(only) else None, "groups": list(only),
                        "wgmma_tensor_data": "uniform random fp16 in [-1, 1]" if "wgmma" in only else None})
    return res


# ----- the table (pure) ------------------------------------------------------------------------------
def format_table(results: dict) -> str:
    lines = [f"{'ring row':38s} {'cyc/step':>9s} {'vs c1':>6s} {'B/clk/SM':>9s} {'L2 B/clk':>9s} "
             f"{'emptyW':>7s} {'fullW':>7s} {'r0/r1':>13s} conc"]
    for k, r in results.get("ring", {}).items():
        ranks = "/".join(f"{v:.0f}" for v in r["cycles_per_step_by_rank"].values())
        vs = f"{r['vs_c1']:.3f}" if r.get("vs_c1") else "-"
        lines.append(f"{k:38s} {r['value']:9.1f} {vs:>6s} {r['bytes_per_clk_per_sm']['value']:9.2f} "
                     f"{r['l2_bytes_per_clk_per_sm']['value']:9.2f} {r['empty_wait_per_step']['value']:7.1f} "
                     f"{r['full_wait_per_step']['value']:7.1f} {ranks:>13s} {'y' if r['concurrent'] else 'n'}")
    if results.get("wgmma"):
        lines.append(f"{'wgmma row':38s} {'cyc/step':>9s} {'vs c1':>6s} {'tensor':>7s} {'emptyW':>7s} "
                     f"{'fullW':>7s} {'fullW2':>7s} {'wgrpW':>7s} {'rel':>6s} {'GHz':>5s} {'r0/r1':>11s} conc")
    for k, r in results.get("wgmma", {}).items():
        ranks = "/".join(f"{v:.0f}" for v in r["cycles_per_step_by_rank"].values())
        vs = f"{r['vs_c1']:.3f}" if r.get("vs_c1") else "-"
        lines.append(f"{k:38s} {r['value']:9.1f} {vs:>6s} {r['tensor_activity']['value']:7.3f} "
                     f"{r['empty_wait_per_step']['value']:7.1f} {r['full_wait_per_step']['value']:7.1f} "
                     f"{r['full_wait_wg2_per_step']['value']:7.1f} {r['wait_group_per_step']['value']:7.1f} "
                     f"{r['release_per_step']['value']:6.1f} {r['clock_hz'] / 1e9:5.2f} {ranks:>11s} "
                     f"{'y' if r['concurrent'] else 'n'}")
    for k, r in results.get("ping", {}).items():
        lines.append(f"{k:38s} {r['value']:9.1f} cycles per hand-off  (p10..p90 {r['p10']:.1f}..{r['p90']:.1f})")
    for k, r in results.get("tma_lat", {}).items():
        lines.append(f"{k:38s} {r['value']:9.1f} cycles issue->own  pair {r['pair_cycles']['value']:.1f}  "
                     f"rank1 {r['rank1_cycles']['value']:.1f}")
    if results.get("fence"):
        lines.append(f"{'fence row':60s} {'cyc/op':>7s} {'p10':>6s} {'p90':>6s} {'inflt':>5s} {'GB/s SM':>8s} "
                     f"{'TB/s GPU':>8s} {'land':>6s} {'cover':>5s} {'GHz':>5s}")
    for k, r in results.get("fence", {}).items():
        def num(v, scale=1.0, fmt="8.1f"):
            return format(v / scale, fmt) if v is not None else "-"
        lines.append(f"{k:60s} {r['value']:7.0f} {r['op_cycles']['p10']:6.0f} {r['op_cycles']['p90']:6.0f} "
                     f"{r['inflight_mean']:5.2f} {num(r['load_bytes_per_s_per_sm'], 1e9):>8s} "
                     f"{num(r['load_bytes_per_s_gpu'], 1e12, '8.2f'):>8s} {num(r['land_wait_per_op'], 1, '6.0f'):>6s} "
                     f"{num(r['loads_cover_min'], 1, '5.2f'):>5s} {r['clock_hz'] / 1e9:5.2f}")
    if results.get(SD_GROUP):
        lines.append(f"{'suite_diff row':38s} {'cyc/step':>9s} {'release':>8s} {'fullW':>7s} {'emptyW':>7s}")
        for k, r in sd_compact(results[SD_GROUP]).items():
            if isinstance(r, dict):
                lines.append(f"{k:38s} {r['step']:9d} {r['release']:8d} {r['full']:7d} {r['empty']:7d}")
            else:
                lines.append(f"{k:38s} {r}")
    for k, e in results.get("errors", {}).items():
        lines.append(f"{k:38s} FAILED: {e}")
    return "\n".join(lines)


def result_file(only: Sequence[str] = GROUPS, tensor_mib: int | None = None) -> str:
    """cluster.json for every group; cluster_<g1>_<g2>.json for a subset (the full file is not overwritten;
    ``--only fence``: cluster_fence.json); ``_<N>mib`` added with a tensor other than the L2-resident default
    (the fence rows bring their own 16 MiB and 1 GiB tensors)."""
    tail = f"_{tensor_mib}mib" if tensor_mib else ""
    if set(only) == set(GROUPS):
        return f"{Path(RESULT_FILE).stem}{tail}.json"
    return f"{Path(RESULT_FILE).stem}_{'_'.join(only)}{tail}.json"


def main(argv: Sequence[str] | None = None) -> int:
    ap = pc.probe_parser("cluster_probe", __doc__.splitlines()[0], RESULT_FILE, "few reps, short launches, fewer configurations")
    ap.add_argument("--only", action="append", choices=GROUPS + EXTRA_GROUPS, default=None,
                    help="run only this group (repeatable); the results then go to cluster_<groups>.json; "
                         f"{', '.join(EXTRA_GROUPS)} only run when named")
    ap.add_argument("--tensor-mib", type=int, default=None,
                    help=f"size of the tensor the rings read, MiB (default {L2_TENSOR_BYTES >> 20}: L2-resident); "
                         "e.g. 1024: every block streams its own rows from HBM")
    args = ap.parse_args(argv)
    if args.tensor_mib is not None and args.tensor_mib < 16:
        ap.error(f"--tensor-mib = {args.tensor_mib}: must be >= 16")
    why = _gpu_missing()
    if why:
        return pc.no_gpu_exit("cluster_probe", why)
    only = tuple(dict.fromkeys(args.only)) if args.only else GROUPS
    res = run_probes(quick=args.quick, only=only,
                     tensor_bytes=(args.tensor_mib << 20) if args.tensor_mib else L2_TENSOR_BYTES)
    path = pc.results_dir(args.out, res["meta"]) / result_file(only, args.tensor_mib)
    pc.write_json(path, res, indent=None)  # one line: the raw records make it large
    print(format_table(res))
    if res.get(SD_GROUP):
        print(json.dumps({SD_GROUP: sd_compact(res[SD_GROUP])}, separators=(",", ":")))
    if res["compile"].get("ptxas_warnings"):
        print("ptxas warnings:\n  " + "\n  ".join(res["compile"]["ptxas_warnings"]))
    print(f"wrote {path} in {res['meta']['probe_wall_s']:.1f} s")
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
