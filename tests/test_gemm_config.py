"""Bad input is refused before anything runs, naming the field, the value and the limit."""

import pytest

from tilesim import GemmConfig, hardware, simulate
from tilesim.kernels.gemm.config import check_fits

H200 = hardware.load("h200", calibrated=False)


@pytest.mark.parametrize("kwargs,needles", [
    (dict(variant="reg2d", bm=128, tm=7), ("GemmConfig.tm = 7", "must divide bm = 128")),
    (dict(variant="reg2d", bn=128, tn=3), ("GemmConfig.tn = 3", "must divide bn = 128")),
    (dict(m=0), ("GemmConfig.m = 0", "positive")),
    (dict(k=-5), ("GemmConfig.k = -5", "positive")),
    (dict(bk=0), ("GemmConfig.bk = 0", "positive")),
    (dict(dtype="fp64"), ("GemmConfig.dtype = 'fp64'", "fp32")),
    (dict(variant="tensorcore"), ("GemmConfig.variant = 'tensorcore'", "naive")),
    (dict(pipeline="cp_async", stages=5), ("GemmConfig.stages = 5", "2..4")),
    (dict(variant="naive", vectorize=True), ("GemmConfig.vectorize = True",)),
    (dict(variant="reg2d", vectorize=True, k=1001), ("GemmConfig.k = 1001", "multiple of 4")),
])
def test_config_rules(kwargs, needles):
    base = dict(m=1024, n=1024, k=1024)
    base.update(kwargs)
    with pytest.raises(ValueError) as e:
        GemmConfig(**base)
    for needle in needles:
        assert needle in str(e.value)


@pytest.mark.parametrize("cfg,needles", [
    (GemmConfig(1024, 1024, 1024, "naive", bm=64, bn=64), ("threads = 4096", "max_threads_per_block = 1024")),
    (GemmConfig(1024, 1024, 1024, "warp", bm=256, bn=256, bk=32, wm=128, wn=128, wniter=4, tm=8, tn=8,
                vectorize=True, pipeline="cp_async", stages=4), ("smem_bytes", "smem_per_block_optin_bytes = 232448")),
    (GemmConfig(1024, 1024, 1024, "reg2d", regs_per_thread=300), ("regs_per_thread = 300", "max_regs_per_thread = 255")),
])
def test_hardware_limits(cfg, needles):
    with pytest.raises(ValueError) as e:
        check_fits(cfg, H200)
    for needle in needles:
        assert needle in str(e.value)
    with pytest.raises(ValueError):
        simulate(cfg, H200)  # the simulator refuses it too, before running


def test_unknown_hardware_lists_known_names():
    with pytest.raises(ValueError, match=r"unknown hardware 'b200'; known: a100_sxm4, h100_sxm, h200"):
        simulate(GemmConfig(64, 64, 64), "b200")
