"""The fence rows of the cluster microbenchmark (validation/calibration/cluster_probe, ``--only fence``):
#define agreement, the configurations, the records' parsing and fence_fields on SYNTHETIC records (made
here, never measurements), the SASS of each timed operation (nvcc + cuobjdump or nvdisasm; skipped without
them). The GPU run is marked ``gpu``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from validation.calibration import cluster_probe as cp
from validation.calibration import probe_common as pc

CU = cp.KERNEL_SRC.read_text()


def _define(name: str) -> int:
    m = re.search(rf"#define {name} (-?\d+)", CU)
    assert m, f"#define {name} missing from {cp.KERNEL_SRC.name}"
    return int(m.group(1))


def test_the_fence_constants_match_the_cuda_defines():
    for py, cu in (("FENCE_SLOTS", "CP_FENCE_SLOTS"), ("FENCE_MAX_ITERS", "CP_FENCE_MAX_ITERS"),
                   ("FENCE_AUX", "CP_FENCE_AUX"), ("FENCE_LANDED", "CP_FENCE_LANDED")):
        assert getattr(cp, py) == _define(cu), py
    assert len(cp.FENCE_AUX_FIELDS) == cp.FENCE_AUX
    ops = {"release": "CP_OP_RELEASE", "arrive": "CP_OP_ARRIVE", "fence_rel": "CP_OP_FENCE_REL",
           "fence_acqrel": "CP_OP_FENCE_ACQREL", "local": "CP_OP_LOCAL"}
    assert set(ops) == set(cp.FENCE_OPS)
    for name, (kernel, op_id) in cp.FENCE_OPS.items():
        assert op_id == _define(ops[name]), name
        assert re.search(rf"CP_FENCE_KERNEL\({kernel}, {ops[name]}\)", CU), kernel
    assert re.search(r"__cluster_dims__\(2, 1, 1\) __launch_bounds__\(256, 1\)", CU) and cp.FENCE_THREADS == 256
    assert cp.FENCE_GAPS["landed"] == cp.FENCE_LANDED and "fence" in cp.GROUPS


def test_fence_configurations():
    full, quick = cp.fence_configs(False), cp.fence_configs(True)
    names = [cp.fence_name(c) for c in full]
    assert len(names) == len(set(names)) == 192 and len(quick) < 60
    assert "fence.stream.release.none.b256.if0.load_none.rel_pair" in names
    assert "fence.stream.arrive.hbm.b256.if4.load_others.rel_pair" in names
    assert "fence.stream.release.l2.b128.if2.load_own.rel_pair" in names
    assert "fence.sync.release.hbm.b256.if4.landed.self" in names
    assert "fence.sync.fence_rel.l2.b256.if1.gap500.loader" in names
    assert all(c["inflight"] <= cp.FENCE_SLOTS for c in full)
    assert all(c["inflight"] > 0 for c in full if c["kind"] == "sync" or c["loads"] != "none")
    assert all(c["loads"] == "own" and c["rels"] == "pair" for c in full if c["kind"] == "sync")
    for b in (cp.FENCE_B_ROWS, cp.FENCE_SMALL_B_ROWS):
        assert cp.ONE_BLOCK_SMEM_BYTES <= cp.fence_smem_bytes(b) <= cp.MAX_BLOCK_SMEM_BYTES - cp.STATIC_SMEM_BYTES
    with pytest.raises(ValueError, match="shared memory"):
        cp.fence_smem_bytes(512)
    cfg = {"kind": "stream", "inflight": 2, "loads": "others", "rels": "pair", "issuer": "loader"}
    assert cp.fence_roles(cfg, 6) == ([0, 1], [2, 3, 4, 5])
    assert cp.fence_roles({**cfg, "loads": "all", "rels": "all"}, 4) == ([0, 1, 2, 3], [0, 1, 2, 3])
    assert cp.fence_roles({**cfg, "inflight": 0, "loads": "none"}, 4) == ([0, 1], [])
    assert cp.fence_roles({**cfg, "kind": "sync", "loads": "own", "issuer": "self"}, 4) == ([0, 1], [0, 1])
    assert cp.result_file(("fence",)) == "cluster_fence.json"


def test_fence_gap_rows_space_the_releases_out_and_keep_the_old_names():
    gap_rows = cp.fence_gap_configs(False)
    names = [cp.fence_name(c) for c in gap_rows]
    assert len(names) == len(set(names)) == 60 and len(cp.fence_gap_configs(True)) < 20
    assert "fence.stream.release.hbm.b256.if4.load_all.rel_all.gap1500" in names
    assert all(c["kind"] == "stream" and c["gap"] in cp.FENCE_STREAM_GAPS for c in gap_rows)
    assert not set(names) & {cp.fence_name(c) for c in cp.fence_configs(False)}
    assert cp.result_file(("fence_gap",)) == "cluster_fence_gap.json"


def test_flags_say_what_went_wrong():
    assert cp.fence_flag_message([0, 0, 0]) is None
    msg = cp.fence_flag_message([0, 1, 3, 0])
    assert "timed out" in msg and "stop signal" in msg and "[1, 2]" in msg
    assert "flag 9" in cp.fence_flag_message([9])


def _fence_raw(cfg, grid, iters, op_cycles, boxes=100, load_ns=400_000, land=0, load=0):
    """SYNTHETIC records of a fence launch: every releaser's operations take op_cycles[i % len]."""
    rel, load_blocks = cp.fence_roles(cfg, grid)
    rec, aux, samples = [], [], []
    for b in range(grid):
        ops = [op_cycles[i % len(op_cycles)] for i in range(iters)] if b in rel else [0] * iters
        samples += ops
        if b in rel:
            rec += [2 * sum(ops), sum(ops), b, b % 2, cfg["inflight"] * iters, 300 * iters, 1000, iters]
        elif b in load_blocks:
            rec += [800_000, load_ns, b, b % 2, 0, 0, 900, 0]
        else:
            rec += [0] * cp.REC
        ld = b in load_blocks
        aux += [sum(ops), boxes if ld else 0, 900 if ld else 0, 900 + load_ns if ld else 0, load * iters,
                land * iters]
    return rec, aux, samples


