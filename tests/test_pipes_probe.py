"""The pipe microbenchmarks (validation/calibration/pipes_probe): their CUDA source compiles for
sm_90, each probe's loop holds the instruction it means to measure (read from the SASS), and
recorded-looking results map onto hardware-spec fields. GPU runs are marked ``gpu``."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter

import pytest

from validation.calibration import pipes_probe as pp

CU = pp.KERNEL_SRC.read_text()


def _define(name: str) -> int:
    m = re.search(rf"#define {name} (\d+)", CU)
    assert m, f"#define {name} missing from {pp.KERNEL_SRC.name}"
    return int(m.group(1))


def test_the_python_constants_match_the_cuda_defines():
    assert pp.THREADS == _define("PB_THREADS")
    assert pp.OPS_PER_ITER == _define("PB_CHAINS") * _define("PB_ROUNDS")
    assert pp.ATOMICS_PER_ITER == _define("PB_ATOMICS")
    assert pp.LAT_STEPS == _define("LAT_STEPS")
    assert pp.BAR_STEPS == _define("BAR_STEPS")


def test_every_probe_kernel_is_defined_in_the_source_and_has_its_own_field():
    probes = (*pp.THROUGHPUT, *pp.LATENCY, pp.BARRIER)
    for p in probes:
        assert re.search(rf"(\b{p.kernel}\(|PB_\w+\({p.kernel},)", CU), p.kernel
    names = [p.field for p in probes]
    assert len(set(names)) == len(names)
    assert all(n.endswith(("_per_clk_per_sm", "_per_clk", "_cycles")) for n in names)


# ----- the compiled source and its SASS (nvcc and cuobjdump; skipped without them) -------------------
@pytest.fixture(scope="module")
def cubin(tmp_path_factory):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    return pp.compile_cubin(tmp_path_factory.mktemp("pipes"), arch="sm_90")


@pytest.fixture(scope="module")
def sass(cubin):
    if shutil.which("cuobjdump") is None:
        pytest.skip("cuobjdump is not on PATH")
    try:
        return pp.disassemble(cubin)
    except RuntimeError as exc:  # cuobjdump without nvdisasm beside it
        pytest.skip(str(exc))


def test_the_probe_source_compiles_for_sm_90(cubin):
    assert cubin.exists() and cubin.stat().st_size > 0


# what each loop must hold, written out (the probe tables say the same; this is the reader's copy)
INTENDED = {
    "tp_ex2": "MUFU.EX2", "tp_rsq": "MUFU.RSQ", "tp_rcp": "MUFU.RCP", "tp_expf": "MUFU.EX2",
    "tp_expf_ftz": "MUFU.EX2", "tp_shfl": "SHFL.BFLY", "tp_int": "LOP3.LUT", "tp_fadd": "FADD",
    "tp_fmnmx": "FMNMX", "tp_atoms_distinct": "ATOMS.ADD", "tp_atoms_same": "ATOMS.ADD",
    "tp_red_distinct": "REDG.E.ADD.F32", "tp_red_same": "REDG.E.ADD.F32", "lat_ex2": "MUFU.EX2",
    "lat_rsq": "MUFU.RSQ", "lat_shfl": "SHFL.BFLY", "lat_fadd": "FADD", "lat_int": "IADD3",
    "lat_lop3": "LOP3.LUT", "lat_reduce_step": "SHFL.BFLY", "lat_bar": "BAR.SYNC",
}


def test_each_probe_loop_holds_the_instruction_it_measures_unrolled_and_nothing_folded(sass):
    report = pp.sass_report(sass)
    assert set(report) == set(INTENDED)
    for kernel, op in INTENDED.items():
        r = report[kernel]
        assert r["ok"], (kernel, r["problems"], r["body"])
        assert pp.count_prefix(Counter(r["body"]), op) >= 8, (kernel, r["body"])


def test_the_expf_probes_show_what_the_ftz_flag_changes(sass):
    default = Counter(pp.sass_report(sass)["tp_expf"]["body"])
    ftz = Counter(pp.sass_report(sass)["tp_expf_ftz"]["body"])
    # per MUFU.EX2: three FMUL and one FSETP without ftz, one FMUL.FTZ with it
    assert pp.count_prefix(default, "FMUL") == 3 * pp.count_prefix(default, "MUFU.EX2")
    assert pp.count_prefix(default, "FSETP") == pp.count_prefix(default, "MUFU.EX2")
    assert pp.count_prefix(ftz, "FMUL") == pp.count_prefix(ftz, "MUFU.EX2")
    assert pp.count_prefix(ftz, "FSETP") == 0


# ----- the SASS checks themselves, on synthetic bodies (no tools needed) ------------------------------
def _probe(kernel: str) -> pp.Probe:
    return next(p for p in (*pp.THROUGHPUT, *pp.LATENCY, pp.BARRIER) if p.kernel == kernel)


def test_a_loop_body_as_intended_passes_and_gives_its_unroll_factor():
    body = Counter({"MUFU.EX2": 128, "VIADD": 1, "ISETP.NE.AND": 1, "BRA": 1})
    assert pp.check_body(_probe("tp_ex2"), body) == (2.0, [])


@pytest.mark.parametrize("kernel, body, complaint", [
    ("tp_rcp", {"FFMA": 8, "BRA": 1}, "MUFU.RCP: 0"),  # rcp(rcp(x)) folded away
    ("tp_int", {"LOP3.LUT": 32, "IMAD": 32, "BRA": 1}, "IMAD"),  # adds folded into IMADs
    ("tp_ex2", {"MUFU.EX2": 48, "BRA": 1}, "not a multiple of 64"),  # part of the work removed
    ("tp_ex2", {"MUFU.EX2": 64, "FMUL": 64, "BRA": 1}, "FMUL"),  # the negation not folded
    ("tp_expf", {"MUFU.EX2": 64, "FMUL": 64, "FSETP": 64}, "FMUL: 64"),  # not the default-flags code
    ("tp_fadd", {"FADD": 64, "LDS": 8, "BRA": 1}, "9 other instructions"),  # loads crept in
])
def test_a_loop_body_the_compiler_changed_is_flagged(kernel, body, complaint):
    _, problems = pp.check_body(_probe(kernel), Counter(body))
    assert problems and any(complaint in p for p in problems), problems


SYNTHETIC_SASS = """
        Function : k
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   STS [R2], R3 ;
        /*0020*/                   BRA 0x10 ;
        /*0030*/                   MUFU.EX2 R5, -R5 ;
        /*0040*/              @!P0 MUFU.EX2 R6, -R6 ;
        /*0050*/                   VIADD R4, R4, 0xffffffff ;
        /*0060*/               @P1 BRA 0x30 ;
        /*0070*/                   EXIT ;
