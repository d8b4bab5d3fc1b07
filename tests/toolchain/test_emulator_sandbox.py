"""The emulator's sandbox, tested directly on the backend: the executor process, bubblewrap, the
seccomp filter, resource limits and the shared device memory.

Each test compiles a tiny module whose kernel (or static constructor, which runs when the module is
loaded) tries something a submission must not do, and checks what it got: its kernel writes the
outcome into device memory. The attack suite (tests/grading/test_attacks.py) covers whole gradings.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import grader.toolchain.sandbox as sandbox_module
from grader.backends.emulator import EmulatorBackend
from grader.backends.emulator.build import EmulatorToolchain
from grader.backends.emulator.executor import Arena
from grader.assignment.config import load_config
from grader.core.errors import BackendUnavailable, CompileError, ConfigError, KernelError
from grader.core.kernels import KernelSpec, Param
from tests.conftest import ROOT

BWRAP, WHY_NOT = sandbox_module.probe_bubblewrap()
needs_bwrap = pytest.mark.skipif(BWRAP is None, reason=f"bubblewrap does not work here: {WHY_NOT}")
_SECCOMP_PROBLEM = EmulatorToolchain().executor_binary()[1]
needs_seccomp = pytest.mark.skipif(_SECCOMP_PROBLEM is not None, reason=f"no seccomp filter: {_SECCOMP_PROBLEM}")
KERNELS = (KernelSpec("k", (Param("out", "int*", "ptr"), Param("n", "int", "int"))),)
HEADER = '#define scan_t int\nextern "C" __global__ void k(int* out, int n);\n'


@pytest.fixture(scope="module")
def be() -> EmulatorBackend:
    backend = EmulatorBackend(workers=2, nvcc_check=False)
    yield backend
    backend.close()


def build(backend: EmulatorBackend, workdir: Path, body: str):
    return backend.compile(source=HEADER + body, filename="attempt.cu", kernels=KERNELS, workdir=workdir)


def run(backend: EmulatorBackend, module, n: int = 1, count: int = 8) -> list[int]:
    out = backend.alloc(count, np.int32)
    backend.to_device(np.zeros(count, np.int32), out)
    backend.launch(module, "k", grid=1, block=1, shared_bytes=0, args=[out, n])
    return backend.to_host(out).tolist()


def canary(tmp_path: Path) -> tuple[Path, str]:
    token = secrets.token_hex(8)
    path = tmp_path / "canary.txt"
    path.write_text(token)
    return path, token


# A static constructor reads a file (at dlopen, before any kernel) and the kernel reports
# out[0] = 1 when the file opened, 2 when it did not, and out[1] = the first 4 bytes it read.
READ_IN_CONSTRUCTOR = r"""
#include <stdio.h>
#include <string.h>
static int opened = 0, head = 0;
static int probe = [] {
    FILE* f = fopen("@@PATH@@", "r");
    opened = f ? 1 : 2;
    if (f) { fread(&head, 1, 4, f); fclose(f); }
    return 0;
}();
__global__ void k(int* out, int n) { out[0] = opened; out[1] = head; }
"""


@needs_bwrap
@pytest.mark.parametrize("target", ["canary", "private config"])
def test_a_static_constructor_cannot_read_files_outside_the_sandbox(be, tmp_path, target) -> None:
    path = canary(tmp_path)[0] if target == "canary" else ROOT / "config.yaml"
    module = build(be, tmp_path / "build", READ_IN_CONSTRUCTOR.replace("@@PATH@@", str(path)))
    assert run(be, module)[:2] == [2, 0]


def test_without_bubblewrap_the_same_read_succeeds_so_the_probe_matters(be, tmp_path, monkeypatch) -> None:
    """The control for the test above: the kernel's report is real (and the fallback is weaker)."""
    monkeypatch.setattr(sandbox_module, "probe_bubblewrap", lambda: (None, "bubblewrap not found: test"))
    plain = EmulatorBackend(workers=1, nvcc_check=False)
    path, token = canary(tmp_path)
    try:
        module = build(plain, tmp_path / "build", READ_IN_CONSTRUCTOR.replace("@@PATH@@", str(path)))
        opened, head = run(plain, module)[:2]
    finally:
        plain.close()
    assert opened == 1 and np.int32(head).tobytes() == token[:4].encode()


@needs_bwrap
def test_files_cannot_be_written_even_in_the_scratch_folder(be, tmp_path) -> None:
    target = tmp_path / "build" / "written.txt"
    body = f"""
#include <stdio.h>
static int wrote = [] {{ FILE* f = fopen("{target}", "w"); return f ? 1 : 2; }}();
__global__ void k(int* out, int n) {{ out[0] = wrote; }}
"""
    module = build(be, tmp_path / "build", body)
    assert run(be, module)[0] == 2
    assert not target.exists()


