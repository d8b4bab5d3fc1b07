"""The backends, in one table (:data:`BACKENDS`), and the choice of one.

Each :class:`BackendKind` says how a backend starts (in a part's worker), how to tell whether it
can run here, and what it can do (its traits). Every decision that depends on the backend reads
a trait; no other module compares a backend's name. Adding a backend is one row here and its
module (see docs/architecture.md, "How to add...").

Choosing one (:func:`select_backend`): the ``--backend`` option, then the ``SCANGRADE_BACKEND``
environment variable, then the config's ``backend`` key, then auto-detection (the first backend of
the table that its probe says can run here: PyCUDA when it can create a CUDA context, else the CPU
emulator). It also says where the choice came from, for the report.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from grader.core.errors import BackendUnavailable, UsageError

if TYPE_CHECKING:
    from grader.backends.base import Backend

ENV_VAR = "SCANGRADE_BACKEND"

_PROBE = """
import pycuda.driver as d
d.init()
if d.Device.count() < 1:
    raise SystemExit("no CUDA device")
dev = d.Device(0)
ctx = dev.make_context()
print(dev.name())
ctx.pop()
ctx.detach()
"""


@dataclass(frozen=True)
class BackendKind:
    """One backend: how it starts, whether it can run here, and what it can do.

    Attributes:
        name: as ``--backend``, the config's ``backend`` key and results name it.
        module: the module that implements it, whose ``create(workers=, checks=, sandbox=, device_memory=, target_arch=)`` makes
            the :class:`~grader.backends.base.Backend` (:meth:`create`); imported only there, so this
            table sits below everything, results and renderers included.
        probe: ``() -> (usable here, the device's name or why not)``, found out in a child process;
            None: usable wherever the grader runs (the last resort of auto).
        times_kernels: times kernels (CUDA events): timed cases and performance points. A run on a
            backend without it leaves a part's performance points pending a GPU.
        has_sanitizer: its checks are NVIDIA compute-sanitizer's, run over the checked cases before
            their deadlines start (:mod:`grader.grading.sanitizer`), not checks the backend makes as it runs
            each case (the emulator's checked mode, which makes each checked case slower).
        counts_profile: it is the CPU emulator that counts the memory-access profile: the cases'
            executors make way for the profile's. Without it the profile needs an emulator beside
            the backend, whose runtime is built while the parts start.
        uses_gpus: kernels run on CUDA devices, not on the grader's CPU: a batch grades one
            submission per GPU (``CUDA_VISIBLE_DEVICES``), a Slurm job asks for one, a submission's
            parts are graded at once where cores are to spare, and what runs the student's code is
            nvcc's compile sandbox rather than the emulator's.
        case_floor_s: seconds every case may take on an idle machine before its measured share
            (:func:`grader.grading.deadlines.case_budget_s`).
        checks_on_device: its memory is not the host's: a large run of a prefix sum is verified where it ran
            (:meth:`~grader.backends.base.Backend.scan_check` and
            :meth:`~grader.backends.base.Backend.digest`, a few bytes read back) and read back whole
            only to say what is wrong (:func:`grader.grading.case.checks.check_run`).
        compiles_ahead: its module has ``compile_ahead(builds, *, sandbox=)``: a part's compiles
            started in the background before the backend is made (nvcc needs no CUDA context),
            ``{tag: Future of the compiled module's bytes}`` (:func:`grader.grading.worker.ahead.cubins_ahead`).
        hint: ``() -> bool``, in microseconds and in this process (no child, no CUDA): whether
            :attr:`probe` will likely say yes (its module installed, the device files present);
            :func:`expected_backend` reads it. None where there is no probe.
    """

    name: str
    module: str
    probe: Callable[[], tuple[bool, str]] | None
    times_kernels: bool
    has_sanitizer: bool
    counts_profile: bool
    uses_gpus: bool
    case_floor_s: float
    checks_on_device: bool = False
    compiles_ahead: bool = False
    hint: Callable[[], bool] | None = None

    def create(self, *, workers: int = 0, checks: bool = False, sandbox: str = "auto",
               device_memory: int = 0, target_arch: int | None = None) -> "Backend":
        """The backend, made in the process that runs the kernels (a part's worker).

        Args:
            workers: the emulator's threads (0: one per core).
            checks: the emulator's race, bounds and barrier checks (a GPU backend ignores it).
            sandbox: the OS sandbox policy (``emulator.sandbox``) of the emulator and of nvcc.
            device_memory: the device memory, in bytes, the cases need at once
                (:func:`grader.grading.case.cases.device_memory_bytes`): what the emulator reserves, in the
                worker's own address space (0: its default; a GPU backend ignores it).
            target_arch: the GPU the course targets (the config's ``target_arch``): the emulator
                compiles for it; a GPU backend compiles for the GPU it runs on. None: the default.

        Raises:
            BackendUnavailable: it cannot start here.
        """
        return importlib.import_module(self.module).create(workers=workers, checks=checks, sandbox=sandbox,
                                                           device_memory=device_memory, target_arch=target_arch)


#: Every backend by name, in the order auto tries them.
BACKENDS: dict[str, BackendKind] = {k.name: k for k in (
    BackendKind("pycuda", "grader.backends.pycuda", lambda: probe_pycuda(), times_kernels=True, has_sanitizer=True,
                counts_profile=False, uses_gpus=True, case_floor_s=5.0, checks_on_device=True,
                compiles_ahead=True, hint=lambda: hint_pycuda()),
    BackendKind("emulator", "grader.backends.emulator", None, times_kernels=False, has_sanitizer=False,
                counts_profile=True, uses_gpus=False, case_floor_s=5.0),
)}
#: The values of ``target_arch``: a GPU's compute capability times ten (``90``: sm_90, an H100),
#: Volta (70) or later: the emulator models independent thread scheduling, as those do.
TARGET_ARCHS = (70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121)
#: The course's GPU where the config names none: an NVIDIA H100 (sm_90).
DEFAULT_TARGET_ARCH = 90
#: The values of ``--backend`` and of the config's ``backend`` key.
CHOICES = ("auto", *BACKENDS)
#: The backend that runs wherever the grader does (auto's last resort).
FALLBACK = next(k.name for k in BACKENDS.values() if k.probe is None)


def backend_kind(name: str) -> BackendKind:
    """The row of :data:`BACKENDS` named ``name``.

    Raises:
        UsageError: no backend has that name.
    """
    try:
        return BACKENDS[name]
    except KeyError:
        raise UsageError(f"unknown backend {name!r}; choose {' or '.join(BACKENDS)}") from None


@dataclass(frozen=True)
class Selection:
    """The backend chosen and why (``"--backend option"``, ``"auto: no CUDA GPU (...)"``...)."""

    name: str
    reason: str

    @property
    def kind(self) -> BackendKind:
        """The chosen backend's row of :data:`BACKENDS` (its traits)."""
        return backend_kind(self.name)


def probe_pycuda(timeout_s: float = 60.0) -> tuple[bool, str]:
    """Whether PyCUDA can create a CUDA context here, checked in a child process so the grader's
    own process never holds a CUDA context.

    Returns:
        ``(True, device name)`` or ``(False, why not)``.
    """
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False, f"creating a CUDA context took over {timeout_s:.0f} s"
    if proc.returncode == 0:
        return True, proc.stdout.strip()
    last = (proc.stderr.strip().splitlines() or ["unknown error"])[-1]
    if "No module named 'pycuda'" in last:
        last = "PyCUDA is not installed (pip install -e '.[gpu]')"
    return False, last


def _named_backend(option: str | None, config_value: str, env) -> tuple[str, str] | None:
    """The first backend named (not ``auto``) by the option, the environment, then the config, with
    where it came from; None: auto. Raises UsageError for a name not in :data:`BACKENDS`."""
    for value, source in ((option, "--backend option"), (env.get(ENV_VAR), f"{ENV_VAR} environment variable"),
                          (config_value, "config key 'backend'")):
        if value and value != "auto":
            if value not in BACKENDS:
                raise UsageError(f"unknown backend {value!r} from the {source}; choose {', '.join(CHOICES)}")
            return value, source
    return None


def hint_pycuda() -> bool:
    """Whether :func:`probe_pycuda` will likely succeed, found without a child process or CUDA:
    PyCUDA is installed and an NVIDIA device file (``/dev/nvidia0``...) exists."""
    import importlib.util
    import glob

    try:
        installed = importlib.util.find_spec("pycuda") is not None
    except (ImportError, ValueError):
        installed = False
    return installed and bool(glob.glob("/dev/nvidia[0-9]*"))


def expected_backend(option: str | None, *, config_value: str = "auto", env: dict[str, str] | None = None) -> str:
    """The backend :func:`select_backend` will likely choose, found at once (each row's
    :attr:`BackendKind.hint` in place of its probe, which starts a child process and a CUDA context:
    most of a second). What a grading needs whatever the probe says can start meanwhile
    (:func:`grader.grading.runner.warm_emulator`). Arguments as :func:`select_backend`'s.

    Raises:
        UsageError: an unknown backend name.
    """
    named = _named_backend(option, config_value, os.environ if env is None else env)
    if named is not None:
        return named[0]
    return next(k.name for k in BACKENDS.values() if k.probe is None or (k.hint is not None and k.hint()))


def probe_gpu_count(timeout_s: float = 60.0) -> int:
    """How many CUDA devices PyCUDA sees, counted in a child process (0 when none or no PyCUDA)."""
    code = "import pycuda.driver as d; d.init(); print(d.Device.count())"
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return 0
    return int(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip().isdigit() else 0


def select_backend(option: str | None, *, config_value: str = "auto", env: dict[str, str] | None = None) -> Selection:
    """Choose the backend: option > environment > config > auto.

    Args:
        option: the ``--backend`` value or None.
        config_value: the config's ``backend`` key.
        env: the environment (default ``os.environ``).

    Raises:
        UsageError: an unknown backend name.
        BackendUnavailable: a backend with a probe (``pycuda``) was asked for explicitly and cannot run here.
    """
    named = _named_backend(option, config_value, os.environ if env is None else env)
    if named is not None:
        value, source = named
        kind = BACKENDS[value]
        if kind.probe is None:
            return Selection(value, source)
        ok, why = kind.probe()
        if not ok:
            raise BackendUnavailable(f"the {value} backend was asked for ({source}) but cannot run here: {why}. "
                                     f"Use --backend {FALLBACK} to grade on the CPU.")
        return Selection(value, f"{source} (GPU: {why})")
    whys = []
    for kind in BACKENDS.values():
        if kind.probe is None:
            return Selection(kind.name, f"auto: no usable CUDA GPU ({'; '.join(whys)})")
        ok, why = kind.probe()
        if ok:
            return Selection(kind.name, f"auto: CUDA GPU found ({why})")
        whys.append(why)
    raise AssertionError("the table of backends has no fallback")  # pragma: no cover - FALLBACK exists


def create_backend(name: str, *, emulator_workers: int = 0, checks: bool = False,
                   emulator_sandbox: str = "auto", device_memory: int = 0,
                   target_arch: int | None = None) -> "Backend":
    """Instantiate a backend by name (in the process that will run the kernels): its row's
    :attr:`BackendKind.create`.

    Args:
        emulator_workers: the emulator's worker threads (0: one per core).
        checks: the emulator's race, bounds and barrier checks (ignored by the GPU backend).
        emulator_sandbox: the sandbox policy, ``auto``, ``required`` or ``off``, of the emulator and
            of the GPU backend's nvcc.
        device_memory: what the emulator reserves for device memory, in bytes (see
            :meth:`BackendKind.create`; 0: its default).
        target_arch: the GPU the emulator compiles for (see :meth:`BackendKind.create`).

    Raises:
        UsageError: no backend has that name.
        BackendUnavailable: the backend cannot start here.
    """
    return backend_kind(name).create(workers=emulator_workers, checks=checks, sandbox=emulator_sandbox,
                                     device_memory=device_memory, target_arch=target_arch)
