"""Helpers shared by the calibration probes (tensor, mma_feed, cluster, clock_load and pipes probes).

Pure parts (no GPU, no CuPy): the statistics every row carries (:func:`percentile`, :func:`summarize`,
:func:`median`), the per-block clock64 / %globaltimer records the probe kernels write
(:func:`record_columns`, :func:`check_timed_blocks`, :func:`block_clocks_hz`), the nvcc compile to a cubin
and its ptxas log (:func:`compile_cubin`, :func:`ptxas_warnings`), the SASS reading
(:func:`disassemble`, :func:`function_instructions`, :func:`loop_bodies`, :func:`count_prefix`,
:func:`hot_loop`), the nvidia-smi pieces (:func:`parse_smi_timestamp`, :func:`clock_reason_names`,
:func:`smi_query_args`, :func:`stop_process`), the ``--only`` group list (:func:`parse_groups`,
:func:`run_stamp`, :func:`previous_group_runs`), the command line (:func:`probe_parser`) and the results
file (:func:`results_dir`, :func:`write_json`).

GPU parts (CuPy imported by the caller and passed in): :func:`gpu_missing`, :func:`device_facts`,
:func:`build_module` (nvcc cubin, else NVRTC), :func:`get_kernel`, :func:`kernel_attributes`,
:class:`GatedTimer` (a launch between CUDA events, queued behind a spin) and :func:`size_iters`.

Each probe keeps its own record layout, row format and JSON; only the code that was the same in every
probe lives here.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS_ROOT = REPO_ROOT / "validation" / "results"

#: dynamic shared memory a kernel gets without opting in (CUDA C++ guide, "Shared Memory", cc 9.0)
DEFAULT_DYNAMIC_SMEM_BYTES = 48 * 1024
#: nvidia-smi's ``timestamp`` field (``--format=csv``), local time
SMI_TIMESTAMP_FORMAT = "%Y/%m/%d %H:%M:%S.%f"
#: clock event / throttle reason bits (nvml.h, nvmlClocksEventReason* / nvmlClocksThrottleReason*)
CLOCK_REASON_BITS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
                     0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
                     0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting"}
#: the meta keys that say which run a group of a merged results file comes from
RUN_STAMP_KEYS = ("date_utc", "git_revision", "quick")


# ----- statistics ---------------------------------------------------------------------------------------
def percentile(sorted_vals: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of already sorted values, linear between neighbours."""
    pos = (len(sorted_vals) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] * (1.0 - (pos - lo)) + sorted_vals[hi] * (pos - lo)


def summarize(values: Sequence[float]) -> dict:
    """Median (``value``), p10, p90, min, max and count ``n`` of per-rep values (ValueError if empty)."""
    vals = sorted(float(v) for v in values)
    if not vals:
        raise ValueError("summarize: values must not be empty")
    return {"value": percentile(vals, 50), "p10": percentile(vals, 10), "p90": percentile(vals, 90),
            "min": vals[0], "max": vals[-1], "n": len(vals)}


def median(values: Sequence[float]) -> float:
    """The median of unsorted values (as :func:`summarize`'s ``value``)."""
    return percentile(sorted(float(v) for v in values), 50)


# ----- per-block records --------------------------------------------------------------------------------
def record_columns(raw: Sequence[int], blocks: int, rec_longs: int) -> list[list[int]]:
    """The ``rec_longs`` columns (field i of every block) of per-block records of ``rec_longs`` longs each.
    ValueError when ``blocks`` < 1 or the count of values is not ``rec_longs`` x ``blocks``."""
    vals = [int(v) for v in raw]
    if blocks < 1 or len(vals) != rec_longs * blocks:
        raise ValueError(f"records: {len(vals)} values for blocks = {blocks}; expected {rec_longs} per block")
    return [vals[i::rec_longs] for i in range(rec_longs)]


