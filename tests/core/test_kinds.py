"""The one table of failure kinds (grader/core/kinds.py): every kind any part of the grader can report is
in it, and everything else (case status, class report group, the docs' tables) is derived from it
or checked against it here.

The emulator's runtime reports kinds only through its own table, ``runtime/sg_kinds.h`` (a ``Kind``
enum: a report site cannot pass a string); :func:`kinds_without_a_row` is the check that every row of
it has a row in ``KINDS``, and the recipe test below shows that it fails on a new runtime kind
without one."""

from __future__ import annotations

import ast
import re
import shlex
import shutil
import subprocess
from typing import Iterable, Mapping

import pytest

from grader.backends.emulator.build import EmulatorToolchain
from grader.backends.pycuda.faults import FAULTS
from grader.core.kinds import (CHECK_KINDS, CRASH_KINDS, FAULT_KINDS, KINDS, STRICT_ENV, WARNING_KINDS, Kind, UnknownKind,
                          cause_rank, group_of, verdict_of)
from grader.render.class_report import FAILURE_KINDS, _case_kind
from grader.core.results import CaseResult, CaseStatus, FailureKind

from tests.conftest import ROOT

EMULATOR = ROOT / "grader" / "backends" / "emulator"
RUNTIME = EMULATOR / "runtime"
KINDS_HEADER = RUNTIME / "sg_kinds.h"


def runtime_kinds(header: str) -> dict[str, str]:
    """The runtime's table of kinds in the text of ``sg_kinds.h``: ``{C++ id: kind string}`` of the
    rows of its ``SG_KINDS`` list (``SG_KIND(out_of_bounds, "out-of-bounds")``). Raises
    AssertionError where the list is not there, or a row is there twice."""
    found = re.search(r"^#define SG_KINDS\(SG_KIND\)((?:.*\\\n)*.*)$", header, re.M)
    assert found, "sg_kinds.h has no `#define SG_KINDS(SG_KIND)` list: has the runtime's table moved?"
    rows = re.findall(r'\bSG_KIND\(\s*(\w+)\s*,\s*"([^"]*)"\s*\)', found.group(1))
    ids, names = [i for i, _ in rows], [n for _, n in rows]
    assert len(set(ids)) == len(ids) and len(set(names)) == len(names), f"a row twice in SG_KINDS: {rows}"
    return dict(rows)


def kinds_without_a_row(reported: Iterable[str], table: Mapping[str, Kind] = KINDS) -> set[str]:
    """The guard's check: the kinds in ``reported`` that ``table`` (the kinds' table) has no row for."""
    return set(reported) - set(table)


def _executor_kinds() -> set[str]:
    """Every kind the emulator's executor gives the death of the process running a module."""
    return set(re.findall(r'ExecutorDied\(\s*"([\w-]+)"', (EMULATOR / "executor.py").read_text()))


