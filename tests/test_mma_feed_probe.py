"""The ldmatrix-fed mma.sync probe (validation/calibration/mma_feed_probe): the .cu compiles for sm_90a in
one nvcc call with no spills and every configuration the sweep and the gemm_traffic group name is built;
records, rates, geometry, the SASS order code and checks, --only and the merge work on synthetic data
(tmp_path only, never a result). GPU run: ``gpu``."""

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
    for tc in mf.GT_CONFIGS:
        assert f"'{tc.kernel}'" in p.stderr, tc.kernel


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


def test_traffic_kernels_and_defines_match_the_configs():
    m = re.search(r"#define MF_GT_CSTAGES (\d+)", CU)
    assert m and int(m.group(1)) == mf.GT_CSTAGES
    for i, mode in enumerate(mf.GT_MODES):
        assert re.search(rf"#define MF_GT_{mode.upper()} {i}\b", CU), mode
    built = {f"mfgt_{n}_k{k}": mode for n, k, mode in re.findall(r"^MF_GT_KERNEL\((\w+), (\d+), MF_GT_(\w+)\)", CU, re.M)}
    assert set(built) == {tc.kernel for tc in mf.GT_CONFIGS}
    for tc in mf.GT_CONFIGS:
        assert built[tc.kernel] == tc.mode.upper()
    assert len({tc.key for tc in mf.GT_CONFIGS}) == len(mf.GT_CONFIGS)
    assert all(tc.key.startswith("gt_") for tc in mf.GT_CONFIGS)


def test_traffic_geometry():
    by = {tc.key: tc for tc in mf.GT_CONFIGS}
    a = by["gt_copy_l2_k2"]
    # 128x32 + 32x256 fp16 = 24 KiB per block per k-step, 6 x 16 bytes per thread
    assert a.copies_per_thread == 6 and a.global_bytes_per_kstep == 24 * 1024 and a.bk == 32
    assert a.hmma_per_kstep == 8 * 2 * 32
    assert a.smem_wavefronts_per_kstep() == {"ldmatrix": 512, "cp_async_writes": 192, "total": 704}
    assert by["gt_zfill_k2"].copies_per_thread == 6 and by["gt_zfill_k2"].global_bytes_per_kstep == 0
    assert by["gt_none_k2"].copies_per_thread == 0 and by["gt_commit_k2"].copies_per_thread == 0
    assert by["gt_copy_l2_k3"].copies_per_thread == 9 and by["gt_copy_l2_k3"].bk == 48
    for tc in mf.GT_CONFIGS:
        assert tc.smem_bytes <= mf.SMEM_MAX_BLOCK_BYTES, tc.key
        assert tc.smem_bytes > mf.SMEM_MAX_BLOCK_BYTES // 2, tc.key  # one block per SM
        assert tc.compute_stages & (tc.compute_stages - 1) == 0  # stage_mask = stages - 1
    assert by["gt_copy_hbm_k2"].kernel == a.kernel  # the same code, other data


def test_gt_problem():
    pr = mf.gt_problem("l2", 132)
    assert pr["bytes"] == 16 * 2**20 and len(pr["m0"]) == 132
    assert all(0 <= m0 and m0 + mf.GT_BM <= pr["m"] for m0 in pr["m0"])
    assert all(0 <= n0 and n0 + mf.GT_BN <= pr["n"] for n0 in pr["n0"])
    assert len(set(zip(pr["m0"], pr["n0"], strict=True))) == 128  # the 16 x 8 tiles, 4 blocks repeat
    h = mf.gt_problem("hbm", 132)
    assert h["bytes"] <= mf.GT_HBM_BYTES and h["bytes"] > 0.99 * mf.GT_HBM_BYTES and h["k"] % 32 == 0
    assert len(set(h["m0"])) == 132 and max(h["n0"]) + mf.GT_BN == h["n"]
    assert mf.gt_problem("hbm", 132, 48)["k"] % 48 == 0
    with pytest.raises(ValueError, match="data"):
        mf.gt_problem("dram", 132)
    with pytest.raises(ValueError, match="sm_count"):
        mf.gt_problem("l2", 0)


def test_traffic_metrics_and_summary():
    tc = next(t for t in mf.GT_CONFIGS if t.key == "gt_copy_l2_k2")
    rec = mf.parse_records([100_000, 50_000, 0, 0, 100_000, 50_000, 1, 0], 2)  # 2 GHz
    m = mf.traffic_metrics(tc, rec, iters=100, event_s=1e-4, sm_count=2)
    assert m["cycles_per_kstep"] == pytest.approx(1000)
    assert m["hmma_per_clk_sm"] == pytest.approx(512 / 1000)
    assert m["global_bytes_per_s"] == pytest.approx(24 * 1024 * 2 * 2e9 / 1000)
    row = mf.summarize_traffic(tc, [m, m], 2716.0)
    assert row["fraction_of_peak"]["value"] == pytest.approx(0.512 * 4096 / 2716.0)
    assert row["smem_wavefronts_per_clk_computed"] == pytest.approx(0.704)
    assert row["copies_per_thread_per_kstep"] == 6 and row["cp_async_wait_group"] == 2
    text = mf.format_table({"gemm_traffic": {tc.key: row}, "errors": {}})
    assert tc.key in text and "704" in text
    with pytest.raises(ValueError, match="iters"):
        mf.traffic_metrics(tc, rec, iters=0, event_s=None, sm_count=2)


