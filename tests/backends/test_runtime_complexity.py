"""The emulator runtime's functions stay small enough to read (issue 53): lizard measures every
function of the runtime's C++ sources (``grader/backends/emulator/runtime``: the ``.cpp`` and ``.h``
files of every level folder and of the top, the stub headers included), and none may exceed the
limits below."""

from __future__ import annotations

import lizard
import pytest

from grader.backends.emulator.build import RUNTIME_DIR

#: The most cyclomatic complexity (lizard's CCN) a function of the runtime may have.
MAX_COMPLEXITY = 25
#: The most lines a function of the runtime may span (lizard's length: first to last line).
MAX_LINES = 100

SOURCES = sorted(p for pattern in ("*.cpp", "*.h") for p in RUNTIME_DIR.rglob(pattern))


def test_the_runtime_has_sources_to_measure():
    names = {p.relative_to(RUNTIME_DIR).as_posix() for p in SOURCES}
    assert {"runtime.cpp", "executor.cpp", "grid/worker.cpp", "block/rounds.cpp", "warp/rendezvous.cpp"} <= names


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.relative_to(RUNTIME_DIR).as_posix())
def test_no_function_of_the_runtime_is_too_complex_or_too_long(source):
    measured = lizard.analyze_file(str(source))
    offenders = [f"{source.relative_to(RUNTIME_DIR).as_posix()}:{f.start_line} {f.name}: "
                 f"{f.length} lines, complexity {f.cyclomatic_complexity}"
                 for f in measured.function_list
                 if f.cyclomatic_complexity > MAX_COMPLEXITY or f.length > MAX_LINES]
    assert not offenders, (f"over complexity {MAX_COMPLEXITY} or {MAX_LINES} lines (split them into named steps):\n"
                           + "\n".join(offenders))
