"""The generic Nsight Compute runner (validation.harness.ncu) on the CPU: parsing, mapping rows back
to configurations by launch order through the manifest, summing multi-kernel configurations, and a
crash of the profiled process. ncu itself is replaced by a fake; every number is fabricated."""

from __future__ import annotations

import csv
import json
import types
from pathlib import Path

import pytest
from test_harness_suite import FAKE, FakeCopyConfig, fake  # noqa: F401  (the fixture)

from validation.harness import ncu, suite

METRICS = {"gpu__time_duration.sum": "s", "dram__bytes_read.sum": "bytes", "lts__t_bytes.sum": "bytes",
           "lts__t_sector_hit_rate.pct": "pct", "launch__registers_per_thread": "count"}


def ncu_csv(kernels: list[tuple[str, float]]) -> str:
    """ncu --csv --page raw text for kernels (name, microseconds): DRAM bytes = 1000 x time."""
    lines = ['==PROF== Connected to process', 'program output',
             '"ID","Kernel Name","' + '","'.join(METRICS) + '"',
             '"","","usecond","Kbyte","byte","%","register/thread"']
    for i, (name, us) in enumerate(kernels):
        lines.append(f'"{i}","{name}","{us}","{us}","{2 * us}","{50 if "b" in name else 100}","{int(us)}"')
    return "\n".join(lines) + "\n"


def test_parse_converts_units_and_orders_by_id():
    text = ncu_csv([("k1", 2.0), ("k2", 3.0)])
    lines = text.splitlines()
    text = "\n".join([*lines[:4], lines[5], lines[4]])  # rows out of order
    recs = ncu.parse_ncu_csv(text, METRICS)
    assert [r["kernel_name"] for r in recs] == ["k1", "k2"]
    assert recs[0]["gpu__time_duration.sum_s"] == pytest.approx(2e-6)
    assert recs[0]["dram__bytes_read.sum_bytes"] == pytest.approx(2000.0)
    with pytest.raises(ValueError, match="no CSV header"):
        ncu.parse_ncu_csv("==PROF== nothing", METRICS)
    with pytest.raises(ValueError, match="cannot be converted"):
        ncu.convert(1.0, "byte", "s")


def test_a_configuration_of_several_kernels_sums_counts_and_weights_rates():
    recs = ncu.parse_ncu_csv(ncu_csv([("a", 1.0), ("b", 3.0)]), METRICS)
    agg = ncu.aggregate(recs, METRICS)
    assert agg["gpu__time_duration.sum_s"] == pytest.approx(4e-6)
    assert agg["dram__bytes_read.sum_bytes"] == pytest.approx(4000.0)
    assert agg["launch__registers_per_thread_count"] == 3  # the most any kernel uses
    assert agg["lts__t_sector_hit_rate.pct_pct"] == pytest.approx((100 * 2 + 50 * 6) / 8)  # by L2 bytes


def test_rows_map_back_by_launch_order_between_markers():
    m = ncu.MARKER
    recs = ncu.parse_ncu_csv(ncu_csv([("a", 1.0), (m, 0.1), ("p1", 1.0), ("p2", 2.0), (m, 0.1), ("x", 5.0)]),
                             METRICS)
    manifest = [{"index": 0, "status": "ok", "marker": True, "kernel_names": ["a"]},
                {"index": 3, "status": "unsupported", "message": "too big"},
                {"index": 4, "status": "ok", "marker": True, "kernel_names": ["p1"]},
                {"index": 5, "status": "ok", "marker": True, "kernel_names": ["x"]}]
    got = ncu.assign(manifest, recs, METRICS)
    assert got[0]["kernels"] == 1 and got[0]["gpu__time_duration.sum_s"] == pytest.approx(1e-6)
    assert got[3] == {"status": "unsupported", "message": "too big"}
    assert got[4]["kernels"] == 2 and got[4]["gpu__time_duration.sum_s"] == pytest.approx(3e-6)
    assert "p2" in got[4]["message"]  # counted, but named in the message
    assert got[5]["status"] == "ncu_error"  # its marker never came: the launch did not finish


