"""Predictions of the published m5-gemm results (M5 Max, fp32), and the values they assume.

The published figures (shared/REFERENCE.md: M5 Max, fp32, 64x64 threadgroup tile, 32x32 per
simdgroup, BK = 16, 128 threads), TFLOP/s at 1024/2048/4096/8192: sync_copy 3.3/7.7/13.5/13.0,
double-buffered 10.7/9.0/13.1/12.7; a simdgroup patch of 8x8 fragments per side (SIMD_TILE=8)
spilled registers and ran about 10x slower. They are compared here, never used to set a value.

The M5 Max's data file (tilesim/hardware/data/m5_max.toml) holds only what is sourced. The engine
also needs values no source gives for it; :data:`ASSUMED` adds them, each with where it comes from
(mostly the M1 generation's microbenchmarks, carried over) or why it is a bare assumption. They are
overrides for this study, not hardware data, and every one is a candidate for being wrong.

Run: ``python -m validation.families.steel_gemm.predict_m5`` (CPU, seconds).
"""

from __future__ import annotations

import dataclasses

from tilesim import hardware, simulate
from tilesim.hardware import HardwareSpec
from tilesim.kernels.steel_gemm import SteelGemmConfig

PUBLISHED_TFLOPS = {
    "sync": {1024: 3.3, 2048: 7.7, 4096: 13.5, 8192: 13.0},
    "double_buffer": {1024: 10.7, 2048: 9.0, 4096: 13.1, 8192: 12.7},
}
PUBLISHED_SPILL_SLOWDOWN = 10.0  # SIMD_TILE=8: "spilled registers and ran 10x slower"

NS = 1e-9

ASSUMED = {
    # --- carried over from the M1 Max (metal-benchmarks / G13), no later measurement found ------------
    "mma.m8n8k8.fp32": (203.38, "M1 Max simdgroup_float8x8 rate (metal-benchmarks: ~20.14 cycles per MMA per SIMD-group); "
                                "the M5's Neural Accelerators are not assumed to serve fp32"),
    "issue_warp_instr_per_clk_per_sm": (4, "M1: 4 schedulers per core, one SIMD-group instruction each per clock (metal-benchmarks)"),
    "pipes.int.any": (128, "M1: 128 32-bit integer adds per clock per core (metal-benchmarks)"),
    "regs_per_sm": (53248, "M1/M2: ~208 KB register file per core (metal-benchmarks); M3+ allocate it dynamically"),
    "max_regs_per_thread": (128, "G13 ISA: 128 32-bit GPRs per thread"),
    "max_threads_per_sm": (3072, "M1: up to 3072 threads per core (metal-benchmarks@936d911)"),
    "max_warps_per_sm": (96, "3072 / 32"),
    "smem_per_sm_bytes": (61440, "M1: ~60 KB threadgroup memory per core (metal-benchmarks)"),
    "levels.l1.line_bytes": (128, "M1: 128-byte lines (metal-benchmarks)"),
    # --- latencies: third-party figures for the M1/M2 generation, in ns, at the M5 Max's clock ---------
    "l2_latency_cycles": (234 * NS, "system-level-cache latency 234 ns (M2-generation figure quoted from chipsandcheese "
                                    "by a public Metal reference; not re-measured)"),
    "hbm_latency_cycles": (342 * NS, "DRAM latency 342 ns (same source)"),
    # --- bare assumptions: no source at all ---------------------------------------------------------------
    "smem_latency_cycles": (32, "ASSUMPTION: threadgroup-memory load-to-use ~ NVIDIA's shared memory (29-32 cycles, "
                                "shared/REFERENCE.md); Apple publishes none"),
    "smem_banks": (32, "ASSUMPTION: 32 x 4 B = 128 B per clock, tilesim.cost.apple.TG_BYTES_PER_CLK (read by the roofline only)"),
    "smem_bank_width_bytes": (4, "ASSUMPTION: as smem_banks"),
    "l2_bytes_per_s": (None, "32 B per clock per core (metal-benchmarks: the core's 32-byte I/O bus) x cores x clock"),
    "l2_bytes": (48 * 2**20, "ASSUMPTION: the M1 Max's 48 MB system-level cache (AnandTech) for the M5 Max"),
    "l2_dirty_bytes": (48 * 2**20, "ASSUMPTION: the whole system-level cache may hold written lines"),
    "instruction_bytes": (8, "inert: no instruction-fetch curve is given, so no fetch penalty is modelled"),
    "warp_issue_per_clk": (1, "one instruction per clock per SIMD-group (one scheduler dispatches it)"),
    "launch_overhead_s": (5e-6, "ASSUMPTION: 5 us per dispatch (no Metal figure at hand)"),
}
"""key -> (value, where it comes from). Latencies given in seconds (``* NS``) are turned into clocks
of the GPU they are applied to; ``l2_bytes_per_s`` None is computed from the GPU's cores and clock."""


