"""CUB's ``cub::DeviceScan::ExclusiveSum``, the library scan the bench and the grader's throughput plot
time beside the kernels: built by nvcc from ``grader/backends/cub_scan.cu`` into a shared library cached
under ``~/.cache/scangrade/`` (keyed by the source, the architecture and nvcc's version;
:func:`build_cub`, which ``scangrade bench`` runs), found where it is built (:func:`cached_cub`, which a
grading reads and which builds nothing), and called through ctypes on a backend's device addresses
(:class:`CubScan`). Timing it is the caller's: :func:`grader.grading.case.timing.time_cub_ms` for a
grading, :mod:`grader.tools.bench` for the bench.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from grader.core.errors import CompileError, KernelError

#: The CUDA source of the CUB entry point, beside this module.
CUB_SOURCE = Path(__file__).resolve().parent / "cub_scan.cu"


def cache_dir() -> Path:
    """Where built libraries are kept: ``$XDG_CACHE_HOME/scangrade`` or ``~/.cache/scangrade``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "scangrade"


def _cub_target(compute_capability: str, nvcc: str) -> Path:
    """Where the CUB library for this compute capability and nvcc is cached (built or not)."""
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    arch = compute_capability.replace(".", "")
    key = hashlib.sha256(CUB_SOURCE.read_bytes() + arch.encode() + version.encode()).hexdigest()[:16]
    return cache_dir() / f"cub_scan-sm{arch}-{key}.so"


def _nvcc() -> str:
    return shutil.which("nvcc") or (shutil.which("nvcc", path="/usr/local/cuda/bin") or "")


def cached_cub(compute_capability: str) -> Path | None:
    """The CUB library :func:`build_cub` built for this compute capability (``"9.0"``) and this nvcc,
    or None where it has not been built (or nvcc or the capability is unknown); builds nothing."""
    nvcc = _nvcc()
    if not nvcc or not compute_capability:
        return None
    target = _cub_target(compute_capability, nvcc)
    return target if target.is_file() else None


def build_cub(compute_capability: str, *, nvcc: str | None = None) -> Path:
    """Build (or reuse) the CUB shared library for one compute capability (``"9.0"``).

    The file name carries a hash of the source, the architecture and nvcc's version.

    Raises:
        CompileError: nvcc is missing or fails.
    """
    nvcc = nvcc or _nvcc()
    if not nvcc:
        raise CompileError("nvcc is not on PATH: CUB's DeviceScan cannot be built")
    arch = compute_capability.replace(".", "")
    target = _cub_target(compute_capability, nvcc)
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        out = Path(tmp) / target.name
        cmd = [nvcc, "-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC",
               "-gencode", f"arch=compute_{arch},code=sm_{arch}", "-o", str(out), str(CUB_SOURCE)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError("building CUB's DeviceScan failed", command=" ".join(cmd),
                               log=(proc.stderr or proc.stdout).strip())
        os.replace(out, target)  # atomic: a concurrent bench sees the whole file or none
    return target


class CubScan:
    """``cub::DeviceScan::ExclusiveSum`` through ctypes on device addresses (default stream)."""

    def __init__(self, library: Path) -> None:
        lib = ctypes.CDLL(str(library))
        self._scan = lib.scangrade_cub_exclusive_sum
        self._scan.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int, ctypes.c_uint64,
                               ctypes.POINTER(ctypes.c_size_t), ctypes.c_int]
        self._scan.restype = ctypes.c_int
        self._error = lib.scangrade_cuda_error
        self._error.argtypes, self._error.restype = [ctypes.c_int], ctypes.c_char_p
        self.version = int(lib.scangrade_cub_version())

    @staticmethod
    def _code(dtype: np.dtype) -> int:
        return {np.dtype(np.int32): 0, np.dtype(np.float32): 1}[np.dtype(dtype)]

    def temp_bytes(self, n: int, dtype: np.dtype) -> int:
        """Bytes of temporary storage CUB needs for n elements."""
        size = ctypes.c_size_t(0)
        self._check(self._scan(0, 0, n, 0, ctypes.byref(size), self._code(dtype)))
        return int(size.value)

    def __call__(self, src: int, dst: int, n: int, temp: int, temp_bytes: int, dtype: np.dtype) -> None:
        """Queue the exclusive sum of n elements from address ``src`` into ``dst`` on stream 0."""
        size = ctypes.c_size_t(temp_bytes)
        self._check(self._scan(src, dst, n, temp, ctypes.byref(size), self._code(dtype)))

    def time_ms(self, backend: object, x: np.ndarray, dtype: np.dtype, *, poison_bits: int, warmup: int, runs: int,
                flush_bytes: int) -> tuple[list[float], object]:
        """The exclusive sum of ``x`` timed on ``backend`` as the kernels are (its ``time_ms``: CUDA
        events, the output poisoned with ``poison_bits`` and the L2 emptied of ``flush_bytes`` before
        each of ``runs`` runs, after ``warmup``): ``(times in ms, the output's device array)``.

        Device memory: the input, the output and CUB's temporary storage, allocated once, outside the
        timed window.

        Raises:
            KernelError: CUB failed (``cuda-error``).
        """
        d_in, d_out = backend.alloc(x.size, dtype), backend.alloc(x.size, dtype)
        backend.to_device(x, d_in)
        temp_bytes = self.temp_bytes(x.size, dtype)
        temp = backend.alloc(max(temp_bytes, 1), np.dtype(np.uint8))
        times = backend.time_ms(lambda: self(d_in.address, d_out.address, x.size, temp.address, temp_bytes, dtype),
                                before=lambda: backend.memset32(d_out, poison_bits), warmup=warmup, runs=runs,
                                flush_bytes=flush_bytes)
        return times, d_out

    def _check(self, code: int) -> None:
        if code != 0:
            raise KernelError(f"cub::DeviceScan::ExclusiveSum returned {code} "
                              f"({self._error(code).decode() if code > 0 else 'unknown dtype'})",
                              kind="cuda-error")

