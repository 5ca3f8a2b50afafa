"""tc_feed_probe: constants match the .cu, the cases are valid, the model figures follow the access arithmetic."""

import re

import pytest

from validation.calibration import tc_feed_probe as t


def _defines() -> dict[str, int]:
    src = t.KERNEL_SRC.read_text()
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"#define (TCF_\w+) (\d+)\b", src)}


def test_defines_match_python():
    d = _defines()
    assert (d["TCF_REC"], d["TCF_BM"], d["TCF_BN"], d["TCF_BK"], d["TCF_STAGES"], d["TCF_RG_ROWS"]) == (
        t.REC, t.BM, t.BN, t.BK, t.STAGES, t.RG_ROWS)
    assert d["TCF_DEEP_STAGES"] == t.DEEP_STAGES
    assert all(f"tcf_{k}(" in t.KERNEL_SRC.read_text() for k in ("copy", "copy_s8", "wmma", "spin"))


def test_cases_unique_and_bad_fields_named():
    keys = [c.key for c in t.COPY_CASES] + [c.key for c in t.WMMA_CASES]
    assert len(keys) == len(set(keys))
    with pytest.raises(ValueError, match="a_pitch"):
        t.CopyCase("x", 2004, 2048, 256, 1, True)
    with pytest.raises(ValueError, match="stages"):
        t.CopyCase("x", 2048, 2048, 128, 2, True, t.DEEP_STAGES)
    assert all(c.smem_bytes >= c.stages * t.KSTEP_BYTES for c in t.COPY_CASES)
    with pytest.raises(ValueError, match="source"):
        t.WmmaCase("x", "hbm", 2048, 4)


def test_copy_instructions_cover_the_kstep_once():
    case = t.CopyCase("x", 2008, 4000, 128, 2, True)
    instrs = t.copy_warp_instructions(case, 3)
    addrs = [a for ins in instrs for a in ins]
    assert len(addrs) == len(set(addrs)) == t.KSTEP_BYTES // t.CHUNK_BYTES
    assert all(a % t.CHUNK_BYTES == 0 for a in addrs)  # 16-byte copies stay 16-byte aligned at pitch 4016 B


def test_ragged_rows_touch_more_sectors():
    aligned = t.copy_model(t.CopyCase("a", 2048, 2048, 256, 1, True))
    ragged = t.copy_model(t.CopyCase("r", 2008, 2048, 256, 1, True))
    assert aligned["sectors_per_kstep"] == aligned["ideal_sectors_per_kstep"] == 512
    # half the A rows (128 of them) start mid-sector: their 64-byte slab touches 3 sectors, not 2
    assert ragged["sectors_per_kstep"] == 512 + 64


def test_wmma_fragment_sectors():
    assert t.wmma_model(2048)["sectors_per_fragment"] == 16  # 16 rows x 32 bytes, sector-aligned
    assert t.wmma_model(2008)["sectors_per_fragment"] == 24  # odd rows start mid-sector: 2 sectors each


def test_main_without_gpu_exits_2(monkeypatch, capsys):
    monkeypatch.setattr(t.pc, "gpu_missing", lambda: "no CUDA device found")
    assert t.main(["--quick"]) == 2
    assert "needs CuPy" in capsys.readouterr().err
