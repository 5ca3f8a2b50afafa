"""The simulator against the recorded H200 measurements (validation/results/h200), on every CI run.

The bars are issue #3's. Where the current model does not reach a bar, the test says so with a
strict xfail naming the gap: it fails the day the model reaches the bar, so the mark cannot rot.
"""

from __future__ import annotations

import math

import pytest

from validation.report import RESULTS_ROOT, compute_report

pytestmark = pytest.mark.skipif(not (RESULTS_ROOT / "h200" / "times.csv").exists(),
                                reason="no recorded H200 results")


@pytest.fixture(scope="module")
def report():
    return compute_report(RESULTS_ROOT / "h200", "h200")


def test_suite_size_and_shapes(report):
    assert len(report.rows) >= 60
    shapes = set(report.by_shape())
    assert {"1024x1024x1024", "4096x4096x4096", "3000x2000x1000"} <= shapes
    assert any(int(s.split("x")[0]) >= 8 * int(s.split("x")[1]) for s in shapes)  # a tall-skinny one
    assert not report.skipped


def test_mape_within_15_percent(report):
    assert report.mape <= 0.15, f"MAPE {report.mape:.3f}"


def test_no_configuration_off_by_half(report):
    worst = max(report.rows, key=lambda r: abs(r.error))
    assert abs(worst.error) <= 0.5, f"{worst.label} at {worst.shape}: {worst.error:+.2f}"


@pytest.mark.parametrize("shape", ["1024x1024x1024", "4096x4096x4096", "16384x256x4096", "3000x2000x1000"])
def test_rank_correlation_within_shape(report, shape):
    assert report.spearman[shape] >= 0.9, f"Spearman {report.spearman[shape]:.3f}"


@pytest.mark.parametrize("shape", ["1024x1024x1024", "4096x4096x4096", "16384x256x4096", "3000x2000x1000"])
def test_top1_regret_within_10_percent(report, shape):
    assert report.regret[shape] <= 0.10, f"regret {report.regret[shape]:.3f}"


def test_cp_async_shared_wavefronts_against_nsight_compute(report):
    """What cp.async adds to the shared-memory pipe over the register-staged sibling kernel, predicted
    from the staging probe's rule, against Nsight Compute, where A's rows are whole 128-byte lines
    (at K = 1000 rows straddle lines and the model predicts about a third too little: a known gap)."""
    import re

    by = {(c.label, c.shape): c for c in report.counters}
    checked = 0
    for (label, shape), c in by.items():
        sib = by.get((re.sub(r"_cp_async\d", "", label), shape))
        if "_cp_async" not in label or sib is None or (int(shape.split("x")[2]) * 4) % 128:
            continue
        pred = c.predicted_smem_wavefronts - sib.predicted_smem_wavefronts
        meas = c.measured_smem_wavefronts - sib.measured_smem_wavefronts
        assert abs(pred - meas) <= 0.1 * meas, f"{label} at {shape}: {pred:.3g} vs {meas:.3g}"
        checked += 1
    assert checked >= 10


def test_dram_bytes_median_within_25_percent_for_register_tiled(report):
    errs = sorted(abs(e) for e in report.dram_errors())
    assert errs, "no counters recorded for register-tiled configurations"
    assert errs[len(errs) // 2] <= 0.25


@pytest.mark.xfail(strict=True, reason="at 4096^3 blocks sharing an SM drift apart in k (schedule_trace.npz) and shared lines take more L2 (l2_share_probe.json); the engine keeps block groups in step")
def test_dram_bytes_every_register_tiled_within_25_percent(report):
    assert max(abs(e) for e in report.dram_errors()) <= 0.25


def test_counters_recorded_for_every_4096_config(report):
    at_4096 = {r.label for r in report.rows if r.shape == "4096x4096x4096"}
    with_counters = {c.label for c in report.counters if c.shape == "4096x4096x4096"}
    assert at_4096 <= with_counters
    assert all(not math.isnan(c.measured_dram_bytes) for c in report.counters)


def test_best_measured_kernel_reaches_70_percent_of_cublas():
    import csv

    rows = list(csv.DictReader((RESULTS_ROOT / "h200" / "times.csv").open()))
    at = [r for r in rows if (r["m"], r["n"], r["k"]) == ("4096", "4096", "4096") and r["status"] == "ok"]
    cublas = [float(r["median_s"]) for r in at if r["label"] == "cublas"]
    ours = [float(r["median_s"]) for r in at if r["label"] != "cublas"]
    assert cublas and ours
    assert cublas[0] / min(ours) >= 0.70


def test_instruction_counts_against_nsight_compute(report):
    """The lowering's warp-instruction counts, checked against smsp__inst_executed."""
    errs = sorted(abs(c.instruction_error) for c in report.counters)
    assert len(errs) == len(report.rows)
    assert errs[len(errs) // 2] <= 0.10, f"median |instruction error| {errs[len(errs) // 2]:.3f}"
