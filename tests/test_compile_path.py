"""Compiler-informed prediction without a GPU (issue #10): ``validation.harness.compile`` builds a
configuration's kernels with nvcc and reads ptxas's registers, spills and static shared memory;
``tilesim simulate <family> --compile`` feeds the register count to the simulator.

CPU stories (the ptxas parser, the architecture of each GPU, a missing nvcc) run everywhere; the
compile stories need ``nvcc`` on the PATH (the CI machine has nvcc 13 and no GPU) and skip without it.
"""

from __future__ import annotations

import re
import shutil

import pytest
from click.testing import CliRunner

from tilesim import GemmConfig, hardware
from tilesim.cli import cli
from tilesim.kernels.layernorm.config import LayerNormConfig
from tilesim.kernels.reduction import ReductionConfig
from tilesim.kernels.softmax.config import SoftmaxConfig
from validation.harness import compile as nvcc

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")

#: two configurations per family, quick to compile (about 0.1-0.5 s each)
CONFIGS = {
    "gemm": [GemmConfig(m=1024, n=1024, k=1024),
             GemmConfig(m=1024, n=1024, k=1024, variant="smem", bm=32, bn=32, bk=32)],
    "reduction": [ReductionConfig(n=1 << 22),
                  ReductionConfig(n=1 << 22, variant="grid_stride", vector=4, unroll=4, finish="atomic")],
    "softmax": [SoftmaxConfig(rows=4096, cols=1024),
                SoftmaxConfig(rows=4096, cols=1024, variant="block_tree", threads=256)],
    "layernorm": [LayerNormConfig(rows=8192, cols=1024),
                  LayerNormConfig(rows=8192, cols=1024, variant="warp_row", cache="none", unroll=4)],
}

PTXAS_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z12reduce_finalILi7ELi256EEvPKfiPf' for 'sm_90'
ptxas info    : Function properties for _Z12reduce_finalILi7ELi256EEvPKfiPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 30 registers, used 1 barriers, 32 bytes smem
ptxas info    : Compile time = 27.714 ms
ptxas info    : Compiling entry function 'big' for 'sm_90'
ptxas info    : Function properties for big
    24 bytes stack frame, 12 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers
"""


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Every test compiles into its own cache (never the user's, never the repository)."""
    monkeypatch.setenv("TILESIM_CACHE_DIR", str(tmp_path / "cache"))


def _cli_ok(res):
    assert res.exit_code == 0, (res.output, res.exception)
    return res


def _one_line_error(res, *needles):
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "Traceback" not in res.output
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def _launch_regs(stdout: str) -> list[int]:
    return [int(x) for x in re.findall(r"(\d+) regs/thread", stdout)]


# ----- everywhere: the parser, the architecture, a missing nvcc ------------------------------------
def test_parse_ptxas_reads_each_entry_function():
    k = nvcc.parse_ptxas(PTXAS_LOG)
    assert k["_Z12reduce_finalILi7ELi256EEvPKfiPf"] == {
        "regs_per_thread": 30, "local_bytes": 0, "spill_store_bytes": 0, "spill_load_bytes": 0,
        "static_smem_bytes": 32}
    assert k["big"] == {"regs_per_thread": 255, "local_bytes": 24, "spill_store_bytes": 12,
                        "spill_load_bytes": 8, "static_smem_bytes": 0}


def test_architecture_from_the_hardware_spec():
    assert nvcc.arch_for(hardware.load("h200")) == "sm_90"
    assert nvcc.arch_for(hardware.load("h100_sxm")) == "sm_90"
    assert nvcc.arch_for(hardware.load("a100_sxm4")) == "sm_80"
    with pytest.raises(nvcc.CompileError, match="not an NVIDIA GPU") as e:
        nvcc.arch_for(hardware.load("m1_max"))
    assert "\n" not in str(e.value)


