"""The kernel contract's vocabulary: a ``__global__`` function a part requires and its parameters.

:mod:`grader.assignment.parts` spells each part's contract with these; the backends take them to compile a
submission and to find its kernels by name (see :meth:`grader.backends.base.Backend.compile`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Param:
    """One kernel parameter of a part's contract.

    Attributes:
        name: as in the handout (``in``, ``out``, ``n``).
        ctype: its C type as written in the contract (``const scan_t*``, ``int``).
        kind: ``"ptr"`` (a device pointer) or ``"int"`` (a 32-bit signed int).
    """

    name: str
    ctype: str
    kind: str


@dataclass(frozen=True)
class KernelSpec:
    """A ``__global__`` function a part's contract requires, with its parameters."""

    name: str
    params: tuple[Param, ...]

    def declaration(self) -> str:
        """The C prototype, e.g. ``__global__ void naive_scan(const scan_t* in, scan_t* out, int n)``."""
        args = ", ".join(f"{p.ctype} {p.name}" for p in self.params)
        return f"__global__ void {self.name}({args})"
