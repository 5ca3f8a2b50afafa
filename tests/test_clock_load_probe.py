"""The clock-versus-load probe (validation/calibration/clock_load_probe): the .cu compiles for sm_90a in one
nvcc call without spills; records, nvidia-smi lines, windows, the clock series, the duty-cycle settings and
records, --only and the merge into an existing file, the kernel arguments each load passes and the table
work on synthetic data (tmp_path only, never a result). GPU run: ``gpu``."""

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
                   ("WG_PER_GROUP", "CL_WG_PER_GROUP"), ("STREAM_UNROLL", "CL_STREAM_UNROLL")):
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
    for k in ("cl_spin", "cl_ffma", "cl_mma", "cl_mma_duty", "cl_wg"):
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
    for ld in cl.LOADS:
        if ld.duty < 1.0:
            row = res["loads"][ld.name]
            assert row["duty_time"]["value"] == pytest.approx(ld.duty, abs=0.03), ld.name
            if ld.kind == "wg":
                assert row["tensor_duty_wgmma"] == pytest.approx(ld.duty, abs=0.05), ld.name


def test_load_table_keeps_the_old_names_and_adds_the_random_duty_loads():
    by = {ld.name: ld for ld in cl.LOADS}
    for name in ("idle_spin", "ffma", "mma_sync", "mma_sync_rand", "wgmma", "wgmma_rand", "wgmma_duty25",
                 "wgmma_duty50", "wgmma_duty75", "wgmma_hbm", "hbm_only"):
        assert name in by
    assert [by[f"wgmma_duty{d}"].rand for d in (25, 50, 75)] == [False] * 3
    assert [(by[f"wgmma_rand_duty{d}"].rand, by[f"wgmma_rand_duty{d}"].duty) for d in (25, 50, 75)] == [
        (True, 0.25), (True, 0.5), (True, 0.75)]
    assert [(by[f"mma_sync_rand_duty{d}"].kind, by[f"mma_sync_rand_duty{d}"].rand) for d in (25, 50)] == [
        ("mma_duty", True)] * 2
    assert not by["mma_sync"].rand and by["mma_sync_rand"].rand and not by["wgmma"].rand and by["wgmma_rand"].rand
    assert len(set(cl.LOAD_NAMES)) == len(cl.LOADS)


def test_duty_settings_and_records():
    assert [cl.off_per_on_q16(d) for d in (0.25, 0.5, 0.75, 1.0)] == [3 * 65536, 65536, 21845, 0]
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="duty"):
            cl.off_per_on_q16(bad)
    # two blocks: 1e6 cycles each, 750k and 740k of them waited
    rec = cl.parse_records([1_000_000, 500_000, 0, 750_000, 1_000_000, 500_000, 1, 740_000], 2)
    d = cl.duty_from_records(rec)
    assert d["value"] == pytest.approx(0.255) and d["min"] == pytest.approx(0.25) and d["n"] == 2
    with pytest.raises(ValueError, match="waited cycles"):
        cl.duty_from_records(cl.parse_records([1000, 500, 0, 2000], 1))
    row = cl.load_row("wgmma_duty25", rec, flop_per_block=1e6 * 4096 * 0.25)
    row["duty_time"], row["smi"] = d, None
    assert "25.5%" in cl.format_table({"loads": {"wgmma_duty25": row}})


def _cu_params(kernel: str) -> int:
    m = re.search(rf"{kernel}\(([^)]*)\)\s*\{{", CU)
    assert m, kernel
    return len([p for p in m.group(1).split(",") if p.strip()])


class _FakeCp:
    int32 = int64 = uint64 = staticmethod(int)


class _FakeDev:
    """What _run_load needs of the device: launches recorded, sizing returns a fixed count."""

    def __init__(self):
        self.cp, self.target_s, self.launches = _FakeCp(), 0.1, []
        self.rec = self.out = self.hbm = "buf"
        self.hbm_mask16 = 15
        self.samples = type("S", (), {"fill": lambda self, v: None})()

    def launch(self, name, threads, args):
        self.launches.append((name, threads, tuple(args)))
        return 0.1, 0.0, 0.1

    def sized(self, name, threads, make_args):
        make_args(16)
        return 1000


