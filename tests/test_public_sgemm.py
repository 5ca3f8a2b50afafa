"""The held-out siboehm/SGEMM_CUDA kernels (validation/public/sgemm): the translation unit compiles
offline with nvcc for sm_90 in one call and names every kernel; every mapped configuration is valid
for the H200 and launches as many threads and blocks as the runner does; the report reads a
SYNTHETIC times.csv (made-up times, no measurement); on a GPU, every kernel is correct at 1024^3."""

from __future__ import annotations

import csv
import shutil
from types import SimpleNamespace

import pytest

from tilesim.hardware import load
from tilesim.kernels.gemm.config import check_fits
from validation.public import fetch, report, run
from validation.public.sgemm import kernels as K

NO_SOURCES = fetch.missing()
needs_sources = pytest.mark.skipif(bool(NO_SOURCES), reason="the third-party sources are not kept in the repository: "
                                   "python -m validation.public.fetch downloads them")


H200 = load("h200")
SIZES = (1024, 2048, 4096)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@needs_sources
def test_translation_unit_compiles_for_sm90_in_one_call(tmp_path):
    built = K.compile_all(tmp_path)
    assert set(built) == {k.name for k in K.KERNELS}
    for name, b in built.items():
        assert b.ptxas_regs is not None and b.ptxas_regs <= 255, name
        assert b.spill_bytes == 0, name


@needs_sources
def test_sources_verbatim_and_wrapped():
    assert (K.SRC_DIR / "README.md").exists() and (K.SRC_DIR / "LICENSE").exists()
    tu = K.translation_unit()
    directives = [line.strip() for line in tu.splitlines() if line.lstrip().startswith("#")]
    assert not [d for d in directives if d.startswith(("#include", "#pragma once"))], directives
    for k in K.KERNELS:
        text = (K.SRC_DIR / k.file).read_text(encoding="utf-8")
        assert f" {k.function}(" in text or f"\n    {k.function}(" in text, k.file
        assert text.startswith("#pragma once\n") and "#include <cuda_runtime.h>" in text, k.file
        if k.template_args:
            assert f"template __global__ void {k.name_expression}(" in tu
    assert len({k.name_expression for k in K.KERNELS}) == len(K.KERNELS)


@pytest.mark.parametrize("kernel", K.KERNELS, ids=lambda k: k.name)
def test_mapped_configs_fit_the_h200(kernel):
    for s in SIZES:
        assert kernel.supports(s, s, s) is None
        cfg = kernel.config(s, s, s)
        check_fits(cfg, H200)
        assert (cfg.alpha, cfg.beta) == (K.ALPHA, K.BETA)
        assert cfg.threads == kernel.threads  # the runner's block
        gx, gy, gz = kernel.grid(s, s, s)
        assert gx * gy * gz == cfg.grid[0] * cfg.grid[1] * cfg.grid[2]  # the runner's number of blocks
        if kernel.number >= 4:
            assert kernel.grid(s, s, s) == cfg.grid  # blockIdx.x walks columns, as the family's


def test_supports_rejects_what_the_kernels_cannot_compute():
    assert K.BY_NAME["siboehm_k01_naive"].supports(1000, 999, 7) is None  # bounds-checked
    assert "multiple of 128" in K.BY_NAME["siboehm_k10_warptiling"].supports(1024, 1000, 1024)
    assert "another instance" in K.BY_NAME["siboehm_k05_2d_blocktiling"].supports(64, 64, 64)
    assert "32-bit" in K.BY_NAME["siboehm_k02_coalesce"].supports(65536, 65536, 65536)
    assert K.tolerance(4096) == 1e-4 and K.tolerance(16384) == pytest.approx(2e-4)


def test_parse_sizes():
    assert run.parse_sizes("1024, 2048") == (1024, 2048)
    with pytest.raises(ValueError, match="--sizes entry"):
        run.parse_sizes("1024,x")


def _write_synthetic(tmp_path, rows):
    with open(tmp_path / "times.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=run.HEADER)
        w.writeheader()
        w.writerows(rows)


def _synthetic_rows():
    """Made-up times (2 M N K / 1e13 s): they test the report's arithmetic, not the model."""
    rows = []
    for k in K.KERNELS:
        for s in (1024, 2048):
            rows.append(dict(kernel=k.name, size=f"{s}x{s}x{s}", label=k.config(s, s, s).label, status="ok",
                             rel_err=1e-6, median_s=2 * s**3 / 1e13, p10_s="", p90_s="", regs_per_thread=64,
                             flops_per_s=1e13))
    rows.append(dict(kernel="siboehm_k05_2d_blocktiling", size="64x64x64", label="", status="unsupported",
                     rel_err="", median_s="", p10_s="", p90_s="", regs_per_thread=96, flops_per_s=""))
    return rows


def test_report_on_synthetic_times(tmp_path):
    _write_synthetic(tmp_path, _synthetic_rows())

    def fake_simulate(cfg, hw):
        regs = cfg.regs_per_thread or 32
        return SimpleNamespace(time_s=cfg.flops / 1e13 * (1 + regs / 640))

    preds, skipped = report.predict_rows(report.load_rows(tmp_path), simulate=fake_simulate)
    assert len(preds) == 2 * len(K.KERNELS) and len(skipped) == 1
    assert report.stats(preds, "informed")["mape"] == pytest.approx(0.1)
    assert report.stats(preds, "informed")["bias"] == pytest.approx(0.1)
    text = report.format_report(preds, skipped)
    assert "MAPE" in text and "Spearman" in text and "skipped: siboehm_k05_2d_blocktiling 64x64x64" in text

    rows = _synthetic_rows()
    rows[0]["label"] = "something_else"
    _write_synthetic(tmp_path, rows)
    with pytest.raises(ValueError, match="label"):
        report.predict_rows(report.load_rows(tmp_path), simulate=fake_simulate)


def test_report_cli_with_the_model(tmp_path, capsys):
    _write_synthetic(tmp_path, [r for r in _synthetic_rows() if r["size"] == "1024x1024x1024"])
    assert report.main(["sgemm", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "[blind]" in out and "[informed]" in out and "siboehm_k10_warptiling" in out
    with pytest.raises(ValueError, match="no times.csv"):
        report.main(["sgemm", "--results", str(tmp_path / "missing")])


@pytest.mark.gpu
@needs_sources
def test_public_sgemm_correct_on_gpu(tmp_path):
    pytest.importorskip("cupy")
    rows = run.run_sgemm(tmp_path, (1024,))
    assert [r["status"] for r in rows] == ["ok"] * len(K.KERNELS), rows
    assert (tmp_path / "times.csv").exists() and (tmp_path / "metadata.json").exists()
