"""The one table of failure kinds (grader/kinds.py): every kind any part of the grader can report is
in it, and everything else (case status, class report group) is derived from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grader.backends.pycuda_backend import _FAULTS
from grader.kinds import CHECK_KINDS, CRASH_KINDS, FAULT_KINDS, KINDS, WARNING_KINDS, group_of, verdict_of
from grader.render.class_report import FAILURE_KINDS, _case_kind
from grader.results import CaseResult, CaseStatus, FailureKind

EMULATOR = Path(__file__).resolve().parent.parent / "grader" / "backends" / "emulator"


def _runtime_kinds() -> set[str]:
    """Every kind string the emulator's C++ runtime gives a finding or an error, where it gives it
    (``make_finding``, ``bad_access``, a worker's ``fail``, the ABI's ``set_result``, a record's kind)."""
    text = "\n".join(p.read_text() for p in (EMULATOR / "runtime").iterdir() if p.suffix in (".inc", ".cpp", ".h"))
    found = set(re.findall(r'(?:make_finding|bad_access|fail)\(\s*\w+\s*,\s*"([\w-]+)"', text))
    found |= set(re.findall(r'set_result\(\s*\w+\s*,\s*SG_KERNEL_ERROR\s*,\s*"([\w-]+)"', text))
    found |= set(re.findall(r'snprintf\(\s*rec\.kind\s*,[^,]+,\s*"([\w-]+)"', text))  # a launch error's is no kind
    return found


def _executor_kinds() -> set[str]:
    """Every kind the emulator's executor gives the death of the process running a module."""
    return set(re.findall(r'ExecutorDied\(\s*"([\w-]+)"', (EMULATOR / "executor.py").read_text()))


def test_every_kind_the_grader_can_report_is_in_the_table():
    reported = ({kind for _, kind, _ in _FAULTS} | {str(k) for k in FailureKind} | _runtime_kinds()
                | _executor_kinds() | {"mismatch", "ticket"})
    assert {"trap", "assert", "shared-memory-limit", "internal", "race", "deadlock"} <= _runtime_kinds(), \
        "the runtime's kinds were not found: has the runtime's code moved?"
    assert {"crash", "sandbox-violation", "resource-limit"} <= _executor_kinds()
    assert reported - set(KINDS) == set()


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
    assert verdict_of("no-such-kind") == "error"
    assert verdict_of("compile-error") == "not-run"


def test_the_class_report_groups_kinds_by_the_table():
    def case(kind, status="fail"):
        return CaseResult(name="n=5 int32", n=5, dtype="int32", seed=1, status=status, points=0, max_points=1,
                          kind=kind)
    assert _case_kind(case("mismatch")) == "wrong-result" == _case_kind(case("ticket"))
    assert _case_kind(case("race")) == "race"
    assert _case_kind(case("illegal-address")) == "illegal-address"
    assert _case_kind(case("something-new")) == "kernel-error:something-new"
    assert _case_kind(case(None, "timeout")) == "timeout"
