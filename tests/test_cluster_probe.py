"""The cluster microbenchmark (validation/calibration/cluster_probe): the CUDA source compiles for sm_90a in
one nvcc call without spills or warnings, and the per-block records parse into rows (synthetic records made
here, never measurements). The GPU run is marked ``gpu``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from validation.calibration import cluster_probe as cp

CU = cp.KERNEL_SRC.read_text()


def _define(name: str) -> int:
    m = re.search(rf"#define {name} (\d+)", CU)
    assert m, f"#define {name} missing from {cp.KERNEL_SRC.name}"
    return int(m.group(1))


def test_the_python_constants_match_the_cuda_defines():
    for py, cu in (("REC", "CP_REC"), ("MAX_STAGES", "CP_MAX_STAGES"), ("BOX_COLS", "CP_BOX_COLS"),
                   ("TILES_X_SHIFT", "CP_TILES_X_SHIFT"), ("AUX", "CP_AUX"), ("WG_N", "CP_WG_N"),
                   ("WG_KSLICES", "CP_WG_KSLICES")):
        assert getattr(cp, py) == _define(cu), py
    assert 1 << cp.TILES_X_SHIFT == cp.TENSOR_COLS // cp.BOX_COLS
    assert len(cp.RECORD_FIELDS) == cp.REC and len(cp.AUX_FIELDS) == cp.AUX
    assert cp.WG_KSLICES * 16 == cp.BOX_COLS and cp.WGMMA_CYCLES == 128
    assert "m64n256k16.f32.f16.f16" in CU and "wgmma.wait_group.sync.aligned" in CU
    # the GEMM's register split (wgmma.cu PRODUCER_REGS / CONSUMER_REGS)
    gemm = (cp.REPO_ROOT / "validation/families/tc_gemm/wgmma.cu").read_text()
    for name in ("PRODUCER_REGS", "CONSUMER_REGS"):
        g = re.search(rf"constexpr int {name} = (\d+);", gemm)
        assert g and int(g.group(1)) == _define(f"CP_{name}"), name


def test_every_kernel_the_probe_launches_is_in_the_source():
    names = ({k for k, _, _ in cp.MODES.values()} | {k for k, _, _ in cp.WGMMA_MODES.values()}
             | {"ping_c2", "tma_lat_c2", "cp_spin"})
    for n in names:
        assert re.search(rf"\b{n}\(", CU), n
    assert re.search(r"__cluster_dims__\(2, 1, 1\)[^\n]*\n\s*ring_c2\(", CU)
    assert re.search(r"__cluster_dims__\(2, 1, 1\)[^\n]*\n\s*ringw_c2\(", CU)
    assert cp.THREADS <= 384 and "__launch_bounds__(384, 1)" in CU


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_the_source_compiles_for_sm_90a_without_spills_or_warnings(tmp_path):
    cubin, log = cp.compile_cubin(tmp_path)
    assert cubin.exists() and cp.ptxas_warnings(log) == [], log
    data = cubin.read_bytes()
    for n in ("ring_c1", "ring_c2", "ringw_c1", "ringw_c2", "ping_c2", "tma_lat_c2", "cp_spin"):
        assert n.encode() in data, n
    m = re.findall(r"Used \d+ registers.*?(\d+) bytes smem", log)
    assert all(int(x) <= cp.STATIC_SMEM_BYTES for x in m), log


def test_ring_configurations_and_shared_memory():
    full = cp.ring_configs(False)
    assert len(full) == len(cp.B_ROWS) * len(cp.STAGES) * len(cp.SPINS) * len(cp.MODES) == 48
    assert all(cp.ring_smem_bytes(c["stages"], c["b_rows"]) <= cp.MAX_BLOCK_SMEM_BYTES for c in full)
    assert cp.ring_smem_bytes(2, 128) == cp.ONE_BLOCK_SMEM_BYTES  # padded to one block per SM
    assert cp.ring_smem_bytes(4, 256) == 4 * 384 * 128 + cp.SMEM_ALIGN_PAD_BYTES
    with pytest.raises(ValueError, match="stages = 5"):
        cp.ring_smem_bytes(5, 256)
    with pytest.raises(ValueError, match="stages = 9"):
        cp.ring_smem_bytes(9, 8)
    assert not any(c["mode"] == "c2_mc_local" for c in full)  # multicast always with remote arrivals
    assert all(mc <= remote for _, mc, remote in cp.MODES.values())


def _ring_raw(cycles_by_block, iters, start=1000, ns=500_000):
    """SYNTHETIC records of a ring launch: block b has cycles_by_block[b], rank b % 2."""
    raw = []
    for b, c in enumerate(cycles_by_block):
        raw += [c, ns, b, b % 2, 10 * iters, 20 * iters, start + b, iters]
    return raw


def test_ring_records_parse_into_a_row():
    iters = 100
    recs = cp.parse_records(_ring_raw([100_000, 120_000, 110_000, 130_000], iters), 4)
    assert recs[1]["rank"] == 1 and recs[3]["count"] == iters
    rep = cp.ring_rep(recs, iters, 256, multicast=True)
    assert rep["cycles_per_step"] == pytest.approx(1150.0)
    assert rep["cycles_per_step_by_rank"] == {"0": pytest.approx(1050.0), "1": pytest.approx(1250.0)}
    assert rep["bytes_per_clk_per_sm"] == pytest.approx(384 * 128 / 1150.0)
    assert rep["l2_bytes_per_clk_per_sm"] == pytest.approx((128 + 128) * 128 / 1150.0)  # half of B
    assert rep["empty_wait_per_step"] == 10 and rep["full_wait_per_step"] == 20 and rep["concurrent"]
    cfg = {"b_rows": 256, "stages": 4, "spin": 500, "mode": "c2_mc_remote"}
    row = cp.ring_row(cfg, [{**rep, "event_s": 1e-3}] * 3, iters, 4, 200_000)
    assert row["value"] == pytest.approx(1150.0) and row["n"] == 3 and row["cluster"] == 2 and row["multicast"]
    base = cp.ring_row({**cfg, "mode": "c1"}, [{**rep, "cycles_per_step": 920.0}], iters, 4, 200_000)
    ring = {cp.ring_name(cfg): row, cp.ring_name(base): base}
    cp.add_ratios(ring)
    assert row["vs_c1"] == pytest.approx(1150.0 / 920.0) and base["vs_c1"] == 1.0
    table = cp.format_table({"ring": ring, "errors": {"x": "boom"}})
    assert "ring.b256.s4.spin500.c2_mc_remote" in table and "1.250" in table and "FAILED: boom" in table
    json.dumps(ring)  # JSON-ready


def test_bad_records_are_refused():
    with pytest.raises(ValueError, match="expected 8 per block"):
        cp.parse_records([1, 2, 3], 1)
    with pytest.raises(ValueError, match="did not run"):
        cp.parse_records([1, 0, 0, 0, 0, 0, 0, 0], 1)
    recs = cp.parse_records(_ring_raw([100, 100], 10), 2)
    with pytest.raises(ValueError, match="fewer than iters"):
        cp.ring_rep(recs, 11, 128, multicast=False)
    # non-overlapping windows: not concurrent
    late = cp.parse_records(_ring_raw([100, 100], 10, ns=1) , 2)
    assert cp.ring_rep(late, 10, 128, multicast=False)["concurrent"] is False


def test_latency_records():
    ping = cp.parse_records([4000, 10, 0, 0, 0, 0, 0, 10, 1, 10, 1, 1, 0, 0, 0, 10], 2)
    assert cp.ping_rep(ping, 10) == pytest.approx(200.0)  # round trip 400 -> one hand-off 200
    with pytest.raises(ValueError, match="round trips"):
        cp.ping_rep(ping, 11)
    lat = cp.parse_records([7000, 10, 0, 0, 9000, 0, 0, 10, 6500, 10, 1, 1, 8800, 0, 0, 10], 2)
    assert cp.tma_lat_rep(lat, 10) == {"own": 700.0, "pair": 900.0, "rank1_own": 650.0}
    with pytest.raises(ValueError, match="both ranks"):
        cp.tma_lat_rep(lat[:1], 10)


def test_without_a_gpu_main_says_so(monkeypatch, capsys):
    monkeypatch.setattr(cp, "_gpu_missing", lambda: "no CUDA device found")
    assert cp.main(["--out", "/nonexistent"]) == 2
    assert cp.main(["--out", "/nonexistent", "--only", "wgmma"]) == 2
    assert "needs CuPy and an NVIDIA GPU" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cp.main(["--only", "nonsense"])


def test_wgmma_configurations_and_result_files():
    full = cp.wgmma_configs(False)
    assert len(full) == len(cp.WGMMA_CONSUMERS) * len(cp.WGMMA_STAGES) * len(cp.RELEASES) * len(cp.WGMMA_MODES) == 32
    assert {c["mode"] for c in full} == {"c1", "c2_own_local", "c2_own_remote", "c2_mc_remote"}
    assert all(mc <= remote for _, mc, remote in cp.WGMMA_MODES.values())  # no multicast with local releases
    assert all(cp.ring_smem_bytes(c["stages"], cp.WG_N) <= cp.MAX_BLOCK_SMEM_BYTES for c in full)
    assert cp.wgmma_name(full[0]) == "wgmma.c1.s2.c1.rel_one"
    assert all(c["consumers"] == 2 for c in cp.wgmma_configs(True))
    assert cp.result_file() == "cluster.json"
    assert cp.result_file(("wgmma",)) == "cluster_wgmma.json"
    assert cp.result_file(("wgmma",), 1024) == "cluster_wgmma_1024mib.json"
    assert cp.result_file(("ring", "wgmma")) == "cluster_ring_wgmma.json"
    with pytest.raises(ValueError, match="groups are"):
        cp.run_probes(only=("nonsense",))


def _aux_raw(blocks, iters, group=300, release=40, full2=50):
    """SYNTHETIC aux records: every block's consumer 1 spent `group` / `release` cycles per k-step."""
    raw = []
    for _ in range(blocks):
        raw += [group * iters, release * (iters - 1), full2 * iters, iters]
    return raw


