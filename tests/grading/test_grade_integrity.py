"""Grade integrity: what a student sees depends on no hidden case, the profile's output is checked,
and student code cannot tell the emulator by a macro (issue 19, "Grade integrity")."""

from __future__ import annotations

from pathlib import Path

from grader.backends import Selection
from grader.assignment.config import load_config, load_private
from grader.grading.runner import grade
from tests.conftest import ATTACKS, BROKEN, ROOT, SOLUTIONS, write_config
from tests.backends.test_profile import P3_PROFILE  # Part 3's profile as shipped, at n = 256

EMULATOR = Selection("emulator", "test")
PART3 = "part3_conflict_free"


def _part3_config(tmp_path: Path, *, hidden: list[int] | None = None, sizes: tuple[int, ...] = (5, 256)):
    """Part 3 alone (int32, BLOCK_SIZE 128) with its profile, and a private config of ``hidden`` sizes."""
    folder = tmp_path / f"config-{'-'.join(map(str, hidden or []))}"
    folder.mkdir()
    path = write_config(folder, sizes={PART3: list(sizes)}, extra="emulator:\n  workers: 1\n")
    path.write_text(path.read_text() + P3_PROFILE)
    cfg = load_config(path)
    if hidden:
        private = folder / "private.yaml"
        private.write_text(f"seed: 99\nparts:\n  {PART3}:\n    hidden_sizes: {hidden}\n")
        cfg = load_private(cfg, private)
    return cfg


def _submit(tmp_path: Path, text: str, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / f"{PART3}.cu").write_text(text)
    return folder


def test_the_profile_shows_nothing_of_the_hidden_sizes(tmp_path):
    """The attack encodes the n of the launch before the profiled one as bank conflicts: the profile
    must come from a run no hidden case preceded, so it reads the same whatever the hidden sizes."""
    folder = _submit(tmp_path, (ATTACKS / "profile_leaks_hidden_sizes.cu").read_text(), "attack")
    profiles = []
    for hidden in ([77], [199]):
        part = grade(folder, cfg=_part3_config(tmp_path, hidden=hidden), selection=EMULATOR).parts[0]
        assert [c.status for c in part.cases] == ["pass"] * len(part.cases), part.cases
        assert [c.n for c in part.cases if c.visibility == "hidden"] == hidden
        profiles.append(part.profile)
        assert part.phases_s["profile"] > 0 and part.phases_s["hidden"] > 0, part.phases_s
        assert str(hidden[0]) not in part.profile.message
    assert profiles[0] == profiles[1]
    assert profiles[0].conflict_wavefronts == 0  # a fresh module: no launch came before the profiled one


def test_a_kernel_that_skips_its_work_in_the_profiled_launch_gets_no_profile_points(tmp_path):
    """Part 2's conflicted scan as Part 3, returning at once in the first launch of its process (a
    __device__ flag) to skip the profiled launch: every run of a case starts with fresh __device__
    variables too (docs/security.md), so the skip shows in the cases, and the profile scores 0."""
    text = (ATTACKS / "profile_skips_work.cu").read_text()
    cfg = _part3_config(tmp_path)
    part = grade(_submit(tmp_path, text, "skips"), cfg=cfg, selection=EMULATOR).parts[0]
    assert [c.status for c in part.cases] == ["pass", "fail", "fail"], part.cases  # n = 1, 5, 256
    assert all("nothing was written to out" in c.message for c in part.cases[1:]), part.cases
    assert (part.profile.points, part.profile.max_points) == (0.0, 4.0)
    assert part.profile.message.startswith("not profiled"), part.profile.message
    # Computed, the same conflicted scan is scored on its conflicts (3.4x the reference's wavefronts here).
    part2 = (SOLUTIONS / "part2_blelloch.cu").read_text().replace("blelloch_scan(", "blelloch_scan_cf(")
    honest = grade(_submit(tmp_path, part2, "honest"), cfg=cfg, selection=EMULATOR).parts[0]
    assert honest.profile.points < 4.0 and honest.profile.conflict_wavefronts > 0
    assert "did not compute" not in honest.profile.message


