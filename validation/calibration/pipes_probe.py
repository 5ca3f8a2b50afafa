"""Microbenchmarks of the SFU, shuffle, integer, fp32 add/max, atomic and barrier pipes on the GPU.

These are the pipes the reduction, softmax and layernorm families use besides memory: the
special-function unit (MUFU), warp shuffles, the integer ALU, fp32 add and max, shared and global
atomics, barriers.

``python -m validation.calibration.pipes_probe [--out DIR] [--quick]`` runs them on the current GPU
(CuPy), prints a table and writes ``<DIR>/pipes.json`` (default DIR:
``validation/results/<gpu>/calibration``; ``<gpu>`` from the device's name, e.g. ``h200``). Without a
GPU it says so in one line and exits 2. The whole probe takes well under a minute (``--quick``: fewer
runs, shorter kernels).

The kernels are in ``pipes_probe.cu``, compiled by nvcc to a cubin for the device's architecture
and loaded by ``cupy.RawModule``, so what runs is what ``cuobjdump -sass`` disassembled. Each
probe's hot loop body is read from that SASS: the intended instruction must be there, as many times
per source iteration as the source says (else the probe is flagged ``sass_ok: false`` and
:func:`fields` leaves it out), and the rates divide by those SASS counts, not by source counts.
Without cuobjdump (or, for NVRTC's build, without nvcc) the source's counts are used, flagged
``sass_ok: null``.

Throughput probes: ``8`` independent chains per thread, 64 ops per thread per iteration (8 atomics
for the atomic probes), blocks of 256 threads, as many blocks per SM as fit, up to 8 (64 warps); the
kernel time (CUDA events, each launch queued behind a spin so the host's launch latency stays out)
times the SM clock its blocks saw (clock64 over %globaltimer) gives SM cycles; a rate is warp
instructions per clock per SM. Latency probes: one warp, one dependent chain, ``clock64()`` around
32 x iters steps. Barrier: one block of 1..32 warps running ``__syncthreads()`` back to back.

Fields (hardware-spec names) that :func:`fields` maps the results to, and their probe kernels:
throughput in warp instructions per clock per SM:
``sfu_warp_instr_per_clk_per_sm`` (MUFU.EX2, ``tp_ex2``), ``sfu_rsq_...`` (MUFU.RSQ, ``tp_rsq``),
``sfu_rcp_...`` (MUFU.RCP, ``tp_rcp``), ``shuffle_...`` (SHFL.BFLY, ``tp_shfl``), ``int_...`` (IADD3
and LOP3, ``tp_int``), ``fadd_...`` (FADD, ``tp_fadd``), ``fmnmx_...`` (FMNMX, ``tp_fmnmx``),
``smem_atomic_...`` (ATOMS.ADD u32, lanes on distinct words), ``smem_atomic_same_address_...``
(ATOMS.ADD, the 32 lanes on one word), ``global_atomic_...`` (REDG.ADD.F32, lanes on distinct
words, one 128-byte line per instruction); ``expf_warp_calls_per_clk_per_sm`` (``__expf`` with the
default flags: FMUL, FSETP, two predicated FMULs and MUFU.EX2 per call) and
``expf_ftz_warp_calls_per_clk_per_sm`` (``__expf`` as with ``-ftz=true``: FMUL + MUFU.EX2);
``global_atomic_same_address_per_clk``: REDG.ADD.F32 on ONE word from lane 0 of every warp, atomics
per clock of the whole GPU (a reduction finishing with one atomicAdd per block).
Latency in cycles per dependent step: ``sfu_latency_cycles`` (MUFU.EX2), ``sfu_rsq_latency_cycles``,
``shuffle_latency_cycles`` (SHFL.BFLY), ``fadd_latency_cycles``, ``int_latency_cycles`` (IADD3 and
LOP3 alternating; a chain of adds alone is folded by ptxas), ``lop3_latency_cycles`` (so IADD3's is
2 x int - lop3), ``reduce_step_latency_cycles`` (x += shfl_xor(x, m): SHFL then FADD),
``barrier_latency_cycles`` (``__syncthreads()`` in a block of 8 warps) and
``barrier_latency_cycles_by_warps`` (``[[warps, cycles]]`` for 1, 4, 8, 16, 32 warps).

What the probes check against (``expected`` in the results, never used as a value): the CUDA C++
Programming Guide, "Arithmetic Instructions", table "Throughput of Native Arithmetic Instructions"
(results per clock cycle per multiprocessor), compute capability 9.0: 32-bit floating-point add,
multiply, multiply-add 128; 32-bit reciprocal, reciprocal square root, base-2 exponential (SFU) 16;
32-bit integer add and bitwise ops 64; warp shuffle 32; divided by 32 lanes: 4, 0.5, 2 and 1 warp
instructions per clock per SM. FMNMX and atomics are not in the table. (These figures came with
the task; the guide itself could not be fetched from this machine to re-check them.)

Findings from the SASS alone (sm_90, nvcc 13), no GPU needed: a shared-memory ``atomicAdd`` on a
float compiles to a compare-and-swap loop (ATOMS.CAST.SPIN), not one ATOMS (the probes use unsigned
ints, which are one ATOMS.ADD); ``rsqrtf``/``__expf``/``exp2f`` without ``-ftz=true`` add FSETP and
predicated FMULs around each MUFU; ptxas folds ``rcp(rcp(x))`` into ``x`` and chains of integer
adds into IMADs (the probes avoid both, see ``pipes_probe.cu``).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from validation.calibration import probe_common as pc
from validation.calibration.probe_common import REPO_ROOT, count_prefix, hot_loop, summarize
from validation.calibration.probe_common import gpu_missing as _gpu_missing

KERNEL_SRC = Path(__file__).resolve().with_suffix(".cu")
disassemble = pc.disassemble  # the tests and older callers read the SASS through this module
RESULT_FILE = "pipes.json"

# must match the #defines of pipes_probe.cu (tests/test_pipes_probe.py checks that they do)
THREADS = 256  # PB_THREADS
OPS_PER_ITER = 64  # PB_CHAINS * PB_ROUNDS: chain ops per thread per iteration
ATOMICS_PER_ITER = 8  # PB_ATOMICS
LAT_STEPS = 32  # dependent steps per iteration of a latency loop
BAR_STEPS = 8  # barriers per iteration of the barrier loop

MAX_BLOCKS_PER_SM = 8  # 8 x 256 threads = 64 warps, the SM's limit on cc 9.0
RUNS = 20  # timed runs per probe (validation/calibrate.py's MIN_RUNS)
QUICK_RUNS = 5
TARGET_KERNEL_S = 2e-3  # each timed launch lasts about this long (launch overheads < 1%)
QUICK_TARGET_KERNEL_S = 0.5e-3
GATE_SPIN_CYCLES = 200_000  # about 100 us at 2 GHz: covers the host's enqueueing of the timed launch
LAT_ITERS = 256  # latency loops: 256 x 32 = 8192 dependent steps
BAR_ITERS = 256  # barrier loop: 256 x 8 = 2048 barriers
BARRIER_WARPS = (1, 4, 8, 16, 32)
BARRIER_FIELD_WARPS = 8  # barrier_latency_cycles: a 256-thread block, the families' usual size

# CUDA C++ Programming Guide, throughput table, cc 9.0, results/clk/SM divided by 32 lanes
GUIDE = "CUDA C++ Programming Guide, Throughput of Native Arithmetic Instructions, cc 9.0"
SFU_EXPECTED = 16 / 32
SHUFFLE_EXPECTED = 32 / 32
INT_EXPECTED = 64 / 32
FADD_EXPECTED = 128 / 32

# loop-control instructions a body may carry besides the probed ones (counter, compare, branch)
LOOP_OVERHEAD_MAX = 4


@dataclass(frozen=True)
class Probe:
    """One microbenchmark kernel and what its hot loop must contain.

    ``counts``: SASS mnemonic prefix -> instructions per thread per source iteration (exact, except
    that loop control may add up to ``LOOP_OVERHEAD_MAX`` per body); the first entry is the probe's
    key: its count sets the body's unroll factor, and the rate counts it. ``rate_ops`` (when set)
    are the mnemonics the rate counts instead of the key alone. ``absent``: mnemonic prefixes that
    must not appear (they would mean the compiler changed the work).
    """

    kernel: str
    field: str  # the hardware-spec field it calibrates ("" when none)
    counts: tuple[tuple[str, int], ...]
    unit: str
    what: str
    rate_ops: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()
    expected: float | None = None
    gpu_wide: bool = False  # rate per clock of the whole GPU, not per SM

    @property
    def key(self) -> str:
        return self.counts[0][0]

    @property
    def key_per_iter(self) -> int:
        return self.counts[0][1]


WARP_RATE = "warp instr/clk/SM"
N, A, S = OPS_PER_ITER, ATOMICS_PER_ITER, LAT_STEPS

THROUGHPUT = (
    Probe("tp_ex2", "sfu_warp_instr_per_clk_per_sm", (("MUFU.EX2", N),), WARP_RATE,
          "MUFU.EX2, x = 2^-x", absent=("FMUL", "FADD", "FSETP"), expected=SFU_EXPECTED),
    Probe("tp_rsq", "sfu_rsq_warp_instr_per_clk_per_sm", (("MUFU.RSQ", N),), WARP_RATE,
          "MUFU.RSQ, x = rsqrt(x)", absent=("FMUL", "FSETP"), expected=SFU_EXPECTED),
    Probe("tp_rcp", "sfu_rcp_warp_instr_per_clk_per_sm", (("MUFU.RCP", N),), WARP_RATE,
          "MUFU.RCP, x = 1/(-x)", absent=("FMUL", "FADD", "FFMA"), expected=SFU_EXPECTED),
    Probe("tp_expf", "expf_warp_calls_per_clk_per_sm", (("MUFU.EX2", N), ("FMUL", 3 * N), ("FSETP", N)),
          "warp calls/clk/SM", "__expf(-x), default flags (no ftz)"),
    Probe("tp_expf_ftz", "expf_ftz_warp_calls_per_clk_per_sm", (("MUFU.EX2", N), ("FMUL", N)),
          "warp calls/clk/SM", "__expf(-x) as with -ftz=true: FMUL.FTZ + MUFU.EX2", absent=("FSETP",)),
    Probe("tp_shfl", "shuffle_warp_instr_per_clk_per_sm", (("SHFL.BFLY", N),), WARP_RATE,
          "SHFL.BFLY, 8 registers", expected=SHUFFLE_EXPECTED),
    Probe("tp_int", "int_warp_instr_per_clk_per_sm", (("LOP3.LUT", N // 2), ("IADD3", N // 2)), WARP_RATE,
          "IADD3 and LOP3 alternating", rate_ops=("LOP3.LUT", "IADD3"), absent=("IMAD",),
          expected=INT_EXPECTED),
    Probe("tp_fadd", "fadd_warp_instr_per_clk_per_sm", (("FADD", N),), WARP_RATE,
          "FADD, x = x + a", absent=("FFMA",), expected=FADD_EXPECTED),
    Probe("tp_fmnmx", "fmnmx_warp_instr_per_clk_per_sm", (("FMNMX", N),), WARP_RATE,
          "FMNMX, x = max(-x, b)"),
    Probe("tp_atoms_distinct", "smem_atomic_warp_instr_per_clk_per_sm", (("ATOMS.ADD", A),), WARP_RATE,
          "shared atomicAdd (u32), every lane its own word", absent=("ATOMS.CAS",)),
    Probe("tp_atoms_same", "smem_atomic_same_address_warp_instr_per_clk_per_sm", (("ATOMS.ADD", A),),
          WARP_RATE, "shared atomicAdd (u32), the warp's 32 lanes on one word",
          absent=("ATOMS.CAS", "REDUX", "SHFL")),
    Probe("tp_red_distinct", "global_atomic_warp_instr_per_clk_per_sm", (("REDG.E.ADD.F32", A),), WARP_RATE,
          "global atomicAdd (f32), every lane its own word (one line per warp instruction)",
          absent=("ATOMG",)),
    Probe("tp_red_same", "global_atomic_same_address_per_clk", (("REDG.E.ADD.F32", A),), "atomics/clk (GPU)",
          "global atomicAdd (f32) on one word from lane 0 of every warp", absent=("ATOMG",), gpu_wide=True),
)

LATENCY = (
    Probe("lat_ex2", "sfu_latency_cycles", (("MUFU.EX2", S),), "cycles", "MUFU.EX2 chain",
          absent=("FMUL", "FADD")),
    Probe("lat_rsq", "sfu_rsq_latency_cycles", (("MUFU.RSQ", S),), "cycles", "MUFU.RSQ chain",
          absent=("FMUL", "FSETP")),
    Probe("lat_shfl", "shuffle_latency_cycles", (("SHFL.BFLY", S),), "cycles", "SHFL.BFLY chain"),
    Probe("lat_fadd", "fadd_latency_cycles", (("FADD", S),), "cycles", "FADD chain", absent=("FFMA",)),
    Probe("lat_int", "int_latency_cycles", (("LOP3.LUT", S // 2), ("IADD3", S // 2)), "cycles",
          "IADD3/LOP3 alternating chain (cycles per op)", absent=("IMAD",)),
    Probe("lat_lop3", "lop3_latency_cycles", (("LOP3.LUT", S),), "cycles", "LOP3 chain"),
    Probe("lat_reduce_step", "reduce_step_latency_cycles", (("SHFL.BFLY", S), ("FADD", S)), "cycles",
          "x += shfl_xor(x, m): SHFL.BFLY then FADD"),
)

BARRIER = Probe("lat_bar", "barrier_latency_cycles", (("BAR.SYNC", BAR_STEPS),), "cycles",
                "__syncthreads() back to back")
BARRIER_CURVE_FIELD = "barrier_latency_cycles_by_warps"


# ----- compile and read the SASS (no GPU needed) --------------------------------------------------
def compile_cubin(workdir: Path, arch: str = "sm_90", src: Path = KERNEL_SRC) -> Path:
    """The cubin of :func:`probe_common.compile_cubin` (``nvcc -cubin -arch=<arch> -O3``) of ``src`` in
    ``workdir``; RuntimeError with nvcc's message when nvcc is missing or fails."""
    return pc.compile_cubin(workdir, arch, src)[0]


