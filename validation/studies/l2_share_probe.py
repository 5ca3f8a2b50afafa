"""How much L2 does data take that many SMs read at once, or that lies at a power-of-two stride?
(a GPU microbenchmark, Nsight Compute)

``validation/l2_probe.py`` measures the capacity for slices each read by one SM at a time. A GEMM's
tiles differ in two ways: every tile is read by several blocks, on SMs all over the chip, at about
the same time; and a tile is a column chunk of a row-major matrix, so its rows lie a row pitch
apart (16 KiB at N = 4096, a power of two). This probe separates the two.

A footprint of ``F`` bytes is cut into ``S = BLOCKS / share`` slices; blocks ``b, b + S, b + 2S ...``
(``share`` of them, on different SMs) read slice ``b mod S`` together, ``PASSES`` times. Layouts:

* ``contiguous``: a slice is one contiguous range;
* ``pitch16k``: the footprint is rows of 16 KiB, and a slice is the same ``16 KiB / S`` chunk of every
  row (a tile of a row-major matrix at a power-of-two pitch);
* ``pitch16k_pad``: the same with rows of 16 KiB + 256 B (the pitch no longer a power of two).

Nsight Compute counts the DRAM bytes read with the L2 flushed first; the passes after the first
miss ``dram - F``. The footprint at which they miss half the time is the capacity for that kind of
data. ``python -m validation.studies.l2_share_probe --out DIR`` writes ``DIR/l2_share_probe.json``.
"""

from __future__ import annotations

import sys

SRC = r"""
// block b reads slice b % nslices: `rows` rows of `chunk_vec4` float4 at `row_vec4` apart
extern "C" __global__ void l2_share(const float4* __restrict__ buf, int nslices, long long chunk_vec4,
                                    long long row_vec4, long long rows, int passes, float* out) {
    const long long s = blockIdx.x % nslices;
    const long long total = rows * chunk_vec4;
    float acc = 0.f;
    for (int p = 0; p < passes; ++p) {
        for (long long e = threadIdx.x; e < total; e += blockDim.x) {
            const long long r = e / chunk_vec4, i = e - r * chunk_vec4;
            float4 v;
            asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
                         : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(buf + r * row_vec4 + s * chunk_vec4 + i));
            acc += v.x + v.y + v.z + v.w;
        }
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
"""
BLOCKS = 128  # one per SM (fewer than the SMs), so that 16 KiB / slices is a power of two
THREADS = 512
PASSES = 4
FOOTPRINTS_MIB = (8, 12, 16, 20, 24, 32, 40, 48, 56)
SHARES = (1, 2, 4, 8, 32)
LAYOUTS = ("contiguous", "pitch16k", "pitch16k_pad")
ROW_BYTES = 16 * 1024
PAD_BYTES = 256


