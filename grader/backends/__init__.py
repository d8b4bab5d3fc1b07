"""Backend selection, in one place.

Precedence: the ``--backend`` option, then the ``SCANGRADE_BACKEND`` environment variable, then
the config's ``backend`` key, then auto-detection (PyCUDA when it can create a CUDA context,
else the CPU emulator). :func:`select_backend` also says where the choice came from, for the report.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

from grader.backends.base import Backend
from grader.errors import BackendUnavailable, UsageError

NAMES = ("pycuda", "emulator")
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
class Selection:
    """The backend chosen and why (``"--backend option"``, ``"auto: no CUDA GPU (...)"``...)."""

    name: str
    reason: str


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
        BackendUnavailable: ``pycuda`` was asked for explicitly and cannot run here.
    """
    env = os.environ if env is None else env
    for value, source in ((option, "--backend option"), (env.get(ENV_VAR), f"{ENV_VAR} environment variable"),
                          (config_value, "config key 'backend'")):
        if not value or value == "auto":
            continue
        if value not in NAMES:
            raise UsageError(f"unknown backend {value!r} from the {source}; choose auto, pycuda or emulator")
        if value == "pycuda":
            ok, why = probe_pycuda()
            if not ok:
                raise BackendUnavailable(f"the pycuda backend was asked for ({source}) but cannot run here: {why}. "
                                         "Use --backend emulator to grade on the CPU.")
            return Selection("pycuda", f"{source} (GPU: {why})")
        return Selection(value, source)
    ok, why = probe_pycuda()
    if ok:
        return Selection("pycuda", f"auto: CUDA GPU found ({why})")
    return Selection("emulator", f"auto: no usable CUDA GPU ({why})")


def create_backend(name: str, *, emulator_workers: int = 0, checks: bool = False,
                   emulator_sandbox: str = "auto") -> Backend:
    """Instantiate a backend by name (in the process that will run the kernels).

    Args:
        emulator_workers: the emulator's worker threads (0: one per core).
        checks: the emulator's race, bounds and barrier checks (ignored by the GPU backend).
        emulator_sandbox: the sandbox policy, ``auto``, ``required`` or ``off``, of the emulator and
            of the GPU backend's nvcc.

    Raises:
        BackendUnavailable: the backend cannot start here.
    """
    if name == "pycuda":
        from grader.backends.pycuda_backend import PyCudaBackend
        return PyCudaBackend(sandbox=emulator_sandbox)
    if name == "emulator":
        from grader.backends.emulator import EmulatorBackend
        return EmulatorBackend(workers=emulator_workers, checks=checks, sandbox=emulator_sandbox)
    raise UsageError(f"unknown backend {name!r}; choose pycuda or emulator")
