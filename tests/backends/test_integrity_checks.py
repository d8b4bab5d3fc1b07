"""Integrity of the emulator's verdicts: the same file and seed get the same grade every run, and
what a GPU would not run correctly is reported with the line, in plain mode too.

- shared memory is bounded per array (red zones around every ``__shared__`` array and the dynamic
  part), in plain mode as well as with checks; uninitialised locals read a fixed pattern; a
  finding seen in several blocks is reported for the lowest one;
- the grader's guard zones around every device buffer count as outside the buffer (checks), and
  accesses there name the buffer and the element;
- a submission cannot switch the checks off (the runtime's names and no_sanitize are refused);
- a shift by 32 or more gives a GPU's clamped value, with a ``shift-clamped`` warning naming its line
  (more in tests/backends/test_emulator_shifts.py);
- threads at different ``__syncthreads()`` call sites are ``barrier-divergence`` without checks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from grader.backends import Selection
from grader.backends.emulator import EmulatorBackend
from grader.assignment.config import load_config
from grader.core.errors import CompileError, KernelError
from grader.grading.case.checks import _guard_problem
from grader.core.kernels import KernelSpec, Param
from grader.assignment.parts import PartSpec, part_header
from grader.assignment.plans import GUARD, POISON_BITS, Guarded
from grader.grading.runner import grade
from tests.conftest import ATTACKS, BROKEN, EMULATOR_KERNELS, emulator_cache, write_config
from tests.grading.test_grading import parts_of, submission

EMULATOR = Selection("emulator", "test")
INT = np.dtype(np.int32)


def line_of(path: Path, marker: str) -> int:
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if f"LINE:{marker}" in line:
            return n
    raise AssertionError(f"no LINE:{marker} in {path}")


def scan_spec(name: str) -> KernelSpec:
    return KernelSpec(name, (Param("in", "const int*", "ptr"), Param("out", "int*", "ptr"), Param("n", "int", "int")))


def compile_part(be: EmulatorBackend, tmp_path: Path, path: Path, kernels: tuple[KernelSpec, ...], *,
                 block_size: int):
    part = PartSpec("test_part", 0, "test", path.name, kernels, False, None)
    source = part_header(part, block_size=block_size, dtype=INT) + f'#line 1 "{path.name}"\n' + path.read_text()
    return be.compile(source=source, filename=path.name, kernels=kernels, workdir=tmp_path)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return emulator_cache(tmp_path_factory.mktemp("emu-cache"))


@pytest.fixture(scope="module")
def plain(cache_dir):
    be = EmulatorBackend(workers=2, cache_dir=cache_dir, nvcc_check=False)
    yield be
    be.close()


@pytest.fixture(scope="module")
def checked(cache_dir):
    be = EmulatorBackend(workers=2, cache_dir=cache_dir, nvcc_check=False, checks=True)
    yield be
    be.close()


# -- 1. shared memory: bounded per array, in plain mode too, deterministic ------------------------
MINUS_ONE = BROKEN / "part2_reads_minus_one.cu"


@pytest.mark.parametrize("mode", ["plain", "checked"])
def test_a_read_of_temp_minus_one_is_an_out_of_bounds_read_naming_the_array(tmp_path, request, mode):
    be = request.getfixturevalue(mode)
    mod = compile_part(be, tmp_path, MINUS_ONE, (scan_spec("blelloch_scan"),), block_size=64)
    n = 128
    d_in, d_out = be.alloc(n, INT), be.alloc(n, INT)
    be.to_device(np.arange(n, dtype=INT), d_in)
    messages = set()
    for _ in range(3):  # the same verdict every run
        with pytest.raises(KernelError) as info:
            be.launch(mod, "blelloch_scan", grid=1, block=64, shared_bytes=n * 4, args=[d_in, d_out, n])
        messages.add(str(info.value))
        assert info.value.kind == "out-of-bounds"
        f = info.value.findings[0]
        assert (f.kind, f.file, f.line) == ("out-of-bounds", MINUS_ONE.name, line_of(MINUS_ONE, "minus-one"))
    assert len(messages) == 1
    message = messages.pop()
    assert ("out-of-bounds shared memory read of temp[-1] (1 before the start of shared array temp, "
            f"128 elements) at {MINUS_ONE.name}:{line_of(MINUS_ONE, 'minus-one')}") in message, message
    assert message.endswith("(block (0, 0, 0), thread (0, 0, 0))")


def test_grading_the_temp_minus_one_kernel_fails_every_case_the_same_way(tmp_path):
    cfg = load_config(write_config(tmp_path, block_size=64, sizes={"part2_blelloch": [5, 128]}))
    folder = submission(tmp_path, part2_blelloch=MINUS_ONE)
    runs = [parts_of(grade(folder, cfg=cfg, selection=EMULATOR, parts=["part2_blelloch"], checks=checks))["part2_blelloch"]
            for checks in (False, False, True, True)]
    assert [(c.status, c.message) for c in runs[2].cases] == [(c.status, c.message) for c in runs[3].cases]
    assert [(c.status, c.message) for c in runs[0].cases] == [(c.status, c.message) for c in runs[1].cases]
    assert runs[0].points == 0
    assert all("temp[-1]" in c.message for c in runs[0].cases), [c.message for c in runs[0].cases]


def test_a_padded_index_past_the_dynamic_tile_fails_in_plain_mode(tmp_path):
    """Part 4 with index + index / 32 padding on a tile of exactly 2 * BLOCK_SIZE elements."""
    path = BROKEN / "part4_padded_overflow.cu"
    cfg = load_config(write_config(tmp_path, block_size=256, sizes={"part4_any_size": [512]}))
    folder = submission(tmp_path, part4_any_size=path)
    p = parts_of(grade(folder, cfg=cfg, selection=EMULATOR, parts=["part4_any_size"], checks=False))["part4_any_size"]
    assert p.points == 0 and p.cases
    for case in p.cases:
        assert case.status == "fail"
        assert ("out-of-bounds shared memory write of s[512] (1 past the end of shared array s, 512 elements) "
                "at part4_any_size.cu:16 (block (0, 0, 0), thread (241, 0, 0))") in case.message, case.message


# -- 2. global guard zones ---------------------------------------------------------------------------
GUARDS = EMULATOR_KERNELS / "guard_zone_access.cu"


def test_reads_and_writes_in_a_labelled_guard_zone_name_the_buffer_and_element(tmp_path, checked):
    kernels = (KernelSpec("read_past", (Param("in", "const int*", "ptr"), Param("out", "int*", "ptr"),
                                        Param("n", "int", "int"))),
               KernelSpec("write_before", (Param("out", "int*", "ptr"), Param("n", "int", "int"))))
    mod = compile_part(checked, tmp_path, GUARDS, kernels, block_size=64)
    n = 100
    full_in, full_out = checked.alloc(n + 2 * GUARD, INT), checked.alloc(n + 2 * GUARD, INT)
    checked.label(full_in, "in", GUARD, n)
    checked.label(full_out, "out", GUARD, n)
    d_in, d_out = full_in.view(GUARD, n), full_out.view(GUARD, n)
    with pytest.raises(KernelError) as info:
        checked.launch(mod, "read_past", grid=2, block=64, shared_bytes=0, args=[d_in, d_out, n])
    assert info.value.kind == "out-of-bounds"
    assert (f"out-of-bounds global memory read of in[100] (1 past the end of in, 100 elements) at "
            f"{GUARDS.name}:{line_of(GUARDS, 'read-past')}") in str(info.value), str(info.value)
    with pytest.raises(KernelError) as info:
        checked.launch(mod, "write_before", grid=1, block=64, shared_bytes=0, args=[d_out, n])
    assert (f"out-of-bounds global memory write of out[-1] (1 before the start of out, 100 elements) at "
            f"{GUARDS.name}:{line_of(GUARDS, 'write-before')}") in str(info.value), str(info.value)
    # unlabelled, the guard zone is part of the allocation: no finding
    plain_in = checked.alloc(n + 2 * GUARD, INT)
    checked.launch(mod, "read_past", grid=2, block=64, shared_bytes=0, args=[plain_in.view(GUARD, n), d_out, n])


def test_grading_with_checks_reports_an_i_le_n_load_guard(tmp_path):
    path = BROKEN / "part1_le_n_guard.cu"
    cfg = load_config(write_config(tmp_path, block_size=64, sizes={"part1_naive": [33]}))
    folder = submission(tmp_path, part1_naive=path)
    plain = parts_of(grade(folder, cfg=cfg, selection=EMULATOR, parts=["part1_naive"], checks=False))["part1_naive"]
    assert plain.status == "pass"  # reading the poison past the end changes nothing it writes
    checked = parts_of(grade(folder, cfg=cfg, selection=EMULATOR, parts=["part1_naive"], checks=True))["part1_naive"]
    failed = {c.n: c.message for c in checked.cases if c.status == "fail"}
    assert "read of in[33] (1 past the end of in, 33 elements) at part1_naive.cu:9" in failed[33], failed
    assert "read of in[1] (1 past the end of in, 1 element) at" in failed[1], failed


def test_the_host_side_guard_message_has_the_same_form():
    count = 10
    whole = np.full(count + 2 * GUARD, POISON_BITS, dtype=np.uint32).view(np.int32)
    g = Guarded("out", None, None, count, True)
    whole[GUARD + count + 2] = 0
    assert _guard_problem(g, whole) == "out[12] (3 past the end of out, 10 elements) was written"
    whole[GUARD - 1] = 0
    assert _guard_problem(g, whole) == "out[-1] (1 before the start of out, 10 elements) was written"


# -- 4. a submission cannot switch the checks off -------------------------------------------------------


def _grade_part1(tmp_path: Path, path: Path, *, checks: bool):
    tmp_path = tmp_path / ("checked" if checks else "plain")
    tmp_path.mkdir()
    cfg = load_config(write_config(tmp_path, block_size=64, sizes={"part1_naive": [33]}))
    folder = submission(tmp_path, part1_naive=path)
    return parts_of(grade(folder, cfg=cfg, selection=EMULATOR, parts=["part1_naive"], checks=checks))["part1_naive"]


def test_defining_the_check_hooks_or_no_sanitize_is_a_compile_error_naming_the_line(tmp_path):
    p = _grade_part1(tmp_path, ATTACKS / "unchecked_hooks.cu", checks=True)
    assert p.status == "compile-error" and p.points == 0
    assert ("not allowed: `__tsan_read4`: this name is reserved for the emulator's runtime (its memory-check "
            "hooks); rename it (part1_naive.cu:7)") in p.message, p.message


def test_a_no_sanitize_attribute_pasted_together_in_a_macro_leaves_the_checks_on(tmp_path):
    path = ATTACKS / "unchecked_pasted.cu"
    assert _grade_part1(tmp_path, path, checks=False).status == "pass"  # right output: only the checks see it
    p = _grade_part1(tmp_path, path, checks=True)
    assert p.points == 0 and all(c.status == "fail" for c in p.cases)
    messages = ["\n".join(f.message for f in c.findings) for c in p.cases]
    assert "read of in[33] (1 past the end of in, 33 elements)" in messages[1], messages
    assert "race (write-after-write) on shared memory" in messages[2], messages


@pytest.mark.parametrize("text, word", [
    ("__global__ void k(int* p) { __sg_barrier(0, 1, 0, 0); }", "__sg_barrier"),
    ('extern "C" int sg_launch(void) { return 0; }', "sg_launch"),
    ("#undef no_sanitize_thread", "no_sanitize_thread"),
    ("__global__ __attribute__((no_sanitize(\"thread\"))) void k(int* p) {}", "no_sanitize"),
])
def test_reserved_names_are_refused_in_code_and_directives(text, word):
    from grader.backends.emulator.rewrite import rewrite_source
    from grader.core.errors import CompileError
    with pytest.raises(CompileError, match=rf"not allowed: `{word}`.*\(student\.cu:2\)"):
        rewrite_source('#line 1 "student.cu"\n// a comment\n' + text + "\n", filename="student.cu")


@pytest.mark.parametrize("attack, line, what", [
    ("unchecked_pasted_hooks", 11, "`__tsan_read4`: this name is reserved for the emulator's runtime"),
    ("unchecked_asm_label", 8, "`__asm__`: inline assembly under the emulator"),
    ("unchecked_section", 9, "the section attribute"),
])
def test_binding_the_check_hooks_by_pasting_asm_labels_or_section_strings_is_a_compile_error(tmp_path, attack, line,
                                                                                            what):
    """Each bound __tsan_read4/__tsan_write4 to a no-op of its own and passed every checked case."""
    p = _grade_part1(tmp_path, ATTACKS / f"{attack}.cu", checks=True)
    assert p.status == "compile-error" and p.points == 0, p.message
    assert p.message.startswith(f"not allowed: {what}") and f"(part1_naive.cu:{line})" in p.message, p.message


@pytest.mark.parametrize("attribute", [
    '__attribute__((weakref("sg_findings")))',
    '__attribute__((SG_J(weak, ref)("sg_findings")))',
    '[[gnu::alias("sg_nothing")]]',
    '__attribute__((__symver__("sg_findings@V1")))',
])
def test_attributes_that_bind_a_symbol_to_a_string_are_compile_errors(plain, tmp_path, attribute):
    source = tmp_path / "binds.cu"
    source.write_text('#define SG_J(a, b) a##b\nextern "C" void sg_nothing(void) {}\n'
                      f'extern "C" void sg_bound(void) {attribute};\n'
                      "__global__ void k(const int* in, int* out, int n) { out[0] = in[0] + n; }\n")
    with pytest.raises(CompileError, match=r"not allowed: the \w+ attribute: .* \(binds.cu:3\)"):
        compile_part(plain, tmp_path, source, (scan_spec("k"),), block_size=32)


@pytest.mark.parametrize("directive", ["#undef weakref", "#define section(...)", "%:undef __alias__"])
def test_undefining_the_attributes_the_emulator_refuses_is_refused(directive):
    from grader.backends.emulator.rewrite import rewrite_source
    with pytest.raises(CompileError, match=r"not allowed: `#(undef|define) \w+`: .*\(student\.cu:1\)"):
        rewrite_source(f'#line 1 "student.cu"\n{directive}\n', filename="student.cu")


def _object(tmp_path: Path, code: str) -> Path:
    import subprocess
    src, obj = tmp_path / "o.cpp", tmp_path / "o.o"
    src.write_text(code)
    subprocess.run(["g++", "-std=c++17", "-c", "-fPIC", str(src), "-o", str(obj)], check=True)
    return obj


@pytest.mark.parametrize("code, refused", [
    ('extern "C" { __attribute__((used)) static void __tsan_write4(void*) {} }', "defines `__tsan_write4`"),
    ('extern "C" void __tsan_read2(void*) {}', "defines `__tsan_read2`"),
    ('extern "C" long sg_findings(char*, long);\nlong f(char* b) { return sg_findings(b, 0); }',
     "refers to `sg_findings`"),
    ('extern "C" void __sg_switch(void);\nvoid f() { __sg_switch(); }', "refers to `__sg_switch`"),
    ('extern "C" int __sanitizer_x;\nint __sanitizer_x = 1;', "defines `__sanitizer_x`"),
])
def test_the_object_audit_refuses_a_module_that_binds_a_runtime_name(plain, tmp_path, code, refused):
    """The linker's view: whatever spelled the name, the object file names it."""
    from grader.backends.emulator.lockdown import audit_object
    with pytest.raises(CompileError, match=rf"not allowed: part1_naive.cu {refused}"):
        audit_object(_object(tmp_path, code), plain.toolchain.runtime_names(), filename="part1_naive.cu")


