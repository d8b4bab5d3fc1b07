"""The child process compute-sanitizer runs: it replays a part's cases on buffers of exactly n elements,
with unallocated space between them, writing the marker lines :func:`grader.grading.sanitizer_report.findings_by_case`
splits the tools' reports by. ``python -m grader.grading.sanitizer_child JOB TOKEN CUBINS CASES`` replays
the cases given once; ``... --serve FOLDER`` is a pool child (:mod:`grader.grading.sanitizer_pool`) that
replays each request a worker writes. Starting these children and reading their output is
:mod:`grader.grading.sanitizer`'s job.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Callable

from grader.grading.sanitizer import PRINT_BUDGET, process_runs
from grader.grading.sanitizer_report import GAP_BYTES, MARK


class _PrintBudget:
    """How many reports compute-sanitizer has printed into this process's standard output (the
    child's log, where the tool prints too): one per report's first line (``========= `` then text;
    its continuation lines are indented). Where standard output is not a file (a pipe), nothing is
    counted."""

    def __init__(self, fd: int = 1) -> None:
        import stat
        self.printed = 0
        self._reader = None
        self._pending = b""
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                self._reader = open(f"/proc/self/fd/{fd}", "rb")
                self._reader.seek(0, os.SEEK_END)
        except OSError:
            self._reader = None

    def spent(self) -> bool:
        """Whether :data:`PRINT_BUDGET` reports were printed since this was made (reads what is new)."""
        if self._reader is not None:
            *lines, self._pending = (self._pending + self._reader.read()).split(b"\n")
            self.printed += sum(1 for line in lines if line.startswith(b"========= ") and line[10:11].strip())
        return self.printed >= PRINT_BUDGET


class _Replay:
    """Replays cases in a CUDA context (the child's), writing the markers :func:`findings_by_case`
    reads: one per case before and after it, and one per buffer with its address and size."""

    def __init__(self) -> None:
        from grader.backends.pycuda import PyCudaBackend

        self.backend = PyCudaBackend(sandbox="off")
        self._jobs: dict[str, tuple] = {}

    def say(self, token: str, text: str) -> None:
        sys.stdout.write(f"\n{MARK} {token} {text}\n")
        sys.stdout.flush()

    def run(self, job_path: str, token: str, cubins: dict[str, str], cases: list[tuple[int, str]],
            stop: Callable[[], bool] | None = None) -> None:
        """Replay ``cases`` (``(index, dtype)``) of the job's part with ``cubins`` (path per dtype),
        until ``stop()`` says so before a case (:meth:`_PrintBudget.spent`: the cases left go to
        another child). At a fault (the context is lost) the process exits, after the case's
        ``done`` marker."""
        import numpy as np

        from grader.core.errors import KernelError, LaunchError
        from grader.grading.case.inputs import make_input
        from grader.assignment.parts import DTYPES, PARTS
        from grader.assignment.plans import Run, prepare
        from grader.grading.protocol import Job

        if job_path not in self._jobs:
            job = Job.from_json(Path(job_path).read_text(encoding="utf-8"), where=job_path)
            self._jobs = {job_path: (job.config, PARTS[job.part], job.cases)}
        cfg, part, specs = self._jobs[job_path]
        pc = cfg.parts[part.key]
        backend = self.backend
        modules = {d: backend.load_cubin(Path(p).read_bytes(), filename=part.filename, kernels=part.kernels)
                   for d, p in cubins.items()}
        for index, dtype_name in cases:
            if stop is not None and stop():
                return
            case = specs[int(index)]
            dtype = DTYPES[dtype_name]
            x = make_input(cfg, part, case.n, case.seed, dtype, fractional=case.fractional)
            self.say(token, f"case {index} {time.time()}")
            spacers = []

            class Spaced(Run):
                def buffer(self, *args, **kwargs):  # an unallocated gap before every buffer
                    spacers.append(backend.alloc(GAP_BYTES, np.dtype(np.uint8)))
                    return super().buffer(*args, **kwargs)
            run = Spaced(backend, modules[dtype_name], dtype, guard=0)
            try:
                d_in = run.buffer("in", case.n, x, output=False)
                plan = prepare(run, part, pc, d_in, case.n)
                spacers.append(backend.alloc(GAP_BYTES, np.dtype(np.uint8)))
                backend.free(*spacers)
                for g in run.buffers:
                    self.say(token, f"buffer {g.name.replace(' ', '~')} {g.inner.address} {g.inner.nbytes} "
                                    f"{g.inner.dtype.itemsize}")
                with backend.gpu_shared():  # never while another worker times (grader.host.gpu_lock); case by case
                    plan.run()
                    backend.synchronize()
            except LaunchError:
                pass  # refused before it ran: the plain run reports it
            except KernelError:
                self.say(token, f"done {index} {time.time()}")
                sys.stdout.flush()
                os._exit(0)  # the context is lost; a new child runs the cases after this one
            self.say(token, f"done {index} {time.time()}")


def _child(argv: list[str]) -> int:
    """``python -m grader.grading.sanitizer_child JOB TOKEN DTYPE=CUBIN,... INDEX:DTYPE,...``: replay the cases on
    exact-size buffers, writing markers; exits at the first CUDA error (its context is lost). Dies
    with compute-sanitizer, its parent (which dies with the worker's thread that started it), and
    exits at once where the grader that started the worker is already gone."""
    from grader.host.parent_death import die_with_parent

    die_with_parent()
    runner = os.environ.get("SCANGRADE_RUNNER_PID", "")
    if runner.isdigit() and not process_runs(int(runner)):
        os._exit(0)
    job_path, token, cubin_arg, case_arg = argv
    begun = time.time()
    replay = _Replay()
    replay.say(token, f"ready {begun} {time.time()}")
    cubins = dict(item.split("=", 1) for item in cubin_arg.split(","))
    budget = _PrintBudget()  # its print budget spent, it exits: the cases left go to a new child
    replay.run(job_path, token, cubins, [tuple(item.split(":")) for item in case_arg.split(",")], stop=budget.spent)
    sys.stdout.flush()
    os._exit(0)


#: A claim of a pool child (its ``claimed`` file) with no request after this many seconds is
#: dropped: the worker that claimed it was stopped before it could write one.
CLAIM_STALE_S = 10.0


def _serve(folder: Path, replay=None) -> int:
    """``python -m grader.grading.sanitizer_child --serve FOLDER``: a pool child (:mod:`grader.grading.sanitizer_pool`).
    Starts its CUDA context, then marks itself idle (the file ``idle``) and replays each request a
    worker writes (``request.json``: job, token, cubins, cases), ending each with an ``end`` marker
    and marking itself idle again. Exits at a fault (the context is lost), once it has printed
    :data:`PRINT_BUDGET` reports (after the request's ``end``, the cases it did not get to left to
    another child: the pool starts a new one), or when the grader that started it is gone.
    ``replay``: what replays the cases (default a :class:`_Replay`; tests give one without a GPU)."""
    from grader.host.parent_death import die_with_parent

    die_with_parent()  # gone with compute-sanitizer, its parent
    parent = os.getppid()
    runner = os.environ.get("SCANGRADE_RUNNER_PID", "")
    replay = replay or _Replay()
    request, claimed, idle = folder / "request.json", folder / "claimed", folder / "idle"
    budget = _PrintBudget()
    idle.touch()
    claimed_at: float | None = None
    while True:
        if request.exists():
            data = json.loads(request.read_text(encoding="utf-8"))
            request.unlink()
            replay.run(data["job"], data["token"], data["cubins"], [tuple(c) for c in data["cases"]],
                       stop=budget.spent)
            replay.say(data["token"], "end")
            if budget.spent():  # not idle again: the pool starts a child with a whole budget
                sys.stdout.flush()
                os._exit(0)
            claimed_at = None
            os.rename(claimed, idle)
            continue
        if os.getppid() != parent or (runner.isdigit() and not process_runs(int(runner))):
            os._exit(0)
        if claimed.exists():
            claimed_at = claimed_at or time.monotonic()
            if time.monotonic() - claimed_at > CLAIM_STALE_S:
                os.rename(claimed, idle)
                claimed_at = None
        time.sleep(0.005)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        sys.exit(_serve(Path(sys.argv[2])))
    sys.exit(_child(sys.argv[1:]))
