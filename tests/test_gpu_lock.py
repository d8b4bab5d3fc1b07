"""The GPU's readers-writer lock across workers (grader.host.gpu_lock): timed windows alone on the GPU,
untimed operations side by side, and a case told when one of its operations waits for a window.

Two GpuLock objects on one path hold two open files, which flock(2) treats as two processes do."""

from __future__ import annotations

import threading
import time

from grader.host.gpu_lock import GpuLock

WAIT_S = 60.0  # how long a step may take on a loaded machine before the test gives up


def _until(predicate) -> bool:
    end = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def test_operations_share_the_gpu_and_a_free_lock_tells_nothing(tmp_path):
    a, b = GpuLock(tmp_path / "gpu.lock"), GpuLock(tmp_path / "gpu.lock")
    told = []
    with a.shared(on_wait=told.append):
        with b.shared(on_wait=told.append):  # another worker's operation, at the same time
            pass
    assert told == []


def test_an_operation_waits_for_a_timed_window_and_says_when_it_waits_and_when_it_has_the_gpu(tmp_path):
    timer, worker = GpuLock(tmp_path / "gpu.lock"), GpuLock(tmp_path / "gpu.lock")
    told, inside, release, done = [], threading.Event(), threading.Event(), threading.Event()

    def time_it():
        with timer.exclusive():
            inside.set()
            release.wait(WAIT_S)
            assert not done.is_set()  # nothing ran in the window

    def operation():
        with worker.shared(on_wait=told.append):
            done.set()
    timing = threading.Thread(target=time_it)
    timing.start()
    assert inside.wait(WAIT_S)
    op = threading.Thread(target=operation)
    op.start()
    assert _until(lambda: told == [True])
    assert not done.is_set()
    release.set()
    timing.join(WAIT_S)
    op.join(WAIT_S)
    assert done.is_set() and told == [True, False]


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
