"""tc_gemm rungs 2-4 (staged in shared memory, wmma and mma.sync): the lowering's instructions per warp and
k-step against the SASS of the suite's staged k-loops (nvcc 13.0 -arch=sm_90, nvdisasm -c: the loop body from
its label to its backward branch, one k-step an iteration), which Nsight Compute's smsp__inst_executed over
warps x k-steps at 4096^3 follows within the epilogue's few (validation/results/h200/tc_gemm/counters.csv:
108.4, 158.5, 143.7, 769.2, 885.5, 900.0, 930.8, 542.3 for the kernels below in order)."""

import pytest

from tilesim.cost.nvidia import step_cost
from tilesim.hardware import load
from tilesim.kernels.tc_gemm.config import TcGemmConfig
from tilesim.kernels.tc_gemm.lower import lower
from tilesim.program import Compute

H200 = load("h200")
BASE = dict(m=4096, n=4096, k=4096, instruction="mma_sync", staging="shared", bm=128, bn=128, bk=32)

#: (dtype, instruction, b_layout, wm, wn, layout, stages) -> SASS instructions of one loop iteration
SASS = {("fp16", "mma_sync", "row", 64, 32, "padded", 1): 104,
        ("fp16", "wmma", "row", 64, 32, "padded", 1): 156,
        ("bf16", "wmma", "col", 64, 32, "padded", 1): 140,
        ("tf32", "wmma", "row", 64, 32, "padded", 1): 762,
        ("tf32", "mma_sync", "row", 64, 64, "naive", 3): 880,
        ("tf32", "mma_sync", "row", 64, 64, "padded", 3): 896,
        ("tf32", "mma_sync", "row", 64, 64, "swizzled", 3): 971,
        ("tf32", "mma_sync", "col", 64, 32, "swizzled", 4): 549}


def _cfg(dtype, instruction, b_layout, wm, wn, layout, stages, **kw):
    return TcGemmConfig(**{**BASE, "dtype": dtype, "instruction": instruction, "b_layout": b_layout, "wm": wm,
                           "wn": wn, "layout": layout, "stages": stages, **kw})


def _cost(cfg):
    return step_cost(lower(cfg).phases[0].step, H200, cfg.warps)


def _per_warp(cfg) -> float:
    return _cost(cfg).issue / cfg.warps


@pytest.mark.parametrize("key", list(SASS))
def test_a_staged_k_step_issues_what_its_sass_loop_does(key):
    # within 15%: the tf32 wmma loop re-derives lane offsets each iteration (about 100 instructions) and
    # the swizzled tf32 Bcol loop swizzles its ldmatrix addresses (about 75), neither modelled
    assert _per_warp(_cfg(*key)) == pytest.approx(SASS[key], rel=0.15)


def test_a_register_staged_copy_costs_its_guards_and_64_bit_address():
    # s1 16-bit loops: 36 instructions for 4 copies besides the copies' LDG and STS, none per ldmatrix
    cfg = _cfg("fp16", "mma_sync", "row", 64, 32, "padded", 1)
    c = _cost(cfg)
    copies = 4 * cfg.warps
    assert c.load_instructions == pytest.approx(copies * (1 + 9))
    assert c.staging_instructions == copies


def test_a_tf32_k_step_rounds_every_fragment_register():
    # the tf32 mma.sync Bcol w64x32 loop: 96 FSETP and 96 predicated IMAD.IADD for 4 k-slices of 4 A fragments
    # (4 registers) and 4 B fragments (2): the fragment loads are the same ldmatrix as a tf32 step without
    # rounding would have, so the integer work beyond the loads' addresses is the rounding's
    cfg = _cfg("tf32", "mma_sync", "col", 64, 32, "swizzled", 4)
    ints = sum(op.count for op in lower(cfg).phases[0].step.compute if isinstance(op, Compute) and op.pipe == "int")
    c = _cost(cfg)
    loads = c.shared_load_instructions / cfg.warps
    assert loads == 24  # 4 A + 2 B-pair ldmatrix.x4 a k8 slice, as the SASS's 24 LDSM
    assert ints / cfg.warps - (12 + loads) == pytest.approx(2 * 96)


def test_a_tf32_mma_sync_k_step_issues_more_than_the_fp16_one_by_its_rounding_and_slices():
    fp16 = _per_warp(_cfg("fp16", "mma_sync", "col", 64, 32, "swizzled", 4))
    tf32 = _per_warp(_cfg("tf32", "mma_sync", "col", 64, 32, "swizzled", 4))
    # tf32 has twice the HMMA (m16n8k8) and k-slices of the fp16 k-step, and rounds 192 registers
    assert tf32 - fp16 > 192 + 32


def test_a_wmma_tf32_k_step_issues_four_hmma_per_fragment_mma():
    cfg = _cfg("tf32", "wmma", "row", 64, 32, "padded", 1)
    step = lower(cfg).phases[0].step
    issue = sum(op.count for op in step.compute if isinstance(op, Compute) and op.pipe == "issue")
    wmmas = (64 // 16) * (32 // 16) * (32 // 8) * cfg.warps
    assert _cost(cfg).mma_instructions + issue == 4 * wmmas  # 128 HMMA.1684 a warp, as the SASS
    assert _cost(cfg).tensor_flops == 2 * 128 * 128 * 32  # the work itself is unchanged
