"""validation/studies/engine_check.py's summary by microbenchmark kind, and
validation/studies/gemm_dram_bytes.py's table of the register-tiled GEMMs' DRAM bytes."""

from __future__ import annotations

import math

import pytest

from validation.studies import engine_check, gemm_dram_bytes


def test_group_summary_counts_every_row_once():
    rows = [{"case": "lds_outer 8x8_4w", "error": 0.04}, {"case": "lds_outer 8x4_4w", "error": -0.16},
            {"case": "dgstaged_outer 8x8_4w_R4", "error": 0.52}]
    got = {g["group"]: g for g in engine_check.group_summary(rows)}
    assert list(got) == ["lds_outer", "dgstaged_outer"]
    assert got["lds_outer"]["rows"] == 2 and got["lds_outer"]["beyond"] == 1
    assert got["lds_outer"]["mape"] == pytest.approx(0.10)
    assert (got["lds_outer"]["min"], got["lds_outer"]["max"]) == (-0.16, 0.04)
    assert got["dgstaged_outer"]["beyond"] == 1


def test_engine_check_time_error_is_the_rate_error_inverted():
    rows = engine_check.check()
    if not rows:
        pytest.skip("no recorded lds_outer / staged_outer microbenchmarks")
    for r in rows:
        assert (1 + r["time_error"]) * (1 + r["error"]) == pytest.approx(1.0)
    assert sum(g["rows"] for g in engine_check.group_summary(rows)) == len(rows)


def test_gemm_dram_bytes_rows_are_the_register_tiled_configurations_with_counters():
    if not (gemm_dram_bytes.DEFAULT_DIR / "counters.csv").exists():
        pytest.skip("no recorded GEMM counters")
    rows = gemm_dram_bytes.rows()
    assert len(rows) >= 21  # every register-tiled configuration at 4096^3 at least
    assert all(r["label"].split("_")[0] in gemm_dram_bytes.REG_TILED for r in rows)
    for r in rows:
        pred = r["pred_read_bytes"] + r["pred_write_bytes"]
        meas = r["meas_read_bytes"] + r["meas_write_bytes"]
        assert meas > 0 and not math.isnan(meas)
        assert r["error"] == pytest.approx(pred / meas - 1.0)


def test_schedule_age_ranks_a_younger_block_by_the_blocks_started_before_it():
    import numpy as np

    from validation.studies.schedule_age import age_ranks

    # SM 0: block 0 from 0 to 8 (segments of 1), block 1 from 2 to 18 (segments of 2); SM 1: block 2 alone
    stamps = np.array([np.arange(9.0), 2.0 + 2.0 * np.arange(9.0), np.arange(9.0)])
    got = age_ranks(np.array([0, 0, 1]), stamps)
    assert got[(2, 0)] == [1.0] * 6  # block 0's segments from 2 on (block 1 resident), it the oldest
    assert got[(2, 1)] == [2.0] * 3  # block 1's segments while block 0 still runs (midpoints 3, 5, 7)
    assert got[(1, 0)] == [1.0] * 2 + [2.0] * 5 + [1.0] * 8  # alone: block 0 early, block 1 late, block 2


def _ptxas_registers(tmp_path) -> dict[str, int]:
    """Registers per thread of every function of validation/calibration/microbench.cu as the calibration
    compiles it (nvcc -cubin -arch=sm_90 -O3, calibrate.build_cubin), from ptxas's resource usage."""
    import re
    import shutil
    import subprocess
    from pathlib import Path

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    src = Path(__file__).resolve().parents[1] / "validation" / "calibration" / "microbench.cu"
    p = subprocess.run([nvcc, "-cubin", "-arch=sm_90", "-O3", "--resource-usage", "-o", str(tmp_path / "mb.cubin"),
                        str(src)], capture_output=True, text=True, timeout=300, check=True)
    regs: dict[str, int] = {}
    name = None
    for line in (p.stdout + p.stderr).splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            name = m.group(1)
        m = re.search(r"Used (\d+) registers", line)
        if m and name:
            regs[name] = int(m.group(1))
            name = None
    return regs


def test_engine_check_register_counts_are_the_compiled_kernels(tmp_path):
    """REGS_AS_COMPILED is what ptxas allocates to each benchmark kernel (the recorded runs' nvcc 13.0 and
    flags; a newer compiler may differ: then the table, not this test, is out of date for those runs)."""
    regs = _ptxas_registers(tmp_path)
    got = {k: regs.get(k) for k in engine_check.REGS_AS_COMPILED}
    assert got == engine_check.REGS_AS_COMPILED


