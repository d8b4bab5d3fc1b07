"""A pytest plugin: the grading cases of a submission as pytest items.

Installed with scangrade (entry point ``pytest11``, name ``scangrade``), it does nothing unless
``--scangrade`` is given::

    pytest --scangrade SUBMISSION [--scangrade-config FILE] [--scangrade-backend auto|pycuda|emulator]
           [--scangrade-private-config FILE] [--scangrade-no-checks] [-k EXPR] [--junitxml FILE]

SUBMISSION is a folder holding the part files (``part1_naive.cu`` ...) or one part's file. Every
case of :func:`grader.grading.case.cases.case_list` becomes one item, ``PART[DTYPE-n=N]`` (hidden cases from a
private config ``PART[DTYPE-hidden-K]``), under a collector named after the submission
(``assignment::part2_blelloch[int32-n=1000]``); a part with GPU timing in the config adds
``PART[performance]``, skipped where nothing is timed (the emulator), and a part whose config
profile earns points adds ``PART[bank-conflicts]`` (failed below full profile points, with the
worst line; counted by the emulator on any machine). ``-k`` selects by name
(``-k "part2_blelloch and float32"``); each item also carries the keywords ``n<N>`` and its dtype
(``-k n1000``).

A part is graded once, through :func:`grader.grading.runner.grade` with ``parts=[key]`` (its own child
process, as ``scangrade grade`` does), when the first selected item of that part runs; parts with
no selected item are not graded. An item passes when its case passed; otherwise it fails with the
case's message (the first mismatch and the hint, n, dtype and seed) as the failure text, no
traceback; a part that does not compile fails every item with the compiler's log. pytest's own
``--junitxml`` then gives one testcase per case. The config is ``--scangrade-config``, else
``./config.yaml``, else the one beside the grader; the backend as for ``scangrade grade`` (all of
it decided by :func:`grader.api.prepare`, paths relative to where pytest was started). On the
emulator the race, bounds and barrier checks are on, as in every official grade
(``--scangrade-no-checks`` turns them off, for speed).

Only the submission's items are collected, wherever pytest runs: not the project's ``testpaths``,
not a path given on the command line, no ``conftest.py`` (``--noconftest`` is implied), so no
"No files were found in testpaths" warning and no other suite beside the grade.
"""

from __future__ import annotations

from pathlib import Path

import pytest

#: Part statuses whose message explains every case of the part (compile log, missing file, ...).
_PART_MESSAGE_STATUSES = ("compile-error", "missing", "timeout", "crash", "error")


def pytest_addoption(parser: pytest.Parser) -> None:
    """The plugin's options (group ``scangrade``)."""
    from grader.backends import CHOICES as BACKEND_CHOICES
    group = parser.getgroup("scangrade", "grade CUDA scan kernels with scangrade (one item per case)")
    group.addoption("--scangrade", metavar="SUBMISSION", default=None,
                    help="grade SUBMISSION (a folder of part files, or one part's .cu file): one test item per "
                         "part, size and dtype")
    group.addoption("--scangrade-config", metavar="FILE", default=None,
                    help="scangrade's config (default: ./config.yaml, else the one beside the grader)")
    group.addoption("--scangrade-backend", choices=BACKEND_CHOICES, default=None,
                    help="where kernels run (default: SCANGRADE_BACKEND, then the config, then auto)")
    group.addoption("--scangrade-private-config", metavar="FILE", default=None,
                    help="a TA's private config adding hidden cases")
    group.addoption("--scangrade-checks", dest="scangrade_checks", action="store_true", default=True,
                    help="on the emulator: race, bounds and barrier checks under three thread orders (the default)")
    group.addoption("--scangrade-no-checks", dest="scangrade_checks", action="store_false",
                    help="skip the emulator's checks (faster; the grade may then differ from the official one)")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """With ``--scangrade``: pytest collects from the folder it runs in (``.``), never from the
    project's ``testpaths`` or the folder where the submission is (:func:`pytest_ignore_collect`
    then skips every file), so no "No files were found in testpaths" warning and no other suite."""
    if early_config.known_args_namespace.scangrade is not None:
        early_config.known_args_namespace.noconftest = True  # for the initial conftests, read from here
        args += ["--noconftest", str(early_config.invocation_params.dir)]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With ``--scangrade``: no file or folder is collected; the submission's items come from
    :class:`SubmissionCollector` alone (a submission's own ``test_*.py`` or ``conftest.py`` is
    never imported)."""
    return True if config.getoption("scangrade", None) is not None else None


def pytest_configure(config: pytest.Config) -> None:
    """With ``--scangrade``: load the config, choose the backend and register the grading session."""
    submission = config.getoption("scangrade")
    if submission is None:
        return
    config.pluginmanager.register(_Grading.from_options(config), "scangrade-grading")


class _CaseFailed(Exception):
    """A case that did not pass; its text is the item's whole failure report."""


