"""The tensor-core microbenchmarks (validation/calibration/tensor_probe): the CUDA source compiles for
sm_90a in one nvcc call, the per-block records parse, and a synthetic tensor.json (written here, in
tmp_path: never a result) merges into a calibrated profile the hardware catalog loads. The GPU run is
marked ``gpu``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from validation.calibration import calibrate
from validation.calibration import tensor_probe as tp

CU = tp.KERNEL_SRC.read_text()


def _define(name: str) -> int:
    m = re.search(rf"#define {name} (\d+)", CU)
    assert m, f"#define {name} missing from {tp.KERNEL_SRC.name}"
    return int(m.group(1))


def test_the_python_constants_match_the_cuda_defines():
    for py, cu in (("REC", "TP_REC"), ("MMA_CHAINS", "MMA_CHAINS"), ("MMA_ROUNDS", "MMA_ROUNDS"),
                   ("LAT_STEPS", "LAT_STEPS"), ("WG_PER_GROUP", "WG_PER_GROUP"), ("WG_A_BYTES", "WG_A_BYTES"),
                   ("LD_UNROLL", "LD_UNROLL"), ("CPA_UNROLL", "CPA_UNROLL"), ("CPA_STAGES", "CPA_STAGES"),
                   ("MBAR_STEPS", "MBAR_STEPS")):
        assert getattr(tp, py) == _define(cu), py


def test_every_kernel_the_probe_launches_is_in_the_source():
    names = {k.tp_kernel for k in (*tp.MMA_SYNC, *tp.WGMMA)} | {k.lat_kernel for k in (*tp.MMA_SYNC, *tp.WGMMA)}
    names |= {k for k, _, _ in tp.LDMATRIX} | {"cpasync_tp", "tma_tp", "mbar_rt", "tp_spin"}
    for n in names:
        assert re.search(rf"(\b{n}\(|_KERNEL\({n},|WG_DEF\({n},)", CU), n


def test_profile_keys_are_keys_the_hardware_data_may_hold():
    from tilesim.hardware import fields as F

    for key in calibrate.TENSOR_FIELDS:
        F.check_key(key, "nvidia")
    for k in (*tp.MMA_SYNC, *tp.WGMMA):
        if k.profile_key:
            assert k.profile_key in calibrate.TENSOR_FIELDS
            shape, dtype = k.profile_key.split(".")[1:]
            assert F.shape_matches(shape, k.shape) and dtype == k.in_dtype


# ----- offline compile (nvcc; skipped without it) --------------------------------------------------------
def test_the_source_compiles_for_sm_90a_without_warnings(tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    cubin, log = tp.compile_cubin(tmp_path)
    assert cubin.stat().st_size > 0
    assert tp.ptxas_warnings(log) == [], log
    regs = [int(x) for x in re.findall(r"Used (\d+) registers", log)]
    assert regs and max(regs) <= 168  # 3 warpgroups (384 threads) of the N=256 wgmma fit 64 K registers


# ----- pure parts ------------------------------------------------------------------------------------------
def test_records_parse_into_cycles_clock_and_sms():
    raw = [2000, 1000, 0, 0, 4000, 2000, 1, 0, 3000, 1500, 1, 0]  # cycles, ns, smid, 0 per block
    rec = tp.parse_records(raw, 3)
    assert rec["cycles"] == [2000, 4000, 3000] and rec["distinct_sms"] == 2
    assert rec["clock_hz"] == pytest.approx(2e9) and rec["cycles_median"] == 3000
    rates = tp.rep_rates(rec, 6000.0, event_s=2e-6)
    assert rates["inside"] == pytest.approx(2.0)  # median of 3, 1.5, 2 work units per cycle
    assert rates["outside"] == pytest.approx(6000.0 / (2e-6 * 2e9))
    with pytest.raises(ValueError, match="expected 4 per block"):
        tp.parse_records(raw[:-1], 3)
    with pytest.raises(ValueError, match="cycles <= 0"):
        tp.parse_records([0, 1, 0, 0], 1)


def test_summarize_keeps_median_and_spread():
    s = tp.summarize([3.0, 1.0, 2.0])
    assert (s["value"], s["min"], s["max"], s["n"]) == (2.0, 1.0, 3.0, 3)
    with pytest.raises(ValueError):
        tp.summarize([])


def test_tensor_map_arguments_are_checked_before_the_driver():
    with pytest.raises(ValueError, match="box_cols"):
        tp.encode_tensor_map_2d(0, 4096, 64, 128, 64)
    with pytest.raises(ValueError, match="16 bytes"):
        tp.encode_tensor_map_2d(8, 4096, 64, 64, 64)


def _synthetic_rate(kind: str, value: float, **cfg) -> dict:
    """A made-up result row in the shape run_probes writes (SYNTHETIC: test data, never a measurement)."""
    return {"kind": kind, "kernel": f"synthetic_{kind}", "value": value, "p10": value * 0.99, "p90": value * 1.01,
            "min": value * 0.98, "max": value * 1.02, "n": 10, "unit": "FLOP/clk/SM", "iters": 100, "reps": 10,
            "clock_hz": 1.98e9, "sass_ok": True, **cfg}


def _synthetic_results() -> dict:
    lat = {**_synthetic_rate("m16n8k16_fp16_f32", 33.0), "unit": "cycles"}
    return {
        "meta": {"date_utc": "1999-01-01T00:00:00+00:00", "device_name": "SYNTHETIC TEST GPU"},
        "mma_sync": {
            "m16n8k16_fp16_f32.tp.w4": _synthetic_rate("m16n8k16_fp16_f32", 1000.0, warps_per_sm=4),
            "m16n8k16_fp16_f32.tp.w16": _synthetic_rate("m16n8k16_fp16_f32", 1111.0, warps_per_sm=16),
            "m16n8k16_bf16_f32.tp.w16": {**_synthetic_rate("m16n8k16_bf16_f32", 1234.0, warps_per_sm=16),
                                         "sass_ok": False},  # a failed SASS check gives no field
            "m16n8k8_tf32_f32.tp.w16": _synthetic_rate("m16n8k8_tf32_f32", 555.0, warps_per_sm=16),
            "m16n8k16_fp16_f16.tp.w16": _synthetic_rate("m16n8k16_fp16_f16", 2222.0, warps_per_sm=16),
            "m16n8k16_fp16_f32.lat": lat,
        },
        "wgmma": {
            "m64n64k16_fp16_f32_ss.tp.wg1": _synthetic_rate("m64n64k16_fp16_f32_ss", 2000.0, warpgroups_per_sm=1),
            "m64n256k16_fp16_f32_ss.tp.wg2": _synthetic_rate("m64n256k16_fp16_f32_ss", 3333.0, warpgroups_per_sm=2),
            "m64n128k16_fp16_f32_rs.tp.wg2": _synthetic_rate("m64n128k16_fp16_f32_rs", 9999.0, warpgroups_per_sm=2),
        },
    }


def test_fields_take_the_best_configuration_and_keep_the_datasheet_beside_it():
    got = tp.fields(_synthetic_results(), datasheet={"mma.m16n8k16.fp16": 4096.0}, result_path="x/tensor.json")
    assert set(got) == {"mma.m16n8k16.fp16", "mma.m16n8k8.tf32", "mma.m64nNk16.fp16", "pipes.tensor.latency_cycles"}
    e = got["mma.m16n8k16.fp16"]
    assert e["value"] == 1111.0 and e["datasheet"] == 4096.0
    assert "x/tensor.json" in e["benchmark"] and "1111" in e["benchmark"] and "datasheet 4096" in e["benchmark"]
    assert got["mma.m64nNk16.fp16"]["value"] == 3333.0  # the RS form (no profile key) is not mixed in
    assert got["pipes.tensor.latency_cycles"]["value"] == 33.0


def test_a_synthetic_tensor_json_merges_into_a_profile_the_catalog_loads(tmp_path):
    from tilesim.hardware import catalog

    gpu_dir = tmp_path / "h200" / "calibration"
    gpu_dir.mkdir(parents=True)
    (gpu_dir / "tensor.json").write_text(json.dumps(_synthetic_results()))
    fields = calibrate.tensor_fields(json.loads((gpu_dir / "tensor.json").read_text()), "h200")
    assert fields["mma.m16n8k16.fp16"]["datasheet"] == 4096.0  # from tilesim/hardware/data/h200.toml
    profile = calibrate.write_profile({"meta": {"date_utc": "1999-01-01", "device_name": "SYNTHETIC"},
                                       "fields": fields}, tmp_path / "cal" / "h200.toml")
    hw = catalog.load("h200", calibration_dir=profile.parent)
    assert hw.mma_flops_per_clk((16, 8, 16), "fp16") == 1111.0
    assert hw.mma_flops_per_clk((64, 128, 16), "fp16") == 3333.0
    assert hw.mma_flops_per_clk((16, 8, 16), "bf16") == 4096.0  # not calibrated: the data file's
    assert hw.pipe_latency_cycles("tensor") == 33.0
    assert hw.is_calibrated("mma.m16n8k16.fp16")
    assert "tensor_probe" in hw.source_of("mma.m16n8k16.fp16")


def test_from_json_without_tensor_json_writes_no_tensor_field(tmp_path):
    rec = (calibrate.REPO_ROOT / "validation" / "results" / "h200" / "calibration" / "calibration.json")
    if not rec.exists():
        pytest.skip("no recorded calibration.json")
    d = tmp_path / "h200" / "calibration"
    d.mkdir(parents=True)
    (d / "calibration.json").write_text(rec.read_text())
    out = tmp_path / "p.toml"
    assert calibrate.main(["--from-json", str(d / "calibration.json"), "--profile", str(out)]) == 0
    assert "[mma." not in out.read_text() and "tensor" not in out.read_text()
    (d / "tensor.json").write_text(json.dumps(_synthetic_results()))
    assert calibrate.main(["--from-json", str(d / "calibration.json"), "--profile", str(out)]) == 0
    assert "[mma.m16n8k16.fp16]" in out.read_text()


# ----- on the GPU ----------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_the_probe_runs_quick_on_the_gpu(tmp_path):
    if tp._gpu_missing():
        pytest.skip(tp._gpu_missing())
    p = subprocess.run([sys.executable, "-m", "validation.calibration.tensor_probe", "--quick", "--out",
                        str(tmp_path)], capture_output=True, text=True, cwd=tp.REPO_ROOT, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    res = json.loads((tmp_path / "tensor.json").read_text())
    assert not res["errors"]
    for g in ("mma_sync", "wgmma", "ldmatrix", "cp_async", "tma"):
        assert res[g], g
        for r in res[g].values():
            assert r["value"] > 0 and r["n"] == tp.QUICK_REPS
