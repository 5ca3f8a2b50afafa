"""The vocabulary of the hardware data files: which values exist, who owns them, their units.

A data file (``data/<gpu>.toml``) holds one table per value, ``value = ...`` and ``source = "..."``:

* common fields at the top level (``[sm_count]``): facts every vendor has a meaning for;
* vendor fields in their vendor's table (``[nvidia.reg_alloc_unit]``, ``[apple.sfu_rsqrt_results_per_clk_per_sm]``):
  facts that exist only on one vendor's GPUs (cp.async, the CUDA occupancy calculator's units);
* compute pipes, ``[pipes.<pipe>.<dtype>]``: results (lane operations) per clock per SM by input
  type, ``any`` when the rate does not depend on it; ``[pipes.<pipe>.latency_cycles]``: clocks from
  one instruction to a dependent one;
* matrix instructions, ``[mma.<shape>.<dtype>]``: dense FLOP per clock per SM (tinygrad-style: the
  fragment shapes a vendor offers are a list in its data, not code in a kernel family);
* memory levels' facts that have no common field, ``[levels.<level>.<attr>]``.

A common or vendor field is known by its bare name (``reg_alloc_unit``; it is what a calibrated
profile writes at its top level); the others by their dotted path (``pipes.sfu.latency_cycles``),
which a calibrated profile may write too.
"""

from __future__ import annotations

import re

VENDORS = ("nvidia", "apple")


class MissingHardwareValue(ValueError):
    """A value a GPU does not have (another vendor's feature) or that its data file cannot source."""

COMMON_FIELDS = (
    "sm_count", "sm_clock_hz", "warp_size", "fp32_lanes_per_sm", "issue_warp_instr_per_clk_per_sm",
    "warp_issue_per_clk", "warp_issue_by_code_bytes", "instruction_bytes", "ffma_rate_by_warps",
    "tensor_flops_per_s", "regs_per_sm", "max_regs_per_thread", "max_threads_per_sm", "max_warps_per_sm",
    "max_blocks_per_sm", "max_threads_per_block", "smem_per_sm_bytes", "smem_per_block_optin_bytes",
    "smem_alloc_unit_bytes", "smem_banks", "smem_bank_width_bytes", "smem_latency_cycles",
    "l1_bytes_per_clk_per_sm", "l1_requests_per_clk_per_sm", "l1_lines_per_clk_per_sm", "l1_latency_cycles",
    "sector_bytes", "l2_bytes", "l2_dirty_bytes", "l2_bytes_per_s", "l2_latency_cycles", "hbm_bytes",
    "hbm_bytes_per_s", "hbm_latency_cycles", "launch_overhead_s",
)
"""Fields any vendor may have (a GPU's file may leave out one it cannot source: reading it then raises)."""

MEASURED_PIPE_RATES = {
    "sfu_warp_instr_per_clk_per_sm": ("sfu", "fp32"),
    "shuffle_warp_instr_per_clk_per_sm": ("shuffle", "any"),
    "int_warp_instr_per_clk_per_sm": ("int", "any"),
}
"""Measured pipe rates a calibrated profile may carry (warp instructions per clock per SM; written by
validation/calibration/pipes_probe.py), and the (pipe, dtype) rate each one replaces."""

MEASURED_PIPE_LATENCIES = {
    "fadd_latency_cycles": "fma",
    "sfu_latency_cycles": "sfu",
    "shuffle_latency_cycles": "shuffle",
    "int_latency_cycles": "int",
    "barrier_latency_cycles": "barrier",
}
"""Measured latencies a calibrated profile may carry, and the pipe whose latency each one replaces
("fma" from a dependent FADD chain: FADD and FFMA issue to the same FP32 pipe)."""