def _row(cfg, grid=4, iters=40, op_cycles=(900, 1000, 1100), reps=3, **kw):
    rec, aux, smp = _fence_raw(cfg, grid, iters, op_cycles, **kw)
    rel, load = cp.fence_roles(cfg, grid)
    idle = [b for b in range(grid) if b not in rel and b not in load]
    recs = cp.parse_records(rec, grid, idle_blocks=idle)
    rep = cp.fence_rep(cfg, recs, cp.parse_fence_aux(aux, grid), smp, iters, skip=4)
    return cp.fence_row(cfg, [{**rep, "event_s": 1e-3}] * reps, iters, 4, grid, cp.fence_smem_bytes())


STREAM = {"kind": "stream", "b_rows": 256, "rels": "pair", "gap": 0, "issuer": "loader"}


def test_fence_records_parse_into_a_row():
    cfg = {**STREAM, "op": "release", "src": "l2", "inflight": 2, "loads": "others"}
    row = _row(cfg)
    assert row["value"] == pytest.approx(1000.0) and row["n"] == 3 and row["kernel"] == "fence_c2_release"
    assert row["op_cycles"]["p10"] == pytest.approx(900.0) and row["op_cycles"]["p90"] == pytest.approx(1100.0)
    assert row["op_cycles"]["n_ops_per_rep"] == 2 * 36 and row["inflight_mean"] == pytest.approx(2.0)
    assert row["inflight_bytes"] == 2 * 32768 and row["age_ns_mean"] == pytest.approx(300.0)
    assert row["clock_hz"] == pytest.approx(2e9)  # cycles = 2 x ns
    # blocks 2 and 3 load 100 boxes of 32 KiB in 400 us each
    assert row["load_bytes_per_s_per_sm"] == pytest.approx(100 * 32768 / 400e-6)
    assert row["load_bytes_per_s_gpu"] == pytest.approx(2 * 100 * 32768 / 400e-6)
    assert row["loads_cover_min"] == pytest.approx(1.0) and row["land_wait_per_op"] is None
    table = cp.format_table({"fence": {cp.fence_name(cfg): row}, "errors": {"fence.x": "boom"}})
    assert cp.fence_name(cfg) in table and "FAILED: boom" in table
    json.dumps(row)
    sync = _row({**STREAM, "kind": "sync", "op": "release", "src": "hbm", "inflight": 1, "loads": "own",
                 "gap": "landed"}, land=1500, load=1700)
    assert sync["land_wait_per_op"] == pytest.approx(1500.0) and sync["load_cycles_per_op"] == pytest.approx(1700.0)
    assert sync["gap_cycles"] == cp.FENCE_LANDED


