"""tc_step_parts: the ring kernels' k-loop by part, measured inside the suite's kernels (a GPU diagnostic); here
the CPU side: its instrumented sources, its summary and the recorded files read beside the engine."""

from pathlib import Path

import pytest

from validation.harness.suite import load_suite
from validation.studies import tc_step_parts as tsp

RECORDED = Path(__file__).resolve().parents[1] / "validation" / "results" / "h200" / "studies" / "tc_step_parts"


def _cfg(label, size=4096):
    return next(c for c in load_suite("tc_gemm") if c.label == label and c.m == size)


def test_the_parts_are_compiled_in_only_when_asked():
    from validation.families.tc_gemm import mma, wgmma

    ring = _cfg("wgmma_fp16_Bcol_128x256x64_swz_s4_c2_cl2")
    assert "#define TC_TRACE 0" in wgmma.kernel_source(ring).code
    assert "#define TC_TRACE 2" in wgmma.kernel_source(ring, trace=2).code
    with pytest.raises(ValueError, match="stages >= 2"):
        wgmma.kernel_source(_cfg("wgmma_fp16_Bcol_128x128x64_swz_s1_c2"), trace=2)
    staged = _cfg("mma_fp16_Bcol_128x256x32_w64x64_swz_s4")
    plain, parts = mma.kernel_source(staged).code, mma.kernel_source(staged, parts=True).code
    assert "#define TC_PARTS 1" not in plain and parts == "#define TC_PARTS 1\n" + plain


def test_summary_is_cycles_a_kstep_median_over_blocks_then_reps():
    rep = [[7, 100, 10, 200, 20, 30, 5, 40], [8, 120, 12, 220, 22, 31, 6, 41], [9, 140, 14, 240, 24, 32, 7, 42]]
    got = tsp.summarize([rep, rep, [[b[0]] + [2 * x for x in b[1:]] for b in rep]], ktiles=10)
    assert got["producer_loop"]["value"] == pytest.approx(12.0)
    assert got["consumer_release"]["value"] == pytest.approx(4.1)
    assert "smid" not in got


def _rows_8192() -> dict:
    return {r["label"]: r for r in tsp.compare(RECORDED / "tc_step_parts_8192x8192x8192.json")}


def test_the_engines_cluster_k_step_against_the_recorded_one():
    """In situ at 8192^3 the cluster kernel's release takes about 1178 cycles a k-step and its k-step 1609:
    between cluster_probe's ring from L2 (release 1059) and from HBM (1406). Since session 19 the engine
    lengthens the release by the share of the group's blocks waiting on a tile the L2 missed; its block
    groups run in step, so every block waits on each newly missed tile (a share near 1) and its k-step is
    1748, 8.6% longer than in situ, where blocks drift and fewer wait. (It was 1412, 12% short, before.) A
    diagnostic asserting today's figures; the whole kernel's time comes out 2.7% slow, so the engine's
    per-tile time beside the k-loop is short by about as much: an error that offsets this one."""
    rows = _rows_8192()
    cl2 = rows["wgmma_fp16_Bcol_128x256x64_swz_s4_c2_cl2"]
    assert cl2["measured"]["consumer_release"] == pytest.approx(1178, abs=5)
    assert cl2["measured"]["consumer_loop"] == pytest.approx(1609, abs=5)
    assert 1.0 < cl2["engine_step"] / cl2["measured"]["consumer_loop"] < 1.15
    c2 = rows["wgmma_fp16_Bcol_128x256x64_swz_s4_c2"]
    assert c2["engine_step"] == pytest.approx(c2["measured"]["consumer_loop"], rel=0.05)


@pytest.mark.xfail(strict=True, reason="the engine's cluster k-step at 8192^3 is 1748 cycles against 1609 in situ: its "
                   "block groups run in step, so every block of a group waits on each tile the L2 missed (the "
                   "release's HBM share near 1; in situ the release, 1178, is about 35% of the way from the L2 "
                   "ring's 1059 to the HBM ring's 1406): the blocks' drift is not simulated (issue #10)")
def test_the_engines_cluster_k_step_is_within_5_percent_of_the_recorded_one():
    cl2 = _rows_8192()["wgmma_fp16_Bcol_128x256x64_swz_s4_c2_cl2"]
    assert cl2["engine_step"] == pytest.approx(cl2["measured"]["consumer_loop"], rel=0.05)
