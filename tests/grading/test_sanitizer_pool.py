"""The submission's pool of compute-sanitizer children (grader/grading/sanitizer_pool.py) and the workers'
use of it (grader.grading.sanitizer.check_cases with ``pool``), on any machine: a stand-in for
compute-sanitizer runs the pool child's real serving loop (``grader.grading.sanitizer_child._serve``) with a
replay that needs no GPU and prints, per case, what compute-sanitizer prints for a race, or faults
(the process ends, as when a kernel loses its context), or hangs. The real child runs on a GPU in
tests/grading/test_sanitizer.py and the GPU tests."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from grader.grading.sanitizer import check_cases
from grader.grading.sanitizer_pool import SanitizerPool

from tests.conftest import ROOT

CHILD = textwrap.dedent('''
    import os, sys, time
    from pathlib import Path
    import grader.grading.sanitizer_child
    from grader.grading.sanitizer_child import _serve
    from grader.grading.sanitizer_report import MARK

    class Replay:
        """Per case index, the file FAKE_PLAN says: race (a racecheck report), flood (three reports of
        another line), fault (the process ends after the case), hang (nothing more is printed); other
        cases are clean. Like the real replay, it stops before a case when stop() says so."""
        def say(self, token, text):
            sys.stdout.write(f"\\n{MARK} {token} {text}\\n"); sys.stdout.flush()
        def run(self, job, token, cubins, cases, stop=None):
            text = Path(os.environ["FAKE_PLAN"]).read_text()
            plan = dict(item.split("=") for item in text.split(",") if item)
            with open(os.environ["FAKE_SEEN"], "a") as f:
                f.write(f"{os.getpid()} {job} {[int(i) for i, _ in cases]}\\n")
            for index, _dtype in cases:
                if stop is not None and stop():
                    return
                self.say(token, f"case {index}")
                if plan.get(str(index)) == "flood":
                    for _ in range(3):
                        print("========= Error: Race reported between Write access at k+0x30 in part1_naive.cu:9")
                        print("=========     and Read access at k+0x40 in part1_naive.cu:9 [1 hazards]")
                        print("=========")
                    sys.stdout.flush()
                what = plan.get(str(index))
                if what == "hang":
                    time.sleep(3600)
                if what == "race":
                    print("========= Error: Race reported between Write access at k+0x10 in part1_naive.cu:7")
                    print("=========     and Read access at k+0x20 in part1_naive.cu:8 [3 hazards]")
                    print("=========")
                self.say(token, f"done {index}")
                if what == "fault":
                    os._exit(0)

    if os.environ.get("FAKE_BUDGET"):
        grader.grading.sanitizer_child.PRINT_BUDGET = int(os.environ["FAKE_BUDGET"])
    # argv: the tool's options, then PYTHON -m grader.grading.sanitizer_child --serve FOLDER
    _serve(Path(sys.argv[sys.argv.index("--serve") + 1]), replay=Replay())
''')


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A stand-in compute-sanitizer (an executable that runs the fake child), the file where each
    child writes the requests it served, and the file of what each case does (read at each request)."""
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    exe = tmp_path / "compute-sanitizer"
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} {child} \"$@\"\n")
    exe.chmod(0o755)
    seen = tmp_path / "seen.txt"
    seen.touch()
    monkeypatch.setenv("FAKE_SEEN", str(seen))
    monkeypatch.setenv("FAKE_PLAN", str(tmp_path / "plan.txt"))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    return exe, seen, tmp_path / "plan.txt"


def _served(seen: Path) -> list[tuple[int, str, list[int]]]:
    out = []
    for line in seen.read_text().splitlines():
        pid, job, cases = line.split(" ", 2)
        out.append((int(pid), job, eval(cases)))  # noqa: S307 - our own child's list of ints
    return out


def _check(exe, pool, tmp_path, cases, job="job-a.json", **kw):
    work = tmp_path / f"work-{job}"
    work.mkdir(exist_ok=True)
    return check_cases(sanitizer=str(exe), job=Path(job), cubins={"int32": Path("x.cubin")},
                       cases=[(i, "int32") for i in cases], workdir=work, case_timeout_s=kw.pop("timeout", 30.0),
                       tools=kw.pop("tools", ("racecheck",)), first_output_s=30.0, pool=pool, **kw)