def test_wgmma_records_parse_into_a_row():
    iters, consumers = 100, 2
    # 2 consumers x 4 wgmma x 128 cycles = 1024 busy cycles per k-step; blocks at 1024 and 2048 per step
    recs = cp.parse_records(_ring_raw([102_400, 204_800, 102_400, 204_800], iters), 4)
    aux = cp.parse_aux(_aux_raw(4, iters), 4)
    assert aux[2] == {"wait_group": 30_000, "release": 40 * 99, "full_wait_wg2": 5000, "consumer_count": iters}
    rep = cp.wgmma_rep(recs, aux, iters, consumers, multicast=True)
    assert rep["cycles_per_step"] == pytest.approx(1536.0)
    assert rep["tensor_activity"] == pytest.approx(0.75)  # median of 1.0, 0.5, 1.0, 0.5
    assert rep["wait_group_per_step"] == 300 and rep["release_per_step"] == 40
    assert rep["full_wait_wg2_per_step"] == 50 and rep["full_wait_per_step"] == 20
    assert rep["l2_bytes_per_clk_per_sm"] == pytest.approx((128 + 128) * 128 / 1536.0)
    one = cp.wgmma_rep(recs, aux, iters, 1, multicast=False)
    assert one["tensor_activity"] == pytest.approx(0.375)
    cfg = {"consumers": 2, "stages": 4, "release": "one", "mode": "c2_mc_remote"}
    row = cp.wgmma_row(cfg, [{**rep, "event_s": 1e-3}] * 3, iters, 4, 200_000)
    assert row["value"] == pytest.approx(1536.0) and row["cluster"] == 2 and row["multicast"]
    assert row["tensor_activity"]["value"] == pytest.approx(0.75) and not row["release_all"]
    assert row["threads"] == 384 and row["wgmma_per_step"] == 8 and row["kernel"] == "ringw_c2"
    base = cp.wgmma_row({**cfg, "mode": "c1"}, [{**rep, "cycles_per_step": 1024.0}], iters, 4, 200_000)
    other = cp.wgmma_row({**cfg, "release": "all"}, [{**rep, "event_s": 1e-3}], iters, 4, 200_000)
    rows = {cp.wgmma_name(cfg): row, cp.wgmma_name(base): base, cp.wgmma_name(other): other}
    cp.add_wgmma_ratios(rows)
    assert row["vs_c1"] == pytest.approx(1.5) and base["vs_c1"] == 1.0
    assert other["vs_c1"] is None and other["release_all"]  # no c1 row with release all here
    table = cp.format_table({"wgmma": rows})
    assert "wgmma.c2.s4.c2_mc_remote.rel_one" in table and "1.500" in table and "0.750" in table
    json.dumps(rows)


