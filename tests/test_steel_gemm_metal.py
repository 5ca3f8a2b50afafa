"""The steel_gemm family's generated Metal source and its MLX runner, on CPU (no Mac, no MLX needed)."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from tilesim.kernels.steel_gemm import SteelGemmConfig
from validation.families.steel_gemm import metal, runner

CONFIGS = [
    SteelGemmConfig(4096, 4096, 4096),  # MLX's default fp32 tile, the m5-gemm kernel
    SteelGemmConfig(4096, 4096, 4096, bm=128, bn=128, copy="double_buffer"),  # 64x64 patch (SIMD_TILE=8)
    SteelGemmConfig(1000, 1000, 1000, bm=64, bn=32, bk=32, wm=2, wn=2, edge="ragged"),
    SteelGemmConfig(1000, 1000, 1000, bm=64, bn=32, bk=8, wm=4, wn=1, edge="guards", copy="double_buffer"),
    SteelGemmConfig(512, 512, 512, bm=32, bn=64, bk=16, wm=1, wn=2, dtype="fp16"),
]


def _const(src: str, name: str) -> int:
    m = re.search(rf"TILE_CONST int {name} = (\d+);", src)
    assert m, name
    return int(m.group(1))


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.label)
def test_tile_constants_and_patch(cfg):
    s = metal.generate(cfg)
    fm, fn = cfg.frags
    for name, value in (("BM", cfg.bm), ("BN", cfg.bn), ("BK", cfg.bk), ("WM", cfg.wm), ("WN", cfg.wn),
                        ("TG_PAD", cfg.tg_pad), ("THREADS", cfg.threads), ("TM", fm), ("TN", fn),
                        ("BUFFERS", cfg.buffers), ("PM", cfg.patch[0]), ("PN", cfg.patch[1])):
        assert _const(s.full, name) == value
    # threadgroup memory as declared equals the family's tg_bytes
    lda, ldb = cfg.bk + cfg.tg_pad, cfg.bn + cfg.tg_pad
    assert cfg.buffers * (cfg.bm * lda + cfg.bk * ldb) * cfg.elem_bytes == cfg.tg_bytes
    assert "threadgroup elem_t As[BUFFERS * A_SLAB];" in s.body
    # the simdgroup patch: TM x TN accumulators and TM + TN operand fragments, all simdgroup_float8x8
    assert "simdgroup_float8x8 acc[TM][TN];" in s.body
    assert "simdgroup_float8x8 a_frag[TM];" in s.body and "simdgroup_float8x8 b_frag[TN];" in s.body
    assert "simdgroup_multiply_accumulate(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);" in s.body
    assert f"{cfg.patch[0]}x{cfg.patch[1]} of C as {fm}x{fn} fragments" in s.body
    assert f"typedef {metal.MSL_TYPES[cfg.dtype]} elem_t;" in s.header
    assert ("simdgroup_load(a_frag[i]" in s.body) == (cfg.dtype == "fp32")
    # launch: grid in threads (MLX / dispatchThreads), one threadgroup per tile
    assert s.threadgroup == (cfg.threads, 1, 1)
    assert s.grid == (-(-cfg.n // cfg.bn) * cfg.threads, -(-cfg.m // cfg.bm), 1)
    assert f"max_total_threads_per_threadgroup({cfg.threads})" in s.full
    assert s.full.count("{") == s.full.count("}")
    assert all(line.strip() in s.full for line in s.body.splitlines())  # the standalone kernel holds the body


def test_double_buffer_structure():
    sync = metal.generate(CONFIGS[0])
    db = metal.generate(SteelGemmConfig(4096, 4096, 4096, copy="double_buffer"))
    assert _const(sync.header, "BUFFERS") == 1 and _const(db.header, "BUFFERS") == 2
    for needle in ("staged_t<A_VECS, A_ITERS> sa;", "read_unchecked<BK, A_VECS, A_ITERS>(sa",
                   "write_staged<BK, LDA_TG, A_VECS, A_ITERS>(As + (cur ^ 1) * A_SLAB", "const int cur = kt & 1;",
                   "(As + cur * A_SLAB)"):
        assert needle in db.body and needle not in sync.body
    loop = lambda b: b[b.index("for (int kt"):]  # noqa: E731
    # one barrier per step (double buffer) vs two (sync: load, barrier, compute, barrier)
    assert loop(db.body).count("threadgroup_barrier") == 1
    assert loop(sync.body).count("threadgroup_barrier") == 2


def test_edges_aligned_ragged_guards():
    kw = dict(bm=64, bn=64, bk=16)
    aligned = metal.generate(SteelGemmConfig(1024, 1024, 1024, **kw))
    ragged = metal.generate(SteelGemmConfig(1000, 1000, 1000, edge="ragged", **kw))
    guards = metal.generate(SteelGemmConfig(1000, 1000, 1000, edge="guards", **kw))
    # aligned: no bounds checks, no function constants
    for needle in ("load_checked<", "read_checked<", "rows_left)", "function_constant", "align_M"):
        assert needle not in aligned.body, needle
    assert "function_constant" not in aligned.full and aligned.function_constants == ()
    # ragged: steel's function constants (200-203) select the unchecked pipeline; edge tiles checked
    for name, idx in metal.FUNCTION_CONSTANTS:
        assert f"constant bool {name} [[function_constant({idx})]];" in ragged.full
    assert ragged.function_constants == ("align_M", "align_N", "align_K", "align_ld")
    assert "if (align_M && align_N && align_K && align_ld) {" in ragged.body
    assert "const bool edge_tile =" in ragged.body and "if (edge_tile) {" in ragged.body
    assert "load_unchecked<" in ragged.body and "load_checked<" in ragged.body and "if (k_tail) {" in ragged.body
    assert "if (r < rows_left && c + e < cols_left)" in ragged.body
    # the MLX body carries no function-constant declaration: MLX gets them as template booleans
    assert "function_constant" not in ragged.body and "function_constant" not in ragged.header
    # guards: every load and store checked, no unchecked path, no function constants
    assert "load_checked<" in guards.body and "load_unchecked<" not in guards.body
    assert "simdgroup_store" not in guards.body and "if (r < rows_left && c + e < cols_left)" in guards.body
    assert guards.function_constants == () and "function_constant" not in guards.full


def test_function_constant_values_and_template():
    cfg = SteelGemmConfig(1000, 1024, 998, edge="ragged")
    assert metal.function_constant_values(cfg) == {"align_M": False, "align_N": True, "align_K": False,
                                                   "align_ld": False}
    assert metal.mlx_template(cfg) == [("align_M", False), ("align_N", True), ("align_K", False),
                                       ("align_ld", False)]
    assert metal.mlx_template(SteelGemmConfig(1024, 1024, 1024)) == []
    assert metal.function_constant_values(SteelGemmConfig(1024, 1024, 1024, edge="ragged")) == dict.fromkeys(
        ("align_M", "align_N", "align_K", "align_ld"), True)


def test_deterministic_and_distinct():
    for cfg in CONFIGS:
        assert metal.generate(cfg) == metal.generate(SteelGemmConfig(**{f: getattr(cfg, f) for f in cfg.__dataclass_fields__}))
    fulls = {metal.generate(c).full for c in CONFIGS}
    assert len(fulls) == len(CONFIGS)
    # the problem size is a runtime argument: same tiling, same kernel
    assert metal.generate(SteelGemmConfig(1024, 1024, 1024)).full == metal.generate(SteelGemmConfig(2048, 512, 64)).full


def test_refuses_cuda_only_copy():
    with pytest.raises(ValueError, match=r"^SteelGemmConfig\.copy = 'cp_async': a CUDA-only knob"):
        metal.generate(SteelGemmConfig(1024, 1024, 1024, copy="cp_async"))


def test_frag_coord_covers_the_fragment():
    """The lane layout in the header (frag_coord) hands each of the 64 elements to exactly one lane."""
    seen = set()
    for lane in range(32):
        quad = lane // 4
        x, y = (quad & 2) * 2 + (lane % 2) * 2, (quad & 4) + (lane // 2) % 4
        seen |= {(y, x), (y, x + 1)}
    assert seen == {(r, c) for r in range(8) for c in range(8)}
    assert "(quad & 2) * 2 + (lane % 2) * 2, (quad & 4) + (lane / 2) % 4" in metal.generate(CONFIGS[0]).header


# ----- runner -----------------------------------------------------------------------------------------------
def _no_mlx(monkeypatch):
    import builtins

    real = builtins.__import__

    def fake(name, *a, **k):
        if name == "mlx" or name.startswith("mlx."):
            raise ImportError("no mlx")
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", fake)


def test_runner_without_mlx_says_so_in_one_line(monkeypatch):
    _no_mlx(monkeypatch)
    out = io.StringIO()
    assert runner.main(["--size", "1024"], out=out) == 2
    text = out.getvalue()
    assert text.count("\n") == 1 and "needs MLX on Apple silicon" in text
    with pytest.raises(runner.MlxUnavailable, match="needs MLX on Apple silicon"):
        runner.build(SteelGemmConfig(1024, 1024, 1024))


def test_runner_bad_input_is_one_line_before_mlx(monkeypatch):
    _no_mlx(monkeypatch)
    out = io.StringIO()
    assert runner.main(["--size", "1024", "--bm", "256", "--bn", "256", "--bk", "32", "--wm", "1", "--wn", "1"],
                       out=out) == 2
    assert out.getvalue().count("\n") == 1 and "tg_bytes" in out.getvalue()


def test_runner_emit_needs_no_mlx(monkeypatch):
    _no_mlx(monkeypatch)
    out = io.StringIO()
    assert runner.main(["--emit", "--copy", "double_buffer", "--edge", "ragged", "--mnk", "1000", "999", "77"],
                       out=out) == 0
    assert out.getvalue() == metal.generate(SteelGemmConfig(1000, 999, 77, copy="double_buffer", edge="ragged")).full


def test_check_logic_with_fake_kernels():
    cfg = SteelGemmConfig(96, 64, 80, bm=32, bn=32, bk=16, edge="ragged")
    good = runner.check_correct(cfg, lambda a, b: a @ b)
    assert good.ok and good.rel_err < 1e-6 and good.unwritten == 0 and "ok" in good.message
    off = runner.check_correct(cfg, lambda a, b: (a @ b) * (1 + 1e-3))
    assert not off.ok and 5e-4 < off.rel_err < 2e-3 and "WRONG" in off.message

    def unwritten(a, b):
        c = (a @ b).astype(np.float32)
        c[-1, -3:] = np.nan  # the edge the kernel forgot
        return c
    r = runner.check_correct(cfg, unwritten)
    assert not r.ok and r.unwritten == 3
    assert not runner.check_correct(cfg, lambda a, b: (a @ b)[:-1]).ok  # wrong shape

    def boom(a, b):
        raise RuntimeError("pipeline creation failed")
    r = runner.check_correct(cfg, boom)
    assert not r.ok and "launch failed" in r.message


def test_tolerance_per_dtype():
    ref = np.ones((8, 8))
    for dtype, tol in runner.REL_TOL.items():
        cfg = SteelGemmConfig(8, 8, 8, bm=8, bn=8, bk=8, wm=1, wn=1, dtype=dtype)
        assert runner.compare(ref * (1 + tol / 2), ref, cfg).ok
        assert not runner.compare(ref * (1 + tol * 2), ref, cfg).ok
    # fp16 products of fp16-rounded inputs, summed in fp32 and rounded to fp16, pass the fp16 tolerance
    cfg = SteelGemmConfig(64, 64, 256, bm=32, bn=32, bk=16, dtype="fp16")
    res = runner.check_correct(cfg, lambda a, b: (a @ b).astype(np.float16))
    assert res.ok and res.rel_err > 1e-5


def test_round_to_dtype():
    x = np.array([1.0, 1 + 2**-9, 1 + 2**-12, -3.14159], dtype=np.float32)
    np.testing.assert_array_equal(runner.round_to_dtype(x, "fp16"), x.astype(np.float16).astype(np.float32))
    bf = runner.round_to_dtype(x, "bf16")
    assert (bf.view(np.uint32) & 0xFFFF).max() == 0 and bf[2] == 1.0 and abs(bf[3] + 3.140625) < 1e-6


def test_measure_checks_first_then_times_with_median():
    cfg = SteelGemmConfig(64, 64, 64, bm=32, bn=32, bk=16)
    calls = {"timed": 0, "flush": 0}
    durations = iter([9.0] * 3 + [1e-3, 3e-3, 2e-3, 5e-3, 4e-3])

    def time_one():
        calls["timed"] += 1
        return next(durations)

    def flush():
        calls["flush"] += 1
    m = runner.measure(cfg, lambda a, b: a @ b, time_one, flush=flush, warmup=3, reps=5, min_reps=5)
    assert m.check.ok and calls == {"timed": 8, "flush": 8}
    assert m.timing.reps == 5 and m.timing.median_s == pytest.approx(3e-3) and m.timing.flushed_l2
    assert m.tflops == pytest.approx(cfg.flops / 3e-3 * 1e-12)
    assert "median 3.000 ms" in m.line()
    # a wrong kernel is never timed
    calls["timed"] = 0
    bad = runner.measure(cfg, lambda a, b: -(a @ b), time_one, warmup=3, reps=5)
    assert not bad.check.ok and bad.timing is None and calls["timed"] == 0 and "not timed" in bad.line()


def test_runner_imports_no_mlx():
    """MLX is imported inside functions only, so the module imports on any machine (it did, above)."""
    src = open(runner.__file__).read()
    top = src[:src.index("class MlxUnavailable")]
    assert "import mlx" not in top
