"""The Makefile: `make grade` and `make test` set up .venv once, install only when pyproject.toml
changed, pass ARGS on, and stop with one line naming the package where a prerequisite is missing.

These run make on a copy of the Makefile and its set-up (grader/release_files/setup.mk) in a
temporary folder, with a stand-in venv whose ``python`` and ``scangrade`` record how they were
called: what is tested is the Makefile's logic, not pip. .ci/run runs the real commands in a
fresh clone (install, grade, test, grade again).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

MAKE = shutil.which("make")
needs_make = pytest.mark.skipif(MAKE is None, reason="make is not installed (apt install make)")
pytestmark = needs_make
SETUP = Path("grader") / "release_files" / "setup.mk"
#: Stand-ins for the venv's programs: each appends its arguments, one call a line, to calls.log.
RECORDER = '#!/bin/sh\necho "$(basename "$0") $*" >> "$(dirname "$0")/../../calls.log"\n'


def env_with(**changes: str) -> dict[str, str]:
    """This environment without what would change make's choices (CXX; an outer make's flags and
    variables, as under `make test`; PYTHONPATH), with ``changes``."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("CXX", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "PYTHONPATH")}
    env.update(changes)
    return env


def run_make(folder: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``make -C folder ARGS...`` with ``env`` (default: :func:`env_with`)."""
    env = env_with() if env is None else env
    return subprocess.run([MAKE, "--no-print-directory", "-C", str(folder), *args], env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def bare_path(tmp_path: Path, *programs: str) -> str:
    """A PATH holding only make, python3 (this Python) and ``programs``: no C++ compiler, no nvcc."""
    bin_dir = tmp_path / "bare-bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "make").symlink_to(MAKE)
    (bin_dir / "python3").symlink_to(sys.executable)
    for name in programs:
        (bin_dir / name).symlink_to(shutil.which(name))
    return str(bin_dir)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The Makefile, its set-up and pyproject.toml, copied; nothing else of the checkout."""
    folder = tmp_path / "checkout"
    (folder / SETUP.parent).mkdir(parents=True)
    for rel in ("Makefile", SETUP, "pyproject.toml"):
        shutil.copy2(ROOT / rel, folder / rel)
    return folder


def fake_venv(folder: Path) -> Path:
    """A ``.venv`` whose python and scangrade only record their calls (in ``folder/calls.log``)."""
    bin_dir = folder / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "scangrade"):
        (bin_dir / name).write_text(RECORDER)
        (bin_dir / name).chmod(0o755)
    return folder / "calls.log"


def calls(log: Path) -> list[str]:
    lines = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return lines


def help_targets(folder: Path) -> list[str]:
    """The targets ``make`` alone lists: its lines ``make TARGET ...``."""
    run = run_make(folder)
    assert run.returncode == 0, run.stderr
    return [m.group(1) for m in re.finditer(r"^make (\w+)", run.stdout, re.M)]


def test_make_alone_lists_the_targets_and_each_is_one(checkout):
    targets = help_targets(checkout)
    assert {"grade", "test", "check", "release", "gpu"} <= set(targets)
    database = run_make(checkout, "-pq", "help").stdout  # make's rules, read without running any
    defined = set(re.findall(r"^([\w.-]+):", database, re.M))
    assert set(targets) <= defined, set(targets) - defined


def test_grade_installs_once_then_only_when_pyproject_changes_and_passes_args_on(checkout):
    log = fake_venv(checkout)
    env = env_with(CXX="true")  # any program passes the compiler check; nothing is compiled here
    first = run_make(checkout, "grade", 'ARGS=--part part1_naive', env=env)
    assert first.returncode == 0, first.stderr
    assert calls(log) == ["python -m pip install -q -e .[test]",
                          "scangrade grade reference/solutions --part part1_naive"]
    assert "make: installing scangrade" in first.stdout

    again = run_make(checkout, "grade", env=env)
    assert again.returncode == 0, again.stderr
    assert calls(log) == ["scangrade grade reference/solutions"]
    assert "installing" not in again.stdout

    later = time.time() + 5
    os.utime(checkout / "pyproject.toml", (later, later))
    changed = run_make(checkout, "test", "ARGS=-k blelloch -x", env=env)
    assert changed.returncode == 0, changed.stderr
    assert calls(log) == ["python -m pip install -q -e .[test]", "python -m pytest -n 2 -k blelloch -x"]