def test_bad_wgmma_records_are_refused():
    with pytest.raises(ValueError, match="expected 4 per block"):
        cp.parse_aux([1, 2, 3], 1)
    recs = cp.parse_records(_ring_raw([100, 100], 10), 2)
    with pytest.raises(ValueError, match="fewer than iters"):
        cp.wgmma_rep(recs, cp.parse_aux(_aux_raw(2, 9), 2), 10, 2, multicast=False)
    with pytest.raises(ValueError, match="aux records for"):
        cp.wgmma_rep(recs, cp.parse_aux(_aux_raw(1, 10), 1), 10, 2, multicast=False)
    with pytest.raises(ValueError, match="consumers = 0"):
        cp.wgmma_rep(recs, cp.parse_aux(_aux_raw(2, 10), 2), 10, 0, multicast=False)


@pytest.mark.gpu
def test_the_probe_runs_quick_on_the_gpu(tmp_path):
    if cp._gpu_missing():
        pytest.skip(cp._gpu_missing())
    p = subprocess.run([sys.executable, "-m", "validation.calibration.cluster_probe", "--quick", "--out",
                        str(tmp_path)], capture_output=True, text=True, cwd=cp.REPO_ROOT, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    res = json.loads((tmp_path / cp.RESULT_FILE).read_text())
    assert not res["errors"] and res["ring"] and res["ping"] and res["tma_lat"] and res["wgmma"]
    for r in [*res["ring"].values(), *res["wgmma"].values()]:
        assert r["value"] > 0 and r["n"] == cp.QUICK_REPS
    for r in res["wgmma"].values():
        assert 0 < r["tensor_activity"]["value"] <= 1.05
