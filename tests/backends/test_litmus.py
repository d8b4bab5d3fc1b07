"""The litmus suite (tests/litmus/, docs/emulator.md "The litmus suite"): small kernels from the PTX
memory model's public litmus tests (the PTX ISA's chapter, Lustig et al. 2019 and its Alloy model,
herdtools7's PTX catalogue of Alglave et al. 2015, Merrill & Garland 2016), each run on the
emulator's checks in four thread orders, each with the model's verdict: ``race`` (a race finding
naming the row's two lines in at least one order, as the grader fails a case on a finding of any
of its checked runs: two blocks on two workers at once can pass each other between a hook and its
access, so one order may miss a race) or ``clean`` (no finding in any order, and an outcome the
model allows). A disagreement is a bug of the checks until shown otherwise; none is marked
xfail. ``python -m tests.backends.test_litmus`` prints what the checks say for every row.
"""

from __future__ import annotations

import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from grader.assignment.parts import PartSpec, part_header
from grader.backends.emulator import EmulatorBackend, EmulatorModule, Finding
from grader.core.errors import KernelError
from grader.core.kernels import KernelSpec, Param
from tests.conftest import emulator_cache
from tests.litmus.table import (FILES, HERE, RESULTS, ROWS, WORDS, Litmus, docs_table, line_of,
                                render_markdown)

ORDERS = (("ascending", 0), ("descending", 0), ("random", 1), ("random", 2))


def compile_file(be: EmulatorBackend, workdir: Path, file: str) -> EmulatorModule:
    """One module for the kernels of ``file``: the part header, tests/litmus/common.h, the file."""
    kernels = tuple(KernelSpec(r.name, (Param("out", "int*", "ptr"), Param("n", "int", "int")))
                    for r in ROWS if r.file == file)
    part = PartSpec("litmus", 0, "litmus", file, kernels, False, None)
    source = (part_header(part, block_size=64, dtype=np.dtype(np.int32)) + '#line 1 "litmus_common.h"\n'
              + (HERE / "common.h").read_text() + f'#line 1 "{file}"\n' + (HERE / file).read_text())
    return be.compile(source=source, filename=file, kernels=kernels, workdir=workdir)


@dataclass
class Run:
    """One launch of a row in one thread order: the findings (fatal and warnings), the failure's kind
    (None when the launch succeeded), the results RES(0..15) and the locations out[0..31]."""
    order: str
    findings: list[Finding] = field(default_factory=list)
    kind: str | None = None
    results: np.ndarray | None = None
    memory: np.ndarray | None = None


def launch(be: EmulatorBackend, module: EmulatorModule, row: Litmus, order: tuple[str, int]) -> Run:
    be.set_schedule(*order)
    run = Run(f"{order[0]}/{order[1]}")
    out = be.alloc(WORDS, np.int32)
    be.to_device(np.zeros(WORDS, np.int32), out)
    be.take_warnings()
    try:
        be.launch(module, row.name, grid=row.grid, block=row.block, shared_bytes=0, args=[out, 0])
        run.findings = be.take_warnings()
    except KernelError as err:
        run.kind, run.findings = err.kind, list(getattr(err, "findings", []) or [])
    got = be.to_host(out)
    run.results, run.memory = got[RESULTS:RESULTS + 16], got[:RESULTS]
    return run


def names_lines(row: Litmus, f: Finding, kind: str = "race") -> bool:
    """Whether ``f`` is a finding of ``kind`` naming the two lines of one of the row's pairs (in either order)."""
    if f.kind != kind or Path(f.file or "").name != row.file:
        return False
    return any({f.line, f.other_line} == {line_of(row.file, a), line_of(row.file, b)} for a, b in row.lines)


def said(row: Litmus, runs: list[Run]) -> str:
    """What the checks said over the orders, in a word or a few: ``race`` (naming the row's lines in
    at least one order, the grader's rule; or for a clean row any race, with its lines), ``race
    (other lines: 12/7)``, ``clean``, ``clean, outcome forbidden``, or the other kinds found."""
    named = sum(any(names_lines(row, f) for f in r.findings) for r in runs)
    kinds = sorted({f.kind for r in runs for f in r.findings} | {r.kind for r in runs if r.kind})
    if named:
        return "race"
    stale = [r for r in runs if any(names_lines(row, f, "stale-read") for f in r.findings)]
    if stale and kinds == ["stale-read"]:
        shown = row.older is None or any(row.older(r.results, r.memory) for r in stale)
        return "stale" if shown else "stale, older value not given"
    if "race" in kinds:
        lines = sorted({f"{f.line}/{f.other_line}" for r in runs for f in r.findings if f.kind == "race"})
        return ("race" if row.verdict == "clean" else "race (other lines)") + f" at {row.file}:{', '.join(lines)}"
    if kinds:
        return "other: " + ", ".join(kinds)
    if row.allowed is not None and not all(row.allowed(r.results, r.memory) for r in runs):
        return "clean, outcome forbidden"
    return "clean"


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    be = EmulatorBackend(workers=2, cache_dir=emulator_cache(tmp_path_factory.mktemp("emu-cache")), checks=True, nvcc_check=False)
    yield be
    be.close()


@pytest.fixture(scope="module")
def modules(checked, tmp_path_factory) -> dict[str, EmulatorModule]:
    return {file: compile_file(checked, tmp_path_factory.mktemp(file.replace(".", "_")), file) for file in FILES}


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_litmus(checked, modules, row: Litmus):
    runs = [launch(checked, modules[row.file], row, order) for order in ORDERS]
    verdict = said(row, runs)
    detail = [(r.order, r.kind, [f"{f.kind}: {f.message}" for f in r.findings][:2], r.results[:4].tolist())
              for r in runs]
    assert verdict == row.verdict, f"{row.name}: the model says {row.verdict}, the checks said {verdict}: {detail}"


def test_the_suite_covers_at_least_30_tests_and_each_kernel_states_its_verdict():
    assert len(ROWS) >= 30 and len({r.name for r in ROWS}) == len(ROWS)
    for row in ROWS:
        text = (HERE / row.file).read_text()
        at = text.index(f'extern "C" __global__ void {row.name}(int* out, int n)')
        comment = " ".join(text[text.rindex(f"// {row.name}.", 0, at):at].replace("//", " ").split())
        assert f"Verdict: {row.verdict}" in comment and "Source:" in comment, row.name
        assert (row.verdict in ("race", "stale")) == bool(row.lines)
        assert (row.verdict == "clean") == (row.allowed is not None) and (row.verdict == "stale") == (row.older is not None)
        for pair in row.lines:
            for marker in pair:
                line_of(row.file, marker)


def test_the_docs_table_is_the_suites():
    assert docs_table() == render_markdown(), "docs/emulator.md's litmus table is stale: run python -m tests.litmus.table"


def main() -> None:
    """Print, for every row, the model's verdict and what the checks said."""
    with tempfile.TemporaryDirectory() as tmp:
        be = EmulatorBackend(workers=2, cache_dir=Path(tmp) / "cache", checks=True, nvcc_check=False)
        try:
            mods = {f: compile_file(be, Path(tempfile.mkdtemp(dir=tmp)), f) for f in FILES}
            print("| test | expected | checks said | agree |\n| --- | --- | --- | --- |")
            for row in ROWS:
                got = said(row, [launch(be, mods[row.file], row, o) for o in ORDERS])
                print(f"| {row.name} | {row.verdict} | {got} | {'yes' if got == row.verdict else 'no'} |")
                sys.stdout.flush()
        finally:
            be.close()


if __name__ == "__main__":
    main()
