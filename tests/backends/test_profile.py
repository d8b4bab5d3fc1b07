"""The emulator's memory-access profile: shared-memory bank conflicts and global sectors per
request, counted from the addresses the lanes of a warp touch, against hand-computed values.

Kernels: tests/emulator_kernels/bank_conflicts.cu and blelloch_profile.cu (one warp of 32 threads).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from grader.backends import Selection
from grader.backends.emulator import EmulatorBackend
from grader.assignment.config import ProfileConfig, load_config
from grader.core.errors import ConfigError
from grader.core.kernels import KernelSpec, Param
from grader.assignment.parts import PartSpec, part_header
from grader.core.access_profile import AccessSite, LaunchSteps, MemoryProfile, report_lines, score_profile
from grader.core.results import result_from_dict
from grader.grading.runner import grade
from tests.conftest import EMULATOR_KERNELS, ROOT, SOLUTIONS, shipped_part3_config, write_config

pytest_plugins = ["pytester"]

INT = np.dtype(np.int32)


def spec(name: str, *params: tuple[str, str, str]) -> KernelSpec:
    return KernelSpec(name, tuple(Param(*p) for p in params))


OUT_INT = (("out", "int*", "ptr"), ("k", "int", "int"))
IN_OUT_INT = (("in", "const int*", "ptr"), ("out", "int*", "ptr"), ("k", "int", "int"))
CONFLICT_KERNELS = (spec("strided_shared", *OUT_INT), spec("broadcast", *OUT_INT), spec("shared64", *OUT_INT),
                    spec("global_stride", *IN_OUT_INT), spec("repeated", *OUT_INT),
                    spec("one_lane_loop", *OUT_INT), spec("steps", *OUT_INT))
SCAN_KERNELS = (spec("blelloch_unpadded", *IN_OUT_INT), spec("blelloch_padded", *IN_OUT_INT))


def marker_line(filename: str, marker: str) -> int:
    """1-based line of ``// LINE:<marker>`` in a kernel file."""
    for n, line in enumerate((EMULATOR_KERNELS / filename).read_text().splitlines(), start=1):
        if f"LINE:{marker}" in line:
            return n
    raise AssertionError(f"no LINE:{marker} in {filename}")


@pytest.fixture(scope="module")
def emu() -> EmulatorBackend:
    be = EmulatorBackend(workers=1, nvcc_check=False)  # the default cache: the runtime the grader built
    yield be
    be.close()


def _compile(emu: EmulatorBackend, folder: Path, filename: str, kernels: tuple[KernelSpec, ...]):
    part = PartSpec("test_part", 0, "test", filename, kernels, False, None)
    text = part_header(part, block_size=32, dtype=INT) + (EMULATOR_KERNELS / filename).read_text()
    return emu.compile(source=text, filename=filename, kernels=kernels, workdir=folder)


@pytest.fixture(scope="module")
def conflicts(emu: EmulatorBackend, tmp_path_factory: pytest.TempPathFactory):
    return _compile(emu, tmp_path_factory.mktemp("conflicts"), "bank_conflicts.cu", CONFLICT_KERNELS)


@pytest.fixture(scope="module")
def scans(emu: EmulatorBackend, tmp_path_factory: pytest.TempPathFactory):
    return _compile(emu, tmp_path_factory.mktemp("scans"), "blelloch_profile.cu", SCAN_KERNELS)


def profile_of(emu: EmulatorBackend, module, kernel: str, k: int, *, with_input: bool = False, grid: int = 1,
               blocks: int = 1) -> tuple[MemoryProfile, np.ndarray]:
    """Launch ``kernel`` (``grid`` blocks of 32 threads) with the profile on; its profile and output."""
    out = emu.alloc(64 * grid, INT)
    emu.to_device(np.zeros(64 * grid, INT), out)
    args: list = [out, k]
    if with_input:
        src = emu.alloc(32 * 16, INT)
        emu.to_device(np.arange(32 * 16, dtype=INT), src)
        args = [src, out, k]
    emu.start_profile(module, blocks=blocks)
    emu.launch(module, kernel, grid=grid, block=32, shared_bytes=0, args=args)
    return emu.take_profile(module, blocks=blocks), emu.to_host(out)


def site(profile: MemoryProfile, marker: str, filename: str = "bank_conflicts.cu", *, space: str = "shared",
         store: bool | None = None) -> AccessSite:
    line = marker_line(filename, marker)
    found = [s for s in profile.sites if s.line == line and s.space == space and (store is None or s.store == store)]
    assert len(found) == 1, (marker, profile.sites)
    return found[0]