@pytest.mark.parametrize(("regs", "warps", "smem_blocks", "resident"), [
    (143, 4, 4, 3),  # dgstaged / xdgstaged_outer_8x8 at R4: 144 x 32 registers a warp, 3 warps a sub-partition
    (143, 8, 2, 1),  # ... 8 warps at R2
    (130, 4, 4, 3),  # pdgstaged_outer_8x8
    (128, 4, 4, 4),  # gstaged_outer_8x8: exactly 4 warps a sub-partition
    (128, 8, 2, 2),
    (56, 4, 7, 7),  # the 4x4 loops
])
def test_the_engine_holds_as_many_blocks_as_the_compiled_registers_allow(regs, warps, smem_blocks, resident):
    """The staged benchmarks size shared memory for R blocks per SM; the 8x8 loops that stream from HBM
    compile to more registers than 4 blocks of 4 warps (or 2 of 8) can have, so the GPU holds fewer and
    runs the grid in more than one wave. The engine check's programs carry the compiled count."""
    from tilesim.analytic import occupancy
    from tilesim.hardware import load

    hw = load("h200")
    prog = engine_check.outer_program(hw, 8, 8, warps, smem_blocks, 621.0, staged=True, global_tiles=True,
                                      stream=True, iters=10, regs_per_thread=regs)
    la = prog.launch
    assert la.regs_per_thread == regs
    occ = occupancy(hw, la.threads_per_block, la.regs_per_thread, la.smem_bytes_per_block)
    assert occ.blocks_per_sm == resident
    assert occ.limiter == ("registers" if resident < smem_blocks else occ.limiter)


def test_engine_check_prefers_a_recorded_register_count(tmp_path):
    """A row that records its kernel's ``num_regs`` (calibrate.py records it from now on) is simulated with
    it; rows recorded before, with the table's compiled count."""
    import json

    rec = json.loads((engine_check.DEFAULT_DIR / "staged_outer.json").read_text())
    row = dict(rec["dgstaged_outer"]["rows"]["8x8_4w_R4"], iters=20)
    for num_regs, resident in ((None, 3), (128, 4)):
        r = dict(row) if num_regs is None else dict(row, num_regs=num_regs)
        (tmp_path / "staged_outer.json").write_text(json.dumps({"dgstaged_outer": {"rows": {"8x8_4w_R4": r}}}))
        (got,) = engine_check.check(tmp_path)
        assert got["blocks_per_sm"] == resident


def test_calibrate_num_regs_reads_the_kernel_attributes():
    from validation.calibration.calibrate import num_regs

    class K:
        attributes = {"num_regs": 143, "local_size_bytes": 0}

    assert num_regs(K()) == 143
    assert num_regs(object()) is None


def test_every_staged_variant_names_kernels_that_microbench_defines():
    """calibrate --staged-outer runs, per STAGED_VARIANTS entry and case, the kernel staged_kernel_name
    gives: each is an extern "C" __global__ of microbench.cu, with a register count in the engine check."""
    import re
    from pathlib import Path

    from validation.calibration.calibrate import (
        BOUNDED_OUTER_CASES,
        GSTAGED_OUTER_CASES,
        STAGED_OUTER_CASES,
        STAGED_VARIANTS,
        staged_kernel_name,
    )

    src = (Path(__file__).resolve().parents[1] / "validation" / "calibration" / "microbench.cu").read_text()
    defined = set(re.findall(r'extern "C" __global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\(', src))
    for part, kw in STAGED_VARIANTS.items():
        plan = (BOUNDED_OUTER_CASES if kw.get("bounded") else GSTAGED_OUTER_CASES if kw.get("global_tiles")
                else STAGED_OUTER_CASES)
        for tm, tn, warps, _ in plan:
            name = staged_kernel_name(tm, tn, warps, **kw)
            assert name in defined, (part, name)
            assert name in engine_check.REGS_AS_COMPILED, (part, name)
    assert staged_kernel_name(8, 8, 4, global_tiles=True, stream=True, prefetch=True) == "pdgstaged_outer_8x8"
    assert staged_kernel_name(8, 8, 8, **STAGED_VARIANTS["ldgstaged_outer"]) == "ldgstaged_outer_8x8_8w"


def test_the_launch_bounded_streaming_loop_fits_the_blocks_its_shared_memory_allows(tmp_path):
    """ldgstaged_outer_8x8_<w>w: the dgstaged loop under __launch_bounds__ keeps within 128 registers (4
    blocks of 4 warps, 2 of 8) and does not spill, so it measures the loop at the residency intended."""
    regs = _ptxas_registers(tmp_path)
    for name in ("ldgstaged_outer_8x8_4w", "ldgstaged_outer_8x8_8w"):
        assert regs[name] <= 128, (name, regs[name])
    import shutil
    import subprocess
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "validation" / "calibration" / "microbench.cu"
    p = subprocess.run([shutil.which("nvcc"), "-cubin", "-arch=sm_90", "-O3", "--resource-usage", "-o",
                        str(tmp_path / "mb2.cubin"), str(src)], capture_output=True, text=True, timeout=300, check=True)
    text = p.stdout + p.stderr
    for name in ("ldgstaged_outer_8x8_4w", "ldgstaged_outer_8x8_8w"):
        block = text.split(f"Function properties for {name}", 1)[1].splitlines()[1]
        assert "0 bytes spill stores, 0 bytes spill loads" in block, (name, block)