def check_body(probe: Probe, body: Counter) -> tuple[float, list[str]]:
    """(unroll factor of the body, problems): the key's count must be a whole multiple of its
    per-iteration count, every other listed op as many per iteration (plus loop control), nothing
    from ``absent``, and at most ``LOOP_OVERHEAD_MAX`` other instructions per body."""
    problems = []
    key_n = count_prefix(body, probe.key)
    unroll = key_n / probe.key_per_iter
    if key_n == 0 or unroll != int(unroll):
        problems.append(f"{probe.key}: {key_n} in the loop body, not a multiple of {probe.key_per_iter}")
        return unroll, problems
    listed = 0
    for op, per_iter in probe.counts:
        n = count_prefix(body, op)
        listed += n
        if not unroll * per_iter <= n <= unroll * per_iter + LOOP_OVERHEAD_MAX:
            problems.append(f"{op}: {n} in the loop body, expected {unroll * per_iter:g} "
                            f"({per_iter} per iteration x unroll {unroll:g})")
    for op in probe.absent:
        if count_prefix(body, op):
            problems.append(f"{op}: {count_prefix(body, op)} in the loop body (the compiler changed the work)")
    others = sum(body.values()) - listed
    if others > LOOP_OVERHEAD_MAX:
        problems.append(f"{others} other instructions in the loop body (loop control allows {LOOP_OVERHEAD_MAX})")
    return unroll, problems


