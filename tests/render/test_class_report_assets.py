"""The class report's template, style sheet and script are package data: found through
:mod:`importlib.resources`, in the page byte for byte, and shipped by a non-editable build."""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

from grader.render.class_report import CSS_FILE, SCRIPT_FILE, TEMPLATE_FILE, class_report, content_security_policy
from tests.conftest import ROOT

ASSETS = (TEMPLATE_FILE, CSS_FILE, SCRIPT_FILE)


def test_the_template_css_and_script_are_found_through_importlib_resources_and_go_into_the_page():
    folder = resources.files("grader.render").joinpath("templates")
    texts = {name: folder.joinpath(name).read_text(encoding="utf-8") for name in ASSETS}
    assert all(texts.values())
    page = class_report([], plots=False)
    assert f"<style>{texts[CSS_FILE]}</style>" in page and f"<script>{texts[SCRIPT_FILE]}</script>" in page
    digest = base64.b64encode(hashlib.sha256(texts[SCRIPT_FILE].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in content_security_policy()
    assert f'content="{content_security_policy()}"' in page  # the policy as it is, not entity-escaped


def test_a_non_editable_build_ships_the_assets_and_renders_the_page_from_them(tmp_path):
    """What ``pip install .`` (not editable) copies: setuptools' build_py of the declared packages
    and package data, into a folder of its own; the page is rendered from there."""
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.o")
    shutil.copytree(ROOT / "grader", src / "grader", ignore=ignore)
    shutil.copytree(ROOT / "reference", src / "reference", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    built = tmp_path / "site"
    done = subprocess.run([sys.executable, "-c", "import setuptools; setuptools.setup()", "-q", "build_py", "-d",
                           str(built)], cwd=src, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    for name in ASSETS:
        assert (built / "grader" / "render" / "templates" / name).is_file(), name
    probe = ("import importlib; from pathlib import Path; c = importlib.import_module('grader.render.class_report'); "
             "print(Path(c.__file__).resolve()); "
             "print(len(c.class_report([], plots=False)))")
    run = subprocess.run([sys.executable, "-P", "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(built), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    where, size = run.stdout.split()
    assert Path(where).is_relative_to(built.resolve()) and int(size) > 3000
