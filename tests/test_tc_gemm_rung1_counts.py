"""tc_gemm rung 1 (WMMA from global memory): the lowering's instructions per warp and k-step against the
SASS of the suite's five rung-1 kernels (nvcc 13.0 -arch=sm_90, nvdisasm: the interior path of one k-loop
iteration), which Nsight Compute's instruction counts confirm (validation/results/h200/tc_gemm/counters.csv,
4096^3: 64.4, 110.6, 116.8, 139, 167 per warp and k-step)."""

import pytest

from tilesim.cost.nvidia import step_cost
from tilesim.hardware import load
from tilesim.kernels.tc_gemm.config import TcGemmConfig
from tilesim.kernels.tc_gemm.lower import lower

#: (dtype, out_dtype, b_layout, bm, bn, wm, wn) -> (SASS instructions per warp and k-step, MOVM among them)
SASS = {("fp16", "fp32", "row", 64, 64, 16, 16): (66, 4), ("fp16", "fp32", "row", 64, 64, 32, 32): (111, 8),
        ("bf16", "input", "row", 64, 64, 32, 32): (113, 8), ("fp16", "fp32", "col", 128, 128, 32, 64): (138, 0),
        ("tf32", "fp32", "col", 64, 64, 32, 32): (169, 0)}


def _per_warp(key):
    dtype, out, bl, bm, bn, wm, wn = key
    cfg = TcGemmConfig(m=4096, n=4096, k=4096, dtype=dtype, out_dtype=out, b_layout=bl, instruction="wmma",
                       staging="global", stages=1, layout="naive", bm=bm, bn=bn, bk=8 if dtype == "tf32" else 16, wm=wm, wn=wn)
    prog = lower(cfg)
    loop = prog.phases[0]
    cost = step_cost(loop.step, load("h200"), cfg.warps)
    return cost.issue / cfg.warps, cost.shuffle_wavefronts / cfg.warps


@pytest.mark.parametrize("key", list(SASS))
def test_rung1_instructions_per_warp_and_kstep_match_the_sass(key):
    got, movm = _per_warp(key)
    want, want_movm = SASS[key]
    assert got == pytest.approx(want, rel=0.08)
    assert movm == want_movm  # MOVM: one shared-memory wavefront each
