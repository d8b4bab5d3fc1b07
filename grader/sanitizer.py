"""NVIDIA compute-sanitizer on the GPU path: the same checks, kinds and messages as the emulator's.

On a GPU, an output can be right while the kernel races, reads past its input or lets threads of
a warp wait at different barriers: the hardware happened to order things kindly this time. So the
correctness cases up to ``checks_max_n`` also run under compute-sanitizer's ``racecheck`` (errors
and warnings: warp-synchronous code without ``__syncwarp()`` is a hazard since Volta),
``memcheck`` and ``synccheck``, and every finding becomes a :class:`Finding` of the kind the
emulator gives the same bug (``race``, ``out-of-bounds``, ``misaligned``, ``barrier-divergence``),
named by the student's file and line (the cubin is built with ``-lineinfo``) and, for an access
outside a buffer, by the buffer and element (``read of in[512] (479 past the end of in, 33
elements)``).

How: a child process (``python -m grader.sanitizer``) runs under ``compute-sanitizer --tool T``,
loads the part's cubins with PyCUDA and replays each case's launch plan on buffers of exactly n
elements (no guard zones: memcheck only sees an access outside an allocation, and a guard zone is
inside one), with 1 MiB of unallocated address space between buffers, so an overrun of one buffer
is not inside the next and the nearest allocation names it. The child writes a marker line (with
a random token the kernel cannot know) before and after each case, so each sanitizer report is
given to the case it came from. A fault ends the child's CUDA context (memcheck stops the kernel
at its first bad access): the cases after it run in a new child. The three tools run at once.

Source of the tools' behaviour: NVIDIA, *Compute Sanitizer User Manual* (CUDA 13.0), chapters
"Memcheck Tool", "Racecheck Tool" and "Synccheck Tool".
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from grader.backends.base import Finding

#: The tools run on every checked case, and the kind each one's findings have by default.
TOOLS = ("memcheck", "racecheck", "synccheck")
#: After this many children in a row each ended with its first case (a fault: the kernel lost its
#: context), a tool checks no further case of the part: each would cost a child's start-up (seconds),
#: and the cases' plain runs still show the fault.
FAULTS_IN_A_ROW = 3
#: Unallocated bytes left between two buffers in the sanitizer's replay.
GAP_BYTES = 1 << 20
_MARK = "@@scangrade"


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


@dataclass(frozen=True)
class Buffer:
    """One buffer of a replayed case: its name, device address, bytes and element size."""

    name: str
    base: int
    nbytes: int
    itemsize: int


@dataclass
class CaseChecks:
    """What the sanitizer found in one case.

    Attributes:
        findings: failing findings, in the order reported, one per (kind, line).
        complete: every tool finished the case (a tool whose child hung or died before the case
            ended did not; the case is then judged on its plain run).
        tools: the tools that finished it.
    """

    findings: list[Finding]
    complete: bool
    tools: list[str]
    seconds: float | None = None

    def to_json(self) -> dict:
        """A JSON object (:meth:`from_json` reads it back): what a worker hands to the next one."""
        return {"findings": [dataclasses.asdict(f) for f in self.findings], "complete": self.complete,
                "tools": list(self.tools), "seconds": self.seconds}

    @classmethod
    def from_json(cls, data: dict) -> "CaseChecks":
        """The CaseChecks :meth:`to_json` wrote.

        Raises:
            KeyError, TypeError, ValueError: ``data`` is not such an object.
        """
        def ids(v):
            return tuple(int(x) for x in v) if v is not None else None
        findings = [Finding(**{**f, **{k: ids(f.get(k)) for k in ("block", "thread", "other_block", "other_thread")}})
                    for f in data["findings"]]
        return cls(findings, bool(data["complete"]), [str(t) for t in data["tools"]], data.get("seconds"))


# --- parsing the sanitizer's text --------------------------------------------------------------------

_AT = re.compile(r"at (?:(?P<func>[\w$.:<>~]+)\+0x[0-9a-f]+ )?in (?P<file>.+?):(?P<line>\d+)")
_BY = re.compile(r"by thread \((\d+),(\d+),(\d+)\) in block \((\d+),(\d+),(\d+)\)")
_ADDRESS = re.compile(r"(?:Address|Access to) (0x[0-9a-f]+) is (?:out of bounds|misaligned)")
_INVALID = re.compile(r"Invalid (__global__|__shared__|__local__|__generic__) (read|write|atomic)\w* of size (\d+)")
_MISALIGNED = re.compile(r"Misaligned (?:Shared or Local Address|__global__ \w+|address)", re.I)
_RACE = re.compile(r"(Error|Warning): Race reported between (Read|Write) access at .*? in (.+?):(\d+)")
_RACE2 = re.compile(r"and (Read|Write) access at .*? in (.+?):(\d+)(?: \[(\d+) hazards?\])?")
_BARRIER = re.compile(r"Barrier error detected\. (.*)")


def _records(lines: Iterable[str]) -> list[list[str]]:
    """The sanitizer's reports among ``lines`` (its lines start ``========= ``), one list per report."""
    out: list[list[str]] = []
    current: list[str] = []
    for raw in lines:
        if not raw.startswith("========= "):
            continue
        body = raw[len("========= "):]
        if not body.strip() or body.startswith("COMPUTE-SANITIZER") or "SUMMARY" in body:
            if current:
                out.append(current)
            current = []
            continue
        if not body.startswith("    ") and current:  # a new report starts at column 0
            out.append(current)
            current = []
        current.append(body.strip())
    if current:
        out.append(current)
    return out


