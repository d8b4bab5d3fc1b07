"""The attack suite: submissions that try to get out of the grader, read or change what they must not,
or cheat (issue #7).

One submission per attack, in ``tests/attacks/`` (each a complete part file whose first comment says
what it attempts; ``tests/attacks/README.md`` has the table). Paths and tokens are written into a
copy at test time (``@@TOKEN@@``, ``@@MARKER@@``, ``@@TARGET@@``...), so an attack aims at this
test's own canary files, marker folder and TCP server. Every test asserts the grader's result
(status, message: refused, compile error, error, timeout; never graded as passed where the attack
makes the output wrong) and that nothing leaked (the secret tokens are nowhere in the result JSON,
the text report or, for the CLI, stdout and stderr), nothing changed (hashes and mtimes of the
files an attack aims at, no marker file) and no process of the attack outlived the grading.

What must stop them is the emulator's sandbox (bubblewrap, a seccomp filter, resource limits; see
``grader/toolchain/sandbox.py``) and the ``#include`` allow-list (``grader/source/directives.py``);
the nvcc -ptx cross-check stops calls of host functions in kernels only where nvcc is on the PATH,
so the in-kernel attacks run both with it and without it (the worker's PATH without nvcc).

Configs are tiny (Part 1, and Part 2 where a second part is needed; BLOCK_SIZE 32, int32, a few
sizes; short timeouts), so the suite runs in about two minutes on two cores, the batch test (about
a minute) included. GPU variants carry the
``gpu`` marker and are skipped without a GPU.

Every time limit here (the config's timeouts, a bound on a grading's wall time) is its value on an
idle two-core machine times :func:`tests.pace.slowdown` (a reference grading measured once in the
session, and the load average when the limit is set): on a busy machine (a CI runner, ``make test``
beside other work) the compile of an attack takes longer, and the grader's behaviour, not the
machine's speed, must decide the test.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import hashlib
import json
import os
import re
import resource
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Self

import pytest

from grader import render
from grader.backends import Selection
from grader.classwork.batch import batch
from grader.assignment.config import Config, load_config, load_private
from grader.render.formats import FORMATS, student_reports
from grader.render.text import render_text
from grader.core.results import SubmissionResult
from grader.grading.runner import grade
from tests.pace import seconds, without_nvcc
from tests.conftest import ATTACKS, BROKEN, SOLUTIONS, TEMPLATES, gpu_available, needs_os_sandbox, write_config

EMULATOR = Selection("emulator", "test")
HAVE_NVCC = shutil.which("nvcc") is not None
#: The nvcc -ptx cross-check on (where nvcc is on the PATH) and off (the worker's PATH without it).
NVCC = [pytest.param(True, id="nvcc-on", marks=pytest.mark.skipif(not HAVE_NVCC, reason="nvcc is not on the PATH")),
        pytest.param(False, id="nvcc-off")]
_GPU_OK, _GPU_WHY = gpu_available()
GPU = pytest.mark.skipif(not _GPU_OK, reason=f"no usable CUDA GPU: {_GPU_WHY}")
PYCUDA = Selection("pycuda", "test")
#: What only bubblewrap and the seccomp filter stop (file reads, programs, sockets): skipped, with the
#: reason, where they are missing (the fallback's limits are in docs/security.md).
SANDBOXED = needs_os_sandbox()

PART1_SIZES = [5, 17]          # with BLOCK_SIZE 32 the cases are n = 1, 5, 17, 32
HIDDEN_SIZES = [7, 29]         # the private config's (Part 1)
PART_S, CASE_S = 8.0, 4.0      # timeouts of the test config on an idle machine (seconds; config() scales them)
#: Slack over a timeout for starting the worker and stopping it (seconds on an idle machine: scale it).
SLACK_S = 6.0
#: Case statuses that mean the attack was stopped rather than graded.
STOPPED = {"error", "crash", "timeout", "not-run"}
#: Address-space cap of the test process's children while an attack allocates 100 GiB: a backstop for
#: a machine that would grant it (overcommit), so a regression cannot take the machine's memory. It is
#: above the emulator's own needs (a 16 GiB device-memory reservation) and below 100 GiB.
ALLOC_BACKSTOP = 40 * 2**30


# -- the scene: canaries, markers, a private config, processes ------------------------------------------

@dataclasses.dataclass
class Scene:
    """One test's targets: where markers may appear, canary files with secret tokens, a private config.

    Attributes:
        tmp: the test's folder (its path is in the command line of every process a grading starts,
            through TMPDIR, so leftovers can be found).
        token: names the attack's own processes (15 characters: a Linux command name fits).
        secret: the token in every private file; it must never reach a result.
        hidden_seed: the private config's seed (never in a student's report).
        canary, private, classmate, results: private files (see :func:`scene`).
    """

    tmp: Path
    token: str
    secret: str
    hidden_seed: int
    markers: Path
    canary: Path
    private: Path
    classmate: Path
    results: Path

    def watched(self) -> list[Path]:
        """Files an attack aims at, whose bytes and mtimes must not change (the attacks only read the
        reference solution and /etc/passwd, which are not this test's to put at risk: /etc/passwd is
        left out, it may change for reasons of its own)."""
        return [self.canary, self.private, self.classmate, self.results, SOLUTIONS / "part1_naive.cu"]

    def secret_words(self) -> set[int]:
        """Every 4-byte window of the private files as an int32: what a kernel copying one into an int32
        output shows as a mismatch's "got"."""
        return set().union(*(int32_words(p.read_text()) for p in (self.canary, self.private, self.classmate,
                                                                   self.results)))

    def snapshot(self) -> dict[str, tuple[str, int]]:
        """SHA-256 and mtime (ns) of every watched file, and the listing of the folders they are in."""
        snap = {str(p): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in self.watched()}
        for folder in {p.parent for p in self.watched() if p.is_relative_to(self.tmp)} | {self.markers}:
            snap[f"{folder}/"] = ("\n".join(sorted(os.listdir(folder))), 0)
        return snap

    def leftovers(self, wait_s: float = 3.0) -> list[str]:
        """Processes still alive (not zombies) whose name or command line holds the token or this test's
        folder, after waiting up to ``wait_s`` (on an idle machine; scaled) for them to go."""
        deadline = time.monotonic() + seconds(wait_s)
        while True:
            found = _processes([self.token, str(self.tmp)])
            if not found or time.monotonic() > deadline:
                return [text for _, text in found]
            time.sleep(0.1)