def sass_report(sass: str, probes: Sequence[Probe] = (*THROUGHPUT, *LATENCY, BARRIER)) -> dict:
    """Per probe kernel: its hot loop body (mnemonic counts), unroll factor, per-iteration counts
    of the rate's instructions, and the problems :func:`check_body` found (empty: as intended)."""
    out = {}
    for p in probes:
        try:
            body = hot_loop(sass, p.kernel, p.key)
        except ValueError as exc:
            out[p.kernel] = {"body": None, "unroll": None, "problems": [str(exc)], "ok": False}
            continue
        unroll, problems = check_body(p, body)
        rate_ops = p.rate_ops or (p.key,)
        per_iter = sum(count_prefix(body, op) for op in rate_ops) / unroll if unroll else None
        out[p.kernel] = {"body": dict(sorted(body.items())), "unroll": unroll,
                         "rate_instr_per_iter": per_iter,
                         "all_instr_per_iter": sum(body.values()) / unroll if unroll else None,
                         "problems": problems, "ok": not problems}
    return out


# ----- GPU side ----------------------------------------------------------------------------------
class _Device:
    """CuPy, the compiled probe module (from the cubin whose SASS was read) and device facts."""

    def __init__(self):
        import cupy as cp  # noqa: PLC0415

        self.cp = cp
        self.sm_count, self.arch = pc.device_facts(cp)
        self.stream = cp.cuda.get_current_stream()
        self._tmp = tempfile.TemporaryDirectory()
        # no nvcc: NVRTC through CuPy, counts from the source
        built = pc.build_module(cp, KERNEL_SRC, self.arch, Path(self._tmp.name), want_sass=True)
        self.mod, self.sass, self.compiled_by = built.module, built.sass, built.compiled_by
        self.compile_note = ""
        if built.compiled_by == "nvrtc":
            self.compile_note = f"{built.error}: compiled by NVRTC, rates use the source's instruction counts"
        elif built.sass_error:
            self.compile_note = f"{built.sass_error}: rates use the source's instruction counts"
        self._timer = pc.GatedTimer(cp, self.mod.get_function("pb_spin"), GATE_SPIN_CYCLES, spin_threads=32)

    def fn(self, name: str):
        return self.mod.get_function(name)

    def timed(self, launch) -> float:
        """Seconds of one ``launch()``, between CUDA events, queued behind a spin (gated)."""
        return self._timer.seconds(launch)

    def blocks_per_sm(self, fn) -> int:
        """Blocks of THREADS threads that fit on an SM (CUDA occupancy API), at most MAX_BLOCKS_PER_SM."""
        ptr = getattr(getattr(fn, "kernel", None), "ptr", None)  # RawKernel.kernel: the driver function
        if ptr is None:
            return MAX_BLOCKS_PER_SM
        fit = self.cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(ptr, THREADS, 0)
        return max(1, min(MAX_BLOCKS_PER_SM, int(fit)))