def block_records(raw: Sequence[int], blocks: int, rec_longs: int) -> dict:
    """Per-block records whose first four longs are (cycles, ns, smid, start ns): ``cycles``, ``ns``, ``smids``,
    ``distinct_sms``, ``max_coresident`` (most blocks whose [start, start + ns] spans overlap on one SM) and
    ``clock_hz`` (median of cycles / s). ValueError when the count is not ``rec_longs`` x blocks or a block
    recorded no time."""
    cycles, ns, smids, starts = record_columns(raw, blocks, rec_longs)
    check_timed_blocks(cycles, ns)
    per_sm: dict[int, list[tuple[int, int]]] = {}
    for s, t0, d in zip(smids, starts, ns, strict=True):
        per_sm.setdefault(s, []).append((t0, t0 + d))
    most = 0
    for spans in per_sm.values():
        cur = 0
        for _, e in sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans]):
            cur += e
            most = max(most, cur)
    return {"cycles": cycles, "ns": ns, "smids": smids, "distinct_sms": len(per_sm), "max_coresident": most,
            "clock_hz": median(block_clocks_hz(cycles, ns))}


def check_timed_blocks(cycles: Sequence[int], ns: Sequence[int]) -> None:
    """ValueError naming the blocks (up to 8) that recorded no clock64 cycles or no %globaltimer time."""
    bad = [b for b, (c, t) in enumerate(zip(cycles, ns, strict=True)) if c <= 0 or t <= 0]
    if bad:
        raise ValueError(f"records: blocks {bad[:8]} recorded cycles <= 0 or ns <= 0 (kernel did not run?)")


def block_clocks_hz(cycles: Sequence[int], ns: Sequence[int]) -> list[float]:
    """Each block's SM clock: its clock64 cycles over its %globaltimer seconds (Hz)."""
    return [c / (t * 1e-9) for c, t in zip(cycles, ns, strict=True)]