# ---- shared memory: n-way conflicts ---------------------------------------------------------------

@pytest.mark.parametrize("stride, degree", [(1, 1), (2, 2), (4, 4), (8, 8), (16, 16), (32, 32), (3, 1)])
def test_strided_shared_access_has_the_hand_computed_conflict_degree(emu, conflicts, stride, degree):
    # 32 lanes at words 0, stride, 2*stride...: a power-of-two stride puts min(32, stride) lanes
    # on each used bank; an odd stride spreads them over all 32 banks.
    profile, out = profile_of(emu, conflicts, "strided_shared", stride)
    assert list(out[:32]) == list(range(32))
    for marker, store in (("strided_store", True), ("strided_load", False)):
        s = site(profile, marker, store=store)
        assert (s.requests, s.wavefronts, s.ideal_wavefronts) == (1, degree, 1)
        assert s.conflict_wavefronts == degree - 1
        assert s.worst_degree == degree
        assert s.worst_stride == 4 * stride
    assert profile.conflict_wavefronts == 2 * (degree - 1)
    worst = profile.worst
    if degree == 1:
        assert worst is None and "conflict-free" in profile.summary()
    else:
        assert worst is not None and worst.worst_degree == degree
        assert f"{degree}-way bank conflict" in profile.summary()


def test_broadcast_is_one_wavefront_and_two_words_of_a_bank_are_two(emu, conflicts):
    profile, out = profile_of(emu, conflicts, "broadcast", 5)
    assert list(out[:4]) == [5 + 5, 5 + 6, 5 + 5, 5 + 6]
    b = site(profile, "broadcast_load")  # all 32 lanes read word 0: a broadcast
    assert (b.requests, b.wavefronts, b.ideal_wavefronts, b.worst_degree) == (1, 1, 1, 1)
    two = site(profile, "two_words_load")  # words 0 and 32, both in bank 0, each read by 16 lanes
    assert (two.requests, two.wavefronts, two.ideal_wavefronts, two.worst_degree) == (1, 2, 1, 2)
    # Only lanes 0 and 1 store (a diverged warp): one request of 2 lanes, words 0 and 32.
    st = site(profile, "two_lanes_store", store=True)
    assert (st.requests, st.wavefronts, st.ideal_wavefronts, st.worst_degree) == (1, 2, 1, 2)
    assert profile.conflict_wavefronts == 2


@pytest.mark.parametrize("stride, wavefronts, degree", [(1, 2, 1), (2, 4, 2), (16, 32, 16)])
def test_8_byte_accesses_are_counted_in_half_warps(emu, conflicts, stride, wavefronts, degree):
    # Lane t touches words 2*t*stride and 2*t*stride + 1. Half-warp phases of 16 lanes:
    # stride 1: words 0..31 in each phase, 1 wavefront each; stride 2: lanes t and t + 8 share
    # banks, 2 each; stride 16: every lane in banks 0 and 1, 16 each. Ideal: 2 (one per phase).
    profile, out = profile_of(emu, conflicts, "shared64", stride)
    assert list(out[:32]) == list(range(32))
    for marker, store in (("wide_store", True), ("wide_load", False)):
        s = site(profile, marker, store=store)
        assert s.size == 8
        assert (s.requests, s.wavefronts, s.ideal_wavefronts, s.worst_degree) == (1, wavefronts, 2, degree)


# ---- global memory: sectors per request -----------------------------------------------------------

@pytest.mark.parametrize("stride, sectors", [(1, 4), (2, 8), (4, 16), (8, 32), (16, 32)])
def test_global_sectors_per_request_follow_the_stride(emu, conflicts, stride, sectors):
    # 32 lanes x 4 bytes, lane t at byte 4*t*stride of a 256-byte aligned buffer: 128 * stride
    # bytes spanned, one sector per 32 bytes until every lane has its own (stride >= 8).
    profile, out = profile_of(emu, conflicts, "global_stride", stride, with_input=True)
    assert list(out[:32]) == [t * stride for t in range(32)]
    load = site(profile, "global_load", space="global", store=False)
    assert (load.requests, load.sectors, load.ideal_sectors) == (1, sectors, 4)
    store = site(profile, "global_store", space="global", store=True)
    assert (store.requests, store.sectors, store.ideal_sectors) == (1, 4, 4)
    assert profile.sectors_per_request == pytest.approx((sectors + 4) / 2)
    assert profile.ideal_sectors_per_request == 4.0
    assert profile.wavefronts == 0 and profile.worst is None


