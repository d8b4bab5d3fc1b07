"""JUnit XML from a :class:`~grader.core.results.SubmissionResult`, for course CI (Jenkins, GitLab, GitHub).

The layout is the common one those tools read (Jenkins' ``junit-10.xsd``): one ``<testsuites>``,
a ``<testsuite>`` per part with ``<properties>``, a ``<testcase>`` per case with at most one of
``<failure>``, ``<error>`` or ``<skipped>``, and ``<system-out>`` / ``<system-err>`` for details.
JUnit output is for TAs: hidden cases are shown in full.
"""

from __future__ import annotations

import os

import re
import xml.etree.ElementTree as ET
from pathlib import PurePath

from grader.render._common import (analysis_report, points, printable, stopped_case, timing_text, utc_timestamp,
                                   visible_case_details, whole_part_failure)
from grader.render._patterns import size_pattern
from grader.core.results import CaseResult, PartResult, SubmissionResult

#: Case status -> the JUnit child element marking it (None: the testcase passed).
CASE_ELEMENT = {"pass": None, "fail": "failure", "error": "error", "timeout": "error", "crash": "error",
                "not-run": "skipped"}

def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    el = ET.SubElement(parent, tag, {k: printable(v) for k, v in attrs.items()})
    if text:
        el.text = printable(text)  # leaves nothing XML 1.0 refuses but tab and newline
    return el


def _seconds(s: float | None) -> str:
    return f"{max(0.0, s or 0.0):.3f}"


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def _mismatch_text(case: CaseResult) -> str:
    mm = case.mismatch
    if mm is None:
        return ""
    bits = [f"buffer {mm.buffer}", f"index {mm.index}", f"got {mm.got}", f"expected {mm.expected}",
            f"{mm.wrong} wrong"]
    if mm.first_wrong_tile is not None:
        bits.append(f"first wrong tile starts at {mm.first_wrong_tile}")
    text = "first mismatch: " + ", ".join(bits)
    return text + (f"\nhint: {mm.hint}" if mm.hint else "")


#: A compiler's diagnostic with its place: nvcc's ``FILE(LINE): error`` or the host compiler's
#: ``FILE:LINE:COLUMN: error`` (``fatal error`` included).
_COMPILER_PLACE = re.compile(r"(?:^|\s)(?P<file>[^\s:()]+)(?:\((?P<paren>\d+)\)|:(?P<colon>\d+)(?::\d+)?):\s*"
                             r"(?:fatal )?error\b", re.MULTILINE)


def case_place(part: PartResult, case: CaseResult) -> tuple[str, int] | None:
    """Where in the student's file a failing case went wrong: ``(part.file, line)`` of its first
    finding (cause order: the likeliest cause) that names a line of the part's file; None when no
    finding does (a wrong value, a timeout)."""
    name = PurePath(part.file).name
    return next(((part.file, f.line) for f in case.findings if f.file and f.line and PurePath(f.file).name == name),
                None)


def compile_place(part: PartResult) -> tuple[str, int] | None:
    """Where the part's first compile error is: ``(part.file, line)`` of the first ``error`` the
    compiler's output (the part's message) places in the part's file; None when none does."""
    name = PurePath(part.file).name
    for m in _COMPILER_PLACE.finditer(part.message):
        if PurePath(m["file"]).name == name:
            return part.file, int(m["paren"] or m["colon"])
    return None


def _place(place: tuple[str, int] | None) -> dict[str, str]:
    """The ``file`` and ``line`` attributes of a testcase (pytest's, which course CI reads to annotate
    the line), or none. ``file`` is relative to the working directory where it lies below it, as
    pytest writes it (relative to its root): a CI runner's absolute path matches no file of the
    repository that annotates it."""
    if not place:
        return {}
    file = place[0]
    if os.path.isabs(file):
        try:
            rel = os.path.relpath(file)
        except ValueError:  # another drive
            rel = file
        if not rel.startswith(os.pardir):
            file = rel
    return {"file": file, "line": str(place[1])}


def _case(suite: ET.Element, part: PartResult, case: CaseResult) -> None:
    tc = _sub(suite, "testcase", name=case.name, classname=part.key,
              time=_seconds(case.elapsed_ms / 1e3 if case.elapsed_ms is not None else None),
              **_place(case_place(part, case) if case.status != "pass" else None))
    tag = CASE_ELEMENT[case.status]
    if tag == "skipped":
        _sub(tc, "skipped", message=case.message or "not run")
    elif tag is not None:
        full = part.message if case is stopped_case(part) and part.message else None
        body = "\n".join(x for x in (visible_case_details(case, full), _mismatch_text(case)) if x)
        _sub(tc, tag, body, message=case.message or case.status, type=case.status)
    out = [f"visibility: {case.visibility}; points {points(case.points)}/{points(case.max_points)}"]
    if case.timing is not None:
        out.append(timing_text(case.timing))
    _sub(tc, "system-out", "\n".join(out))


