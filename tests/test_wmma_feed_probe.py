"""The staged-WMMA k-step probe (validation/calibration/wmma_feed_probe): the rows and kernels, the records and
row summaries on synthetic data, the .cu compiling for sm_90a without spills, every kernel's hot loop holding
what its row claims (needs nvcc and cuobjdump; skipped without), and main() without a GPU. CPU only."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from validation.calibration import probe_common as pc
from validation.calibration import wmma_feed_probe as w

CU = w.KERNEL_SRC.read_text()


def test_constants_match_the_cuda_defines():
    for py, cu in (("REC", "WF_REC"), ("STAGES", "WF_STAGES")):
        m = re.search(rf"#define {cu} (\d+)", CU)
        assert m and int(m.group(1)) == getattr(w, py), py


def test_rows_and_kernels():
    keys = [r.key for r in w.ROWS]
    assert len(keys) == len(set(keys)) == 17
    assert keys[:13] == [f"wf_{f}_{c}_b{b}" for b in w.BLOCKS for c in w.COPIES for f in w.FRAGS] + [
        "wf_wmma_gemm_b1_zfill"]  # the first geometry's keys, unchanged
    w4 = {f"wf_ldsm_{c}_b{b}_w4" for c in w.COPIES for b in w.BLOCKS}
    assert set(keys[13:]) == w4
    assert {r.kernel for r in w.ROWS} == {f"wf_{f}_{c}_b{b}" for f in w.FRAGS for c in w.COPIES
                                          for b in w.BLOCKS} | w4
    built = {f"wf_{n}_b{b}" for b in re.findall(r"^WF_KERNELS\((\d)\)", CU, re.M)
             for n in re.findall(r"^\s*WF_KERNEL\((\w+),", CU, re.M)}
    built |= {f"wf_{n}_b{b}_w4" for n, b in re.findall(r"^WF_KERNEL_W4\((\w+), \w+, \w+, (\d)\)", CU, re.M)}
    assert built == set(w.KERNELS)
    with pytest.raises(ValueError):
        w.Row("wmma", "none", 1, zfill=True)
    with pytest.raises(ValueError):
        w.Row("hmma", "none", 1)
    for bad in (dict(frag="wmma"), dict(frag="lds"), dict(frag="ldsm", zfill=True), dict(frag="ldsm", warps=2)):
        with pytest.raises(ValueError):
            w.Row(bad["frag"], "gemm", 1, zfill=bad.get("zfill", False), warps=bad.get("warps", 4))


def test_geometry_and_counts():
    assert (w.WARPS, w.THREADS, w.SLOT_BYTES, w.RING_BYTES) == (8, 256, 20480, 61440)
    assert w.SMEM_BYTES[2] == 61440 and 2 * (w.SMEM_BYTES[1] + 1024) > 228 * 1024  # only one 120 KiB block fits
    assert w.LDGSTS_PER_THREAD == 4  # (128 + 128) x 32 halves x 2 B / 16 B / 256 threads
    want = {"wmma": (48, 0, 0), "lds": (0, 48, 0), "ldsm": (0, 0, 12)}
    for r in w.ROWS:
        e = r.expected_sass()
        if r.warps == 4:  # mma_fp16_Bcol_128x128x32_w64x64_pad_s3: 4 warps of 64x64, 128 threads
            assert (r.wm, r.wn, r.threads, r.frag) == (64, 64, 128, "ldsm")
            assert (e["LD.E"], e["LDS"], e["LDSM"], e["HMMA"], e["BAR"]) == (0, 0, 16, 64, 1)
            assert e["LDGSTS"] == (8 if r.copy == "gemm" else 0)  # 2048 chunks of a k-tile / 128 threads
            assert r.kernel == r.key and r.key.endswith("_w4") and r.smem_bytes == w.SMEM_BYTES[r.blocks_per_sm]
        else:
            assert (r.wm, r.wn, r.threads) == (64, 32, 256)
            assert (e["LD.E"], e["LDS"], e["LDSM"]) == want[r.frag] and e["HMMA"] == 32 and e["BAR"] == 1
            assert e["LDGSTS"] == (4 if r.copy == "gemm" else 0)
        assert r.global_bytes_per_kstep == (16384 if r.copy == "gemm" and not r.zfill else 0)
        assert r.hmma_per_kstep == 256
    m0, n0 = w.tile_origins(264)
    assert (m0[0], n0[0]) == (0, 0) and (m0[17], n0[17]) == (128, 128) and (m0[256], n0[256]) == (0, 0)


def _raw(blocks):
    """Records (cycles, ns, smid, start ns) of (smid, start, cycles) blocks at 2 GHz."""
    return [v for s, t0, c in blocks for v in (c, c // 2, s, t0)]


def test_records_and_row_summary():
    blocks = [(0, 0, 2000), (0, 10, 2400), (1, 0, 2200), (1, 5000, 2200)]
    rec = w.parse_records(_raw(blocks), 4)
    assert rec["distinct_sms"] == 2 and rec["max_coresident"] == 2 and abs(rec["clock_hz"] - 2e9) < 1
    row = w.Row("wmma", "gemm", 2)
    m = w.rep_metrics(row, rec, 1, 1e-3)
    assert m["cycles_per_kstep"] == 2200 and m["hmma_per_clk_sm"] == pytest.approx(2 * 256 / 2200)
    s = w.summarize_row(row, [m, m])
    assert s["cycles_per_kstep"]["n"] == 8 and s["cycles_per_kstep"]["value"] == 2200
    assert s["blocks_per_sm_seen"] == 2 and s["per_kstep"]["frag_loads_per_warp"] == 48
    assert s["geometry"]["warp_tile"] == [64, 32] and s["geometry"]["warps_per_block"] == 8
    text = w.format_table({"rows": {row.key: {**s, "num_regs": 128}}, "errors": {"x": "boom"}})
    assert row.key in text and "2200.0" in text and "ERROR x: boom" in text
    r4 = w.Row("ldsm", "gemm", 2, warps=4)
    m4 = w.rep_metrics(r4, rec, 1, 1e-3)
    assert m4["hmma_per_clk_sm"] == pytest.approx(2 * 256 / 2200)  # 4 warps x 64: the same MMAs a block
    s4 = w.summarize_row(r4, [m4])
    assert s4["kernel"] == "wf_ldsm_gemm_b2_w4" and s4["geometry"]["warp_tile"] == [64, 64]
    assert s4["geometry"]["warps_per_block"] == 4 and s4["per_kstep"]["frag_loads_per_warp"] == 16
    assert s4["per_kstep"]["hmma_m16n8k16_per_warp"] == 64 and s4["per_kstep"]["ldgsts_per_thread"] == 8
    assert s4["per_kstep"]["global_bytes_per_block"] == 16384
    with pytest.raises(ValueError):
        w.parse_records(_raw(blocks)[:-1], 4)


def test_main_without_gpu_exits_2(monkeypatch, capsys):
    monkeypatch.setattr(w.pc, "gpu_missing", lambda: "no CUDA device found")
    assert w.main(["--quick"]) == 2
    err = capsys.readouterr().err
    assert "needs CuPy" in err and len(err.strip().splitlines()) == 1


# ----- the compiled source and its SASS ----------------------------------------------------------------------
def _tool_dir(exe: str) -> str | None:
    """``exe``'s directory: on PATH, else where pip's nvidia-cuda-* wheels put it in site-packages."""
    if shutil.which(exe):
        return str(Path(shutil.which(exe)).parent)
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for p in Path(root).glob(f"*/bin/{exe}"):
            return str(p.parent)
    return None


@pytest.fixture(scope="module")
def checks(tmp_path_factory):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    dirs = [_tool_dir("cuobjdump"), _tool_dir("nvdisasm")]
    if None in dirs:
        pytest.skip("cuobjdump / nvdisasm not found")
    old = os.environ["PATH"]
    os.environ["PATH"] = os.pathsep.join([*dirs, old])
    try:
        return w.sass_checks(tmp_path_factory.mktemp("wf"))
    finally:
        os.environ["PATH"] = old


def test_compiles_for_sm90a_without_spills(checks):
    assert "error" not in checks, checks.get("error")
    assert checks["ptxas_warnings"] == []
    for k in w.KERNELS:
        regs = checks["registers"][k]
        assert regs["spill_bytes"] == 0, k
        if k.endswith("_b2"):
            assert regs["registers"] <= 128, k  # 2 x 256 threads fit the 64 Ki registers
        if k.endswith("_w4"):  # 128 threads: 2 blocks fit at any count; above 168 a third does not
            assert 168 < regs["registers"] <= 255, k


def test_each_loop_holds_what_its_row_claims(checks):
    assert "error" not in checks, checks.get("error")
    for key, s in checks["rows"].items():
        assert s["ok"], (key, s.get("per_kstep"), s.get("problem"))
    # the padding ptxas puts before LDGSTS (@!PT LDS) is not counted as a load
    assert checks["rows"]["wf_ldsm_gemm_b2"]["per_kstep"]["LDS"] == 0
    assert pc.count_prefix(Counter(checks["rows"]["wf_wmma_none_b2"]["histogram"]), "LD.E") == 48
    for key in ("wf_ldsm_none_b2_w4", "wf_ldsm_gemm_b2_w4", "wf_ldsm_none_b1_w4", "wf_ldsm_gemm_b1_w4"):
        s = checks["rows"][key]["per_kstep"]
        assert (s["LDSM"], s["HMMA"], s["BAR"], s["LD.E"], s["LDS"]) == (16, 64, 1, 0, 0), key
        assert s["LDGSTS"] == (8 if "_gemm_" in key else 0), key
