"""The runner's part loop in its pieces (grader/grading/part_runner.py): the events of a part's workers folded
into what they reported, how a worker that stopped without its last word is told, and when a new
worker takes over after a case that hung or faulted on the GPU."""

from __future__ import annotations

import signal
import time

from grader.grading import protocol
from grader.core.results import CaseResult
from grader.grading.part_runner import MAX_HANGS_IN_A_ROW, _how_it_stopped, _Reported, _Workers

NAMES = [f"n={n} int32" for n in range(1, 9)]


def _case(name: str, status: str = "pass") -> CaseResult:
    return CaseResult(name=name, n=1, dtype="int32", seed=7, status=status, points=1.0 if status == "pass" else 0.0,
                      max_points=1.0, kind=None if status == "pass" else "mismatch")


def test_the_fold_keeps_what_every_worker_reported_and_what_the_last_one_was_doing():
    reported = _Reported()
    for ev in (protocol.Device({"backend": "emulator"}), protocol.Compiled(), protocol.CaseStart(NAMES[0]),
               protocol.CaseDone(_case(NAMES[0])), protocol.ProfileStart()):
        reported.add(ev)
    assert reported.stage() == "the bank-conflict profile" and reported.end is None
    reported.add(protocol.ProfileStart(counts="roofline"))  # a timed part on the emulator: its own label
    assert reported.stage() == protocol.PROFILE_LABELS["roofline"] and "roofline" in reported.stage()
    assert protocol.decode(protocol.encode(protocol.ProfileStart(counts="roofline"))).counts == "roofline"
    reported.next_worker()  # a new worker: what the part reported stays
    assert reported.stage() == "compiling" and [c.name for c in reported.cases] == [NAMES[0]]
    for ev in (protocol.DeviceUpdate({"checker": "x"}), protocol.Compiled(), protocol.HiddenStart(),
               protocol.CaseStart(NAMES[1])):
        reported.add(ev)
    assert reported.stage() == f"case {NAMES[1]}" and reported.device == {"backend": "emulator", "checker": "x"}
    reported.add(protocol.CaseDone(_case(NAMES[1], "fail")))
    reported.add(protocol.Done())
    assert isinstance(reported.end, protocol.Done) and reported.passed() == "fail" and reported.current is None


def test_cases_that_hang_in_a_row_end_the_part_and_a_spent_part_starts_no_worker():
    workers = _Workers(NAMES, deadline=time.monotonic() + 60)
    assert workers.after_hang(NAMES[0]) == "retry" and workers.start == 1
    assert [workers.after_hang(name) for name in NAMES[4:4 + MAX_HANGS_IN_A_ROW]] == \
        ["retry"] * (MAX_HANGS_IN_A_ROW - 1) + ["in a row"]
    spent = _Workers(NAMES, deadline=time.monotonic() - 1)
    assert spent.after_hang(NAMES[0]) == "stop"


def test_a_worker_that_stopped_is_told_by_how_it_stopped(tmp_path):
    reported = _Reported()
    reported.add(protocol.Compiled())
    reported.add(protocol.CaseStart(NAMES[3]))
    (tmp_path / "stdout.txt").write_text("KERNEL SAYS HI\n")
    (tmp_path / "stderr.txt").write_text("Traceback: the grader's own\n")
    status, why = _how_it_stopped("timed out after 5 s", None, reported, tmp_path)
    assert status == "timeout" and why.startswith(f"timed out after 5 s during case {NAMES[3]}: the kernel may never")
    assert why.endswith("last output of the kernel:\nKERNEL SAYS HI")
    # a worker's death is the grader's, never the submission's (whose code runs in the executor)
    status, why = _how_it_stopped(None, -signal.SIGKILL, reported, tmp_path)
    assert status == "error" and "worker was killed (SIGKILL" in why and "KERNEL" not in why, why
    status, why = _how_it_stopped(None, 1, reported, tmp_path)
    assert status == "error" and "exit status 1" in why and "the grader's own" in why and "KERNEL" not in why


def test_a_worker_stopped_between_cases_is_told_what_it_was_waiting_for():
    """'during setting up' never describes a kernel: a part stopped while its case waited for the GPU,
    between timed sizes, or before its first case says which."""
    reported = _Reported()
    for ev in (protocol.Compiled(), protocol.CaseStart(NAMES[0]), protocol.GpuWait(NAMES[0])):
        reported.add(ev)
    assert reported.stage() == f"the wait for the GPU before case {NAMES[0]} (the emulator's checks had passed it)"
    reported.add(protocol.CaseStart(NAMES[0]))
    assert reported.stage() == f"case {NAMES[0]}"
    reported.add(protocol.CaseDone(_case(NAMES[0], "pass")))
    reported.add(protocol.TimingStart())
    assert reported.stage() == "the timing, between two timed sizes"
    fresh = _Reported()
    fresh.add(protocol.Compiled())
    assert "setting up" not in fresh.stage() and "emulator's compile" in fresh.stage()
