"""The package's modules import one another without a cycle, and no module imports from a layer above
its own: imports at module level, inside functions (they run as well) and for type checkers only
(``if TYPE_CHECKING``: a name a layer below cannot use is a sign it is in the wrong place)."""

import ast

from tests.conftest import ROOT


def _module_graph(*, typing: bool = False) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports (``typing``: those under ``if TYPE_CHECKING``
    too, which never run and so cannot make a cycle, but still say which layer a module needs)."""
    files = {}
    for f in (ROOT / "grader").rglob("*.py"):
        if not (f.parent / "__init__.py").is_file():  # a data folder's script (autograder_files/), not a module
            continue
        parts = f.relative_to(ROOT).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    graph = {}
    for name, f in files.items():
        tree = ast.parse(f.read_text(encoding="utf-8"))
        typing_only = set() if typing else {id(sub) for node in ast.walk(tree) if isinstance(node, ast.If)
                                            and "TYPE_CHECKING" in ast.unparse(node.test) for sub in ast.walk(node)}
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
    assert {"grader.cli", "grader.grading.runner", "grader.grading.worker", "grader.grading.protocol",
            "grader.classwork.batch", "grader.render.class_report", "grader.backends.emulator.backend"} <= set(graph)
    assert "grader.core.results" in graph["grader.grading.protocol"]


def test_no_module_of_the_package_imports_itself_through_others():
    graph = _module_graph()
    cycles = [" -> ".join(c) for m in sorted(graph) if (c := _cycle_through(graph, m))]
    assert not cycles, cycles


def test_no_cycle_even_through_imports_for_type_checkers():
    """A cycle that only a type checker follows (``parts`` naming ``config``'s ``PartConfig`` while
    ``config`` reads ``PARTS``) runs nowhere, but says the two modules are one: none is allowed."""
    graph = _module_graph(typing=True)
    assert "grader.assignment.parts" in graph["grader.assignment.config_schema"]
    cycles = [" -> ".join(c) for m in sorted(graph) if (c := _cycle_through(graph, m))]
    assert not cycles, cycles


#: The package's layers, lowest first: a module imports nothing from a layer above its own (the same
#: layer is allowed; cycles are refused above). Each entry is a package (its modules and subpackages)
#: or, ending in ``=``, one module alone. Every module of the package is in one of them
#: (:func:`test_every_module_is_in_a_layer`), so a new package has to take its place here.
LAYERS = (
    ("grader=", "grader.core"),                        # the data every layer shares; the package's version
    ("grader.host",),                                  # processes, resource limits, the GPU lock
    ("grader.source",),                                # the C token reader, the directive checks
    ("grader.toolchain",),                             # the compilers, their sandbox, the compile cache
    ("grader.backends",),                              # their table, their interface, the emulator, PyCUDA, CUB
    ("grader.assignment",),                            # parts, plans, the config
    ("grader.grading",),                               # one submission, part by part
    ("grader.tools",),                                 # the bench, which times what grading times
    ("grader.classwork",),                             # a class: discovery, batch, store, Slurm
    ("grader.render",),                                # reports from results, and a class's page
    ("grader.packaging",),                             # the student release and the autograder bundles
    ("grader.api",),                                   # the grading API
    ("grader.cli", "grader.pytest_plugin", "grader.notebook", "grader.__main__"),  # the entry points
)


def _layer(module: str) -> int | None:
    for n, entries in enumerate(LAYERS):
        for entry in entries:
            if entry.endswith("=") and module == entry[:-1]:
                return n
    found = [(len(e), n) for n, entries in enumerate(LAYERS) for e in entries
             if not e.endswith("=") and (module == e or module.startswith(e + "."))]
    return max(found)[1] if found else None


def test_every_module_is_in_a_layer():
    missing = sorted(m for m in _module_graph() if _layer(m) is None)
    assert not missing, f"modules in no layer of LAYERS: {missing}"


def test_no_import_points_up_the_layers():
    graph = _module_graph(typing=True)
    assert "grader.core.results" in graph["grader.grading.runner"]
    upward = sorted(f"{m} (layer {_layer(m)}) -> {d} (layer {_layer(d)})"
                    for m, deps in graph.items() for d in deps if _layer(d) > _layer(m))
    assert not upward, upward


def test_the_top_of_the_package_holds_the_entry_points_only():
    """The tree is the architecture's map: every module but the entry points lives in a package."""
    top = sorted(f.name for f in (ROOT / "grader").glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "api.py", "cli.py", "notebook.py", "pytest_plugin.py"], top


def test_the_architecture_doc_lists_the_layers_in_their_order():
    """docs/architecture.md, "The package by its rooms": one row per layer of LAYERS, its packages named."""
    import re

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## The package by its rooms", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if re.match(r"\| \d+ \|", line)]
    documented = [tuple(re.findall(r"`(grader\.[\w.]+)`", row.split("|")[2])) for row in rows]
    expected = [tuple(e for e in entries if not e.endswith("=")) for entries in LAYERS]
    assert documented == expected
