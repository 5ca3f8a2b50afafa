"""What a family's runner hands the harness to compile one configuration (no GPU needed)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KernelSource:
    """One translation unit and how to compile it.

    ``code`` is the whole CUDA source (templates plus what this configuration instantiates),
    ``options`` the NVRTC options as ``cupy.RawModule`` takes them (e.g. ``"-std=c++17"``; no
    ``-arch``: CuPy picks it, and the offline nvcc check adds ``-arch=sm_90``), ``name_expressions``
    the kernels to look up (template instances such as ``"reduce<256, 4>"`` or plain names).
    """

    code: str
    options: tuple[str, ...] = ()
    name_expressions: tuple[str, ...] = ()

    def __post_init__(self):
        if not isinstance(self.code, str) or not self.code.strip():
            raise ValueError("KernelSource.code = '': must be non-empty CUDA source")
        for field in ("options", "name_expressions"):
            value = getattr(self, field)
            if not isinstance(value, tuple) or not all(isinstance(v, str) and v for v in value):
                raise ValueError(f"KernelSource.{field} = {value!r}: must be a tuple of non-empty strings")
        if not self.name_expressions:
            raise ValueError("KernelSource.name_expressions = (): name at least one kernel")
