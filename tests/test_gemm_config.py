"""Bad input is refused before anything runs, naming the field, the value and the limit."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "tf32"])
def test_only_fp32_is_accepted(dtype):
    """The family is the FP32 FFMA ladder: other dtypes are refused up front, not in the lowering."""
    with pytest.raises(ValueError) as e:
        GemmConfig(1024, 1024, 1024, dtype=dtype)
    msg = str(e.value)
    assert msg.startswith(f"GemmConfig.dtype = {dtype!r}: ") and "fp32" in msg and "tensor-core" in msg
    assert len(msg.splitlines()) == 1


@pytest.mark.parametrize("pipeline, stages, label_end", [("none", 1, "t8x8"), ("regs", 2, "regs2"),
                                                        ("cp_async", 2, "cp_async2")])
def test_stages_default_to_one_without_a_pipeline_and_two_with_one(pipeline, stages, label_end):
    cfg = GemmConfig(1024, 1024, 1024, pipeline=pipeline)
    assert cfg.stages == stages and cfg.label.endswith(label_end)
    assert cfg == GemmConfig(1024, 1024, 1024, pipeline=pipeline, stages=stages)  # the number is stored
    assert cfg.to_dict()["stages"] == stages


def test_with_a_new_pipeline_takes_its_default_stages_unless_given():
    base = GemmConfig(1024, 1024, 1024)
    assert base.with_(pipeline="regs").stages == 2
    assert base.with_(pipeline="cp_async", stages=4).stages == 4
    assert base.with_(pipeline="cp_async", stages=3).with_(pipeline="none").stages == 1
    assert base.with_(bk=16).stages == 1
    with pytest.raises(ValueError, match="GemmConfig.stages = 3: must be 2"):
        GemmConfig(1024, 1024, 1024, pipeline="regs", stages=3)


def test_family_make_reads_stages_none_and_numbers():
    from tilesim.kernels import registry

    fam = registry.get("gemm")
    assert fam.make(m="64", n="64", k="64", pipeline="regs", stages="none").stages == 2
    assert fam.make(m="64", n="64", k="64", pipeline="cp_async", stages="3").stages == 3


@pytest.mark.parametrize("kwargs, needle", [
    (dict(vectorize="yes"), "GemmConfig.vectorize = 'yes'"),
    (dict(smem_pad=True), "GemmConfig.smem_pad = True"),
    (dict(stages=2.0, pipeline="regs"), "GemmConfig.stages = 2.0"),
    (dict(beta=float("nan")), "GemmConfig.beta = nan"),
    (dict(alpha="1"), "GemmConfig.alpha = '1'"),
    (dict(regs_per_thread=0), "GemmConfig.regs_per_thread = 0"),
])
def test_types_are_checked_up_front(kwargs, needle):
    with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace(".", r"\.")):
        GemmConfig(1024, 1024, 1024, **kwargs)


def test_every_knob_is_documented_with_its_choices():
    from tilesim.kernels import registry

    knobs = {k.name: k for k in registry.get("gemm").knobs()}
    assert all(k.doc for k in knobs.values()), [n for n, k in knobs.items() if not k.doc]
    assert knobs["variant"].choices == ("naive_uncoalesced", "naive", "smem", "reg1d", "reg2d", "warp")
    assert knobs["pipeline"].choices == ("none", "regs", "cp_async")
    assert knobs["dtype"].choices == ("fp32",) and knobs["stages"].default is None


def test_a_block_that_fits_no_sm_is_refused_by_check_fits():
    # 1024 threads x 255 registers: below the per-thread limit, far above the SM's register file
    cfg = GemmConfig(1024, 1024, 1024, "reg2d", bm=128, bn=128, tm=4, tn=4, regs_per_thread=255)
    with pytest.raises(ValueError, match=r"GemmConfig.regs_per_thread = 255 \(given\): a block of 1024 threads"):
        check_fits(cfg, H200)


_POW2 = st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128, 256])


@st.composite
def _knobs(draw):
    variant = draw(st.sampled_from(["naive_uncoalesced", "naive", "smem", "reg1d", "reg2d", "warp"]))
    staged = variant not in ("naive_uncoalesced", "naive")
    pipeline = draw(st.sampled_from(["none", "regs", "cp_async"])) if staged else "none"
    return dict(m=draw(st.integers(1, 700)), n=draw(st.integers(1, 700)), k=draw(st.integers(1, 300)),
                variant=variant, bm=draw(_POW2 | st.sampled_from([12, 48, 96])),
                bn=draw(_POW2 | st.sampled_from([12, 48, 96])), bk=draw(st.sampled_from([1, 2, 4, 8, 16, 32, 3, 12])),
                tm=draw(st.sampled_from([1, 2, 4, 8, 16, 3])), tn=draw(st.sampled_from([1, 2, 4, 8, 16, 3])),
                wm=draw(_POW2), wn=draw(_POW2), wniter=draw(st.sampled_from([1, 2, 4, 8])),
                vectorize=draw(st.booleans()) if variant in ("reg2d", "warp") else False,
                smem_pad=draw(st.sampled_from([0, 1, 2, 4, 5, 32])) if staged else 0, pipeline=pipeline,
                stages=draw(st.sampled_from([None, 2, 3, 4])) if pipeline == "cp_async" else None,
                beta=draw(st.sampled_from([0.0, 1.0])))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_knobs())
def test_whatever_passes_the_checks_lowers_and_simulates(knobs):
    """A configuration is refused by GemmConfig or check_fits with one line naming the field, or it
    lowers and simulates: nothing passes validation and then crashes."""
    try:
        cfg = GemmConfig(**knobs)
        check_fits(cfg, H200)
    except ValueError as e:
        assert str(e).startswith("GemmConfig.") and len(str(e).splitlines()) == 1, str(e)
        return
    r = simulate(cfg, H200)
    assert r.time_s > 0
