"""Reading compute-sanitizer's reports: its text, split by the replay's case markers, as the
:class:`~grader.backends.base.Finding` objects of each case (:func:`findings_by_case`), in the kinds the
emulator gives the same bug (``race``, ``out-of-bounds``, ``misaligned``, ``barrier-divergence``), and
:class:`CaseChecks`, what the tools found in one case. Running the tools is
:mod:`grader.grading.sanitizer`'s job; replaying the cases under them, :mod:`grader.grading.sanitizer_child`'s.

Source of the report formats: NVIDIA, *Compute Sanitizer User Manual* (CUDA 13.0), chapters
"Memcheck Tool", "Racecheck Tool" and "Synccheck Tool".
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Iterable

from grader.backends.base import Finding

#: Unallocated bytes left between two buffers in the sanitizer's replay.
GAP_BYTES = 1 << 20
#: The start of every marker line the replay writes (then a random token and what happened).
MARK = "@@scangrade"


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
        seconds: the longest a tool took on it (s), where measured.
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
    """Split one child's output into the findings of each case (by the child's markers). Text after
    a case's ``done`` marker is still that case's (a fault's report may follow it, as the child
    exits), up to the next case or the request's ``end`` marker; a pool child's log after that
    marker is its next request's, for another worker or another case.

    Returns:
        ``(findings per case index, cases started, cases finished)``.
    """
    per: dict[int, list[Finding]] = {}
    started: set[int] = set()
    done: set[int] = set()
    current: int | None = None
    chunk: list[str] = []
    buffers: list[Buffer] = []
    mark = f"{MARK} {token} "

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
            elif words[:1] == ["end"]:  # a pool child's end of this request: what follows is another's
                break
            continue
        chunk.append(line)
    flush()
    return per, started, done
