"""The LDGSTS layout probe (validation/calibration/ldgsts_layout_probe): the rows and the pattern facts of the
four layouts Nsight Compute measured, the records, parse_ncu_csv / --merge-ncu on a synthetic CSV, the .cu
compiling for sm_90a without spills and its hot loop holding COPIES LDGSTS a batch (needs nvcc and cuobjdump;
skipped without), and main() without a GPU. CPU only."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from validation.calibration import ldgsts_layout_probe as lg
from validation.calibration import probe_common as pc

CU = lg.KERNEL_SRC.read_text()
CUOBJDUMP = Path("/tmp/wt_wmma/.venv/lib/python3.11/site-packages/nvidia/cu13/bin/cuobjdump")
NVCC = Path("/usr/local/cuda-13.0/bin/nvcc")


def _tool_path(monkeypatch):
    extra = [str(p.parent) for p in (NVCC, CUOBJDUMP) if p.exists()]
    monkeypatch.setenv("PATH", os.pathsep.join([*extra, os.environ.get("PATH", "")]))


def test_constants_match_the_cuda_defines():
    for py, cu in (("REC", "LG_REC"), ("COPIES", "LG_COPIES"), ("WAIT", "LG_WAIT"), ("SLOT_BYTES", "LG_SLOT_BYTES"),
                   ("BASE_STEP", "LG_BASE_STEP")):
        m = re.search(rf"#define {cu} (\d+)", CU)
        assert m and int(m.group(1)) == getattr(lg, py), py
    assert lg.BASE_STEP % 512 == 0 and lg.SMEM_BYTES[2] == lg.WARPS * lg.COPIES * lg.SLOT_BYTES
    assert 2 * (lg.SMEM_BYTES[1] + 1024) > 228 * 1024 >= 2 * (lg.SMEM_BYTES[2] + 1024)


def test_rows():
    keys = [r.key for r in lg.ROWS]
    assert len(keys) == len(set(keys)) and 20 <= len(keys) <= 35
    for k in ("lg_off", "lg_r1_p512", "lg_r2_p256", "lg_r8_p64_swz", "lg_r8_p80", "lg_r2_p272", "lg_r8_p64_g4016",
              "lg_r8_p80_b2", "lg_off_b2", "lg_r8_p144", "lg_r4_p160"):
        assert k in keys, k
    assert lg.PROFILE_ORDER == tuple(keys)
    with pytest.raises(ValueError):
        lg.Row(8, 72)  # not 16-byte aligned
    with pytest.raises(ValueError):
        lg.Row(8, 80, swz=True)
    with pytest.raises(ValueError):
        lg.Row(32, 128)  # extent over a slot


def test_swizzle_matches_tc_gemm():
    import importlib

    lower = importlib.import_module("tilesim.kernels.tc_gemm.lower")

    class Cfg:
        layout = "swizzled"

        def __init__(self, row_bytes):
            self._rb = row_bytes

        def smem_row_bytes(self, row_elems):
            return self._rb

    for r in (1, 2, 4, 8, 16):
        row = lg.Row(r, 32 // r * 16, swz=True)
        want = [lower.shared_address(Cfg(row.row_bytes), 0, i // (32 // r), i % (32 // r) * 16, 0) for i in range(32)]
        assert [s for _, s in row.lanes()] == want


def test_facts_of_the_measured_layouts():
    f = lg.pattern_facts(lg.Row(1, 512))  # 4.3 wavefronts in ncu
    assert (f["global_sectors"], f["global_lines"], f["shared_sectors"], f["shared_lines"], f["line_pairs"]) == \
        (16, 4, 16, 4, 4)
    f = lg.pattern_facts(lg.Row(2, 256))  # 4.7
    assert (f["global_lines"], f["shared_sectors"], f["line_pairs"]) == (4, 16, 4)
    f = lg.pattern_facts(lg.Row(8, 64, swz=True))  # 7.3
    assert (f["global_sectors"], f["global_lines"], f["shared_sectors"], f["shared_lines"], f["line_pairs"]) == \
        (16, 8, 16, 4, 8)
    assert sorted(f["shared_offsets"]) == list(range(0, 512, 16))
    assert f["shared_offsets"][4:8] == [64, 80, 96, 112] and f["shared_offsets"][8:12] == [144, 128, 176, 160]
    f = lg.pattern_facts(lg.Row(8, 80))  # 13.3: odd rows start 16 bytes into a sector
    assert (f["global_lines"], f["shared_sectors"], f["shared_lines"], f["line_pairs"]) == (8, 20, 5, 11)
    assert f["lane_pair_shared_sectors"][:4] == [1, 1, 2, 2] and sum(f["lane_pair_shared_sectors"]) == 24
    f = lg.pattern_facts(lg.Row(8, 64, global_pitch=4016))
    assert (f["global_sectors"], f["global_lines"], f["shared_sectors"]) == (20, 11, 16)
    assert lg.pattern_facts(lg.Row(1, 512, active=False))["active_lanes"] == 0


def test_per_sm_cycles_per_copy():
    # two SMs; SM 0 holds two blocks (longest 8000 cycles), SM 1 one block of 4000; iters 10
    raw = [v for s, c in ((0, 8000), (0, 7000), (1, 4000)) for v in (c, c // 2, s, 0)]
    vals, info = lg.per_sm_cycles_per_copy(raw, 3, 10)
    per = lg.WARPS * 10 * lg.COPIES
    assert sorted(vals) == sorted([8000 / (2 * per), 4000 / per])
    assert info["blocks_per_sm_seen"] == 2 and info["distinct_sms"] == 2 and info["clock_hz"] == pytest.approx(2e9)


def _csv(order, wf, inst=1000.0):
    lines = ['==PROF== Connected to process 1', '"ID","Process ID","Kernel Name","Metric Name","Metric Unit","Metric Value"']
    for i, _ in enumerate(order):
        lines += [f'"{i}","1","lg_copy","{lg.METRIC_WAVEFRONTS}","","{wf[i] * inst:,.0f}"',
                  f'"{i}","1","lg_copy","{lg.METRIC_INST}","inst","{inst:,.0f}"',
                  f'"{i}","1","lg_copy","{lg.METRIC_SECTORS}","sector","{16 * inst:,.0f}"']
    return "\n".join(lines) + "\nrow  cyc/copy (the probe's table)\n"


def test_parse_ncu_csv_and_merge(tmp_path):
    order = ["lg_r1_p512", "lg_r8_p80", "lg_off"]
    got = lg.parse_ncu_csv(_csv(order, [4.3, 13.3, 0.0]), order)
    assert got["lg_r1_p512"]["wavefronts_per_ldgsts"] == pytest.approx(4.3)
    assert got["lg_r8_p80"]["wavefronts_per_ldgsts"] == pytest.approx(13.3)
    assert got["lg_r8_p80"]["sectors_per_ldgsts"] == pytest.approx(16)
    with pytest.raises(ValueError):
        lg.parse_ncu_csv(_csv(order, [1, 2, 3]), order[:2])
    res = tmp_path / lg.RESULT_FILE
    res.write_text(json.dumps({"meta": {"profile_order": order}, "rows": {"lg_r8_p80": {"x": 1}}}))
    (tmp_path / "ncu.csv").write_text(_csv(order, [4.3, 13.3, 0.0]))
    assert lg.main(["--out", str(tmp_path), "--merge-ncu", str(tmp_path / "ncu.csv")]) == 0
    data = json.loads(res.read_text())
    assert data["rows"]["lg_r8_p80"]["x"] == 1
    assert data["rows"]["lg_r8_p80"]["ncu"]["wavefronts_per_ldgsts"] == pytest.approx(13.3)


def test_compile_and_sass(tmp_path, monkeypatch):
    _tool_path(monkeypatch)
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not available")
    cubin, log = pc.compile_cubin(tmp_path, lg.ARCH, lg.KERNEL_SRC)
    assert pc.ptxas_warnings(log) == []
    regs = pc.ptxas_registers(log)
    assert set(regs) == {"lg_copy", "lg_copy_ca"} and all(r["spill_bytes"] == 0 for r in regs.values())
    if shutil.which("cuobjdump") is None:
        pytest.skip("cuobjdump not available")
    checks = lg.check_sass(pc.disassemble(cubin))
    for k, c in checks.items():
        assert c["ok"], (k, c)
        assert c["ldgsts_per_batch"] == lg.COPIES and "LDS" not in c["histogram"]  # @!PT LDS padding left out
    assert checks["lg_copy"]["ldgsts_ops"] == ["LDGSTS.E.BYPASS.128"]
    assert checks["lg_copy_ca"]["ldgsts_ops"] == ["LDGSTS.E.128"]


def test_main_without_gpu(monkeypatch, capsys):
    monkeypatch.setattr(pc, "gpu_missing", lambda: "no CUDA device found")
    assert lg.main([]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ldgsts_layout_probe" in err[0]


def _check_disjoint(row, total_warps, src_bytes):
    lay = lg.cg_layout(row, total_warps, src_bytes)
    assert lay["bytes_used"] <= src_bytes and lay["npos"] >= 1
    owner: dict[int, int] = {}
    lanes = row.lanes()
    for gw in range(total_warps):
        for b in lg.warp_bases(lay, gw):
            assert b % lg.LINE == 0  # the pattern's line alignment kept
            for a, _ in lanes:
                assert 0 <= b + a and b + a + lg.CHUNK <= lay["bytes_used"]
                for sec in range((b + a) // lg.SECTOR, (b + a + lg.CHUNK - 1) // lg.SECTOR + 1):
                    assert owner.setdefault(sec, gw) == gw, (row.key, gw, sec)
    return lay


def test_cg_windows_disjoint_small():
    # every cg row on a small grid: no 32-byte sector read by two warps, all within the source
    for row in lg.ROWS:
        if not row.ca:
            _check_disjoint(row, 24, 3 << 20)


def test_cg_layout_on_h200_grids():
    for row in lg.ROWS:
        if row.ca:
            continue
        for tw in (132 * lg.WARPS, 2 * 132 * lg.WARPS):
            lay = lg.cg_layout(row, tw)
            assert lay["bytes_used"] <= lg.SRC_BYTES[False] <= 48 << 20 and lay["npos"] >= 4, (row.key, lay)
            assert lay["cols"] * lay["col"] <= row.global_pitch and lay["band"] >= row.rows * row.global_pitch
            last = max(max(lg.warp_bases(lay, g)) for g in (0, tw - 1))
            assert last + max(a for a, _ in row.lanes()) + lg.CHUNK <= lay["bytes_used"]
    _check_disjoint(lg.Row(8, 80, global_pitch=4016), 2 * 132 * lg.WARPS, lg.SRC_BYTES[False])