"""


def test_the_hot_loop_is_the_backward_branch_body_with_the_key_instruction():
    body = pp.hot_loop(SYNTHETIC_SASS, "k", "MUFU.EX2")
    assert body == Counter({"MUFU.EX2": 2, "VIADD": 1, "BRA": 1})
    with pytest.raises(ValueError, match="no loop body with SHFL"):
        pp.hot_loop(SYNTHETIC_SASS, "k", "SHFL")
    with pytest.raises(ValueError, match="kernel = 'nope'"):
        pp.hot_loop(SYNTHETIC_SASS, "nope", "MUFU.EX2")


# ----- results -> hardware-spec fields ------------------------------------------------------------
def _synthetic_entry(value: float, unit: str, sass_ok: bool | None = True) -> dict:
    """SYNTHETIC numbers for the mapping's test only: never measured, never written to results/."""
    return {"benchmark": "synthetic", "unit": unit, "value": value, "p10": value * 0.99,
            "p90": value * 1.01, "min": value * 0.98, "max": value * 1.02, "n": 20, "runs": [value] * 20,
            "sass_ok": sass_ok, "sass_problems": [] if sass_ok is not False else ["folded"]}


def _synthetic_results() -> dict:
    """A SYNTHETIC result dict shaped like pipes.json (values invented for the test)."""
    return {
        "throughput": {"tp_ex2": _synthetic_entry(0.5, "warp instr/clk/SM"),
                       "tp_shfl": _synthetic_entry(1.0, "warp instr/clk/SM"),
                       "tp_rcp": _synthetic_entry(0.7, "warp instr/clk/SM", sass_ok=False),
                       "tp_int": _synthetic_entry(2.0, "warp instr/clk/SM", sass_ok=None),
                       "tp_red_same": _synthetic_entry(0.25, "atomics/clk (GPU)")},
        "latency": {"lat_ex2": _synthetic_entry(18.0, "cycles"),
                    "lat_reduce_step": _synthetic_entry(30.0, "cycles")},
        "barrier": {str(w): _synthetic_entry(20.0 + w, "cycles") for w in (1, 4, 8, 32)},
    }


