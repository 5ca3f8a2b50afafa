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
                   ("LD_UNROLL", "LD_UNROLL"), ("LD_MATRIX_STRIDE", "LD_MATRIX_STRIDE"),
                   ("LD_SMEM_BYTES", "LD_SMEM_BYTES"), ("CPA_UNROLL", "CPA_UNROLL"),
                   ("TMA_TILES_X_SHIFT", "TMA_TILES_X_SHIFT"), ("MBAR_STEPS", "MBAR_STEPS"),
                   ("CLK_CHAINS", "CLK_CHAINS"), ("CLK_STEPS", "CLK_STEPS"), ("GT_SAMPLES", "GT_SAMPLES")):
        assert getattr(tp, py) == _define(cu), py


def test_every_kernel_the_probe_launches_is_in_the_source():
    names = {k.tp_kernel for k in (*tp.MMA_SYNC, *tp.WGMMA)} | {k.lat_kernel for k in (*tp.MMA_SYNC, *tp.WGMMA)}
    names |= {k for k, _, _ in tp.LDMATRIX} | {f"cpasync_g{g}" for g in tp.CPA_GROUPS}
    names |= {"tma_tp", "mbar_rt", "tp_spin", "clk_ffma", "clk_spin", "clk_gtick"}
    for n in names:
        assert re.search(rf"(\b{n}\(|_KERNEL\({n},|WG_DEF\({n},)", CU), n
    assert 1 << tp.TMA_TILES_X_SHIFT == tp.TMA_COLS // tp.TMA_BOX_COLS
    # the ldmatrix address shifts stay inside a matrix's slot: rows up to 7 x 128 + 16 bytes, shifts up to
    # (mask x LD_UNROLL + LD_UNROLL - 1) x 16
    assert 7 * 128 + 16 + ((tp.LD_SHIFT_MASK + 1) * tp.LD_UNROLL - 1) * 16 <= tp.LD_MATRIX_STRIDE
    assert 4 * tp.LD_MATRIX_STRIDE == tp.LD_SMEM_BYTES


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
    """One nvcc call; where cuobjdump is on PATH too, every SASS-checked loop passes its check (the
    ldmatrix loops keep all LD_UNROLL loads, the fp16-accumulating latency chain keeps its HMMA)."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    cubin, log = tp.compile_cubin(tmp_path)
    assert cubin.stat().st_size > 0
    assert tp.ptxas_warnings(log) == [], log
    assert "warning" not in log.lower(), log
    regs = [int(x) for x in re.findall(r"Used (\d+) registers", log)]
    assert regs and max(regs) <= 168  # 3 warpgroups (384 threads) of the N=256 wgmma fit 64 K registers
    if shutil.which("cuobjdump") is None:
        return
    from validation.calibration.pipes_probe import disassemble

    kernels = sorted({k.tp_kernel for k in (*tp.MMA_SYNC, *tp.WGMMA)} | {k.lat_kernel for k in tp.MMA_SYNC}
                     | {k for k, _, _ in tp.LDMATRIX} | {f"cpasync_g{g}" for g in tp.CPA_GROUPS}
                     | {"tma_tp", "clk_ffma"})
    checks = tp.sass_checks(disassemble(cubin), kernels)
    assert set(checks) == set(kernels)
    bad = {k: c["problem"] for k, c in checks.items() if not c["ok"]}
    assert not bad, bad


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
    for g in tp.RATE_GROUPS:
        assert res[g], g
        for r in res[g].values():
            assert r["value"] > 0 and r["n"] == tp.QUICK_REPS
            assert r.get("sass_ok") is not False, (g, r["kernel"])
    assert res["clock"]["ffma_all_sms"]["value"] > 1e8 and res["clock"]["globaltimer_resolution"]["value"] > 0


# ----- the new groups' pure parts (synthetic data, never measurements) --------------------------------------
def test_ldmatrix_rows_carry_cycles_per_instruction_and_bytes():
    runs = [{"rate_inside": 0.25}, {"rate_inside": 0.25}, {"rate_inside": 0.2}]
    r = {**tp.summarize([x["rate_inside"] for x in runs]), "runs": runs}
    row = tp.ldmatrix_row(r, mats=4, trans=False, ways=1, warps=32)
    assert row["cycles_per_instr_per_sm"]["value"] == pytest.approx(4.0)  # median of 4, 4, 5 cycles
    assert row["bytes_per_clk_per_sm"]["value"] == pytest.approx(128.0)  # 0.25 x 4 matrices x 128 bytes
    assert row["ideal_wavefronts"] == 4


def test_tma_walks_and_rings():
    assert tp.tma_walk("l2_same", 2048, 132) == (15, 2048)
    assert tp.tma_walk("l2_disjoint", 2048, 132) == (15, 15)
    assert tp.tma_walk("l2_disjoint", 100, 132) == (1, 1)
    with pytest.raises(ValueError, match="source"):
        tp.tma_walk("hbm", 2048, 132)
    assert tp.tma_ring_bytes(7, 256 * 128) <= tp.MAX_BLOCK_SMEM_BYTES < tp.tma_ring_bytes(8, 256 * 128)


def test_cp_async_configurations_cover_warps_and_groups():
    full = tp.cp_async_configs(False)
    assert (0, 32, 4) in full and (0, 8, 8) in full and (1, 32, 4) in full
    assert all(g in tp.CPA_GROUPS and w in tp.CPA_WARPS for _, w, g in full)


def _smi_line(t: str, mhz: int, watts: str, reasons: str) -> str:
    return f"2030/01/02 03:04:{t}, {mhz}, 1980, {watts}, {reasons}"


def test_nvidia_smi_samples_parse_and_summarize():
    text = "\n".join([
        "some warning line",
        _smi_line("05.000", 1980, "90.5", "0x0000000000000001"),
        _smi_line("05.100", 1755, "650.0", "0x0000000000000004"),
        _smi_line("05.150", 1770, "640.0", "0x0000000000000004"),
        _smi_line("05.200", 1785, "[N/A]", "[N/A]"),
        _smi_line("06.000", 1980, "100.0", "0x0000000000000001"),
    ])
    samples = tp.parse_smi_csv(text, tp.SMI_FIELDS)
    assert len(samples) == 5 and samples[0]["sm_clock_hz"] == 1.98e9 and samples[3]["power_w"] is None
    t0, t1 = samples[1]["t_s"] - 0.01, samples[3]["t_s"] + 0.01
    d = tp.smi_summary(samples, t0, t1)
    assert d["n"] == 3 and d["n_all"] == 5
    assert d["sm_clock_hz"]["value"] == pytest.approx(1.77e9)
    assert d["power_w"]["value"] == pytest.approx(645.0)
    assert d["reasons_hex"] == ["0x4"] and d["reasons"] == ["sw_power_cap"]
    assert tp.smi_summary(samples, 0.0, 1.0) == {"n": 0, "n_all": 5}


def test_clock_rows_use_per_block_cycles_over_globaltimer():
    raw = [396_000_000, 200_000_000, 0, 0, 360_000_000, 200_000_000, 1, 0]  # 1.98 and 1.80 GHz
    rec = tp.parse_records(raw, 2)
    row = tp.clock_row("ffma_all_sms", "clk_ffma", 2, 1024, 10, 0.2005, rec, 32.0, [], 0.0, 1.0, "synthetic")
    assert row["min"] == pytest.approx(1.8e9) and row["max"] == pytest.approx(1.98e9)
    assert row["globaltimer_rel_error_bound"] == pytest.approx(64 / 2e8)
    assert row["nvidia_smi"]["during"] == {"n": 0, "n_all": 0}
    assert "no samples" in tp.format_table({"clock": {"ffma_all_sms": row}})


def test_only_parses_and_merges_over_a_recorded_file():
    assert tp.parse_only(None) is None and tp.parse_only("tma, clock") == ("tma", "clock")
    with pytest.raises(ValueError, match="unknown group"):
        tp.parse_only("tma,nope")
    old = {**_synthetic_results(), "ldmatrix": {"old": 1}, "errors": {"tma": "old failure"},
           "meta": {"date_utc": "1999-01-01", "git_revision": "aaa"}, "compile": {}}
    new = {"meta": {"date_utc": "2000-01-01", "git_revision": "bbb", "groups_run": ["tma", "ldmatrix"]},
           "compile": {"x": 1}, "errors": {}, "tma": {"new": 2}, "ldmatrix": {"new": 3}}
    m = tp.merge_results(old, new)
    assert m["ldmatrix"] == {"new": 3} and m["tma"] == {"new": 2} and m["mma_sync"] == old["mma_sync"]
    assert m["errors"] == {} and m["group_runs"]["tma"]["git_revision"] == "bbb"
    assert m["group_runs"]["mma_sync"]["git_revision"] == "aaa"
    assert tp.merge_results(None, new)["group_runs"] == {"tma": m["group_runs"]["tma"],
                                                        "ldmatrix": m["group_runs"]["tma"]}


def _kernel_params(name: str) -> int:
    """Parameters of a kernel of tensor_probe.cu (a __global__ definition or a *_KERNEL macro)."""
    m = re.search(rf"\b{name}\(([^)]*)\)\s*\{{", CU)
    if m is None:  # macro-made: the macro's own signature
        macro = re.search(rf"(\w+_KERNEL)\({name},", CU).group(1)
        m = re.search(rf"#define {macro}\([^)]*\)[^\n]*\n?.*?NAME\(([^)]*)\)", CU, re.S)
    return len([p for p in m.group(1).replace("\\", " ").split(",") if p.strip()])


class _FakeArray:
    """Enough of a CuPy array for run_tma / run_cp_async (numpy underneath; never a GPU)."""

    def __init__(self, n: int, dtype):
        import numpy

        self.a = numpy.zeros(min(n, 1 << 16), dtype=dtype)  # the size is what matters, not the data
        self.size = n
        self.data = type("D", (), {"ptr": 1 << 20})()

    def view(self, dtype):
        return self

    def sum(self):
        return 0


class _FakeDevice:
    """Records every measure() call: kernel, grid, threads, smem, the argument tuple and the work."""

    def __init__(self):
        import numpy

        cp = type("cp", (), {})()
        cp.int32, cp.float16, cp.uint32 = numpy.int32, numpy.float16, numpy.uint32
        cp.zeros = lambda n, dtype: _FakeArray(n, dtype)
        cp.asarray = numpy.asarray
        cp.get_default_memory_pool = lambda: type("P", (), {"free_all_blocks": lambda self: None})()
        self.cp, self.sm_count, self.calls = cp, 132, []

    def measure(self, kernel, grid, threads, smem, args, work, iters0=8, max_iters=tp.MAX_ITERS, fixed_iters=None):
        it = min(fixed_iters or 1000, max_iters)
        a = args(it, 0)
        self.calls.append((kernel, grid, threads, smem, a, work(it)))
        runs = [{"rate_inside": 64.0, "event_s": 1e-3}] * 3
        return {"kernel": kernel, "iters": it, "runs": runs, "clock_hz": 1.98e9, **tp.summarize([64.0] * 3)}


def test_the_copy_groups_launch_every_kernel_with_its_signature(monkeypatch):
    monkeypatch.setattr(tp, "encode_tensor_map_2d", lambda *a, **k: bytes(tp.TENSOR_MAP_BYTES))
    dev = _FakeDevice()
    tma = tp.run_tma(dev, tp.HBM_TENSOR_BYTES, tp.TMA_BOX_ROWS, tp.TMA_STAGES)
    cpa = tp.run_cp_async(dev, tp.cp_async_configs(False))
    ld = tp.run_ldmatrix(dev, (1,), (4,))
    for kernel, _grid, _threads, smem, a, _ in dev.calls:
        assert 3 + len(a) == _kernel_params(kernel), kernel
        assert tp.ONE_BLOCK_SMEM_BYTES <= smem <= tp.MAX_BLOCK_SMEM_BYTES or kernel == "mbar_rt", (kernel, smem)
    # TMA: 3 boxes x (3 L2 walks + HBM) x stages that fit, on 132 SMs and 1, and the latency rows
    assert "tma.box256x64.hbm.sms132.s7" in tma and "tma.box256x64.hbm.sms132.s8" not in tma
    assert "tma.box64x64.l2_disjoint.sms132.s8" in tma and "tma.box64x64.l2.sms1.s1" in tma
    assert "tma.box8x64.l2.sms1.s8" in tma and "tma.box8x64.l2_same.sms132.s8" in tma  # issue-bound reference
    assert tma["tma.box64x64.l2.lat"]["value"] == pytest.approx(8192 / 64.0)  # cycles per box at stages 1
    assert tma["tma.box64x64.hbm.sms132.s4"]["bytes_in_flight_per_sm"] == 4 * 8192
    # HBM launches: block_stride == period == iters; their base tile moves from launch to launch
    bases = [a[5] for k, g, _t, _s, a, _w in dev.calls if k == "tma_tp" and g == 132 and a[3] == a[4] == 1000]
    assert len(set(int(b) for b in bases)) > 1  # the HBM cursor moves: fresh tiles every launch
    assert "cp_async16.sms132.w32.g8" not in cpa and "cp_async16.sms132.w16.g8" in cpa
    assert cpa["cp_async16.sms132.w32.g4"]["bytes_in_flight_per_sm"] == 4 * 1024 * 2 * 16
    assert ld["ld_x1.ways1.w4"]["cycles_per_instr_per_sm"]["value"] == pytest.approx(1 / 64.0)


class _HostArray:
    """A numpy array with CuPy's .get() (the fake clock records)."""

    def __init__(self, n: int):
        import numpy

        self.a = numpy.zeros(n, dtype=numpy.int64)

    def get(self):
        return self.a


