"""The CUDA GEMM kernels: source mapping (CPU), nvcc compilation (CPU, needs nvcc), a threaded CPU
emulation of the kernels' index math (needs g++), and correctness on the GPU (marked gpu)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tilesim import hardware
from tilesim.kernels.gemm.config import GemmConfig, check_fits
from validation.families.gemm import runner as g
from validation.families.gemm import selftest

H200 = hardware.load("h200")
ODD = (333, 257, 129)
ODD_VEC = (333, 260, 132)  # vectorized kernels need N and K multiples of 4; M stays ragged


def all_representative() -> list[GemmConfig]:
    """Every representative configuration, at ODD (or ODD_VEC when vectorized)."""
    return [GemmConfig(*(ODD_VEC if kn.get("vectorize") else ODD), **kn) for kn in g.REPRESENTATIVE_KNOBS]


# ----- pure mapping ------------------------------------------------------------------------------------
def test_representatives_cover_every_variant_and_knob():
    cfgs = g.representative_configs(*ODD_VEC)
    assert {c.variant for c in cfgs} == {"naive_uncoalesced", "naive", "smem", "reg1d", "reg2d", "warp"}
    assert {c.pipeline for c in cfgs} == {"none", "regs", "cp_async"}
    assert {c.stages for c in cfgs if c.pipeline == "cp_async"} == {2, 3, 4}
    assert any(c.vectorize for c in cfgs) and any(c.smem_pad for c in cfgs)
    assert any(c.variant == "warp" and c.wmiter > 1 for c in cfgs)
    for c in cfgs + g.fast_configs(4096, 4096, 4096):
        check_fits(c, H200)


@pytest.mark.parametrize("cfg", g.representative_configs(*ODD_VEC), ids=lambda c: c.label)
def test_kernel_source_matches_config(cfg):
    src = g.kernel_source(cfg)
    assert src == g.kernel_source(cfg)  # pure
    geo = g.launch_geometry(cfg)
    assert geo.grid == cfg.grid == (-(-cfg.n // cfg.bn), -(-cfg.m // cfg.bm), 1)
    assert geo.block == (cfg.threads, 1, 1)
    assert geo.dynamic_smem_bytes == cfg.smem_bytes
    (name,) = src.name_expressions
    assert name.startswith(f"gemm_{cfg.variant}<")
    assert f"template __global__ void {name}(" in src.code
    assert src.options == ("--std=c++17", "-lineinfo")
    assert not any(o.startswith(("-arch", "--gpu-architecture")) for o in src.options)


def test_kernel_name_encodes_knobs():
    cfg = GemmConfig(m=64, n=64, k=64, variant="warp", bm=128, bn=128, bk=16, wm=64, wn=64, wniter=4,
                     tm=8, tn=4, vectorize=True, smem_pad=4, pipeline="cp_async", stages=3)
    assert g.kernel_name(cfg) == "gemm_warp<128, 128, 16, 64, 64, 4, 8, 4, true, 4, 2, 3>"
    assert g.kernel_name(cfg.with_(vectorize=False, pipeline="regs", stages=2)).endswith("false, 4, 1, 2>")


def test_non_fp32_is_rejected():
    with pytest.raises(ValueError, match="dtype"):  # GemmConfig refuses it up front
        GemmConfig(m=64, n=64, k=64, variant="naive", bm=8, bn=32, dtype="fp16")
    cfg = GemmConfig(m=64, n=64, k=64, variant="naive", bm=8, bn=32)
    object.__setattr__(cfg, "dtype", "fp16")  # and the runner checks again
    with pytest.raises(ValueError, match="dtype"):
        g.kernel_source(cfg)
    with pytest.raises(ValueError, match="dtype"):
        g.compile_gemm(cfg)


@pytest.mark.parametrize("cfg, match", [
    (GemmConfig(m=64, n=64, k=64, variant="smem", bm=64, bn=32, bk=8), "max_threads_per_block"),
    (GemmConfig(m=64, n=64, k=64, variant="warp", bm=256, bn=256, bk=64, wm=64, wn=64, wniter=4,
                tm=8, tn=4, vectorize=True, pipeline="cp_async", stages=4), "smem_per_block_optin_bytes"),
])
def test_oversized_config_fails_with_simulator_error_before_compiling(cfg, match, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "cupy", None)  # any import of cupy would now fail
    with pytest.raises(ValueError, match=match) as info:
        g.compile_gemm(cfg)
    with pytest.raises(ValueError) as expected:
        check_fits(cfg, H200)
    assert str(info.value) == str(expected.value)


def test_module_imports_without_cupy_and_selftest_says_so(monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "cupy", None)
    assert selftest.main(["--selftest"]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "no usable GPU" in out[0]


def test_compile_error_message_has_name_options_and_log():
    e = g.GemmCompileError("gemm_naive<8, 32>", ("--std=c++17",), "error: boom", "src")
    assert "gemm_naive<8, 32>" in str(e) and "--std=c++17" in str(e) and "error: boom" in str(e)
    assert e.source == "src"


# ----- nvcc: every representative kernel compiles for sm_90, the fast ones without spills --------------
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_kernels_compile_with_nvcc(tmp_path):
    cfgs = all_representative() + g.fast_configs(4096, 4096, 4096)
    cu = tmp_path / "batch.cu"
    cu.write_text(g.batch_source(cfgs))
    r = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-std=c++17", "-lineinfo", "-Xptxas", "-v",
                        "-o", str(tmp_path / "batch.cubin"), str(cu)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    spills = dict(re.findall(r"Function properties for (\S+)\n\s+\d+ bytes stack frame, (\d+) bytes spill stores",
                             r.stdout + r.stderr))
    assert len(spills) == len({g.kernel_name(c) for c in cfgs})
    fast = {k: v for k, v in spills.items() if "9gemm_warp" in k and "Lb1E" in k}  # vectorized warp kernels
    assert fast and all(v == "0" for v in fast.values()), fast


# ----- CPU emulation: the kernels' index math, bounds checks and pipelines ----------------------------
_HARNESS = r"""
#include "gemm.cu"
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <thread>