def fake_ncu(crash_at: int | None = None, kernels_per_config: int = 1):
    """A stand-in for subprocess.run(ncu ...): plays the target (manifest) and ncu (CSV on stdout)."""
    runs = []

    def run(cmd, **kw):
        jobs = json.loads(Path(cmd[cmd.index("--jobs") + 1]).read_text())
        manifest = Path(cmd[cmd.index("--manifest") + 1])
        assert cmd[:5] == ["ncu", "--clock-control", "none", "--cache-control", "all"]
        assert "--profile-from-start" in cmd and cmd[cmd.index("--target") + 1] == FAKE
        runs.append([j["index"] for j in jobs])
        kernels, lines = [], []
        for j in jobs:
            lines.append(json.dumps({"index": j["index"], "status": "begin"}))
            if j["index"] == crash_at:
                break
            cfg = FakeCopyConfig(**j["fields"])
            kernels += [(f"copy{k}", cfg.n / 1024) for k in range(kernels_per_config)] + [(ncu.MARKER, 0.01)]
            lines.append(json.dumps({"index": j["index"], "status": "ok", "marker": True, "kernel_names": ["copy0"]}))
        manifest.write_text("\n".join(lines) + "\n")
        return types.SimpleNamespace(returncode=0 if crash_at is None else 1, stdout=ncu_csv(kernels),
                                     stderr="==ERROR== The application returned an error code (11)")

    return run, runs


def _rows(path):
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_profile_family_writes_one_row_per_configuration_and_resumes(fake):  # noqa: F811
    cfgs = [FakeCopyConfig(1024 * i) for i in (1, 2, 3)]
    run, runs = fake_ncu(kernels_per_config=2)
    path = ncu.profile_family(FAKE, cfgs, fake.out, metrics=METRICS, chunk=2, run=run, log=None)
    assert runs == [[0, 1], [2]]  # one ncu process per chunk, not per configuration
    rows = _rows(path)
    assert [r["n"] for r in rows] == ["1024", "2048", "3072"] and {r["status"] for r in rows} == {"ok"}
    assert float(rows[2]["gpu__time_duration.sum_s"]) == pytest.approx(6e-6)  # 2 kernels of 3 us
    assert rows[0]["kernels"] == "2" and rows[0]["label"] == "copy_t256_ok"
    assert tuple(rows[0]) == ncu.csv_columns(FAKE, METRICS)
    runs.clear()
    ncu.profile_family(FAKE, cfgs, fake.out, metrics=METRICS, run=run, log=None)
    assert runs == []


def test_only_configurations_timed_ok_are_profiled(fake):  # noqa: F811
    cfgs = [FakeCopyConfig(1024), FakeCopyConfig(1024, mode="wrong")]
    suite.run_suite(FAKE, cfgs, fake.out, time_fn=lambda fn, **kw: suite_timing(), log=None)
    run, runs = fake_ncu()
    ncu.profile_family(FAKE, cfgs, fake.out, metrics=METRICS, run=run, log=None)
    assert runs == [[0]]


def suite_timing():
    from validation.harness.timing import Timing

    return Timing.from_samples([1e-6], flushed_l2=True)


def test_a_crash_costs_one_configuration_and_the_rest_are_profiled_after_it(fake):  # noqa: F811
    cfgs = [FakeCopyConfig(1024 * i) for i in (1, 2, 3)]
    run, runs = fake_ncu(crash_at=1)
    path = ncu.profile_family(FAKE, cfgs, fake.out, metrics=METRICS, run=run, log=None)
    assert runs == [[0, 1, 2], [2]]
    rows = _rows(path)
    assert [r["status"] for r in rows] == ["ok", "ncu_error", "ok"]
    assert "died in this configuration" in rows[1]["message"] and "error code (11)" in rows[1]["message"]
    run, runs = fake_ncu()
    ncu.profile_family(FAKE, cfgs, fake.out, metrics=METRICS, run=run, log=None)
    assert runs == [[1]]  # ncu_error is retried on resume


def test_read_manifest_turns_an_unfinished_configuration_into_ncu_error(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text('{"index": 0, "status": "begin"}\n{"index": 0, "status": "ok", "marker": true}\n'
                 '{"index": 1, "status": "begin"}\n{"index": 2, "sta')
    assert [e["status"] for e in ncu.read_manifest(p)] == ["ok", "ncu_error"]


def test_a_timed_out_ncu_is_killed_with_the_process_it_profiles():
    import subprocess
    import time

    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as info:
        ncu.run_in_group(["bash", "-c", "echo started; sleep 30 & sleep 30"], timeout=0.5)
    assert time.monotonic() - t0 < 10  # the background child died too (else its open pipe would block)
    assert "started" in info.value.output
    done = ncu.run_in_group(["bash", "-c", "echo out; echo err >&2; exit 3"])
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")


def test_no_ncu_process_starts_once_the_time_budget_is_spent(fake):  # noqa: F811
    run, runs = fake_ncu()
    lines = []
    ncu.profile_family(FAKE, [FakeCopyConfig(1024)], fake.out, metrics=METRICS, run=run, budget_s=0.0,
                       log=lines.append)
    assert runs == [] and "time budget spent" in lines[-1]