def _processes(needles: list[str]) -> list[tuple[int, str]]:
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
            if stat[stat.rindex(")") + 2] in "ZX":
                continue
            comm = Path(f"/proc/{entry.name}/comm").read_text().strip()
            cmd = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if any(n in comm or n in cmd for n in needles):
            found.append((int(entry.name), f"pid {entry.name} [{comm}] {cmd[:300]}"))
    return found


@pytest.fixture
def scene(pace, tmp_path, monkeypatch):
    """A Scene; the grader's temporary folders (the runner's and the worker's, through TMPDIR) are put
    under ``tmp_path``, and whatever an attack left running is killed (by pid) at the end. The
    machine's pace is measured first (:mod:`tests.pace`), outside the scene."""
    grader_tmp = tmp_path / "grader-tmp"
    grader_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(grader_tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(grader_tmp))
    token = "sgatk" + secrets.token_hex(5)
    secret = "SGSECRET" + secrets.token_hex(8)
    hidden_seed = 900_000_000 + secrets.randbelow(99_999_999)
    markers = tmp_path / "markers"
    markers.mkdir()
    canary = tmp_path / "canary" / "canary.txt"
    canary.parent.mkdir()
    canary.write_text(f"{secret}-canary: the contents of a private file\n")
    private = tmp_path / "private" / "private.yaml"
    private.parent.mkdir()
    private.write_text(f"# {secret}-private: hidden sizes of the TA\nseed: {hidden_seed}\n"
                       f"parts:\n  part1_naive:\n    hidden_sizes: {HIDDEN_SIZES}\n")
    classmate = tmp_path / "classmate" / "part1_naive.cu"
    classmate.parent.mkdir()
    classmate.write_text(f"// {secret}-classmate: another student's work\n" + (SOLUTIONS / "part1_naive.cu").read_text())
    results = tmp_path / "out" / "alice" / "result.json"
    results.parent.mkdir(parents=True)
    results.write_text(json.dumps({"schema": "scangrade.result", "note": f"{secret}-result"}) + "\n")
    yield Scene(tmp_path, token, secret, hidden_seed, markers, canary, private, classmate, results)
    for pid, _ in _processes([token, str(tmp_path)]):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def config(scene: Scene, *, part_s: float = PART_S, case_s: float = CASE_S, private: bool = False,
           sizes: dict[str, list[int]] | None = None) -> Config:
    """The tiny test config: Part 1 at n = 1, 5, 17, 32 (int32, BLOCK_SIZE 32), short timeouts
    (``part_s`` and ``case_s`` on an idle machine, scaled to this one's pace: :mod:`tests.pace`)."""
    folder = scene.tmp / f"config-{secrets.token_hex(3)}"
    folder.mkdir()
    cfg = load_config(write_config(folder, block_size=32, part_s=round(seconds(part_s), 1),
                                   sizes=sizes or {"part1_naive": PART1_SIZES},
                                   extra=f"  case_s: {round(seconds(case_s), 1)}\nemulator:\n  workers: 1\n"))
    return load_private(cfg, scene.private) if private else cfg


def attack_source(name: str, scene: Scene, **subs: str) -> str:
    """The attack's text with this scene's token, marker path and ``subs`` (``TARGET=...``) written in."""
    text = (ATTACKS / f"{name}.cu").read_text()
    subs = {"TOKEN": scene.token, "MARKER": str(scene.markers / name), **subs}
    for key, value in subs.items():
        text = text.replace(f"@@{key}@@", value)
    assert "@@" not in text, f"{name}.cu: a placeholder was not substituted"
    return text


