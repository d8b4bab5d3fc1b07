"""On a GPU, the work a worker starts ahead, in the background, so that it overlaps the CUDA context's
start and the checks of the small cases: nvcc's compiles (:func:`cubins_ahead`) and the inputs of the
large and timed cases (:func:`draw_ahead`)."""

from __future__ import annotations

from pathlib import Path

from grader.assignment.parts import SOLUTIONS


def cubins_ahead(kind, job, cfg, part) -> dict:
    """Where the backend compiles ahead (its row's ``compiles_ahead``: the GPU's ``compile_ahead``, nvcc
    needs no CUDA context):
    the part's file for each dtype, then, for a timed part (in a job that grades it, not one that
    only compiles), the reference solution it is timed against, compiled from now on in the
    background: ``{(tag, part key, dtype): (translation unit, Future of the cubin)}`` (tag
    ``submission`` or ``reference``, as the worker's ``build`` names them). Empty on other
    backends, and where the file cannot be read or its ``#include`` lines are refused: the worker's
    own compile then reports it."""
    import importlib

    from grader.source.directives import check_includes
    from grader.core.errors import ScangradeError
    from grader.grading.intake import read_source
    from grader.assignment.parts import PARTS, part_source

    if not kind.compiles_ahead:
        return {}
    ahead = importlib.import_module(kind.module).compile_ahead
    pc = cfg.parts[part.key]
    try:
        source = read_source(Path(job.source))
        check_includes(source, filename=part.filename)
    except (OSError, ScangradeError):
        return {}
    builds = [(("submission", part.key, d), part_source(part, source, pc=pc, dtype=d), part.filename)
              for d in pc.dtypes]
    if pc.timing is not None and kind.times_kernels and not (job.earlier_failed or job.compile_only):
        ref = PARTS[pc.timing.reference]
        ref_file = SOLUTIONS / ref.filename
        if ref_file.is_file():
            builds.append((("reference", ref.key, pc.dtypes[0]),
                           part_source(ref, ref_file.read_text(), pc=cfg.parts.get(ref.key, pc), dtype=pc.dtypes[0]),
                           ref.filename))
    futures = ahead(builds, sandbox=cfg.emulator.sandbox)
    return {tag: (text, futures[tag]) for tag, text, _ in builds}


def draw_ahead(kind, job, cfg, part, cases):
    """On a GPU, the inputs of this worker's visible cases that compute-sanitizer does not check (all
    but the checked ones: :class:`~grader.grading.case.cases.CheckMode`) and of its timed sizes, drawn in the background from now (:class:`grader.grading.case.inputs.DrawAhead`):
    the host work is done while compute-sanitizer checks the small cases. A large case's input is
    taken twice where the emulator's checks run beside the GPU (they take it too:
    :class:`grader.grading.worker.beside.BackgroundEmulatorChecks`). None on the emulator (its cases
    are checked as they run: nothing to overlap)."""
    from grader.grading.case.cases import CheckMode
    from grader.grading.case.inputs import DrawAhead
    from grader.assignment.parts import DTYPES

    if not kind.times_kernels:
        return None
    pc = cfg.parts[part.key]
    items = [(c.n, c.seed, DTYPES[c.dtype], c.fractional) for c in cases[job.start:]
             if c.visibility != "hidden" and c.check is not CheckMode.CHECKED]
    takers = [2 if job.checks else 1] * len(items)  # the GPU's run, and the emulator's checks beside it
    if pc.timing is not None and not job.earlier_failed:
        timed = [(n, cfg.seed, DTYPES[pc.dtypes[0]], False) for n in pc.timing.all_sizes]
        items, takers = items + timed, takers + [1] * len(timed)
    return DrawAhead(cfg, part, items, takers) if items else None
