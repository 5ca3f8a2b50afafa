"""What one 16-byte cp.async.cg (LDGSTS.E.BYPASS.128) warp copy costs the SM's shared pipe, by lane layout (H200).

Nsight Compute counts ``smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ldgsts`` per LDGSTS of 4.3
(one 512-byte global row into 512 contiguous swizzled shared bytes), 4.7 (2 rows x 256 B), 7.3 (8 rows x 64 B
into tc_gemm's 128-byte XOR swizzle) and 13.3 (8 rows x 64 B into tc_gemm's padded 80-byte rows); the model
charges a constant a copy. This probe (kernel ``lg_copy`` of ``ldgsts_layout_probe.cu``) has every warp of
every block copy one fixed pattern over and over (:data:`COPIES` copies a batch, commit_group, wait_group
:data:`WAIT`) from a 40 MiB L2-resident buffer into the block's dynamic shared memory, no two warps of the grid
reading the same byte (:func:`cg_layout`: each warp owns its own copy positions, each position's footprint in
its own 128-byte-aligned column of its own band of the buffer, so the L2 cannot merge requests of different
SMs; a warp cycles through its positions; the bases keep the pattern's line alignment). The pattern, per lane
i of 32: ``rows`` R, P = 32 / R chunks of 16 B a row, row r = i // P, chunk c = i % P; global offset
r * global_pitch + c * 16; shared offset r * shared_pitch + swz(r, c) * 16 (``swz``: tc_gemm's 128-byte XOR,
``shared_address`` of tilesim/kernels/tc_gemm/lower.py, for dense rows). Row keys
``lg_r<R>_p<shared_pitch>[_swz][_g<global_pitch>][_ca][_b2]``; ``lg_off``: every copy predicated off (the
loop's own cost); ``_ca``: cp.async.ca (LDGSTS.E.128) from a 64 KiB L1-resident source (the global side out
of the way); ``_b2``: 2 blocks of 8 warps per SM (else 1).

Per row: ``cycles_per_copy`` (per SM and rep: the SM's longest block span / the warp copies of its blocks;
value = median over SMs and reps, p10, p90), ``net_cycles_per_copy`` (minus the control of the same
geometry), ``facts`` (:func:`pattern_facts`: distinct global sectors / lines read, shared sectors / lines
written, (global line, shared line) pairs, shared sectors of each lane pair), registers and ``sass`` (the hot
loop's LDGSTS per batch, ``@!PT`` padding left out), ``source`` (the source bytes and, for cg rows, the
:func:`cg_layout` with ``disjoint_windows`` true). ``meta.src_bytes`` / ``meta.src_windows_disjoint`` say the same.

``python -m validation.calibration.ldgsts_layout_probe [--out DIR] [--quick]`` writes ``ldgsts_layout.json``;
``--profile``: each row launched once, short (for ``ncu --clock-control none``), order in
``meta.profile_order``, written to ``ldgsts_layout_profile.json``; ``--merge-ncu FILE``: adds the per-row
wavefronts and sectors per LDGSTS of an ``ncu --csv`` output of that run to ``ldgsts_layout.json`` (no GPU).
Without a GPU (and no --merge-ncu) it says so in one line and exits 2.
"""

from __future__ import annotations

import csv
import io
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from validation.calibration import probe_common as pc
from validation.calibration.probe_common import count_prefix, summarize