def test_the_executor_does_not_inherit_the_graders_environment(be, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SCANGRADE_TEST_SECRET", "s3cret")
    body = """
#include <stdlib.h>
static int seen = getenv("SCANGRADE_TEST_SECRET") ? 1 : 2;
__global__ void k(int* out, int n) { out[0] = seen; }
"""
    fresh = EmulatorBackend(workers=1, nvcc_check=False)  # starts its executors with this environment
    try:
        assert run(fresh, build(fresh, tmp_path / "build", body))[0] == 2
    finally:
        fresh.close()


FORK_IN_KERNEL = """
#include <unistd.h>
__global__ void k(int* out, int n) { if (n == 1) out[0] = (int)fork(); else out[0] = 42; }
"""


@needs_seccomp
@pytest.mark.parametrize("bubblewrap", [pytest.param(True, marks=needs_bwrap), False], ids=["bwrap", "no-bwrap"])
def test_fork_is_a_sandbox_violation_and_the_next_launch_gets_a_new_executor(tmp_path, monkeypatch,
                                                                             bubblewrap) -> None:
    if not bubblewrap:
        monkeypatch.setattr(sandbox_module, "probe_bubblewrap", lambda: (None, "bubblewrap not found: test"))
    backend = EmulatorBackend(workers=1, nvcc_check=False)
    try:
        module = build(backend, tmp_path / "build", FORK_IN_KERNEL)
        first = module.pid
        with pytest.raises(KernelError, match=r"system call clone\(\).*sandbox does not allow") as info:
            run(backend, module, n=1)
        assert info.value.kind == "sandbox-violation"
        assert run(backend, module, n=2)[0] == 42
        assert module.pid != first
    finally:
        backend.close()


def test_an_executor_killed_during_a_launch_is_a_crash_and_the_module_keeps_working(be, tmp_path, pace) -> None:
    body = """
__global__ void k(int* out, int n) {
    if (n == 1) while (*(volatile int*)out != 12345) {}  // spins until killed
    out[0] = 7;
}
"""
    module = build(be, tmp_path / "build", body)
    pid = module.pid
    killer = threading.Timer(0.5, os.kill, (pid, signal.SIGKILL))
    killer.start()
    t0 = time.monotonic()
    with pytest.raises(KernelError, match=r"killed \(SIGKILL\)") as info:
        run(be, module, n=1)
    killer.join()
    assert info.value.kind == "crash" and time.monotonic() - t0 < pace.seconds(30)
    assert run(be, module, n=2)[0] == 7


def test_close_stops_every_executor(tmp_path) -> None:
    backend = EmulatorBackend(workers=1, nvcc_check=False)
    module = build(backend, tmp_path / "build", "__global__ void k(int* out, int n) { out[0] = n; }")
    pid = module.pid
    os.kill(pid, 0)  # running
    backend.close()
    assert module.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert run(backend, module, n=5)[0] == 5  # a later launch starts a new executor
    backend.close()



def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")


def test_one_executor_at_a_time_so_a_part_holds_one_memory_budget(tmp_path) -> None:
    # A part compiles one module per dtype (and the profile its own): each executor may use
    # MODULE_MEMORY of its own, so two alive at once would double what a submission holds. Here each
    # module's static constructor touches 32 MiB and the kernel says which module it is.
    body = """
#include <stdlib.h>
#include <string.h>
static char* held = [] { char* p = (char*)malloc(32 << 20); memset(p, 1, 32 << 20); return p; }();
__global__ void k(int* out, int n) { out[0] = n + held[12345] * WHICH; }
"""
    backend = EmulatorBackend(workers=1, nvcc_check=False)
    try:
        modules = [build(backend, tmp_path / f"build{which}", f"#define WHICH {which}\n" + body) for which in (1, 2)]
        for round_ in range(2):
            for which, module in enumerate(modules, start=1):
                assert run(backend, module, n=10 * round_)[0] == 10 * round_ + which
                pids = [m.pid for m in modules]
                assert pids[which - 1] is not None and _alive(pids[which - 1])
                other = modules[2 - which]
                assert other.pid is None, f"two executors alive at once: {pids}"
        stopped = modules[1].pid
        assert run(backend, modules[0], n=3)[0] == 4
        assert not _alive(stopped), "the other module's executor still runs"
    finally:
        backend.close()

def test_a_100_gib_allocation_fails_cleanly_inside_the_module(be, tmp_path) -> None:
    body = """
#include <stdlib.h>
__global__ void k(int* out, int n) { void* p = malloc((size_t)n << 30); out[0] = p ? 1 : 2; }
"""
    module = build(be, tmp_path / "build", body)
    assert run(be, module, n=100)[0] == 2
    assert run(be, module, n=0)[0] == 1  # malloc(0) still works: the limit, not a broken heap


def test_a_static_constructor_that_never_returns_is_stopped_at_the_compile_timeout(tmp_path, pace) -> None:
    limit = round(pace.seconds(5))  # the compile must finish within it; the module's load never does
    backend = EmulatorBackend(workers=1, nvcc_check=False, compile_timeout_s=limit)
    body = """
static int never = [] { for (volatile int i = 0;; ++i) {} return 0; }();
__global__ void k(int* out, int n) { out[0] = never; }
"""
    t0 = time.monotonic()
    try:
        with pytest.raises(CompileError, match=rf"loading it failed: loading the module did not finish within {limit:g} s"):
            build(backend, tmp_path / "build", body)
    finally:
        backend.close()
    assert time.monotonic() - t0 < 2 * limit + pace.seconds(20)  # the compile, the load, and stopping it


@needs_bwrap
def test_the_compiler_cannot_embed_a_file_outside_the_sandbox(be, tmp_path) -> None:
    """Two layers: the emulator refuses inline assembly (lockdown.py); and the compiler, run in the
    sandbox as the backend runs it but without that refusal, finds no file outside the sandbox."""
    from grader.toolchain.compiler_process import run_compile
    path, token = canary(tmp_path)
    body = f'__asm__(".section .rodata\\n.incbin \\"{path}\\"\\n.previous");\n' \
           "__global__ void k(int* out, int n) { out[0] = 1; }\n"
    with pytest.raises(CompileError, match=r"not allowed: `__asm__`: inline assembly") as info:
        build(be, tmp_path / "build", body)
    assert token not in str(info.value) + info.value.log
    workdir = tmp_path / "bare"
    workdir.mkdir()
    (workdir / "attempt.cpp").write_text(body.replace("__global__ ", ""))
    tc = be.toolchain
    cmd = tc.sandboxed([*tc.argv, "-c", "attempt.cpp", "-o", "attempt.o"], workdir=workdir, tools=[tc.path])
    with pytest.raises(CompileError) as info:
        run_compile(cmd, filename="attempt.cu", workdir=workdir, timeout_s=60, tool="the C++ compiler", failed="no")
    assert "file not found" in info.value.log and token not in str(info.value) + info.value.log


def test_device_memory_is_shared_and_a_module_cannot_reach_past_what_the_grader_allocated(be, tmp_path) -> None:
    body = """
__global__ void k(int* out, int n) {
    out[0] += 1;                                  // the grader's buffer, at the same address
    if (n == 2) out[(size_t)64 << 20] = 1;        // 256 MiB further: beyond the shared memory's end
}
"""
    module = build(be, tmp_path / "build", body)
    assert run(be, module, n=1)[0] == 1
    with pytest.raises(KernelError, match=r"invalid memory access") as info:
        run(be, module, n=2)
    assert info.value.kind == "illegal-address"


def test_the_arena_reuses_freed_memory_zeroed_and_gives_pages_back() -> None:
    arena = Arena(2**30)
    a = arena.alloc(48 * 2**20)
    b = arena.alloc(100)
    assert a % 256 == 0 and b % 256 == 0 and b >= a + 48 * 2**20 + 256
    assert arena.committed >= 48 * 2**20
    assert arena.live() == [(a, 48 * 2**20), (b, 100)]
    view = np.frombuffer((ctypes.c_char * (48 * 2**20)).from_address(a), dtype=np.uint8)
    view[:] = 0xAB
    arena.release(a)
    assert arena.live() == [(b, 100)] and arena.committed >= 48 * 2**20  # b still holds the top
    c = arena.alloc(5000)
    assert c == a and not view[:5000 + 256].any()  # first fit, and what a left behind is gone
    arena.release(b)
    arena.release(c)
    assert arena.live() == [] and arena.committed == 0
    with pytest.raises(MemoryError, match="device memory is full"):
        arena.alloc(2**30)


@needs_seccomp
def test_describe_names_the_sandbox_and_required_refuses_without_bubblewrap(be, monkeypatch) -> None:
    if BWRAP is not None:
        assert be.describe()["sandbox"] == "bubblewrap + seccomp"
    monkeypatch.setattr(sandbox_module, "probe_bubblewrap",
                        lambda: (None, f"bubblewrap not found: {sandbox_module.INSTALL_HINT}"))
    fallback = EmulatorBackend(workers=1, nvcc_check=False)
    assert fallback.describe()["sandbox"] == ("rlimits + seccomp only (bubblewrap not found: apt install "
                                              "bubblewrap (or your distribution's bubblewrap package))")
    with pytest.raises(BackendUnavailable, match=r"sandbox is required .* apt install bubblewrap"):
        EmulatorBackend(workers=1, nvcc_check=False, sandbox="required")
    assert EmulatorBackend(workers=1, nvcc_check=False, sandbox="off").describe()["sandbox"].startswith("off")


def test_the_config_key_is_validated(tmp_path) -> None:
    text = (ROOT / "config.yaml").read_text()
    assert "\n  # sandbox: auto\n" in text  # unset: each command's own default (grader.grading.runner.grading_sandbox)
    text = text.replace("\n  # sandbox: auto\n", "\n  sandbox: auto\n")
    bad = tmp_path / "config.yaml"
    bad.write_text(text.replace("  sandbox: auto\n", "  sandbox: sometimes\n"))
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    assert info.value.key == "emulator.sandbox" and "auto, required, off" in str(info.value)
    bad.write_text(text.replace("  sandbox: auto\n", "  sandbox: required\n"))
    assert load_config(bad).emulator.sandbox == "required"