def test_the_object_audit_accepts_what_the_prelude_calls_and_the_runtime_keeps_its_state_unnamed(plain, tmp_path):
    from grader.backends.emulator.lockdown import audit_object, elf_symbols
    code = ('extern "C" { void __tsan_read4(void*); int __sg_barrier(int, int, const char*, int);\n'
            'void __assert_fail(const char*, const char*, unsigned, const char*); }\n'
            'int f(int* p) { __tsan_read4(p); __assert_fail("", "", 0, ""); return __sg_barrier(0, 1, "", 0); }')
    audit_object(_object(tmp_path, code), plain.toolchain.runtime_names(), filename="part1_naive.cu")
    runtime = elf_symbols(plain.toolchain.runtime_object())
    exported = {s.name for s in runtime if s.defined and s.binding == "global"}
    named_state = {n for n in exported if not n.startswith(("__tsan_", "__ubsan_", "__sg_", "sg_"))}
    assert named_state == {"__assert_fail"}, named_state  # no g_pool, g_findings_text, internal functions


def test_the_expected_runtime_names_are_the_names_the_runtime_object_defines(plain):
    """A module compiles with the expected names poisoned while the runtime still builds
    (cold); they must be the object's, or a module compiled cold is compiled twice."""
    from grader.backends.emulator.build import expected_names
    assert expected_names() == plain.toolchain.runtime_names(), (
        "grader/backends/emulator/runtime_names.txt is out of date: run python -c \"from "
        "grader.backends.emulator.build import write_expected_names; write_expected_names()\"")


