"""NVIDIA compute-sanitizer on the GPU path: the same checks, kinds and messages as the emulator's.

On a GPU, an output can be right while the kernel races, reads past its input or lets threads of
a warp wait at different barriers: the hardware happened to order things kindly this time. So the
checked correctness cases (:class:`~grader.grading.case.cases.CheckMode`) also run under
compute-sanitizer's ``racecheck`` (errors and warnings: warp-synchronous code without
``__syncwarp()`` is a hazard since Volta),
``memcheck`` and ``synccheck``, and every finding becomes a :class:`Finding` of the kind the
emulator gives the same bug (``race``, ``out-of-bounds``, ``misaligned``, ``barrier-divergence``),
named by the student's file and line (the cubin is built with ``-lineinfo``) and, for an access
outside a buffer, by the buffer and element (``read of in[512] (479 past the end of in, 33
elements)``).

How: a child process (``python -m grader.grading.sanitizer_child``) runs under ``compute-sanitizer --tool T``,
loads the part's cubins with PyCUDA and replays each case's launch plan on buffers of exactly n
elements (no guard zones: memcheck only sees an access outside an allocation, and a guard zone is
inside one), with 1 MiB of unallocated address space between buffers, so an overrun of one buffer
is not inside the next and the nearest allocation names it. The child writes a marker line (with
a random token the kernel cannot know) before and after each case, so each sanitizer report is
given to the case it came from. A fault ends the child's CUDA context (memcheck stops the kernel
at its first bad access): the cases after it run in a new child. The three tools run at once.

Source of the tools' behaviour: NVIDIA, *Compute Sanitizer User Manual* (CUDA 13.0), chapters
"Memcheck Tool", "Racecheck Tool" and "Synccheck Tool". Reading the reports is
:mod:`grader.grading.sanitizer_report`'s job.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from grader.backends.base import Finding
from grader.grading.sanitizer_report import MARK, CaseChecks, findings_by_case
from grader.host.parent_death import tied_to_this_process

#: The tools run on every checked case, and the kind each one's findings have by default.
TOOLS = ("memcheck", "racecheck", "synccheck")
#: After this many children in a row each ended with its first case (a fault: the kernel lost its
#: context), a tool checks no further case of the part: each would cost a child's start-up (seconds),
#: and the cases' plain runs still show the fault. Not memcheck's children of a pool
#: (:mod:`grader.grading.sanitizer_pool`): after a fault they check every case left, several at once
#: (:data:`FAULT_CHILDREN`), and a case memcheck has located a fault in is not run again plainly,
#: where each faulting plain run costs a new worker and memcheck's run to locate it (seconds a case;
#: figures in docs/throughput.md, "Figures behind the code's constants").
FAULTS_IN_A_ROW = 3
#: compute-sanitizer's ``--print-limit``: the reports it prints in the whole life of a process, after
#: which it stops printing (it still checks). A child replays many cases (a part's, and in a pool
#: every part's of a submission), so the limit must leave room for a report at every case: with a
#: small one, a kernel that races at every case looks clean to racecheck after the first few.
PRINT_LIMIT = 10000
#: A child takes no further case once it has printed this many reports (:class:`_PrintBudget`):
#: the cases left go to another child, so every case has at least ``PRINT_LIMIT - PRINT_BUDGET``
#: reports of room.
PRINT_BUDGET = PRINT_LIMIT // 2


def find_sanitizer() -> str | None:
    """The ``compute-sanitizer`` executable: on the PATH, else under ``$CUDA_HOME/bin`` or
    ``/usr/local/cuda/bin``; None where it is not installed."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and Path(root, "bin", "compute-sanitizer").is_file():
            return str(Path(root, "bin", "compute-sanitizer"))
    return None


