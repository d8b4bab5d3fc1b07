"""A GPU worker compiles its cubins ahead: nvcc starts with the worker, beside the CUDA context's
start, and the worker's compile waits for the cubin (grader.grading.worker.ahead.cubins_ahead,
grader.backends.pycuda.compile.compile_ahead).

No GPU is needed: nvcc compiles for a named architecture (the device's is read by
``device_arch``, replaced here); the tests skip where nvcc is not installed.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader.backends import backend_kind
from grader.assignment.config import load_config
from grader.core.errors import BackendUnavailable, CompileError
from grader.assignment.parts import PARTS, SOLUTIONS, part_source

from tests.conftest import ROOT

CONFIG = ROOT / "config.yaml"

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

BROKEN_PART1 = "__global__ void scan_naive(const scan_t* in, scan_t* out, int n) { out[0] = in[0] }\n"


@pytest.fixture
def sm90(monkeypatch, tmp_path):
    """nvcc targets sm_90 (no device is read); the compile cache is a fresh folder."""
    from grader.backends.pycuda import compile as pycuda_compile
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(pycuda_compile, "device_arch", lambda device=0: "sm_90")
    return pycuda_compile


def _job(tmp_path: Path, part: str, text: str, **extra) -> SimpleNamespace:
    path = tmp_path / PARTS[part].filename
    path.write_text(text)
    return SimpleNamespace(**{"source": str(path), "earlier_failed": False, "compile_only": False, **extra})


def test_the_cubins_compiled_ahead_are_the_compiles_own_and_a_broken_file_raises_its_compile_error(sm90, tmp_path):
    from grader.backends.emulator.build import EmulatorToolchain
    from grader.toolchain.sandbox import Sandbox

    cfg = load_config(CONFIG)
    part = PARTS["part1_naive"]
    good = part_source(part, (SOLUTIONS / part.filename).read_text(), pc=cfg.parts[part.key], dtype="int32")
    bad = part_source(part, BROKEN_PART1, pc=cfg.parts[part.key], dtype="int32")
    futures = sm90.compile_ahead([("good", good, part.filename), ("bad", bad, part.filename)])
    cubin = futures["good"].result(timeout=300)
    assert cubin[:4] == b"\x7fELF"
    with pytest.raises(CompileError, match="part1_naive.cu does not compile with nvcc"):
        futures["bad"].result(timeout=300)
    # the worker's own compile of the same text finds the cubin ahead's compile kept
    again = sm90.compile_cubin(good, filename=part.filename, workdir=tmp_path, arch="sm_90",
                               toolchain=EmulatorToolchain(sandbox=Sandbox("auto")))
    assert again == cubin and not (tmp_path / part.filename).exists()  # from the cache: nothing written


def test_a_device_that_cannot_be_read_leaves_the_compile_to_the_worker(monkeypatch, tmp_path):
    from grader.backends.pycuda import compile as pycuda_compile

    def unreadable(device=0):
        raise BackendUnavailable("cannot read CUDA device 0: no device")
    monkeypatch.setattr(pycuda_compile, "device_arch", unreadable)
    futures = pycuda_compile.compile_ahead([("a", "int x;\n", "part1_naive.cu")])
    with pytest.raises(BackendUnavailable, match="cannot read CUDA device 0"):
        futures["a"].result(timeout=60)


def test_a_timed_gpu_part_compiles_its_files_and_the_reference_it_is_timed_against_ahead(sm90, tmp_path):
    from grader.grading.worker.ahead import cubins_ahead

    cfg = load_config(CONFIG)
    part = PARTS["part4_any_size"]
    pc = cfg.parts[part.key]
    text = (SOLUTIONS / part.filename).read_text()
    ahead = cubins_ahead(backend_kind("pycuda"), _job(tmp_path, part.key, text), cfg, part)
    reference = PARTS[pc.timing.reference]
    assert set(ahead) == {("submission", part.key, d) for d in pc.dtypes} | {("reference", reference.key,
                                                                                pc.dtypes[0])}
    for (tag, key, dtype), (whole, future) in ahead.items():
        spec = PARTS[key]
        source = text if tag == "submission" else (SOLUTIONS / spec.filename).read_text()
        assert whole == part_source(spec, source, pc=cfg.parts.get(key, pc), dtype=dtype)
        assert future.result(timeout=300)[:4] == b"\x7fELF"
    # not timed after an earlier case failed, nor in a job that only compiles (grade's compile_first):
    # no reference; nothing ahead on the emulator, or for a file whose #include is refused (the
    # worker's own compile says why)
    for untimed_job in (_job(tmp_path, part.key, text, earlier_failed=True),
                        _job(tmp_path, part.key, text, compile_only=True)):
        untimed = cubins_ahead(backend_kind("pycuda"), untimed_job, cfg, part)
        assert set(untimed) == {("submission", part.key, d) for d in pc.dtypes}
        for _, future in untimed.values():
            future.result(timeout=300)
    assert cubins_ahead(backend_kind("emulator"), _job(tmp_path, part.key, text), cfg, part) == {}
    refused = _job(tmp_path, part.key, '#include "/etc/passwd"\n' + text)
    assert cubins_ahead(backend_kind("pycuda"), refused, cfg, part) == {}