MEASURED_FIELDS = (
    *MEASURED_PIPE_RATES, *MEASURED_PIPE_LATENCIES, "barrier_latency_cycles_by_warps",
    "sfu_rsq_warp_instr_per_clk_per_sm", "sfu_rcp_warp_instr_per_clk_per_sm", "fadd_warp_instr_per_clk_per_sm",
    "fmnmx_warp_instr_per_clk_per_sm", "expf_warp_calls_per_clk_per_sm", "expf_ftz_warp_calls_per_clk_per_sm",
    "smem_atomic_warp_instr_per_clk_per_sm", "smem_atomic_same_address_warp_instr_per_clk_per_sm",
    "global_atomic_warp_instr_per_clk_per_sm", "global_atomic_same_address_per_clk",
    "sfu_rsq_latency_cycles", "lop3_latency_cycles", "reduce_step_latency_cycles",
    "block_launch_per_clk_per_sm_by_threads", "hbm_read_bytes_per_s", "hbm_write_bytes_per_s",
    "tma_latency_cycles", "tma_hbm_latency_cycles", "sm_clock_hz_by_tensor_activity", "ldgsts16_pipe_cycles",
    "ldgsts16_straddle_cycles_per_sector", "ldgsts16_line_cycles",
    "wgmma_latency_cycles_by_n", "cluster_release_arrive_cycles", "wgmma_consumer_step_cycles",
    "cluster_release_fence_cycles", "wgmma_refill_path_cycles", "mbarrier_local_release_cycles",
    "cluster_release_cycles_by_inflight", "cluster_release_idle_cycles", "cluster_release_hbm_extra_cycles_by_inflight",
    "l1_miss_lines_per_clk_per_sm", "ldgsts16_sector_group_lanes", "hbm_read_granularity_bytes",
    "hbm_accesses_per_s", "hbm_burst_extra_cycles_by_lines", "l2_burst_extra_cycles_by_lines",
    "l2_flushed_dirty_bytes", "l2_flushed_writeback_per_read_byte", "l2_flushed_writeback_per_written_byte",
    "tma_mid_sector_row_cost", "tma_mid_sector_latency_cycles", "l2_shared_line_bytes_per_s",
    "tma_fixed_latency_cycles", "tma_landing_bytes_per_clk", "tma_hbm_fixed_latency_cycles",
    "tma_hbm_landing_bytes_per_clk", "sm_clock_l2_slope_by_tensor_activity",
    "sm_clock_hbm_slope_by_tensor_activity", "sm_clock_l2_tma_slope_by_tensor_activity", "tf32_clock_weight_by_mma_m",
)
"""Fields only a calibrated profile gives (validation/calibration/pipes_probe.py names them; a data
file has no datasheet value for most of them). They read as attributes like the common fields."""

NVIDIA_FIELDS = {
    "reg_alloc_unit": "CUDA occupancy-calculator register allocation unit",
    "smem_per_block_default_bytes": "CUDA default (not opted-in) per-block shared-memory limit",
    "smem_reserved_per_block_bytes": "CUDA driver per-block shared-memory reservation",
    "ldgsts_wavefronts_per_line": "cp.async (LDGSTS)",
    "ldgsts_wavefronts_per_conflict": "cp.async (LDGSTS)",
    "ldgsts_bypass_wavefronts": "cp.async (LDGSTS)",
    "tail_packing_by_slots": "measured CUDA block-dispatch packing",
    "max_cluster_blocks": "CUDA thread-block clusters (compute capability 9.0)",
}
"""NVIDIA-only fields, ``[nvidia.<name>]`` in a data file, with the feature they describe."""

APPLE_FIELDS = {
    "sfu_recip_results_per_clk_per_sm": "per-operation SFU rate (reciprocal)",
    "sfu_rsqrt_results_per_clk_per_sm": "per-operation SFU rate (reciprocal square root)",
    "max_compute_commands_per_sm": "limit on compute commands running at once on one GPU core",
}
"""Apple-only fields, ``[apple.<name>]`` in a data file, with what they are."""

VENDOR_FIELDS = {"nvidia": NVIDIA_FIELDS, "apple": APPLE_FIELDS}