KERNEL_SRC = Path(__file__).resolve().with_suffix(".cu")
RESULT_FILE = "ldgsts_layout.json"
PROFILE_FILE = "ldgsts_layout_profile.json"
ARCH = "sm_90a"
REC, COPIES, WAIT, SLOT_BYTES, BASE_STEP = 4, 4, 2, 2048, 1536  # LG_* of the .cu
WARPS, THREADS = 8, 256
CHUNK, SECTOR, LINE, SPAN = 16, 32, 128, 128
SRC_BYTES = {False: 40 << 20, True: 64 << 10}  # cg: L2-resident (disjoint per-warp windows); ca: L1-resident
SMEM_BYTES = {1: 120 * 1024, 2: WARPS * COPIES * SLOT_BYTES}  # blocks per SM -> dynamic shared bytes
REPS, QUICK_REPS = 5, 2
TARGET_S, QUICK_TARGET_S = 5e-3, 1e-3
FIRST_ITERS, MAX_ITERS, PROFILE_ITERS = 64, 1 << 22, 256
GATE_SPIN_CYCLES = 200_000
METRIC_WAVEFRONTS = "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ldgsts.sum"
METRIC_INST = "smsp__inst_executed_op_ldgsts.sum"
METRIC_SECTORS = "sm__sass_l1tex_t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_bypass.sum"
NCU_METRICS = (METRIC_WAVEFRONTS, METRIC_INST, METRIC_SECTORS)


