"""The layernorm family: its knobs, its lowering, its CUDA source and its validation suite.

CPU stories first (configuration, lowering, cost model, suite, nvcc), then the GPU check (marked
``gpu``: needs CuPy and an NVIDIA GPU).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter

import numpy as np
import pytest
from suite_cover import covering

from tilesim.cost import step_cost
from tilesim.hardware import load
from tilesim.kernels.layernorm import FAMILY, LayerNormConfig, check_fits, counts, lower
from validation.families.layernorm import runner

H200 = load("h200")
F32 = 4


def cfg(rows=16384, cols=4096, **knobs) -> LayerNormConfig:
    return LayerNormConfig(rows=rows, cols=cols, **knobs)


def suite():
    from validation.harness.suite import load_suite  # noqa: PLC0415

    return load_suite("layernorm")


# ---- configuration -------------------------------------------------------------------------------
@pytest.mark.parametrize("knobs, field", [
    (dict(rows=0), "rows"),
    (dict(rows=True), "rows"),
    (dict(cols=-4), "cols"),
    (dict(variant="lane_row"), "variant"),
    (dict(passes="three"), "passes"),
    (dict(cache="l1"), "cache"),
    (dict(vector=2), "vector"),
    (dict(threads=1000), "threads"),
    (dict(threads=16), "threads"),
    (dict(threads=2048), "threads"),
    (dict(cache="none", unroll=3), "unroll"),
    (dict(regs_per_thread=0), "regs_per_thread"),
    (dict(cols=1001), "vector"),  # float4 rows need cols % 4 == 0
    (dict(cache="registers", unroll=2), "unroll"),  # the register slice is loaded at once
    (dict(variant="thread_row", cache="registers"), "cache"),  # 4096 floats per thread
    (dict(cols=65536, cache="shared", unroll=4), "cache"),  # 256 KiB of shared memory per block
    (dict(variant="warp_row", threads=1024, cols=4096, cache="shared"), "cache"),  # 32 rows x 16 KiB
])
def test_an_impossible_knob_is_rejected_naming_the_field(knobs, field):
    with pytest.raises(ValueError, match=rf"LayerNormConfig\.{field} = "):
        cfg(**knobs)


def test_the_launch_follows_the_rows_per_block():
    assert cfg(variant="block_row", threads=256).grid == (16384, 1, 1)
    assert cfg(variant="warp_row", threads=256, cols=1024).grid == (2048, 1, 1)  # 8 rows per block
    assert cfg(rows=3000, cols=1000, variant="warp_row", threads=256, cache="none").grid == (375, 1, 1)
    assert cfg(rows=3001, cols=1000, variant="thread_row", threads=128, cache="none").grid == (24, 1, 1)


def test_shared_memory_is_the_cached_rows_plus_the_reduction_buffers():
    c = cfg(cache="shared", unroll=4, threads=256)
    assert c.row_smem_bytes == 4096 * F32 and c.reduce_smem_bytes == 2 * 2 * 8 * F32
    assert c.smem_bytes == c.row_smem_bytes + c.reduce_smem_bytes
    assert cfg(variant="warp_row", cols=1024, cache="shared", threads=128).row_smem_bytes == 4 * 1024 * F32
    assert cfg(variant="warp_row", cols=1024, threads=128).smem_bytes == 0  # shuffles only


def test_the_register_cache_holds_a_compile_time_slice():
    assert cfg(threads=256).slice_vectors == 4  # 1024 float4 over 256 threads
    assert cfg(rows=3000, cols=1000, threads=128).slice_vectors == 2  # 250 float4: the last slice partial
    assert cfg(cache="none", unroll=4).slice_vectors == 0


def test_the_label_names_the_knobs_without_the_problem_size():
    assert cfg().label == "block_row.one.registers.v4.t256"
    assert cfg(cache="none", unroll=4, passes="two", vector=1).label == "block_row.two.none.v1.t256.u4"
    assert FAMILY.full_label(cfg()) == "block_row.one.registers.v4.t256@16384x4096"


def test_the_family_builds_configurations_from_strings():
    c = FAMILY.make(rows="1024", cols="65536", variant="warp_row", cache="none", unroll="4", vector="4")
    assert c == LayerNormConfig(1024, 65536, variant="warp_row", cache="none", unroll=4)
    assert {k.name for k in FAMILY.knobs()} >= {"rows", "cols", "variant", "passes", "cache", "vector",
                                                 "threads", "unroll", "regs_per_thread"}
    assert all(k.doc for k in FAMILY.knobs())


def test_the_registry_finds_the_family_by_name():
    from tilesim.kernels import registry  # noqa: PLC0415

    assert registry.get("layernorm").config is LayerNormConfig


def test_check_fits_names_the_limit_that_is_broken():
    with pytest.raises(ValueError, match="regs_per_thread = 300"):
        check_fits(cfg(regs_per_thread=300), H200)
    # 64 floats of slice and their w, b in flight: 110 registers x 1024 threads exceed the 64K register file
    with pytest.raises(ValueError, match=r"threads = 1024: .*does not fit"):
        check_fits(cfg(cols=65536, threads=1024), H200)
    check_fits(cfg(cols=16384, threads=1024, regs_per_thread=64), H200)  # the compiler's count fits
    # 200 KiB of rows in shared memory: fine on an H200 (227 KiB), not on an A100 (163 KiB)
    big = cfg(cols=12800, variant="warp_row", threads=128, cache="shared")
    check_fits(big, H200)
    with pytest.raises(ValueError, match="smem_bytes = 204800"):
        check_fits(big, load("a100_sxm4"))


def test_the_counts_are_the_compulsory_traffic_and_the_algorithms_flops():
    n = counts(cfg(rows=1024, cols=65536, passes="two", cache="none", unroll=4))
    assert n["min_hbm_bytes"] == (2 * 1024 * 65536 + 2 * 65536) * F32
    assert n["flops"] == 8 * 1024 * 65536
    assert n["x_global_reads"] == 3
    assert counts(cfg())["x_global_reads"] == 1


# ---- lowering ------------------------------------------------------------------------------------
def _bytes(program, tensor: str, kind: str = "loads") -> float:
    """Useful bytes of ``tensor`` moved by the whole grid (lanes x width x repeat x trips x blocks)."""
    total = 0.0
    for ph in program.phases:
        for op in getattr(ph.step, kind):
            if op.tile.tensor == tensor:
                lanes = sum(w.active_lanes * w.width_bytes for w in op.instructions)
                total += lanes * op.repeat * ph.trips * program.launch.blocks
    return total


@pytest.mark.parametrize("c", [
    cfg(), cfg(passes="two"), cfg(cache="shared", unroll=4), cfg(rows=3000, cols=1000, threads=128),
    cfg(rows=3000, cols=1000, cache="shared", unroll=2, vector=1),
    cfg(rows=8192, cols=1024, variant="warp_row", threads=128),
    cfg(rows=8192, cols=1024, variant="thread_row", threads=64, cache="none", unroll=4),
    cfg(rows=1024, cols=65536, variant="warp_row", cache="none", unroll=4, vector=1),
], ids=lambda c: FAMILY.full_label(c))
def test_x_is_read_once_per_global_pass_and_y_written_once(c):
    program = lower(c)
    x_bytes = c.rows * c.cols * F32
    assert _bytes(program, "x") == counts(c)["x_global_reads"] * x_bytes
    assert _bytes(program, "y", "stores") == x_bytes
    assert program.min_hbm_bytes == counts(c)["min_hbm_bytes"]


def test_each_pass_is_a_phase_and_later_passes_name_the_same_x_tiles():
    program = lower(cfg(rows=4096, cols=16384, passes="two", cache="none", unroll=4))
    names = [ph.name for ph in program.phases]
    for p in ("stats", "variance", "output"):
        assert p in names and f"{p}_tail" in names
    x_tiles = {ph.name: ld.tile for ph in program.phases for ld in ph.step.loads if ld.tile.tensor == "x"}
    assert x_tiles["stats"] == x_tiles["variance"] == x_tiles["output"]
    assert x_tiles["stats"].coords == ("bx", "k")
    loop = next(ph for ph in program.phases if ph.name == "stats")
    assert loop.trips == 16384 // (256 * 4 * 4)


def test_weight_and_bias_are_tiles_shared_by_every_block():
    program = lower(cfg(rows=3000, cols=1000, cache="none", unroll=2, threads=128))
    wb = [ld.tile for ph in program.phases for ld in ph.step.loads if ld.tile.tensor in ("w", "b")]
    assert wb and all("bx" not in t.index_names() for t in wb)


def test_a_block_row_synchronises_once_per_reduction_and_a_warp_row_never():
    def barriers(c):
        return {ph.name: ph.step.barriers for ph in lower(c).phases if ph.step.barriers}

    assert barriers(cfg(passes="two")) == {"stats_block_reduce": 1, "variance_block_reduce": 1}
    assert barriers(cfg(passes="one")) == {"stats_block_reduce": 1}
    assert barriers(cfg(rows=8192, cols=1024, variant="warp_row")) == {}
    assert barriers(cfg(threads=32, cache="none")) == {}  # a block of one warp: shuffles only


def test_barrier_free_loops_let_every_warp_progress_on_its_own():
    for ph in lower(cfg(cache="none", unroll=2, threads=512)).phases:
        assert ph.warp_groups == (1 if ph.step.barriers else 16)


def test_the_shuffle_tree_is_five_levels_per_value_then_log2_warps():
    def shuffles(c):
        return sum(op.count for ph in lower(c).phases for op in ph.step.compute if type(op).__name__ == "Shuffle")

    assert shuffles(cfg(passes="one", threads=256)) == 2 * (5 + 3) * 8  # (sum, sum of squares), 8 warps
    assert shuffles(cfg(passes="two", threads=256)) == 2 * (5 + 3) * 8  # two reductions of one value
    assert shuffles(cfg(rows=8192, cols=1024, variant="warp_row", threads=128)) == 2 * 5 * 4
    assert shuffles(cfg(rows=8192, cols=1024, variant="thread_row", cache="none")) == 0


def test_the_output_pass_spends_three_fp32_instructions_per_element():
    c = cfg(cache="none", unroll=4, vector=4, threads=256)
    out = next(ph for ph in lower(c).phases if ph.name == "output")
    fma = sum(op.count for op in out.step.compute if getattr(op, "pipe", None) == "fma")
    assert fma == 3 * 4 * 4 * c.warps  # FADD, FMUL, FFMA per element; unroll x vector per thread


def test_a_tail_with_no_column_left_accesses_no_memory():
    c = cfg(cache="none", unroll=4)  # 1024 float4 = one full iteration of 256 threads x 4
    assert c.tail_vectors == 0
    tail = next(ph for ph in lower(c).phases if ph.name == "stats_tail")
    assert tail.step.loads == () and tail.step.compute


def test_one_thread_per_row_has_bank_conflicts_in_the_row_cache():
    """Lanes a row apart (cols * 4 bytes) hit the same banks: a float4 load of the thread_row cache
    takes one wavefront per lane, block_row's lanes read neighbouring vectors (conflict-free)."""
    def wavefronts_per_instruction(c):
        ph = next(ph for ph in lower(c).phases if ph.name == "output")
        cost = step_cost(ph.step, H200, c.warps)
        return cost.shared_load_wavefronts / cost.shared_load_instructions

    block = wavefronts_per_instruction(cfg(rows=8192, cols=1024, cache="shared", vector=4))
    thread = wavefronts_per_instruction(cfg(rows=8192, cols=1024, variant="thread_row", threads=32,
                                            cache="shared", vector=4))
    assert block == 4  # a float4 per lane: 512 bytes, 4 wavefronts, conflict-free
    assert thread == 32  # 32 lanes on the same 4 banks: one lane per wavefront