# ----- compile and read the SASS (no GPU needed) ----------------------------------------------------------
def compile_cubin(workdir: Path, arch: str, src: Path) -> tuple[Path, str]:
    """``nvcc -cubin -arch=<arch> -O3 -Xptxas -v`` of ``src`` into ``workdir``: (cubin, ptxas log);
    RuntimeError with nvcc's message when nvcc is missing or fails."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise RuntimeError("nvcc is not on PATH")
    cubin = Path(workdir) / f"{src.stem}.{arch}.cubin"
    p = subprocess.run([nvcc, "-cubin", f"-arch={arch}", "-O3", "-Xptxas", "-v", "-o", str(cubin), str(src)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"nvcc failed on {src.name}: {p.stderr.strip()[-4000:]}")
    return cubin, p.stderr


def ptxas_warnings(log: str) -> list[str]:
    """ptxas lines that warn (spills, wgmma serialization): an empty list means a clean compile."""
    return [ln.strip() for ln in log.splitlines()
            if "warning" in ln.lower() or "serialized" in ln.lower() or re.search(r"[1-9]\d* bytes spill", ln)]


def disassemble(cubin: Path) -> str:
    """``cuobjdump -sass`` of a cubin; RuntimeError when cuobjdump is missing or fails."""
    exe = shutil.which("cuobjdump")
    if exe is None:
        raise RuntimeError("cuobjdump is not on PATH")
    p = subprocess.run([exe, "-sass", str(cubin)], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"cuobjdump failed: {p.stderr.strip()[-2000:]}")
    return p.stdout


_FUNC = re.compile(r"^\s*Function : (\S+)")
_INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\s*([^;]*);")


def function_instructions(sass: str, kernel: str) -> list[tuple[int, str, str]]:
    """(address, full mnemonic with modifiers, operands) of every instruction of ``kernel``."""
    out, cur = [], None
    for line in sass.splitlines():
        m = _FUNC.match(line)
        if m:
            cur = m.group(1)
            continue
        if cur == kernel:
            m = _INSTR.search(line)
            if m:
                out.append((int(m.group(1), 16), m.group(2), m.group(3).strip()))
    if not out:
        raise ValueError(f"kernel = {kernel!r}: not in the SASS listing")
    return out


def loop_bodies(instrs: Sequence[tuple[int, str, str]]) -> list[list[str]]:
    """The mnemonics, in address order, of every loop body of a function: from a backward BRA's target to
    the BRA itself (one list per backward branch)."""
    out = []
    for addr, op, operands in instrs:
        m = re.match(r"(0x[0-9a-f]+)", operands)
        if op == "BRA" and m and int(m.group(1), 16) < addr:
            lo = int(m.group(1), 16)
            out.append([o for a, o, _ in instrs if lo <= a <= addr])
    return out


def count_prefix(body: Counter, prefix: str) -> int:
    """Instructions of ``body`` whose mnemonic is ``prefix`` or starts with ``prefix.``."""
    return sum(n for op, n in body.items() if op == prefix or op.startswith(prefix + "."))


_ADDRESS = re.compile(r"/\*([0-9a-f]{4,})\*/")


def never_executed(sass: str, kernel: str) -> set[int]:
    """Addresses of ``kernel``'s instructions predicated on ``!PT`` (ptxas's padding: they never run)."""
    out, cur = set(), None
    for line in sass.splitlines():
        m = _FUNC.match(line)
        if m:
            cur = m.group(1)
        elif cur == kernel and "@!PT " in line and (a := _ADDRESS.search(line)):
            out.add(int(a.group(1), 16))
    return out


def loop_body(sass: str, kernel: str, op: str) -> Counter:
    """The opcode histogram of ``kernel``'s hot loop: the backward branch's body with the most ``op``
    instructions (the shortest on a tie), ``@!PT`` padding left out. ValueError when no loop holds one."""
    instrs = function_instructions(sass, kernel)
    dead = never_executed(sass, kernel)
    best = None
    for addr, name, operands in instrs:
        m = re.match(r"(0x[0-9a-f]+)", operands)
        if name == "BRA" and m and int(m.group(1), 16) < addr:
            lo = int(m.group(1), 16)
            body = Counter(o for a, o, _ in instrs if lo <= a <= addr and a not in dead)
            rank = (count_prefix(body, op), -sum(body.values()))
            if rank[0] and (best is None or rank > best[0]):
                best = (rank, body)
    if best is None:
        raise ValueError(f"{kernel}: no loop with {op} in the SASS")
    return best[1]


def hot_loop(sass: str, kernel: str, key: str) -> Counter:
    """Mnemonic counts of the loop body (backward branch to its target) of ``kernel`` with the most
    ``key`` instructions (the smallest such body when several tie); ValueError when none has any."""
    bodies = [Counter(ops) for ops in loop_bodies(function_instructions(sass, kernel))]
    bodies = [b for b in bodies if count_prefix(b, key)]
    if not bodies:
        raise ValueError(f"{kernel}: no loop body with {key} in the SASS")
    return max(bodies, key=lambda b: (count_prefix(b, key), -sum(b.values())))


# ----- nvidia-smi -----------------------------------------------------------------------------------------
def write_probe_result(out: str | None, result_file: str, res: dict, table: str, *, indent: int | None = 2) -> int:
    """Write a probe's result JSON (where :func:`results_dir` says), print its table and where it went;
    the exit status: 1 when the probe recorded errors, else 0."""
    path = results_dir(out, res["meta"]) / result_file
    write_json(path, res, indent=indent)
    print(table)
    print(f"wrote {path} in {res['meta']['probe_wall_s']:.1f} s")
    return 1 if res["errors"] else 0


def loop_sass_checks(workdir: Path, arch: str, src: Path, kernels: dict[str, tuple[str, str]]) -> dict:
    """Compile ``src`` for ``arch`` and, per entry ``name: (kernel, op)``, the mnemonic counts of the
    kernel's hot loop around ``op`` (``{"op", "count", "body"}``, or ``{"op", "problem"}``); where
    nvcc or the disassembler fails, ``{"error": ...}``."""
    try:
        cubin, _ = compile_cubin(workdir, arch, src)
        sass = disassemble(cubin)
    except RuntimeError as e:
        return {"error": str(e)}
    out = {}
    for name, (kernel, op) in kernels.items():
        try:
            loop = hot_loop(sass, kernel, op)
            out[name] = {"op": op, "count": count_prefix(loop, op), "body": dict(loop)}
        except ValueError as e:
            out[name] = {"op": op, "problem": str(e)}
    return out


def parse_smi_timestamp(text: str) -> float:
    """nvidia-smi's ``timestamp`` field -> epoch seconds (local time); ValueError when it does not parse."""
    return datetime.datetime.strptime(text, SMI_TIMESTAMP_FORMAT).timestamp()


def clock_reason_names(mask: int | None) -> list[str]:
    """The names of the clock event / throttle reason bits set in ``mask`` (bit order; [] for None)."""
    if mask is None:
        return []
    return [name for bit, name in CLOCK_REASON_BITS.items() if mask & bit]


def smi_query_args(fields: Sequence[str]) -> list[str]:
    """nvidia-smi arguments that print ``fields`` as bare CSV (no header, no units)."""
    return [f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]


