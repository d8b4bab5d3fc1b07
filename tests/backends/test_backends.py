"""Backend selection and the launch validation both backends share."""

import pytest

from grader.backends import BACKENDS, ENV_VAR, expected_backend, select_backend
from grader.backends.base import Dim3, validate_launch
from grader.core.errors import BackendUnavailable, LaunchError, UsageError
from tests.conftest import ROOT, gpu_available


def test_the_option_beats_the_environment_which_beats_the_config():
    s = select_backend("emulator", config_value="pycuda", env={ENV_VAR: "pycuda"})
    assert (s.name, s.reason) == ("emulator", "--backend option")
    s = select_backend(None, config_value="pycuda", env={ENV_VAR: "emulator"})
    assert (s.name, s.reason) == ("emulator", f"{ENV_VAR} environment variable")
    s = select_backend("auto", config_value="emulator", env={})
    assert (s.name, s.reason) == ("emulator", "config key 'backend'")


def test_auto_says_why_it_chose():
    s = select_backend(None, env={})
    ok, why = gpu_available()
    assert s.name == ("pycuda" if ok else "emulator")
    assert s.reason.startswith("auto:") and why in s.reason


def test_the_expected_backend_is_found_without_a_probe_and_is_the_one_chosen(monkeypatch):
    """What a grading starts before the probe (the checks' runtime) is for the backend chosen: the
    same order of sources, a named backend taken as named, auto reading each row's hint."""
    import grader.backends as backends

    for option, config, env in (("emulator", "pycuda", {ENV_VAR: "pycuda"}), (None, "pycuda", {ENV_VAR: "emulator"}),
                                ("auto", "emulator", {}), (None, "auto", {})):
        assert expected_backend(option, config_value=config, env=env) == select_backend(option, config_value=config,
                                                                                       env=env).name
    with_probe = [k.name for k in BACKENDS.values() if k.probe is not None]
    assert with_probe and all(BACKENDS[name].hint is not None for name in with_probe)
    monkeypatch.setattr(backends, "probe_pycuda", lambda: pytest.fail("expected_backend probed"))
    monkeypatch.setattr(backends, "hint_pycuda", lambda: False)
    assert expected_backend("pycuda", env={}) == "pycuda"
    assert expected_backend(None, config_value="pycuda", env={}) == "pycuda"
    assert expected_backend(None, env={}) == "emulator"
    monkeypatch.setattr(backends, "hint_pycuda", lambda: True)
    assert expected_backend(None, env={}) == "pycuda"
    assert expected_backend(None, env={ENV_VAR: "emulator"}) == "emulator"
    with pytest.raises(UsageError, match=f"'opencl' from the {ENV_VAR} environment variable"):
        expected_backend(None, env={ENV_VAR: "opencl"})


def test_an_unknown_backend_names_its_source():
    with pytest.raises(UsageError, match=f"'opencl' from the {ENV_VAR} environment variable"):
        select_backend(None, env={ENV_VAR: "opencl"})


@pytest.mark.skipif(gpu_available()[0], reason="this machine has a GPU")
def test_asking_for_pycuda_without_a_gpu_explains_and_points_to_the_emulator():
    with pytest.raises(BackendUnavailable, match="--backend emulator"):
        select_backend("pycuda", env={})


def test_every_backend_of_the_table_is_offered_everywhere_and_made_by_its_row():
    from grader.backends import BACKENDS, CHOICES, FALLBACK, create_backend
    from grader.assignment.config import BACKEND_CHOICES
    assert CHOICES == BACKEND_CHOICES == ("auto", *BACKENDS) and FALLBACK in BACKENDS
    backend = create_backend(FALLBACK, emulator_workers=1)
    try:
        assert backend.name == FALLBACK
    finally:
        backend.close()


def test_no_module_outside_the_backends_compares_a_backend_name():
    """Decisions read a backend's traits (grader.backends.BACKENDS), so adding a backend is a row."""
    import re
    from pathlib import Path
    from grader.backends import BACKENDS
    root = ROOT / "grader"
    names = "|".join(map(re.escape, BACKENDS))
    compare = re.compile(rf"""[=!]=\s*["']({names})["']|["']({names})["']\s*[=!]=|\bin\s*\(\s*["']({names})["']""")
    found = [f"{f.relative_to(root)}:{i}: {line.strip()}" for f in root.rglob("*.py") if "backends" not in f.parts
             for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if compare.search(line)]
    assert not found, found


