"""One GPU shared by several workers: timed runs alone on it, everything else side by side.

Parts of one submission, and submissions of a ``batch``, are graded at once on a GPU machine (its
CPU cores compile, check and draw inputs while the GPU runs). Their correctness cases and
compute-sanitizer's runs may share the GPU, but a timed run must have it to itself: another
kernel, a memset or a copy running meanwhile takes memory bandwidth and multiprocessors from the
kernel being timed. So every worker on a GPU takes this lock *shared* for its untimed GPU work (a
case, a sanitizer run) and *exclusive* around each timed window
(:meth:`grader.backends.pycuda.backend.PyCudaBackend.time_interleaved_ms`), across processes.

It is a readers-writer lock over ``flock(2)`` on a file named after the GPU's PCI bus id, in the
user's cache folder, with a second file as a turnstile: a process waiting for the exclusive lock
holds the turnstile, so new shared holders queue behind it and timing is never starved. A lock
held by a process ends with it (a worker killed at a deadline releases it). Re-entrant within a
process: shared inside exclusive (or inside shared) is a no-op, and exclusive taken while holding
shared gives the shared lock up first and takes it back after, so no two processes can deadlock
upgrading.

Public API: :class:`GpuLock`, :func:`gpu_lock_for`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import threading
import time
from pathlib import Path
from typing import Iterator

__all__ = ["GpuLock", "gpu_lock_for"]


class GpuLock:
    """A cross-process readers-writer lock for one GPU (see the module's docstring).

    Args:
        path: the lock file (created); ``path + ".turnstile"`` is created beside it.

    Raises:
        OSError: the files cannot be created or opened.
    """

    def __init__(self, path: Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._turn = os.open(f"{path}.turnstile", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._mutex = threading.RLock()  # one holder thread at a time within the process
        self._shared = 0
        self._exclusive = 0
        #: Seconds this process waited for the lock and held it (shared: in all, and its longest hold),
        #: for bench/throughput.py.
        self.seconds = {"shared_wait_s": 0.0, "exclusive_wait_s": 0.0, "exclusive_held_s": 0.0, "shared_held_s": 0.0,
                        "shared_held_max_s": 0.0}

    def _acquire(self, mode: int) -> None:
        t0 = time.monotonic()
        fcntl.flock(self._turn, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._fd, mode)
        finally:
            fcntl.flock(self._turn, fcntl.LOCK_UN)
            self.seconds["exclusive_wait_s" if mode == fcntl.LOCK_EX else "shared_wait_s"] += time.monotonic() - t0

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Untimed GPU work: any number of processes at once, none while one times."""
        with self._mutex:
            if self._shared or self._exclusive:
                self._shared += 1
                try:
                    yield
                finally:
                    self._shared -= 1
                return
            self._acquire(fcntl.LOCK_SH)
            self._shared = 1
            t0 = time.monotonic()
            try:
                yield
            finally:
                self._shared = 0
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                held = time.monotonic() - t0
                self.seconds["shared_held_s"] += held
                self.seconds["shared_held_max_s"] = max(self.seconds["shared_held_max_s"], held)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """A timed window: no other process's GPU work under this lock meanwhile."""
        with self._mutex:
            if self._exclusive:
                self._exclusive += 1
                try:
                    yield
                finally:
                    self._exclusive -= 1
                return
            held = self._shared
            if held:
                fcntl.flock(self._fd, fcntl.LOCK_UN)  # give it up first: two upgrading holders would deadlock
            self._acquire(fcntl.LOCK_EX)
            self._exclusive = 1
            t0 = time.monotonic()
            try:
                yield
            finally:
                self.seconds["exclusive_held_s"] += time.monotonic() - t0
                self._exclusive = 0
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                if held:
                    self._acquire(fcntl.LOCK_SH)

    def close(self) -> None:
        """Close the files (which releases whatever this process held)."""
        for fd in (self._fd, self._turn):
            try:
                os.close(fd)
            except OSError:
                pass


def gpu_lock_for(bus_id: str, folder: Path | None = None) -> GpuLock | None:
    """The lock of the GPU at PCI bus id ``bus_id`` (``0000:3B:00.0``), in ``folder`` (default: the
    grader's cache folder, ``locks/``); None where the lock file cannot be made (grading goes on,
    with timing then not kept apart from other graders' work)."""
    if folder is None:
        from grader.host.folders import default_cache_dir
        folder = default_cache_dir() / "locks"
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", bus_id) or "gpu"
    try:
        return GpuLock(Path(folder) / f"gpu-{name}.lock")
    except OSError:
        return None