def test_parts_share_the_pools_children_and_findings_go_to_their_case(fake, tmp_path, monkeypatch):
    exe, seen, plan = fake
    plan.write_text("2=race")
    with SanitizerPool(str(exe), tmp_path / "pool", tools=("racecheck",), slots={"racecheck": 1}) as pool:
        first = _check(exe, pool.folder, tmp_path, [0, 1, 2, 3], job="job-a.json")
        second = _check(exe, pool.folder, tmp_path, [0, 1, 2], job="job-b.json")
    served = _served(seen)
    assert [(job, cases) for _, job, cases in served] == [("job-a.json", [0, 1, 2, 3]), ("job-b.json", [0, 1, 2])]
    assert served[0][0] == served[1][0], "the second part was served by the same child, not a new one"
    for result, cases in ((first, [0, 1, 2, 3]), (second, [0, 1, 2])):
        assert sorted(result) == cases and all(result[i].complete for i in cases)
        assert [f.kind for f in result[2].findings] == ["race"]
        assert (result[2].findings[0].line, result[2].findings[0].other_line) == (7, 8)
        assert all(not result[i].findings for i in cases if i != 2)


def test_a_fault_ends_the_child_and_the_cases_after_it_go_to_its_replacement(fake, tmp_path, monkeypatch):
    exe, seen, plan = fake
    plan.write_text("1=fault")  # racecheck: memcheck spreads the cases after a fault (the test below)
    with SanitizerPool(str(exe), tmp_path / "pool", tools=("racecheck",), slots={"racecheck": 1}) as pool:
        result = _check(exe, pool.folder, tmp_path, [0, 1, 2, 3], tools=("racecheck",))
    served = _served(seen)
    assert [cases for _, _, cases in served] == [[0, 1, 2, 3], [2, 3]]
    assert served[0][0] != served[1][0], "the cases after the fault ran in a new child"
    assert sorted(result) == [0, 1, 2, 3] and all(result[i].complete for i in result)


def test_a_child_that_printed_its_budget_of_reports_leaves_the_cases_after_to_a_new_one(fake, tmp_path, monkeypatch):
    """compute-sanitizer stops printing after --print-limit reports in a process's life: a child
    that has printed PRINT_BUDGET of them takes no further case, so a race at a later case is still
    reported (with the limit spent, racecheck saw it and printed nothing)."""
    exe, seen, plan = fake
    monkeypatch.setenv("FAKE_BUDGET", "5")
    plan.write_text("0=flood,1=flood,2=race")  # 3 reports, then 6 (>= 5): case 2 goes to a new child
    with SanitizerPool(str(exe), tmp_path / "pool", tools=("racecheck",), slots={"racecheck": 1}) as pool:
        result = _check(exe, pool.folder, tmp_path, [0, 1, 2, 3])
        served = _served(seen)
        assert [cases for _, _, cases in served] == [[0, 1, 2, 3], [2, 3]]
        assert served[0][0] != served[1][0]
        assert sorted(result) == [0, 1, 2, 3] and all(result[i].complete for i in result)
        assert [f.line for f in result[1].findings] == [9] and [f.line for f in result[2].findings] == [7]
        # the child that spent its budget is gone, the new one (budget left) is idle for the next part
        plan.write_text("")
        _check(exe, pool.folder, tmp_path, [0], job="job-b.json")
    assert _served(seen)[-1][0] == served[1][0]


def test_a_silent_child_is_stopped_replaced_and_the_case_left_to_its_plain_run(fake, tmp_path, monkeypatch, pace):
    exe, seen, plan = fake
    plan.write_text("1=hang")
    with SanitizerPool(str(exe), tmp_path / "pool", tools=("synccheck",)) as pool:  # silent 1 s: on an idle machine
        result = _check(exe, pool.folder, tmp_path, [0, 1, 2], tools=("synccheck",), timeout=pace.seconds(1.0),
                        stop_at_silence=True)
        assert sorted(result) == [0, 1] and result[0].complete and not result[1].complete
        hung = _served(seen)[0][0]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not list(pool.folder.glob("synccheck-*/idle")):
            time.sleep(0.05)
        # the hung child is gone (its process group stopped), and a new one is idle for the next part
        assert not Path(f"/proc/{hung}").exists() or "Z" in Path(f"/proc/{hung}/stat").read_text().split()[2]
        plan.write_text("")
        again = _check(exe, pool.folder, tmp_path, [1, 2], job="job-b.json", tools=("synccheck",))
    assert all(again[i].complete for i in (1, 2))
    assert _served(seen)[-1][0] != hung


