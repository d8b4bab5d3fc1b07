"""The classwork package's place among the modules: no import cycle through it or the renderers,
and nothing in it imports a renderer (the CLI hands the report texts in)."""

from __future__ import annotations

import ast

from tests.conftest import ROOT


def _import_graph() -> dict[str, set[str]]:
    """Module -> the grader modules it imports (late and TYPE_CHECKING imports included; importing
    ``a.b.c`` counts as importing ``a`` and ``a.b`` too, whose ``__init__`` runs first)."""
    files = {}
    for f in (ROOT / "grader").rglob("*.py"):
        name = ".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        files[name] = f
    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, f in files.items():
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            for name in names:
                parts = name.split(".")
                for k in range(1, len(parts) + 1):
                    target = ".".join(parts[:k])
                    if target in files and target != module and not module.startswith(target + "."):
                        graph[module].add(target)
    return graph


def _reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_no_import_cycle_runs_through_classwork_the_renderers_or_the_cli():
    graph = _import_graph()
    ours = [m for m in graph
            if m.startswith(("grader.classwork", "grader.render")) or m == "grader.cli"]
    assert "grader.classwork.batch" in ours and "grader.render.class_report" in ours
    cyclic = sorted(m for m in ours if m in _reaches(graph, m))
    assert not cyclic, f"import cycles through {cyclic}"


def test_no_classwork_module_imports_a_renderer():
    graph = _import_graph()
    found = {m: sorted(t for t in graph[m] if t.startswith("grader.render"))
             for m in graph if m.startswith("grader.classwork")}
    assert {m: t for m, t in found.items() if t} == {}
    assert {"grader.classwork.submissions", "grader.classwork.store", "grader.classwork.gradebook",
            "grader.classwork.merge", "grader.classwork.slurm", "grader.classwork.batch"} <= set(found)
