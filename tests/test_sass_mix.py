"""The k-loop's instruction mix from the SASS (issue #10): ``validation.harness.sass`` finds the loop
in a disassembly and counts its instructions per class; ``tilesim simulate <family> --compile``
and ``tilesim simulate --cu FILE --kernel NAME --program FILE`` put its integer overhead, the
compiler's registers and static shared memory into the tile program.

CPU stories (the parser on a listing, the program side, a missing disassembler) run everywhere; the
compile stories need ``nvcc`` (and ``nvdisasm`` or ``cuobjdump`` for the SASS) and skip without them.
"""

from __future__ import annotations

import json
import math
import shutil
import textwrap
from dataclasses import replace

import pytest
from click.testing import CliRunner

import tilesim
from tilesim import GemmConfig
from tilesim.cli import cli
from tilesim.program import Compute
from validation.harness import compile as nvcc
from validation.harness import sass

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
needs_sass = pytest.mark.skipif(shutil.which("nvcc") is None or not (shutil.which("nvdisasm")
                                                                    or shutil.which("cuobjdump")),
                                reason="nvcc, or both nvdisasm and cuobjdump, not on PATH")

# a reg2d tiling of the suite: 256 threads, 4x4 outputs each; FFMA per k-step = bm*bn*bk/threads
REG2D = GemmConfig(m=1024, n=1024, k=1024, variant="reg2d", bm=64, bn=64, bk=8, tm=4, tn=4)
REG2D_ARGS = ["simulate", "gemm", "--m", "1024", "--n", "1024", "--k", "1024", "--variant", "reg2d",
              "--bm", "64", "--bn", "64", "--bk", "8", "--tm", "4", "--tn", "4"]

# nvdisasm -c of a loop: 2 FFMA, an LDS, a barrier and 4 others (IADD, ISETP, uniform, branch);
# the BRA to itself after EXIT is the function's trap, not a loop
LISTING = """\
.text.toy:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   MOV R2, RZ ;
.L_x_1:
        /*0020*/                   LDS R4, [R3] ;
        /*0030*/                   VIADD R3, R3, 0x4 ;
        /*0040*/                   FFMA R2, R4, R4, R2 ;
        /*0050*/                   FFMA R2, R4, R2, 1 ;
        /*0060*/                   UIADD3 UR4, UR4, 0x1, URZ ;
        /*0070*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0080*/                   ISETP.NE.AND P0, PT, R3, R5, PT ;
        /*0090*/               @P0 BRA `(.L_x_1) ;
        /*00a0*/                   EXIT ;
.L_x_2:
        /*00b0*/                   BRA `(.L_x_2);
"""


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    return tmp_path_factory.mktemp("sass-cache")


@pytest.fixture(autouse=True)
def _private_cache(cache_root, monkeypatch):
    """Compiles go to a cache of this module's own (shared by its tests, never the user's)."""
    monkeypatch.setenv("TILESIM_CACHE_DIR", str(cache_root))


# ----- everywhere -----------------------------------------------------------------------------------
def test_the_loop_is_the_backward_branchs_body():
    (name, instrs), = sass.parse_sass(LISTING).items()
    assert name == "toy"
    assert sass.loops(instrs) == [(2, 9)]  # the self-branch after EXIT is not a loop
    mix = sass.loop_mix(instrs)
    assert mix["classes"] == {"LDS": 1, "IADD": 1, "FFMA": 2, "uniform": 1, "BAR": 1, "ISETP": 1, "branch": 1}
    assert mix["total"] == 8 and mix["other"] == 4


def test_the_k_loop_is_the_loop_with_the_most_math():
    two = LISTING.replace(".L_x_2:\n        /*00b0*/                   BRA `(.L_x_2);\n", "") + textwrap.dedent("""\
        .text.two:
                /*0000*/                   MOV R2, RZ ;
        .L_x_5:
                /*0010*/                   IADD3 R3, R3, 0x1, RZ ;
                /*0020*/               @P0 BRA `(.L_x_5) ;
        .L_x_6:
                /*0030*/                   FFMA R2, R4, R4, R2 ;
                /*0040*/               @P1 BRA `(.L_x_6) ;
        """)
    mixes = sass.function_mixes(two)
    assert mixes["two"]["classes"] == {"FFMA": 1, "branch": 1}
    assert sass.function_mixes(".text.flat:\n        /*0000*/                   EXIT ;\n") == {"flat": None}


