"""The GPU path's one checker (grader.grading.worker.gpu_path.GpuPath): the emulator's checks decide every checked
case, a case they fail is never run on the GPU, the GPU runs every case they pass, and once a kernel
deadlocked or diverged the GPU runs none of the part's later cases (they run on the emulator).

Runs on the CPU: the emulator's real checks (grader.grading.worker.beside.BackgroundEmulatorChecks) beside a stand-in "GPU"
(the emulator running plainly) that counts the launches it is asked for."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.grading import protocol
from grader.backends.emulator import EmulatorBackend
from grader.assignment.config import load_config
from grader.grading.case.cases import case_list
from grader.grading.case.cases import SAMPLED_CHECKER
from grader.assignment.parts import PARTS, SOLUTIONS
from grader.grading.compile import compile_part
from grader.grading.worker.beside import BackgroundEmulatorChecks
from grader.grading.worker.gpu_path import GpuPath
from tests.conftest import BROKEN, ROOT, VERDICTS



class StandInGpu:
    """The emulator, unchecked, standing in for a GPU: every backend call goes to it; ``launches``
    counts the kernel launches, ``broken`` stays False (no fault loses its context)."""

    name = "pycuda"

    def __init__(self) -> None:
        self._emulator = EmulatorBackend(workers=1, checks=False)
        self.launches = 0

    def launch(self, *args, **kwargs):
        self.launches += 1
        return self._emulator.launch(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._emulator, name)


class Events:
    def __init__(self) -> None:
        self.items = []

    def emit(self, event) -> None:
        self.items.append(event)


@pytest.fixture
def cfg(tmp_path):
    """The verdict corpus's config with cases above checks_max_n too (Part 1: n = 500, 512 unchecked)."""
    base = load_config(VERDICTS / "config.yaml")
    return base.override(emulator={"checks_max_n": 300, "workers": 1})


def grade_on_gpu_path(cfg, source: Path, key: str, tmp_path: Path):
    """Every case of part ``key`` of ``source`` through the GPU path, as the worker runs them:
    ``(results, stand-in GPU, launches made per case)``."""
    part, pc = PARTS[key], cfg.parts[key]
    text = source.read_text()
    job = protocol.Job.for_part(cfg, part=key, source=source, backend="pycuda", events=tmp_path / "events.jsonl",
                                checks=True)
    cases = list(job.cases)
    gpu = StandInGpu()
    modules = {d: compile_part(gpu, part, text, pc=pc, dtype=d, workdir=tmp_path / f"gpu-{d}") for d in pc.dtypes}
    beside = BackgroundEmulatorChecks(job, cfg, part, cases, text)
    path = GpuPath(gpu, job, cfg, part, modules, cases, tmp_path, str(tmp_path / "job.json"), beside, Events())
    results, launched = [], []
    try:
        for case in cases:
            path.before(case)
            before = gpu.launches
            results.append(path.decided(case, known=(), ahead=None) or path.run(case, known=(), ahead=None))
            launched.append(gpu.launches - before)
    finally:
        beside.close()
        path.close()
        gpu.close()
    return results, gpu, launched


def test_a_correct_part_is_checked_by_the_emulator_and_verified_on_the_gpu(cfg, tmp_path):
    results, _, launched = grade_on_gpu_path(cfg, SOLUTIONS / "part1_naive.cu", "part1_naive", tmp_path)
    assert all(r.status == "pass" for r in results), [r.message for r in results if r.status != "pass"]
    assert all(n > 0 for n in launched)  # every case ran on the GPU, checked or not
    assert {r.checker for r in results if r.n <= 300} == {"emulator checks"}
    assert {r.checker for r in results if r.n > 300} == {SAMPLED_CHECKER}  # the checks on sampled blocks


def test_in_several_lanes_the_checks_decide_every_case_as_in_one(cfg, tmp_path, monkeypatch):
    """Where the worker has the cores to itself, several emulators check every lane-th case each
    (beside.check_lanes, as many as a machine of many cores runs): the same verdicts, kinds and
    checkers, case by case, as one lane's."""
    from grader.grading.worker import beside

    source, key = BROKEN / "part2_missing_sync.cu", "part2_blelloch"
    one, _, _ = grade_on_gpu_path(cfg, source, key, tmp_path / "one")
    monkeypatch.setattr(beside, "check_lanes", lambda cfg: beside.SPARE_CORE_LANES)
    several, _, _ = grade_on_gpu_path(cfg, source, key, tmp_path / "several")
    see = lambda results: [(r.name, r.status, r.kind, r.checker) for r in results]  # noqa: E731
    assert see(several) == see(one) and any(r.status == "fail" for r in several)


