"""``tilesim study NAME``: one of the source document's GEMM claims as a study, a CSV and a figure.

``tilesim study --list`` names them. Each run prints the study's figures (the document's number,
the closed-form count, the simulator's prediction and, where the validation suite measured the same
configuration on the same GPU, the measured value) and writes the rows as CSV (with a header) and
the figure as PNG. Measurements are read from ``validation/results/<gpu>/gemm/`` through the
harness's readers when the validation package and the recorded files are present; ``--no-measured``
leaves them out. The studies themselves (:mod:`tilesim.studies`) never read files.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import click

import tilesim
from tilesim.cli.base import check_output, cli, console, fail, save_figure


def measured_gemm(hardware_name: str) -> dict:
    """``(label, m, n, k) -> {time_s, regs_per_thread, dram_read_bytes, dram_write_bytes,
    l2_load_bytes, smem_wavefronts}`` from the validation suite's recorded GEMM results on
    ``hardware_name`` (times.csv: ok rows' median; counters.csv: Nsight Compute); empty when the
    validation package or the files are absent."""
    try:
        from validation.harness import report, suite
    except ImportError:
        return {}
    results = suite.RESULTS_ROOT / hardware_name / "gemm"
    out: dict = {}

    def key(row):
        return (row["label"], int(row["m"]), int(row["n"]), int(row["k"]))

    for row in suite.read_rows(results / "times.csv"):
        if row.get("status") == "ok" and row.get("median_s"):
            rec = out.setdefault(key(row), {})
            rec["time_s"] = float(row["median_s"])
            if row.get("regs_per_thread"):
                rec["regs_per_thread"] = int(float(row["regs_per_thread"]))
    for row in suite.read_rows(results / "counters.csv"):
        if row.get("status", "ok") not in ("ok", ""):
            continue
        rec = out.setdefault(key(row), {})
        rec["dram_read_bytes"] = report._metric(row, "dram__bytes_read.sum")
        rec["dram_write_bytes"] = report._metric(row, "dram__bytes_write.sum")
        # what the SMs read from L2 (lts__t_bytes also counts the L2's own DRAM fills)
        rec["l2_load_bytes"] = report._metric(row, "lts__t_sectors_srcunit_tex_op_read.sum") * 32.0
        rec["smem_wavefronts"] = report._metric(row, "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum")
    return out


def _cell(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return repr(v) if isinstance(v, float) else str(v)


def write_csv(result, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(result.columns)
        for row in result.rows:
            w.writerow([_cell(row.get(c)) for c in result.columns])
    return path


def _parse_shape(text: str) -> tuple[int, int, int]:
    parts = text.lower().replace("^3", "").split("x")
    try:
        vals = [int(p) for p in parts]
    except ValueError:
        fail(f"--shape {text}: must be MxNxK (e.g. 4096x4096x4096) or N^3")
    if len(vals) == 1:
        vals = vals * 3
    if len(vals) != 3 or min(vals) < 1:
        fail(f"--shape {text}: must be MxNxK (e.g. 4096x4096x4096) or N^3, positive")
    return tuple(vals)


@cli.command("study")
@click.argument("name", required=False)
@click.option("--list", "list_", is_flag=True, help="list the studies and exit")
@click.option("--hardware", default="h200", show_default=True, help="GPU to predict")
@click.option("--shape", default="4096x4096x4096", show_default=True,
              help="GEMM problem MxNxK (the document's figures are for 4096^3)")
@click.option("--csv", "csv_path", default=None, help="CSV of the rows [default: out/study_<name>.csv]")
@click.option("--plot", "plot_path", default=None, help="PNG figure [default: out/study_<name>.png]")
@click.option("--no-measured", is_flag=True, help="leave out the validation suite's measurements")
def study(name, list_, hardware, shape, csv_path, plot_path, no_measured) -> None:
    """Run one of the source document's GEMM studies (see --list): print its figures, write a CSV
    and a figure."""
    from tilesim.studies import STUDIES, run_study

    if list_:
        for s in STUDIES.values():
            click.echo(f"{s.name:18s} {s.title}")
        return
    if name is None:
        fail(f"give a study name (one of {', '.join(STUDIES)}) or --list")
    if name not in STUDIES:
        fail(f"study {name!r} is unknown; known: {', '.join(STUDIES)}")
    stem = "study_" + name.replace("-", "_")
    csv_path = csv_path or f"out/{stem}.csv"
    plot_path = plot_path or f"out/{stem}.png"
    check_output(csv_path, "--csv")
    check_output(plot_path, "--plot")
    m_n_k = _parse_shape(shape)
    try:
        hw = tilesim.resolve_hardware(hardware)
    except (ValueError, OSError) as e:
        fail(str(e))
    measured = {} if no_measured else measured_gemm(hw.name)
    try:
        result = run_study(name, hw, m_n_k, measured)
    except ValueError as e:
        fail(str(e))
    from tilesim.study_figures import study_figure

    out = console()
    out.print(f"[bold]{result.name}[/bold]: {result.title}, GEMM {result.shape_str} fp32 on {result.hardware}"
              + ("" if measured else " (no measurements read)"))
    for line in result.summary:
        out.print(f"  {line}", soft_wrap=True, markup=False)
    out.print(f"wrote {len(result.rows)} rows to {write_csv(result, csv_path)}")
    out.print(f"wrote figure to {save_figure(study_figure(result), plot_path)}")
