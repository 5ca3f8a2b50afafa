"""Rung 5 of the tensor-core GEMM (``validation/families/tc_gemm/wgmma.py``, ``wgmma.cu``, ``tma.py``):
source generation and the tensor-map arguments on the CPU, every proposed configuration compiled by
nvcc for sm_90a in one batch (no spills), and on a GPU the results at small and ragged shapes."""

from __future__ import annotations

import ctypes
import shutil
from types import SimpleNamespace

import pytest

from tilesim.kernels.tc_gemm.config import TcGemmConfig
from validation.families.tc_gemm import tma, wgmma

BASE = dict(instruction="wgmma", layout="swizzled", staging="shared")


def cfg(m=256, n=512, k=256, **kw) -> TcGemmConfig:
    knobs = dict(dtype="fp16", b_layout="col", bm=128, bn=256, bk=64, wm=64, wn=256, stages=4, consumers=2)
    knobs.update(kw)
    return TcGemmConfig(m=m, n=n, k=k, **BASE, **knobs)


# ----- source generation ------------------------------------------------------------------------------
def test_proposed_suite_is_broad_and_valid():
    cs = wgmma.proposed_configs()
    assert len(wgmma.PROPOSED_SUITE) >= 25
    assert {c.dtype for c in cs} == {"fp16", "bf16", "tf32"}
    assert {c.consumers for c in cs} == {1, 2} and {c.cluster for c in cs} == {1, 2}
    assert {c.stages for c in cs} == {1, 2, 3, 4, 5} and {c.epilogue for c in cs} == {"direct", "shared"}
    assert all(not c.setmaxnreg and c.cluster == 1 for c in cs if c.stages == 1)
    assert min(c.bn for c in cs) == 64 and max(c.bn for c in cs) == 256
    assert not any(c.dtype == "tf32" and c.b_layout == "row" for c in cs)
    for c in cs:
        src = wgmma.kernel_source(c)
        assert src.name_expressions == (wgmma.kernel_name(c),)
        assert "-arch=sm_90a" in src.options
        assert 'extern "C"' in src.code and f"#define TC_KERNEL_NAME {wgmma.kernel_name(c)}\n" in src.code
    # one kernel per knob set: distinct labels give distinct names, shapes share them
    assert len({wgmma.kernel_name(c) for c in cs}) == len({c.label for c in cs})
    toml = wgmma.proposed_toml()
    assert toml.count("[[config]]") == len(wgmma.PROPOSED_SUITE) and 'instruction = "wgmma"' in toml


def test_wrapper_operands_match_instruction():
    w = wgmma.wgmma_wrapper("fp16", 256, trans_b=True)
    assert "m64n256k16.f32.f16.f16" in w and w.count('"+f"') == 128 and "%128, %129, 1, 1, 1, 0, 1;" in w
    w = wgmma.wgmma_wrapper("bf16", 64, trans_b=False)
    assert "m64n64k16.f32.bf16.bf16" in w and "%32, %33, 1, 1, 1, 0, 0;" in w
    w = wgmma.wgmma_wrapper("tf32", 128, trans_b=False)
    assert "m64n128k8.f32.tf32.tf32" in w and "%64, %65, 1, 1, 1;" in w  # no transpose operands


def test_geometry_rounds_to_clusters_and_adds_alignment_slack():
    c = cfg(m=3001, n=4000, k=2008, cluster=2)
    g = wgmma.geometry(c)
    assert g.grid == (24 * 16, 1, 1) and g.block == (384, 1, 1)  # ceil(3001/128) = 24 (even), ceil(4000/256)
    assert g.dynamic_smem_bytes == 4 * (128 + 256) * 64 * 2 + wgmma.SWIZZLE_ATOM_BYTES
    s = cfg(epilogue="shared", stages=2)
    assert wgmma.geometry(s).dynamic_smem_bytes == max(2 * 384 * 128, 128 * (256 * 4 + 32)) + 1024
    assert wgmma.group_m(c) == 16 and wgmma.group_m(cfg(bm=64, wm=64, consumers=1)) == 32


