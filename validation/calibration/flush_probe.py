"""What the harness's L2 flush leaves behind: the dirty lines a kernel timed after it has to write back.

The validation harness (validation/harness/timing.py, ``L2Flusher``) empties the L2 before every timed
repetition by *writing* a buffer of twice its size, so each kernel starts with an L2 full of the flush's
lines, most of them dirty. A kernel that then reads or writes new lines pushes those out, and the L2
writes them back to HBM while the kernel runs. This probe measures that cost, beside a clean start.

``python -m validation.calibration.flush_probe [--out DIR] [--quick]`` writes ``<DIR>/flush.json`` (default
DIR: ``validation/results/<gpu>/calibration``); without a GPU it says so in one line and exits 2. Seconds
of GPU time.

Kernels (grid-stride, 16-byte accesses, :data:`GRID_PER_SM` blocks of :data:`THREADS` per SM, as
hbm_stream_probe): ``fp_read`` reads ``bytes`` (sums them, writes nothing), ``fp_copy`` reads ``bytes`` and
writes as many (``y = 2 x + 1``, a LayerNorm-like stream), ``fp_write`` writes ``bytes``. Sizes
:data:`SIZES_MIB` per kernel. Conditions, enqueued before every repetition outside the timed events
(``time_gpu``'s ``flusher`` and ``before``):

- ``dirty``: the harness's flush alone (what every suite time was measured after);
- ``clean``: the same flush, then ``fp_sweep`` reads another buffer of twice the L2 size, which writes
  the flush's dirty lines back and leaves the L2 holding clean lines of no use to the kernel.

Timing as the suite's (``time_gpu``: CUDA events around each launch, :data:`WARMUP` warm-up calls,
:data:`REPS` repetitions, median and spread). ``extra_s`` = dirty median - clean median per case.

Counters (``--ncu``, under Nsight Compute with ``--cache-control none`` so that ncu does not flush
the L2 itself): each case's conditioning then one launch of the kernel, :data:`NCU_LAUNCHES` times;
``ncu --clock-control none --cache-control none -k regex:^fp_(read|copy|write)$ --csv --page raw
--metrics`` :data:`NCU_METRICS` ``python -m validation.calibration.flush_probe --ncu`` gives one CSV row
per launch in the order of :func:`cases` (the conditioning kernels are not profiled):
DRAM bytes read and written by each launch, the written ones beyond the kernel's own output being the
flush's lines written back.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from validation.calibration import probe_common as pc

RESULT_FILE = "flush.json"


def read_kernel_source(name: str) -> str:
    """CUDA source of a grid-stride read-only kernel ``name(const float4* x, long long n4, float* out)``
    (16-byte loads summed; one value per block is written only if the sum is -1, never for the inputs,
    so the reads cannot be removed): the probes' read stream and their L2 sweep, under their own names
    so that Nsight Compute can tell them apart."""
    return r"""