# ---- Blelloch scans --------------------------------------------------------------------------------

def test_unpadded_blelloch_scan_has_the_hand_computed_conflicts(emu, scans):
    # 64 elements, 32 threads. At tree offset o (1..32) the d = 32 / o active lanes touch words
    # 2*o apart: lanes t and t + 16/o share a bank, a 2-way conflict for o <= 16 (one lane at
    # o = 32). Up-sweep: 3 accesses x (5 levels x 2 + 1) = 33 wavefronts; down-sweep 4 x 11 = 44;
    # loading and storing the 64 elements: 4 conflict-free requests; clearing the root: 1.
    # Requests: 2 + 18 + 1 + 24 + 2 = 47 (the ideal); wavefronts 82; conflicts 15 + 20 = 35.
    x = np.arange(1, 65, dtype=INT)
    profile, out = _scan(emu, scans, "blelloch_unpadded", x)
    assert list(out) == list(np.concatenate([[0], np.cumsum(x)[:-1]]))
    assert (profile.wavefronts, profile.ideal_wavefronts, profile.conflict_wavefronts) == (82, 47, 35)
    worst = profile.worst
    assert worst is not None and worst.worst_degree == 2
    # global: 2 loads and 2 stores of 32 consecutive ints, 4 sectors each
    assert (profile.global_requests, profile.global_sectors) == (4, 16)
    assert profile.sectors_per_request == 4.0


def test_padded_blelloch_scan_is_conflict_free(emu, scans):
    # i + (i >> 5) moves the second 32 words one bank on: every level's lanes fall in distinct
    # banks (worked through in blelloch_profile.cu's levels), so 47 requests take 47 wavefronts.
    x = np.arange(1, 65, dtype=INT)
    profile, out = _scan(emu, scans, "blelloch_padded", x)
    assert list(out) == list(np.concatenate([[0], np.cumsum(x)[:-1]]))
    assert (profile.wavefronts, profile.ideal_wavefronts, profile.conflict_wavefronts) == (47, 47, 0)
    assert profile.worst is None
    # Steps: thread 0 works at every level: 2 global loads and 2 shared stores, 3 per up-sweep level
    # (6), the root, 4 per down-sweep level (6), 2 shared loads and 2 global stores: 51, its span.
    # Work: 8 per thread (256), 63 active thread-levels each way (189 + 252), the root: 698.
    # Barriers: 6 + 1 + 6 + 1.
    assert profile.launches == (LaunchSteps("blelloch_padded", span_steps=51, work_steps=698, barriers=14,
                                            blocks=1),)
    assert (profile.span_steps, profile.work_steps, profile.barriers) == (51, 698, 14)


def _scan(emu, module, kernel: str, x: np.ndarray) -> tuple[MemoryProfile, np.ndarray]:
    src, out = emu.alloc(64, INT), emu.alloc(64, INT)
    emu.to_device(x, src)
    emu.start_profile(module)
    emu.launch(module, kernel, grid=1, block=32, shared_bytes=0, args=[src, out, 64])
    return emu.take_profile(module), emu.to_host(out)


def test_steps_count_atomics_and_device_variables_but_not_the_threads_own_stack(emu, conflicts):
    # Lane 1: 2 volatile accesses of a __device__ variable per iteration (counted as steps, though
    # not in any bank or sector count); lane 0: 1 atomic; the local array: none. A barrier each.
    profile, out = profile_of(emu, conflicts, "steps", 50)
    assert out[0] == 50
    assert profile.launches == (LaunchSteps("steps", span_steps=100, work_steps=150, barriers=50, blocks=1),)
    assert profile.shared_requests == 0 and profile.global_requests == 0
    # Two launches: the spans and barriers add up (one runs after the other).
    emu.start_profile(conflicts)
    for k in (3, 4):
        emu.launch(conflicts, "steps", grid=1, block=32, shared_bytes=0, args=[emu.alloc(64, INT), k])
    two = emu.take_profile(conflicts)
    assert [launch.span_steps for launch in two.launches] == [6, 8]
    assert (two.span_steps, two.barriers, two.work_steps) == (14, 7, 21)


# ---- on only when asked, for the blocks asked --------------------------------------------------------