def _attributes(fn) -> dict:
    return {k: v for k, v in pc.kernel_attributes(fn).items() if v is not None}


def _clock_hz(clk) -> float:
    """Median over blocks of clock64 cycles / %globaltimer seconds."""
    d = clk.get().reshape(-1, 2)
    hz = sorted(float(c) / (float(ns) * 1e-9) for c, ns in d if ns > 0)
    if not hz:
        raise RuntimeError("no block recorded a clock (globaltimer did not advance)")
    return pc.median(hz)


def _rate_instr_per_iter(probe: Probe, sass_info: dict | None) -> tuple[float, str]:
    if sass_info and sass_info.get("rate_instr_per_iter"):
        return float(sass_info["rate_instr_per_iter"]), "sass"
    ops = probe.rate_ops or (probe.key,)
    return float(sum(n for op, n in probe.counts if op in ops)), "source"


def run_throughput(dev: _Device, probe: Probe, sass_info: dict | None, runs: int, target_s: float) -> dict:
    """Warp instructions (of the rate's opcodes) per clock per SM (per clock of the GPU when
    ``probe.gpu_wide``) over ``runs`` timed launches, each about ``target_s`` long."""
    cp = dev.cp
    fn = dev.fn(probe.kernel)
    per_sm = dev.blocks_per_sm(fn)
    blocks = dev.sm_count * per_sm
    warps = blocks * THREADS // 32
    out_floats = max(blocks * THREADS, blocks * ATOMICS_PER_ITER * THREADS)
    out = cp.zeros(out_floats, dtype=cp.float32)
    clk = cp.zeros(2 * blocks, dtype=cp.int64)

    def args(iters: int) -> tuple:
        return (cp.float32(1e-3), cp.float32(0.75), cp.uint32(0x12345678), cp.uint32(0x9ABCDEF0),
                cp.int32(iters), out, clk)

    iters = 16  # sizing run: scale iters so that one launch lasts about target_s
    fn((blocks,), (THREADS,), args(iters))
    t = dev.timed(lambda: fn((blocks,), (THREADS,), args(iters)))
    iters = int(min(1 << 22, max(16, iters * target_s / max(t, 1e-7))))
    a = args(iters)

    def launch():
        fn((blocks,), (THREADS,), a)

    instr, counted_from = _rate_instr_per_iter(probe, sass_info)
    rates, clocks, secs = [], [], []
    for _ in range(runs):
        s = dev.timed(launch)
        hz = _clock_hz(clk)
        cycles = s * hz
        total = float(warps) * iters * instr  # warp instructions (tp_red_same: one atomic each, lane 0)
        rates.append(total / cycles / (1 if probe.gpu_wide else dev.sm_count))
        clocks.append(hz)
        secs.append(s)
    res = {"benchmark": f"{probe.kernel} ({probe.what})", "unit": probe.unit, **summarize(rates),
           "runs": rates, "kernel": probe.kernel, "blocks": blocks, "blocks_per_sm": per_sm,
           "warps_per_sm": per_sm * THREADS // 32, "threads": THREADS, "iters": iters,
           "rate_instr_per_iter": instr, "counted_from": counted_from,
           "issued_warp_instr_per_clk": (summarize(rates)["value"] * sass_info["all_instr_per_iter"] / instr
                                         if sass_info and sass_info.get("all_instr_per_iter") else None),
           "clock_hz": summarize(clocks)["value"], "kernel_s": summarize(secs)["value"],
           "attributes": _attributes(fn)}
    if probe.expected is not None:
        res["expected"] = probe.expected
        res["expected_source"] = GUIDE
    return res


