"""A submission whose parts are graded in turn (a GPU batch's job, the emulator) runs them in one
worker (grader.grading.worker_process.WorkerSlot, the worker's --serve): the same grades as a worker
per part; a worker that hung is not kept, and the part after it gets a new one; the worker left
waiting ends with the grading."""

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
from grader.grading.runner import grade
from tests.conftest import BROKEN, ROOT, SOLUTIONS, gpu_available, write_config

EMULATOR = Selection("emulator", "test")


def _worker_pids(folder: Path) -> dict[str, set[int]]:
    """``{part: pids of the workers that graded it}``, from the CPU traces each job leaves where
    ``SCANGRADE_CASE_TIMES`` names ``folder`` (``PART-cpu-PID-TIME.json``)."""
    pids: dict[str, set[int]] = {}
    for f in folder.glob("*-cpu-*.json"):
        part = json.loads(f.read_text())["part"]
        pids.setdefault(part, set()).add(int(f.name[len(part) + len("-cpu-"):].split("-")[0]))
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
    assert all(p.phases_s["startup"] < 0.25 for p in in_turn.parts[1:])  # no interpreter to start

    shutil.rmtree(traces)
    apart = grade(SOLUTIONS, cfg=small_config, selection=backend, part_jobs=len(small_config.parts))
    assert len(set().union(*_worker_pids(traces).values())) == len(apart.parts)  # a worker each
    assert in_turn.passed and apart.passed
    assert ([(p.key, p.status, p.points, [(c.name, c.status, c.kind) for c in p.cases]) for p in in_turn.parts]
            == [(p.key, p.status, p.points, [(c.name, c.status, c.kind) for c in p.cases]) for p in apart.parts])


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (Linux) to look for the workers")
def test_a_worker_that_hung_is_not_kept_and_the_next_part_gets_a_new_one(tmp_path, monkeypatch):
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
    res = grade(sub, cfg=cfg.override(timeouts={"case_s": 3.0}), selection=EMULATOR, parts=order, part_jobs=1,
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


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available()[0], reason=f"no usable CUDA GPU: {gpu_available()[1]}")
def test_a_kept_context_serves_the_next_part_but_not_after_a_hidden_case():
    """In a serving worker (keep_context) the next backend takes the context the last one left; after
    a hidden case ran in it, a new one (memory the part freed may hold the private inputs)."""
    script = (
        "from grader.backends.pycuda_backend import (PyCudaBackend, keep_context, kept_context_works,\n"
        "                                             release_kept_contexts)\n"
        "keep_context()\n"
        "a = PyCudaBackend(); ctx = a._context; a.close()\n"
        "b = PyCudaBackend(); assert b._context is ctx and kept_context_works() is True\n"
        "b.ran_hidden = True; b.close()\n"
        "c = PyCudaBackend(); assert c._context is not ctx; c.close()\n"
        "release_kept_contexts()\n"  # else PyCUDA aborts at exit
        "print('checked')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0 and "checked" in run.stdout, run.stderr


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