def _kinds_given_in_python() -> dict[str, set[str]]:
    """Every kind written as ``kind="..."`` in a call in the grader's Python code (a ``Finding`` of
    compute-sanitizer's parser, a ``KernelError``, a case result): ``{kind: files}``."""
    given: dict[str, set[str]] = {}
    for path in sorted((ROOT / "grader").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                for kw in node.keywords:
                    if kw.arg == "kind" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                        given.setdefault(kw.value.value, set()).add(path.relative_to(ROOT).as_posix())
    return given


def test_every_kind_the_runtime_can_report_has_a_row():
    reported = runtime_kinds(KINDS_HEADER.read_text())
    assert {"trap", "assert", "shared-memory-limit", "internal", "race", "deadlock", "barrier-divergence"} \
        <= set(reported.values()), "the runtime's table lacks kinds it reports: has it moved?"
    assert kinds_without_a_row(reported.values()) == set()


def test_the_runtime_reports_kinds_through_its_table_only():
    """No string literal of the runtime (and its executor) outside sg_kinds.h is a kind: every report
    site names a ``Kind`` of the table (the types say so; this catches a kind copied as text)."""
    kinds = set(KINDS) | set(runtime_kinds(KINDS_HEADER.read_text()).values())
    for path in sorted(RUNTIME.rglob("*")):
        if path.is_file() and path.suffix in (".inc", ".cpp", ".h") and path != KINDS_HEADER:
            literals = set(re.findall(r'"([^"\\\n]*)"', path.read_text()))
            assert literals & kinds == set(), f"{path.name} writes a kind as a string: use its Kind (sg_kinds.h)"


def test_every_kind_given_in_the_grader_code_has_a_row():
    given = _kinds_given_in_python()
    assert {"race", "out-of-bounds", "misaligned", "barrier-divergence"} <= set(given)  # sanitizer_report.py's parser
    sanitizer = {k for k, files in given.items() if "grader/grading/sanitizer_report.py" in files}
    assert "race" in sanitizer and sanitizer <= CHECK_KINDS  # compute-sanitizer's reports become checkers' kinds
    assert {k: sorted(given[k]) for k in kinds_without_a_row(given)} == {}


def test_every_kind_the_grader_can_report_is_in_the_table():
    reported = {kind for _, kind, _ in FAULTS} | {str(k) for k in FailureKind} | _executor_kinds() | {"mismatch",
                                                                                                       "ticket"}
    assert {"crash", "sandbox-violation", "resource-limit"} <= _executor_kinds()
    assert kinds_without_a_row(reported) == set()


def test_recipe_a_new_runtime_kind_fails_the_guard_until_its_row_is_added():
    """docs/architecture.md, "How to add... a failure kind", on a copy of the runtime's table: the
    runtime row alone fails the guard's check; with the row in KINDS it passes, and strict grading
    refuses the kind until then."""
    header = KINDS_HEADER.read_text()
    last = re.findall(r"^ *SG_KIND\(\w+, \"[\w-]+\"\)", header, re.M)[-1]
    added = header.replace(last, f'{last} \\\n    SG_KIND(warp_lane_gone, "warp-lane-gone")', 1)
    assert runtime_kinds(added)["warp_lane_gone"] == "warp-lane-gone"
    assert kinds_without_a_row(runtime_kinds(added).values()) == {"warp-lane-gone"}
    table = {**KINDS, "warp-lane-gone": Kind("warp-lane-gone", "fail", "warp-lane-gone", "a lane was gone",
                                             check=True, cause="divergence")}
    assert kinds_without_a_row(runtime_kinds(added).values(), table) == set()
    with pytest.raises(UnknownKind, match="warp-lane-gone"):
        verdict_of("warp-lane-gone")


def test_a_report_site_cannot_pass_a_kind_as_a_string(tmp_path):
    """The runtime's report functions take a ``Kind``: a site that passes a string does not compile,
    so a kind the runtime reports is a row of its table (on a copy of the runtime, syntax only)."""
    cxx = shlex.split(EmulatorToolchain().cxx)  # the emulator's own compiler, which the suite needs anyway
    copy = tmp_path / "runtime"
    shutil.copytree(RUNTIME, copy)
    flags = [*cxx, "-std=c++17", "-fsyntax-only", "-pthread", "-I", str(copy), str(copy / "runtime.cpp")]
    assert subprocess.run(flags, capture_output=True, text=True).returncode == 0
    blocks = copy / "block" / "deadlock.cpp"
    text = blocks.read_text()
    assert "make_finding(poller, Kind::deadlock)" in text
    blocks.write_text(text.replace("make_finding(poller, Kind::deadlock)", 'make_finding(poller, "deadlock")'))
    done = subprocess.run(flags, capture_output=True, text=True)
    assert done.returncode != 0 and "make_finding" in done.stderr


def test_an_unknown_kind_is_an_error_in_tests_and_a_verdict_in_production(monkeypatch):
    monkeypatch.setenv(STRICT_ENV, "1")  # the suite's setting (tests/conftest.py)
    for call in (verdict_of, cause_rank):
        with pytest.raises(UnknownKind, match="no-such-kind"):
            call("no-such-kind")
    assert verdict_of("race") == "fail"
    monkeypatch.delenv(STRICT_ENV)  # production: graded, gracefully
    assert verdict_of("no-such-kind") == "error"
    assert cause_rank("no-such-kind") == cause_rank("trap")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_has_a_valid_verdict_and_a_description(kind):
    k = KINDS[kind]
    assert k.verdict in set(CaseStatus) - {"pass"}
    assert k.description and not k.description.endswith(".")
    assert group_of(kind) in FAILURE_KINDS


def test_the_derived_sets_follow_the_table():
    assert {"race", "out-of-bounds", "barrier-divergence", "deadlock", "misaligned"} <= CHECK_KINDS
    assert CRASH_KINDS == {"crash", "sandbox-violation", "resource-limit"}
    assert {"uninitialized-read", "shift-clamped"} <= WARNING_KINDS
    assert {"illegal-address", "illegal-instruction", "launch-failure", "misaligned"} <= FAULT_KINDS
    assert all(verdict_of(k) == "fail" for k in CHECK_KINDS | FAULT_KINDS)
    assert verdict_of("compile-error") == "not-run"


def test_the_class_report_groups_kinds_by_the_table():
    def case(kind, status="fail"):
        return CaseResult(name="n=5 int32", n=5, dtype="int32", seed=1, status=status, points=0, max_points=1,
                          kind=kind)
    assert _case_kind(case("mismatch")) == "wrong-result" == _case_kind(case("ticket"))
    assert _case_kind(case("race")) == "race"
    assert _case_kind(case("illegal-address")) == "illegal-address"
    assert _case_kind(case("something-new")) == "kernel-error:something-new"  # a stored result's: even in tests
    assert _case_kind(case(None, "timeout")) == "timeout"


# -- the docs' tables of kinds ------------------------------------------------------------------------
def _doc_table(doc: str, heading: str) -> list[list[str]]:
    """The rows (cells, stripped) of the first table after ``heading`` in ``docs/<doc>``, header and
    rule left out."""
    lines = (ROOT / "docs" / doc).read_text().splitlines()
    start = lines.index(heading)
    rows, seen = [], False
    for line in lines[start + 1:]:
        if line.startswith("|"):
            seen = True
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif seen:
            break
    assert len(rows) > 2, f"docs/{doc}: no table after {heading!r}"
    return rows[2:]


def test_docs_results_lists_every_kind_with_its_status():
    listed: dict[str, str] = {}
    for cells in _doc_table("results.md", "### Failure kinds"):
        status = re.fullmatch(r"`([\w-]+)`", cells[1])
        assert status, f"docs/results.md: a kinds row's status is not one `status`: {cells}"
        for kind in re.findall(r"`([\w-]+)`", cells[0]):
            assert kind not in listed, f"docs/results.md lists {kind} twice"
            listed[kind] = status.group(1)
    assert set(listed) == set(KINDS), "docs/results.md's kinds differ from grader/core/kinds.py's KINDS"
    assert {k: s for k, s in listed.items() if KINDS[k].verdict != s} == {}


def test_docs_emulator_lists_the_checks_kinds():
    listed = [re.fullmatch(r"`([\w-]+)`", cells[0]) for cells in
              _doc_table("emulator.md", "## Checking mode (`EmulatorBackend(checks=True)`)")]
    assert all(listed)
    assert {m.group(1) for m in listed} == CHECK_KINDS
