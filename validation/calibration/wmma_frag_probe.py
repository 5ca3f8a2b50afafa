"""What one WMMA fragment load from shared memory costs the SM as tc_gemm.cu issues it (a GPU microbenchmark).

tc_gemm.cu's ``wmma_load_a`` / ``wmma_load_b`` hand inline PTX a generic address, so ptxas emits four generic
4-byte loads (``LD.E``) per 16x16 fragment; each reads 8 rows x 16 bytes of the tile: one shared wavefront at the
suite's 80-byte pitch, but 5-6 distinct 128-byte lines. The engine charges a generic load one L1 request slot
(``l1_requests_per_clk_per_sm``), measured by ``shared_generic_probe`` only for 32 consecutive words (one line).
This probe times the fragment pattern itself (``wmma_frag_probe.cu``), one block per SM on every SM (or two, as
the suite's 2 x 8 warps), each warp ``iters`` trips of 8 fragments (4 row blocks x 2 k-halves of a 64-row slab,
the slab alternating each trip):

=====================  ==========================================================================================
``frag_generic_P``      32 ``ld.f32`` a trip through a generic pointer (LD.E), the fragment pattern at row pitch P
``frag_shared_P``       the same addresses by ``ld.shared.f32`` (LDS): the data stage without the generic path
``frag_ldsm_P``         ``ldmatrix.x4`` of the same 8 fragments (LDSM: what ``.shared`` or the C++ API compile to)
``frag_wmma_ptx_P``     tc_gemm.cu's inline ``wmma.load.a`` on a generic address (4 LD.E a fragment; P != 4)
``frag_generic_cpC_80`` frag_generic_80 plus C = 2 or 4 16-byte cp.async a thread and trip (L2-resident source,
                        wait_group 1 a trip): do LDGSTS and LD.E share one LG path?
``frag_cponly4_80``     those copies (C = 4) alone
``frag_chase_P``        one warp, each lane's next address the word it loaded (LD.E latency, no address
                        arithmetic), ``alone`` or ``loaded`` (beside 15 warps of frag_generic_P trips)
=====================  ==========================================================================================

P (bytes): 4 is the control (32 consecutive words an LD.E: ld_generic32's pattern; for ldmatrix, matrices of
128 consecutive bytes), 64 dense 16-bit rows (4-way bank conflict), 80 the suite's padded rows, 128 every row
on the same banks (8-way), 144 padded tf32 rows. Geometries (:data:`GEOMETRIES`): 8, 16, 32 warps in one block
an SM, and 2 blocks of 8 warps an SM.

Per row: ``warp_loads_per_clk_per_sm`` (warp load instructions of the row's kind per SM clock: per SM, its
blocks' instructions over the SM's own clock64 span; summarised over SMs and repetitions: median, p10, p90),
its inverse ``cycles_per_warp_load``, ``fragments_per_clk_per_sm``, the SM ``clock_hz`` (clock64 over
%globaltimer), ``rep_medians`` and what the addresses are (:func:`load_stats`: distinct 128-byte lines, 32-byte
sectors and bank-conflict wavefronts an instruction). Chase rows: ``cycles_per_hop`` and, loaded, the loaders'
rate. ``sass``: each kernel's loop holds what it claims (32 LD.E, 32 LDS, 8 LDSM, ...; needs cuobjdump).

``python -m validation.calibration.wmma_frag_probe [--out DIR] [--quick] [--profile]`` writes
``DIR/wmma_frag.json`` (default DIR ``validation/results/<gpu>/calibration``). About 5 s of launches (an
estimate from the wavefronts; rows past :data:`GPU_BUDGET_S` of launches are skipped and recorded) plus the nvcc
build, ``--quick`` under 1 s of launches (16 warps and 2 x 8 warps only, 2 repetitions, a quarter of the loads); ``--profile``: the quick rows, each launched once and short, for ``ncu --clock-control none``
(launch order in ``meta.profile_order``). Without a GPU it says so in one line and exits 2.

:func:`fields` gives what the model would take from it: ``generic_shared_load_cycles_by_lines``, [distinct lines
an LD.E touches, cycles an LD.E holds the SM at saturation] from the conflict-free frag_generic rows.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from validation.calibration import probe_common as pc

KERNEL_SRC = Path(__file__).resolve().with_suffix(".cu")
RESULT_FILE = "wmma_frag.json"
ARCH = "sm_90a"

# must match the #defines of wmma_frag_probe.cu
FRAGS = 8  # WFP_FRAGS: fragments a warp loads a trip
LOADS = 32  # WFP_LOADS: 4-byte warp loads a trip (FRAGS x 4)
TILE_BYTES = 24576  # WFP_TILE_BYTES
CP_SLOTS = 1024  # WFP_CP_SLOTS
REC = 6  # WFP_REC: clock start, clock end, ns start, ns end, smid, loader trips

WARP = 32
LINE_BYTES, SECTOR_BYTES, BANKS, BANK_BYTES = 128, 32, 32, 4
PITCHES = (4, 64, 80, 128, 144)
WMMA_PITCHES = (64, 80, 128, 144)  # wmma.load's ldm = P / 2 halves must be a multiple of 8
CP_PITCH = 80
CP_BYTES = 16
SRC_BYTES = 16 * 1024 * 1024  # cp.async source: L2-resident, each block from its own 128 KiB onwards

#: name -> (threads a block, blocks an SM)
GEOMETRIES = {"w8": (256, 1), "w16": (512, 1), "w32": (1024, 1), "b2w8": (256, 2)}
QUICK_GEOMETRIES = ("w16", "b2w8")
CHASE_GEOMETRIES = {"alone": (32, 1), "loaded": (512, 1)}
#: dynamic shared memory a block asks for: over half an SM's 228 KiB for one block an SM, 2 fit but not 3
SMEM_BY_BLOCKS = {1: 120 * 1024, 2: 100 * 1024}

#: fragments an SM loads a launch (all its warps): 2^20 = 4 Mi LD.E, about 2.3 ms at one a clock
FRAGS_PER_SM, QUICK_FRAGS_PER_SM, PROFILE_FRAGS_PER_SM = 1 << 20, 1 << 18, 1 << 16
CHASE_HOPS, QUICK_CHASE_HOPS, PROFILE_CHASE_HOPS = 1 << 16, 1 << 14, 1 << 12
REPS, QUICK_REPS = 5, 2
GPU_BUDGET_S, QUICK_GPU_BUDGET_S = 50.0, 12.0  # rows past this much launch time are skipped (recorded)
#: frag_generic rows with at least this many warps an SM count as saturated (:func:`fields`)
SATURATED_WARPS = 16


@dataclass(frozen=True)
class Kind:
    """A row kind: the kernel name prefix, its loop's SASS op and warp instructions of it a trip, the
    pitches it runs at and the cp.async copies a thread and trip."""

    name: str
    op: str
    instr_per_trip: int
    pitches: tuple[int, ...]
    copies: int = 0


KINDS = {k.name: k for k in (
    Kind("frag_generic", "LD.E", LOADS, PITCHES),
    Kind("frag_shared", "LDS", LOADS, PITCHES),
    Kind("frag_ldsm", "LDSM", FRAGS, PITCHES),
    Kind("frag_wmma_ptx", "LD.E", LOADS, WMMA_PITCHES),
    Kind("frag_generic_cp2", "LD.E", LOADS, (CP_PITCH,), 2),
    Kind("frag_generic_cp4", "LD.E", LOADS, (CP_PITCH,), 4),
    Kind("frag_cponly4", "LDGSTS", 4, (CP_PITCH,), 4),
    Kind("frag_chase", "LD.E", FRAGS, PITCHES),
)}


@dataclass(frozen=True)
class Row:
    """One row: kind, pitch, geometry name, threads a block, blocks an SM."""

    kind: str
    pitch: int
    geometry: str
    threads: int
    blocks_per_sm: int

    @property
    def kernel(self) -> str:
        return f"{self.kind}_{self.pitch}"

    @property
    def key(self) -> str:
        return f"{self.kernel}.{self.geometry}"

    @property
    def warps_per_sm(self) -> int:
        return self.threads // WARP * self.blocks_per_sm


def rows(quick: bool = False) -> list[Row]:
    """Every row, in run order (``quick``: :data:`QUICK_GEOMETRIES` only; chase rows always both)."""
    geoms = {g: GEOMETRIES[g] for g in (QUICK_GEOMETRIES if quick else GEOMETRIES)}
    out = []
    for kind in KINDS.values():
        for p in kind.pitches:
            gs = CHASE_GEOMETRIES if kind.name == "frag_chase" else geoms
            out += [Row(kind.name, p, g, t, b) for g, (t, b) in gs.items()]
    return out


def parse_key(key: str) -> Row:
    """The row of a key such as ``frag_generic_80.w16`` (ValueError when it names no row)."""
    kernel, _, geometry = key.partition(".")
    kind, _, pitch = kernel.rpartition("_")
    geoms = CHASE_GEOMETRIES if kind == "frag_chase" else GEOMETRIES
    if kind not in KINDS or not pitch.isdigit() or int(pitch) not in KINDS[kind].pitches or geometry not in geoms:
        raise ValueError(f"row key {key!r}: want <kind>_<pitch>.<geometry>, kinds {', '.join(KINDS)}")
    return Row(kind, int(pitch), geometry, *geoms[geometry])


def trips(row: Row, frags_per_sm: int, chase_hops: int) -> int:
    """Loop trips a warp runs (the chaser's for chase rows): ``frags_per_sm`` fragments an SM a launch (for
    the copies-only row, the trips of frag_generic at the same geometry)."""
    if row.kind == "frag_chase":
        return max(1, chase_hops // FRAGS)
    return max(1, frags_per_sm // (row.warps_per_sm * FRAGS))


# ----- the addresses (pure) ----------------------------------------------------------------------------------
def lane_base(pitch: int, lane: int) -> int:
    """Lane's byte offset in a fragment (the .cu's lane_base): row lane / 4, bytes 4 (lane % 4); P = 4: 4 lane."""
    return 4 * lane if pitch == 4 else (lane >> 2) * pitch + 4 * (lane & 3)


def j_off(pitch: int, j: int) -> int:
    """Load j (0..3) of a fragment: rows + 8 (j odd), bytes + 16 (j >= 2); P = 4: + 128 j."""
    return 128 * j if pitch == 4 else 8 * pitch * (j & 1) + 16 * (j >> 1)


def f_off(pitch: int, f: int) -> int:
    """Fragment f (0..7) of a slab: row block f / 2 (16 rows), k-half f % 2 (32 bytes); P = 4: 512 f."""
    return 512 * f if pitch == 4 else 16 * pitch * (f >> 1) + 32 * (f & 1)


def slab_bytes(pitch: int) -> int:
    return 4096 if pitch == 4 else 64 * pitch


def lane_addresses(pitch: int, frag: int, j: int, slab: int = 0) -> list[int]:
    """Byte offsets (from the 128-byte aligned tile) of the 32 lanes of load ``j`` of fragment ``frag``."""
    base = slab * slab_bytes(pitch) + f_off(pitch, frag) + j_off(pitch, j)
    return [base + lane_base(pitch, ln) for ln in range(WARP)]


def ldsm_lane_addresses(pitch: int, frag: int, slab: int = 0) -> list[int]:
    """Row addresses of the 32 lanes of fragment ``frag``'s ldmatrix.x4 (matrix = lane / 8)."""
    base = slab * slab_bytes(pitch) + f_off(pitch, frag)
    return [base + (16 * ln if pitch == 4 else (ln & 15) * pitch + 16 * (ln >> 4)) for ln in range(WARP)]


