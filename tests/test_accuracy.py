"""The simulator against the recorded measurements (validation/results/<gpu>/<family>/), per family.

Bars (issue #8): MAPE <= 9.5 % for GEMM and <= 12 % for the other families, Spearman >= 0.9 and
top-1 regret <= 10 % within every problem size, DRAM bytes within 15 % of Nsight Compute for every
configuration of the new families. Where the model misses a bar today the test says so with a strict
xfail naming the gap (:data:`KNOWN_GAPS`): it fails the day the model reaches the bar, so the mark
cannot rot. A regression guard holds each family's MAPE to the figure recorded in
``validation/results/<gpu>/recorded_figures.toml`` (+0.5 points). Each configuration is simulated
once per session (informed mode: the compiler's register count). A family the GPU's hardware data
cannot simulate yet (a missing sourced value) is skipped, the missing value named.
"""

from __future__ import annotations

import csv
import math
import re
import tomllib

import pytest

from tilesim.hardware import MissingHardwareValue
from tilesim.kernels import registry
from validation.harness.report import compute_report
from validation.harness.suite import RESULTS_ROOT

RECORDED = sorted((p.parent.parent.name, p.parent.name) for p in RESULTS_ROOT.glob("*/*/times.csv")
                  if p.parent.name in registry.families())
MAPE_BAR = {"gemm": 0.095}
MAPE_BAR_NEW_FAMILY = 0.12
SPEARMAN_BAR = 0.9
REGRET_BAR = 0.10
HBM_BYTES_BAR = 0.15
REGRESSION_SLACK_PCT = 0.5
#: (family, bar) -> the gap the model has today (a strict xfail; figures of the H200 report in session
#: 11, informed mode, after the flush's dirty lines were modelled: softmax's MAPE then met its bar)
KNOWN_GAPS: dict[tuple[str, str], str] = {
    ("gemm", "regret"): "top-1 regret 14.0% at 3000x2000x1000: the two fastest predictions differ by 1.7% "
                        "(warp_64x64x16 picked, 382 us; warp_128x64x16 measured 335 us)",
    ("layernorm", "mape"): "MAPE 12.5%, predicted fast (bias -9.4%): latency-bound warp-per-row kernels "
                           "and thread-per-row ones fast on the small shapes (3000x1000, 8192x1024)",
    ("reduction", "spearman"): "ranks within a size: Spearman 0.76-0.91 (50000017 the lowest)",
    ("softmax", "spearman"): "ranks within a size: Spearman 0.85 at 65536x512, 0.89 at 8192x4096",
    ("layernorm", "spearman"): "ranks within a size: Spearman 0.74-0.99 (3000x1000 the lowest)",
    ("softmax", "regret"): "top-1 regret 14.2% at 8192x4096",
    ("layernorm", "regret"): "top-1 regret 16.7% at 3000x1000, 15.7% at 8192x1024",
    ("reduction", "hbm_bytes"): "DRAM bytes: 8 configurations at +55% (4 Mi elements, chunks not a multiple "
                                "of the grid: every block is given the busiest block's trips)",
    ("softmax", "hbm_bytes"): "DRAM bytes: 11 configurations beyond 15%, all output write-back on shapes that "
                              "nearly fit in L2 (the GPU keeps dirty lines, evicts clean input first)",
    ("layernorm", "hbm_bytes"): "DRAM bytes: 29 configurations beyond 15%, the same write-back effect",
    ("tc_gemm", "hbm_bytes"): "DRAM bytes: configurations beyond 15% (max 70%), mostly 3001x4000x2008 and "
                              "WMMA from global memory",
}

pytestmark = pytest.mark.skipif(not RECORDED, reason="no recorded results")
ids = [f"{gpu}-{fam}" for gpu, fam in RECORDED]


