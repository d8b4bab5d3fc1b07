"""tests/ mirrors grader/ (tests/README.md): a folder of tests for every package of ``grader/``, a test
file in ``tests/entry/`` for every entry module at its top, no test file at the top of ``tests/``, and
an ``__init__.py`` in every folder of tests. The packages and modules are read from ``grader/`` on
disk, so a new package fails here until it has its folder."""

from __future__ import annotations

from tests.conftest import ROOT, TESTS

GRADER = ROOT / "grader"
#: grader/'s files at its top that are no entry point of their own (the package, ``python -m grader``).
NOT_ENTRY = {"__init__", "__main__"}


def _test_files(folder):
    return sorted(p.name for p in folder.glob("test_*.py"))


def test_every_package_of_the_grader_has_a_folder_of_tests():
    packages = sorted(p.name for p in GRADER.iterdir() if (p / "__init__.py").is_file())
    assert "core" in packages and "grading" in packages, packages  # the listing itself works
    missing = [name for name in packages if not _test_files(TESTS / name)]
    assert not missing, f"packages of grader/ with no tests/<package>/test_*.py: {missing}"


def test_every_entry_module_has_its_tests_in_entry():
    modules = sorted(p.stem for p in GRADER.glob("*.py") if p.stem not in NOT_ENTRY)
    assert "cli" in modules, modules
    entry = _test_files(TESTS / "entry")
    missing = [m for m in modules if not any(f == f"test_{m}.py" or f.startswith(f"test_{m}_") for f in entry)]
    assert not missing, f"entry modules of grader/ with no tests/entry/test_<module>*.py: {missing}"


def test_no_test_file_sits_at_the_top_of_tests():
    assert not _test_files(TESTS), "move these into the folder of the package they test (tests/README.md)"


def test_every_folder_of_tests_is_a_package():
    folders = sorted({p.parent for p in TESTS.rglob("test_*.py")})
    assert len(folders) > 1, folders
    missing = [str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").is_file()]
    assert not missing, f"folders of tests without __init__.py (tests import them as tests.<folder>): {missing}"
