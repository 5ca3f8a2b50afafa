"""CPU tests of the GPU measurement harness (timing policy, suite data, CSV resume, profile TOML,
ncu CSV parsing). The numbers below are fabricated test inputs, never measurements."""

from __future__ import annotations

import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tilesim import hardware
from tilesim.kernels.gemm.config import check_fits
from validation.calibration import calibrate
from validation.harness import ncu, probe, suite
from validation.harness.metadata import collect_metadata, git_revision, gpu_slug
from validation.harness.timing import Timing, measure_loop, time_gpu

REPO = Path(__file__).resolve().parents[1]


# ----- timing ------------------------------------------------------------------------------------
class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_measure_loop_warmup_flush_and_reps():
    calls, flushes = [], []
    clock = FakeClock()

    def one():
        calls.append(1)
        clock.t += 0.001
        return 0.001

    s = measure_loop(one, lambda: flushes.append(1), warmup=3, reps=10, min_reps=5, budget_s=100.0, clock=clock)
    assert len(s) == 10 and len(calls) == 13 and len(flushes) == 13


def test_measure_loop_budget_stops_early_but_not_before_min_reps():
    clock = FakeClock()

    def slow():
        clock.t += 1.0
        return 1.0

    s = measure_loop(slow, None, warmup=0, reps=30, min_reps=20, budget_s=5.0, clock=clock)
    assert len(s) == 20  # budget long exceeded, min_reps still honoured
    s = measure_loop(slow, None, warmup=0, reps=3, min_reps=20, budget_s=0.5, clock=clock)
    assert len(s) == 3  # reps caps min_reps


def test_timing_summary_and_validation():
    t = Timing.from_samples([5.0, 1.0, 3.0, 2.0, 4.0], flushed_l2=True)
    assert (t.median_s, t.min_s, t.reps, t.flushed_l2) == (3.0, 1.0, 5, True)
    assert math.isclose(t.p10_s, 1.4) and math.isclose(t.p90_s, 4.6)
    assert t.samples_s == (5.0, 1.0, 3.0, 2.0, 4.0)
    with pytest.raises(ValueError, match="samples_s"):
        Timing.from_samples([], flushed_l2=False)
    with pytest.raises(ValueError, match="samples_s"):
        Timing.from_samples([float("nan")], flushed_l2=False)


@pytest.mark.parametrize("kw, name", [({"reps": 0}, "reps"), ({"warmup": -1}, "warmup"),
                                      ({"min_reps": 0}, "min_reps"), ({"budget_s": 0}, "budget_s")])
def test_time_gpu_validates_before_touching_the_gpu(kw, name):
    with pytest.raises(ValueError, match=name):
        time_gpu(lambda: None, **kw)


# ----- metadata ------------------------------------------------------------------------------------
def test_results_directory_is_named_after_the_device():
    assert gpu_slug("NVIDIA H200") == "h200"
    assert gpu_slug("NVIDIA H100 80GB HBM3") == "h100_80gb_hbm3"
    assert gpu_slug("Apple M1 Max") == "m1_max"
    with pytest.raises(ValueError, match="device_name"):
        gpu_slug("NVIDIA")


def test_metadata_tolerates_missing_pieces(tmp_path):
    assert git_revision(tmp_path) == "unknown"
    meta = collect_metadata()
    for key in ("device_name", "driver_version", "cuda_runtime_version", "cuda_driver_version",
                "cupy_version", "nvcc_version", "sm_clock_hz", "sm_clock_max_hz", "mem_clock_hz",
                "date_utc", "git_revision", "hostname", "python_version"):
        assert key in meta
    assert meta["date_utc"].endswith("+00:00")


def test_device_copy_names_the_revision_it_was_sent_from(tmp_path):
    """A dirty checkout beside .device_git_revision (the device's copy) reports the file's revision."""
    import shutil as sh

    if sh.which("git") is None:
        pytest.skip("no git")
    run = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (tmp_path / "f").write_text("1")
    run("add", "f")
    run("-c", "user.email=a@b", "-c", "user.name=t", "commit", "-qm", "x")
    base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert git_revision(tmp_path) == base
    (tmp_path / "f").write_text("2")
    assert git_revision(tmp_path) == base + "-dirty"
    (tmp_path / ".device_git_revision").write_text("abc123\n")
    assert git_revision(tmp_path) == "abc123"


# ----- the suite data ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def configs():
    return suite.load_suite("gemm")


def test_suite_entries_are_valid_and_fit_h200(configs):
    hw = hardware.load("h200", calibrated=False)
    assert len(configs) >= 64
    for c in configs:
        check_fits(c, hw)
    keys = [(c.label, c.m, c.n, c.k) for c in configs]
    assert len(set(keys)) == len(keys)