def _traffic_sass(kernel: str, ldsm: int, hmma: int, ldgsts: int, books: bool) -> str:
    ops = (["DEPBAR.LE SB0, 0x2"] if books else []) + ["BAR.SYNC.DEFER_BLOCKING 0x0"]
    ops += ["LDGSTS.E.BYPASS.LTC128B.128 [R3], desc[UR4][R4.64]"] * ldgsts + (["LDGDEPBAR"] if books else [])
    ops += ["LDSM.16.M88.4 R8, [R2]"] * ldsm + ["HMMA.16816.F32 R12, R8, R10, R12"] * hmma
    lines = [f"        Function : {kernel}", "        /*0000*/                   MOV R1, c[0x0][0x28] ;"]
    for i, op in enumerate(ops, start=1):
        lines.append(f"        /*{i * 16:04x}*/                   {op} ;")
    n = len(ops) + 1
    lines.append(f"        /*{n * 16:04x}*/               @P0 BRA 0x10 ;")
    lines.append(f"        /*{(n + 1) * 16:04x}*/                   EXIT ;")
    return "\n".join(lines) + "\n"


def test_check_traffic_sass():
    by = {tc.key: tc for tc in mf.GT_CONFIGS}
    a, none = by["gt_copy_l2_k2"], by["gt_none_k2"]
    s = mf.sass_summary(_traffic_sass(a.kernel, 16, 64, 6, True), a.kernel)
    assert s["order"] == "D1 B1 G6 L16 H64"
    c = mf.check_traffic_sass(a, s)
    assert c["ok"] and c["ldgsts"] == 6 and c["depbar"] == 1 and c["ldgdepbar"] == 1 and c["unroll"] == 1
    bad = mf.check_traffic_sass(a, mf.sass_summary(_traffic_sass(a.kernel, 16, 64, 5, True), a.kernel))
    assert not bad["ok"] and "ldgsts" in bad["problem"]
    c0 = mf.check_traffic_sass(none, mf.sass_summary(_traffic_sass(none.kernel, 16, 64, 0, False), none.kernel))
    assert c0["ok"] and c0["ldgsts"] == 0 and c0["depbar"] == 0
    c2 = mf.check_traffic_sass(none, mf.sass_summary(_traffic_sass(none.kernel, 32, 128, 0, False), none.kernel))
    assert c2["unroll"] == 2 and not c2["ok"] and "bar 1 != 2" in c2["problem"]  # two k-steps, one barrier


def test_parse_only_and_merge():
    assert mf.parse_only(None) is None
    assert mf.parse_only("gemm_traffic") == ("gemm_traffic",)
    with pytest.raises(ValueError, match="unknown group"):
        mf.parse_only("gemm,sweep")
    old = {"meta": {"date_utc": "old"}, "compile": {}, "peak_flop_per_clk_sm": 1.0, "peak_source": "x",
           "configs": {"mf_a": 1}, "errors": {"mf_b": "boom", "gt_x": "old"}, "gemm_traffic": {"gt_old": 1}}
    new = {"meta": {"date_utc": "new", "groups_run": ["gemm_traffic"]}, "compile": {"c": 1},
           "peak_flop_per_clk_sm": 2.0, "peak_source": "y", "errors": {"gt_y": "new"},
           "gemm_traffic": {"gt_copy": 2}}
    out = mf.merge_results(old, new)
    assert out["configs"] == {"mf_a": 1} and out["gemm_traffic"] == {"gt_copy": 2}
    assert out["errors"] == {"mf_b": "boom", "gt_y": "new"}
    assert out["meta"]["date_utc"] == "new" and out["peak_flop_per_clk_sm"] == 2.0
    assert out["group_runs"]["sweep"]["date_utc"] == "old" and out["group_runs"]["gemm_traffic"]["date_utc"] == "new"
    assert mf.merge_results(None, new)["group_runs"] == {"gemm_traffic": out["group_runs"]["gemm_traffic"]}


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
    assert set(res["gemm_traffic"]) == {tc.key for tc in mf.GT_CONFIGS}, res["errors"]
    for row in res["gemm_traffic"].values():
        assert row["blocks_per_sm_seen"] == 1 and row["distinct_sms"] == res["meta"]["sm_count"]
        assert 0 < row["fraction_of_peak"]["value"] < 1.2