def test_check_rejects_what_the_kernel_lacks():
    ok = cfg()
    with pytest.raises(ValueError, match="instruction"):
        wgmma.check(SimpleNamespace(**{**ok.to_dict(), "instruction": "mma_sync"}))
    with pytest.raises(ValueError, match="tf32"):  # the config rejects it too; wgmma.py independently
        wgmma.check(SimpleNamespace(**{**ok.to_dict(), "dtype": "tf32", "bk": 32, "b_layout": "row"}))
    with pytest.raises(ValueError, match="multiple of 64"):
        wgmma.check(cfg(b_layout="row", bn=96, wn=96))
    with pytest.raises(ValueError, match="accumulators"):
        wgmma.check(cfg(bm=128, wm=128, consumers=1, bn=256, wn=256))
    with pytest.raises(ValueError, match="shared memory"):
        wgmma.check(cfg(stages=5))
    with pytest.raises(ValueError, match="bk"):
        wgmma.check(cfg(bk=32))
    with pytest.raises(ValueError, match="tensormap"):
        wgmma.kernel_source(ok, tensormap="global")
    assert "__constant__ TmaMap" in wgmma.kernel_source(ok, tensormap="constant").code


def test_the_one_buffer_kernel_replaces_the_ring_kernel_and_leaves_ring_sources_alone():
    one = cfg(stages=1, setmaxnreg=False)
    ring = cfg(stages=2)
    src, ring_src = wgmma.kernel_source(one).code, wgmma.kernel_source(ring).code
    assert "#define TC_STAGES 1\n" in src and "#define TC_SETMAXNREG 0\n" in src
    assert "__launch_bounds__(ONE_BUFFER_THREADS, 1)" in src and "__launch_bounds__(THREADS, 1)" not in src
    assert src.count("TC_KERNEL_NAME(") == 1 and "setmaxnreg.inc" not in src and "wgmma_wait<0>();" in src
    # a ring's source is wgmma.cu up to the one-buffer kernel, as it was before that kernel existed
    assert "ONE_BUFFER_THREADS" not in ring_src and "__launch_bounds__(THREADS, 1)" in ring_src
    body = wgmma.KERNEL_FILE.read_text()
    assert ring_src.endswith(body.split("// ===== the one-buffer kernel")[0].split("// ----- PTX helpers")[1])
    assert wgmma.kernel_name(one).endswith("_s1_c2_cl1_direct_nosetmaxnreg")
    g = wgmma.geometry(one)
    assert g.block == (256, 1, 1) and g.dynamic_smem_bytes == (128 + 256) * 64 * 2 + wgmma.SWIZZLE_ATOM_BYTES
    assert wgmma.geometry(cfg(stages=1, setmaxnreg=False, bm=64, wm=64, consumers=1)).block == (128, 1, 1)
    with pytest.raises(ValueError, match="setmaxnreg = True: must be False with stages = 1"):
        wgmma.check(SimpleNamespace(**{**one.to_dict(), "setmaxnreg": True}))
    with pytest.raises(ValueError, match="cluster = 2: must be 1 with stages = 1"):
        wgmma.check(SimpleNamespace(**{**one.to_dict(), "cluster": 2}))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_a_one_buffer_kernel_compiles_for_sm90a_with_the_estimated_registers():
    from validation.harness.compile import compile_source

    one = cfg(m=3001, n=4000, k=2008, stages=1, setmaxnreg=False, bn=128, wn=128)
    src = wgmma.kernel_source(one)
    r = compile_source(src.code, wgmma.OPTIONS, "sm_90a", label="tc_gemm wgmma one buffer")
    k = r["kernels"][wgmma.kernel_name(one)]
    assert k["spill_store_bytes"] == 0 and k["local_bytes"] == 0, k
    assert k["static_smem_bytes"] == wgmma.STATIC_SMEM_BYTES
    assert abs(k["regs_per_thread"] - one.estimated_regs) <= 8, (k["regs_per_thread"], one.estimated_regs)


# ----- tensor-map arguments (no driver) ---------------------------------------------------------------
def test_operand_maps_col_and_row():
    a, b = tma.operand_maps(cfg(m=3001, n=4000, k=2008), 0x1000, 0x2000)
    assert (a.global_dims, a.global_strides_bytes, a.box_dims) == ((2008, 3001), (4016,), (64, 128))
    assert (b.global_dims, b.global_strides_bytes, b.box_dims) == ((2008, 4000), (4016,), (64, 256))
    assert a.data_type == tma.DATA_TYPE_FLOAT16 and a.swizzle == tma.SWIZZLE_128B and a.oob_fill == 0
    assert a.box_bytes + b.box_bytes == (128 + 256) * 64 * 2  # the kernel's expect_tx per stage
    _, b = tma.operand_maps(cfg(m=3001, n=4000, k=2008, b_layout="row", dtype="bf16"), 0x1000, 0x2000)
    assert (b.global_dims, b.global_strides_bytes, b.box_dims) == ((4000, 2008), (8000,), (64, 64))
    assert b.data_type == tma.DATA_TYPE_BFLOAT16
    a, b = tma.operand_maps(cfg(dtype="tf32", bk=32), 0, 0)
    assert a.box_dims == (32, 128) and b.box_dims == (32, 256) and a.data_type == tma.DATA_TYPE_FLOAT32
    dims, strides, box, elem = tma.ctypes_arrays(a)
    assert list(dims) == [256, 256] and list(strides) == [1024] and list(box) == [32, 128] and list(elem) == [1, 1]
    assert isinstance(dims, ctypes.Array) and ctypes.sizeof(dims) == 16 and ctypes.sizeof(box) == 8


