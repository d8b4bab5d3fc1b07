"""The child process that grades one part: ``python -m grader.worker JOB.json``.

Student code never runs in the grader's own process: the runner starts this worker for each
part, with a deadline, and reads what it reports as JSON lines appended to the job's event file
(flushed one by one, so a crash or a kill loses nothing already reported):

- ``{"event": "device", "info": {...}}`` once the backend is up;
- ``{"event": "compile-error", "message": ...}`` and exit, or ``{"event": "compiled"}``;
- ``{"event": "case-start", "name": ...}`` then ``{"event": "case", "result": {...}}`` per case;
- ``{"event": "error", "message": ...}`` when the backend cannot start;
- ``{"event": "done"}`` at the end.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import sys
import tempfile
from pathlib import Path

import numpy as np


def _emit(stream, **event) -> None:
    stream.write(json.dumps(event) + "\n")
    stream.flush()
    os.fsync(stream.fileno())


def main(argv: list[str]) -> int:
    """Run the job described by ``argv[0]``; returns the exit status (0 also when cases fail)."""
    job = json.loads(Path(argv[0]).read_text())
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    from grader.backends import create_backend
    from grader.config import load_config
    from grader.errors import ScangradeError, CompileError
    from grader.execute import run_case
    from grader.parts import PARTS, part_header

    cfg = load_config(job["config"])
    part = PARTS[job["part"]]
    dtype = np.dtype(np.int32)
    with open(job["events"], "a", encoding="utf-8") as events:
        try:
            backend = create_backend(job["backend"], emulator_workers=cfg.emulator_workers)
        except ScangradeError as exc:
            _emit(events, event="error", message=str(exc))
            return 0
        try:
            _emit(events, event="device", info=backend.describe())
            source = Path(job["source"]).read_text(encoding="utf-8", errors="replace")
            text = part_header(part, block_size=cfg.block_size, dtype=dtype) + source
            with tempfile.TemporaryDirectory(prefix="scangrade-build-") as work:
                try:
                    module = backend.compile(source=text, filename=part.filename, kernels=part.kernels,
                                             workdir=Path(work))
                except CompileError as exc:
                    _emit(events, event="compile-error", message=str(exc))
                    return 0
                _emit(events, event="compiled")
                for n in cfg.parts[part.key].sizes:
                    _emit(events, event="case-start", name=f"n={n}")
                    result = run_case(backend, module, cfg=cfg, part=part, n=n, seed=job["seed"], dtype=dtype)
                    _emit(events, event="case", result=dataclasses.asdict(result))
        finally:
            backend.close()
        _emit(events, event="done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