@pytest.mark.parametrize("cores", [1, 2, 4, 8, 12, 16, 32, 128])
def test_the_lanes_of_two_parts_fit_the_cores(cfg, monkeypatch, cores):
    """A submission graded alone: the lanes of the checks beside the GPU, and their threads, share
    the machine's cores between the two parts whose checks run longest; a batch (the config's
    ``emulator.workers``) keeps one lane of its own threads."""
    from grader.grading.worker import beside
    import grader.host.resources as resources

    monkeypatch.setattr(resources, "usable_cpus", lambda: cores)
    alone = cfg.override(emulator={"workers": 0})
    lanes = beside.check_lanes(alone)
    workers = beside.lane_workers(alone, lanes)
    assert 1 <= lanes <= beside.SPARE_CORE_LANES
    if lanes == 1:
        assert workers == 0  # every core
    else:
        assert lanes * beside.CORES_PER_LANE <= cores and 2 * lanes * workers <= cores
    batch = cfg.override(emulator={"workers": 3})
    assert beside.check_lanes(batch) == 1 and beside.lane_workers(batch, 1) == 3


def test_a_case_the_checks_fail_is_not_run_on_the_gpu(cfg, tmp_path):
    results, _, launched = grade_on_gpu_path(cfg, BROKEN / "part2_missing_sync.cu", "part2_blelloch", tmp_path)
    failed = [(r, n) for r, n in zip(results, launched) if r.status == "fail" and r.checker == "emulator checks"]
    assert failed, [r.message for r in results]
    for result, n in failed:
        assert result.kind == "race" and n == 0
        assert "not run on the GPU" in result.message and "part2_blelloch.cu:" in result.message


def test_a_deadlock_is_decided_by_the_checks_and_the_gpu_runs_no_later_case(cfg, tmp_path):
    """part1_hang.cu spin-waits at every n: the checks find the deadlock at n = 1, nothing waits for a
    GPU deadline, and above checks_max_n the checks of sampled blocks find it again at once."""
    results, gpu, _ = grade_on_gpu_path(cfg, BROKEN / "part1_hang.cu", "part1_naive", tmp_path)
    assert gpu.launches == 0
    assert all(r.status == "fail" and r.kind == "deadlock" for r in results), [(r.name, r.kind) for r in results]
    sampled = [r for r in results if r.n > 300]
    assert sampled and all(r.checker == SAMPLED_CHECKER and "not run on the GPU" in r.message for r in sampled)


def test_where_the_emulator_cannot_check_the_part_the_gpu_runs_it_and_the_report_says_so(cfg, tmp_path):
    part, pc = PARTS["part1_naive"], cfg.parts["part1_naive"]
    source = SOLUTIONS / "part1_naive.cu"
    cases = case_list(cfg, part.key)
    job = protocol.Job.for_part(cfg, part=part.key, source=source, backend="pycuda", events=tmp_path / "e.jsonl",
                                checks=True)
    gpu = StandInGpu()
    modules = {"int32": compile_part(gpu, part, source.read_text(), pc=pc, dtype="int32", workdir=tmp_path / "g")}
    beside = BackgroundEmulatorChecks(job, cfg, part, cases, "this is not C++ {")  # the emulator cannot build it
    events = Events()
    path = GpuPath(gpu, job, cfg, part, modules, cases, tmp_path, str(tmp_path / "job.json"), beside, events)
    try:
        path.before(cases[0])
        result = path.decided(cases[0], known=(), ahead=None) or path.run(cases[0], known=(), ahead=None)
    finally:
        beside.close()
        path.close()
        gpu.close()
    assert beside.unavailable and path.fallback
    assert result.status == "pass" and gpu.launches > 0
    told = [e.info["checker"] for e in events.items if isinstance(e, protocol.DeviceUpdate)]
    assert told and "the emulator's checks cannot run this part" in told[0]


def test_the_gpu_paths_emulator_runs_on_the_quick_runtime_and_finds_what_the_emulator_does(tmp_path):
    """The GPU path's emulator (grader.grading.worker.beside.checking_emulator) builds its runtime with
    QUICK_RUNTIME_FLAGS (a new machine's first case waits for that build): the same names for the
    lockdown, and the same finding on a real kernel."""
    from grader.backends.emulator.build import QUICK_RUNTIME_FLAGS, EmulatorToolchain, expected_names
    from grader.grading.case.run import CHECK_SCHEDULES, run_case
    from grader.grading.worker.beside import checking_emulator

    path = tmp_path / "config.yaml"
    path.write_text("block_size: 64\nseed: 7\nparts:\n"
                    "  part5_single_pass:\n    block_size: 64\n    items_per_thread: 4\n    points_per_case: 1\n"
                    "    dtypes: [int32]\n    sizes: [1000]\n")
    cfg = load_config(path)
    part = PARTS["part5_single_pass"]
    emulator = checking_emulator(cfg, part)
    try:
        assert emulator.toolchain.runtime_flags == QUICK_RUNTIME_FLAGS
        assert emulator.toolchain.runtime_names() == expected_names()
        module = compile_part(emulator, part, (BROKEN / "part5_missing_fence.cu").read_text(),
                              pc=cfg.parts[part.key], dtype="int32", workdir=tmp_path / "m")
        failed = run_case(emulator, module, cfg=cfg, part=part, case=case_list(cfg, part.key)[-1],  # n = 1000
                          schedules=CHECK_SCHEDULES, checker="emulator checks")
    finally:
        emulator.close()
    assert failed.status == "fail" and failed.kind == "race" and "(memory order)" in failed.message
    assert emulator.toolchain.runtime_key() != EmulatorToolchain().runtime_key()  # its own object, not the -O2 one


