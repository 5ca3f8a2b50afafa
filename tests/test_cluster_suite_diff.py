"""cluster_probe's suite_diff group (ringd_c2: the GEMM-shaped wgmma ring moved toward the suite kernel
wgmma.cu one difference at a time): constants match the CUDA source, the walk's geometry never re-reads a
tile, the group runs only when named, and (nvcc) the probe's stage release compiles to the suite kernel's
instruction sequence. Synthetic rows only, never measurements."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from validation.calibration import cluster_probe as cp
from validation.calibration import probe_common as pc

CU = cp.KERNEL_SRC.read_text()


def _define(name: str) -> int:
    m = re.search(rf"#define {name} (\d+)", CU)
    assert m, f"#define {name} missing from {cp.KERNEL_SRC.name}"
    return int(m.group(1))


def test_the_suite_diff_constants_match_the_cuda_defines():
    for py, cu in (("SD_SUITE_SYNC", "CP_SD_SUITE_SYNC"), ("SD_WALK", "CP_SD_WALK"), ("SD_TRY_LIMIT", "CP_SD_TRY_LIMIT")):
        assert getattr(cp, py) == _define(cu), py
    assert re.search(r"__cluster_dims__\(2, 1, 1\)[^\n]*\n\s*ringd_c2\(", CU)
    assert re.search(rf"__cluster_dims__\(2, 1, 1\)[^\n]*\n\s*{cp.SD_AB_KERNEL}\([^)]*int kboxes_b\)", CU)
    assert cp.SD_GROUP in cp.EXTRA_GROUPS and cp.SD_GROUP not in cp.GROUPS
    assert cp.result_file((cp.SD_GROUP,)) == "cluster_suite_diff.json"


def test_the_rows_move_one_step_at_a_time_from_the_calibrated_ring():
    # the first row is the calibrated ring's (wgmma.c2.s4.c2_own_remote.rel_one): no switch on
    assert cp.SD_CONFIGS["sd.l2.own"] == (0, 0, "l2", cp.TENSOR_COLS)
    for name, (mc, sd, src, k) in cp.SD_CONFIGS.items():
        assert mc in (0, 1) and sd in (0, 1, 2, 3) and src in ("l2", "stream") and k in (cp.TENSOR_COLS, cp.SD_RAGGED_K)
        assert bool(sd & cp.SD_WALK) == (src == "stream"), name
    # the a/b rows: B multicast on the L2-resident tensor, each operand's pitch 4096 or 2008, every corner once,
    # the existing rows (sd.l2.mc, sd.l2.mc.k2008) left as they were
    corners = set()
    for name, (mc, sd, src, k_a, k_b) in cp.SD_AB_CONFIGS.items():
        assert (mc, sd, src) == (1, 0, "l2") and name == f"sd.l2.mc.a{k_a}.b{k_b}", name
        assert cp.sd_config(name) == (cp.SD_AB_KERNEL, 1, 0, "l2", k_a, k_b)
        corners.add((k_a, k_b))
    assert corners == {(a, b) for a in (cp.TENSOR_COLS, cp.SD_RAGGED_K) for b in (cp.TENSOR_COLS, cp.SD_RAGGED_K)}
    assert not set(cp.SD_AB_CONFIGS) & set(cp.SD_CONFIGS)
    assert cp.SD_CONFIGS["sd.l2.mc"] == (1, 0, "l2", cp.TENSOR_COLS)
    assert cp.SD_CONFIGS["sd.l2.mc.k2008"] == (1, 0, "l2", cp.SD_RAGGED_K)
    assert cp.sd_config("sd.l2.mc.k2008") == ("ringd_c2", 1, 0, "l2", cp.SD_RAGGED_K, cp.SD_RAGGED_K)
    for m, n, k, _ in cp.SD_SUITE_RUNS.values():
        assert (m // 128) * (n // 256) == 132 and k % 64 == 0


def test_the_geometry_of_the_sources():
    l2 = cp.sd_geometry("l2", 4096, 132, 2048)
    assert l2["rows"] == 2048 and l2["a_tiles"] == 16 and l2["b_tiles"] == 8 and l2["kboxes"] == 64
    rag = cp.sd_geometry("l2", cp.SD_RAGGED_K, 132, 2048)
    assert rag["kboxes"] == 31 and rag["rows"] == cp.L2_TENSOR_BYTES // 4016
    st = cp.sd_geometry("stream", 4096, 132, 2048)
    assert st["tm"] == 12 and st["tn"] == 11 and st["b_row_base"] == st["a_tiles"] * cp.A_ROWS
    # the B rows stay inside the tensor, and the walk reads every tile once
    assert st["b_row_base"] + st["b_tiles"] * cp.WG_N <= st["rows"]
    assert (2048 // 64) * 12 <= st["a_tiles"] and (2048 // 64) * 11 <= st["b_tiles"]
    assert cp.sd_geometry("stream", cp.SD_RAGGED_K, 132, 2048)["kboxes"] == 31
    with pytest.raises(ValueError, match="more than"):
        cp.sd_geometry("stream", 4096, 132, 1 << 20)
    with pytest.raises(ValueError, match="source"):
        cp.sd_geometry("hbm", 4096, 132, 2048)
    with pytest.raises(ValueError, match="box"):
        cp.sd_geometry("l2", 32, 132, 2048)


def test_the_ab_geometry_gives_each_operand_its_pitch():
    g = cp.sd_ab_geometry("l2", cp.SD_RAGGED_K, 4096, 132, 2048)
    assert g["a"] == cp.sd_geometry("l2", cp.SD_RAGGED_K, 132, 2048) and g["b"] == cp.sd_geometry("l2", 4096, 132, 2048)
    assert g["a"]["kboxes"] == 31 and g["b"]["kboxes"] == 64
    # A's box columns stay inside its 2008-half rows; B's tiles inside its rows
    assert (g["a"]["kboxes"] - 1) * cp.BOX_COLS + cp.BOX_COLS <= cp.SD_RAGGED_K
    assert g["b"]["b_tiles"] * cp.WG_N <= g["b"]["rows"] and g["a"]["a_tiles"] * cp.A_ROWS <= g["a"]["rows"]
    with pytest.raises(ValueError, match="l2"):
        cp.sd_ab_geometry("stream", 4096, 4096, 132, 2048)


def _rep() -> dict:
    """One rep's summary as wgmma_rep gives it (every per-step field 1 cycle, a 1500-cycle k-step)."""
    rep = {"cycles_per_step": 1500.0, "event_s": 1e-3, "clock_hz": 1.98e9, "records": [], "concurrent": True,
           "distinct_sms": 132, "cycles_per_step_by_rank": {"0": 1500.0, "1": 1500.0}}
    for f in ("release_per_step", "full_wait_per_step", "full_wait_wg2_per_step", "empty_wait_per_step",
              "wait_group_per_step", "tensor_activity"):
        rep[f] = 1.0
    return rep