def test_cache_dir_is_the_users_not_the_repository(monkeypatch, tmp_path):
    monkeypatch.delenv("TILESIM_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert nvcc.cache_dir() == tmp_path / "xdg" / "tilesim" / "compile"


def test_missing_nvcc_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no nvcc
    with pytest.raises(nvcc.CompileError, match="nvcc is not on the PATH") as e:
        nvcc.compiled_resources("reduction", CONFIGS["reduction"][0])
    assert "\n" not in str(e.value)
    res = CliRunner().invoke(cli, ["simulate", "reduction", "--n", "4194304", "--compile"])
    _one_line_error(res, "nvcc is not on the PATH")


def test_apple_gpu_and_family_without_cuda_source_are_one_line():
    runner = CliRunner()
    _one_line_error(runner.invoke(cli, ["simulate", "reduction", "--n", "4194304", "--hardware", "m1_max",
                                        "--compile"]), "not an NVIDIA GPU")
    with pytest.raises(ValueError, match="no CUDA kernels to compile"):
        nvcc.compiled_resources("steel_gemm", object())


def test_compile_and_an_explicit_register_count_exclude_each_other():
    res = CliRunner().invoke(cli, ["simulate", "reduction", "--n", "4194304", "--regs-per-thread", "40",
                                   "--compile"])
    _one_line_error(res, "not both")


# ----- with nvcc (this machine, CI) ---------------------------------------------------------------
@needs_nvcc
@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_each_family_compiles_for_sm_90(family):
    from validation.harness.runners import get_runner

    for cfg in CONFIGS[family]:
        r = nvcc.compiled_resources(family, cfg)
        assert 0 < r["regs_per_thread"] <= 255, (family, r)
        assert r["arch"] == "sm_90" and re.match(r"\d+\.\d+, V", r["nvcc_version"])
        # one entry function per kernel the configuration launches, and the maxima over them
        assert len(r["kernels"]) == len(get_runner(family).kernel_source(cfg).name_expressions)
        assert r["regs_per_thread"] == max(k["regs_per_thread"] for k in r["kernels"].values())
        assert r["spill_store_bytes"] == 0, (family, r)
        assert r["cached"] is False


@needs_nvcc
def test_results_are_cached_by_source_and_architecture():
    cfg = CONFIGS["reduction"][0]
    first = nvcc.compiled_resources("reduction", cfg)
    files = list(nvcc.cache_dir().glob("*.json"))
    assert len(files) == 1
    again = nvcc.compiled_resources("reduction", cfg)
    assert again["cached"] is True and again["regs_per_thread"] == first["regs_per_thread"]
    ampere = nvcc.compiled_resources("reduction", cfg, "sm_80")
    assert ampere["cached"] is False and ampere["arch"] == "sm_80"
    assert len(list(nvcc.cache_dir().glob("*.json"))) == 2


@needs_nvcc
def test_static_shared_memory_and_spills_are_read():
    # the block reductions keep one float per warp in static shared memory
    r = nvcc.compiled_resources("reduction", CONFIGS["reduction"][0])
    assert r["static_smem_bytes"] > 0
    # 48 live floats held in 24 registers spill to the stack (local memory)
    code = ('extern "C" __global__ void hog(float* x) {\n  float a[48];\n#pragma unroll\n'
            "  for (int i = 0; i < 48; ++i) a[i] = x[i * blockDim.x + threadIdx.x];\n  float s = 0;\n#pragma unroll\n"
            "  for (int i = 0; i < 48; ++i) s += a[47 - i] * a[i] + s * a[(i + 5) % 48];\n  x[threadIdx.x] = s;\n}\n")
    r = nvcc.compile_source(code, ("-maxrregcount=24",), "sm_90", label="hog")
    assert r["regs_per_thread"] == 24 and list(r["kernels"]) == ["hog"]
    assert r["spill_store_bytes"] > 0 and r["spill_load_bytes"] > 0 and r["local_bytes"] >= r["spill_store_bytes"]


@needs_nvcc
def test_nvcc_failure_is_one_line():
    with pytest.raises(nvcc.CompileError, match=r"nvcc .* failed on broken \(sm_90\)") as e:
        nvcc.compile_source('extern "C" __global__ void k() { undeclared_thing(); }', (), "sm_90",
                            label="broken")
    assert "\n" not in str(e.value) and "undeclared_thing" in str(e.value)


@needs_nvcc
def test_cli_compile_changes_the_register_count():
    runner = CliRunner()
    args = ["simulate", "gemm", "--m", "1024", "--n", "1024", "--k", "1024"]
    plain = _cli_ok(runner.invoke(cli, args)).stdout
    informed = _cli_ok(runner.invoke(cli, [*args, "--compile"])).stdout
    compiled = nvcc.compiled_resources("gemm", CONFIGS["gemm"][0])["regs_per_thread"]
    estimate = CONFIGS["gemm"][0].estimated_regs
    assert compiled != estimate  # else this test shows nothing
    m = re.search(r"^registers: (\d+) \(nvcc (\d+\.\d+), sm_90; the model's estimate was (\d+)\)$",
                  informed, re.M)
    assert m and int(m.group(1)) == compiled and int(m.group(3)) == estimate, informed
    assert _launch_regs(plain) == [estimate]
    assert _launch_regs(informed) == [compiled]
    # under --json the line goes to stderr and stdout stays JSON
    res = _cli_ok(runner.invoke(cli, [*args, "--compile", "--json"]))
    assert res.stdout.lstrip().startswith("{") and "registers: " in res.stderr


@needs_nvcc
def test_cli_compile_two_kernel_reduction_takes_the_maximum():
    res = _cli_ok(CliRunner().invoke(cli, ["simulate", "reduction", "--n", "4194304", "--compile"]))
    r = nvcc.compiled_resources("reduction", CONFIGS["reduction"][0])
    assert len(r["kernels"]) == 2  # the pass and the final pass
    assert _launch_regs(res.stdout) == [r["regs_per_thread"]] * 2


@needs_nvcc
def test_recorded_agreement_sets_nvcc_beside_the_recorded_nvrtc_counts(tmp_path):
    from validation.harness.suite import RESULTS_ROOT

    lines = (RESULTS_ROOT / "h200" / "reduction" / "times.csv").read_text().splitlines()
    (tmp_path / "times.csv").write_text("\n".join(lines[:3]) + "\n")  # the header and two rows
    rows = nvcc.recorded_agreement("reduction", tmp_path)
    assert 1 <= len(rows) <= 2
    for r in rows:
        assert r["nvcc_regs"] > 0 and r["nvrtc_regs"] > 0
        assert len(r["nvcc_blocks_per_sm"]) == len(r["nvrtc_blocks_per_sm"]) >= 1
