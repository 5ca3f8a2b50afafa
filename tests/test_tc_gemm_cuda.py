"""The tc_gemm family's real kernels (validation/families/tc_gemm): wmma and mma_sync.

CPU: suite kernels of mma.py that between them take every knob value (every suite kernel with
``-m slow``) compile with nvcc for sm_90 (a few translation units compiled in parallel, cached by
source hash) without spills or stack; the runner's tolerance table, the bf16 encoding, kernel names,
shared-memory sizes and what mma.py rejects. GPU (``-m gpu``): every distinct suite kernel passes
``check()`` at the smoke test's small shapes.
"""

from __future__ import annotations

import re
import shutil
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from suite_cover import covering

from tilesim.kernels.tc_gemm.config import TcGemmConfig
from validation.families.tc_gemm import mma, runner, smoke
from validation.harness.suite_file import load_suite

TU_COUNT = 4  # translation units compiled in parallel


def _suite():
    return load_suite("tc_gemm")


def _mine(configs):
    return [c for c in configs if c.instruction in ("wmma", "mma_sync")]


# ----- CPU ------------------------------------------------------------------------------------------
def test_suite_size_and_coverage():
    cs = _mine(_suite())
    assert len(cs) >= 60
    assert {c.dtype for c in cs} == {"fp16", "bf16", "tf32"}
    assert {c.b_layout for c in cs} == {"row", "col"}
    assert {c.out_dtype for c in cs} == {"fp32", "input"}
    assert {c.layout for c in cs if c.staging == "shared"} == {"naive", "padded", "swizzled"}
    assert {c.stages for c in cs} == {1, 2, 3, 4, 5}
    assert {c.epilogue for c in cs} == {"direct", "shared"}
    assert {c.instruction for c in cs} == {"wmma", "mma_sync"}
    glob = [c for c in cs if c.staging == "global"]
    assert glob and all((c.m, c.n, c.k) in ((4096, 4096, 4096), (3001, 4000, 2008)) for c in glob)
    for c in cs:
        mma.validate(c)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("which", ["covering", pytest.param("every", marks=pytest.mark.slow)])
def test_suite_kernels_compile_without_spills(which):
    """Kernels that between them take every knob value of the suite (every suite kernel: -m slow)."""
    from validation.harness.compile import compile_source

    cs = _mine(_suite())
    if which == "covering":
        cs = covering(cs, skip=("m", "n", "k"), key=mma.kernel_name)
    names = list(dict.fromkeys(mma.kernel_name(c) for c in cs))
    first = {}
    for c in cs:
        first.setdefault(mma.kernel_name(c), c)
    groups = [[first[n] for n in names[i::TU_COUNT]] for i in range(TU_COUNT)]
    with ThreadPoolExecutor(TU_COUNT) as pool:
        results = list(pool.map(lambda g: compile_source(mma.batch_source(g), mma.OPTIONS, "sm_90",
                                                         label="tc_gemm suite"), groups))
    kernels = {}
    for r in results:
        kernels.update(r["kernels"])
    assert set(kernels) == set(names)
    for name, k in kernels.items():
        assert k["spill_store_bytes"] == 0 and k["spill_load_bytes"] == 0, (name, k)
        assert k["local_bytes"] == 0, (name, k)
        assert k["regs_per_thread"] <= 255, (name, k)
        c = first[name]
        assert k["static_smem_bytes"] == mma.static_smem_bytes(c), (name, k)


def test_tolerance_table_covers_every_dtype_and_output():
    for dt in ("fp16", "bf16", "tf32"):
        for out in ("fp32", "input"):
            cfg = TcGemmConfig(m=64, n=64, k=64, dtype=dt, out_dtype=out)
            tol = runner.tolerance(cfg)
            assert 0 < tol < 0.05
    tol = runner.REL_TOL
    assert tol[("fp16", "fp32")] < tol[("fp16", "fp16")] < tol[("bf16", "bf16")]
    assert tol[("bf16", "fp32")] < tol[("tf32", "fp32")]
    assert runner.stored_out_dtype(TcGemmConfig(m=64, n=64, k=64, dtype="tf32", out_dtype="input")) == "fp32"


def test_bf16_round_trip_and_rounding():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(10000).astype(np.float32)
    bits = runner.bf16_bits(x)
    assert bits.dtype == np.uint16
    y = runner.bf16_to_f32(bits)
    # representable values survive exactly; the rounding error is at most half an ulp (2^-8 relative)
    assert np.array_equal(runner.bf16_to_f32(runner.bf16_bits(y)), y)
    assert np.all(np.abs(y - x) <= np.abs(x) * 2.0**-8)
    # round to nearest, ties to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 -> 1 (even)
    ties = np.array([1 + 2.0**-8, 1 + 3 * 2.0**-8, -(1 + 2.0**-8), 1 + 2.0**-8 + 2.0**-20], dtype=np.float32)
    assert runner.bf16_to_f32(runner.bf16_bits(ties)).tolist() == [1.0, 1 + 2.0**-6, -1.0, 1 + 2.0**-7]
    assert runner.bf16_bits(np.array([1.0], np.float32))[0] == 0x3F80


