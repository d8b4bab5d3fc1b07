"""Compiling a part's file: the part header (:func:`grader.assignment.parts.part_source`) before the
file, built by a backend. The one way the grader compiles a part: a worker's submission and
reference, the profile's, the bench's."""

from __future__ import annotations

from pathlib import Path

from grader.assignment.config import PartConfig
from grader.assignment.parts import PartSpec, part_source
from grader.backends.base import Backend, Module


def compile_part(backend: Backend, part: PartSpec, source: str, *, pc: PartConfig, dtype: str,
                 workdir: Path) -> Module:
    """Compile a part's file for one ``scan_t`` on ``backend``: :func:`~grader.assignment.parts.part_header`
    (BLOCK_SIZE and ITEMS_PER_THREAD from ``pc``) before ``source``, built in ``workdir`` (created).

    Args:
        backend: a :class:`~grader.backends.base.Backend`.
        part: the part whose contract the file fills (its file name in messages, its kernels).
        source: the file's text.
        pc: the part's config, or the config of the part it is timed or profiled for (a reference
            solution of another part runs with that part's BLOCK_SIZE).
        dtype: ``int32`` or ``float32``.
        workdir: a folder of its own for the build.

    Raises:
        CompileError: the file does not compile (the compiler's message).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    return backend.compile(source=part_source(part, source, pc=pc, dtype=dtype), filename=part.filename,
                           kernels=part.kernels, workdir=workdir)