def test_tiled_args_limits():
    with pytest.raises(ValueError, match="stride"):
        tma.operand_maps(SimpleNamespace(dtype="fp16", m=64, n=64, k=100, b_layout="col", bm=64, bn=64, bk=64), 0, 0)
    with pytest.raises(ValueError, match="aligned"):
        tma.tiled_args("A", "fp16", 8, (64, 64), (128,), (64, 64))
    with pytest.raises(ValueError, match="box dim 1"):
        tma.tiled_args("A", "fp16", 0, (64, 512), (128,), (64, 512))
    with pytest.raises(ValueError, match="128 B"):
        tma.tiled_args("A", "fp16", 0, (128, 64), (256,), (128, 64))
    with pytest.raises(ValueError, match="16-bit"):
        tma.operand_maps(SimpleNamespace(dtype="tf32", m=64, n=64, k=64, b_layout="row", bm=64, bn=64, bk=32), 0, 0)
    with pytest.raises(ValueError, match="128"):
        tma.as_kernel_arg(b"\0" * 64)


# ----- nvcc: every proposed configuration, one batch -----------------------------------------------------
@pytest.mark.slow  # one nvcc batch of every proposed configuration (~11 s): python -m pytest -m slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_proposed_configs_compile_for_sm90a_without_spills():
    from validation.harness.compile import compile_source

    cs = wgmma.proposed_configs() + [cfg(), cfg(bm=64, bn=64, wn=64, consumers=1, setmaxnreg=False)]
    code, names = wgmma.batch_source(cs)
    const_code, const_names = wgmma.batch_source([cfg(cluster=2)], tensormap="constant", prefix="cmap")
    r = compile_source(code + const_code, wgmma.OPTIONS, "sm_90a", label="tc_gemm wgmma batch")
    assert set(r["kernels"]) == set(names) | set(const_names)
    for name, k in r["kernels"].items():
        assert k["spill_store_bytes"] == 0 and k["local_bytes"] == 0, (name, k)
        # launch registers: 65536 / threads (setmaxnreg moves them from the producer to the consumers);
        # the one-buffer kernels (no producer) keep what ptxas allocates, under 65536 / (consumers x 128)
        if "_s1_" in name:
            assert k["regs_per_thread"] <= (255 if "_c1_" in name else 168), (name, k)
        else:
            assert k["regs_per_thread"] <= (168 if "_c2_" in name else 232), (name, k)
    # without setmaxnreg a consumer keeps its accumulators and addressing: the blind estimate's terms
    plain = cs[-1]
    regs = r["kernels"][wgmma.kernel_name(plain)]["regs_per_thread"]
    assert abs(regs - plain.estimated_regs) <= 8, (regs, plain.estimated_regs)


# ----- GPU: results against a float64 reference -----------------------------------------------------------
def _gpu():
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no GPU")
        major = cp.cuda.Device().compute_capability[0]
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no usable GPU: {e}")
    if major != "9":
        pytest.skip("wgmma needs compute capability 9.0 (sm_90a)")
    return cp


def _bf16_bits(x):
    import numpy as np

    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return r, (r.astype(np.uint32) << 16).view(np.float32)


def run_case(c: TcGemmConfig, *, tensormap="param", seed=0) -> float:
    """max |C - ref| / max |ref| of one launch of ``c`` on seeded inputs (needs a GPU)."""
    import numpy as np

    cp = _gpu()
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((c.m, c.k), dtype=np.float32)
    b_math = rng.standard_normal((c.k, c.n), dtype=np.float32)
    if c.dtype == "fp16":
        a_store, b_store = a.astype(np.float16), b_math.astype(np.float16)
        a_val, b_val = a_store.astype(np.float64), b_store.astype(np.float64)
    elif c.dtype == "bf16":
        a_store, a_f = _bf16_bits(a)
        b_store, b_f = _bf16_bits(b_math)
        a_val, b_val = a_f.astype(np.float64), b_f.astype(np.float64)
    else:
        a_store, b_store = a, b_math
        a_val, b_val = a.astype(np.float64), b_math.astype(np.float64)
    b_dev = b_store if c.b_layout == "row" else np.ascontiguousarray(b_store.T)
    out_dt = np.float32 if c.out_dtype == "fp32" else a_store.dtype
    da, db = cp.asarray(a_store), cp.asarray(b_dev)
    dc = cp.full((c.m, c.n), np.nan if out_dt != np.uint16 else 0xFFFF, dtype=out_dt)  # poisoned
    built = wgmma.build(c, da, db, dc, tensormap=tensormap)
    built.launch()
    cp.cuda.runtime.deviceSynchronize()
    out = dc.get()
    if out_dt == np.uint16:
        out = (out.astype(np.uint32) << 16).view(np.float32)
    ref = a_val @ b_val
    return float(np.nanmax(np.abs(out.astype(np.float64) - ref)) / np.abs(ref).max()) if np.isfinite(out).all() else 1.0


