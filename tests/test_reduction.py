"""The reduction family: knobs rejected with their field named, the lowering describes what the CUDA
kernels do (bytes, bank conflicts, barriers, shuffles, launches), every suite kernel compiles with
nvcc (when installed), and the sums are right on a GPU (marked gpu)."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from suite_cover import covering

from tilesim import hardware
from tilesim.cost.access import smem_wavefronts
from tilesim.kernels import registry
from tilesim.kernels.reduction import ReductionConfig, check_fits, counts, lower
from tilesim.kernels.reduction.config import LADDER, VARIANTS
from tilesim.program import Affine, Atomic, Compute, Shuffle
from validation.families.reduction import runner
from validation.harness.source import KernelSource
from validation.harness.suite import load_suite

RESULTS = Path(__file__).resolve().parent.parent / "validation" / "results"
N = 1 << 22  # 4 Mi elements: a multiple of every chunk and grid product used below
FAST = dict(variant="shuffle", vector=4, unroll=4)


def _suite():
    return load_suite("reduction")


# ----- the knobs -------------------------------------------------------------------------------------
@pytest.mark.parametrize("knobs, field", [
    (dict(n=0), "n"),
    (dict(n=True), "n"),
    (dict(variant="tree"), "variant"),
    (dict(threads=1000), "threads"),
    (dict(threads=32), "threads"),
    (dict(threads=2048), "threads"),
    (dict(vector=3), "vector"),
    (dict(unroll=0), "unroll"),
    (dict(unroll=9), "unroll"),
    (dict(elems_per_thread=-1), "elems_per_thread"),
    (dict(finish="tree"), "finish"),
    (dict(regs_per_thread=0), "regs_per_thread"),
    (dict(regs_per_thread=256), "regs_per_thread"),
    (dict(variant="sequential", vector=4), "vector"),
    (dict(variant="first_add", unroll=2), "unroll"),
    (dict(variant="complete_unroll", grid=132), "grid"),
    (dict(variant="sequential", elems_per_thread=2), "elems_per_thread"),
    (dict(variant="first_add", elems_per_thread=1), "elems_per_thread"),
    (dict(FAST, elems_per_thread=24), "elems_per_thread"),  # not a multiple of vector*unroll
    (dict(FAST, elems_per_thread=64, grid=132), "grid"),  # both set
    (dict(FAST, grid=N // 4096 + 1), "grid"),  # more blocks than chunks
])
def test_bad_knob_is_rejected_naming_the_field(knobs, field):
    with pytest.raises(ValueError, match=rf"^ReductionConfig\.{field} = "):
        ReductionConfig(**{"n": N, **knobs})


def test_the_default_config_is_valid_and_every_field_is_documented():
    fam = registry.get("reduction")
    assert fam.config is ReductionConfig and fam.problem_fields == ("n",)
    cfg = ReductionConfig(n=N)
    fam.check_fits(cfg, hardware.load("h200"))
    for knob in fam.knobs():
        assert knob.doc, knob.name
    assert dict((k.name, k.choices) for k in fam.knobs())["variant"] == VARIANTS
    # the suite's strings become the fields' types
    made = fam.make(n=str(N), variant="grid_stride", vector="4", unroll="2", regs_per_thread="none")
    assert (made.vector, made.unroll, made.regs_per_thread) == (4, 2, None)


def test_geometry_follows_the_knobs():
    seq = ReductionConfig(n=N + 1, variant="sequential", threads=256)
    assert seq.blocks == N // 256 + 1 and seq.elements_per_thread == 1
    fa = ReductionConfig(n=N, variant="first_add", threads=512)
    assert fa.blocks == N // 1024 and fa.elements_per_thread == 2
    by_elems = ReductionConfig(n=N, **FAST, elems_per_thread=64)
    assert by_elems.blocks == N // (256 * 64) and by_elems.trips == 4
    by_grid = ReductionConfig(n=N, **FAST, grid=132)
    assert by_grid.blocks == 132 and by_grid.trips == math.ceil(N / 4096 / 132)
    assert ReductionConfig(n=N, **FAST).blocks == N // 4096  # one loop step per thread
    assert ReductionConfig(n=N, variant="shuffle", threads=512).smem_bytes == 16 * 4
    assert ReductionConfig(n=N, variant="grid_stride", threads=512).smem_bytes == 512 * 4
    # the label carries the knobs, not the size; the full label adds the size
    cfg = ReductionConfig(n=N, **FAST, grid=792, finish="atomic")
    assert cfg.label == "shuffle_t256_v4u4_g792_atomic"
    assert registry.get("reduction").full_label(cfg) == f"{cfg.label}@{N}"
    assert counts(cfg)["min_hbm_bytes"] == 4 * (N + 1) and counts(cfg)["flops"] == N - 1


def test_register_estimate_grows_with_the_values_in_flight_and_yields_to_the_override():
    small = ReductionConfig(n=N, variant="shuffle", vector=1, unroll=1).estimated_regs
    big = ReductionConfig(n=N, variant="shuffle", vector=4, unroll=8).estimated_regs
    assert big - small == (4 * 8 + 8) - (1 + 1)
    assert ReductionConfig(n=N, regs_per_thread=40).estimated_regs == 40


def test_check_fits_names_the_limit():
    h200 = hardware.load("h200")
    small = hardware.with_overrides(h200, max_threads_per_block=512)
    with pytest.raises(ValueError, match=r"ReductionConfig\.threads = 1024: exceeds max_threads_per_block"):
        check_fits(ReductionConfig(n=N, threads=1024), small)
    with pytest.raises(ValueError, match=r"ReductionConfig\.estimated_regs = 255: a block of 1024 threads does not fit"):
        check_fits(ReductionConfig(n=N, threads=1024, regs_per_thread=255), h200)


# ----- the lowering ----------------------------------------------------------------------------------
def _loaded_bytes(program) -> float:
    """Global bytes the lanes of all blocks load (active lanes x width x repeat x trips)."""
    per_block = sum(ph.trips * ld.repeat * sum(w.active_lanes * w.width_bytes for w in ld.instructions)
                    for ph in program.phases for ld in ph.step.loads)
    return per_block * program.launch.blocks


def _wavefronts(program) -> int:
    total = 0
    for ph in program.phases:
        for acc in ph.step.shared_loads + ph.step.shared_stores:
            total += ph.trips * acc.repeat * sum(smem_wavefronts(w.offsets, w.width_bytes) for w in acc.instructions)
    return total


def _ops(program, kind):
    return [op for ph in program.phases for op in ph.step.compute + ph.step.atomics if isinstance(op, kind)]


@pytest.mark.parametrize("knobs", [dict(variant=v) for v in LADDER]
                         + [dict(FAST, elems_per_thread=64), dict(FAST, variant="grid_stride", grid=128),
                            dict(variant="shuffle", vector=2, unroll=8, threads=128, grid=256)],
                         ids=lambda k: ReductionConfig(n=N, **k).label)
def test_a_streaming_pass_loads_each_input_byte_once(knobs):
    cfg = ReductionConfig(n=N, **knobs)
    first = lower(cfg)[0]
    assert first.launch.grid == (cfg.blocks, 1, 1) and first.launch.threads_per_block == cfg.threads
    assert _loaded_bytes(first) == 4 * N == first.min_hbm_bytes - 4 * cfg.blocks


def test_grid_stride_chunks_cover_the_input_exactly_once():
    cfg = ReductionConfig(n=N, **FAST, grid=128)
    stream = next(ph for ph in lower(cfg)[0].phases if ph.name == "stream")
    (coord,) = stream.step.loads[0].tile.coords
    assert isinstance(coord, Affine) and stream.trips == N // 4096 // 128
    seen = sorted(coord.evaluate({"k": k, "bx": bx}) for k in range(stream.trips) for bx in range(128))
    assert seen == list(range(N // 4096))
    assert stream.warp_groups == cfg.warps and stream.step.barriers == 0  # warps run on their own


def test_interleaved_trees_cost_more_than_sequential_addressing():
    """Harris's kernels 1-3: the strided interleaved tree has bank conflicts (more shared-memory
    wavefronts than sequential addressing); the divergent one computes a modulo per level."""
    prog = {v: lower(ReductionConfig(n=N, variant=v))[0] for v in LADDER[:3]}
    assert _wavefronts(prog["interleaved_strided"]) > 1.5 * _wavefronts(prog["sequential"])
    sfu = {v: sum(op.count for op in _ops(p, Compute) if op.pipe == "sfu") for v, p in prog.items()}
    assert sfu["interleaved_divergent"] > 0 == sfu["sequential"] == sfu["interleaved_strided"]
    # one barrier per level after sdata[tid] = v: log2(256) levels, then thread 0 writes
    assert sum(ph.step.barriers for ph in prog["sequential"].phases) == 1 + 8


def test_unrolling_the_last_warp_removes_its_barriers():
    barriers = {v: sum(ph.step.barriers * ph.trips for ph in lower(ReductionConfig(n=N, variant=v))[0].phases)
                for v in ("first_add", "unroll_last_warp", "complete_unroll")}
    assert barriers == {"first_add": 9, "unroll_last_warp": 3, "complete_unroll": 3}


def test_shuffle_reduces_with_two_rounds_of_five_shuffles():
    cfg = ReductionConfig(n=N, **FAST, threads=512)
    shuffles = _ops(lower(cfg)[0], Shuffle)
    assert [s.chain for s in shuffles] == [5, 5]
    assert sum(s.count for s in shuffles) == 5 * cfg.warps + 5


def test_finish_decides_the_launches():
    two = lower(ReductionConfig(n=N, **FAST, elems_per_thread=64))
    assert [p.launch.grid for p in two] == [(256, 1, 1), (1, 1, 1)]
    assert _loaded_bytes(two[1]) >= 4 * 256  # the second pass reads every partial
    assert not _ops(two[0], Atomic)
    memset, first = lower(ReductionConfig(n=N, **FAST, elems_per_thread=64, finish="atomic"))
    assert memset.launch.blocks == 1 and memset.phases[-1].step.stores[0].tile.tensor == "out"
    (atomic,) = _ops(first, Atomic)
    assert atomic.space == "global" and atomic.tile.tensor == "out"
    assert sum(p.flops for p in two) == sum(p.flops for p in (memset, first)) == N - 1


def test_every_suite_config_lowers_and_fits():
    h200 = hardware.load("h200")
    configs = _suite()
    assert len({c.label for c in configs}) >= 60 and len({c.n for c in configs}) >= 3
    for cfg in configs:
        check_fits(cfg, h200)
        for p in lower(cfg):
            assert p.launch.regs_per_thread >= 1 and p.phases


def test_simulated_strided_tree_has_bank_conflicts_and_sequential_none():
    import tilesim

    res = {v: tilesim.simulate(ReductionConfig(n=1 << 18, variant=v), "h200") for v in LADDER[:3]}
    strided, sequential = res["interleaved_strided"].traffic, res["sequential"].traffic
    assert strided.smem_conflict_wavefronts > 0 == sequential.smem_conflict_wavefronts
    assert strided.smem_wavefronts > sequential.smem_wavefronts
    assert res["interleaved_divergent"].traffic.instructions > strided.instructions > sequential.instructions


def test_simulated_streaming_pass_reads_the_input_once_from_hbm():
    import tilesim

    n = 1 << 24  # 64 MiB, beyond the 60 MiB L2
    r = tilesim.simulate(ReductionConfig(n=n, variant="grid_stride", vector=4, unroll=4, elems_per_thread=64), "h200")
    assert r.traffic.hbm_read_bytes == pytest.approx(4 * n, rel=0.01)
    assert r.time_s >= r.roofline_s


def test_simulated_shuffle_tree_uses_less_shared_memory_than_the_unrolled_tree():
    import tilesim
    from tilesim.hardware import MissingHardwareValue

    n = 1 << 22
    knobs = dict(vector=4, unroll=4, elems_per_thread=64)
    try:
        shuffle = tilesim.simulate(ReductionConfig(n=n, variant="shuffle", **knobs), "h200")
    except MissingHardwareValue as e:  # the H200 file has no sourced shuffle latency yet
        pytest.skip(str(e))
    tree = tilesim.simulate(ReductionConfig(n=n, variant="grid_stride", **knobs), "h200")
    # shuffles take shared-memory wavefronts too (one each), but move no shared-memory bytes
    assert shuffle.traffic.smem_bytes < tree.traffic.smem_bytes
    assert shuffle.traffic.l2_load_bytes == tree.traffic.l2_load_bytes


DIAGNOSTICS = RESULTS / "h200" / "reduction" / "diagnostics.csv"


def _warp_instructions(cfg) -> dict:
    """The lowering's warp instructions of every launch by pipe class ("other" apart); the cost model
    counts one BAR per warp and barrier."""
    from tilesim.cost.nvidia import step_cost

    h200, out = hardware.load("h200"), {}
    for prog in lower(cfg):
        warps = prog.launch.threads_per_block // 32
        for ph in prog.phases:
            c = step_cost(ph.step, h200, warps)
            n = prog.launch.blocks * ph.trips
            for (pipe, _), v in c.pipe_instructions.items():
                out[pipe] = out.get(pipe, 0.0) + v * n
            out["memory"] = out.get("memory", 0.0) + n * (c.load_instructions + c.staging_instructions
                                                          + c.shared_load_instructions + c.store_instructions
                                                          + c.barriers + c.shuffle_wavefronts)
    out["total"] = sum(out.values())
    return out


@pytest.mark.skipif(not DIAGNOSTICS.exists(), reason="no recorded H200 diagnostics")
def test_warp_instructions_per_pipe_match_nsight_compute(monkeypatch):
    """Per configuration whose blocks all loop the same number of times, the lowering's warp
    instructions against the H200's Nsight Compute counters: ALU work (pipe_alu), FMA-pipe work (FADD,
    IMAD, VIADD: pipe_fma), conversions and MUFU (pipe_xu), and all of them (inst_executed)."""
    import csv

    lowering = sys.modules["tilesim.kernels.reduction.lower"]
    monkeypatch.setitem(lowering.PIPE_OF, "other", "fp64")  # count "other" apart from the ALU work
    checked = 0
    with DIAGNOSTICS.open(newline="") as fh:
        for row in csv.DictReader(fh):
            cfg = registry.get("reduction").make(**{k: row[k] for k in (
                "n", "variant", "threads", "elems_per_thread", "grid", "vector", "unroll", "finish")})
            if row["status"] != "ok" or (not cfg.is_ladder and cfg.chunks % cfg.blocks):
                continue
            got = _warp_instructions(cfg)
            for pipe, metric, tol in (("int", "alu", 0.05), ("fma", "fma", 0.05), ("sfu", "xu", 0.0),
                                      ("total", None, 0.02)):
                col = f"smsp__inst_executed_pipe_{metric}.sum_count" if metric else "smsp__inst_executed.sum_count"
                meas = float(row[col])
                assert abs(got.get(pipe, 0.0) - meas) <= tol * meas, f"{cfg.label}@{cfg.n}: {pipe} {got.get(pipe)} vs {meas}"
            checked += 1
    assert checked >= 100


# ----- the runner (CPU) -------------------------------------------------------------------------------
def test_kernel_source_names_each_launch():
    src = runner.kernel_source(ReductionConfig(n=N, **FAST))
    assert isinstance(src, KernelSource)
    assert src.name_expressions == ("reduce_pass<7, 256, 4, 4, false>", "reduce_final<7, 256>")
    assert not any(o.startswith(("-arch", "--gpu-architecture")) for o in src.options)
    atomic = runner.kernel_source(ReductionConfig(n=N, variant="sequential", finish="atomic"))
    assert atomic.name_expressions == ("reduce_pass<2, 256, 1, 1, true>",)


def test_tolerance_is_the_fp32_floor_unless_many_sums_land_in_sequence():
    assert runner.tolerance(ReductionConfig(n=N, **FAST)) == runner.REL_TOL_FLOOR
    many = ReductionConfig(n=1 << 28, variant="sequential", threads=64, finish="atomic")
    assert runner.summation_depth(many) > many.blocks
    assert runner.REL_TOL_FLOOR < runner.tolerance(many) < 2e-3


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("which", ["covering", pytest.param("every", marks=pytest.mark.slow)])
def test_every_suite_kernel_compiles_with_nvcc_without_spills(tmp_path, which):
    """Kernels that between them take every knob value of the suite (every suite kernel: -m slow)."""
    configs = _suite()
    if which == "covering":
        configs = covering(configs, skip=("n",), key=lambda c: tuple(runner.mangled_names(c)))
    (tmp_path / "suite.cu").write_text(runner.batch_source(configs))
    r = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-cubin", "-Xptxas", "-v", "-o",
                        str(tmp_path / "suite.cubin"), str(tmp_path / "suite.cu")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    compiled = set(re.findall(r"Compiling entry function '([^']+)'", r.stderr))
    wanted = {name for cfg in configs for name in runner.mangled_names(cfg)}
    assert wanted <= compiled, sorted(wanted - compiled)[:5]
    assert not re.search(r"[1-9]\d* bytes spill", r.stderr)


def _loop_bodies(sass: str) -> list[list[str]]:
    """The instructions of each backward-branching loop in ``cuobjdump -sass`` output."""
    ins = [(int(a, 16), re.sub(r"^@!?U?P\w+\s+", "", t.strip()))
           for a, t in re.findall(r"/\*([0-9a-f]{4,5})\*/\s+([^;]*);", sass)]
    loops = []
    for addr, text in ins:
        m = re.search(r"\bBRA (?:`\(\.L_x_\d+\) )?0x([0-9a-f]+)$", text)
        if m and "BRA.DIV" not in text and int(m.group(1), 16) < addr:
            loops.append([t for a, t in ins if int(m.group(1), 16) <= a <= addr])
    return loops


@pytest.mark.skipif(not all(shutil.which(t) for t in ("nvcc", "cuobjdump", "nvdisasm")),
                    reason="nvcc, cuobjdump and nvdisasm needed")
def test_grid_stride_loops_match_the_lowering_in_the_sass(tmp_path):
    """The lowering's loop step: ``unroll`` 16/8/4-byte loads all issued before their first use,
    vector*unroll FADDs, and the loop's other instructions (read from cuobjdump -sass)."""
    from tilesim.kernels.reduction.lower import LOOP_STEP

    configs = [ReductionConfig(n=N, variant=v, vector=vec, unroll=u, threads=t)
               for v in ("grid_stride", "shuffle") for vec, u, t in ((1, 1, 256), (2, 8, 128), (4, 4, 256), (4, 8, 1024))]
    (tmp_path / "k.cu").write_text(runner.batch_source(configs))
    subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-cubin", "-o", str(tmp_path / "k.cubin"),
                    str(tmp_path / "k.cu")], check=True, capture_output=True, timeout=120)
    for cfg in configs:
        fn = runner.mangled_names(cfg)[0]
        sass = subprocess.run(["cuobjdump", "-sass", "-fun", fn, str(tmp_path / "k.cubin")], check=True,
                              capture_output=True, text=True).stdout
        body = next(b for b in _loop_bodies(sass) if sum("LDG" in t for t in b) == cfg.unroll)
        first_use = min(i for i, t in enumerate(body) if t.split()[0] == "FADD")
        assert max(i for i, t in enumerate(body) if "LDG" in t) < first_use, cfg.label
        assert sum(t.split()[0] == "FADD" for t in body) == cfg.vector * cfg.unroll, cfg.label
        assert abs(len(body) - cfg.unroll - cfg.vector * cfg.unroll - LOOP_STEP.total) <= 1, cfg.label