def test_thread_row_reads_32_sectors_per_warp_load():
    """One row per lane: a warp's load touches 32 rows (uncoalesced)."""
    c = cfg(rows=8192, cols=1024, variant="thread_row", threads=64, cache="none", unroll=1, vector=1)
    stats = next(ph for ph in lower(c).phases if ph.name == "stats")
    cost = step_cost(stats.step, H200, c.warps)
    assert cost.load_l2_bytes == 32 * 32 * c.warps


def _simulate_or_skip(c):
    import tilesim  # noqa: PLC0415

    try:
        return tilesim.simulate(c, H200)
    except ValueError as e:
        if "no sourced latency" in str(e):
            pytest.skip(f"the H200 data lacks a pipe latency the engine needs: {e}")
        raise


def test_a_row_read_three_times_comes_from_the_l1_after_the_first_pass():
    """A block's 16 KiB row fits in its SM's L1: the two re-read passes hit there (Nsight Compute:
    95-100% L1 hits, validation/studies/row_kernels_fidelity.md), so re-reading costs L1 traffic
    and instructions, not L2 bytes, and keeping the row in registers is no slower."""
    cached = _simulate_or_skip(cfg(passes="two", cache="registers"))
    reread = _simulate_or_skip(cfg(passes="two", cache="none", unroll=4))
    assert cached.time_s <= reread.time_s * (1 + 1e-12)  # (both at the HBM's pace: equal up to rounding)
    # (a few more blocks per SM leave each a little less L1: within 5%)
    assert reread.traffic.l2_load_bytes == pytest.approx(cached.traffic.l2_load_bytes, rel=0.05)
    assert reread.traffic.l1_wavefronts > 1.4 * cached.traffic.l1_wavefronts  # 3 reads and a write vs 1 and 1
    x_bytes = 16384 * 4096 * F32  # 4x the L2: x comes from HBM once
    assert cached.traffic.hbm_read_bytes == pytest.approx(x_bytes, rel=0.02)