def test_suite_covers_ladder_and_shapes(configs):
    shapes = {(c.m, c.n, c.k) for c in configs}
    assert {(1024, 1024, 1024), (4096, 4096, 4096), (16384, 256, 4096), (3000, 2000, 1000)} <= shapes
    for shape in shapes:
        sub = [c for c in configs if (c.m, c.n, c.k) == shape]
        assert {c.variant for c in sub} >= {"smem", "reg1d", "reg2d", "warp"}
        reg2d = [c for c in sub if c.variant == "reg2d"]
        assert len({(c.bm, c.bn) for c in reg2d}) >= 3 and len({c.bk for c in reg2d}) >= 2
        assert len({(c.tm, c.tn) for c in reg2d}) >= 2
        warp = [c for c in sub if c.variant == "warp"]
        assert len({(c.bm, c.bn, c.wm, c.wn) for c in warp}) >= 3
    assert {c.variant for c in configs} == {"naive_uncoalesced", "naive", "smem", "reg1d", "reg2d", "warp"}
    assert any(c.vectorize for c in configs) and any(c.smem_pad for c in configs)
    assert any(c.pipeline == "regs" for c in configs)
    assert {c.stages for c in configs if c.pipeline == "cp_async"} == {2, 3, 4}
    naive_big = [c for c in configs if c.variant.startswith("naive") and (c.m, c.n, c.k) == (4096,) * 3]
    assert len(naive_big) <= 2


def test_suite_main_without_gpu_exits_2():
    try:
        import cupy  # noqa: F401
        pytest.skip("cupy is installed; the no-GPU path is not reachable here")
    except ImportError:
        pass
    for mod in ("validation.calibration.calibrate", "validation.calibration.staging_probe", "validation.calibration.l2_probe",
                "validation.calibration.dispatch_probe", "validation.studies.l2_share_probe"):
        p = subprocess.run([sys.executable, "-m", mod, "--out", "/nonexistent/x"], cwd=REPO,
                           capture_output=True, text=True)
        assert p.returncode == 2, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1


# ----- the calibrated profile ------------------------------------------------------------------------------
def _fake_results():
    """Fabricated calibration results (test input only)."""
    vals = {"sm_clock_hz": 1.9e9, "hbm_bytes_per_s": 4.0e12, "hbm_latency_cycles": 600.0,
            "l2_bytes_per_s": 1.1e13, "l2_latency_cycles": 250.0, "l1_bytes_per_clk_per_sm": 100.0,
            "l1_latency_cycles": 33.0, "smem_latency_cycles": 30.0, "fp32_lanes_per_sm": 110.5,
            "issue_warp_instr_per_clk_per_sm": 3.9, "launch_overhead_s": 2.5e-6,
            "ldgsts_wavefronts_per_line": 1.1, "ldgsts_wavefronts_per_conflict": 1.9, "ldgsts_bypass_wavefronts": 0.8,
            "l2_bytes": 5.0e7, "l2_dirty_bytes": 4.0e7, "l1_lines_per_clk_per_sm": 2.2}
    fields = {k: {"value": v, "benchmark": f"bench_{k}", "n": 25, "p10": v * 0.99, "p90": v * 1.01,
                  "unit": "u"} for k, v in vals.items()}
    fields["warp_issue_per_clk"] = {"value": 0.7, "benchmark": "bench_warp_issue_per_clk", "n": 25, "p10": 0.69,
                                    "p90": 0.71, "unit": "u"}
    fields["tail_packing_by_slots"] = {"value": [[2, 0.9], [7, 0.3]], "benchmark": "bench_dispatch", "n": 1,
                                       "p10": 0.3, "p90": 0.9, "unit": "u"}
    fields["warp_issue_by_code_bytes"] = {"value": [[8192, 0.9], [65536, 0.4]], "benchmark": "bench_code",
                                          "n": 25, "p10": 0.4, "p90": 0.9, "unit": "u"}
    fields["ffma_rate_by_warps"] = {"value": [[4, 1.5], [8, 2.5], [32, 3.9]], "benchmark": "bench_ffma_rate_by_warps",
                                    "n": 25, "p10": 1.4, "p90": 4.0, "unit": "u"}
    meta = {"date_utc": "2000-01-01T00:00:00+00:00", "device_name": "Test \"GPU\"", "git_revision": "abc"}
    return {"meta": meta, "fields": fields}


def test_write_profile_round_trips_through_hardware_load(tmp_path):
    res = _fake_results()
    calibrate.write_profile(res, tmp_path / "h200.toml")
    hw = hardware.load("h200", calibration_dir=tmp_path)
    assert hw.calibrated == frozenset(res["fields"])  # what the results hold, no more
    assert frozenset(res["fields"]) <= frozenset(calibrate.PROFILE_FIELDS)
    assert hw.calibration_date == "2000-01-01T00:00:00+00:00"
    assert hw.ffma_rate_by_warps == ((4, 1.5), (8, 2.5), (32, 3.9))
    assert hw.code_issue_factor(36864) == pytest.approx((0.9 - 0.5 * 0.5) / 0.9)
    assert hw.tail_packing(4) == pytest.approx(0.9 - 0.6 * 2 / 5)
    assert hw.ffma_rate_at(6) == pytest.approx(2.0)
    for name, e in res["fields"].items():
        if name in ("ffma_rate_by_warps", "warp_issue_by_code_bytes", "tail_packing_by_slots"):
            continue
        assert getattr(hw, name) == pytest.approx(e["value"])
        src = hw.source_of(name)
        assert src.startswith(f"calibration: bench_{name}, 2000-01-01") and "median of 25 runs" in src
    base = hardware.load("h200", calibrated=False)
    assert hw.smem_banks == base.smem_banks and hw.smem_bank_width_bytes == base.smem_bank_width_bytes