def test_closing_the_pool_stops_its_children_and_workers_then_start_their_own(fake, tmp_path, monkeypatch):
    exe, seen, plan = fake
    plan.write_text("")
    pool = SanitizerPool(str(exe), tmp_path / "pool", tools=("racecheck",))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not list(pool.folder.glob("racecheck-*/idle")):
        time.sleep(0.05)
    pids = [int(p.read_text()) for p in pool.folder.glob("racecheck-*/pid")]
    pool.close()
    pool.close()
    assert pids and all(not Path(f"/proc/{pid}").exists() for pid in pids)
    # a worker asking a closed pool starts a child of its own (the one-shot child of grader.grading.sanitizer_child:
    # here the stand-in cannot run it, so the tool reports nothing: the cases are unchecked, not lost)
    result = _check(exe, pool.folder, tmp_path, [0, 1])
    assert sorted(result) == [0, 1] and not any(r.complete for r in result.values())
    assert not _served(seen)


def test_a_tool_whose_children_cannot_start_is_given_up(tmp_path):
    exe = tmp_path / "compute-sanitizer"
    exe.write_text("#!/bin/sh\nexit 1\n")
    exe.chmod(0o755)
    with SanitizerPool(str(exe), tmp_path / "pool", tools=("memcheck",)) as pool:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (pool.folder / "memcheck.broken").exists():
            time.sleep(0.05)
        assert (pool.folder / "memcheck.broken").exists()
        assert len(list(pool.folder.glob("memcheck-*"))) == 3


def test_a_waiting_timed_part_goes_first_and_a_dead_waiter_does_not_block(tmp_path):
    from grader.grading.sanitizer import _claim

    pool = tmp_path / "pool"
    (pool / "racecheck-1").mkdir(parents=True)
    (pool / "racecheck-1" / "idle").touch()
    (pool / f"want-racecheck-1-{os.getppid()}").touch()  # a live worker of a timed part waits
    assert _claim(pool, "racecheck", 0.2, priority=0) is None
    assert _claim(pool, "racecheck", 0.2, priority=1) == pool / "racecheck-1"
    assert not list(pool.glob(f"want-racecheck-1-{os.getpid()}")), "a claimer's own wish is removed"
    (pool / "racecheck-1" / "claimed").rename(pool / "racecheck-1" / "idle")
    (pool / f"want-racecheck-1-{os.getppid()}").rename(pool / "want-racecheck-1-999999999")  # gone
    assert _claim(pool, "racecheck", 0.2, priority=0) == pool / "racecheck-1"


def test_a_pools_memcheck_checks_every_faulting_case_the_other_tools_stop_after_three(fake, tmp_path):
    exe, seen, plan = fake
    plan.write_text(",".join(f"{i}=fault" for i in range(6)))
    with SanitizerPool(str(exe), tmp_path / "pool", tools=("memcheck", "racecheck"),
                       slots={"racecheck": 1}) as pool:
        result = _check(exe, pool.folder, tmp_path, list(range(6)), tools=("memcheck", "racecheck"))
    # memcheck: every case, each in a child of its own (a fault ends the child); a plain run of a
    # case memcheck did not check would fault and cost a new worker
    assert all("memcheck" in result[i].tools for i in range(6))
    assert [i for i in range(6) if "racecheck" in result[i].tools] == [0, 1, 2]
    assert len({pid for pid, _, _ in _served(seen)}) == 6 + 3


def test_after_a_fault_a_pools_memcheck_checks_the_cases_left_one_each_in_more_children(fake, tmp_path):
    """A kernel that faults at one case usually faults at the next: after the first fault the pool
    is asked for more memcheck children (grow-memcheck) and each case left goes to a child of its
    own, so several faults cost one child's start-up, not one each in turn. A case that does not
    fault is checked too, and its child serves the next case."""
    from grader.grading.sanitizer import FAULT_CHILDREN

    exe, seen, plan = fake
    plan.write_text("0=fault,2=fault,3=race,5=fault")
    with SanitizerPool(str(exe), tmp_path / "pool", tools=("memcheck",)) as pool:
        result = _check(exe, pool.folder, tmp_path, list(range(7)), tools=("memcheck",))
        asked = int((pool.folder / "grow-memcheck").read_text())
    assert asked == FAULT_CHILDREN > 1
    assert sorted(result) == list(range(7)) and all(result[i].tools == ["memcheck"] for i in range(7))
    assert [f.kind for f in result[3].findings] == ["race"] and not any(result[i].findings for i in (1, 4, 6))
    served = _served(seen)
    assert served[0][2] == list(range(7))  # the first child had them all, and faulted at case 0
    assert sorted(c for _, _, cases in served[1:] for c in cases) == list(range(1, 7))
    assert all(len(cases) == 1 for _, _, cases in served[1:])
    faulted = {pid for pid, _, cases in served if cases[0] in (0, 2, 5)}
    assert len(faulted) == 3  # each fault ended its child