def wavefronts(words: set[int]) -> int:
    """Shared-memory wavefronts to read these distinct 4-byte words: the most words on one bank."""
    return max(Counter(w % BANKS for w in words).values())


def instruction_stats(addrs: Sequence[int], nbytes: int = 4) -> dict:
    """Distinct lines and sectors and the wavefronts of one warp load of ``nbytes`` a lane."""
    words = {(a + b) // BANK_BYTES for a in addrs for b in range(0, nbytes, BANK_BYTES)}
    return {"lines": len({a // LINE_BYTES for a in addrs}), "sectors": len({a // SECTOR_BYTES for a in addrs}),
            "wavefronts": wavefronts(words)}


def load_stats(pitch: int, ldsm: bool = False) -> dict:
    """Mean (and min, max) lines, sectors and wavefronts an instruction over a trip of both slabs: the
    4-byte loads of frag_generic / frag_shared / frag_wmma_ptx, or (``ldsm``) the ldmatrix.x4 (its 4 matrices'
    wavefronts summed, lines and sectors of its 32 rows)."""
    per = []
    for slab in (0, 1):
        for f in range(FRAGS):
            if ldsm:
                rows_ = ldsm_lane_addresses(pitch, f, slab)
                st = instruction_stats(rows_, 16)
                st["wavefronts"] = sum(instruction_stats(rows_[8 * m:8 * m + 8], 16)["wavefronts"] for m in range(4))
                per.append(st)
            else:
                per += [instruction_stats(lane_addresses(pitch, f, j, slab)) for j in range(4)]
    out = {}
    for k in ("lines", "sectors", "wavefronts"):
        vals = [s[k] for s in per]
        out[k] = sum(vals) / len(vals)
        out[f"{k}_min"], out[f"{k}_max"] = min(vals), max(vals)
    return out


# ----- per-launch records -> a row (pure) ---------------------------------------------------------------------
def per_sm(raw: Sequence[int], blocks: int) -> dict[int, dict]:
    """Per SM (smid): its blocks, clock64 span (latest end - earliest start, one clock), %globaltimer span and
    the loader trips summed."""
    c0, c1, g0, g1, sm, extra = pc.record_columns(raw, blocks, REC)
    pc.check_timed_blocks([b - a for a, b in zip(c0, c1, strict=True)], [b - a for a, b in zip(g0, g1, strict=True)])
    by = defaultdict(list)
    for i, s in enumerate(sm):
        by[s].append(i)
    return {s: {"blocks": len(ix), "cycles": max(c1[i] for i in ix) - min(c0[i] for i in ix),
                "ns": max(g1[i] for i in ix) - min(g0[i] for i in ix), "extra": sum(extra[i] for i in ix)}
            for s, ix in by.items()}


def row_result(row: Row, iters: int, launches: Sequence[dict[int, dict]], sm_count: int) -> dict:
    """A row from its launches' :func:`per_sm` records: rates per SM and repetition, summarised."""
    kind = KINDS[row.kind]
    problems = []
    for n, sms in enumerate(launches):
        if len(sms) != sm_count or any(v["blocks"] != row.blocks_per_sm for v in sms.values()):
            problems.append(f"launch {n}: {len(sms)} SMs, blocks an SM {sorted({v['blocks'] for v in sms.values()})}")
    clocks = [v["cycles"] / (v["ns"] * 1e-9) for sms in launches for v in sms.values()]
    out = {"kind": row.kind, "pitch": row.pitch, "geometry": row.geometry, "threads": row.threads,
           "blocks_per_sm": row.blocks_per_sm, "warps_per_sm": row.warps_per_sm, "iters": iters, "reps": len(launches),
           "op": kind.op, "instr_per_trip": kind.instr_per_trip, "copies_per_thread_trip": kind.copies,
           "clock_hz": pc.summarize(clocks), "placement_problems": problems}
    if row.kind == "frag_chase":
        hops = iters * FRAGS
        lat = [v["cycles"] / hops for sms in launches for v in sms.values()]
        out["cycles_per_hop"] = pc.summarize(lat)
        out["rep_medians"] = [pc.median([v["cycles"] / hops for v in sms.values()]) for sms in launches]
        out["addresses"] = load_stats(row.pitch)
        if row.threads > WARP:
            rates = [v["extra"] * LOADS / v["cycles"] for sms in launches for v in sms.values()]
            out["loader_warp_loads_per_clk_per_sm"] = pc.summarize(rates)
        return out
    instr = row.threads // WARP * iters * kind.instr_per_trip  # a block
    rates = [v["blocks"] * instr / v["cycles"] for sms in launches for v in sms.values()]
    out.update({
        "instructions_per_block": instr,
        "warp_loads_per_clk_per_sm": pc.summarize(rates),
        "cycles_per_warp_load": pc.summarize([1.0 / r for r in rates]),
        "rep_medians": [pc.median([v["blocks"] * instr / v["cycles"] for v in sms.values()]) for sms in launches],
    })
    if row.kind != "frag_cponly4":
        frags_per_instr = FRAGS / kind.instr_per_trip
        out["fragments_per_clk_per_sm"] = out["warp_loads_per_clk_per_sm"]["value"] * frags_per_instr
        out["cycles_per_fragment"] = out["cycles_per_warp_load"]["value"] / frags_per_instr
        out["addresses"] = load_stats(row.pitch, ldsm=row.kind == "frag_ldsm")
    if kind.copies:
        per_block_bytes = row.threads * iters * kind.copies * CP_BYTES
        out["cp_bytes_per_clk_per_sm"] = pc.summarize(
            [v["blocks"] * per_block_bytes / v["cycles"] for sms in launches for v in sms.values()])
    return out


# ----- what the model would take (pure) ----------------------------------------------------------------------
def fields(rec: dict, result_path: str = RESULT_FILE) -> dict:
    """``generic_shared_load_cycles_by_lines``: [[distinct 128-byte lines an LD.E touches, cycles an LD.E holds
    the SM at saturation], ...] from the frag_generic rows of bank-conflict-free pitches (one wavefront an
    instruction: P = 4, 80, 144; the conflicted pitches' cost includes their extra wavefronts), lines from the
    lanes' addresses (:func:`load_stats`, mean over a trip), cycles the lowest median over the geometries with
    at least :data:`SATURATED_WARPS` warps an SM. Fewer than two points give no field. Not yet in the engine."""
    best: dict[int, dict] = {}
    for key, r in rec.get("rows", {}).items():
        if r.get("kind") != "frag_generic" or r.get("warps_per_sm", 0) < SATURATED_WARPS:
            continue
        if r.get("placement_problems"):
            continue
        st = load_stats(int(r["pitch"]))
        if st["wavefronts_max"] != 1:
            continue
        c = r["cycles_per_warp_load"]
        if r["pitch"] not in best or c["value"] < best[r["pitch"]]["cyc"]["value"]:
            best[r["pitch"]] = {"key": key, "cyc": c, "lines": st["lines"]}
    if len(best) < 2:
        return {}
    pts = sorted([round(b["lines"], 4), float(b["cyc"]["value"])] for b in best.values())
    chosen = sorted(best.values(), key=lambda b: b["lines"])
    return {"generic_shared_load_cycles_by_lines": {
        "value": pts, "unit": "cycles per warp LD.E",
        "benchmark": (f"wmma_frag_probe frag_generic rows ({result_path}: "
                      + "; ".join(f"{b['key']} {b['lines']:.2f} lines {b['cyc']['value']:.3f} cycles" for b in chosen) + ")"),
        "n": sum(int(b["cyc"]["n"]) for b in chosen),
        "p10": min(float(b["cyc"]["p10"]) for b in chosen), "p90": max(float(b["cyc"]["p90"]) for b in chosen),
        "spread_by_lines": [[round(b["lines"], 4), float(b["cyc"]["p10"]), float(b["cyc"]["p90"])] for b in chosen],
        "how": (f"per conflict-free pitch the geometry (>= {SATURATED_WARPS} warps an SM) with the lowest median "
                "over SMs and repetitions; p10 / p90: the lowest and highest of the chosen rows'"),
        "date": rec.get("meta", {}).get("date_utc")}}


# ----- SASS ------------------------------------------------------------------------------------------------
def kernel_checks() -> dict[str, tuple[str, str]]:
    """``name: (kernel, op)`` for :func:`probe_common.loop_sass_checks`: every kernel and its row kind's op."""
    return {f"{k.name}_{p}": (f"{k.name}_{p}", k.op) for k in KINDS.values() for p in k.pitches}


def expected_counts() -> dict[str, int]:
    """The op count each kernel's hot loop must have (a chase kernel's: its loaders' 32 LD.E)."""
    return {f"{k.name}_{p}": (LOADS if k.name == "frag_chase" else k.instr_per_trip)
            for k in KINDS.values() for p in k.pitches}


def chaser_loop(sass: str, kernel: str) -> dict:
    """The chaser's loop of a chase kernel: the loop body with exactly FRAGS LD.E (mnemonic counts)."""
    bodies = [Counter(b) for b in pc.loop_bodies(pc.function_instructions(sass, kernel))]
    for b in bodies:
        if pc.count_prefix(b, "LD.E") == FRAGS:
            return {"op": "LD.E", "count": FRAGS, "body": dict(b)}
    return {"op": "LD.E", "problem": f"{kernel}: no loop with {FRAGS} LD.E"}


def sass_checks(workdir: Path) -> dict:
    """Per kernel: the hot loop's mnemonic counts, ``ok`` when the op count is the expected one; chase kernels
    also ``<kernel>.chaser``."""
    out = pc.loop_sass_checks(workdir, ARCH, KERNEL_SRC, kernel_checks())
    if "error" in out:
        return out
    want = expected_counts()
    for name, r in out.items():
        r["expected"] = want[name]
        r["ok"] = r.get("count") == want[name]
    try:
        sass = pc.disassemble(next(Path(workdir).glob("*.cubin")))
        for p in PITCHES:
            out[f"frag_chase_{p}.chaser"] = chaser_loop(sass, f"frag_chase_{p}")
    except (RuntimeError, StopIteration) as e:
        out["chaser_error"] = str(e)
    return out


# ----- GPU -------------------------------------------------------------------------------------------------
class _Device:  # pragma: no cover - needs a GPU
    """The compiled module and the buffers."""

    def __init__(self):
        import cupy as cp  # noqa: PLC0415

        self.cp = cp
        self.sm_count, self.arch = pc.device_facts(cp)
        self._tmp = tempfile.TemporaryDirectory(prefix="wmma_frag_probe_")
        built = pc.build_module(cp, KERNEL_SRC, ARCH, Path(self._tmp.name), (f"--gpu-architecture={ARCH}",))
        self.module = built.module
        self.compile = {"compiled_by": built.compiled_by, "arch": ARCH, "ptxas_warnings": pc.ptxas_warnings(built.log),
                        "nvcc_error": built.error}
        self.rec = cp.zeros(2 * self.sm_count * REC, dtype=cp.int64)
        self.out = cp.zeros(1024, dtype=cp.float32)
        self.other = cp.zeros(TILE_BYTES // 4, dtype=cp.float32)
        self.src = cp.zeros(SRC_BYTES // 16 * 4, dtype=cp.float32)
        self.kernels = {}

    def launch(self, row: Row, iters: int) -> tuple[dict[int, dict], float]:
        cp = self.cp
        smem = SMEM_BY_BLOCKS[row.blocks_per_sm]
        if row.kernel not in self.kernels:
            self.kernels[row.kernel] = pc.get_kernel(self.module, row.kernel, smem)
        f = self.kernels[row.kernel]
        blocks = self.sm_count * row.blocks_per_sm
        self.rec[:] = 0
        t0 = time.perf_counter()
        f((blocks,), (row.threads,), (cp.int32(iters), cp.int32(0), self.rec, self.out, self.other, self.src,
                                      cp.int32(SRC_BYTES // 16 - 1)), shared_mem=smem)
        cp.cuda.runtime.deviceSynchronize()
        wall = time.perf_counter() - t0
        raw = self.rec[:blocks * REC].get().tolist()
        if row.kind == "frag_chase" and any(raw[REC * b + 1] == 0 for b in range(blocks)):
            raise RuntimeError("a chase block's buffer crosses a 4 GiB boundary of the generic space")
        return per_sm(raw, blocks), wall


def run_probe(quick: bool = False, profile: bool = False, device=None) -> dict:
    """Every row on the current GPU (JSON-ready): ``rows``, ``errors``, ``sass``, ``compile``, ``meta``, ``fields``
    (``device``: a stand-in for :class:`_Device` with ``sm_count``, ``compile`` and ``launch``, for tests)."""
    t0 = time.perf_counter()
    meta = pc.collect_metadata()
    dev = device or _Device()
    quick = quick or profile
    reps = 1 if profile else (QUICK_REPS if quick else REPS)
    frags = PROFILE_FRAGS_PER_SM if profile else (QUICK_FRAGS_PER_SM if quick else FRAGS_PER_SM)
    hops = PROFILE_CHASE_HOPS if profile else (QUICK_CHASE_HOPS if quick else CHASE_HOPS)
    # under ncu (--profile) each launch is replayed: no budget there
    budget = float("inf") if profile else (QUICK_GPU_BUDGET_S if quick else GPU_BUDGET_S)
    res: dict = {"meta": meta, "compile": dev.compile, "rows": {}, "errors": {}}
    gpu_s, order = 0.0, []
    for row in rows(quick):
        if gpu_s > budget:
            res["errors"][row.key] = f"skipped: {gpu_s:.1f} s of launches past the {budget:.0f} s budget"
            continue
        iters = trips(row, frags, hops)
        try:
            launches = []
            if not profile:
                gpu_s += dev.launch(row, iters)[1]  # warm-up (the copies' source into the L2)
            for _ in range(reps):
                sms, wall = dev.launch(row, iters)
                gpu_s += wall
                launches.append(sms)
            order.append([row.key, row.kernel])
            r = row_result(row, iters, launches, dev.sm_count)
            res["rows"][row.key] = r
            if r["placement_problems"]:
                res["errors"][row.key] = "blocks not placed as asked: " + "; ".join(r["placement_problems"])
        except Exception as exc:  # noqa: BLE001  (recorded; the other rows still run)
            res["errors"][row.key] = f"{type(exc).__name__}: {exc}"
    with tempfile.TemporaryDirectory() as tmp:
        res["sass"] = sass_checks(Path(tmp))
    bad = [k for k, v in res["sass"].items() if isinstance(v, dict) and v.get("ok") is False]
    if bad:
        res["errors"]["sass"] = f"loops without the expected op count: {', '.join(bad)}"
    res["meta"].update(probe_wall_s=time.perf_counter() - t0, launch_wall_s=gpu_s, quick=quick, profile=profile,
                       sm_count=dev.sm_count, reps=reps, frags_per_sm=frags, chase_hops=hops,
                       source=KERNEL_SRC.name, profile_order=order if profile else None)
    res["fields"] = fields(res)
    return res


def format_table(res: dict) -> str:
    """One line a row: rate, cycles per instruction and per fragment, the addresses, the clock."""
    lines = [f"{'row':28s} {'instr/clk/SM':>12s} {'p10':>6s} {'p90':>6s} {'cyc/instr':>9s} {'cyc/frag':>8s} "
             f"{'lines':>5s} {'wavef':>5s} {'GHz':>5s}"]
    for k, r in res.get("rows", {}).items():
        ghz = r["clock_hz"]["value"] / 1e9
        if r["kind"] == "frag_chase":
            extra = r.get("loader_warp_loads_per_clk_per_sm", {}).get("value")
            lines.append(f"{k:28s} chase {r['cycles_per_hop']['value']:7.1f} cycles a hop"
                         + (f", loaders {extra:.3f} LD.E/clk/SM" if extra is not None else "") + f"  {ghz:5.2f}")
            continue
        w = r["warp_loads_per_clk_per_sm"]
        a = r.get("addresses", {})
        lines.append(f"{k:28s} {w['value']:12.3f} {w['p10']:6.3f} {w['p90']:6.3f} {r['cycles_per_warp_load']['value']:9.3f} "
                     f"{r.get('cycles_per_fragment', float('nan')):8.3f} {a.get('lines', float('nan')):5.2f} "
                     f"{a.get('wavefronts', float('nan')):5.2f} {ghz:5.2f}")
    for k, e in res.get("errors", {}).items():
        lines.append(f"ERROR {k}: {e}")
    for k, f in res.get("fields", {}).items():
        lines.append(f"field {k}: {f['value']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = pc.probe_parser("wmma_frag_probe", __doc__.splitlines()[0], RESULT_FILE,
                         f"geometries {', '.join(QUICK_GEOMETRIES)} only, {QUICK_REPS} reps, shorter launches")
    ap.add_argument("--profile", action="store_true",
                    help="the quick rows, each launched once and short (for ncu --clock-control none)")
    a = ap.parse_args(argv)
    why = pc.gpu_missing()
    if why:
        return pc.no_gpu_exit("wmma_frag_probe", why)
    res = run_probe(a.quick, a.profile)
    return pc.write_probe_result(a.out, RESULT_FILE, res, format_table(res))


if __name__ == "__main__":
    sys.exit(main())