def submission(scene: Scene, name: str, *, part: str = "part1_naive", honest: tuple[str, ...] = (),
               **subs: str) -> Path:
    """A submission folder holding the attack as ``part``'s file and reference solutions for ``honest``."""
    folder = scene.tmp / f"submission-{name}-{secrets.token_hex(3)}"
    folder.mkdir()
    (folder / f"{part}.cu").write_text(attack_source(name, scene, **subs))
    for key in honest:
        shutil.copy(SOLUTIONS / f"{key}.cu", folder / f"{key}.cu")
    return folder


@dataclasses.dataclass
class Graded:
    """A grading run: the result, its JSON and text report, and its wall time (seconds)."""

    result: SubmissionResult
    json: str
    report: str
    wall_s: float

    def part(self, key: str = "part1_naive"):
        return next(p for p in self.result.parts if p.key == key)

    def statuses(self, key: str = "part1_naive") -> list[str]:
        return [c.status for c in self.part(key).cases]

    def why(self, key: str = "part1_naive") -> str:
        p = self.part(key)
        return (f"{key}: {p.status}: {p.message[:1500]!r}; cases: "
                f"{[(c.name, c.status, c.message[:300]) for c in p.cases]}; sandbox: {self.result.device.get('sandbox')}")


def run(scene: Scene, folder: Path, cfg: Config, *, parts: list[str] | None = None, nvcc: bool = True,
        checks: bool = False, selection: Selection = EMULATOR) -> Graded:
    """Grade ``folder`` with the runner (each part in its own worker, as always)."""
    t0 = time.monotonic()
    result = grade(folder, cfg=cfg, selection=selection, parts=parts or ["part1_naive"], checks=checks,
                   env=None if nvcc else without_nvcc())
    wall = time.monotonic() - t0
    if selection.name == "emulator":
        assert result.device.get("nvcc check") == ("on" if nvcc and HAVE_NVCC else "off"), result.device
    return Graded(result, result.to_json(), render_text(result), wall)


def int32_words(text: str) -> set[int]:
    """Every 4-byte window of ``text`` as a little-endian int32 (how a kernel copying it into an int32
    output would show it as a mismatch's "got")."""
    data = text.encode()
    return {struct.unpack("<i", data[i:i + 4])[0] for i in range(len(data) - 3)}


def assert_no_leak(scene: Scene, *texts: str, graded: Graded | None = None, also: tuple[str, ...] = ()) -> None:
    """The secret (and ``also``) appear in none of ``texts`` nor in ``graded``'s JSON, report and mismatches."""
    haystacks = list(texts) + ([graded.json, graded.report] if graded else [])
    for needle in (scene.secret, *also):
        for n, text in enumerate(haystacks):
            assert needle not in text, f"{needle!r} leaked into output #{n}: ...{text[max(0, text.find(needle) - 300):text.find(needle) + 200]}..."
    if graded:
        words = scene.secret_words()
        for p in graded.result.parts:
            for c in p.cases:
                if c.mismatch is not None:
                    assert c.mismatch.got not in words, f"{c.name}: the output holds bytes of the secret ({c.mismatch})"


def assert_untouched(scene: Scene, before: dict) -> None:
    """No watched file changed, no file appeared beside one, no marker was made, no process was left."""
    after = scene.snapshot()
    changed = [k for k in before if before[k] != after.get(k)]
    assert not changed, f"changed by the attack: {changed}"
    assert not list(scene.markers.iterdir()), f"marker files made: {list(scene.markers.iterdir())}"
    left = scene.leftovers()
    assert not left, f"processes left behind: {left}"


def no_case_passed(g: Graded, key: str = "part1_naive") -> None:
    p = g.part(key)
    assert p.status != "pass" and not any(s == "pass" for s in g.statuses(key)), g.why(key)