class _Grading:
    """The submission, its config and backend, and the parts graded so far (each graded once)."""

    def __init__(self, *, submission: Path, grading, keys: list[str]) -> None:
        self.submission, self.grading = submission, grading  # grading: a grader.api.Grading
        self.cfg, self.selection, self.checks = grading.cfg, grading.selection, grading.checks
        self.keys = keys  # the parts to collect: every configured one, or a single file's part
        self.parts: dict = {}

    @classmethod
    def from_options(cls, config: pytest.Config) -> _Grading:
        from grader import api
        from grader.core.errors import ScangradeError
        from grader.grading.intake import resolve_submission

        here = Path(config.invocation_params.dir)
        submission = api.absolute(config.getoption("scangrade"), here)
        try:
            grading = api.prepare(config=config.getoption("scangrade_config"),
                                  private_config=config.getoption("scangrade_private_config"),
                                  backend=config.getoption("scangrade_backend"),
                                  checks=config.getoption("scangrade_checks"), start=here, flag="--scangrade-config")
            found = resolve_submission(submission)  # raises for a path that is not there
        except ScangradeError as exc:
            raise pytest.UsageError(f"--scangrade: {exc}") from None
        keys = [k for k in found if k in grading.cfg.parts] if submission.is_file() else list(grading.cfg.parts)
        return cls(submission=submission, grading=grading, keys=keys)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        line = (f"scangrade: {self.submission} · config {self.cfg.path} · backend {self.selection.name} "
                f"({self.selection.reason}){'' if self.checks else ' · no checks'}")
        return [line]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector):
        """Adds the submission's collector to what the session collects from its arguments."""
        outcome = yield
        report = outcome.get_result()
        if isinstance(collector, pytest.Session) and report.passed:
            name = self.submission.name or "submission"
            report.result.append(SubmissionCollector.from_parent(collector, name=name, nodeid=name, path=self.submission,
                                                                 grading=self))

    def part(self, key: str):
        """The :class:`~grader.core.results.PartResult` of part ``key``, graded on first use."""
        if key not in self.parts:
            result = self.grading.grade(self.submission, parts=[key])
            self.parts[key] = result.parts[0]
        return self.parts[key]


class SubmissionCollector(pytest.Collector):
    """The submission: one :class:`CaseItem` per grading case, and a performance item per timed part."""

    def __init__(self, *, grading: _Grading, **kwargs) -> None:
        super().__init__(**kwargs)
        self.grading = grading

    def collect(self):
        from grader.grading.case.cases import case_list
        from grader.assignment.parts import PARTS

        cfg = self.grading.cfg
        for key in (k for k in PARTS if k in self.grading.keys):
            seen: dict[str, int] = {}
            hidden = 0
            for case in case_list(cfg, key):
                if case.visibility == "hidden":
                    hidden += 1
                    label = f"{case.dtype}-hidden-{hidden}"
                else:
                    label = f"{case.dtype}-{'fractional-' if case.fractional else ''}n={case.n}"
                occurrence = seen.get(case.name, 0)
                seen[case.name] = occurrence + 1
                name = f"{key}[{label}{f'-{occurrence + 1}' if occurrence else ''}]"
                item = CaseItem.from_parent(self, name=name, key=key, case_name=case.name, occurrence=occurrence)
                item.extra_keyword_matches.update({case.dtype, f"n{case.n}", key, case.visibility})
                yield item
            if cfg.parts[key].timing is not None:
                yield PerformanceItem.from_parent(self, name=f"{key}[performance]", key=key)
            if cfg.parts[key].profile is not None and cfg.parts[key].profile.points:
                yield ProfileItem.from_parent(self, name=f"{key}[bank-conflicts]", key=key)


class _PartItem(pytest.Item):
    def __init__(self, *, key: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.key = key

    def _part(self):
        from grader.core.errors import ScangradeError
        try:
            return self.parent.grading.part(self.key)
        except ScangradeError as exc:
            raise _CaseFailed(f"scangrade could not grade {self.key}: {exc}") from None

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, _CaseFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        from grader.assignment.parts import PARTS
        sub = self.parent.grading.submission
        path = sub / PARTS[self.key].filename if sub.is_dir() else sub
        return path, None, self.name


class CaseItem(_PartItem):
    """One grading case: passes when the case passed, else fails with its message."""

    def __init__(self, *, case_name: str, occurrence: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.case_name, self.occurrence = case_name, occurrence

    def runtest(self) -> None:
        from grader.render import visible_case_details
        part = self._part()
        matches = [c for c in part.cases if c.name == self.case_name]
        if len(matches) <= self.occurrence:
            raise _CaseFailed(f"{self.case_name}: no result from the grader (part status {part.status})")
        case = matches[self.occurrence]
        if case.status == "pass":
            return
        text = visible_case_details(case)
        if part.status in _PART_MESSAGE_STATUSES and part.message and part.message not in case.message:
            text += "\n\n" + part.message
        raise _CaseFailed(f"{case.status}: {text}")


class PerformanceItem(_PartItem):
    """A timed part's performance score: skipped when not timed, failed when a timed run was wrong."""

    def runtest(self) -> None:
        part = self._part()
        perf = part.performance
        if perf is None or perf.message.startswith(("not timed", "not scored")):
            pytest.skip(perf.message if perf else "not timed")
        self.user_properties.append(("performance_points", f"{perf.points:g}/{perf.max_points:g}"))
        failed = [c for c in part.cases if c.name.startswith("timed ") and c.status != "pass"]
        if failed:
            raise _CaseFailed(perf.message + "\n" + "\n".join(f"{c.name}: {c.message}" for c in failed))


class ProfileItem(_PartItem):
    """A part's bank-conflict profile points: skipped when not profiled, failed below full points
    with the report's lines (the worst line and its n-way conflict)."""

    def runtest(self) -> None:
        from grader.core.access_profile import report_lines
        prof = self._part().profile
        if prof is None or prof.wavefronts is None:
            pytest.skip(prof.message if prof else "not profiled")
        self.user_properties.append(("profile_points", f"{prof.points:g}/{prof.max_points:g}"))
        if prof.points < prof.max_points:
            raise _CaseFailed("\n".join(report_lines(prof)))