def test_write_profile_rejects_bad_input(tmp_path):
    res = _fake_results()
    res["fields"]["smem_banks"] = dict(res["fields"]["sm_clock_hz"])
    with pytest.raises(ValueError, match="smem_banks"):
        calibrate.write_profile(res, tmp_path / "x.toml")
    res = _fake_results()
    res["fields"]["sm_clock_hz"]["value"] = float("inf")
    with pytest.raises(ValueError):
        calibrate.write_profile(res, tmp_path / "x.toml")
    res = _fake_results()
    del res["meta"]["date_utc"]
    with pytest.raises(ValueError, match="date"):
        calibrate.write_profile(res, tmp_path / "x.toml")


def test_summarize():
    s = calibrate.summarize([3, 1, 2])
    assert (s["median"], s["min"], s["max"], s["n"]) == (2.0, 1.0, 3.0, 3)
    with pytest.raises(ValueError):
        calibrate.summarize([])


def test_microbench_source_defines_every_kernel():
    src = calibrate.KERNEL_SRC.read_text()
    for name in ("copy_f4", "read_l2", "read_l1", "read_smem", "chase_global", "chase_smem",
                 "fma_chains", "issue_mix", "empty_kernel", "clock_probe"):
        assert f"void {name}(" in src or f"void __launch_bounds__(MB_THREADS) {name}(" in src
    assert f"#define MB_THREADS {calibrate.MB_THREADS}" in src


# ----- ncu -------------------------------------------------------------------------------------------------
NCU_SAMPLE = '''==PROF== Connected to process 4242 (/usr/bin/python3.12)
KERNEL_NAME=gemm_test
==PROF== Profiling "gemm_test" - 0: 0%....50%....100% - 9 passes
==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum","l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum","launch__registers_per_thread","lts__t_sector_hit_rate.pct","sm__cycles_elapsed.avg.per_second","smsp__inst_executed.sum","l1tex__t_bytes.sum"
"","","","","","","","","","","","byte","Kbyte","usecond","","register/thread","%","cycle/nsecond","inst","Mbyte"
"0","4242","python3.12","127.0.0.1","gemm_test","1","7","(256, 1, 1)","(32, 32, 1)","0","9.0","1,048,576","2.5","12.25","0","128","87.5","1.5","123,456","n/a"
'''


def test_parse_ncu_csv_sample():
    recs = ncu.parse_ncu_csv(NCU_SAMPLE)
    assert len(recs) == 1
    r = recs[0]
    assert r["kernel_name"] == "gemm_test"
    assert r["dram__bytes_read.sum_bytes"] == 1048576
    assert r["dram__bytes_write.sum_bytes"] == pytest.approx(2500)
    assert r["gpu__time_duration.sum_s"] == pytest.approx(12.25e-6)
    assert r["launch__registers_per_thread_count"] == 128
    assert r["lts__t_sector_hit_rate.pct_pct"] == 87.5
    assert r["sm__cycles_elapsed.avg.per_second_hz"] == pytest.approx(1.5e9)
    assert r["smsp__inst_executed.sum_count"] == 123456
    assert r["l1tex__t_bytes.sum_bytes"] is None  # "n/a"
    assert r["lts__t_bytes.sum_bytes"] is None  # metric absent
    assert set(r) - {"kernel_name", "id"} == set(ncu.metric_columns(ncu.METRICS))


def test_parse_ncu_csv_errors_and_units():
    with pytest.raises(ValueError, match="header"):
        ncu.parse_ncu_csv("==PROF== nothing profiled\n")
    with pytest.raises(ValueError):
        ncu.convert(1.0, "byte", "s")
    assert ncu.convert(2.0, "msecond", "s") == pytest.approx(2e-3)
    assert ncu.convert(1.0, "Gbyte", "bytes") == 1e9


def test_ncu_command_profiles_a_chunk_cold_at_the_running_clock(tmp_path):
    cmd = ncu.ncu_command("gemm", tmp_path / "jobs.json", tmp_path / "m.jsonl")
    joined = " ".join(cmd)
    for flag in ("--clock-control none", "--cache-control all", "--target-processes all", "--csv",
                 "--page raw", "--profile-from-start off", "--print-kernel-base mangled",
                 "-m validation.harness.ncu --target gemm --jobs"):
        assert flag in joined
    assert cmd[cmd.index("--metrics") + 1].split(",") == list(ncu.METRICS)
    for metric in ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum",
                   "lts__t_sector_hit_rate.pct", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
                   "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "smsp__inst_executed.sum",
                   "launch__registers_per_thread", "sm__warps_active.avg.pct_of_peak_sustained_active"):
        assert metric in ncu.METRICS


# ----- GPU (skipped without cupy or a device) -------------------------------------------------------------------
def _gpu():
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception:
        pytest.skip("no usable CUDA device")
    return cp


@pytest.mark.gpu
def test_time_gpu_on_device():
    cp = _gpu()
    x = cp.ones(1 << 20, dtype=cp.float32)
    t = time_gpu(lambda: x.__imul__(1.0), warmup=2, reps=25, min_reps=20)
    assert t.reps >= 20 and t.flushed_l2 and 0 < t.min_s <= t.median_s <= t.p90_s