def test_each_load_passes_its_kernel_the_right_arguments():
    params = {k: _cu_params(k) for k in ("cl_spin", "cl_ffma", "cl_mma", "cl_mma_duty", "cl_wg")}
    for ld in cl.LOADS:
        dev = _FakeDev()
        _, extra = cl._run_load(dev, ld)
        name, threads, args = dev.launches[-1]
        assert len(args) == params[name], ld.name
        if name == "cl_wg":  # iters, mode, rec, out, burst, off_per_on_q16, duration_ns, ...
            assert args[1] == (2 if ld.kind == "hbm" else int(ld.rand)) and args[4] == cl.BURST_GROUPS
            assert args[5] == cl.off_per_on_q16(ld.duty) and threads == (256 if ld.kind == "wg" else 384)
        if name == "cl_mma_duty":  # iters, noise, rec, out, burst, off_per_on_q16
            assert args[1] == int(ld.rand) and args[4] == cl.MMA_BURST_ITERS and args[5] == cl.off_per_on_q16(ld.duty)
            assert extra["flop_per_block"] == 8 * 1000 * cl.MMA_BURST_ITERS * 16 * cl.MMA_FLOP
        if name == "cl_mma":
            assert args[1] == int(ld.rand)
        if ld.duty < 1.0:
            assert extra["target_duty"] == ld.duty and extra["random_operands"] == ld.rand


def _row(name, clock_hz):
    rec = cl.parse_records([int(clock_hz / 1000), 1_000_000, 0, 0], 1)
    return cl.load_row(name, rec)


def test_only_and_merge_into_an_existing_file():
    assert cl.parse_only(None) is None
    assert cl.parse_only("wgmma_rand_duty25, mma_sync_rand_duty50") == ("wgmma_rand_duty25", "mma_sync_rand_duty50")
    with pytest.raises(ValueError, match="unknown"):
        cl.parse_only("wgmma,nope")
    with pytest.raises(ValueError, match="unknown"):
        cl.main(["--only", "nope"])
    old = {"meta": {"date_utc": "old", "git_revision": "a", "quick": False}, "compile": {"c": "old"},
           "loads": {n: _row(n, 1.5e9) for n in ("ffma", "wgmma", "wgmma_duty75", "hbm_only")},
           "errors": {"wgmma_duty50": "boom", "wgmma_hbm": "bang"}, "smi_samples": [{"t": 1.0}, {"t": 3.0}]}
    new = {"meta": {"date_utc": "new", "git_revision": "b", "quick": False,
                    "loads_run": ["wgmma_duty50", "wgmma_duty75", "wgmma_rand_duty25"]},
           "compile": {"c": "new"}, "smi_fields": ["clocks.sm"], "smi_note": "",
           "loads": {n: _row(n, 1.8e9) for n in ("wgmma_duty50", "wgmma_duty75", "wgmma_rand_duty25")},
           "errors": {}, "smi_samples": [{"t": 2.0}]}
    m = cl.merge_results(old, new)
    assert list(m["loads"]) == ["ffma", "wgmma", "wgmma_duty50", "wgmma_duty75", "wgmma_rand_duty25", "hbm_only"]
    assert m["loads"]["wgmma_duty75"]["clock_hz"]["value"] == pytest.approx(1.8e9)
    assert m["loads"]["ffma"]["clock_hz"]["value"] == pytest.approx(1.5e9)
    assert m["errors"] == {"wgmma_hbm": "bang"}
    assert m["group_runs"]["ffma"]["date_utc"] == "old" and m["group_runs"]["wgmma_rand_duty25"]["date_utc"] == "new"
    assert m["meta"]["date_utc"] == "new" and m["compile"] == {"c": "new"}
    assert [x["t"] for x in m["smi_samples"]] == [1.0, 2.0, 3.0]
    fresh = cl.merge_results(None, new)
    assert set(fresh["group_runs"]) == {"wgmma_duty50", "wgmma_duty75", "wgmma_rand_duty25"}
    again = cl.merge_results(m, {**new, "meta": {**new["meta"], "date_utc": "newer", "loads_run": ["ffma"]},
                                 "loads": {}, "errors": {"ffma": "x"}, "smi_samples": []})
    assert "ffma" not in again["loads"] and again["errors"]["ffma"] == "x"
    assert again["group_runs"]["ffma"]["date_utc"] == "newer" and again["group_runs"]["wgmma"]["date_utc"] == "old"
