"""How much data read from all over the chip the L2 holds (a GPU microbenchmark, Nsight Compute).

The H100/H200 L2 is two partitions; each caches the data that the SMs attached to it read, so a
line read by SMs on both sides may be held twice. One block per SM reads a slice of a buffer of
``S`` bytes; the kernel makes ``PASSES`` passes over the buffer, block ``b`` reading slice
``(b + p * rotate) mod blocks`` in pass ``p``:

* ``rotate = 0``: every slice is re-read by the SM that read it first (near partition);
* ``rotate = blocks / 2``: every pass moves each slice to a far block, as GEMM tiles that blocks
  all over the chip read are.

Nsight Compute counts the DRAM bytes read (``--cache-control all``: L2 flushed before the
kernel); the passes after the first miss ``dram - S`` bytes. The footprint at which they start to
miss is the capacity the simulator's L2 has for such data. A second kernel first writes
``WRITE_MIB`` (dirty lines, as a GEMM's output) and then re-reads ``READ_MIB``; the DRAM bytes it
writes during the kernel are the dirty lines the reads pushed out. ``python -m validation.calibration.l2_probe --out
DIR`` writes ``DIR/l2_probe.json`` (needs a GPU and ``ncu``).
"""

from __future__ import annotations

import sys

SRC = r"""
// block b reads slice (b + p * rotate) mod blocks in pass p, through L2 only (ld.global.cg)
__device__ float reread(const float4* __restrict__ buf, long long slice_vec4, int passes, int rotate) {
    float acc = 0.f;
    for (int p = 0; p < passes; ++p) {
        const long long s = (blockIdx.x + (long long)p * rotate) % gridDim.x;
        const float4* base = buf + s * slice_vec4;
        for (long long i = threadIdx.x; i < slice_vec4; i += blockDim.x) {
            float4 v;
            asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
                         : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(base + i));
            acc += v.x + v.y + v.z + v.w;
        }
        __syncthreads();
    }
    return acc;
}

extern "C" __global__ void l2_passes(const float4* __restrict__ buf, long long slice_vec4, int passes,
                                     int rotate, float* out) {
    out[blockIdx.x * blockDim.x + threadIdx.x] = reread(buf, slice_vec4, passes, rotate);
}

// write-back: each block first writes its slice of `dst` (dirty lines enter L2), then re-reads
// slices of `buf` as l2_passes does; the DRAM bytes written during the kernel are the dirty lines
// the reads pushed out
extern "C" __global__ void l2_write_read(float4* __restrict__ dst, long long dst_slice_vec4,
                                         const float4* __restrict__ buf, long long slice_vec4, int passes,
                                         int rotate, float* out) {
    float4* d = dst + blockIdx.x * dst_slice_vec4;
    for (long long i = threadIdx.x; i < dst_slice_vec4; i += blockDim.x)
        d[i] = make_float4(i, 1.f, 2.f, 3.f);
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = reread(buf, slice_vec4, passes, rotate);
}
"""
FOOTPRINTS_MIB = (8, 16, 24, 32, 40, 48, 56, 64, 80)
WRITE_MIB = 24  # written first (as a GEMM's C), then re-reads of READ_MIB
READ_MIB = (8, 12, 16, 20, 24, 28, 32)
PASSES = 4
THREADS = 512