def test_the_mix_replaces_the_programs_integer_estimate():
    prog = tilesim.lower(REG2D)[0]
    warps = prog.launch.warps_per_block
    model = sass.program_mix(prog)
    assert model["FFMA"] == 64 * 64 * 8 / 256 and model["BAR"] == 2
    mix = {"classes": {"FFMA": 128}, "other": 41, "total": 169}
    informed, per_warp, unroll = sass.apply_loop_mix(prog, mix)
    ints = [op for op in informed.phases[0].step.compute if isinstance(op, Compute) and op.pipe == "int"]
    assert (per_warp, unroll) == (41, 1) and [op.count for op in ints] == [41 * warps]
    assert informed.phases[1] == prog.phases[1] and informed.launch == prog.launch
    # a loop the compiler unrolled twice holds two k-steps, barriers included: half of it per step
    _, per_warp, unroll = sass.apply_loop_mix(prog, {"classes": {"FFMA": 256, "BAR": 4}, "other": 82, "total": 342})
    assert (per_warp, unroll) == (41, 2)
    # twice the math with the step's own barriers is one k-step whose instructions the model undercounts
    # (a wmma m16n16k8 tf32 is four HMMA.1684 where the model has two m16n8k8), not an unrolled loop
    _, per_warp, unroll = sass.apply_loop_mix(prog, {"classes": {"FFMA": 256, "BAR": 2}, "other": 82, "total": 340})
    assert (per_warp, unroll) == (82, 1)
    # the FFMA kernel keeps its FP32 compares with its FP32 work; a program with no FP32-pipe compute
    # (tc_gemm tf32: FSETP rounding in its integer count) takes them as overhead
    _, per_warp, _ = sass.apply_loop_mix(prog, {"classes": {"FFMA": 128, "FP32 other": 16}, "other": 41, "total": 185})
    assert per_warp == 41
    no_fma = replace(prog, phases=(replace(prog.phases[0], step=replace(prog.phases[0].step, compute=tuple(
        op for op in prog.phases[0].step.compute if not (isinstance(op, Compute) and op.pipe == "fma")))),
        *prog.phases[1:]))
    _, per_warp, _ = sass.apply_loop_mix(no_fma, {"classes": {"FFMA": 128, "FP32 other": 16}, "other": 41, "total": 185})
    assert per_warp == 57


