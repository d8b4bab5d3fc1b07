"""grader.host.parent_death.daemon_futures: background calls in daemon threads, a bounded number at once."""

from __future__ import annotations

import threading
import time

import pytest

from grader.host.parent_death import daemon_futures


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
