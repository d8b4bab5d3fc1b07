"""The emulator runtime's sources, laid out by level (issue 53): a folder a level (``grid/``, ``block/``,
``warp/``, ``memory/``, ``checks/``, ``profile/``, ``host/``), each header self-contained (it compiles
alone), each ``.cpp`` of a folder a translation unit of build.py's (``RUNTIME_UNITS``), ``runtime.cpp``
every unit in one translation unit, no macro choosing which code a compile gets; every file is part
of the cached runtime object's identity and ships with the package."""

from __future__ import annotations

import fnmatch
import re
import shlex
import shutil
import subprocess
import tomllib

import pytest

import grader.backends.emulator.build as build
from tests.conftest import ROOT

RUNTIME = build.RUNTIME_DIR
#: The runtime's headers: every ``.h`` of runtime/ but the prelude and the stub CUDA headers of
#: ``include/`` (a student's translation unit's, compiled with the module's flags).
HEADERS = sorted(p for p in RUNTIME.rglob("*.h") if RUNTIME / "include" not in p.parents and p != build.PRELUDE)
#: The macros a conditional of the runtime's own sources may test: the platform (the fiber switch is
#: x86-64 assembly, else ucontext; glibc's assert hook). Anything else would give one compile other
#: code than another.
PLATFORM_MACROS = {"defined", "__x86_64__", "__i386__", "SG_UCONTEXT", "SG_USE_UCONTEXT", "__GLIBC__"}


def _level_sources() -> list:
    return [RUNTIME / "runtime.cpp", RUNTIME / "util.h",
            *(p for p in sorted(RUNTIME.glob("*/*")) if p.suffix in (".h", ".cpp") and p.parent.name != "include")]


def test_the_runtime_is_laid_out_by_level():
    levels = {p.parent.name for p in build.RUNTIME_UNITS}
    assert {"grid", "block", "warp", "memory", "checks"} <= levels
    assert not list(RUNTIME.rglob("*.inc"))
    for unit in build.RUNTIME_UNITS:  # a unit is compiled, not #included (runtime.cpp aside)
        for source in _level_sources()[1:]:
            assert f'#include "{unit.relative_to(RUNTIME).as_posix()}"' not in source.read_text(), (unit, source)


def test_runtime_cpp_includes_every_unit_once():
    included = re.findall(r'^#include "([^"]+\.cpp)"', (RUNTIME / "runtime.cpp").read_text(), re.M)
    assert sorted(included) == sorted(u.relative_to(RUNTIME).as_posix() for u in build.RUNTIME_UNITS)


@pytest.mark.parametrize("source", _level_sources(), ids=lambda p: p.relative_to(RUNTIME).as_posix())
def test_no_conditional_compiles_other_code_but_for_the_platform(source):
    text = source.read_text()
    guard = re.match(r"(?:\s*//[^\n]*\n)*\s*#ifndef (\w+)\n#define \1\n", text)
    for cond in re.findall(r"^\s*#\s*(?:if|ifdef|ifndef|elif)\b(.*)$", text, re.M):
        names = set(re.findall(r"[A-Za-z_]\w*", cond.split("//")[0])) - PLATFORM_MACROS
        assert not names or (guard and names == {guard[1]}), f"{source.name}: #if {cond.strip()}"


@pytest.mark.parametrize("header", HEADERS, ids=lambda p: p.relative_to(RUNTIME).as_posix())
def test_each_header_compiles_alone_and_once(header, tmp_path):
    """With the runtime's flags and include path (build.py), the header alone and the header twice
    (an include guard or ``#pragma once``)."""
    cxx = shlex.split(build.EmulatorToolchain(cache_dir=tmp_path).cxx)
    flags = [*cxx, *build.RUNTIME_FLAGS, *build.RUNTIME_INCLUDES, "-fsyntax-only"]
    alone = subprocess.run([*flags, "-x", "c++", str(header)], capture_output=True, text=True)
    assert alone.returncode == 0, alone.stderr
    twice = tmp_path / "twice.cpp"
    twice.write_text(f'#include "{header}"\n#include "{header}"\n')
    again = subprocess.run([*flags, str(twice)], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr


def test_a_change_to_any_source_changes_the_runtime_objects_key(tmp_path, monkeypatch):
    copy = tmp_path / "runtime"
    shutil.copytree(RUNTIME, copy)
    monkeypatch.setattr(build, "RUNTIME_DIR", copy)
    monkeypatch.setattr(build, "EXECUTOR_SOURCE", copy / "executor.cpp")
    def key() -> str:  # a toolchain hashes the sources once (a process's sources do not change): a new one each time
        return build.EmulatorToolchain(cache_dir=tmp_path / "cache").runtime_key()
    keys = {key()}
    for name in ("checks/races.cpp", "host/abi.cpp", "grid/launch.h", "runtime.cpp"):
        with open(copy / name, "a") as f:
            f.write("// changed\n")
        keys.add(key())
    assert len(keys) == 5
    with open(copy / "executor.cpp", "a") as f:  # the executor is built on its own
        f.write("// changed\n")
    assert key() in keys


def test_the_package_data_ships_every_runtime_file():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    globs = data["grader.backends.emulator"]
    package = RUNTIME.parent
    for f in RUNTIME.rglob("*"):
        if f.is_file():
            rel = f.relative_to(package).as_posix()
            assert any(fnmatch.fnmatch(rel, g) and rel.count("/") == g.count("/") for g in globs), rel