def test_fields_turns_results_into_named_rates_and_latencies():
    f = pp.fields(_synthetic_results())
    assert f["sfu_warp_instr_per_clk_per_sm"]["value"] == 0.5
    assert f["shuffle_warp_instr_per_clk_per_sm"]["value"] == 1.0
    assert f["global_atomic_same_address_per_clk"]["unit"] == "atomics/clk (GPU)"
    assert f["sfu_latency_cycles"]["value"] == 18.0
    assert f["reduce_step_latency_cycles"]["value"] == 30.0
    assert f["barrier_latency_cycles"]["value"] == 28.0  # the 8-warp block
    assert f["barrier_latency_cycles_by_warps"]["value"] == [[1, 21.0], [4, 24.0], [8, 28.0], [32, 52.0]]
    for e in f.values():  # what validation's profile writer needs for each field
        assert {"value", "benchmark", "n", "p10", "p90", "unit"} <= set(e)
    json.dumps(f)  # JSON-ready


def test_a_probe_whose_sass_check_failed_gives_no_field_and_one_without_sass_says_so():
    f = pp.fields(_synthetic_results())
    assert "sfu_rcp_warp_instr_per_clk_per_sm" not in f
    assert "no SASS" in f["int_warp_instr_per_clk_per_sm"]["benchmark"]


def test_the_table_lists_every_probe_and_flags_a_failed_check():
    text = pp.format_table(_synthetic_results())
    assert "tp_ex2" in text and "lat_bar 8 warps" in text
    assert "FAILED: folded" in text


def test_summarize_needs_values():
    with pytest.raises(ValueError, match="must not be empty"):
        pp.summarize([])
    s = pp.summarize([3.0, 1.0, 2.0])
    assert (s["value"], s["min"], s["max"], s["n"]) == (2.0, 1.0, 3.0, 3)


def test_the_gpu_name_becomes_the_results_directory():
    assert pp.gpu_slug("NVIDIA H200") == "h200"


# ----- the command line ----------------------------------------------------------------------------
def _gpu_usable() -> bool:
    return pp._gpu_missing() is None


def test_without_a_gpu_the_cli_says_so_in_one_line_and_exits_2(capsys, tmp_path):
    if _gpu_usable():
        pytest.skip("a GPU is usable here")
    assert pp.main(["--quick", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "needs CuPy and an NVIDIA GPU" in err
    assert not (tmp_path / pp.RESULT_FILE).exists()


@pytest.mark.gpu
def test_quick_probe_on_the_gpu_writes_checked_results(tmp_path):
    if not _gpu_usable():
        pytest.skip(f"no usable GPU: {pp._gpu_missing()}")
    assert pp.main(["--quick", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / pp.RESULT_FILE).read_text())
    assert res["meta"]["quick"] is True and res["meta"]["probe_wall_s"] < 60
    for group in ("throughput", "latency", "barrier"):
        for name, r in res[group].items():
            assert r["value"] > 0, name
            assert r["sass_ok"] is not False, (name, r["sass_problems"])
            if r.get("expected"):  # above the datasheet's peak would mean miscounted work
                assert r["value"] <= 1.15 * r["expected"], (name, r["value"], r["expected"])
    assert "sfu_warp_instr_per_clk_per_sm" in res["fields"]
    assert "barrier_latency_cycles" in res["fields"]
