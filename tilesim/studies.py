"""The source document's own GEMM numbers as studies: its figure, the analytic count, the simulator.

The source document (``shared/seeds/000_...txt``, "Tiling Strategies") argues with a handful of
numbers: the naive 4096^3 GEMM reads 137 GB from HBM, 41 ms at 3.35 TB/s, against about 3.4 ms
tiled; a T x T tile reuses every element T times (R = T); larger tiles trade reuse for shared
memory, registers and occupancy; double buffering hides the ~600-cycle load latency; production
kernels tile twice, a 128x128 block tile in shared memory and an 8x8 tile per thread in registers.

Each study here puts one of those claims beside the closed-form count
(:mod:`tilesim.kernels.gemm.analytic`, :mod:`tilesim.analytic`) and the simulator's prediction for
real configurations of the ``gemm`` family (its blind register estimate, as a user gets it), and,
where the caller passes measurements, beside the measured value of the same configuration.

Pure functions: no I/O. A study returns a :class:`StudyResult` (rows of plain values, one summary
line per figure it states). ``measured`` maps ``(label, m, n, k)`` to a dict with any of
``time_s``, ``dram_read_bytes``, ``dram_write_bytes``, ``l2_load_bytes`` (what the SMs read from
L2), ``smem_wavefronts`` and ``regs_per_thread``; the command line (``tilesim study``) reads it from
the validation suite's recorded results when they exist for the GPU. Figures:
:mod:`tilesim.study_figures`; the command: :mod:`tilesim.cli.study`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tilesim.analytic.occupancy import occupancy
from tilesim.analytic.waves import waves
from tilesim.api import simulate
from tilesim.hardware import HardwareSpec
from tilesim.kernels.gemm.analytic import gemm_traffic, naive_gemm_reads, tiled_gemm_reads_elements
from tilesim.kernels.gemm.config import GemmConfig, check_fits

# ----- the source document's figures (shared/seeds/000_4053235d2749810b.txt) -----------------------
SEED_SHAPE = (4096, 4096, 4096)
#: "Total: 4096^2 x 2 x 4096 = 137 billion bytes from HBM" (one byte per element read)
SEED_NAIVE_BYTES = 137e9
#: "At 3.35 TB/s" (the H100 SXM datasheet rate)
SEED_HBM_BYTES_PER_S = 3.35e12
#: "that's 41 ms"
SEED_NAIVE_TIME_S = 41e-3
#: "far slower than the 3.4 ms achievable with tiling" (no tile size or derivation given)
SEED_TILED_TIME_S = 3.4e-3
#: "Load latency (~600 cycles) is hidden behind compute"
SEED_LOAD_LATENCY_CYCLES = 600
#: "Thread block tile ... (128x128)", "Per-thread tile ... in registers (8x8)"
SEED_BLOCK_TILE = 128
SEED_THREAD_TILE = 8

Measured = Mapping[tuple, Mapping[str, float]]


@dataclass(frozen=True)
class StudyResult:
    """One study's table: ``rows`` (dicts over ``columns``, ``None`` where a value does not apply),
    and ``summary``, one line per figure the study states."""

    name: str
    title: str
    hardware: str  # the GPU's display name
    shape: tuple[int, int, int]
    columns: tuple[str, ...]
    rows: tuple[dict, ...]
    summary: tuple[str, ...]

    @property
    def shape_str(self) -> str:
        return "x".join(map(str, self.shape))


@dataclass(frozen=True)
class Study:
    name: str
    title: str
    run: Callable[..., StudyResult]


# ----- helpers --------------------------------------------------------------------------------------
def _shape(shape) -> tuple[int, int, int]:
    try:
        m, n, k = (int(x) for x in shape)
    except (TypeError, ValueError):
        raise ValueError(f"shape = {shape!r}: must be three positive integers (m, n, k)") from None
    if min(m, n, k) < 1:
        raise ValueError(f"shape = {shape!r}: must be three positive integers (m, n, k)")
    return m, n, k


def _cfg(shape, **knobs) -> GemmConfig:
    m, n, k = shape
    return GemmConfig(m, n, k, **knobs)


def broken_limits(cfg: GemmConfig, hw: HardwareSpec) -> str:
    """Every hardware limit ``cfg`` breaks on ``hw``, in words ("" when it launches)."""
    out = []
    if cfg.threads > hw.max_threads_per_block:
        out.append(f"threads per block {cfg.threads} > {hw.max_threads_per_block}")
    if cfg.smem_bytes > hw.smem_per_block_optin_bytes:
        out.append(f"shared memory per block {cfg.smem_bytes / 1024:g} KiB > "
                   f"{hw.smem_per_block_optin_bytes / 1024:g} KiB")
    if cfg.estimated_regs > hw.max_regs_per_thread:
        out.append(f"registers per thread {cfg.estimated_regs} > {hw.max_regs_per_thread}")
    if not out:
        try:
            check_fits(cfg, hw)
        except ValueError as e:
            out.append(str(e))
    return "; ".join(out)


def _sim(cfg: GemmConfig, hw: HardwareSpec):
    """The prediction, or None for a configuration that breaks a limit."""
    return None if broken_limits(cfg, hw) else simulate(cfg, hw)


def _meas(measured: Measured | None, cfg: GemmConfig | str, shape, key: str):
    if not measured:
        return None
    label = cfg if isinstance(cfg, str) else cfg.label
    value = measured.get((label, *shape), {}).get(key)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _ratio(a, b):
    return a / b if a is not None and b else None


def tile_reuse(bm: int, bn: int) -> float:
    """The document's reuse factor generalised to bm x bn tiles: naive reads over tiled reads,
    ``2 / (1/bm + 1/bn)`` (the harmonic mean; ``T`` for a square T x T tile)."""
    return 2.0 / (1.0 / bm + 1.0 / bn)


def _fmt_ms(t_s) -> str:
    return "-" if t_s is None else f"{t_s * 1e3:.2f} ms"


# ----- naive vs tiled -------------------------------------------------------------------------------
NAIVE_VS_TILED = (
    ("naive, threads walk rows of C (uncoalesced)", dict(variant="naive_uncoalesced", bm=32, bn=32)),
    ("naive, the document's loop (coalesced)", dict(variant="naive", bm=32, bn=32)),
    ("shared-memory tile T = 32 (the document's kernel)", dict(variant="smem", bm=32, bn=32, bk=32)),
    ("128x128 block, 8x8 per thread (the document's example)",
     dict(variant="reg2d", bm=128, bn=128, bk=8, tm=8, tn=8)),
    ("128x128 block, 8x8 per thread, float4 loads, bk 16",
     dict(variant="reg2d", bm=128, bn=128, bk=16, tm=8, tn=8, vectorize=True)),
    ("warp tiled, double buffered (the suite's fastest)",
     dict(variant="warp", bm=128, bn=128, bk=16, wm=64, wn=64, wniter=4, tm=8, tn=4, vectorize=True,
          pipeline="regs")),
)


def naive_vs_tiled(hw: HardwareSpec, shape=SEED_SHAPE, measured: Measured | None = None) -> StudyResult:
    """Traffic and time of the naive and tiled GEMMs: the document's 137 GB / 41 ms / 3.4 ms, the
    no-cache counts (one byte per element as the document counts, and fp32), the compulsory bytes,
    the simulator's L2 and HBM bytes and time, and the measured ones (cuBLAS: measured only)."""
    shape = _shape(shape)
    m, n, k = shape
    at_seed = shape == SEED_SHAPE
    naive_reads = naive_gemm_reads(m, n, k)
    rows = []
    for role, knobs in NAIVE_VS_TILED:
        cfg = _cfg(shape, **knobs)
        naive = not cfg.uses_smem
        reads = naive_reads if naive else tiled_gemm_reads_elements(m, n, k, cfg.bm, cfg.bn)
        tr = gemm_traffic(cfg)
        r = _sim(cfg, hw)
        dram = [_meas(measured, cfg, shape, f"dram_{w}_bytes") for w in ("read", "write")]
        rows.append({
            "kernel": role, "label": cfg.label,
            "reuse": 1.0 if naive else tile_reuse(cfg.bm, cfg.bn),
            "seed_bytes": SEED_NAIVE_BYTES if at_seed and cfg.variant == "naive" else None,
            "seed_time_s": (SEED_NAIVE_TIME_S if cfg.variant == "naive" else
                            None if naive else SEED_TILED_TIME_S) if at_seed else None,
            "nocache_reads": reads,
            "nocache_1b_time_at_seed_rate_s": reads / SEED_HBM_BYTES_PER_S,
            "nocache_fp32_bytes": reads * cfg.elem_bytes,
            "nocache_fp32_time_at_seed_rate_s": reads * cfg.elem_bytes / SEED_HBM_BYTES_PER_S,
            "nocache_fp32_time_at_hw_rate_s": reads * cfg.elem_bytes / hw.hbm_bytes_per_s,
            "compulsory_hbm_bytes": tr.hbm_compulsory_bytes,
            "pred_time_s": r.time_s if r else None,
            "pred_l2_load_bytes": r.traffic.l2_load_bytes if r else None,
            "pred_hbm_bytes": r.traffic.hbm_bytes if r else None,
            "pred_l2_hit_rate": r.traffic.l2_hit_rate if r else None,
            "pred_bound": r.bound if r else None,
            "meas_time_s": _meas(measured, cfg, shape, "time_s"),
            "meas_l2_load_bytes": _meas(measured, cfg, shape, "l2_load_bytes"),
            "meas_dram_bytes": sum(dram) if None not in dram else None,
        })
    cublas = _meas(measured, "cublas", shape, "time_s")
    if cublas is not None:
        rows.append({c: None for c in rows[0]} | {"kernel": "cuBLAS (measured only)", "label": "cublas",
                                                   "meas_time_s": cublas,
                                                   "compulsory_hbm_bytes": rows[0]["compulsory_hbm_bytes"]})
    nv = rows[1]
    tiled = rows[2:len(NAIVE_VS_TILED)]
    best = min((r for r in tiled if r["pred_time_s"]), key=lambda r: r["pred_time_s"],
               default={"label": "none launches", "pred_time_s": None, "meas_time_s": None})
    summary = [
        f"naive reads {naive_reads:,} elements: {naive_reads / 1e9:.1f} GB at one byte each "
        f"(the document: 137 GB), {naive_reads / SEED_HBM_BYTES_PER_S * 1e3:.1f} ms at 3.35 TB/s "
        f"(the document: 41 ms); in fp32 {nv['nocache_fp32_bytes'] / 1e9:.1f} GB, "
        f"{nv['nocache_fp32_time_at_seed_rate_s'] * 1e3:.0f} ms at 3.35 TB/s, "
        f"{nv['nocache_fp32_time_at_hw_rate_s'] * 1e3:.0f} ms at the {hw.display_name}'s "
        f"{hw.hbm_bytes_per_s / 1e12:.2f} TB/s",
        f"with the caches in the picture: naive predicted {_fmt_ms(nv['pred_time_s'])}, "
        f"{nv['pred_l2_load_bytes'] / 1e9:.1f} GB read from L2, {nv['pred_hbm_bytes'] / 1e9:.2f} GB "
        f"from HBM (L2 hit rate {nv['pred_l2_hit_rate']:.0%}); measured {_fmt_ms(nv['meas_time_s'])}"
        + (f", {nv['meas_l2_load_bytes'] / 1e9:.1f} GB from L2, {nv['meas_dram_bytes'] / 1e9:.2f} GB DRAM"
           if nv["meas_dram_bytes"] is not None and nv["meas_l2_load_bytes"] is not None else ""),
        f"tiled (the document: about 3.4 ms): fastest predicted {best['label']} {_fmt_ms(best['pred_time_s'])}"
        f" (measured {_fmt_ms(best['meas_time_s'])}); compulsory HBM bytes "
        f"{nv['compulsory_hbm_bytes'] / 1e6:.0f} MB" + (f"; cuBLAS measured {_fmt_ms(cublas)}" if cublas else ""),
    ]
    return _result("naive-vs-tiled", "naive vs tiled GEMM: traffic and time", hw, shape, rows, summary)


