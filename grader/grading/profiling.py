"""Running the memory-access profile of a part: the worker's profile phase.

The counts come from the CPU emulator on every machine (they depend only on the addresses each
warp touches); :mod:`grader.core.access_profile` holds what they are and how they score.

What a student sees must depend on no hidden case, and a kernel can keep state across launches
(a ``__device__`` global that records every n it was launched with, then encodes them as bank
conflicts in the profiled launch). So the worker takes the profile after the visible cases and the
timing, before any hidden case (:func:`profile_phase`), in an emulator of its own with the part
compiled afresh (no launch of the cases precedes the profiled one in its process); once the hidden
cases have run, :func:`profile_after_hidden` only takes the points away when one of them failed.
"""

from __future__ import annotations

from typing import NamedTuple

from grader.core.access_profile import MemoryProfile, score_profile

__all__ = ["ProfiledRun", "grown_counts", "profile_after_hidden", "profile_phase", "profile_run", "profile_runs", "roofline_counts",
           "roofline_phase"]


class ProfiledRun(NamedTuple):
    """What :func:`profile_run` measured: the ``profile`` of the launches, ``wrong``: why their
    result is not what a case would pass ("" when it is), from :func:`grader.grading.case.checks.check_run`,
    ``launches``: how many kernel launches the plan made, and ``configs``: those launches'
    :class:`~grader.assignment.plans.LaunchConfig`, in order."""

    profile: MemoryProfile
    wrong: str
    launches: int = 0
    configs: tuple = ()


def profile_run(backend, module, *, cfg, part, n: int, dtype_name: str, blocks: int = 1, pc=None) -> ProfiledRun:
    """Run ``part``'s launches once on the input of size ``n`` with the profile on (the emulator),
    and check their output as a case's is checked (guard zones, input, output against the
    reference scan), so a kernel that skips or shortens its work in the profiled launch shows.

    Args:
        backend: an :class:`~grader.backends.emulator.EmulatorBackend`.
        module: ``part``'s module compiled by it.
        cfg: the :class:`~grader.assignment.config.Config` (inputs, block size, seed).
        part: the :class:`~grader.assignment.parts.PartSpec` whose launch plan runs.
        n, dtype_name: the input's size and ``scan_t`` (``int32``...).
        blocks: the blocks of each launch profiled (0: all).
        pc: ``part``'s :class:`~grader.assignment.config.PartConfig` (default ``cfg.parts[part.key]``; a
            reference solution the config has no section for runs under the timed part's).

    Returns:
        a :class:`ProfiledRun`.

    Raises:
        KernelError, LaunchError: the kernel failed.
    """
    from grader.grading.case.checks import check_run
    from grader.grading.case.inputs import make_input, reference_output
    from grader.assignment.parts import DTYPES
    from grader.assignment.plans import Run, plan_launches, prepare

    pc = pc or cfg.parts[part.key]
    dtype = DTYPES[dtype_name]
    run = Run(backend, module, dtype)
    x = make_input(cfg, part, n, cfg.seed, dtype)
    d_in = run.buffer("in", n, x, output=False)
    plan = prepare(run, part, pc, d_in, n)
    backend.start_profile(module, blocks=blocks)
    try:
        plan.run()
    finally:
        profile = backend.take_profile(module, blocks=blocks)
    verdict = check_run(run, plan, d_in, x, reference_output(part, x), part=part, pc=pc, cfg=cfg)
    return ProfiledRun(profile, "" if verdict.status == "pass" else verdict.message, len(plan.launches),
                       tuple(plan_launches(part, pc, n, dtype)))


def profile_runs(cfg, part) -> list:
    """The runs of ``part``'s profile phase to size its emulator's device memory for
    (:class:`grader.grading.case.cases.SizedRun`): the part's and its reference's plan at the profile's size
    and the part's first dtype; none where the part has no profile."""
    from grader.grading.case.cases import SizedRun
    from grader.assignment.parts import PARTS

    pconf = cfg.parts[part.key].profile
    if pconf is None:
        return []
    dtype = cfg.parts[part.key].dtypes[0]
    return [SizedRun(spec, cfg.parts.get(spec.key, cfg.parts[part.key]), pconf.size, dtype)
            for spec in (part, PARTS[pconf.reference])]