DATA_FIELDS = (
    "sm_count", "sm_clock_hz", "warp_size", "fp32_lanes_per_sm", "issue_warp_instr_per_clk_per_sm",
    "warp_issue_per_clk", "warp_issue_by_code_bytes", "instruction_bytes", "ffma_rate_by_warps",
    "tensor_flops_per_s", "regs_per_sm", "max_regs_per_thread", "reg_alloc_unit", "max_threads_per_sm",
    "max_warps_per_sm", "max_blocks_per_sm", "max_threads_per_block", "smem_per_sm_bytes",
    "smem_per_block_optin_bytes", "smem_per_block_default_bytes", "smem_reserved_per_block_bytes",
    "smem_alloc_unit_bytes", "smem_banks", "smem_bank_width_bytes", "smem_latency_cycles",
    "ldgsts_wavefronts_per_line", "ldgsts_wavefronts_per_conflict", "ldgsts_bypass_wavefronts",
    "l1_bytes_per_clk_per_sm", "l1_requests_per_clk_per_sm", "l1_lines_per_clk_per_sm", "l1_latency_cycles",
    "sector_bytes", "l2_bytes", "l2_dirty_bytes", "l2_bytes_per_s", "l2_latency_cycles", "hbm_bytes",
    "hbm_bytes_per_s", "hbm_latency_cycles", "launch_overhead_s", "tail_packing_by_slots",
)
"""The flat fields of the first hardware spec, in its order: an NVIDIA file has every one of them."""

CORE_FIELDS = ("sm_count", "sm_clock_hz", "warp_size", "fp32_lanes_per_sm", "max_threads_per_block")
"""What every GPU's file must have, whatever its vendor."""

REQUIRED_FIELDS = {"nvidia": DATA_FIELDS, "apple": CORE_FIELDS}

TABLE_FIELDS = ("warp_issue_by_code_bytes", "ffma_rate_by_warps", "tail_packing_by_slots",
                "barrier_latency_cycles_by_warps", "block_launch_per_clk_per_sm_by_threads",
                "sm_clock_hz_by_tensor_activity", "wgmma_latency_cycles_by_n", "hbm_burst_extra_cycles_by_lines",
                "l2_burst_extra_cycles_by_lines", "sm_clock_l2_slope_by_tensor_activity",
                "sm_clock_hbm_slope_by_tensor_activity", "sm_clock_l2_tma_slope_by_tensor_activity",
                "tf32_clock_weight_by_mma_m", "cluster_release_cycles_by_inflight",
                "cluster_release_hbm_extra_cycles_by_inflight")
"""Fields whose value is a table of points ``((x > 0, y >= 0), ...)``."""

# --- compute pipes ------------------------------------------------------------------------------
RATE_PIPES = ("fma", "sfu", "int", "fp64", "shuffle")
"""Pipes whose rates are data: ``[pipes.<pipe>.<dtype>]`` results per clock per SM. The FP32 rate of
"fma" is the common field ``fp32_lanes_per_sm`` (one FFMA per lane per clock)."""

UNIT_PIPES = ("issue", "smem", "l1")
"""Pipes counted in their own warp-level unit: "issue" warp instructions
(``issue_warp_instr_per_clk_per_sm``), "smem" shared-memory wavefronts and "l1" L1 cycles, each
served one per clock by the definition of the unit."""

PIPES = RATE_PIPES + UNIT_PIPES

DTYPES = ("fp32", "fp16", "bf16", "tf32", "fp64", "fp8", "int32", "int8", "any")
"""Input types a rate may be given for; ``any``: the pipe's rate does not depend on the type."""

PIPE_LATENCIES = RATE_PIPES + ("tensor", "barrier")
"""Pipes whose latency is data, ``[pipes.<pipe>.latency_cycles]`` ("tensor": an MMA to a dependent
MMA; "barrier": a block barrier once every warp has arrived)."""

# --- matrix instructions ------------------------------------------------------------------------
MMA_SHAPE_RE = re.compile(r"^m(\d+)n(\d+|N)k(\d+)$")
"""An MMA shape key: ``m16n8k16``, or ``m64nNk16`` for a family whose N is any multiple of
:data:`MMA_N_STEP` up to :data:`MMA_N_MAX` (PTX ISA, wgmma.mma_async: N a multiple of 8 in 8..256)."""

MMA_N_STEP = 8
MMA_N_MAX = 256

# --- memory levels ------------------------------------------------------------------------------
LEVELS = ("registers", "shared", "l1", "l2", "dram")
"""The memory levels, innermost first ("shared" is Apple's threadgroup memory, "l2" its system-level
cache, "dram" HBM or unified LPDDR)."""