@pytest.mark.gpu
def test_microbench_compiles_on_device():
    cp = _gpu()
    mod = cp.RawModule(code=calibrate.KERNEL_SRC.read_text())
    assert mod.get_function("empty_kernel") is not None


def test_counters_columns_are_unique():
    cols = ncu.csv_columns("gemm")
    assert len(set(cols)) == len(cols)
    assert Counter(c.split("_")[-1] for c in ncu.metric_columns(ncu.METRICS))["bytes"] == 4


# ----- SASS loop bodies, the staging probe and what calibration derives from them -------------------------
SASS_SAMPLE = """
        Function : issue_mix
        /*02e0*/                   UMOV UR4, URZ ;                 /* 0x0000003f00047c82 */
        /*02f0*/                   LDC.64 R32, c[0x0][0x218] ;     /* 0x00008600ff207b82 */
        /*0300*/                   UIADD3 UR4, UR4, 0x1, URZ ;     /* 0x0000000104047890 */
        /*0310*/                   ISETP.LE.AND P0, PT, R3, UR4, PT ;  /* 0x0000000403007c0c */
        /*0320*/                   FFMA R4, R31, R33, R32 ;        /* 0x000000211f047223 */
        /*0330*/                   LOP3.LUT R5, R5, R32, R33, 0xe8, !PT ;  /* 0x0000002005057212 */
        /*0340*/                   FFMA R2, R25, R33, R32 ;        /* 0x0000002119027223 */
        /*0350*/              @!P0 BRA 0x2f0 ;                     /* 0xfffffff800688947 */
        /*0360*/                   FFMA R9, R9, R9, R9 ;           /* 0x0000000909097223 */
        /*0370*/                   EXIT ;                          /* 0x000000000000794d */
        Function : other
        /*0000*/                   FFMA R1, R1, R1, R1 ;           /* 0x0000000101017223 */
        /*0010*/                   BRA 0x0 ;                       /* 0xfffffffc00fc7947 */
"""


def test_hot_loop_counts_every_instruction_of_the_loop_body():
    from validation.calibration.sass_histogram import hot_loop

    body = hot_loop(SASS_SAMPLE, "issue_mix")
    assert body == Counter({"LDC": 1, "UIADD3": 1, "ISETP": 1, "FFMA": 2, "LOP3": 1, "BRA": 1})
    with pytest.raises(ValueError, match="no function"):
        hot_loop(SASS_SAMPLE, "missing")
    # a loop unrolled twice: per source iteration, all instructions or only some opcodes
    assert calibrate.per_iteration(dict(body), "FFMA", 1) == pytest.approx(7 / 2)
    assert calibrate.per_iteration(dict(body), "FFMA", 1, ("FFMA",)) == pytest.approx(1.0)
    assert calibrate.per_iteration(None, "FFMA", 1) is None


def test_issue_rates_come_from_all_issued_instructions():
    """fma_outer's warp_issue_per_clk counts every issued instruction (issue_by_warps), not FFMA only."""
    one = {"value": 4.0, "p10": 3.9, "p90": 4.1, "benchmark": "b", "n": 20, "unit": "u", "instr_per_iter": 36.75}
    ffma = {"value": 3.2, "p10": 3.1, "p90": 3.3, "benchmark": "b", "n": 20, "unit": "u"}
    bm = {"fma_by_warps": {"value": [[4, 3.2]], "benchmark": "b", "n": 20, "p10": 3.1, "p90": 3.3,
                           "by_warps": {"4": ffma}, "issue_by_warps": {"4": one}}}
    for k in ("clock_probe", "hbm_chase", "l2_chase", "l1_read", "l1_chase", "smem_chase"):
        bm[k] = {"value": 1.0}
    bm.update(hbm_copy={"best": {"value": 1.0}}, l2_read={"best": {"value": 1.0}}, fma={"lanes": {"value": 1.0}},
              issue={"rate": {"value": 1.0}}, launch={"events": {"value": 1.0}})
    fields = calibrate.fields_from_benchmarks(bm)
    assert fields["warp_issue_per_clk"]["value"] == pytest.approx(1.0)
    assert fields["ffma_rate_by_warps"]["value"] == [[4, 3.2]]