@dataclass(frozen=True)
class Row:
    """One pattern: ``rows`` R (32 / R chunks a row), ``shared_pitch`` and ``global_pitch`` bytes, ``swz``
    (tc_gemm's 128-byte XOR), ``active`` (False: the control), ``ca`` (cp.async.ca), ``blocks_per_sm``."""

    rows: int
    shared_pitch: int
    swz: bool = False
    global_pitch: int = 4096
    active: bool = True
    ca: bool = False
    blocks_per_sm: int = 1

    def __post_init__(self) -> None:
        if self.rows not in (1, 2, 4, 8, 16, 32) or self.shared_pitch % CHUNK or self.shared_pitch < self.row_bytes:
            raise ValueError(f"{self}: rows must divide 32, shared pitch >= row bytes and a multiple of 16")
        if self.swz and self.shared_pitch != self.row_bytes:
            raise ValueError(f"{self}: the swizzle is for dense rows only")
        if self.extent > SLOT_BYTES or self.blocks_per_sm not in SMEM_BYTES:
            raise ValueError(f"{self}: extent {self.extent} > {SLOT_BYTES} or blocks per SM not 1 / 2")

    @property
    def row_bytes(self) -> int:
        return 32 // self.rows * CHUNK

    @property
    def extent(self) -> int:
        return (self.rows - 1) * self.shared_pitch + self.row_bytes

    @property
    def key(self) -> str:
        if not self.active:
            return "lg_off" + ("_b2" if self.blocks_per_sm == 2 else "")
        return (f"lg_r{self.rows}_p{self.shared_pitch}" + ("_swz" if self.swz else "")
                + (f"_g{self.global_pitch}" if self.global_pitch != 4096 else "") + ("_ca" if self.ca else "")
                + ("_b2" if self.blocks_per_sm == 2 else ""))

    @property
    def kernel(self) -> str:
        return "lg_copy_ca" if self.ca else "lg_copy"

    @property
    def smem_bytes(self) -> int:
        return SMEM_BYTES[self.blocks_per_sm]

    def lanes(self) -> list[tuple[int, int]]:
        """(global offset, shared offset) of each lane's 16-byte chunk."""
        per = 32 // self.rows
        out = []
        for i in range(32):
            r, c = divmod(i, per)
            if self.swz:  # tc_gemm lower.shared_address, swizzled branch
                chunks = max(1, min(self.row_bytes, SPAN) // CHUNK)
                high, low = divmod(c, chunks)
                low ^= (r // max(1, SPAN // self.row_bytes)) % chunks
                c_s = high * chunks + low
            else:
                c_s = c
            out.append((r * self.global_pitch + c * CHUNK, r * self.shared_pitch + c_s * CHUNK))
        return out


def _rows() -> tuple[Row, ...]:
    out = [Row(1, 512, active=False)]
    for r in (1, 2, 4, 8, 16, 32):
        out.append(Row(r, 32 // r * CHUNK))
        if r <= 16:
            out.append(Row(r, 32 // r * CHUNK, swz=True))
    out += [Row(8, p) for p in (80, 96, 112, 128, 144)]
    out += [Row(4, p) for p in (144, 160)] + [Row(2, 272)]
    out += [Row(8, 64, global_pitch=4016), Row(8, 64, swz=True, global_pitch=4016), Row(8, 80, global_pitch=4016)]
    out += [Row(1, 512, ca=True), Row(2, 256, ca=True), Row(8, 64, swz=True, ca=True), Row(8, 80, ca=True)]
    out += [Row(1, 512, active=False, blocks_per_sm=2), Row(1, 512, blocks_per_sm=2), Row(8, 64, blocks_per_sm=2),
            Row(8, 80, blocks_per_sm=2)]
    return tuple(out)


ROWS = _rows()
PROFILE_ORDER = tuple(r.key for r in ROWS)


def pattern_facts(row: Row) -> dict:
    """What one warp copy of ``row`` touches (offsets from a 512-aligned global base and the slot start)."""
    lanes = row.lanes() if row.active else []
    g = [a for a, _ in lanes]
    s = [b for _, b in lanes]
    pairs = [lanes[i:i + 2] for i in range(0, len(lanes), 2)]
    return {"rows": row.rows, "row_bytes": row.row_bytes, "shared_pitch": row.shared_pitch,
            "global_pitch": row.global_pitch, "swizzled": row.swz, "active_lanes": len(lanes),
            "global_sectors": len({a // SECTOR for a in g}), "global_lines": len({a // LINE for a in g}),
            "shared_sectors": len({b // SECTOR for b in s}), "shared_lines": len({b // LINE for b in s}),
            "line_pairs": len({(a // LINE, b // LINE) for a, b in lanes}),
            "sector_pairs": len({(a // SECTOR, b // SECTOR) for a, b in lanes}),
            "lane_pair_shared_sectors": [len({b // SECTOR for _, b in p}) for p in pairs],
            "lane_octet_shared_lines": [len({b // LINE for _, b in lanes[i:i + 8]}) for i in range(0, len(lanes), 8)],
            "shared_offsets": s, "global_offsets": g}


def cg_layout(row: Row, total_warps: int, src_bytes: int = SRC_BYTES[False]) -> dict:
    """Where the warps of an ``lg_copy`` (cg) launch read: ``band`` bytes (the pattern's rows x global pitch,
    rounded up to 512), ``cols`` columns (a power of two) of ``col`` bytes (a line multiple, >= a pattern row,
    cols x col <= the global pitch) a band; warp gw owns positions t = gw + total_warps * j, j < ``npos``, base
    (t // cols) * band + (t % cols) * col. ``bytes_used``: bands spanned; <= ``src_bytes``."""
    col = max(LINE, -(-row.row_bytes // LINE) * LINE)
    cols = 1 << ((row.global_pitch // col).bit_length() - 1)
    band = -(-row.rows * row.global_pitch // 512) * 512
    npos = (src_bytes // band * cols) // total_warps
    if npos < 1:
        raise ValueError(f"{row.key}: {src_bytes} source bytes hold no position for each of {total_warps} warps")
    return {"col": col, "cols": cols, "col_log2": cols.bit_length() - 1, "band": band, "npos": npos,
            "total_warps": total_warps, "bytes_used": -(-total_warps * npos // cols) * band, "src_bytes": src_bytes}


def warp_bases(layout: dict, gw: int) -> list[int]:
    """The global bases (from the source start) of warp ``gw``'s copy positions under ``layout``."""
    tw, cols = layout["total_warps"], layout["cols"]
    return [(t // cols) * layout["band"] + (t % cols) * layout["col"]
            for t in (gw + tw * j for j in range(layout["npos"]))]


# ----- SASS (no GPU needed) -------------------------------------------------------------------------------
def loop_sass(sass: str, kernel: str) -> dict:
    """The hot loop (backward branch body with the most LDGSTS) of ``kernel``, ``@!PT`` padding left out:
    ``histogram``, ``batches_per_body`` (LDGDEPBAR count), ``ldgsts_per_batch``, ``instructions_per_batch``."""
    body = pc.loop_body(sass, kernel, "LDGSTS")
    batches = max(1, count_prefix(body, "LDGDEPBAR"))
    return {"histogram": dict(sorted(body.items())), "batches_per_body": batches,
            "ldgsts_per_batch": count_prefix(body, "LDGSTS") / batches,
            "ldgsts_ops": sorted(op for op in body if op.startswith("LDGSTS")),
            "instructions_per_batch": sum(body.values()) / batches}


def check_sass(sass: str) -> dict:
    """{kernel: loop_sass + ``ok`` (COPIES LDGSTS a batch, BYPASS for lg_copy only)}."""
    out = {}
    for kernel in ("lg_copy", "lg_copy_ca"):
        try:
            s = loop_sass(sass, kernel)
        except ValueError as e:
            out[kernel] = {"ok": False, "problem": str(e)}
            continue
        bypass = all(".BYPASS" in op for op in s["ldgsts_ops"])
        out[kernel] = {**s, "ok": s["ldgsts_per_batch"] == COPIES and bypass == (kernel == "lg_copy")}
    return out


# ----- records, rows, ncu (pure) --------------------------------------------------------------------------
def per_sm_cycles_per_copy(raw: Sequence[int], blocks: int, iters: int) -> tuple[list[float], dict]:
    """Per SM: its longest block span / the warp copies of its blocks; and (clock_hz, blocks_per_sm_seen,
    distinct_sms)."""
    cycles, ns, smids, _ = pc.record_columns(raw, blocks, REC)
    pc.check_timed_blocks(cycles, ns)
    per_sm: dict[int, list[int]] = {}
    for s, c in zip(smids, cycles, strict=True):
        per_sm.setdefault(s, []).append(c)
    vals = [max(cs) / (len(cs) * WARPS * iters * COPIES) for cs in per_sm.values()]
    return vals, {"clock_hz": pc.median(pc.block_clocks_hz(cycles, ns)),
                  "blocks_per_sm_seen": max(len(cs) for cs in per_sm.values()), "distinct_sms": len(per_sm)}


def parse_ncu_csv(text: str, order: Sequence[str]) -> dict:
    """``ncu --csv --metrics ...`` output (one launch per row, in ``order``) -> {row: {metric values,
    ``wavefronts_per_ldgsts``, ``sectors_per_ldgsts``}}; ValueError when the launch count differs."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise ValueError("no ncu CSV header (a line starting with \"ID\")")
    launches: dict[int, dict] = {}
    for r in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        try:  # lines that are not metric rows (the probe's own output) are skipped
            v = float((r.get("Metric Value") or "").replace(",", ""))
            int(r["ID"])
        except (ValueError, TypeError):
            continue
        launches.setdefault(int(r["ID"]), {})[r["Metric Name"]] = v
    if len(launches) != len(order):
        raise ValueError(f"{len(launches)} launches for {len(order)} rows")
    out = {}
    for key, i in zip(order, sorted(launches), strict=True):
        m = launches[i]
        inst = m.get(METRIC_INST, 0.0)
        out[key] = {"ncu": m, "ldgsts_inst": inst,
                    "wavefronts_per_ldgsts": m[METRIC_WAVEFRONTS] / inst if inst and METRIC_WAVEFRONTS in m else None,
                    "sectors_per_ldgsts": m[METRIC_SECTORS] / inst if inst and METRIC_SECTORS in m else None}
    return out


def merge_ncu(result_path: Path, csv_path: Path) -> dict:
    """Add :func:`parse_ncu_csv` fields (``ncu`` key) to each row of a results file; returns the file's data."""
    res = json.loads(Path(result_path).read_text())
    order = res.get("meta", {}).get("profile_order") or list(PROFILE_ORDER)
    for key, v in parse_ncu_csv(Path(csv_path).read_text(), order).items():
        res.setdefault("rows", {}).setdefault(key, {})["ncu"] = v
    res.setdefault("meta", {})["ncu_csv"] = str(csv_path)
    pc.write_json(Path(result_path), res)
    return res


def format_table(res: dict) -> str:
    lines = [f"{'row':26s} {'cyc/copy':>8s} {'p10':>7s} {'p90':>7s} {'net':>7s} {'gsec':>4s} {'ssec':>4s} "
             f"{'sline':>5s} {'pairs':>5s} {'blk':>3s} {'wf/inst':>7s}"]
    for k, r in res.get("rows", {}).items():
        if "cycles_per_copy" not in r:
            continue
        c, f = r["cycles_per_copy"], r["facts"]
        wf = (r.get("ncu") or {}).get("wavefronts_per_ldgsts")
        lines.append(f"{k:26s} {c['value']:8.2f} {c['p10']:7.2f} {c['p90']:7.2f} {r.get('net_cycles_per_copy') or 0:7.2f} "
                     f"{f['global_sectors']:4d} {f['shared_sectors']:4d} {f['shared_lines']:5d} {f['line_pairs']:5d} "
                     f"{r['blocks_per_sm_seen']:3d} {'' if wf is None else f'{wf:7.2f}'}")
    lines += [f"ERROR {k}: {e}" for k, e in res.get("errors", {}).items()]
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
        self.mod = built.module
        self.compile = pc.compile_record(built, KERNEL_SRC, ARCH)
        self.sass = check_sass(built.sass) if built.sass else {}
        self.src = {ca: cp.random.randint(0, 256, n, dtype=cp.uint8) for ca, n in SRC_BYTES.items()}  # random data, as the suites use
        self.rec = cp.zeros(REC * 2 * self.sm_count, dtype=cp.int64)
        spin = cp.RawKernel(
            r'extern "C" __global__ void lg_spin(long long n){long long c=clock64();while(clock64()-c<n){}}', "lg_spin")
        self._timer = pc.GatedTimer(cp, spin, GATE_SPIN_CYCLES)

    def launcher(self, row: Row):
        cp = self.cp
        f = pc.get_kernel(self.mod, row.kernel, row.smem_bytes)
        grid = row.blocks_per_sm * self.sm_count
        lanes = row.lanes()
        goff = cp.asarray([a for a, _ in lanes], dtype=cp.int32)
        soff = cp.asarray([b for _, b in lanes], dtype=cp.int32)
        src = self.src[row.ca]
        lay = cg_layout(row, grid * WARPS, src.size if not row.ca else SRC_BYTES[False])

        def launch(iters: int) -> None:
            f((grid,), (THREADS,), (cp.int32(iters), self.rec, src, cp.int64(src.size - 1), goff, soff,
                                    cp.int32(int(row.active)), cp.int32(lay["npos"]), cp.int32(lay["col_log2"]),
                                    cp.int32(lay["col"]), cp.int32(lay["band"])), shared_mem=row.smem_bytes)

        return f, grid, launch

    def run_row(self, row: Row) -> tuple[list[float], list[dict], int, dict]:
        cp = self.cp
        f, grid, launch = self.launcher(row)
        launch(FIRST_ITERS)  # warm-up (and the L2 / L1 fill)
        cp.cuda.Device().synchronize()
        iters = pc.size_iters(lambda it: self._timer.seconds(lambda: launch(it)), FIRST_ITERS, self.target_s,
                              MAX_ITERS, 3)
        vals, reps = [], []
        for _ in range(self.reps):
            s = self._timer.seconds(lambda: launch(iters))
            v, info = per_sm_cycles_per_copy(self.rec[:REC * grid].get(), grid, iters)
            vals += v
            reps.append({**info, "median": pc.median(v), "event_s": s})
        return vals, reps, iters, {**pc.kernel_attributes(f), "grid": grid, "smem_bytes": row.smem_bytes}


def _source_info(row: Row, grid: int) -> dict:
    if row.ca:
        return {"bytes": SRC_BYTES[True], "disjoint_windows": False, "base_step": BASE_STEP}
    return {**cg_layout(row, grid * WARPS), "bytes": SRC_BYTES[False], "disjoint_windows": True}


def run_probe(quick: bool = False, profile: bool = False) -> dict:
    t0 = time.perf_counter()
    meta = pc.collect_metadata()
    dev = _Device(QUICK_REPS if quick else REPS, QUICK_TARGET_S if quick else TARGET_S)
    res: dict = {"meta": meta, "compile": dev.compile, "sass": dev.sass, "rows": {}, "errors": {}}
    for k, s in dev.sass.items():
        if not s.get("ok"):
            res["errors"][k + ".sass"] = "the hot loop does not hold COPIES LDGSTS a batch of the claimed kind"
    for row in ROWS:
        try:
            if profile:
                _, grid, launch = dev.launcher(row)
                launch(PROFILE_ITERS)
                dev.cp.cuda.Device().synchronize()
                res["rows"][row.key] = {"facts": pattern_facts(row), "iters": PROFILE_ITERS, "grid": grid,
                                        "source": _source_info(row, grid)}
                continue
            vals, reps, iters, info = dev.run_row(row)
            res["rows"][row.key] = {
                "kernel": row.kernel, "blocks_per_sm": row.blocks_per_sm, "facts": pattern_facts(row),
                "cycles_per_copy": summarize(vals), "rep_medians": [r["median"] for r in reps],
                "blocks_per_sm_seen": max(r["blocks_per_sm_seen"] for r in reps),
                "distinct_sms": min(r["distinct_sms"] for r in reps),
                "clock_hz": pc.median([r["clock_hz"] for r in reps]), "event_s": [r["event_s"] for r in reps],
                "iters": iters, "reps": dev.reps, "copies_per_iter": COPIES, **info,
                "source": _source_info(row, info["grid"])}
        except Exception as exc:  # noqa: BLE001  (recorded, the others still run)
            res["errors"][row.key] = f"{type(exc).__name__}: {exc}"
    for row in ROWS:
        r, ctl = res["rows"].get(row.key), res["rows"].get("lg_off" + ("_b2" if row.blocks_per_sm == 2 else ""))
        if r and ctl and "cycles_per_copy" in r and "cycles_per_copy" in ctl:
            r["net_cycles_per_copy"] = r["cycles_per_copy"]["value"] - ctl["cycles_per_copy"]["value"]
    res["meta"].update(probe_wall_s=time.perf_counter() - t0, quick=quick, profile=profile, sm_count=dev.sm_count,
                       target_kernel_s=dev.target_s, reps=dev.reps, profile_order=list(PROFILE_ORDER),
                       copies_per_batch=COPIES, wait_group=WAIT, warps_per_block=WARPS,
                       src_bytes={"cg": SRC_BYTES[False], "ca": SRC_BYTES[True]},
                       src_windows=("cg rows: disjoint per-warp windows (no byte read by two warps of the grid; "
                                    "cg_layout); ca rows: every warp steps through one shared L1-resident source"),
                       src_windows_disjoint={"cg": True, "ca": False})
    return res


def main(argv: Sequence[str] | None = None) -> int:
    ap = pc.probe_parser("ldgsts_layout_probe", __doc__.splitlines()[0], RESULT_FILE,
                         f"{QUICK_REPS} reps and launches of about {QUICK_TARGET_S * 1e3:g} ms")
    ap.add_argument("--profile", action="store_true",
                    help=f"each row launched once ({PROFILE_ITERS} batches) for ncu; writes {PROFILE_FILE}")
    ap.add_argument("--merge-ncu", metavar="FILE", default=None,
                    help=f"add the per-row ncu counters of FILE (ncu --csv of a --profile run) to {RESULT_FILE}")
    a = ap.parse_args(argv)
    if a.merge_ncu:
        path = (Path(a.out) if a.out else pc.RESULTS_ROOT / "h200" / "calibration") / RESULT_FILE
        res = merge_ncu(path, Path(a.merge_ncu))
        print(format_table(res))
        print(f"merged {a.merge_ncu} into {path}")
        return 0
    why = pc.gpu_missing()
    if why:
        return pc.no_gpu_exit("ldgsts_layout_probe", why)
    res = run_probe(a.quick, a.profile)
    return pc.write_probe_result(a.out, PROFILE_FILE if a.profile else RESULT_FILE, res, format_table(res))


if __name__ == "__main__":
    sys.exit(main())