@contextlib.contextmanager
def address_space_cap(limit: int):
    """Cap RLIMIT_AS (soft) of this process, and so of the workers it starts, for the block's duration."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY and soft <= limit:
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# -- #include ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["include_absolute", "include_parent", "include_private_config"])
def test_an_include_of_a_private_file_is_refused_and_nothing_of_it_reaches_the_result(scene, backend, name):
    before = scene.snapshot()
    line = 1 + next(i for i, text in enumerate((ATTACKS / f"{name}.cu").read_text().splitlines())
                    if text.startswith("#include"))
    target = scene.private if name == "include_private_config" else scene.canary
    folder = submission(scene, name, TARGET=str(target))
    g = run(scene, folder, config(scene, private=True), selection=backend)
    p = g.part()
    assert p.status == "compile-error", g.why()
    assert p.message.startswith(f"part1_naive.cu:{line}: `#include") and "is not allowed" in p.message, p.message
    assert set(g.statuses()) == {"not-run"}
    assert_no_leak(scene, graded=g)
    assert str(scene.hidden_seed) not in g.report
    assert_untouched(scene, before)


# -- .incbin -----------------------------------------------------------------------------------------------

@SANDBOXED
@pytest.mark.parametrize("name", ["incbin_stderr", "incbin_output"])
def test_an_incbin_of_a_private_file_does_not_compile_and_its_bytes_reach_nothing(scene, name):
    before = scene.snapshot()
    folder = submission(scene, name, TARGET=str(scene.canary))
    g = run(scene, folder, config(scene))
    assert g.part().status == "compile-error", g.why()
    assert_no_leak(scene, graded=g)
    assert_untouched(scene, before)


@SANDBOXED
def test_the_cli_end_to_end_leaks_no_incbin_bytes_to_stdout_stderr_or_any_report(scene):
    before = scene.snapshot()
    folder = submission(scene, "incbin_stderr", TARGET=str(scene.canary))
    cfg = config(scene)
    outputs = {f.flag: scene.tmp / f"cli.{f.name}" for f in FORMATS.values() if f.flag}  # every report option
    cmd = [sys.executable, "-m", "grader", "grade", str(folder / "part1_naive.cu"), "--config", cfg.path,
           "--private-config", str(scene.private), "--backend", "emulator"]
    for flag, path in outputs.items():
        cmd += [flag, str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds(120), cwd=scene.tmp, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "compile-error" in proc.stdout and proc.stderr == "", (proc.stdout, proc.stderr)
    saved = json.loads(outputs["--json"].read_text())
    assert saved["parts"][0]["status"] == "compile-error"
    assert_no_leak(scene, proc.stdout, proc.stderr, *(p.read_text() for p in outputs.values()))
    assert str(scene.hidden_seed) not in proc.stdout
    assert_untouched(scene, before)


# -- system, fork, execve, popen ------------------------------------------------------------------------------

@SANDBOXED
@pytest.mark.parametrize("name", ["system_host", "fork_host", "execve_host", "popen_host"])
def test_a_static_constructor_cannot_run_a_program_or_leave_a_process(scene, name):
    before = scene.snapshot()
    g = run(scene, submission(scene, name), config(scene))
    no_case_passed(g)
    assert set(g.statuses()) <= STOPPED, g.why()
    assert_no_leak(scene, graded=g, also=("root:x:0:0",))
    assert_untouched(scene, before)


@SANDBOXED
@pytest.mark.parametrize("nvcc", NVCC)
@pytest.mark.parametrize("name", ["system_kernel", "fork_kernel", "execve_kernel", "popen_kernel"])
def test_a_kernel_cannot_run_a_program_or_leave_a_process(scene, name, nvcc):
    before = scene.snapshot()
    g = run(scene, submission(scene, name), config(scene), nvcc=nvcc)
    if nvcc:  # nvcc -ptx refuses a kernel that calls a host function
        assert g.part().status == "compile-error" and "nvcc" in g.part().message, g.why()
    else:
        no_case_passed(g)
        assert set(g.statuses()) <= STOPPED, g.why()
    assert_untouched(scene, before)


@SANDBOXED
def test_a_kernel_that_hides_system_from_nvcc_is_stopped_by_the_sandbox(scene):
    before = scene.snapshot()
    g = run(scene, submission(scene, "system_kernel_hidden"), config(scene))
    assert g.part().status != "compile-error", g.why()  # the #ifdef got it past the nvcc check
    no_case_passed(g)
    assert set(g.statuses()) <= STOPPED, g.why()
    assert_untouched(scene, before)


def test_a_static_constructor_that_exits_is_graded_with_a_message_not_a_grader_traceback(scene):
    before = scene.snapshot()
    g = run(scene, submission(scene, "exit_host"), config(scene))
    no_case_passed(g)
    assert set(g.statuses()) <= STOPPED, g.why()
    assert "Traceback" not in g.json and "status 3" in g.part().message, g.why()
    assert_untouched(scene, before)


# -- files ---------------------------------------------------------------------------------------------------

#: target name -> (the scene's path, whether the attack also tries to write it, a line it must not leak)
_TARGETS = {
    "private-config": (lambda s: s.private, True, None),
    "etc-passwd": (lambda s: Path("/etc/passwd"), False, "root:x:0:0"),
    "classmate": (lambda s: s.classmate, True, None),
    "reference-solution": (lambda s: SOLUTIONS / "part1_naive.cu", False,
                           (SOLUTIONS / "part1_naive.cu").read_text().splitlines()[0]),
    "output-folder": (lambda s: s.results, True, None),
}


@SANDBOXED
@pytest.mark.parametrize("target", list(_TARGETS))
def test_a_static_constructor_can_neither_read_nor_change_files_outside_the_submission(scene, target):
    path, write, line = _TARGETS[target]
    before = scene.snapshot()
    folder = submission(scene, "read_file_host", TARGET=str(path(scene)), WRITE="1" if write else "0")
    g = run(scene, folder, config(scene, private=True))
    # the attack exits with a status (not graded as passed) only when it could read the file
    assert g.part().status == "pass", g.why()
    assert_no_leak(scene, graded=g, also=tuple(x for x in (line,) if x))
    assert str(scene.hidden_seed) not in g.report
    assert_untouched(scene, before)


@SANDBOXED
@pytest.mark.parametrize("nvcc", NVCC)
def test_a_kernel_cannot_read_the_private_config(scene, nvcc):
    before = scene.snapshot()
    folder = submission(scene, "read_file_kernel", TARGET=str(scene.private))
    g = run(scene, folder, config(scene, private=True), nvcc=nvcc)
    if nvcc:
        assert g.part().status == "compile-error" and "nvcc" in g.part().message, g.why()
    else:  # the kernel copies what it read into the output, so only a kernel that read nothing passes
        assert g.part().status == "pass", g.why()
    assert_no_leak(scene, graded=g)
    assert_untouched(scene, before)


@SANDBOXED
def test_the_private_config_cannot_be_found_through_the_grader_processes(scene):
    before = scene.snapshot()
    g = run(scene, submission(scene, "discover_private_config"), config(scene, private=True))
    assert g.part().status == "pass", g.why()  # it exits with a status only when it found the file
    hidden = [c for c in g.part().cases if c.visibility == "hidden"]
    assert [c.n for c in hidden] == HIDDEN_SIZES and all(c.seed == scene.hidden_seed for c in hidden)
    assert_no_leak(scene, graded=g)
    assert str(scene.hidden_seed) not in g.report
    assert_untouched(scene, before)


@SANDBOXED
def test_the_cli_end_to_end_leaks_no_private_config_found_through_the_processes(scene):
    before = scene.snapshot()
    folder = submission(scene, "discover_private_config")
    cfg = config(scene)
    out = scene.tmp / "cli.json"
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(folder), "--config", cfg.path,
                           "--private-config", str(scene.private), "--backend", "emulator", "--json", str(out)],
                          capture_output=True, text=True, timeout=seconds(120), cwd=scene.tmp, check=False)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert json.loads(out.read_text())["passed"] is True
    assert_no_leak(scene, proc.stdout, proc.stderr, out.read_text())
    assert str(scene.hidden_seed) not in proc.stdout
    assert_untouched(scene, before)


# -- sockets ---------------------------------------------------------------------------------------------------

@SANDBOXED
def test_a_static_constructor_cannot_connect_to_a_server_on_this_machine(scene):
    before = scene.snapshot()
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        folder = submission(scene, "socket_connect", IP="127, 0, 0, 1", PORT=str(port))
        g = run(scene, folder, config(scene))
        server.settimeout(0.5)
        try:
            conn, peer = server.accept()
        except TimeoutError:
            conn = None
        if conn is not None:
            data = conn.recv(100)
            conn.close()
            pytest.fail(f"the attack connected to the test's server from {peer} and sent {data!r}")
    statuses = set(g.statuses())
    assert statuses == {"pass"} or statuses <= STOPPED, g.why()
    assert "connected" not in g.json
    assert_untouched(scene, before)


@SANDBOXED
def test_a_static_constructor_cannot_connect_to_an_outside_address(scene):
    before = scene.snapshot()
    folder = submission(scene, "socket_connect", IP="1, 1, 1, 1", PORT="80")
    g = run(scene, folder, config(scene))
    statuses = set(g.statuses())
    assert statuses == {"pass"} or statuses <= STOPPED, g.why()
    assert f"{scene.token} connected" not in g.json and "connected" not in g.report, g.why()
    assert_untouched(scene, before)


# -- hangs -----------------------------------------------------------------------------------------------------

def test_a_static_constructor_that_never_returns_is_a_timeout_within_the_part_timeout(scene):
    before = scene.snapshot()
    cfg = config(scene, part_s=5, case_s=3)
    g = run(scene, submission(scene, "hang_host"), cfg)
    p = g.part()
    assert p.status == "timeout" and "timeouts." in p.message, g.why()
    assert g.wall_s < cfg.timeouts.part_s + seconds(SLACK_S), g.wall_s
    assert_untouched(scene, before)


def test_a_kernel_that_never_returns_is_a_timeout_within_the_case_timeout(scene):
    before = scene.snapshot()
    cfg = config(scene, part_s=7, case_s=3)
    g = run(scene, submission(scene, "hang_kernel"), cfg)
    p = g.part()
    assert p.status == "timeout" and "timeouts.case_s" in p.message, g.why()
    # each hung case costs itself only: the next one runs in a new worker, until part_s runs out
    assert g.statuses()[:2] == ["timeout", "timeout"] and set(g.statuses()) <= {"timeout", "not-run"}, g.why()
    assert g.wall_s < cfg.timeouts.part_s + seconds(SLACK_S), g.wall_s
    assert_untouched(scene, before)


# -- memory ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["alloc_host", "alloc_kernel"])
def test_allocating_100_gib_is_an_error_and_the_grader_goes_on(scene, name):
    before = scene.snapshot()
    folder = submission(scene, name, honest=("part2_blelloch",))
    cfg = config(scene, sizes={"part1_naive": PART1_SIZES, "part2_blelloch": [5]})
    with address_space_cap(ALLOC_BACKSTOP):
        g = run(scene, folder, cfg, parts=["part1_naive", "part2_blelloch"])
    no_case_passed(g)
    # a kernel's null pointer (its malloc refused) is a fault of the kernel: its case fails (grader/core/kinds.py)
    assert set(g.statuses()) <= STOPPED | {"fail"}, g.why()
    assert g.part("part2_blelloch").status == "pass", g.why("part2_blelloch")
    assert g.wall_s < 2 * cfg.timeouts.part_s, g.wall_s
    assert_untouched(scene, before)


# -- output floods --------------------------------------------------------------------------------------------

class _OutputWatch:
    """Largest size seen of the files behind fds 1 and 2 of the processes of this test (the worker's
    stdout.txt / stderr.txt, an executor's stderr file), sampled every 20 ms while grading."""

    def __init__(self, scene: Scene) -> None:
        self.needles, self.largest, self.where = [str(scene.tmp)], 0, ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            for pid, text in _processes(self.needles):
                for fd in (1, 2):
                    with contextlib.suppress(OSError):
                        st = os.stat(f"/proc/{pid}/fd/{fd}")
                        if st.st_size > self.largest:
                            self.largest, self.where = st.st_size, f"fd {fd} of {text[:120]}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def test_a_device_printf_flood_is_capped_and_the_report_stays_small(scene):
    g = run(scene, submission(scene, "printf_flood_kernel"), config(scene))
    assert g.part().status == "pass", g.why()
    assert len(g.json) < 64 * 1024 and len(g.report) < 8 * 1024, (len(g.json), len(g.report))
    assert g.wall_s < seconds(30), g.wall_s


def test_a_host_output_flood_is_stopped_by_the_file_size_limit_and_the_report_stays_small(scene):
    cfg = config(scene)
    with _OutputWatch(scene) as watch:
        g = run(scene, submission(scene, "output_flood_host"), cfg)
    assert watch.largest <= 65 * 2**20, f"{watch.largest / 2**20:.0f} MiB written to {watch.where}"
    p = g.part()  # stopped at the file-size limit, or its output thrown away and the part passed
    assert p.status == "pass" or "limit" in p.message, g.why()
    assert len(g.json) < 64 * 1024 and len(g.report) < 16 * 1024, (len(g.json), len(g.report))
    assert g.wall_s < cfg.timeouts.part_s + seconds(SLACK_S), g.wall_s
    assert not scene.leftovers()


# -- compile bombs ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["template_bomb", "macro_bomb"])
def test_a_compile_bomb_is_a_compile_error_or_a_timeout_within_the_part_timeout(scene, name):
    cfg = config(scene, part_s=4)
    g = run(scene, submission(scene, name), cfg)
    p = g.part()
    assert p.status in ("compile-error", "timeout"), g.why()
    if p.status == "timeout":
        assert "during compiling" in p.message, g.why()
    assert g.wall_s < cfg.timeouts.part_s + seconds(SLACK_S), g.wall_s
    assert len(g.json) < 64 * 1024, len(g.json)
    assert not scene.leftovers(), "compiler processes left behind"


def test_a_flood_of_compile_errors_is_capped_in_the_result_and_the_report(scene):
    cfg = config(scene)
    g = run(scene, submission(scene, "compile_error_flood"), cfg)
    p = g.part()
    assert p.status == "compile-error" and "part1_naive.cu:" in p.message, g.why()
    assert "sg_undeclared_function" in p.message  # the first error is still there
    assert len(p.message) < 64 * 1024 and len(g.report) < 64 * 1024, (len(p.message), len(g.report))
    assert g.wall_s < cfg.timeouts.part_s + seconds(SLACK_S), g.wall_s



@pytest.mark.parametrize("nvcc", NVCC)
def test_a_compiler_printing_without_end_is_stopped_at_the_output_cap(scene, nvcc):
    # About 4 GB of diagnostics: without the cap the compile runs until the part's timeout (and an
    # unsandboxed worker reads gigabytes); with it, the compiler is stopped after OUTPUT_BYTES.
    g = run(scene, submission(scene, "compile_diagnostics_flood"), config(scene, part_s=60), nvcc=nvcc)
    p = g.part()
    assert p.status == "compile-error", g.why()
    first = p.message.split("\n", 1)[0]
    assert "was stopped there" in first and "KiB of diagnostics" in first, first
    assert "sg_diagnostics_flood" in p.message  # the first error is kept
    assert len(p.message) < 64 * 1024 and len(g.report) < 64 * 1024, (len(p.message), len(g.report))
    assert not scene.leftovers(), "compiler processes left behind"

# -- cheats ----------------------------------------------------------------------------------------------------

def test_a_kernel_that_knows_only_the_public_sizes_fails_the_hidden_ones_and_they_stay_hidden(scene):
    sizes = [3, 45]
    private = scene.tmp / "private-part2.yaml"
    private.write_text(f"seed: {scene.hidden_seed}\nparts:\n  part2_blelloch:\n    hidden_sizes: [11, 50]\n")
    cfg = load_private(config(scene, sizes={"part2_blelloch": sizes}), private)
    folder = submission(scene, "sizes_detect", part="part2_blelloch", SIZES=", ".join(map(str, sizes)))
    g = run(scene, folder, cfg, parts=["part2_blelloch"])
    p = g.part("part2_blelloch")
    visible = [c for c in p.cases if c.visibility == "visible"]
    hidden = [c for c in p.cases if c.visibility == "hidden"]
    assert [c.n for c in visible] == [1, 3, 45, 64] and all(c.status == "pass" for c in visible), g.why("part2_blelloch")
    assert [(c.n, c.status) for c in hidden] == [(11, "fail"), (50, "fail")], g.why("part2_blelloch")
    assert p.status == "fail" and p.points == 4
    # what students see (every student-facing format) names the hidden cases and their status, never n or the seed
    tests = render.gradescope(g.result)["tests"]
    shown = [json.dumps(x) for x in tests if "hidden" in x.get("name", "")]
    assert len(shown) == 1 and all('"status": "failed"' in x for x in shown), tests  # one test: the hidden cases
    assert shown[0].count(": failed") == 2, shown
    for text in (*shown, *(f.render(g.result, cfg) for f in FORMATS.values() if f.student_facing)):
        assert not re.search(r"\b(11|50)\b", text), text
        assert str(scene.hidden_seed) not in text


def test_a_kernel_that_skips_work_on_a_repeated_launch_computes_every_graded_run(scene):
    """It skips when launched again with the n of its last launch, kept in a __device__ variable. Every
    run of a case (each of the checks' thread orders, and the graded run) starts with fresh
    __device__ variables (docs/security.md), so no graded run skips: it earns only outputs it
    computed, with or without checks (a GPU's timed repetitions, which share their variables, fail it
    when timed)."""
    folder = submission(scene, "early_return_same_n")
    plain = run(scene, folder, config(scene))
    assert plain.part().status == "pass", plain.why()
    assert plain.part().performance is None and not plain.result.timed
    checked = run(scene, folder, config(scene), checks=True)
    assert set(checked.statuses()) == {"pass"}, checked.why()
    assert not any("poison" in c.message for c in checked.part().cases), checked.why()


# -- a class with attackers -----------------------------------------------------------------------------------

#: Honest Part 1 files of the batch, 8 copies each: correct, and broken on purpose.
_HONEST = [SOLUTIONS / "part1_naive.cu", BROKEN / "part1_correct_single_buffer.cu", BROKEN / "part1_missing_sync.cu",
           BROKEN / "part1_oob_write.cu", TEMPLATES / "part1_naive.cu"]


def _class(scene: Scene, root: Path, *, attackers: bool, port: int) -> None:
    for i in range(40):
        (root / f"h{i:02d}").mkdir(parents=True)
        shutil.copy(_HONEST[i % len(_HONEST)], root / f"h{i:02d}" / "part1_naive.cu")
    if not attackers:
        return
    classmate = root / "h00" / "part1_naive.cu"
    out_file = scene.tmp / "batch-out" / "h01" / "result.json"
    attacks = [("system_host", {}), ("fork_host", {}), ("popen_host", {}),
               ("read_file_host", {"TARGET": str(scene.private), "WRITE": "1"}),
               ("read_file_host", {"TARGET": str(classmate), "WRITE": "1"}),
               ("read_file_host", {"TARGET": str(out_file), "WRITE": "1"}),
               ("discover_private_config", {}), ("socket_connect", {"IP": "127, 0, 0, 1", "PORT": str(port)}),
               ("incbin_stderr", {"TARGET": str(scene.canary)}), ("printf_flood_kernel", {})]
    for i, (name, subs) in enumerate(attacks):
        (root / f"x{i}").mkdir()
        (root / f"x{i}" / "part1_naive.cu").write_text(attack_source(name, scene, **subs))
    # the classmate's file carries the secret, so reading it shows
    classmate.write_text(f"// {scene.secret}-classmate\n" + classmate.read_text())


@SANDBOXED
def test_a_class_with_ten_attackers_grades_the_forty_honest_submissions_as_without_them(scene, monkeypatch):
    monkeypatch.setenv("PATH", without_nvcc()["PATH"])  # the nvcc cross-check off: half the compile time
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        root_all, root_honest = scene.tmp / "class", scene.tmp / "class-honest"
        _class(scene, root_all, attackers=True, port=port)
        _class(scene, root_honest, attackers=False, port=port)
        (root_honest / "h00" / "part1_naive.cu").write_text((root_all / "h00" / "part1_naive.cu").read_text())
        files = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in root_all.rglob("*.cu") if p.parent.name[0] == "h"}
        before = scene.snapshot()
        cfg = config(scene, private=True, sizes={"part1_naive": [5]})
        t0 = time.monotonic()
        rows = batch(root_all, out=scene.tmp / "batch-out", cfg=cfg, selection=EMULATOR,
                     reports=student_reports, jobs=2, checks=False)
        t_all = time.monotonic() - t0
        batch(root_honest, out=scene.tmp / "batch-honest", cfg=cfg, selection=EMULATOR,
              reports=student_reports, jobs=2, checks=False)
        t_honest = time.monotonic() - t0 - t_all
        server.settimeout(0.2)
        with pytest.raises((TimeoutError, socket.timeout)):
            server.accept()
    print(f"batch of 50 (10 attacks): {t_all:.1f} s; batch of the 40 honest: {t_honest:.1f} s")
    assert len(rows) == 50
    assert {r.device.get("nvcc check") for _, r in rows} == {"off"}

    def book(folder: Path) -> dict[str, dict]:
        return {r["student"]: r for r in csv.DictReader((folder / "gradebook.csv").open())}

    def cases(folder: Path, sid: str) -> list:
        data = json.loads((folder / sid / "result.json").read_text())
        return [(c["name"], c["status"], c["points"], c["message"]) for p in data["parts"] for c in p["cases"]]

    everyone, honest = book(scene.tmp / "batch-out"), book(scene.tmp / "batch-honest")
    assert sorted(honest) == [f"h{i:02d}" for i in range(40)]
    for sid in honest:
        assert everyone[sid] == honest[sid], sid
        assert cases(scene.tmp / "batch-out", sid) == cases(scene.tmp / "batch-honest", sid), sid
    assert honest["h00"]["total"] == honest["h00"]["max"] and honest["h04"]["total"] == "0"  # reference, template
    # the attackers that run programs are stopped; those that read files find nothing, and pass
    status = {name: everyone[f"x{i}"]["status"] for i, name in enumerate(
        ["system", "fork", "popen", "private", "classmate", "output", "discover", "socket", "incbin", "printf"])}
    assert [status[k] for k in ("system", "fork", "popen", "incbin")] == ["fail"] * 4, status
    assert [status[k] for k in ("private", "classmate", "output", "discover", "printf")] == ["pass"] * 5, status
    for path in (scene.tmp / "batch-out").rglob("*"):  # nothing read, nothing written by an attacker
        assert scene.token not in path.name, path
        if path.is_file():
            assert scene.secret not in path.read_text(errors="replace"), path
            assert scene.token not in path.read_text(errors="replace"), path
            if path.name == "report.txt":
                assert str(scene.hidden_seed) not in path.read_text(), path
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in files} == files
    assert_untouched(scene, before)


