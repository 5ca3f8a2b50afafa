"""Where and how a measurement was taken: device, driver, toolchain, clocks, date, git revision.

``collect_metadata()`` never raises for a missing piece: anything it cannot read is recorded as
``None`` (or ``"unknown"`` for the git revision, e.g. on a copy of the tree without ``.git``).
"""

from __future__ import annotations

import datetime as _dt
import platform
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from validation.harness.timing import mhz_to_hz, query_nvidia_smi, read_sm_clock_hz

REPO_ROOT = Path(__file__).resolve().parents[2]


def utc_now_iso() -> str:
    """The current UTC time, ISO 8601 with seconds (e.g. ``2026-11-29T10:00:00+00:00``)."""
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


REVISION_FILE = ".device_git_revision"


def _revision_file(repo: Path) -> str:
    """The revision written beside a working-tree copy that travels without its .git (device runs)."""
    f = repo / REVISION_FILE
    return f.read_text().strip() if f.exists() else "unknown"


def git_revision(repo: Path = REPO_ROOT) -> str:
    """``git rev-parse HEAD`` plus ``-dirty`` when ``git status --porcelain`` is non-empty.

    Without git (or outside a checkout), or in a dirty checkout beside a ``.device_git_revision``
    (the device copy: its .git may be an older checkout than the tree), the content of that file,
    which ``validation/device.sh``'s caller writes before sending the tree; else ``"unknown"``.
    """
    exe = shutil.which("git")
    if exe is None or not (repo / ".git").exists():
        return _revision_file(repo)
    try:
        rev = subprocess.run([exe, "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        status = subprocess.run([exe, "status", "--porcelain"], cwd=repo, capture_output=True,
                                text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return _revision_file(repo)
    if not rev:
        return _revision_file(repo)
    if status and (repo / REVISION_FILE).exists():
        # a copy sent to the device: its .git may be an older checkout; the sender named the revision
        return _revision_file(repo)
    return f"{rev}-dirty" if status else rev


def nvcc_version() -> str | None:
    """The release string of ``nvcc --version`` (e.g. ``"13.0, V13.0.48"``), or None."""
    exe = shutil.which("nvcc")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release\s+([^\n]+)", out)
    return m.group(1).strip() if m else (out.strip().splitlines()[-1] if out.strip() else None)


def _cuda_version_str(v: int | None) -> str | None:
    """CUDA's integer version (e.g. 13000) as ``"13.0"``."""
    if v is None:
        return None
    return f"{v // 1000}.{(v % 1000) // 10}"


def _cupy_info() -> dict:
    info: dict = {"cupy_version": None, "device_name": None, "cuda_runtime_version": None,
                  "cuda_driver_version": None, "device_index": None, "sm_count": None,
                  "l2_cache_bytes": None, "compute_capability": None}
    try:
        import cupy as cp  # noqa: PLC0415
    except Exception:
        return info
    info["cupy_version"] = cp.__version__
    try:
        dev = cp.cuda.Device()
        props = cp.cuda.runtime.getDeviceProperties(dev.id)
        name = props.get("name", b"")
        info["device_name"] = name.decode() if isinstance(name, bytes) else str(name)
        info["device_index"] = dev.id
        info["sm_count"] = int(props.get("multiProcessorCount", 0)) or None
        info["l2_cache_bytes"] = int(props.get("l2CacheSize", 0)) or None
        info["compute_capability"] = f"{props.get('major')}.{props.get('minor')}"
        info["cuda_runtime_version"] = _cuda_version_str(cp.cuda.runtime.runtimeGetVersion())
        info["cuda_driver_version"] = _cuda_version_str(cp.cuda.runtime.driverGetVersion())
    except Exception:  # no GPU or no driver: keep what we have
        pass
    return info


VENDOR_PREFIXES = ("nvidia", "apple", "amd")


def gpu_slug(device_name: str) -> str:
    """A results-directory name for a GPU from the name its driver reports: lower case, the vendor
    dropped, runs of other characters turned into ``_`` (``"NVIDIA H200"`` -> ``"h200"``,
    ``"NVIDIA H100 80GB HBM3"`` -> ``"h100_80gb_hbm3"``). Raises ``ValueError`` for an empty name."""
    words = re.sub(r"[^0-9a-z]+", " ", str(device_name).lower()).split()
    if words and words[0] in VENDOR_PREFIXES:
        words = words[1:]
    if not words:
        raise ValueError(f"device_name = {device_name!r}: no letters or digits to name a results directory")
    return "_".join(words)


def current_gpu_slug(device_index: int | None = None) -> str | None:
    """:func:`gpu_slug` of this machine's GPU (CuPy, else nvidia-smi), or None without one."""
    name = _cupy_info()["device_name"]
    if not name:
        smi = query_nvidia_smi(["name"], device_index or 0)
        name = smi[0] if smi else None
    return gpu_slug(name) if name else None


def collect_metadata(device_index: int | None = None) -> dict:
    """A JSON-ready dict describing this machine, its GPU and toolchain, the time and the git revision."""
    info = _cupy_info()
    idx = device_index if device_index is not None else (info.get("device_index") or 0)
    smi = query_nvidia_smi(["name", "driver_version", "clocks.sm", "clocks.max.sm", "clocks.mem"], idx)
    smi = smi or [None] * 5
    return {
        "date_utc": utc_now_iso(),
        "hostname": socket.gethostname(),
        "python_version": platform.python_version(),
        "python_executable": sys.executable,
        "device_name": info["device_name"] or smi[0],
        "device_index": idx,
        "compute_capability": info["compute_capability"],
        "sm_count": info["sm_count"],
        "l2_cache_bytes": info["l2_cache_bytes"],
        "driver_version": smi[1],
        "cuda_runtime_version": info["cuda_runtime_version"],
        "cuda_driver_version": info["cuda_driver_version"],
        "cupy_version": info["cupy_version"],
        "nvcc_version": nvcc_version(),
        "sm_clock_hz": read_sm_clock_hz(idx),
        "sm_clock_max_hz": mhz_to_hz(smi[3]),
        "mem_clock_hz": mhz_to_hz(smi[4]),
        "git_revision": git_revision(),
    }
