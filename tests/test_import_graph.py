"""The package's modules import one another without a cycle: imports at module level and inside
functions (they run as well), not those only for type checkers (``if TYPE_CHECKING``)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _module_graph() -> dict[str, set[str]]:
    files = {}
    for f in (ROOT / "grader").rglob("*.py"):
        parts = f.relative_to(ROOT).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    graph = {}
    for name, f in files.items():
        tree = ast.parse(f.read_text(encoding="utf-8"))
        typing_only = {id(sub) for node in ast.walk(tree)
                       if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                       for sub in ast.walk(node)}
        deps = set()
        for node in ast.walk(tree):  # imports inside functions count: they run too
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps |= {m for m in (node.module, *(f"{node.module}.{a.name}" for a in node.names)) if m in files}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in files}
        graph[name] = deps - {name}
    return graph


def _cycle_through(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """A path start -> ... -> start, or None."""
    stack, seen = [(start, [start])], set()
    while stack:
        node, path = stack.pop()
        for nxt in graph[node]:
            if nxt == start:
                return path + [start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, path + [nxt]))
    return None


def test_the_graph_sees_the_packages_modules():
    graph = _module_graph()
    assert {"grader.cli", "grader.runner", "grader.worker", "grader.protocol", "grader.classwork.batch",
            "grader.render.class_report", "grader.backends.emulator.backend"} <= set(graph)
    assert "grader.results" in graph["grader.protocol"]


def test_no_module_of_the_package_imports_itself_through_others():
    graph = _module_graph()
    cycles = [" -> ".join(c) for m in sorted(graph) if (c := _cycle_through(graph, m))]
    assert not cycles, cycles


#: The package's layers, lowest first: a module imports nothing from a layer above its own. Modules
#: not listed (the results, config, parts, backends, renderers...) are the base, layer 0.
LAYERS = (
    ("grader.intake",),                                # one submission's files, checked and read
    ("grader.runner", "grader.worker"),                # grading one submission, one part per worker
    ("grader.classwork",),                             # a class: discovery, batch, store, Slurm
    ("grader.api",),                                   # the grading API
    ("grader.cli", "grader.pytest_plugin", "grader.__main__"),  # the entry points
)


def _layer(module: str) -> int:
    return next((n + 1 for n, prefixes in enumerate(LAYERS)
                 if any(module == p or module.startswith(p + ".") for p in prefixes)), 0)


def test_no_import_points_up_the_layers():
    graph = _module_graph()
    assert "grader.intake" in graph and "grader.intake" in graph["grader.runner"]
    upward = sorted(f"{m} (layer {_layer(m)}) -> {d} (layer {_layer(d)})"
                    for m, deps in graph.items() for d in deps if _layer(d) > _layer(m))
    assert not upward, upward
