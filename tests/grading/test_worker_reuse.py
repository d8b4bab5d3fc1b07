"""A submission whose parts are graded in turn (a GPU batch's job, the emulator) runs them in one
worker (grader.grading.worker_process.WorkerSlot, the worker's --serve): the same grades as a worker
per part; a worker that hung is not kept, and the part after it gets a new one; the worker left
waiting ends with the grading, or in a batch goes on to the job's next submission, with that
submission's grading token and, on a GPU, nothing of the last one's left in its context."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.assignment.config import load_config
from grader.backends import Selection
from grader.grading import protocol
from grader.toolchain.cache import CACHE_OWNER_ENV
from grader.classwork.batch import batch
from grader.grading.runner import grade
from grader.render.formats import batch_reports
from tests.conftest import BROKEN, ROOT, SOLUTIONS, gpu_available, write_config

EMULATOR = Selection("emulator", "test")


def _worker_pids(folder: Path) -> dict[str, set[int]]:
    """``{part: pids of the workers that graded it}``, from the CPU traces each job leaves where
    ``SCANGRADE_CASE_TIMES`` names ``folder`` (``PART-cpu-PID-TIME.json``: :func:`_pids_in_order`)."""
    pids: dict[str, set[int]] = {}
    for part, pid in _pids_in_order(folder):
        pids.setdefault(part, set()).add(pid)
    return pids


def _worker_children() -> list[int]:
    """Live children of this process that are part workers."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] not in ("Z", "X") and int(fields[1]) == os.getpid() and "grader.grading.worker" in cmd:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (Linux) to look for the workers")
def test_parts_graded_in_turn_share_one_worker_and_grade_as_workers_of_their_own(tmp_path, monkeypatch,
                                                                                  small_config, backend):
    """On a GPU too: there the worker keeps its CUDA context from part to part."""
    traces = tmp_path / "traces"
    monkeypatch.setenv("SCANGRADE_CASE_TIMES", str(traces))
    in_turn = grade(SOLUTIONS, cfg=small_config, selection=backend, part_jobs=1)
    assert not _worker_children()  # the worker left waiting after the last part ended with the grading
    pids = _worker_pids(traces)
    assert set(pids) == {p.key for p in in_turn.parts}
    assert len(set().union(*pids.values())) == 1  # one worker graded every part
    first = in_turn.parts[0].phases_s["startup"]  # an interpreter started: the measure, on this machine now
    assert all(p.phases_s["startup"] < first / 2 for p in in_turn.parts[1:]), in_turn.parts  # no interpreter to start

    shutil.rmtree(traces)
    apart = grade(SOLUTIONS, cfg=small_config, selection=backend, part_jobs=len(small_config.parts))
    assert len(set().union(*_worker_pids(traces).values())) == len(apart.parts)  # a worker each
    assert in_turn.passed and apart.passed
    assert ([(p.key, p.status, p.points, [(c.name, c.status, c.kind) for c in p.cases]) for p in in_turn.parts]
            == [(p.key, p.status, p.points, [(c.name, c.status, c.kind) for c in p.cases]) for p in apart.parts])


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (Linux) to look for the workers")
def test_a_worker_that_hung_is_not_kept_and_the_next_part_gets_a_new_one(tmp_path, monkeypatch, pace):
    """Part 2 passes, Part 4 does not compile, Part 1 hangs at its only size (its worker is killed at
    the deadline); Part 3, graded after them in the same thread, runs in a new worker and passes."""
    cfg = load_config(write_config(tmp_path, sizes={"part2_blelloch": [1, 33, 200], "part4_any_size": [257],
                                                    "part1_naive": [33], "part3_conflict_free": [1, 200]}))
    sub = tmp_path / "sub"
    sub.mkdir()
    for name, folder in (("part1_naive.cu", None), ("part2_blelloch.cu", SOLUTIONS),
                         ("part3_conflict_free.cu", SOLUTIONS), ("part4_any_size.cu", None)):
        source = folder / name if folder else BROKEN / {"part1_naive.cu": "part1_hang.cu",
                                                        "part4_any_size.cu": "part4_compile_error.cu"}[name]
        (sub / name).write_bytes(source.read_bytes())
    traces = tmp_path / "traces"
    monkeypatch.setenv("SCANGRADE_CASE_TIMES", str(traces))
    order = ["part2_blelloch", "part4_any_size", "part1_naive", "part3_conflict_free"]
    res = grade(sub, cfg=cfg.override(timeouts={"case_s": pace.seconds(1.5)}), selection=EMULATOR, parts=order, part_jobs=1,
                checks=False)  # without the checks the spin is a hang, not a deadlock found at once
    by_key = {p.key: p for p in res.parts}
    assert by_key["part4_any_size"].status == "compile-error"
    assert by_key["part1_naive"].status == "timeout"
    for key in ("part2_blelloch", "part3_conflict_free"):
        assert by_key[key].status == "pass" and by_key[key].points == len(by_key[key].cases)
    pids = _worker_pids(traces)
    assert "part1_naive" not in pids  # killed at its deadline: no trace
    assert pids["part3_conflict_free"].isdisjoint(pids["part2_blelloch"])  # a new worker after the hang
    assert not _worker_children()


