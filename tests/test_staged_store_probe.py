"""The register-staged k-step probe (validation/calibration/staged_store_probe): its defines match the module,
every kernel a case names is instantiated, the source (tc_gemm.cu + the probe) compiles for sm_90 without
spills and with at most 128 registers (two blocks of 256 threads an SM), records / summary / SASS loop code work
on synthetic data (never a result), and without a GPU the CLI says so and exits 2."""

from __future__ import annotations

import re
import shutil

import pytest

from validation.calibration import staged_store_probe as ss

CU = ss.KERNEL_SRC.read_text()


def test_defines_match_the_module():
    d = ss.defines()
    assert (d["SSP_REC"], d["SSP_BM"], d["SSP_BN"], d["SSP_BK"], d["SSP_WM"], d["SSP_WN"], d["SSP_THREADS"]) == (
        ss.REC, ss.BM, ss.BN, ss.BK, ss.WM, ss.WN, ss.THREADS)
    assert [d[f"SSP_{m.upper()}"] for m in ss.MODES] == list(range(len(ss.MODES)))
    assert ss.LOOP_K // ss.BK & (ss.LOOP_K // ss.BK - 1) == 0  # the loop's k-tile mask


def test_every_case_kernel_is_instantiated():
    built = set(re.findall(r"^SSP_(?:KERNEL|SUITE)\((\w+),", CU, re.M))
    names = {c.kernel for c in ss.cases(("loop", "wrap"))}
    assert names == built
    keys = [c.key for c in ss.cases()]
    assert len(keys) == len(set(keys))
    assert len(ss.cases(("loop",))) == len(ss.MODES) * len(ss.LAYOUTS) * len(ss.BS) * len(ss.BLOCKS_PER_SM)


def test_smem_forces_the_blocks_per_sm():
    for lay in ss.LAYOUTS:
        assert ss.smem_bytes(lay, 1) * 2 > 228 * 1024 and ss.smem_bytes(lay, 1) <= 227 * 1024
        assert ss.smem_bytes(lay, 2) * 2 <= 228 * 1024
    assert ss.smem_bytes("pad", 2) == 128 * 80 + 128 * 80  # B column-major: 128 rows of 32 halves + 16 B
    assert ss.smem_bytes("swz", 2) == 128 * 64 + 32 * 256


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    try:
        return ss.compile_listing(ss.probe_source(), tmp_path_factory.mktemp("ssp"))
    except RuntimeError as e:
        if "disassembler" in str(e) or "cuobjdump nor nvdisasm" in str(e):
            pytest.skip(str(e))
        raise


