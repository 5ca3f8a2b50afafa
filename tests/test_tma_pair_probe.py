"""The TMA pair probe (validation/calibration/tma_pair_probe): the .cu's defines match the module's
constants, it compiles for sm_90a without spills, the walks load what the docstring says, and the row
summary and table work on synthetic records (never a result)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from validation.calibration import probe_common as pc
from validation.calibration import tma_pair_probe as tp

CU = tp.KERNEL_SRC.read_text()


def test_constants_match_the_cuda_defines():
    for py, cu in (("REC", "PR_REC"), ("TILES_X_SHIFT", "PR_TILES_X_SHIFT"), ("MAX_STAGES", "PR_MAX_STAGES")):
        m = re.search(rf"#define {cu} (\d+)", CU)
        assert m and int(m.group(1)) == getattr(tp, py), py
    assert 1 << tp.TILES_X_SHIFT == tp.TMA_COLS // tp.BOX_COLS
    assert max(tp.STAGES) <= tp.MAX_STAGES


def test_pair_bytes_and_smem():
    assert tp.pair_bytes(128, 256) == 48 * 1024 and tp.pair_bytes(64, 64) == 16 * 1024
    with pytest.raises(ValueError):
        tp.pair_bytes(4, 64)  # not a 1024-byte swizzle atom
    for a, b in tp.PAIRS:
        for st in tp.STAGES:
            s = tp.smem_bytes(st, a, b)
            assert 2 * (s + 1024) > 228 * 1024  # one block per SM
            assert s <= 227 * 1024
    with pytest.raises(ValueError):
        tp.smem_bytes(3, 64, 64)


def test_walks():
    grid, iters = 132, tp.ITERS
    w = tp.walk("l2_disjoint", grid, iters)
    seen = [set(tp.tiles_of(w, b, iters)) for b in range(grid)]
    assert all(len(s) == tp.L2_PERIOD for s in seen)
    assert len(set().union(*seen)) == grid * tp.L2_PERIOD  # disjoint
    assert grid * tp.L2_PERIOD * tp.pair_bytes(128, 256) < 16 << 20  # well inside the L2
    w = tp.walk("l2_same", grid, iters)
    assert all(tp.tiles_of(w, b, iters) == tp.tiles_of(w, 0, iters) for b in range(grid))
    for cursor in (0, tp.HBM_TILES - 5):
        w = tp.walk("hbm", grid, iters, cursor)
        allt = [t for b in range(grid) for t in tp.tiles_of(w, b, iters)]
        assert len(set(allt)) == grid * iters  # every pair a fresh tile
        assert all(0 <= t < tp.HBM_TILES for t in allt)
    with pytest.raises(ValueError):
        tp.walk("l3", grid, iters)
    plan = tp.rows_plan(132)
    assert len(plan) == len(tp.PAIRS) * 5 * len(tp.STAGES)
    assert all(not (src == "l2_same" and g == 1) for _, _, src, g, _ in plan)


def test_only_group():
    assert pc.parse_groups("tma_pair", tp.GROUPS) == ("tma_pair",)
    with pytest.raises(ValueError):
        pc.parse_groups("tma", tp.GROUPS)


def test_summarize_row_on_synthetic_records():
    blocks, iters, stages, pb = 2, 8, 2, 48 * 1024
    lat = [5000, 4000] + [1800] * 6 + [5200, 4100] + [2000] * 6
    rec = [iters * 1000, iters * 500, 0, 0, iters * 1000, iters * 500, 1, 0]  # 2 GHz
    r = tp.summarize_row([lat], [rec], [1e-5], blocks, iters, stages, pb)
    assert r["lat_cycles"]["n"] == blocks * (iters - stages)
    assert r["lat_cycles"]["value"] == pytest.approx(1900)
    assert r["first_cycles"]["value"] == pytest.approx(5100)
    assert r["sm_bytes_per_clk"]["value"] == pytest.approx(pb / 1000)
    assert r["sm_clock_hz"]["value"] == pytest.approx(2e9)
    assert r["lat_ns"] == pytest.approx(950)
    assert r["chip_bytes_per_s"]["value"] == pytest.approx(blocks * iters * pb / 1e-5)
    with pytest.raises(ValueError):
        tp.summarize_row([lat[:-1]], [rec], [1e-5], blocks, iters, stages, pb)
    with pytest.raises(ValueError):
        tp.summarize_row([lat], [[0] * 8], [1e-5], blocks, iters, stages, pb)
    table = tp.format_table({"rows": {"tma_pair.a128b256.hbm.sms2.s2": r}, "errors": {"x": "boom"}})
    assert "1900" in table and "FAILED" in table


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_compiles_for_sm90a_without_spills(tmp_path):
    p = subprocess.run(["nvcc", "-cubin", f"-arch={tp.ARCH}", "-O3", "-Xptxas", "-v", "-o",
                        str(tmp_path / "tp.cubin"), str(tp.KERNEL_SRC)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert not pc.ptxas_warnings(p.stderr)
    assert "'tma_pair'" in p.stderr and "'pr_spin'" in p.stderr
    if shutil.which("cuobjdump"):
        loop = pc.hot_loop(pc.disassemble(tmp_path / "tp.cubin"), "tma_pair", "UTMALDG")
        assert pc.count_prefix(loop, "UTMALDG") == 2  # A and B of one pair each k-step
