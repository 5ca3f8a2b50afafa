"""Accuracy report: the current simulator's predictions against the recorded H200 measurements.

Reads ``<results>/times.csv`` (and ``counters.csv`` when present), simulates every configuration
that measured ``ok`` with the calibrated hardware profile, and reports per-configuration error,
MAPE, median and max error, Spearman rank correlation within each shape, top-1 regret, and
predicted against measured counters (DRAM bytes, L2 bytes, shared-memory wavefronts).

The simulator is given the compiler's register count for each kernel (from the CUDA kernel's
attributes, recorded beside the times) so that occupancy is the real one; it never sees a
measured time.
"""

from __future__ import annotations

import csv
import math
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from tilesim import hardware as hw_catalog
from tilesim import simulate
from tilesim.kernels.gemm.config import GemmConfig

RESULTS_ROOT = Path(__file__).parent / "results"
_INT_KNOBS = ("m", "n", "k", "bm", "bn", "bk", "tm", "tn", "wm", "wn", "wniter", "smem_pad", "stages")


@dataclass(frozen=True)
class ConfigAccuracy:
    label: str
    shape: str
    variant: str
    measured_s: float
    predicted_s: float
    error: float  # (predicted - measured) / measured
    bound: str
    regs_per_thread: int
    blocks_per_sm: int


@dataclass(frozen=True)
class CounterComparison:
    label: str
    shape: str
    variant: str
    predicted_dram_bytes: float
    measured_dram_bytes: float
    predicted_l2_bytes: float
    measured_l2_bytes: float
    predicted_smem_wavefronts: float
    measured_smem_wavefronts: float
    predicted_instructions: float = math.nan
    measured_instructions: float = math.nan

    @staticmethod
    def _err(p: float, m: float) -> float:
        return (p - m) / m if m else math.nan

    @property
    def dram_error(self) -> float:
        return self._err(self.predicted_dram_bytes, self.measured_dram_bytes)

    @property
    def l2_error(self) -> float:
        return self._err(self.predicted_l2_bytes, self.measured_l2_bytes)

    @property
    def smem_error(self) -> float:
        return self._err(self.predicted_smem_wavefronts, self.measured_smem_wavefronts)

    @property
    def instruction_error(self) -> float:
        return self._err(self.predicted_instructions, self.measured_instructions)


