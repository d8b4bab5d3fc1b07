"""scangrade release: what students get, nothing private in it, and it grades without the solutions."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from fnmatch import fnmatch
from pathlib import Path

import pytest

from grader.cli import main
from grader.assignment.config import load_config
from grader.core.errors import UsageError
from grader.packaging.release import build_release, find_leaks
from tests.conftest import ROOT, SOLUTIONS, TEMPLATES, write_config
from tests.project.test_makefile import bare_path, env_with, needs_make, run_make

PRIVATE_SEED = 918273645
HIDDEN = {"part1_naive": [77], "part4_any_size": [43211, 98765]}
TOP_LEVEL = {"README.md", "assignment", "grader", "reference", "config.yaml", "pyproject.toml", "Makefile", ".gitignore",
             "scan.ipynb"}


def _public(tmp_path: Path) -> Path:
    """A small public config with a timed part (its performance needs a GPU and a reference)."""
    path = write_config(tmp_path, sizes={"part1_naive": [5, 33], "part4_any_size": [300]})
    path.write_text(path.read_text() + "    timing:\n      sizes: [1024]\n      points: 2\n")
    return path


def _private(tmp_path: Path) -> Path:
    path = tmp_path / "private.yaml"
    parts = "".join(f"  {k}:\n    hidden_sizes: {v}\n" for k, v in HIDDEN.items())
    path.write_text(f"seed: {PRIVATE_SEED}\nparts:\n{parts}")
    return path


def _distinctive_solution_lines() -> dict[str, list[str]]:
    """Per reference solution, its lines of 30 characters or more that are in no public file of the
    checkout (the handout, the templates), not even within a longer line."""
    public = "\n".join(f.read_text(encoding="utf-8") for f in TEMPLATES.rglob("*") if f.is_file())
    lines = {}
    for f in sorted(SOLUTIONS.glob("*.cu")):
        lines[f.name] = [s for s in (line.strip() for line in f.read_text(encoding="utf-8").splitlines())
                         if len(s) >= 30 and s not in public]
        assert len(lines[f.name]) >= 5, f.name  # enough to recognise the solution by
    return lines


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("release")
    made = build_release(tmp / "scan-release", config=_public(tmp), private_config=_private(tmp), zip_archive=True)
    return made, tmp


def _files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() or p.is_symlink()]


def test_the_release_has_the_templates_the_handout_the_grader_and_the_public_config(release):
    made, tmp = release
    out = made.folder
    assert {p.name for p in out.iterdir()} == TOP_LEVEL
    for f in TEMPLATES.iterdir():
        assert (out / "assignment" / f.name).read_bytes() == f.read_bytes(), f.name
    modules = [p.relative_to(ROOT / "grader") for p in (ROOT / "grader").rglob("*.py")
               if "__pycache__" not in p.parts and (p.parent / "__init__.py").is_file()]
    for name in (*modules, "backends/emulator/runtime/prelude.h", "backends/emulator/runtime/runtime.cpp"):
        assert (out / "grader" / name).is_file(), name  # every module of the package, wherever it lives
    assert sorted(p.name for p in (out / "reference").iterdir()) == ["__init__.py", "scan.py"]
    assert (out / "config.yaml").read_text() == (tmp / "config.yaml").read_text()
    assert (out / "Makefile").read_bytes() == (ROOT / "grader" / "release_files" / "Makefile").read_bytes()
    readme = (out / "README.md").read_text()
    assert "make check" in readme and "scangrade check" in readme and "assignment/part4_any_size.cu" in readme
    assert "assignment/part2_blelloch.cu" not in readme  # not in this config
    assert sorted(made.files) == sorted(p.relative_to(out).as_posix() for p in _files(out))


def test_the_release_has_no_solution_test_cache_or_vcs_file(release):
    made, _ = release
    for p in _files(made.folder):
        rel = p.relative_to(made.folder)
        assert not p.is_symlink(), rel
        assert not set(rel.parts) & {"solutions", "tests", "bench", "docs", ".git", "__pycache__", ".pytest_cache"}, rel
        assert (not rel.name.startswith(".") or rel.as_posix() == ".gitignore") and \
            p.suffix not in (".pyc", ".so", ".o"), rel


def test_no_file_of_the_release_holds_a_line_of_a_reference_solution(release):
    made, _ = release
    wanted = _distinctive_solution_lines()
    for p in _files(made.folder):
        text = p.read_text(encoding="utf-8", errors="replace")
        for name, lines in wanted.items():
            found = [line for line in lines if line in text]
            assert not found, f"{p.relative_to(made.folder)} holds {name}'s {found[0]!r}"


def test_nothing_of_the_private_config_is_in_the_release(release, tmp_path):
    made, tmp = release
    private_text = (tmp / "private.yaml").read_text()
    numbers = [PRIVATE_SEED, *(n for sizes in HIDDEN.values() for n in sizes)]
    for p in _files(made.folder):
        text = p.read_text(encoding="utf-8", errors="replace")
        assert private_text.strip() not in text
        rel = p.relative_to(made.folder).as_posix()
        for n in numbers:  # short numbers turn up by chance in the grader's code; not in the config
            if n >= 10000 or rel in ("config.yaml", "README.md"):
                assert not re.search(rf"(?<!\d){n}(?!\d)", text), f"{rel} mentions {n}"
    assert load_config(made.folder / "config.yaml").parts["part1_naive"].hidden_sizes == ()


def test_the_zip_holds_the_release_under_one_top_folder(release):
    made, _ = release
    assert made.archive == made.folder.with_name("scan-release.zip")
    with zipfile.ZipFile(made.archive) as z:
        names = [i.filename for i in z.infolist() if not i.is_dir()]
        assert sorted(names) == sorted(f"scan-release/{f}" for f in made.files)
        assert z.read("scan-release/assignment/part1_naive.cu") == (TEMPLATES / "part1_naive.cu").read_bytes()


def test_every_data_file_of_the_grader_is_declared_package_data(release):
    """``pip install OUT`` (not editable) copies only .py files and declared package data."""
    made, _ = release
    data = tomllib.loads((made.folder / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    for p in (made.folder / "grader").rglob("*"):
        if not p.is_file() or p.suffix == ".py":
            continue
        rel = p.relative_to(made.folder)
        declared = False
        for package, patterns in data.items():
            base = Path(*package.split("."))
            if base in rel.parents:
                inner = rel.relative_to(base).as_posix()
                declared |= any(fnmatch(inner, pat) and inner.count("/") == pat.count("/") for pat in patterns)
        assert declared, f"{rel} would be missing from a non-editable install"


def test_the_templates_are_graded_inside_the_release_by_its_own_grader_without_solutions(release, tmp_path):
    made, _ = release
    env = {k: v for k, v in os.environ.items() if k != "SCANGRADE_BACKEND"}
    env["PYTHONPATH"] = str(made.folder)
    where = subprocess.run([sys.executable, "-c", "import grader; print(grader.__file__)"], cwd=made.folder, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).resolve().is_relative_to(made.folder.resolve())  # not the checkout's grader

    out_json = tmp_path / "templates.json"
    run = subprocess.run([sys.executable, "-m", "grader", "check", "--backend", "emulator", "--no-checks",
                          "--json", str(out_json)], cwd=made.folder, env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert run.returncode == 1, run.stdout + run.stderr  # the templates fail every case: graded, not an error
    result = json.loads(out_json.read_text())
    assert [p["key"] for p in result["parts"]] == ["part1_naive", "part4_any_size"]
    assert all(p["status"] == "fail" and p["points"] == 0 for p in result["parts"])
    perf = result["parts"][1]["performance"]
    assert perf["max_points"] == 2 and perf["points"] == 0 and "GPU" in perf["message"]

    solved = tmp_path / "solved"
    solved.mkdir()
    for name in ("part1_naive.cu", "part4_any_size.cu"):
        shutil.copy(SOLUTIONS / name, solved / name)
    run = subprocess.run([sys.executable, "-m", "grader", "grade", str(solved), "--backend", "emulator"],
                         cwd=made.folder, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "total           pass" in run.stdout


def test_release_refuses_a_folder_inside_the_checkout(tmp_path, capsys):
    target = ROOT / "release-inside-the-checkout"
    assert main(["release", str(target), "--config", str(_public(tmp_path))]) == 2
    assert "inside the scangrade checkout" in capsys.readouterr().err
    assert not target.exists()


def test_release_refuses_a_non_empty_folder_unless_forced(tmp_path, capsys):
    config = _public(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["release", str(out), "--config", str(config)]) == 2
    assert "already exists and is not empty" in capsys.readouterr().err and (out / "notes.txt").exists()
    assert main(["release", str(out), "--config", str(config), "--force"]) == 0
    assert not (out / "notes.txt").exists() and (out / "assignment" / "part1_naive.cu").is_file()
    (tmp_path / "empty").mkdir()
    assert main(["release", str(tmp_path / "empty"), "--config", str(config)]) == 0


@pytest.mark.parametrize("extra, message", [
    ("    hidden_sizes: [77]\n", "parts.part4_any_size.hidden_sizes would show students the hidden sizes"),
    ("# hidden cases of the final: n = 77\n", "mentions 77, a hidden size of the private config"),
    (f"# hidden cases are drawn with seed {PRIVATE_SEED}\n", "config.yaml: holds the private config's seed"),
])
def test_release_refuses_a_public_config_that_gives_hidden_cases_away(tmp_path, extra, message):
    config = _public(tmp_path)
    config.write_text(config.read_text() + extra)
    with pytest.raises(UsageError, match=re.escape(message)):
        build_release(tmp_path / "out", config=config, private_config=_private(tmp_path))
    assert not (tmp_path / "out").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]


def test_find_leaks_finds_a_solution_pasted_into_the_handout(tmp_path):
    folder = tmp_path / "r"
    (folder / "assignment").mkdir(parents=True)
    body = (SOLUTIONS / "part2_blelloch.cu").read_text()
    (folder / "assignment" / "README.md").write_text(textwrap.dedent("""\
        # Handout
        A worked example:
        """) + body)
    (folder / "assignment" / "part2_blelloch.cu").write_text((TEMPLATES / "part2_blelloch.cu").read_text())
    cfg = load_config(write_config(tmp_path))
    leaks = find_leaks(folder, solutions=SOLUTIONS, public=cfg)
    assert leaks and all(line.startswith("assignment/README.md: holds") for line in leaks)  # not the template
    assert any("lines of the reference solution part2_blelloch.cu" in line for line in leaks)


def _pytest_options(pyproject: Path) -> dict:
    return tomllib.loads(pyproject.read_text())["tool"]["pytest"]["ini_options"]


def test_the_release_pyproject_is_the_checkouts_without_testpaths(release):
    made, _ = release
    ours, theirs = (tomllib.loads(p.read_text()) for p in (ROOT / "pyproject.toml", made.folder / "pyproject.toml"))
    assert "testpaths" in ours["tool"]["pytest"]["ini_options"]  # the checkout's, naming tests/
    del ours["tool"]["pytest"]["ini_options"]["testpaths"]
    assert theirs == ours
    readme = (made.folder / "README.md").read_text()
    extras = re.findall(r'pip install -e "\.\[([\w,]+)\]"', readme)
    assert extras and all("test" in e.split(",") for e in extras)  # every install the README says has pytest
    assert any(re.match(r"pytest\b", dep) for dep in theirs["project"]["optional-dependencies"]["test"])


def _release_env(made) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SCANGRADE_BACKEND", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(made.folder)
    return env


def test_pytest_runs_in_the_release_without_a_warning_and_its_scangrade_route_grades(release, tmp_path):
    made, _ = release
    plain = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
    run = subprocess.run(plain, cwd=made.folder, env=_release_env(made), capture_output=True, text=True, timeout=120)
    assert run.returncode == 5 and "warning" not in run.stdout.lower(), run.stdout  # 5: no tests, none expected
    control = tmp_path / "control"  # the checkout's pyproject.toml in a folder without tests/ warns
    control.mkdir()
    shutil.copy(ROOT / "pyproject.toml", control / "pyproject.toml")
    run = subprocess.run(plain, cwd=control, capture_output=True, text=True, timeout=120)
    assert "No files were found in testpaths" in run.stdout

    route = subprocess.run([*plain, "-W", "error", "--scangrade", "assignment", "-k", "part1_naive and n5 and int32"],
                           cwd=made.folder, env=_release_env(made), capture_output=True, text=True, timeout=300)
    assert route.returncode == 1, route.stdout + route.stderr  # the template fails its case: graded
    assert "FAILED assignment::part1_naive[int32-n=5]" in route.stdout and "1 failed" in route.stdout
    assert "warning" not in route.stdout.lower(), route.stdout


@needs_make
def test_make_check_in_the_release_sets_up_its_venv_then_runs_the_self_check(release):
    made, _ = release
    env = env_with(PYTHONPATH=str(made.folder), CXX="true")  # the compiler check passes: make -n compiles nothing
    dry = {target: run_make(made.folder, "-n", *([target] if target else []), env=env)
           for target in ("", "check", "pytest")}
    for target, run in dry.items():
        assert run.returncode == 0, (target, run.stderr)
    assert dry[""].stdout == dry["check"].stdout  # `make` alone is `make check`
    lines = dry["check"].stdout.splitlines()
    steps = ["python3 -m venv .venv", '.venv/bin/python -m pip install -q -e ".[test]"', ".venv/bin/scangrade check"]
    order = [next(i for i, line in enumerate(lines) if line.startswith(step)) for step in steps]
    assert order == sorted(order), lines  # the venv, the install into it, then the check
    assert ".venv/bin/python -m pytest --scangrade assignment" in dry["pytest"].stdout
    assert not (made.folder / ".venv").exists()  # make -n ran nothing


@needs_make
def test_make_check_in_the_release_names_the_missing_compiler_in_one_line(release, tmp_path):
    made, _ = release
    copy = tmp_path / "release"
    shutil.copytree(made.folder, copy)
    run = run_make(copy, "check", env={"PATH": bare_path(tmp_path), "HOME": str(tmp_path)})
    assert run.returncode != 0 and len(run.stderr.splitlines()) == 1, run.stderr
    assert "sudo apt install g++" in run.stderr
    assert not (copy / ".venv").exists()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_release_gitignore_keeps_the_venv_and_caches_out_of_a_students_repository(release, tmp_path):
    made, _ = release
    repo = tmp_path / "student"
    shutil.copytree(made.folder, repo)
    litter = [".venv/bin/python", "scangrade.egg-info/PKG-INFO", "grader/__pycache__/cli.cpython-311.pyc",
              ".pytest_cache/README.md", "results/check.json",
              "build/lib/grader/cli.py", "build/bdist.linux-x86_64/x"]  # what `pip install .` leaves (issue 52)
    for rel in litter:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("x")
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=60)
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=all"],
                            capture_output=True, text=True, check=True, timeout=60).stdout
    listed = sorted(line[3:] for line in status.splitlines())
    assert listed == sorted(made.files)  # every file of the release, none of the litter