@pytest.fixture(scope="module")
def reports():
    cache: dict = {}

    def get(gpu: str, family: str):
        if (gpu, family) not in cache:
            try:
                cache[(gpu, family)] = compute_report(family, RESULTS_ROOT / gpu / family, modes=("informed",),
                                                      workers=2)
            except MissingHardwareValue as e:  # the GPU's data lacks a value this family needs
                cache[(gpu, family)] = e
        got = cache[(gpu, family)]
        if isinstance(got, MissingHardwareValue):
            pytest.skip(f"{family} cannot be simulated on {gpu} yet: {got}")
        return got
    return get


def _gap(request, family: str, bar: str) -> None:
    reason = KNOWN_GAPS.get((family, bar))
    if reason:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


@pytest.mark.parametrize("gpu,family", RECORDED, ids=ids)
def test_mape(reports, request, gpu, family):
    _gap(request, family, "mape")
    st = reports(gpu, family).stats()
    bar = MAPE_BAR.get(family, MAPE_BAR_NEW_FAMILY)
    assert st["mape"] <= bar, f"{family} on {gpu}: MAPE {st['mape']:.3f} > {bar} (bias {st['bias']:+.3f})"


@pytest.mark.parametrize("gpu,family", RECORDED, ids=ids)
def test_rank_correlation_within_every_size(reports, request, gpu, family):
    _gap(request, family, "spearman")
    rho = reports(gpu, family).stats()["spearman"]
    assert rho, "no problem size with 3 or more configurations"
    low = {s: round(r, 3) for s, r in rho.items() if not r >= SPEARMAN_BAR}
    assert not low, f"{family} on {gpu}: Spearman below {SPEARMAN_BAR} at {low}"


@pytest.mark.parametrize("gpu,family", RECORDED, ids=ids)
def test_top1_regret_within_every_size(reports, request, gpu, family):
    _gap(request, family, "regret")
    regret = reports(gpu, family).stats()["regret"]
    high = {s: round(r, 3) for s, r in regret.items() if r > REGRET_BAR}
    assert not high, f"{family} on {gpu}: top-1 regret above {REGRET_BAR} at {high}"


@pytest.mark.parametrize("gpu,family", [r for r in RECORDED if r[1] != "gemm"], ids=lambda x: x)
def test_hbm_bytes_within_15_percent_for_every_configuration(reports, request, gpu, family):
    _gap(request, family, "hbm_bytes")
    rep = reports(gpu, family)
    if not rep.counters:
        pytest.skip(f"no counters.csv for {family} on {gpu}")
    worst = max(rep.counters, key=lambda c: abs(c.error("hbm_bytes")) if not math.isnan(c.error("hbm_bytes")) else 0)
    assert len(rep.counters) == len(rep.rows), "counters missing for some configurations timed ok"
    assert abs(worst.error("hbm_bytes")) <= HBM_BYTES_BAR, \
        f"{worst.label} at {worst.size}: DRAM bytes {worst.error('hbm_bytes'):+.3f}"


def _figures(gpu: str) -> dict:
    path = RESULTS_ROOT / gpu / "recorded_figures.toml"
    return tomllib.loads(path.read_text()) if path.exists() else {}


@pytest.mark.parametrize("gpu,family", RECORDED, ids=ids)
def test_mape_not_above_the_recorded_figure(reports, gpu, family):
    fig = _figures(gpu).get(family)
    if fig is None:
        pytest.skip(f"no recorded figure for {family} in results/{gpu}/recorded_figures.toml")
    assert fig.get("mode", "informed") == "informed"
    mape_pct = reports(gpu, family).stats()["mape"] * 100
    assert mape_pct <= fig["mape_pct"] + REGRESSION_SLACK_PCT, \
        f"{family} on {gpu}: MAPE {mape_pct:.2f}% > recorded {fig['mape_pct']}% + {REGRESSION_SLACK_PCT}"


# ----- GEMM: what its recorded suite and counters show beyond the common bars ---------------------------------------
GEMM = [r for r in RECORDED if r[1] == "gemm"]
REG_TILED = ("reg1d", "reg2d", "warp")


