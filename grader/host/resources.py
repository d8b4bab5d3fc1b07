"""The machine's resource limits as the grader meets them, told in one line with what to do.

HPC login nodes, course containers and CI runners often cap each process's address space
(``RLIMIT_AS``, the shell's ``ulimit -v``, in KiB). The grader's workers, the emulator's executors
and the compilers inherit the cap. Where it leaves too little (the emulator's device memory cannot
be mapped, an allocation fails), the part is an ``error`` whose message is one line from here:
what ran short, the limit, and what to raise it to (or which config sizes to lower). Never a
traceback: the student cannot act on one, and the TA needs the number.

Public API: :func:`address_space_limit`, :func:`address_space_used`, :func:`limit_advice`,
:func:`resource_failure`, :func:`looks_like_memory_failure`, :func:`size_text`, :func:`usable_cpus`.
"""

from __future__ import annotations

import errno
import math
import os
import resource

__all__ = ["address_space_limit", "address_space_used", "limit_advice", "resource_failure",
           "looks_like_memory_failure", "size_text", "usable_cpus", "HEADROOM"]


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask: what ``taskset``, a Slurm allocation or
    a container's cpuset leave it), at least 1; ``os.cpu_count()`` where the mask cannot be read.
    A Slurm job given 8 cores of a 128-core node sizes its jobs and threads to the 8."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: Address space beyond what was asked for that the advice adds for everything else a worker maps
#: (host copies of a case's input and output, the compilers, the executor's threads), in bytes.
HEADROOM = 2 * 2**30

#: How a failure to get memory reads in a process's last words (Python, glibc, the loader, C++).
_MEMORY_WORDS = ("MemoryError", "Cannot allocate memory", "cannot allocate memory", "failed to map segment",
                 "std::bad_alloc", "can't start new thread", "out of memory", "Out of memory",
                 "Resource temporarily unavailable", "OpenBLAS blas_thread_init", "cannot reserve")


def address_space_limit() -> int | None:
    """This process's address-space limit (soft ``RLIMIT_AS``) in bytes, or None when unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def address_space_used() -> int:
    """Bytes of address space this process has mapped now (``VmSize``; 0 where unknown)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def size_text(nbytes: int) -> str:
    """``nbytes`` for a reader: ``1.5 GiB``, ``384 MiB``."""
    if nbytes >= 2**30:
        return f"{nbytes / 2**30:.1f} GiB".replace(".0 GiB", " GiB")
    return f"{max(1, math.ceil(nbytes / 2**20))} MiB"


def limit_advice(more: int, *, sizes: str = "the config's largest sizes") -> str:
    """What to do when ``more`` bytes of address space are needed beyond what this process maps
    now: ``raise the address-space limit (ulimit -v, now 4 GiB) to at least 6 GiB (ulimit -v
    6291456), or lower <sizes>``; without a limit (the machine itself ran out), ``free memory or
    lower <sizes>``."""
    limit = address_space_limit()
    if limit is None:
        return f"the machine itself is out of memory: grade fewer submissions at once, or lower {sizes}"
    want = math.ceil((address_space_used() + max(0, more) + HEADROOM) / 2**30)
    want = max(want, math.floor(limit / 2**30) + 1)
    return (f"raise the address-space limit (ulimit -v, now {size_text(limit)}) to at least {want} GiB "
            f"(ulimit -v {want * 2**20}), or lower {sizes}")


def resource_failure(exc: BaseException, *, sizes: str = "the config's largest sizes",
                     hidden: bool = False) -> str | None:
    """One line for ``exc`` where it is the machine running short, not a fault of the submission or
    a bug: a :class:`grader.core.errors.ResourceLimit` (its message), a ``MemoryError``, an ``OSError``
    of ``ENOMEM``, or a thread that could not start; None for anything else. With ``hidden`` (the
    part has hidden cases, whose sizes count in what it needs) the line gives no number that
    depends on them: the limit, and that it is too small."""
    from grader.core.errors import ResourceLimit

    if not isinstance(exc, (ResourceLimit, MemoryError, OSError, RuntimeError)):
        return None
    if hidden and (isinstance(exc, (ResourceLimit, MemoryError)) or resource_failure(exc) is not None):
        limit = address_space_limit()
        now = f" (ulimit -v, now {size_text(limit)})" if limit is not None else ""
        return (f"the grader ran short of memory for this part's cases, the hidden ones included, under this "
                f"machine's address-space limit{now}: raise the limit, or lower {sizes}")
    if isinstance(exc, ResourceLimit):
        return str(exc).splitlines()[0] if str(exc) else "the grader ran short of memory"
    if isinstance(exc, MemoryError):  # its text is left out: it can name a hidden case's size
        what = "an allocation failed (MemoryError)"
    elif isinstance(exc, OSError) and exc.errno == errno.ENOMEM:
        what = f"an allocation failed ({exc.strerror or 'ENOMEM'})"
    elif isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        what = "a thread could not start (RuntimeError: can't start new thread)"
    else:
        return None
    return f"the grader ran out of memory while grading this part: {what}; {limit_advice(0, sizes=sizes)}"


def looks_like_memory_failure(text: str) -> bool:
    """Whether a process's last words (its last line of stderr) say that it could not get memory."""
    return any(word in text for word in _MEMORY_WORDS)