def sanitizer_version(path: str) -> str:
    """``compute-sanitizer --version``'s last line (``Version 2025.3.0...``), or "" if it does not run."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return lines[-1] if lines else ""



# --- running it ---------------------------------------------------------------------------------------

def check_cases(*, sanitizer: str, job: Path, cubins: dict[str, Path], cases: list[tuple[int, str]], workdir: Path,
                case_timeout_s: float | Callable[[int], float], tools: tuple[str, ...] = TOOLS,
                first_output_s: float | None = None, stop_at_silence: bool = False,
                pool: Path | None = None, priority: int = 0) -> dict[int, CaseChecks]:
    """Run ``cases`` under each of ``tools`` (at once, one child per tool) and gather the findings.

    Args:
        sanitizer: the compute-sanitizer executable.
        job: the worker's job file (the child loads the same config from it).
        cubins: the part's cubin per dtype name.
        cases: ``(index in case_list, dtype)`` of the cases to check, in the order to run them.
        workdir: a scratch folder.
        case_timeout_s: a child that reports nothing for this long once it started a case is stopped
            (a number, or a function of the case's index); its case is then incomplete (judged on its
            plain run alone, which has its own deadline), and the cases after it run in a new child.
        first_output_s: how long a child may take to start its first case (the sanitizer, Python and
            the CUDA context starting); default ``case_timeout_s`` (a number) or 60 s.
        stop_at_silence: a tool whose child went silent on a case goes no further; only the cases up
            to the first such case are returned (the caller checks the others later, once the plain
            run has shown whether that case hangs). A tool whose children fault on
            :data:`FAULTS_IN_A_ROW` cases in a row checks no further case either (but a pool's
            memcheck: see there); those cases are returned unchecked by it (incomplete).
        pool: the folder of a :class:`grader.grading.sanitizer_pool.SanitizerPool` (children already started
            for this submission): each tool takes an idle child of it, and starts its own only where
            the pool has none to give within ``first_output_s``.
        priority: a pool's idle child goes to the waiting worker of the highest priority (a timed
            part, whose timing waits for its checks, before the others).

    Returns:
        Per case index, its :class:`CaseChecks` (``seconds``: the longest a tool took on it).
    """
    limit = case_timeout_s if callable(case_timeout_s) else (lambda _index: float(case_timeout_s))
    if first_output_s is None:
        first_output_s = 60.0 if callable(case_timeout_s) else float(case_timeout_s)
    with ThreadPoolExecutor(len(tools)) as threads:
        runs = list(threads.map(lambda tool: _run_tool(sanitizer, tool, job, cubins, cases, workdir, limit,
                                                       first_output_s, stop_at_silence, pool, priority), tools))
    order = [i for i, _ in cases]
    silent = [run[3] for run in runs if run[3] is not None]
    last = min(order.index(i) for i in silent) if silent else len(order) - 1
    out: dict[int, CaseChecks] = {}
    for index in order[:last + 1]:
        findings: list[Finding] = []
        finished = []
        seconds = [run[2][index] for run in runs if index in run[2]]
        for tool, (per, done, _, _) in zip(tools, runs):
            findings += per.get(index, [])
            if index in done:
                finished.append(tool)
        out[index] = CaseChecks(findings, complete=len(finished) == len(tools), tools=finished,
                                seconds=round(max(seconds), 3) if seconds else None)
    return out


def tool_argv(sanitizer: str, tool: str) -> list[str]:
    """compute-sanitizer's command line for ``tool``, up to the program it runs."""
    argv = [sanitizer, "--tool", tool, "--show-backtrace", "no", "--print-limit", str(PRINT_LIMIT),
            "--check-exit-code", "no"]
    if tool == "racecheck":
        argv += ["--racecheck-report", "analysis"]
    return argv


