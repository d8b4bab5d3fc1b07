"""The GPUs the prediction model (:mod:`grader.grading.prediction`) has measured constants for:
:class:`GpuModel` and its one table, :data:`GPU_MODELS` (``gpu_models.json`` beside this module,
written from ``bench/gpu_constants.py``'s output; docs/prediction.md). Data only: the config checks
its ``roofline.predict_on`` against the table's names.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Mapping

__all__ = ["GPU_MODELS", "GpuModel"]


@dataclass(frozen=True)
class GpuModel:
    """A GPU's constants for :func:`predict_ms`, measured by ``bench/gpu_constants.py``.

    Attributes:
        gpu: the GPU's name as the driver reports it; measured, driver, cuda, command: when, on
            which driver and CUDA, and how the constants were measured.
        sm_count, max_threads_per_sm, max_blocks_per_sm, shared_bytes_per_sm: its attributes.
        copy: ``(bytes, ms)`` pairs, by bytes: a device-to-device copy of that many bytes (read
            plus written), L2 emptied before it.
        shared_step_ns: one dependent shared-memory load of one thread.
        thread_step_ns: one memory step of a thread looping over an array alone (half of one
            element of ``s += in[i]; out[i] = s``).
        barrier_ns: one ``__syncthreads()`` round of a block of 512 threads with a shared step.
        lookback_tile_ns: one tile of a chain of tiles whose one lane looks back one status word
            at a time over tiles that load and store Part 5's tile (reported; the look-back's
            simulation takes its reads at ``l2_step_ns``).
        l2_step_ns: one dependent global load that hits the L2 (a look-back's read of a status word).
        sector_gbps: 32-byte sectors served a second (GB/s of sectors) where every request touches
            32 sectors (lanes 176 bytes apart).
        queued_launch_us: what each further launch of a plan adds where the launches were queued
            before the GPU reached them (as in a timed window, queued behind the L2 flush): an empty
            kernel's dispatch after the one before it, in place of a lone launch's fixed cost (the
            copy's time at 0 bytes); None where not measured (each launch then pays the fixed cost).
        accuracy: what bench/prediction.py measured of the model on this GPU, in words (empty:
            not measured).
    """

    gpu: str
    measured: str
    driver: str
    cuda: str
    command: str
    sm_count: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    shared_bytes_per_sm: int
    copy: tuple[tuple[int, float], ...]
    shared_step_ns: float
    thread_step_ns: float
    barrier_ns: float
    lookback_tile_ns: float
    l2_step_ns: float
    sector_gbps: float
    queued_launch_us: float | None = None
    accuracy: str = ""

    def copy_ms(self, nbytes: float) -> float:
        """A copy of ``nbytes`` (read plus written), in ms: log-log interpolation of :attr:`copy`,
        its smallest time below it, linear in the bytes above its largest."""
        pts = self.copy
        if nbytes <= pts[0][0]:
            return pts[0][1]
        for (b0, t0), (b1, t1) in zip(pts, pts[1:]):
            if nbytes <= b1:
                f = math.log(nbytes / b0) / math.log(b1 / b0)
                return math.exp(math.log(t0) + f * (math.log(t1) - math.log(t0)))
        b, t = pts[-1]
        return t * nbytes / b

    def resident_blocks(self, block: int, shared_bytes: int) -> int:
        """Blocks of ``block`` threads and ``shared_bytes`` of dynamic shared memory (plus 1 KiB the
        system reserves a block) resident on one SM at once; registers are not known here."""
        fit = min(self.max_threads_per_sm // max(block, 1), self.max_blocks_per_sm)
        if shared_bytes:
            fit = min(fit, self.shared_bytes_per_sm // (shared_bytes + 1024))
        return max(1, fit)


def _load_models() -> dict[str, GpuModel]:
    raw = json.loads((Path(__file__).with_name("gpu_models.json")).read_text())
    keys = {f.name for f in fields(GpuModel)}
    return {m["gpu"]: GpuModel(**{k: v for k, v in m.items() if k in keys - {"copy"}},
                               copy=tuple((int(b), float(t)) for b, t in m["copy"]))
            for m in raw["models"]}


#: The measured GPUs, by name (``gpu_models.json``): the one table of them.
GPU_MODELS: Mapping[str, GpuModel] = _load_models()
