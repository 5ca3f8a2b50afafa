"""Hardware facts as a frozen dataclass, loaded from one TOML data file per GPU.

Every field of :class:`HardwareSpec` is stored in ``tilesim/hardware/data/<name>.toml`` as a
table ``[field] value = ..., source = "..."`` so that each number carries where it came from.
A calibrated profile (``tilesim/hardware/calibrated/<name>.toml``, written by the validation
layer's microbenchmarks) overrides datasheet values; the loaded spec records which fields were
calibrated and when.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

DATA_DIR = Path(__file__).parent / "data"
CALIBRATED_DIR = Path(__file__).parent / "calibrated"


@dataclass(frozen=True)
class HardwareSpec:
    """Facts about one GPU. Units are in the field names; rates are per SM unless named ``total``."""

    name: str
    display_name: str
    vendor: str
    # --- compute -------------------------------------------------------------------------
    sm_count: int
    sm_clock_hz: float
    warp_size: int
    fp32_lanes_per_sm: int  # FP32 FMA lanes: one FFMA per lane per clock
    issue_warp_instr_per_clk_per_sm: float  # warp schedulers x 1 instruction per clock
    warp_issue_per_clk: float  # instructions per clock one warp sustains when alone on its scheduler
    # a lone warp's issue rate against its loop body's size in SASS bytes, ((bytes, rate), ...):
    # the rate falls once the body outgrows the instruction caches (relative use: rate / first rate)
    warp_issue_by_code_bytes: tuple
    instruction_bytes: int  # bytes of one SASS instruction
    # FFMA warp instructions per clock per SM that N resident warps sustain: ((warps, rate), ...),
    # interpolated linearly and held flat beyond the ends
    ffma_rate_by_warps: tuple
    tensor_flops_per_s: float  # dense fp16/bf16 tensor-core rate, whole chip
    # --- registers -----------------------------------------------------------------------
    regs_per_sm: int
    max_regs_per_thread: int
    reg_alloc_unit: int  # registers are allocated per warp in units of this many
    # --- per-SM residency limits ---------------------------------------------------------
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int
    # --- shared memory --------------------------------------------------------------------
    smem_per_sm_bytes: int
    smem_per_block_optin_bytes: int
    smem_per_block_default_bytes: int
    smem_reserved_per_block_bytes: int
    smem_alloc_unit_bytes: int
    smem_banks: int
    smem_bank_width_bytes: int
    smem_latency_cycles: float
    # cp.async (LDGSTS) on the shared-memory pipe, in wavefronts (tilesim.kernels.access.ldgsts_wavefronts)
    ldgsts_wavefronts_per_line: float  # 4-byte copy: per 128-byte global line one warp instruction touches
    ldgsts_wavefronts_per_conflict: float  # 4-byte copy: per extra wavefront of its stores' bank conflicts
    ldgsts_bypass_wavefronts: float  # 16-byte copy (bypasses L1): per warp instruction
    # --- L1 / load-store path ----------------------------------------------------------------
    l1_bytes_per_clk_per_sm: float  # global (L1TEX) data returned to one SM per clock
    l1_requests_per_clk_per_sm: float  # warp load instructions (one line each) the L1 serves per clock
    l1_lines_per_clk_per_sm: float  # distinct 128-byte lines of one instruction the L1 serves per clock
    l1_latency_cycles: float
    sector_bytes: int
    # --- L2 ---------------------------------------------------------------------------------
    l2_bytes: int
    l2_dirty_bytes: float  # what L2 keeps in all once written (dirty) lines are among it: beyond, they go to HBM
    l2_bytes_per_s: float  # total L2 -> SM read bandwidth
    l2_latency_cycles: float
    # --- HBM --------------------------------------------------------------------------------
    hbm_bytes: int
    hbm_bytes_per_s: float  # achievable read + write bandwidth
    hbm_latency_cycles: float
    # --- launch -----------------------------------------------------------------------------
    launch_overhead_s: float
    # how packed a last partial wave lands, against resident blocks per SM: ((slots, p), ...) with
    # p = 0 for one block per SM, 1 for all slots of as few SMs as possible
    tail_packing_by_slots: tuple
    # --- provenance (not data fields) -------------------------------------------------------
    sources: MappingProxyType = field(default_factory=lambda: MappingProxyType({}), compare=False, repr=False)
    calibrated: frozenset = field(default=frozenset(), compare=False)
    calibration_date: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if f.name in _META_FIELDS or f.type in ("str",):
                continue
            v = getattr(self, f.name)
            if isinstance(v, tuple):
                if not v or not all(len(p) == 2 and p[0] > 0 and p[1] >= 0 for p in v):
                    raise ValueError(f"hardware {self.name!r}: field {f.name} must be ((x > 0, y >= 0), ...), got {v!r}")
            elif isinstance(v, (int, float)) and not v > 0:
                raise ValueError(f"hardware {self.name!r}: field {f.name} must be > 0, got {v!r}")

    # Derived quantities (never stored, so they cannot disagree with the data).
    @property
    def fp32_flops_per_s(self) -> float:
        """Peak FP32 rate of the chip: 2 FLOP per FMA lane per clock."""
        return 2.0 * self.fp32_lanes_per_sm * self.sm_count * self.sm_clock_hz

    @property
    def smem_bytes_per_clk_per_sm(self) -> int:
        """One shared-memory wavefront per clock: banks x bank width."""
        return self.smem_banks * self.smem_bank_width_bytes


    def code_issue_factor(self, body_bytes: float) -> float:
        """How much of a lone warp's issue rate is left with a loop body of ``body_bytes``."""
        pts = sorted(self.warp_issue_by_code_bytes)
        return _interp(pts, body_bytes) / pts[0][1]

    def tail_packing(self, slots: int) -> float:
        """How packed (0 spread .. 1 packed) a last partial wave lands with ``slots`` blocks per SM."""
        return min(1.0, max(0.0, _interp(sorted(self.tail_packing_by_slots), slots)))

    def ffma_rate_at(self, warps: float) -> float:
        """FFMA warp instructions per clock per SM with ``warps`` resident warps (never above the
        FP32 lanes' peak)."""
        peak = self.fp32_lanes_per_sm / self.warp_size
        return min(_interp(sorted(self.ffma_rate_by_warps), warps), peak)


    def source_of(self, field_name: str) -> str:
        return self.sources.get(field_name, "")