def test_the_commands_run_with_the_venv_first_on_path(checkout):
    log = fake_venv(checkout)
    (checkout / ".venv" / "bin" / "scangrade").write_text(RECORDER + 'echo "PATH=$PATH" >> "$(dirname "$0")/../../calls.log"\n')
    (checkout / ".venv" / ".scangrade-installed").touch()
    os.utime(checkout / "pyproject.toml", (time.time() - 60,) * 2)
    run = run_make(checkout, "check", env=env_with(CXX="true"))
    assert run.returncode == 0, run.stderr
    assert calls(log) == ["scangrade check", f"PATH={checkout.resolve() / '.venv' / 'bin'}:{os.environ['PATH']}"]


def test_a_missing_compiler_stops_make_grade_with_one_line_naming_the_package(checkout, tmp_path):
    run = run_make(checkout, "grade", env=env_with(PATH=bare_path(tmp_path)))
    assert run.returncode != 0
    assert len(run.stderr.splitlines()) == 1, run.stderr
    assert "no C++ compiler (c++)" in run.stderr and "sudo apt install g++" in run.stderr
    assert not (checkout / ".venv").exists() and run.stdout == ""

    named = run_make(checkout, "test", env=env_with(CXX="clang++-99 -O2"))
    assert named.returncode != 0 and "no C++ compiler (clang++-99 -O2)" in named.stderr


def test_a_python_without_ensurepip_stops_with_one_line_naming_python3_venv(checkout, tmp_path):
    shadow = tmp_path / "shadow"  # as on Debian without python3-venv: `import ensurepip` fails
    shadow.mkdir()
    (shadow / "ensurepip.py").write_text("raise ImportError('ensurepip is in python3-venv')\n")
    run = run_make(checkout, "grade", env=env_with(CXX="true", PYTHONPATH=str(shadow)))
    assert run.returncode != 0
    assert len(run.stderr.splitlines()) == 1, run.stderr
    assert "cannot create a virtual environment" in run.stderr and "sudo apt install python3-venv" in run.stderr
    assert not (checkout / ".venv").exists()


def test_make_gpu_without_nvcc_says_to_install_the_cuda_toolkit(checkout, tmp_path):
    log = fake_venv(checkout)
    run = run_make(checkout, "gpu", env=env_with(PATH=bare_path(tmp_path)))
    assert run.returncode != 0
    assert len(run.stderr.splitlines()) == 1 and "nvcc" in run.stderr and "CUDA toolkit" in run.stderr, run.stderr
    assert calls(log) == []


def test_make_release_without_out_says_how_in_one_line_and_installs_nothing(checkout):
    run = run_make(checkout, "release", env=env_with(CXX="true"))
    assert run.returncode != 0 and len(run.stderr.splitlines()) == 1, run.stderr
    assert "make release OUT=" in run.stderr and not (checkout / ".venv").exists()


@pytest.mark.parametrize("makefile", ["Makefile", "grader/release_files/Makefile"])  # the checkout's, the release's
@pytest.mark.parametrize("status", [0, 1, 2, 3])
def test_make_check_ends_with_how_the_check_ended_and_fails_only_where_scangrade_could_not_grade(checkout, makefile,
                                                                                                 status):
    """A check that graded (scangrade's exit status 0 or 1) ends with a line of its own and make's
    success, not make's ``*** [Makefile:N: check] Error 1``, which reads as the tool failing; a usage
    error (2) or a grader failure (3) is make's failure, with its error line."""
    shutil.copy2(ROOT / makefile, checkout / "Makefile")
    log = fake_venv(checkout)
    scangrade = checkout / ".venv" / "bin" / "scangrade"
    scangrade.write_text(RECORDER + f'echo "total  fail  3/5"\nexit {status}\n')
    (checkout / ".venv" / ".scangrade-installed").touch()
    os.utime(checkout / "pyproject.toml", (time.time() - 60,) * 2)
    run = run_make(checkout, "check", "ARGS=--part part1_naive", env=env_with(CXX="true"))
    assert calls(log) == ["scangrade check --part part1_naive"]
    if status in (0, 1):
        assert run.returncode == 0 and run.stderr == "", run.stderr
        *_, report, last = run.stdout.splitlines()  # the report's last line, then make check's
        assert report == "total  fail  3/5" and last.startswith("make check: done, ")
        assert f"scangrade check's exit status {status}" in last
    else:
        assert run.returncode != 0 and f"check] Error {status}" in run.stderr
        assert "make check:" not in run.stdout