TOL = {("fp16", "fp32"): 1e-5, ("bf16", "fp32"): 1e-5, ("tf32", "fp32"): 5e-3,
       ("fp16", "input"): 2e-3, ("bf16", "input"): 1e-2}

GPU_CASES = [
    dict(),                                                       # 128x256x64, 2 consumers
    dict(cluster=2),
    dict(b_layout="row"),
    dict(b_layout="row", cluster=2, epilogue="shared"),
    dict(stages=2, epilogue="shared", out_dtype="input"),
    dict(dtype="bf16", b_layout="row", out_dtype="input"),
    dict(dtype="tf32", bk=32, bn=128, wn=128, cluster=2),
    dict(dtype="tf32", bk=64, bn=64, wn=64, stages=3, epilogue="shared"),
    dict(bm=128, wm=128, consumers=1, bn=128, wn=128, stages=3),
    dict(bm=64, wm=64, consumers=1, bn=128, wn=128, b_layout="row", stages=5),
    dict(shape="m64n128k16", b_layout="row"),
    dict(bm=64, wm=64, consumers=1, bn=64, wn=64, stages=2, setmaxnreg=False),  # fast.cu matmul_2's shape
    # one buffer, no producer warpgroup (stages 1)
    dict(stages=1, setmaxnreg=False),
    dict(stages=1, setmaxnreg=False, b_layout="row", epilogue="shared"),
    dict(stages=1, setmaxnreg=False, bm=64, wm=64, consumers=1, bn=64, wn=64),
    dict(stages=1, setmaxnreg=False, dtype="bf16", bm=64, wm=64, consumers=1, bn=128, wn=128, out_dtype="input",
         epilogue="shared"),
    dict(stages=1, setmaxnreg=False, dtype="tf32", bk=32, bn=128, wn=128),
]


@pytest.mark.gpu
@pytest.mark.parametrize("knobs", GPU_CASES, ids=lambda d: "-".join(f"{k}={v}" for k, v in d.items()) or "base")
@pytest.mark.parametrize("mnk", [(256, 512, 256), (3001, 4000, 2008), (200, 136, 72)], ids=lambda s: "x".join(map(str, s)))
def test_wgmma_matches_reference(knobs, mnk):
    m, n, k = mnk
    c = cfg(m=m, n=n, k=k, **knobs)
    err = run_case(c)
    assert err < TOL[(c.dtype, c.out_dtype)], (c.label, err)


@pytest.mark.gpu
def test_constant_memory_tensor_maps_and_module_sharing():
    c1, c2 = cfg(m=256, n=512, k=256, cluster=2), cfg(m=384, n=256, k=128, cluster=2)
    assert run_case(c1, tensormap="constant") < 1e-5
    assert run_case(c2, tensormap="constant", seed=1) < 1e-5  # same module, other maps copied in
    assert run_case(c1, tensormap="constant", seed=2) < 1e-5


def test_setmaxnreg_is_a_wgmma_knob_that_sets_the_blind_register_estimate():
    with_handover = cfg(bm=64, bn=64, wn=64, consumers=1)
    without = cfg(bm=64, bn=64, wn=64, consumers=1, setmaxnreg=False)
    assert with_handover.estimated_regs == 232  # the consumers' setmaxnreg count (wgmma.cu)
    assert without.estimated_regs == 64 * 64 // 128 + 28  # accumulators of a 64x64 warpgroup tile + base
    assert "#define TC_SETMAXNREG 0\n" in wgmma.kernel_source(without).code
    assert wgmma.kernel_name(without) != wgmma.kernel_name(with_handover)
    with pytest.raises(ValueError, match="setmaxnreg = False: must be True with instruction mma_sync"):
        TcGemmConfig(m=256, n=256, k=256, instruction="mma_sync", setmaxnreg=False)
    with pytest.raises(ValueError, match="TcGemmConfig.setmaxnreg = 'no'"):
        cfg(setmaxnreg="no")