def geometry(layout: str, share: int, footprint_mib: int) -> dict:
    """Slices, chunk, row pitch (float4 units) and rows of one case; ``footprint_bytes`` = what is read."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if share not in SHARES:
        raise ValueError(f"share must be one of {SHARES}, got {share!r}")
    nslices = BLOCKS // share
    if layout == "contiguous":
        chunk = (footprint_mib << 20) // 16 // nslices
        row, rows = chunk * nslices, 1
    else:
        chunk = ROW_BYTES // 16 // nslices
        row = (ROW_BYTES + (PAD_BYTES if layout == "pitch16k_pad" else 0)) // 16
        rows = (footprint_mib << 20) // ROW_BYTES
    return {"nslices": nslices, "chunk_vec4": chunk, "row_vec4": row, "rows": rows,
            "footprint_bytes": chunk * nslices * rows * 16, "span_bytes": row * rows * 16}


def cases() -> list[tuple[str, int, int]]:
    return [(lay, sh, mib) for lay in LAYOUTS for sh in SHARES for mib in FOOTPRINTS_MIB]


def _target() -> int:
    import cupy as cp  # noqa: PLC0415

    k = cp.RawModule(code=SRC).get_function("l2_share")
    out = cp.zeros(BLOCKS * THREADS, dtype=cp.float32)
    span = max(geometry(lay, 1, max(FOOTPRINTS_MIB))["span_bytes"] for lay in LAYOUTS)
    buf = cp.random.rand(span // 4 + 1024, dtype=cp.float32) + 0.5
    k((BLOCKS,), (THREADS,), (buf, cp.int32(BLOCKS), cp.int64(1), cp.int64(1), cp.int64(1), cp.int32(1), out))
    cp.cuda.runtime.deviceSynchronize()
    cp.cuda.runtime.profilerStart()
    for lay, sh, mib in cases():
        g = geometry(lay, sh, mib)
        k((BLOCKS,), (THREADS,), (buf, cp.int32(g["nslices"]), cp.int64(g["chunk_vec4"]), cp.int64(g["row_vec4"]),
                                  cp.int64(g["rows"]), cp.int32(PASSES), out))
    cp.cuda.runtime.deviceSynchronize()
    cp.cuda.runtime.profilerStop()
    return 0


def measure(ncu: str = "ncu") -> dict:
    from validation.harness.probe import probe_rows  # noqa: PLC0415

    metrics = ("dram__bytes_read.sum", "lts__t_sectors_srcunit_tex_op_read.sum", "gpu__time_duration.sum")
    rows = probe_rows("validation.studies.l2_share_probe", metrics, cache_control="all", ncu=ncu)
    res = []
    for (lay, sh, mib), r in zip(cases(), rows, strict=False):
        g = geometry(lay, sh, mib)
        fp = g["footprint_bytes"]
        dram = r["dram__bytes_read.sum"]
        res.append({"layout": lay, "share": sh, "footprint_bytes": fp, "passes": PASSES, "dram_read_bytes": dram,
                    "l2_read_sectors": r["lts__t_sectors_srcunit_tex_op_read.sum"],
                    "time_s": r["gpu__time_duration.sum"] * 1e-9,
                    "repeat_miss_fraction": max(0.0, dram - fp) / (fp * (PASSES - 1))})
    return {"blocks": BLOCKS, "cases": res}


def half_miss_footprints(cases_: list[dict]) -> dict:
    """(layout, share) -> footprint at which repeat reads miss half the time (None if never); pure."""
    out = {}
    for lay in LAYOUTS:
        for sh in SHARES:
            cs = sorted((c for c in cases_ if c["layout"] == lay and c["share"] == sh),
                        key=lambda c: c["footprint_bytes"])
            out[(lay, sh)] = None
            for a, b in zip(cs, cs[1:], strict=False):
                ma, mb = a["repeat_miss_fraction"], b["repeat_miss_fraction"]
                if ma < 0.5 <= mb:
                    fa, fb = a["footprint_bytes"], b["footprint_bytes"]
                    out[(lay, sh)] = fa + (fb - fa) * (0.5 - ma) / (mb - ma)
                    break
    return out


def _show(res: dict) -> None:
    for c in res["cases"]:
        print(f"{c['layout']:13s} share {c['share']} {c['footprint_bytes'] / 2**20:6.1f} MiB: repeat miss "
              f"{c['repeat_miss_fraction']:.3f}  ({c['time_s'] * 1e6:.0f} us)")
    for (lay, sh), f in half_miss_footprints(res["cases"]).items():
        print(f"half-miss footprint {lay:13s} share {sh}: " + (f"{f / 2**20:.1f} MiB" if f else "not reached"))


def main(argv=None) -> int:
    from validation.harness.probe import probe_main  # noqa: PLC0415

    return probe_main("validation.studies.l2_share_probe", __doc__, argv, _target, measure, "l2_share_probe.json",
                      show=_show,
                      results_subdir="studies/l2_share_probe")


if __name__ == "__main__":
    sys.exit(main())
