"""A student's cubin on the GPU: loaded, its contract's kernels found (:func:`load_module`,
:class:`PyCudaModule`), and what it holds that outlives a launch (``__device__`` variables:
:func:`device_globals_bytes`; local memory or the device heap: :func:`leaves_state`)."""

from __future__ import annotations

import struct
from typing import Sequence

from grader.backends.base import Module
from grader.core.errors import CompileError
from grader.core.kernels import KernelSpec

__all__ = ["PyCudaModule", "device_globals_bytes", "leaves_state", "load_module"]


class PyCudaModule(Module):
    """A loaded cubin and the contract kernels found in it.

    Attributes:
        cubin: the module's bytes (compute-sanitizer's replay loads them again, :mod:`grader.grading.sanitizer`).
    """

    def __init__(self, module, functions: dict, specs: dict[str, KernelSpec], cubin: bytes = b"") -> None:
        self.module, self.functions, self.specs, self.cubin = module, functions, specs, cubin
        self.stateful = device_globals_bytes(cubin) != 0  # it has __device__ variables (fresh_globals)
        self.dirty = False  # launched since it was loaded or reloaded

    def has_kernel(self, name: str) -> bool:
        return name in self.functions


def load_module(cuda, cubin: bytes, *, filename: str, kernels: Sequence[KernelSpec]) -> PyCudaModule:
    """Load ``cubin`` (built by :func:`grader.backends.pycuda.compile.compile_cubin`) in the current
    context through ``cuda`` (``pycuda.driver``) and find the contract's ``kernels`` in it.

    Raises:
        CompileError: the module does not load on this GPU, or a kernel is missing (``filename``, the
            student's file, names it).
    """
    try:
        module = cuda.module_from_buffer(cubin)
    except cuda.Error as exc:
        raise CompileError(f"{filename}: the compiled module does not load on this GPU ({exc})") from None
    functions = {}
    for spec in kernels:
        try:
            functions[spec.name] = module.get_function(spec.name)
        except cuda.Error:
            raise CompileError(f"{filename}: the kernel `{spec.name}` is not defined with the contract's "
                               f"signature `{spec.declaration()}`") from None
    return PyCudaModule(module, functions, {k.name: k for k in kernels}, cubin)


def device_globals_bytes(cubin: bytes) -> int:
    """Bytes of a cubin's ``__device__`` variables: the sizes of its ELF sections named ``.nv.global``
    or ``.nv.global.init`` (zero-initialised and initialised device data; ``__constant__`` data is in
    ``.nv.constant*``, which kernels cannot write), read from the ELF64 section headers (the System V
    gABI, "Sections": ``e_shoff``, ``e_shentsize``, ``e_shnum``, ``e_shstrndx``; ``sh_name``,
    ``sh_size``). -1 where the bytes are not such an ELF (then the module counts as having some)."""
    try:
        if cubin[:4] != b"\x7fELF" or cubin[4] != 2 or cubin[5] != 1:  # ELFCLASS64, little-endian
            return -1
        shoff, = struct.unpack_from("<Q", cubin, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
        headers = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
        names_at = headers[shstrndx][4]  # sh_offset of the section-name string table
        total = 0
        for name_off, _type, _flags, _addr, _offset, size in headers:
            end = cubin.index(b"\0", names_at + name_off)
            if cubin[names_at + name_off:end] in (b".nv.global", b".nv.global.init"):
                total += size
        return total
    except (struct.error, IndexError, ValueError):
        return -1


def leaves_state(cuda, module: PyCudaModule) -> bool:
    """Whether a student's module leaves memory behind that the grader cannot clear: a kernel with local
    memory (its stack, spilled registers, arrays), which the context keeps from launch to launch, or
    a call to the device heap (``malloc``), whose blocks the next kernels' ``malloc`` may return."""
    if b"\0malloc\0" in module.cubin:
        return True
    return any(f.get_attribute(cuda.function_attribute.LOCAL_SIZE_BYTES) for f in module.functions.values())
