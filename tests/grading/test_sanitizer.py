"""compute-sanitizer's reports become findings of the emulator's kinds and message form
(grader/grading/sanitizer_report.py). The report texts below are compute-sanitizer 2025.3's, as printed on an
NVIDIA H100 80GB HBM3 (CUDA 13.0, driver 580) for kernels broken on purpose; the end-to-end test
runs on a GPU only."""

from __future__ import annotations

import shutil

import pytest

from grader.grading.sanitizer_report import Buffer, element_text, findings_by_case

TOKEN = "0123abcd"


def _output(*cases: tuple[int, list[str], str]) -> str:
    """A child's output: per case, its buffers, then the sanitizer's lines for it."""
    lines = ["========= COMPUTE-SANITIZER"]
    for index, buffers, body in cases:
        lines.append(f"@@scangrade {TOKEN} case {index}")
        lines += [f"@@scangrade {TOKEN} buffer {b}" for b in buffers]
        lines += body.strip("\n").splitlines()
        lines.append(f"@@scangrade {TOKEN} done {index}")
    lines.append("========= ERROR SUMMARY: 0 errors")
    return "\n".join(lines)


RACE_ERROR = """
========= Error: Race reported between Read access at missing_sync+0x190 in part1_naive.cu:9
=========     and Write access at missing_sync+0x1c0 in part1_naive.cu:10 [5260 hazards]
=========
"""
RACE_WARNINGS = """
========= Warning: Race reported between Write access at warp_sync+0x160 in part1_naive.cu:24
=========     and Read access at warp_sync+0x170 in part1_naive.cu:23 [480 hazards]
=========
========= Warning: Race reported between Write access at warp_sync+0x1d0 in part1_naive.cu:24
=========     and Read access at warp_sync+0x1e0 in part1_naive.cu:23 [448 hazards]
=========
"""
WRITE_PAST = """
========= Invalid __global__ write of size 4 bytes
=========     at write_past+0xe0 in part1_naive.cu:76
=========     by thread (100,0,0) in block (0,0,0)
=========     Access to 0x7f5590800390 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f5590800200 of size 400 bytes
=========
========= Invalid __global__ write of size 4 bytes
=========     at write_past+0xe0 in part1_naive.cu:76
=========     by thread (101,0,0) in block (0,0,0)
=========     Access to 0x7f5590800394 is out of bounds
=========     and is 5 bytes after the nearest allocation at 0x7f5590800200 of size 400 bytes
=========
"""
WILD = """
========= Invalid __global__ write of size 4 bytes
=========     at wild+0xd0 in part1_naive.cu:51
=========     by thread (0,0,0) in block (0,0,0)
=========     Access to 0x7f15ba800200 is out of bounds
=========     and is 935,329,793 bytes after the nearest allocation at 0x7f1582c00000 of size 512 bytes
=========
"""
BARRIER = """
========= Barrier error detected. Divergent thread(s) in warp
=========     at early_return+0x1f0 in part1_naive.cu:19
=========     by thread (0,0,0) in block (0,0,0)
=========
"""
OUT = "out 140005473255936 400 4"  # 0x7f5590800200: 100 int32
IN = "in 140005472206960 400 4"  # 1 MiB below out


def test_a_missing_barrier_is_a_race_naming_both_lines():
    per, started, done = findings_by_case(_output((3, [IN, OUT], RACE_ERROR)), TOKEN)
    assert started == done == {3}
    (f,) = per[3]
    assert (f.kind, f.file, f.line, f.other_file, f.other_line) == ("race", "part1_naive.cu", 9, "part1_naive.cu", 10)
    assert "__syncthreads()" in f.message and "part1_naive.cu:9" in f.message


def test_warp_synchronous_code_is_a_race_once_per_line_with_the_syncwarp_hint():
    per, _, _ = findings_by_case(_output((0, [IN, OUT], RACE_WARNINGS)), TOKEN)
    (f,) = per[0]  # two reports of the same pair of lines: one finding
    assert f.kind == "race" and f.line == 24 and "__syncwarp()" in f.message


def test_a_write_past_n_names_the_buffer_and_the_element():
    per, _, _ = findings_by_case(_output((1, [IN, OUT], WRITE_PAST)), TOKEN)
    (f,) = per[1]
    assert f.kind == "out-of-bounds" and (f.file, f.line) == ("part1_naive.cu", 76)
    assert f.message == ("out-of-bounds global memory write of out[100] (1 past the end of out, 100 elements) "
                         "at part1_naive.cu:76")
    assert f.block == (0, 0, 0) and f.thread == (100, 0, 0)


def test_an_address_far_from_every_buffer_is_in_no_allocation():
    per, _, _ = findings_by_case(_output((0, [IN, OUT], WILD)), TOKEN)
    (f,) = per[0]
    assert f.kind == "out-of-bounds" and "in no device allocation" in f.message and f.line == 51


def test_barrier_divergence():
    per, _, _ = findings_by_case(_output((2, [IN, OUT], BARRIER)), TOKEN)
    (f,) = per[2]
    assert f.kind == "barrier-divergence" and f.line == 19 and "Divergent thread(s) in warp" in f.message


def test_reports_go_to_the_case_they_came_from_and_forged_markers_are_ignored():
    text = _output((0, [IN, OUT], ""), (1, [IN, OUT], RACE_ERROR), (2, [IN, OUT], ""))
    text = text.replace(f"@@scangrade {TOKEN} done 1", f"@@scangrade {'f' * 8} done 2\n@@scangrade {TOKEN} done 1")
    per, started, done = findings_by_case(text, TOKEN)
    assert set(per) >= {1} and not per.get(0) and not per.get(2) and done == {0, 1, 2}


def test_a_pool_childs_next_request_after_this_ones_end_is_not_this_requests():
    """A pool child's log is read to its end after the request's ``end`` marker: by then the child
    may serve another worker's request, whose report must not go to this request's last case."""
    text = _output((0, [IN, OUT], "")) + f"\n@@scangrade {TOKEN} end\n@@scangrade {'f' * 8} case 5\n" + RACE_ERROR
    per, started, done = findings_by_case(text, TOKEN)
    assert started == done == {0} and not per.get(0)


def test_a_case_the_child_did_not_finish_is_started_but_not_done():
    text = _output((0, [IN, OUT], ""))
    text += f"\n@@scangrade {TOKEN} case 1\n" + WRITE_PAST
    per, started, done = findings_by_case(text, TOKEN)
    assert started == {0, 1} and done == {0} and per[1][0].kind == "out-of-bounds"


def test_element_text_attributes_an_address_to_the_nearest_buffer():
    a, b = Buffer("in", 1000, 132, 4), Buffer("out", 1000 + 132 + (1 << 20), 132, 4)
    assert element_text([a, b], 1000 + 132) == "in[33] (1 past the end of in, 33 elements)"
    assert element_text([a, b], b.base - 4) == "out[-1] (1 before the start of out, 33 elements)"
    assert element_text([a, b], 1000 + 8) == "in[2]"
    assert element_text([a, b], 1 << 40) is None


@pytest.mark.gpu
def test_the_sanitizer_runs_where_the_gpu_path_needs_it():
    if not shutil.which("compute-sanitizer"):
        pytest.skip("compute-sanitizer is not installed here")
    from grader.grading.sanitizer import find_sanitizer, sanitizer_version
    assert sanitizer_version(find_sanitizer()).startswith("Version")
