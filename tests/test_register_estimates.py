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
gemm        110   6                      70.9%           92.7%
reduction   229   2                      100%            100%
softmax     112   0                      96.4%           87.5%
layernorm   140   2                      100%            95.0%
tc_gemm     195   2                      84.1%           95.9%
=========== ===== ====================== =============== ===================

tc_gemm's 195 rows include session 16's 23 one-buffer wgmma rows (results ``parts/``); on the 172 before them:
82.0% / 95.3%, median 1. Before issue #10's softmax and tc_gemm rules: softmax 96.4% / 81.2%, tc_gemm 43.6% / 77.3% (median
abs difference 12).

GEMM outside the suite (offline nvcc 13.0 counts; ``validation/studies/gemm_register_counts.py``):
the rule's constants and form were chosen on 2,047 configurations (``fit.csv``: 45.0% within 8,
65.9% equal occupancy). On 300 held-out ones never used to choose anything (``heldout.csv``, with
shared-memory padding the fit set lacks): 37.3% within 8 and 59.7% equal occupancy (42.0% / 67.6% on
the 262 that do not spill); the rule before issue #10's work: 9.7% and 52.7% (11.1% / 47.3%). A
tiling the rule puts over its launch bound (ptxas caps and spills it) counts as a miss: the rule
leaves it uncapped so that ``check_fits`` rejects it.

