"""The ldmatrix-fed mma.sync probe (validation/calibration/mma_feed_probe): the .cu compiles for sm_90a in
one nvcc call with no spills and every configuration the sweep names is built; records, rates, the SASS
order code and the summary work on synthetic data (tmp_path only, never a result). GPU run: ``gpu``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from validation.calibration import mma_feed_probe as mf

CU = mf.KERNEL_SRC.read_text()


def test_constants_match_the_cuda_defines():
    for py, cu in (("REC", "MF_REC"), ("BK", "MF_BK"), ("STAGES", "MF_STAGES"), ("WARPS_M", "MF_WARPS_M")):
        m = re.search(rf"#define {cu} (\d+)", CU)
        assert m and int(m.group(1)) == getattr(mf, py), py


def test_every_config_is_instantiated():
    built = {f"mf_{a}x{b}_w{w}_b{k}" for a, b, w, k in re.findall(r"^MF_SWEEP\((\d+), (\d+), (\d+), (\d+)\)", CU, re.M)}
    names = {c.name for c in mf.sweep()}
    assert {n.rsplit("_s", 1)[0] for n in names} == built
    assert len(names) == 7 * len(built)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_compiles_for_sm90a_without_spills(tmp_path):
    cubin = tmp_path / "mf.cubin"
    p = subprocess.run(["nvcc", "-cubin", "-arch=sm_90a", "-O3", "-Xptxas", "-v", "-o", str(cubin), str(mf.KERNEL_SRC)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert not re.search(r"[1-9]\d* bytes spill", p.stderr)
    assert "warning" not in p.stderr.lower()
    for c in mf.sweep():
        assert f"'{c.name}'" in p.stderr, c.name


def test_records_rates_and_coresidency():
    # two SMs, two blocks each, overlapping spans; 1000 cycles per block at 1 GHz
    raw = []
    for smid in (0, 1):
        for start in (0, 100):
            raw += [1000, 1000, smid, start]
    rec = mf.parse_records(raw, 4)
    assert rec["max_coresident"] == 2 and rec["distinct_sms"] == 2
    assert rec["clock_hz"] == pytest.approx(1e9)
    cfg = mf.Config(64, 64, 4, 2, 2, 0)
    m = mf.rep_metrics(cfg, rec, iters=10, event_s=None, sm_count=2)
    # 2 blocks x 4 warps x 20 slices x 32 MMAs / 1000 cycles
    assert m["hmma_per_clk_sm"] == pytest.approx(2 * 4 * 20 * 32 / 1000)
    assert m["cycles_per_slice_per_warp"] == pytest.approx(50)
    row = mf.summarize_config(cfg, [m, m], 2716.0)
    assert row["flop_per_clk_sm"]["value"] == pytest.approx(m["hmma_per_clk_sm"] * 4096)
    assert row["fraction_of_peak"]["value"] == pytest.approx(m["hmma_per_clk_sm"] * 4096 / 2716.0)
    with pytest.raises(ValueError, match="records"):
        mf.parse_records([1, 2, 3], 1)


def test_peak_from_tensor_json(tmp_path):
    p = tmp_path / "tensor.json"
    assert mf.peak_from_tensor_json(p)[0] == mf.FALLBACK_PEAK_FLOP_PER_CLK_SM
    p.write_text(json.dumps({"mma_sync": {"m16n8k16_fp16_f32.tp.w8": {"value": 2000.0}}}))
    assert mf.peak_from_tensor_json(p)[0] == 2000.0
    p.write_text(json.dumps({"fields": {"mma.m16n8k16.fp16": {"value": 2500.0}}}))
    assert mf.peak_from_tensor_json(p)[0] == 2500.0


SASS = """
        Function : mf_64x64_w8_b1_s1_d0_l1
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   LDSM.16.M88.4 R4, [R2] ;
        /*0020*/                   LDSM.16.MT88.4 R8, [R2+0x100] ;
        /*0030*/                   HMMA.16816.F32 R12, R4, R8, R12 ;
        /*0040*/                   HMMA.16816.F32 R16, R4, R10, R16 ;
        /*0050*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0060*/                   ISETP.NE.AND P0, PT, R3, RZ, PT ;
        /*0070*/               @P0 BRA 0x10 ;
        /*0080*/                   EXIT ;
"""


def test_sass_summary_and_order(tmp_path):
    s = mf.sass_summary(SASS, "mf_64x64_w8_b1_s1_d0_l1")
    assert s["ok"] and s["hmma"] == 2 and s["ldsm"] == 2 and s["bar"] == 1
    assert s["order"] == "L2 H2 B1"
    assert mf.check_sass(mf.Config(64, 64, 8, 1, 1, 0), s)["ok"] is False  # 2 HMMA is not 64 per iteration


def test_format_table_on_synthetic_results(tmp_path):
    rec = mf.parse_records([1000, 1000, 0, 0], 1)
    cfg = mf.Config(32, 32, 4, 1, 0, 1)
    row = mf.summarize_config(cfg, [mf.rep_metrics(cfg, rec, 4, 1e-3, 1)], 2716.0)
    text = mf.format_table({"configs": {cfg.name: row}, "errors": {"x": "boom"}})
    assert cfg.name in text and "FAILED" in text
    (tmp_path / "mma_feed.json").write_text(json.dumps({"configs": {cfg.name: row}}))


@pytest.mark.gpu
def test_quick_run_on_the_gpu(tmp_path):
    p = subprocess.run([sys.executable, "-m", "validation.calibration.mma_feed_probe", "--quick", "--out",
                        str(tmp_path)], capture_output=True, text=True, cwd=mf.REPO_ROOT, timeout=600)
    if p.returncode == 2:
        pytest.skip(p.stderr.strip())
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    res = json.loads((tmp_path / "mma_feed.json").read_text())
    for row in res["configs"].values():
        assert row["blocks_per_sm_seen"] == row["blocks_per_sm"]
        assert 0 < row["fraction_of_peak"]["value"] < 1.2