@pytest.mark.parametrize("key, kernel, sizes", [
    ("part4_any_size", "part4_race_above_checks.cu", [65537, 262143]),
    ("part5_single_pass", "part5_lookback_race_above_checks.cu", [65535, 1048575]),
])
def test_a_race_only_above_checks_max_n_is_decided_by_the_checks_of_sampled_blocks(tmp_path, key, kernel, sizes):
    """The reference up to n = 70,000 and a race above it (tests/grading/test_sampled_checks.py): beside the
    GPU the checks of the large case's sampled blocks find the race, and that case is not run on the
    GPU; the checked case below passes and is verified there. The shipped config's checks_max_n."""
    cfg = load_config(ROOT / "config.yaml").override(parts={key: {"sizes": sizes, "dtypes": ["int32"]}})
    results, _, launched = grade_on_gpu_path(cfg, BROKEN / kernel, key, tmp_path)
    by_n = {r.n: (r, n) for r, n in zip(results, launched)}  # n = 1 is always graded too
    (small, small_launches), (large, large_launches) = by_n[sizes[0]], by_n[sizes[1]]
    assert small.status == "pass" and small.checker == "emulator checks" and small_launches > 0, small.message
    assert large.status == "fail" and large.kind == "race" and large.checker == SAMPLED_CHECKER, large.message
    assert large_launches == 0 and "not run on the GPU" in large.message
    assert f"{PARTS[key].filename}:" in large.message and "above emulator.checks_max_n" in large.message


def test_the_checks_beside_the_gpu_reach_a_case_far_above_checks_max_n(tmp_path):
    """The GPU path's emulator has the device memory of the part's largest case, not of its largest
    checked one: at n = 6,000,000 (buffers past the 16 MiB of slack) the checks of sampled blocks run
    and decide, where an emulator sized for checks_max_n ran out of memory, stopped checking and
    left the part's later cases to compute-sanitizer."""
    cfg = load_config(ROOT / "config.yaml").override(
        emulator={"checks_max_n": 300, "workers": 1},
        parts={"part4_any_size": {"sizes": [6_000_000], "dtypes": ["int32"]}})
    results, _, launched = grade_on_gpu_path(cfg, SOLUTIONS / "part4_any_size.cu", "part4_any_size", tmp_path)
    large = next(r for r in results if r.n == 6_000_000)
    assert large.status == "pass" and large.checker == SAMPLED_CHECKER, (large.checker, large.message)
    assert all(n > 0 for n in launched)


@pytest.mark.parametrize("counts_profile", [True, False], ids=["emulator", "gpu"])
def test_the_runner_builds_the_runtime_its_parts_emulators_use(monkeypatch, counts_profile):
    """While the parts' workers start, the runner builds the executor and the one runtime their
    emulators link: on the emulator the cases' own, on a GPU the checks' (which the profile uses
    too). A part then finds it built, instead of building it after its own compile; a batch's later
    submissions start no build again."""
    import threading

    from grader.backends.emulator.build import EmulatorToolchain
    from grader.grading import runner
    from grader.grading.runner import warm_emulator
    from grader.grading.worker.beside import checking_emulator

    cfg = load_config(ROOT / "config.yaml")
    part = PARTS["part4_any_size"]
    emulator = EmulatorBackend(workers=1) if counts_profile else checking_emulator(cfg, part)
    used = emulator.toolchain.runtime_flags
    emulator.close()
    built = []
    monkeypatch.setattr(EmulatorToolchain, "runtime_object",
                        lambda self, extra_flags=(): built.append(("runtime", self.runtime_flags)))
    monkeypatch.setattr(EmulatorToolchain, "executor_binary",
                        lambda self: built.append(("executor", self.runtime_flags)))
    monkeypatch.setattr(runner, "_WARMED", set())  # as in a new process
    for _ in range(2):  # the second grading of the process (a batch's next submission) starts nothing
        warm_emulator(cfg, counts_profile=counts_profile)
        for thread in [t for t in threading.enumerate() if t.name.startswith("scangrade-warm-")]:
            thread.join(timeout=60)
    assert sorted(built) == [("executor", used), ("runtime", used)]
