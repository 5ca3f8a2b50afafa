"""wmma_frag_probe: constants and kernel names match the .cu, the lanes' addresses give the lines and
wavefronts each pitch was chosen for, records become rows and rows the field (synthetic data only); the .cu
compiles for sm_90a with the expected loop per kernel (nvcc and cuobjdump; skipped without); GPU run: ``gpu``."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from validation.calibration import probe_common as pc
from validation.calibration import wmma_frag_probe as w

CU = w.KERNEL_SRC.read_text()


def test_constants_match_the_cuda_defines():
    for py, cu in (("FRAGS", "WFP_FRAGS"), ("LOADS", "WFP_LOADS"), ("TILE_BYTES", "WFP_TILE_BYTES"),
                   ("CP_SLOTS", "WFP_CP_SLOTS"), ("REC", "WFP_REC")):
        m = re.search(rf"#define {cu} (\d+)", CU)
        assert m and int(m.group(1)) == getattr(w, py), py
    assert w.LOADS == 4 * w.FRAGS
    # both slabs of the widest pitch fit the tile; the landing ring and the tile fit the smallest block's ask
    assert 2 * w.slab_bytes(max(w.PITCHES)) <= w.TILE_BYTES
    assert w.TILE_BYTES + w.CP_SLOTS * 16 <= min(w.SMEM_BY_BLOCKS.values())


def test_every_row_kernel_is_in_the_cu():
    built = {f"frag_{k}_{p}" for p in re.findall(r"^WFP_INSTANCES\((\d+)\)", CU, re.M)
             for k in ("generic", "shared", "ldsm", "chase")}
    built |= {f"frag_wmma_ptx_{p}" for p in re.findall(r"^WFP_WMMA_INSTANCE\((\d+)\)", CU, re.M)}
    built |= set(re.findall(r"__launch_bounds__\(1024\) (frag_\w+_80)\(WFP_PARAMS\)", CU))
    assert {r.kernel for r in w.rows()} == built


def test_address_formulas_are_the_cu_ones():
    for expr in ("P == 4 ? 4 * lane : (lane >> 2) * P + 4 * (lane & 3)",
                 "P == 4 ? 128 * J : 8 * P * (J & 1) + 16 * (J >> 1)",
                 "P == 4 ? 512 * F : 16 * P * (F >> 1) + 32 * (F & 1)",
                 "P == 4 ? 4096 : 64 * P",
                 "P == 4 ? 16 * lane : (lane & 15) * P + 16 * (lane >> 4)"):
        assert expr in CU, expr


def test_lines_sectors_and_wavefronts_per_pitch():
    st = {p: w.load_stats(p) for p in w.PITCHES}
    assert {p: s["lines"] for p, s in st.items()} == {4: 1, 64: 4, 80: 5, 128: 8, 144: 8}
    assert {p: s["wavefronts"] for p, s in st.items()} == {4: 1, 64: 4, 80: 1, 128: 8, 144: 1}
    assert {p: s["sectors"] for p, s in st.items()} == {4: 4, 64: 8, 80: 8, 128: 8, 144: 8}
    assert all(s["lines_min"] == s["lines_max"] for s in st.values())  # 128-byte aligned slabs: every load alike
    ldsm = {p: w.load_stats(p, ldsm=True)["wavefronts"] for p in w.PITCHES}
    assert ldsm == {4: 4, 64: 16, 80: 4, 128: 32, 144: 4}


def test_a_fragment_is_its_16_rows_by_32_bytes():
    for p in (64, 80, 128, 144):
        for f in range(w.FRAGS):
            words = {a for j in range(4) for a in w.lane_addresses(p, f, j)}
            rows = {(a - w.f_off(p, f)) // p for a in words}
            assert rows == set(range(16)) and len(words) == 128  # 16 rows x 8 words of 4 bytes
            ldsm = w.ldsm_lane_addresses(p, f)
            assert {a + b for a in ldsm for b in range(0, 16, 4)} == words  # ldmatrix reads the same bytes
    assert sorted(a for j in range(4) for a in w.lane_addresses(4, 1, j)) == list(range(512, 1024, 4))


def test_rows_keys_and_trips():
    rows = w.rows()
    assert len({r.key for r in rows}) == len(rows) == 98
    assert all(w.parse_key(r.key) == r for r in rows)
    quick = w.rows(quick=True)
    assert {r.geometry for r in quick if r.kind != "frag_chase"} == set(w.QUICK_GEOMETRIES)
    assert {r.geometry for r in quick if r.kind == "frag_chase"} == {"alone", "loaded"}
    with pytest.raises(ValueError, match="row key"):
        w.parse_key("frag_wmma_ptx_4.w16")  # ldm = 2 halves: no such row
    with pytest.raises(ValueError, match="row key"):
        w.parse_key("frag_generic_80.w64")
    # every geometry loads the same fragments an SM a launch
    for r in rows:
        if r.kind != "frag_chase":
            assert w.trips(r, w.FRAGS_PER_SM, w.CHASE_HOPS) * r.warps_per_sm * w.FRAGS == w.FRAGS_PER_SM
    chase = w.parse_key("frag_chase_80.alone")
    assert w.trips(chase, w.FRAGS_PER_SM, w.CHASE_HOPS) * w.FRAGS == w.CHASE_HOPS


def _raw(blocks: list[tuple[int, int, int, int]], clock_ghz: float = 2.0) -> list[int]:
    """Records of blocks given as (smid, clock start, clock end, loader trips)."""
    out = []
    for sm, c0, c1, extra in blocks:
        out += [c0, c1, int(c0 / clock_ghz), int(c1 / clock_ghz), sm, extra]
    return out


def test_per_sm_spans_the_blocks_of_one_sm():
    got = w.per_sm(_raw([(0, 100, 1100, 0), (0, 150, 1200, 0), (1, 10, 510, 3)]), 3)
    assert got[0]["blocks"] == 2 and got[0]["cycles"] == 1100 and got[0]["ns"] == 550
    assert got[1] == {"blocks": 1, "cycles": 500, "ns": 250, "extra": 3}
    with pytest.raises(ValueError, match="records"):
        w.per_sm(_raw([(0, 100, 100, 0)]), 1)  # a block that recorded no cycles


def test_row_result_rates_and_placement():
    row = w.parse_key("frag_generic_80.b2w8")  # 2 blocks of 8 warps an SM
    iters = 10
    instr = 8 * iters * w.LOADS  # a block
    sms = w.per_sm(_raw([(s, 0, instr, 0) for s in (0, 0, 1, 1)]), 4)  # each SM: 2 blocks in `instr` cycles
    r = w.row_result(row, iters, [sms, sms], sm_count=2)
    assert r["warp_loads_per_clk_per_sm"]["value"] == pytest.approx(2.0)
    assert r["cycles_per_warp_load"]["value"] == pytest.approx(0.5)
    assert r["cycles_per_fragment"] == pytest.approx(2.0) and r["fragments_per_clk_per_sm"] == pytest.approx(0.5)
    assert r["clock_hz"]["value"] == pytest.approx(2e9, rel=1e-3)
    assert r["warp_loads_per_clk_per_sm"]["n"] == 4 and r["placement_problems"] == []
    assert r["addresses"]["lines"] == 5
    lone = w.per_sm(_raw([(0, 0, instr, 0), (1, 0, instr, 0), (1, 0, instr, 0), (1, 0, instr, 0)]), 4)
    assert w.row_result(row, iters, [lone], sm_count=2)["placement_problems"]
    chase = w.parse_key("frag_chase_80.loaded")
    r = w.row_result(chase, 4, [w.per_sm(_raw([(0, 0, 320, 5)]), 1)], sm_count=1)
    assert r["cycles_per_hop"]["value"] == pytest.approx(10.0)
    assert r["loader_warp_loads_per_clk_per_sm"]["value"] == pytest.approx(5 * w.LOADS / 320)
    cp = w.row_result(w.parse_key("frag_cponly4_80.w16"), iters, [w.per_sm(_raw([(0, 0, 1000, 0)]), 1)], sm_count=1)
    assert cp["cp_bytes_per_clk_per_sm"]["value"] == pytest.approx(512 * iters * 4 * 16 / 1000)
    assert "cycles_per_fragment" not in cp


def _record(cycles: dict[str, float]) -> dict:
    rows = {}
    for key, c in cycles.items():
        r = w.parse_key(key)
        rows[key] = {"kind": r.kind, "pitch": r.pitch, "warps_per_sm": r.warps_per_sm, "placement_problems": [],
                     "cycles_per_warp_load": {"value": c, "p10": 0.9 * c, "p90": 1.1 * c, "n": 660}}
    return {"rows": rows, "meta": {"date_utc": "2026-05-01T00:00:00Z"}}


def test_fields_from_the_conflict_free_saturated_generic_rows():
    rec = _record({"frag_generic_4.w16": 1.05, "frag_generic_4.w32": 1.0, "frag_generic_4.w8": 0.5,
                   "frag_generic_80.w16": 2.1, "frag_generic_80.b2w8": 2.0, "frag_generic_144.w32": 3.0,
                   "frag_generic_64.w16": 4.0, "frag_generic_128.w16": 8.0, "frag_shared_80.w16": 1.0})
    f = w.fields(rec, "x/wmma_frag.json")["generic_shared_load_cycles_by_lines"]
    assert f["value"] == [[1.0, 1.0], [5.0, 2.0], [8.0, 3.0]]  # w8 (under 16 warps) and P = 64, 128 left out
    assert f["n"] == 3 * 660 and f["p10"] == pytest.approx(0.9) and f["p90"] == pytest.approx(3.3)
    assert f["spread_by_lines"][1] == [5.0, pytest.approx(1.8), pytest.approx(2.2)]
    assert "frag_generic_80.b2w8" in f["benchmark"] and "x/wmma_frag.json" in f["benchmark"]
    assert f["date"] == "2026-05-01T00:00:00Z" and f["how"]
    assert w.fields(_record({"frag_generic_80.w16": 2.0})) == {}
    rec["rows"]["frag_generic_144.w32"]["placement_problems"] = ["launch 0: 131 SMs"]
    assert w.fields(rec)["generic_shared_load_cycles_by_lines"]["value"] == [[1.0, 1.0], [5.0, 2.0]]


def test_table_of_a_synthetic_result():
    row = w.parse_key("frag_generic_80.w16")
    r = w.row_result(row, 4, [w.per_sm(_raw([(0, 0, 1000, 0)]), 1)], sm_count=1)
    ch = w.row_result(w.parse_key("frag_chase_80.alone"), 4, [w.per_sm(_raw([(0, 0, 320, 0)]), 1)], sm_count=1)
    text = w.format_table({"rows": {row.key: r, "frag_chase_80.alone": ch}, "errors": {"x": "boom"}, "fields": {}})
    assert "frag_generic_80.w16" in text and "10.0 cycles a hop" in text and "ERROR x: boom" in text


def test_main_without_gpu_exits_2(monkeypatch, capsys):
    monkeypatch.setattr(w.pc, "gpu_missing", lambda: "no CUDA device found")
    assert w.main(["--quick"]) == 2
    assert "needs CuPy" in capsys.readouterr().err


# ----- the compiled source and its SASS ----------------------------------------------------------------------
def _cuobjdump_dir() -> str | None:
    """cuobjdump's directory: on PATH, else the one pip's nvidia-cuda-cuobjdump wheel puts in site-packages."""
    if shutil.which("cuobjdump"):
        return str(Path(shutil.which("cuobjdump")).parent)
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for exe in Path(root).glob("*/bin/cuobjdump"):
            return str(exe.parent)
    return None


@pytest.fixture(scope="module")
def sass_result(tmp_path_factory):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    d = _cuobjdump_dir()
    if d is None:
        pytest.skip("cuobjdump not found")
    old = os.environ["PATH"]
    os.environ["PATH"] = d + os.pathsep + old
    try:
        return w.sass_checks(tmp_path_factory.mktemp("wfp"))
    finally:
        os.environ["PATH"] = old


def test_compiles_for_sm90a_without_spills(tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    _, log = pc.compile_cubin(tmp_path, w.ARCH, w.KERNEL_SRC)
    assert pc.ptxas_warnings(log) == []
    for k in {r.kernel for r in w.rows()}:
        m = re.search(rf"Compiling entry function '{k}'.*?Used (\d+) registers", log, re.S)
        assert m and int(m.group(1)) <= 64, k  # 1024 threads a block fit the 64 Ki registers


def test_each_loop_holds_what_its_row_claims(sass_result):
    assert "error" not in sass_result, sass_result.get("error")
    for name, want in w.expected_counts().items():
        r = sass_result[name]
        assert r.get("count") == want and r["ok"], (name, r)
    for p in w.PITCHES:
        loads = sass_result[f"frag_generic_{p}"]["body"]
        assert pc.count_prefix(Counter(loads), "LD.E") == 32 and sum(loads.values()) <= 80  # 32 FADD + address
        chaser = sass_result[f"frag_chase_{p}.chaser"]
        assert chaser["count"] == 8 and "problem" not in chaser
        # the chase: loads and the loop's own counter only (no address arithmetic on the dependent path)
        assert sum(chaser["body"].values()) <= 8 + 12
    for p in w.PITCHES:
        assert pc.count_prefix(Counter(sass_result[f"frag_ldsm_{p}"]["body"]), "LDSM") == 8
    for p in w.WMMA_PITCHES:
        body = Counter(sass_result[f"frag_wmma_ptx_{p}"]["body"])
        assert pc.count_prefix(body, "LD.E") == 32 and pc.count_prefix(body, "STS") == 1
    for k, n in (("frag_generic_cp2_80", 2), ("frag_generic_cp4_80", 4), ("frag_cponly4_80", 4)):
        assert pc.count_prefix(Counter(sass_result[k]["body"]), "LDGSTS") == n, k
    assert pc.count_prefix(Counter(sass_result["frag_cponly4_80"]["body"]), "LD.E") == 0


@pytest.mark.gpu
def test_quick_run_on_the_gpu(tmp_path):
    p = subprocess.run([sys.executable, "-m", "validation.calibration.wmma_frag_probe", "--quick", "--out",
                        str(tmp_path)], capture_output=True, text=True, cwd=pc.REPO_ROOT, timeout=600)
    if p.returncode == 2:
        pytest.skip(p.stderr.strip())
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    res = json.loads((tmp_path / "wmma_frag.json").read_text())
    assert res["meta"]["launch_wall_s"] < 15
    for key in ("frag_generic_4.w16", "frag_generic_80.w16", "frag_ldsm_80.w16", "frag_chase_80.loaded"):
        assert key in res["rows"], key
    assert 0.2 < res["rows"]["frag_generic_4.w16"]["warp_loads_per_clk_per_sm"]["value"] < 1.5


class _FakeDevice:
    """Two SMs; every launch takes `cycles_per_instr` a warp instruction of its row (chase: 30 a hop)."""

    sm_count = 2
    compile = {"compiled_by": "fake"}

    def __init__(self):
        self.launches = []

    def launch(self, row, iters):
        self.launches.append(row.key)
        if row.kind == "frag_chase":
            c, extra = iters * w.FRAGS * 30, 7 if row.threads > 32 else 0
        else:
            c, extra = row.blocks_per_sm * row.threads // 32 * iters * w.KINDS[row.kind].instr_per_trip, 0
        blocks = [(s, 0, c, extra) for s in range(2) for _ in range(row.blocks_per_sm)]
        return w.per_sm(_raw(blocks), len(blocks)), 1e-3


def test_run_probe_on_a_fake_device(monkeypatch, tmp_path):
    monkeypatch.setattr(w.pc, "collect_metadata", lambda: {"date_utc": "2026-05-01T00:00:00Z", "device_name": "fake"})
    monkeypatch.setattr(w, "sass_checks", lambda _d: {"frag_generic_80": {"ok": True}})
    dev = _FakeDevice()
    res = w.run_probe(quick=True, device=dev)
    assert res["errors"] == {} and set(res["rows"]) == {r.key for r in w.rows(quick=True)}
    assert len(dev.launches) == (w.QUICK_REPS + 1) * len(w.rows(quick=True))
    assert res["rows"]["frag_generic_80.w16"]["warp_loads_per_clk_per_sm"]["value"] == pytest.approx(1.0)
    assert res["rows"]["frag_chase_80.alone"]["cycles_per_hop"]["value"] == pytest.approx(30.0)
    assert res["fields"]["generic_shared_load_cycles_by_lines"]["value"] == [[1.0, 1.0], [5.0, 1.0], [8.0, 1.0]]
    assert w.pc.write_probe_result(str(tmp_path), w.RESULT_FILE, res, w.format_table(res)) == 0
    assert json.loads((tmp_path / w.RESULT_FILE).read_text())["meta"]["quick"] is True
    prof = w.run_probe(profile=True, device=_FakeDevice())
    assert [k for k, _ in prof["meta"]["profile_order"]] == [r.key for r in w.rows(quick=True)]
    assert prof["meta"]["reps"] == 1