def _suite(parent: ET.Element, result: SubmissionResult, part: PartResult) -> ET.Element:
    suite = _sub(parent, "testsuite", name=part.key)
    stamp = utc_timestamp(result.started_at)
    if stamp:
        suite.set("timestamp", stamp)
    props = _sub(suite, "properties")
    facts = {"title": part.title, "file": part.file, "status": part.status,
             "points": points(part.points), "max_points": points(part.max_points),
             "backend": result.backend, "seed": str(result.seed), "block_size": str(result.block_size),
             "config": result.config, "scangrade_version": result.scangrade_version,
             **{f"device.{k}": str(v) for k, v in result.device.items()}}
    if part.performance is not None:
        perf = part.performance
        facts |= {"performance.points": points(perf.points), "performance.max_points": points(perf.max_points)}
        if perf.ratio is not None:
            facts["performance.ratio"] = f"{perf.ratio:.4f}"
    pattern = size_pattern(part)
    if pattern:
        facts["wrong_values_pattern"] = pattern
    for name, value in facts.items():
        _sub(props, "property", name=name, value=value)

    if whole_part_failure(part):
        tc = _sub(suite, "testcase", name=part.status, classname=part.key, time=_seconds(0),
                  **_place(compile_place(part) if part.status == "compile-error" else None))
        _sub(tc, "error", part.message or part.status, message=_first_line(part.message) or part.status,
             type=part.status)
    else:
        for case in part.cases:
            _case(suite, part, case)
    perf = part.performance
    if perf is not None:
        tc = _sub(suite, "testcase", name="performance", classname=part.key, time=_seconds(0))
        if perf.ratio is None:
            _sub(tc, "skipped", message=perf.message or "not timed")
        elif perf.points < perf.max_points:
            _sub(tc, "failure", perf.message, message=_first_line(perf.message) or "performance", type="performance")
        _sub(tc, "system-out", f"{points(perf.points)}/{points(perf.max_points)} performance points"
             + (f"; ratio to the reference {perf.ratio:.4f}" if perf.ratio is not None else "")
             + (f"\n{perf.message}" if perf.message else ""))
    _profile_case(suite, part)
    analysis = analysis_report(part)
    if analysis:  # the analysis table (GPU) or the roofline (emulator): information, never a failure
        tc = _sub(suite, "testcase", name="analysis", classname=part.key, time=_seconds(0))
        _sub(tc, "system-out", analysis)
    if part.message and not whole_part_failure(part) and stopped_case(part) is None:
        _sub(suite, "system-err", part.message)  # a part message no testcase carries

    cases = suite.findall("testcase")
    counts = {"tests": len(cases), "failures": sum(tc.find("failure") is not None for tc in cases),
              "errors": sum(tc.find("error") is not None for tc in cases),
              "skipped": sum(tc.find("skipped") is not None for tc in cases)}
    for k, v in counts.items():
        suite.set(k, str(v))
    suite.set("time", _seconds(sum(float(tc.get("time", "0")) for tc in cases)))
    return suite


def junit_xml(result: SubmissionResult) -> str:
    """The result as a JUnit XML document (a str with an XML declaration; write it as UTF-8).

    Shape: ``<testsuites name="scangrade" tests failures errors time>`` holding a
    ``<testsuite name=PART_KEY tests failures errors skipped time timestamp>`` per part, whose
    ``<properties>`` record the part (file, status, points) and the run (backend, seed, device...).
    Each case is a ``<testcase classname=PART_KEY name=CASE_NAME time=SECONDS>`` (host wall time of
    the case, 3 decimals) holding ``<failure>`` for ``fail``, ``<error>`` for ``error``, ``timeout``
    and ``crash``, ``<skipped>`` for ``not-run``, nothing for ``pass``; the ``message`` attribute is
    the case's message, the body adds n, seed, the first mismatch and timing. A part that failed
    before any case ran (compile error, missing file, timeout or crash while compiling) is a single
    ``<testcase name=STATUS>`` with an ``<error>`` whose body is the part's full message (the
    compiler output). A failing testcase carries ``file`` and ``line`` (the attributes pytest
    writes; CI's JUnit readers place the case there, and GitHub's ``mikepenz/action-junit-report``
    annotates that line) where it can be placed in the student's file: a case by its first
    finding that names a line (:func:`case_place`: a race, an out-of-bounds access, a
    deadlock...), a part that does not compile by its first compile error
    (:func:`compile_place`); ``file`` is the part's file as the result records it, ``line`` counts
    from 1. A part with a performance score adds ``<testcase name="performance">``: skipped when
    not timed, a failure below full performance points. Hidden cases appear in full:
    this output is for course CI, not for students. ANSI colour sequences are dropped and other
    characters XML 1.0 cannot hold (NUL, other control characters) are written as ``\\xNN``.
    """
    root = ET.Element("testsuites", {"name": "scangrade"})
    suites = [_suite(root, result, p) for p in result.parts]
    for k in ("tests", "failures", "errors"):
        root.set(k, str(sum(int(s.get(k, "0")) for s in suites)))
    root.set("time", _seconds(result.elapsed_s))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _profile_case(suite, part: PartResult) -> None:
    """``<testcase name="bank conflicts">`` for a part whose profile earns points: skipped when not
    profiled, a failure below full points; the report lines as system-out."""
    from grader.core.access_profile import report_lines
    prof = part.profile
    if prof is None or not prof.max_points:
        return
    tc = _sub(suite, "testcase", name="bank conflicts", classname=part.key, time=_seconds(0))
    if prof.wavefronts is None:
        _sub(tc, "skipped", message=prof.message or "not profiled")
    elif prof.points < prof.max_points:
        _sub(tc, "failure", prof.message, message=_first_line(prof.message) or "bank conflicts", type="profile")
    _sub(tc, "system-out", f"{points(prof.points)}/{points(prof.max_points)} profile points\n"
         + "\n".join(report_lines(prof)))
