"""One verdict on every machine: the same student file gets the same status and the same failure kind
for every case on the CPU emulator and on a GPU.

The corpus (``tests/verdicts/``) is one small kernel per failure kind, written as a student would,
plus the reference solutions as the correct kernels; ``tests/verdicts/expected.yaml`` says what each
must get (part status, the set of failure kinds, exactly which sizes fail) under
``tests/verdicts/config.yaml``. Each file is graded through :func:`grader.grading.runner.grade`, as every
command grades, on the emulator (always) and through PyCUDA (marker ``gpu``; skipped with the
reason where there is no GPU); on a GPU a third test grades each file on both backends in this one
process and asserts that every case's status and kind agree. ``bench/verdicts.py`` prints the same
comparison as a table, using the functions here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from grader.backends import Selection
from grader.assignment.config import Config, load_config
from grader.grading.case.cases import case_list
from grader.assignment.parts import PARTS
from grader.core.results import CHECK_KINDS, CaseStatus, FailureKind, PartResult, PartStatus
from grader.grading.runner import grade
from tests.conftest import BACKENDS, ROOT, VERDICTS, gpu_available

CONFIG = VERDICTS / "config.yaml"
TABLE = VERDICTS / "expected.yaml"

#: Keys an entry of expected.yaml may have; ``file`` and ``part`` are required.
_ENTRY_KEYS = {"file", "part", "status", "kinds", "fails", "case_status", "expected"}


@dataclass(frozen=True)
class Expected:
    """One row of ``expected.yaml``: what every backend must give ``path`` graded as ``part``.

    Attributes:
        file: the file as the table names it (relative to ``tests/verdicts``).
        path: the file itself.
        part: the part key it is graded as.
        status: the part's status.
        kinds: the failure kinds of the cases that do not pass, as a set.
        fails: the sizes n whose cases do not pass (in every configured dtype).
        case_status: the status of each case that does not pass.
    """

    file: str
    path: Path
    part: str
    status: str = ""
    kinds: frozenset[str] = frozenset()
    fails: frozenset[int] = frozenset()
    case_status: str = "fail"

    @property
    def name(self) -> str:
        """A short id: the file's stem, ``reference-<part>`` for a reference solution."""
        return f"reference-{self.part}" if "reference" in self.path.parts else self.path.stem


def known_kinds() -> frozenset[str]:
    """Every failure kind a case can carry (the grader's own and the checkers')."""
    return frozenset(FailureKind) | CHECK_KINDS


def load_table(path: Path = TABLE, cfg: Config | None = None) -> list[Expected]:
    """The rows of ``expected.yaml``, checked against the corpus config (``all`` resolved to its
    sizes).

    Raises:
        ValueError: an unknown key, part, status or kind, a missing file, a size the config does
            not grade, or a row that contradicts itself (a pass with failing sizes...).
    """
    cfg = cfg or load_config(CONFIG)
    rows = yaml.safe_load(path.read_text())["verdicts"]
    table, seen = [], set()
    for row in rows:
        where = f"{path.name}: {row.get('file')!r}"
        if set(row) - _ENTRY_KEYS or not {"file", "part"} <= set(row):
            raise ValueError(f"{where}: keys {sorted(row)}; allowed {sorted(_ENTRY_KEYS)}, file and part required")
        file_path = (path.parent / row["file"]).resolve()
        if not file_path.is_file():
            raise ValueError(f"{where}: no such file {file_path}")
        part = row["part"]
        if part not in PARTS or part not in cfg.parts:
            raise ValueError(f"{where}: part {part!r} is not a part of {cfg.path}")
        if row["file"] in seen:
            raise ValueError(f"{where}: listed twice")
        seen.add(row["file"])
        if "expected" in row:
            raise ValueError(f"{where}: 'expected' is not a key of a row: give the file's verdict (status, kinds, fails)")
        sizes = set(cfg.parts[part].sizes) | {c.n for c in case_list(cfg, part)}
        fails = sizes if row.get("fails") == "all" else set(row.get("fails", []))
        kinds = frozenset(row.get("kinds", []))
        status, case_status = row.get("status"), row.get("case_status", "fail")
        if status not in set(PartStatus) or case_status not in set(CaseStatus) - {"pass"}:
            raise ValueError(f"{where}: status {status!r}, case_status {case_status!r}")
        if fails - sizes:
            raise ValueError(f"{where}: sizes {sorted(fails - sizes)} are not graded by {cfg.path}")
        if kinds - known_kinds():
            raise ValueError(f"{where}: unknown kinds {sorted(kinds - known_kinds())}")
        if (status == "pass") != (not fails) or bool(fails) != bool(kinds):
            raise ValueError(f"{where}: status {status}, kinds {sorted(kinds)} and fails {sorted(fails)} disagree")
        table.append(Expected(row["file"], file_path, part, status, kinds, frozenset(fails), case_status))
    return table


