"""The block-age probe (validation/calibration/age_probe): the .cu compiles for sm_90 without spills; the shared
memory that pins k blocks per SM, the L2 ring and the age analysis work on synthetic records (never a result)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from validation.calibration import age_probe as ap

CU = ap.KERNEL_SRC.read_text()


def test_constants_match_the_cuda_defines():
    for py, cu in (("THREADS", "AGE_THREADS"), ("SEGMENTS", "AGE_SEGMENTS"), ("REC", "AGE_REC"),
                   ("LINE_WORDS", "AGE_LINE_WORDS")):
        m = re.search(rf"#define {cu} (\d+)", CU)
        assert m and int(m.group(1)) == getattr(ap, py), py
    assert ap.F_BLOCK < ap.REC
    for kernel, _, _ in ap.BODIES.values():
        assert f"void __launch_bounds__(AGE_THREADS)\n{kernel}(" in CU


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_compiles_for_sm90_without_spills(tmp_path):
    p = subprocess.run(["nvcc", "-cubin", f"-arch={ap.ARCH}", "-O3", "-Xptxas", "-v", "-o", str(tmp_path / "a.cubin"),
                        str(ap.KERNEL_SRC)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert not re.search(r"[1-9]\d* bytes spill", p.stderr)
    for kernel, _, _ in ap.BODIES.values():
        assert f"'{kernel}'" in p.stderr


def test_smem_pins_k_blocks():
    s, res = 228 * 1024, 1024
    for k in ap.BLOCKS_PER_SM:
        per_block = ap.smem_for_blocks(k, s, res) + res
        assert k * per_block <= s < (k + 1) * per_block
    with pytest.raises(ValueError, match="k = 0"):
        ap.smem_for_blocks(0, s, res)
    with pytest.raises(ValueError, match="k = 16"):
        ap.smem_for_blocks(16, s, res)


def test_chase_ring_is_one_cycle():
    ring = ap.chase_ring(64, 3)
    nxt = ring[:: ap.LINE_WORDS]
    assert nxt[0] == 64 and (ring.reshape(64, ap.LINE_WORDS) == nxt[:, None]).all()
    seen, line = set(), 1
    for _ in range(63):
        seen.add(line)
        line = int(nxt[line])
    assert line == 1 and seen == set(range(1, 64))


def synthetic_raw(sms: int, loops: list[int], start_gap: int = 10) -> list[int]:
    """Records of ``sms`` SMs with len(loops) blocks each (block b on SM b % sms, started in block order),
    rank r's loop taking loops[r] clocks in equal segments; ns = clk."""
    k = len(loops)
    raw = [0] * (ap.REC * sms * k)
    for b in range(sms * k):
        r = b // sms
        start = 1000 + r * start_gap
        end = start + loops[r]
        rec = raw[b * ap.REC:(b + 1) * ap.REC]
        rec[ap.F_SMID], rec[ap.F_BLOCK] = b % sms, b
        rec[ap.F_START_CLK] = rec[ap.F_START_NS] = start
        rec[ap.F_END_CLK] = rec[ap.F_END_NS] = end
        for m in range(ap.SEGMENTS):
            rec[ap.F_MARK_CLK + m] = rec[ap.F_MARK_NS + m] = start + loops[r] * (m + 1) // ap.SEGMENTS
        raw[b * ap.REC:(b + 1) * ap.REC] = rec
    return raw


def test_analysis_equal_sharing_and_oldest_first():
    sms = 3
    equal = ap.analyse_runs([ap.parse_blocks(synthetic_raw(sms, [4000] * 4), 4 * sms)], 4, sms)
    assert equal["residency"][0]["resident"] and equal["sms_used"] == sms
    assert equal["loop_ratio"] == pytest.approx([1.0] * 4, abs=0.01)
    oldest_first = ap.analyse_runs([ap.parse_blocks(synthetic_raw(sms, [1000, 2000, 3000, 4000]), 4 * sms)], 4, sms)
    assert oldest_first["loop_ratio"] == pytest.approx([1, 2, 3, 4], rel=0.02)
    assert oldest_first["finish_frac"] == pytest.approx([0.25, 0.5, 0.75, 1.0], abs=0.02)
    assert oldest_first["age_order_finish_share"] == 1.0 and oldest_first["finish_pos"] == [0, 1, 2, 3]
    assert oldest_first["start_is_block_order_share"] == 1.0
    assert oldest_first["segment_ratio"][3][0] == pytest.approx(4.0, rel=0.01)


def test_residency_catches_a_second_wave_and_missing_sms():
    sms = 2
    # the youngest block starts after the oldest ends: not resident at once
    late = ap.analyse_runs([ap.parse_blocks(synthetic_raw(sms, [1000, 1000], start_gap=2000), 2 * sms)], 2, sms)
    assert not late["residency"][0]["resident"] and late["sms_used"] == 0 and "loop_ratio" not in late
    # one SM fewer than the device has
    short = ap.analyse_runs([ap.parse_blocks(synthetic_raw(sms, [1000, 1000]), 2 * sms)], 2, sms + 1)
    assert not short["residency"][0]["resident"]
    with pytest.raises(ValueError, match="records"):
        ap.parse_blocks([0] * ap.REC, 1)


def test_analyse_cli_reads_a_written_file(tmp_path, capsys):
    sms, k = 2, 2
    data = {"meta": {"sm_count": sms}, "rows": {"ffma_ilp.k2": {"k": k, "blocks": sms * k,
                                                               "raw": [synthetic_raw(sms, [1000, 1900])]}}}
    path = tmp_path / ap.RESULT_FILE
    path.write_text(json.dumps(data))
    assert ap.main(["--analyse", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ffma_ilp.k2" in out and out.count("1.00 1.90") == 2  # both age orders agree here


def test_block_order_and_start_order_differ():
    """Blocks that start in reverse index order: by block index the oldest (lowest index) is the fast one."""
    sms, k = 2, 2
    raw = synthetic_raw(sms, [1000, 2000], start_gap=-5)  # rank 1 (higher index) starts 5 clocks earlier
    blocks = ap.parse_blocks(raw, sms * k)
    by_block = ap.analyse_runs([blocks], k, sms, "block")
    by_start = ap.analyse_runs([blocks], k, sms, "start")
    assert by_block["loop_ratio"] == pytest.approx([1.0, 2.0]) and by_start["loop_ratio"] == pytest.approx([1.0, 0.5])
    assert by_block["start_is_block_order_share"] == 0.0
    with pytest.raises(ValueError, match="order"):
        ap.by_sm_in_age_order(blocks, "age")