def test_the_rows_record_each_operands_pitch():
    rep = _rep()
    old = cp.sd_row("sd.l2.mc.k2008", [rep], 2048, 132, 1, {})
    new = cp.sd_row("sd.l2.mc.a2008.b4096", [rep], 2048, 132, 1, {})
    assert old["kernel"] == "ringd_c2" and old["k"] == old["k_a"] == old["k_b"] == cp.SD_RAGGED_K
    assert new["kernel"] == cp.SD_AB_KERNEL and "k" not in new and (new["k_a"], new["k_b"]) == (cp.SD_RAGGED_K, 4096)
    assert (new["a_row_bytes"], new["b_row_bytes"]) == (4016, 8192)


def test_the_flushed_rows_repeat_their_row_behind_the_suites_l2_flush():
    # the same kernel and arguments as the row they repeat; the existing rows stay as they were
    assert cp.SD_FLUSHED == {"sd.stream.mc.sync.flushed": "sd.stream.mc.sync", "sd.l2.mc.sync.flushed": "sd.l2.mc.sync"}
    assert not set(cp.SD_FLUSHED) & (set(cp.SD_CONFIGS) | set(cp.SD_AB_CONFIGS))
    for name, base in cp.SD_FLUSHED.items():
        assert name == f"{base}.flushed" and base in cp.SD_CONFIGS
        assert cp.sd_config(name) == cp.sd_config(base)
    # the flush is the one tc_step_parts.trace_config (the suite_1wave rows) uses by default
    from validation.harness import timing
    assert cp.SD_L2_FLUSH == f"{timing.L2Flusher.__module__}.{timing.L2Flusher.__qualname__}"
    assert "flusher = flusher or L2Flusher(cp)" in (cp.REPO_ROOT / "validation/studies/tc_step_parts.py").read_text()
    rep = _rep()
    row = cp.sd_row("sd.stream.mc.sync.flushed", [rep], 2048, 132, 1, {})
    base = cp.sd_row("sd.stream.mc.sync", [rep], 2048, 132, 1, {})
    assert (row["l2_flushed"], row["l2_flush"], row["repeats"]) == (True, cp.SD_L2_FLUSH, "sd.stream.mc.sync")
    assert {k: v for k, v in row.items() if k not in ("l2_flushed", "l2_flush", "repeats")} == base
    assert "l2_flushed" not in base