# -- on a GPU --------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@GPU
def test_gpu_a_kernel_that_never_returns_is_killed_at_the_case_timeout_and_the_next_part_passes(scene):
    folder = submission(scene, "hang_kernel", honest=("part2_blelloch",))
    cfg = config(scene, part_s=12, case_s=5, sizes={"part1_naive": PART1_SIZES, "part2_blelloch": [5]})
    g = run(scene, folder, cfg, parts=["part1_naive", "part2_blelloch"], selection=PYCUDA)
    p = g.part()
    assert p.status == "timeout" and "timeouts.case_s" in p.message, g.why()
    assert g.part("part2_blelloch").status == "pass", g.why("part2_blelloch")
    assert g.part().phases_s["total"] < cfg.timeouts.part_s + 2 * seconds(SLACK_S)  # every case hangs: part_s ends it
    assert not scene.leftovers()


@pytest.mark.gpu
@GPU
def test_gpu_a_far_out_of_bounds_write_changes_no_other_case_or_part(scene):
    folder = submission(scene, "oob_write_far", honest=("part2_blelloch",))
    cfg = config(scene, sizes={"part1_naive": PART1_SIZES, "part2_blelloch": [5, 33]})
    g = run(scene, folder, cfg, parts=["part1_naive", "part2_blelloch"], selection=PYCUDA)
    reference = run(scene, SOLUTIONS, cfg, parts=["part1_naive", "part2_blelloch"], selection=PYCUDA)
    # Where the wild writes land is up to the driver: unmapped memory (an illegal address: the
    # cases error) or memory the context mapped outside every buffer and guard zone (undetectable,
    # and harmless: the cases are graded on their outputs; measured on an H100, they pass). Either
    # way no other case or part may change.
    assert all(c.status in ("pass", "error", "crash") for c in g.part().cases), g.why()
    assert g.part("part2_blelloch").status == "pass", g.why("part2_blelloch")
    assert [(c.name, c.status) for c in g.part("part2_blelloch").cases] == \
        [(c.name, c.status) for c in reference.part("part2_blelloch").cases]