def corpus_config() -> Config:
    """The corpus's configuration (tests/verdicts/config.yaml)."""
    return load_config(CONFIG)


@functools.lru_cache(maxsize=None)
def grade_entry(path: Path, part: str, backend: str) -> PartResult:
    """``path`` graded as ``part`` on ``backend`` with the corpus config, as every command grades
    (checks on); cached, so the agreement test reuses the results of the per-backend tests."""
    result = grade(path, cfg=corpus_config(), selection=Selection(backend, "verdict corpus"), parts=[part])
    (res,) = result.parts
    return res


def verdict_problems(entry: Expected, res: PartResult, cfg: Config) -> list[str]:
    """How ``res`` differs from what the table expects of ``entry``: one line per problem, empty
    when it is exactly as expected (part status, every case's status and kind, the set of kinds)."""
    problems = []
    if res.status != entry.status:
        problems.append(f"part status {res.status}, expected {entry.status} ({res.message.splitlines()[0] if res.message else 'no message'})")
    cases = {c.name: c for c in res.cases}
    wanted = case_list(cfg, entry.part)
    if sorted(cases) != sorted(c.name for c in wanted):
        problems.append(f"cases {sorted(cases)}, expected {sorted(c.name for c in wanted)}")
    for spec in wanted:
        c = cases.get(spec.name)
        if c is None:
            continue
        if spec.n in entry.fails:
            if c.status != entry.case_status or str(c.kind) not in entry.kinds:
                problems.append(f"{c.name}: {c.status} ({c.kind}), expected {entry.case_status} "
                                f"({' or '.join(sorted(entry.kinds))}): {c.message.splitlines()[0] if c.message else ''}")
        elif c.status != "pass":
            problems.append(f"{c.name}: {c.status} ({c.kind}), expected pass: "
                            f"{c.message.splitlines()[0] if c.message else ''}")
    seen = {str(c.kind) for c in res.cases if c.status != "pass"}
    if seen != set(entry.kinds):
        problems.append(f"kinds {sorted(map(str, seen))}, expected {sorted(entry.kinds)}")
    return problems


def disagreements(a: PartResult, b: PartResult) -> list[str]:
    """Cases whose status or kind differ between two gradings of one file (one line each)."""
    first = {c.name: (str(c.status), c.kind) for c in a.cases}
    second = {c.name: (str(c.status), c.kind) for c in b.cases}
    lines = [f"{name}: {first.get(name)} against {second.get(name)}"
             for name in sorted(set(first) | set(second)) if first.get(name) != second.get(name)]
    if a.status != b.status:
        lines.insert(0, f"part status: {a.status} against {b.status}")
    return lines


def summary(res: PartResult) -> str:
    """A part's verdict in one line: ``fail: race (n=33, 100, 512)``; ``pass``."""
    failing = [c for c in res.cases if c.status != "pass"]
    if not failing:
        return str(res.status)
    by_kind: dict[str, set[int]] = {}
    for c in failing:
        by_kind.setdefault(f"{c.kind}" + ("" if c.status in ("fail", c.kind) else f"/{c.status}"), set()).add(c.n)
    kinds = "; ".join(f"{k} (n={', '.join(map(str, sorted(ns)))})" for k, ns in sorted(by_kind.items()))
    return f"{res.status}: {kinds}"


def expected_summary(entry: Expected) -> str:
    """The table's verdict in the form of :func:`summary`."""
    if not entry.fails:
        return entry.status
    suffix = "" if entry.case_status == "fail" or entry.kinds == {entry.case_status} else f"/{entry.case_status}"
    return (f"{entry.status}: {' or '.join(sorted(entry.kinds))}{suffix} "
            f"(n={', '.join(map(str, sorted(entry.fails)))})")


ENTRIES = load_table()


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_corpus_file_gets_its_verdict(entry, backend):
    res = grade_entry(entry.path, entry.part, backend)
    problems = verdict_problems(entry, res, corpus_config())
    assert not problems, f"{entry.file} on {backend}: {summary(res)}\n" + "\n".join(problems)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available()[0], reason=f"no usable CUDA GPU: {gpu_available()[1]}")
@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_the_emulator_and_the_gpu_agree_on_every_case(entry):
    emulator = grade_entry(entry.path, entry.part, "emulator")
    gpu = grade_entry(entry.path, entry.part, "pycuda")
    lines = disagreements(emulator, gpu)
    assert not lines, (f"{entry.file}: emulator {summary(emulator)}, pycuda {summary(gpu)}\n" + "\n".join(lines))


def test_the_table_covers_every_file_of_the_corpus():
    listed = {e.path for e in ENTRIES}
    assert {p.resolve() for p in VERDICTS.glob("*.cu")} <= listed
    assert {(ROOT / "reference" / "solutions" / f"{key}.cu").resolve() for key in PARTS} <= listed
