"""Progress of long commands (issue #11): a bar on a terminal, a line per percent on a piped standard
error, for sweeps, ``simulate --exact``, ``validate report``, engine-check and schedule replay."""

from __future__ import annotations

import re
import subprocess
import sys

from tilesim.cli.progress import PercentLines, progress

PCT = re.compile(r"^(?P<name>.+): (?P<pct>\d+)%(?: \((?P<done>\d+)/(?P<total>\d+)\))?$")


def _percent_lines(stderr: str, name: str) -> list[int]:
    out = []
    for line in stderr.splitlines():
        m = PCT.match(line)
        if m and m["name"] == name:
            out.append(int(m["pct"]))
    return out


def test_percent_lines_print_each_new_whole_percent_once(capsys):
    lines = PercentLines("work")
    for done in range(0, 301):
        lines(done, 300)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 101 and err[0] == "work: 0% (0/300)" and err[-1] == "work: 100% (300/300)"
    lines.restart("again")
    lines(0.5, 1.0)
    assert capsys.readouterr().err == "again: 50% (0.5/1)\n"


def test_progress_is_lines_when_stderr_is_not_a_terminal(capsys):
    with progress("x", counts=False) as update:
        update(1, 4)
        update(4, 4)
    assert capsys.readouterr().err == "x: 25%\nx: 100%\n"


def _run(*args, timeout=300):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout)


def test_simulate_exact_shows_its_progress_on_stderr_only():
    knobs = ["--m", "1024", "--n", "1024", "--k", "1024", "--bm", "64", "--bn", "64", "--bk", "8", "--tm", "4",
             "--tn", "4"]
    res = _run("-m", "tilesim.cli", "simulate", "gemm", *knobs, "--exact", "--json")
    assert res.returncode == 0, res.stderr
    pcts = _percent_lines(res.stderr, "simulating reg2d_64x64x8_t4x4@1024x1024x1024 step by step")
    assert len(pcts) >= 50 and pcts == sorted(pcts) and pcts[-1] == 100
    assert "%" not in res.stdout and res.stdout.lstrip().startswith("{")
    held = _run("-m", "tilesim.cli", "simulate", "gemm", *knobs, "--json")  # fast: no progress
    assert held.returncode == 0 and "%" not in held.stderr


def test_engine_check_shows_microbenchmarks_done():
    res = _run("-m", "validation.studies.engine_check")
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("engine_check: microbenchmarks simulated: ")]
    m = PCT.match(lines[-1])
    assert m["pct"] == "100" and m["done"] == m["total"] and int(m["total"]) > 10
    assert len(lines) == len(set(lines)) >= int(m["total"]) // 2


def test_schedule_replay_shows_configurations_done(monkeypatch, capsys):
    from validation.studies import schedule_replay

    def fake(results, capacity, on_progress=None):
        for i in range(1, 4):
            on_progress(i, 3)
        return []

    monkeypatch.setattr(schedule_replay, "replay", fake)
    assert schedule_replay.main([]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [f"schedule_replay: traced configurations replayed: {p}% ({i}/3)"
                   for i, p in ((1, 33), (2, 66), (3, 100))]


def test_validate_report_exact_shows_configurations_done(monkeypatch, capsys, tmp_path):
    from validation.harness import report
    from validation.harness.report import FamilyReport

    seen = {}

    def fake(family, *a, steady_state=True, on_progress=None, **kw):
        seen["steady_state"] = steady_state
        for i in range(1, 5):
            on_progress(i, 4)
        return FamilyReport(family, "h200", (), tmp_path, {"informed": ()}, (), (), ())

    monkeypatch.setattr(report, "compute_report", fake)
    monkeypatch.setattr(report, "print_report", lambda *a, **kw: None)
    assert report.main_report(["gemm"], steady_state=False) == 0
    assert seen["steady_state"] is False
    err = capsys.readouterr().err.splitlines()
    assert err == [f"simulating gemm step by step: {25 * i}% ({i}/4)" for i in range(1, 5)]
