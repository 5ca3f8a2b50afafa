"""Facts about one GPU: sourced values by name, and what the simulator asks of them.

A :class:`HardwareSpec` holds the values of one GPU's data file (``tilesim/hardware/data/<gpu>.toml``,
overlaid by its assumed values and its calibrated profile; see :mod:`tilesim.hardware.catalog`), each
with its source (an assumed one's starts with "assumption:"; :attr:`HardwareSpec.assumed` names
them). The vocabulary (common fields, vendor tables, pipes, MMA shapes, memory levels) is
:mod:`tilesim.hardware.fields`. Every field of the first, flat spec still reads as an attribute
(``hw.l2_bytes``, ``hw.ldgsts_bypass_wavefronts``); a value the GPU does not have, or that its file
cannot source, raises :class:`MissingHardwareValue` (a ``ValueError``) saying which and why, never a
made-up number.

On top of the fields, the engine reads:

* :meth:`HardwareSpec.pipe_warp_instr_per_clk`: warp instructions per clock per SM of a pipe;
* :meth:`HardwareSpec.mma_flops_per_clk`: dense tensor FLOP per clock per SM of an MMA shape;
* :meth:`HardwareSpec.pipe_latency_cycles`: a pipe's or a memory level's latency;
* :attr:`HardwareSpec.levels` / :meth:`HardwareSpec.level`: the memory hierarchy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from tilesim.hardware import fields as F
from tilesim.hardware.fields import MissingHardwareValue
from tilesim.hardware.levels import MemoryLevel, build_level

SMEM_WAVEFRONTS_PER_CLK = 1.0
"""Shared-memory wavefronts per clock per SM: a wavefront is one pass of the banks, which serve one
bank-width word each per clock (CUDA C++ Programming Guide, "Shared Memory": banks can be accessed
simultaneously, one access per bank per clock)."""

L1_CYCLES_PER_CLK = 1.0
"""L1 cycles per clock per SM: the unit of :func:`tilesim.cost.access.l1_cycles` is one clock of the
L1 data pipe (tag lookup and data return: l1_requests_per_clk_per_sm, l1_lines_per_clk_per_sm)."""

LEVEL_LATENCIES = {"smem": "shared", "shared": "shared", "l1": "l1", "l2": "l2", "dram": "dram", "hbm": "dram",
                   "slc": "l2", "threadgroup": "shared"}
"""Names :meth:`HardwareSpec.pipe_latency_cycles` answers from a memory level."""


@dataclass(frozen=True)
class HardwareSpec:
    """Facts about one GPU. Units are in the names; rates are per SM unless named ``total``/``_per_s``.

    ``values`` holds ``(key, value)`` pairs (see :mod:`tilesim.hardware.fields` for the keys),
    ``sources`` the source of each key, ``calibrated`` the names a calibrated profile set (as the
    profile writes them) and ``calibration_date`` when, ``assumed`` the names the GPU's assumed
    overlay set (values no source gives for it, each source starting with "assumption:"; see
    :mod:`tilesim.hardware.catalog`).
    """

    name: str
    display_name: str
    vendor: str
    values: tuple = ()
    sources: MappingProxyType = field(default_factory=lambda: MappingProxyType({}), compare=False, repr=False)
    calibrated: frozenset = field(default=frozenset(), compare=False)
    calibration_date: str | None = field(default=None, compare=False)
    assumed: frozenset = field(default=frozenset(), compare=False)
    _index: dict = field(init=False, compare=False, repr=False, default=None)

    def __post_init__(self) -> None:
        if self.vendor not in F.VENDORS:
            raise ValueError(f"hardware {self.name!r}: vendor = {self.vendor!r}: must be one of {', '.join(F.VENDORS)}")
        object.__setattr__(self, "_index", dict(self.values))
        for key, v in self.values:
            if key in F.TABLE_FIELDS:
                if not v or not all(len(p) == 2 and p[0] >= 0 and p[1] >= 0 for p in v):
                    raise ValueError(f"hardware {self.name!r}: field {key} must be ((x >= 0, y >= 0), ...), got {v!r}")
            elif isinstance(v, bool) or (isinstance(v, (int, float)) and not v > 0):
                raise ValueError(f"hardware {self.name!r}: field {key} must be > 0, got {v!r}")
            elif not isinstance(v, (int, float, str)):
                raise ValueError(f"hardware {self.name!r}: field {key} must be a number, got {v!r}")
        missing = [k for k in F.REQUIRED_FIELDS[self.vendor] if k not in self._index]
        if missing:
            raise ValueError(f"hardware {self.name!r}: missing fields {', '.join(missing)}")

    # --- values by name ----------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        # Called only when normal lookup fails: the flat fields of the first spec read as attributes.
        if name.startswith("_"):
            raise AttributeError(name)
        if name in F.COMMON_FIELDS or name in F.MEASURED_FIELDS or any(name in f for f in F.VENDOR_FIELDS.values()):
            value = self.get(name)
            # kept as an instance attribute, so that later reads take the normal lookup (the spec is
            # frozen: the value cannot change; fields and equality do not see it)
            self.__dict__[name] = value
            return value
        raise AttributeError(f"{type(self).__name__!s} has no attribute {name!r}")

    def has(self, key: str) -> bool:
        """True when this GPU's data gives ``key``."""
        return key in self._index

    def get(self, key: str) -> Any:
        """The value of ``key``; :class:`MissingHardwareValue` says why when there is none."""
        try:
            return self._index[key]
        except KeyError:
            raise MissingHardwareValue(self._why_missing(key)) from None

    def _why_missing(self, key: str) -> str:
        bare = key.split(".", 1)[1] if key.split(".", 1)[0] in F.VENDOR_FIELDS else key
        for vendor, table in F.VENDOR_FIELDS.items():
            if bare in table and vendor != self.vendor:
                return (f"{self.name} has no {table[bare]} ({bare} is a field of {vendor} GPUs only; "
                        f"{self.name} is made by {self.vendor})")
        return (f"{self.name}: {key} is not known (its data file gives no sourced value); measure it "
                "(validation/calibrate.py) or set it with tilesim.hardware.with_overrides")

    def fields(self) -> tuple[str, ...]:
        """Every key this GPU's data gives: the first spec's fields in their order, then the rest sorted."""
        first = [k for k in F.DATA_FIELDS if k in self._index]
        return tuple(first + sorted(k for k in self._index if k not in F.DATA_FIELDS))

    def source_of(self, key: str) -> str:
        """Where the value of ``key`` came from ("" when there is none)."""
        return self.sources.get(key, "")

    def is_calibrated(self, key: str) -> bool:
        """True when a calibrated profile set ``key``."""
        return key in self.calibrated

    def is_assumed(self, key: str) -> bool:
        """True when ``key``'s value is an assumption (the GPU's assumed overlay set it; no source gives it)."""
        return key in self.assumed

    # --- derived quantities (never stored, so they cannot disagree with the data) -------------
    @property
    def fp32_flops_per_s(self) -> float:
        """Peak FP32 rate of the chip: 2 FLOP per FMA lane per clock."""
        return 2.0 * self.fp32_lanes_per_sm * self.sm_count * self.sm_clock_hz

    @property
    def smem_bytes_per_clk_per_sm(self) -> int:
        """One shared-memory wavefront per clock: banks x bank width."""
        return self.smem_banks * self.smem_bank_width_bytes

    def code_issue_factor(self, body_bytes: float) -> float:
        """How much of a lone warp's issue rate is left with a loop body of ``body_bytes`` (1: no
        instruction-fetch penalty is modelled when the GPU's file has no ``warp_issue_by_code_bytes``)."""
        if not self.has("warp_issue_by_code_bytes"):
            return 1.0
        pts = sorted(self.warp_issue_by_code_bytes)
        return interp(pts, body_bytes) / pts[0][1]

    def tail_packing(self, slots: int) -> float:
        """How packed (0 spread .. 1 packed) a last partial wave lands with ``slots`` blocks per SM."""
        return min(1.0, max(0.0, interp(sorted(self.tail_packing_by_slots), slots)))

    def ffma_rate_at(self, warps: float) -> float:
        """FFMA warp instructions per clock per SM with ``warps`` resident warps (never above the
        FP32 lanes' peak; the peak itself when the GPU's file has no ``ffma_rate_by_warps``)."""
        peak = self.fp32_lanes_per_sm / self.warp_size
        if not self.has("ffma_rate_by_warps"):
            return peak
        return min(interp(sorted(self.ffma_rate_by_warps), warps), peak)

    # --- compute pipes ------------------------------------------------------------------------
    def pipes(self) -> tuple[str, ...]:
        """The pipes this GPU has a rate for (the unit pipes "issue", "smem", "l1" always)."""
        rate = [p for p in F.RATE_PIPES if self.pipe_dtypes(p)]
        return tuple(rate) + F.UNIT_PIPES

    def pipe_dtypes(self, pipe: str) -> tuple[str, ...]:
        """The input types ``pipe`` has a rate for on this GPU ("any": the rate ignores the type)."""
        if pipe not in F.PIPES:
            raise ValueError(f"pipe = {pipe!r}: must be one of {', '.join(F.PIPES)}")
        if pipe in F.UNIT_PIPES:
            return ("any",)
        types = [d for d in F.DTYPES if self.has(f"pipes.{pipe}.{d}")]
        if pipe == "fma":
            types = ["fp32"] + types
        return tuple(types)

    def pipe_results_per_clk(self, pipe: str, dtype: str = "fp32") -> float:
        """Results (lane operations) per clock per SM of ``pipe`` on ``dtype`` inputs: the CUDA
        programming guide's unit. A packed instruction (fp16x2) yields two results per lane."""
        if pipe not in F.RATE_PIPES:
            raise ValueError(f"pipe = {pipe!r}: results per clock are given for {', '.join(F.RATE_PIPES)}")
        if pipe == "fma" and dtype == "fp32":
            return float(self.fp32_lanes_per_sm)
        key = self.pipe_rate_key(pipe, dtype)
        if key is not None:
            v = float(self.get(key))
            return v * self.warp_size if key in F.MEASURED_PIPE_RATES else v
        have = self.pipe_dtypes(pipe)
        if not have:
            raise MissingHardwareValue(f"{self.name} has no {pipe!r} pipe rate in its data file")
        raise MissingHardwareValue(f"{self.name}: pipe {pipe!r} has no rate for dtype = {dtype!r}; "
                         f"it has {', '.join(have)}")

    def pipe_rate_key(self, pipe: str, dtype: str) -> str | None:
        """The key the rate of ``pipe`` on ``dtype`` is read from (a measured field of the calibrated
        profile before the data file's ``pipes.<pipe>.<dtype>``), or None when there is none."""
        for name, (p, d) in F.MEASURED_PIPE_RATES.items():
            if p == pipe and d in (dtype, "any") and self.has(name):
                return name
        for key in (f"pipes.{pipe}.{dtype}", f"pipes.{pipe}.any"):
            if self.has(key):
                return key
        return None

    def pipe_warp_instr_per_clk(self, pipe: str, dtype: str = "fp32", warps: float | None = None) -> float:
        """Warp instructions per clock per SM that ``pipe`` serves on ``dtype`` inputs.

        "fma", "sfu", "int", "fp64", "shuffle": :meth:`pipe_results_per_clk` / warp size (a warp
        instruction is one result per lane). For "fma" on fp32 with ``warps`` given, the rate
        ``warps`` resident warps sustain (:meth:`ffma_rate_at`, measured when calibrated).
        "issue": ``issue_warp_instr_per_clk_per_sm``; "smem": shared-memory wavefronts per clock
        (:data:`SMEM_WAVEFRONTS_PER_CLK`); "l1": L1 cycles per clock (:data:`L1_CYCLES_PER_CLK`); these
        three ignore ``dtype``. Raises ``ValueError`` naming the pipe or dtype this GPU has no rate for.
        """
        if pipe not in F.PIPES:
            raise ValueError(f"pipe = {pipe!r}: must be one of {', '.join(F.PIPES)}")
        if pipe == "issue":
            return float(self.issue_warp_instr_per_clk_per_sm)
        if pipe == "smem":
            return SMEM_WAVEFRONTS_PER_CLK
        if pipe == "l1":
            return L1_CYCLES_PER_CLK
        if pipe == "fma" and dtype == "fp32" and warps is not None:
            return self.ffma_rate_at(warps)
        return self.pipe_results_per_clk(pipe, dtype) / self.warp_size

    def pipe_latency_cycles(self, pipe: str) -> float:
        """Clocks from an instruction to one that depends on it.

        Compute pipes ("fma", "sfu", "int", "fp64", "shuffle", "tensor", "barrier") from a measured
        field of the calibrated profile (:data:`~tilesim.hardware.fields.MEASURED_PIPE_LATENCIES`) or
        else ``[pipes.<pipe>.latency_cycles]``; memory levels ("smem", "l1", "l2", "hbm"/"dram") from their
        latency fields (load to use). Raises ``ValueError`` when this GPU's data has no sourced
        latency for ``pipe`` (measure it rather than guess).
        """
        if pipe in LEVEL_LATENCIES:
            return float(self.level(LEVEL_LATENCIES[pipe]).require("latency_cycles"))
        if pipe not in F.PIPE_LATENCIES:
            known = ", ".join(F.PIPE_LATENCIES + tuple(LEVEL_LATENCIES))
            raise ValueError(f"pipe = {pipe!r}: no latency of that name; known: {known}")
        key = self.pipe_latency_key(pipe)
        if key is None:
            raise MissingHardwareValue(
                f"{self.name}: no sourced latency for pipe {pipe!r} (pipes.{pipe}.latency_cycles); measure it "
                "(validation calibration) or set it with tilesim.hardware.with_overrides")
        return float(self.get(key))

    def pipe_latency_key(self, pipe: str) -> str | None:
        """The key a compute pipe's latency is read from (a measured field of the calibrated profile
        before the data file's ``pipes.<pipe>.latency_cycles``), or None when there is none."""
        for name, p in F.MEASURED_PIPE_LATENCIES.items():
            if p == pipe and self.has(name):
                return name
        key = f"pipes.{pipe}.latency_cycles"
        return key if self.has(key) else None

    def hbm_rate_at(self, write_fraction: float) -> float:
        """HBM bytes per second for a stream whose bytes are ``write_fraction`` writes.

        Read-only and write-only streams run at their measured rates (``hbm_read_bytes_per_s``,
        ``hbm_write_bytes_per_s``: validation/calibration/hbm_stream_probe.py); a half-and-half
        stream at the copy rate (``hbm_bytes_per_s``). In between, the time per byte is the linear
        mix of the pure rates plus the copy's extra time (the bus turning around between reads and
        writes) scaled by ``4 f (1 - f)``: an interpolation through the three measurements, largest
        for an even mix, not a measured curve. Without the pure-stream measurements: the copy rate.
        """
        if not (self.has("hbm_read_bytes_per_s") and self.has("hbm_write_bytes_per_s")):
            return self.hbm_bytes_per_s
        f = min(1.0, max(0.0, write_fraction))
        r, w, c = 1.0 / self.hbm_read_bytes_per_s, 1.0 / self.hbm_write_bytes_per_s, 1.0 / self.hbm_bytes_per_s
        turnaround = max(0.0, c - 0.5 * (r + w))
        return 1.0 / ((1.0 - f) * r + f * w + 4.0 * f * (1.0 - f) * turnaround)

    def block_launch_rate_at(self, threads: int) -> float | None:
        """Blocks per SM clock one SM takes in, for blocks of ``threads`` threads (measured by
        validation/calibration/block_rate_probe.py); None when the GPU's profile has no measurement."""
        if not self.has("block_launch_per_clk_per_sm_by_threads"):
            return None
        return interp(sorted(self.block_launch_per_clk_per_sm_by_threads), threads)

    def barrier_latency_cycles_at(self, warps: float) -> float:
        """Clocks of a block barrier with ``warps`` warps per block: the measured curve
        (``barrier_latency_cycles_by_warps``) when calibrated, else the one barrier latency."""
        if self.has("barrier_latency_cycles_by_warps"):
            return interp(sorted(self.barrier_latency_cycles_by_warps), warps)
        return self.pipe_latency_cycles("barrier")

    def sm_clock_hz_at_tensor_activity(self, activity: float, l2_bytes_per_s: float = 0.0,
                                       hbm_bytes_per_s: float = 0.0, l2_tma_bytes_per_s: float = 0.0) -> float:
        """The SM clock while the tensor cores run at ``activity`` (tensor FLOP per clock per SM over
        the fp16 dense rate): the measured curve ``sm_clock_hz_by_tensor_activity`` (power limiting,
        validation/calibration/clock_load_probe.py) where calibrated, else ``sm_clock_hz``; less what
        ``l2_bytes_per_s`` (through the SMs' load units) and ``hbm_bytes_per_s`` of reads beside them
        take, at the measured slopes ``sm_clock_l2_slope_by_tensor_activity`` /
        ``sm_clock_hbm_slope_by_tensor_activity`` (Hz per B/s, interpolated in the activity) where
        calibrated, and what ``l2_tma_bytes_per_s`` of L2 reads brought by the TMA take, at
        ``sm_clock_l2_tma_slope_by_tensor_activity`` (about a third of the load units' slope: no warp
        issues them, no register takes them), or at the load units' slope where that is not measured."""
        if not self.has("sm_clock_hz_by_tensor_activity"):
            return self.sm_clock_hz
        clock = interp(sorted(self.get("sm_clock_hz_by_tensor_activity")), activity)
        tma_slope = ("sm_clock_l2_tma_slope_by_tensor_activity" if self.has("sm_clock_l2_tma_slope_by_tensor_activity")
                     else "sm_clock_l2_slope_by_tensor_activity")
        for name, rate in (("sm_clock_l2_slope_by_tensor_activity", l2_bytes_per_s),
                           (tma_slope, l2_tma_bytes_per_s),
                           ("sm_clock_hbm_slope_by_tensor_activity", hbm_bytes_per_s)):
            if rate > 0 and self.has(name):
                clock -= interp(sorted(self.get(name)), activity) * rate
        return clock

    def tensor_clock_weight(self, shape: tuple[int, int, int], dtype: str) -> float:
        """How much a FLOP of a matrix instruction of ``shape`` on ``dtype`` counts toward the tensor activity
        that lowers the clock, against an fp16 FLOP: tf32 at ``tf32_clock_weight_by_mma_m`` (by the
        instruction's M: 16 for mma.sync, 64 for wgmma; clock_load_probe's tf32 loads at full rate hold the
        clock that fp16 work of 1.7-1.9 times their FLOP rate holds) where calibrated; 1 otherwise (bf16 is
        taken as fp16: not measured)."""
        if dtype != "tf32" or not self.has("tf32_clock_weight_by_mma_m"):
            return 1.0
        return interp(sorted(self.get("tf32_clock_weight_by_mma_m")), shape[0])

    def burst_extra_cycles_at(self, level: str, lines: float) -> float:
        """Clocks a warp load whose lanes touch ``lines`` lines takes beyond a one-line load's latency and
        the L1 miss path's line a clock, when it is served from ``level`` ("hbm" or "l2"): the measured
        curve (``<level>_burst_extra_cycles_by_lines``, uncoalesced_probe), 0 without it."""
        name = f"{level}_burst_extra_cycles_by_lines"
        if lines <= 1 or not self.has(name):
            return 0.0
        return interp(sorted(self.get(name)), lines)

    def wgmma_latency_cycles_at(self, n: int) -> float:
        """Clocks from a wgmma of width ``n`` to its completion (``wgmma_latency_cycles_by_n``, measured)."""
        return interp(sorted(self.get("wgmma_latency_cycles_by_n")), n)

    def tensor_peak_flops_per_clk(self) -> float:
        """The dense fp16 tensor rate per clock per SM: the fastest fp16 matrix instruction in the data
        (the reference for tensor activity)."""
        rates = [float(self.get(f"mma.{key}.{dt}")) for key, dt in self.mma_shapes() if dt == "fp16"]
        if not rates:
            raise F.MissingHardwareValue(f"{self.name}: no fp16 matrix instruction in its data")
        return max(rates)

    # --- matrix instructions ------------------------------------------------------------------
    def mma_shapes(self) -> tuple[tuple[str, str], ...]:
        """``(shape key, dtype)`` of every matrix instruction this GPU's data gives a rate for."""
        return tuple(tuple(k.split(".")[1:]) for k in sorted(self._index) if k.startswith("mma."))

    def mma_flops_per_clk(self, shape: tuple[int, int, int], dtype: str) -> float:
        """Dense FLOP per clock per SM of matrix instructions of ``shape`` (m, n, k) on ``dtype`` inputs.

        Raises ``ValueError`` naming the shape and dtype when this GPU has no such instruction.
        """
        shape = tuple(shape)
        if len(shape) != 3 or not all(isinstance(x, int) and x > 0 for x in shape):
            raise ValueError(f"shape = {shape!r}: must be three positive ints (m, n, k)")
        found = [key for key, dt in self.mma_shapes() if dt == dtype and F.shape_matches(key, shape)]
        if found:
            return float(self.get(f"mma.{found[0]}.{dtype}"))
        have = ", ".join(f"{k} {d}" for k, d in self.mma_shapes()) or "none"
        m, n, k = shape
        raise MissingHardwareValue(f"{self.name} has no m{m}n{n}k{k} matrix instruction on {dtype!r}; it has: {have}")

    # --- memory levels ------------------------------------------------------------------------
    @property
    def levels(self) -> tuple[MemoryLevel, ...]:
        """The memory hierarchy, innermost first (registers, shared, l1, l2, dram)."""
        return tuple(build_level(self, n) for n in F.LEVELS)

    def level(self, name: str) -> MemoryLevel:
        """The memory level ``name`` (also "hbm", "slc", "threadgroup" for their levels)."""
        key = F.LEVEL_ALIASES.get(name, name)
        if key not in F.LEVELS:
            raise ValueError(f"level = {name!r}: must be one of {', '.join(F.LEVELS + tuple(F.LEVEL_ALIASES))}")
        return build_level(self, key)


def interp(pts: list, x: float) -> float:
    """Piecewise-linear through sorted (x, y) points, flat beyond the ends (the measured curves'
    rule: calibration code derives values from them the same way)."""
    if x <= pts[0][0]:
        return pts[0][1]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:], strict=False):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return pts[-1][1]