HOOK_ATTACK = ('extern "C" { __attribute__((used)) void __tsan_write4(void*) {} }\n'
               '__global__ void k(int* out) { out[threadIdx.x] = 1; }\n')


def test_a_module_compiled_while_the_runtime_builds_is_poisoned_as_after_and_again_where_a_name_was_unexpected(
        tmp_path, monkeypatch):
    """On a new machine (nothing cached) the module's compile does not wait for the runtime: it
    poisons the expected names. Where the runtime turns out to define a name not expected (another
    compiler), the module is compiled again with the object's names: the hook is still refused by
    the compiler, with the line, not only by the object audit."""
    from grader.backends.emulator import build
    toolchain = build.EmulatorToolchain(cache_dir=tmp_path / "cache")
    assert toolchain.built_runtime() is None
    assert toolchain.lockdown_names() == build.expected_names()  # nothing built yet: the expected names
    monkeypatch.setattr(build, "expected_names", lambda: frozenset({"__tsan_read4"}))
    src = tmp_path / "attack.cpp"
    src.write_text('#line 1 "part1_naive.cu"\n' + HOOK_ATTACK.replace("__global__ ", ""))
    with pytest.raises(CompileError, match=r"not allowed: `__tsan_write4`: this name is reserved .*\(part1_naive.cu:1\)"):
        toolchain.compile_module(source=src, output=tmp_path / "attack.so", filename="part1_naive.cu",
                                 workdir=tmp_path)
    assert toolchain.built_runtime() is not None  # the compile waited for the runtime before its audit
    assert toolchain.lockdown_names() == toolchain.runtime_names()  # built: the object's own names