def assumed_spec(name: str = "m5_max"):
    """The GPU's sourced spec with :data:`ASSUMED` added where its file gives no value."""
    hw = hardware.load(name)
    clk = hw.sm_clock_hz
    changes = {}
    for key, (value, _) in ASSUMED.items():
        if hw.has(key):
            continue
        if key == "l2_bytes_per_s":
            value = 32 * hw.sm_count * clk
        elif key.endswith("latency_cycles") and isinstance(value, float) and value < 1e-3:
            value = value * clk
        changes[key] = value
    hw = hardware.with_overrides(hw, **changes)
    return _SpreadTail(**{f.name: getattr(hw, f.name) for f in dataclasses.fields(hw) if f.init})


class _SpreadTail(HardwareSpec):
    """ASSUMPTION: a last partial wave spreads over the cores (one threadgroup per core first). The
    engine asks every GPU for NVIDIA's measured packing (``tail_packing_by_slots``, an NVIDIA-only
    field); until it falls back by itself, this study answers "spread" for an Apple GPU."""

    def tail_packing(self, slots: int) -> float:
        return super().tail_packing(slots) if self.has("tail_packing_by_slots") else 0.0


def configs(size: int, copy: str, simd_tile: int = 4) -> SteelGemmConfig:
    """The m5-gemm kernel at ``size``^3: 128 threads (2x2 SIMD-groups), BK = 16, a patch of
    ``simd_tile`` x ``simd_tile`` fragments (4: 32x32, the published tile; 8: 64x64, the spilling
    one, whose threadgroup tile then grows to 128x128 with the same 2x2 SIMD-groups)."""
    t = 2 * 8 * simd_tile
    return SteelGemmConfig(size, size, size, bm=t, bn=t, bk=16, wm=2, wn=2, copy=copy)


def table(hw=None) -> list[dict]:
    """Predicted vs published TFLOP/s for both copies at the four sizes."""
    hw = hw or assumed_spec()
    rows = []
    for copy, pub in PUBLISHED_TFLOPS.items():
        for size, tf in pub.items():
            r = simulate(configs(size, copy), hw)
            pred = r.flops / r.time_s / 1e12
            rows.append({"copy": copy, "size": size, "published": tf, "predicted": pred,
                         "error": pred / tf - 1.0, "bound": r.bound})
    return rows


def spill_slowdown(hw=None, size: int = 4096) -> float:
    """Predicted time of the SIMD_TILE=8 (spilling) kernel over the SIMD_TILE=4 one."""
    hw = hw or assumed_spec()
    t4 = simulate(configs(size, "sync", 4), hw).time_s
    t8 = simulate(configs(size, "sync", 8), hw).time_s
    return t8 / t4


def main() -> None:
    hw = assumed_spec()
    print(f"{hw.display_name}: peak FP32 {hw.fp32_flops_per_s / 1e12:.1f} TFLOP/s, "
          f"simdgroup fp32 {hw.mma_flops_per_clk((8, 8, 8), 'fp32') * hw.sm_count * hw.sm_clock_hz / 1e12:.1f} TFLOP/s")
    print(f"{'copy':<14}{'size':>6}{'published':>11}{'predicted':>11}{'error':>9}  bound")
    for r in table(hw):
        print(f"{r['copy']:<14}{r['size']:>6}{r['published']:>11.1f}{r['predicted']:>11.2f}{r['error']:>+9.1%}  {r['bound']}")
    print(f"spill slowdown (SIMD_TILE=8 over 4, 4096^3): predicted {spill_slowdown(hw):.2f}x, "
          f"published ~{PUBLISHED_SPILL_SLOWDOWN:.0f}x")


if __name__ == "__main__":
    main()
