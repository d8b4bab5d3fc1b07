"""A child process tied to its parent's life: ``PR_SET_PDEATHSIG``, in one place.

The grader's children (part workers, compute-sanitizer and the Python under it) must not outlive
the grader: a grader stopped by Ctrl-C, killed or crashed must leave no student code running.

Public API: :func:`die_with_parent`.
"""

from __future__ import annotations

try:  # loaded at import, never in a forked child before exec (an import there could wait on a lock)
    import ctypes as _ctypes
    _PRCTL = _ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _PRCTL = None

_PR_SET_PDEATHSIG = 1
_SIGKILL = 9


def die_with_parent() -> bool:
    """Have the kernel send this process SIGKILL when the thread that started it ends (Linux's
    ``prctl(PR_SET_PDEATHSIG)``). Safe as a ``preexec_fn``: it only makes the call.

    Returns:
        True where it was set; False where this system has no ``prctl`` (nothing is done).
    """
    if _PRCTL is None:
        return False
    return _PRCTL(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0) == 0
