"""Part workers started ahead (:class:`SpareWorkers`): in a GPU batch, a submission's parts are graded
one after the other in each job, and a worker's start (a Python interpreter, its imports, the CUDA
driver's initialisation) is a second or more of every part. A spare has done all that and waits,
reading one line from its stdin: the job file and the folder it is to run in
(:func:`grader.grading.worker.main.cli`, ``--spare``). :func:`grader.grading.worker_process.run_worker`
hands a job to a spare started with the same environment where one waits, and starts a worker as
before where none does.

Spares are started by one thread of the pool's own, which lives until :meth:`SpareWorkers.close`: a
worker ends with the runner thread that started it (``PR_SET_PDEATHSIG``), so none may be started
by a job's thread, which another job's worker would outlive. A spare whose stdin closes (the
runner ended) exits; :meth:`SpareWorkers.close` ends those still waiting.

Public API: :class:`SpareWorkers`, :func:`spare_workers`, :func:`take_spare`, :func:`hand_over`.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Iterator

__all__ = ["SpareWorkers", "hand_over", "spare_workers", "take_spare"]

#: The argument that makes ``python -m grader.grading.worker`` a spare.
SPARE_ARG = "--spare"


class SpareWorkers:
    """Up to ``per_env`` spare workers per environment, each started after the first worker of that
    environment was asked for (:meth:`take`), and again after each one taken.

    Args:
        per_env: spares kept per environment (a batch: its jobs per GPU; 0: none).
    """

    def __init__(self, per_env: int) -> None:
        self.per_env = per_env
        self._lock = threading.Lock()
        self._waiting: dict[tuple, list[subprocess.Popen]] = {}
        self._asked: dict[tuple, int] = {}  # spares asked of the starter thread and not yet there
        self._requests: queue.Queue = queue.Queue()
        self._closed = False
        #: Workers handed a job (for tests and bench/throughput.py).
        self.taken = 0
        self._thread = threading.Thread(target=self._starter, name="scangrade-spare-workers", daemon=True)
        self._thread.start()

    def take(self, env: dict[str, str]) -> subprocess.Popen | None:
        """A spare started with exactly ``env`` and still waiting, or None; either way, spares for
        ``env`` are asked for up to :attr:`per_env`."""
        key = tuple(sorted(env.items()))
        found = None
        with self._lock:
            if self._closed:
                return None
            waiting = self._waiting.setdefault(key, [])
            while waiting and found is None:
                proc = waiting.pop(0)
                if proc.poll() is None:
                    found = proc
            more = self.per_env - len(waiting) - self._asked.get(key, 0)
            self._asked[key] = self._asked.get(key, 0) + max(0, more)
            if found is not None:
                self.taken += 1
        for _ in range(max(0, more)):
            self._requests.put((key, env))
        return found

    def _starter(self) -> None:
        while True:
            item = self._requests.get()
            if item is None:
                return
            key, env = item
            try:
                proc = subprocess.Popen([sys.executable, "-m", "grader.grading.worker", SPARE_ARG],
                                        cwd=tempfile.gettempdir(), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, env=env, start_new_session=True)
            except OSError:
                proc = None
            with self._lock:
                self._asked[key] -= 1
                if proc is not None:
                    self._waiting.setdefault(key, []).append(proc)
                if self._closed:
                    break
        self._end_waiting()

    def _end_waiting(self) -> None:
        with self._lock:
            procs = [p for waiting in self._waiting.values() for p in waiting]
            self._waiting.clear()
        for proc in procs:
            _end(proc)

    def close(self) -> None:
        """End the spares still waiting and the starter thread."""
        with self._lock:
            self._closed = True
        self._requests.put(None)
        self._thread.join()
        self._end_waiting()


_current: SpareWorkers | None = None


@contextlib.contextmanager
def spare_workers(per_env: int) -> Iterator[SpareWorkers | None]:
    """Spare workers (:class:`SpareWorkers`) for the workers this process starts within the block
    (``per_env`` 0: none); ended with it."""
    global _current
    if per_env < 1 or _current is not None:
        yield None
        return
    spares = _current = SpareWorkers(per_env)
    try:
        yield spares
    finally:
        _current = None
        spares.close()


def take_spare(env: dict[str, str]) -> subprocess.Popen | None:
    """A waiting spare started with ``env`` (see :meth:`SpareWorkers.take`), or None outside
    :func:`spare_workers`."""
    spares = _current
    return spares.take(env) if spares is not None else None


def hand_over(proc: subprocess.Popen, job_path: os.PathLike, tmpdir: os.PathLike) -> bool:
    """Give a spare its job: the job file and the folder it runs in, one line on its stdin, which
    is then closed. False where the spare is gone (its stdin broken): start a worker instead."""
    try:
        proc.stdin.write(f"{os.fspath(job_path)}\t{os.fspath(tmpdir)}\n".encode())
        proc.stdin.close()
        return True
    except (OSError, ValueError):
        _end(proc)
        return False


def _end(proc: subprocess.Popen) -> None:
    """End a spare that has no job (its session: the spare alone, which has started nothing)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait()
    if proc.stdin is not None:
        try:
            proc.stdin.close()
        except OSError:
            pass
