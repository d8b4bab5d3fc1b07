"""The CPU emulator backend: CUDA kernels compiled by the host C++ compiler and run on the CPU.

See :mod:`grader.backends.emulator.backend` (the backend), :mod:`.module` (a compiled module and
device buffers), :mod:`.launch` (a launch's request, result and errors), :mod:`.cross_check` (nvcc's
cross-check of a compile), :mod:`.rewrite` (the ``__shared__`` source rewrite), :mod:`.build`
(its toolchain: runtime and executor cache, the sandboxed compile), :mod:`.device_globals` (a
module's ``__device__`` variables), :mod:`.executor` (the process that loads a module, and device
memory shared with it) and ``runtime/`` (the C++ runtime: prelude, fibers, scheduler, shared-memory
arena; the executor program). The sandbox, the compile cache and the compiler processes are
:mod:`grader.toolchain`'s, which the GPU backend uses too.
"""

from grader.backends.base import Finding
from grader.backends.emulator.backend import EmulatorBackend
from grader.backends.emulator.launch import SCHEDULES
from grader.backends.emulator.module import EmulatorArray, EmulatorModule

__all__ = ["EmulatorBackend", "EmulatorArray", "EmulatorModule", "Finding", "SCHEDULES", "create"]


def create(*, workers: int = 0, checks: bool = False, sandbox: str = "auto", device_memory: int = 0,
           target_arch: int | None = None) -> EmulatorBackend:
    """The emulator as :meth:`grader.backends.BackendKind.create` makes it."""
    more = {} if target_arch is None else {"target_arch": target_arch}
    return EmulatorBackend(workers=workers, checks=checks, sandbox=sandbox, device_memory=device_memory or None,
                           **more)
