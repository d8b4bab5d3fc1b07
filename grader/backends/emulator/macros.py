"""What the emulator's compile predefines: what nvcc's device compile for the course's GPU does.

A file that can tell the emulator from a GPU compile can hold one kernel for the emulator's checks
and another for the GPU (``#if __CUDA_ARCH__ >= 800``: a launch counter that skips timed runs on an
H100 only). So the emulator compiles student code with the macros nvcc predefines for the device
pass of ``target_arch`` (the config's key, the GPU the course targets): nvcc preprocesses device code
with the host compiler, ``gcc -D__CUDA_ARCH__=900 -D__CUDA_ARCH_LIST__=900 -E -x c++
-DCUDA_DOUBLE_MATH_FUNCTIONS -D__CUDACC__ -D__NVCC__ ... -D__CUDACC_VER_MAJOR__=13 ... -m64`, as
``nvcc -arch=sm_90 -E --dryrun`` shows (:func:`nvcc_defines`: read from the installed nvcc, the
one a GPU grading compiles with, else :data:`NVCC_DEFINES`, nvcc 13.0's). The host compiler's own
macros are made those of that device pass too (:func:`host_macro_flags`): the emulator's
``-O1 -fsanitize=thread -fPIC -std=c++17`` would otherwise define ``__OPTIMIZE__``,
``__SANITIZE_THREAD__`` and ``__STRICT_ANSI__`` where nvcc's pass does not.

What still differs (docs/security.md, "Detecting the grader"): the macros of the CUDA headers nvcc
force-includes (``cuda_runtime.h``: some 2,300, ``cudaStreamTailLaunch``...), of which the
emulator's stub headers define a few.

Public API: :data:`TARGET_ARCHS`, :data:`DEFAULT_TARGET_ARCH`, :data:`NVCC_DEFINES`,
:func:`nvcc_defines`, :func:`host_macro_flags`, :func:`nvcc_arch_flags`.
"""

from __future__ import annotations

import functools
import shlex
import subprocess
from typing import Sequence

from grader.backends import DEFAULT_TARGET_ARCH, TARGET_ARCHS  # the config's key target_arch takes these

__all__ = ["TARGET_ARCHS", "DEFAULT_TARGET_ARCH", "NVCC_DEFINES", "nvcc_defines", "host_macro_flags",
           "nvcc_arch_flags"]

#: nvcc's own definitions on its device pass besides ``__CUDA_ARCH__`` and ``__CUDA_ARCH_LIST__``
#: (name, value), as nvcc 13.0.88 passes them (``nvcc -arch=sm_90 -E --dryrun``): what the emulator
#: defines where no nvcc is installed.
NVCC_DEFINES = (("CUDA_DOUBLE_MATH_FUNCTIONS", "1"), ("__CUDACC__", "1"), ("__NVCC__", "1"),
                ("__CUDACC_VER_MAJOR__", "13"), ("__CUDACC_VER_MINOR__", "0"), ("__CUDACC_VER_BUILD__", "88"),
                ("__CUDA_API_VER_MAJOR__", "13"), ("__CUDA_API_VER_MINOR__", "0"),
                ("__NVCC_DIAG_PRAGMA_SUPPORT__", "1"), ("__CUDACC_DEVICE_ATOMIC_BUILTINS__", "1"))


def _arch_defines(target_arch: int) -> list[tuple[str, str]]:
    return [("__CUDA_ARCH__", str(target_arch * 10)), ("__CUDA_ARCH_LIST__", str(target_arch * 10))]


@functools.lru_cache(maxsize=None)
def nvcc_defines(target_arch: int, nvcc: str | None = None) -> tuple[tuple[str, str], ...]:
    """The macros nvcc defines on the command line of its device pass for ``sm_<target_arch>``, as
    ``(name, value)`` in its order (``__CUDA_ARCH__`` first): read from ``nvcc``'s dry run where it
    is given and answers (so the version macros are those of the nvcc a GPU grading uses), else
    the architecture's and :data:`NVCC_DEFINES`."""
    if nvcc:
        try:
            proc = subprocess.run([nvcc, f"-arch=sm_{target_arch}", "-E", "--dryrun", "scangrade-probe.cu"],
                                  capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
            for line in (proc.stdout + proc.stderr).splitlines():
                if "-D__CUDA_ARCH__=" not in line or " -E " not in line:
                    continue
                found = [tuple((a[2:].split("=", 1) + ["1"])[:2]) for a in shlex.split(line.removeprefix("#$ "))
                         if a.startswith("-D") and len(a) > 2]
                if found:
                    return tuple(found)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
    return tuple(_arch_defines(target_arch)) + NVCC_DEFINES


def _predefined(argv: Sequence[str]) -> dict[str, str]:
    """Macro name (with a function-like macro's parameters) -> body, as ``argv -dM -E`` of an empty
    C++ file defines them."""
    proc = subprocess.run([*argv, "-dM", "-E", "-x", "c++", "/dev/null"], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise OSError(proc.stderr.strip() or f"exit status {proc.returncode}")
    macros = {}
    for line in proc.stdout.splitlines():
        if line.startswith("#define "):
            head, _, body = line[len("#define "):].partition(" ")
            macros[head] = body
    return macros


@functools.lru_cache(maxsize=None)
def host_macro_flags(compiler: tuple[str, ...], flags: tuple[str, ...]) -> tuple[str, ...]:
    """``-U``/``-D`` options that give a compile with ``compiler`` and ``flags`` the host compiler's
    predefined macros of nvcc's device pass (the same compiler, ``-E -x c++ -m64``, no other flag):
    ``-U__OPTIMIZE__ -D__NO_INLINE__=1 -U__SANITIZE_THREAD__ ...``. Empty where either does not run."""
    try:
        ours, theirs = _predefined([*compiler, *flags]), _predefined([*compiler, "-m64"])
    except (OSError, subprocess.TimeoutExpired):
        return ()
    out = [f"-U{name.split('(')[0]}" for name in sorted(set(ours) - set(theirs))]
    out += [f"-D{name}={body}" for name, body in sorted(theirs.items()) if ours.get(name) != body]
    return tuple(out)


@functools.lru_cache(maxsize=None)
def nvcc_arch_flags(nvcc: str, target_arch: int) -> tuple[str, ...]:
    """``("-arch=sm_<target_arch>",)`` where ``nvcc`` compiles for that GPU (``--list-gpu-arch``),
    so that its cross-check of the emulator's compile sees the same ``#if __CUDA_ARCH__`` branches;
    ``()`` where it does not (its default architecture then)."""
    try:
        proc = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return (f"-arch=sm_{target_arch}",) if f"compute_{target_arch}" in proc.stdout.split() else ()