def test_the_simulated_row_cache_conflicts_only_with_a_thread_per_row():
    block = _simulate_or_skip(cfg(rows=8192, cols=1024, cache="shared", unroll=2))
    thread = _simulate_or_skip(cfg(rows=8192, cols=1024, variant="thread_row", threads=32, cache="shared"))
    assert block.traffic.smem_conflict_wavefronts == 0
    assert thread.traffic.smem_conflict_wavefronts > 0


# ---- the float32 tolerance -----------------------------------------------------------------------
def _emulated_rel_err(rows: int, cols: int, row_threads: int, one_pass: bool, seed: int = 0) -> float:
    """y computed in float32 in the kernels' summation order (each thread sums its elements serially,
    then a pairwise tree across threads) on the runner's kind of inputs, against float64."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) + runner.ROW_OFFSET
         + runner.ROW_OFFSET_SPREAD * rng.standard_normal((rows, 1))).astype(np.float32)
    per = x.reshape(rows, -1, row_threads).transpose(0, 2, 1)  # rows x threads x serial elements

    def row_sum(a):
        p = np.cumsum(a, axis=2, dtype=np.float32)[:, :, -1]
        while p.shape[1] > 1:
            p = p[:, : p.shape[1] // 2] + p[:, p.shape[1] // 2:]
        return p[:, 0]

    inv = np.float32(1.0) / np.float32(cols)
    mean = row_sum(per) * inv
    if one_pass:
        var = np.maximum(row_sum(per * per) * inv - mean * mean, np.float32(0))
    else:
        d = per - mean[:, None, None]
        var = row_sum(d * d) * inv
    y = (x - mean[:, None]) / np.sqrt(var[:, None] + np.float32(runner.EPS))
    xd = x.astype(np.float64)
    m = xd.mean(axis=1, keepdims=True)
    ref = (xd - m) / np.sqrt(((xd - m) ** 2).mean(axis=1, keepdims=True) + runner.EPS)
    return float(np.linalg.norm(y - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("passes", ["one", "two"])
def test_the_tolerance_holds_for_the_worst_summation_order_with_margin(passes):
    """A thread summing a whole 65536-column row serially is the worst case of the family."""
    err = _emulated_rel_err(8, 65536, 1, passes == "one")
    assert err * 2 < runner.REL_TOL[passes]
    assert _emulated_rel_err(8, 65536, 256, passes == "one") < err  # a block's tree does better


# ---- the CUDA source and the suite ---------------------------------------------------------------
def test_kernel_source_names_one_unique_kernel_per_instantiation():
    src = runner.kernel_source(cfg())
    assert src.name_expressions == ("layernorm_block_row_one_registers_v4_t256_u1_s4",)
    assert f'extern "C" __global__ void __launch_bounds__(256) {src.name_expressions[0]}(' in src.code
    assert "-std=c++17" in src.options and not any(o.startswith("-arch") for o in src.options)
    names = {runner.kernel_name(c): c for c in suite()}
    for name, c in names.items():  # a name determines the template arguments
        assert runner.template_args(c) == runner.template_args(names[name])


def test_the_suite_spans_small_to_large_shapes_and_every_entry_fits_the_h200():
    configs = suite()
    assert len(configs) >= 50
    shapes = {(c.rows, c.cols) for c in configs}
    assert len(shapes) >= 3
    assert min(c for _, c in shapes) == 512 and max(c for _, c in shapes) == 65536
    assert any(r * c * F32 <= H200.l2_bytes / 2 for r, c in shapes)  # one fits in L2
    assert any(r * c * F32 >= 4 * H200.l2_bytes for r, c in shapes)  # one is several times L2
    assert any(c % 4 for _, c in shapes) and any(r % 256 for r, _ in shapes)  # ragged
    for c in configs:
        check_fits(c, H200)
    assert Counter(c.variant for c in configs).keys() == {"thread_row", "warp_row", "block_row"}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
@pytest.mark.parametrize("which", ["covering", pytest.param("every", marks=pytest.mark.slow)])
def test_every_suite_kernel_compiles_for_sm90_without_spilling(tmp_path, which):
    """Kernels that between them take every knob value of the suite (every suite kernel: -m slow)."""
    configs = suite()
    if which == "covering":
        configs = covering(configs, skip=("rows", "cols"), key=runner.kernel_name)
    cu = tmp_path / "layernorm_suite.cu"
    cu.write_text(runner.batch_source(configs))
    out = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-cubin", "-Xptxas", "-v",
                          "-o", str(tmp_path / "suite.cubin"), str(cu)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    compiled = set(re.findall(r"Compiling entry function '(\w+)'", out.stderr))
    assert compiled == {runner.kernel_name(c) for c in configs}
    spills = [int(n) for n in re.findall(r"(\d+) bytes spill stores", out.stderr)]
    assert spills and not any(spills)


# ---- the kernels run on the CPU (host emulation of layernorm.cu) ---------------------------------
HOST_EMULATION = r"""
// CUDA for the CPU (tests only): one std::thread per CUDA thread, the blocks of a grid one after the
// other (so a static array is a block's shared memory), a std::barrier per block (__syncthreads)
// and per warp (the shuffles: every lane of a warp that shuffles takes part, as in layernorm.cu).
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __align__(n) alignas(n)
#define __shared__ static
struct alignas(16) float4 { float x, y, z, w; };
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline float rsqrtf(float v) { return 1.0f / std::sqrt(v); }
struct uint3 { unsigned x, y, z; };
inline thread_local uint3 threadIdx, blockIdx;
namespace host_emu {
struct Warp { std::barrier<> bar{32}; float val[32]; };
inline thread_local std::barrier<>* block_barrier = nullptr;
inline thread_local Warp* warp = nullptr;
inline float* dyn_smem = nullptr;
template <class Kernel, class... Args>
void launch(Kernel kernel, unsigned blocks, unsigned threads, size_t smem_bytes, Args... args) {
  for (unsigned b = 0; b < blocks; ++b) {
    std::vector<float4> smem(smem_bytes / 16 + 1, float4{NAN, NAN, NAN, NAN});
    dyn_smem = &smem[0].x;
    std::barrier<> bar(threads);
    std::vector<std::unique_ptr<Warp>> warps;
    for (unsigned w = 0; w < threads / 32; ++w) warps.push_back(std::make_unique<Warp>());
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t, b] {
        threadIdx = uint3{t, 0, 0};
        blockIdx = uint3{b, 0, 0};
        block_barrier = &bar;
        warp = warps[t / 32].get();
        kernel(args...);
      });
    for (auto& th : pool) th.join();
  }
}
}  // namespace host_emu
inline void __syncthreads() { host_emu::block_barrier->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float v, int mask) {
  const unsigned lane = threadIdx.x & 31;
  host_emu::warp->val[lane] = v;
  host_emu::warp->bar.arrive_and_wait();
  const float got = host_emu::warp->val[lane ^ mask];
  host_emu::warp->bar.arrive_and_wait();
  return got;
}
"""
EMULATED = [  # small problems that reach every code path: partial slices, loop tails, partial blocks
    cfg(rows=3, cols=1000, threads=128),  # register slice 2 x 128 > 250 vectors: guarded
    cfg(rows=3, cols=512, passes="two", threads=64),  # complete slices: w, b all in flight
    cfg(rows=3, cols=1000, cache="none", unroll=2, threads=64),  # one loop iteration, then the tail
    cfg(rows=2, cols=999, passes="two", cache="shared", vector=1, unroll=4, threads=64),
    cfg(rows=2, cols=100, passes="two", cache="none", vector=1, threads=32),  # a block of one warp
    cfg(rows=5, cols=999, variant="warp_row", vector=1, threads=64),  # 2 rows per block: a partial one
    cfg(rows=7, cols=1000, variant="warp_row", passes="two", cache="shared", unroll=2, threads=128),
    cfg(rows=3, cols=4096, variant="warp_row", cache="none", unroll=4, threads=64),  # no tail
    cfg(rows=33, cols=37, variant="thread_row", passes="two", cache="none", vector=1, threads=32),
    cfg(rows=40, cols=100, variant="thread_row", cache="shared", unroll=2, threads=32),
    cfg(rows=70, cols=1000, variant="thread_row", cache="none", unroll=4, threads=64),
]


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    """One host program running every EMULATED configuration: ``prog INDEX DIR`` reads DIR/x.bin,
    w.bin, b.bin and writes DIR/y.bin."""
    if shutil.which("g++") is None:
        pytest.skip("g++ not on PATH")
    d = tmp_path_factory.mktemp("layernorm_emu")
    code = runner.batch_source(EMULATED)
    dyn = "extern __shared__ __align__(16) float row_smem[];"
    assert dyn in code
    code = code.replace(dyn, "float* row_smem = host_emu::dyn_smem;")
    cases = "\n".join(
        f"    case {i}: host_emu::launch({runner.kernel_name(c)}, {c.grid[0]}u, {c.threads}u, "
        f"{c.row_smem_bytes}u, (const float*)x.data(), (const float*)w.data(), (const float*)b.data(), "
        f"y.data(), {c.rows}, {c.cols}); break;" for i, c in enumerate(EMULATED))
    main = """
