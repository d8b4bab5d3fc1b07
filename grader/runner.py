"""Grading a submission: one child process per part, with a deadline, results gathered as they come.

A part that does not compile, crashes, hangs or corrupts memory costs that part only: its child
process is killed at the deadline (``timeouts.part_s``), the case it was on is reported as timed
out or crashed, the rest as not run, and grading goes on with the next part.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from grader import __version__
from grader.backends import Selection
from grader.config import Config
from grader.errors import UsageError
from grader.parts import PARTS, PartSpec
from grader.results import CaseResult, PartResult, SubmissionResult, case_from_dict

#: Bytes of a worker's own stdout/stderr kept for messages.
_TAIL_BYTES = 4000
_PROJECT_ROOT = Path(__file__).resolve().parent.parent


def resolve_submission(path: Path, parts: list[str] | None = None) -> dict[str, Path | None]:
    """Map each part to be graded to its file in the submission (None when missing).

    Args:
        path: a folder holding the parts' ``.cu`` files, or one part's ``.cu`` file (named as the
            part's file, or graded as the single part in ``parts``).
        parts: part keys to grade (default: all configured).

    Raises:
        UsageError: the path does not exist, or a single file's name is not a part's file name.
    """
    if not path.exists():
        raise UsageError(f"{path}: no such file or folder; give a submission folder or one part's .cu file")
    if path.is_file():
        if parts and len(parts) == 1:
            return {parts[0]: path}
        by_name = {p.filename: k for k, p in PARTS.items()}
        if path.name not in by_name:
            raise UsageError(f"{path}: not a part's file; the files are named " + ", ".join(by_name)
                             + " (or name the part with --part KEY)")
        return {by_name[path.name]: path}
    keys = parts or list(PARTS)
    return {k: (path / PARTS[k].filename if (path / PARTS[k].filename).is_file() else None) for k in keys}


def _not_run(cfg: Config, part: PartSpec, seed: int, message: str, start: int = 0,
             done: tuple[CaseResult, ...] = ()) -> tuple[CaseResult, ...]:
    pc = cfg.parts[part.key]
    rest = tuple(CaseResult(name=f"n={n}", n=n, dtype="int32", seed=seed, status="not-run", points=0.0,
                            max_points=pc.points_per_case, message=message) for n in pc.sizes[start:])
    return done + rest


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    text = data[-_TAIL_BYTES:].decode("utf-8", errors="replace").strip()
    return ("…" + text) if len(data) > _TAIL_BYTES else text


def _signal_name(code: int) -> str:
    try:
        sig = signal.Signals(-code)
        return f"{sig.name}: {signal.strsignal(sig) or ''}".rstrip(": ")
    except ValueError:
        return f"signal {-code}"


def grade_part(part: PartSpec, source: Path | None, *, cfg: Config, backend: str, seed: int,
               on_event: Callable[[str, dict], None] | None = None) -> tuple[PartResult, dict[str, str]]:
    """Grade one part in a child process.

    Returns:
        ``(part result, device facts reported by the child)``. Never raises for problems of the
        submission; they are in the result.
    """
    def part_result(status: str, message: str, cases: tuple[CaseResult, ...]) -> PartResult:
        return PartResult(key=part.key, number=part.number, title=part.title,
                          file=str(source) if source else part.filename, status=status, message=message,
                          cases=cases)

    if source is None:
        msg = f"{part.filename} is missing from the submission"
        return part_result("missing", msg, _not_run(cfg, part, seed, "not run: " + msg)), {}

    with tempfile.TemporaryDirectory(prefix="scangrade-part-") as tmp:
        tmpdir = Path(tmp)
        events_path, job_path = tmpdir / "events.jsonl", tmpdir / "job.json"
        job_path.write_text(json.dumps({"config": str(Path(cfg.path).resolve()), "part": part.key,
                                        "source": str(source.resolve()), "backend": backend, "seed": seed,
                                        "events": str(events_path)}))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PROJECT_ROOT), env.get("PYTHONPATH")]))
        env["PYTHONUNBUFFERED"] = "1"
        out_path, err_path = tmpdir / "stdout.txt", tmpdir / "stderr.txt"
        with open(out_path, "wb") as out_f, open(err_path, "wb") as err_f:
            proc = subprocess.Popen([sys.executable, "-m", "grader.worker", str(job_path)], cwd=tmpdir,
                                    stdout=out_f, stderr=err_f, stdin=subprocess.DEVNULL, env=env,
                                    start_new_session=True)
            timed_out = False
            try:
                proc.wait(timeout=cfg.part_timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
            else:  # reap anything the worker left behind (compilers, kernels' children)
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        events = []
        if events_path.exists():
            for line in events_path.read_text(encoding="utf-8").splitlines():
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError:
                    break  # a line cut short by a kill
        device: dict[str, str] = {}
        cases: list[CaseResult] = []
        current = None
        compiled = False
        for ev in events:
            kind = ev["event"]
            if on_event:
                on_event(kind, ev)
            if kind == "device":
                device = ev["info"]
            elif kind == "error":
                return part_result("error", ev["message"], _not_run(cfg, part, seed, "not run: " + ev["message"])), device
            elif kind == "compile-error":
                return part_result("compile-error", ev["message"],
                                   _not_run(cfg, part, seed, f"not run: {part.filename} does not compile")), device
            elif kind == "compiled":
                compiled = True
            elif kind == "case-start":
                current = ev["name"]
            elif kind == "case":
                cases.append(case_from_dict(ev["result"]))
                current = None
            elif kind == "done":
                status = "pass" if all(c.status == "pass" for c in cases) else "fail"
                return part_result(status, "", tuple(cases)), device

        done = tuple(cases)
        pc = cfg.parts[part.key]
        stage = f"case {current}" if current else ("compiling" if not compiled else "setting up")
        if timed_out:
            why = (f"timed out after {cfg.part_timeout_s:g} s (timeouts.part_s) while {stage}"
                   if current is None else
                   f"timed out after {cfg.part_timeout_s:g} s (timeouts.part_s) during {stage}: the kernel may "
                   "never finish — check loop conditions, and that every thread reaches every __syncthreads()")
            status = "timeout"
        elif proc.returncode < 0:
            why = f"the process running this part crashed ({_signal_name(proc.returncode)}) during {stage}"
            if proc.returncode == -signal.SIGSEGV:
                why += " — often a read or write outside an array"
            status = "crash"
        else:
            tail = _tail(err_path)
            why = f"the grader's worker stopped unexpectedly (exit status {proc.returncode}) during {stage}"
            if tail:
                why += f":\n{tail}"
            status = "error"
        out_tail = _tail(out_path)
        if out_tail and status != "error":
            why += f"\nlast output of the kernel:\n{out_tail}"
        if current is not None:
            n = pc.sizes[len(done)]
            done += (CaseResult(name=current, n=n, dtype="int32", seed=seed, status=status, points=0.0,
                                max_points=pc.points_per_case, message=why.splitlines()[0]),)
        return part_result(status, why, _not_run(cfg, part, seed, f"not run: an earlier step {status}",
                                                 start=len(done), done=done)), device


def grade(submission: Path, *, cfg: Config, selection: Selection, seed: int | None = None,
          parts: list[str] | None = None, on_event: Callable[[str, dict], None] | None = None) -> SubmissionResult:
    """Grade a submission folder (or one part's file) against the configured cases.

    Args:
        submission: folder or ``.cu`` file.
        cfg: the validated configuration.
        selection: the backend chosen (see :func:`grader.backends.select_backend`).
        seed: overrides the config's seed.
        parts: part keys to grade (default: every part in the config).
        on_event: called with each event a worker reports (for progress display).

    Raises:
        UsageError: the submission path is unusable, or a requested part is not configured.
    """
    wanted = parts or list(cfg.parts)
    for key in wanted:
        if key not in cfg.parts:
            raise UsageError(f"part {key!r} is not in {cfg.path}; configured parts: " + ", ".join(cfg.parts))
    files = resolve_submission(submission, wanted)
    seed = cfg.seed if seed is None else seed
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    results, device = [], {}
    for key, source in files.items():
        if key not in cfg.parts:
            continue
        res, dev = grade_part(PARTS[key], source, cfg=cfg, backend=selection.name, seed=seed, on_event=on_event)
        results.append(res)
        device = device or dev
    note = ("not timed: the emulator runs kernels on the CPU, so its times say nothing about a GPU"
            if selection.name == "emulator" else "not timed: timing comes in a later release")
    return SubmissionResult(submission=str(submission), backend=selection.name, backend_reason=selection.reason,
                            device=device, config=cfg.path, seed=seed, block_size=cfg.block_size,
                            parts=tuple(results), scangrade_version=__version__, started_at=started,
                            elapsed_s=round(time.perf_counter() - t0, 3), timed=False, timing_note=note)
