"""The held-out tensor-core kernels (validation/public/tc): every wrapper compiles offline with nvcc
for sm_90a in one call and names its kernel in the cubin; every mapped configuration is valid for the
H200; the report reads a synthetic times.csv; on a GPU, every kernel is correct at 2048^3."""

from __future__ import annotations

import csv
import shutil
from types import SimpleNamespace

import pytest

from tilesim.hardware import load
from tilesim.kernels.tc_gemm.config import check_fits
from validation.public import fetch
from validation.public.tc import kernels as K
from validation.public.tc import report

NO_SOURCES = fetch.missing()
needs_sources = pytest.mark.skipif(bool(NO_SOURCES), reason="the third-party sources are not kept in the repository: "
                                   "python -m validation.public.fetch downloads them")


H200 = load("h200")
SIZES = (2048, 4096, 8192)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@needs_sources
def test_wrappers_compile_for_sm90a_in_one_call(tmp_path):
    built = K.compile_all(tmp_path)
    assert set(built) == {k.name for k in K.KERNELS}
    for name, b in built.items():
        assert b.kernel.base_name in b.mangled, name
        assert b.ptxas_regs is not None and b.ptxas_regs <= 255, name


def test_sources_and_wrappers_exist():
    for k in K.KERNELS:
        assert (K.SRC_DIR / k.wrapper).exists(), k.wrapper
    assert (K.SRC_DIR / "README.md").exists()


@pytest.mark.parametrize("kernel", K.KERNELS, ids=lambda k: k.name)
def test_mapped_configs_fit_the_h200(kernel):
    for s in SIZES:
        assert kernel.supports(s, s, s) is None
        cfg = kernel.config(s, s, s)
        check_fits(cfg, H200)
        assert cfg.dtype == kernel.dtype and cfg.b_layout == kernel.b_layout and cfg.out_dtype == "input"
    labels = {k.config(4096, 4096, 4096).label for k in K.KERNELS}
    assert len(labels) == len(K.KERNELS)  # the label identifies the mapping


def test_grid_covers_c_exactly():
    for k in K.KERNELS:
        gx, gy, gz = k.grid(8192, 8192, 8192)
        bm, bn = k.divides[0], k.divides[1]
        assert gx * gy * gz == (8192 // bm) * (8192 // bn), k.name


def test_fastcu_two_warpgroup_kernels():
    """matmul_3 / matmul_4 as their runKernelN launch them: 128x256x64 tiles, 256 / 384 threads, one /
    three 48 KiB stages of dynamic shared memory (matmul_3: the one-buffer rung, no producer), the DBG = false
    instantiation picked by its mangled name."""
    m3, m4 = K.BY_NAME["fastcu_wgmma_m3"], K.BY_NAME["fastcu_wgmma_m4"]
    assert (m3.block, m4.block) == ((256, 1, 1), (384, 1, 1))
    assert (m3.dynamic_smem_bytes, m4.dynamic_smem_bytes) == (49152, 3 * 49152)
    assert m3.grid(4096, 4096, 4096) == (32 * 16, 1, 1) and m4.debug_pointer
    c3, c4 = m3.config(4096, 4096, 4096), m4.config(4096, 4096, 4096)
    assert (c3.consumers, c3.stages, c3.threads, c4.consumers, c4.stages) == (2, 1, 256, 2, 3)  # m3: one buffer
    assert (c4.bm, c4.bn, c4.bk, c4.wm, c4.wn, c4.threads) == (128, 256, 64, 64, 256, 384)
    assert K.mangled_template_args("128, 256, 64, 384, 3, false") == "ILi128ELi256ELi64ELi384ELi3ELb0EE"
    assert K.mangled_template_args("8, -1, true") == "ILi8ELin1ELb1EE"
    assert K.mangled_template_args("half, 4") is None
    f = b"\x00.text._ZN2M413matmulKernel4ILi128ELi3ELb0EEEviii\x00.text._ZN2M413matmulKernel4ILi128ELi3ELb1EEEviii\x00"
    assert K.mangled_name(f, "matmulKernel4", "128, 3, false") == "_ZN2M413matmulKernel4ILi128ELi3ELb0EEEviii"
    with pytest.raises(K.BuildError):
        K.mangled_name(f, "matmulKernel4")


def test_tolerances():
    assert K.tolerance(K.BY_NAME["leetcuda_mma_s2"], 8192) < 0.03
    assert K.tolerance(K.BY_NAME["fastcu_wgmma_m2"], 8192) == 1.2e-2
    assert K.BY_NAME["deftruth_wmma_naive"].supports(100, 64, 64) is not None


def test_report_on_synthetic_times(tmp_path, capsys, monkeypatch):
    rows = []
    for k in K.KERNELS:
        for s in (4096, 8192):
            rows.append(dict(kernel=k.name, size=f"{s}x{s}x{s}", label=k.config(s, s, s).label, status="ok",
                             rel_err=1e-3, median_s=2 * s**3 / 1e14, p10_s="", p90_s="", regs_per_thread=96,
                             flops_per_s=""))
    rows.append(dict(kernel="fastcu_wgmma_m2", size="2000x2000x2000", label="", status="unsupported", rel_err="",
                     median_s="", p10_s="", p90_s="", regs_per_thread="", flops_per_s=""))
    with open(tmp_path / "times.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)

    def fake_simulate(cfg, hw):  # the report's arithmetic, not the model's speed
        regs = cfg.regs_per_thread or 64
        return SimpleNamespace(time_s=cfg.flops / 1e14 * (1 + regs / 1000))

    preds, skipped = report.predict_rows(report.load_rows(tmp_path), simulate=fake_simulate)
    assert len(preds) == 2 * len(K.KERNELS) and len(skipped) == 1
    st = report.stats(preds, "informed")
    assert st["mape"] == pytest.approx(0.096) and st["bias"] == pytest.approx(0.096)
    text = report.format_report(preds, skipped)
    assert "MAPE" in text and "Spearman" in text and "skipped: fastcu_wgmma_m2" in text
    rows[0]["label"] = "something_else"
    with open(tmp_path / "times.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with pytest.raises(ValueError, match="label"):
        report.predict_rows(report.load_rows(tmp_path), simulate=fake_simulate)


@pytest.mark.gpu
@needs_sources
def test_public_kernels_correct_on_gpu(tmp_path):
    pytest.importorskip("cupy")
    from validation.public.tc import run

    rows = run.run(tmp_path, (2048,))
    assert all(r["status"] == "ok" for r in rows), rows