extern "C" __global__ void NAME(const float4* __restrict__ x, long long n4, float* out) {
    float acc = 0.f;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];
        acc += v.x + v.y + v.z + v.w;
    }
    if (acc == -1.0f) out[blockIdx.x] = acc;
}
""".replace("NAME", name)


SOURCE = read_kernel_source("fp_read") + read_kernel_source("fp_sweep") + r"""
extern "C" __global__ void fp_copy(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];
        y[i] = make_float4(2.f * v.x + 1.f, 2.f * v.y + 1.f, 2.f * v.z + 1.f, 2.f * v.w + 1.f);
    }
}
extern "C" __global__ void fp_write(float4* __restrict__ y, long long n4, float value) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride)
        y[i] = make_float4(value, value, value, value);
}
"""
KERNELS = ("read", "copy", "write")
SIZES_MIB = {"read": (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256),
             "copy": (1, 2, 4, 8, 16, 24, 32, 48, 64, 128),
             "write": (2, 8, 16, 32, 64)}
CONDITIONS = ("dirty", "clean")
GRID_PER_SM = 8
THREADS = 256
WARMUP, REPS, MIN_REPS = 5, 30, 20
QUICK_REPS = 5
NCU_LAUNCHES = 2
NCU_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum")
MIB = 1 << 20


def cases() -> list[tuple[str, int, str]]:
    """(kernel, MiB, condition) in the order the probe runs them (and ncu lists them)."""
    return [(k, s, c) for k in KERNELS for s in SIZES_MIB[k] for c in CONDITIONS]


def case_name(kernel: str, mib: int, condition: str) -> str:
    return f"{kernel}_{mib}mib_{condition}"


def summarize(res: dict) -> dict:
    """Per (kernel, MiB): the dirty and clean medians and ``extra_s`` = dirty - clean (pure)."""
    out = {}
    for k in KERNELS:
        for s in SIZES_MIB[k]:
            d, c = res["cases"].get(case_name(k, s, "dirty")), res["cases"].get(case_name(k, s, "clean"))
            if d and c:
                out[f"{k}_{s}mib"] = {"kernel": k, "mib": s, "dirty_s": d["median_s"], "clean_s": c["median_s"],
                                      "extra_s": d["median_s"] - c["median_s"]}
    return out


def format_table(res: dict) -> str:
    lines = [f"{'case':16s} {'dirty us':>9s} {'clean us':>9s} {'extra us':>9s}"]
    for key, row in summarize(res).items():
        lines.append(f"{key:16s} {row['dirty_s'] * 1e6:9.2f} {row['clean_s'] * 1e6:9.2f} {row['extra_s'] * 1e6:9.2f}")
    return "\n".join(lines)


# ----- GPU side ------------------------------------------------------------------------------------------
def _setup(cp):
    from validation.harness.timing import L2Flusher  # noqa: PLC0415

    mod = cp.RawModule(code=SOURCE)
    sms, _ = pc.device_facts(cp)
    flush = L2Flusher(cp)
    n_max = max(max(v) for v in SIZES_MIB.values()) * MIB // 4
    x = cp.random.random(n_max, dtype=cp.float32)
    y = cp.empty(n_max, dtype=cp.float32)
    sweep_buf = cp.random.random(flush.nbytes // 4, dtype=cp.float32)
    out = cp.zeros(sms * GRID_PER_SM, dtype=cp.float32)
    grid = sms * GRID_PER_SM
    f = {k: mod.get_function(f"fp_{k}") for k in (*KERNELS, "sweep")}

    def sweep():
        f["sweep"]((grid,), (THREADS,), (sweep_buf, cp.int64(sweep_buf.size // 4), out))

    def launcher(kernel: str, mib: int):
        n4 = cp.int64(mib * MIB // 16)
        if kernel == "read":
            return lambda: f["read"]((grid,), (THREADS,), (x, n4, out))
        if kernel == "copy":
            return lambda: f["copy"]((grid,), (THREADS,), (x, y, n4))
        return lambda: f["write"]((grid,), (THREADS,), (y, n4, cp.float32(1.0)))

    return flush, sweep, launcher, grid


def run_probe(quick: bool = False) -> dict:
    import cupy as cp  # noqa: PLC0415

    from validation.harness.timing import time_gpu  # noqa: PLC0415

    flush, sweep, launcher, grid = _setup(cp)
    reps = QUICK_REPS if quick else REPS
    res: dict = {"meta": pc.collect_metadata(), "flush_bytes": flush.nbytes, "grid": grid, "threads": THREADS,
                 "reps": reps, "cases": {}, "raw": {}, "errors": {}}
    for k, s, c in cases():
        name = case_name(k, s, c)
        try:
            t = time_gpu(launcher(k, s), warmup=WARMUP, reps=reps, min_reps=min(MIN_REPS, reps), flusher=flush,
                         before=sweep if c == "clean" else None, budget_s=5.0)
            res["cases"][name] = {"kernel": k, "mib": s, "condition": c, "bytes": s * MIB, "median_s": t.median_s,
                                  "p10_s": t.p10_s, "p90_s": t.p90_s, "min_s": t.min_s, "reps": t.reps}
            res["raw"][name] = list(t.samples_s)
        except Exception as exc:  # noqa: BLE001 - one failed case must not lose the others
            res["errors"][name] = f"{type(exc).__name__}: {exc}"
    res["summary"] = summarize(res)
    return res


def run_ncu_pass() -> int:
    """Each case's conditioning and one kernel launch, :data:`NCU_LAUNCHES` times (for ncu to profile)."""
    import cupy as cp  # noqa: PLC0415

    flush, sweep, launcher, _ = _setup(cp)
    for k, s, c in cases():
        launch = launcher(k, s)
        for _ in range(NCU_LAUNCHES):
            flush()
            if c == "clean":
                sweep()
            launch()
        cp.cuda.runtime.deviceSynchronize()
        print(case_name(k, s, c))
    return 0


def ncu_fields(ncu_text: str) -> dict:
    """Per case, DRAM bytes read and written by its launches (``ncu --csv --page raw`` of ``--ncu``)."""
    from validation.calibration.tc_feed_probe import read_ncu_raw  # noqa: PLC0415

    launches = [d for d in read_ncu_raw(ncu_text) if str(d.get("Kernel Name", "")).startswith("fp_")]
    plan = cases()
    if len(launches) != NCU_LAUNCHES * len(plan):
        raise ValueError(f"ncu_fields: {len(launches)} fp_ launches for {len(plan)} cases "
                         f"(want {NCU_LAUNCHES} each)")
    out = {}
    for i, (k, s, c) in enumerate(plan):
        rows = launches[i * NCU_LAUNCHES:(i + 1) * NCU_LAUNCHES]
        out[case_name(k, s, c)] = {m: [float(r[m]) for r in rows] for m in NCU_METRICS}
    return out


