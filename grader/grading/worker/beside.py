"""On a GPU, the emulator's checks of a part's cases, run in a background thread beside the GPU from
the worker's start (the checker that decides every checked case on every machine), and the report's
``checker`` line that names them."""

from __future__ import annotations

import functools
import json
import os
import tempfile
import threading
import time
from pathlib import Path

#: What checks a checked case, for the report's ``checker`` line (``checked``: the checked sizes,
#: :func:`grader.grading.case.cases.checked_sizes`; ``drawn``: the blocks a sampling launch draws
#: besides its first and last).
EMULATOR_CHECKER = ("the emulator's checks (races, bounds, barriers, memory order, unwritten shared memory; three "
                    "thread orders, the random one switching threads at memory accesses too) on {checked}, "
                    "and above it on the first, the last and {drawn} seeded blocks of each launch (where the part's "
                    "blocks are independent, the first {accesses:,} accesses of each)")


class BackgroundEmulatorChecks:
    """On the GPU path: the emulator's checks of the part's cases (from the job's ``start``), the
    checker that decides them, run in background threads from the worker's start on (one per lane,
    :func:`check_lanes`, each its own emulator taking every lane-th case), beside its CUDA context
    and its compile, keeping each case's checked run (a
    :class:`~grader.core.results.CaseResult`) for :meth:`result`: whole for a checked case, of
    sampled blocks for a sampled one (the case's :class:`~grader.grading.case.cases.CheckMode`;
    :class:`grader.grading.case.run.CaseRun` without its plain run: the GPU judges the output). Where
    the emulator cannot build or run the part (:attr:`unavailable` says why), compute-sanitizer
    stands in on the checked cases (:class:`grader.grading.worker.gpu_path.GpuPath`)."""

    def __init__(self, job, cfg, part, cases, source: str) -> None:
        self.job, self.cfg, self.part, self.cases = job, cfg, part, cases
        self._results: dict[int, object] = {}
        todo = list(range(job.start, len(cases)))
        self._ready = {i: threading.Event() for i in todo}
        lanes = check_lanes(cfg)
        self._compiled = [threading.Event() for _ in range(lanes)]
        self.unavailable: str | None = None  # why the emulator cannot check this part
        #: The worker's inputs drawn ahead (:class:`grader.grading.case.inputs.DrawAhead`), once it has
        #: them: a large case's input is drawn once for the GPU's run and these checks.
        self.ahead = None
        self._emulators: list = []
        self._work = Path(tempfile.mkdtemp(prefix="scangrade-emulator-checks-"))
        self._started = time.time()
        self._threads = [threading.Thread(target=self._run, args=(todo[lane::lanes], source, lane),
                                          name=f"scangrade-emulator-checks-{lane}", daemon=True)
                         for lane in range(lanes)]
        for thread in self._threads:
            thread.start()

    def _run(self, todo: list[int], source: str, lane: int) -> None:
        from grader.core.errors import ScangradeError
        from grader.grading.case.run import run_case
        from grader.grading.compile import compile_part

        failed = True
        try:
            if lane:  # after the first lane's compile, which the others then find in the compile cache
                self._compiled[0].wait()
            emulator = checking_emulator(self.cfg, self.part, workers=lane_workers(self.cfg, len(self._compiled)))
            self._emulators.append(emulator)
            pc = self.cfg.parts[self.part.key]
            modules = _call_in_threads({d: functools.partial(compile_part, emulator, self.part, source, pc=pc,
                                                             dtype=d, workdir=self._work / str(lane) / d)
                                        for d in sorted({self.cases[i].dtype for i in todo})})
            # A compile loads its module in an executor started by the compile's own thread, which has
            # ended: the executor dies with that thread (bubblewrap's --die-with-parent and its own
            # PR_SET_PDEATHSIG are per thread), at any moment, a launch under way included. Stopped
            # here, the next launch starts one from this thread.
            emulator.close()
            self._compiled[lane].set()
            compiled = time.time()
            for i in todo:
                case = self.cases[i]
                self._results[i] = run_case(emulator, modules[case.dtype], cfg=self.cfg, part=self.part,
                                            case=case, plain_run=False, ahead=self.ahead)
                self._ready[i].set()
            failed = False
            trace = os.environ.get("SCANGRADE_CASE_TIMES")  # bench: when the compiles and the cases were done
            if trace:
                Path(trace).mkdir(parents=True, exist_ok=True)
                (Path(trace) / f"{self.part.key}-emulator-checks-{os.getpid()}-{lane}.json").write_text(json.dumps(
                    {"started": self._started, "compiled": compiled, "done": time.time(), "cases": len(todo),
                     "thread_cpu_s": time.thread_time()}))
        except ScangradeError as exc:  # the emulator cannot build or run it: compute-sanitizer stands in
            self.unavailable = self.unavailable or str(exc) or type(exc).__name__
        except Exception as exc:  # noqa: BLE001 - closed under it (the worker ends), or a grader bug: say so
            self.unavailable = self.unavailable or f"the emulator's checks stopped: {type(exc).__name__}: {exc}"
        finally:
            self._compiled[lane].set()
            for i in (self._ready if failed else todo):  # failed: no lane's later result is waited for
                self._ready[i].set()

    def compiled(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the part's emulator compiles, in every lane (or their failure);
        whether they ended."""
        deadline = time.monotonic() + timeout
        return all(event.wait(max(0.0, deadline - time.monotonic())) for event in self._compiled)

    def result(self, index: int):
        """The emulator's checked run of case ``index`` (a CaseResult), waiting for it: the case's
        deadline, which includes the emulator's time on it, bounds the wait (a kernel that hangs on
        the emulator hangs here, and the runner stops it as a hang). None for a case it does not
        check, or when it could not run it."""
        ready = self._ready.get(index)
        if ready is None:
            return None
        ready.wait()
        return self._results.get(index)

    def close(self) -> None:
        """Stop the emulator's executors (a run still going ends with an error) and remove its files."""
        import shutil

        for emulator in list(self._emulators):
            emulator.close()
        shutil.rmtree(self._work, ignore_errors=True)


