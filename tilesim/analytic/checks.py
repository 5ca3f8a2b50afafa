"""Checks that a kernel can run at all, before anything is simulated: one ``ValueError`` line each.

Generic over families: they read only the :class:`~tilesim.program.TileProgram` (its launch, its
declared work and its operation counts) and a :class:`~tilesim.hardware.HardwareSpec`.

* :func:`check_launch`: the grid against the launch limits (CUDA: x < 2^31, y and z <= 65,535;
  a spec may override them with ``max_grid_x``/``max_grid_y``/``max_grid_z``), and the compulsory
  bytes (``min_hbm_bytes``: every input read once, every output written once) against the device
  memory (``hbm_bytes``).
* :func:`check_flops`: the declared useful work (``TileProgram.flops``) against what the program's
  compute operations can do: each FP32 FMA warp instruction is at most 32 lanes x 2 FLOP = 64, each
  other FP32/FP64 arithmetic warp instruction (FADD, FMUL, SFU) at most 32 FLOP, each MMA its
  2*m*n*k. A program that declares more than that would predict a rate above the FP32 roofline of
  what it executes. Declaring less is allowed: the FMA pipe also runs integer and bookkeeping work
  (the built-in reductions declare 0.7-47% of 64 x their FMA-pipe instructions, softmax 3-59%,
  layernorm 8-66%, GEMM exactly 100%). A program that declares 0 FLOPs is not checked.
* :func:`check_not_faster_than_roofline`: a result against the roofline of what was executed.
"""

from __future__ import annotations

GRID_LIMITS = (2**31 - 1, 65_535, 65_535)
"""CUDA's grid-dimension limits (x, y, z): CUDA C++ Programming Guide, Table 'Technical
Specifications per Compute Capability' (maximum x-dimension of a grid 2^31-1, y and z 65535), the
same for every compute capability from 3.0 to 9.0."""

FLOPS_PER_FMA_INSTR = 64  # 32 lanes x 2 FLOP (multiply and add)
FLOPS_PER_ARITH_INSTR = 32  # 32 lanes x 1 FLOP (FADD, FMUL, MUFU)
FLOPS_TOLERANCE = 1e-6
"""Relative slack on the upper bound (float sums of counts)."""


def _fmt(x: float) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:,.3g} {unit}"
    return f"{x:,.3g}"


def _bytes(x: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:,.3g} {unit}"
    return f"{x:,.0f} B"


def check_launch(program, hw) -> None:
    """Raise ``ValueError`` when ``program``'s grid breaks a launch limit of ``hw`` or its
    compulsory bytes do not fit in the device memory."""
    limits = tuple(int(hw.get(k)) if hw.has(k) else d
                   for k, d in zip(("max_grid_x", "max_grid_y", "max_grid_z"), GRID_LIMITS, strict=True))
    for axis, g, lim in zip("xyz", program.launch.grid, limits, strict=True):
        if g > lim:
            raise ValueError(f"{program.name}: grid.{axis} = {g:,} exceeds the launch limit {lim:,} on {hw.name} "
                             f"(a smaller problem or a larger tile along that axis)")
    need = float(program.min_hbm_bytes)
    have = float(hw.hbm_bytes) if hw.has("hbm_bytes") else 0.0
    if have > 0 and need > have:
        raise ValueError(f"{program.name}: its operands need {_bytes(need)} of device memory, more than the "
                         f"{_bytes(have)} of {hw.name}")


def executed_flops(program) -> tuple[float, float]:
    """``(fma_flops, upper)`` over the whole kernel: 64 x its FP32 FMA warp instructions (plus MMA
    FLOPs), and the most FLOPs its compute operations can do (adds 32 per other FP32/FP64
    arithmetic instruction)."""
    fma = upper = 0.0
    blocks = program.launch.blocks
    for ph in program.phases:
        n = ph.trips * blocks
        for op in ph.step.compute:
            if hasattr(op, "flops"):  # Mma
                fma += n * op.flops
                upper += n * op.flops
            elif getattr(op, "pipe", None) is not None:
                if op.dtype not in ("fp32", "fp64", "fp16", "bf16", "tf32"):
                    continue
                if op.pipe == "fma":
                    fma += n * op.count * FLOPS_PER_FMA_INSTR
                    upper += n * op.count * FLOPS_PER_FMA_INSTR
                elif op.pipe in ("sfu", "fp64"):
                    upper += n * op.count * FLOPS_PER_ARITH_INSTR
    return fma, upper


def check_flops(program) -> None:
    """Raise ``ValueError`` when ``program.flops`` (nonzero) disagrees with its compute counts."""
    declared = float(program.flops)
    if declared <= 0:
        return
    _, upper = executed_flops(program)
    if declared > upper * (1 + FLOPS_TOLERANCE):
        raise ValueError(f"{program.name}: declares {_fmt(declared)} FLOP but its compute counts do at most "
                         f"{_fmt(upper)} (64 per FP32 FMA warp instruction, 32 per other arithmetic one, "
                         f"2mnk per MMA); fix TileProgram.flops or the counts (flops=0 declares none)")


def check_program(program, hw) -> None:
    """Every check of this module that needs no simulation (launch limits, device memory, FLOPs)."""
    check_launch(program, hw)
    check_flops(program)


def check_not_faster_than_roofline(result, *, rel_tol: float = 1e-9) -> None:
    """Raise ``ValueError`` when ``result.time_s`` beats its own roofline (``result.roofline_s``)."""
    if result.roofline_s > 0 and result.time_s < result.roofline_s * (1 - rel_tol):
        raise ValueError(f"{result.kernel}: predicted {result.time_s * 1e3:.4g} ms, faster than the roofline of "
                         f"what it executes ({result.roofline_s * 1e3:.4g} ms): an engine defect")
