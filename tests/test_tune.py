"""``tilesim tune``: the lower bound never exceeds the simulated time, the pruned search finds the
same best as simulating everything, bad inputs are one line, the command runs on CPU."""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner

from tilesim.api import resolve_hardware, simulate
from tilesim.cli import cli
from tilesim.kernels import registry
from tilesim.tune import load_space, lower_bound, parse_problem, reason_key, regret, tune

HW = resolve_hardware("h200")
#: a small problem per family (fast to simulate), and how many configurations of its space to check
SMALL = {"gemm": "256x256x256", "tc_gemm": "512x512x512", "reduction": "1048576", "softmax": "512x1024",
         "layernorm": "512x1024"}
SAMPLE = 6


def _valid(family: str, shape: str) -> list:
    fam = registry.get(family)
    problem = parse_problem(family, shape)
    out = []
    for knobs in load_space(family)(problem):
        try:
            cfg = fam.make(**knobs, **problem)
            fam.check_fits(cfg, HW)
        except ValueError:
            continue
        out.append(cfg)
    return out


@pytest.mark.parametrize("family", sorted(SMALL))
def test_bound_never_exceeds_the_simulated_time(family):
    cfgs = _valid(family, SMALL[family])
    assert len(cfgs) >= 100, "the space should hold many valid configurations"
    rng = random.Random(11)
    for cfg in rng.sample(cfgs, SAMPLE):
        try:
            b = lower_bound(cfg, HW)
        except ValueError:
            continue  # cannot launch: simulate refuses it too
        r = simulate(cfg, HW)
        assert b.time_s <= r.time_s, (registry.family_of(cfg).label(cfg), b, r.time_s)
        assert b.time_s > 0 and b.limiter in b.terms


def test_pruned_search_finds_the_same_best_as_simulating_everything():
    fam = registry.get("gemm")
    problem = parse_problem("gemm", "256x256x256")
    rng = random.Random(3)
    knobs = rng.sample([k for k in load_space("gemm")(problem) if k["variant"] in ("reg2d", "warp", "reg1d")], 160)
    full = tune("gemm", problem, HW, top=3, space=knobs, prune=False)
    pruned = tune("gemm", problem, HW, top=3, space=knobs)
    assert full.simulated == full.valid > 20
    assert pruned.simulated + pruned.pruned == pruned.valid == full.valid
    assert pruned.pruned > 0
    assert [c.row.cfg for c in pruned.ranked[:3]] == [c.row.cfg for c in full.ranked[:3]]
    assert pruned.enumerated == 160 == pruned.invalid_count + pruned.unfit_count + pruned.duplicates + pruned.valid
    # every simulated time is at least its bound
    assert all(c.bound.time_s <= c.time_s for c in full.ranked)
    assert fam.label(pruned.best.row.cfg) == pruned.best.row.label


def test_fixed_knobs_and_bad_api_inputs():
    res = tune("tc_gemm", "256x256x256", HW, top=2, fixed={"dtype": "bf16"},
               space=[{"bm": 64, "bn": 64, "wm": 32, "wn": 32}, {"bm": 64, "bn": 64, "wm": 64, "wn": 128}])
    assert res.enumerated == 2 and res.invalid_count == 1 and res.ranked[0].row.cfg.dtype == "bf16"
    for kwargs, text in ((dict(family="nope", problem="1x1x1"), "unknown kernel family"),
                         (dict(family="gemm", problem="4096x4096"), "needs 3 positive integers"),
                         (dict(family="gemm", problem="4096xAx1"), "needs 3 positive integers"),
                         (dict(family="gemm", problem="0x1x1"), "needs 3 positive integers"),
                         (dict(family="gemm", problem="8x8x8", top=0), "top = 0"),
                         (dict(family="gemm", problem="8x8x8", fixed={"bogus": 1}), "unknown knob")):
        with pytest.raises(ValueError, match=text):
            tune(hardware=HW, **kwargs)
    assert reason_key("GemmConfig.wm = 128: must divide bm = 64") == "GemmConfig.wm = #: must divide bm = #"


def test_regret():
    class M:
        def __init__(self, t):
            self.median_s = t
    assert regret([M(2.0), M(1.0), M(None)]) == pytest.approx(1.0)
    assert regret([M(1.0), M(1.5)]) == 0.0
    assert regret([M(None), M(1.0)]) is None


def _run(args):
    return CliRunner().invoke(cli, args, prog_name="tilesim", catch_exceptions=False)


def _one_line_error(args, text):
    res = CliRunner().invoke(cli, args, prog_name="tilesim")
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.strip().splitlines() if ln]
    assert len(lines) == 1 and lines[0].startswith("error:") and text in lines[0], res.output


def test_cli_bad_inputs_are_one_line(tmp_path):
    _one_line_error(["tune", "nope", "1x1x1"], "unknown kernel family")
    _one_line_error(["tune", "gemm", "4096x4096"], "needs 3 positive integers")
    _one_line_error(["tune", "gemm", "64x64x64", "--csv", str(tmp_path)], "is a folder")
    (tmp_path / "f").write_text("x")
    _one_line_error(["tune", "gemm", "64x64x64", "--json", str(tmp_path / "f" / "out.json")], "not a folder")
    _one_line_error(["tune", "gemm", "64x64x64", "--top", "0"], "--top")
    _one_line_error(["tune", "gemm", "64x64x64", "--set", "bogus=1"], "unknown gemm knob")
    _one_line_error(["tune", "gemm", "64x64x64", "--set", "dtype"], "KNOB=VALUE")
    _one_line_error(["tune", "gemm", "64x64x64", "--hardware", "nope"], "nope")
    _one_line_error(["tune", "steel_gemm", "64x64x64"], "offers no knob space")
    from validation.harness.suite import gpu_available

    if gpu_available() is not None:
        _one_line_error(["tune", "gemm", "64x64x64", "--measure-top", "2"], "needs a GPU")


def test_cli_runs_on_cpu(tmp_path):
    csv_path = tmp_path / "t.csv"
    res = _run(["tune", "reduction", "65536", "--top", "3", "-j", "2", "--csv", str(csv_path), "--json", "-"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output[res.output.index("{"):])
    counts = doc["counts"]
    assert counts["enumerated"] == counts["invalid"] + counts["duplicates"] + counts["unfit"] + counts["valid"]
    assert counts["valid"] == counts["pruned"] + counts["simulated"] and counts["simulated"] >= 3
    best = doc["ranked"][0]
    assert best["rank"] == 1 and best["lower_bound_s"] <= best["time_s"]
    lines = csv_path.read_text().splitlines()
    assert len(lines) == counts["simulated"] - counts["failed"] + 1 and "lower_bound_s" in lines[0]
