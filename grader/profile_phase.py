"""Running the memory-access profile of a part: the worker's profile phase (after the cases).

The counts come from the CPU emulator on every machine (they depend only on the addresses each
warp touches); :mod:`grader.profile` holds what they are and how they score.
"""

from __future__ import annotations

from grader.profile import MemoryProfile, score_profile

__all__ = ["profile_phase", "profile_run"]


def profile_run(backend, module, *, cfg, part, n: int, dtype_name: str, blocks: int = 1) -> MemoryProfile:
    """Run ``part``'s launches once on the input of size ``n`` with the profile on (the emulator).

    Args:
        backend: an :class:`~grader.backends.emulator.EmulatorBackend`.
        module: ``part``'s module compiled by it.
        cfg: the :class:`~grader.config.Config` (inputs, block size, seed).
        part: the :class:`~grader.parts.PartSpec` whose launch plan runs.
        n, dtype_name: the input's size and ``scan_t`` (``int32``...).
        blocks: the blocks of each launch profiled (0: all).

    Raises:
        KernelError, LaunchError: the kernel failed.
    """
    from grader.execute import make_input
    from grader.parts import DTYPES
    from grader.plans import Run, prepare

    pc = cfg.parts[part.key]
    dtype = DTYPES[dtype_name]
    run = Run(backend, module, dtype)
    d_in = run.buffer("in", n, make_input(cfg, part, n, cfg.seed, dtype), output=False)
    plan = prepare(run, part, pc, d_in, n)
    backend.start_profile(module, blocks=blocks)
    try:
        plan.run()
    finally:
        profile = backend.take_profile(module, blocks=blocks)
    return profile


def profile_phase(backend, *, cfg, part, source: str, modules: dict, results: list, workdir, solutions,
                  emulator_factory=None):
    """The profile phase of a part (the worker, after its cases): its
    :class:`~grader.results.Profile`. Never raises for problems of the submission.

    The counts do not depend on the machine, so they are always taken by the CPU emulator: by
    ``backend`` when it is one, else by an emulator backend made for the phase (on a GPU machine).

    Args:
        backend: the backend the cases ran on.
        cfg: the Config; part: the PartSpec; source: the submission's text.
        modules: dtype -> the submission's modules compiled by ``backend`` (reused on the emulator).
        results: the part's CaseResults (profiled only when every one passed).
        workdir: a folder for the compiles (a pathlib.Path).
        solutions: the folder of the reference solutions (absent from a student release).
        emulator_factory: makes the emulator backend when ``backend`` is not one (default:
            ``create_backend("emulator", ...)`` with the config's workers and sandbox).
    """
    from grader.errors import CompileError, ScangradeError
    from grader.parts import DTYPES, PARTS, part_header
    from grader.results import Profile

    pconf = cfg.parts[part.key].profile
    if any(r.status != "pass" for r in results):
        return Profile(0.0, pconf.points, "not profiled: the profile is scored only when every case passes")
    dtype = cfg.parts[part.key].dtypes[0]
    own = None
    emu = backend
    if getattr(backend, "name", "") != "emulator":
        try:
            if emulator_factory is None:
                from grader.backends import create_backend
                own = create_backend("emulator", emulator_workers=cfg.emulator_workers, checks=False,
                                     emulator_sandbox=cfg.emulator_sandbox)
            else:
                own = emulator_factory()
        except ScangradeError as exc:
            return Profile(0.0, pconf.points, f"not profiled: the CPU emulator, which counts bank conflicts, "
                                              f"cannot start here: {exc}")
        emu = own

    def compile_for(spec, text: str, tag: str):
        pcfg = cfg.parts.get(spec.key, cfg.parts[part.key])
        header = part_header(spec, block_size=pcfg.block_size, dtype=DTYPES[dtype],
                             items_per_thread=pcfg.items_per_thread)
        folder = workdir / f"profile-{tag}-{spec.key}-{dtype}"
        folder.mkdir(parents=True, exist_ok=True)
        return emu.compile(source=header + text, filename=spec.filename, kernels=spec.kernels, workdir=folder)

    try:
        try:
            module = modules[dtype] if own is None else compile_for(part, source, "submission")
        except CompileError as exc:
            return Profile(0.0, pconf.points, f"not profiled: the CPU emulator cannot compile the part: {exc}")
        try:
            sub = profile_run(emu, module, cfg=cfg, part=part, n=pconf.size, dtype_name=dtype, blocks=pconf.blocks)
        except ScangradeError as exc:
            return Profile(0.0, pconf.points, f"not profiled: the kernel failed under the CPU emulator: {exc}")
        ref_wf, against = None, ""
        ref_spec = PARTS[pconf.reference]
        ref_file = solutions / ref_spec.filename
        if pconf.points and ref_file.is_file():
            try:
                ref_module = compile_for(ref_spec, ref_file.read_text(), "reference")
                ref = profile_run(emu, ref_module, cfg=cfg, part=ref_spec, n=pconf.size, dtype_name=dtype,
                                  blocks=pconf.blocks)
            except ScangradeError as exc:  # the course's own reference must work; say so plainly
                return Profile(0.0, pconf.points, f"not scored: the reference solution fails under the emulator: "
                                                  f"{exc}")
            ref_wf, against = ref.wavefronts, f"the {ref_spec.label} reference"
        elif pconf.points and pconf.reference_wavefronts is not None:
            ref_wf, against = pconf.reference_wavefronts, "the configured reference"
        return score_profile(pconf, sub, ref_wf, n=pconf.size, against=against)
    finally:
        if own is not None:
            own.close()