@pytest.mark.parametrize("grid, block, shared, words", [
    (1, 1025, 0, "block.x = 1025 exceeds the limit 1024"),
    (1, (32, 32, 2), 0, "2048 threads per block"),
    (1, (1, 1, 65), 0, "block.z = 65 exceeds the limit 64"),
    ((1, 65536), 32, 0, "grid.y = 65536 exceeds the limit 65535"),
    (0, 32, 0, "grid.x must be at least 1"),
    (1, 32, 48 * 1024 + 1, "49153 bytes of dynamic shared memory exceeds the limit of 49152"),
    (1, "32", 0, "block must be an int or a tuple of up to 3 ints (got '32')"),
    ((1, 2, 3, 4), 32, 0, "grid must be an int or a tuple of up to 3 ints"),
])
def test_bad_launches_are_refused_with_the_limit(grid, block, shared, words):
    with pytest.raises(LaunchError) as info:
        validate_launch(kernel="k", grid=grid, block=block, shared_bytes=shared)
    assert str(info.value).startswith("launch of k: ") and words in str(info.value)


def test_a_good_launch_is_normalised_to_dim3():
    assert validate_launch(kernel="k", grid=(4, 2), block=256, shared_bytes=1024) == (Dim3(4, 2, 1), Dim3(256, 1, 1))


class _FakeDriver:
    """The part of pycuda.driver that timing uses, on a fake clock: a launch of job ``j`` "takes"
    ``cost[j]`` ms, plus ``drift`` ms more for every launch before it (a GPU slowing down)."""

    class Error(Exception):
        pass

    def __init__(self, cost, drift=0.0):
        self.cost, self.drift, self.log, self.clock, self.launches = cost, drift, [], 0.0, 0
        driver = self

        class Event:
            def record(self):
                self.t = driver.clock

            def synchronize(self):
                pass

            def time_since(self, other):
                return self.t - other.t
        self.Event = Event

    def mem_alloc(self, nbytes):
        class Flush:
            def free(self):
                pass
        return Flush()

    def memset_d32_async(self, *args):
        self.log.append("flush")

    class device_attribute:  # noqa: N801 (pycuda's name)
        MULTIPROCESSOR_COUNT = "sms"

    def module_from_buffer(self, ptx):
        driver = self

        class Module:
            def get_function(self, name):
                assert name == "scangrade_hold_clocks"
                return lambda *args, **kw: driver.log.append("warm")
        return Module()

    def work(self, j):
        def run():
            if j == "boom":
                raise self.Error("an illegal memory access was encountered")
            self.log.append(j)
            self.clock += self.cost[j] + self.drift * self.launches
            self.launches += 1
        return run


def _fake_pycuda(driver):
    from grader.backends.pycuda import PyCudaBackend
    from grader.backends.pycuda.memory import Scratch
    backend = object.__new__(PyCudaBackend)  # no GPU: only the timing loop is under test
    backend._cuda, backend._deferred = driver, False
    backend._scratch = Scratch(driver, total_bytes=80 * 2**30)
    backend._device = type("Device", (), {"get_attribute": lambda self, what: 132})()
    return backend


def test_interleaved_timing_alternates_the_order_and_splits_the_times_per_job():
    driver = _FakeDriver({0: 1.0, 1: 2.0}, drift=0.01)
    backend = _fake_pycuda(driver)
    before = []
    times = backend.time_interleaved_ms([("a", driver.work(0), lambda: before.append(0)),
                                         ("b", driver.work(1), lambda: before.append(1))],
                                        warmup=1, runs=4, flush_bytes=1024)
    launches = [e for e in driver.log if e not in ("flush", "warm")]
    assert launches == [0, 1, 1, 0, 0, 1, 1, 0, 0, 1]  # A B, B A, ...
    assert before == launches and driver.log.count("flush") == 10  # poisoned and flushed before every launch
    # runs of 1 ms and more: the clocks warmed up before every run, then the flush, then the run
    assert driver.log == [e for launch in launches for e in ("warm", "flush", launch)]
    assert len(times) == 2 and len(times[0]) == len(times[1]) == 4  # the warm-up is not kept
    # A GPU slowing down at a steady rate costs both jobs the same on average (ABBA).
    extra_a = sum(times[0]) - 4 * 1.0
    extra_b = sum(times[1]) - 4 * 2.0
    assert extra_a == pytest.approx(extra_b)


