"""Checks where the run happened (issue 31): on a backend whose memory is a device's, a large int32
run is verified there (Backend.scan_check, Backend.digest) and read back whole only to say what is
wrong, with the same verdict and message as a run read back whole.

Runs on the CPU: the host definitions of both checks (which the PyCUDA backend's kernels must match:
test_the_gpu_kernels_compute_what_the_host_definitions_do checks them on a GPU), and check_run and the timed runs on the emulator behind a
stand-in "GPU" named pycuda, with DEVICE_CHECK_MIN lowered so that n = 1024 counts as large."""

from __future__ import annotations

import numpy as np
import pytest

from grader.assignment import plans
from grader.assignment.config import load_config
from grader.assignment.parts import PARTS, SOLUTIONS
from grader.assignment.plans import POISON_BITS, Run, prepare
from grader.backends.emulator import EmulatorBackend
from grader.grading.case import checks
from grader.grading.case.checks import check_run
from grader.grading.case.inputs import make_input, reference_output
from grader.grading.compile import compile_part
from reference.scan import exclusive_scan, inclusive_scan
from tests.conftest import ROOT, gpu_available
from tests.grading.test_timed_runs import ATTACKS, StandInTimer, timed

PART = PARTS["part3_conflict_free"]


@pytest.fixture(scope="module")
def emulator():
    backend = EmulatorBackend(workers=1, checks=False)
    yield backend
    backend.close()


def _device(backend, values: np.ndarray):
    d = backend.alloc(values.size, values.dtype)
    backend.to_device(values, d)
    return d


@pytest.mark.parametrize("inclusive", [False, True])
def test_scan_check_finds_the_first_wrong_element_in_wrap_around_arithmetic(emulator, inclusive):
    rng = np.random.default_rng(5)
    x = rng.integers(-2 ** 31, 2 ** 31, 5000, dtype=np.int64).astype(np.int32)  # sums wrap many times
    good = (inclusive_scan if inclusive else exclusive_scan)(x)
    assert emulator.scan_check(_device(emulator, good), _device(emulator, x), inclusive=inclusive) == -1
    for k in (0, 1, 2500, 4999):
        bad = good.copy()
        bad[k:] += np.int32(1)  # everything from k on off by one: only k breaks the relation
        assert emulator.scan_check(_device(emulator, bad), _device(emulator, x), inclusive=inclusive) == k
    other = (exclusive_scan if inclusive else inclusive_scan)(x)  # the other kind of scan
    assert emulator.scan_check(_device(emulator, other), _device(emulator, x), inclusive=inclusive) == 0


@pytest.mark.parametrize("inclusive", [False, True])
def test_scan_check_of_float32_is_exact_where_the_sums_are(emulator, inclusive):
    """float32 multiples of 0.25 (every sum exact): one ulp off anywhere is found, even where the
    wrong value minus the one before rounds, in float32, to the input (the sum is taken in float64)."""
    rng = np.random.default_rng(6)
    x = (rng.integers(-16, 17, 4000) * 0.25).astype(np.float32)
    good = (inclusive_scan if inclusive else exclusive_scan)(x).astype(np.float32)
    assert emulator.scan_check(_device(emulator, good), _device(emulator, x), inclusive=inclusive) == -1
    small = int(np.flatnonzero((np.abs(good) > 0) & (np.abs(good) < 2))[5])
    for k in (small, 3999):
        bad = good.copy()
        bad[k] = np.nextafter(bad[k], np.float32(np.inf))
        assert emulator.scan_check(_device(emulator, bad), _device(emulator, x), inclusive=inclusive) == k
    bad = good.copy()
    bad[17] = np.nan
    assert emulator.scan_check(_device(emulator, bad), _device(emulator, x), inclusive=inclusive) == 17


def test_digest_tells_one_changed_bit_and_depends_on_the_salt(emulator):
    x = np.arange(4096, dtype=np.int32)
    d = _device(emulator, x)
    first = emulator.digest(d, 12345)
    assert emulator.digest(d, 12345) == first and emulator.digest(d, 54321) != first
    y = x.copy()
    y[4000] ^= 1 << 7
    assert emulator.digest(_device(emulator, y), 12345) != first
    swapped = x.copy()
    swapped[[3, 9]] = swapped[[9, 3]]  # the same words elsewhere
    assert emulator.digest(_device(emulator, swapped), 12345) != first