def test_the_clock_group_sizes_its_launches_and_builds_rows(monkeypatch):
    monkeypatch.setattr(tp, "SMI_LEAD_S", 0.0)
    monkeypatch.setattr(tp, "SMI_TAIL_S", 0.0)
    monkeypatch.setattr(tp.shutil, "which", lambda name: None)  # no nvidia-smi: rows say so
    import numpy

    dev = _FakeDevice()
    dev.cp.int64 = numpy.int64
    dev.cp.zeros = lambda n, dtype: _HostArray(n)
    dev.cp.cuda = type("cuda", (), {"Device": lambda: type("D", (), {"pci_bus_id": "0000:01:00.0"})()})
    dev.out = None
    launches = []

    def gtick(grid, block, args):
        args[2].a[:] = [32, 64, 100, 4000]

    dev.mod = type("M", (), {"get_function": lambda self, name: gtick})()
    dev.fn = lambda kernel, smem: kernel

    def launch_timed(f, grid, threads, args, smem):  # 1.8 GHz for 1 us per iteration (SYNTHETIC)
        iters = int(args[0])
        rec = args[2].a.reshape(-1, tp.REC)
        rec[:, 0], rec[:, 1], rec[:, 2] = 1800 * iters, 1000 * iters, numpy.arange(grid) % 132
        launches.append((f, grid, threads, iters, int(args[1])))
        return 1e-6 * iters

    dev.launch_timed = launch_timed
    res = tp.run_clock(dev, hold_s=0.2)
    assert res["globaltimer_resolution"]["value"] == 32 and "nvidia-smi" in res["globaltimer_resolution"][
        "nvidia_smi_problem"]
    timed = {r["kernel"]: r for r in res.values() if "kernel" in r}
    assert set(timed) == {"clk_spin", "clk_ffma", "mma_tp_f16_f32", "wg_f16_n128"}
    for name, r in res.items():
        if name == "globaltimer_resolution":
            continue
        assert r["value"] == pytest.approx(1.8e9), name
        if name != "spin_like_clock_probe":
            assert r["event_s"] >= 0.2 * 0.9, name  # sized to hold_s
    assert res["spin_like_clock_probe"]["iters"] * 1024 == pytest.approx(tp.CLOCK_PROBE_SPIN_CYCLES, rel=1e-3)
    assert res["wgmma_all_sms_random"]["grid"] == 132 and res["ffma_one_warp_one_sm"]["threads"] == 32
    assert {(f, p) for f, _g, _t, _i, p in launches if f == "wg_f16_n128"} == {("wg_f16_n128", 0), ("wg_f16_n128", 2)}