The GEMM rule's form (``validation/studies/gemm_register_forms.py``, fit.csv only): the ``load_phase``
term (pipeline none: the larger of the load phase and the inner product, not their sum) took fit.csv
from 43.9% / 65.6% to 45.0% / 65.9% and its tuner's subset (no spill, 128..512 threads, reg2d / warp,
1,328 kernels) from 46.8% / 74.2% to 47.7% / 74.0%; afterwards held-out went from 36.7% / 59.0% to
37.3% / 59.7% (the 212 tuner's kernels: 38.7% / 67.9% to 40.1% / 69.3%) and the suite stayed at
70.9% / 92.7% (one kernel, warp 128x64x16 vec, 120 -> 122 registers against the compiler's 127).
Forms the kernels' structure suggests for the suite's misses (ptxas loading the next k-step's
fragments during this one's FFMAs; all four k-steps of a float4 A row live; 10% over the
accumulators) lose 3.7 to 8.2 points within 8 on both development subsets, so they are not in the
rule; none of the other forms gains in both figures either. The
development set bounds what a form can reach: a least-squares fit with twelve terms per (vectorize,
pipeline) group, scored on the kernels it was fitted to, puts only 28-76% within 8; and ptxas's count
lies -3 to +112 registers (median +29) from the fewest it can run the kernel in without spilling
(24 development kernels under -maxrregcount caps, ``need.csv``), registers it spends by choice.

The recorded counts are CuPy NVRTC's on the H200; offline nvcc 13.0 differs on 8 of the 28 GEMM
kernels (by 2-6 registers but one: warp 128x64x16 vec cp_async3, NVRTC 127, nvcc 165, the rule 156).
Against nvcc's counts of the suite kernels the rule scores gemm 74.5% / 92.7%, softmax 88.4% / 80.4%,
layernorm 91.4% / 90.0%, reduction 100% / 100%, tc_gemm 80.2% / 95.3%
(``python -m validation.harness.compile`` lists the disagreements). A one-off check outside the
repository (NVRTC 13.2 of the nvidia-cuda-nvrtc wheel, the suite's sources and options, compiled to
an sm_90 cubin) gave nvcc 13.0's counts on the 28 GEMM kernels, not the recorded ones (warp
128x64x16 vec cp_async3: 165), so which compiler path produced the recorded counts is not settled.

tc_gemm outside the suite (offline nvcc 13.0 counts of wmma / mma_sync kernels;
``validation/studies/tc_gemm_register_counts.py``, two disjoint seeded draws of 120 kernels none of
which is in the suite): ``dev.csv``, looked at while the rule's form was chosen, 48.3% within 8 and
88.3% equal occupancy (the rule before: 11.7% / 67.5%); ``heldout.csv``, compiled after the rule was
final, 49.2% / 85.8% (before: 10.0% / 70.8%). Softmax over a grid of 586 kernels
(``validation/studies/softmax_register_counts.py``, where the single-block term was read from):
89.6% / 94.2% (before: 89.6% / 93.9%).
"""

from __future__ import annotations

import statistics
from functools import cache
from pathlib import Path

import pytest

from tilesim.analytic.occupancy import occupancy
from tilesim.hardware import catalog
from validation.harness.report import config_from_row
from validation.harness.rows import recorded_rows

RESULTS = Path(__file__).resolve().parents[1] / "validation" / "results" / "h200"

# today's fractions (regression guard: a rule change may not make them worse)
ACHIEVED = {  # family: (within 8, equal occupancy)
    "gemm": (0.70, 0.92),
    "reduction": (1.0, 1.0),
    "softmax": (0.96, 0.87),
    "layernorm": (1.0, 0.95),
    "tc_gemm": (0.84, 0.95),
}
WITHIN_BAR, OCCUPANCY_BAR = 0.90, 0.95  # issue #10
FAMILIES = tuple(ACHIEVED)


def _estimate(cfg) -> int:
    return getattr(cfg, "estimated_launch_regs", cfg.estimated_regs)


@cache
def compare(family: str) -> dict:
    hw = catalog.load("h200")
    diffs, occ_equal = [], []
    for row in recorded_rows(RESULTS / family, "times.csv"):  # the main rows, then later runs' (parts/)
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
MISS_WITHIN = {"gemm", "tc_gemm"}
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


# ----- GEMM configurations outside the suite (nvcc's counts, validation/studies/gemm_register_counts.py) --
GEMM_REGS = RESULTS / "studies" / "gemm_regs"
HELDOUT_ACHIEVED = (0.37, 0.59)  # within 8, equal occupancy on heldout.csv (300 kernels)


def _compare_offline(path: Path) -> dict:
    from validation.studies.gemm_register_counts import read

    hw = catalog.load("h200")
    rows = read(path)
    diffs = [c.estimated_regs - regs for c, regs in rows]
    occ = [c.estimated_regs <= hw.max_regs_per_thread  # over 255: the rule says the tiling cannot launch
           and occupancy(hw, c.threads, c.estimated_regs, c.smem_bytes).blocks_per_sm
           == occupancy(hw, c.threads, regs, c.smem_bytes).blocks_per_sm for c, regs in rows]
    n = len(rows)
    return {"n": n, "within8": sum(abs(d) <= 8 for d in diffs) / n, "occ_equal": sum(occ) / n}


def test_gemm_heldout_configurations():
    """The GEMM rule on 300 configurations no constant was chosen on (none in the suite or fit.csv)."""
    from validation.families.gemm.runner import kernel_name
    from validation.studies.gemm_register_counts import fit_set, read, suite_names

    figures = _compare_offline(GEMM_REGS / "heldout.csv")
    assert figures["n"] == 300
    within, occ = HELDOUT_ACHIEVED
    assert figures["within8"] >= within, figures
    assert figures["occ_equal"] >= occ, figures
    held = {kernel_name(c) for c, _ in read(GEMM_REGS / "heldout.csv")}
    assert not held & (set(fit_set()) | suite_names()), "held-out kernels overlap the fit set or the suite"


def test_gemm_load_phase_is_the_larger_phase_not_a_sum():
    """Pipeline none: when a k-tile's loads in flight with their values need more registers than the
    inner product, the peak is the load phase's; with a pipeline the loaded values stay live anyway."""
    from tilesim import GemmConfig

    few_warps = GemmConfig(m=4096, n=4096, k=4096, variant="warp", bm=128, bn=64, bk=16, wm=64, wn=32,
                           wniter=2, tm=4, tn=4, vectorize=True)  # 128 threads, 4 + 2 float4 loads
    t = few_warps.register_terms
    in_flight = (2 + 4) * 6
    inner_product = t["fragments"] + t["a_kvec"] + t["staging"]  # 16 + 0 + 18
    assert (in_flight, inner_product, t["load_phase"]) == (36, 34, 2)
    assert few_warps.with_(pipeline="regs").register_terms["load_phase"] == 0
    assert few_warps.with_(vectorize=False).register_terms["load_phase"] == 0  # 1 value per load


def test_gemm_rule_is_the_best_form_on_the_development_set():
    """No candidate form of validation/studies/gemm_register_forms.py beats the rule on fit.csv in
    both figures (the forms were scored there only; heldout.csv is not read)."""
    from validation.studies.gemm_register_forms import FORMS, dev_sets, score

    fit = dev_sets()["fit"]
    rule_within, rule_occ = score(fit, None)
    assert (round(rule_within, 3), round(rule_occ, 3)) == (0.450, 0.659)
    for name, form in FORMS.items():
        within, occ = score(fit, form)
        assert not (within > rule_within and occ > rule_occ), name


def test_gemm_rule_terms_are_structural():
    """Accumulators, fragments and staging grow with the tile as the kernel's structure says."""
    from tilesim import GemmConfig
    from tilesim.kernels.gemm.config import launch_bound_regs, snap_to_occupancy_step

    warp = GemmConfig(m=4096, n=4096, k=4096, variant="warp", bm=128, bn=128, bk=16, wm=64, wn=64,
                      wniter=4, tm=8, tn=4, vectorize=True)
    t = warp.register_terms
    assert t["accumulators"] == 128 and t["fragments"] == 8 + 16 and t["a_kvec"] == 0
    assert t["staging"] == 3 * (4 + 4)  # four float4 loads of A and four of B per thread, 3 registers each
    assert t["load_phase"] == 0  # 8 loads in flight (2 + 4 registers each) need less than the inner product
    regs2 = warp.with_(pipeline="regs").register_terms
    assert regs2["staging"] == (3 + 4) * 8  # the prefetched values stay live across the inner product
    flat = GemmConfig(m=4096, n=4096, k=4096, variant="reg2d", bm=128, bn=128, bk=8, tm=8, tn=8)
    assert flat.register_terms["a_kvec"] == 1.5 * 8  # A rows read as float4 along k
    assert flat.with_(smem_pad=1).register_terms["a_kvec"] == 0  # odd row stride: scalar reads
    assert launch_bound_regs(1024) == 64 and launch_bound_regs(512) == 128 and launch_bound_regs(128) == 255
    assert snap_to_occupancy_step(132, 128) == 128  # 4 blocks of 128 threads fit at 128 registers
    assert snap_to_occupancy_step(140, 128) == 140  # 12 over the step: left alone


# ----- tc_gemm and softmax outside the suite (nvcc's counts, validation/studies/*_register_counts.py) ------
TC_GEMM_REGS = RESULTS / "studies" / "tc_gemm_regs"
TC_OFFLINE_ACHIEVED = {"dev": (0.48, 0.88), "heldout": (0.49, 0.85)}  # within 8, equal occupancy


def _fractions(rows) -> dict:
    hw = catalog.load("h200")
    within = [abs(c.estimated_regs - regs) <= 8 for c, regs in rows]
    occ = [c.estimated_regs <= hw.max_regs_per_thread
           and occupancy(hw, c.threads, c.estimated_regs, c.smem_bytes).blocks_per_sm
           == occupancy(hw, c.threads, regs, c.smem_bytes).blocks_per_sm for c, regs in rows]
    return {"n": len(rows), "within8": sum(within) / len(rows), "occ_equal": sum(occ) / len(rows)}


@pytest.mark.parametrize("which", ["dev", "heldout"])
def test_tc_gemm_configurations_outside_the_suite(which):
    """The tc_gemm rule on wmma / mma_sync kernels outside the suite (heldout: drawn after the rule)."""
    from validation.families.tc_gemm import mma
    from validation.studies.tc_gemm_register_counts import read, suite_names

    rows = read(TC_GEMM_REGS / f"{which}.csv")
    figures = _fractions(rows)
    assert figures["n"] == 120
    within, occ = TC_OFFLINE_ACHIEVED[which]
    assert figures["within8"] >= within, figures
    assert figures["occ_equal"] >= occ, figures
    assert not {mma.kernel_name(c) for c, _ in rows} & suite_names(), "a suite kernel in the offline set"


def test_tc_gemm_offline_sets_are_disjoint():
    from validation.families.tc_gemm import mma
    from validation.studies.tc_gemm_register_counts import read

    dev, held = ({mma.kernel_name(c) for c, _ in read(TC_GEMM_REGS / f"{w}.csv")} for w in ("dev", "heldout"))
    assert not dev & held


def test_softmax_grid():
    """The softmax rule on the 586-kernel grid (offline nvcc)."""
    from validation.studies.softmax_register_counts import read

    figures = _fractions(read(RESULTS / "studies" / "softmax_regs" / "grid.csv"))
    assert figures["n"] == 586
    assert figures["within8"] >= 0.89 and figures["occ_equal"] >= 0.94, figures


def test_tc_gemm_rule_terms_are_structural():
    """wgmma: setmaxnreg's consumer count under the launch bound; mma: hoisting stops at the step."""
    from tilesim.kernels.tc_gemm.config import TcGemmConfig

    base = dict(m=4096, n=4096, k=4096)
    c1 = TcGemmConfig(**base, instruction="wgmma", dtype="fp16", b_layout="col", bm=64, bn=128, bk=64, wm=64,
                      wn=128, stages=3, consumers=1)
    c2 = c1.with_(bm=128, consumers=2)
    assert (c1.threads, c1.estimated_regs) == (256, 232)  # the consumers' setmaxnreg, whatever the tile
    assert (c2.threads, c2.estimated_regs) == (384, 168)  # 65536 / 384 in steps of 8
    mma = TcGemmConfig(**base, bm=128, bn=128, bk=32, wm=64, wn=32, stages=3)  # 8 warps
    t = mma.register_terms
    assert t["accumulators"] == 64 and t["step_fragments"] == 4 * 4 + 4 * 2 and t["tile_fragments"] == 2 * 24
    # needs 64 + 24 + 28 = 116 (2 blocks of 256 threads), would use 140 (1 block): stops at 128
    assert mma.estimated_regs == 128
    wmma = mma.with_(instruction="wmma", layout="padded")
    assert wmma.register_terms == t  # a WMMA fragment's duplicated registers are not counted
    deep = mma.with_(bk=64)
    assert deep.register_terms["tile_fragments"] == 4 * 24 and deep.estimated_regs == 128


def test_softmax_single_block_snap():
    """A 1024-thread classic kernel at 40 registers (one block) gets 32 (two); at 256 threads it keeps 40."""
    from tilesim.kernels.softmax.config import SoftmaxConfig

    kw = dict(rows=4096, cols=4096, variant="block_tree", vector=4, unroll=4)
    assert SoftmaxConfig(**kw, threads=1024).estimated_regs == 32
    assert SoftmaxConfig(**kw, threads=256).estimated_regs == 40
    assert SoftmaxConfig(**{**kw, "unroll": 8}, threads=1024).estimated_regs == 56  # two blocks need 32: too far
    big = SoftmaxConfig(rows=4096, cols=16384, variant="block_tree", vector=4, threads=512, cache="registers")
    assert big.estimated_regs == 48  # 16 + 32 floats: two blocks of 512 fit at 48
