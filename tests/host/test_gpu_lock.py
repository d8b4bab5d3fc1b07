"""The GPU's readers-writer lock across workers (grader.host.gpu_lock): timed windows alone on the GPU,
untimed work side by side.

Two GpuLock objects on one path hold two open files, which flock(2) treats as two processes do."""

from __future__ import annotations

import threading
import time

from grader.host.gpu_lock import GpuLock

WAIT_S = 60.0  # how long a step may take on a loaded machine before the test gives up


def test_untimed_work_of_two_workers_shares_the_gpu(tmp_path):
    a, b = GpuLock(tmp_path / "gpu.lock"), GpuLock(tmp_path / "gpu.lock")
    inside = threading.Event()

    def other():
        with b.shared():
            inside.set()
    with a.shared():
        t = threading.Thread(target=other)
        t.start()
        assert inside.wait(WAIT_S)  # while the first holds it
    t.join(WAIT_S)


def test_untimed_work_waits_for_a_timed_window(tmp_path):
    timer, worker = GpuLock(tmp_path / "gpu.lock"), GpuLock(tmp_path / "gpu.lock")
    inside, release, done = threading.Event(), threading.Event(), threading.Event()

    def time_it():
        with timer.exclusive():
            inside.set()
            release.wait(WAIT_S)

    def work():
        with worker.shared():
            done.set()
    timing = threading.Thread(target=time_it)
    timing.start()
    assert inside.wait(WAIT_S)
    t = threading.Thread(target=work)
    t.start()
    time.sleep(0.2)
    assert not done.is_set()  # nothing runs in the window
    release.set()
    timing.join(WAIT_S)
    t.join(WAIT_S)
    assert done.is_set()


def test_a_timed_window_waits_for_the_operations_under_way(tmp_path):
    worker, timer = GpuLock(tmp_path / "gpu.lock"), GpuLock(tmp_path / "gpu.lock")
    entered = threading.Event()

    def time_it():
        with timer.exclusive():
            entered.set()
    with worker.shared():
        timing = threading.Thread(target=time_it)
        timing.start()
        time.sleep(0.2)
        assert not entered.is_set()  # an operation is under way
    timing.join(WAIT_S)
    assert entered.is_set()
