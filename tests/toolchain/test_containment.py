"""Containment (the integrity issue): directives that make a compiler read or name a file, the GPU
path's compile in the sandbox, thread bombs, and signals to other processes through fcntl.

- The directive filter (:func:`grader.source.directives.check_includes`) sees every spelling of a directive the
  preprocessor sees (digraphs, form feeds, comments, splices, trigraphs, literals) and refuses
  ``#line`` with a file name and ``__has_include`` of anything but a standard header.
- The GPU path's nvcc runs in the emulator's sandbox (bubblewrap where it works, resource limits, a
  wall-clock limit, a fresh folder): these tests run the same ``nvcc --cubin -arch sm_90`` command the
  PyCUDA backend runs, without a GPU, on attack sources the filter would refuse (it is bypassed here)
  and check that no secret token of a private file reaches the compile error (and, as the control,
  that it does without bubblewrap), and that ``#include "/dev/zero"`` is stopped.
- Thread bombs (``tests/attacks/thread_bomb_*.cu``) graded in a ``--jobs 2`` batch beside an honest
  submission: stopped at their first thread, the honest grade as alone; the executor's worker
  threads exist from load and launches use them.
- ``fcntl`` signal-driven I/O (``F_SETOWN`` + ``F_SETSIG`` SIGKILL + ``O_ASYNC``) cannot kill another
  process without bubblewrap.
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
from pathlib import Path

import pytest

from grader.source.directives import check_includes
from grader.core.errors import CompileError
from tests.conftest import ATTACKS, BROKEN, EMULATOR_KERNELS, ROOT
from tests.grading import test_attacks
from tests.pace import seconds
from tests.grading.test_attacks import (
    SANDBOXED,
    assert_no_leak,
    assert_untouched,
    attack_source,
    config,
    run,
    submission,
)

#: The attack suite's fixture: canary files with secret tokens, a private config, a marker folder.
scene = test_attacks.scene


# -- the directive filter -----------------------------------------------------------------------------------

@pytest.mark.parametrize("source, line, shown", [
    ('%:include "/etc/hostname"\n', 1, "#include"),                      # digraph
    ('int x;\n#\f include "/etc/hostname"\n', 2, "#include"),            # form feed after the #
    ('#\vinclude "/etc/hostname"\n', 1, "#include"),                     # vertical tab
    ('# /* comment */ include "/etc/hostname"\n', 1, "#include"),
    ('#\\\ninclude "/etc/hostname"\n', 1, "#include"),                   # line splice after the #
    ('#\\   \ninclude "/etc/hostname"\n', 1, "#"),                       # GCC's blank-tolerant splice
    ('#\0include "/etc/hostname"\n', 1, "#include"),                     # NUL is a blank to GCC
    ('??=include "/etc/hostname"\n', 1, "#include"),                     # trigraph #
    ('// a comment ending in a trigraph backslash ??/\n#include "x"\n', 2, "#include"),
    ('#include /* a comment\n over two lines */ "/etc/hostname"\n', 1, "#include"),
    ("int a = 1'2'/*';\n#include \"/etc/hostname\"\n// */\n", 2, "#include"),  # a digit separator, not a char
    ('const char* s = R"(a"/*)";\n#include "/etc/hostname"\n// */\n', 2, "#include"),  # a raw string
    ('x = 1; /*\n*/\n#include "/etc/hostname"\n', 3, "#include"),
    ('#include "/dev/zero"\n', 1, "#include"),
    ('#include <cstdio> "/etc/hostname"\n', 1, "#include"),
    ('#embed "/etc/hostname"\n', 1, "#embed"),
    ('#import "/etc/hostname"\n', 1, "#import"),
    ('int x;\n#line 1 "job.json"\n#error here\n', 2, "#line"),
    ('#line 7 SOME_FILE_NAME\n', 1, "#line"),
    ('# 1 "job.json"\n', 1, "#1"),                                         # a GNU line marker
    ('#ident "x"\n', 1, "#ident"),
    ('#pragma GCC dependency "/etc/hostname"\n', 1, "#pragma"),
    ('#if __has_include("/proc/1/cwd/job.json")\n#endif\n', 1, "__has_include"),
    ('#if __has_include(</proc/1/cwd/job.json>)\n#endif\n', 1, "__has_include"),
    ('#if __has_include_next("/etc/hostname")\n#endif\n', 1, "__has_include_next"),
    ('#define HAS(f) __has_include(f)\n', 1, "__has_include"),
    ('#define HAS __has_include\n', 1, "__has_include"),
    ('#if __has_embed("/etc/hostname")\n#endif\n', 1, "__has_embed"),
    ('#if defined __has_include("/etc/hostname")\n#endif\n', 1, "__has_include"),
    ('_Pragma("GCC dependency \\"/etc/hostname\\"")\n', 1, "_Pragma"),
    ('#define P(x) _Pragma(#x)\n', 1, "_Pragma"),
    ('#if __has_\\u0069nclude("/etc/hostname")\n#endif\n', 1, "__has_include"),   # a universal character name
    ('%:\\u0069nclude "/etc/hostname"\n', 1, "#include"),
    ('#define J(a, b) a##b\n#if J(__has_, include)("/etc/hostname")\n#endif\n', 2, "__has_"),  # pasted
    ('#define J(a, b) a##b\n#define Q(x) J(x, clude)\n#if Q(__has_in)(</etc/hostname>)\n#endif\n', 3, "__has_in"),
    ('#define J(a, b) a##b\nJ(_Pra, gma)("GCC dependency \\"/etc/hostname\\"")\n', 2, "_Pra"),
    ('#define U _\n', 1, "_"),
    ('#define K(a) a##_next\n#if K(__has_include)(<cstdio>)\n#endif\n', 2, "__has_include"),
])
def test_every_spelling_of_a_directive_that_names_a_file_is_refused_with_its_line(source, line, shown):
    assert_refused(check_includes, source, line, shown)


def assert_refused(check, text: str, line: int, shown: str) -> None:
    """``check(text, filename="part1_naive.cu")`` refuses, naming ``line`` and what it refused."""
    with pytest.raises(CompileError) as info:
        check(text, filename="part1_naive.cu")
    assert str(info.value).startswith(f"part1_naive.cu:{line}: `{shown}"), str(info.value)
    assert "is not allowed" in str(info.value)


@pytest.mark.parametrize("source", [
    "#include <cstdio>\n%:include <cuda_runtime.h>\n#pragma once\n#pragma unroll 4\n",
    "#line 40\n#define A(x) (x + 1)\n#undef A\n#\n#error not reached\n",
    "#ifdef __has_include\n#if defined(__has_include) && __has_include(<cstdio>)\n#endif\n#endif\n",
    "x = 1; /*\n*/ #include \"not a directive: the line began before the comment\"\n",
    'const char* s = R"(\n#include "inside a raw string"\n)";\n',
    "int million = 1'000'000;\nconst char* q = \"??= is not a trigraph here\";\n",
    '_Pragma("unroll")\n',
])
def test_honest_directives_and_lookalikes_outside_directives_are_allowed(source):
    check_includes(source, filename="part1_naive.cu")


def test_the_reference_solutions_and_test_kernels_pass_the_filter():
    files = [*(ROOT / "reference").rglob("*.cu"), *BROKEN.rglob("*.cu"),
             *EMULATOR_KERNELS.rglob("*.cu")]
    assert files
    for f in files:
        check_includes(f.read_text(errors="replace"), filename=f.name)


# -- the attacks, through the grader (the filter refuses them before any compiler runs) -----------------------

DIRECTIVE_ATTACKS = {  # attack: the first line the filter must name, found by this text
    "line_private_config": '#line 1 "@@TARGET@@"',
    "has_include_scan": '#if __has_include("@@TARGET@@")',
    "include_spellings": '%:include "@@TARGET@@"',
    "include_dev_zero": '#include "/dev/zero"',
    "has_include_ucn": '#if __has_\\u0069nclude("@@TARGET@@")',
    "has_include_pasted": '#if SG_PASTE(__has_, include)("@@TARGET@@")',
}


def _line_of(name: str, text: str) -> int:
    return 1 + (ATTACKS / f"{name}.cu").read_text().splitlines().index(text)


@pytest.mark.parametrize("name", sorted(DIRECTIVE_ATTACKS))
def test_a_directive_attack_is_a_compile_error_naming_its_line_and_nothing_leaks(scene, name):
    before = scene.snapshot()
    folder = submission(scene, name, TARGET=str(scene.private))
    t0 = time.monotonic()
    g = run(scene, folder, config(scene, private=True))
    p = g.part()
    assert p.status == "compile-error", g.why()
    assert p.message.startswith(f"part1_naive.cu:{_line_of(name, DIRECTIVE_ATTACKS[name])}: `"), p.message
    assert "is not allowed" in p.message and set(g.statuses()) == {"not-run"}
    assert time.monotonic() - t0 < seconds(30)
    assert_no_leak(scene, graded=g)
    assert str(scene.hidden_seed) not in g.report  # (the JSON is the TA's and carries the seed)
    assert_untouched(scene, before)


# -- the GPU path's nvcc in the sandbox (the filter bypassed: what if it missed a spelling?) ------------------

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on the PATH (install the CUDA toolkit)")


def _bwrap_reason() -> str:
    from grader.toolchain.sandbox import probe_bubblewrap
    return probe_bubblewrap()[1]


needs_bwrap = pytest.mark.skipif(bool(_bwrap_reason()), reason=_bwrap_reason() or "bubblewrap works")


def _gpu_compile(source: str, tmp_path: Path, *, policy: str = "auto", timeout_s: float = 60.0) -> CompileError | bytes:
    """Compile a Part 1 file (with the grader's part header) as the PyCUDA backend does, for sm_90;
    returns the cubin or the CompileError."""
    import numpy as np

    from grader.backends.emulator.build import EmulatorToolchain
    from grader.toolchain.sandbox import Sandbox
    from grader.backends.pycuda import compile_cubin
    from grader.assignment.parts import PARTS, part_header

    header = part_header(PARTS["part1_naive"], block_size=32, dtype=np.dtype(np.int32))
    workdir = tmp_path / f"build-{secrets.token_hex(3)}"
    workdir.mkdir()
    toolchain = EmulatorToolchain(sandbox=Sandbox(policy), timeout_s=timeout_s)
    try:
        return compile_cubin(header + source, filename="part1_naive.cu", workdir=workdir, arch="sm_90",
                             toolchain=toolchain)
    except CompileError as exc:
        return exc


@needs_nvcc
def test_the_gpu_compile_builds_an_honest_part_to_a_cubin_without_a_gpu(tmp_path):
    cubin = _gpu_compile((ROOT / "reference" / "solutions" / "part1_naive.cu").read_text(), tmp_path)
    assert isinstance(cubin, bytes) and cubin[:4] == b"\x7fELF", cubin


@needs_nvcc
@needs_bwrap
def test_line_directives_naming_the_private_config_quote_nothing_of_it_from_the_sandboxed_nvcc(scene, tmp_path):
    targets = [str(scene.private), f"/proc/{os.getpid()}/root{scene.private}"]
    for target in targets:
        error = _gpu_compile(attack_source("line_private_config", scene, TARGET=target), tmp_path)
        assert isinstance(error, CompileError), target
        assert "leak of line 1" in str(error), str(error)  # nvcc ran and reached the #error
        assert_no_leak(scene, str(error), error.log, also=(str(scene.hidden_seed),))
    # The same compile without bubblewrap quotes the file: what the sandbox is there to stop.
    error = _gpu_compile(attack_source("line_private_config", scene, TARGET=str(scene.private)), tmp_path, policy="off")
    assert scene.secret in str(error) and str(scene.hidden_seed) in str(error)


@needs_nvcc
@needs_bwrap
def test_has_include_probes_from_the_sandboxed_nvcc_find_no_private_file(scene, tmp_path):
    for target in (str(scene.private), f"/proc/{os.getpid()}/cwd/{os.path.relpath(scene.private)}"):
        error = _gpu_compile(attack_source("has_include_scan", scene, TARGET=target), tmp_path)
        assert isinstance(error, CompileError) and "the private config is absent" in str(error), str(error)
    error = _gpu_compile(attack_source("has_include_scan", scene, TARGET=str(scene.private)), tmp_path, policy="off")
    assert "the private config exists" in str(error)


@needs_nvcc
def test_including_dev_zero_stops_nvcc_at_its_limits_within_seconds(scene, tmp_path):
    t0 = time.monotonic()
    error = _gpu_compile(attack_source("include_dev_zero", scene), tmp_path, timeout_s=40.0)
    wall = time.monotonic() - t0
    assert isinstance(error, CompileError), "an endless include compiled"
    assert wall < 40 + seconds(5), f"nvcc ran {wall:.0f} s"  # its limit, and the time to stop it
    assert "limit" in str(error) or "did not finish" in str(error), str(error)


# -- what nvcc's second stage reads: the first stage's output, judged ------------------------------------------

@pytest.mark.parametrize("output, line, shown", [
    ('# 1 "part1_naive.cu"\nint x;\n # include "/etc/hostname"\n', 2, "# include"),    # `#define H #`, `H include`
    ('# 1 "part1_naive.cu"\n\n\n %: include "/etc/hostname"\n', 3, "%: include"),        # a digraph
    ('# 7 "part1_naive.cu"\n # 1 "/etc/hostname"\n', 7, "# 1"),                             # a made line marker
    ('# 1 "part1_naive.cu"\n\\\n # include "/etc/hostname"\n', 2, "# include"),          # a made splice before it
    ('# 1 "part1_naive.cu"\n\xa0# include "/etc/hostname"\n', 1, "\xa0 # include"),      # a Unicode blank before it
    ('# 1 "part1_naive.cu"\n??=include "/etc/hostname"\n', 1, "# include"),                 # a trigraph
    ('# 1 "part1_naive.cu"\n_Pragma("GCC dependency \\"/etc/hostname\\"")\n', 1, "_Pragma"),
    ('# 1 "part1_naive.cu"\nint b = __has_include("/etc/hostname");\n', 1, "__has_include"),
    ('# 1 "part1_naive.cu"\n#pragma GCC dependency "/etc/hostname"\n', 1, "#pragma"),
])
def test_a_directive_a_macro_made_is_refused_in_nvccs_first_stage_output(output, line, shown):
    from grader.source.directives import check_preprocessed
    assert_refused(check_preprocessed, output, line, shown)


def test_the_first_stages_own_lines_and_raw_strings_are_allowed_in_its_output():
    from grader.source.directives import check_preprocessed
    check_preprocessed('# 0 "<built-in>"\n# 1 "/usr/include/stdio.h" 1 3 4\nint printf(const char*, ...);\n'
                       '#pragma GCC diagnostic push\n# 5 "part1_naive.cu" 2\n#pragma unroll 4\n'
                       'const char* s = R"(\n#include "inside a raw string"\n)";\nint a = 1 ## 2;\n',
                       filename="part1_naive.cu")


@needs_nvcc
def test_a_macro_made_include_is_refused_before_nvcc_reads_it_again_even_without_bubblewrap(scene, tmp_path):
    """`#define H #` then `H include "<private config>"`: cicc quoted the whole file without bubblewrap."""
    line = _line_of("hash_macro_include", 'SG_HASH include "@@TARGET@@"')
    for policy in ("off", "auto"):
        error = _gpu_compile(attack_source("hash_macro_include", scene, TARGET=str(scene.private)), tmp_path,
                             policy=policy)
        assert isinstance(error, CompileError), policy
        assert str(error).startswith(f"part1_naive.cu:{line}: `# include"), str(error)
        assert "a macro made this a directive" in str(error)
        assert_no_leak(scene, str(error), error.log, also=(str(scene.hidden_seed),))


@needs_nvcc
def test_a_macro_made_include_is_refused_before_the_emulators_nvcc_cross_check(scene, tmp_path):
    """The emulator compiles the file as written with `nvcc -ptx` first (the rewrite refuses the `__shared__`
    initializer): without bubblewrap, nvcc's error carried the private config."""
    from grader.backends.emulator import EmulatorBackend
    from grader.assignment.parts import PARTS, part_header
    import numpy as np

    line = _line_of("hash_macro_include", 'SG_HASH include "@@TARGET@@"')
    source = part_header(PARTS["part1_naive"], block_size=32, dtype=np.dtype(np.int32)) + attack_source(
        "hash_macro_include", scene, TARGET=str(scene.private))
    be = EmulatorBackend(workers=1, nvcc_check=True, sandbox="off")
    try:
        with pytest.raises(CompileError) as info:
            be.compile(source=source, filename="part1_naive.cu", kernels=PARTS["part1_naive"].kernels,
                       workdir=tmp_path / "emulated")
    finally:
        be.close()
    assert str(info.value).startswith(f"part1_naive.cu:{line}: `# include"), str(info.value)
    assert_no_leak(scene, str(info.value), info.value.log, also=(str(scene.hidden_seed),))


@needs_nvcc
def test_the_macro_made_include_through_the_grader_names_its_line_and_leaks_nothing(scene):
    before = scene.snapshot()
    g = run(scene, submission(scene, "hash_macro_include", TARGET=str(scene.private)), config(scene, private=True))
    p = g.part()
    assert p.status == "compile-error", g.why()
    line = _line_of("hash_macro_include", 'SG_HASH include "@@TARGET@@"')
    assert p.message.startswith(f"part1_naive.cu:{line}: `# include"), p.message
    assert_no_leak(scene, graded=g)
    assert_untouched(scene, before)


# -- thread bombs -----------------------------------------------------------------------------------------------

@SANDBOXED
def test_thread_bombs_are_stopped_at_the_first_thread_and_a_classmate_in_the_batch_is_graded_as_alone(scene):
    import csv
    import json

    from grader.classwork.batch import batch
    from grader.render.formats import student_reports
    from tests.grading.test_attacks import EMULATOR, SOLUTIONS

    before = scene.snapshot()
    root, alone = scene.tmp / "class", scene.tmp / "class-alone"
    for folder in (root / "z_honest", alone / "z_honest"):  # graded last: next to a bomb all along
        folder.mkdir(parents=True)
        shutil.copy(SOLUTIONS / "part1_naive.cu", folder / "part1_naive.cu")
    for name in ("thread_bomb_host", "thread_bomb_kernel"):
        (root / name).mkdir()
        (root / name / "part1_naive.cu").write_text(attack_source(name, scene))
    cfg = config(scene, sizes={"part1_naive": [5]})
    t0 = time.monotonic()
    batch(root, out=scene.tmp / "out", cfg=cfg, selection=EMULATOR, reports=student_reports, jobs=2)
    wall = time.monotonic() - t0
    batch(alone, out=scene.tmp / "out-alone", cfg=cfg, selection=EMULATOR, reports=student_reports, jobs=2)

    def row(out: str, sid: str) -> tuple[dict, list]:
        book = {r["student"]: r for r in csv.DictReader((scene.tmp / out / "gradebook.csv").open())}
        data = json.loads((scene.tmp / out / sid / "result.json").read_text())
        cases = [(c["name"], c["status"], c["points"], c["message"]) for p in data["parts"] for c in p["cases"]]
        return book[sid], cases, data

    honest, honest_cases, _ = row("out", "z_honest")
    assert (honest, honest_cases) == row("out-alone", "z_honest")[:2]
    assert honest["total"] == honest["max"], honest
    for name, call in (("thread_bomb_host", "pthread_create() (thread creation"),
                       ("thread_bomb_kernel", "the system call clone() (thread or process creation")):
        r, cases, data = row("out", name)
        assert r["status"] == "fail", (name, r)
        part = data["parts"][0]
        # stopped at once: no case ran to its deadline, and the part ended within half its part_s (scaled to
        # this machine's pace, tests/pace.py), which a bomb left to run would reach
        assert part["status"] != "timeout" and "timeout" not in {c["status"] for c in part["cases"]}, part
        assert part["phases_s"]["total"] < cfg.timeouts.part_s / 2, part
        text = json.dumps(data)
        assert f"the module made {call}" in text, (name, text[:3000])
    assert wall < 2 * cfg.timeouts.part_s + seconds(30), f"the batch took {wall:.0f} s"
    assert_untouched(scene, before)  # no thread (named with the token) or process left


def test_a_launch_runs_on_the_executors_own_threads_and_no_more(tmp_path, monkeypatch):
    """The executor makes ``workers`` threads before the filter; launches spread their blocks over
    them (no new thread per launch: the filter would refuse it)."""
    import numpy as np

    import grader.toolchain.sandbox as sandbox_module
    from grader.backends.emulator import EmulatorBackend
    from tests.toolchain.test_emulator_sandbox import HEADER, KERNELS, needs_seccomp

    if needs_seccomp.args[0]:
        pytest.skip(needs_seccomp.kwargs["reason"])
    # Without bubblewrap the executor is the process the grader started, so its threads can be counted.
    monkeypatch.setattr(sandbox_module, "probe_bubblewrap", lambda: (None, "bubblewrap not found: test"))
    body = """
#include <unistd.h>
__global__ void k(int* out, int n) { if (threadIdx.x == 0) { usleep(20000); out[blockIdx.x] = (int)gettid(); } }
"""
    backend = EmulatorBackend(workers=3, nvcc_check=False)
    try:
        module = backend.compile(source=HEADER + body, filename="attempt.cu", kernels=KERNELS, workdir=tmp_path)
        out = backend.alloc(16, np.int32)
        seen = set()
        for _ in range(3):  # three launches: the same threads each time
            backend.to_device(np.zeros(16, np.int32), out)
            backend.launch(module, "k", grid=16, block=32, shared_bytes=0, args=[out, 16])
            seen |= set(backend.to_host(out).tolist())
        tasks = os.listdir(f"/proc/{module.pid}/task")
    finally:
        backend.close()
    assert 0 not in seen
    assert 2 <= len(seen) <= 3, seen       # blocks ran on the pool's threads, and only on those
    assert len(tasks) == 3, tasks          # the executor's own thread and two workers, started at load


# -- signals to other processes without kill(): fcntl F_SETOWN + F_SETSIG + O_ASYNC -------------------------------

def test_fcntl_signal_driven_io_cannot_kill_another_process_without_bubblewrap(scene, monkeypatch):
    import subprocess

    import numpy as np

    import grader.toolchain.sandbox as sandbox_module
    from grader.backends.emulator import EmulatorBackend
    from grader.core.errors import KernelError
    from grader.assignment.parts import PARTS, part_header
    from tests.toolchain.test_emulator_sandbox import needs_seccomp

    if needs_seccomp.args[0]:
        pytest.skip(needs_seccomp.kwargs["reason"])
    # The fallback without bubblewrap: the executor shares the grader's pid namespace (seccomp only).
    monkeypatch.setattr(sandbox_module, "probe_bubblewrap", lambda: (None, "bubblewrap not found: test"))
    victim = subprocess.Popen(["sleep", "60"])  # stands for a classmate's worker
    backend = EmulatorBackend(workers=1, nvcc_check=False)
    part = PARTS["part1_naive"]
    source = part_header(part, block_size=32, dtype=np.dtype(np.int32)) + attack_source(
        "fcntl_signal_owner", scene, VICTIM=str(victim.pid))
    outcome = "loaded"
    try:
        try:
            module = backend.compile(source=source, filename="part1_naive.cu", kernels=part.kernels,
                                     workdir=scene.tmp)
            data, out = backend.alloc(4, np.int32), backend.alloc(4, np.int32)
            backend.to_device(np.arange(4, dtype=np.int32), data)
            for _ in range(2):  # each request on the socket is I/O that would signal the owner
                backend.launch(module, "naive_scan", grid=1, block=32, shared_bytes=0, args=[data, out, 4])
        except (CompileError, KernelError) as exc:
            outcome = str(exc)
        time.sleep(0.3)
        alive = victim.poll() is None
    finally:
        backend.close()
        victim.kill()
        victim.wait()
    assert alive, f"the module killed another process ({outcome})"
    assert "loading it failed" in outcome and "system call fcntl()" in outcome, outcome