def test_the_compact_line():
    row = {"value": 1411.6, "release_per_step": {"value": 1059.2}, "full_wait_per_step": {"value": 65.7},
           "empty_wait_per_step": {"value": 988.5}}
    suite = {"status": "ok", "parts_per_kstep": {"consumer_loop": {"value": 1617.0}, "consumer_release": {"value": 1146.0},
                                                 "consumer_full_wait": {"value": 148.0},
                                                 "producer_empty_wait": {"value": 1396.0}}}
    out = cp.sd_compact({"sd.l2.own": row, "suite_1wave.k4096.flushed": suite, "suite_1wave.k2048.warm":
                         {"status": "wrong", "message": "x"}})
    assert out == {"sd.l2.own": {"step": 1412, "release": 1059, "full": 66, "empty": 988},
                   "suite_1wave.k4096.flushed": {"step": 1617, "release": 1146, "full": 148, "empty": 1396},
                   "suite_1wave.k2048.warm": "wrong"}


# ----- the probe's release is the suite kernel's, instruction for instruction (nvcc + a disassembler) -------
_RELEASE = ("MEMBAR.ALL.CTA", "MEMBAR.ALL.GPU", "ERRBAR", "CGAERRBAR", "SYNCS.ARRIVE.TRANS64.RED")


def _disassemble(cubin) -> str:
    if shutil.which("cuobjdump"):
        return pc.disassemble(cubin)
    from validation.calibration.mma_feed_probe import nvdisasm_as_cuobjdump  # noqa: PLC0415

    d = subprocess.run(["nvdisasm", "-c", str(cubin)], capture_output=True, text=True, check=True)
    return nvdisasm_as_cuobjdump(d.stdout)


def _release_runs(ops: list[str]) -> list[list[str]]:
    """Every run of instructions from a MEMBAR.ALL.CTA to the next SYNCS.ARRIVE (predicates dropped)."""
    out, cur = [], None
    for op in ops:
        op = re.sub(r"^@!?U?P\d+\s+", "", op)
        if op.startswith("MEMBAR.ALL.CTA"):
            cur = []
        if cur is not None:
            cur.append(op)
            if op.startswith("SYNCS.ARRIVE"):
                out.append(cur)
                cur = None
    return out


@pytest.mark.skipif(shutil.which("nvcc") is None or (shutil.which("cuobjdump") is None and shutil.which("nvdisasm") is None),
                    reason="nvcc and cuobjdump or nvdisasm needed")
def test_the_probe_release_compiles_to_the_suite_kernels(tmp_path):
    (tmp_path / "probe").mkdir()
    cubin, log = cp.compile_cubin(tmp_path / "probe")
    assert cp.ptxas_warnings(log) == [], log
    sass = _disassemble(cubin)
    probe = [op for _, op, _ in pc.function_instructions(sass, "ringd_c2")]
    probe_ab = [op for _, op, _ in pc.function_instructions(sass, cp.SD_AB_KERNEL)]
    from validation.families.tc_gemm import wgmma  # noqa: PLC0415
    from validation.harness.suite import load_suite  # noqa: PLC0415

    cfg = next(c for c in load_suite("tc_gemm") if c.label == cp.SD_SUITE_LABEL)
    src = wgmma.kernel_source(cfg)
    (tmp_path / "suite.cu").write_text(src.code)
    r = subprocess.run(["nvcc", "-cubin", *wgmma.OPTIONS, "-o", str(tmp_path / "suite.cubin"), str(tmp_path / "suite.cu")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    suite = [op for _, op, _ in pc.function_instructions(_disassemble(tmp_path / "suite.cubin"), src.name_expressions[0])]
    # the k-loop's releases (mapa + arrive.release.cluster): the same five instructions in both kernels
    for ops in (probe, probe_ab, suite):
        runs = [[o.split()[0].rstrip(";") for o in run] for run in _release_runs(ops)]
        assert runs and all(tuple(x if not x.startswith("SYNCS.ARRIVE") else x[:24] for x in run) == _RELEASE
                            for run in runs), runs