def _interp(pts: list, x: float) -> float:
    """Piecewise-linear through sorted (x, y) points, flat beyond the ends."""
    if x <= pts[0][0]:
        return pts[0][1]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:], strict=False):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return pts[-1][1]


_META_FIELDS = {"name", "display_name", "vendor", "sources", "calibrated", "calibration_date"}
DATA_FIELDS = tuple(f.name for f in dataclasses.fields(HardwareSpec) if f.name not in _META_FIELDS)


def _read_table(path: Path) -> tuple[dict[str, Any], dict[str, str], dict[str, Any]]:
    with path.open("rb") as fh:
        raw = tomllib.load(fh)
    meta = raw.pop("meta", {})
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key, entry in raw.items():
        if key not in DATA_FIELDS:
            raise ValueError(f"{path.name}: unknown field {key!r}; known fields: {', '.join(DATA_FIELDS)}")
        if not isinstance(entry, dict) or "value" not in entry or "source" not in entry:
            raise ValueError(f"{path.name}: field {key!r} must be a table with 'value' and 'source'")
        val = entry["value"]
        if isinstance(val, list):
            val = tuple(tuple(x) if isinstance(x, list) else x for x in val)
        values[key] = val
        sources[key] = str(entry["source"])
    return values, sources, meta


def available() -> list[str]:
    """Names of the GPUs in the catalog (data file stems)."""
    return sorted(p.stem for p in DATA_DIR.glob("*.toml"))


def load(name: str, *, calibrated: bool = True, calibration_dir: Path | None = None) -> HardwareSpec:
    """Load a GPU's spec by name, applying its calibrated profile when one exists.

    Raises ``ValueError`` listing the known names when ``name`` is not in the catalog.
    """
    key = name.lower().replace("-", "_")
    path = DATA_DIR / f"{key}.toml"
    if not path.exists():
        raise ValueError(f"unknown hardware {name!r}; known: {', '.join(available())}")
    values, sources, meta = _read_table(path)
    missing = [f for f in DATA_FIELDS if f not in values]
    if missing:
        raise ValueError(f"{path.name}: missing fields {', '.join(missing)}")
    cal_fields: set[str] = set()
    cal_date = None
    cal_path = (calibration_dir or CALIBRATED_DIR) / f"{key}.toml"
    if calibrated and cal_path.exists():
        cvals, csrcs, cmeta = _read_table(cal_path)
        values.update(cvals)
        sources.update(csrcs)
        cal_fields = set(cvals)
        cal_date = str(cmeta.get("date", "")) or None
    return HardwareSpec(
        name=key,
        display_name=str(meta.get("display_name", key)),
        vendor=str(meta.get("vendor", "")),
        sources=MappingProxyType(sources),
        calibrated=frozenset(cal_fields),
        calibration_date=cal_date,
        **values,
    )


def with_overrides(spec: HardwareSpec, **changes: Any) -> HardwareSpec:
    """A copy of ``spec`` with some fields replaced (for what-if studies and tests)."""
    unknown = [k for k in changes if k not in DATA_FIELDS]
    if unknown:
        raise ValueError(f"unknown hardware field(s): {', '.join(unknown)}")
    srcs = dict(spec.sources)
    srcs.update({k: "override" for k in changes})
    return dataclasses.replace(spec, sources=MappingProxyType(srcs), **changes)
