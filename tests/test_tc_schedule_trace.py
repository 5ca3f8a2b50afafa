"""The wgmma schedule trace: the tiles each block reads, and the lags between reads of one tile."""

import numpy as np
import pytest

from validation.families.tc_gemm import wgmma
from validation.harness.suite import load_suite
from validation.studies import tc_schedule_trace as st


def test_block_tiles_follow_the_kernels_group_order():
    # 4 x 3 tiles, groups of 2 along M: pids 0,1 -> (0,0),(1,0); 2,3 -> (0,1),(1,1); ...; 6,7 -> (2,0),(3,0)
    tm, tn = st.block_tiles(m=512, n=384, bm=128, bn=128, cluster=1, group_m=2)
    assert list(zip(tm[:8].tolist(), tn[:8].tolist(), strict=True)) == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2),
                                                                         (1, 2), (2, 0), (3, 0)]
    assert sorted(zip(tm.tolist(), tn.tolist(), strict=True)) == [(i, j) for i in range(4) for j in range(3)]
    tm, _ = st.block_tiles(m=300, n=128, bm=128, bn=128, cluster=2, group_m=8)  # 3 tiles along M -> 4 (pairs)
    assert sorted(tm.tolist()) == [0, 1, 2, 3]


def test_reader_lags_are_times_since_the_previous_read_of_the_same_tile():
    issue = np.array([[0, 100], [30, 100], [500, 900], [10, 120]])  # 4 blocks, 2 k-tiles
    keys = np.array([0, 0, 1, 0])  # blocks 0, 1, 3 read tile 0; block 2 alone reads tile 1
    lags, reads = st.reader_lags(issue, keys)
    assert reads == 8
    assert sorted(lags.tolist()) == [0, 10, 20, 20]  # k-tile 0: 0, 10, 30 -> 10, 20; k-tile 1: 100, 100, 120
    lags, reads = st.reader_lags(issue, np.array([0, -1, 1, 0]))  # block 1 does not read (a multicast peer)
    assert reads == 6 and sorted(lags.tolist()) == [10, 20]


def test_lag_summary_counts_bytes_within_each_window():
    cfg = next(c for c in load_suite("tc_gemm") if c.label == "wgmma_fp16_Bcol_128x256x64_swz_s4_c2"
               and c.m == 4096)
    blocks = wgmma.geometry(cfg).grid[0]
    ktiles = cfg.k // cfg.bk
    in_step = np.zeros((blocks, ktiles), dtype=np.int64) + np.arange(ktiles) * 1000
    s = st.lag_summary(cfg, in_step, wgmma.group_m(cfg), windows_ns=(1, 10))
    # in step: every read after the first of its tile comes 0 ns after another
    tm, tn = st.block_tiles(cfg.m, cfg.n, cfg.bm, cfg.bn, 1, wgmma.group_m(cfg))
    first_reads = (len(set(tm.tolist())) * cfg.bm + len(set(tn.tolist())) * cfg.bn) * cfg.bk * 2 * ktiles
    total = blocks * (cfg.bm + cfg.bn) * cfg.bk * 2 * ktiles
    assert s["both"]["bytes_within"]["1"] == pytest.approx(1 - first_reads / total)
    spread = in_step + np.arange(blocks)[:, None] * 100  # every block 100 ns after the one before
    s = st.lag_summary(cfg, spread, wgmma.group_m(cfg), windows_ns=(1, 10**9))
    assert s["both"]["bytes_within"]["1"] == 0.0
    assert s["both"]["bytes_within"][str(10**9)] == pytest.approx(1 - first_reads / total)


def test_the_traced_kernel_source_differs_only_by_the_trace():
    cfg = next(c for c in load_suite("tc_gemm") if c.instruction == "wgmma")
    plain, traced = wgmma.kernel_source(cfg).code, wgmma.kernel_source(cfg, trace=True).code
    assert "#define TC_TRACE 0" in plain and "#define TC_TRACE 1" in traced
    assert plain.replace("#define TC_TRACE 0", "#define TC_TRACE 1") == traced


def test_the_traced_kernel_compiles_for_sm_90a(tmp_path):
    import shutil
    import subprocess

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on the PATH")
    cfg = next(c for c in load_suite("tc_gemm") if c.instruction == "wgmma" and c.cluster == 2)
    src = wgmma.kernel_source(cfg, trace=True)
    (tmp_path / "k.cu").write_text(src.code)
    r = subprocess.run([nvcc, "-cubin", *src.options, "-o", str(tmp_path / "k.cubin"), str(tmp_path / "k.cu")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]


def test_traced_runs_times_both_kernels_and_reads_every_blocks_stamps():
    """schedule_trace.traced_runs (shared by the GEMM and wgmma traces), on a stand-in for CuPy: the traced
    and plain kernels alternate after two warm-up pairs, each traced run's stamps are read relative to its
    first stamp, and a block that left a stamp unwritten makes the run an error."""
    import numpy as np

    from validation.studies.schedule_trace import traced_runs

    class FakeEvent:
        def record(self):
            pass

        def synchronize(self):
            pass

    class Buf:
        def __init__(self):
            self.data = np.zeros(2 * 4, dtype=np.uint64)

        def fill(self, v):
            self.data[:] = v

    buf, calls = Buf(), []

    class Cuda:
        Event = FakeEvent

        @staticmethod
        def get_elapsed_time(a, b):
            return 2.0  # ms

    class Cp:
        cuda = Cuda

        @staticmethod
        def asnumpy(b):
            return b.data.copy()

    def traced():
        calls.append("t")
        buf.data[:] = [3, 100, 150, 170, 5, 110, 140, 200]  # two blocks: SM, three stamps

    got = traced_runs(Cp, lambda: calls.append("f"), traced, lambda: calls.append("p"), buf, 2, 4, reps=3)
    assert got["status"] == "ok" and got["traced_s"] == [0.002] * 3 and got["plain_s"] == [0.002] * 3
    assert calls[:8] == ["f", "t", "f", "p", "f", "t", "f", "p"] and calls.count("t") == 5
    assert got["smid"].tolist() == [3, 5]
    assert got["stamps_ns"].shape == (3, 2, 3) and got["stamps_ns"][0].tolist() == [[0, 50, 70], [10, 40, 100]]

    def lazy():
        buf.data[:] = [3, 100, 0, 170, 5, 110, 140, 200]

    assert traced_runs(Cp, lambda: None, lazy, lambda: None, buf, 2, 4, reps=1)["status"] == "error"