def test_bad_fence_records_are_refused():
    cfg = {**STREAM, "op": "release", "src": "none", "inflight": 0, "loads": "none"}
    rec, aux, smp = _fence_raw(cfg, 2, 10, (500,))
    recs = cp.parse_records(rec, 2)
    auxs = cp.parse_fence_aux(aux, 2)
    with pytest.raises(ValueError, match="fewer than iters"):
        cp.fence_rep(cfg, recs, auxs, smp[:18], 9, 1)  # count 10 != 9 (the lengths fit)
    with pytest.raises(ValueError, match="samples"):
        cp.fence_rep(cfg, recs, auxs, smp[:-1], 10, 1)
    with pytest.raises(ValueError, match="skip"):
        cp.fence_rep(cfg, recs, auxs, smp, 10, 10)
    with pytest.raises(ValueError, match="expected 6 per block"):
        cp.parse_fence_aux([1, 2, 3], 1)


def test_fence_fields_from_synthetic_rows():
    rows = {}

    def put(cfg, op_cycles, **kw):
        rows[cp.fence_name(cfg)] = _row(cfg, op_cycles=op_cycles, **kw)

    idle = {**STREAM, "src": "none", "inflight": 0, "loads": "none"}
    put({**idle, "op": "release"}, (900,))
    put({**idle, "op": "arrive"}, (60,))
    put({**idle, "op": "release", "rels": "all"}, (950,))
    for n in (1, 2, 4):  # +100 cycles per 32 KiB box in flight on its own SM
        put({**STREAM, "op": "release", "src": "l2", "inflight": n, "loads": "own"}, (900 + 100 * n,))
        put({**STREAM, "op": "release", "src": "l2", "inflight": n, "loads": "others"}, (900 + 50 * n,))
    sync = {**STREAM, "kind": "sync", "op": "release", "src": "hbm", "loads": "own"}
    put({**sync, "inflight": 2, "gap": "gap0"}, (2500,))
    put({**sync, "inflight": 2, "gap": "landed"}, (900,), land=2000)
    f = cp.fence_fields({"fence": rows, "meta": {"date_utc": "2025-01-01"}})
    assert f["cluster_release_base_cycles"]["value"] == pytest.approx(900.0)
    assert f["cluster_arrive_default_cycles"]["value"] == pytest.approx(60.0)
    assert f["cluster_release_all_sms_cycles"]["value"] == pytest.approx(950.0)
    assert "cluster_fence_release_gpu_cycles" not in f  # no row for it
    assert f["cluster_release_cycles_per_inflight_box_l2"]["value"] == pytest.approx(100.0)
    assert f["cluster_release_cycles_per_inflight_kib_l2"]["value"] == pytest.approx(100.0 / 32)
    assert "rms residual 0" in f["cluster_release_cycles_per_inflight_box_l2"]["how"]
    assert "cluster_release_cycles_per_inflight_box_hbm" not in f
    tbps = f["cluster_release_cycles_per_gpu_tbps_others_l2"]
    assert tbps["value"] > 0 and tbps["n"] == 3
    assert f["cluster_release_own_load_wait_fraction_hbm"]["value"] == pytest.approx((2500 - 900) / 2000)
    for v in f.values():
        assert {"value", "benchmark", "n", "p10", "p90", "how", "date"} <= set(v) and v["date"] == "2025-01-01"
    assert cp.fence_fields({"fence": {}}) == {}
    json.dumps(f)


