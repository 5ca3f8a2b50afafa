"""Memory levels: registers, shared (threadgroup) memory, L1, L2 (Apple's system-level cache) and
DRAM (HBM or unified LPDDR), each with its capacity, bandwidth, latency and line/sector size.

A level is a view over a GPU's sourced values (:data:`LEVEL_KEYS` says which value gives which
attribute), so it cannot disagree with the fields the rest of the code reads; a value the GPU's
file does not give is ``None`` here and its source says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

from tilesim.hardware.fields import MissingHardwareValue

REGISTER_BYTES = 4
"""Bytes per register: NVIDIA and Apple GPU registers are 32-bit (CUDA C++ Programming Guide,
"registers" are 32-bit; Apple: metal-benchmarks, register file in 32-bit registers)."""

LEVEL_KEYS = {
    "registers": dict(capacity_bytes="regs_per_sm", scope="sm"),
    "shared": dict(capacity_bytes="smem_per_sm_bytes", bytes_per_clk_per_sm="smem_bytes_per_clk_per_sm",
                   latency_cycles="smem_latency_cycles", scope="sm"),
    "l1": dict(capacity_bytes="levels.l1.capacity_bytes", bytes_per_clk_per_sm="l1_bytes_per_clk_per_sm",
               latency_cycles="l1_latency_cycles", line_bytes="levels.l1.line_bytes", sector_bytes="sector_bytes",
               scope="sm"),
    "l2": dict(capacity_bytes="l2_bytes", bytes_per_s="l2_bytes_per_s", latency_cycles="l2_latency_cycles",
               line_bytes="levels.l2.line_bytes", sector_bytes="sector_bytes", scope="chip"),
    "dram": dict(capacity_bytes="hbm_bytes", bytes_per_s="hbm_bytes_per_s", latency_cycles="hbm_latency_cycles",
                 scope="chip"),
}
"""Where each level's attributes come from: a field or dotted key of the spec ("regs_per_sm" counts
registers, times :data:`REGISTER_BYTES`; "smem_bytes_per_clk_per_sm" is the spec's derived banks x
width). ``scope``: "sm" levels give capacity and bandwidth per SM, "chip" levels for the whole GPU."""


@dataclass(frozen=True)
class MemoryLevel:
    """One level of the memory hierarchy of one GPU.

    ``capacity_bytes`` is per SM when ``scope`` is "sm" (registers, shared, L1) and for the whole
    chip when it is "chip" (L2, DRAM). ``bytes_per_clk_per_sm`` and ``bytes_per_s`` (whole chip)
    are the same bandwidth in two units. ``sources`` maps each attribute to where it came from.
    """

    name: str
    label: str
    scope: str
    capacity_bytes: float | None
    bytes_per_clk_per_sm: float | None
    bytes_per_s: float | None
    latency_cycles: float | None
    line_bytes: int | None
    sector_bytes: int | None
    sources: MappingProxyType = field(default_factory=lambda: MappingProxyType({}), compare=False, repr=False)

    def require(self, attr: str) -> float:
        """The attribute ``attr``; :class:`MissingHardwareValue` (a ``ValueError``) naming the level
        when the GPU does not give it."""
        v = getattr(self, attr)
        if v is None:
            raise MissingHardwareValue(f"memory level {self.name!r} ({self.label}) has no known {attr}: "
                             f"{self.sources.get(attr, 'not in the data file')}")
        return v


def build_level(hw, name: str) -> MemoryLevel:
    """The :class:`MemoryLevel` ``name`` of ``hw`` (a HardwareSpec), from :data:`LEVEL_KEYS`."""
    keys = LEVEL_KEYS[name]
    vals: dict[str, float | None] = {}
    srcs: dict[str, str] = {}
    for attr in ("capacity_bytes", "bytes_per_clk_per_sm", "bytes_per_s", "latency_cycles", "line_bytes",
                 "sector_bytes"):
        key = keys.get(attr)
        if key is None:
            vals[attr] = None
            continue
        if key == "smem_bytes_per_clk_per_sm":
            ok = hw.has("smem_banks") and hw.has("smem_bank_width_bytes")
            vals[attr] = hw.smem_bytes_per_clk_per_sm if ok else None
            srcs[attr] = "derived: smem_banks x smem_bank_width_bytes (one wavefront per clock)"
            continue
        if not hw.has(key):
            vals[attr] = None
            srcs[attr] = f"not known: {hw.name}'s data file gives no {key}"
            continue
        v = hw.get(key)
        if key == "regs_per_sm":
            v = v * REGISTER_BYTES
            srcs[attr] = f"regs_per_sm x {REGISTER_BYTES} B ({hw.source_of(key)})"
        else:
            srcs[attr] = hw.source_of(key)
        vals[attr] = v
    per_sm_s = hw.sm_count * hw.sm_clock_hz
    if vals["bytes_per_clk_per_sm"] is not None and vals["bytes_per_s"] is None:
        vals["bytes_per_s"] = vals["bytes_per_clk_per_sm"] * per_sm_s
        srcs["bytes_per_s"] = "derived: bytes_per_clk_per_sm x sm_count x sm_clock_hz"
    elif vals["bytes_per_s"] is not None and vals["bytes_per_clk_per_sm"] is None:
        vals["bytes_per_clk_per_sm"] = vals["bytes_per_s"] / per_sm_s
        srcs["bytes_per_clk_per_sm"] = "derived: bytes_per_s / (sm_count x sm_clock_hz)"
    label_key = f"levels.{name}.label"
    label = str(hw.get(label_key)) if hw.has(label_key) else name
    return MemoryLevel(name=name, label=label, scope=keys["scope"], sources=MappingProxyType(srcs), **vals)