def _ids(m: re.Match | None, first: int) -> tuple[int, int, int] | None:
    return tuple(int(m.group(first + i)) for i in range(3)) if m else None  # type: ignore[return-value]


def _text(t: tuple[int, int, int] | None) -> str:
    return "(?)" if t is None else f"({t[0]}, {t[1]}, {t[2]})"


def element_text(buffers: list[Buffer], address: int) -> str | None:
    """``name[i] (k past the end of name, m elements)`` for a global address outside every buffer but
    within :data:`GAP_BYTES` of one (the nearest), or ``name[i]`` inside one; None when far from all."""
    best: tuple[int, Buffer] | None = None
    for b in buffers:
        if b.base <= address < b.base + b.nbytes:
            return f"{b.name}[{(address - b.base) // b.itemsize}]"
        d = b.base - address if address < b.base else address - (b.base + b.nbytes) + 1
        if best is None or d < best[0]:
            best = (d, b)
    if best is None or best[0] > GAP_BYTES:
        return None
    b = best[1]
    count = b.nbytes // b.itemsize
    delta = address - b.base
    i = delta // b.itemsize if delta >= 0 else -((-delta + b.itemsize - 1) // b.itemsize)
    where = f"{-i} before the start of" if i < 0 else f"{i - count + 1} past the end of"
    return f"{b.name}[{i}] ({where} {b.name}, {count} element{'s' if count != 1 else ''})"


def parse_report(record: list[str], buffers: list[Buffer]) -> Finding | None:
    """One sanitizer report as a :class:`Finding` of the emulator's kinds and message form, or None
    for a report that is not a finding about the kernel (an API error, the process's exit)."""
    head = record[0]
    at = next((m for m in map(_AT.search, record[1:]) if m), None)
    by = next((m for m in map(_BY.search, record) if m), None)
    file, line = (at.group("file"), int(at.group("line"))) if at else (None, None)
    where = f"{file}:{line}" if file else "an unknown line"
    block, thread = _ids(by, 4), _ids(by, 1)
    race = _RACE.search(head)
    if race:
        second = next((m for m in map(_RACE2.search, record[1:]) if m), None)
        kind1, file, line = race.group(2).lower(), race.group(3), int(race.group(4))
        ofile, oline = (second.group(2), int(second.group(3))) if second else (None, None)
        kind2 = second.group(1).lower() if second else "access"
        hazards = f" ({second.group(4)} hazards)" if second and second.group(4) else ""
        warp = (" (compute-sanitizer rates it a warning: within a warp; volatile does not order threads, since "
                "Volta warp-synchronous code needs __syncwarp())" if race.group(1) == "Warning" else "")
        msg = (f"race on shared memory: a {kind1} at {file}:{line} and a {kind2} at {ofile}:{oline} by different "
               f"threads, with no __syncthreads() (or __syncwarp() within a warp) between them{hazards}{warp}")
        return Finding(kind="race", message=msg, file=file, line=line, other_file=ofile, other_line=oline)
    invalid = _INVALID.search(head)
    if invalid:
        space, verb, size = invalid.group(1), invalid.group(2), invalid.group(3)
        addr = next((m for m in map(_ADDRESS.search, record) if m), None)
        who = f"thread {_text(thread)} of block {_text(block)}"
        if space == "__global__" and addr:
            element = element_text(buffers, int(addr.group(1), 16))
            if element:
                msg = f"out-of-bounds global memory {verb} of {element} at {where}"
            else:
                msg = (f"out-of-bounds access: {who} {verb}s {size} bytes at address {addr.group(1)} at {where}, which "
                       "is in no device allocation")
        elif space == "__shared__":
            msg = f"out-of-bounds shared memory {verb}: {who} {verb}s {size} bytes past the block's shared memory at {where}"
        else:
            msg = f"out-of-bounds {space.strip('_')} memory {verb}: {who} {verb}s {size} bytes at {where}"
        return Finding(kind="out-of-bounds", message=msg, file=file, line=line, block=block, thread=thread)
    if _MISALIGNED.search(head):
        return Finding(kind="misaligned", message=f"misaligned access: thread {_text(thread)} of block {_text(block)} "
                                                  f"at {where}: {head}", file=file, line=line, block=block,
                       thread=thread)
    barrier = _BARRIER.search(head)
    if barrier:
        msg = (f"barrier divergence: {barrier.group(1).rstrip('.')} at {where}: threads of the block reach "
               "__syncthreads() at different points (an early return or a barrier inside a branch some threads skip)")
        return Finding(kind="barrier-divergence", message=msg, file=file, line=line, block=block, thread=thread)
    return None


