"""What the register-count studies share (``gemm_register_counts``, ``tc_gemm_register_counts``,
``softmax_register_counts``): compiling a batch of generated kernels with nvcc and reading ptxas's
registers per kernel, in parallel batches, and the CSV files they write and read back."""

from __future__ import annotations

import csv
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from validation.harness.compile import nvcc_path, nvcc_version, parse_ptxas


def ptxas_report(source: str, options: Sequence[str], arch: str = "sm_90") -> dict[str, dict]:
    """nvcc -cubin of ``source`` for ``arch`` with ptxas -v: {ptxas kernel name: its parsed figures}.

    Raises ``RuntimeError`` with nvcc's last output when it fails."""
    with tempfile.TemporaryDirectory(prefix="tilesim-regs-") as tmp:
        cu = Path(tmp) / "k.cu"
        cu.write_text(source)
        r = subprocess.run([nvcc_path(), "-cubin", f"-arch={arch}", *options, "-Xptxas", "-v",
                            "-o", str(Path(tmp) / "k.cubin"), str(cu)], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"nvcc failed: {(r.stderr or r.stdout)[-2000:]}")
    return parse_ptxas(r.stdout + r.stderr)


def demangled(report: dict[str, dict]) -> dict[str, dict]:
    """``report`` keyed by the demangled function names (c++filt), for C++ template kernels."""
    mangled = list(report)
    plain = subprocess.run(["c++filt"], input="\n".join(mangled), capture_output=True, text=True,
                           check=True).stdout.splitlines()
    return {d.split("(")[0].removeprefix("void ").strip(): report[m] for m, d in zip(mangled, plain, strict=True)}


def in_batches(names: Sequence[str], batch: int, workers: int,
               compile_batch: Callable[[list[str]], dict[str, dict]]) -> dict[str, dict]:
    """``compile_batch`` over ``names`` in chunks of ``batch``, ``workers`` at a time; raises
    ``RuntimeError`` naming kernels that no batch reported."""
    chunks = [list(names[i:i + batch]) for i in range(0, len(names), batch)]
    found: dict[str, dict] = {}
    with ThreadPoolExecutor(workers) as ex:
        for res in ex.map(compile_batch, chunks):
            found.update(res)
    missing = set(names) - set(found)
    if missing:
        raise RuntimeError(f"no ptxas report for {sorted(missing)[:3]}")
    return found


def count_rows(cfgs: dict, fields: Sequence[str], batch: int, workers: int,
               compile_batch: Callable[[list[str]], dict[str, dict]]) -> list[dict]:
    """One row per kernel of ``cfgs`` (by name, sorted): the knobs ``fields``, ``threads``,
    ``regs_per_thread``, ``local_bytes`` and the ``nvcc`` version, compiled with :func:`in_batches`."""
    names = sorted(cfgs)
    found = in_batches(names, batch, workers, compile_batch)
    version = nvcc_version()
    return [{**{f: getattr(cfgs[n], f) for f in fields}, "threads": cfgs[n].threads,
             "regs_per_thread": found[n]["regs_per_thread"], "local_bytes": found[n]["local_bytes"],
             "nvcc": version} for n in names]


def write_rows(rows: list[dict], path: Path) -> None:
    """The rows as a CSV with a header (the first row's keys)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def read_rows(path: Path, fields: Sequence[str], int_fields: Sequence[str]) -> list[tuple[dict, int]]:
    """(knobs, compiler registers) per row of a file ``write_rows`` wrote: ``fields`` taken, those in
    ``int_fields`` as integers, "True"/"False" as booleans."""
    out = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            kw: dict = {f: row[f] for f in fields}
            for f in int_fields:
                kw[f] = int(kw[f])
            for f, v in kw.items():
                if v in ("True", "False"):
                    kw[f] = v == "True"
            out.append((kw, int(row["regs_per_thread"])))
    return out