#: Lanes of the emulator's checks beside a GPU where the worker has the cores to itself (the config's
#: ``emulator.workers`` 0: a submission graded alone, its parts at once): each lane its own emulator,
#: taking every lane-th case, so that the checks the GPU waits on end sooner. At most this many, one
#: per :data:`CORES_PER_LANE` cores.
SPARE_CORE_LANES = 4
#: Cores per lane of :data:`SPARE_CORE_LANES`: fewer than two lanes' worth, one lane.
CORES_PER_LANE = 4


def check_lanes(cfg) -> int:
    """How many lanes :class:`BackgroundEmulatorChecks` runs under ``cfg`` on this machine: one where
    the config sets the emulator's workers (a batch shares the cores among its jobs), else one per
    :data:`CORES_PER_LANE` cores, at most :data:`SPARE_CORE_LANES` (one where that is under two)."""
    from grader.host.resources import usable_cpus

    lanes = min(SPARE_CORE_LANES, usable_cpus() // CORES_PER_LANE)
    return 1 if cfg.emulator.workers or lanes < 2 else lanes


def lane_workers(cfg, lanes: int) -> int:
    """The emulator's worker threads in each of ``lanes`` lanes (:func:`check_lanes`; 0: every core):
    the config's ``emulator.workers`` where it sets them; every core for one lane; else the cores
    shared out among the lanes of two parts, the two whose checks take longest (Parts 4 and 5 and
    their 16M cases) and run to the end. More threads a lane than that oversubscribe the cores, and
    the checks the GPU waits on took longer (figures: docs/throughput.md, "Figures behind the code's
    constants")."""
    from grader.host.resources import usable_cpus

    if cfg.emulator.workers or lanes < 2:
        return cfg.emulator.workers
    return max(1, usable_cpus() // (2 * lanes))


def emulator_checker_line(cfg) -> str:
    """The report's ``checker`` line for the emulator's checks under ``cfg``."""
    from grader.backends.emulator.launch import SAMPLE_DRAWN
    from grader.grading.case.cases import checked_sizes
    from grader.grading.case.run import SAMPLED_BLOCK_CHECKS

    return EMULATOR_CHECKER.format(checked=checked_sizes(cfg), drawn=SAMPLE_DRAWN, accesses=SAMPLED_BLOCK_CHECKS)


def _call_in_threads(calls: dict) -> dict:
    """``{key: call()}``, the calls made at once, each in a daemon thread of its own (a worker that
    ends does not wait for them); the first error raised, in ``calls``' order, is raised again."""
    from grader.host.parent_death import daemon_futures

    return {key: future.result() for key, future in daemon_futures(calls, len(calls)).items()}


def emulator_runtime_flags(*, counts_profile: bool) -> tuple[str, ...]:
    """The runtime flags of every emulator a grading makes on a backend (``counts_profile``: the
    emulator, which runs the cases itself): there, the cases' optimised runtime
    (:data:`grader.backends.emulator.build.RUNTIME_FLAGS`, the profile on it too); on a GPU, the
    quick runtime of the checks beside it
    (:data:`~grader.backends.emulator.build.QUICK_RUNTIME_FLAGS`), the profile on it too. So a new
    machine builds one runtime, not two (each is seconds of a core), and the runner can build it
    while the parts start. The profile's counts are the runtime's own arithmetic on the kernel's
    addresses, the same on either."""
    from grader.backends.emulator.build import QUICK_RUNTIME_FLAGS

    return () if counts_profile else QUICK_RUNTIME_FLAGS


def checking_emulator(cfg, part, *, workers: int | None = None):
    """An emulator backend with its checks on (``workers`` threads, default the config's; the config's
    sandbox), for the GPU path:
    its runtime built quickly (:data:`grader.backends.emulator.build.QUICK_RUNTIME_FLAGS`), its
    device memory what every case of ``part`` needs (the checks run each one, whole or on sampled
    blocks, over buffers of the case's full size),
    compiling for the config's ``target_arch`` (not the GPU this worker runs on: the checks see what
    the course's GPU compiles)."""
    from grader.backends.emulator import EmulatorBackend
    from grader.grading.case.cases import case_runs, device_memory_bytes

    return EmulatorBackend(workers=cfg.emulator.workers if workers is None else workers, checks=True,
                           sandbox=cfg.emulator.sandbox, nvcc_check=False,
                           runtime_flags=emulator_runtime_flags(counts_profile=False), target_arch=cfg.target_arch,
                           device_memory=device_memory_bytes(case_runs(cfg, part.key)))


def start_background_checks(kind, job, cfg, part) -> "BackgroundEmulatorChecks | None":
    """The emulator's checks beside the GPU (:class:`BackgroundEmulatorChecks`), started now, where this worker
    grades on a GPU with the checks on and the source is readable; else None."""
    from grader.grading.intake import read_source

    if not (kind.has_sanitizer and job.checks):
        return None
    try:
        source = read_source(Path(job.source))
    except OSError:
        return None  # the worker reports it
    return BackgroundEmulatorChecks(job, cfg, part, list(job.cases), source)