def findings_by_case(text: str, token: str) -> tuple[dict[int, list[Finding]], set[int], set[int]]:
    """Split one child's output into the findings of each case (by the child's markers).

    Returns:
        ``(findings per case index, cases started, cases finished)``.
    """
    per: dict[int, list[Finding]] = {}
    started: set[int] = set()
    done: set[int] = set()
    current: int | None = None
    chunk: list[str] = []
    buffers: list[Buffer] = []
    mark = f"{_MARK} {token} "

    def flush() -> None:
        if current is None:
            return
        seen = {(f.kind, f.file, f.line) for f in per.setdefault(current, [])}
        for record in _records(chunk):
            finding = parse_report(record, buffers)
            if finding and (finding.kind, finding.file, finding.line) not in seen:
                seen.add((finding.kind, finding.file, finding.line))
                per[current].append(finding)
    for line in text.splitlines():
        if line.startswith(mark):
            words = line[len(mark):].split()
            if words[:1] == ["case"]:
                flush()
                current, chunk, buffers = int(words[1]), [], []
                started.add(current)
            elif words[:1] == ["buffer"] and len(words) == 5:
                buffers.append(Buffer(words[1].replace("~", " "), int(words[2]), int(words[3]), int(words[4])))
            elif words[:1] == ["done"]:
                flush()
                chunk = []
                done.add(int(words[1]))
            continue
        chunk.append(line)
    flush()
    return per, started, done


# --- running it ---------------------------------------------------------------------------------------