def profile_phase(*, cfg, part, source: str, results: list, workdir, solutions, earlier_failed: bool = False,
                  emulator_factory=None, runtime_flags: tuple[str, ...] = ()):
    """The profile of a part, taken before its hidden cases: its :class:`~grader.core.performance.Profile`
    (score it again with :func:`profile_after_hidden` once they ran). Never raises for problems of
    the submission.

    The counts do not depend on the machine, so they are always taken by the CPU emulator: an
    emulator backend made for the phase, whatever backend the cases ran on, with ``source`` compiled
    afresh in it, so the profiled launch is the first launch of the submission in its process and
    no state a kernel kept from the cases' launches reaches it (they may have been on the same
    emulator), its device memory what the profiled runs need (:func:`profile_runs`). The
    reference solution is profiled the same way on the same input; its wavefronts, span and
    barriers are the bars (:func:`grader.core.access_profile.score_profile`).

    Args:
        cfg: the Config; part: the PartSpec; source: the submission's text.
        results: the part's CaseResults so far (the visible ones): profiled only when every one passed.
        workdir: a folder for the compiles (a pathlib.Path).
        solutions: the folder of the reference solutions (absent from a student release).
        earlier_failed: a case before this worker's first did not pass (it hung): not profiled.
        emulator_factory: makes the emulator backend (default: an
            :class:`~grader.backends.emulator.EmulatorBackend` with the config's workers and sandbox,
            without checks and without the nvcc cross-check, which the part's compile already had).
        runtime_flags: the default emulator's runtime flags
            (:class:`~grader.backends.emulator.build.EmulatorToolchain`): those of the runtime this machine
            builds anyway, so the phase builds no other (the counts are the same whatever they are:
            they are the runtime's own arithmetic on the kernel's addresses, not times).

    Raises:
        ResourceLimit: the machine's address-space limit leaves too little for the emulator (not
            the submission's problem: the part is an error, its message saying what to do).
    """
    from grader.core.errors import CompileError, ResourceLimit, ScangradeError
    from grader.grading.compile import compile_part
    from grader.core.performance import Profile

    pconf = cfg.parts[part.key].profile
    if earlier_failed or any(r.status != "pass" for r in results):
        return Profile(0.0, pconf.points, NOT_EVERY_CASE)
    dtype = cfg.parts[part.key].dtypes[0]
    try:
        emu = emulator_factory() if emulator_factory is not None else _phase_emulator(cfg, part, runtime_flags)
    except ResourceLimit:
        raise
    except ScangradeError as exc:
        return Profile(0.0, pconf.points, f"not profiled: the CPU emulator, which counts bank conflicts, "
                                          f"cannot start here: {exc}")

    def compile_for(spec, text: str, tag: str):
        return compile_part(emu, spec, text, pc=cfg.parts.get(spec.key, cfg.parts[part.key]), dtype=dtype,
                            workdir=workdir / f"profile-{tag}-{spec.key}-{dtype}")

    try:
        try:
            module = compile_for(part, source, "submission")
        except CompileError as exc:
            return Profile(0.0, pconf.points, f"not profiled: the CPU emulator cannot compile the part: {exc}")
        try:
            sub, wrong, *_ = profile_run(emu, module, cfg=cfg, part=part, n=pconf.size, dtype_name=dtype,
                                     blocks=pconf.blocks)
        except ResourceLimit:
            raise
        except ScangradeError as exc:
            return Profile(0.0, pconf.points, f"not profiled: the kernel failed under the CPU emulator: {exc}")
        if wrong:  # counts of a launch that did not compute the scan say nothing of its bank conflicts
            return Profile(0.0, pconf.points, f"not scored: the profiled launch (n = {pconf.size}, {dtype}) did not "
                                              f"compute the scan, so its counts are not the kernel's: {wrong}")
        bars = _reference_bars(emu, compile_for, cfg=cfg, pconf=pconf, dtype=dtype, solutions=solutions)
        if isinstance(bars, Profile):
            return bars
        ref_wf, against, ref_span, ref_barriers, ref_profile = bars
        return score_profile(pconf, sub, ref_wf, n=pconf.size, against=against, reference_span_steps=ref_span,
                             reference_barriers=ref_barriers, reference=ref_profile)
    finally:
        emu.close()


