"""A grader's fault is never the student's: a grading worker killed from outside is graded again
(twice: ``error``, "to regrade", exit status 3), a batch killed outright leaves no process behind
and ``--resume`` finishes it, a full disk stops the batch with one line and no half result, and a
damaged ``result.json`` is graded again.

Each test runs ``scangrade batch`` on a small class (one part, two sizes) as a child process and
marks its processes with an environment variable (:data:`MARK`) and a scratch TMPDIR, so that
every process it started can be found in /proc. Nothing waits a fixed time: a kill waits for a
worker to be inside a part (it has started a child), and what ends is polled for with generous
bounds.
"""

from __future__ import annotations

import csv
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import BROKEN, ROOT, SOLUTIONS

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(),
                                reason="needs /proc (Linux) to find the grader's processes")

#: The environment variable that marks a test's grader and the workers it starts (they inherit it).
MARK = "SCANGRADE_FAULTS_TEST"
#: How long anything here may take at most; the tests wait for events, not for time.
BOUND_S = 600


# --- the processes of one batch ----------------------------------------------------------------

def stat_of(pid: int) -> tuple[str, int, int] | None:
    """``(state, parent pid, start time)`` of a process, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[19])


def alive(procs: dict[int, int]) -> list[int]:
    """Those of ``procs`` (pid -> start time) still running (not zombies, the same start time)."""
    left = []
    for pid, start in procs.items():
        st = stat_of(pid)
        if st is not None and st[0] not in ("Z", "X") and st[2] == start:
            left.append(pid)
    return left


def all_processes() -> dict[int, tuple[str, int, int]]:
    found = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            st = stat_of(int(entry.name))
            if st is not None:
                found[int(entry.name)] = st
    return found


def descendants(root: int) -> dict[int, int]:
    """Every live process below ``root`` (pid -> start time), from /proc's parent links."""
    table = all_processes()
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = {}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if table[child][0] not in ("Z", "X"):
                found[child] = table[child][2]
                todo.append(child)
    return found


def marked(mark: str, scratch: Path) -> dict[int, int]:
    """Live processes of this test's batch: their environment holds ``mark``, or their command line
    names ``scratch`` (sandboxed children get a clean environment)."""
    found = {}
    for pid, (state, _, start) in all_processes().items():
        if state in ("Z", "X"):
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if f"{MARK}={mark}".encode() in environ or str(scratch).encode() in cmd:
            found[pid] = start
    return found


def workers_in_a_part(mark: str) -> list[int]:
    """The grading workers of the batch marked ``mark`` that are at work: they have started a child
    (the emulator's executor, a compiler, compute-sanitizer) or are running (a worker waiting for its
    next part sleeps in a read; on a GPU with its compiles cached, a part may start no child)."""
    table = all_processes()
    parents = {ppid for _, (state, ppid, _) in table.items() if state not in ("Z", "X")}
    found = []
    for pid, (state, _, _) in table.items():
        if pid not in parents and state != "R":
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if b"grader.grading.worker" in cmd and f"{MARK}={mark}".encode() in environ:
            found.append(pid)
    return found


def wait_for(predicate, timeout: float = BOUND_S, step: float = 0.02):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = predicate()
        if got:
            return got
        time.sleep(step)
    return predicate()


# --- a small class and its batch ----------------------------------------------------------------

#: The class's submissions, in gradebook order; :data:`BROKEN_ONE` writes past its output, the others are right.
CLASS = ("ann", "ben", "cat", "dan", "eve", "fay")
BROKEN_ONE = "dan"


def _make_class(root: Path) -> Path:
    """Six submissions of Part 1."""
    for sid in CLASS:
        (root / sid).mkdir(parents=True)
        shutil.copy(SOLUTIONS / "part1_naive.cu", root / sid)
        shutil.copy(SOLUTIONS / "part1_naive.cu", root / sid)
    shutil.copy(BROKEN / "part1_oob_write.cu", root / BROKEN_ONE / "part1_naive.cu")
    return root


def _config(folder: Path) -> Path:
    path = folder / "config.yaml"
    path.write_text("block_size: 128\nseed: 7\ntimeouts:\n  part_s: 600\n  case_s: 600\n"
                    "parts:\n  part1_naive:\n    points_per_case: 1\n    sizes: [5, 33]\n")
    return path


#: The options of the tests' batches: the emulator, no checks (quicker; the faults are the same), two jobs.
OPTIONS = ("--backend", "emulator", "--no-checks", "--jobs", "2", "--allow-unsandboxed")