// One std::thread per CUDA thread of a block, kept for every block of the grid (creating threads
// is what an emulated launch spends its time on): blocks run one after another, each starting from
// fresh NaN shared memory and an empty cp.async queue, and ends with every thread at the barrier.
template <class F>
static int run(F kern, int gx, int gy, int nt, size_t smem_bytes, int M, int N, int K, float alpha,
               const float* A, const float* B, float beta, float* C) {
    std::atomic<int> leftovers{0};
    float4* smem = smem_bytes ? static_cast<float4*>(::operator new(smem_bytes, std::align_val_t(16))) : nullptr;
    auto fresh_smem = [&] { for (size_t i = 0; i < smem_bytes / 4; ++i) reinterpret_cast<float*>(smem)[i] = NAN; };
    std::barrier<> bar(nt);
    std::vector<std::thread> ts;
    for (int t = 0; t < nt; ++t)
        ts.emplace_back([&, t] {
            threadIdx = uint3{unsigned(t), 0, 0};
            host_emu_barrier = &bar;
            dyn_smem4 = smem;
            for (int by = 0; by < gy; ++by)
                for (int bx = 0; bx < gx; ++bx) {
                    if (t == 0) fresh_smem();
                    bar.arrive_and_wait();  // shared memory is fresh before any thread of the block starts
                    blockIdx = uint3{unsigned(bx), unsigned(by), 0};
                    kern(M, N, K, alpha, A, B, beta, C);
                    if (!host_emu::pending.empty() || !host_emu::open_group.empty()) ++leftovers;
                    host_emu::pending.clear();
                    host_emu::open_group.clear();
                    bar.arrive_and_wait();  // every thread of the block is done before the next one starts
                }
        });
    for (auto& th : ts) th.join();
    if (smem) ::operator delete(smem, std::align_val_t(16));
    return leftovers.load();
}

static float* read(const char* path, size_t n) {
    float* p = new float[n];
    FILE* f = std::fopen(path, "rb");
    if (!f || std::fread(p, 4, n, f) != n) { std::perror(path); std::exit(2); }
    std::fclose(f);
    return p;
}

