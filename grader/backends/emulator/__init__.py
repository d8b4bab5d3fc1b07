"""The CPU emulator backend: CUDA kernels compiled by the host C++ compiler and run on the CPU.

See :mod:`grader.backends.emulator.backend` (the backend), :mod:`.rewrite` (the ``__shared__``
source rewrite), :mod:`.build` (toolchain and runtime cache) and ``runtime/`` (the C++ runtime:
prelude, fibers, scheduler, shared-memory arena).
"""

from grader.backends.emulator.backend import (KERNEL_ERROR_KINDS, SCHEDULES, EmulatorArray, EmulatorBackend,
                                              EmulatorModule, Finding)

__all__ = ["EmulatorBackend", "EmulatorArray", "EmulatorModule", "Finding", "KERNEL_ERROR_KINDS", "SCHEDULES"]