def test_no_macro_tells_student_code_it_runs_on_the_emulator(tmp_path):
    """A serial scan for ``__SCANGRADE_EMULATOR__`` and a Blelloch scan without barriers for a GPU:
    the emulator compiles what a GPU would, and its checks fail it."""
    folder = tmp_path / "two-scans"
    folder.mkdir()
    (folder / "part2_blelloch.cu").write_text((ATTACKS / "emulator_macro_two_scans.cu").read_text())
    cfg = load_config(write_config(tmp_path, sizes={"part2_blelloch": [5, 100, 256]},
                                   extra="emulator:\n  workers: 1\n"))
    part = grade(folder, cfg=cfg, selection=EMULATOR).parts[0]
    assert part.status == "fail" and part.points < part.max_points / 2, [(c.name, c.status) for c in part.cases]
    assert any(c.kind == "race" for c in part.cases), [(c.name, c.kind, c.message[:200]) for c in part.cases]


def test_no_macro_of_the_emulator_names_it(tmp_path):
    """What the emulator's compile defines for a file that includes every stub CUDA header it
    supports: no macro name says scangrade or emulator (the runtime's reserved ``__SG_`` names are
    refused in student code)."""
    import subprocess

    from grader.backends.emulator import EmulatorBackend
    from grader.backends.emulator.build import STUB_INCLUDE_DIR

    source = tmp_path / "all.cu"
    headers = [h.name for h in sorted(STUB_INCLUDE_DIR.glob("*.h")) if "#error" not in h.read_text()]
    assert "cuda_runtime.h" in headers
    source.write_text("".join(f"#include <{name}>\n" for name in headers))
    backend = EmulatorBackend(workers=1, nvcc_check=False)
    try:
        argv = backend.toolchain.module_command(source, tmp_path / "all.so")
    finally:
        backend.close()
    argv = argv[:argv.index("-c")] + ["-dM", "-E", str(source)]
    names = [line.split()[1].split("(")[0] for line in subprocess.run(argv, capture_output=True, text=True,
                                                                      check=True).stdout.splitlines()]
    assert "__CUDA_ARCH__" in names and len(names) > 100
    told = [n for n in names if "SCANGRADE" in n.upper() or "EMULAT" in n.upper()]
    assert not told, told


def test_a_serial_part3_gets_no_profile_points_and_is_told_why(tmp_path):
    """Thread 0 loops over global memory (issue 32): every case passes, but a scan without shared
    memory earns no bank-conflict points (4/4 before: 0 wavefronts is at most the reference's), and
    the report gives its span against the reference's."""
    from grader.render.text import render_text

    text = (ATTACKS / "profile_serial_scan.cu").read_text()
    result = grade(_submit(tmp_path, text, "serial"), cfg=_part3_config(tmp_path), selection=EMULATOR)
    part = result.parts[0]
    assert [c.status for c in part.cases] == ["pass"] * 3, part.cases
    prof = part.profile
    assert (prof.points, prof.max_points) == (0.0, 4.0)
    assert prof.message.startswith("no points: the kernel makes no shared-memory access at n = 256"), prof.message
    assert prof.wavefronts == 0 and prof.shared_requests == 0 and prof.barriers == 0
    assert prof.span_steps == 2 * 256 > 3 * prof.reference_span_steps, prof  # one load, one store per element
    assert f"span {prof.span_steps} memory operations of one thread" in render_text(result)


def _profile(tmp_path: Path, path: Path, name: str):
    """Part 3's profile phase alone (no cases) for the file at ``path``, with the shipped config's
    BLOCK_SIZE and profile (n = 1024), as the grader takes it."""
    from grader.assignment.parts import PARTS
    from grader.grading.profiling import profile_phase
    from grader.core.results import CaseResult
    from tests.conftest import shipped_part3_config

    passed = [CaseResult(name="n=1", n=1, dtype="int32", seed=1, status="pass", points=1, max_points=1)]
    workdir = tmp_path / name
    workdir.mkdir()
    return profile_phase(cfg=load_config(shipped_part3_config(workdir)), part=PARTS[PART3],
                         source=path.read_text(), results=passed, workdir=workdir, solutions=SOLUTIONS)