@pytest.fixture
def on_device(monkeypatch):
    """Every buffer of 1 element or more counts as large: the device path runs at n = 1024."""
    monkeypatch.setattr(plans, "DEVICE_CHECK_MIN", 1)
    monkeypatch.setattr(checks, "DEVICE_CHECK_MIN", 1)


class CountingTimer(StandInTimer):
    """The stand-in GPU, counting its calls of the device checks."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.calls = {"scan_check": 0, "digest": 0}

    def scan_check(self, *args, **kwargs):
        self.calls["scan_check"] += 1
        return self._emulator.scan_check(*args, **kwargs)

    def digest(self, *args, **kwargs):
        self.calls["digest"] += 1
        return self._emulator.digest(*args, **kwargs)


@pytest.fixture(scope="module")
def cfg():
    return load_config(ROOT / "config.yaml").override(timing={"warmup": 2, "runs": 4})


def _ran(cfg, timer, tmp_path):
    """The reference Part 3 run once at n = 1024 int32 on ``timer``: (run, plan, d_in, x)."""
    pc = cfg.parts[PART.key]
    module = compile_part(timer, PART, (SOLUTIONS / PART.filename).read_text(), pc=pc, dtype="int32",
                          workdir=tmp_path / "m")
    x = make_input(cfg, PART, 1024, 7, np.dtype(np.int32))
    run = Run(timer, module, np.dtype(np.int32))
    d_in = run.buffer("in", x.size, x, output=False)
    plan = prepare(run, PART, pc, d_in, x.size)
    plan.run()
    return run, plan, d_in, x


def _verdict(cfg, run, plan, d_in, x):
    return check_run(run, plan, d_in, x, reference_output(PART, x), part=PART, pc=cfg.parts[PART.key], cfg=cfg)


def test_a_right_run_is_verified_on_the_device_without_reading_it_back(cfg, tmp_path, on_device):
    timer = CountingTimer()
    try:
        run, plan, d_in, x = _ran(cfg, timer, tmp_path)
        assert d_in.digest is not None
        reads = []
        timer.to_host = lambda src: reads.append(src.count) or timer._emulator.to_host(src)
        verdict = _verdict(cfg, run, plan, d_in, x)
        assert verdict.status == "pass" and timer.calls["scan_check"] == 1
        assert reads and max(reads) == plans.GUARD  # the guard zones only
    finally:
        timer.close()


@pytest.mark.parametrize("harm, kind, words", [
    ("out", "mismatch", "out[700] = "),
    ("in", "input-modified", "the input was modified: in[3]"),
    ("guard", "out-of-bounds", "out[1024] (1 past the end of out"),
])
def test_a_wrong_run_gets_the_same_finding_as_one_read_back_whole(cfg, tmp_path, on_device, monkeypatch, harm, kind,
                                                                  words):
    """A wrong output, a modified input or a written guard word: the device path fails over to reading
    every buffer back, which names it as on every backend."""
    verdicts = []
    for device in (True, False):
        if not device:
            monkeypatch.setattr(plans, "DEVICE_CHECK_MIN", 1 << 40)
        timer = CountingTimer()
        try:
            run, plan, d_in, x = _ran(cfg, timer, tmp_path / str(device))
            if harm == "out":
                timer.to_device(np.array([12345], np.int32), plan.out.inner.view(700, 1))
            elif harm == "in":
                timer.to_device(np.array([x[3] + 1], np.int32), d_in.inner.view(3, 1))
            else:
                timer.to_device(np.array([0], np.int32), plan.out.full.view(plans.GUARD + 1024, 1))
            verdicts.append(_verdict(cfg, run, plan, d_in, x))
            assert (timer.calls["digest"] > 0) is device
        finally:
            timer.close()
    assert verdicts[0] == verdicts[1]
    assert [f.kind for f in verdicts[0].findings][:1] == [kind] and words in verdicts[0].message


def test_timed_runs_checked_on_the_device_pass_the_reference_and_catch_skipped_launches(cfg, tmp_path, on_device):
    """The spot checks after runs drawn at random check the whole output on the device: the reference
    passes, and a kernel that computes in its first launch only fails at a checked run, naming the
    poison."""
    timer = CountingTimer()
    result = timed(cfg, (SOLUTIONS / PART.filename).read_text(), timer, tmp_path / "ref")
    assert result.status == "pass", result.message
    assert timer.calls["scan_check"] >= 1 + 3  # the checked runs and the last
    timer = CountingTimer()
    result = timed(cfg, (ATTACKS / "timed_launch_counting.cu").read_text(), timer, tmp_path / "attack",
                   reference=False)
    assert result.status == "fail" and result.kind == "wrong-after-timing", result.message
    assert "the launch wrote nothing there" in result.message and timer.calls["scan_check"] >= 1


def test_the_emulator_memset_fills_in_place(emulator):
    d = emulator.alloc(1000, np.float32)
    emulator.memset32(d.view(10, 500), POISON_BITS)
    got = emulator.to_host(d).view(np.uint32)
    assert (got[10:510] == POISON_BITS).all() and not (got[:10] == POISON_BITS).any()
    assert not (got[510:] == POISON_BITS).any()


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available()[0], reason=f"no usable CUDA GPU: {gpu_available()[1]}")
def test_the_gpu_kernels_compute_what_the_host_definitions_do():
    """PyCudaBackend's PTX kernels against Backend's host definitions, on wrapping int32 sums with
    wrong elements planted, at a size of many grid strides."""
    from grader.backends.base import Backend
    from grader.backends.pycuda import PyCudaBackend
    gpu = PyCudaBackend()
    try:
        rng = np.random.default_rng(11)
        x = rng.integers(-2 ** 31, 2 ** 31, (1 << 22) + 3, dtype=np.int64).astype(np.int32)
        d_x = _device(gpu, x)
        for inclusive in (False, True):
            good = (inclusive_scan if inclusive else exclusive_scan)(x)
            assert gpu.scan_check(_device(gpu, good), d_x, inclusive=inclusive) == -1
            for ks in ([0], [x.size - 1], [123457, 3000000]):
                bad = good.copy()
                bad[ks] ^= 1
                d_bad = _device(gpu, bad)
                assert gpu.scan_check(d_bad, d_x, inclusive=inclusive) == min(ks)
                assert Backend.scan_check(gpu, d_bad, d_x, inclusive=inclusive) == min(ks)
        f = (rng.integers(-16, 17, (1 << 22) + 3) * 0.25).astype(np.float32)
        d_f = _device(gpu, f)
        for inclusive in (False, True):
            good = (inclusive_scan if inclusive else exclusive_scan)(f).astype(np.float32)
            assert gpu.scan_check(_device(gpu, good), d_f, inclusive=inclusive) == -1
            small = int(np.flatnonzero((np.abs(good) > 0) & (np.abs(good) < 2))[0])
            for k in (small, 3000000, f.size - 1):
                bad = good.copy()
                bad[k] = np.nextafter(bad[k], np.float32(np.inf))
                assert gpu.scan_check(_device(gpu, bad), d_f, inclusive=inclusive) == k
                assert Backend.scan_check(gpu, _device(gpu, bad), d_f, inclusive=inclusive) == k
        salt = 0xDEADBEEF12345678
        assert gpu.digest(d_x, salt) == Backend.digest(gpu, d_x, salt)
        y = x.copy()
        y[-1] ^= 1
        assert gpu.digest(_device(gpu, y), salt) != gpu.digest(d_x, salt)
    finally:
        gpu.close()


@pytest.mark.parametrize("ptx", [name for name in __import__("grader.backends.pycuda.ptx", fromlist=["__all__"]).__all__
                                 if name.endswith("_PTX")])
def test_the_grader_kernels_assemble(tmp_path, ptx):
    """The grader's own PTX (loaded by the driver on a GPU, never by this suite) assembles: ptxas
    for the course's GPU, where the CUDA toolkit is installed."""
    import shutil
    import subprocess

    from grader.backends.pycuda import ptx as pycuda_ptx

    ptxas = shutil.which("ptxas")
    if ptxas is None:
        pytest.skip("no ptxas (the CUDA toolkit) on PATH")
    source = tmp_path / f"{ptx}.ptx"
    source.write_text(getattr(pycuda_ptx, ptx))
    done = subprocess.run([ptxas, "-arch=sm_90", str(source), "-o", str(tmp_path / f"{ptx}.cubin")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