def test_profile_is_off_unless_started_and_counts_only_the_blocks_asked(emu, conflicts):
    out = emu.alloc(64, INT)
    emu.launch(conflicts, "strided_shared", grid=1, block=32, shared_bytes=0, args=[out, 2])
    assert emu.take_profile(conflicts).sites == ()  # not started: nothing counted
    one, _ = profile_of(emu, conflicts, "strided_shared", 2, grid=3, blocks=1)
    every, _ = profile_of(emu, conflicts, "strided_shared", 2, grid=3, blocks=0)
    assert site(one, "strided_load").requests == 1
    assert site(every, "strided_load").requests == 3
    assert every.conflict_wavefronts == 3 * one.conflict_wavefronts == 3 * 2


# ---- Part 3's profile points: config, scoring, grading, reports ----------------------------------------

P3_PROFILE = """\
    profile:
      size: 256
      points: 4
      full_at: 1.1
      zero_at: 4.0
      reference: part3_conflict_free
"""


def _part3_config(tmp_path: Path, profile: str = P3_PROFILE):
    path = write_config(tmp_path, sizes={"part3_conflict_free": [1, 33, 256]})
    path.write_text(path.read_text() + profile)
    return path


def test_a_profile_block_is_read_and_a_wrong_one_names_the_file_line_and_key(tmp_path):
    cfg = load_config(_part3_config(tmp_path))
    assert cfg.parts["part3_conflict_free"].profile == ProfileConfig(
        size=256, points=4.0, full_at=1.1, zero_at=4.0, reference="part3_conflict_free")
    bad = _part3_config(tmp_path, P3_PROFILE.replace("zero_at: 4.0", "zero_at: 1.0"))
    with pytest.raises(ConfigError) as err:
        load_config(bad)
    assert "parts.part3_conflict_free.profile.zero_at" in str(err.value) and "above full_at" in str(err.value)
    assert re.search(r"config\.yaml.*line \d+|config\.yaml:\d+", str(err.value))
    for wrong, needle in (("size: 256", "size: 100000"), ("reference: part3_conflict_free", "reference: part9"),
                          ("points: 4", "pointz: 4")):
        path = _part3_config(tmp_path, P3_PROFILE.replace(wrong, needle))
        with pytest.raises(ConfigError) as err:
            load_config(path)
        assert "profile" in str(err.value)


def test_profile_points_fall_linearly_from_full_at_to_zero_at():
    pconf = ProfileConfig(size=1024, points=4, full_at=1.1, zero_at=4.0, reference="part3_conflict_free")

    def points(wavefronts: int) -> float:
        sub = MemoryProfile(sites=(AccessSite("k", "f.cu", 3, "shared", False, 4, requests=100,
                                              wavefronts=wavefronts, ideal_wavefronts=100, worst_degree=2,
                                              worst_stride=8),))
        return score_profile(pconf, sub, 100, n=1024).points

    assert points(100) == points(110) == 4.0
    assert points(400) == points(1000) == 0.0
    assert points(255) == pytest.approx(4 * (4.0 - 2.55) / 2.9, abs=0.01)
    reported = score_profile(ProfileConfig(size=8), MemoryProfile(), None, n=8)
    assert (reported.points, reported.max_points) == (0.0, 0.0)


def test_profile_points_need_a_parallel_scan_in_shared_memory():
    pconf = ProfileConfig(size=1024, points=4, reference="part3_conflict_free")
    shared = (AccessSite("k", "f.cu", 3, "shared", False, 4, requests=100, wavefronts=100, ideal_wavefronts=100),)

    def scored(span: int, barriers: int, *, sites=shared, counted: bool = True, ref=(80, 20)):
        launches = (LaunchSteps("k", span, 10 * span, barriers, 1),) if counted else ()
        return score_profile(pconf, MemoryProfile(sites=sites, launches=launches), 100, n=1024,
                             reference_span_steps=ref[0], reference_barriers=ref[1])

    assert scored(240, 60).points == 4.0  # at the default slack of 3, both
    assert scored(241, 60).points == 0.0 and "one thread makes 241 memory operations" in scored(241, 60).message
    assert scored(240, 61).points == 0.0 and "passes 61 barriers" in scored(240, 61).message
    assert scored(1, 1, sites=()).message.startswith("no points: the kernel makes no shared-memory access")
    assert scored(1, 1, counted=False).message.endswith("nothing shows the scan is parallel")
    unchecked = scored(5000, 5000, ref=(None, None))  # no reference figures (an older config): not checked
    assert unchecked.points == 4.0 and "span and barriers not checked" in unchecked.message


