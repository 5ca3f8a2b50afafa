"""The recorded L1 counters of tc_gemm's WMMA-from-global rung beside the engine's L1 charge (no GPU)."""

from __future__ import annotations

from validation.studies import wmma_global_l1


def test_the_engine_charges_the_tag_stage_where_the_data_pipe_takes_more():
    rows = {r["config"]: r for r in wmma_global_l1.rows()}
    assert len(rows) == 10
    for name, r in rows.items():
        assert 7.8 <= r["sectors"] <= 8.01, name  # 8 sectors a request: LD.E fragments of 16-bit rows
        if "@4096" in name:  # rows 8192 B apart: one line position, the engine's count within 5% of the pipe's
            assert abs(r["engine_l1_cycles"] / r["data_wavefronts"] - 1) < 0.05, name
        elif "Brow" in name:  # rows 6002 B apart: the engine counts the tag stage, the data pipe takes more
            assert abs(r["engine_l1_cycles"] / r["tag_wavefronts"] - 1) < 0.01, name
            assert r["data_wavefronts"] > 1.2 * r["engine_l1_cycles"], name
            if "w32" in name:  # (the 16x16-warp one is predicted +3%)
                assert r["time_error"] < -0.15, name
