"""The accuracy report: tilesim's predictions against a family's recorded measurements.

``compute_report(family, results_dir, hardware)`` rebuilds the configuration of every ``ok`` row of
``<results_dir>/times.csv`` with ``tilesim.kernels.registry.get(family).make(**fields)``, simulates
it and compares with the measured median, in two modes:

* ``informed``: the configuration with ``regs_per_thread`` set to the compiler's value recorded in the
  row (so that occupancy is the real one; the simulator never sees a measured time);
* ``blind``: the configuration as the suite gives it (the simulator's own register estimate).

Per mode: MAPE, mean signed error (bias: negative = predicts too fast), median and max absolute
error, and per problem size the Spearman rank correlation and the top-1 regret (the measured time of
the predicted-best configuration over the measured best, minus one). When ``counters.csv`` exists,
the predicted DRAM bytes (read + write), L2 bytes, shared-memory wavefronts and warp instructions
are compared with Nsight Compute's, configuration by configuration (L2 bytes: the sectors the SMs
read and write, from ``diagnostics.csv`` where recorded, else ``lts__t_bytes``, which also counts
the L2's DRAM fills and write-backs). Rows whose configuration the
family cannot rebuild (e.g. GEMM's cuBLAS rows) are kept as ``references``.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tilesim import hardware as hw_catalog
from tilesim import simulate
from tilesim.kernels import registry
from validation.harness import suite

MODES = ("informed", "blind")
#: predicted Traffic attribute -> Nsight Compute metrics summed for the measured value
COUNTERS = {"hbm_bytes": ("dram__bytes_read.sum", "dram__bytes_write.sum"), "l2_bytes": ("lts__t_bytes.sum",),
            "smem_wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",),
            "instructions": ("smsp__inst_executed.sum",)}
#: a better measure of a COUNTERS key where the results directory's diagnostics.csv has it: (metrics
#: summed, scale). What the SMs ask of L2 is its sectors from the texture/L1 unit, read and written, x 32
#: bytes; lts__t_bytes also counts the L2's own fills from and write-backs to DRAM.
PREFERRED = {"l2_bytes": (("lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_tex_op_write.sum"),
                          32.0)}


@dataclass(frozen=True)
class Prediction:
    """One measured configuration and its prediction in one mode."""

    config: object
    label: str
    size: str  # the problem size, "x"-joined problem fields
    mode: str
    measured_s: float
    predicted_s: float
    bound: str
    regs_per_thread: int | None
    blocks_per_sm: int

    @property
    def error(self) -> float:
        """(predicted - measured) / measured."""
        return (self.predicted_s - self.measured_s) / self.measured_s


@dataclass(frozen=True)
class CounterComparison:
    """Predicted against Nsight Compute counters for one configuration (informed prediction)."""

    label: str
    size: str
    config: object
    predicted: dict  # COUNTERS key -> value
    measured: dict  # COUNTERS key -> value (NaN when the metric is missing)

    def error(self, counter: str) -> float:
        m = self.measured.get(counter, math.nan)
        return (self.predicted[counter] - m) / m if m and not math.isnan(m) else math.nan


def _ranks(xs: Sequence[float]) -> list[float]:
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


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman rank correlation (average ranks for ties); NaN when either side is constant."""
    if len(a) != len(b) or len(a) < 2:
        raise ValueError(f"spearman needs two equal-length lists of >= 2 values, got {len(a)} and {len(b)}")
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va = math.sqrt(sum((x - ma) ** 2 for x in ra))
    vb = math.sqrt(sum((y - mb) ** 2 for y in rb))
    return cov / (va * vb) if va and vb else math.nan


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return (s[n // 2] + s[(n - 1) // 2]) / 2 if n else math.nan


def error_stats(rows: Sequence[Prediction]) -> dict:
    """MAPE, bias, median and max |error|, and per size Spearman (>= 3 configs) and top-1 regret."""
    if not rows:
        return {"configs": 0}
    errs = [r.error for r in rows]
    by_size: dict[str, list[Prediction]] = defaultdict(list)
    for r in rows:
        by_size[r.size].append(r)
    rho = {s: spearman([r.predicted_s for r in rs], [r.measured_s for r in rs])
           for s, rs in by_size.items() if len(rs) >= 3}
    regret = {s: min(rs, key=lambda r: r.predicted_s).measured_s / min(r.measured_s for r in rs) - 1.0
              for s, rs in by_size.items()}
    return {"configs": len(rows), "mape": sum(abs(e) for e in errs) / len(errs), "bias": sum(errs) / len(errs),
            "median_abs_error": _median([abs(e) for e in errs]), "max_abs_error": max(abs(e) for e in errs),
            "spearman": rho, "min_spearman": min(rho.values()) if rho else math.nan,
            "regret": regret, "max_regret": max(regret.values())}


@dataclass(frozen=True)
class FamilyReport:
    family: str
    hardware: str
    calibrated_fields: tuple[str, ...]
    results_dir: Path
    predictions: dict  # mode -> tuple[Prediction, ...]
    counters: tuple[CounterComparison, ...]
    skipped: tuple[tuple[str, str, str], ...]  # (label, size, status) of rows not measured ok
    references: tuple[tuple[str, str, float], ...]  # (label, size, median_s) of rows of no family config

    @property
    def rows(self) -> tuple[Prediction, ...]:
        """The informed predictions (or the first mode computed)."""
        return self.predictions.get("informed") or next(iter(self.predictions.values()))

    def stats(self, mode: str = "informed") -> dict:
        return error_stats(self.predictions.get(mode, ()))

    def by_size(self, mode: str = "informed") -> dict[str, list[Prediction]]:
        out: dict[str, list[Prediction]] = defaultdict(list)
        for r in self.predictions.get(mode, ()):
            out[r.size].append(r)
        return dict(out)

    def counter_errors(self, counter: str = "hbm_bytes", keep: Callable[[object], bool] | None = None) -> list[float]:
        """Relative errors of one counter over the configurations with counters (``keep`` filters configs)."""
        errs = [c.error(counter) for c in self.counters if keep is None or keep(c.config)]
        return [e for e in errs if not math.isnan(e)]

    def summary(self) -> dict:
        out = {"family": self.family, "hardware": self.hardware, "skipped": len(self.skipped),
               **{mode: self.stats(mode) for mode in self.predictions}}
        for counter in COUNTERS:
            errs = [abs(e) for e in self.counter_errors(counter)]
            out[f"{counter}_abs_error_median"] = _median(errs)
            out[f"{counter}_abs_error_max"] = max(errs) if errs else math.nan
        return out


# ----- reading the recorded rows -------------------------------------------------------------------------
def config_from_row(family: str, row: dict):
    """The configuration of a CSV row (its non-empty config columns; ``regs_per_thread_override``
    back to ``regs_per_thread``). Raises ``ValueError`` when the family rejects the values."""
    fam = registry.get(family)
    names = {f.name for f in dataclasses.fields(fam.config)}
    values = {}
    for col in suite.config_columns(family):
        field = suite.OVERRIDE_FIELD if col == suite.OVERRIDE_COLUMN else col
        if field in names and row.get(col) not in ("", None):
            values[field] = row[col]
    cfg = fam.make(**values)
    if row.get("label") and fam.label(cfg) != row["label"]:
        raise ValueError(f"row label {row['label']!r} is not the configuration's label {fam.label(cfg)!r}")
    return cfg


def recorded_dirs(family: str, root: Path = suite.RESULTS_ROOT) -> list[Path]:
    """Every ``<root>/<gpu>/<family>/`` holding a ``times.csv``, sorted."""
    return sorted(p.parent for p in Path(root).glob(f"*/{family}/times.csv"))


def recorded_families(root: Path = suite.RESULTS_ROOT) -> list[str]:
    """Registered families with recorded results under ``root``."""
    return sorted({p.parent.name for p in Path(root).glob("*/*/times.csv")} & set(registry.families()))


def _hardware_for(results_dir: Path) -> str:
    """The catalog name of the GPU a results directory is named after (``.../h200/<family>``)."""
    gpu = Path(results_dir).resolve().parent.name
    if gpu not in hw_catalog.available():
        raise ValueError(f"hardware = None: the results directory's GPU {gpu!r} is not in the catalog "
                         f"({', '.join(hw_catalog.available())}); pass hardware=")
    return gpu


_HW_CACHE: dict = {}


def _hw(name: str):
    if name not in _HW_CACHE:
        _HW_CACHE[name] = hw_catalog.load(name)
    return _HW_CACHE[name]


def _simulate_job(job: tuple):
    """One prediction (a worker's job: the hardware is loaded by name, once per process)."""
    cfg, hardware, steady_state = job
    return simulate(cfg, _hw(hardware), steady_state=steady_state)


def _metric(row: dict, metric: str) -> float:
    """A metric column of counters.csv, whatever unit suffix its name carries; NaN when missing."""
    for key, val in row.items():
        if key == metric or key.startswith(metric + "_"):
            try:
                return float(val)
            except (TypeError, ValueError):
                return math.nan
    return math.nan


def _counter_index(family: str, results_dir: Path) -> tuple[dict, tuple[str, ...]]:
    """counters.csv's ok rows keyed by the config columns it shares with times.csv, with the columns
    of the same configuration's diagnostics.csv row (where there is one) added."""
    rows = suite.recorded_rows(Path(results_dir), "counters.csv")
    if not rows:
        return {}, ()
    # the config columns every file has (a part may add one its main file predates; labels still differ)
    cols = tuple(c for c in suite.config_columns(family) if all(c in r for r in rows))
    index = {suite.row_key(r, cols): r for r in rows if r.get("status", "ok") in ("ok", "")}
    diag = Path(results_dir) / "diagnostics.csv"
    for d in suite.read_rows(diag) if diag.exists() else ():
        row = index.get(suite.row_key(d, cols))
        if row is not None and d.get("status", "ok") in ("ok", ""):
            for k, v in d.items():
                row.setdefault(k, v)
    return index, cols


def _measured(row: dict, counter: str) -> float:
    """Nsight Compute's value of a COUNTERS key: the PREFERRED metrics where the row has them all."""
    pref = PREFERRED.get(counter)
    if pref:
        vals = [_metric(row, m) for m in pref[0]]
        if not any(math.isnan(v) for v in vals):
            return sum(vals) * pref[1]
    return sum(_metric(row, m) for m in COUNTERS[counter])


def compute_report(family: str, results_dir: str | Path | None = None, hardware: str | None = None, *,
                   modes: Sequence[str] = MODES, workers: int = 1, steady_state: bool = True,
                   on_progress: Callable[[int, int], None] | None = None) -> FamilyReport:
    """Simulate every measured-ok configuration of ``family`` and compare (pure: reads files, prints
    nothing). ``results_dir`` defaults to the first recorded ``validation/results/<gpu>/<family>``;
    ``hardware`` to that GPU's catalog entry. ``workers`` > 1 simulates in that many processes (the
    results are the same); ``steady_state=False`` simulates every step (see :func:`tilesim.simulate`);
    ``on_progress(done, total)`` is called after each simulation."""
    if workers < 1:
        raise ValueError(f"compute_report: workers = {workers}: must be >= 1")
    bad = sorted(set(modes) - set(MODES))
    if bad or not modes:
        raise ValueError(f"compute_report: modes = {tuple(modes)}: choose from {MODES}")
    if results_dir is None:
        found = recorded_dirs(family)
        if not found:
            raise ValueError(f"no recorded results for {family!r} under {suite.RESULTS_ROOT}/*/{family}/")
        results_dir = found[0]
    rdir = Path(results_dir)
    times = rdir / "times.csv"
    if not times.exists():
        raise ValueError(f"no recorded results at {times}; run the suite on a GPU first")
    hardware = hardware or _hardware_for(rdir)
    hw = hw_catalog.load(hardware)
    _HW_CACHE.clear()
    _HW_CACHE[hardware] = hw
    fam = registry.get(family)
    measured, skipped, references = [], [], []
    for row in suite.recorded_rows(rdir, "times.csv"):
        try:
            cfg = config_from_row(family, row)
        except (TypeError, ValueError):
            if row.get("status") == "ok":
                size = "x".join(row.get(f, "") for f in fam.problem_fields)
                references.append((row.get("label", ""), size, float(row["median_s"])))
            continue
        size = fam.full_label(cfg).rsplit("@", 1)[-1]
        if row.get("status") != "ok":
            skipped.append((fam.label(cfg), size, row.get("status", "")))
            continue
        regs = int(float(row["regs_per_thread"])) if row.get("regs_per_thread") else None
        measured.append((row, cfg, size, regs))
    if not measured:
        raise ValueError(f"{times}: no configuration measured ok")
    has_regs = any(f.name == suite.OVERRIDE_FIELD for f in dataclasses.fields(fam.config))
    jobs = []
    for mode in modes:
        for _row, cfg, _size, regs in measured:
            informed = mode == "informed" and has_regs and regs is not None
            jobs.append((dataclasses.replace(cfg, **{suite.OVERRIDE_FIELD: regs}) if informed else cfg, hardware,
                         steady_state))
    results = []
    if workers == 1:
        for job in jobs:
            results.append(_simulate_job(job))
            if on_progress:
                on_progress(len(results), len(jobs))
    else:
        from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415

        with ProcessPoolExecutor(max_workers=workers) as pool:
            for res in pool.map(_simulate_job, jobs, chunksize=4):
                results.append(res)
                if on_progress:
                    on_progress(len(results), len(jobs))
    predictions = {}
    for i, mode in enumerate(modes):
        chunk = results[i * len(measured):(i + 1) * len(measured)]
        predictions[mode] = tuple(
            Prediction(cfg, fam.label(cfg), size, mode, float(row["median_s"]), res.time_s, res.bound, regs,
                       res.blocks_per_sm)
            for (row, cfg, size, regs), res in zip(measured, chunk, strict=True))
    index, cols = _counter_index(family, rdir)
    comps = []
    first = results[:len(measured)]
    for (row, cfg, size, _regs), res in zip(measured, first, strict=True):
        c = index.get(suite.row_key(row, cols)) if cols else None
        if c is None:
            continue
        comps.append(CounterComparison(
            fam.label(cfg), size, cfg, {k: float(getattr(res.traffic, k)) for k in COUNTERS},
            {k: _measured(c, k) for k in COUNTERS}))
    return FamilyReport(family, hw.name, tuple(sorted(hw.calibrated)), rdir, predictions, tuple(comps),
                        tuple(skipped), tuple(references))


def report_rows(report: FamilyReport) -> list[dict]:
    """Flat rows (one per configuration and mode, counters joined) for the CSV."""
    comp = {(c.label, c.size): c for c in report.counters}
    out = []
    for mode, preds in report.predictions.items():
        for r in preds:
            d = {"family": report.family, "hardware": report.hardware, "mode": mode, "label": r.label,
                 "size": r.size, "measured_s": r.measured_s, "predicted_s": r.predicted_s, "error": r.error,
                 "bound": r.bound, "regs_per_thread": r.regs_per_thread, "blocks_per_sm": r.blocks_per_sm}
            c = comp.get((r.label, r.size))
            if c is not None:
                for k in COUNTERS:
                    d.update({f"predicted_{k}": c.predicted[k], f"measured_{k}": c.measured[k],
                              f"{k}_error": c.error(k)})
            out.append(d)
    return out


def write_csv(reports: Sequence[FamilyReport], path: str | Path) -> Path:
    rows = [r for rep in reports for r in report_rows(rep)]
    cols = list(dict.fromkeys(k for r in rows for k in r))
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    return p


# ----- printing ----------------------------------------------------------------------------------------------
def _pct(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x * 100:+.1f}%"


def print_report(rep: FamilyReport, console, *, per_config: bool = True) -> None:
    """The report of one family as rich tables on ``console``."""
    from rich.table import Table  # noqa: PLC0415

    title = (f"{rep.family}: tilesim vs measured on {rep.hardware} ({rep.results_dir}); "
             f"calibrated: {', '.join(rep.calibrated_fields) or 'none'}")
    if per_config:
        t = Table(title=title)
        for col in ("size", "config", "measured us", *(f"{m} us" for m in rep.predictions),
                    *(f"{m} err" for m in rep.predictions), "bound", "regs"):
            t.add_column(col, justify="left" if col in ("size", "config", "bound") else "right")
        by_mode = {m: {(r.label, r.size): r for r in ps} for m, ps in rep.predictions.items()}
        for r in sorted(rep.rows, key=lambda r: (r.size, r.measured_s)):
            others = [by_mode[m][(r.label, r.size)] for m in rep.predictions]
            t.add_row(r.size, r.label, f"{r.measured_s * 1e6:.1f}", *(f"{o.predicted_s * 1e6:.1f}" for o in others),
                      *(_pct(o.error) for o in others), r.bound, str(r.regs_per_thread or ""))
        console.print(t)
    s = Table(title=f"{rep.family}: summary ({len(rep.rows)} configs, {len(rep.skipped)} not measured ok)")
    for col in ("mode", "MAPE", "bias", "median |err|", "max |err|", "min Spearman", "max regret"):
        s.add_column(col, justify="left" if col == "mode" else "right")
    for mode in rep.predictions:
        st = rep.stats(mode)
        s.add_row(mode, f"{st['mape'] * 100:.1f}%", _pct(st["bias"]), f"{st['median_abs_error'] * 100:.1f}%",
                  f"{st['max_abs_error'] * 100:.1f}%", f"{st['min_spearman']:.3f}", f"{st['max_regret'] * 100:.1f}%")
    console.print(s)
    st = rep.stats("informed" if "informed" in rep.predictions else next(iter(rep.predictions)))
    fastest = fastest_measured(rep)
    for size in sorted(st["regret"]):
        rho = st["spearman"].get(size, math.nan)
        best = fastest.get(size)
        rate = f" ({best[2] / 1e12:.2f} TB/s of compulsory bytes)" if best and best[2] else ""
        won = f"; fastest measured {best[0]}, {best[1] * 1e6:.1f} us{rate}" if best else ""
        console.print(f"  {size}: Spearman {rho:.3f}, top-1 regret {st['regret'][size] * 100:.1f}%{won}")
    if rep.counters:
        summ = rep.summary()
        for k in COUNTERS:
            console.print(f"  {k} vs Nsight Compute ({len(rep.counter_errors(k))} configs): median |err| "
                          f"{summ[f'{k}_abs_error_median'] * 100:.1f}%, max {summ[f'{k}_abs_error_max'] * 100:.1f}%")
    for label, size, med in rep.references:
        console.print(f"  reference {label} at {size}: {med * 1e6:.1f} us")


def fastest_measured(rep: FamilyReport) -> dict[str, tuple[str, float, float]]:
    """Per problem size: the fastest measured configuration's label, its median time, and the
    family's compulsory HBM bytes (``counts(config)["min_hbm_bytes"]``) over that time."""
    fam = registry.get(rep.family)
    best: dict[str, Prediction] = {}
    for r in rep.rows:
        if r.size not in best or r.measured_s < best[r.size].measured_s:
            best[r.size] = r
    return {size: (r.label, r.measured_s,
                   fam.counts(r.config).get("min_hbm_bytes", 0.0) / r.measured_s if r.config is not None else 0.0)
            for size, r in best.items()}


def main_report(families: Sequence[str] | None = None, results: str | Path | None = None,
                hardware: str | None = None, *, csv_path: str | Path | None = None,
                plot_path: str | Path | None = None, modes: Sequence[str] = MODES, workers: int = 1,
                steady_state: bool = True, per_config: bool = True,
                rank_plot_path: str | Path | None = None) -> int:
    """The report command: a table per family, optionally a CSV, a predicted-vs-measured plot and a
    ranking plot (measured vs predicted rank per family and size).

    ``families`` defaults to every family with recorded results; ``results`` is a results root
    (``validation/results/<gpu>``, default: the first recorded one per family). A family that cannot
    be reported (no results, or a value its simulation needs missing from the GPU's data) gets a
    one-line error after the others' tables, and the return value is 2 (else 0)."""
    from rich.console import Console  # noqa: PLC0415

    from tilesim.cli.progress import progress  # noqa: PLC0415

    console = Console() if sys.stdout.isatty() else Console(width=200)
    fams = list(families) if families else recorded_families()
    if not fams:
        console.print(f"error: no recorded results under {suite.RESULTS_ROOT}", style="red", highlight=False)
        return 2
    reports, failed = [], []
    for fam in fams:  # configurations simulated: a bar on a terminal, a line per percent when piped
        rdir = Path(results) / fam if results else None
        try:
            with progress(f"simulating {fam}" + ("" if steady_state else " step by step")) as update:
                reports.append(compute_report(fam, rdir, hardware, modes=modes, workers=workers,
                                              steady_state=steady_state, on_progress=update))
        except ValueError as exc:  # includes a GPU whose data lacks a value the family needs
            failed.append(f"error: {fam}: {exc}")
    for rep in reports:
        print_report(rep, console, per_config=per_config)
    if csv_path and reports:
        console.print(f"wrote {write_csv(reports, csv_path)}")
    if plot_path and reports:
        from validation.harness.report_plot import accuracy_figure  # noqa: PLC0415

        fig = accuracy_figure(reports)
        Path(plot_path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(plot_path, dpi=120)
        console.print(f"wrote {plot_path}")
    if rank_plot_path and reports:
        from validation.harness.report_plot import rank_figure  # noqa: PLC0415

        mode = "informed" if "informed" in modes else modes[0]
        fig = rank_figure(reports, mode)
        Path(rank_plot_path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(rank_plot_path, dpi=120)
        console.print(f"wrote {rank_plot_path}")
    for line in failed:
        console.print(line, style="red", highlight=False)
    return 2 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    import argparse  # noqa: PLC0415

    ap = argparse.ArgumentParser(prog="python -m validation.harness.report", description=__doc__.splitlines()[0])
    ap.add_argument("families", nargs="*", help="families (default: every family with recorded results)")
    ap.add_argument("--results", default=None, help="results root, validation/results/<gpu> (default: recorded)")
    ap.add_argument("--hardware", default=None, help="catalog GPU (default: the results directory's name)")
    ap.add_argument("--csv", default=None, help="write per-configuration rows to this CSV")
    ap.add_argument("--plot", default=None, help="write the predicted-vs-measured figure (PNG/PDF/SVG)")
    ap.add_argument("--mode", choices=MODES, action="append", help="informed and/or blind (default both)")
    ap.add_argument("-j", "--workers", type=int, default=1, help="simulate in N processes")
    ap.add_argument("--exact", action="store_true", help="simulate every step (no steady-state holds)")
    ap.add_argument("--summary", action="store_true", help="only the summary tables")
    args = ap.parse_args(argv)
    return main_report(args.families, args.results, args.hardware, csv_path=args.csv, plot_path=args.plot,
                       modes=tuple(args.mode or MODES), workers=args.workers, steady_state=not args.exact,
                       per_config=not args.summary)


if __name__ == "__main__":
    sys.exit(main())