# -- 3. shifts by 32 or more --------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["plain", "checked"])
def test_a_shift_by_32_or_more_gives_the_gpus_value_with_a_warning_naming_the_line(tmp_path, request, mode):
    be = request.getfixturevalue(mode)
    path = EMULATOR_KERNELS / "shift_by_32.cu"
    mod = compile_part(be, tmp_path, path, (KernelSpec("shift_kernel", (Param("out", "int*", "ptr"),
                                                                        Param("n", "int", "int"))),), block_size=64)
    out = be.alloc(8, INT)
    be.launch(mod, "shift_kernel", grid=1, block=8, shared_bytes=0, args=[out, 3])  # shifts by 3..10: fine
    assert be.to_host(out).tolist() == [i >> (3 + i) for i in range(8)]
    assert be.take_warnings() == []
    be.launch(mod, "shift_kernel", grid=1, block=8, shared_bytes=0, args=[out, 30])  # by 30..37: PTX clamps
    assert be.to_host(out).tolist() == [0] * 8
    [warning] = be.take_warnings()
    assert (warning.kind, warning.file, warning.line, warning.block, warning.thread) == \
        ("shift-clamped", path.name, line_of(path, "shift"), (0, 0, 0), (2, 0, 0))
    assert warning.message.startswith(f"shift by 32 of a 32-bit value at {path.name}:{line_of(path, 'shift')} gives "
                                      "0, as on a GPU (PTX clamps shift amounts to 32)"), warning.message