def test_no_disassembler_is_one_line_naming_both(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(sass.SassUnavailable, match="neither nvdisasm nor cuobjdump") as e:
        sass.disassembler()
    assert "\n" not in str(e.value)


# ----- with nvcc (this machine, CI) ---------------------------------------------------------------
@needs_sass
def test_a_generated_gemm_loop_has_the_tilings_ffma_count():
    r = nvcc.compiled_resources("gemm", REG2D)
    (k,) = r["kernels"].values()
    mix = k["loop_mix"]
    threads = REG2D.threads
    assert threads == 256
    assert mix["classes"]["FFMA"] == REG2D.bm * REG2D.bn * REG2D.bk // threads  # 128 per k-step
    model = sass.program_mix(tilesim.lower(REG2D)[0])
    # the loads, shared loads and stores and barriers the lowering lists are the kernel's
    assert (mix["classes"]["LDG"], mix["classes"]["LDS"], mix["classes"]["STS"], mix["classes"]["BAR"]) == \
        (model["LDG"], model["LDS"], model["STS"], model["BAR"])
    assert 0 < mix["other"] < mix["total"] - mix["classes"]["FFMA"]


@needs_sass
def test_compile_feeds_the_loops_integer_count_to_the_simulation():
    runner = CliRunner()
    blind = json.loads(runner.invoke(cli, [*REG2D_ARGS, "--json"]).stdout)
    res = runner.invoke(cli, [*REG2D_ARGS, "--compile", "--json"])
    assert res.exit_code == 0, (res.output, res.exception)
    informed = json.loads(res.stdout)
    (k,) = nvcc.compiled_resources("gemm", REG2D)["kernels"].values()
    prog = tilesim.lower(REG2D)[0]
    model_other = sass.program_mix(prog)["other"]
    assert f"integer overhead: {k['loop_mix']['other']:g} instructions per warp and k-step" in res.stderr
    # the whole kernel issues exactly the difference: per warp and k-step, every warp, step and block
    steps = math.ceil(REG2D.k / REG2D.bk)
    diff = (k["loop_mix"]["other"] - model_other) * prog.launch.warps_per_block * steps * prog.launch.blocks
    assert informed["traffic"]["instructions"] - blind["traffic"]["instructions"] == pytest.approx(diff)
    table = runner.invoke(cli, [*REG2D_ARGS, "--compile"])
    assert "model estimate vs SASS" in table.stdout and "other (integer overhead)" in table.stdout


@needs_nvcc
def test_without_a_disassembler_compile_still_works_and_says_so(monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name in ("nvdisasm", "cuobjdump")
                        else real_which(name, *a, **k))
    r = nvcc.compiled_resources("gemm", REG2D)
    assert r["sass_tool"] is None and "neither nvdisasm nor cuobjdump" in r["sass_missing"]
    assert all(k["loop_mix"] is None for k in r["kernels"].values()) and r["regs_per_thread"] > 0
    res = CliRunner().invoke(cli, [*REG2D_ARGS, "--compile"])
    assert res.exit_code == 0 and "SASS not read: neither nvdisasm nor cuobjdump" in res.stdout


USER_CU = """\
template <int N>
__global__ void poly(const float* x, float* y, int steps) {
    __shared__ float buf[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = x[i];
    __syncthreads();
    float v = buf[(threadIdx.x + 1) % 256], acc = 0.0f;
#pragma unroll 1
    for (int s = 0; s < steps; ++s) {
#pragma unroll
        for (int j = 0; j < N; ++j) acc = fmaf(acc, v, 1.0f + j);
    }
    y[i] = acc;
}
template __global__ void poly<4>(const float*, float*, int);
extern "C" __global__ void fill(float* y) { y[threadIdx.x] = 1.0f; }
"""

USER_PROGRAM = """\
from tilesim.program import Compute, GlobalLoad, GlobalStore, Launch, Phase, Step, TileProgram, TileRef, lanes

W = 8  # 256 threads
load = GlobalLoad(TileRef("x", ("bx",), 1024), (lanes(4),), repeat=W)
store = GlobalStore(TileRef("y", ("bx",), 1024), (lanes(4),), repeat=W)
loop = Step(compute=(Compute("fma", 4 * W, chain=4), Compute("int", 100 * W)))
PROGRAM = TileProgram("poly4", Launch((4096, 1, 1), 256, 16, 0),
                      (Phase("load", 1, Step(loads=(load,), barriers=1)), Phase("loop", 512, loop),
                       Phase("store", 1, Step(stores=(store,)))), flops=2.0 * 4 * 512 * 4096 * 256)
"""


@needs_sass
def test_a_users_cu_file_with_its_tile_program(tmp_path):
    cu, prog = tmp_path / "poly.cu", tmp_path / "poly_program.py"
    cu.write_text(USER_CU)
    prog.write_text(USER_PROGRAM)
    r = nvcc.compile_file(cu, "poly")
    assert r["kernel"] == "_Z4polyILi4EEvPKfPfi" and r["static_smem_bytes"] == 1024
    assert r["loop_mix"]["classes"]["FFMA"] == 4  # the inner loop, unrolled; the outer one not
    assert 1 <= r["loop_mix"]["other"] <= 4
    assert nvcc.compile_file(cu, "fill")["loop_mix"] is None  # no loop
    runner = CliRunner()
    args = ["simulate", "--cu", str(cu), "--kernel", "poly", "--program", str(prog)]
    res = runner.invoke(cli, args)
    assert res.exit_code == 0, (res.output, res.exception)
    assert f"registers: {r['regs_per_thread']} (nvcc" in res.stdout and "estimate was 16" in res.stdout
    assert "using 1024 B" in res.stdout and f"{r['regs_per_thread']} regs/thread, 1024 B shared/block" in res.stdout
    assert f"integer overhead: {r['loop_mix']['other']:g} instructions per warp and k-step" in res.stdout
    assert "(the model's estimate was 100)" in res.stdout
    informed = json.loads(runner.invoke(cli, [*args, "--json"]).stdout)
    blind = tilesim.simulate(tilesim.cli.compiled.load_program(str(prog)), "h200")
    diff = (r["loop_mix"]["other"] - 100) * 8 * 512 * 4096
    assert informed["traffic"]["instructions"] - blind.traffic.instructions == pytest.approx(diff)


def test_cu_option_errors_are_one_line(tmp_path):
    runner = CliRunner()

    def one_line(args, *needles):
        res = runner.invoke(cli, args)
        assert res.exit_code == 2, res.output
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
        for n in needles:
            assert n in lines[0], lines[0]

    one_line(["simulate", "--cu", "x.cu"], "--kernel, --program missing")
    one_line(["simulate", "--cu", "x.cu", "gemm", "--m", "64", "--n", "64", "--k", "64"], "without a family")
    prog = tmp_path / "p.toml"
    prog.write_text("")
    one_line(["simulate", "--cu", "x.cu", "--kernel", "k", "--program", str(prog)], "must be a Python file")
    one_line(["simulate", "--cu", "x.cu", "--kernel", "k", "--program", str(prog), "--hardware", "m1_max"],
             "not an NVIDIA GPU")


@needs_nvcc
def test_an_unknown_kernel_lists_the_files_kernels(tmp_path):
    cu = tmp_path / "poly.cu"
    cu.write_text(USER_CU)
    with pytest.raises(ValueError, match=r"--kernel nope: no such kernel; the file's kernels: .*fill"):
        nvcc.compile_file(cu, "nope")
