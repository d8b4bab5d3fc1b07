"""compute-sanitizer's children for one submission, started once and shared by its parts.

On a GPU, creating a CUDA context takes a lock of the driver's: processes that start at once
create theirs one after the other. A child per tool per part would start 15 sanitized contexts
after the parts' own five, for a fraction of their time in cases (figures: docs/throughput.md,
"Figures behind the code's constants"). So the grade of one submission starts one child per tool as it starts (:class:`SanitizerPool`),
while the parts' workers start and compile; each part's worker then takes an idle child of each
tool (:func:`grader.grading.sanitizer.check_cases` with ``pool``), hands it its cases, and gives it back.

A pool serves one submission only: a child holds what that submission's kernels did to its
context (device heap, ``__device__`` variables of earlier modules), never another student's.
A child that ends (a fault loses its context; a worker stopped it when it went silent on a
case) is replaced at once. A tool whose children fail to start :data:`START_FAILURES` times in a
row is marked broken, and the workers start children of their own for it, as without a pool.

The folder's layout (one sub-folder per child, ``TOOL-SERIAL``): ``pid`` (the compute-sanitizer
process, leader of its process group), ``log.txt`` (everything it prints), ``idle`` (it waits for
a request; a worker takes it by renaming it ``claimed``), ``request.json`` (the worker's cases).
The pool's folder holds ``closed`` once it is closed, ``TOOL.broken`` for a tool that cannot
start, and ``grow-TOOL`` where a worker asks for more children of a tool (memcheck after a fault:
each faulting case then costs a child, and several start at once).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from grader.host.parent_death import tied_to_this_process
from grader.grading.sanitizer import TOOLS, tool_argv

#: A tool whose children end before they are ready this many times in a row starts no more.
START_FAILURES = 3
#: Children per tool. racecheck takes 3 to 10 times memcheck's or synccheck's time on a case (it
#: records every shared-memory access), so it gets a second child, at the cost of one more CUDA
#: context (figures: docs/throughput.md, "Figures behind the code's constants").
SLOTS = {"memcheck": 1, "racecheck": 2, "synccheck": 1}
#: The most children of one tool a worker's ``grow-TOOL`` file can ask for
#: (:data:`grader.grading.sanitizer.FAULT_CHILDREN`: memcheck after a fault).
MOST_CHILDREN = 8
_ROOT = Path(__file__).resolve().parents[2]


class SanitizerPool:
    """Children of each tool of ``tools`` (:data:`SLOTS` of each), started now in ``folder`` and replaced whenever one ends,
    until :meth:`close`.

    Args:
        sanitizer: the compute-sanitizer executable (:func:`grader.grading.sanitizer.find_sanitizer`).
        folder: an empty folder of the grade's own (the workers read and write it).
        env: extra environment of the children (``CUDA_VISIBLE_DEVICES`` of a batch's GPU).
        tools: the tools to start children for.
        slots: children per tool (default :data:`SLOTS`; 1 for a tool it does not name).

    Raises:
        OSError: the folder cannot be written, or the first children cannot be started.
    """

    def __init__(self, sanitizer: str, folder: Path, *, env: dict[str, str] | None = None,
                 tools: tuple[str, ...] = TOOLS, slots: dict[str, int] | None = None) -> None:
        self.sanitizer, self.folder, self.tools = sanitizer, Path(folder), tools
        self.folder.mkdir(parents=True, exist_ok=True)
        self._env = {**os.environ, **(env or {})}
        self._env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_ROOT), self._env.get("PYTHONPATH")]))
        self._env["PYTHONUNBUFFERED"] = "1"
        self._env["SCANGRADE_RUNNER_PID"] = str(os.getpid())  # a child ends itself once this process is gone
        self._serial = 0
        self._children: dict[tuple[str, int], tuple[subprocess.Popen, Path]] = {}
        self._failures = dict.fromkeys(tools, 0)
        slots = SLOTS if slots is None else slots
        self._closed = threading.Event()
        self._lock = threading.Lock()
        for tool in tools:
            for k in range(max(1, slots.get(tool, 1))):
                self._start(tool, k)
        self._watcher = threading.Thread(target=self._watch, name="scangrade-sanitizer-pool", daemon=True)
        self._watcher.start()

    def _start(self, tool: str, k: int) -> None:
        self._serial += 1
        slot = self.folder / f"{tool}-{self._serial}"
        slot.mkdir()
        # dies with the thread starting it (the grade's, or the watcher: both outlive the pool, which
        # stops its children itself), so a grader killed outright leaves no kernel running under it
        with open(slot / "log.txt", "wb") as log:
            argv = [sys.executable, "-m", "grader.grading.sanitizer_child", "--serve", str(slot)]
            proc = subprocess.Popen(tool_argv(self.sanitizer, tool) + argv,
                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=slot,
                                    env=self._env, start_new_session=True, preexec_fn=tied_to_this_process())
        (slot / "pid").write_text(str(proc.pid))
        self._children[tool, k] = (proc, slot)

    def _watch(self) -> None:
        """Replace each child that ended, until closed; give a tool up after :data:`START_FAILURES`
        children in a row that ended before they were ever idle; start more children of a tool that
        a worker asked for (its ``grow-TOOL`` file: how many in all, at most :data:`MOST_CHILDREN`)."""
        while not self._closed.wait(0.05):
            with self._lock:
                if self._closed.is_set():
                    return
                self._grow()
                for (tool, k), (proc, slot) in list(self._children.items()):
                    if proc.poll() is None:
                        continue
                    del self._children[tool, k]
                    ever_ready = (slot / "idle").exists() or (slot / "claimed").exists()
                    self._failures[tool] = 0 if ever_ready else self._failures[tool] + 1
                    if self._failures[tool] >= START_FAILURES:
                        (self.folder / f"{tool}.broken").touch()
                        continue
                    try:
                        self._start(tool, k)
                    except OSError:
                        (self.folder / f"{tool}.broken").touch()

    def _grow(self) -> None:
        for tool in self.tools:
            try:
                want = int((self.folder / f"grow-{tool}").read_text())
            except (OSError, ValueError):
                continue
            if (self.folder / f"{tool}.broken").exists():
                continue
            have = [k for (t, k) in self._children if t == tool]
            first = max(have, default=-1) + 1  # the slots' numbers go on from the highest
            for k in range(first, first + min(want, MOST_CHILDREN) - len(have)):
                try:
                    self._start(tool, k)
                except OSError:
                    return

    def close(self) -> None:
        """Stop every child (their process groups) and start no more; the workers that still ask
        start their own. Safe to call twice."""
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
            try:
                (self.folder / "closed").touch()
            except OSError:
                pass
            for proc, _slot in self._children.values():
                try:
                    os.killpg(proc.pid, 9)
                except (ProcessLookupError, PermissionError):
                    pass
                proc.wait()
            self._children.clear()

    def __enter__(self) -> "SanitizerPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
