"""The CUDA device as the GPU backend sees it: the driver started (:func:`init_driver`), the nvcc target
read without a context (:func:`device_arch`), and the facts a result's ``device`` holds
(:func:`device_facts`, the keys of :data:`DEVICE_KEYS`)."""

from __future__ import annotations

import os

from grader.core.errors import BackendUnavailable

__all__ = ["CONNECTIONS", "DEVICE_KEYS", "PEAK_ATTRIBUTES", "device_arch", "device_facts", "init_driver"]

#: The hardware work queues a context of the grader's gets (``CUDA_DEVICE_MAX_CONNECTIONS``, where
#: the environment does not set it). The grader's launches and copies go to the default stream only,
#: so one queue loses nothing, and the driver makes and tears down a context with one queue faster
#: than with its default eight; every part's worker makes its own context, one at a time in the
#: driver (figures: docs/throughput.md, ``CUDA_DEVICE_MAX_CONNECTIONS=1``).
CONNECTIONS = "1"

#: The attributes the GPU's peaks come from (:data:`grader.grading.analysis.PEAK_KEYS`), each
#: ``(key, the driver's attribute, its divisor to the key's unit, what it says)``: SMs, the SM clock
#: and the memory clock (MHz; the driver gives kHz) and the memory bus width (bits).
PEAK_ATTRIBUTES = (
    ("sm_count", "MULTIPROCESSOR_COUNT", 1, "multiprocessors"),
    ("clock_mhz", "CLOCK_RATE", 1000, "the SM clock, MHz"),
    ("memory_clock_mhz", "MEMORY_CLOCK_RATE", 1000, "the memory clock, MHz"),
    ("memory_bus_bits", "GLOBAL_MEMORY_BUS_WIDTH", 1, "the memory bus width, bits"),
)
#: What :meth:`grader.backends.pycuda.backend.PyCudaBackend.describe` says, the result's ``device`` on
#: a GPU: its keys in order, each with what its value says (docs/results.md, "Top level", ``device``,
#: lists these keys: ``tests/project/test_table_docs.py``). The peaks' keys are absent where the driver does not
#: report one (CUDA 13 keeps them as driver attributes).
DEVICE_KEYS = (
    ("backend", "the backend's name, ``pycuda``"),
    ("device", "the GPU's name"),
    ("compute_capability", "``major.minor``: ``9.0`` on an H100"),
    *((key, what) for key, _, _, what in PEAK_ATTRIBUTES),
    ("driver_api", "the CUDA version of the driver's API"),
    ("cuda", "the CUDA version PyCUDA was built with"),
    ("pycuda", "PyCUDA's version"),
    ("sandbox", "how nvcc is contained: ``nvcc: bubblewrap + rlimits``, or ``nvcc: rlimits only (why)``"),
)


def init_driver(cuda) -> None:
    """``cuInit`` through ``cuda`` (``pycuda.driver``), with :data:`CONNECTIONS` set first (the driver
    reads it when it starts)."""
    os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", CONNECTIONS)
    cuda.init()


def device_arch(device: int = 0) -> str:
    """The nvcc target of CUDA device ``device`` (``"sm_90"`` on an H100), read without a context
    (``cuInit`` and the device's attributes only).

    Raises:
        BackendUnavailable: PyCUDA is not installed, or the driver cannot see the device.
    """
    try:
        import pycuda.driver as cuda
    except ImportError as exc:
        raise BackendUnavailable(f"PyCUDA is not installed ({exc}); pip install -e '.[gpu]'") from None
    try:
        init_driver(cuda)
        major, minor = cuda.Device(device).compute_capability()
    except cuda.Error as exc:
        raise BackendUnavailable(f"cannot read CUDA device {device}: {exc}") from None
    return f"sm_{major}{minor}"


def _peak_attributes(cuda, device) -> dict[str, str]:
    """:data:`PEAK_ATTRIBUTES` of ``device`` (a ``pycuda.driver.Device``), as strings; empty where the
    driver does not report one."""
    attr = cuda.device_attribute
    try:
        values = [(key, device.get_attribute(getattr(attr, name)), divisor)
                  for key, name, divisor, _ in PEAK_ATTRIBUTES]
    except (AttributeError, cuda.Error):
        return {}
    return {key: str(value) if divisor == 1 else f"{value / divisor:g}" for key, value, divisor in values}


def device_facts(cuda, device, *, backend: str, sandbox) -> dict[str, str]:
    """The facts of :data:`DEVICE_KEYS`, in its order, for ``device`` (a ``pycuda.driver.Device``; ``cuda``
    is ``pycuda.driver``), the ``backend``'s name and nvcc's compile ``sandbox``
    (:class:`grader.backends.emulator.sandbox.Sandbox`)."""
    import pycuda
    major, minor = device.compute_capability()
    version = cuda.get_driver_version()
    facts = {"backend": backend, "device": device.name(), "compute_capability": f"{major}.{minor}",
             **_peak_attributes(cuda, device),
             "driver_api": f"{version // 1000}.{version % 1000 // 10}",
             "cuda": ".".join(map(str, cuda.get_version())), "pycuda": pycuda.VERSION_TEXT,
             "sandbox": "nvcc: " + ("bubblewrap + rlimits" if sandbox.isolated
                                    else f"rlimits only ({sandbox.why_not})")}
    return {key: facts[key] for key, _ in DEVICE_KEYS if key in facts}
