"""The rows of ``times.csv`` and ``counters.csv``: columns, identity, reading and resumable appending.

A row's config-side columns are the problem fields, ``label`` and the configuration's other fields
(``regs_per_thread``, an estimate override, as ``regs_per_thread_override`` so that
``regs_per_thread`` can hold the compiler's value); two rows are the same configuration when those
cells are equal as the CSV writes them.
"""

from __future__ import annotations

import csv
import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

from tilesim.kernels import registry
from validation.harness import runners
from validation.harness.suite_file import problem_fields

FINAL_STATUSES = frozenset({"ok", "wrong", "unsupported", "compile_error", "launch_error"})
#: the config field holding an estimate override; its column is renamed so that ``regs_per_thread``
#: can hold the compiler's measured value
OVERRIDE_FIELD = "regs_per_thread"
OVERRIDE_COLUMN = "regs_per_thread_override"
TIMING_COLUMNS = ("median_s", "p10_s", "p90_s", "min_s", "reps", "flushed_l2")
COMPILED_COLUMNS = ("rel_err", "regs_per_thread", "static_smem_bytes", "local_bytes", "sm_clock_hz",
                    "timestamp_utc")


def config_columns(family: str) -> tuple[str, ...]:
    """Problem fields, ``label``, the other fields (``regs_per_thread`` -> ``regs_per_thread_override``)."""
    fam = registry.get(family)
    names = [f.name for f in dataclasses.fields(fam.config)]
    first = [n for n in problem_fields(family) if n in names]
    rest = [OVERRIDE_COLUMN if n == OVERRIDE_FIELD else n for n in names if n not in first]
    return (*first, "label", *rest)


def csv_columns(family: str, runner) -> tuple[str, ...]:
    """The columns of ``times.csv`` for a family and its runner."""
    return (*config_columns(family), "status", "message", *TIMING_COLUMNS, *runners.rates_of(runner),
            *COMPILED_COLUMNS)


def config_row(family: str, cfg) -> dict:
    """The config-side columns of a configuration's row."""
    fam = registry.get(family)
    row = {"label": fam.label(cfg)}
    for f in dataclasses.fields(cfg):
        row[OVERRIDE_COLUMN if f.name == OVERRIDE_FIELD else f.name] = getattr(cfg, f.name)
    return row


def _cell(value) -> str:
    return "" if value is None else str(value)


def row_key(row: dict, columns: Sequence[str]) -> tuple[str, ...]:
    """A row's identity: its config-side cells as the CSV writes them."""
    return tuple(_cell(row.get(c)) for c in columns)


def read_rows(csv_path: Path) -> list[dict]:
    """The rows of a CSV (none when it does not exist; a torn last line is dropped)."""
    if not Path(csv_path).exists():
        return []
    with Path(csv_path).open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [r for r in rows if None not in r and all(v is not None for v in r.values())]


#: a family's results folder may hold later runs beside its main files: ``<dir>/parts/<run>/`` with the
#: harness's own ``times.csv``, ``counters.csv`` and ``metadata.json`` (e.g. new suite entries whose
#: configuration has a column the main file predates); readers take the main rows, then each part's
PARTS_DIR = "parts"


def recorded_rows(results_dir: Path, name: str = "times.csv") -> list[dict]:
    """The rows of ``<results_dir>/<name>`` followed by those of every ``<results_dir>/parts/*/<name>``
    (parts in name order). A column a file lacks is absent from its rows (the configuration's default)."""
    rows = read_rows(Path(results_dir) / name)
    for part in sorted((Path(results_dir) / PARTS_DIR).glob(f"*/{name}")):
        rows.extend(read_rows(part))
    return rows


def read_done(csv_path: Path, key_columns: Sequence[str]) -> set[tuple[str, ...]]:
    """Keys of the rows of an existing CSV that carry a final status."""
    return {row_key(r, key_columns) for r in read_rows(csv_path) if r.get("status") in FINAL_STATUSES}


class RowWriter:
    """Appends rows to a CSV (header written once), flushing and fsyncing after each row."""

    def __init__(self, path: Path, columns: Sequence[str]):
        self.path = Path(path)
        self.columns = tuple(columns)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        if not fresh:
            with self.path.open(newline="") as fh:
                header = next(csv.reader(fh), None)
            if header is not None and tuple(header) != self.columns:
                raise ValueError(f"{self.path}: existing header differs from the expected columns "
                                 f"{', '.join(self.columns)}; move the old file away or use a new results directory")
            data = self.path.read_bytes()
            if not data.endswith(b"\n"):  # drop a torn last row left by an interrupted write
                with self.path.open("r+b") as fh:
                    fh.truncate(data.rfind(b"\n") + 1)
        self._fh = self.path.open("a", newline="")
        self._w = csv.DictWriter(self._fh, fieldnames=self.columns, extrasaction="raise")
        if fresh:
            self._w.writeheader()
            self._flush()

    def _flush(self) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def write(self, row: dict) -> None:
        self._w.writerow({c: _cell(row.get(c)) for c in self.columns})
        self._flush()

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> RowWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