# ----- the SASS of each timed operation (nvcc and cuobjdump or nvdisasm) --------------------------------
@pytest.fixture(scope="module")
def sass(tmp_path_factory):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    if shutil.which("cuobjdump") is None and shutil.which("nvdisasm") is None:
        pytest.skip("neither cuobjdump nor nvdisasm on PATH")
    cubin, log = cp.compile_cubin(tmp_path_factory.mktemp("fence"))
    assert cp.ptxas_warnings(log) == [], log
    if shutil.which("cuobjdump"):
        return pc.disassemble(cubin)
    from validation.calibration.mma_feed_probe import nvdisasm_as_cuobjdump  # noqa: PLC0415

    d = subprocess.run(["nvdisasm", "-c", str(cubin)], capture_output=True, text=True, check=True)
    return nvdisasm_as_cuobjdump(d.stdout)


def _op_window(sass: str, op: str) -> list[str]:
    """The clock64 window of kernel fence_c2_<op> that holds the timed operation: the one with a MEMBAR,
    a CCTL or an arrive on a remote (RED) or the own barrier (A1T0) and no branch."""
    kernel = cp.FENCE_OPS[op][0]
    wins = [w for w in cp.timed_windows(pc.function_instructions(sass, kernel))
            if not any(o.startswith("BRA") for o in w)
            and any(o.startswith(("MEMBAR", "CCTL", "SYNCS.ARRIVE.TRANS64.RED", "SYNCS.ARRIVE.TRANS64.A1T0"))
                    for o in w)]
    assert len(wins) == 1, (op, wins)
    return wins[0]


def test_release_rows_have_the_gpu_fence_and_the_arrive_rows_none(sass):
    rel = _op_window(sass, "release")
    assert "MEMBAR.ALL.GPU" in rel and any(o.startswith("SYNCS.ARRIVE.TRANS64.RED") for o in rel)
    assert rel.index("MEMBAR.ALL.GPU") < next(i for i, o in enumerate(rel) if o.startswith("SYNCS.ARRIVE"))
    arr = _op_window(sass, "arrive")
    assert any(o.startswith("SYNCS.ARRIVE.TRANS64.RED") for o in arr)
    assert not any(o.startswith(("MEMBAR", "ERRBAR", "CCTL")) for o in arr), arr
    frel = _op_window(sass, "fence_rel")
    assert "MEMBAR.ALL.GPU" in frel and not any(o.startswith(("SYNCS", "CCTL")) for o in frel)
    # the same fence as the release's, without its arrive
    assert frel == [o for o in rel if not o.startswith("SYNCS") and o.startswith(("MEMBAR", "ERRBAR", "CGAERRBAR"))]
    facq = _op_window(sass, "fence_acqrel")
    assert "MEMBAR.ALL.GPU" in facq and "CCTL.IVALL" in facq
    loc = _op_window(sass, "local")
    assert any(o.startswith("SYNCS.ARRIVE.TRANS64.A1T0") for o in loc)
    assert not any(o.startswith(("MEMBAR", "ERRBAR", "CCTL")) or ".RED" in o for o in loc)


@pytest.mark.gpu
def test_the_fence_rows_run_quick_on_the_gpu(tmp_path):
    if cp._gpu_missing():
        pytest.skip(cp._gpu_missing())
    p = subprocess.run([sys.executable, "-m", "validation.calibration.cluster_probe", "--quick", "--only", "fence",
                        "--out", str(tmp_path)], capture_output=True, text=True, cwd=cp.REPO_ROOT, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    res = json.loads((tmp_path / "cluster_fence.json").read_text())
    assert not res["errors"] and len(res["fence"]) == len(cp.fence_configs(True))
    for r in res["fence"].values():
        assert r["value"] > 0 and r["n"] == cp.QUICK_REPS
    assert cp.fence_fields(res)["cluster_release_base_cycles"]["value"] > 0