def _run_checked(script: str, *, timeout: float) -> None:
    """Run ``script`` in a fresh Python (a CUDA context of its own; PyCUDA aborts a process that ends
    with one current) and assert it ended cleanly after printing ``checked``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=timeout)
    assert run.returncode == 0 and "checked" in run.stdout, run.stderr


def _pids_in_order(folder: Path) -> list[tuple[str, int]]:
    """``(part, worker pid)`` of every job that left a CPU trace in ``folder`` (where
    ``SCANGRADE_CASE_TIMES`` named it: ``PART-cpu-PID-TIME.json``), in the order they ended."""
    rows = []
    for f in folder.glob("*-cpu-*.json"):
        part = json.loads(f.read_text())["part"]
        pid, stamp = f.name[len(part) + len("-cpu-"):].removesuffix(".json").split("-", 1)
        rows.append((float(stamp), part, int(pid)))
    return [(part, pid) for _, part, pid in sorted(rows)]


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (Linux) to look for the workers")
def test_a_batch_job_keeps_its_worker_from_one_submission_to_the_next(tmp_path, monkeypatch, pace):
    """One job, three submissions: alice's parts and dave's first run in one worker; dave's Part 1
    hangs (its worker is killed at the deadline), so his Part 2 and erin's parts run in a new one.
    Each submission gets the grade it gets graded alone."""
    root = tmp_path / "class"
    for who in ("alice", "dave", "erin"):
        shutil.copytree(SOLUTIONS, root / who)
    shutil.copy(BROKEN / "part1_hang.cu", root / "dave" / "part1_naive.cu")
    cfg = load_config(write_config(tmp_path, sizes={"part1_naive": [5, 128], "part2_blelloch": [7]}))
    cfg = cfg.override(timeouts={"case_s": pace.seconds(1.5)})
    traces = tmp_path / "traces"
    monkeypatch.setenv("SCANGRADE_CASE_TIMES", str(traces))
    rows = dict(batch(root, out=tmp_path / "out", cfg=cfg, selection=EMULATOR, reports=batch_reports, jobs=1,
                      checks=False))  # without the checks the spin is a hang, not a deadlock found at once
    assert not _worker_children()  # the worker left waiting ended with the batch
    order = _pids_in_order(traces)
    assert [part for part, _ in order] == ["part1_naive", "part2_blelloch", "part2_blelloch", "part1_naive",
                                           "part2_blelloch"]  # dave's Part 1 left no trace: killed
    first, second = order[0][1], order[2][1]
    assert [pid for _, pid in order] == [first, first, second, second, second] and first != second

    def grades(result):
        return [(p.key, p.status, p.points, [(c.name, c.status) for c in p.cases]) for p in result.parts]
    alone = grade(root / "erin", cfg=cfg, selection=EMULATOR, part_jobs=1, checks=False)
    assert grades(rows["alice"]) == grades(rows["erin"]) == grades(alone) and alone.passed
    assert [p.status for p in rows["dave"].parts] == ["timeout", "pass"]


def test_a_serving_worker_takes_each_jobs_grading_token_and_clears_the_gpu_between_gradings(monkeypatch):
    """The compile cache counts each submission's quota by the token its jobs carry, not by the one in
    the environment the worker started with; the GPU is cleared where the grading changes, only there."""
    import grader.backends.pycuda as pycuda
    import grader.grading.worker.main as worker_main

    cleared = []
    monkeypatch.setattr(pycuda, "start_grading", lambda: cleared.append(True))
    monkeypatch.setattr(worker_main, "_last_grading", None)
    monkeypatch.setenv(CACHE_OWNER_ENV, "the first submission's")  # restored after the test
    for token, clears in (("a", 0), ("a", 0), ("b", 1), ("b", 1), ("a", 2)):
        worker_main._begin_grading(protocol.Job.model_construct(grading=token))
        assert os.environ[CACHE_OWNER_ENV] == token and len(cleared) == clears


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available()[0], reason=f"no usable CUDA GPU: {gpu_available()[1]}")
def test_a_kept_context_is_cleared_for_the_next_submission_or_dropped_after_local_memory():
    """start_grading: the pool's free blocks read zeros in the same context; a context where a module
    with local memory, or one calling the device heap, was loaded is dropped, and the next backend makes
    a new one."""
    script = (
        "import tempfile\n"
        "from pathlib import Path\n"
        "import numpy as np\n"
        "from grader.core.kernels import KernelSpec, Param\n"
        "from grader.backends.pycuda import (PyCudaBackend, keep_context, pool_device_memory,\n"
        "                                     release_kept_contexts, start_grading, POOL_MIN_BYTES)\n"
        "keep_context(); pool_device_memory()\n"
        "spec = KernelSpec('k', (Param('out', 'int*', 'ptr'), Param('n', 'int', 'int')))\n"
        "k = 'extern \"C\" __global__ void k(int* out, int n) '\n"
        "plain = k + '{ out[threadIdx.x] = n; }'\n"
        "local = k + '{ int a[64]; for (int i = 0; i < 64; i++) a[(i * 7 + n) & 63] = i; out[threadIdx.x] = a[n & 63]; }'\n"
        "heap = k + '{ int* p = (int*)malloc(8); out[0] = p != 0; free(p); }'\n"
        "def load(b, text):\n"
        "    with tempfile.TemporaryDirectory() as work:\n"
        "        return b.compile(source=text, filename='k.cu', kernels=[spec], workdir=Path(work))\n"
        "a = PyCudaBackend(); ctx = a._context\n"
        "load(a, plain)\n"
        "n = POOL_MIN_BYTES // 4\n"
        "x = a.alloc(n, np.int32); a.to_device(np.full(n, 7, np.int32), x); where = x.address; del x\n"
        "a.close(); start_grading()\n"
        "b = PyCudaBackend(); assert b._context is ctx, 'cleared, not dropped'\n"
        "y = b.alloc(n, np.int32); assert y.address == where and not b.to_host(y).any(), 'the block reads zeros'\n"
        "del y\n"
        "for text in (local, heap):\n"
        "    load(b, text); ctx = b._context; b.close(); start_grading()\n"
        "    b = PyCudaBackend(); assert b._context is not ctx, 'dropped'\n"
        "    load(b, plain); ctx = b._context; b.close(); start_grading()\n"
        "    b = PyCudaBackend(); assert b._context is ctx, 'a plain module leaves nothing'\n"
        "b.close()\n"
        "release_kept_contexts()\n"
        "print('checked')\n")
    _run_checked(script, timeout=300)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available()[0], reason=f"no usable CUDA GPU: {gpu_available()[1]}")
def test_a_kept_context_serves_the_next_part_but_not_after_a_hidden_case():
    """In a serving worker (keep_context) the next backend takes the context the last one left; after
    a hidden case ran in it, a new one (memory the part freed may hold the private inputs)."""
    script = (
        "from grader.backends.pycuda import (PyCudaBackend, keep_context, kept_context_works,\n"
        "                                     release_kept_contexts)\n"
        "keep_context()\n"
        "a = PyCudaBackend(); ctx = a._context; a.close()\n"
        "b = PyCudaBackend(); assert b._context is ctx and kept_context_works() is True\n"
        "b.ran_hidden = True; b.close()\n"
        "c = PyCudaBackend(); assert c._context is not ctx; c.close()\n"
        "release_kept_contexts()\n"  # else PyCUDA aborts at exit
        "print('checked')\n")
    _run_checked(script, timeout=120)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available()[0], reason=f"no usable CUDA GPU: {gpu_available()[1]}")
def test_a_pooled_buffer_is_reused_in_its_context_and_the_flush_buffer_is_kept():
    """In a worker that pools (pool_device_memory), a case's buffer of a pooled size is the last one of
    that size freed, in the same context and the next part's (a kept context), not after a hidden case;
    the timed runs' flush buffer is allocated once for the context; a small buffer is the driver's."""
    script = (
        "import numpy as np\n"
        "from grader.backends.pycuda import (PyCudaBackend, keep_context, pool_device_memory,\n"
        "                                     release_kept_contexts, POOL_MIN_BYTES)\n"
        "keep_context(); pool_device_memory()\n"
        "a = PyCudaBackend()\n"
        "n = POOL_MIN_BYTES // 4 + 5\n"
        "x = a.alloc(n, np.int32); where = x.address; del x\n"
        "y = a.alloc(n - 3, np.int32); assert y.address == where, 'the freed block of that size'\n"
        "z = a.alloc(n, np.int32); assert z.address != where, 'a block in use is not handed out twice'\n"
        "a.to_device(np.arange(n - 3, dtype=np.int32), y)\n"
        "assert (a.to_host(y) == np.arange(n - 3)).all()\n"
        "small = a.alloc(16, np.int32); assert not hasattr(small._allocation, 'scratch')\n"
        "del y, z, small\n"
        "t = lambda: a.time_interleaved_ms([('copy', lambda: None, None)], warmup=0, runs=1, flush_bytes=1 << 20)\n"
        "t(); flush = a._scratch.flush; t(); assert a._scratch.flush is flush and flush is not None\n"
        "pooled = {int(blk) for blocks in a._scratch.free_blocks.values() for blk in blocks}\n"
        "assert where in pooled and len(pooled) == 2\n"
        "a.close()\n"
        "b = PyCudaBackend(); assert b._scratch is a._scratch\n"
        "w = b.alloc(n, np.int32); assert w.address in pooled, 'the next part takes the blocks of the last'\n"
        "del w; b.ran_hidden = True; scratch = b._scratch; b.close()\n"
        "assert scratch.closed and scratch.held == 0 and scratch.flush is None\n"
        "c = PyCudaBackend(); assert c._scratch is not scratch and c._scratch.held == 0\n"
        "c.close()\n"
        "release_kept_contexts()\n"
        "print('checked')\n")
    _run_checked(script, timeout=120)


def test_a_serving_worker_silent_after_its_last_event_is_ended_not_kept(tmp_path, monkeypatch, small_config):
    """A worker that reported its job's end but never says it is ready (here a process that only
    sleeps, standing in for one stuck after ``done``) is ended READY_GRACE_S later, not at the part's
    deadline, and is not kept for the next part; the job's events are all read."""
    import time

    from grader.grading import protocol, worker_process

    events_path = tmp_path / "events.jsonl"
    with protocol.EventWriter(events_path) as writer:
        writer.emit(protocol.Done())
    ready_r, ready_w = os.pipe()
    stuck = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], stdin=subprocess.PIPE,
                             start_new_session=True)
    monkeypatch.setattr(worker_process, "_start", lambda *args, **kwargs: (stuck, ready_r))
    monkeypatch.setattr(worker_process, "READY_GRACE_S", 0.5)
    slot = worker_process.WorkerSlot()
    events = protocol.EventReader(events_path)
    started = time.monotonic()
    try:
        _, stopped, hung = worker_process.run_worker(tmp_path / "job.json", events, cfg=small_config,
                                                     tmpdir=tmp_path, on_event=None, slot=slot)
    finally:
        os.close(ready_w)
        if stuck.poll() is None:
            stuck.kill()
    assert time.monotonic() - started < small_config.timeouts.part_s / 2  # not the part's deadline
    assert stopped is None and not hung and [e.name for e in events.items] == ["done"]
    assert stuck.poll() is not None and slot.proc is None  # ended, not kept