# ----- the kernels run on the CPU (host emulation of reduction.cu: threads, barriers, shuffles) ------
EMULATED = [dict(n=1000, variant=v, threads=64) for v in LADDER]  # a partial last block
EMULATED += [
    dict(n=70001, variant="sequential", threads=64),  # 1094 partials: the second pass loops, then a tail
    dict(n=777, variant="interleaved_strided", threads=128, finish="atomic"),
    dict(n=999, variant="complete_unroll", threads=128, finish="atomic"),
    dict(n=999, variant="grid_stride", threads=64),
    dict(n=5003, variant="grid_stride", threads=128, vector=2, unroll=8, grid=2),
    dict(n=16384, variant="grid_stride", threads=64, vector=4, unroll=4, grid=3),  # no partial chunk
    dict(n=4099, variant="shuffle", threads=64, vector=4, unroll=4, elems_per_thread=32),
    dict(n=10007, variant="shuffle", threads=64, vector=4, unroll=8, finish="atomic"),
    dict(n=1, variant="shuffle", threads=64, vector=4, unroll=2),
    dict(n=3001, variant="shuffle", threads=256, vector=1, unroll=3, grid=3, finish="atomic"),
]


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    """One host program with every EMULATED configuration: ``prog INDEX N IN OUT``."""
    if shutil.which("g++") is None:
        pytest.skip("g++ not on PATH")
    d = tmp_path_factory.mktemp("reduction_emu")
    cases = []
    for i, k in enumerate(EMULATED):
        c = ReductionConfig(**k)
        names = runner.kernel_names(c)
        if c.finish == "atomic":
            body = f"out = 0.0f; host_emu::launch({names[0]}, {c.blocks}u, {c.threads}u, x.data(), n, &out);"
        else:
            body = (f"host_emu::launch({names[0]}, {c.blocks}u, {c.threads}u, x.data(), n, partial.data()); "
                    f"host_emu::launch({names[1]}, 1u, {c.threads}u, (const float*)partial.data(), {c.blocks}, &out);")
        cases.append(f"    case {i}: {{ std::vector<float> partial({c.blocks}, NAN); {body} break; }}")
    main = """
#include <cmath>
#include <cstdio>
#include <cstdlib>
int main(int argc, char** argv) {
  const int idx = std::atoi(argv[1]), n = std::atoi(argv[2]);
  std::vector<float> x(n);
  float out = NAN;
  std::FILE* f = std::fopen(argv[3], "rb");
  if (std::fread(x.data(), 4, x.size(), f) != x.size()) return 2;
  std::fclose(f);
  switch (idx) {
CASES
    default: return 3;
  }
  f = std::fopen(argv[4], "wb");
  std::fwrite(&out, 4, 1, f);
  std::fclose(f);
  return 0;
}
""".replace("CASES", "\n".join(cases))
    (d / "emu.cpp").write_text('#include "host_emulation.h"\n' + runner.base_source() + main)
    exe = d / "emu"
    out = subprocess.run(["g++", "-std=c++20", "-O1", "-pthread", "-I", str(runner.KERNEL_FILE.parent), "-o",
                          str(exe), str(d / "emu.cpp")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return exe


@pytest.mark.parametrize("index", range(len(EMULATED)), ids=lambda i: f"{ReductionConfig(**EMULATED[i]).label}@{EMULATED[i]['n']}")
def test_the_kernels_sum_right_on_the_cpu(emulator, tmp_path, index):
    import numpy as np  # noqa: PLC0415

    cfg = ReductionConfig(**EMULATED[index])
    x = np.random.default_rng(index).random(cfg.n, dtype=np.float32)
    (tmp_path / "x.bin").write_bytes(x.tobytes())
    out = subprocess.run([str(emulator), str(index), str(cfg.n), str(tmp_path / "x.bin"), str(tmp_path / "out.bin")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = float(np.frombuffer((tmp_path / "out.bin").read_bytes(), dtype=np.float32)[0])
    ref = float(x.astype(np.float64).sum())
    assert math.isfinite(got), "the sum was not written"
    assert abs(got - ref) <= runner.tolerance(cfg) * ref, (got, ref)


# ----- the GPU ----------------------------------------------------------------------------------------
def _need_gpu():
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no CUDA device ({e})")
    return cupy


GPU_KNOBS = ([dict(variant=v, threads=t) for v in LADDER for t in (64, 1024)]
             + [dict(variant=v, vector=vec, unroll=u, threads=t)
                for v in ("grid_stride", "shuffle") for vec, u, t in ((1, 1, 64), (2, 8, 128), (4, 4, 256), (4, 8, 1024))]
             + [dict(FAST, grid=7), dict(FAST, elems_per_thread=256)])


@pytest.mark.gpu
@pytest.mark.parametrize("finish", ["second_pass", "atomic"])
@pytest.mark.parametrize("n", [1, 3_000_017])
@pytest.mark.parametrize("knobs", GPU_KNOBS, ids=lambda k: ReductionConfig(n=1 << 20, **k).label)
def test_gpu_sum_is_right(knobs, n, finish):
    _need_gpu()
    try:
        cfg = ReductionConfig(n=n, finish=finish, **knobs)
    except ValueError:
        pytest.skip("grid larger than the number of chunks at this size")
    case = runner.prepare(cfg, seed=1)
    ok, rel_err, message = case.check()
    assert ok, message
    assert case.kernel_names == runner.mangled_names(cfg)
    assert case.attributes["regs_per_thread"] > 0 and case.attributes["local_bytes"] == 0
    ok2, rel_err2, _ = case.check()  # a second launch (atomics: the memset is part of launch)
    assert ok2 and rel_err2 <= runner.tolerance(cfg)
