"""Nothing the grader starts outlives it: children killed when it dies (``PR_SET_PDEATHSIG``), in one place.

The grader's children (part workers, compute-sanitizer and the Python under it) must not outlive
the grader: a grader stopped by Ctrl-C, killed or crashed must leave no student code running.

Background work that must not keep the grader alive either runs in daemon threads
(:func:`daemon_futures`): a process that ends does not wait for it.

A child is tied to the grader before it runs anything (:func:`tied_to_this_process`, a
``preexec_fn``): set in the forked child before ``exec``, the signal leaves no moment in which the
grader can die unnoticed (set by the child itself after ``exec``, Python's start and imports
would be one). ``PR_SET_PDEATHSIG`` fires when the *thread* that started the child ends, so a
child that must outlive the call that starts it is started from a thread that lives as long as
the grader's use of it (a batch's job threads; a worker's main thread).

Public API: :func:`die_with_parent`, :func:`tied_to_this_process`, :func:`daemon_futures`.
"""

from __future__ import annotations

import functools
import os
import queue
import threading
from concurrent.futures import Future
from typing import Callable, Hashable

try:  # loaded at import, never in a forked child before exec (an import there could wait on a lock)
    import ctypes as _ctypes
    _PRCTL = _ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _PRCTL = None

_PR_SET_PDEATHSIG = 1
_SIGKILL = 9


def die_with_parent(parent: int | None = None) -> bool:
    """Have the kernel send this process SIGKILL when the thread that started it ends (Linux's
    ``prctl(PR_SET_PDEATHSIG)``). Safe as a ``preexec_fn`` or a process pool's initializer: it only
    makes two system calls.

    Args:
        parent: the pid of the process that started this one; where this process's parent is no
            longer it (it died before the call: the signal will never come), exit at once with
            :data:`ORPHAN_EXIT`. None: no such check.

    Returns:
        True where it was set; False where this system has no ``prctl`` (nothing is done).
    """
    if _PRCTL is None:
        return False
    done = _PRCTL(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0) == 0
    if parent is not None and os.getppid() != parent:
        os._exit(ORPHAN_EXIT)
    return done


#: The exit status of a child whose parent died before the child could tie itself to it.
ORPHAN_EXIT = 137


def tied_to_this_process() -> Callable[[], bool]:
    """A ``preexec_fn`` for :class:`subprocess.Popen` that ties the child to the calling thread
    before ``exec`` (:func:`die_with_parent` with this process's pid), so that no child of a grader
    killed outright (SIGKILL, the OOM killer) runs on, not even for the time its program takes to
    start; picklable, so also a ``spawn`` process pool's initializer.

    Returns:
        the function to pass as ``preexec_fn``.
    """
    return functools.partial(die_with_parent, os.getpid())


def daemon_futures(calls: dict[Hashable, Callable[[], object]], threads: int) -> dict[Hashable, Future]:
    """Start ``calls`` now, in ``calls``' order, at most ``threads`` at once, each in a daemon thread
    (the process may end while one runs: it is abandoned, where a ``ThreadPoolExecutor``'s threads
    are waited for at exit).

    Returns:
        ``{key: Future}``: each call's result, or the exception it raised.
    """
    todo: queue.SimpleQueue = queue.SimpleQueue()
    futures: dict[Hashable, Future] = {}
    for key, call in calls.items():
        futures[key] = Future()
        todo.put((futures[key], call))

    def drain() -> None:
        while True:
            try:
                future, call = todo.get_nowait()
            except queue.Empty:
                return
            try:
                future.set_result(call())
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for the result
                future.set_exception(exc)

    for i in range(min(max(1, threads), len(calls))):
        threading.Thread(target=drain, name=f"scangrade-background-{i}", daemon=True).start()
    return futures