class Batch:
    """``scangrade batch`` of one class with ``options``, run as a marked child process (:meth:`start`;
    ``bench/chaos.py`` uses it too)."""

    def __init__(self, folder: Path, *, classroom: Path, config: Path, options: tuple[str, ...] = OPTIONS) -> None:
        self.folder, self.classroom, self.config, self.options = folder, classroom, config, options
        self.mark = uuid.uuid4().hex
        self.scratch = folder / "scratch"  # every temporary folder of the batch
        self.scratch.mkdir(parents=True, exist_ok=True)

    def argv(self, out: Path, *more: str) -> list[str]:
        return [sys.executable, "-m", "grader", "batch", str(self.classroom), "--out", str(out), "--config",
                str(self.config), *self.options, *more]

    def env(self) -> dict[str, str]:
        return {**os.environ, MARK: self.mark, "TMPDIR": str(self.scratch),
                "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}

    def start(self, out: Path, *more: str, wrap: list[str] | None = None) -> subprocess.Popen:
        self.err = self.folder / f"stderr-{uuid.uuid4().hex[:6]}.txt"
        with self.err.open("wb") as err:
            return subprocess.Popen([*(wrap or []), *self.argv(out, *more)], env=self.env(),
                                    stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)

    def run(self, out: Path, *more: str) -> int:
        proc = self.start(out, *more)
        try:
            return proc.wait(timeout=BOUND_S)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)

    def left(self) -> list[int]:
        return list(marked(self.mark, self.scratch))