# -- 5. divergent barriers, also without checks ----------------------------------------------------------
SITES = EMULATOR_KERNELS / "barrier_sites.cu"


@pytest.fixture(scope="module")
def sites(plain, tmp_path_factory):
    names = ("two_sites", "barrier_in_branch", "early_return", "skip_with_continue")
    kernels = tuple(KernelSpec(k, (Param("out", "int*", "ptr"), Param("n", "int", "int"))) for k in names)
    return compile_part(plain, tmp_path_factory.mktemp("sites"), SITES, kernels, block_size=64)


@pytest.mark.parametrize("kernel, n, a, b", [("two_sites", 0, "site_b", "site_a"),
                                             ("barrier_in_branch", 16, "after_branch", "in_branch")])
def test_barriers_at_different_call_sites_are_divergence_without_checks(plain, sites, kernel, n, a, b):
    out = plain.alloc(64, INT)
    with pytest.raises(KernelError) as info:
        plain.launch(sites, kernel, grid=1, block=64, shared_bytes=0, args=[out, n])
    err = info.value
    assert err.kind == "barrier-divergence"
    assert (f"threads of a block wait at different __syncthreads(): thread ({16 if n else 32}, 0, 0) at "
            f"{SITES.name}:{line_of(SITES, a)}, thread (0, 0, 0) at {SITES.name}:{line_of(SITES, b)}") in str(err), err