def test_tma_pitch_rows_are_checked_before_the_driver_is_called():
    """A pitch below a row, or off a 16-byte multiple, is one ValueError naming it (no libcuda needed)."""
    with pytest.raises(ValueError, match="pitch_bytes = 8000"):
        tp.encode_tensor_map_2d(0, 4096, 2048, 64, 64, pitch_bytes=8000)
    with pytest.raises(ValueError, match="multiples of 16 bytes"):
        tp.encode_tensor_map_2d(0, 4096, 2048, 64, 64, pitch_bytes=8200)
    assert "tma_pitch" in tp.GROUPS and 0 in tp.TMA_PITCH_OFFSETS_BYTES
    assert all(off % 16 == 0 for off in tp.TMA_PITCH_OFFSETS_BYTES)


def test_share_walks_give_every_slice_g_readers():
    """l2_share<G>: block b walks slices b .. b + G - 1 (stride one slice, period G slices)."""
    assert tp.tma_walk("l2_share1", 512, 132) == tp.tma_walk("l2_disjoint", 512, 132) == (3, 3)
    assert tp.tma_walk("l2_share4", 512, 132) == (3, 12)
    assert tp.tma_walk("l2_share132", 512, 132) == (3, 396)
    assert tp.tma_walk("l2_share1000", 512, 132) == (3, 512)  # never past the tensor
    for bad in ("l2_share", "l2_share0", "l2_sharex"):
        with pytest.raises(ValueError, match="l2_share<G>"):
            tp.tma_walk(bad, 512, 132)
    assert tp.tma_walk("l2_lock", 512, 132) == (0, 512)  # every block from tile 0, in step
    assert tp.TMA_SHARE_GROUPS[0] == 1 and "tma_share" in tp.GROUPS


