"""docs/architecture.md, "How to add...", tried. A part and a backend: on an edited copy of the
package (below). A report format: a throwaway format (TAP, the Test
Anything Protocol) registered as a row of :data:`grader.render.formats.FORMATS` at run time, with
nothing else changed, gets its ``grade``/``check`` option, its files in a batch's student folders
(the staff's and, being student-facing, the student's), and the hidden-case tests of
``tests/render/test_render.py`` and ``tests/render/test_student_view.py``, which fail when it leaks a hidden case."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.cli import build_parser, main
from grader.render.formats import FORMATS, STUDENT_FOLDER, ReportFormat, batch_reports, report_files
from tests.conftest import ROOT, write_config


#: The throwaway format's renderer, as a renderer module would hold it; with ``LEAK`` it renders the
#: result itself instead of :func:`grader.render._common.student_view` of it (a student-facing
#: format done wrong: hidden cases' sizes and messages in full).
TAP_MODULE = '''
from grader.render._common import student_view
from grader.render.formats import FORMATS, ReportFormat

LEAK = {leak}


def tap(result, cfg):
    view = result if LEAK else student_view(result)
    cases = [(p, c) for p in view.parts for c in p.cases]
    lines = ["TAP version 13", f"1..{{len(cases)}}"]
    for i, (p, c) in enumerate(cases, 1):
        detail = f" n={{c.n}} {{c.message}}" if LEAK else ""
        lines.append(f"{{'ok' if c.status == 'pass' else 'not ok'}} {{i}} - Part {{p.number}} {{c.name}}{{detail}}")
    lines += [f"# Part {{p.number}}: {{p.status}}: {{line}}" for p in view.parts for line in p.message.splitlines()]
    return "\\n".join(lines) + "\\n"


FORMATS["tap"] = ReportFormat("tap", tap, "also write TAP to FILE", True, "report.tap")
'''


def _tap(result, cfg) -> str:
    return "TAP version 13\n" + "".join(f"ok - {p.key}\n" for p in result.parts)


@pytest.fixture
def tap(monkeypatch) -> ReportFormat:
    fmt = ReportFormat("tap", _tap, "also write TAP to FILE", True, "report.tap")
    monkeypatch.setitem(FORMATS, "tap", fmt)
    return fmt


def test_a_format_added_to_the_table_gets_its_option_and_is_written_by_grade(tap, tmp_path, capsys):
    assert build_parser().parse_args(["grade", "sub", "--tap", "t.tap"]).tap == "t.tap"
    assert build_parser().parse_args(["check", "--tap", "t.tap"]).tap == "t.tap"
    path = write_config(tmp_path, sizes={"part1_naive": [1]})
    (tmp_path / "part1_naive.cu").write_text("this does not compile\n")
    out = tmp_path / "report.tap"
    assert main(["grade", str(tmp_path), "--config", str(path), "--backend", "emulator", "--no-checks",
                 "--part", "part1_naive", "--tap", str(out)]) == 1
    capsys.readouterr()
    assert out.read_text() == "TAP version 13\nok - part1_naive\n"


def test_a_student_facing_format_added_to_the_table_goes_into_both_folders_of_a_batch(tap):
    from tests.render.test_render import RESULT
    assert "report.tap" in report_files() and "report.tap" in report_files(student=True)
    files = batch_reports(RESULT)
    assert files["report.tap"] == files[f"{STUDENT_FOLDER}/report.tap"] == _tap(RESULT, None)


def test_a_staff_format_added_to_the_table_stays_out_of_the_student_folder(monkeypatch):
    from tests.render.test_render import RESULT
    monkeypatch.setitem(FORMATS, "tap", ReportFormat("tap", _tap, "also write TAP to FILE", False, "report.tap"))
    files = batch_reports(RESULT)
    assert "report.tap" in files and f"{STUDENT_FOLDER}/report.tap" not in files


def _hidden_case_tests(tmp_path: Path, *, leak: bool) -> subprocess.CompletedProcess:
    """The hidden-case tests of the two test files, only those of the format ``tap``, run by pytest with
    the throwaway format registered as a plugin before the test files are collected."""
    plugin = tmp_path / f"tap_plugin_{int(leak)}"
    plugin.mkdir()
    (plugin / "scangrade_tap.py").write_text(textwrap.dedent(TAP_MODULE.format(leak=leak)))
    env = {"PYTHONPATH": f"{plugin}:{ROOT}", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "scangrade_tap", "-p", "no:cacheprovider",
                           "-k", "tap", "tests/render/test_render.py", "tests/render/test_student_view.py"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_the_hidden_case_tests_check_a_student_facing_format_added_to_the_table(tmp_path):
    safe = _hidden_case_tests(tmp_path, leak=False)
    assert safe.returncode == 0, safe.stdout[-3000:] + safe.stderr[-3000:]
    ran = int(safe.stdout.rsplit(" passed", 1)[0].rsplit("\n", 1)[-1].split()[-1])
    assert ran >= 10, safe.stdout[-2000:]  # the leak tests of both files, each over the new format
    leaky = _hidden_case_tests(tmp_path, leak=True)
    assert leaky.returncode == 1, leaky.stdout[-3000:] + leaky.stderr[-3000:]
    failed = [ln for ln in leaky.stdout.splitlines() if ln.startswith("FAILED")]
    assert any("test_render.py::test_student_views_leak_nothing_of_hidden_cases[" in ln for ln in failed), failed
    assert any("test_student_view.py::" in ln for ln in failed), failed


# -- "How to add... a part" and "... a backend", tried on a copy of the package ----------------------------
#
# A part's worker and a backend's create() run in a worker process, which imports the package afresh:
# a table patched in this process would not reach it. So these recipes are tried as a maintainer
# would: on a copy of ``grader/`` and ``reference/`` with the recipe's edits made to its files, graded
# by that copy's ``python -m grader``.

#: Part 6, an inclusive max-scan of one block: the row added to the copy's ``PARTS``, with its own
#: reference function and its own draw of inputs (the default draw and reference are the prefix sum's).
PART6_ROW = '''
        PartSpec("part6_max_scan", 6, "inclusive max-scan of one block", "part6_max_scan.cu",
                 (KernelSpec("max_scan", _scan_params()),), True, lambda b: b,
                 reference=lambda x: np.maximum.accumulate(x),
                 inputs=lambda rng, count, dtype: rng.integers(-1000, 1000, size=count, dtype=np.int32)),
'''
#: Part 6's plan, the row added to the copy's ``PLANS``: one block, as Part 1's.
PART6_PLAN = '''    "part6_max_scan": _one_block("max_scan", lambda b: b),\n'''
#: A backend that is the emulator, made by a module of its own, which notes in the file
#: ``$TRACED_LOG`` each backend it makes and each launch.
TRACED_MODULE = '''
"""A throwaway backend: the emulator, its creations and launches noted in the file $TRACED_LOG."""
import os

from grader.backends import emulator


def _note(line):
    with open(os.environ["TRACED_LOG"], "a") as f:
        f.write(line + "\\n")


def create(**options):
    backend = emulator.create(**options)
    _note(f"create {os.getpid()}")
    launch = backend.launch

    def traced_launch(module, kernel, **kw):
        _note(f"launch {kernel} grid={kw.get('grid')}")
        return launch(module, kernel, **kw)
    backend.launch = traced_launch
    return backend
'''
TRACED_ROW = '''    BackendKind("traced", "grader.backends.traced", None, times_kernels=False, has_sanitizer=False,
                counts_profile=True, uses_gpus=False, case_floor_s=5.0),
'''
#: An inclusive max-scan of one block: thread 0 walks the elements.
MAX_SCAN = '''
__global__ void max_scan(const scan_t* in, scan_t* out, int n)
{
    if (threadIdx.x != 0)
        return;
    scan_t m = in[0];
    for (int i = 0; i < n; ++i) {
        m = in[i] > m ? in[i] : m;
        out[i] = m;
    }
}
'''
#: The same, broken: it sums (the prefix sum a Part 1 would write) instead of taking the maximum.
SUM_SCAN = MAX_SCAN.replace("m = in[i] > m ? in[i] : m;", "m = i ? m + in[i] : in[0];")


def _insert(path: Path, anchor: str, text: str, *, before: bool = True) -> None:
    source = path.read_text()
    assert source.count(anchor) == 1, f"{path.name}: the recipe's anchor {anchor!r} is not there once"
    path.write_text(source.replace(anchor, text + anchor if before else anchor + text))


@pytest.fixture(scope="module")
def edited_copy(tmp_path_factory) -> Path:
    """A copy of the package with the two recipes' edits: Part 6 in ``parts.py`` and ``plans.py``, the
    backend ``traced`` as its module and its row in ``grader/backends/__init__.py``. Nothing else."""
    import shutil
    root = tmp_path_factory.mktemp("recipe")
    for name in ("grader", "reference"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    _insert(root / "grader/assignment/parts.py", "    )\n}\n\n\n#: The key of the challenge part", PART6_ROW)
    _insert(root / "grader/assignment/plans.py", "}\n\n\ndef prepare(", PART6_PLAN)
    (root / "grader/backends/traced.py").write_text(TRACED_MODULE)
    _insert(root / "grader/backends/__init__.py", ")}\n#: The values of ``target_arch``", TRACED_ROW)
    return root


def _scangrade(root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", *args], cwd=root, capture_output=True, text=True,
                          timeout=600, check=False,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "PYTHONPATH": str(root),
                               **(env or {})})


def _part6(root: Path, tmp_path: Path, kernel: str, *args: str, env: dict | None = None) -> dict:
    import json
    sub = tmp_path / "sub"
    sub.mkdir(exist_ok=True)
    (sub / "part6_max_scan.cu").write_text(kernel)
    config = write_config(tmp_path, sizes={"part6_max_scan": [1, 33, 128]})
    out = tmp_path / "result.json"
    proc = _scangrade(root, "grade", str(sub), "--config", str(config), "--part", "part6_max_scan", "--no-checks",
                      "--json", str(out), *args, env=env)
    assert out.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    (part,) = json.loads(out.read_text())["parts"]
    return part


def test_a_part_with_its_own_reference_is_a_parts_and_plans_change(edited_copy, tmp_path):
    right = _part6(edited_copy, tmp_path, MAX_SCAN, "--backend", "emulator")
    assert right["key"] == "part6_max_scan" and len(right["cases"]) == 3, right
    assert all(c["status"] == "pass" for c in right["cases"]), right["cases"]
    wrong = _part6(edited_copy, tmp_path, SUM_SCAN, "--backend", "emulator")
    assert [c["status"] for c in wrong["cases"]] == ["pass", "fail", "fail"], wrong["cases"]  # n = 1: max = sum
    for case in wrong["cases"][1:]:
        (finding,) = [f for f in case["findings"] if f["kind"] == "mismatch"]
        assert "elements wrong" in finding["message"] and "scan" not in finding["message"], finding


def test_a_backend_is_its_module_and_its_row(edited_copy, tmp_path):
    usage = _scangrade(edited_copy, "grade", "--help")
    assert "--backend {auto,pycuda,emulator,traced}" in usage.stdout, usage.stdout[:1000]
    log = tmp_path / "traced.log"
    part = _part6(edited_copy, tmp_path, MAX_SCAN, "--backend", "traced", env={"TRACED_LOG": str(log)})
    assert all(c["status"] == "pass" for c in part["cases"]), part["cases"]
    lines = log.read_text().splitlines()
    assert sum(ln.startswith("create ") for ln in lines) >= 1, lines
    assert sum(ln == "launch max_scan grid=1" for ln in lines) >= 3, lines  # a launch per case at least
    config = write_config(tmp_path, sizes={"part6_max_scan": [5]}, extra="backend: traced\n")  # the config's key
    log.unlink()
    checked = _scangrade(edited_copy, "grade", str(tmp_path / "sub"), "--config", str(config), "--part",
                         "part6_max_scan", "--no-checks", env={"TRACED_LOG": str(log)})
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    assert "launch max_scan grid=1" in log.read_text().splitlines()


def test_a_parts_own_draw_and_reference_are_what_its_cases_use_long_inputs_included(small_config):
    import dataclasses

    import numpy as np

    from grader.assignment.parts import PARTS
    from grader.grading.case.inputs import CHUNK, make_input, reference_output
    calls = []

    def odd(rng, count, dtype):  # odd numbers only: no draw of the config's range gives them all
        calls.append(count)
        return rng.integers(0, 50, size=count, dtype=np.int32) * 2 + 1
    part = dataclasses.replace(PARTS["part4_any_size"], reference=lambda x: np.maximum.accumulate(x), inputs=odd)
    for n in (5, CHUNK + 3):
        x = make_input(small_config, part, n, 3, np.dtype(np.int32))
        assert x.dtype == np.int32 and x.size == n and np.all(x % 2 == 1)
        assert np.array_equal(x, make_input(small_config, part, n, 3, np.dtype(np.int32)))  # a function of the seed
        assert np.array_equal(reference_output(part, x), np.maximum.accumulate(x))
    assert calls[:2] == [5, 5] and sorted(calls[2:4]) == [3, CHUNK]  # the long input drawn in chunks
    default = make_input(small_config, PARTS["part4_any_size"], 5, 3, np.dtype(np.int32))
    assert np.array_equal(reference_output(PARTS["part4_any_size"], default), np.cumsum(default, dtype=np.int32) -
                          default)


def test_a_part_with_its_own_reference_is_judged_exactly_without_the_prefix_sums_hints():
    import numpy as np

    from grader.grading.case.checks import diagnose, error_bound
    x = np.random.default_rng(1).random(300, dtype=np.float32)
    top = np.maximum.accumulate(x).astype(np.float64)
    assert error_bound(top, source=x, inclusive=True, depth=299) is not None  # read as a sum, it has slack
    assert error_bound(top, source=x, inclusive=True, depth=299, prefix_sum=False) is None
    near = top.astype(np.float32) * np.float32(1 + 2 ** -20)
    assert diagnose(near, top, source=x, inclusive=True, tile=None, prefix_sum=False).wrong == 300
    sums = np.cumsum(x, dtype=np.float64)  # the exclusive scan, where a part asks for its own inclusive function
    as_exclusive = np.concatenate([[0.0], sums[:-1]]).astype(np.float32)
    assert "exclusive scan" in diagnose(as_exclusive, sums, source=x, inclusive=True, tile=None).hint
    mm = diagnose(as_exclusive, sums, source=x, inclusive=True, tile=None, prefix_sum=False)
    assert mm.hint is None and mm.wrong > 0
    ints = x.view(np.int32) & 0xFFFF
    tiled = np.maximum.accumulate(ints)
    off = tiled.copy()
    off[128:256] += 7  # one tile off by one amount: an offset hint for a sum, none here
    assert diagnose(off, tiled, source=ints, inclusive=True, tile=128).hint.startswith("every element of tile 1")
    assert diagnose(off, tiled, source=ints, inclusive=True, tile=128, prefix_sum=False).hint is None