def run_latency(dev: _Device, probe: Probe, runs: int, iters: int, steps: int, warps: int = 1) -> dict:
    """Cycles per dependent step (clock64 around ``iters`` x ``steps`` steps, one block of ``warps``
    warps), over ``runs`` launches."""
    cp = dev.cp
    fn = dev.fn(probe.kernel)
    out = cp.zeros(32 * warps, dtype=cp.float32)
    cyc = cp.zeros(1, dtype=cp.int64)
    a = (cp.float32(1e-3), cp.uint32(0x12345678), cp.int32(iters), out, cyc)
    fn((1,), (32 * warps,), a)  # warm-up launch (instruction caches)
    per_step = []
    for _ in range(runs):
        fn((1,), (32 * warps,), a)
        dev.stream.synchronize()
        per_step.append(float(cyc.get()[0]) / (iters * steps))
    return {"benchmark": f"{probe.kernel} ({probe.what})", "unit": "cycles", **summarize(per_step),
            "runs": per_step, "kernel": probe.kernel, "warps": warps, "iters": iters, "steps": iters * steps,
            "attributes": _attributes(fn)}


def run_probes(quick: bool = False) -> dict:
    """Every probe on the current GPU: ``meta``, ``compile`` (how the module was built, the SASS
    checks), ``throughput``, ``latency`` and ``barrier`` results (JSON-ready)."""
    t0 = time.perf_counter()
    dev = _Device()
    runs = QUICK_RUNS if quick else RUNS
    target = QUICK_TARGET_KERNEL_S if quick else TARGET_KERNEL_S
    lat_iters = LAT_ITERS // 4 if quick else LAT_ITERS
    bar_iters = BAR_ITERS // 4 if quick else BAR_ITERS
    checks = sass_report(dev.sass) if dev.sass else {}
    res: dict = {"throughput": {}, "latency": {}, "barrier": {}}
    for p in THROUGHPUT:
        r = run_throughput(dev, p, checks.get(p.kernel), runs, target)
        res["throughput"][p.kernel] = _with_check(r, checks.get(p.kernel))
    for p in LATENCY:
        r = run_latency(dev, p, runs, lat_iters, LAT_STEPS)
        res["latency"][p.kernel] = _with_check(r, checks.get(p.kernel))
    for w in BARRIER_WARPS:
        r = run_latency(dev, BARRIER, runs, bar_iters, BAR_STEPS, warps=w)
        res["barrier"][str(w)] = _with_check(r, checks.get(BARRIER.kernel))
    res["meta"] = pc.collect_metadata()
    res["meta"].update({"probe_wall_s": time.perf_counter() - t0, "runs_per_probe": runs, "quick": quick,
                        "sm_count": dev.sm_count})
    res["compile"] = {"arch": dev.arch, "compiled_by": dev.compiled_by, "sass_read": dev.sass is not None,
                      "note": dev.compile_note, "source": str(KERNEL_SRC.relative_to(REPO_ROOT)),
                      "sass_checks": checks}
    return res