def test_serial_scans_dressed_as_parallel_ones_get_no_profile_points(tmp_path):
    """A serial scan in shared memory, 16 bytes a step (shared traffic, no conflict): its span gives
    it away; a chain of one element per barrier spread over the threads (small span): its barriers."""
    serial = _profile(tmp_path, ATTACKS / "profile_serial_in_shared.cu", "shared")
    assert serial.points == 0.0 and serial.shared_requests > 0 and serial.conflict_wavefronts == 0
    assert serial.span_steps > 3 * serial.reference_span_steps, serial
    assert serial.message.startswith("no points: the scan is not parallel: one thread makes "
                                     f"{serial.span_steps} memory operations (its span) at n = 1024"), serial.message
    chain = _profile(tmp_path, ATTACKS / "profile_barrier_chain.cu", "chain")
    assert chain.points == 0.0 and chain.span_steps <= chain.reference_span_steps, chain
    assert chain.barriers == 1023 > 3 * chain.reference_barriers, chain
    assert "its block passes 1023 barriers" in chain.message, chain.message


def test_parallel_part3_scans_other_than_blelloch_keep_their_profile_points(tmp_path):
    """Hillis and Steele's scan (twice the reference's wavefronts and more: partial points) and a
    warp-shuffle scan (few shared accesses, 2 barriers: all points) pass the span and barrier
    bounds; so does the reference, with the bars the shipped config gives a student release."""
    for name in ("part3_correct_hillis_steele.cu", "part3_correct_warp_shuffle.cu"):
        prof = _profile(tmp_path, BROKEN / name, name[:-3])
        assert prof.points > 0.0 and "not parallel" not in prof.message, (name, prof)
        assert prof.span_steps <= 3 * prof.reference_span_steps and prof.barriers <= prof.reference_barriers, prof
    shipped = load_config(ROOT / "config.yaml").parts[PART3].profile
    ref = _profile(tmp_path, SOLUTIONS / f"{PART3}.cu", "reference")
    assert ref.points == 4.0 and (ref.span_steps, ref.barriers) == (ref.reference_span_steps, ref.reference_barriers)
    assert shipped.reference_barriers == 2 * 9 + 1 + 2  # BLOCK_SIZE 512: the sweeps' levels, both ways, and 1


def test_memcpy_in_a_kernel_is_checked_and_its_bytes_are_steps(tmp_path):
    """libc's memcpy touched memory no hook saw: a serial scan through a local array had a span of 1
    and kept its profile points, and a copy past the output's end escaped the bounds checks. The
    emulator's memcpy checks and counts every byte range (in 8-byte words)."""
    text = (ATTACKS / "profile_memcpy_serial.cu").read_text()
    prof = _profile(tmp_path, ATTACKS / "profile_memcpy_serial.cu", "memcpy")
    assert prof.points == 0.0 and prof.span_steps == 1024 // 2 * 2 + 1, prof  # in and out, 8 bytes a step
    assert "the scan is not parallel" in prof.message, prof.message
    past_end = text.replace("memcpy(out, buf, n * sizeof(scan_t));", "memcpy(out, buf, (n + 3) * sizeof(scan_t));")
    assert past_end != text
    part = grade(_submit(tmp_path, past_end, "past-end"), cfg=_part3_config(tmp_path), selection=EMULATOR).parts[0]
    assert [c.status for c in part.cases] == ["fail"] * 3, [(c.status, c.message[:120]) for c in part.cases]
    assert all(c.kind == "out-of-bounds" and "part3_conflict_free.cu:20" in c.message for c in part.cases), part.cases[0]