LEVEL_ATTRS = ("capacity_bytes", "line_bytes", "label")
"""Level facts that have no common field (``[levels.<level>.<attr>]``); ``label`` is a plain string."""

LEVEL_ALIASES = {"hbm": "dram", "slc": "l2", "threadgroup": "shared"}
"""Other names :meth:`HardwareSpec.level` and :meth:`HardwareSpec.pipe_latency_cycles` accept."""


def parse_mma_shape(key: str) -> tuple[int, int | None, int]:
    """``"m16n8k16"`` -> ``(16, 8, 16)``; ``"m64nNk16"`` -> ``(64, None, 16)`` (any N)."""
    m = MMA_SHAPE_RE.match(key)
    if not m:
        raise ValueError(f"MMA shape {key!r}: must look like m16n8k16 (or m64nNk16 for any N)")
    n = None if m.group(2) == "N" else int(m.group(2))
    return int(m.group(1)), n, int(m.group(3))


def shape_matches(key: str, shape: tuple[int, int, int]) -> bool:
    """True when the instruction ``shape`` (m, n, k) is one of the shape key's."""
    m, n, k = parse_mma_shape(key)
    sm, sn, sk = shape
    if (sm, sk) != (m, k):
        return False
    if n is None:
        return sn % MMA_N_STEP == 0 and MMA_N_STEP <= sn <= MMA_N_MAX
    return sn == n


def bare_key(key: str) -> str:
    """A vendor table's field by its bare name (``nvidia.reg_alloc_unit`` -> ``reg_alloc_unit``)."""
    head, _, rest = key.partition(".")
    return rest if head in VENDOR_FIELDS and rest else key


def check_key(key: str, vendor: str) -> None:
    """Raise ``ValueError`` unless ``key`` names a value a ``vendor`` GPU's file may hold."""
    parts = key.split(".")
    if len(parts) == 1:
        if key in COMMON_FIELDS or key in MEASURED_FIELDS:
            return
        owner = next((v for v, f in VENDOR_FIELDS.items() if key in f), None)
        if owner is not None and owner == vendor:
            return
        if owner is not None:
            raise ValueError(f"field {key!r} belongs to {owner} GPUs ({VENDOR_FIELDS[owner][key]}), not {vendor}")
        raise ValueError(f"unknown field {key!r}; known: {', '.join(COMMON_FIELDS)}")
    head = parts[0]
    if head in VENDOR_FIELDS and len(parts) == 2:
        if head != vendor:
            raise ValueError(f"table [{head}] in a {vendor} GPU's file: vendor fields go in [{vendor}]")
        if parts[1] not in VENDOR_FIELDS[head]:
            raise ValueError(f"unknown {head} field {parts[1]!r}; known: {', '.join(VENDOR_FIELDS[head])}")
        return
    if head == "pipes" and len(parts) == 3:
        pipe, what = parts[1], parts[2]
        if pipe not in RATE_PIPES + ("tensor", "barrier"):
            raise ValueError(f"{key}: unknown pipe {pipe!r}; pipes with data: {', '.join(PIPE_LATENCIES)}")
        if what == "latency_cycles" or (pipe in RATE_PIPES and what in DTYPES):
            return
        raise ValueError(f"{key}: {what!r} must be latency_cycles or a dtype ({', '.join(DTYPES)})")
    if head == "mma" and len(parts) == 3:
        parse_mma_shape(parts[1])
        if parts[2] not in DTYPES or parts[2] == "any":
            raise ValueError(f"{key}: dtype {parts[2]!r} must be one of {', '.join(DTYPES[:-1])}")
        return
    if head == "levels" and len(parts) == 3:
        if parts[1] not in LEVELS:
            raise ValueError(f"{key}: unknown level {parts[1]!r}; levels: {', '.join(LEVELS)}")
        if parts[2] not in LEVEL_ATTRS:
            raise ValueError(f"{key}: unknown level attribute {parts[2]!r}; known: {', '.join(LEVEL_ATTRS)}")
        return
    raise ValueError(f"unknown key {key!r}: tables are fields, [nvidia.*], [apple.*], "
                     "[pipes.<pipe>.<dtype|latency_cycles>], [mma.<shape>.<dtype>], [levels.<level>.<attr>]")
