"""grader.api, the one road into grading: paths resolved before any worker starts, and the CLI's and
the pytest plugin's defaults the same as the API's."""

from __future__ import annotations

import csv
import inspect
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from grader import api
from grader.cli import build_parser, main
from tests.conftest import SOLUTIONS

_CONFIG = "block_size: 128\nseed: 7\nparts:\n  part1_naive:\n    points_per_case: 1\n    sizes: [5]\n"
_PRIVATE = "seed: 99\nparts:\n  part1_naive:\n    hidden_sizes: [77]\n"


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    """A folder holding config.yaml, private.yaml, a submission sub/ and a class class/alice/, made
    the current folder: every path below is given relative to it."""
    (tmp_path / "config.yaml").write_text(_CONFIG)
    (tmp_path / "private.yaml").write_text(_PRIVATE)
    (tmp_path / "sub").mkdir()
    shutil.copy(SOLUTIONS / "part1_naive.cu", tmp_path / "sub")
    (tmp_path / "class" / "alice").mkdir(parents=True)
    shutil.copy(SOLUTIONS / "part1_naive.cu", tmp_path / "class" / "alice")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _hidden_passed(result: dict) -> bool:
    return any(c["visibility"] == "hidden" and c["status"] == "pass" for p in result["parts"] for c in p["cases"])


def test_grade_takes_every_path_option_relative_to_where_it_runs(here, capsys):
    """The part worker runs in a folder of its own: a relative --private-config used to reach it
    unresolved and the part ended in an error."""
    status = main(["grade", "sub", "--config", "config.yaml", "--private-config", "private.yaml",
                   "--backend", "emulator", "--no-checks", "--json", "r.json", "--gradescope", "g.json",
                   "--prairielearn", "p.json", "--junit", "j.xml", "--markdown", "m.md"])
    assert status == 0, capsys.readouterr()
    result = json.loads((here / "r.json").read_text())
    assert _hidden_passed(result) and result["config"] == str(here / "config.yaml")
    for name in ("g.json", "p.json", "j.xml", "m.md"):
        assert (here / name).stat().st_size > 0, name


def test_check_takes_a_relative_dir_and_config(here, capsys):
    assert main(["check", "--dir", "sub", "--config", "config.yaml", "--private-config", "private.yaml",
                 "--backend", "emulator", "--no-checks"]) == 0, capsys.readouterr()


def test_batch_merge_and_report_take_relative_paths(here, capsys):
    assert main(["batch", "class", "--out", "shard0", "--shard", "0/1", "--config", "config.yaml",
                 "--private-config", "private.yaml", "--backend", "emulator", "--no-checks", "--jobs", "1",
                 "--allow-unsandboxed"]) == 0, capsys.readouterr()
    assert _hidden_passed(json.loads((here / "shard0" / "alice" / "result.json").read_text()))
    assert main(["merge", "shard0", "--out", "merged"]) == 0, capsys.readouterr()
    assert [r["student"] for r in csv.DictReader((here / "merged" / "gradebook.csv").open())] == ["alice"]
    assert main(["report", "merged", "--out", "page.html"]) == 0
    assert (here / "page.html").stat().st_size > 0


def test_slurm_scripts_and_packages_name_relative_paths_absolutely(here, capsys):
    assert main(["batch", "class", "--out", "grades", "--slurm", "--no-submit", "--config", "config.yaml",
                 "--private-config", "private.yaml", "--backend", "emulator"]) == 0, capsys.readouterr()
    script = (here / "grades" / "slurm" / "grade.sbatch").read_text()
    assert str(here / "private.yaml") in script and str(here / "class") in script
    assert main(["gradescope-bundle", "bundle.zip", "--config", "config.yaml", "--private-config",
                 "private.yaml"]) == 0, capsys.readouterr()
    assert zipfile.ZipFile(here / "bundle.zip").namelist()


def test_the_api_resolves_paths_against_start_not_the_current_folder(here, tmp_path_factory, monkeypatch):
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    grading = api.prepare(config="config.yaml", private_config="private.yaml", backend="emulator", checks=False,
                          start=here)
    assert grading.cfg.path == str(here / "config.yaml") and grading.cfg.private_path == str(here / "private.yaml")
    result = grading.grade("sub")
    assert result.submission == str(here / "sub") and result.passed
    assert any(c.visibility == "hidden" for p in result.parts for c in p.cases)


def _defaults(function) -> dict:
    return {name: p.default for name, p in inspect.signature(function).parameters.items()
            if p.kind is p.KEYWORD_ONLY and p.default is not p.empty}


@pytest.mark.parametrize("command,function", [("grade", api.grade_submission), ("check", api.grade_submission),
                                              ("batch", api.grade_class)])
def test_the_cli_defaults_are_the_apis(command, function):
    """Every option the CLI forwards under the API's keyword name has the API's default."""
    argv = {"grade": ["grade", "x"], "check": ["check"], "batch": ["batch", "x", "--out", "y"]}[command]
    args = vars(build_parser().parse_args(argv))
    defaults = _defaults(function)
    shared = set(args) & set(defaults)
    assert {"config", "private_config", "backend", "checks"} <= shared
    assert {k: args[k] for k in shared} == {k: defaults[k] for k in shared}
    if command == "batch":
        assert {"jobs", "resume", "allow_unsandboxed"} <= shared


def test_the_pytest_plugin_defaults_are_the_apis():
    from grader import pytest_plugin
    options = {}

    class Group:
        def addoption(self, *names, **kw):
            options.setdefault(kw.get("dest") or names[0].lstrip("-").replace("-", "_"), kw.get("default"))

    class Parser:
        def getgroup(self, *a, **kw):
            return Group()

    pytest_plugin.pytest_addoption(Parser())
    forwarded = {k.removeprefix("scangrade_"): v for k, v in options.items() if k.startswith("scangrade_")}
    defaults = _defaults(api.grade_submission)
    assert {"config", "private_config", "backend", "checks"} <= set(forwarded)
    assert {k: defaults[k] for k in forwarded} == forwarded


@pytest.mark.parametrize("gpu_likely", [True, False])
def test_prepare_starts_the_checks_runtime_before_the_probe_where_a_gpu_is_likely(here, monkeypatch, gpu_likely):
    """The probe makes a CUDA context in a child (most of a second): on a machine that likely has a
    GPU, the build of the checks' emulator runtime its parts wait for starts first; elsewhere the
    runner starts the emulator's own once the backend is chosen."""
    import grader.backends as backends

    events = []
    monkeypatch.setattr(backends, "hint_pycuda", lambda: gpu_likely)
    monkeypatch.setattr(backends, "probe_pycuda", lambda: (events.append("probe"), (False, "no GPU here"))[1])
    monkeypatch.setattr(api, "warm_emulator", lambda cfg, *, counts_profile: events.append(("warm", counts_profile)))
    grading = api.prepare(config="config.yaml", start=here)
    assert grading.selection.name == "emulator"
    assert events == ([("warm", False), "probe"] if gpu_likely else ["probe"])
