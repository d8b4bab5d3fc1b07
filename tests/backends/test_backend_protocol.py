"""The backend protocol (grader/backends/base.py) is all the grading asks of a backend: a third
backend (tests/stub_backend.py: the emulator's kernels, the protocol's defaults for every capability
beyond them) added as one row of the table (grader.backends.BACKENDS) grades a part through the
worker, its cases run plainly (no checks of its own), each run's mode given to it as a value."""

from __future__ import annotations

import pytest

from grader.assignment.config import load_config
from grader.backends import BACKENDS, backend_kind
from grader.backends.base import Backend, RunMode
from grader.grading import protocol
from grader.grading.case.cases import CheckMode
from grader.grading.case.run import SHARED_FILLS
from grader.grading.worker.main import main as worker_main
from tests import stub_backend
from tests.conftest import BROKEN, SOLUTIONS, VERDICTS

KEY = "part2_blelloch"


@pytest.fixture
def stub(monkeypatch):
    """The stub's row in the table, and the backends made from it (a list, filled as the worker makes one)."""
    made: list[stub_backend.StubBackend] = []
    create = stub_backend.create

    def recording(**kwargs):
        made.append(create(**kwargs))
        return made[-1]

    monkeypatch.setitem(BACKENDS, stub_backend.KIND.name, stub_backend.KIND)
    monkeypatch.setattr(stub_backend, "create", recording)
    return made


def grade_in_worker(source, tmp_path):
    """Part 2 of ``source`` graded by a worker in this process on the stub, checks on (int32 only):
    its case results, in order."""
    cfg = load_config(VERDICTS / "config.yaml").override(
        emulator={"workers": 1}, parts={KEY: {"dtypes": ["int32"]}})
    events = tmp_path / "events.jsonl"
    job = protocol.Job.for_part(cfg, part=KEY, source=source, backend="stub", events=events, checks=True)
    assert {c.check for c in job.cases} == {CheckMode.CHECKED}  # as the cases are decided, whatever the backend
    path = tmp_path / "job.json"
    path.write_text(job.to_json())
    assert worker_main([str(path)]) == 0
    reader = protocol.EventReader(events)
    reader.poll()
    assert not [e.message for e in reader.items if isinstance(e, protocol.WorkerError)]
    return [e.result for e in reader.items if isinstance(e, protocol.CaseDone)]


def test_a_third_backend_is_a_row_of_the_table_and_declares_what_it_cannot_do(stub):
    kind = backend_kind("stub")
    backend = kind.create(workers=1)
    try:
        assert isinstance(backend, Backend) and backend.name == "stub"
        assert not backend.checks_accesses and backend.schedules == () and backend.thread_order is None
        assert backend.take_warnings() == [] and backend.gpu_lock_seconds() == {}
        assert backend.toolchain is None and backend.broken is False
        with pytest.raises(ValueError, match="no thread order 'random'"):
            backend.set_schedule("random", seed=1)
    finally:
        backend.close()


def test_a_correct_part_passes_on_a_third_backend_its_cases_run_plainly(stub, tmp_path):
    results = grade_in_worker(SOLUTIONS / f"{KEY}.cu", tmp_path)
    assert results and all(r.status == "pass" for r in results), [r.message for r in results]
    assert {r.checker for r in results} == {None}  # it checks nothing of its own, and says so
    (backend,) = stub
    assert backend.modes and not any(m.checks or m.sample for m in backend.modes)
    assert {m.shared_fill for m in backend.modes} == {SHARED_FILLS[0], None}  # a case's runs, then the default
    assert backend.modes[-1] == RunMode()


def test_a_wrong_output_fails_on_a_third_backend_after_a_run_with_the_second_fill(stub, tmp_path):
    """An inclusive scan where the exclusive one is asked for: every case's output is wrong, and the
    case runs again with the second fill of shared memory (given as the run's mode) to tell whether
    unwritten shared memory is the cause; it is not."""
    results = grade_in_worker(BROKEN / "part2_inclusive.cu", tmp_path)
    assert results and all(r.status == "fail" and r.kind == "mismatch" for r in results), \
        [(r.name, r.kind, r.message) for r in results]
    (backend,) = stub
    assert SHARED_FILLS[1] in {m.shared_fill for m in backend.modes}