def test_staging_probe_pattern_facts_match_tilesim_access_rules():
    """The probe's GEMM-A copy touches 8 lines and its transposed stores add 3 wavefronts: what
    profile_fields divides by, recomputed from the probe's lane addresses with tilesim's rules."""
    from tilesim.cost.access import global_sectors_and_lines, ideal_wavefronts, smem_wavefronts
    from validation.calibration import staging_probe

    k_stride, j = 1024, 0
    lanes = range(32)
    g = [((c // 4) * k_stride + (c % 4) * 4 + j) * 4 for c in lanes]
    s_t = [((c % 4) * 4 + j) * 128 * 4 + (c // 4) * 4 for c in lanes]
    s_lin = [(j * 512 + c) * 4 for c in lanes]
    assert global_sectors_and_lines(g, 4)[1] == staging_probe.A_LINES_PER_COPY
    assert smem_wavefronts(s_t, 4) - ideal_wavefronts(32, 4) == staging_probe.A_T_EXTRA_STORE_WAVEFRONTS
    assert smem_wavefronts(s_lin, 4) == ideal_wavefronts(32, 4)


def test_ldgsts_rule_reproduces_the_recorded_probe():
    """The rule with the calibrated rates gives the probe's wavefronts per copy for the patterns the
    rates were read from, and predicts the one-line pattern it was not read from."""
    import json

    from tilesim.cost.access import ldgsts_wavefronts

    path = REPO / "validation" / "results" / "h200" / "calibration" / "staging.json"
    if not path.exists():
        pytest.skip("no recorded staging probe")
    pats = json.loads(path.read_text())["patterns"]
    hw = hardware.load("h200")
    lanes = range(32)
    g = [((c // 4) * 1024 + (c % 4) * 4) * 4 for c in lanes]
    s_t = [((c % 4) * 4) * 128 * 4 + (c // 4) * 4 for c in lanes]
    assert ldgsts_wavefronts(g, s_t, 4, hw) == pytest.approx(pats["a_t_async_l2"]["wavefronts_per_copy"], rel=0.01)
    contig = [c * 4 for c in lanes]  # one line, no conflicts: not used for the rates
    assert ldgsts_wavefronts(contig, contig, 4, hw) == pytest.approx(pats["contig_async4"]["wavefronts_per_copy"],
                                                                     rel=0.2)
    assert ldgsts_wavefronts(g, s_t, 16, hw) == hw.ldgsts_bypass_wavefronts


def test_lds128_wavefront_rule_reproduces_the_recorded_probe():
    """tilesim's 16-byte shared-load rule against the probe's Nsight Compute counts, pattern by pattern
    (the rule was read off the warp-tiled GEMMs' counters; "pairs" and "mixed" were never fitted)."""
    import json

    from tilesim.cost.access import smem_wavefronts
    from validation.calibration.staging_probe import LDS_CHUNK

    path = REPO / "validation" / "results" / "h200" / "calibration" / "staging.json"
    pats = json.loads(path.read_text())["patterns"] if path.exists() else {}
    if "lds128_lin" not in pats:
        pytest.skip("no recorded LDS.128 probe")
    for name, chunk in LDS_CHUNK.items():
        predicted = smem_wavefronts([chunk(lane) * 16 for lane in range(32)], 16)
        assert predicted == pytest.approx(pats[f"lds128_{name}"]["wavefronts_per_copy"], rel=0.01), name


def test_l2_capacity_is_where_cyclic_rereads_miss_half_the_time():
    import json

    from validation.calibration.l2_probe import capacity_field

    mib = 1 << 20
    cases = [{"rotate": r, "footprint_bytes": f * mib, "repeat_miss_fraction": m}
             for r in (0, 66) for f, m in ((32, 0.0), (40, 0.1), (48, 0.9), (56, 1.0))]
    field = capacity_field(cases)
    assert field["value"] == round(44 * mib) and field["n"] == 2
    with pytest.raises(ValueError, match="never cross"):
        capacity_field([c for c in cases if c["footprint_bytes"] <= 40 * mib])
    path = REPO / "validation" / "results" / "h200" / "calibration" / "calibration.json"
    recorded = json.loads(path.read_text())["benchmarks"].get("l2_probe", {}) if path.exists() else {}
    if "cases" in recorded:  # the recorded probe gives the calibrated profile's L2 capacity
        assert hardware.load("h200").l2_bytes == capacity_field(recorded["cases"])["value"]


def test_probe_rows_reads_ncu_csv_in_launch_order(tmp_path):
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\n"
                    "echo '==PROF== Connected'\n"
                    "echo '\"ID\",\"Kernel Name\",\"dram__bytes_read.sum\"'\n"
                    "echo '\"\",\"\",\"byte\"'\n"
                    "echo '\"0\",\"k_a\",\"1,024\"'\n"
                    "echo '\"1\",\"k_b\",\"n/a\"'\n")
    fake.chmod(0o755)
    rows = probe.probe_rows("validation.calibration.l2_probe", ("dram__bytes_read.sum", "missing.metric"), ncu=str(fake))
    assert rows == [{"kernel_name": "k_a", "dram__bytes_read.sum": 1024.0, "missing.metric": None},
                    {"kernel_name": "k_b", "dram__bytes_read.sum": None, "missing.metric": None}]
    empty = tmp_path / "ncu_empty"
    empty.write_text("#!/bin/sh\necho 'no kernels' >&2\nexit 1\n")
    empty.chmod(0o755)
    with pytest.raises(RuntimeError, match="no kernels"):
        probe.probe_rows("validation.calibration.l2_probe", ("dram__bytes_read.sum",), ncu=str(empty))


def test_l2_dirty_bytes_is_what_the_l2_keeps_once_written_lines_are_pushed_out():
    from validation.calibration.l2_probe import dirty_field

    mib = 1 << 20
    wb = [{"written_bytes": 24 * mib, "read_footprint_bytes": r * mib, "dram_write_bytes": w * mib,
           "dram_read_bytes": rd * mib} for r, w, rd in ((8, 0.5, 8), (12, 2, 12), (16, 6, 16), (20, 10, 20),
                                                         (32, 23, 35))]
    f = dirty_field(wb)  # 0.5 MiB is below the threshold; the last case's re-reads missed
    assert f["n"] == 3 and f["value"] == 34 * mib
    with pytest.raises(ValueError, match="no write-back case"):
        dirty_field(wb[:1])


# ----- schedule trace, replay and the L2 share probe ---------------------------------------------------------
def test_trace_marks_are_the_k_tiles_where_gemm_cu_stamps():
    from validation.studies.schedule_trace import MARKS, mark_tiles

    for nk in (1, 5, 8, 63, 256):
        # gemm.cu stamps slot j at the first kt with kt*MARKS//nk == j (or kt == 0), and MARKS at the end
        stamped = {}
        for kt in range(nk):
            j = kt * MARKS // nk
            if kt == 0 or j != (kt - 1) * MARKS // nk:
                stamped[j] = kt
        marks = mark_tiles(nk)
        assert marks[-1] == nk and len(marks) == MARKS + 1
        assert all(marks[j] == kt for j, kt in stamped.items())
    src = (REPO / "validation" / "families" / "gemm" / "gemm.cu").read_text()
    assert f"#define GEMM_TRACE_MARKS {MARKS}" in src


def test_replay_lru_counts_shared_tiles_once_and_thrashes_beyond_capacity():
    import numpy as np

    from validation.studies.schedule_replay import lru_miss_bytes

    # 4 blocks in one row of a 2-wide grid... gx=2: blocks 0,1 share A row 0; blocks 0,2 share B column 0
    nk = 3
    together = np.array([[0.0, 1.0, 2.0]] * 4)
    missed = lru_miss_bytes(together, gx=2, a_bytes=10, b_bytes=10, capacity_bytes=1e9)
    assert missed == 2 * 3 * 10 + 2 * 3 * 10  # 2 A rows and 2 B columns, 3 k-tiles each, once
    # block 2 runs long after block 0 with a cache of one tile: nothing it shares survives
    apart = np.array([[0.0, 1.0, 2.0], [0.1, 1.1, 2.1], [10.0, 11.0, 12.0], [10.1, 11.1, 12.1]])
    tiny = lru_miss_bytes(apart, gx=2, a_bytes=10, b_bytes=10, capacity_bytes=10)
    assert tiny == 4 * nk * 2 * 10 - 0  # every access misses: no tile stays resident to its next reader
    assert lru_miss_bytes(apart, gx=2, a_bytes=10, b_bytes=10, capacity_bytes=1e9) == missed


def test_replay_interpolates_k_tiles_between_stamps():
    import numpy as np

    from validation.studies.schedule_replay import tile_times

    nk = 16
    stamps = np.array([[0, 10, 20, 30, 40, 50, 60, 70, 160]])  # the last 2 k-tiles take 90 ns
    t = tile_times(stamps, nk)
    assert t.shape == (1, nk) and t[0, 0] == 0 and t[0, 2] == 10 and t[0, 14] == 70 and t[0, 15] == 115


def test_recorded_schedule_replay_matches_the_rows_it_was_traced_for():
    path = REPO / "validation" / "results" / "h200" / "studies" / "schedule_trace" / "schedule_trace.json"
    if not path.exists():
        pytest.skip("no recorded schedule trace")
    import json

    meta = json.loads(path.read_text())
    from validation.harness.suite import load_suite

    labels = {c.label for c in load_suite("gemm") if [c.m, c.n, c.k] == meta["shape"]}
    ok = [lab for lab, r in meta["configs"].items() if r["status"] == "ok"]
    assert ok and set(ok) <= labels
    assert meta["meta"]["device_name"] and meta["meta"]["git_revision"]


def test_l2_share_probe_geometry_and_half_miss_footprints():
    from validation.studies.l2_share_probe import (
        BLOCKS,
        LAYOUTS,
        ROW_BYTES,
        SHARES,
        geometry,
        half_miss_footprints,
    )

    mib = 1 << 20
    for lay in LAYOUTS:
        for sh in SHARES:
            g = geometry(lay, sh, 32)
            assert g["nslices"] * sh == BLOCKS
            assert g["footprint_bytes"] == 32 * mib  # what every case reads, whatever the layout
            if lay == "pitch16k":
                assert g["row_vec4"] * 16 == ROW_BYTES and g["span_bytes"] == g["footprint_bytes"]
            if lay == "pitch16k_pad":
                assert g["span_bytes"] > g["footprint_bytes"]
    with pytest.raises(ValueError, match="share"):
        geometry("contiguous", 3, 32)
    with pytest.raises(ValueError, match="layout"):
        geometry("diagonal", 1, 32)
    cases = [{"layout": "contiguous", "share": 1, "footprint_bytes": f * mib, "repeat_miss_fraction": m}
             for f, m in ((32, 0.0), (40, 0.25), (48, 0.75))]
    got = half_miss_footprints(cases)
    assert got[("contiguous", 1)] == pytest.approx(44 * mib) and got[("contiguous", 2)] is None


def test_smem_rate_probe_rates_and_the_models_one_wavefront_per_clock():
    from validation.studies.smem_rate_probe import PATTERNS, rates

    rows = [{"sm__cycles_elapsed.avg": 1000.0, "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum": 2 * 900.0,
             "smsp__inst_executed_op_shared_ld.sum": 2 * 450.0, "smsp__inst_executed_op_shared_st.sum": None,
             "smsp__inst_executed.sum": 2 * 3000.0, "gpu__time_duration.sum": 5e5}] * len(PATTERNS)
    got = rates(rows, sms=2)
    first = got[next(iter(PATTERNS))]
    assert first["wavefronts_per_clk_per_sm"] == pytest.approx(0.9)
    assert first["shared_instr_per_clk_per_sm"] == pytest.approx(0.45)
    assert first["instr_per_clk_per_sm"] == pytest.approx(3.0) and first["time_s"] == pytest.approx(5e-4)
    with pytest.raises(RuntimeError, match="not profiled"):
        rates([dict(rows[0], **{"sm__cycles_elapsed.avg": None})], sms=2)
    # the engine's shared-memory channel moves one wavefront per clock whatever the access: the probe
    # (4- and 8-byte loads, broadcasts, stores, the tiled GEMM's pattern, 8 to 32 warps) agrees within 7%
    path = REPO / "validation" / "results" / "h200" / "studies" / "smem_rate_probe" / "smem_rate.json"
    if not path.exists():
        pytest.skip("no recorded shared-memory rate probe")
    import json

    recorded = json.loads(path.read_text())["patterns"]
    assert set(recorded) == set(PATTERNS)
    for name, p in recorded.items():
        assert p["wavefronts_per_clk_per_sm"] == pytest.approx(1.0, abs=0.07), name


def test_lds_fed_outer_products_reach_the_issue_cap_from_eight_warps():
    """validation/calibrate.py --lds-outer: a register-tiled GEMM's inner loop (16-byte shared loads
    feeding an outer product) issues, with 8 or more warps per SM, within 12% of the issue cap the
    engine uses; with 4 warps it falls 10-31% below it (a gap the engine's per-warp rate, measured on
    a register-only loop, does not see; no suite kernel runs 4 warps per SM)."""
    path = REPO / "validation" / "results" / "h200" / "calibration" / "lds_outer.json"
    if not path.exists():
        pytest.skip("no recorded lds_outer microbenchmark")
    import json

    hw = hardware.load("h200")
    rows = json.loads(path.read_text())["lds_outer"]["rows"]
    for key, r in rows.items():
        model = min(hw.issue_warp_instr_per_clk_per_sm, r["warps_per_sm"] * hw.warp_issue_per_clk)
        if r["warps_per_sm"] >= 8:
            assert r["value"] == pytest.approx(model, rel=0.12), key
        else:
            assert 0.65 * model < r["value"] < 0.92 * model, key


@pytest.fixture(scope="module")
def engine_rows():
    from validation.studies.engine_check import check

    rows = check()
    if not rows:
        pytest.skip("no recorded lds_outer / staged_outer microbenchmarks")
    return rows


def test_engine_check_programs_count_what_the_microbenchmarks_do():
    """The study's tile programs (v2: lane offsets, costs derived by the engine's cost model) count
    the loops' instructions: the SASS count per iteration is what the engine issues."""
    from tilesim.cost import step_cost
    from validation.studies.engine_check import ROUNDS, outer_program

    hw = hardware.load("h200")
    for tm, tn, warps, staged, kw in ((8, 8, 4, False, {}), (4, 4, 4, True, {}),
                                      (8, 8, 8, True, {"global_tiles": True}),
                                      (8, 8, 4, True, {"global_tiles": True, "scalar": True, "stream": True})):
        prog = outer_program(hw, tm, tn, warps, 2, 1000.0, staged, iters=10, **kw)
        (phase,) = prog.phases
        c = step_cost(phase.step, hw, warps)
        assert c.issue == pytest.approx(1000.0 * warps)  # the integer work fills up to the SASS count
        assert c.ffma == ROUNDS * tm * tn * warps
        assert c.shared_load_instructions == ROUNDS * (tm + tn) // 4 * warps
        assert c.barriers == (2 * warps if staged else 0) and phase.warp_groups == (1 if staged else warps)
        if kw.get("global_tiles"):
            a_bytes = tm * 32 * warps * 4  # tm floats per thread, the block's own contiguous lines
            assert c.load_l2_bytes == a_bytes + 2 * tn * 16 and c.staging_instructions == c.load_instructions
            assert c.load_instructions == (tm if kw.get("scalar") else tm // 4) * warps + 1


# L2-resident rows with 4+ blocks per SM that the engine misses, and why (the xfail below checks them)
L2_RESIDENT_MISSES = ("gstaged_outer 4x4_4w_R4",)


def test_engine_predicts_its_l2_resident_microbenchmarks_with_four_or_more_blocks_per_sm(engine_rows):
    """Tiles in shared memory or L2 (not the dgstaged ones, which stream from HBM: see the xfail)."""
    rows = [r for r in engine_rows if r["blocks_per_sm"] >= 4 and "dgstaged" not in r["case"]
            and r["case"] not in L2_RESIDENT_MISSES]
    assert len(rows) >= 5
    for r in rows:
        assert abs(r["error"]) <= 0.12, r


@pytest.mark.xfail(strict=True, reason="gstaged_outer 4x4_4w_R4 +16%: a block re-reading its L2-resident tile "
                                       "each k-step; the GPU's k-step is about 160 cycles longer than the same loop "
                                       "without the loads (staged_outer, per instruction) at 4 and 7 blocks per SM, "
                                       "the engine's about 40 and 0: co-resident blocks hide less of each other's "
                                       "L2 latency on the GPU than in the engine. Within 1% while the engine "
                                       "charged the tile as an HBM miss every step (the defect fixed with "
                                       "GlobalLoad.bypass_l1 and loop-invariant tiles)")
def test_engine_predicts_its_l2_resident_misses_with_four_or_more_blocks_per_sm(engine_rows):
    rows = [r for r in engine_rows if r["case"] in L2_RESIDENT_MISSES]
    assert rows
    for r in rows:
        assert abs(r["error"]) <= 0.12, r


@pytest.mark.xfail(strict=True, reason="python -m validation.studies.engine_check (tile program v2 with the "
                                       "kernels' compiled register counts, 2026-12-03): 10 of 58 beyond 15%. One "
                                       "resident block of the 8x8 loops, the engine slow: gstaged R1 -21%, dgstaged R1 "
                                       "-16%, d/pd/xdgstaged 8w R2 -16..-19% (143 or 130 registers hold one "
                                       "8-warp block per SM: two waves), ldgstaged R1 -17 / -20%; lds_outer 8x4 with 4 warps -16%; fast: "
                                       "gstaged 4x4 R4 +16%, xdgstaged 4x4 R7 +16%. "
                                       "(With 64 registers assumed, d/pd/xdgstaged 8x8 at 4 blocks of 4 warps or 2 "
                                       "of 8 were 51-65% fast: the GPU held 3 or 1.)")
def test_engine_predicts_every_microbenchmark_within_15_percent(engine_rows):
    for r in engine_rows:
        assert abs(r["error"]) <= 0.15, r


def test_report_in_several_processes_is_the_same_and_reports_progress(tmp_path):
    import csv as _csv

    from validation.harness.report import compute_report

    src = REPO / "validation" / "results" / "h200" / "gemm" / "times.csv"
    with src.open(newline="") as fh:
        reader = _csv.DictReader(fh)
        rows = [r for r in reader if r["status"] == "ok" and r["m"] == "1024"][:6]
        fields = reader.fieldnames
    with (tmp_path / "times.csv").open("w", newline="") as fh:
        w = _csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    seen = []
    one = compute_report("gemm", tmp_path, "h200", on_progress=lambda done, total: seen.append((done, total)))
    two = compute_report("gemm", tmp_path, "h200", workers=2)
    assert seen == [(i, 2 * len(rows)) for i in range(1, 2 * len(rows) + 1)]  # informed and blind
    for mode in ("informed", "blind"):
        assert [r.predicted_s for r in one.predictions[mode]] == [r.predicted_s for r in two.predictions[mode]]
    with pytest.raises(ValueError, match="workers"):
        compute_report("gemm", tmp_path, "h200", workers=0)


def test_dram_latency_under_load_agrees_unloaded_and_rises_near_saturation():
    """calibrate.py --loaded-latency: the chase without background agrees with the profile's HBM
    latency; with background reads it stays within 5% up to about 2 TB/s and grows toward saturation."""
    path = REPO / "validation" / "results" / "h200" / "calibration" / "loaded_latency.json"
    if not path.exists():
        pytest.skip("no recorded loaded-latency microbenchmark")
    import json

    rows = list(json.loads(path.read_text())["loaded_latency"]["rows"].values())
    idle = next(r for r in rows if r["background_blocks"] == 0)
    assert idle["value"] == pytest.approx(hardware.load("h200").hbm_latency_cycles, rel=0.06)
    light = [r for r in rows if 0 < r["background_bytes_per_s"] <= 2.0e12]
    heavy = [r for r in rows if r["background_bytes_per_s"] >= 4.0e12]
    assert light and heavy
    assert all(r["value"] <= 1.05 * idle["value"] for r in light)
    assert all(r["value"] >= 1.5 * idle["value"] for r in heavy)


def test_standalone_benchmark_runs_write_metadata_first(tmp_path, monkeypatch):
    import argparse
    import json

    import validation.harness.metadata

    monkeypatch.setattr(calibrate, "_Bench", lambda runs: ("bench", runs))
    monkeypatch.setattr(validation.harness.metadata, "collect_metadata", lambda: {"device_name": "test"})
    ns = argparse.Namespace(out=str(tmp_path / "o"), runs=7)
    res = calibrate._standalone(ns, "x.json", lambda b: {"rows": list(b)})
    assert res == {"meta": {"device_name": "test"}, "rows": ["bench", 7]}
    assert json.loads((tmp_path / "o" / "x.json").read_text()) == res
    assert list(res) == ["meta", "rows"]


@pytest.mark.parametrize("capacity", ["0", "-1"])
def test_schedule_replay_rejects_a_capacity_that_is_not_positive_before_any_work(capacity, capsys):
    from validation.studies.schedule_replay import main

    with pytest.raises(SystemExit) as e:
        main(["--capacity-mb", capacity])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--capacity-mb" in err and "must be > 0" in err
