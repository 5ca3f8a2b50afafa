"""Predictions of the published m5-gemm results (M5 Max, fp32), and the values they assume.

The published figures (shared/REFERENCE.md: M5 Max, fp32, 64x64 threadgroup tile, 32x32 per
simdgroup, BK = 16, 128 threads), TFLOP/s at 1024/2048/4096/8192: sync_copy 3.3/7.7/13.5/13.0,
double-buffered 10.7/9.0/13.1/12.7; a simdgroup patch of 8x8 fragments per side (SIMD_TILE=8)
spilled registers and ran about 10x slower. They are compared here, never used to set a value.

The M5 Max's data file (tilesim/hardware/data/m5_max.toml) holds only what is sourced. The values
the engine also needs and no source gives for it are the catalog's assumed overlay
(tilesim/hardware/assumed/m5_max.toml, loaded by :func:`tilesim.hardware.load`): each with where it
comes from (mostly the M1 generation's microbenchmarks, carried over) or why it is a bare
assumption, every one a candidate for being wrong. This study and ``tilesim simulate steel_gemm
--hardware m5_max`` use the same numbers; :func:`assumed` lists them. A last partial wave spreads
one threadgroup per core (the engine's fallback for GPUs without NVIDIA's dispatch probe).

Two published figures are not met (2048^3, and the spill's 10x): what was checked, with sources,
is in validation/families/steel_gemm/README.md; :func:`spill_report` prints the spilling kernel's
breakdown quoted there.

Run: ``python -m validation.families.steel_gemm.predict_m5`` (CPU, seconds).
"""

from __future__ import annotations

from tilesim import hardware, simulate
from tilesim.hardware import HardwareSpec
from tilesim.kernels.steel_gemm import SteelGemmConfig

PUBLISHED_TFLOPS = {
    "sync": {1024: 3.3, 2048: 7.7, 4096: 13.5, 8192: 13.0},
    "double_buffer": {1024: 10.7, 2048: 9.0, 4096: 13.1, 8192: 12.7},
}
PUBLISHED_SPILL_SLOWDOWN = 10.0  # SIMD_TILE=8: "spilled registers and ran 10x slower"


def assumed_spec(name: str = "m5_max") -> HardwareSpec:
    """The GPU's spec as the catalog loads it: sourced values, then its assumed overlay."""
    return hardware.load(name)


def assumed(name: str = "m5_max") -> dict[str, tuple]:
    """key -> (value, source) of every value the GPU's spec takes from its assumed overlay."""
    hw = assumed_spec(name)
    return {k: (hw.get(k), hw.source_of(k)) for k in sorted(hw.assumed)}


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


def spill_report(hw=None, size: int = 4096) -> dict:
    """Where the predicted time of the spilling (SIMD_TILE=8) kernel goes, from the engine's own
    traffic counts and the spec's rates (no new constant): the spill bytes the lowering asks for,
    the DRAM bytes the engine charges (and how many of them are spill stores written back), the
    scratch footprint the resident SIMD-groups actually need (per-core, per-SIMD-group scratch
    slots, as Mesa's Asahi driver allocates them: validation/families/steel_gemm/README.md), and
    the time the spill bytes take on the core's 32 B/clk port alone. Seconds and bytes."""
    hw = hw or assumed_spec()
    cfg = configs(size, "sync", 8)
    r = simulate(cfg, hw)
    base = simulate(configs(size, "sync", 4), hw)
    resident_simdgroups = r.blocks_per_sm * cfg.simdgroups
    footprint = resident_simdgroups * cfg.spilled_regs * 4 * 32 * hw.sm_count
    port_bytes_per_s = 32 * hw.sm_count * hw.sm_clock_hz  # tilesim.cost.apple.CORE_IO_BYTES_PER_CLK
    return {
        "time_s": r.time_s, "base_time_s": base.time_s, "slowdown": r.time_s / base.time_s, "bound": r.bound,
        "spilled_regs": cfg.spilled_regs, "spill_bytes": cfg.spill_bytes,
        "dram_read_bytes": r.traffic.hbm_read_bytes, "dram_write_bytes": r.traffic.hbm_write_bytes,
        "dram_time_s": (r.traffic.hbm_read_bytes + r.traffic.hbm_write_bytes) / hw.hbm_bytes_per_s,
        "scratch_footprint_bytes": float(footprint), "l2_bytes": float(hw.l2_bytes),
        "spill_port_time_s": cfg.spill_bytes / port_bytes_per_s,
    }


def main() -> None:
    hw = assumed_spec()
    print(f"{len(hw.assumed)} assumed values (tilesim/hardware/assumed/{hw.name}.toml; "
          f"tilesim hardware show {hw.name} --sources)")
    print(f"{hw.display_name}: peak FP32 {hw.fp32_flops_per_s / 1e12:.1f} TFLOP/s, "
          f"simdgroup fp32 {hw.mma_flops_per_clk((8, 8, 8), 'fp32') * hw.sm_count * hw.sm_clock_hz / 1e12:.1f} TFLOP/s")
    print(f"{'copy':<14}{'size':>6}{'published':>11}{'predicted':>11}{'error':>9}  bound")
    for r in table(hw):
        print(f"{r['copy']:<14}{r['size']:>6}{r['published']:>11.1f}{r['predicted']:>11.2f}{r['error']:>+9.1%}  {r['bound']}")
    print(f"spill slowdown (SIMD_TILE=8 over 4, 4096^3): predicted {spill_slowdown(hw):.2f}x, "
          f"published ~{PUBLISHED_SPILL_SLOWDOWN:.0f}x")
    s = spill_report(hw)
    print(f"  spill kernel {s['time_s'] * 1e3:.1f} ms ({s['bound']}-bound) vs {s['base_time_s'] * 1e3:.1f} ms; "
          f"{s['spilled_regs']} registers spilled, {s['spill_bytes'] / 1e9:.1f} GB of spill loads + stores")
    print(f"  DRAM charged: {s['dram_read_bytes'] / 1e9:.1f} GB read + {s['dram_write_bytes'] / 1e9:.1f} GB written "
          f"= {s['dram_time_s'] * 1e3:.1f} ms at {hw.hbm_bytes_per_s / 1e9:.0f} GB/s")
    print(f"  scratch the resident SIMD-groups need: {s['scratch_footprint_bytes'] / 1e6:.1f} MB "
          f"(L2/SLC {s['l2_bytes'] / 1e6:.0f} MB); spill bytes on the 32 B/clk core ports alone: "
          f"{s['spill_port_time_s'] * 1e3:.1f} ms = {s['spill_port_time_s'] / s['base_time_s']:.2f}x the base kernel")


if __name__ == "__main__":
    main()
