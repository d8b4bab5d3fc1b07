"""No private name is imported across modules (issue 53's done-means): a name ``_x`` is its module's own,
and a module ``_x`` its package's own. Read from the source with ``ast``, as ``tests/project/test_import_graph.py``
reads imports: ``from M import _x``, ``import grader.p._m`` or ``from grader.p import _m`` from outside
``grader.p``, and ``m._x`` on a module ``m`` imported by name, at module level, inside functions and under
``if TYPE_CHECKING`` alike. A helper another module needs gets a public name, or moves to where it is
used."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT



def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package under ``root`` by dotted name (a data folder's script, without
    ``__init__.py`` beside it, is none)."""
    found = {}
    for f in (root / "grader").rglob("*.py"):
        if (f.parent / "__init__.py").is_file():
            parts = f.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return found


def _owner(module: str) -> str | None:
    """The package a module's private part belongs to: the parent of its first ``_x`` component (None:
    the module is public)."""
    parts = module.split(".")
    at = next((i for i, p in enumerate(parts) if _private(p)), None)
    return None if at is None else ".".join(parts[:at])


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def private_imports(root: Path = ROOT) -> set[str]:
    """Every private name or module one module of ``root/grader/`` takes from another: ``"importer: what"``."""
    modules = _modules(root)
    found = set()
    for name, f in modules.items():
        package = name if f.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(f.read_text(encoding="utf-8"))
        aliases = {}  # a name bound to a module of the package -> that module

        def took(what: str, *, module: str) -> None:
            owner = _owner(module)
            if module != name and owner is not None and not _inside(name, owner):
                found.add(f"{name}: {what}")

        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
                source = ".".join(base + ([node.module] if node.module else []))
                if source not in modules:
                    continue
                for a in node.names:
                    full = f"{source}.{a.name}"
                    if full in modules:  # a module imported from its package
                        aliases[a.asname or a.name] = full
                        took(full, module=full)
                    else:
                        took(source, module=source)
                        if _private(a.name) and source != name:
                            found.add(f"{name}: {full}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in modules:
                        took(a.name, module=a.name)
                        if a.asname:
                            aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr)
                    and aliases.get(node.value.id, name) != name):
                found.add(f"{name}: {aliases[node.value.id]}.{node.attr}")
    return found


def test_the_finder_sees_a_private_import_and_lets_a_package_use_its_own_private_module(tmp_path):
    package = tmp_path / "grader" / "p"
    package.mkdir(parents=True)
    for name, text in {"__init__.py": "", "a.py": "def _helper(): pass\n", "_own.py": "",
                       "b.py": "from grader.p.a import _helper\nimport grader.p.a as a\na._other\n",
                       "c.py": "from grader.p import _own\n"}.items():
        (package / name).write_text(text)
    (tmp_path / "grader" / "__init__.py").write_text("import grader.p._own\n")
    assert private_imports(tmp_path) == {"grader.p.b: grader.p.a._helper", "grader.p.b: grader.p.a._other",
                                         "grader: grader.p._own"}
    found = private_imports()
    assert not [f for f in found if f.startswith("grader.render.text:")]  # it imports grader.render._common


def test_no_private_name_is_imported_across_modules():
    unexpected = sorted(private_imports())
    assert not unexpected, ("private names imported from another module (give them a public name, or move "
                            f"the helper to where it is used): {unexpected}")
