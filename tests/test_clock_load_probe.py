"""The clock-versus-load probe (validation/calibration/clock_load_probe): the .cu compiles for sm_90a in one
nvcc call without spills; records, nvidia-smi lines, windows, the clock series and the table work on
synthetic data (tmp_path only, never a result). GPU run: ``gpu``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from validation.calibration import clock_load_probe as cl

CU = cl.KERNEL_SRC.read_text()


def test_constants_match_the_cuda_defines():
    for py, cu in (("REC", "CL_REC"), ("FFMA_CHAINS", "CL_FFMA_CHAINS"), ("FFMA_STEPS", "CL_FFMA_STEPS"),
                   ("MMA_CHAINS", "CL_MMA_CHAINS"), ("MMA_ROUNDS", "CL_MMA_ROUNDS"),
                   ("WG_PER_GROUP", "CL_WG_PER_GROUP"), ("STREAM_UNROLL", "CL_STREAM_UNROLL"),
                   ("BULK_MAX_INFLIGHT", "CL_BULK_MAX_INFLIGHT")):
        m = re.search(rf"#define {cu} (\d+)", CU)
        assert m and int(m.group(1)) == getattr(cl, py), py
    assert cl.WG_CYCLES == 128


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_compiles_for_sm90a_without_spills(tmp_path):
    p = subprocess.run(["nvcc", "-cubin", "-arch=sm_90a", "-O3", "-Xptxas", "-v", "-o", str(tmp_path / "cl.cubin"),
                        str(cl.KERNEL_SRC)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert not re.search(r"[1-9]\d* bytes spill", p.stderr)
    assert "warning" not in p.stderr.lower() and "serialized" not in p.stderr.lower()
    for k in ("cl_spin", "cl_ffma", "cl_mma", "cl_wg"):
        assert f"'{k}'" in p.stderr


def test_records_and_rows():
    raw = [2_000_000, 1_000_000, 0, 5, 1_800_000, 1_000_000, 1, 7]
    rec = cl.parse_records(raw, 2)
    assert rec["clock_hz"]["value"] == pytest.approx(1.9e9)
    row = cl.load_row("wgmma", rec, flop_per_block=1_900_000 * 4096 * 0.5, wgmma_per_block=int(1_900_000 * 0.5 / 128),
                      stream_bytes_per_block=[1000, 1000], event_s=1e-3)
    assert row["tensor_duty"] == pytest.approx(0.5)
    assert row["tensor_duty_wgmma"] == pytest.approx(0.5, rel=1e-3)
    assert row["hbm_bytes_per_s"] == pytest.approx(2000 / 1e-3)
    with pytest.raises(ValueError, match="records"):
        cl.parse_records([0, 0, 0, 0], 1)


def test_smi_lines_windows_and_series():
    fields = ["timestamp", "clocks.sm", "power.draw", "clocks_throttle_reasons.active"]
    s = cl.parse_smi_line("2025/01/02 03:04:05.250, 1755, 650.5, 0x0000000000000004", fields, 0.0)
    assert s["sm_clock_hz"] == 1755e6 and s["power_w"] == 650.5 and s["throttle"] == ["sw_power_cap"]
    assert cl.parse_smi_line("1, 2", fields, 0.0) is None
    bad = cl.parse_smi_line("garbage, [N/A], [N/A], [N/A]", fields, 42.0)
    assert bad["t"] == 42.0 and bad["sm_clock_hz"] is None
    samples = [{**s, "t": float(t)} for t in range(10)]
    w = cl.smi_window(samples, 0.0, 9.0)
    assert w["samples"] == 8 and w["power_w"]["value"] == 650.5 and w["throttle_reasons_seen"] == {"sw_power_cap": 8}
    ser = cl.series_hz([(0, 0), (1_000_000, 1_900_000), (2_000_000, 3_700_000)])
    assert [round(x["hz"]) for x in ser] == [1_900_000_000, 1_800_000_000]
    assert cl.decode_throttle(None) == [] and cl.decode_throttle(0x84) == ["sw_power_cap", "hw_power_brake_slowdown"]


def test_table_on_synthetic_results(tmp_path):
    rec = cl.parse_records([1_900_000, 1_000_000, 0, 0], 1)
    row = cl.load_row("ffma", rec, event_s=1e-3)
    row["smi"] = None
    text = cl.format_table({"loads": {"ffma": row}, "errors": {"wgmma": "boom"}})
    assert "ffma" in text and "1.9000" in text and "FAILED" in text
    (tmp_path / "clock_load.json").write_text(json.dumps({"loads": {"ffma": row}}))


def test_sampler_tolerates_a_missing_nvidia_smi(monkeypatch):
    monkeypatch.setattr(cl.shutil, "which", lambda name: None)
    s = cl.SmiSampler()
    s.start()
    s.stop()
    assert s.samples == [] and "not on PATH" in s.note


@pytest.mark.gpu
def test_quick_run_on_the_gpu(tmp_path):
    p = subprocess.run([sys.executable, "-m", "validation.calibration.clock_load_probe", "--quick", "--out",
                        str(tmp_path)], capture_output=True, text=True, cwd=cl.REPO_ROOT, timeout=600)
    if p.returncode == 2:
        pytest.skip(p.stderr.strip())
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    res = json.loads((tmp_path / "clock_load.json").read_text())
    assert res["loads"]["wgmma"]["tensor_duty"] > 0.5
    assert 0.1 < res["loads"]["wgmma_duty50"]["tensor_duty"] < 0.8