@dataclass(frozen=True)
class AccuracyReport:
    hardware: str
    calibrated_fields: tuple[str, ...]
    rows: tuple[ConfigAccuracy, ...]
    counters: tuple[CounterComparison, ...]
    skipped: tuple[tuple[str, str, str], ...]  # (label, shape, status) rows not measured ok

    @property
    def mape(self) -> float:
        return sum(abs(r.error) for r in self.rows) / len(self.rows)

    @property
    def median_abs_error(self) -> float:
        errs = sorted(abs(r.error) for r in self.rows)
        n = len(errs)
        return (errs[n // 2] + errs[(n - 1) // 2]) / 2

    @property
    def max_abs_error(self) -> float:
        return max(abs(r.error) for r in self.rows)

    def by_shape(self) -> dict[str, list[ConfigAccuracy]]:
        out: dict[str, list[ConfigAccuracy]] = defaultdict(list)
        for r in self.rows:
            out[r.shape].append(r)
        return dict(out)

    @property
    def spearman(self) -> dict[str, float]:
        return {s: spearman([r.predicted_s for r in rs], [r.measured_s for r in rs])
                for s, rs in self.by_shape().items() if len(rs) >= 3}

    @property
    def regret(self) -> dict[str, float]:
        """Per shape: measured time of the predicted-best config over the measured best, minus 1."""
        out = {}
        for s, rs in self.by_shape().items():
            chosen = min(rs, key=lambda r: r.predicted_s)
            best = min(r.measured_s for r in rs)
            out[s] = chosen.measured_s / best - 1.0
        return out

    def dram_errors(self, variants: tuple[str, ...] = ("reg1d", "reg2d", "warp")) -> list[float]:
        return [c.dram_error for c in self.counters if c.variant in variants and not math.isnan(c.dram_error)]

    def summary(self) -> dict:
        dram = [abs(e) for e in self.dram_errors()]
        return {
            "hardware": self.hardware,
            "configs": len(self.rows),
            "mape": self.mape,
            "median_abs_error": self.median_abs_error,
            "max_abs_error": self.max_abs_error,
            "spearman": self.spearman,
            "min_spearman": min(self.spearman.values()) if self.spearman else math.nan,
            "regret": self.regret,
            "max_regret": max(self.regret.values()) if self.regret else math.nan,
            "dram_abs_error_reg_tiled_max": max(dram) if dram else math.nan,
            "dram_abs_error_reg_tiled_median": sorted(dram)[len(dram) // 2] if dram else math.nan,
            "skipped": len(self.skipped),
        }


def _ranks(xs: list[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for t in range(i, j + 1):
            ranks[order[t]] = (i + j) / 2.0
        i = j + 1
    return ranks


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman rank correlation (average ranks for ties)."""
    if len(a) != len(b) or len(a) < 2:
        raise ValueError(f"spearman needs two equal-length lists of >= 2 values, got {len(a)} and {len(b)}")
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va = math.sqrt(sum((x - ma) ** 2 for x in ra))
    vb = math.sqrt(sum((y - mb) ** 2 for y in rb))
    return cov / (va * vb) if va and vb else math.nan


def config_from_row(row: dict) -> GemmConfig:
    """Rebuild the GemmConfig of a times.csv row (knob columns)."""
    kw: dict = {}
    for f in GemmConfig.__dataclass_fields__:
        col = "regs_per_thread_override" if f == "regs_per_thread" else f
        val = row.get(col, "")
        if val in ("", None):
            continue
        if f in _INT_KNOBS:
            kw[f] = int(val)
        elif f == "vectorize":
            kw[f] = str(val).lower() in ("true", "1")
        elif f in ("alpha", "beta"):
            kw[f] = float(val)
        elif f == "regs_per_thread":
            kw[f] = int(val)
        else:
            kw[f] = val
    return GemmConfig(**kw)


def _read_csv(path: Path) -> list[dict]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _simulate_one(args: tuple):
    """One configuration's prediction (a worker's job: the hardware is loaded by name, once per process)."""
    cfg, hardware, steady_state = args
    return simulate(cfg, _hardware(hardware), steady_state=steady_state)


_HW_CACHE: dict = {}


def _hardware(name: str):
    if name not in _HW_CACHE:
        _HW_CACHE[name] = hw_catalog.load(name)
    return _HW_CACHE[name]


def compute_report(results_dir: str | Path | None = None, hardware: str = "h200", *,
                   steady_state: bool = True, workers: int = 1,
                   on_progress: Callable[[int, int], None] | None = None) -> AccuracyReport:
    """Simulate every measured-ok configuration and compare (pure: reads files, prints nothing).

    ``steady_state=False`` simulates every k-step (see :func:`tilesim.simulate`). ``workers`` > 1
    simulates in that many processes (the results are the same); ``on_progress(done, total)`` is
    called after each configuration."""
    rdir = Path(results_dir) if results_dir else RESULTS_ROOT / hardware
    times_path = rdir / "times.csv"
    if not times_path.exists():
        raise ValueError(f"no recorded results at {times_path}; run `tilesim validate run` on a GPU first")
    if workers < 1:
        raise ValueError(f"compute_report: workers must be >= 1, got {workers}")
    hw = hw_catalog.load(hardware)
    _HW_CACHE.clear()
    _HW_CACHE[hardware] = hw
    counters = {}
    cpath = rdir / "counters.csv"
    if cpath.exists():
        for c in _read_csv(cpath):
            counters[(c["label"], int(c["m"]), int(c["n"]), int(c["k"]))] = c
    todo, skipped = [], []
    for row in _read_csv(times_path):
        if row.get("variant") in ("cublas", "") or row.get("label") == "cublas":
            continue
        shape = f"{row['m']}x{row['n']}x{row['k']}"
        if row.get("status") != "ok":
            skipped.append((row["label"], shape, row.get("status", "")))
            continue
        cfg = config_from_row(row)
        regs = int(float(row["regs_per_thread"])) if row.get("regs_per_thread") else cfg.estimated_regs
        todo.append((row, shape, cfg, regs))
    jobs = [(cfg.with_(regs_per_thread=regs), hardware, steady_state) for _, _, cfg, regs in todo]
    results = []
    if workers == 1:
        for job in jobs:
            results.append(_simulate_one(job))
            if on_progress:
                on_progress(len(results), len(jobs))
    else:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=workers) as pool:
            for res in pool.map(_simulate_one, jobs):
                results.append(res)
                if on_progress:
                    on_progress(len(results), len(jobs))
    rows, comps = [], []
    for (row, shape, cfg, regs), res in zip(todo, results, strict=True):
        meas = float(row["median_s"])
        rows.append(ConfigAccuracy(row["label"], shape, cfg.variant, meas, res.time_s,
                                   (res.time_s - meas) / meas, res.bound, regs, res.blocks_per_sm))
        c = counters.get((row["label"], cfg.m, cfg.n, cfg.k))
        if c and c.get("status", "ok") in ("ok", ""):
            comps.append(CounterComparison(
                row["label"], shape, cfg.variant,
                res.traffic.hbm_bytes, _f(c, "dram__bytes_read.sum") + _f(c, "dram__bytes_write.sum"),
                res.traffic.l2_bytes, _f(c, "lts__t_bytes.sum"),
                res.traffic.smem_wavefronts, _f(c, "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"),
                res.traffic.instructions, _f(c, "smsp__inst_executed.sum")))
    if not rows:
        raise ValueError(f"{times_path}: no configuration measured ok")
    return AccuracyReport(hw.name, tuple(sorted(hw.calibrated)), tuple(rows), tuple(comps), tuple(skipped))


def _f(row: dict, metric: str) -> float:
    """A metric column, whatever unit suffix the counters CSV gave its name."""
    for key, val in row.items():
        if key == metric or key.startswith(metric + "_") or key.startswith(metric + " "):
            try:
                return float(val)
            except (TypeError, ValueError):
                return math.nan
    return math.nan


def report_rows(report: AccuracyReport) -> list[dict]:
    """Flat rows (one per configuration, counters joined) for the CSV."""
    comp = {(c.label, c.shape): c for c in report.counters}
    out = []
    for r in report.rows:
        d = asdict(r)
        c = comp.get((r.label, r.shape))
        if c:
            d.update({k: v for k, v in asdict(c).items() if k not in ("label", "shape", "variant")})
            d.update(dram_error=c.dram_error, l2_error=c.l2_error, smem_error=c.smem_error,
                     instruction_error=c.instruction_error)
        out.append(d)
    return out


def main_report(results_dir=None, csv_path=None, plot_path=None, hardware: str = "h200", *,
                steady_state: bool = True, workers: int = 1) -> int:
    """CLI body of ``tilesim validate report``: print tables, write the CSV and the plot."""
    from rich.console import Console
    from rich.table import Table

    # written to a file or pipe, the tables keep their rows on one line each
    console = Console() if sys.stdout.isatty() else Console(width=200)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=Console(stderr=True), transient=True)
    try:
        with progress:
            task = progress.add_task("simulating", total=None)
            rep = compute_report(results_dir, hardware, steady_state=steady_state, workers=workers,
                                 on_progress=lambda done, total: progress.update(task, completed=done, total=total))
    except ValueError as exc:
        console.print(f"error: {exc}", style="red", highlight=False)
        return 2
    t = Table(title=f"tilesim vs measured ({rep.hardware}; calibrated: {', '.join(rep.calibrated_fields) or 'none'})")
    for col in ("shape", "config", "measured ms", "predicted ms", "error", "bound", "regs", "blk/SM"):
        t.add_column(col, justify="right" if col not in ("shape", "config", "bound") else "left")
    for r in sorted(rep.rows, key=lambda r: (r.shape, r.measured_s)):
        t.add_row(r.shape, r.label, f"{r.measured_s * 1e3:.3f}", f"{r.predicted_s * 1e3:.3f}",
                  f"{r.error * 100:+.1f}%", r.bound, str(r.regs_per_thread), str(r.blocks_per_sm))
    console.print(t)
    if rep.counters:
        ct = Table(title="Counters: predicted vs Nsight Compute")
        for col in ("shape", "config", "DRAM pred/meas MB", "err", "L2 pred/meas MB", "err",
                    "smem wavefronts pred/meas", "err", "instr err"):
            ct.add_column(col)
        for c in rep.counters:
            ct.add_row(c.shape, c.label, f"{c.predicted_dram_bytes / 1e6:.1f} / {c.measured_dram_bytes / 1e6:.1f}",
                       f"{c.dram_error * 100:+.0f}%", f"{c.predicted_l2_bytes / 1e6:.1f} / {c.measured_l2_bytes / 1e6:.1f}",
                       f"{c.l2_error * 100:+.0f}%",
                       f"{c.predicted_smem_wavefronts:.3g} / {c.measured_smem_wavefronts:.3g}", f"{c.smem_error * 100:+.0f}%",
                       f"{c.instruction_error * 100:+.0f}%")
        console.print(ct)
    s = rep.summary()
    console.print(f"configs {s['configs']} (skipped {s['skipped']}) | MAPE {s['mape'] * 100:.1f}% | "
                  f"median |err| {s['median_abs_error'] * 100:.1f}% | max |err| {s['max_abs_error'] * 100:.1f}%")
    for shape in sorted(s["spearman"]):
        console.print(f"  {shape}: Spearman {s['spearman'][shape]:.3f}, top-1 regret {s['regret'][shape] * 100:.1f}%")
    if rep.counters:
        console.print(f"  DRAM bytes, register-tiled configs: max |err| {s['dram_abs_error_reg_tiled_max'] * 100:.1f}%, "
                      f"median {s['dram_abs_error_reg_tiled_median'] * 100:.1f}%")
    if csv_path:
        rows = report_rows(rep)
        Path(csv_path).parent.mkdir(parents=True, exist_ok=True)
        with open(csv_path, "w", newline="") as fh:
            cols = sorted({k for r in rows for k in r}, key=lambda k: (k not in rows[0], k))
            w = csv.DictWriter(fh, fieldnames=cols)
            w.writeheader()
            w.writerows(rows)
        console.print(f"wrote {csv_path}")
    if plot_path:
        from tilesim.plots import predicted_vs_measured_figure

        fig = predicted_vs_measured_figure([(r.label, r.shape, r.predicted_s, r.measured_s) for r in rep.rows])
        Path(plot_path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(plot_path, dpi=120, bbox_inches="tight")
        console.print(f"wrote {plot_path}")
    return 0