@pytest.mark.gpu
@GPU
def test_gpu_a_kernel_that_skips_repeated_launches_fails_when_timed(scene):
    folder = submission(scene, "early_return_same_n")
    (scene.tmp / "timed").mkdir()
    path = write_config(scene.tmp / "timed", block_size=32, sizes={"part1_naive": [5]},
                        extra="timing:\n  warmup: 2\n  runs: 5\n")
    path.write_text(path.read_text() + "    timing:\n      sizes: [32]\n      points: 2\n")
    g = run(scene, folder, load_config(path), selection=PYCUDA)
    timed = [c for c in g.part().cases if c.name.startswith("timed")]
    assert timed and timed[0].status == "fail" and "poison" in timed[0].message, g.why()
    assert g.part().status == "fail" and g.part().performance.points == 0


@pytest.mark.gpu
@GPU
def test_gpu_a_kernel_allocating_100_gib_is_an_error_and_the_next_part_passes(scene):
    folder = submission(scene, "alloc_kernel", honest=("part2_blelloch",))
    cfg = config(scene, sizes={"part1_naive": PART1_SIZES, "part2_blelloch": [5]})
    g = run(scene, folder, cfg, parts=["part1_naive", "part2_blelloch"], selection=PYCUDA)
    no_case_passed(g)
    assert g.part("part2_blelloch").status == "pass", g.why("part2_blelloch")