def run_watched(batch: Batch, out: Path, *more: str) -> tuple[int, float | None]:
    """Run ``batch`` into ``out`` to its end: ``(exit status, seconds from its first child process to
    its last seen, or None where it had none)``: the window in which killing it kills workers."""
    proc, seen = batch.start(out, *more), []
    try:
        while proc.poll() is None:
            if descendants(proc.pid):
                seen.append(time.monotonic())
            time.sleep(0.005)
        return proc.wait(), (seen[-1] - seen[0] if seen else None)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def _book(out: Path) -> list[dict[str, str]]:
    return list(csv.DictReader((out / "gradebook.csv").open()))


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The class, its config, a clean run's gradebook rows, for how long its workers ran (seconds
    from the first child process of the batch to the last), and its output folder (not to be changed)."""
    folder = tmp_path_factory.mktemp("faults")
    classroom, config = _make_class(folder / "class"), _config(folder)
    batch = Batch(folder / "clean", classroom=classroom, config=config)
    rc, window = run_watched(batch, folder / "clean-out")
    assert rc == 1 and window is not None, batch.err.read_text()  # one fails
    book = _book(folder / "clean-out")
    assert [(r["student"], r["status"]) for r in book] == [(s, "fail" if s == BROKEN_ONE else "pass") for s in CLASS]
    return classroom, config, book, window, folder / "clean-out"


def killer(mark: str, *, times: int | None) -> tuple[list[int], callable]:
    """A loop that SIGKILLs each worker of batch ``mark`` once it is inside a part (``times``: at most
    that many, None: every one), returning the pids it killed."""
    killed: list[int] = []

    def loop(done) -> None:
        while not done() and (times is None or len(killed) < times):
            for pid in workers_in_a_part(mark):
                if pid not in killed and (times is None or len(killed) < times):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            time.sleep(0.01)
    return killed, loop


# --- the tests ----------------------------------------------------------------------------------

def test_a_worker_killed_mid_part_costs_the_submission_nothing(tmp_path, clean):
    classroom, config, book, _, _ = clean
    batch = Batch(tmp_path, classroom=classroom, config=config)
    out = tmp_path / "out"
    proc = batch.start(out)
    killed, loop = killer(batch.mark, times=1)
    try:
        loop(lambda: proc.poll() is not None)
        assert proc.wait(timeout=BOUND_S) == 1, batch.err.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert killed, "no worker was seen inside a part"
    assert _book(out) == book  # the part was graded again: every grade is the clean run's
    assert "to regrade" not in (out / "summary.txt").read_text()


def test_a_worker_killed_twice_is_the_graders_error_to_regrade(tmp_path, clean):
    from grader.cli import EXIT_REGRADE
    classroom, config, book, _, _ = clean
    one = tmp_path / "class"
    shutil.copytree(classroom / "ann", one / "ann")
    batch = Batch(tmp_path, classroom=one, config=config)
    out = tmp_path / "out"
    proc = batch.start(out)
    killed, loop = killer(batch.mark, times=None)
    try:
        loop(lambda: proc.poll() is not None)
        rc = proc.wait(timeout=BOUND_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    printed = batch.err.read_text()
    assert rc == EXIT_REGRADE == 3, printed
    assert len(killed) == 2, killed  # the part's worker, and the fresh one that graded it again
    [row] = _book(out)
    assert row["status"] == "to regrade" and row["part1_naive"] == "0", row
    result = json.loads((out / "ann" / "result.json").read_text())
    part = result["parts"][0]
    assert part["status"] == "error" and part["to_regrade"] and result["to_regrade"], part
    assert {c["status"] for c in part["cases"]} <= {"error", "not-run"}, part["cases"]  # never crash
    assert "killed (SIGKILL" in part["message"] and "running this part crashed" not in part["message"], part["message"]
    assert "to regrade" in (out / "summary.txt").read_text()
    assert "to regrade" in (out / "ann" / "report.txt").read_text()
    assert "to regrade" in (out / "ann" / "student" / "report.txt").read_text()
    assert "To regrade." in (out / "class_report.html").read_text()
    assert "Traceback" not in printed
    # --resume grades it again, in workers nobody kills now
    assert batch.run(out, "--resume") == 0, batch.err.read_text()
    assert _book(out) == book[:1]
    assert "graded again on --resume: ann" in (out / "summary.txt").read_text()


def kill_while_grading(batch: Batch, out: Path, window: float, rng: random.Random,
                       *more: str) -> tuple[dict[int, int], float]:
    """Start ``batch`` into ``out`` (with the options ``more``: ``--resume``) and SIGKILL its process
    group at a random moment of its workers' ``window`` (seconds from its first child process).

    Returns:
        ``(the processes it had started then: pid -> start time, seconds from its start to the
        kill)``; no processes where the moment fell after its last worker ended (it then finished).
    """
    t0 = time.monotonic()
    proc = batch.start(out, *more)
    try:
        assert wait_for(lambda: descendants(proc.pid) or proc.poll() is not None, step=0.005), batch.err.read_text()
        time.sleep(rng.uniform(0, window))
        started = descendants(proc.pid)
        moment = time.monotonic() - t0
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # it had just finished
            started = {}
        proc.wait(timeout=BOUND_S)
        return started, moment
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_a_batch_killed_outright_leaves_no_process_and_resume_finishes_it(tmp_path, clean):
    classroom, config, book, window, _ = clean
    batch = Batch(tmp_path, classroom=classroom, config=config)
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    for attempt in range(6):
        # A moment past the last worker is drawn again, in half the window: the clean run may have
        # been slower than this one (a busier machine, or the emulator's runtime built in it).
        out = tmp_path / f"out-{attempt}"
        started, _ = kill_while_grading(batch, out, window / 2 ** attempt, rng)
        if started:
            break
    try:
        assert started, f"no kill fell while the batch had children (seed {seed})"
        gone = wait_for(lambda: not alive(started) and not batch.left(), timeout=30, step=0.05)
        assert gone, (seed, [Path(f"/proc/{p}/cmdline").read_bytes() for p in alive(started) + batch.left()])
    finally:
        for pid in batch.left():
            os.kill(pid, signal.SIGKILL)
    for result in out.glob("*/result.json"):  # every result written is whole
        assert json.loads(result.read_text())["schema"] == "scangrade.result"
    assert batch.run(out, "--resume") == 1, batch.err.read_text()
    assert _book(out) == book, seed
    assert not list(out.rglob("*.tmp"))


def test_damaged_results_are_graded_again_on_resume(tmp_path, clean):
    classroom, config, book, _, clean_out = clean
    batch = Batch(tmp_path, classroom=classroom, config=config)
    out = tmp_path / "out"
    shutil.copytree(clean_out, out)
    whole = (out / "ben" / "result.json").read_text()
    (out / "ben" / "result.json").write_text(whole[:len(whole) // 2])  # cut short
    (out / "cat" / "result.json").write_text('{"schema": "scangrade.result", "schema_version": 2}')  # no parts
    assert batch.run(out, "--resume") == 1, batch.err.read_text()
    assert _book(out) == book
    summary = (out / "summary.txt").read_text()
    assert "graded again on --resume: ben: its saved result.json is cut short" in summary, summary
    assert "graded again on --resume: cat: its saved result.json is not a scangrade result" in summary, summary
    assert "ann" not in summary.split("graded again", 1)[1]  # an intact result is kept


def _tmpfs_works(folder: Path) -> bool:
    probe = folder / "probe"
    probe.mkdir()
    try:
        done = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=64k none '{probe}'"],
                              capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _pages(folder: Path) -> int:
    return sum(-(-f.stat().st_size // 4096) * 4096 + 4096 for f in folder.rglob("*") if f.is_file())


def test_a_full_disk_stops_the_batch_with_one_line_and_resume_finishes_it(tmp_path, clean):
    """``--out`` on a small tmpfs (a mount namespace of this user's own: ``unshare -rm``) that holds
    the class's intake copies and about one and a half submissions' files."""
    if shutil.which("unshare") is None or not _tmpfs_works(tmp_path):
        pytest.skip("no unprivileged mount namespace here to mount a small tmpfs in (unshare -rm)")
    classroom, config, book, _, clean_out = clean
    batch = Batch(tmp_path, classroom=classroom, config=config)
    per_student = max(_pages(clean_out / sid) for sid in CLASS)
    size = len(CLASS) * 3 * 4096 + per_student * 3 // 2  # the intake copies (a file and folders each), 1.5 results
    out, saved = tmp_path / "out", tmp_path / "saved"
    out.mkdir()
    saved.mkdir()
    script = (f"mount -t tmpfs -o size={size} none '{out}' || exit 99; \"$@\"; rc=$?; "
              f"cp -a '{out}/.' '{saved}/'; exit $rc")
    proc = batch.start(out, wrap=["unshare", "-rm", "sh", "-c", script, "sh"])
    rc = proc.wait(timeout=BOUND_S)
    printed = batch.err.read_text()
    assert rc == 2, printed
    errors = [line for line in printed.splitlines() if line.startswith("scangrade: error")]
    assert len(errors) == 1 and "Traceback" not in printed, printed
    assert "free at least" in errors[0] and "--resume" in errors[0] and str(out) in errors[0], errors
    assert printed.strip().splitlines()[-1] == errors[0]
    written = list(saved.glob("*/result.json"))
    for result in written:  # whole or absent
        assert json.loads(result.read_text())["schema"] == "scangrade.result"
    assert len(written) < len(CLASS) and not list(saved.rglob("*.tmp")), written
    assert batch.run(saved, "--resume") == 1, batch.err.read_text()
    assert _book(saved) == book
    # a disk too full for the intake's copies of the class: the same one line, before any grading
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    script = f"mount -t tmpfs -o size=8k none '{tiny}' || exit 99; \"$@\""
    assert batch.start(tiny, wrap=["unshare", "-rm", "sh", "-c", script, "sh"]).wait(timeout=BOUND_S) == 2
    printed = batch.err.read_text()
    assert printed.startswith("scangrade: error: cannot write") and len(printed.splitlines()) == 1, printed


def test_the_readme_gives_every_exit_status():
    """README.md's "Exit status:" sentence names each code of grader.cli.EXIT_STATUSES, and no other."""
    import re
    from grader.cli import EXIT_STATUSES
    text = " ".join((ROOT / "README.md").read_text().split())
    sentence = text.split("Exit status: ", 1)[1].split(". ", 1)[0]
    assert {int(code) for code in re.findall(r"(?:^|, )(\d+) (?:when|for)", sentence)} == set(EXIT_STATUSES), sentence


def test_a_result_to_regrade_uses_no_prairielearn_attempt(small_config):
    """PrairieLearn counts no attempt for a submission the grader failed on: not gradable, saying so."""
    from grader.core.results import SubmissionResult
    from grader.grading.part_runner import ungraded_part
    from grader.render.prairielearn import prairielearn

    def result(to_regrade: bool) -> SubmissionResult:
        part = ungraded_part(small_config, "part1_naive", status="error", message="the grader's worker was killed",
                             to_regrade=to_regrade)
        return SubmissionResult(submission="s", backend="emulator", backend_reason="test", device={}, config="c",
                                backend_times_kernels=False, backend_uses_gpus=False,  # the emulator's traits
                                seed=7, block_size=128, parts=(part,), scangrade_version="0", started_at="",
                                elapsed_s=0.0)
    doc = prairielearn(result(True))
    assert doc["gradable"] is False and "not because of your code" in doc["format_errors"][0], doc
    assert prairielearn(result(False))["gradable"] is True


def test_a_batch_removes_the_shared_inputs_of_batches_killed_outright(tmp_path, monkeypatch):
    """On a GPU a batch draws the class's inputs (GiBs) into a temporary folder it holds locked and
    removes at its end; a batch killed outright cannot, so the next batch removes those whose lock
    is free."""
    import fcntl
    from grader.classwork.batch import INPUTS_LOCK, INPUTS_PREFIX, _inputs_folder
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    dead, live, other = (tmp_path / f"{INPUTS_PREFIX}{name}" for name in ("dead", "live", "other"))
    for folder in (dead, live, other):
        folder.mkdir()
        (folder / "input.npy").write_bytes(b"x")
    (dead / INPUTS_LOCK).touch()  # its batch died: nobody holds the lock
    (live / INPUTS_LOCK).touch()
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1]); "
                               "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(600)",
                               str(live / INPUTS_LOCK)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        mine, fd = _inputs_folder()
        try:
            assert not dead.exists() and live.exists() and other.exists()  # no lock file: not a batch's
            probe = os.open(mine / INPUTS_LOCK, os.O_RDONLY)
            with pytest.raises(BlockingIOError):  # this batch holds its own
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.close(probe)
        finally:
            os.close(fd)
    finally:
        holder.kill()
        holder.wait()
