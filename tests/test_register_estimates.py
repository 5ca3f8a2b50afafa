"""The blind register estimates against the compiler (issue #10).

For every recorded suite kernel of a family (``validation/results/h200/<family>/times.csv``), the
configuration's blind estimate (``estimated_regs``; reduction: the most of the kernels one run
launches, ``estimated_launch_regs``, as the recorded count is the maximum over them) is compared
with the compiler's count (``regs_per_thread``: NVRTC's ``num_regs`` on the H200, a compiler fact,
no measured time is read). Two figures per family: the fraction within 8 registers and the fraction
with the same theoretical occupancy on the H200 (:func:`tilesim.analytic.occupancy.occupancy`).

The issue's bars (90% within 8, 95% equal occupancy) are asserted as strict xfails where a family
misses them; today's achieved fractions are asserted as a regression guard (figures below, from
the rules in each family's ``config.py``):

=========== ===== ====================== =============== ===================
family      rows  median abs difference  within 8        equal occupancy
=========== ===== ====================== =============== ===================
gemm        110   14                     30.9%           81.8%
reduction   229   2                      100%            100%
softmax     112   2                      94.6%           74.1%
layernorm   140   2                      100%            95.0%
=========== ===== ====================== =============== ===================
"""

from __future__ import annotations

import csv
import statistics
from functools import cache
from pathlib import Path

import pytest

from tilesim.analytic.occupancy import occupancy
from tilesim.hardware import catalog
from validation.harness.report import config_from_row

RESULTS = Path(__file__).resolve().parents[1] / "validation" / "results" / "h200"

# today's fractions (regression guard: a rule change may not make them worse)
ACHIEVED = {  # family: (within 8, equal occupancy)
    "gemm": (0.30, 0.81),
    "reduction": (1.0, 1.0),
    "softmax": (0.94, 0.74),
    "layernorm": (1.0, 0.95),
}
WITHIN_BAR, OCCUPANCY_BAR = 0.90, 0.95  # issue #10
FAMILIES = tuple(ACHIEVED)


def _estimate(cfg) -> int:
    return getattr(cfg, "estimated_launch_regs", cfg.estimated_regs)


@cache
def compare(family: str) -> dict:
    hw = catalog.load("h200")
    diffs, occ_equal = [], []
    with open(RESULTS / family / "times.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            if row.get("status") != "ok" or not row.get("regs_per_thread"):
                continue
            cfg = config_from_row(family, row)
            assert cfg.regs_per_thread is None, "a suite kernel with a register override is not blind"
            compiler = int(float(row["regs_per_thread"]))
            est = _estimate(cfg)
            diffs.append(est - compiler)
            occ = [occupancy(hw, cfg.threads, r, cfg.smem_bytes).blocks_per_sm for r in (est, compiler)]
            occ_equal.append(occ[0] == occ[1])
    n = len(diffs)
    return {"n": n, "median_abs": statistics.median(abs(d) for d in diffs),
            "within8": sum(abs(d) <= 8 for d in diffs) / n, "occ_equal": sum(occ_equal) / n}


@pytest.mark.parametrize("family", FAMILIES)
def test_recorded_compiler_counts_are_read(family):
    figures = compare(family)
    assert figures["n"] >= 100


@pytest.mark.parametrize("family", FAMILIES)
def test_regression_guard(family):
    """Today's achieved fractions hold (a rule change may improve them, not worsen them)."""
    figures = compare(family)
    within, occ = ACHIEVED[family]
    assert figures["within8"] >= within, figures
    assert figures["occ_equal"] >= occ, figures



# strict xfails where the bar is missed today: passing them would mean the xfail must go
MISS_WITHIN = {"gemm"}
MISS_OCCUPANCY = {"gemm", "softmax"}


@pytest.mark.parametrize("family", [pytest.param(f, marks=pytest.mark.xfail(
    strict=True, reason=f"{f}: fewer than 90% of suite kernels within 8 registers")) if f in MISS_WITHIN
    else f for f in FAMILIES])
def test_issue_bar_within_8_registers(family):
    assert compare(family)["within8"] >= WITHIN_BAR, compare(family)


@pytest.mark.parametrize("family", [pytest.param(f, marks=pytest.mark.xfail(
    strict=True, reason=f"{f}: fewer than 95% of suite kernels with the compiler's occupancy"))
    if f in MISS_OCCUPANCY else f for f in FAMILIES])
def test_issue_bar_equal_occupancy(family):
    assert compare(family)["occ_equal"] >= OCCUPANCY_BAR, compare(family)


def test_layernorm_rule_is_structural():
    """The register cache counts the slice plus w/b in flight, not the slice three times."""
    from tilesim.kernels.layernorm.config import LayerNormConfig
    scalar = LayerNormConfig(rows=4096, cols=16384, variant="block_row", cache="registers", vector=1, threads=256)
    assert scalar.live_floats == 64 + 2
    quad = LayerNormConfig(rows=4096, cols=16384, variant="block_row", cache="registers", vector=4, threads=256)
    assert quad.live_floats == 64 + 2 * 4 * 4
    stream = LayerNormConfig(rows=4096, cols=16384, cache="none", vector=4, unroll=4)
    assert stream.live_floats == 16
