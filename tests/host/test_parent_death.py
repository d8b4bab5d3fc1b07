"""grader.host.parent_death: children tied to the grader before exec (tied_to_this_process), and background calls
in daemon threads, a bounded number at once (daemon_futures)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from grader.host.parent_death import ORPHAN_EXIT, daemon_futures, tied_to_this_process
from tests.conftest import ROOT


def test_every_call_runs_in_a_daemon_thread_at_most_threads_at_once_and_errors_reach_the_waiter():
    running, most, lock = [0], [0], threading.Lock()

    def call(k: int):
        def run():
            assert threading.current_thread().daemon
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            time.sleep(0.05)
            with lock:
                running[0] -= 1
            if k == 3:
                raise ValueError("three")
            return k * k
        return run

    futures = daemon_futures({k: call(k) for k in range(6)}, threads=2)
    assert list(futures) == list(range(6))
    assert [futures[k].result(timeout=30) for k in (0, 1, 2, 4, 5)] == [0, 1, 4, 16, 25]
    with pytest.raises(ValueError, match="three"):
        futures[3].result(timeout=30)
    assert 1 <= most[0] <= 2  # never more than threads at once (how many overlap depends on the load)


_PDEATHSIG_OF_SELF = ("import ctypes; sig = ctypes.c_int(); "
                      "ctypes.CDLL(None).prctl(2, ctypes.byref(sig), 0, 0, 0); print(sig.value)")  # PR_GET_PDEATHSIG


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_is_tied_to_the_grader_before_its_program_starts():
    """The signal is set in the forked child before exec, so the program finds it set from its first
    instruction (a worker's Python start and imports are no longer a moment in which it outlives a
    grader killed outright)."""
    untied = subprocess.run([sys.executable, "-c", _PDEATHSIG_OF_SELF], capture_output=True, text=True, timeout=60)
    tied = subprocess.run([sys.executable, "-c", _PDEATHSIG_OF_SELF], capture_output=True, text=True, timeout=60,
                          preexec_fn=tied_to_this_process())
    assert untied.stdout.split() == ["0"] and tied.stdout.split() == [str(int(signal.SIGKILL))], (untied, tied)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_whose_parent_died_before_it_was_tied_exits_at_once():
    """Where the parent died between the fork and the call (the signal would never come), the child
    exits with ORPHAN_EXIT instead of running on."""
    code = ("import sys; from grader.host.parent_death import die_with_parent; "
            "die_with_parent(1 if __import__('os').getppid() != 1 else 2); print('ran on')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == ORPHAN_EXIT and "ran on" not in done.stdout, done


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_tied_child_dies_with_the_thread_that_started_it():
    """PR_SET_PDEATHSIG follows the starting thread, not the process: a child that must live on is
    started from a thread that lives as long as its use (a batch's job threads, a worker's main thread)."""
    started: list[subprocess.Popen] = []
    thread = threading.Thread(target=lambda: started.append(subprocess.Popen(
        ["sleep", "600"], preexec_fn=tied_to_this_process())))
    thread.start()
    thread.join()
    child = started[0]
    try:
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
