"""The emulator runtime's sources: runtime.cpp is one translation unit that #includes its sections
(runtime/rt_*.inc, profile.inc); each section is part of the cached runtime object's identity and
ships with the package."""

from __future__ import annotations

import fnmatch
import re
import shutil
import tomllib

import grader.backends.emulator.build as build
from tests.conftest import ROOT

RUNTIME = build.RUNTIME_DIR


def test_runtime_cpp_includes_every_section_once_and_no_missing_one():
    included = re.findall(r'^#include "([^"]+\.inc)"', (RUNTIME / "runtime.cpp").read_text(), re.M)
    sections = sorted(p.name for p in RUNTIME.glob("*.inc"))
    assert sorted(included) == sections
    assert len(sections) > 10  # split along its sections
    for name in sections:  # sections are not translation units, nor #included anywhere else
        assert not re.search(r'^#include "[^"]+\.inc"', (RUNTIME / name).read_text(), re.M), name


def test_a_change_to_any_section_changes_the_runtime_objects_key(tmp_path, monkeypatch):
    copy = tmp_path / "runtime"
    shutil.copytree(RUNTIME, copy)
    monkeypatch.setattr(build, "RUNTIME_DIR", copy)
    monkeypatch.setattr(build, "EXECUTOR_SOURCE", copy / "executor.cpp")
    def key() -> str:  # a toolchain hashes the sources once (a process's sources do not change): a new one each time
        return build.EmulatorToolchain(cache_dir=tmp_path / "cache").runtime_key()
    keys = {key()}
    for name in ("rt_checks.inc", "rt_abi.inc", "profile.inc", "runtime.cpp"):
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