def test_kernel_names_unique_and_valid():
    cs = _mine(_suite())
    by_name: dict[str, str] = {}
    for c in cs:
        name = mma.kernel_name(c)
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name), name
        code = mma.instantiation(c)
        assert by_name.setdefault(name, code) == code, f"{name}: two different kernels share the name"
    # distinct kernels get distinct names: the knobs that shape the code are all in the name
    a = TcGemmConfig(m=256, n=256, k=256, layout="padded")
    for change in (dict(layout="naive"), dict(stages=2), dict(epilogue="shared"), dict(b_layout="col"),
                   dict(dtype="bf16"), dict(out_dtype="input"), dict(bk=64), dict(wn=32), dict(bn=256)):
        assert mma.kernel_name(a) != mma.kernel_name(a.with_(**change)), change
    src = mma.kernel_source(a)
    assert src.name_expressions == (mma.kernel_name(a),)
    assert f'extern "C" __global__ void __launch_bounds__(128) {mma.kernel_name(a)}(' in src.code


def test_shared_memory_and_geometry():
    c = TcGemmConfig(m=8192, n=8192, k=8192, b_layout="col", bm=128, bn=256, bk=32, wm=64, wn=64, stages=4)
    assert mma.dynamic_smem_bytes(c) == 4 * (128 * 32 + 256 * 32) * 2
    g = mma.launch_geometry(c)
    assert g.grid == (32, 64, 1) and g.block == (256, 1, 1)
    pad = c.with_(layout="padded")
    assert mma.dynamic_smem_bytes(pad) == 4 * ((128 + 256) * (32 * 2 + 16))
    epi = c.with_(epilogue="shared", stages=2)
    assert mma.dynamic_smem_bytes(epi) == 128 * (256 + mma.C_PAD_FLOATS) * 4
    w = TcGemmConfig(m=100, n=104, k=64, instruction="wmma", layout="padded", bm=32, bn=32, bk=16, wm=16, wn=16,
                     stages=1)
    # A: 32 rows of 16 fp16 + 16 B pad; B: 16 rows of 32 fp16 + 16 B pad; or the 4 warps' 1 KiB scratches
    assert mma.dynamic_smem_bytes(w) == max(32 * (32 + 16) + 16 * (64 + 16), 4 * 1024)
    assert mma.launch_geometry(w).grid == (4, 4, 1)
    glob = TcGemmConfig(m=100, n=100, k=64, instruction="wmma", staging="global", stages=1, bm=64, bn=64,
                        wm=32, wn=32)
    assert mma.dynamic_smem_bytes(glob) == 0 and mma.static_smem_bytes(glob) == 4 * 2048


def test_rejections_name_the_field():
    base = TcGemmConfig(m=256, n=256, k=256)
    with pytest.raises(ValueError, match="layout"):
        mma.validate(base.with_(instruction="wmma", wm=64, wn=64))  # wmma + swizzled
    with pytest.raises(ValueError, match="shape"):
        mma.validate(base.with_(shape="m16n8k8"))
    with pytest.raises(ValueError, match="wn"):
        mma.validate(base.with_(bn=128, wn=8))
    with pytest.raises(ValueError, match="bk"):
        mma.validate(base.with_(layout="swizzled", bk=48))  # 6 chunks: not a power of two
    with pytest.raises(ValueError, match="smem"):
        mma.validate(base.with_(bm=256, bn=256, wm=64, wn=128, stages=5, bk=64))


def test_smoke_small_shapes_and_distinct_kernels():
    cs = _suite()
    kernels = smoke.distinct_kernels(_mine(cs))
    assert len(kernels) == len({mma.kernel_name(c) for c in _mine(cs)})
    c = next(iter(kernels.values()))
    shapes = smoke.small_configs(c)
    assert [s[0] for s in shapes][:2] == ["256x256x256", "257x264x136"]
    assert all(s[1] is not None for s in shapes)


def test_runner_dispatch():
    c = TcGemmConfig(m=256, n=256, k=256)
    assert runner.backend(c) is mma
    assert runner.kernel_source(c).name_expressions == (mma.kernel_name(c),)
    rows = runner.reference_rows([c, c.with_(dtype="bf16"), c.with_(b_layout="col")])
    assert [r["label"] for r, _ in rows] == ["cublas_fp16", "cublas_bf16"]


# ----- GPU ------------------------------------------------------------------------------------------
def _gpu_cases():
    try:
        kernels = smoke.distinct_kernels(_mine(_suite()))
    except Exception:  # noqa: BLE001
        return []
    return [pytest.param(c, id=k) for k, c in kernels.items()]


def _need_gpu():
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no CUDA device ({e})")


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", _gpu_cases())
def test_suite_kernel_correct_at_small_shapes(cfg):
    _need_gpu()
    results = smoke.check_small(cfg)
    bad = [r for r in results if r["status"] not in ("ok", "unsupported")]
    assert not bad, bad
    assert any(r["status"] == "ok" for r in results), results