def test_lag_walks_put_g_readers_on_each_slice_d_boxes_apart():
    """l2_lag<G>x<d>: blocks in groups of G each cycle through their group's slice of total / groups
    boxes, member b % G starting d boxes after the member before it (d = 0: in step)."""
    assert tp.tma_walk("l2_lag2x1", 512, 132) == (7, 7)  # 66 groups of two: 7-box slices
    assert tp.tma_walk("l2_lag33x0", 512, 132) == (128, 128)  # four groups
    assert tp.tma_walk("l2_lag132x3", 512, 132) == (512, 512)  # one group: the whole tensor
    assert tp.tma_lock_group("l2_lag33x2") == (33, 2) and tp.tma_lock_group("l2_same") == (1, 0)
    for bad in ("l2_lag", "l2_lag0x1", "l2_lag2", "l2_lag2x-1", "l2_lagx1"):
        with pytest.raises(ValueError, match="l2_lag<G>x<d>"):
            tp.tma_lock_group(bad)
    # every lag row keeps the nearest other reader of a box no further than the lag (the walk is a cycle)
    for group, lags in tp.TMA_LAG_GROUPS:
        slice_boxes, _ = tp.tma_walk(f"l2_lag{group}x0", 512, 132)
        assert all(d <= slice_boxes - (group - 1) * d for d in lags if group > 1), group