# ----- the reuse factor R = T -----------------------------------------------------------------------
REUSE_TILES = ((16, 16), (32, 32), (64, 64), (128, 128), (256, 256), (256, 128))


def seed_kernel(shape, t: int) -> GemmConfig:
    """The document's tiled kernel at tile T: T x T threads, one output each, T x T A and B tiles."""
    return _cfg(shape, variant="smem", bm=t, bn=t, bk=t)


def register_tiled(shape, bm: int, bn: int) -> GemmConfig:
    """A bm x bn block tile with 256 threads, each (bm/16) x (bn/16) outputs, bk 16, float4 loads."""
    return _cfg(shape, variant="reg2d", bm=bm, bn=bn, bk=16, tm=bm // 16, tn=bn // 16, vectorize=True)


def reuse(hw: HardwareSpec, shape=SEED_SHAPE, measured: Measured | None = None) -> StudyResult:
    """R = T: the naive kernel's element reads over the tiled kernel's, by the document (T), by the
    closed-form count, and as the simulator and the GPU see it at L2 (no-cache naive fp32 bytes over
    the bytes the SMs read from L2) and at HBM (over the DRAM bytes read)."""
    shape = _shape(shape)
    m, n, k = shape
    naive_fp32 = naive_gemm_reads(m, n, k) * 4
    cases = [("naive (no tile)", 1, 1, _cfg(shape, variant="naive", bm=32, bn=32))]
    for bm, bn in REUSE_TILES:
        cfg = seed_kernel(shape, bm) if bm == bn and bm <= 32 else register_tiled(shape, bm, bn)
        cases.append((f"{bm}x{bn}", bm, bn, cfg))
    rows = []
    for tile, bm, bn, cfg in cases:
        r = _sim(cfg, hw)
        analytic = naive_gemm_reads(m, n, k) / (tiled_gemm_reads_elements(m, n, k, bm, bn) if cfg.uses_smem
                                                else naive_gemm_reads(m, n, k))
        rows.append({
            "tile": tile, "bm": bm, "bn": bn, "label": cfg.label,
            "seed_reuse": float(bm) if bm == bn else None,
            "analytic_reuse": analytic,
            "pred_reuse_l2": _ratio(naive_fp32, r.traffic.l2_load_bytes) if r else None,
            "pred_reuse_hbm": _ratio(naive_fp32, r.traffic.hbm_read_bytes) if r else None,
            "meas_reuse_l2": _ratio(naive_fp32, _meas(measured, cfg, shape, "l2_load_bytes")),
            "meas_reuse_hbm": _ratio(naive_fp32, _meas(measured, cfg, shape, "dram_read_bytes")),
            "pred_time_s": r.time_s if r else None,
            "meas_time_s": _meas(measured, cfg, shape, "time_s"),
            "limits_broken": broken_limits(cfg, hw),
        })
    sq = [r for r in rows if r["seed_reuse"] and r["bm"] > 1]
    summary = [
        "the document: R = T; closed form: " + ", ".join(f"T={r['bm']}: {r['analytic_reuse']:g}" for r in sq)
        + f"; 256x128: {rows[-1]['analytic_reuse']:.1f} (2 / (1/bm + 1/bn))",
        "simulated, L2 bytes: " + ", ".join(
            f"{r['tile']}: {r['pred_reuse_l2']:.1f}" if r["pred_reuse_l2"] else f"{r['tile']}: ({r['limits_broken']})"
            for r in rows),
        "simulated, HBM bytes read: " + ", ".join(
            f"{r['tile']}: {r['pred_reuse_hbm']:.0f}" for r in rows if r["pred_reuse_hbm"]),
    ]
    meas = [r for r in rows if r["meas_reuse_l2"]]
    if meas:
        summary.append("measured, L2 / DRAM bytes read: " + ", ".join(
            f"{r['tile']}: {r['meas_reuse_l2']:.1f} / {r['meas_reuse_hbm']:.0f}" for r in meas))
    return _result("reuse", "the reuse factor R = T", hw, shape, rows, summary)


# ----- the tile-size tradeoff -----------------------------------------------------------------------
TRADEOFF_TILES = (16, 32, 64, 128, 256)
DESIGNS = ("the document's kernel (T x T threads, T x T x T tiles)",
           "register tiled (256 threads, (T/16)^2 outputs each, bk 16)")


def tradeoff(hw: HardwareSpec, shape=SEED_SHAPE, measured: Measured | None = None) -> StudyResult:
    """The document's tile-size tradeoff as a table for T = 16..256 in two designs: shared memory per
    block, registers per thread, blocks per SM (and what limits them), waves, reuse, FLOP per byte at
    L2 and shared memory, predicted (and measured) time; tiles that break a limit say which."""
    shape = _shape(shape)
    rows = []
    for design in DESIGNS:
        for t in TRADEOFF_TILES:
            cfg = seed_kernel(shape, t) if design == DESIGNS[0] else register_tiled(shape, t, t)
            broken = broken_limits(cfg, hw)
            occ = None if broken else occupancy(hw, cfg.threads, cfg.estimated_regs, cfg.smem_bytes)
            r = None if broken else simulate(cfg, hw)
            tr = gemm_traffic(cfg)
            blocks = cfg.grid[0] * cfg.grid[1]
            rows.append({
                "design": design, "tile": t, "label": cfg.label, "threads": cfg.threads,
                "smem_per_block_bytes": cfg.smem_bytes, "regs_per_thread": cfg.estimated_regs,
                "meas_regs_per_thread": _meas(measured, cfg, shape, "regs_per_thread"),
                "blocks_per_sm": occ.blocks_per_sm if occ else 0,
                "occupancy_limiter": occ.limiter if occ else None,
                "occupancy": occ.occupancy if occ else None,
                "waves": waves(blocks, occ.blocks_per_sm, hw.sm_count).waves if occ else None,
                "reuse": tile_reuse(cfg.bm, cfg.bn), "flop_per_l2_byte": tr.ai_l2,
                "flop_per_smem_byte": tr.ai_smem,
                "pred_time_s": r.time_s if r else None, "pred_tflops": r.tflops if r else None,
                "pred_bound": r.bound if r else None,
                "meas_time_s": _meas(measured, cfg, shape, "time_s"),
                "limits_broken": broken,
            })
    ok = [r for r in rows if r["pred_time_s"]]
    best = min(ok, key=lambda r: r["pred_time_s"], default={"label": "none launches", "pred_time_s": None})
    summary = [f"{r['label']}: " + (r["limits_broken"] if r["limits_broken"] else
               f"{r['smem_per_block_bytes'] / 1024:g} KiB, {r['regs_per_thread']} regs, "
               f"{r['blocks_per_sm']} blocks/SM ({r['occupancy_limiter']}), R = {r['reuse']:g}, "
               f"predicted {_fmt_ms(r['pred_time_s'])}, measured {_fmt_ms(r['meas_time_s'])}") for r in rows]
    summary.append(f"fastest predicted: {best['label']} {_fmt_ms(best['pred_time_s'])}")
    return _result("tradeoff", "the tile-size tradeoff", hw, shape, rows, summary)


# ----- double buffering -----------------------------------------------------------------------------
#: the tilings and pipelines of scenarios/double_buffering.toml
DB_TILINGS = (
    dict(variant="reg2d", bm=128, bn=128, bk=8, tm=8, tn=8),
    dict(variant="reg2d", bm=128, bn=128, bk=8, tm=8, tn=8, vectorize=True),
    dict(variant="warp", bm=128, bn=128, bk=16, wm=64, wn=64, wniter=4, tm=8, tn=4, vectorize=True),
)
DB_PIPELINES = (("none", 1), ("regs", 2), ("cp_async", 2), ("cp_async", 3), ("cp_async", 4))


def double_buffering(hw: HardwareSpec, shape=SEED_SHAPE, measured: Measured | None = None) -> StudyResult:
    """Double buffering's gain: each tiling with no pipeline, the document's two-buffer prefetch
    (pipeline regs) and 2-4-stage cp.async; the gain over no pipeline, predicted and measured, beside
    the document's bound: a ~600-cycle load latency hidden behind one block's k-step of math."""
    shape = _shape(shape)
    rows = []
    for tiling in DB_TILINGS:
        base = _cfg(shape, **tiling)
        base_r = _sim(base, hw)
        base_meas = _meas(measured, base, shape, "time_s")
        per_step = base.bm * base.bn * base.bk / hw.fp32_lanes_per_sm  # one block's FFMA cycles per k-step
        for pipeline, stages in DB_PIPELINES:
            cfg = base.with_(pipeline=pipeline, stages=stages)
            r = _sim(cfg, hw)
            meas = _meas(measured, cfg, shape, "time_s")
            occ = None if broken_limits(cfg, hw) else occupancy(hw, cfg.threads, cfg.estimated_regs, cfg.smem_bytes)
            rows.append({
                "tiling": base.label, "pipeline": pipeline, "stages": stages, "label": cfg.label,
                "smem_per_block_bytes": cfg.smem_bytes, "regs_per_thread": cfg.estimated_regs,
                "meas_regs_per_thread": _meas(measured, cfg, shape, "regs_per_thread"),
                "blocks_per_sm": occ.blocks_per_sm if occ else 0,
                "kstep_math_cycles": per_step,
                "seed_max_gain": SEED_LOAD_LATENCY_CYCLES / per_step if pipeline == "none" else None,
                "pred_time_s": r.time_s if r else None,
                "pred_gain": (base_r.time_s / r.time_s - 1) if r and base_r else None,
                "meas_time_s": meas,
                "meas_gain": (base_meas / meas - 1) if meas and base_meas else None,
                "limits_broken": broken_limits(cfg, hw),
            })
    summary = [f"the document: the ~{SEED_LOAD_LATENCY_CYCLES}-cycle load hides behind compute; one block's "
               f"k-step of math is {rows[0]['kstep_math_cycles']:.0f} cycles for {rows[0]['tiling']} "
               f"(at most {rows[0]['seed_max_gain']:.0%} to gain with one block per SM)"]
    for tiling in dict.fromkeys(r["tiling"] for r in rows):
        rs = [r for r in rows if r["tiling"] == tiling]
        summary.append(f"{tiling}: " + ", ".join(
            f"{r['pipeline']}{r['stages'] if r['pipeline'] == 'cp_async' else ''} "
            + (r["limits_broken"] or _fmt_ms(r["pred_time_s"]))
            + (f" ({r['pred_gain']:+.0%})" if r["pipeline"] != "none" and r["pred_gain"] is not None else "")
            + (f" [measured {_fmt_ms(r['meas_time_s'])}"
               + (f" {r['meas_gain']:+.0%}]" if r["pipeline"] != "none" and r["meas_gain"] is not None else "]")
               if r["meas_time_s"] else "") for r in rs))
    return _result("double-buffering", "double buffering's gain", hw, shape, rows, summary)


# ----- two-level register tiling --------------------------------------------------------------------
REGISTER_TILING = (
    ("no tiling (naive)", dict(variant="naive", bm=32, bn=32)),
    ("32x32 block, 1 output per thread (shared memory only)", dict(variant="smem", bm=32, bn=32, bk=32)),
    ("128x128 block, 1 output per thread", dict(variant="smem", bm=128, bn=128, bk=8)),
    ("128x128 block, 4x4 per thread", dict(variant="reg2d", bm=128, bn=128, bk=8, tm=4, tn=4)),
    ("128x128 block, 8x8 per thread (the document's example)",
     dict(variant="reg2d", bm=128, bn=128, bk=8, tm=8, tn=8)),
    ("128x128 block, 8x8 per thread, float4 loads",
     dict(variant="reg2d", bm=128, bn=128, bk=8, tm=8, tn=8, vectorize=True)),
    ("128x128 block, 16x16 per thread", dict(variant="reg2d", bm=128, bn=128, bk=8, tm=16, tn=16)),
)


def _thread_tile(cfg: GemmConfig) -> tuple[int, int]:
    if cfg.variant in ("reg2d", "warp"):
        return cfg.tm, cfg.tn
    if cfg.variant == "reg1d":
        return cfg.tm, 1
    return 1, 1


def register_tiling(hw: HardwareSpec, shape=SEED_SHAPE, measured: Measured | None = None) -> StudyResult:
    """The document's two-level tiling (128x128 block tile in shared memory, 8x8 per thread in
    registers) against one level and none: reuse at each level (block: global reads saved; thread:
    FFMAs per shared-memory value loaded, relative to one output per thread), bytes per level,
    accumulator registers, the simulator's time and shared-memory wavefronts, and the measured ones."""
    shape = _shape(shape)
    rows = []
    for role, knobs in REGISTER_TILING:
        cfg = _cfg(shape, **knobs)
        tm, tn = _thread_tile(cfg)
        tr = gemm_traffic(cfg)
        r = _sim(cfg, hw)
        rows.append({
            "kernel": role, "label": cfg.label, "threads": cfg.threads, "thread_tile": f"{tm}x{tn}",
            "accumulator_regs": tm * tn, "regs_per_thread": cfg.estimated_regs,
            "meas_regs_per_thread": _meas(measured, cfg, shape, "regs_per_thread"),
            "smem_per_block_bytes": cfg.smem_bytes,
            "block_reuse": tile_reuse(cfg.bm, cfg.bn) if cfg.uses_smem else 1.0,
            "register_reuse": tile_reuse(tm, tn) if cfg.uses_smem else None,
            "global_load_bytes": tr.global_load_bytes,
            "smem_load_bytes": tr.smem_load_bytes,
            "register_operand_bytes": tr.register_read_bytes,
            "pred_smem_wavefronts": r.traffic.smem_wavefronts if r else None,
            "meas_smem_wavefronts": _meas(measured, cfg, shape, "smem_wavefronts"),
            "pred_time_s": r.time_s if r else None,
            "pred_bound": r.bound if r else None,
            "meas_time_s": _meas(measured, cfg, shape, "time_s"),
            "limits_broken": broken_limits(cfg, hw),
        })
    ex = next(r for r in rows if "document's example" in r["kernel"])
    one = next(r for r in rows if r["label"].startswith("smem_32x32"))
    summary = [
        f"the document's example {ex['label']}: {ex['threads']} threads, {ex['accumulator_regs']} accumulators "
        f"({ex['regs_per_thread']} registers estimated"
        + (f", {ex['meas_regs_per_thread']} compiled" if ex["meas_regs_per_thread"] else "") + "), "
        f"block reuse {ex['block_reuse']:g}, register reuse {ex['register_reuse']:g}",
        f"shared-memory loads {ex['smem_load_bytes'] / 1e9:.1f} GB against {one['smem_load_bytes'] / 1e9:.1f} GB "
        f"for one output per thread ({one['smem_load_bytes'] / ex['smem_load_bytes']:.0f}x fewer); global loads "
        f"{ex['global_load_bytes'] / 1e9:.1f} GB against {one['global_load_bytes'] / 1e9:.1f} GB",
    ]
    summary += [f"{r['label']}: " + (r["limits_broken"] or f"predicted {_fmt_ms(r['pred_time_s'])}, measured "
                                     f"{_fmt_ms(r['meas_time_s'])}") for r in rows]
    return _result("register-tiling", "two-level register tiling", hw, shape, rows, summary)


# ----- registry -------------------------------------------------------------------------------------
def _result(name, title, hw, shape, rows, summary) -> StudyResult:
    columns = tuple(dict.fromkeys(c for r in rows for c in r))
    return StudyResult(name=name, title=title, hardware=hw.display_name, shape=shape, columns=columns,
                       rows=tuple(rows), summary=tuple(summary))


STUDIES = {s.name: s for s in (
    Study("naive-vs-tiled", "naive vs tiled GEMM traffic and time at 4096^3 (137 GB, 41 ms, 3.4 ms)",
          naive_vs_tiled),
    Study("reuse", "the reuse factor R = T across tile sizes", reuse),
    Study("tradeoff", "tile-size tradeoff table, tiles 16 to 256 (shared memory, blocks/SM, registers, "
                      "reuse, time)", tradeoff),
    Study("double-buffering", "double buffering's gain (register prefetch and cp.async)", double_buffering),
    Study("register-tiling", "the 128x128 block / 8x8 thread two-level register tiling", register_tiling),
)}


def run_study(name: str, hw: HardwareSpec, shape=SEED_SHAPE, measured: Measured | None = None) -> StudyResult:
    """Run the study ``name`` (one of :data:`STUDIES`)."""
    if name not in STUDIES:
        raise ValueError(f"study = {name!r}: unknown; known: {', '.join(STUDIES)}")
    return STUDIES[name].run(hw, shape, measured)