@pytest.mark.slow  # nvcc of tc_gemm.cu + the probe (~10 s): python -m pytest -m slow
def test_compiles_for_sm90_without_spills(compiled):
    from validation.harness.compile import parse_ptxas

    log, sass = compiled
    assert not re.search(r"[1-9]\d* bytes spill", log)
    assert "warning" not in log.lower()
    k = parse_ptxas(log)
    for c in ss.cases(("loop", "wrap")):
        assert c.kernel in k, c.kernel
        # two blocks of 256 threads an SM need <= 128 registers; nvcc 13.0 gives ssp_mma_swz_* 130 (its b2 rows then
        # run one block an SM: the records' max_coresident says so)
        limit = 255 if c.kernel.startswith("ssp_mma_swz") else 128
        assert k[c.kernel]["regs_per_thread"] <= limit, (c.kernel, k[c.kernel]["regs_per_thread"])
    for c in ss.cases(("loop",)):
        s = ss.loop_summary(sass, c.kernel)
        want = {"full": (4, 4, 12, 32, 2), "stores": (4, 4, 0, 0, 2), "sts": (0, 4, 0, 0, 2), "mma": (0, 0, 12, 32, 1)}
        got = (s["ldg"], s["sts"], s["ldsm"], s["hmma"], s["bar"])
        # ptxas may unroll the loop (the sts and mma loops: x2 to x8): the counts are a whole multiple of a k-step's
        unroll = max(g // w for g, w in zip(got, want[c.mode], strict=True) if w)
        assert unroll >= 1 and got == tuple(unroll * w for w in want[c.mode]), (c.kernel, got)
        if c.mode in ("full", "stores"):
            assert unroll == 1, (c.kernel, got)


@pytest.mark.slow
def test_suite_kernels_loops(compiled):
    """The suite's own stages-1 kernels in the same translation unit: the k-step's 4 LDG.128, 4 STS.128, 12
    LDSM.x4, 32 HMMA and 2 barriers for every layout (the layouts differ in schedule, not in instructions)."""
    _, sass = compiled
    for key, s in ss.compare_suite_sass(sass).items():
        assert (s["ldg"], s["sts"], s["ldsm"], s["hmma"], s["bar"]) == (4, 4, 12, 32, 2), key
        assert s["copy_rounds"] in (1, 2), key


SASS = """
        Function : k
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0020*/                   LDG.E.128.CONSTANT R8, desc[UR10][R74.64] ;
        /*0030*/                   LDG.E.128.CONSTANT R12, desc[UR10][R76.64] ;
        /*0040*/                   STS.128 [R81], R8 ;
        /*0050*/                   LDG.E.128.CONSTANT R8, desc[UR10][R78.64] ;
        /*0060*/                   STS.128 [R80], R12 ;
        /*0070*/                   STS.128 [R2], R8 ;
        /*0080*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0090*/                   LDSM.16.M88.4 R84, [R77] ;
        /*00a0*/                   HMMA.16816.F32 R68, R84, R8, R68 ;
        /*00b0*/                   HMMA.16816.F32 R64, R84, R10, R64 ;
        /*00c0*/               @P0 BRA 0x10 ;
        /*00d0*/                   EXIT ;
"""


def test_loop_summary_on_synthetic_sass():
    s = ss.loop_summary(SASS, "k")
    assert s["ok"] and (s["ldg"], s["sts"], s["ldsm"], s["hmma"], s["bar"]) == (3, 3, 1, 2, 2)
    assert s["order"] == "B1 G2 S1 G1 S2 B1 L1 H2"
    assert s["copy_rounds"] == 2
    one = SASS.replace("STS.128 [R81], R8 ;\n        /*0050*/                   LDG", "LDG").replace(
        "desc[UR10][R78.64] ;", "desc[UR10][R78.64] ;\n        /*0058*/                   STS.128 [R81], R8 ;")
    assert ss.loop_summary(one, "k")["copy_rounds"] == 1


def test_records_and_summary_on_synthetic_data():
    # two SMs; on SM 0 two blocks overlap, on SM 1 one; 8 warps a block, REC longs a warp
    def block(sm, start, end, cyc):
        return [[cyc, sm, start, end]] * (ss.THREADS // 32)
    rec = block(0, 0, 100, 1000) + block(0, 50, 150, 1200) + block(1, 0, 100, 1100)
    assert ss.max_coresident(rec) == 2
    p = ss.per_kstep(rec, 10)
    assert p["value"] == pytest.approx(110) and p["p10"] <= p["value"] <= p["p90"] and p["n"] == 24
    res = {"cases": {}, "errors": {"x": "boom"}}
    for c in ss.cases(("loop",)):
        v = {"dense": 3000.0, "pad": 2800.0, "swz": 2000.0}[c.layout]
        res["cases"][c.key] = {"cycles_per_kstep": {"value": v}}
    for c in ss.cases(("wrap",)):
        v = {"dense": 3000.0, "pad": 2800.0, "swz": 2000.0}[c.layout] * (c.k // ss.BK) + 5000
        res["cases"][c.key] = {"k": c.k, "cycles_per_warp": {"value": v}}
    for c in ss.cases(("ref",)):
        res["cases"][c.key] = {"event_median_s": {"dense": 1.4e-3, "pad": 0.85e-3, "swz": 0.65e-3}[c.layout]}
    s = ss.summarize(res)
    assert s["loop"]["full_row_b2"]["pad_minus_swz"] == pytest.approx(800)
    assert s["wrap"]["col_b1"]["pad"] == pytest.approx(2800) and s["wrap"]["col_b1"]["pad_over_swz"] == pytest.approx(1.4)
    assert s["ref"]["row"]["pad_over_swz"] == pytest.approx(0.85 / 0.65)
    t = ss.format_table(res)
    assert "full_row_b2" in t and "FAILED" in t and "ref_row" in t


def test_ncu_command_names_the_metrics():
    cmd = ss.ncu_command("out")
    assert "--clock-control none" in cmd and "--profile" in cmd and "regex:ssp_" in cmd
    for m in ss.NCU_METRICS:
        assert m in cmd
    assert any("short_scoreboard" in m for m in ss.NCU_METRICS) and any("op_st" in m for m in ss.NCU_METRICS)


def test_cli_without_gpu(monkeypatch, capsys):
    monkeypatch.setattr(ss.pc, "gpu_missing", lambda: "no CUDA device found")
    assert ss.main([]) == 2
    assert "staged_store_probe: needs CuPy and an NVIDIA GPU" in capsys.readouterr().err
