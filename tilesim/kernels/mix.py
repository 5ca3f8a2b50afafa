"""Warp instructions of a kernel's step by execution-pipe class, as a family reads them off its SASS.

A helper for families' lowerings (softmax and LayerNorm use it): ``alu`` runs on the "int" pipe
(IADD3, LOP3, ISETP, FMNMX, FSETP, ...), ``fma`` on the FP32/FMA pipe (FADD, FMUL, FFMA, IMAD,
VIADD), ``sfu`` on the special-function unit (MUFU), ``other`` takes an issue slot and no modelled
pipe (uniform datapath, branches, constant loads: :data:`ISSUE_ONLY_PIPE`).
"""

from __future__ import annotations

from dataclasses import dataclass

ISSUE_ONLY_PIPE = "issue"


@dataclass(frozen=True)
class Mix:
    """Warp instructions per pipe class: ``alu`` ("int"), ``fma``, ``sfu`` and ``other`` (issue only)."""

    alu: float = 0.0
    fma: float = 0.0
    sfu: float = 0.0
    other: float = 0.0

    def __add__(self, o: Mix) -> Mix:
        return Mix(self.alu + o.alu, self.fma + o.fma, self.sfu + o.sfu, self.other + o.other)

    def __mul__(self, k: float) -> Mix:
        return Mix(self.alu * k, self.fma * k, self.sfu * k, self.other * k)

    __rmul__ = __mul__