class _FakeDriver:
    """A stand-in for pycuda.driver's allocations: ``capacity`` bytes, each allocation live until freed."""

    class MemoryError(Exception):
        pass

    def __init__(self, capacity: int) -> None:
        self.capacity, self.live, self.calls = capacity, 0, 0
        driver = self

        class Allocation:
            def __init__(self, nbytes: int) -> None:
                self.nbytes, self.freed = nbytes, False

            def free(self) -> None:
                assert not self.freed, "freed twice"
                self.freed = True
                driver.live -= self.nbytes

        self.Allocation = Allocation

    def mem_alloc(self, nbytes: int):
        self.calls += 1
        if self.live + nbytes > self.capacity:
            raise self.MemoryError("out of memory")
        self.live += nbytes
        return self.Allocation(nbytes)


def test_the_scratch_keeps_freed_blocks_within_its_budget_and_frees_them_when_memory_runs_out():
    """A context's scratch (grader.backends.pycuda.memory.Scratch) hands a freed block of the same size
    back without a driver call, keeps no more than its share of the GPU's memory unused (the flush
    buffer included), frees what it keeps and tries once more when the driver runs out of memory, and
    keeps nothing once closed."""
    from grader.backends.pycuda.memory import SCRATCH_SHARE, Scratch

    mib = 2**20
    driver = _FakeDriver(capacity=40 * mib)
    scratch = Scratch(driver, total_bytes=SCRATCH_SHARE * 10 * mib)  # keeps at most 10 MiB unused
    a, b = scratch.alloc(4 * mib), scratch.alloc(4 * mib)
    scratch.give(a, 4 * mib)
    assert scratch.take(2 * mib) is None and scratch.take(4 * mib) is a and scratch.held == 0
    scratch.give(a, 4 * mib)
    scratch.give(b, 4 * mib)
    c = scratch.alloc(4 * mib)
    scratch.give(c, 4 * mib)  # 12 MiB would be over the budget: c goes back to the driver, not kept
    assert scratch.held == 8 * mib and c not in scratch.free_blocks[4 * mib]
    c.free()

    flush, kept = scratch.flush_buffer(4 * mib)  # 8 + 4 > 10: a flush buffer the caller frees
    assert not kept
    flush.free()
    assert scratch.take(4 * mib) is not None  # one block in use again: 4 MiB unused now
    flush, kept = scratch.flush_buffer(4 * mib)
    assert kept and scratch.flush_buffer(4 * mib) == (flush, True)
    calls = driver.calls

    big = scratch.alloc(30 * mib)  # 4 + 4 + 4 live: only after the unused block and the flush buffer go
    assert driver.calls == calls + 2 and scratch.held == 0 and scratch.flush is None and flush.freed
    with pytest.raises(_FakeDriver.MemoryError):
        scratch.alloc(40 * mib)
    big.free()

    d = scratch.alloc(2 * mib)
    scratch.give(d, 2 * mib)
    scratch.close()
    assert d.freed and scratch.held == 0
    e = scratch.alloc(2 * mib)
    scratch.give(e, 2 * mib)  # closed: not kept (its own finalizer frees it, as without a pool)
    assert scratch.held == 0 and not e.freed
