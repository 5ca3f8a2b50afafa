"""The softmax family: its knobs, its lowering, its CUDA source and its validation suite.

CPU stories first (configuration, lowering, suite, nvcc), then the GPU check (marked ``gpu``:
needs CuPy and an NVIDIA GPU).
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from suite_cover import covering

import tilesim
from tilesim.cost.access import smem_wavefronts, useful_bytes
from tilesim.hardware import load
from tilesim.hardware.catalog import with_overrides
from tilesim.kernels import registry
from tilesim.kernels.softmax import FAMILY, SoftmaxConfig, check_fits, counts, lower
from tilesim.program import Compute, Shuffle
from validation.families.softmax import runner

H200 = load("h200")
F32 = 4


def cfg(rows=4096, cols=1024, **knobs) -> SoftmaxConfig:
    return SoftmaxConfig(rows=rows, cols=cols, **knobs)


def suite():
    from validation.harness.suite import load_suite  # noqa: PLC0415

    return load_suite("softmax")


# ---- configuration -------------------------------------------------------------------------------
@pytest.mark.parametrize("knobs, field", [
    (dict(rows=0), "rows"),
    (dict(rows=True), "rows"),
    (dict(cols=-4), "cols"),
    (dict(variant="row_per_lane"), "variant"),
    (dict(unit="grid"), "unit"),
    (dict(unit="block"), "unit"),  # only online takes a unit
    (dict(tree="butterfly"), "tree"),
    (dict(tree="interleaved"), "tree"),  # only block_tree has a tree
    (dict(cache="l1"), "cache"),
    (dict(vector=2), "vector"),
    (dict(cols=1001), "vector"),  # float4 rows need cols % 4 == 0
    (dict(threads=1000), "threads"),
    (dict(threads=16), "threads"),
    (dict(threads=2048), "threads"),
    (dict(unroll=3), "unroll"),
    (dict(cache="registers", unroll=2), "unroll"),  # the register slice is loaded at once
    (dict(cols=4096, cache="registers"), "cache"),  # 128 floats per lane of a warp
    (dict(variant="thread_row", cache="registers"), "cache"),  # 1024 floats per thread
    (dict(variant="block_tree", cols=65536, cache="shared"), "cache"),  # 256 KiB of shared memory
    (dict(variant="thread_row", threads=64, cache="shared"), "cache"),  # 64 rows x 4 KiB
    (dict(regs_per_thread=0), "regs_per_thread"),
    (dict(regs_per_thread=256), "regs_per_thread"),
])
def test_an_impossible_knob_is_rejected_naming_the_field(knobs, field):
    with pytest.raises(ValueError, match=rf"SoftmaxConfig\.{field} = "):
        cfg(**knobs)


def test_the_rejection_names_the_limit():
    with pytest.raises(ValueError, match="holds 128 floats per thread.*the limit is 64"):
        cfg(cols=4096, cache="registers")
    with pytest.raises(ValueError, match="the limit is 232448"):
        cfg(variant="block_tree", cols=65536, cache="shared")


def test_geometry_follows_the_unit_that_owns_a_row():
    assert cfg(variant="thread_row", threads=128).grid == (32, 1, 1)  # 4096 rows / 128 threads
    assert cfg(variant="warp_shuffle", threads=256).grid == (512, 1, 1)  # 8 rows per block
    assert cfg(variant="online", unit="warp").rows_per_block == 8
    assert cfg(variant="block_tree").grid == (4096, 1, 1)
    assert cfg(variant="online", unit="block").threads_per_row == 256
    assert cfg(rows=3000, cols=1000, variant="warp_shuffle").grid == (375, 1, 1)
    assert cfg(rows=3001, cols=1000, variant="warp_shuffle").grid == (376, 1, 1)  # a partial block


def test_shared_memory_holds_the_staged_rows_and_the_reduction_buffers():
    assert cfg(variant="warp_shuffle").smem_bytes == 0
    assert cfg(variant="block_tree").smem_bytes == 2 * 256 * F32  # two trees of 256 floats
    assert cfg(variant="online", unit="block").smem_bytes == 2 * 8 * F32  # (max, sum) per warp
    assert cfg(variant="warp_shuffle", cache="shared").smem_bytes == 8 * 1024 * F32  # 8 rows
    assert cfg(variant="block_tree", cache="shared").smem_bytes == 1024 * F32 + 2 * 256 * F32


def test_register_estimate_grows_with_the_values_a_thread_holds():
    small = cfg(cols=1024, variant="block_tree", threads=1024, cache="registers")  # 1 float4
    big = cfg(cols=16384, variant="block_tree", threads=256, cache="registers")  # 16 float4
    assert big.estimated_regs - small.estimated_regs == 60
    assert cfg(unroll=4).estimated_regs > cfg(unroll=1).estimated_regs
    assert cfg(regs_per_thread=77).estimated_regs == 77  # the compiler's count overrides


def test_label_names_the_knobs_but_not_the_size():
    c = cfg(variant="block_tree", tree="interleaved", threads=512, unroll=2, cache="shared")
    assert c.label == "block_tree-int/t512/v4/u2/shared"
    assert cfg(variant="online", unit="block").label.startswith("online-block/")
    assert FAMILY.full_label(c) == c.label + "@4096x1024"


def test_the_family_is_registered_and_makes_configs_from_strings():
    fam = registry.get("softmax")
    assert fam is FAMILY and fam.problem_fields == ("rows", "cols")
    c = fam.make(rows="64", cols="512", variant="online", unit="block", threads="128", regs_per_thread="none")
    assert (c.rows, c.threads, c.regs_per_thread) == (64, 128, None)
    knobs = {k.name: k for k in fam.knobs()}
    assert knobs["variant"].choices == ("thread_row", "warp_shuffle", "block_tree", "online")
    assert all(k.doc for k in fam.knobs())


def test_counts_are_the_compulsory_traffic_and_the_reads_each_form_makes():
    c = cfg(rows=1000, cols=300, vector=1)
    got = counts(c)
    assert got["min_hbm_bytes"] == 2 * 1000 * 300 * F32
    assert got["flops"] == 5 * 1000 * 300
    assert got["global_reads"] == 3
    assert counts(cfg(variant="online"))["global_reads"] == 2
    assert counts(cfg(cache="shared", unroll=4))["global_reads"] == 1


def test_check_fits_names_the_hardware_limit():
    # 16 float4 per thread in registers at 1024 threads: about 80 registers x 1024 > 64K
    c = cfg(rows=64, cols=65536, variant="block_tree", threads=1024, cache="registers")
    with pytest.raises(ValueError, match=r"SoftmaxConfig\.regs_per_thread = .*cannot be resident"):
        check_fits(c, H200)
    check_fits(cfg(variant="block_tree", threads=1024, cache="registers"), H200)
    small = with_overrides(H200, smem_per_block_optin_bytes=48 * 1024)
    with pytest.raises(ValueError, match=r"SoftmaxConfig\.smem_bytes = .*smem_per_block_optin_bytes"):
        check_fits(cfg(cols=16384, variant="block_tree", cache="shared"), small)
    with pytest.raises(ValueError, match=r"SoftmaxConfig\.threads = 1024 exceeds max_threads_per_block"):
        check_fits(cfg(threads=1024), with_overrides(H200, max_threads_per_block=512))


# ---- lowering ------------------------------------------------------------------------------------
def _moved(prog, kind: str, tensor: str | None = None) -> float:
    """Useful bytes of every load ("loads") or store ("stores") of the whole grid."""
    total = 0.0
    for ph in prog.phases:
        for acc in getattr(ph.step, kind):
            if tensor is None or acc.tile.tensor == tensor:
                total += useful_bytes(acc.instructions) * acc.repeat * ph.trips
    return total * prog.launch.blocks


@pytest.mark.parametrize("knobs, reads", [
    (dict(variant="warp_shuffle", unroll=4), 3),
    (dict(variant="warp_shuffle", vector=1, unroll=2), 3),
    (dict(variant="block_tree", unroll=4), 3),
    (dict(variant="thread_row", threads=128, vector=1, unroll=4), 3),
    (dict(variant="online", unroll=4), 2),
    (dict(variant="online", unit="block", threads=512, unroll=2), 2),
    (dict(variant="warp_shuffle", cache="shared", unroll=4), 1),
    (dict(variant="online", unit="block", cache="registers"), 1),
    (dict(variant="block_tree", cache="registers", threads=1024), 1),
])
def test_a_streaming_kernel_moves_its_row_once_per_pass(knobs, reads):
    for rows, cols in ((4096, 1024), (3072, 1000)):  # exact, and with a column tail
        c = cfg(rows=rows, cols=cols, **knobs)
        prog = lower(c)
        assert _moved(prog, "loads") == reads * rows * cols * F32
        assert _moved(prog, "stores") == rows * cols * F32


def test_a_ragged_row_count_describes_the_last_block_as_a_full_one():
    c = cfg(rows=3001, cols=1000, variant="warp_shuffle", unroll=4)  # 376 blocks of 8 rows
    assert _moved(lower(c), "stores") == 376 * 8 * 1000 * F32
    b = cfg(rows=3001, cols=1000, variant="block_tree", unroll=4)  # a block per row: exact
    assert _moved(lower(b), "stores") == 3001 * 1000 * F32


def test_the_re_read_passes_name_the_tiles_of_the_first_pass():
    prog = lower(cfg(rows=3000, cols=1000, variant="block_tree", threads=64, unroll=2))  # 250 float4 per row
    tiles = {}
    for ph in prog.phases:
        for ld in ph.step.loads:
            tiles.setdefault(ph.name.split()[0], set()).add((ld.tile.tensor, ld.tile.coords, ld.tile.tile_bytes))
    assert tiles["sum"] == tiles["write"] == tiles["max"]
    assert {t[1] for t in tiles["max"]} == {("bx", "k"), ("bx", 128)}  # the loop (128 float4), the tail


def test_phases_follow_the_passes_and_loops_run_their_warps_independently():
    prog = lower(cfg(rows=4096, cols=4096, variant="warp_shuffle", unroll=4))  # 4096/(32*4*4) = 8 trips
    names = [ph.name for ph in prog.phases]
    assert names == ["setup", "max", "reduce max", "sum", "reduce sum", "write"]
    loops = [ph for ph in prog.phases if ph.trips > 1]
    assert [ph.trips for ph in loops] == [8, 8, 8]
    assert all(ph.warp_groups == 8 and ph.step.barriers == 0 for ph in prog.phases)
    online = lower(cfg(rows=4096, cols=4096, variant="online", unroll=4))
    assert [ph.name for ph in online.phases] == ["setup", "online", "merge warp", "reciprocal", "write"]


def test_a_loop_step_carries_the_sass_instruction_counts():
    """warp_shuffle, float4, unroll 4, as CuPy builds it (-ftz=true): per warp and step, 16 FMNMX
    (ALU: the "int" pipe) in the max loop; 48 FP32 (FADD, FMUL, FADD) and 16 MUFU.EX2 in the sum
    loop; the online loop 50 FP32 and 17 MUFU (one more exponential for the rescale) (cuobjdump
    -sass of softmax_warp_shuffle<256, 4, 0, 4, 0> and softmax_online_warp<256, 4, 0, 4, 0>)."""
    prog = lower(cfg(variant="warp_shuffle", unroll=4))

    def per_warp(p):
        out = {}
        for ph in p.phases:
            for op in ph.step.compute:
                if isinstance(op, Compute):
                    out.setdefault(ph.name, {}).setdefault(op.pipe, 0)
                    out[ph.name][op.pipe] += op.count / 8
        return out

    pw = per_warp(prog)
    assert "fma" not in pw["max"] and pw["max"]["int"] >= 16
    assert pw["sum"]["fma"] == 48 and pw["sum"]["sfu"] == 16
    assert pw["write"]["fma"] == 48
    online = per_warp(lower(cfg(variant="online", unroll=4)))
    assert online["online"]["fma"] == 50 and online["online"]["sfu"] == 17
    shuffles = [op for ph in prog.phases for op in ph.step.compute if isinstance(op, Shuffle)]
    assert [(s.count / 8, s.chain) for s in shuffles] == [(5, 5), (5, 5)]


def test_a_tail_step_issues_every_unrolled_vector_predicated_off():
    """A block-per-row tail (3000 x 1000: 250 float4, no full step of 256 threads x 4): every warp
    has a lane in the first vector, so each issues 4 loads (3 of them predicated off, moving no
    data) and the math of 16 values per pass; reading the row from shared memory, the compiler
    branches around the vectors instead."""
    prog = lower(cfg(rows=3000, cols=1000, variant="block_tree", unroll=4))
    tail = next(ph for ph in prog.phases if ph.name == "sum tail")
    sfu = sum(op.count for op in tail.step.compute if isinstance(op, Compute) and op.pipe == "sfu")
    assert sfu == 8 * 16
    assert sum(len(ld.instructions) * ld.repeat for ld in tail.step.loads) == 8  # one real load per warp
    shared = lower(cfg(rows=3000, cols=1000, variant="block_tree", unroll=4, cache="shared"))
    tail = next(ph for ph in shared.phases if ph.name == "sum tail")
    assert sum(op.count for op in tail.step.compute if isinstance(op, Compute) and op.pipe == "sfu") == 8 * 4


def test_thread_row_steps_cover_a_sector_of_each_lane_row():
    c = cfg(variant="thread_row", threads=128, vector=1, unroll=4)  # 16 bytes per iteration
    prog = lower(c)
    main = next(ph for ph in prog.phases if ph.name == "max")
    ld = main.step.loads[0]
    assert len(ld.instructions) == 8  # two iterations of 4 loads: 32 bytes of each row
    assert main.trips == 1024 // 8
    assert ld.instructions[0].offsets[1] == 1024 * F32  # lane 1 reads the next row


def _tree_wavefronts(prog, name: str) -> int:
    total = 0
    for ph in prog.phases:
        if ph.name.startswith(name):
            for acc in ph.step.shared_loads + ph.step.shared_stores:
                for w in acc.instructions:
                    total += smem_wavefronts(list(w.offsets), w.width_bytes) * acc.repeat
    return total


def test_the_interleaved_tree_has_more_shared_wavefronts_than_the_sequential_one():
    seq = lower(cfg(variant="block_tree", threads=256, unroll=4))
    inter = lower(cfg(variant="block_tree", tree="interleaved", threads=256, unroll=4))
    n_seq, n_int = _tree_wavefronts(seq, "reduce max tree"), _tree_wavefronts(inter, "reduce max tree")
    assert n_int > 2 * n_seq
    tree = [ph for ph in seq.phases if ph.name.startswith("reduce max tree")]
    assert len(tree) == 8 + 1 and all(ph.step.barriers == 1 and ph.warp_groups == 1 for ph in tree)


def test_every_suite_configuration_lowers_to_its_launch():
    for c in suite():
        prog = lower(c)
        assert prog.launch.grid == c.grid and prog.launch.threads_per_block == c.threads
        assert prog.launch.smem_bytes_per_block == c.smem_bytes
        assert prog.min_hbm_bytes == c.min_hbm_bytes


def _simulate(c):
    try:
        return tilesim.simulate(c, "h200")
    except ValueError as e:  # the H200 data lacks a latency the kernels' chains need (until calibrated)
        if "no sourced latency" in str(e):
            pytest.skip(str(e))
        raise


def test_simulated_kernels_rank_by_the_traffic_they_make():
    big = dict(rows=16384, cols=16384)
    rereads = _simulate(cfg(**big, variant="warp_shuffle", unroll=4))  # 64 KiB rows: re-reads miss L2
    cached = _simulate(cfg(**big, variant="online", unit="block", threads=1024, cache="registers"))
    assert cached.traffic.hbm_read_bytes < 0.5 * rereads.traffic.hbm_read_bytes
    assert cached.time_s < rereads.time_s
    seq = _simulate(cfg(variant="block_tree", unroll=4))
    inter = _simulate(cfg(variant="block_tree", tree="interleaved", unroll=4))
    # Nsight Compute counts 1.32x the shared-memory wavefronts for this pair on the H200
    assert inter.traffic.smem_wavefronts > 1.2 * seq.traffic.smem_wavefronts


# ---- the suite and the CUDA source -------------------------------------------------------------
def test_the_suite_covers_the_variants_the_caches_and_the_shapes():
    cs = suite()
    assert len(cs) >= 50
    assert {c.variant for c in cs} == {"thread_row", "warp_shuffle", "block_tree", "online"}
    assert {c.cache for c in cs} == {"none", "registers", "shared"}
    assert {c.vector for c in cs} == {1, 4} and {c.tree for c in cs} == {"sequential", "interleaved"}
    assert min(c.cols for c in cs) == 512 and max(c.cols for c in cs) == 65536
    assert max(c.rows * c.cols * F32 for c in cs) >= 16 * 60 * 2**20  # 1 GiB: many times the L2
    assert any(c.rows % c.rows_per_block or c.cols % 128 for c in cs)  # ragged
    for c in cs:
        check_fits(c, H200)


def test_kernel_source_names_one_template_instance():
    c = cfg(variant="block_tree", tree="interleaved", unroll=4)
    src = runner.kernel_source(c)
    assert src.name_expressions == ("softmax_block_tree<256, 4, 0, 4, 0, 1>",)
    assert "template __global__ void softmax_block_tree<256, 4, 0, 4, 0, 1>(" in src.code
    assert not any(o.startswith("-arch") for o in src.options)
    assert runner.kernel_name(cfg(cols=512, cache="registers")) == "softmax_warp_shuffle<256, 4, 1, 1, 128>"
    assert runner.kernel_name(cfg(variant="online", unit="block")) == "softmax_online_block<256, 4, 0, 1, 0>"
    assert runner.mangled_name(c) == "_Z18softmax_block_treeILi256ELi4ELi0ELi4ELi0ELi1EEvPKfPfii"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
@pytest.mark.parametrize("which", ["covering", pytest.param("every", marks=pytest.mark.slow)])
def test_every_suite_kernel_compiles_without_spilling_much(tmp_path, which):
    """Kernels that between them take every knob value of the suite (every suite kernel: -m slow)."""
    cs = suite()
    if which == "covering":
        cs = covering(cs, skip=("rows", "cols"), key=runner.mangled_name)
    cu = tmp_path / "softmax_suite.cu"
    cu.write_text(runner.batch_source(cs))
    out = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-cubin", "-Xptxas", "-v", "-o",
                          str(tmp_path / "s.cubin"), str(cu)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    compiled = set(re.findall(r"Compiling entry function '(\w+)'", out.stderr))
    assert {runner.mangled_name(c) for c in cs} <= compiled
    spills = [int(n) for n in re.findall(r"(\d+) bytes spill stores", out.stderr)]
    assert max(spills) <= 16  # block_tree<1024,...,shared> spills 12 bytes at ptxas's 32-register pick


# ---- on the GPU ----------------------------------------------------------------------------------
GPU_CASES = [
    dict(rows=3000, cols=1000, variant="warp_shuffle", unroll=4),
    dict(rows=1531, cols=2999, variant="block_tree", tree="interleaved", vector=1, unroll=4),
    dict(rows=1531, cols=2999, variant="online", vector=1, unroll=4),
    dict(rows=3000, cols=1000, variant="online", unit="block", cache="shared", unroll=2),
    dict(rows=3000, cols=1000, variant="warp_shuffle", cache="registers"),
    dict(rows=257, cols=100, variant="online", unit="block", threads=1024),  # most threads idle
    dict(rows=33, cols=7, variant="thread_row", threads=32, vector=1, cache="registers"),
    dict(rows=100, cols=1000, variant="thread_row", threads=32, cache="shared", unroll=2),  # 125 KiB of rows
    dict(rows=64, cols=16384, variant="block_tree", threads=1024, cache="registers"),
    dict(rows=1, cols=65536, variant="online", unit="block", threads=1024, unroll=4),
]


@pytest.mark.gpu
@pytest.mark.parametrize("knobs", GPU_CASES, ids=lambda k: "-".join(f"{v}" for v in k.values()))
def test_gpu_kernels_match_the_float64_reference(knobs):
    pytest.importorskip("cupy")
    c = SoftmaxConfig(**knobs)
    case = runner.prepare(c, seed=1)
    ok, err, msg = case.check()
    assert ok, f"{c.label}@{c.rows}x{c.cols}: {msg}"
    assert err <= runner.REL_TOL
    assert case.attributes["local_bytes"] <= 16
    assert case.kernel_names == (runner.mangled_name(c),)


# ---- the kernels run on the CPU (host emulation of softmax.cu: threads, barriers, shuffles) -------
EMULATED = [
    dict(rows=5, cols=1000, variant="warp_shuffle", threads=64, unroll=2),  # a partial block, a tail
    dict(rows=3, cols=999, variant="warp_shuffle", threads=64, vector=1, unroll=4, cache="shared"),
    dict(rows=3, cols=1000, variant="warp_shuffle", threads=64, cache="registers"),
    dict(rows=3, cols=1000, variant="block_tree", threads=128, unroll=2),
    dict(rows=2, cols=999, variant="block_tree", tree="interleaved", threads=64, vector=1, unroll=4,
         cache="shared"),
    dict(rows=2, cols=1000, variant="block_tree", tree="interleaved", threads=128, cache="registers"),
    dict(rows=2, cols=4, variant="block_tree", threads=32),
    dict(rows=5, cols=1000, variant="online", threads=64, unroll=4),
    dict(rows=3, cols=299, variant="online", threads=64, vector=1, cache="shared"),
    dict(rows=3, cols=1000, variant="online", threads=32, cache="registers"),
    dict(rows=3, cols=1000, variant="online", unit="block", threads=128, unroll=2),
    dict(rows=2, cols=100, variant="online", unit="block", threads=256, cache="shared"),  # idle threads
    dict(rows=2, cols=2048, variant="online", unit="block", threads=128, cache="registers"),
    dict(rows=1, cols=65536, variant="online", unit="block", threads=1024, unroll=4),
    dict(rows=40, cols=1000, variant="thread_row", threads=32, unroll=4),
    dict(rows=33, cols=77, variant="thread_row", threads=32, vector=1, unroll=2, cache="shared"),
    dict(rows=33, cols=7, variant="thread_row", threads=32, vector=1, cache="registers"),
]


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    """One host program with every EMULATED kernel: ``prog INDEX ROWS COLS IN OUT``."""
    if shutil.which("g++") is None:
        pytest.skip("g++ not on PATH")
    d = tmp_path_factory.mktemp("softmax_emu")
    code = runner.base_source().replace("extern __shared__ float4 softmax_dyn_smem[];",
                                        "__shared__ float4 softmax_dyn_smem[232448 / 16];")
    cases = "\n".join(
        f"    case {i}: host_emu::launch({runner.kernel_name(SoftmaxConfig(**k))}, {SoftmaxConfig(**k).grid[0]}u, "
        f"{SoftmaxConfig(**k).threads}u, x.data(), y.data(), rows, cols); break;"
        for i, k in enumerate(EMULATED))
    main = f"""
