"""Shared fixtures: the backends to run the suite on, and small configurations for fast tests."""

from __future__ import annotations

import functools
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from grader.backends import Selection, probe_pycuda
from grader.assignment.config import load_config
from grader.core.kinds import STRICT_ENV

# A failure kind without its row in grader.core.kinds.KINDS fails the test (grader.core.kinds.UnknownKind), here
# and in the part workers the tests start (they inherit the environment), instead of grading a case
# `error` as production does.
os.environ.setdefault(STRICT_ENV, "1")

ROOT = Path(__file__).resolve().parent.parent  # the repository; a test file at any depth reaches it here
SOLUTIONS = ROOT / "reference" / "solutions"
TEMPLATES = ROOT / "assignment"
# The corpus (tests/README.md): kernels broken on purpose, graded as a student's part files; the
# emulator's own kernels; the attack suite's submissions; one kernel per failure kind (with its
# expected verdicts); compiled modules.
TESTS = ROOT / "tests"
BROKEN = TESTS / "kernels"
EMULATOR_KERNELS = TESTS / "emulator_kernels"
ATTACKS = TESTS / "attacks"
VERDICTS = TESTS / "verdicts"
FIXTURES = TESTS / "fixtures"


@functools.lru_cache(maxsize=1)
def gpu_available() -> tuple[bool, str]:
    """Whether PyCUDA can create a context here (probed once per session, in a child process)."""
    return probe_pycuda()


@functools.lru_cache(maxsize=1)
def os_sandbox() -> tuple[bool, str]:
    """Whether the emulator runs modules in its whole operating-system sandbox here (bubblewrap and
    the seccomp filter): ``(True, "")``, or ``(False, what is missing and how to install it)``."""
    from grader.backends import create_backend
    from grader.core.errors import ScangradeError
    try:
        backend = create_backend("emulator", emulator_workers=1, checks=False, emulator_sandbox="auto")
    except ScangradeError as exc:
        return False, f"the emulator is unavailable: {exc}"
    try:
        described = backend.describe().get("sandbox", "")
    finally:
        backend.close()
    if described == "bubblewrap + seccomp":
        return True, ""
    return False, (f"the emulator's sandbox here is '{described}', not bubblewrap + seccomp "
                   "(apt install bubblewrap libseccomp-dev; .ci/system-deps.sh does it in CI)")


@functools.lru_cache(maxsize=1)
def _built_emulator() -> tuple[Path, ...]:
    """The emulator's runtime object and executor with the default flags, from the default cache
    (built there, once, where missing); none where they do not build here."""
    from grader.backends.emulator.build import EmulatorToolchain
    from grader.core.errors import ScangradeError
    try:
        toolchain = EmulatorToolchain()
        return toolchain.runtime_object(), toolchain.executor_binary()[0]
    except ScangradeError:
        return ()  # each backend then builds them, or fails, as it would without this


def emulator_cache(folder: Path) -> Path:
    """``folder`` made a fresh cache for an ``EmulatorBackend(cache_dir=...)``: an empty compile cache,
    and in ``emulator/`` a copy of the runtime object and executor built once per session, which a
    backend with the default runtime flags takes instead of compiling them again (seconds of every
    core each time). Returns ``folder``."""
    (folder / "emulator").mkdir(parents=True, exist_ok=True)
    for built in _built_emulator():
        if not (folder / "emulator" / built.name).exists():  # never over an executor that may be running
            shutil.copy2(built, folder / "emulator" / built.name)
    return folder


def needs_os_sandbox():
    """Skip marker for tests of what only bubblewrap and seccomp contain (docs/security.md says what
    the fallback without them does not)."""
    ok, why = os_sandbox()
    return pytest.mark.skipif(not ok, reason=why)


def _gpu_param():
    ok, why = gpu_available()
    return pytest.param("pycuda", marks=[pytest.mark.gpu,
                                         pytest.mark.skipif(not ok, reason=f"no usable CUDA GPU: {why}")])


#: Run a test on every backend: the emulator everywhere, PyCUDA where a GPU is usable.
BACKENDS = ["emulator", _gpu_param()]


@pytest.fixture(params=BACKENDS)
def backend(request) -> Selection:
    """A backend selection for the grader, one per backend this machine can run."""
    return Selection(request.param, "test parameter")


def write_config(tmp_path: Path, *, block_size: int = 128, part_s: float = 120, seed: int = 7,
                 sizes: dict[str, list[int]] | None = None, extra: str = "") -> Path:
    """A small configuration file for fast tests; returns its path."""
    sizes = sizes or {"part1_naive": [1, 3, 33, 100, 128],
                      "part2_blelloch": [1, 2, 33, 128, 200, 256],
                      "part4_any_size": [1, 255, 256, 257, 5000, 70000]}
    parts = "\n".join(f"  {k}:\n    points_per_case: 1\n    sizes: {v}" for k, v in sizes.items())
    text = textwrap.dedent(f"""\
        block_size: {block_size}
        seed: {seed}
        timeouts:
          part_s: {part_s}
        """) + extra + "parts:\n" + parts + "\n"
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="session")
def pace():
    """:mod:`tests.pace`, its measurement of this machine made (once per session; before a test moves
    TMPDIR, so none of its processes are taken for a test's). Time limits go through ``pace.seconds``."""
    from tests import pace as module
    module.reference_grading_s()
    return module


@pytest.fixture
def small_config(tmp_path):
    """A loaded small configuration (BLOCK_SIZE 128, a few sizes per part)."""
    return load_config(write_config(tmp_path))


def shipped_part3_config(tmp: Path) -> Path:
    """The project's config.yaml for Part 3 (its BLOCK_SIZE and its profile block as shipped), with
    two int32 cases only, so a test grades what students are graded on, quickly; its path (in ``tmp``)."""
    import yaml

    shipped = yaml.safe_load((ROOT / "config.yaml").read_text())
    part3 = shipped["parts"]["part3_conflict_free"]
    doc = {"block_size": shipped["block_size"], "seed": 7,
           "parts": {"part3_conflict_free": {"points_per_case": 1, "sizes": [1, part3["profile"]["size"]],
                                             "dtypes": ["int32"],
                                             "profile": part3["profile"]}}}
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="session")
def part2_as_part3(tmp_path_factory: pytest.TempPathFactory):
    """Part 2's reference (its kernel renamed) graded as Part 3 on the emulator with the shipped
    profile settings: correct, with the bank conflicts Part 3 is about (a 32-way worst request).
    Graded once a session: ``tests/backends/test_profile.py`` and ``tests/render/test_html_report.py`` read it."""
    from grader.grading.runner import grade

    tmp = tmp_path_factory.mktemp("part2_as_part3")
    p2 = tmp / "p2" / "part3_conflict_free.cu"
    p2.parent.mkdir()
    p2.write_text((SOLUTIONS / "part2_blelloch.cu").read_text().replace("blelloch_scan(", "blelloch_scan_cf("))
    return grade(p2.parent, cfg=load_config(shipped_part3_config(tmp)), selection=Selection("emulator", "test"),
                 parts=["part3_conflict_free"])
