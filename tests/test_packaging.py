"""A non-editable install (`pip install .`) carries the data the CLI reads.

The wheel is built from a copy of the source tree (pip wheel --no-deps --no-build-isolation, with the
setuptools and wheel that the test extras install; no network, about 3 s), then checked two ways:
it lists every built-in scenario, hardware profile, validation suite, kernel source and recorded
result of the repository; and, unpacked into an empty folder and run from another one (so nothing
can come from the checkout), the CLI sweeps a built-in scenario, lists the hardware catalog and a
study replays recorded measurements.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: the data files a wheel must carry, as globs relative to the repository (each must match files)
PACKAGED_GLOBS = (
    "scenarios/*.toml",  # shipped as tilesim/scenarios/ (in the repository a link to scenarios/)
    "tilesim/hardware/data/*.toml",
    "tilesim/hardware/calibrated/*.toml",
    "tilesim/hardware/assumed/*.toml",
    "validation/families/*/suite.toml",
    "validation/families/*/*.cu",
    "validation/families/*/*.cuh",
    "validation/calibration/*.cu",
    "validation/results/**/*.csv",
    "validation/results/**/*.json",
    "validation/results/**/*.npz",
    "validation/results/**/*.toml",
)


def _build_tools_missing() -> str | None:
    try:
        setuptools_version = importlib.metadata.version("setuptools")
        importlib.metadata.version("wheel")
    except importlib.metadata.PackageNotFoundError as exc:
        return f"{exc.name} is not installed"
    if int(setuptools_version.split(".")[0]) < 68:
        return f"setuptools {setuptools_version} < 68"
    return None


def _wheel_name(repo_path: str) -> str:
    """Where a repository file lies in the wheel."""
    if repo_path.startswith("scenarios/"):
        return "tilesim/" + repo_path
    return repo_path


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    missing = _build_tools_missing()
    if missing:
        pytest.skip(f"building a wheel offline needs setuptools>=68 and wheel ({missing}): "
                    f"pip install -e \".[test]\" installs them")
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    junk = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist", ".pytest_cache")
    for name in ("tilesim", "validation", "scenarios"):
        shutil.copytree(REPO / name, src / name, symlinks=True, ignore=junk)
    dist = tmp / "dist"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-q", "-w", str(dist), str(src)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"pip wheel failed:\n{proc.stdout}\n{proc.stderr}"
    wheels = list(dist.glob("tilesim-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_lists_every_data_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for pattern in PACKAGED_GLOBS:
        files = [p.relative_to(REPO).as_posix() for p in REPO.glob(pattern) if p.is_file()]
        assert files, f"{pattern} matches no file in the repository"
        missing = sorted(f for f in files if _wheel_name(f) not in names)
        assert not missing, f"not in the wheel ({pattern}): {missing}"
    assert "tilesim/scenarios/tile_sizes.toml" in names  # `tilesim sweep`'s default


def test_unpacked_wheel_runs_from_elsewhere(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "COLUMNS": "200"}

    def run(*args: str) -> str:
        proc = subprocess.run([sys.executable, *args], cwd=work, env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, f"{args} failed:\n{proc.stdout}\n{proc.stderr}"
        return proc.stdout

    where = run("-c", "import tilesim, validation; print(tilesim.__file__); print(validation.__file__)")
    assert all(line.startswith(str(site)) for line in where.split()), where  # not the checkout's
    scenarios = run("-c", "from tilesim.sweep import available_scenarios as a; print(' '.join(a()))")
    assert set(scenarios.split()) == {p.stem for p in (REPO / "scenarios").glob("*.toml")}
    out = run("-m", "tilesim.cli", "sweep", "naive_vs_tiled", "-j", "1", "--no-plot")
    assert "best per shape" in out
    out = run("-m", "tilesim.cli", "hardware", "list")
    assert "h200" in out and "m5_max" in out
    out = run("-m", "validation.studies.engine_check")  # replays recorded calibration results
    assert "staged_outer" in out
