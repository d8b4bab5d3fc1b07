"""The GPU backend: nvcc compiles each part to a cubin for the current device, PyCUDA loads and runs it.

The package by job: :mod:`.backend` (:class:`PyCudaBackend`, the :class:`grader.backends.base.Backend`
of a CUDA device: buffers, launches, copies, the grader's own checks and shared-memory fill on the
device), :mod:`.compile` (nvcc in the compile sandbox, the compile cache, compiles started ahead),
:mod:`.module` (a loaded cubin and what it leaves in its context), :mod:`.memory` (device buffers,
a context's scratch and its pool of case buffers), :mod:`.contexts` (a worker's contexts kept from
part to part, cleared or dropped between submissions), :mod:`.timing` (the timed runs, CUDA
events), :mod:`.faults` (CUDA errors as failure kinds), :mod:`.device` (the driver's start, the
nvcc target, the result's ``device`` facts) and :mod:`.ptx` (the grader's own kernels, as PTX).
"""

from __future__ import annotations

from grader.backends.pycuda.backend import PyCudaBackend
from grader.backends.pycuda.compile import compile_ahead, compile_cubin
from grader.backends.pycuda.contexts import (keep_context, kept_context_works, pool_device_memory,
                                             release_kept_contexts, start_grading)
from grader.backends.pycuda.device import device_arch
from grader.backends.pycuda.memory import POOL_MAX_BYTES, POOL_MIN_BYTES, PyCudaArray

__all__ = ["PyCudaBackend", "PyCudaArray", "POOL_MAX_BYTES", "POOL_MIN_BYTES", "compile_ahead", "compile_cubin",
           "create", "device_arch", "keep_context", "kept_context_works", "pool_device_memory",
           "release_kept_contexts", "start_grading"]


def create(*, workers: int = 0, checks: bool = False, sandbox: str = "auto", device_memory: int = 0,
           target_arch: int | None = None) -> PyCudaBackend:
    """The GPU backend as :meth:`grader.backends.BackendKind.create` makes it (``workers``,
    ``checks``, ``device_memory`` and ``target_arch`` are the emulator's: the GPU's checks are
    compute-sanitizer's, :mod:`grader.grading.sanitizer`, and it compiles for the GPU it runs on)."""
    return PyCudaBackend(sandbox=sandbox)