def stop_process(proc: subprocess.Popen, timeout_s: float) -> None:
    """Terminate ``proc``; kill it when it has not exited within ``timeout_s``; reap it."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# ----- groups, merged results, the results file -----------------------------------------------------------
def parse_groups(text: str | None, groups: Sequence[str]) -> tuple[str, ...] | None:
    """``--only`` text (comma-separated) -> group names (None: every group); ValueError naming an unknown
    group."""
    if not text:
        return None
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    bad = [x for x in names if x not in groups]
    if bad or not names:
        raise ValueError(f"--only = {text!r}: unknown group(s) {bad}; groups are {', '.join(groups)}")
    return names


def run_stamp(meta: dict) -> dict:
    """The date, revision and quick flag of a run (``group_runs`` entries of a merged results file)."""
    return {k: meta.get(k) for k in RUN_STAMP_KEYS}


def previous_group_runs(old: dict, groups: Sequence[str], present: Callable[[str], bool]) -> dict:
    """``group_runs`` of a recorded results file; for a file written before it had one, the stamp of
    its meta for every group ``present`` says it holds."""
    return dict(old.get("group_runs") or {g: run_stamp(old.get("meta", {})) for g in groups if present(g)})


def results_dir(out: str | None, meta: dict) -> Path:
    """``out``, else validation/results/<gpu>/calibration (gpu from the meta's device name); created."""
    from validation.harness.metadata import gpu_slug  # noqa: PLC0415

    path = Path(out) if out else RESULTS_ROOT / gpu_slug(meta.get("device_name") or "unknown") / "calibration"
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_json(path: Path, data: dict, indent: int | None = 2) -> None:
    """``data`` as JSON (values JSON does not know as their str) and a newline; ``indent`` None: one line."""
    path.write_text(json.dumps(data, indent=indent, default=str) + "\n")


def collect_metadata() -> dict:
    """The machine's metadata (validation/harness/metadata.py), imported only when a probe runs."""
    from validation.harness.metadata import collect_metadata as collect  # noqa: PLC0415

    return collect()


def probe_parser(module: str, description: str, result_file: str, quick_help: str) -> argparse.ArgumentParser:
    """The command line every probe has: ``python -m validation.calibration.<module>`` with ``--out DIR``
    (where ``result_file`` goes) and ``--quick`` (``quick_help`` says what it shortens)."""
    ap = argparse.ArgumentParser(prog=f"python -m validation.calibration.{module}", description=description)
    ap.add_argument("--out", default=None,
                    help=f"directory for {result_file} (default: validation/results/<gpu>/calibration)")
    ap.add_argument("--quick", action="store_true", help=quick_help)
    return ap


# ----- GPU side (CuPy passed in) --------------------------------------------------------------------------
def gpu_missing() -> str | None:
    """None when CuPy and a CUDA device are usable, else a one-line reason."""
    try:
        import cupy as cp  # noqa: PLC0415
    except Exception as exc:  # noqa: BLE001
        return f"cupy is not importable ({type(exc).__name__}: {exc})"
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device found"
    except Exception as exc:  # noqa: BLE001
        return f"no usable CUDA device ({type(exc).__name__}: {exc})"
    return None


def no_gpu_exit(prog: str, why: str) -> int:
    """Say on stderr that ``prog`` needs a GPU (``why``); the exit status 2 the probes' CLIs return."""
    print(f"{prog}: needs CuPy and an NVIDIA GPU: {why}", file=sys.stderr)
    return 2


def device_facts(cp) -> tuple[int, str]:
    """(SM count, ``sm_<major><minor>``) of the current CUDA device."""
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    return int(props["multiProcessorCount"]), f"sm_{props['major']}{props['minor']}"


@dataclass
class BuiltModule:
    """A loaded module and how it was built: ``compiled_by`` "nvcc" (``log``: ptxas -v; ``sass`` when
    asked for and cuobjdump worked, else ``sass_error``) or "nvrtc" (``error``: why nvcc was not used)."""

    module: object
    compiled_by: str
    log: str = ""
    error: str = ""
    sass: str | None = None
    sass_error: str = ""


def build_module(cp, src: Path, arch: str, workdir: Path, nvrtc_options: tuple[str, ...] = (),
                 want_sass: bool = False) -> BuiltModule:
    """``src`` compiled by nvcc to an ``arch`` cubin and loaded by ``cupy.RawModule`` (its SASS read when
    ``want_sass``); when nvcc is missing or fails, compiled by NVRTC through CuPy with ``nvrtc_options``."""
    try:
        cubin, log = compile_cubin(workdir, arch, src)
        built = BuiltModule(cp.RawModule(path=str(cubin)), "nvcc", log=log)
    except RuntimeError as exc:
        return BuiltModule(cp.RawModule(code=src.read_text(), options=nvrtc_options), "nvrtc", error=str(exc))
    if want_sass:
        try:
            built.sass = disassemble(cubin)
        except RuntimeError as exc:
            built.sass_error = str(exc)
    return built


def ptxas_registers(log: str) -> dict:
    """{kernel: {"registers", "spill_bytes"}} from an ``nvcc -Xptxas -v`` log."""
    return {m.group(1): {"registers": int(m.group(4)), "spill_bytes": int(m.group(2)) + int(m.group(3))}
            for m in re.finditer(r"Compiling entry function '(\w+)'.*?(\d+) bytes spill stores, (\d+) bytes spill "
                                 r"loads.*?Used (\d+) registers", log, re.S)}


def compile_record(built: BuiltModule, src: Path, arch: str) -> dict:
    """What a probe's record says of how its .cu was built: arch, source (repository-relative), compiler, a
    note when the SASS could not be read (or NVRTC stood in for nvcc), and with nvcc ptxas's warnings and
    per-kernel registers and spills."""
    out = {"arch": arch, "source": str(src.relative_to(REPO_ROOT)), "compiled_by": built.compiled_by, "note": ""}
    if built.compiled_by == "nvcc":
        out.update(ptxas_warnings=ptxas_warnings(built.log), ptxas=ptxas_registers(built.log))
        if built.sass_error:
            out["note"] = f"{built.sass_error}: no SASS checks"
    else:
        out["note"] = f"{built.error}: compiled by NVRTC, no SASS checks"
    return out


def get_kernel(module, name: str, smem_bytes: int):
    """Kernel ``name`` of ``module``, opted in to ``smem_bytes`` of dynamic shared memory when that is
    more than :data:`DEFAULT_DYNAMIC_SMEM_BYTES`."""
    f = module.get_function(name)
    if smem_bytes > DEFAULT_DYNAMIC_SMEM_BYTES:
        f.max_dynamic_shared_size_bytes = smem_bytes
    return f


def kernel_attributes(f) -> dict:
    """``num_regs`` and ``local_size_bytes`` of a loaded kernel (None where CuPy does not say)."""
    attrs = getattr(f, "attributes", None) or {}
    return {"num_regs": attrs.get("num_regs"), "local_size_bytes": attrs.get("local_size_bytes")}


class GatedTimer:
    """Seconds of one launch between two CUDA events, the launch queued behind a clock64 spin kernel
    (``spin(grid, block, (int64 cycles,))``) so that the host's enqueueing stays out of the time."""

    def __init__(self, cp, spin, spin_cycles: int, spin_threads: int = 1):
        self.cp, self.spin, self.spin_cycles, self.spin_threads = cp, spin, spin_cycles, spin_threads
        self.stream = cp.cuda.get_current_stream()
        self._start, self._end = cp.cuda.Event(), cp.cuda.Event()

    def seconds(self, launch: Callable[[], object], before: Callable[[], object] | None = None) -> float:
        """Run ``launch()`` behind the spin; its seconds between the events (synchronizes). ``before()``
        (e.g. an L2 flush) is enqueued after the spin, outside the events, right ahead of the launch."""
        self.spin((1,), (self.spin_threads,), (self.cp.int64(self.spin_cycles),))
        if before is not None:
            before()
        self._start.record(self.stream)
        launch()
        self._end.record(self.stream)
        self._end.synchronize()
        return self.cp.cuda.get_elapsed_time(self._start, self._end) * 1e-3


def size_iters(time_launch: Callable[[int], float], iters: int, target_s: float, max_iters: int,
               steps: int) -> int:
    """Iterations for a launch of about ``target_s``: up to ``steps`` timed launches (``time_launch(iters)``
    -> seconds), each rescaling ``iters`` towards ``target_s`` (at most ``max_iters``) until one lasts at
    least half of it."""
    for _ in range(steps):
        t = time_launch(iters)
        if t >= 0.5 * target_s or iters >= max_iters:
            break
        iters = int(min(max_iters, max(iters + 1, iters * target_s / max(t, 1e-7))))
    return iters