#: read rows at or above this size write back all of the flush's dirty lines (the curve is flat from 96 MiB)
SATURATED_MIB = 128
#: a row's write-back under this share of the saturated total counts towards the per-byte rates
BELOW_SATURATION = 0.8


def writeback_rows(ncu_text: str) -> dict:
    """Per (kernel, MiB): the kernel's own DRAM bytes read and written (clean start) and the extra bytes
    written after the flush alone (dirty - clean write bytes), medians over the launches (pure)."""
    import statistics  # noqa: PLC0415

    per = ncu_fields(ncu_text)
    out = {}
    for k in KERNELS:
        for s in SIZES_MIB[k]:
            d, c = per[case_name(k, s, "dirty")], per[case_name(k, s, "clean")]
            out[(k, s)] = {"read_bytes": statistics.median(c["dram__bytes_read.sum"]),
                           "written_bytes": s * MIB if k != "read" else 0.0,
                           "extra_bytes": (statistics.median(d["dram__bytes_write.sum"])
                                           - statistics.median(c["dram__bytes_write.sum"]))}
    return out


def flush_fields(ncu_text: str, rel: str = "flush_ncu/ncu_raw.csv", date: str | None = None) -> dict:
    """The calibrated profile's fields from the ``--ncu`` counter run: ``l2_flushed_dirty_bytes`` (what
    the read streams of :data:`SATURATED_MIB` MiB and more write back in all: the median),
    ``l2_flushed_writeback_per_read_byte`` (the read streams below :data:`BELOW_SATURATION` of it:
    median of extra bytes over bytes read) and ``l2_flushed_writeback_per_written_byte`` (the write
    streams below it: extra bytes over bytes written)."""
    import statistics  # noqa: PLC0415

    rows = writeback_rows(ncu_text)
    sat = [r["extra_bytes"] for (k, s), r in rows.items() if k == "read" and s >= SATURATED_MIB]
    total = statistics.median(sat)
    per_read = [r["extra_bytes"] / r["read_bytes"] for (k, _), r in rows.items()
                if k == "read" and r["extra_bytes"] < BELOW_SATURATION * total]
    per_written = [r["extra_bytes"] / r["written_bytes"] for (k, _), r in rows.items()
                   if k == "write" and r["extra_bytes"] < BELOW_SATURATION * total]

    def field(value, what, values, unit):
        return {"value": value, "unit": unit, "n": len(values), "p10": min(values), "p90": max(values), "date": date,
                "benchmark": f"flush_probe under ncu ({rel}: {what}; ncu --cache-control none, the harness's "
                             f"L2 flush before each launch, or that flush and a read sweep for the clean start)"}

    return {
        "l2_flushed_dirty_bytes": field(total, f"dirty - clean DRAM bytes written by the read streams of "
                                        f">= {SATURATED_MIB} MiB, median (min..max)", sat, "bytes"),
        "l2_flushed_writeback_per_read_byte": field(
            statistics.median(per_read), f"dirty - clean DRAM bytes written over bytes read, read streams "
            f"writing back less than {BELOW_SATURATION:g} of it, median (min..max)", per_read, "bytes/byte"),
        "l2_flushed_writeback_per_written_byte": field(
            statistics.median(per_written), f"dirty - clean DRAM bytes written over bytes the kernel wrote, "
            f"write streams below {BELOW_SATURATION:g} of it, median (min..max)", per_written, "bytes/byte"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = pc.probe_parser("flush_probe", __doc__.splitlines()[0], RESULT_FILE,
                         f"{QUICK_REPS} timed runs a case instead of {REPS}")
    ap.add_argument("--ncu", action="store_true", help="only launch the cases for Nsight Compute (no timing)")
    ap.add_argument("--ncu-table", default=None, metavar="FILE",
                    help="print DRAM bytes per case from a saved ncu --csv --page raw output (no GPU)")
    args = ap.parse_args(argv)
    if args.ncu_table:
        from pathlib import Path  # noqa: PLC0415

        for name, d in ncu_fields(Path(args.ncu_table).read_text()).items():
            rd, wr = d["dram__bytes_read.sum"], d["dram__bytes_write.sum"]
            print(f"{name:22s} read MB {' '.join(f'{v / 1e6:8.2f}' for v in rd)}   "
                  f"write MB {' '.join(f'{v / 1e6:8.2f}' for v in wr)}")
        return 0
    why = pc.gpu_missing()
    if why:
        return pc.no_gpu_exit("flush_probe", why)
    if args.ncu:
        return run_ncu_pass()
    t0 = time.perf_counter()
    res = run_probe(quick=args.quick)
    res["meta"].update(quick=bool(args.quick), probe_wall_s=time.perf_counter() - t0)
    return pc.write_probe_result(args.out, RESULT_FILE, res, format_table(res))


if __name__ == "__main__":
    sys.exit(main())