@pytest.fixture(scope="module")
def graded_part3(tmp_path_factory: pytest.TempPathFactory, part2_as_part3):
    """Part 3 graded on the emulator twice, with the shipped profile settings: Part 2's reference
    (renamed: the session's ``part2_as_part3``) and Part 3's reference."""
    cfg = load_config(shipped_part3_config(tmp_path_factory.mktemp("graded")))
    reference = grade(SOLUTIONS, cfg=cfg, selection=Selection("emulator", "test"), parts=["part3_conflict_free"])
    return part2_as_part3, reference


def test_part2_submitted_as_part3_loses_the_profile_points_naming_the_conflicted_line(graded_part3):
    result, _ = graded_part3
    part = result.parts[0]
    assert all(c.status == "pass" for c in part.cases)  # correct, so only the profile costs points
    prof = part.profile
    assert prof is not None and (prof.points, prof.max_points) == (0.0, 4.0)
    assert prof.conflict_wavefronts > 0 and prof.ratio >= 4.0
    text = (SOLUTIONS / "part2_blelloch.cu").read_text().splitlines()
    assert prof.worst_line is not None and "s[" in text[prof.worst_line - 1]
    assert prof.worst_degree >= 16
    assert f"line {prof.worst_line}: {prof.worst_degree}-way bank conflict" in prof.message
    assert part.points == sum(c.points for c in part.cases) and part.max_points == part.points + 4


def test_part3_reference_gets_the_profile_points(graded_part3):
    _, result = graded_part3
    prof = result.parts[0].profile
    assert prof is not None and (prof.points, prof.max_points) == (4.0, 4.0)
    assert prof.conflict_wavefronts == 0 and prof.ratio == 1.0 and prof.worst == ""
    assert prof.sectors_per_request == prof.ideal_sectors_per_request == 4.0
    # the bar a student release uses (no reference solution there) is the reference's count
    shipped = load_config(ROOT / "config.yaml")
    shipped_profile = shipped.parts["part3_conflict_free"].profile
    assert shipped_profile.reference_wavefronts == prof.reference_wavefronts
    assert (shipped_profile.reference_span_steps, shipped_profile.reference_barriers) == (
        prof.reference_span_steps, prof.reference_barriers) == (prof.span_steps, prof.barriers)


def test_the_reports_show_the_profile_and_json_keeps_it(graded_part3):
    from grader.render.gradescope import gradescope
    from grader.render.junit import junit_xml
    from grader.render.markdown import markdown
    from grader.render.text import render_text

    result, _ = graded_part3
    prof = result.parts[0].profile
    again = result_from_dict(json.loads(result.to_json()))
    assert again.parts[0].profile == prof and again.points == result.points
    text = render_text(result)
    assert f"bank conflicts (CPU emulator, n = {prof.n}): 0/4 points" in text
    assert f"line {prof.worst_line}: {prof.worst_degree}-way bank conflict" in text
    assert "sectors per request" in text
    assert f"Bank conflicts (CPU emulator, n = {prof.n}): 0/4 points" in markdown(result)
    xml = junit_xml(result)
    assert 'name="bank conflicts"' in xml and 'type="profile"' in xml
    tests = gradescope(result)["tests"]
    conflict_tests = [t for t in tests if t["name"].endswith("bank conflicts")]
    assert len(conflict_tests) == 1 and (conflict_tests[0]["score"], conflict_tests[0]["max_score"]) == (0.0, 4.0)
    assert f"line {prof.worst_line}" in conflict_tests[0]["output"]
    assert "profile" in result.parts[0].phases_s
    assert report_lines(None) == []


