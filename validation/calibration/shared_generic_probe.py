"""How fast an SM serves shared-memory loads issued through a generic pointer (a GPU microbenchmark).

nvcc 13 compiles ``wmma::load_matrix_sync`` from shared memory in ``validation/families/tc_gemm/tc_gemm.cu``
into four generic 4-byte loads (``LD.E``) per 16x16 fragment, where the mma.sync kernels use one
``ldmatrix.x4`` (``LDSM``). Both move the fragment in four shared-memory wavefronts. This probe times
the three ways on conflict-free addresses, one block per SM, ``LOADS`` independent loads per loop trip:

===============  =====================================================================================
``lds32``        ``ld.shared.f32`` (``LDS``): 32 consecutive words per warp instruction, one wavefront
``ld_generic32`` the same addresses through a generic pointer (``ld.f32``: ``LD.E``)
``ldsm_x4``      ``ldmatrix.sync.aligned.m8n8.x4`` (``LDSM``): four 8x8 matrices, four wavefronts
===============  =====================================================================================

Per row (kernel x threads per block): ``instr_per_clk_per_sm`` (warp load instructions per SM clock,
median over the blocks of a run, then over ``reps`` runs), ``wavefronts_per_clk_per_sm``, and
``cycles_per_instr_per_sm`` (its inverse: how long one instruction holds the SM's shared-memory path at
that occupancy). ``sass`` checks the loop of each kernel holds the instruction it claims (needs
``cuobjdump``). ``python -m validation.calibration.shared_generic_probe --out DIR`` writes
``DIR/shared_generic.json``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

from validation.calibration import probe_common as pc

KERNEL_SRC = Path(__file__).resolve().with_suffix(".cu")
RESULT_FILE = "shared_generic.json"
ARCH = "sm_90"
LOADS = 8  # must match the .cu's LOADS
REC = 3  # longs per block record: cycles, ns, smid
KERNELS = {  # name -> (SASS mnemonic prefix, warp instructions per LOADS loads, wavefronts per instruction)
    "lds32": ("LDS", LOADS, 1),
    "ld_generic32": ("LD.E", LOADS, 1),
    "ldsm_x4": ("LDSM", LOADS // 4, 4),
}
THREADS = (128, 256, 512, 1024)
ITERS = 20000
QUICK_ITERS = 2000
REPS = 5


def rate_row(kernel: str, threads: int, iters: int, runs: list[dict]) -> dict:
    """One row from the runs' per-block cycles: instructions and wavefronts per SM clock."""
    _, per_trip, waves = KERNELS[kernel]
    instr = (threads // 32) * iters * per_trip
    rates = [instr / statistics.median(r["cycles"]) for r in runs]
    value = statistics.median(rates)
    return {"kernel": kernel, "threads": threads, "iters": iters, "instructions_per_block": instr,
            "instr_per_clk_per_sm": {**pc.summarize(rates), "value": value},
            "wavefronts_per_clk_per_sm": value * waves, "cycles_per_instr_per_sm": 1.0 / value,
            "clock_hz": statistics.median(r["clock_hz"] for r in runs)}


def sass_checks(workdir: Path) -> dict:
    """Per kernel: the mnemonic counts of its hot loop and whether the claimed instruction is there."""
    return pc.loop_sass_checks(workdir, ARCH, KERNEL_SRC, {k: (k, op) for k, (op, _, _) in KERNELS.items()})


def run(iters: int, reps: int) -> dict:  # pragma: no cover - needs a GPU
    import cupy as cp

    dev = cp.cuda.Device()
    sms = dev.attributes["MultiProcessorCount"]
    mod = cp.RawModule(code=KERNEL_SRC.read_text())
    rec = cp.zeros(REC * sms, dtype=cp.int64)
    out = cp.zeros(1024, dtype=cp.float32)
    other = cp.zeros(8192, dtype=cp.float32)
    rows = {}
    for k in KERNELS:
        fn = mod.get_function(k)
        for threads in THREADS:
            args = (cp.int32(iters), cp.int32(0), rec, out, other)
            fn((sms,), (threads,), args)  # warm-up
            runs = []
            for _ in range(reps):
                fn((sms,), (threads,), args)
                cp.cuda.runtime.deviceSynchronize()
                cycles, ns, smids = pc.record_columns(rec.get(), sms, REC)
                pc.check_timed_blocks(cycles, ns)
                runs.append({"cycles": cycles, "clock_hz": statistics.median(pc.block_clocks_hz(cycles, ns)),
                             "distinct_sms": len(set(smids))})
            rows[f"{k}.t{threads}"] = rate_row(k, threads, iters, runs)
    return rows


def main(argv=None) -> int:
    ap = pc.probe_parser("shared_generic_probe", __doc__.splitlines()[0], RESULT_FILE,
                         f"{QUICK_ITERS} loop trips instead of {ITERS}")
    args = ap.parse_args(argv)
    why = pc.gpu_missing()
    if why:
        return pc.no_gpu_exit("shared_generic_probe", why)
    meta = pc.collect_metadata()
    iters = QUICK_ITERS if args.quick else ITERS
    rows = run(iters, REPS)
    with tempfile.TemporaryDirectory() as tmp:
        sass = sass_checks(Path(tmp))
    path = pc.results_dir(args.out, meta) / RESULT_FILE
    pc.write_json(path, {"meta": {**meta, "iters": iters, "reps": REPS, "source": str(KERNEL_SRC.name)},
                         "sass": sass, "rows": rows})
    for name, r in rows.items():
        print(f"{name:22s} {r['instr_per_clk_per_sm']['value']:7.3f} instr/clk/SM  "
              f"{r['wavefronts_per_clk_per_sm']:6.3f} wavefronts/clk/SM  {r['clock_hz'] / 1e9:5.2f} GHz")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