def process_runs(pid: int) -> bool:
    """Whether process ``pid`` runs (not gone, not a zombie waiting for its parent)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


class _Spawned:
    """A child started for one run of cases: ``python -m grader.grading.sanitizer_child JOB TOKEN CUBINS CASES`` under
    the tool, in its own process group (in the worker's session: it goes with the worker); it exits
    when the cases are done, or at a fault."""

    def __init__(self, argv: list[str], log: Path, workdir: Path) -> None:
        self.log = log
        self._out = open(log, "wb")
        self.reader = open(log, "rb")
        self.proc = subprocess.Popen(argv, stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=workdir, process_group=0, preexec_fn=tied_to_this_process())
        self.killed = False

    def see(self, line: bytes) -> None:
        """A marker line of its (nothing to note: it ends by exiting)."""

    def ended(self) -> bool:
        return self.proc.poll() is not None

    def ended_itself(self) -> bool:
        """It exited without being stopped (a fault loses the context: the child exits)."""
        return self.proc.returncode is not None and self.proc.returncode >= 0 and not self.killed

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, 9)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.killed = True

    def text(self) -> str:
        self.reader.close()
        self._out.close()
        return self.log.read_text(errors="replace")


class _Pooled:
    """An idle child of a :class:`grader.grading.sanitizer_pool.SanitizerPool`, claimed for one run of cases:
    the request is written into its folder, its output read from where its log stood at the claim;
    the run is over at its ``end`` marker (the child is idle again) or when it is gone (a fault, or
    stopped here: the pool starts another)."""

    def __init__(self, slot: Path, request: dict, token: str) -> None:
        self.slot = slot
        self.pid = int((slot / "pid").read_text())
        self.reader = open(slot / "log.txt", "rb")
        self.start = self.reader.seek(0, os.SEEK_END)
        self.end_mark = f"{MARK} {token} end".encode()
        self.seen_end = False
        self.killed = False
        tmp = slot / "request.tmp"
        tmp.write_text(json.dumps(request), encoding="utf-8")
        os.replace(tmp, slot / "request.json")

    def see(self, line: bytes) -> None:
        if line.rstrip() == self.end_mark:
            self.seen_end = True

    def ended(self) -> bool:
        return self.seen_end or not process_runs(self.pid)

    def ended_itself(self) -> bool:
        return not self.seen_end and not self.killed

    def kill(self) -> None:
        try:
            os.killpg(self.pid, 9)  # the pool started it as its group's leader
        except (ProcessLookupError, PermissionError):
            pass
        self.killed = True

    def text(self) -> str:
        self.reader.seek(self.start)
        data = self.reader.read()
        self.reader.close()
        return data.decode(errors="replace")


def _claim(pool: Path, tool: str, wait_s: float, priority: int = 0) -> Path | None:
    """An idle child of ``tool`` in ``pool``, taken (its ``idle`` file renamed ``claimed``: one taker
    wins), waiting up to ``wait_s`` for one; None where the pool is closed, cannot start the tool,
    or has none idle in time. While a worker of a higher ``priority`` waits for the tool (its file
    ``want-TOOL-PRIORITY-PID``, while that process lives), this one lets it go first."""
    deadline = time.monotonic() + wait_s
    want = pool / f"want-{tool}-{priority}-{os.getpid()}"
    try:
        want.touch()
        while True:
            if (pool / "closed").exists() or (pool / f"{tool}.broken").exists():
                return None
            if not _outranked(pool, tool, priority):
                for slot in sorted(pool.glob(f"{tool}-*")):
                    try:
                        os.rename(slot / "idle", slot / "claimed")
                        return slot
                    except OSError:
                        continue
            if time.monotonic() > deadline:
                return None
            time.sleep(0.01)
    finally:
        want.unlink(missing_ok=True)


def _outranked(pool: Path, tool: str, priority: int) -> bool:
    """Whether a live worker of a higher priority than ``priority`` waits for ``tool`` in ``pool``."""
    for f in pool.glob(f"want-{tool}-*"):
        rank, _, pid = f.name[len(f"want-{tool}-"):].partition("-")
        if rank.isdigit() and int(rank) > priority and pid.isdigit() and process_runs(int(pid)):
            return True
    return False


@dataclasses.dataclass
class _ChildRun:
    """What one child did with the cases it was handed (:func:`_one_child`)."""

    found: dict[int, list[Finding]]
    started: set[int]
    finished: set[int]
    seconds: dict[int, float]
    silent_on: int | None
    ended_itself: bool


def _one_child(sanitizer: str, tool: str, job: Path, cubins: dict[str, Path], todo: list[tuple[int, str]],
               workdir: Path, limit: Callable[[int], float], first_output_s: float, stop_at_silence: bool,
               pool: Path | None, priority: int) -> _ChildRun:
    """``todo`` in one child of ``tool``: the pool's (an idle one, claimed), else one started for it;
    read until it ends (its ``end`` marker, a fault, or stopped here after going silent)."""
    token = secrets.token_hex(8)
    slot = _claim(pool, tool, first_output_s, priority) if pool is not None else None
    child: _Spawned | _Pooled
    if slot is not None:
        child = _Pooled(slot, {"job": str(job), "token": token, "cubins": {d: str(p) for d, p in cubins.items()},
                               "cases": [[i, d] for i, d in todo]}, token)
    else:
        argv = tool_argv(sanitizer, tool) + [
            sys.executable, "-m", "grader.grading.sanitizer_child", str(job), token,
            ",".join(f"{d}={p}" for d, p in cubins.items()), ",".join(f"{i}:{d}" for i, d in todo)]
        child = _Spawned(argv, workdir / f"sanitizer-{tool}-{token}.txt", workdir)
    popen_t = time.time()
    mark = f"{MARK} {token} ".encode()
    last_change = time.monotonic()
    allowed = first_output_s
    started: dict[int, float] = {}
    seconds: dict[int, float] = {}
    silent_on: int | None = None
    current: int | None = None
    pending = b""
    while True:
        over = child.ended()
        new = child.reader.read()
        now = time.monotonic()
        if new:
            last_change = now
            pending += new
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if not line.startswith(mark):
                    continue
                child.see(line)
                words = line[len(mark):].split()
                if words[:1] == [b"case"] and len(words) > 1 and words[1].isdigit():
                    current = int(words[1])
                    started[current] = now
                    allowed = limit(current)
                elif words[:1] == [b"done"] and len(words) > 1 and words[1].isdigit():
                    index = int(words[1])
                    if index in started:
                        seconds[index] = now - started[index]
        if over or child.ended():
            break
        if not new and now - last_change > allowed:
            child.kill()
            if stop_at_silence and current is not None and current not in seconds:
                silent_on = current
            break
        time.sleep(0.02)
    text = child.text()
    trace = os.environ.get("SCANGRADE_SANITIZER_LOGS")  # bench: every child's output, with its start and end
    if trace:
        Path(trace).mkdir(parents=True, exist_ok=True)
        (Path(trace) / f"{tool}-{token}.txt").write_text(
            f"{tool} popen {popen_t} end {time.time()} pooled {slot is not None}\n" + text, errors="replace")
    found, started_cases, finished = findings_by_case(text, token)
    return _ChildRun(found, started_cases, finished, seconds, silent_on, child.ended_itself())


def _run_tool(sanitizer: str, tool: str, job: Path, cubins: dict[str, Path], cases: list[tuple[int, str]],
              workdir: Path, limit: Callable[[int], float], first_output_s: float, stop_at_silence: bool,
              pool: Path | None = None, priority: int = 0
              ) -> tuple[dict[int, list[Finding]], set[int], dict[int, float], int | None]:
    """One tool over ``cases``: a child (the pool's, else one of its own) from the first case not yet
    run, again after each child that ended (a fault loses the context) or was stopped, until every
    case was tried once (or, with ``stop_at_silence``, until a child goes silent on a case). After a
    fault, a pool's memcheck checks the cases left at once in :data:`FAULT_CHILDREN` children, one
    case each (:func:`_fan_out`). Returns the findings per case, the cases finished, the seconds
    each took (between its markers) and the case it went silent on."""
    per: dict[int, list[Finding]] = {}
    done: set[int] = set()
    seconds: dict[int, float] = {}
    silent_on: int | None = None
    faults = 0  # children in a row that ended with their first case (a fault loses the context)
    todo = list(cases)
    fan_out = pool is not None and tool == "memcheck"
    while todo and silent_on is None and faults < FAULTS_IN_A_ROW:
        run = _one_child(sanitizer, tool, job, cubins, todo, workdir, limit, first_output_s, stop_at_silence,
                         pool, priority)
        for index, fs in run.found.items():
            per.setdefault(index, []).extend(fs)
        done |= run.finished
        seconds.update(run.seconds)
        silent_on = run.silent_on
        tried = run.started | run.finished
        if not tried:  # the child did not get to a case (no GPU, no PyCUDA): give up on this tool
            break
        order = [c[0] for c in todo]
        last = max(order.index(i) for i in tried if i in order)
        faulted = run.ended_itself and last < len(todo) - 1
        todo = todo[last + 1:]
        if faulted and fan_out and silent_on is None:
            silent_on = _fan_out(sanitizer, tool, job, cubins, todo, workdir, limit, first_output_s,
                                 stop_at_silence, pool, priority, per, done, seconds)
            break
        faults = faults + 1 if faulted and last == 0 else 0
    return per, done, seconds, silent_on


#: After a fault, a pool's memcheck checks the part's cases left in this many children at once, one
#: case each: a kernel that faults at one case usually faults at the next, and each fault costs a new
#: child (compute-sanitizer, Python and a CUDA context). CUDA creates contexts one at a time, so
#: more children gain less (figures: docs/throughput.md, "Figures behind the code's constants").
FAULT_CHILDREN = 4


def _fan_out(sanitizer: str, tool: str, job: Path, cubins: dict[str, Path], todo: list[tuple[int, str]],
             workdir: Path, limit: Callable[[int], float], first_output_s: float, stop_at_silence: bool,
             pool: Path, priority: int, per: dict, done: set, seconds: dict) -> int | None:
    """``todo`` in up to :data:`FAULT_CHILDREN` of the pool's children of ``tool`` at once, one case
    per request, in order; the pool is asked for that many (its ``grow-TOOL`` file). Adds to
    ``per``, ``done`` and ``seconds``; returns the first case (in order) a child went silent on, after
    which no further case is started."""
    import threading

    try:
        (pool / f"grow-{tool}").write_text(str(FAULT_CHILDREN))
    except OSError:
        pass
    order = [i for i, _ in todo]
    queue = list(todo)
    lock = threading.Lock()
    silent: list[int] = []
    given_up = threading.Event()

    def work() -> None:
        while True:
            with lock:
                if not queue or given_up.is_set():
                    return
                item = queue.pop(0)
            run = _one_child(sanitizer, tool, job, cubins, [item], workdir, limit, first_output_s, stop_at_silence,
                             pool, priority)
            with lock:
                for index, fs in run.found.items():
                    per.setdefault(index, []).extend(fs)
                done.update(run.finished)
                seconds.update(run.seconds)
                if run.silent_on is not None:
                    silent.append(run.silent_on)
                    given_up.set()
                if not (run.started | run.finished):  # no child got to it: the tool cannot go on
                    given_up.set()

    threads = [threading.Thread(target=work, name=f"scangrade-{tool}-{k}", daemon=True)
               for k in range(max(1, min(FAULT_CHILDREN, len(todo))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return min(silent, key=order.index) if silent else None