#include <cstdio>
#include <cstdlib>
int main(int argc, char** argv) {{
  const int idx = std::atoi(argv[1]), rows = std::atoi(argv[2]), cols = std::atoi(argv[3]);
  std::vector<float> x((size_t)rows * cols), y((size_t)rows * cols, NAN);
  std::FILE* f = std::fopen(argv[4], "rb");
  if (std::fread(x.data(), 4, x.size(), f) != x.size()) return 2;
  std::fclose(f);
  switch (idx) {{
{cases}
    default: return 3;
  }}
  f = std::fopen(argv[5], "wb");
  std::fwrite(y.data(), 4, y.size(), f);
  std::fclose(f);
  return 0;
}}
"""
    src = d / "emu.cpp"
    src.write_text('#include "host_emulation.h"\n' + code + main)
    exe = d / "emu"
    out = subprocess.run(["g++", "-std=c++20", "-O1", "-pthread", "-I", str(runner.KERNEL_FILE.parent), "-o",
                          str(exe), str(src)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return exe


@pytest.mark.parametrize("index", range(len(EMULATED)),
                         ids=lambda i: "-".join(str(v) for v in EMULATED[i].values()))
def test_the_kernels_compute_the_softmax_on_the_cpu(emulator, tmp_path, index):
    import numpy as np  # noqa: PLC0415

    c = SoftmaxConfig(**EMULATED[index])
    x = np.random.default_rng(index).standard_normal((c.rows, c.cols)).astype(np.float32)
    (tmp_path / "x.bin").write_bytes(x.tobytes())
    out = subprocess.run([str(emulator), str(index), str(c.rows), str(c.cols), str(tmp_path / "x.bin"),
                          str(tmp_path / "y.bin")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    y = np.frombuffer((tmp_path / "y.bin").read_bytes(), dtype=np.float32).reshape(c.rows, c.cols)
    assert np.isfinite(y).all(), f"{np.count_nonzero(~np.isfinite(y))} outputs unwritten or NaN"
    ref = runner.reference(x)
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) <= runner.REL_TOL