def test_a_failure_while_timed_names_the_job_and_is_a_kernel_error():
    from grader.core.errors import KernelError
    driver = _FakeDriver({0: 1.0})
    backend = _fake_pycuda(driver)
    with pytest.raises(KernelError, match="the submission's kernel failed on the GPU while timed: an illegal"):
        backend.time_interleaved_ms([("the reference's kernel", driver.work(0), None),
                                     ("the submission's kernel", driver.work("boom"), None)],
                                    warmup=0, runs=2, flush_bytes=0)
    assert backend._deferred is False


def test_a_timed_run_warms_the_clocks_first_and_always_after_idle_or_a_long_run():
    """The clock warm-up's rule (grader.backends.base.ClockWarmup): before the first run; not between
    short back-to-back runs; from a gap of CLOCK_IDLE_MS or a run of CLOCK_LONG_RUN_MS on, before every run."""
    from grader.backends.base import CLOCK_IDLE_MS, CLOCK_LONG_RUN_MS, ClockWarmup
    short, brief = CLOCK_LONG_RUN_MS / 100, CLOCK_IDLE_MS / 10
    for trigger in ((CLOCK_IDLE_MS, short), (brief, CLOCK_LONG_RUN_MS)):
        clocks = ClockWarmup()
        assert clocks.due(1e9, 1e9)  # the first run, whatever came before
        assert not clocks.due(brief, short)
        assert clocks.due(*trigger)
        assert clocks.due(brief, short)  # and every run after it


@pytest.mark.parametrize("reports_peaks", [True, False])
def test_the_gpu_backends_device_facts_are_its_tables_keys_in_order(monkeypatch, reports_peaks):
    """``describe()`` on a GPU (:func:`grader.backends.pycuda.device.device_facts`) gives the keys of
    :data:`~grader.backends.pycuda.device.DEVICE_KEYS` in order, the peaks' attributes in their units
    (absent where the driver has none of them), and the analysis reads its peaks from those keys."""
    import sys
    import types

    from grader.backends.pycuda.device import DEVICE_KEYS, PEAK_ATTRIBUTES, device_facts
    from grader.grading.analysis import PEAK_KEYS, gpu_peaks

    class Error(Exception):
        pass

    attributes = {"MULTIPROCESSOR_COUNT": 132, "CLOCK_RATE": 1_980_000, "MEMORY_CLOCK_RATE": 2_619_000,
                  "GLOBAL_MEMORY_BUS_WIDTH": 5120}
    driver = types.SimpleNamespace(Error=Error, get_driver_version=lambda: 12040, get_version=lambda: (12, 4, 0),
                                   device_attribute=types.SimpleNamespace(**{a: a for a in attributes}
                                                                          if reports_peaks else {}))
    device = types.SimpleNamespace(name=lambda: "NVIDIA H100 80GB HBM3", compute_capability=lambda: (9, 0),
                                   get_attribute=attributes.__getitem__)
    sandbox = types.SimpleNamespace(isolated=False, why_not="no bubblewrap")
    monkeypatch.setitem(sys.modules, "pycuda", types.SimpleNamespace(VERSION_TEXT="2024.1.2"))
    facts = device_facts(driver, device, backend="pycuda", sandbox=sandbox)
    peaks = [key for key, *_ in PEAK_ATTRIBUTES]
    assert list(facts) == [key for key, _ in DEVICE_KEYS if reports_peaks or key not in peaks]
    assert facts["driver_api"] == "12.4" and facts["sandbox"] == "nvcc: rlimits only (no bubblewrap)"
    assert list(PEAK_KEYS) == peaks
    if reports_peaks:
        assert [facts[k] for k in peaks] == ["132", "1980", "2619", "5120"]
        assert gpu_peaks(facts).dram_gbps == pytest.approx(2 * 2619e6 * 5120 / 8 / 1e9)
