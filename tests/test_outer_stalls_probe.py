"""The recorded Nsight Compute profile of the engine check's fp32 loops (outer_stalls_probe), read without a GPU."""

from __future__ import annotations

import json
from pathlib import Path

from validation.calibration import outer_stalls_probe as osp
from validation.harness.suite import recorded_dir
from validation.studies import engine_check

RECORD = recorded_dir("calibration") / "outer_stalls_ncu"


def test_the_recorded_file_is_what_merging_the_recorded_csv_gives(tmp_path):
    for name in (osp.PROFILE_FILE,):
        (tmp_path / name).write_text((RECORD / name).read_text())
    got = osp.merge_ncu(RECORD / "outer_stalls_ncu.csv", tmp_path)
    recorded = json.loads((RECORD / osp.RESULT_FILE).read_text())
    assert got["rows"].keys() == recorded["rows"].keys()
    for key, row in recorded["rows"].items():
        assert got["rows"][key]["summary"] == row["summary"], key
    assert len(recorded["rows"]) == 35  # lds_outer 12, staged_outer 9, gstaged_outer 7, dgstaged_outer 7


def test_a_lone_warp_per_scheduler_hides_most_of_its_shared_load_latency():
    """One block of 4 warps an SM (one warp a scheduler), shared tiles only: an instruction every 1.44 to 1.94
    cycles, 0.15 to 0.63 of them waiting on shared loads (short scoreboard)."""
    rows = json.loads((RECORD / osp.RESULT_FILE).read_text())["rows"]
    lone = [k for k in rows if k.endswith(("_4w", "_4w_R1")) and not k.startswith("dgstaged")]
    assert len(lone) == 7
    for k in lone:
        s = rows[k]["summary"]
        assert 1.4 <= s["cycles_per_issue"] <= 1.95, k
        assert s["stalls_per_issue"]["short_scoreboard"] <= 0.64, k
        assert abs(s["warps_active_per_scheduler"] - 1.0) < 0.01, k


def test_stall_summaries_count_cycles_per_issued_instruction():
    m = {osp.STALL_METRIC.format("selected"): 1000.0, osp.STALL_METRIC.format("short_scoreboard"): 500.0,
         "smsp__inst_executed_op_shared_ld.sum": 10.0, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": 30.0}
    s = osp.row_summary(m)
    assert s["cycles_per_issue"] == 1.5
    assert s["stalls_per_issue"] == {"selected": 1.0, "short_scoreboard": 0.5}
    assert s["wavefronts_per_shared_load"] == 3.0


def test_unknown_metrics_are_left_out_of_the_ncu_list():
    query = "\n".join(m.split(".")[0] + "  some description" for m in osp.METRICS[:3])
    assert osp.metrics_list(query) == list(osp.METRICS[:3])
    assert osp.metrics_list(None) == list(osp.METRICS)


def test_engine_check_shows_the_stalls_beside_its_errors():
    rows = [{"case": "lds_outer 8x4_4w", "error": -0.16}, {"case": "not profiled", "error": 0.0}]
    table = engine_check.stall_table(rows, json.loads((RECORD / osp.RESULT_FILE).read_text()))
    lines = table.splitlines()
    assert len(lines) == 2 and lines[1].startswith("lds_outer 8x4_4w") and "-16%" in lines[1]
    assert Path(engine_check.DEFAULT_DIR / engine_check.STALLS_FILE).exists()