def _with_check(r: dict, check: dict | None) -> dict:
    if check is None:
        return {**r, "sass_ok": None, "sass_problems": [], "sass_loop_body": None}
    return {**r, "sass_ok": check["ok"], "sass_problems": check["problems"], "sass_loop_body": check["body"],
            "sass_unroll": check["unroll"]}


def gpu_slug(device_name: str) -> str:
    """Results-directory name of a GPU (``"NVIDIA H200"`` -> ``"h200"``): the harness's rule."""
    from validation.harness.metadata import gpu_slug as slug  # noqa: PLC0415

    return slug(device_name)


# ----- results -> hardware-spec fields (pure) --------------------------------------------------------
_ENTRY_KEYS = ("value", "unit", "benchmark", "n", "p10", "p90", "min", "max")


def _entry(r: dict) -> dict:
    return {k: r[k] for k in _ENTRY_KEYS if k in r}


def fields(results: dict) -> dict:
    """Hardware-spec field name -> ``{value, unit, benchmark, n, p10, p90, min, max}`` from the
    results of :func:`run_probes` (or a recorded ``pipes.json``). Pure: no GPU, no I/O.

    A probe whose SASS check failed (``sass_ok`` false) gives no field; one measured without SASS
    (``sass_ok`` None) does, its benchmark text saying so. ``barrier_latency_cycles`` is the
    8-warp value; ``barrier_latency_cycles_by_warps`` is ``[[warps, cycles], ...]``.
    """
    out: dict = {}
    field_of = {p.kernel: p.field for p in (*THROUGHPUT, *LATENCY)}
    for group in ("throughput", "latency"):
        for kernel, r in results.get(group, {}).items():
            name = field_of.get(kernel)
            if name is None or r.get("sass_ok") is False:
                continue
            e = _entry(r)
            if r.get("sass_ok") is None:
                e["benchmark"] = f"{e['benchmark']}, instruction counts from the source (no SASS)"
            out[name] = e
    bars = {int(w): r for w, r in results.get("barrier", {}).items() if r.get("sass_ok") is not False}
    if bars:
        if BARRIER_FIELD_WARPS in bars:
            e = _entry(bars[BARRIER_FIELD_WARPS])
            e["benchmark"] = f"{e['benchmark']}, {BARRIER_FIELD_WARPS} warps per block"
            out[BARRIER.field] = e
        ws = sorted(bars)
        out[BARRIER_CURVE_FIELD] = {
            "value": [[w, bars[w]["value"]] for w in ws], "unit": "cycles",
            "benchmark": f"{BARRIER.kernel} ({BARRIER.what}), one block of 1..32 warps",
            "n": min(bars[w]["n"] for w in ws), "p10": min(bars[w]["p10"] for w in ws),
            "p90": max(bars[w]["p90"] for w in ws)}
    return out


