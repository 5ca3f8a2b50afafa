"""The HBM tile-streaming probe (validation/calibration/hbm_tiles_probe): the .cu compiles for sm_90 without
spills; the layouts' addresses (the kernel's rule, in Python) are what the docstring says and never overlap
between blocks or k-steps; the case summary and table work on synthetic records (never a result)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from validation.calibration import hbm_tiles_probe as ht
from validation.studies import engine_check

CU = ht.KERNEL_SRC.read_text()


def test_constants_match_the_cuda_defines_and_engine_check():
    for py, cu in (("REC", "HT_REC"), ("VEC_PER_THREAD", "HT_VEC_PER_THREAD"), ("FFMA_CHAINS", "HT_FFMA_CHAINS")):
        m = re.search(rf"#define {cu} (\d+)", CU)
        assert m and int(m.group(1)) == getattr(ht, py), py
    assert ht.SMEM_PER_SM_BYTES == engine_check.SMEM_PER_SM_BYTES
    assert ht.tile_bytes(4) == 4096 and ht.tile_bytes(8) == 8192  # dgstaged_outer_8x8's A tile
    with pytest.raises(ValueError, match="warps"):
        ht.tile_bytes(0)
    with pytest.raises(ValueError, match="blocks_per_sm"):
        ht.smem_bytes(0)


def test_smem_holds_each_case_to_its_blocks_per_sm():
    reserved = 1024  # per-block shared memory the driver reserves on sm_90 (CUDA C++ guide, cc 9.0)
    for bps in ht.BLOCKS_PER_SM:
        s = ht.smem_bytes(bps) + reserved
        assert bps * s <= 228 * 1024 < (bps + 1) * s, bps
        assert ht.smem_bytes(bps) >= ht.tile_bytes(max(ht.WARPS))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_compiles_for_sm90_without_spills(tmp_path):
    p = subprocess.run(["nvcc", "-cubin", f"-arch={ht.ARCH}", "-O3", "-Xptxas", "-v", "-o", str(tmp_path / "ht.cubin"),
                        str(ht.KERNEL_SRC)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert not re.search(r"[1-9]\d* bytes spill", p.stderr)
    assert "warning" not in p.stderr.lower()
    assert "'ht_tiles'" in p.stderr and "'ht_spin'" in p.stderr
    regs = int(re.search(r"Compiling entry function 'ht_tiles'.*?Used (\d+) registers", p.stderr, re.S).group(1))
    assert regs * 256 * 8 <= 65536  # 8 blocks of 8 warps fit the register file


@pytest.mark.parametrize("warps", ht.WARPS)
def test_layout_addresses(warps):
    blocks, iters = 3, 8
    tb = ht.tile_bytes(warps)
    seen: set[int] = set()
    for lay in ("contig", "pitch", "pitch_line"):
        p = ht.layout_params(lay, warps, iters)
        seen.clear()
        for b in range(blocks):
            for it in range(iters):
                offs = ht.vec_offsets(p, warps, b, it)
                assert len(offs) == tb // 16
                for o in offs:
                    assert b * p["block_stride"] <= o < (b + 1) * p["block_stride"]  # inside the block's region
                    for byte in range(o, o + 16, 16):
                        assert byte not in seen  # no byte is read twice: every k-step's tile is fresh
                        seen.add(byte)
                if lay == "contig":
                    assert offs == list(range(offs[0], offs[0] + tb, 16))  # one contiguous chunk
                    assert offs[0] == (b * iters + it) * tb  # as dgstaged: block b's k-step it at b * iters + it
                else:
                    rows = sorted({o // ht.PITCH_BYTES for o in offs})
                    assert len(rows) == tb // ht.ROW_BYTES  # 32 bytes from each of the block's rows
                    lines = {o // ht.LINE_BYTES for o in offs}
                    assert len(lines) == len(rows)
                    if lay == "pitch_line" and it:
                        prev = {o // ht.LINE_BYTES for o in ht.vec_offsets(p, warps, b, it - 1)}
                        assert not lines & prev  # a line never touched before
    p = ht.layout_params("pitch", warps, iters)
    same = {o // ht.LINE_BYTES for o in ht.vec_offsets(p, warps, 0, 0)}
    assert same == {o // ht.LINE_BYTES for o in ht.vec_offsets(p, warps, 0, 3)}  # four k-steps share a line
    assert ht.layout_params("none", warps)["loads"] == 0
    with pytest.raises(ValueError, match="layout"):
        ht.layout_params("diagonal", warps)
    with pytest.raises(ValueError, match="iters"):
        ht.layout_params("pitch_line", warps, ht.PITCH_BYTES // ht.LINE_BYTES + 1)


def test_cases_cover_the_grid():
    cs = ht.cases()
    assert len(cs) == len(ht.LAYOUTS) * len(ht.BLOCKS_PER_SM) * len(ht.WARPS) * len(ht.FFMA_PER_THREAD) == len(set(cs))
    assert ht.case_name("pitch", 4, 8, 512) == "pitch_4b_8w_f512"
    assert all(f % ht.FFMA_CHAINS == 0 for f in ht.FFMA_PER_THREAD)  # the kernel's loop steps by the chains
    assert ht.select_cases(cs, None) == cs
    sel = ht.select_cases(cs, "contig_,none_1b")
    assert {c[0] for c in sel} == {"contig", "none"} and all(c[1] == 1 for c in sel if c[0] == "none")
    with pytest.raises(ValueError, match="select"):
        ht.select_cases(cs, "nothing")


def test_summary_on_synthetic_records():
    blocks, iters = 2, 8
    rec = []
    for b in range(blocks):  # c0, c1, g0, g1, smid, sink
        rec += [100, 100 + 8000, 1_000 + b * 10, 1_000 + 4_000, b // 2, 0]
    steps = []
    for _b in range(blocks):
        steps += [5000] + [1000 if it % 4 == 0 else 300 for it in range(1, iters)]
    r = ht.summarize_case(rec, steps, blocks, iters, bytes_loaded=8000, event_s=[2e-6, 4e-6, 3e-6])
    assert r["event_bytes_per_s"] == pytest.approx(8000 / 3e-6)
    assert r["span_bytes_per_s"] == pytest.approx(8000 / 4e-6)
    assert r["first_step_cycles"]["value"] == 5000
    assert r["step_cycles"]["value"] == 300 and r["step_cycles"]["max"] == 1000
    assert r["step_by_phase4"] == {"0": 1000, "1": 300, "2": 300, "3": 300}
    assert r["sms_used"] == 1 and r["blocks_per_sm_seen"] == [2]
    assert r["block_cycles"]["value"] == 8000 and r["blocks_started_late"] == 0
    late = rec[:6] + [100, 8100, 6_000, 9_000, 1, 0]  # block 1 starts after block 0 ended
    assert ht.summarize_case(late, steps, blocks, iters, 8000, [1e-6])["blocks_started_late"] == 1
    raw = ht.raw_blocks(rec, blocks)
    assert raw == {"block_cycles": [8000, 8000], "start_ns": [0, 10], "smid": [0, 0]}
    text = ht.format_table({"cases": {"contig_1b_4w": r}, "errors": {"pitch_1b_4w": "boom"}})
    assert "contig_1b_4w" in text and "1000/300/300/300" in text and "FAILED" in text
    with pytest.raises(ValueError, match="steps_raw"):
        ht.summarize_case(rec, steps[:-1], blocks, iters, 8000, [1e-6])
    with pytest.raises(ValueError, match="event_s"):
        ht.summarize_case(rec, steps, blocks, iters, 8000, [])


def test_no_gpu_exits_2(monkeypatch, capsys):
    monkeypatch.setattr(ht.pc, "gpu_missing", lambda: "no CUDA device found")
    assert ht.main([]) == 2
    assert "hbm_tiles_probe: needs CuPy and an NVIDIA GPU" in capsys.readouterr().err