def _phase_emulator(cfg, part, runtime_flags: tuple[str, ...]):
    """The profile phase's default emulator (see :func:`profile_phase`'s ``emulator_factory``).

    Raises:
        ScangradeError: it cannot start here (ResourceLimit: the address-space limit).
    """
    from grader.backends.emulator import EmulatorBackend
    from grader.grading.case.cases import device_memory_bytes

    return EmulatorBackend(workers=cfg.emulator.workers, sandbox=cfg.emulator.sandbox, nvcc_check=False,
                           device_memory=device_memory_bytes(profile_runs(cfg, part)),
                           target_arch=cfg.target_arch, runtime_flags=runtime_flags)


def _reference_bars(emu, compile_for, *, cfg, pconf, dtype: str, solutions):
    """The bars a profile is scored against: ``(wavefronts, what they are, span steps, barriers,
    profile)`` of the reference solution profiled on ``emu`` as the submission was (``compile_for(spec,
    text, tag)`` compiles it; its :class:`~grader.core.access_profile.MemoryProfile` last, for its
    worst request's picture), or the config's where the solution is not here (a student release,
    no profile); all None where the profile earns no points. A :class:`~grader.core.performance.Profile` that says so
    where the reference fails under the emulator.

    Raises:
        ResourceLimit: the machine's address-space limit leaves too little for the emulator.
    """
    from grader.assignment.parts import PARTS
    from grader.core.errors import ResourceLimit, ScangradeError
    from grader.core.performance import Profile

    ref_spec = PARTS[pconf.reference]
    ref_file = solutions / ref_spec.filename
    if pconf.points and ref_file.is_file():
        try:
            ref_module = compile_for(ref_spec, ref_file.read_text(), "reference")
            ref, ref_wrong, *_ = profile_run(emu, ref_module, cfg=cfg, part=ref_spec, n=pconf.size,
                                             dtype_name=dtype, blocks=pconf.blocks)
        except ResourceLimit:
            raise
        except ScangradeError as exc:  # the course's own reference must work; say so plainly
            ref_wrong = str(exc)
        if ref_wrong:
            return Profile(0.0, pconf.points, f"not scored: the reference solution fails under the emulator: "
                                              f"{ref_wrong}")
        if ref.launches:  # else the runtime sent no step counts: those bounds are not checked
            return ref.wavefronts, f"the {ref_spec.label} reference", ref.span_steps, ref.barriers, ref
        return ref.wavefronts, f"the {ref_spec.label} reference", None, None, ref
    if pconf.points and pconf.reference_wavefronts is not None:
        return (pconf.reference_wavefronts, "the configured reference", pconf.reference_span_steps,
                pconf.reference_barriers, None)
    return None, "", None, None, None


#: The message of a part profiled with a case that did not pass.
NOT_EVERY_CASE = "not profiled: the profile is scored only when every case passes"


def profile_after_hidden(profile, hidden: list):
    """The profile a part earns once its hidden cases have run: ``profile`` as
    :func:`profile_phase` took it, or no points when a hidden case did not pass (the profile is
    scored only when every case passes; nothing of the counts is kept then). None stays None."""
    from grader.core.performance import Profile

    if profile is None or all(c.status == "pass" for c in hidden):
        return profile
    return Profile(0.0, profile.max_points, NOT_EVERY_CASE + " (a hidden case did not)")


# ---- the roofline of a timed part on the emulator (grader.grading.analysis) -----------------------------

def roofline_counts(backend, module, *, cfg, part, n: int, dtype_name: str, pc=None):
    """The counts a roofline needs from one run of ``part``'s launches at ``n`` with every block
    profiled (:func:`profile_run`, ``blocks=0``): ``(RooflineCounts, wrong)``, read off the
    profile (:attr:`~grader.core.access_profile.MemoryProfile.moved_bytes`, ``span_steps``, ``barriers``; the
    span and barriers None where the runtime sent no step counts); ``wrong`` as in
    :class:`ProfiledRun`.

    Raises:
        KernelError, LaunchError: the kernel failed.
    """
    from grader.grading.analysis import RooflineCounts
    from grader.grading.prediction import kernel_counts
    run = profile_run(backend, module, cfg=cfg, part=part, n=n, dtype_name=dtype_name, blocks=0, pc=pc)
    prof = run.profile
    counted = bool(prof.launches)
    kernels = tuple(sorted(kernel_counts(prof, run.configs).items())) if counted else ()
    return RooflineCounts(bytes=prof.moved_bytes, launches=run.launches,
                          span_steps=prof.span_steps if counted else None,
                          barriers=prof.barriers if counted else None, kernels=kernels), run.wrong