def format_table(results: dict) -> str:
    """The results as a text table: probe, value, unit, p10..p90, expected, SASS check."""
    lines = [f"{'probe':22s} {'value':>10s} {'unit':20s} {'p10..p90':>21s} {'expected':>8s}  sass"]

    def row(name: str, r: dict) -> str:
        exp = f"{r['expected']:.3g}" if r.get("expected") is not None else "-"
        ok = {True: "ok", False: "FAILED: " + "; ".join(r.get("sass_problems", [])), None: "not read"}[r.get("sass_ok")]
        spread = f"{r['p10']:.4g}..{r['p90']:.4g}"
        return f"{name:22s} {r['value']:10.4g} {r['unit']:20s} {spread:>21s} {exp:>8s}  {ok}"

    for group in ("throughput", "latency"):
        for k, r in results.get(group, {}).items():
            lines.append(row(k, r))
    for w, r in results.get("barrier", {}).items():
        lines.append(row(f"lat_bar {w} warps", r))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = pc.probe_parser("pipes_probe", __doc__.splitlines()[0], RESULT_FILE, f"{QUICK_RUNS} runs per probe, shorter kernels")
    args = ap.parse_args(argv)
    why = _gpu_missing()
    if why:
        return pc.no_gpu_exit("pipes_probe", why)
    results = run_probes(quick=args.quick)
    results["fields"] = fields(results)
    path = pc.results_dir(args.out, results["meta"]) / RESULT_FILE
    pc.write_json(path, results)
    print(format_table(results))
    bad = [k for g in ("throughput", "latency") for k, r in results[g].items() if r.get("sass_ok") is False]
    if bad:
        print(f"SASS check failed (no field written) for: {', '.join(bad)}")
    if results["compile"]["note"]:
        print(f"note: {results['compile']['note']}")
    print(f"wrote {path} in {results['meta']['probe_wall_s']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
