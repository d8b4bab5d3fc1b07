"""A third backend for tests (tests/backends/test_backend_protocol.py): the CPU emulator, unchecked, does the
work, but the backend declares its own capabilities through the :class:`~grader.backends.base.Backend`
protocol: no checks of its own, one thread order, no warnings, no host toolchain, no GPU lock (the
protocol's defaults). It records every :class:`~grader.backends.base.RunMode` the grader gives it.

Its row of :data:`grader.backends.BACKENDS` is :data:`KIND`; :func:`create` makes it, as every
backend's module does (:meth:`grader.backends.BackendKind.create`)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Sequence, Union

import numpy as np

from grader.backends import BackendKind
from grader.backends.base import Backend, DeviceArray, Dim3, Module, RunMode
from grader.backends.emulator import EmulatorBackend
from grader.core.kernels import KernelSpec


class StubBackend(Backend):
    """Kernels run by an unchecked emulator; every capability beyond running them is the
    protocol's default. ``modes``: the run modes given, in order."""

    name: ClassVar[str] = "stub"

    def __init__(self, *, workers: int = 1, sandbox: str = "auto", device_memory: int = 0,
                 target_arch: int | None = None) -> None:
        self._emulator = EmulatorBackend(workers=workers or 1, checks=False, sandbox=sandbox, nvcc_check=False,
                                         device_memory=device_memory or None,
                                         **({"target_arch": target_arch} if target_arch else {}))
        self.modes: list[RunMode] = []

    def set_run_mode(self, mode: RunMode) -> None:
        """Record ``mode``; run as it is (the fill of shared memory is the emulator's own)."""
        self.modes.append(mode)

    def compile(self, *, source: str, filename: str, kernels: Sequence[KernelSpec], workdir: Path) -> Module:
        return self._emulator.compile(source=source, filename=filename, kernels=kernels, workdir=workdir)

    def alloc(self, count: int, dtype: np.dtype) -> DeviceArray:
        return self._emulator.alloc(count, dtype)

    def to_device(self, host: np.ndarray, dest: DeviceArray) -> None:
        self._emulator.to_device(host, dest)

    def to_host(self, src: DeviceArray) -> np.ndarray:
        return self._emulator.to_host(src)

    def _launch(self, module: Module, kernel: str, *, grid: Dim3, block: Dim3, shared_bytes: int,
                args: Sequence[Union[DeviceArray, int]]) -> None:
        self._emulator.launch(module, kernel, grid=grid, block=block, shared_bytes=shared_bytes, args=args)

    def fresh_globals(self, module: Module) -> None:
        self._emulator.fresh_globals(module)

    def close(self) -> None:
        self._emulator.close()


def create(*, workers: int = 0, checks: bool = False, sandbox: str = "auto", device_memory: int = 0,
           target_arch: int | None = None) -> StubBackend:
    """The stub (``checks`` ignored: it has none of its own)."""
    return StubBackend(workers=workers, sandbox=sandbox, device_memory=device_memory, target_arch=target_arch)


#: The stub's row of :data:`grader.backends.BACKENDS` (a test adds it to the table).
KIND = BackendKind("stub", __name__, lambda: (True, "the stub"), times_kernels=False, has_sanitizer=False,
                   counts_profile=False, uses_gpus=False, case_floor_s=5.0)