def test_a_divergence_names_the_continue_that_made_threads_skip_the_barrier(plain, sites):
    out = plain.alloc(64, INT)
    with pytest.raises(KernelError) as info:
        plain.launch(sites, "skip_with_continue", grid=1, block=64, shared_bytes=0, args=[out, 40])
    assert info.value.kind == "barrier-divergence"
    assert (f"threads of a block wait at different __syncthreads(): thread (40, 0, 0) at "
            f"{SITES.name}:{line_of(SITES, 'end_bar')}, thread (0, 0, 0) at {SITES.name}:{line_of(SITES, 'loop_bar')}; "
            f"thread (40, 0, 0) took the `continue` at {SITES.name}:{line_of(SITES, 'continue')} and thread (0, 0, 0) "
            "did not") in str(info.value), info.value


def test_a_barrier_after_an_early_return_runs_without_checks(plain, sites):
    out = plain.alloc(64, INT)
    plain.to_device(np.full(64, -1, INT), out)
    plain.launch(sites, "early_return", grid=1, block=64, shared_bytes=0, args=[out, 40])
    got = plain.to_host(out)
    assert got[:40].tolist() == list(range(39, -1, -1)) and (got[40:] == -1).all()


# -- nothing else of plain mode depends on what ran before ---------------------------------------------
def test_an_uninitialised_local_reads_a_fixed_pattern_not_what_an_earlier_launch_left(plain, tmp_path):
    path = EMULATOR_KERNELS / "uninit_local.cu"
    kernels = tuple(KernelSpec(k, (Param("out", "int*", "ptr"), Param("n", "int", "int")))
                    for k in ("leave", "read_uninit"))
    mod = compile_part(plain, tmp_path, path, kernels, block_size=32)
    out = plain.alloc(8, INT)
    seen = set()
    for n in (1000, 2000):
        plain.launch(mod, "leave", grid=1, block=8, shared_bytes=0, args=[out, n])
        plain.launch(mod, "read_uninit", grid=1, block=8, shared_bytes=0, args=[out, 0])
        seen.add(tuple(plain.to_host(out).view(np.uint32).tolist()))
    assert seen == {(0xFEFEFEFE,) * 8}


def test_a_label_that_does_not_fit_its_buffer_is_refused(plain):
    full = plain.alloc(10, INT)
    with pytest.raises(ValueError, match=r"label 'in': elements \[4, 12\) do not fit a buffer of 10 elements"):
        plain.label(full, "in", 4, 8)


def test_a_finding_of_several_blocks_is_reported_for_the_lowest_block_whatever_ran_first(checked, tmp_path):
    path = EMULATOR_KERNELS / "race_late_block0.cu"
    kernels = (KernelSpec("late_race_in_block0", (Param("out", "int*", "ptr"), Param("n", "int", "int"))),)
    mod = compile_part(checked, tmp_path, path, kernels, block_size=32)
    out = checked.alloc(4, INT)
    with pytest.raises(KernelError) as info:  # 2 workers: block 1 races while block 0 still computes
        checked.launch(mod, "late_race_in_block0", grid=4, block=32, shared_bytes=0, args=[out, 3_000_000])
    races = [f for f in info.value.findings if f.kind == "race"]
    assert [(f.line, f.block, f.thread) for f in races] == [(line_of(path, "race"), (0, 0, 0), (31, 0, 0))]