def test_the_profile_is_taken_by_an_emulator_of_its_own_and_only_when_every_case_passed(tmp_path):
    from grader.core.errors import BackendUnavailable
    from grader.assignment.parts import PARTS
    from grader.grading.profiling import profile_after_hidden, profile_phase
    from grader.core.results import CaseResult

    cfg = load_config(shipped_part3_config(tmp_path))
    part = PARTS["part3_conflict_free"]
    made: list[EmulatorBackend] = []

    def factory() -> EmulatorBackend:
        made.append(EmulatorBackend(workers=1, nvcc_check=False))
        return made[-1]

    passed = [CaseResult(name="n=1", n=1, dtype="int32", seed=1, status="pass", points=1, max_points=1)]
    source = (SOLUTIONS / "part3_conflict_free.cu").read_text()
    common = dict(cfg=cfg, part=part, source=source, workdir=tmp_path, solutions=SOLUTIONS)
    prof = profile_phase(results=passed, emulator_factory=factory, **common)
    assert len(made) == 1 and (prof.points, prof.max_points) == (4.0, 4.0) and prof.conflict_wavefronts == 0
    assert profile_after_hidden(prof, passed) == prof

    def unavailable() -> EmulatorBackend:
        raise BackendUnavailable("no C++ compiler")

    prof = profile_phase(results=passed, emulator_factory=unavailable, **common)
    assert (prof.points, prof.max_points) == (0.0, 4.0)
    assert prof.message.startswith("not profiled") and "no C++ compiler" in prof.message
    failed = [dataclasses.replace(passed[0], status="fail", points=0)]
    prof = profile_phase(results=failed, emulator_factory=unavailable, **common)
    assert prof.message == "not profiled: the profile is scored only when every case passes"
    assert profile_phase(results=passed, emulator_factory=unavailable, earlier_failed=True, **common) == prof
    hidden_failed = profile_after_hidden(profile_phase(results=passed, emulator_factory=factory, **common), failed)
    assert (hidden_failed.points, hidden_failed.max_points, hidden_failed.wavefronts) == (0.0, 4.0, None)
    assert "a hidden case did not" in hidden_failed.message


def test_on_a_gpu_the_profile_counts_on_the_checks_runtime_and_counts_the_same(tmp_path):
    """A GPU machine builds one emulator runtime (the checks' quick one) and profiles on it; the
    counts are the runtime's own arithmetic on the kernel's addresses, so the optimised runtime of
    the emulator backend gives the same profile, conflicts, worst line and steps included."""
    from grader.assignment.parts import PARTS
    from grader.backends.emulator.build import QUICK_RUNTIME_FLAGS
    from grader.core.results import CaseResult
    from grader.grading.profiling import profile_phase
    from grader.grading.worker.beside import emulator_runtime_flags

    assert emulator_runtime_flags(counts_profile=False) == QUICK_RUNTIME_FLAGS
    assert emulator_runtime_flags(counts_profile=True) == ()
    cfg = load_config(shipped_part3_config(tmp_path))
    passed = [CaseResult(name="n=1", n=1, dtype="int32", seed=1, status="pass", points=1, max_points=1)]
    source = (SOLUTIONS / "part2_blelloch.cu").read_text().replace("blelloch_scan(", "blelloch_scan_cf(")
    profiles = [profile_phase(cfg=cfg, part=PARTS["part3_conflict_free"], source=source, results=passed,
                              workdir=tmp_path / f"w{i}", solutions=SOLUTIONS, runtime_flags=flags)
                for i, flags in enumerate(((), QUICK_RUNTIME_FLAGS))]
    assert profiles[0].conflict_wavefronts > 0 and profiles[0].worst_line is not None, profiles[0].message
    assert profiles[0] == profiles[1]


def test_a_partial_last_warp_is_complete_with_its_own_lanes(emu, conflicts):
    # 40 threads: warp 0 has 32 lanes (stride 2: 2-way), warp 1 lanes 32..39 only, at words
    # 64, 66, ..., 78: 8 distinct banks, no conflict. 2 requests, 3 wavefronts, 2 ideal.
    out = emu.alloc(64, INT)
    emu.start_profile(conflicts)
    emu.launch(conflicts, "strided_shared", grid=1, block=40, shared_bytes=0, args=[out, 2])
    profile = emu.take_profile(conflicts)
    assert list(emu.to_host(out)[:40]) == list(range(40))
    load = site(profile, "strided_load", store=False)
    assert (load.requests, load.wavefronts, load.ideal_wavefronts, load.worst_degree) == (2, 3, 2, 2)


def test_the_kth_execution_of_an_instruction_by_each_lane_is_one_request(emu, conflicts):
    # Lanes run one after another here, each through all 3 iterations; grouping by execution
    # count still gives the GPU's 3 requests with strides 1, 2 and 4 words: 1 + 2 + 4 wavefronts.
    profile, _ = profile_of(emu, conflicts, "repeated", 3)
    st = site(profile, "repeated_store", store=True)
    assert (st.requests, st.wavefronts, st.ideal_wavefronts, st.worst_degree) == (3, 7, 3, 4)