def target(sizes_mib, rotates) -> int:
    """Launch every (footprint, rotate) case once between cudaProfilerStart/Stop."""
    import cupy as cp  # noqa: PLC0415

    sms = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    k = cp.RawModule(code=SRC).get_function("l2_passes")
    out = cp.zeros(sms * THREADS, dtype=cp.float32)
    buf = cp.random.rand(max(sizes_mib) * (1 << 18) + 1024, dtype=cp.float32) + 0.5
    k((sms,), (THREADS,), (buf, cp.int64(16), cp.int32(1), cp.int32(0), out))  # compile, warm
    cp.cuda.runtime.deviceSynchronize()
    cp.cuda.runtime.profilerStart()
    for mib in sizes_mib:
        slice_vec4 = (mib << 20) // 16 // sms
        for rot in rotates:
            k((sms,), (THREADS,), (buf, cp.int64(slice_vec4), cp.int32(PASSES), cp.int32(rot), out))
    kw = cp.RawModule(code=SRC).get_function("l2_write_read")
    dst = cp.zeros((WRITE_MIB << 20) // 4 + 1024, dtype=cp.float32)
    for mib in READ_MIB:
        kw((sms,), (THREADS,), (dst, cp.int64((WRITE_MIB << 20) // 16 // sms), buf, cp.int64((mib << 20) // 16 // sms),
                                cp.int32(PASSES), cp.int32(sms // 2), out))
    cp.cuda.runtime.deviceSynchronize()
    cp.cuda.runtime.profilerStop()
    return 0


def measure(ncu: str = "ncu") -> dict:
    import cupy as cp  # noqa: PLC0415

    from validation.harness.probe import probe_rows  # noqa: PLC0415

    sms = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    rotates = (0, sms // 2)
    metrics = ("dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_sectors_srcunit_tex_op_read.sum",
               "gpu__time_duration.sum")
    rows = probe_rows("validation.calibration.l2_probe", metrics, cache_control="all", ncu=ncu)
    cases = [(mib, rot) for mib in FOOTPRINTS_MIB for rot in rotates]
    res = []
    for (mib, rot), r in zip(cases, rows, strict=False):
        slice_bytes = ((mib << 20) // 16 // sms) * 16
        footprint = slice_bytes * sms
        dram = r["dram__bytes_read.sum"]
        res.append({"footprint_bytes": footprint, "rotate": rot, "passes": PASSES, "dram_read_bytes": dram,
                    "l2_read_sectors": r["lts__t_sectors_srcunit_tex_op_read.sum"],
                    "time_s": r["gpu__time_duration.sum"] * 1e-9,
                    # the passes after the first: the fraction of their bytes that came from DRAM
                    "repeat_miss_fraction": max(0.0, dram - footprint) / (footprint * (PASSES - 1))})
    wb = []
    for mib, r in zip(READ_MIB, rows[len(cases):], strict=False):
        wb.append({"written_bytes": ((WRITE_MIB << 20) // 16 // sms) * 16 * sms,
                   "read_footprint_bytes": ((mib << 20) // 16 // sms) * 16 * sms, "passes": PASSES,
                   "dram_write_bytes": r["dram__bytes_write.sum"], "dram_read_bytes": r["dram__bytes_read.sum"]})
    return {"sms": sms, "cases": res, "writeback": wb}


def capacity_field(cases: list[dict]) -> dict:
    """``l2_bytes`` for the simulator: the footprint at which re-reads miss half the time,
    interpolated, averaged over near and far re-reads (pure: no GPU)."""
    points = []
    for rot in sorted({c["rotate"] for c in cases}):
        cs = sorted((c for c in cases if c["rotate"] == rot), key=lambda c: c["footprint_bytes"])
        for a, b in zip(cs, cs[1:], strict=False):
            ma, mb = a["repeat_miss_fraction"], b["repeat_miss_fraction"]
            if ma < 0.5 <= mb:
                fa, fb = a["footprint_bytes"], b["footprint_bytes"]
                points.append(fa + (fb - fa) * (0.5 - ma) / (mb - ma))
                break
    if not points:
        raise ValueError("l2_probe: repeat misses never cross 50%; extend FOOTPRINTS_MIB")
    value = sum(points) / len(points)
    return {"value": round(value), "benchmark": "l2_probe, Nsight Compute DRAM bytes: footprint at which "
            "cyclic re-reads (near and far) miss half the time", "unit": "bytes", "n": len(points),
            "p10": min(points), "p90": max(points), "how": f"mean of {len(points)} crossings"}


def _target() -> int:
    import cupy as cp  # noqa: PLC0415

    return target(FOOTPRINTS_MIB, (0, cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"] // 2))


def _show(res: dict) -> None:
    for c in res["cases"]:
        print(f"{c['footprint_bytes'] / 2**20:6.1f} MiB rotate {c['rotate']:3d}: repeat miss "
              f"{c['repeat_miss_fraction']:.3f}  ({c['time_s'] * 1e6:.0f} us)")
    for w in res["writeback"]:
        print(f"wrote {w['written_bytes'] / 2**20:.0f} MiB, re-read {w['read_footprint_bytes'] / 2**20:.0f} MiB: "
              f"DRAM written {w['dram_write_bytes'] / 2**20:.1f} MiB, read {w['dram_read_bytes'] / 2**20:.1f} MiB")


def dirty_field(writeback: list[dict]) -> dict:
    """``l2_dirty_bytes``: what the L2 keeps in all once written lines are among it, from the
    write-then-re-read cases that wrote back at least 1 MiB while their re-reads still hit:
    written + re-read - written back (pure: no GPU)."""
    kept = [w["written_bytes"] + w["read_footprint_bytes"] - w["dram_write_bytes"] for w in writeback
            if w["dram_write_bytes"] >= 2**20 and w["dram_read_bytes"] <= 1.02 * w["read_footprint_bytes"]]
    if not kept:
        raise ValueError("l2_probe: no write-back case evicted dirty lines with its re-reads hitting")
    kept.sort()
    mid = len(kept) // 2
    value = kept[mid] if len(kept) % 2 else (kept[mid - 1] + kept[mid]) / 2
    return {"value": round(value), "benchmark": "l2_probe, Nsight Compute DRAM bytes: written + re-read - "
            "written back, when written lines are pushed out", "unit": "bytes", "n": len(kept),
            "p10": kept[0], "p90": kept[-1], "how": f"median of {len(kept)} cases"}


def main(argv=None) -> int:
    from validation.harness.probe import probe_main  # noqa: PLC0415

    return probe_main("validation.calibration.l2_probe", __doc__, argv, _target, measure, "l2_probe.json", show=_show)


if __name__ == "__main__":
    sys.exit(main())
