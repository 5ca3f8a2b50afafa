"""Roofline lower bounds: the time no kernel can beat given its work and its traffic per level.

Each resource has a peak rate on a :class:`~tilesim.hardware.HardwareSpec`:

* ``fp32``: ``hw.fp32_flops_per_s`` (2 FLOP per FMA lane per clock);
* ``hbm``: ``hw.hbm_bytes_per_s``;
* ``l2``: ``hw.l2_bytes_per_s``;
* ``smem``: ``hw.smem_bytes_per_clk_per_sm * hw.sm_count * hw.sm_clock_hz``.

The bound is the largest of ``work / rate`` over the resources given; the resource that sets it
is the limiter (ties go to the first in the order above).
"""

from __future__ import annotations

from dataclasses import dataclass

RESOURCES = ("fp32", "tensor", "hbm", "l2", "smem")


@dataclass(frozen=True)
class Bound:
    """A roofline lower bound. ``times`` holds ``(resource, seconds)`` for each resource used."""

    time_s: float
    limiter: str
    times: tuple[tuple[str, float], ...]

    def time_of(self, resource: str) -> float:
        """Seconds the named resource alone needs (``ValueError`` if it was not given)."""
        for r, t in self.times:
            if r == resource:
                return t
        raise ValueError(f"resource {resource!r} not in this bound; have {[r for r, _ in self.times]}")


def smem_bytes_per_s(hw) -> float:
    """Chip-wide shared-memory bandwidth: bytes per clock per SM x SMs x clock."""
    return hw.smem_bytes_per_clk_per_sm * hw.sm_count * hw.sm_clock_hz


def roofline_time_s(flops: float, hbm_bytes: float, hw, *, l2_bytes: float | None = None,
                    smem_bytes: float | None = None, hbm_bytes_per_s: float | None = None,
                    tensor_flops: float | None = None, tensor_flops_per_s: float | None = None) -> Bound:
    """Roofline lower bound of a kernel doing ``flops`` FP32 FLOPs and moving the given bytes.

    ``l2_bytes`` and ``smem_bytes`` are optional; a resource left as ``None`` is not considered.
    ``hbm_bytes_per_s`` replaces the copy bandwidth (e.g. the rate of the kernel's read/write mix).
    ``tensor_flops`` are FLOPs done on tensor cores (not part of ``flops``), at ``tensor_flops_per_s``
    (default: the GPU's dense tensor peak, ``tensor_flops_per_s``).
    Raises ``ValueError`` naming the argument when a count is negative.
    """
    work = {"fp32": flops, "tensor": tensor_flops, "hbm": hbm_bytes, "l2": l2_bytes, "smem": smem_bytes}
    rates = {"fp32": hw.fp32_flops_per_s,
             "tensor": tensor_flops_per_s or (hw.tensor_flops_per_s if tensor_flops else 1.0), "hbm": hbm_bytes_per_s or hw.hbm_bytes_per_s, "l2": hw.l2_bytes_per_s,
             "smem": smem_bytes_per_s(hw)}
    names = {"fp32": "flops", "tensor": "tensor_flops", "hbm": "hbm_bytes", "l2": "l2_bytes", "smem": "smem_bytes"}
    times = []
    for r in RESOURCES:
        w = work[r]
        if w is None:
            continue
        if not w >= 0:
            raise ValueError(f"{names[r]} = {w!r}: must be >= 0")
        times.append((r, w / rates[r]))
    best = max(t for _, t in times)
    limiter = next(r for r, t in times if t == best)
    return Bound(time_s=best, limiter=limiter, times=tuple(times))
