"""Compiler-informed prediction without a GPU: build a configuration's CUDA kernel with ``nvcc`` and
read what ``ptxas -v`` allocated (registers per thread, spills, static shared memory).

:func:`compiled_resources` takes the family runner's ``kernel_source(config)``
(:class:`~validation.harness.source.KernelSource`: the templates plus the explicit instantiations or
``extern "C"`` kernels of this one configuration), compiles it with
``nvcc -cubin -arch=<arch> -Xptxas -v`` and its own options, and parses ptxas's report per entry
function. Every entry function of that translation unit is a kernel the configuration launches (each
runner's ``kernel_source`` instantiates only those), so the figures returned are the maximum over
them, as the runner protocol's ``attributes`` are on the GPU. Results are cached by a hash of the
source, options, architecture and nvcc version under the user's cache directory
(``$TILESIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/tilesim``, else ``~/.cache/tilesim``; never the
repository). No GPU is needed; a missing or failing ``nvcc`` is a one-line :class:`CompileError`.

Caveat: the recorded H200 results read their registers from CuPy's NVRTC (``kernel.attributes``),
whose register allocation may differ from the offline ``nvcc`` of the same release
(``tests/test_compile_path.py`` counts how often they agree on the recorded suites).

When ``nvdisasm`` (or ``cuobjdump``) is on the PATH the cubin is also disassembled and each entry
function gets ``loop_mix``: its k-loop's instruction mix (:mod:`validation.harness.sass`); without
one, ``sass_missing`` says which tools are missing and everything else still works.
:func:`compile_file` does the same for a user's own ``.cu`` file and one kernel of it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

#: hardware name -> the nvcc architecture of its compute capability (the data files' headers:
#: H200/H100 compute capability 9.0, A100 8.0)
ARCH_BY_HARDWARE = {"h200": "sm_90", "h100_sxm": "sm_90", "a100_sxm4": "sm_80"}
NVCC_TIMEOUT_S = 300
_CACHE_VERSION = 2  # 2: the SASS loop mix

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


class CompileError(RuntimeError):
    """nvcc is missing, refuses the architecture, or rejects the source (the message is one line)."""


def arch_for(hw) -> str:
    """The ``-arch`` of a :class:`~tilesim.hardware.HardwareSpec` (``sm_90`` for the H200 and H100,
    ``sm_80`` for the A100). Raises :class:`CompileError` for Apple GPUs and unknown NVIDIA ones."""
    if hw.vendor != "nvidia":
        raise CompileError(f"--compile builds CUDA kernels with nvcc; {hw.display_name} is not an NVIDIA GPU "
                           "(no nvcc target)")
    try:
        return ARCH_BY_HARDWARE[hw.name]
    except KeyError:
        raise CompileError(f"--compile: no nvcc architecture known for {hw.name}; known: "
                           f"{', '.join(f'{k} ({v})' for k, v in ARCH_BY_HARDWARE.items())}") from None


def nvcc_path() -> str:
    """``nvcc`` on the PATH, or :class:`CompileError`."""
    path = shutil.which("nvcc")
    if path is None:
        raise CompileError("nvcc is not on the PATH: --compile needs the CUDA toolkit's nvcc (no GPU needed)")
    return path


@functools.lru_cache(maxsize=8)
def _nvcc_version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise CompileError(f"{path} --version failed: {e}") from None
    m = re.search(r"release ([\d.]+), V([\d.]+)", out)
    if not m:
        raise CompileError(f"{path} --version: no 'release X.Y' in its output")
    return f"{m.group(1)}, V{m.group(2)}"


def nvcc_version() -> str:
    """The release of the nvcc on the PATH, e.g. ``13.0, V13.0.88`` (as ``metadata.json`` records it)."""
    return _nvcc_version(nvcc_path())


def cache_dir() -> Path:
    """Where compiled resources are cached: ``$TILESIM_CACHE_DIR``, ``$XDG_CACHE_HOME/tilesim`` or
    ``~/.cache/tilesim``, then ``compile/``."""
    root = os.environ.get("TILESIM_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = str(Path(xdg) / "tilesim") if xdg else str(Path.home() / ".cache" / "tilesim")
    return Path(root) / "compile"


def parse_ptxas(log: str) -> dict[str, dict]:
    """Per entry function of a ``-Xptxas -v`` log: ``regs_per_thread``, ``local_bytes`` (the stack
    frame, CUDA's ``localSizeBytes``), ``spill_store_bytes``, ``spill_load_bytes``,
    ``static_smem_bytes``."""
    kernels: dict[str, dict] = {}
    current = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = kernels.setdefault(m.group(1), {"regs_per_thread": 0, "local_bytes": 0,
                                                      "spill_store_bytes": 0, "spill_load_bytes": 0,
                                                      "static_smem_bytes": 0})
            continue
        if current is None:
            continue
        m = _FRAME.search(line)
        if m:
            current.update(local_bytes=int(m.group(1)), spill_store_bytes=int(m.group(2)),
                           spill_load_bytes=int(m.group(3)))
        m = _USED.search(line)
        if m:
            current["regs_per_thread"] = int(m.group(1))
            s = _SMEM.search(line)
            current["static_smem_bytes"] = int(s.group(1)) if s else 0
    return kernels


def compile_source(code: str, options=(), arch: str = "sm_90", *, label: str = "kernel",
                   use_cache: bool = True) -> dict:
    """Compile one translation unit with nvcc for ``arch`` and return the maximum over its entry
    functions of :func:`parse_ptxas`'s figures, plus ``kernels`` (per entry function),
    ``nvcc_version``, ``arch`` and ``cached`` (read from the cache)."""
    if not re.fullmatch(r"sm_\d+a?", arch):
        raise CompileError(f"arch = {arch!r}: must look like sm_90 or sm_90a")
    from validation.harness import sass

    nvcc = nvcc_path()
    version = _nvcc_version(nvcc)
    options = tuple(options)
    try:
        sass_tool, sass_missing = Path(sass.disassembler()[0]).name, ""
    except sass.SassUnavailable as e:
        sass_tool, sass_missing = None, str(e)
    key = hashlib.sha256(json.dumps([_CACHE_VERSION, code, options, arch, version, sass_tool]).encode()).hexdigest()
    cached = cache_dir() / f"{key}.json"
    if use_cache and cached.is_file():
        try:
            return {**json.loads(cached.read_text()), "cached": True}
        except (OSError, ValueError):
            pass
    with tempfile.TemporaryDirectory(prefix="tilesim-nvcc-") as tmp:
        src = Path(tmp) / "kernel.cu"
        src.write_text(code)
        cmd = [nvcc, "-cubin", f"-arch={arch}", *options, "-Xptxas", "-v", "-o", str(Path(tmp) / "kernel.cubin"),
               str(src)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=NVCC_TIMEOUT_S, cwd=tmp)
        except subprocess.TimeoutExpired:
            raise CompileError(f"nvcc took over {NVCC_TIMEOUT_S} s on {label} ({arch})") from None
        except OSError as e:
            raise CompileError(f"nvcc could not run on {label} ({arch}): {e}") from None
        mixes = {}
        if r.returncode == 0 and sass_tool:
            try:
                mixes = sass.function_mixes(sass.disassemble(str(Path(tmp) / "kernel.cubin")))
            except sass.SassUnavailable as e:
                sass_tool, sass_missing = None, str(e)
    if r.returncode != 0:
        errors = [ln.strip() for ln in (r.stderr + r.stdout).splitlines() if "error" in ln.lower()]
        first = errors[0] if errors else (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        first = first.replace(str(src), "kernel.cu")
        raise CompileError(f"nvcc {version} failed on {label} ({arch}): {first}")
    kernels = parse_ptxas(r.stdout + r.stderr)
    if not kernels:
        raise CompileError(f"nvcc {version} compiled no kernel for {label} ({arch}): no entry function in "
                           "ptxas's report")
    for name, k in kernels.items():
        k["loop_mix"] = mixes.get(name)
    fields = ("regs_per_thread", "local_bytes", "spill_store_bytes", "spill_load_bytes", "static_smem_bytes")
    out = {f: max(k[f] for k in kernels.values()) for f in fields}
    out.update(kernels=kernels, nvcc_version=version, arch=arch, sass_tool=sass_tool, sass_missing=sass_missing)
    if use_cache:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_path = tempfile.mkstemp(dir=cached.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump(out, f)
            os.replace(tmp_path, cached)
        except OSError:
            pass  # an unwritable cache only costs a recompile
    return {**out, "cached": False}


def compiled_resources(family: str, config, arch: str = "sm_90", *, use_cache: bool = True) -> dict:
    """What nvcc allocates for the kernels ``config`` launches, compiled for ``arch`` (no GPU):
    ``regs_per_thread``, ``local_bytes``, ``spill_store_bytes``, ``spill_load_bytes`` and
    ``static_smem_bytes`` (each the maximum over the kernels), ``kernels`` (per entry function, with
    its ``loop_mix``: the SASS k-loop's instruction mix, or None), ``nvcc_version``, ``arch``,
    ``sass_tool`` (the disassembler used, or None) and ``sass_missing`` (why not), ``cached``.

    The source is the family runner's ``kernel_source(config)``. Raises :class:`CompileError`
    (one line) when nvcc is missing or fails, ``ValueError`` when the family has no runner or the
    runner rejects the configuration."""
    from validation.harness.runners import get_runner

    try:
        runner = get_runner(family)
    except ValueError:
        raise ValueError(f"{family}: no CUDA kernels to compile (no validation/families/{family}/runner.py)") from None
    src = runner.kernel_source(config)
    label = ", ".join(src.name_expressions) or family
    return compile_source(src.code, src.options, arch, label=label, use_cache=use_cache)


def find_kernel(kernels: dict, name: str) -> str:
    """The entry function of ``kernels`` (ptxas's names, mangled for C++) that is the kernel ``name``:
    the same name (``extern "C"``), or a mangled ``_Z<len><name>...`` (a free function or template
    instance; the first in order when several instances match). ``ValueError`` lists them otherwise."""
    if name in kernels:
        return name
    prefix = f"_Z{len(name)}{name}"
    matches = [k for k in kernels if k.startswith(prefix)]
    if not matches:
        raise ValueError(f"--kernel {name}: no such kernel; the file's kernels: {', '.join(kernels)}")
    return matches[0]


def compile_file(path, kernel: str, arch: str = "sm_90", options=("--std=c++17",), *,
                 use_cache: bool = True) -> dict:
    """A user's own ``.cu`` file compiled for ``arch`` (no GPU): :func:`compile_source`'s figures for
    the one entry function ``kernel`` names (see :func:`find_kernel`), with ``kernel`` (its ptxas name),
    ``loop_mix``, ``nvcc_version``, ``arch``, ``sass_tool``/``sass_missing`` and ``cached``. The file is
    compiled from its own folder, so its relative ``#include`` s work."""
    path = Path(path)
    try:
        code = path.read_text()
    except OSError as e:
        raise ValueError(f"--cu {path}: cannot read it ({e.strerror or e})") from None
    opts = (*tuple(options), f"-I{path.resolve().parent}")
    res = compile_source(code, opts, arch, label=path.name, use_cache=use_cache)
    name = find_kernel(res["kernels"], kernel)
    return {**res["kernels"][name], "kernel": name, "nvcc_version": res["nvcc_version"], "arch": res["arch"],
            "sass_tool": res["sass_tool"], "sass_missing": res["sass_missing"], "cached": res["cached"]}


# ----- nvcc against the recorded (NVRTC) counts ----------------------------------------------------------
def recorded_agreement(family: str, results_dir=None, hardware: str = "h200", workers: int = 4) -> list[dict]:
    """nvcc's registers next to the recorded ``regs_per_thread`` of ``times.csv`` (which came from
    CuPy's NVRTC on the GPU), one row per distinct configuration label measured ok: ``label``,
    ``nvrtc_regs``, ``nvcc_regs``, ``nvrtc_blocks_per_sm``, ``nvcc_blocks_per_sm`` (per launch, by
    the simulator's occupancy rules with the lowering's threads and shared memory)."""
    from concurrent.futures import ThreadPoolExecutor

    import tilesim
    from tilesim.analytic.occupancy import occupancy
    from validation.harness import report, rows

    hw = tilesim.resolve_hardware(hardware)
    path = (report.suite.RESULTS_ROOT / hardware / family if results_dir is None else Path(results_dir)) / "times.csv"
    jobs, seen = [], set()
    for row in rows.read_rows(path):
        if row.get("status") != "ok" or not row.get("regs_per_thread") or row["label"] in seen:
            continue
        seen.add(row["label"])
        jobs.append((row["label"], report.config_from_row(family, row), int(float(row["regs_per_thread"]))))
    arch = arch_for(hw)
    with ThreadPoolExecutor(max(1, workers)) as ex:
        compiled = list(ex.map(lambda j: compiled_resources(family, j[1], arch), jobs))

    def blocks(cfg, regs):
        return [occupancy(hw, p.launch.threads_per_block, regs, p.launch.smem_bytes_per_block).blocks_per_sm
                for p in tilesim.lower(cfg)]

    return [{"label": label, "nvrtc_regs": regs, "nvcc_regs": c["regs_per_thread"],
             "nvrtc_blocks_per_sm": blocks(cfg, regs), "nvcc_blocks_per_sm": blocks(cfg, c["regs_per_thread"])}
            for (label, cfg, regs), c in zip(jobs, compiled, strict=True)]


def main(argv=None) -> int:
    """``python -m validation.harness.compile [family ...]``: how often nvcc's register count (and the
    occupancy it gives) equals the recorded NVRTC one, per family with recorded H200 results."""
    import sys

    families = list(argv if argv is not None else sys.argv[1:]) or ["gemm", "reduction", "softmax", "layernorm"]
    try:
        print(f"nvcc {nvcc_version()} (sm_90) against the recorded NVRTC counts (validation/results/h200)")
        for fam in families:
            rs = recorded_agreement(fam)
            n = len(rs)
            eq = sum(r["nvcc_regs"] == r["nvrtc_regs"] for r in rs)
            near = sum(abs(r["nvcc_regs"] - r["nvrtc_regs"]) <= 2 for r in rs)
            occ = sum(r["nvcc_blocks_per_sm"] == r["nvrtc_blocks_per_sm"] for r in rs)
            worst = max(rs, key=lambda r: abs(r["nvcc_regs"] - r["nvrtc_regs"]))
            print(f"{fam}: {n} kernels; registers equal {eq}, within 2 {near}; occupancy equal {occ}; "
                  f"largest gap {worst['label']} (NVRTC {worst['nvrtc_regs']}, nvcc {worst['nvcc_regs']})")
    except (CompileError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