def check_cases(*, sanitizer: str, job: Path, cubins: dict[str, Path], cases: list[tuple[int, str]], workdir: Path,
                case_timeout_s: float | Callable[[int], float], tools: tuple[str, ...] = TOOLS,
                first_output_s: float | None = None, stop_at_silence: bool = False) -> dict[int, CaseChecks]:
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
            :data:`FAULTS_IN_A_ROW` cases in a row checks no further case either; those cases are
            returned unchecked by it (incomplete).

    Returns:
        Per case index, its :class:`CaseChecks` (``seconds``: the longest a tool took on it).
    """
    limit = case_timeout_s if callable(case_timeout_s) else (lambda _index: float(case_timeout_s))
    if first_output_s is None:
        first_output_s = 60.0 if callable(case_timeout_s) else float(case_timeout_s)
    with ThreadPoolExecutor(len(tools)) as pool:
        runs = list(pool.map(lambda tool: _run_tool(sanitizer, tool, job, cubins, cases, workdir, limit,
                                                    first_output_s, stop_at_silence), tools))
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


def _run_tool(sanitizer: str, tool: str, job: Path, cubins: dict[str, Path], cases: list[tuple[int, str]],
              workdir: Path, limit: Callable[[int], float], first_output_s: float, stop_at_silence: bool
              ) -> tuple[dict[int, list[Finding]], set[int], dict[int, float], int | None]:
    """One tool over ``cases``: a child from the first case not yet run, again after each child that
    ended (a fault loses the context) or was stopped, until every case was tried once (or, with
    ``stop_at_silence``, until a child goes silent on a case). Returns the findings per case, the
    cases finished, the seconds each took (between its markers) and the case it went silent on."""
    per: dict[int, list[Finding]] = {}
    done: set[int] = set()
    seconds: dict[int, float] = {}
    silent_on: int | None = None
    faults = 0  # children in a row that ended with their first case (a fault loses the context)
    todo = list(cases)
    while todo and silent_on is None and faults < FAULTS_IN_A_ROW:
        token = secrets.token_hex(8)
        argv = [sanitizer, "--tool", tool, "--show-backtrace", "no", "--print-limit", "64", "--check-exit-code", "no"]
        if tool == "racecheck":
            argv += ["--racecheck-report", "analysis"]
        argv += [sys.executable, "-m", "grader.sanitizer", str(job), token,
                 ",".join(f"{d}={p}" for d, p in cubins.items()), ",".join(f"{i}:{d}" for i, d in todo)]
        log = workdir / f"sanitizer-{tool}-{token}.txt"
        mark = f"{_MARK} {token} ".encode()
        with open(log, "wb") as out, open(log, "rb") as reader:
            # Its own process group in the worker's session: stopped with the worker (runner.kill_session).
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=workdir, process_group=0)
            last_change = time.monotonic()
            allowed = first_output_s
            started: dict[int, float] = {}
            current: int | None = None
            pending = b""
            while proc.poll() is None:
                time.sleep(0.05)
                new = reader.read()
                now = time.monotonic()
                if new:
                    last_change = now
                    pending += new
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        if not line.startswith(mark):
                            continue
                        words = line[len(mark):].split()
                        if words[:1] == [b"case"] and len(words) > 1 and words[1].isdigit():
                            current = int(words[1])
                            started[current] = now
                            allowed = limit(current)
                        elif words[:1] == [b"done"] and len(words) > 1 and words[1].isdigit():
                            index = int(words[1])
                            if index in started:
                                seconds[index] = now - started[index]
                elif now - last_change > allowed:
                    try:
                        os.killpg(proc.pid, 9)
                    except ProcessLookupError:
                        pass
                    proc.wait()
                    if stop_at_silence and current is not None and current not in seconds:
                        silent_on = current
                    break
        text = log.read_text(errors="replace")
        found, started_cases, finished = findings_by_case(text, token)
        for index, fs in found.items():
            per.setdefault(index, []).extend(fs)
        done |= finished
        tried = started_cases | finished
        if not tried:  # the child did not get to a case (no GPU, no PyCUDA): give up on this tool
            break
        order = [c[0] for c in todo]
        last = max(order.index(i) for i in tried if i in order)
        faults = faults + 1 if last == 0 and proc.returncode is not None and proc.returncode >= 0 and len(todo) > 1 \
            else 0
        todo = todo[last + 1:]
    return per, done, seconds, silent_on


# --- the child ------------------------------------------------------------------------------------

def _child(argv: list[str]) -> int:
    """``python -m grader.sanitizer JOB TOKEN DTYPE=CUBIN,... INDEX:DTYPE,...``: replay the cases on
    exact-size buffers, writing markers; exits at the first CUDA error (its context is lost)."""
    job_path, token, cubin_arg, case_arg = argv
    import numpy as np

    from grader.backends.pycuda_backend import PyCudaBackend
    from grader.errors import KernelError, LaunchError
    from grader.execute import case_list, make_input
    from grader.parts import DTYPES, PARTS
    from grader.plans import Run, prepare
    from grader.protocol import Job

    job = Job.from_json(Path(job_path).read_text(encoding="utf-8"), where=job_path)
    cfg = job.config
    part = PARTS[job.part]
    pc = cfg.parts[part.key]
    specs = case_list(cfg, part.key)
    backend = PyCudaBackend(sandbox="off")
    modules = {d: backend.load_cubin(Path(p).read_bytes(), filename=part.filename, kernels=part.kernels)
               for d, p in (item.split("=", 1) for item in cubin_arg.split(","))}
    mark = f"{_MARK} {token}"

    def say(text: str) -> None:
        sys.stdout.write(f"\n{mark} {text}\n")
        sys.stdout.flush()
    for item in case_arg.split(","):
        index, dtype_name = item.split(":")
        case = specs[int(index)]
        dtype = DTYPES[dtype_name]
        x = make_input(cfg, part, case.n, case.seed, dtype)
        say(f"case {index}")
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
                say(f"buffer {g.name.replace(' ', '~')} {g.inner.address} {g.inner.nbytes} {g.inner.dtype.itemsize}")
            with backend.gpu_shared():  # never while another worker times (grader.gpu_lock); case by case
                plan.run()
                backend.synchronize()
        except LaunchError:
            pass  # refused before it ran: the plain run reports it
        except KernelError:
            say(f"done {index}")
            sys.stdout.flush()
            os._exit(0)  # the context is lost; a new child runs the cases after this one
        say(f"done {index}")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
