"""TMA issue-to-landing time of a GEMM k-step's pair of boxes (A tile + B tile on one mbarrier), every SM.

``python -m validation.calibration.tma_pair_probe [--only tma_pair|share] [--out DIR] [--quick]`` writes
``<DIR>/tma_pair.json`` (``--only share``: ``tma_pair_share.json``) (default DIR: ``validation/results/<gpu>/calibration``); without a GPU it says so
in one line and exits 2. About 10-20 s of GPU time (module build, 3 GiB of HBM tensors, one warm-up and
:data:`REPS` timed launches of about 0.1-1 ms per row); ``--quick``: :data:`QUICK_REPS` timed launches.

Why: tensor_probe's ``tma`` rows time one box alone (issue to mbarrier completion, one in flight) and
cluster_probe's GEMM-shaped rings time whole k-loops; neither gives the issue-to-landing time of the
PAIR of boxes a wgmma GEMM's k-step loads (A and B on one mbarrier) when every SM loads at once.

The kernel (``tma_pair`` in ``tma_pair_probe.cu``): one block of 32 threads per SM (its dynamic shared
memory leaves room for one), one thread issuing. A ring of ``stages`` slots (1: one pair in flight;
2: a ring of two, as a 2-stage GEMM producer that never waits on a consumer), each slot an A box
(``a_rows`` x 64 fp16, 128-byte swizzle, as the suite's wgmma kernels) and a B box (``b_rows`` x 64)
and one mbarrier expecting both boxes' bytes. The issuing thread reads clock64 just before pair k's
expect_tx and just after its wait for pair k returns: ``lat_cycles`` is that difference (median, p10,
p90 over blocks, iterations after the first ``stages`` and the timed launches); ``first_cycles`` the
first pair's (cold tensor map). Pairs (:data:`PAIRS`): 128x64 + 256x64 (48 KiB), 128x64 + 128x64
(32 KiB), 64x64 + 64x64 (16 KiB). Sources (:func:`walk`):

- ``l2_disjoint``: every block cycles through its own :data:`L2_PERIOD` pairs (132 x 2 x 48 KiB =
  12.4 MiB at most: well inside the L2, as tensor_probe's 16 MiB buffer), read once by a warm-up launch;
- ``l2_same``: every block cycles through the same :data:`L2_PERIOD` pairs;
- ``hbm``: every pair a tile never read before in the run (the blocks of a launch read neighbouring
  tiles at each k, as a GEMM's CTAs do; a cursor moves through 65536 tiles a tensor, 3 GiB for the
  largest pair, so that a tile comes back only after gigabytes of other traffic).

- ``l2_share<G>`` (group ``share``, ``--only share``, written to ``tma_pair_share.json``): the 48 KiB pair on
  every SM, each block's :data:`L2_PERIOD` pairs read by G blocks (blocks b and b + grid / G share them;
  G in :data:`SHARE_G`, dividing the grid): between ``l2_disjoint`` (G 1) and ``l2_same`` (G = grid), as the
  blocks of a GEMM share their A and B tiles.

Grids: 132 blocks (every SM; the SM count the device reports) and 1 (one SM alone; ``l2_same`` is then
``l2_disjoint`` and is left out). Per row also the bytes the blocks loaded per second: ``sm_bytes_per_clk``
(a block's bytes over its clock64 cycles, median over blocks), ``chip_bytes_per_s`` (all bytes over the
launch's CUDA-event time, median over launches; the launch is queued behind a clock64 spin,
probe_common.GatedTimer) and ``sm_clock_hz`` (clock64 over %globaltimer of the blocks). Raw: block 0's
per-pair cycles of the last launch, the event times.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from validation.calibration import probe_common as pc

KERNEL_SRC = Path(__file__).resolve().with_suffix(".cu")
RESULT_FILE = "tma_pair.json"
ARCH = "sm_90a"  # the tensor-map fences need sm_90a (PTX ISA)
GROUPS = ("tma_pair", "share")
#: group "share": GEMM-sized pairs (A 128 x 64, B 256 x 64) on every SM, each pair of tiles read by G blocks
#: (blocks b and b + grid / G share; G divides the H200's 132 SMs), written to SHARE_FILE
SHARE_G = (2, 4, 12, 33, 66)
SHARE_FILE = "tma_pair_share.json"

# must match the #defines of tma_pair_probe.cu (tests/test_tma_pair_probe.py checks that they do)
REC = 4
TILES_X_SHIFT = 6
MAX_STAGES = 2

TMA_COLS = 4096  # halves per row of the tensors (64 boxes of 64 halves a row)
BOX_COLS = 64  # 64 halves = 128 bytes: the 128-byte swizzle's widest box
ROW_BYTES = BOX_COLS * 2
PAIRS = ((128, 256), (128, 128), (64, 64))  # (A rows, B rows) of the boxes
STAGES = (1, 2)
SOURCES = ("l2_disjoint", "l2_same", "hbm")
L2_PERIOD = 2  # pairs each block cycles through from the L2
HBM_TILES = 65536  # tiles of each HBM tensor (B of 256 rows: 2 GiB)
ITERS = 256  # pairs per block per launch
REPS = 3
QUICK_REPS = 1
SPIN_CYCLES = 200_000  # ~0.1 ms at 1.98 GHz: the launch's enqueueing hides behind it
SMEM_ALIGN_PAD_BYTES = 1024
ONE_BLOCK_SMEM_BYTES = 120 * 1024  # more than half of the 227 KiB an SM has: one block per SM


def pair_bytes(a_rows: int, b_rows: int) -> int:
    """Bytes of one pair (ValueError on a box the 2D tensor map refuses)."""
    for r in (a_rows, b_rows):
        if not 1 <= r <= 256 or (r * ROW_BYTES) % 1024:
            raise ValueError(f"box rows {r}: need 1..256 rows and a 1024-byte multiple (swizzle atom)")
    return (a_rows + b_rows) * ROW_BYTES


def smem_bytes(stages: int, a_rows: int, b_rows: int) -> int:
    """Dynamic shared memory of tma_pair: the ring, the alignment pad, the mbarriers; at least
    :data:`ONE_BLOCK_SMEM_BYTES` so that one block runs per SM."""
    if not 1 <= stages <= MAX_STAGES:
        raise ValueError(f"stages must be in 1..{MAX_STAGES}, got {stages}")
    return max(ONE_BLOCK_SMEM_BYTES, stages * pair_bytes(a_rows, b_rows) + SMEM_ALIGN_PAD_BYTES + 8 * stages)


def walk(source: str, grid: int, iters: int, cursor: int = 0) -> dict:
    """The kernel's walk arguments (``base``, ``block_stride``, ``k_stride``, ``period``) and the tiles a
    tensor needs (``total``) for ``source``: pair k of block b is tile (base + b * block_stride + (k %
    period) * k_stride) mod total."""
    if source == "l2_disjoint":
        total = -(-grid * L2_PERIOD // 64) * 64
        return {"base": 0, "block_stride": L2_PERIOD, "k_stride": 1, "period": L2_PERIOD, "total": total}
    if source == "l2_same":
        return {"base": 0, "block_stride": 0, "k_stride": 1, "period": L2_PERIOD, "total": 64}
    if source.startswith("l2_share"):
        g = int(source[len("l2_share"):])
        if g < 1 or grid % g:
            raise ValueError(f"{source}: {g} readers a tile must divide the grid of {grid} blocks")
        return {"base": 0, "block_stride": L2_PERIOD, "k_stride": 1, "period": L2_PERIOD,
                "total": grid // g * L2_PERIOD}
    if source == "hbm":
        if grid * iters > HBM_TILES:
            raise ValueError(f"hbm: {grid} x {iters} tiles a launch exceed the {HBM_TILES} tiles of a tensor")
        return {"base": cursor % HBM_TILES, "block_stride": 1, "k_stride": grid, "period": iters, "total": HBM_TILES}
    raise ValueError(f"source must be one of {SOURCES}, got {source!r}")


def tiles_of(w: dict, block: int, iters: int) -> list[int]:
    """The tiles ``block`` loads (the kernel's rule, in Python)."""
    return [(w["base"] + block * w["block_stride"] + (k % w["period"]) * w["k_stride"]) % w["total"]
            for k in range(iters)]


def rows_plan(sms: int, group: str = "tma_pair") -> list[tuple[int, int, str, int, int]]:
    """(a_rows, b_rows, source, grid, stages) of every row of ``group``, in run order."""
    if group == "share":
        return [(128, 256, f"l2_share{g}", sms, st) for g in SHARE_G if sms % g == 0 for st in STAGES]
    out = []
    for a, b in PAIRS:
        for source in SOURCES:
            for grid in (sms, 1):
                if source == "l2_same" and grid == 1:
                    continue
                for st in STAGES:
                    out.append((a, b, source, grid, st))
    return out


def row_name(a_rows: int, b_rows: int, source: str, grid: int, stages: int) -> str:
    return f"tma_pair.a{a_rows}b{b_rows}.{source}.sms{grid}.s{stages}"


def summarize_row(lat_runs: Sequence[Sequence[int]], rec_runs: Sequence[Sequence[int]], event_s: Sequence[float],
                  blocks: int, iters: int, stages: int, bytes_per_pair: int) -> dict:
    """A row's figures from each launch's per-pair cycles (``blocks`` x ``iters``), per-block records and
    event time. ValueError on counts that do not match or a block that recorded no time."""
    if not lat_runs or len(lat_runs) != len(rec_runs) or len(event_s) != len(lat_runs):
        raise ValueError("summarize_row: need one lat list, record list and event time per launch")
    steady, first, sm_rate, clocks = [], [], [], []
    for lat, rec in zip(lat_runs, rec_runs, strict=True):
        lat = [int(v) for v in lat]
        if len(lat) != blocks * iters:
            raise ValueError(f"lat: {len(lat)} values, expected blocks x iters = {blocks * iters}")
        cycles, ns, _smid, _ = pc.record_columns(rec, blocks, REC)
        pc.check_timed_blocks(cycles, ns)
        for b in range(blocks):
            row = lat[b * iters:(b + 1) * iters]
            first.append(row[0])
            steady.extend(row[stages:] or row)
        sm_rate.extend(iters * bytes_per_pair / c for c in cycles)
        clocks.extend(pc.block_clocks_hz(cycles, ns))
    total_bytes = blocks * iters * bytes_per_pair
    lat_s = pc.summarize(steady)
    clk = pc.summarize(clocks)
    return {"lat_cycles": lat_s, "lat_ns": lat_s["value"] / clk["value"] * 1e9, "first_cycles": pc.summarize(first),
            "sm_bytes_per_clk": pc.summarize(sm_rate),
            "chip_bytes_per_s": {"unit": "bytes/s", **pc.summarize([total_bytes / t for t in event_s])},
            "sm_clock_hz": clk, "bytes_per_launch": total_bytes}


def format_table(res: dict) -> str:
    lines = [f"{'row':44s} {'lat clk':>8s} {'p10..p90':>13s} {'first':>7s} {'B/clk/SM':>9s} {'TB/s':>7s}"]
    for name, r in res.get("rows", {}).items():
        s = r["lat_cycles"]
        lines.append(f"{name:44s} {s['value']:8.0f} {s['p10']:6.0f}..{s['p90']:<6.0f} {r['first_cycles']['value']:7.0f} "
                     f"{r['sm_bytes_per_clk']['value']:9.1f} {r['chip_bytes_per_s']['value'] / 1e12:7.3f}")
    for k, e in res.get("errors", {}).items():
        lines.append(f"{k:44s} FAILED: {e}")
    return "\n".join(lines)


# ----- GPU side ------------------------------------------------------------------------------------------
def run_tma_pair(cp, module, sms: int, reps: int, group: str = "tma_pair") -> tuple[dict, dict]:
    import numpy  # noqa: PLC0415

    from validation.calibration.tensor_probe import encode_tensor_map_2d  # noqa: PLC0415

    timer = pc.GatedTimer(cp, module.get_function("pr_spin"), SPIN_CYCLES)
    rec = cp.zeros(REC * sms, dtype=cp.int64)
    lat = cp.zeros(sms * ITERS, dtype=cp.int32)
    flag = cp.zeros(sms, dtype=cp.float32)
    rows, errors, raw = {}, {}, {}
    plan = rows_plan(sms, group)
    for a_rows, b_rows in PAIRS:
        tensors: dict[str, tuple] = {}
        cursor = 0
        try:
            for src in dict.fromkeys(p[2] for p in plan if p[:2] == (a_rows, b_rows)):
                total = walk(src, sms, ITERS)["total"]
                maps = []
                for r in (a_rows, b_rows):
                    t_rows = -(-total // 64) * r
                    t = cp.ones(t_rows * TMA_COLS, dtype=cp.float16)
                    m = encode_tensor_map_2d(t.data.ptr, TMA_COLS, t_rows, BOX_COLS, r)
                    maps.append((t, cp.asarray(numpy.frombuffer(m, dtype=numpy.uint8))))
                tensors[src] = (maps, total)
        except Exception as exc:  # noqa: BLE001
            errors[f"tma_pair.a{a_rows}b{b_rows}"] = f"{type(exc).__name__}: {exc}"
            continue
        pb = pair_bytes(a_rows, b_rows)
        for a, b, src, grid, st in plan:
            if (a, b) != (a_rows, b_rows):
                continue
            name = row_name(a, b, src, grid, st)
            try:
                (ta, ma), (tb, mb) = tensors[src][0]
                smem = smem_bytes(st, a, b)
                f = pc.get_kernel(module, "tma_pair", smem)
                lat_runs, rec_runs, times = [], [], []
                for rep in range(reps + 1):  # launch 0: warm-up (the L2 sources' tiles into the L2)
                    w = walk(src, grid, ITERS, cursor)
                    if src == "hbm":
                        cursor += grid * ITERS
                    args = (cp.int32(ITERS), cp.int32(st), rec, flag, lat, ma, mb, cp.int32(a), cp.int32(b),
                            cp.int32(w["total"]), cp.int32(w["base"]), cp.int32(w["block_stride"]),
                            cp.int32(w["k_stride"]), cp.int32(w["period"]))
                    flag.fill(0)
                    secs = timer.seconds(lambda f=f, grid=grid, smem=smem, args=args:
                                         f((grid,), (32,), args, shared_mem=smem))
                    if float(flag[:grid].sum().get()) > 0:
                        raise RuntimeError("an mbarrier wait timed out (a TMA never landed)")
                    if rep:
                        lat_runs.append(lat[:grid * ITERS].get().tolist())
                        rec_runs.append(rec[:REC * grid].get().tolist())
                        times.append(secs)
                r = summarize_row(lat_runs, rec_runs, times, grid, ITERS, st, pb)
                r.update(a_box=[a, BOX_COLS], b_box=[b, BOX_COLS], pair_bytes=pb, dtype="fp16", swizzle="128B",
                         source=src, grid=grid, stages=st, iters=ITERS, launches=reps, smem_bytes=smem,
                         walk={k: v for k, v in walk(src, grid, ITERS).items() if k != "base"},
                         kernel=pc.kernel_attributes(f))
                rows[name] = r
                raw[name] = {"event_s": times, "block0_lat_cycles": lat_runs[-1][:ITERS]}
            except Exception as exc:  # noqa: BLE001 - one failed row must not lose the others
                errors[name] = f"{type(exc).__name__}: {exc}"
        del tensors
        cp.get_default_memory_pool().free_all_blocks()
    return {"rows": rows, "raw": raw}, errors


def run_probe(quick: bool = False, only: Sequence[str] | None = None) -> dict:
    import cupy as cp  # noqa: PLC0415

    t0 = time.time()
    meta = pc.collect_metadata()
    sms, _ = pc.device_facts(cp)
    tmp = tempfile.TemporaryDirectory()
    built = pc.build_module(cp, KERNEL_SRC, ARCH, Path(tmp.name), nvrtc_options=(f"--gpu-architecture={ARCH}",))
    compile_info = {"arch": ARCH, "compiled_by": built.compiled_by,
                    "ptxas_warnings": pc.ptxas_warnings(built.log) if built.log else [], "note": built.error,
                    "sass": pc.loop_sass_checks(Path(tmp.name), ARCH, KERNEL_SRC, {"tma_pair": ("tma_pair", "UTMALDG")})}
    reps = QUICK_REPS if quick else REPS
    res: dict = {"meta": meta, "compile": compile_info, "sm_count": sms, "groups": list(only or GROUPS),
                 "rows": {}, "raw": {}, "errors": {}}
    for group in (only or ("tma_pair",)):
        out, errs = run_tma_pair(cp, built.module, sms, reps, group)
        res["rows"].update(out["rows"])
        res["raw"].update(out["raw"])
        res["errors"].update(errs)
    tmp.cleanup()
    res["meta"]["quick"] = bool(quick)
    res["meta"]["probe_wall_s"] = time.time() - t0
    return res


def main(argv: Sequence[str] | None = None) -> int:
    ap = pc.probe_parser("tma_pair_probe", __doc__.splitlines()[0], RESULT_FILE,
                         f"{QUICK_REPS} timed launch a row instead of {REPS}")
    ap.add_argument("--only", default=None, help=f"comma-separated groups ({', '.join(GROUPS)})")
    args = ap.parse_args(argv)
    try:
        only = pc.parse_groups(args.only, GROUPS)
    except ValueError as exc:
        ap.error(str(exc))
    why = pc.gpu_missing()
    if why:
        return pc.no_gpu_exit("tma_pair_probe", why)
    if only and "share" in only and len(only) > 1:
        ap.error("--only share is written to its own file: run it alone")
    res = run_probe(quick=args.quick, only=only)
    name = SHARE_FILE if only == ["share"] or only == ("share",) else RESULT_FILE
    return pc.write_probe_result(args.out, name, res, format_table(res), indent=None)


if __name__ == "__main__":
    sys.exit(main())