def test_the_lag_group_launches_groups_and_lags(monkeypatch):
    monkeypatch.setattr(tp, "encode_tensor_map_2d", lambda *a, **k: bytes(tp.TENSOR_MAP_BYTES))
    dev = _FakeDevice()
    rows = tp.run_tma_lag(dev, ((2, (0, 3)), (132, (1,))), tp.TMA_SHARE_BOX_ROWS, tp.TMA_SHARE_STAGES)
    assert set(rows) == {f"tma_lag.box256x64.g{g}.lag{d}.sms132.s{s}" for g, d in ((2, 0), (2, 3), (132, 1))
                         for s in tp.TMA_SHARE_STAGES}
    launched = {(int(a[8]), int(a[9]), int(a[3]), int(a[4])) for k, _g, _t, _s, a, _w in dev.calls}
    assert launched == {(2, 0, 7, 7), (2, 3, 7, 7), (132, 1, 512, 512)}  # (group, lag, stride, period)
    for kernel, _grid, _threads, _smem, a, _ in dev.calls:
        assert 3 + len(a) == _kernel_params(kernel), kernel
    r = rows["tma_lag.box256x64.g2.lag3.sms132.s5"]
    assert (r["lock_group"], r["lag_boxes"], r["slice_boxes"]) == (2, 3, 7)