def test_a_long_loop_of_one_lane_counts_one_request_per_iteration(emu, conflicts):
    # 70,000 executions by lane 0 with no barrier: more than the records the profile keeps open
    # (65,536), after which it closes them as at a barrier; every request has one lane either way.
    profile, _ = profile_of(emu, conflicts, "one_lane_loop", 70_000)
    st = site(profile, "one_lane_store", store=True)
    assert (st.requests, st.wavefronts, st.ideal_wavefronts, st.worst_degree) == (70_000, 70_000, 70_000, 1)


def test_the_pytest_plugin_fails_the_bank_conflicts_item_naming_the_line(pytester: pytest.Pytester, monkeypatch,
                                                                         tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"))
    monkeypatch.delenv("SCANGRADE_BACKEND", raising=False)
    shutil.copy(shipped_part3_config(tmp_path), pytester.path / "config.yaml")
    sub = pytester.path / "sub"
    sub.mkdir()
    (sub / "part3_conflict_free.cu").write_text(
        (SOLUTIONS / "part2_blelloch.cu").read_text().replace("blelloch_scan(", "blelloch_scan_cf("))
    result = pytester.runpytest_subprocess("--scangrade", "sub", "--scangrade-backend", "emulator",
                                           "-p", "no:cacheprovider", "-p", "no:randomly", timeout=300)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*part3_conflict_free[[]bank-conflicts[]]*",
                                 "*line *: 32-way bank conflict*"])


def test_a_part_that_hangs_in_its_profile_run_is_stopped_and_says_so(tmp_path, pace):
    # Correct at the case sizes, spinning forever at the profiled size only.
    path = write_config(tmp_path, part_s=pace.seconds(10), sizes={"part3_conflict_free": [1, 33]})
    path.write_text(path.read_text() + P3_PROFILE.replace("size: 256", "size: 64"))
    cfg = load_config(path)
    source = (SOLUTIONS / "part3_conflict_free.cu").read_text()
    hang = source.replace("    int tid = threadIdx.x;\n", "    int tid = threadIdx.x;\n"
                          "    volatile int spin = (n == 64);\n    while (spin) {}\n", 1)
    assert hang != source
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "part3_conflict_free.cu").write_text(hang)
    part = grade(tmp_path / "sub", cfg=cfg, selection=Selection("emulator", "test")).parts[0]
    assert all(c.status == "pass" for c in part.cases)
    assert part.status == "timeout" and "during the bank-conflict profile" in part.message
    assert part.profile is not None and (part.profile.points, part.profile.max_points) == (0.0, 4.0)


def test_student_code_cannot_call_the_profile_switch(emu, tmp_path):
    from grader.core.errors import CompileError

    body = ('extern "C" void sg_profile_set(int, unsigned long long);\n'
            "__global__ void strided_shared(int* out, int k) { sg_profile_set(0, 0); out[threadIdx.x] = k; }\n")
    kernels = (spec("strided_shared", *OUT_INT),)
    part = PartSpec("test_part", 0, "test", "cheat.cu", kernels, False, None)
    with pytest.raises(CompileError) as err:
        emu.compile(source=part_header(part, block_size=32, dtype=INT) + body, filename="cheat.cu", kernels=kernels,
                    workdir=tmp_path)
    assert "sg_profile_set" in str(err.value) + str(getattr(err.value, "log", ""))


def test_the_profile_text_keeps_the_worst_requests_lanes_and_reads_a_line_without_them():
    from grader.core.access_profile import parse_profile

    words = ",".join(["-"] * 2 + [str(32 * k + 5) for k in range(30)])
    line = "k\t@10\ts\t0\t4\t3\t40\t3\t30\t128\t0\t0\t0"
    resolve = lambda pcs: {pc: ("k.cu", 7) for pc in pcs}  # noqa: E731
    (site,) = parse_profile(f"{line}\t{words}\n", resolve).sites
    assert site.worst_words == (-1, -1, *(32 * k + 5 for k in range(30))) and site.worst_degree == 30
    assert parse_profile(line + "\n", resolve).sites[0].worst_words == ()  # a runtime before them
    assert parse_profile(f"{line}\t1,2,3\n", resolve).sites == ()  # not 32 lanes: skipped as malformed
    profile = parse_profile(f"{line}\t{words}\n", resolve)
    assert profile.worst_request == site
