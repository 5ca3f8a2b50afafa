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
GT_ALL = mf.GT_CONFIGS + mf.GT_W4_CONFIGS + mf.GT_RAGGED_CONFIGS
RECORDED = mf.REPO_ROOT / "validation" / "results" / "h200" / "calibration" / mf.RESULT_FILE


def test_constants_match_the_cuda_defines():
    for py, cu in (("REC", "MF_REC"), ("BK", "MF_BK"), ("STAGES", "MF_STAGES"), ("WARPS_M", "MF_WARPS_M")):
        m = re.search(rf"#define {cu} (\d+)", CU)
        assert m and int(m.group(1)) == getattr(mf, py), py


def test_every_config_is_instantiated():
    built = {f"mf_{a}x{b}_w{w}_b{k}" for a, b, w, k in re.findall(r"^MF_SWEEP\((\d+), (\d+), (\d+), (\d+)\)", CU, re.M)}
    names = {c.name for c in mf.sweep()}
    assert {n.rsplit("_s", 1)[0] for n in names} == built
    assert len(names) == 7 * len(built)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(ptxas -v log, SASS in cuobjdump's form or None without nvdisasm) of the .cu, as the probe compiles it."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    cubin = tmp_path_factory.mktemp("mf") / "mf.cubin"
    p = subprocess.run(["nvcc", "-cubin", "-arch=sm_90a", "-O3", "-Xptxas", "-v", "-o", str(cubin), str(mf.KERNEL_SRC)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    sass = None
    if shutil.which("nvdisasm"):
        d = subprocess.run(["nvdisasm", "-hex", "-c", str(cubin)], capture_output=True, text=True, check=True)
        sass = mf.nvdisasm_as_cuobjdump(d.stdout)
    return p.stderr, sass


def _registers(log: str, kernel: str) -> int:
    m = re.search(rf"Compiling entry function '{kernel}'.*?Used (\d+) registers", log, re.S)
    assert m, kernel
    return int(m.group(1))


@pytest.mark.slow  # the probe's nvcc build (~10 s): python -m pytest -m slow
def test_compiles_for_sm90a_without_spills(built):
    log, _ = built
    assert not re.search(r"[1-9]\d* bytes spill", log)
    assert "warning" not in log.lower()
    for c in mf.sweep():
        assert f"'{c.name}'" in log, c.name
    for tc in GT_ALL + mf.GP_CONFIGS:
        assert f"'{tc.kernel}'" in log, tc.kernel
        regs = _registers(log, tc.kernel)
        assert regs <= 255 and tc.blocks_per_sm * tc.threads * regs <= mf.REGS_PER_SM, (tc.kernel, regs)


@pytest.mark.slow  # the probe's nvcc build (~10 s): python -m pytest -m slow
def test_traffic_kernels_hot_loops_hold_the_source_counts(built):
    """Every gemm_traffic kernel's loop: per k-step its LDSM, HMMA, one BAR, its LDGSTS (4 + 4 a thread for
    the 4-warp copies) and one DEPBAR / LDGDEPBAR with copies (check_traffic_sass on nvdisasm's listing)."""
    _, sass = built
    if sass is None:
        pytest.skip("nvdisasm not on PATH")
    for tc in GT_ALL:
        c = mf.check_traffic_sass(tc, mf.sass_summary(sass, tc.kernel))
        assert c["ok"] and c["unroll"] == 1, (tc.key, c)
        assert (c["ldsm"], c["hmma"], c["bar"], c["ldgsts"]) == (8 * tc.slices, 32 * tc.slices, 1, tc.copies_per_thread)
    w4 = {tc.key: tc for tc in mf.GT_W4_CONFIGS}
    for mode in ("none", "copy_l2", "gemm_l2"):  # 1 and 2 blocks per SM: the same code, other occupancy
        k1, k2 = w4[f"gt_w4b1_{mode}_k2"].kernel, w4[f"gt_w4b2_{mode}_k2"].kernel
        assert mf.sass_summary(sass, k1)["histogram"] == mf.sass_summary(sass, k2)["histogram"], mode


@pytest.mark.slow  # the probe's nvcc build (~10 s): python -m pytest -m slow
def test_recorded_traffic_rows_keep_their_sass(built):
    """The recorded gemm_traffic rows (mma_feed.json) stay valid: with the nvcc that compiled them, each
    kernel's hot loop today is the recorded one (instruction count, order, histogram)."""
    _, sass = built
    if sass is None or not RECORDED.exists():
        pytest.skip("nvdisasm or the recorded results missing")
    rec = json.loads(RECORDED.read_text())
    v = re.search(r"release (\S+ V\S+)", subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout)
    if not v or v.group(1) != rec["meta"].get("nvcc_version"):
        pytest.skip("another nvcc than the recorded run's")
    rows = [r for r in rec.get("gemm_traffic", {}).values() if r.get("sass")]
    assert rows
    for r in rows:
        now = mf.sass_summary(sass, r["kernel"])
        for k in ("instructions", "order", "histogram"):
            assert now[k] == r["sass"][k], (r["kernel"], k)


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
    for n, k, mode, w, b, c in re.findall(r"^MF_GT_KERNEL_G\((\w+), (\d+), MF_GT_(\w+), (\d+), (\d+), (\d+)\)", CU, re.M):
        built[f"mfgt_{n}_k{k}_w{w}_b{b}_c{c}"] = mode
    assert set(built) == {tc.kernel for tc in GT_ALL}
    for tc in GT_ALL:
        assert built[tc.kernel] == tc.mode.upper()
    assert len({tc.key for tc in GT_ALL}) == len(GT_ALL)
    assert all(tc.key.startswith("gt_") for tc in GT_ALL)
    assert {mf._error_group(tc.key) for tc in mf.GT_CONFIGS} == {"gemm_traffic"}
    assert {mf._error_group(tc.key) for tc in mf.GT_W4_CONFIGS} == {"gemm_traffic_w4"}
    assert {mf._error_group(tc.key) for tc in mf.GT_RAGGED_CONFIGS} == {"gemm_traffic_ragged"}


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
    assert {tc.geometry for tc in mf.GT_CONFIGS} == {"w8_b1_c4"} and a.block_tile == (128, 256)


def test_w4_traffic_geometry():
    """The suite's 128x128x32 s3 GEMM: 4 warps, A 128x32 halves = 512 chunks / 128 threads = 4 copies,
    B 32x128 = 512 / 128 = 4; 4 x 16 KiB compute ring + 3 x 16 KiB copy ring = 112 KiB a block, two of
    them (+1 KiB reserved each) in 228 KiB, three not; the 1-block control asks for 120 KiB."""
    by = {tc.key: tc for tc in mf.GT_W4_CONFIGS}
    assert len(by) == 10
    b2, b1 = by["gt_w4b2_copy_l2_k2"], by["gt_w4b1_copy_l2_k2"]
    assert b2.kernel == "mfgt_copy_k2_w4_b2_c3" and b1.kernel == "mfgt_copy_k2_w4_b1_c3"
    assert by["gt_w4b2_gemm_hbm_k2"].kernel == "mfgt_gemm_k2_w4_b2_c3" and by["gt_w4b1_none_k2"].kernel == "mfgt_none_k2_w4_b1_c3"
    for tc in (b1, b2):
        assert tc.block_tile == (128, 128) and tc.threads == 128 and tc.bk == 32
        assert tc.copies_per_thread_ab == (4, 4) and tc.copies_per_thread == 8
        assert tc.copy_stage_bytes == 16 * 1024 and tc.compute_stage_bytes == 16 * 1024
        assert tc.smem_data_bytes == 112 * 1024 and tc.global_bytes_per_kstep == 16 * 1024
        assert tc.hmma_per_kstep == 4 * 2 * 32
        assert tc.smem_wavefronts_per_kstep() == {"ldmatrix": 256, "cp_async_writes": 128, "total": 384}
    assert b2.smem_bytes == 112 * 1024 and mf.smem_blocks_per_sm(b2.smem_bytes) == 2
    assert 2 * (b2.smem_bytes + 1024) <= 228 * 1024 < 3 * (b2.smem_bytes + 1024)
    assert b1.smem_bytes == 120 * 1024 and mf.smem_blocks_per_sm(b1.smem_bytes) == 1
    assert by["gt_w4b2_none_k2"].copies_per_thread == 0 and by["gt_w4b2_none_k2"].smem_bytes == b2.smem_bytes
    for tc in mf.GT_W4_CONFIGS:
        assert (tc.warps, tc.copy_stages, tc.compute_stages) == (4, 3, 4)
    with pytest.raises(ValueError, match="blocks_per_sm = 2 but 1 blocks"):  # 8 x 16 KiB + 48 KiB: 2 do not fit
        mf.TrafficConfig("x", "copy", 2, "l2", 8, "", warps=4, blocks_per_sm=2, copy_stages=3)
    with pytest.raises(ValueError, match="compute_stages"):  # 8 x 24 KiB + 4 x 24 KiB > 227 KiB
        mf.TrafficConfig("x", "copy", 2, "l2", 8, "")
    with pytest.raises(ValueError, match="blocks_per_sm"):  # 3 blocks of 48 KiB + ... would not be asked for
        mf.TrafficConfig("x", "copy", 2, "l2", 1, "", warps=4, blocks_per_sm=3, copy_stages=3)
    with pytest.raises(ValueError, match="copy_stages"):
        mf.TrafficConfig("x", "copy", 2, "l2", 4, "", warps=4, blocks_per_sm=2, copy_stages=1)


def test_ragged_traffic_rows():
    """The ragged group: the w4 2-block geometry with a 2-stage ldmatrix ring; A pitches of 2048, 2008 and
    2032 halves for copy and gemm; the padded load_tile's larger copy slots (128 x 5 + 32 x 17 chunks) still
    let two blocks share an SM; per k-step the A copies touch 256 / 320 / 256 sectors and 128 / 176 / 160
    lines (K = 2008: every other 64-byte slab starts mid-sector, 3 of 8 cross a line; K = 2032: 1 of 4
    crosses a line), B's 32 rows of 256 bytes 256 sectors and 64 lines."""
    by = {tc.key: tc for tc in mf.GT_RAGGED_CONFIGS}
    assert len(by) == 11
    for tc in mf.GT_RAGGED_CONFIGS:
        b = 1 if tc.key.startswith("gt_w4b1r_") else 2
        assert (tc.warps, tc.blocks_per_sm, tc.copy_stages, tc.compute_stages) == (4, b, 3, 2)
        assert mf.smem_blocks_per_sm(tc.smem_bytes) == b and tc.smem_bytes == (100 if b == 2 else 120) * 1024
    assert by["gt_w4b1r_gemm_l2_k2_K2008"].kernel == "mfgt_gemm_k2_w4_b1_c3"
    assert by["gt_w4b2r_copy_l2_k2_K2008"].kernel == "mfgt_copy_k2_w4_b2_c3"  # the recorded w4 kernels
    assert by["gt_w4b2r_gemm_l2_k2_K2032"].kernel == "mfgt_gemm_k2_w4_b2_c3"
    pad = by["gt_w4b2r_gemm_pad_l2_k2_K2048"]
    assert pad.kernel == "mfgt_gemm_pad_k2_w4_b2_c3" and pad.copies_per_thread == 8
    assert pad.copy_stage_bytes == (128 * 5 + 32 * 17) * 16 and pad.smem_data_bytes == 2 * 16384 + 3 * 18944
    want = {2048: (256, 128), 2008: (320, 176), 2032: (256, 160)}
    for mode in ("copy", "gemm"):
        for k, (sectors, lines) in want.items():
            got = by[f"gt_w4b2r_{mode}_l2_k2_K{k}"].copy_sectors_lines_per_kstep()
            assert got == {"a_sectors": sectors, "a_lines": lines, "b_sectors": 256, "b_lines": 64}, (mode, k)
    assert by["gt_w4b2r_none_k2"].copy_sectors_lines_per_kstep()["a_sectors"] == 0
    pr = mf.gt_problem("l2", 264, 32, (128, 128), 2008)
    assert (pr["m"], pr["n"], pr["k"]) == (2048, 2048, 2008) and pr["bytes"] == 2 * (2048 * 2008 * 2)
    with pytest.raises(ValueError, match="k_elems"):
        mf.gt_problem("hbm", 264, 32, (128, 128), 2008)
    with pytest.raises(ValueError, match="k_elems"):  # not whole 16-byte chunks
        mf.TrafficConfig("x", "copy", 2, "l2", 2, "", warps=4, blocks_per_sm=2, copy_stages=3, k_elems=2004)
    with pytest.raises(ValueError, match="k_elems"):  # HBM data picks its own K
        mf.TrafficConfig("x", "copy", 2, "hbm", 2, "", warps=4, blocks_per_sm=2, copy_stages=3, k_elems=2008)
    with pytest.raises(ValueError, match="slices"):
        mf.TrafficConfig("x", "gemm_pad", 3, "l2", 2, "", warps=4, blocks_per_sm=2, copy_stages=3)
    assert mf.parse_only("gemm_traffic_ragged") == ("gemm_traffic_ragged",)


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
    with pytest.raises(ValueError, match="blocks"):
        mf.gt_problem("l2", 0)


def test_gt_problem_for_the_w4_geometry():
    """128x128 tiles: L2 data on the 16 x 16 grid; HBM data with 2 blocks per SM: 264 blocks, each its own."""
    tile = (128, 128)
    pr = mf.gt_problem("l2", 264, 32, tile)
    assert pr["bytes"] == 16 * 2**20 and len(pr["m0"]) == 264
    assert len(set(zip(pr["m0"], pr["n0"], strict=True))) == 256 and max(pr["n0"]) == 2048 - 128
    h = mf.gt_problem("hbm", 264, 32, tile)
    assert h["m"] == h["n"] == 264 * 128 and h["k"] % 32 == 0
    assert 0.99 * mf.GT_HBM_BYTES < h["bytes"] <= mf.GT_HBM_BYTES
    assert len(set(h["m0"])) == len(set(h["n0"])) == 264 and max(h["n0"]) + 128 == h["n"]


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


def test_traffic_metrics_with_two_blocks_per_sm():
    """Two blocks side by side on each SM: HMMA/clk/SM and bytes/s count both; cycles per k-step per block."""
    tc = next(t for t in mf.GT_W4_CONFIGS if t.key == "gt_w4b2_gemm_l2_k2")
    raw = []
    for smid in (0, 1):
        for _ in range(2):
            raw += [100_000, 50_000, smid, 0]  # 2 GHz, overlapping spans
    rec = mf.parse_records(raw, 4)
    m = mf.traffic_metrics(tc, rec, iters=100, event_s=None, sm_count=2)
    assert m["cycles_per_kstep"] == pytest.approx(1000)
    assert m["hmma_per_clk_sm"] == pytest.approx(2 * 256 / 1000)
    assert m["global_bytes_per_s"] == pytest.approx(16 * 1024 * 4 * 2e9 / 1000)
    row = mf.summarize_traffic(tc, [m], 2716.0)
    assert row["blocks_per_sm_seen"] == 2 and row["blocks_per_sm"] == 2 and row["warps_per_sm"] == 8
    assert row["block_tile"] == [128, 128] and row["warps_per_block"] == 4 and row["geometry"] == "w4_b2_c3"
    assert row["copy_ring_stages"] == 3 and row["cp_async_wait_group"] == 1 and row["compute_ring_stages"] == 4
    assert row["copies_per_thread_per_kstep"] == 8 and row["copies_per_thread_per_kstep_a_b"] == [4, 4]
    assert row["fraction_of_peak"]["value"] == pytest.approx(0.512 * 4096 / 2716.0)
    assert row["smem_wavefronts_per_clk_computed"] == pytest.approx(2 * 384 / 1000)  # both blocks of the SM
    text = mf.format_table({"gemm_traffic": {tc.key: row}, "errors": {}})
    line = next(ln for ln in text.splitlines() if ln.startswith(tc.key))
    assert line.split()[1:4] == ["4", "2", "2"] and "1000.0" in line and "77.2%" in line


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


def test_merge_of_the_w4_group_keeps_the_other_traffic_rows():
    """--only gemm_traffic_w4 adds its rows beside the recorded gemm_traffic ones (same section), and a
    later --only gemm_traffic replaces only those."""
    w4 = mf.GT_W4_CONFIGS[0].key
    old = {"meta": {"date_utc": "old"}, "configs": {"mf_a": 1}, "errors": {"gt_x": "old", w4: "old"},
           "gemm_traffic": {"gt_none_k2": 1, "gt_copy_l2_k2": 1, w4: 0}}
    new = {"meta": {"date_utc": "new", "groups_run": ["gemm_traffic_w4"]}, "errors": {},
           "gemm_traffic": {w4: 2}}
    out = mf.merge_results(old, new)
    assert out["gemm_traffic"] == {"gt_none_k2": 1, "gt_copy_l2_k2": 1, w4: 2} and out["configs"] == {"mf_a": 1}
    assert out["errors"] == {"gt_x": "old"}
    assert out["group_runs"]["gemm_traffic"]["date_utc"] == "old"
    assert out["group_runs"]["gemm_traffic_w4"]["date_utc"] == "new"
    again = mf.merge_results(out, {"meta": {"date_utc": "3", "groups_run": ["gemm_traffic"]}, "errors": {},
                                   "gemm_traffic": {"gt_none_k2": 3}})
    assert again["gemm_traffic"] == {w4: 2, "gt_none_k2": 3}
    assert again["group_runs"]["gemm_traffic_w4"]["date_utc"] == "new"
    assert mf.parse_only("gemm_traffic_w4") == ("gemm_traffic_w4",)


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
    assert set(res["gemm_traffic"]) == {tc.key for tc in GT_ALL}, res["errors"]
    for row in res["gemm_traffic"].values():
        assert row["blocks_per_sm_seen"] == row["blocks_per_sm"] and row["distinct_sms"] == res["meta"]["sm_count"]
        assert 0 < row["fraction_of_peak"]["value"] < 1.2


# ----- group gemm_path ----------------------------------------------------------------------------------
def test_path_defines_and_kernels_match_the_configs():
    for py, cu in (("GP_REC", "MF_GP_REC"), ("GP_EVERY", "MF_GP_EVERY"), ("GP_MAXREC", "MF_GP_MAXREC")):
        m = re.search(rf"#define {cu} (\d+)", CU)
        assert m and int(m.group(1)) == getattr(mf, py), py
    for i, o in enumerate(mf.GP_ORDERS):
        assert re.search(rf"#define MF_GP_{o.upper()}_FIRST {i}\b", CU), o
    built = {f"mfgp_{o}_w{w}_b{b}_c{c}_{bn}": (order, bcol) for o, order, w, b, c, bn, bcol in
             re.findall(r"^MF_GP_KERNEL\((\w+), MF_GP_(\w+)_FIRST, (\d+), (\d+), (\d+), (\w+), (\w+)\)", CU, re.M)}
    assert set(built) == {r.kernel for r in mf.GP_CONFIGS}
    for r in mf.GP_CONFIGS:
        assert built[r.kernel] == (r.order.upper(), "true" if r.bcol else "false"), r.key
    assert len({r.key for r in mf.GP_CONFIGS}) == len(mf.GP_CONFIGS)
    assert {mf._error_group(r.key) for r in mf.GP_CONFIGS} == {"gemm_path"}
    assert mf.parse_only("gemm_path") == ("gemm_path",)


def test_path_rows_geometry_and_sectors():
    by = {r.key: r for r in mf.GP_CONFIGS}
    a = by["gp_w8b1_l2_copy_r6"]
    assert a.copies_per_thread_ab == (2, 4) and a.warp_copies_per_sm == 48 and a.block_tile == (128, 256)
    assert mf.smem_blocks_per_sm(a.smem_bytes) == 1
    w4 = by["gp_w4b2_l2_copy_r8"]
    assert w4.copies_per_thread_ab == (4, 4) and w4.warp_copies_per_sm == 64 and mf.smem_blocks_per_sm(w4.smem_bytes) == 2
    assert by["gp_w4b1_l2_copy_r8"].kernel == "mfgp_copy_w4_b1_c3_brow" and by["gp_w4b1_l2_copy_r8"].blocks_per_sm == 1
    assert [by[f"gp_w8b1_l2_copy_r{r}"].copy_sectors_per_kstep()["sectors"] for r in (0, 2, 4, 6)] == [0, 256, 512, 768]
    # A at K = 2008: 320 sectors for 128 rows of 64 bytes (the ragged group's count), B aligned
    assert by["gp_w4b2_K2008a_copy_r8"].copy_sectors_per_kstep()["extra"] == 64
    assert by["gp_w8b1_K2008ab_copy_r6"].copy_sectors_per_kstep() == {"sectors": 960, "aligned": 768, "extra": 192,
                                                                      "lines": 528}
    assert by["gp_w8b1_N4000_copy_r6"].copy_sectors_per_kstep()["extra"] == 0  # 8000 B: sector-aligned rows
    pr = mf.gp_problem(by["gp_w8b1_N4000_copy_r6"], 132)
    assert (pr["n"], pr["k"]) == (4000, 2048) and max(pr["n0"]) + 256 <= 4000
    assert mf.gp_problem(by["gp_w8b1_hbm_copy_r6"], 132)["bytes"] <= mf.GT_HBM_BYTES
    with pytest.raises(ValueError, match="real"):
        mf.PathConfig("x", "w8b1", "copy", 7)
    with pytest.raises(ValueError, match="k_elems"):
        mf.PathConfig("x", "w8b1", "copy", 6, "hbm", k_elems=2008)
    with pytest.raises(ValueError, match="order"):
        mf.PathConfig("x", "w8b1", "both", 6)


def _stamps(warps: int, nrec: int, spans: tuple) -> list[int]:
    raw = [-1] * (warps * mf.GP_MAXREC * mf.GP_REC)
    for w in range(warps):
        for r in range(nrec):
            o = (w * mf.GP_MAXREC + r) * mf.GP_REC
            raw[o:o + mf.GP_REC] = [*spans, 1000 * r, 16 * r + 15]
    return raw


def _path_row(key: str, copies_to_hmma: float, kstep: float, reps: int = 3) -> dict:
    r = next(c for c in mf.GP_CONFIGS if c.key == key)
    raw_blocks = []
    for smid in range(2):
        for _ in range(r.blocks_per_sm):
            raw_blocks += [int(kstep * 100), int(kstep * 50), smid, 0]
    rec = mf.parse_records(raw_blocks, 2 * r.blocks_per_sm)
    st = mf.parse_stamps(_stamps(2 * r.warps, 4, (10, 50, 120, copies_to_hmma, 400, kstep)), 2 * r.warps, 4)
    return mf.summarize_path(r, [mf.path_metrics(r, rec, st, 100) for _ in range(reps)])


def test_parse_stamps_and_summary():
    st = mf.parse_stamps(_stamps(2, 3, (1, 2, 3, 4, 5, 6)), 2, 3)
    assert st["copies_issued_to_first_hmma"] == [4] * 6 and st["kstep"] == [6] * 6
    with pytest.raises(ValueError, match="negative"):
        mf.parse_stamps(_stamps(1, 2, (1, -2, 3, 4, 5, 6)), 1, 2)
    with pytest.raises(ValueError, match="values"):
        mf.parse_stamps([0] * 5, 1, 1)
    row = _path_row("gp_w8b1_l2_copy_r6", 300, 1500)
    assert row["spans"]["copies_issued_to_first_hmma"]["value"] == 300 and row["cycles_per_kstep"]["value"] == 1500
    assert row["clock_hz"] == pytest.approx(2e9) and row["warp_copies_per_sm_per_kstep"] == 48
    text = mf.format_table({"gemm_path": {"gp_w8b1_l2_copy_r6": row}, "errors": {}})
    assert "gp_w8b1_l2_copy_r6" in text and "1500" in text


def test_gemm_path_fields_on_synthetic_rows():
    rows = {"gp_w8b1_l2_copy_r0": _path_row("gp_w8b1_l2_copy_r0", 100, 1300),
            "gp_w8b1_l2_copy_r6": _path_row("gp_w8b1_l2_copy_r6", 244, 1450),
            "gp_w8b1_hbm_copy_r6": _path_row("gp_w8b1_hbm_copy_r6", 340, 1550),
            "gp_w8b1_K2008a_copy_r6": _path_row("gp_w8b1_K2008a_copy_r6", 308, 1500),
            "gp_w4b2_l2_copy_r0": _path_row("gp_w4b2_l2_copy_r0", 80, 1200),
            "gp_w4b2_l2_copy_r8": _path_row("gp_w4b2_l2_copy_r8", 200, 1300),
            "gp_w4b1_l2_copy_r0": _path_row("gp_w4b1_l2_copy_r0", 80, 700),
            "gp_w4b1_l2_copy_r8": _path_row("gp_w4b1_l2_copy_r8", 200, 800)}
    f = mf.gemm_path_fields({"meta": {"date_utc": "d"}, "gemm_path": rows}, "x.json")
    assert f["ldgsts_path_cycles_zfill"]["value"] == pytest.approx(100 / 48)
    assert f["ldgsts_path_cycles_l2"]["value"] == pytest.approx(144 / 48)
    assert f["ldgsts_path_cycles_hbm"]["value"] == pytest.approx(240 / 48)
    assert f["ldgsts_path_cycles_per_extra_sector"]["value"] == pytest.approx(64 / 64)
    assert f["ldgsts_path_hidden_share"]["value"] == pytest.approx(0.5)  # 100 / 2 per SM against 100
    assert f["ldgsts_path_hidden_share_2x4_vs_1x8"]["value"] == pytest.approx(1 - 100 / 150)  # both blocks: 100 cycles of SM time per 128x256 against 150
    for v in f.values():
        assert set(v) >= {"value", "benchmark", "n", "p10", "p90", "how", "date"} and v["date"] == "d"
        assert "x.json" in v["benchmark"]
    assert mf.gemm_path_fields({"gemm_path": {}}) == {}


def test_merge_of_the_path_group():
    old = {"meta": {"date_utc": "old"}, "configs": {"mf_a": 1}, "errors": {"gp_x": "old", "gt_y": "old"},
           "gemm_traffic": {"gt_none_k2": 1}, "gemm_path": {"gp_old": 1}}
    new = {"meta": {"date_utc": "new", "groups_run": ["gemm_path"]}, "errors": {}, "gemm_path": {"gp_new": 2},
           "fields_gemm_path": {"f": 1}}
    out = mf.merge_results(old, new)
    assert out["gemm_path"] == {"gp_new": 2} and out["gemm_traffic"] == {"gt_none_k2": 1}
    assert out["errors"] == {"gt_y": "old"} and out["fields_gemm_path"] == {"f": 1}
    assert out["group_runs"]["gemm_path"]["date_utc"] == "new"


SASS_GATE = """
        Function : k
        /*0000*/                   CS2R R2, SR_CLOCKLO ;                 /* 0x0000000000027805 */
                                                                          /* 0x000fe20000015000 */
        /*0010*/                   DEPBAR.LE SB0, 0x2 ;                  /* 0x000080000000791a */
                                                                          /* 0x000fe20000000000 */
        /*0020*/                   LDGSTS.E.BYPASS.128 [R3], desc[UR4][R4.64] ;  /* 0x0000000004037fae */
                                                                          /* 0x0003e2000b901c44 */
        /*0030*/                   LDGDEPBAR ;                           /* 0x00000000000079af */
                                                                          /* 0x000fe20000000000 */
        /*0040*/                   IMAD.IADD R4, R5, 0x1, R6 ;            /* 0x0000000105047824 */
                                                                          /* 0x002fe200078e0206 */
        /*0050*/                   HMMA.16816.F32 R8, R12, R16, R8 ;      /* 0x000000100c08723c */
                                                                          /* 0x000fe20000001808 */
"""


def test_control_codes_and_gate():
    ins = mf.control_codes(SASS_GATE, "k")
    assert [x[1].split()[0] for x in ins] == ["CS2R", "DEPBAR.LE", "LDGSTS.E.BYPASS.128", "LDGDEPBAR", "IMAD.IADD",
                                             "HMMA.16816.F32"]
    ldgsts, imad = ins[2], ins[4]
    assert ldgsts[2] == 1 and ldgsts[3] == 7  # read barrier SB1, no write barrier
    assert imad[4] == 0b10  # waits on SB1
    r = mf.GP_CONFIGS[0]
    c = mf.check_path_sass(r, SASS_GATE.replace("Function : k", f"Function : {r.kernel}"))
    assert c["gate_before_first_hmma"] and c["copies_before_first_hmma"] and not c["ok"]  # counts too small


@pytest.mark.slow  # the probe's nvcc build (~30 s): python -m pytest -m slow
def test_path_kernels_sass(built):
    """Every gemm_path kernel: 6 clock reads, its copies, 64 HMMA, 16 LDSM and one BAR a k-step; copy-first:
    an instruction after LDGDEPBAR waits on the copies' read barrier before the first HMMA (the WAR of reused
    copy registers); fragments-first: no copy before the first HMMA."""
    _, sass = built
    if sass is None:
        pytest.skip("nvdisasm not on PATH")
    for r in mf.GP_CONFIGS:
        c = mf.check_path_sass(r, sass)
        assert c["ok"], (r.key, c)
        assert c["gate_before_first_hmma"] == (r.order == "copy") or r.order == "ldsm", r.key
        assert c["copies_before_first_hmma"] == (r.order == "copy"), r.key


@pytest.mark.gpu
def test_path_group_on_the_gpu(tmp_path):
    p = subprocess.run([sys.executable, "-m", "validation.calibration.mma_feed_probe", "--only", "gemm_path", "--out",
                        str(tmp_path)], capture_output=True, text=True, cwd=mf.REPO_ROOT, timeout=600)
    if p.returncode == 2:
        pytest.skip(p.stderr.strip())
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    res = json.loads((tmp_path / "mma_feed.json").read_text())
    assert set(res["gemm_path"]) == {r.key for r in mf.GP_CONFIGS}, res["errors"]
    for row in res["gemm_path"].values():
        assert row["blocks_per_sm_seen"] == row["blocks_per_sm"] and row["distinct_sms"] == res["meta"]["sm_count"]
        assert row["spans"]["kstep"]["n"] > 0 and row["sass"]["ok"]
    assert res["meta"]["gemm_path_wall_s"] < 60


def test_received_sectors_of_the_path_rows():
    """Lane pairs of 16-byte copies from rows 4016 B apart straddle a sector boundary on every other row:
    8 sectors more a warp copy (24 against 16), 384 a 128x256 k-step when A and B (N x K) are such rows."""
    by = {c.key: c for c in mf.GP_CONFIGS}
    assert by["gp_w8b1_l2_copy_r6"].received_sectors_per_kstep(2) == {"received": 768, "aligned": 768, "extra": 0}
    assert by["gp_w8b1_bcolK2048_copy_r6"].received_sectors_per_kstep(2)["extra"] == 0
    assert by["gp_w8b1_K2008ab_copy_r6"].received_sectors_per_kstep(2)["extra"] == 384
    assert by["gp_w8b1_K2008a_copy_r6"].received_sectors_per_kstep(2)["extra"] == 128
    assert by["gp_w4b2_K2008ab_copy_r8"].received_sectors_per_kstep(2)["extra"] == 256
    # one group of 32 lanes: the distinct sectors
    k = by["gp_w8b1_K2008ab_copy_r6"]
    assert k.received_sectors_per_kstep(32)["received"] == k.copy_sectors_per_kstep()["sectors"]


def test_copy_straddle_fields_on_synthetic_and_recorded_rows():
    rows = {"gp_w8b1_K2008ab_copy_r6": _path_row("gp_w8b1_K2008ab_copy_r6", 500, 1800),
            "gp_w8b1_bcolK2048_copy_r6": _path_row("gp_w8b1_bcolK2048_copy_r6", 116, 1500)}
    f = mf.copy_straddle_fields({"meta": {"date_utc": "d"}, "gemm_path": rows}, 2, "src", "x.json")
    v = f["ldgsts16_straddle_cycles_per_sector"]
    assert v["value"] == pytest.approx(384 / 384)
    assert set(v) >= {"value", "benchmark", "n", "p10", "p90", "how", "date"} and "x.json" in v["benchmark"]
    assert "src" in v["benchmark"] and v["date"] == "d"
    assert mf.copy_straddle_fields({"gemm_path": {}}, 2, "src") == {}
    rec = json.loads((mf.RESULTS_ROOT / "h200" / "calibration" / mf.RESULT_FILE).read_text())
    got = mf.copy_straddle_fields(rec, 2, "src")["ldgsts16_straddle_cycles_per_sector"]
    assert 0.8 < got["value"] < 1.0 and got["p90"] - got["p10"] < 0.1  # 1077 - 722 cycles over 384 sectors


# ----- group gemm_bcol ---------------------------------------------------------------------------------------
def test_bcol_kernels_and_defines_match_the_configs():
    for i, r in enumerate(mf.GB_READS):
        assert re.search(rf"#define MF_GB_{r.upper()} {i}\b", CU), r
    built = {f"mfgb_{n}": (bcol, read) for n, bcol, read in
             re.findall(r"^MF_GB_KERNEL\((\w+), (\w+), MF_GB_(\w+)\)", CU, re.M)}
    rows = [r for r in mf.GB_CONFIGS if r.kernel.startswith("mfgb_")]
    assert set(built) == {r.kernel for r in rows}
    for r in rows:
        assert built[r.kernel] == ("true" if r.bcol else "false", r.read.upper()), r.key
    assert any(r.kernel == "mfgt_gemm_k2" for r in mf.GB_CONFIGS)
    assert len({r.key for r in mf.GB_CONFIGS}) == len(mf.GB_CONFIGS)
    assert {mf._error_group(r.key) for r in mf.GB_CONFIGS} | {mf._error_group("gb_suite_1wave")} == {"gemm_bcol"}
    assert mf.parse_only("gemm_bcol") == ("gemm_bcol",)


def test_bcol_copy_lines():
    """K x N B copies: 2 A copies of 8 half-lines and 4 B copies of one 512-byte row (4 lines), 5.33 lines a
    copy (ncu's 5.33 shared wavefronts a LDGSTS for mfgt_gemm_k2); N x K: every copy 8 half-lines; the
    swizzled destinations are 4 shared lines (512 contiguous bytes) either way."""
    row = {r.bcol: r.ldgsts_lines() for r in mf.GB_CONFIGS}
    assert row[False]["global_lines"] == [8, 8, 4, 4, 4, 4] and row[True]["global_lines"] == [8] * 6
    assert row[False]["global_lines_mean"] == pytest.approx(16 / 3)
    assert row[False]["smem_lines"] == row[True]["smem_lines"] == [4] * 6
    assert all(r.traffic.smem_bytes == 196608 for r in mf.GB_CONFIGS)
    cfg = mf.gb_suite_config()
    from validation.families.tc_gemm import mma
    g = mma.launch_geometry(cfg)
    assert g.grid[0] * g.grid[1] == 132 and mma.kernel_name(cfg).startswith("tcg_mma_fp16_of32_Bcol_128x256x32")


def test_bcol_summary_table_and_merge():
    bc = mf.GB_CONFIGS[2]
    runs = [{"cycles_per_kstep": c, "hmma_per_clk_sm": 512 / c, "clock_hz": 1.8e9, "max_coresident": 1,
             "distinct_sms": 132} for c in (1500.0, 1510.0, 1490.0)]
    row = mf.summarize_bcol(bc, runs)
    assert row["cycles_per_kstep"]["value"] == 1500.0 and row["b_layout"] == "n_x_k"
    res = {"meta": {"groups_run": ["gemm_bcol"]}, "errors": {},
           "gemm_bcol": {bc.key: row, "gb_suite_1wave": {"status": "ok", "message": "",
                                                        "parts_per_kstep": {"loop": {"value": 1600.0}}}}}
    assert bc.key in mf.format_table(res)
    assert mf.compact_summary(res) == {bc.key: 1500.0, "gb_suite_1wave": {"loop": 1600.0}}
    old = {"meta": {"date_utc": "old"}, "errors": {"gb_x": "old", "gp_y": "old"}, "gemm_path": {"gp": 1},
           "gemm_bcol": {"gb_old": 1}}
    out = mf.merge_results(old, {**res, "meta": {"date_utc": "new", "groups_run": ["gemm_bcol"]}})
    assert set(out["gemm_bcol"]) == {bc.key, "gb_suite_1wave"} and out["gemm_path"] == {"gp": 1}
    assert out["errors"] == {"gp_y": "old"} and out["group_runs"]["gemm_bcol"]["date_utc"] == "new"


@pytest.mark.slow  # the probe's nvcc build (~30 s): python -m pytest -m slow
def test_bcol_kernels_sass(built):
    """Every gemm_bcol kernel's hot loop: 64 HMMA, 16 LDSM (8 .trans where B is read K x N), 6 LDGSTS, one BAR,
    DEPBAR and LDGDEPBAR a k-step."""
    _, sass = built
    if sass is None:
        pytest.skip("nvdisasm not on PATH")
    for r in mf.GB_CONFIGS:
        if r.kernel.startswith("mfgb_"):
            c = mf.check_bcol_sass(r, mf.sass_summary(sass, r.kernel))
            assert c["ok"], (r.key, c)


def test_the_line_cost_is_the_bcol_pairs_difference_over_its_extra_lines():
    """calibrate.copy_line_fields: (N x K row - K x N row) cycles a k-step over the extra global lines of the
    block's warp copies (8 warps); none without both rows or without extra lines."""
    from validation.calibration.calibrate import copy_line_fields

    def row(cycles, lines):
        return {"cycles_per_kstep": {"value": cycles}, "blocks_per_sm_seen": 1,
                "ldgsts_lines_computed": {"global_lines": lines, "smem_lines": [4] * len(lines)}}

    rec = {"gemm_bcol": {"gb_bcol_fixed": row(1100.0, [8] * 6), "gb_brow_fixed": row(1000.0, [8, 8, 4, 4, 4, 4])}}
    got = copy_line_fields(rec)["ldgsts16_line_cycles"]
    assert got["value"] == pytest.approx(100.0 / (16 * 8))
    assert copy_line_fields({"gemm_bcol": {"gb_bcol_fixed": rec["gemm_bcol"]["gb_bcol_fixed"]}}) == {}
    same = {"gemm_bcol": {"gb_bcol_fixed": row(1100.0, [4] * 6), "gb_brow_fixed": row(1000.0, [4] * 6)}}
    assert copy_line_fields(same) == {}