static std::vector<float> read(const std::string& path, size_t n) {
  std::vector<float> v(n);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f || std::fread(v.data(), 4, n, f) != n) std::exit(2);
  std::fclose(f);
  return v;
}
int main(int argc, char** argv) {
  const int idx = std::atoi(argv[1]), rows = std::atoi(argv[3]), cols = std::atoi(argv[4]);
  const std::string dir = argv[2];
  auto x = read(dir + "/x.bin", (size_t)rows * cols), w = read(dir + "/w.bin", cols), b = read(dir + "/b.bin", cols);
  std::vector<float> y((size_t)rows * cols, NAN);
  switch (idx) {
CASES
    default: return 3;
  }
  std::FILE* f = std::fopen((dir + "/y.bin").c_str(), "wb");
  std::fwrite(y.data(), 4, y.size(), f);
  std::fclose(f);
  return 0;
}
""".replace("CASES", cases)
    (d / "emu.cpp").write_text("#include <string>\n" + HOST_EMULATION + code + main)
    exe = d / "emu"
    out = subprocess.run(["g++", "-std=c++20", "-O1", "-pthread", "-o", str(exe), str(d / "emu.cpp")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return exe


@pytest.mark.parametrize("index", range(len(EMULATED)), ids=lambda i: FAMILY.full_label(EMULATED[i]))
def test_the_kernels_normalise_right_on_the_cpu(emulator, tmp_path, index):
    c = EMULATED[index]
    rng = np.random.default_rng(index)
    x = (rng.standard_normal((c.rows, c.cols)) + runner.ROW_OFFSET).astype(np.float32)
    w = rng.standard_normal(c.cols).astype(np.float32)
    b = rng.standard_normal(c.cols).astype(np.float32)
    for name, a in (("x", x), ("w", w), ("b", b)):
        (tmp_path / f"{name}.bin").write_bytes(a.tobytes())
    out = subprocess.run([str(emulator), str(index), str(tmp_path), str(c.rows), str(c.cols)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    y = np.frombuffer((tmp_path / "y.bin").read_bytes(), dtype=np.float32).reshape(c.rows, c.cols)
    assert np.isfinite(y).all(), "an element was not written"
    xd = x.astype(np.float64)
    m = xd.mean(axis=1, keepdims=True)
    ref = (xd - m) / np.sqrt(((xd - m) ** 2).mean(axis=1, keepdims=True) + runner.EPS) * w + b
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) <= runner.REL_TOL[c.passes]


# ---- on the GPU ----------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("c", [
    cfg(rows=3000, cols=1000, threads=128),
    cfg(rows=3000, cols=1000, passes="two", cache="shared", unroll=4),
    cfg(rows=1999, cols=999, vector=1, variant="warp_row", cache="none", unroll=4),
    cfg(rows=1999, cols=999, vector=1, variant="thread_row", cache="none", threads=128),
    cfg(rows=1999, cols=999, vector=1, variant="block_row", cache="registers"),
    cfg(rows=513, cols=4096, variant="warp_row", passes="two", cache="shared", threads=256, unroll=2),
    cfg(rows=64, cols=65536, passes="two", cache="none", unroll=4, threads=1024),
], ids=lambda c: FAMILY.full_label(c))
def test_the_kernels_match_the_float64_reference_on_the_gpu(c):
    pytest.importorskip("cupy")
    case = runner.prepare(c, seed=1)
    ok, rel_err, message = case.check()
    assert ok, message
    assert rel_err < runner.REL_TOL[c.passes]
    assert case.attributes["local_bytes"] == 0
    assert case.kernel_names == (runner.kernel_name(c),)