def _is_reg_tiled(cfg) -> bool:
    return cfg.variant in REG_TILED


@pytest.fixture(scope="module")
def gemm(reports):
    if not GEMM:
        pytest.skip("no recorded GEMM results")
    return reports(*GEMM[0])


def test_gemm_suite_size_and_shapes(gemm):
    assert len(gemm.rows) >= 60
    sizes = set(gemm.by_size())
    assert {"1024x1024x1024", "4096x4096x4096", "3000x2000x1000"} <= sizes
    assert any(int(s.split("x")[0]) >= 8 * int(s.split("x")[1]) for s in sizes)  # a tall-skinny one
    assert not gemm.skipped


def test_gemm_no_configuration_off_by_half(gemm):
    worst = max(gemm.rows, key=lambda r: abs(r.error))
    assert abs(worst.error) <= 0.5, f"{worst.label} at {worst.size}: {worst.error:+.2f}"


def test_gemm_cp_async_shared_wavefronts_against_nsight_compute(gemm):
    """What cp.async adds to the shared-memory pipe over the register-staged sibling kernel, predicted
    from the staging probe's rule, against Nsight Compute, where A's rows are whole 128-byte lines
    (at K = 1000 rows straddle lines and the model predicts about a third too little: a known gap)."""
    by = {(c.label, c.size): c for c in gemm.counters}
    checked = 0
    for (label, size), c in by.items():
        sib = by.get((re.sub(r"_cp_async\d", "", label), size))
        if "_cp_async" not in label or sib is None or (int(size.split("x")[2]) * 4) % 128:
            continue
        pred = c.predicted["smem_wavefronts"] - sib.predicted["smem_wavefronts"]
        meas = c.measured["smem_wavefronts"] - sib.measured["smem_wavefronts"]
        assert abs(pred - meas) <= 0.1 * meas, f"{label} at {size}: {pred:.3g} vs {meas:.3g}"
        checked += 1
    assert checked >= 10


def test_gemm_dram_bytes_median_within_25_percent_for_register_tiled(gemm):
    errs = sorted(abs(e) for e in gemm.counter_errors("hbm_bytes", _is_reg_tiled))
    assert errs, "no counters recorded for register-tiled configurations"
    assert errs[len(errs) // 2] <= 0.25


@pytest.mark.xfail(strict=True, reason="at 4096^3 blocks sharing an SM drift apart in k (schedule_trace.npz) and shared lines take more L2 (l2_share_probe.json); the engine keeps block groups in step")
def test_gemm_dram_bytes_every_register_tiled_within_25_percent(gemm):
    assert max(abs(e) for e in gemm.counter_errors("hbm_bytes", _is_reg_tiled)) <= 0.25


def test_gemm_counters_recorded_for_every_4096_config(gemm):
    at_4096 = {r.label for r in gemm.rows if r.size == "4096x4096x4096"}
    with_counters = {c.label for c in gemm.counters if c.size == "4096x4096x4096"}
    assert at_4096 <= with_counters
    assert all(not math.isnan(c.measured["hbm_bytes"]) for c in gemm.counters)


def test_gemm_best_measured_kernel_reaches_70_percent_of_cublas(gemm):
    with (gemm.results_dir / "times.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    at = [r for r in rows if (r["m"], r["n"], r["k"]) == ("4096", "4096", "4096") and r["status"] == "ok"]
    cublas = [float(r["median_s"]) for r in at if r["label"] == "cublas"]
    ours = [float(r["median_s"]) for r in at if r["label"] != "cublas"]
    assert cublas and ours
    assert cublas[0] / min(ours) >= 0.70


def test_gemm_instruction_counts_against_nsight_compute(gemm):
    """The lowering's warp-instruction counts, checked against smsp__inst_executed."""
    errs = sorted(abs(e) for e in gemm.counter_errors("instructions"))
    assert len(errs) == len(gemm.rows)
    assert errs[len(errs) // 2] <= 0.10, f"median |instruction error| {errs[len(errs) // 2]:.3f}"