int main(int argc, char** argv) {
    const int idx = std::atoi(argv[1]), M = std::atoi(argv[2]), N = std::atoi(argv[3]), K = std::atoi(argv[4]);
    const float alpha = std::atof(argv[5]), beta = std::atof(argv[6]);
    const float* A = read(argv[7], size_t(M) * K);
    const float* B = read(argv[8], size_t(K) * N);
    float* C = read(argv[9], size_t(M) * N);
    int left = -1;
    switch (idx) {
%CASES%
    }
    if (left != 0) { std::fprintf(stderr, "unretired cp.async copies: %d\n", left); return 3; }
    FILE* f = std::fopen(argv[9], "wb");
    std::fwrite(C, 4, size_t(M) * N, f);
    std::fclose(f);
    delete[] A;
    delete[] B;
    delete[] C;
    return 0;
}
"""


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    if shutil.which("g++") is None:
        pytest.skip("g++ not installed")
    d = tmp_path_factory.mktemp("emu")
    names = list(dict.fromkeys(g.kernel_name(c) for c in all_representative()))
    cases = []
    for i, name in enumerate(names):
        cfg = next(c for c in all_representative() if g.kernel_name(c) == name)
        cases.append(f"    case {i}: left = run(&{name}, (N + {cfg.bn} - 1) / {cfg.bn}, (M + {cfg.bm} - 1) / {cfg.bm}, "
                     f"{cfg.threads}, {cfg.smem_bytes}, M, N, K, alpha, A, B, beta, C); break;")
    src = d / "harness.cpp"
    src.write_text(_HARNESS.replace("%CASES%", "\n".join(cases)))
    exe = d / "harness"
    kdir = Path(g.KERNEL_FILE).parent
    r = subprocess.run(["g++", "-std=c++20", "-O1", "-g", "-fsanitize=address", "-Wno-unknown-pragmas",
                        "-DGEMM_HOST_EMULATION", f"-I{kdir}", "-pthread", "-o", str(exe), str(src)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-6000:]
    return exe, d, {n: i for i, n in enumerate(names)}


def _emulate(emulator, cfg: GemmConfig, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    exe, d, index = emulator
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (cfg.m, cfg.k)).astype(np.float32)
    b = rng.uniform(-1, 1, (cfg.k, cfg.n)).astype(np.float32)
    c0 = rng.uniform(-1, 1, (cfg.m, cfg.n)).astype(np.float32)
    c = c0 if cfg.beta != 0 else np.full_like(c0, np.nan)
    for nm, arr in (("a", a), ("b", b), ("c", c)):
        arr.tofile(d / f"{nm}.bin")
    r = subprocess.run([str(exe), str(index[g.kernel_name(cfg)]), str(cfg.m), str(cfg.n), str(cfg.k),
                        repr(cfg.alpha), repr(cfg.beta), str(d / "a.bin"), str(d / "b.bin"), str(d / "c.bin")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    out = np.fromfile(d / "c.bin", dtype=np.float32).reshape(cfg.m, cfg.n)
    ref = cfg.alpha * (a.astype(np.float64) @ b.astype(np.float64)) + cfg.beta * c0.astype(np.float64)
    return out, ref


_EMU_SHAPES = [((150, 139, 45), (150, 140, 44)), ((33, 21, 13), (33, 20, 12))]


@pytest.mark.parametrize("knobs", g.REPRESENTATIVE_KNOBS, ids=lambda k: GemmConfig(m=64, n=64, k=64, **k).label)
@pytest.mark.parametrize("shapes", _EMU_SHAPES, ids=["multi_block", "single_ragged_tile"])
def test_cpu_emulation_is_correct(emulator, knobs, shapes):
    shape = shapes[1] if knobs.get("vectorize") else shapes[0]
    beta = -0.5 if shape[0] == 33 else 0.0
    cfg = GemmConfig(m=shape[0], n=shape[1], k=shape[2], alpha=1.5, beta=beta, **knobs)
    out, ref = _emulate(emulator, cfg)
    assert np.isfinite(out).all(), f"{np.count_nonzero(~np.isfinite(out))} outputs unwritten or NaN"
    rel = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    assert rel < g.REL_TOL, rel


# ----- GPU -----------------------------------------------------------------------------------------
def _need_gpu():
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no CUDA device ({e})")
    return cupy


@pytest.mark.gpu
@pytest.mark.parametrize("knobs", g.REPRESENTATIVE_KNOBS, ids=lambda k: GemmConfig(m=64, n=64, k=64, **k).label)
@pytest.mark.parametrize("shape", ["odd", "64"])
def test_gpu_correct(knobs, shape):
    _need_gpu()
    m, n, k = (ODD_VEC if knobs.get("vectorize") else ODD) if shape == "odd" else (64, 64, 64)
    for alpha, beta in ((1.0, 0.0), (1.5, -0.5)):
        cfg = GemmConfig(m=m, n=n, k=k, alpha=alpha, beta=beta, **knobs)
        comp = g.compile_gemm(cfg)
        at = comp.attributes
        assert at["regs_per_thread"] > 0 and at["max_threads_per_block"] >= cfg.threads
        res = g.check_correct(comp, seed=1)
        assert res.ok, res.message


@pytest.mark.gpu
def test_gpu_launch_rejects_bad_shapes():
    cupy = _need_gpu()
    comp = g.compile_gemm(GemmConfig(m=64, n=64, k=32, variant="naive", bm=8, bn=32))
    a = cupy.zeros((64, 32), cupy.float32)
    b = cupy.zeros((32, 64), cupy.float32)
    with pytest.raises(ValueError, match="b.shape"):
        comp.launch(a, cupy.zeros((64, 32), cupy.float32), cupy.zeros((64, 64), cupy.float32))
    with pytest.raises(ValueError, match="dtype"):
        comp.launch(a, b, cupy.zeros((64, 64), cupy.float64))
    with pytest.raises(ValueError, match="contiguous"):
        comp.launch(a, b, cupy.zeros((64, 128), cupy.float32)[:, ::2])