def grown_counts(backend, module, *, cfg, part, n: int, dtype_name: str, pc=None):
    """:func:`roofline_counts` at n with its ``span_exponent`` (:func:`grader.grading.analysis.span_exponent`)
    from a second count at n / 4 (none below n = 64, or without a span: 0). A loop of one thread
    over the elements has a span that grows as n, a tree scan's barely: kept as counted, the span
    of the loop would bound it at larger sizes by the length of the input it was counted on."""
    from grader.grading.analysis import span_exponent
    counts, wrong = roofline_counts(backend, module, cfg=cfg, part=part, n=n, dtype_name=dtype_name, pc=pc)
    if wrong or counts.span_steps is None or n < 64:
        return counts, wrong
    small, small_wrong = roofline_counts(backend, module, cfg=cfg, part=part, n=n // 4, dtype_name=dtype_name, pc=pc)
    if small_wrong:
        return counts, wrong
    return counts._replace(span_exponent=span_exponent(small.span_steps, counts.span_steps),
                           small_kernels=small.kernels), wrong


def roofline_phase(backend, *, cfg, part, module, reference=None):
    """A timed part's roofline on the CPU emulator (:func:`grader.grading.analysis.roofline`): its counts and
    the reference solution's at ``min(smallest timed size, roofline.max_n)``, the part's first dtype,
    on ``backend`` (the emulator the cases ran on, ``module`` the part compiled there), bounding
    every timed size. Never raises for the submission's problems: a kernel that fails or computes
    a wrong scan here gets a Roofline whose message says so, without rows.

    Args:
        reference: ``(spec, module)`` of the reference solution compiled on ``backend``, or None.
    """
    from grader.grading.analysis import roofline
    from grader.core.errors import ResourceLimit, ScangradeError
    from grader.core.performance import Roofline

    pc = cfg.parts[part.key]
    rc = cfg.roofline
    n = min(min(pc.timing.all_sizes), rc.max_n)
    dtype = pc.dtypes[0]

    def empty(message: str) -> Roofline:
        return Roofline(target=rc.target, peak_dram_gbps=rc.dram_gbps, step_ns=rc.step_ns, launch_us=rc.launch_us,
                        message=message, n=n, dtype=dtype)
    try:
        counts, wrong = grown_counts(backend, module, cfg=cfg, part=part, n=n, dtype_name=dtype)
    except ResourceLimit:
        raise
    except ScangradeError as exc:
        return empty(f"no estimate: the kernel failed under the CPU emulator: {exc}")
    if wrong:
        return empty(f"no estimate: the counted run (n = {n}, {dtype}) did not compute the scan: {wrong}")
    ref_counts, against = None, "the reference solution"
    if reference is not None:
        ref_spec, ref_module = reference
        try:
            ref_counts, ref_wrong = grown_counts(backend, ref_module, cfg=cfg, part=ref_spec, n=n, dtype_name=dtype,
                                                  pc=cfg.parts.get(ref_spec.key, pc))
        except ResourceLimit:
            raise
        except ScangradeError:
            ref_counts, ref_wrong = None, "failed"
        if ref_wrong:
            ref_counts = None
        against = f"the {ref_spec.label} reference"
    roof = roofline(rc, n=n, dtype=dtype, sizes=pc.timing.all_sizes, counts=counts, reference=ref_counts,
                    against=against)
    if rc.predict_on is None or not counts.kernels:
        return roof
    from dataclasses import replace
    from grader.core.gpu_models import GPU_MODELS
    from grader.grading.prediction import prediction
    return replace(roof, prediction=prediction(GPU_MODELS[rc.predict_on], part=part, pc=pc, dtype=dtype, counts=counts,
                                               reference=ref_counts,
                                               reference_part=reference[0] if reference is not None else None,
                                               against=against))
