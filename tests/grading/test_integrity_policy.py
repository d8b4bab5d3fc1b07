"""The grading policy of the integrity issue: a grade is the same on every run and every path, and no
submission (nor any case of one) changes another's.

Parts 5's ticket rule, checks by default, hidden cases after visible ones, hints, capped and cleaned
worker text, a hang costing one case only, the effective settings reaching the worker, and the OS
sandbox required on grading machines.
"""

from __future__ import annotations

import json
import shutil
import time

import numpy as np

import pytest

from grader.backends import Selection
from grader.cli import main
from grader.assignment.config import load_config, load_private
from grader.grading.case.cases import case_list
from grader.grading.case.checks import diagnose
from grader.assignment.parts import PARTS
from grader.core.results import (MESSAGE_BYTES, MESSAGE_LINES, PART_CASES_BYTES, PART_MESSAGE_BYTES, CaseResult,
                            clean_case, clean_text)
from grader.grading.runner import grade
from tests.conftest import ATTACKS, BROKEN, write_config
from tests.grading.test_grading import submission
from tests.entry.test_pytest_plugin import CACHE_HOME
from reference.scan import exclusive_scan, inclusive_scan

pytest_plugins = ["pytester"]

EMULATOR = Selection("emulator", "test")


def _part5_config(tmp_path, sizes=(1, 257, 5000)):
    path = write_config(tmp_path, sizes={"part5_single_pass": list(sizes)})
    text = path.read_text().replace("  part5_single_pass:\n",
                                    "  part5_single_pass:\n    block_size: 64\n    items_per_thread: 4\n")
    path.write_text(text)
    return load_config(path)


# --- 1. Part 5 takes its tiles by ticket ---------------------------------------------------------

def test_part5_without_a_ticket_fails_every_case_with_the_dispatch_order_reason(tmp_path):
    cfg = _part5_config(tmp_path)
    folder = submission(tmp_path, part5_single_pass=BROKEN / "part5_no_ticket.cu")
    p = grade(folder, cfg=cfg, selection=EMULATOR, parts=["part5_single_pass"], checks=False).parts[0]
    assert p.status == "fail" and p.points == 0
    for c in p.cases:
        tiles = -(-c.n // 256)
        assert c.status == "fail", (c.name, c.message)
        assert f"*tile_counter is 0 after the launch, expected {tiles}" in c.message, c.message
        assert "atomicAdd(tile_counter, 1)" in c.message and "blockIdx" in c.message


def test_part5_with_a_ticket_passes(tmp_path):
    cfg = _part5_config(tmp_path)
    folder = submission(tmp_path, part5_single_pass=BROKEN / "part5_correct_serial_lookback.cu")
    p = grade(folder, cfg=cfg, selection=EMULATOR, parts=["part5_single_pass"], checks=False).parts[0]
    assert p.status == "pass", [(c.name, c.message) for c in p.cases if c.status != "pass"]


# --- 2. Every grade on the emulator runs its checks ----------------------------------------------

#: Part 1 without the barrier after its loads: right in a plain (ascending) run, a race under checks.
RACY_PART1 = BROKEN / "part1_load_race.cu"


def _racy_config(tmp_path):
    return write_config(tmp_path, sizes={"part1_naive": [1, 33]})


def _racy_submission(tmp_path):
    folder = tmp_path / "racy"
    folder.mkdir()
    shutil.copy(RACY_PART1, folder / "part1_naive.cu")
    return folder


def test_grade_runs_the_checks_unless_told_not_to(tmp_path):
    cfg = load_config(_racy_config(tmp_path))
    folder = _racy_submission(tmp_path)
    checked = grade(folder, cfg=cfg, selection=EMULATOR, parts=["part1_naive"])
    assert checked.device["checks"] == "on"
    assert all(c.status == "fail" and "(race)" in c.message for c in checked.parts[0].cases), \
        [c.message for c in checked.parts[0].cases]
    plain = grade(folder, cfg=cfg, selection=EMULATOR, parts=["part1_naive"], checks=False)
    assert plain.device["checks"] == "off" and plain.parts[0].status == "pass"


def test_the_grade_command_checks_by_default_and_no_checks_opts_out(tmp_path, capsys):
    config = _racy_config(tmp_path)
    folder = _racy_submission(tmp_path)
    argv = ["grade", str(folder), "--config", str(config), "--backend", "emulator"]
    assert main(argv + ["--json", str(tmp_path / "a.json")]) == 1
    assert json.loads((tmp_path / "a.json").read_text())["device"]["checks"] == "on"
    assert main(argv + ["--no-checks"]) == 0
    capsys.readouterr()


def test_batch_checks_by_default(tmp_path, capsys):
    config = _racy_config(tmp_path)
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copytree(_racy_submission(tmp_path), subs / "alice")
    out = tmp_path / "out"
    assert main(["batch", str(subs), "--out", str(out), "--config", str(config), "--backend", "emulator",
                 "--jobs", "1"]) == 1
    saved = json.loads((out / "alice" / "result.json").read_text())
    assert saved["device"]["checks"] == "on" and [p["status"] for p in saved["parts"]] == ["fail"]
    capsys.readouterr()


def test_the_gradescope_autograder_checks(tmp_path):
    from grader.packaging.gradescope_bundle import build_bundle
    from tests.packaging.test_gradescope_bundle import _run, _unpack

    made = build_bundle(tmp_path / "ag.zip", config=_racy_config(tmp_path))
    root = tmp_path / "autograder"
    _unpack(made.archive, root)
    shutil.copytree(_racy_submission(tmp_path), root / "submission")
    assert _run(root).returncode == 0
    full = json.loads((root / "results" / "scangrade.json").read_text())
    assert full["device"]["checks"] == "on"
    assert [p["status"] for p in full["parts"] if p["key"] == "part1_naive"] == ["fail"]


def test_the_pytest_plugin_checks_by_default(pytester, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", CACHE_HOME)
    monkeypatch.delenv("SCANGRADE_BACKEND", raising=False)
    _racy_config(pytester.path)
    sub = pytester.path / "sub"
    sub.mkdir()
    shutil.copy(RACY_PART1, sub / "part1_naive.cu")
    args = ("--scangrade", "sub/part1_naive.cu", "--scangrade-backend", "emulator", "-p", "no:cacheprovider")
    checked = pytester.runpytest_subprocess(*args, timeout=300)
    checked.assert_outcomes(failed=3)  # n = 1, 33 and the block's 128
    assert "(race)" in checked.stdout.str()
    pytester.runpytest_subprocess(*args, "--scangrade-no-checks", timeout=300).assert_outcomes(passed=3)


# --- 5. No visible result carries anything from a hidden case ------------------------------------

def _stash_config(tmp_path):
    path = tmp_path / "stash.yaml"
    path.write_text("block_size: 128\nseed: 7\nparts:\n  part1_naive:\n    points_per_case: 1\n"
                    "    dtypes: [int32, float32]\n    sizes: [1, 3, 33]\n")
    private = tmp_path / "stash-private.yaml"
    private.write_text("seed: 99\nparts:\n  part1_naive:\n    hidden_sizes: [77]\n")
    return load_private(load_config(path), private)


def test_every_visible_case_of_every_dtype_runs_before_any_hidden_case(tmp_path):
    cfg = _stash_config(tmp_path)
    order = [(c.visibility, c.dtype) for c in case_list(cfg, "part1_naive")]
    assert order == [("visible", "int32")] * 4 + [("visible", "float32")] * 4 + [("hidden", "int32"),
                                                                                 ("hidden", "float32")]


def test_a_kernel_that_stashes_n_in_a_device_global_shows_no_hidden_size(tmp_path):
    cfg = _stash_config(tmp_path)
    folder = tmp_path / "stash"
    folder.mkdir()
    shutil.copy(BROKEN / "part1_stash_n.cu", folder / "part1_naive.cu")
    p = grade(folder, cfg=cfg, selection=EMULATOR, parts=["part1_naive"], checks=False).parts[0]
    visible = [c for c in p.cases if c.visibility == "visible"]
    assert [c.visibility for c in p.cases] == ["visible"] * 8 + ["hidden"] * 2  # reports: visible, then hidden
    # the kernel would write the previous launch's n into out[0]; every run starts with fresh
    # __device__ variables (docs/security.md), so no case shows any other case's size
    assert all(c.status == "pass" and c.mismatch is None for c in p.cases), [(c.name, c.message) for c in p.cases]
    assert not any("77" in c.message for c in visible)


def test_performance_is_scored_after_the_hidden_cases_and_only_when_they_pass():
    from grader.grading.worker.timing_phase import performance_after_hidden
    from grader.core.performance import Performance
    from grader.core.results import CaseResult

    def case(status, visibility="hidden"):
        return CaseResult(name="hidden #1 int32", n=5, dtype="int32", seed=1, status=status, points=0.0,
                          max_points=1.0, visibility=visibility)
    scored = Performance(4.0, 6.0, 1.1, "time / reference time = 1.10")
    assert performance_after_hidden(scored, [case("pass")]) == scored
    lost = performance_after_hidden(scored, [case("pass"), case("fail")])
    assert lost.points == 0.0 and lost.max_points == 6.0 and "hidden case" in lost.message
    assert performance_after_hidden(None, [case("fail")]) is None


# --- 3. Hints are right ---------------------------------------------------------------------------

def _int32(values):
    return np.asarray(values, dtype=np.int32)


def test_at_n_1_a_copy_of_the_input_is_not_called_the_inclusive_scan():
    x = _int32([5])
    mm = diagnose(_int32([5]), exclusive_scan(x), source=x, inclusive=False, tile=None)
    assert mm is not None and "inclusive scan" not in (mm.hint or "")
    assert "out[0]" in mm.hint and "0" in mm.hint  # an exclusive scan starts with 0
    mm = diagnose(_int32([0]), inclusive_scan(x), source=x, inclusive=True, tile=None)
    assert mm is not None and "exclusive scan" not in (mm.hint or "")
    assert "in[0]" in mm.hint


def test_the_other_kind_of_scan_is_still_named_where_it_can_be_told_apart():
    x = _int32([3, 1, 4, 1, 5])
    mm = diagnose(inclusive_scan(x).astype(np.int32), exclusive_scan(x), source=x, inclusive=False, tile=None)
    assert mm.hint.startswith("this is the inclusive scan")
    mm = diagnose(exclusive_scan(x).astype(np.int32), inclusive_scan(x), source=x, inclusive=True, tile=None)
    assert mm.hint.startswith("this is the exclusive scan")


def test_at_n_2_the_input_shifted_by_one_is_not_called_the_exclusive_scan():
    x = _int32([3, 1])
    mm = diagnose(_int32([0, 3]), inclusive_scan(x), source=x, inclusive=True, tile=None)
    assert mm is not None and "exclusive scan" not in (mm.hint or "")


def _last_tile_wrong(n, tile):
    x = np.ones(n, dtype=np.int32)
    expected = exclusive_scan(x)
    got = expected.astype(np.int32).copy()
    got[-1] += 1
    return diagnose(got, expected, source=x, inclusive=False, tile=tile)


def test_the_partial_tile_hint_needs_more_than_one_tile():
    assert "tile" not in (_last_tile_wrong(100, 512).hint or "")  # one tile: nothing to single out
    assert _last_tile_wrong(100, None).hint is None and _last_tile_wrong(100, None).first_wrong_tile is None
    mm = _last_tile_wrong(1100, 512)
    assert mm.first_wrong_tile == 1024
    assert "only the last, partial tile is wrong" in mm.hint and "512" in mm.hint and "n = 1100" in mm.hint


@pytest.mark.parametrize("key, tile", [("part1_naive", None), ("part2_blelloch", None),
                                       ("part3_conflict_free", None), ("part4_any_size", 2 * 256),
                                       ("part5_single_pass", 64 * 4)])
def test_each_part_names_its_own_tile(tmp_path, key, tile):
    cfg = _part5_config(tmp_path)
    pc = cfg.parts["part5_single_pass"]
    pc4 = pc.model_copy(update={"block_size": 256})
    assert PARTS[key].tile_of(pc4 if key == "part4_any_size" else pc) == tile


# --- 6. Worker text is capped and made safe ----------------------------------------------------------

CONTROLS = ("\x1b", "\x07", "\x9b", "\x00")


def test_clean_text_removes_escape_sequences_and_escapes_control_characters():
    text = "a\x1b[2J\x1b[31mred\x1b[0m\x1b]0;title\x07 \x9b31mC1 \x00nul\x07\r\nnext\tcol"
    assert clean_text(text) == "ared C1 \\x00nul\\x07\nnext\tcol"


def test_clean_text_cuts_by_bytes_and_lines_and_says_how_much():
    long = clean_text("é" * 5000)  # 10,000 bytes
    assert len(long.encode()) < MESSAGE_BYTES + 40 and long.endswith(f"… (cut: {10000 - MESSAGE_BYTES} bytes)")
    many = clean_text("\n".join(["line"] * 1000))
    assert many.count("\n") == MESSAGE_LINES and "(cut: " in many


def test_a_forged_4_mib_frame_from_a_worker_is_capped_and_cleaned(tmp_path):
    from grader.grading.protocol import EventReader
    path = tmp_path / "events.jsonl"
    result = {"name": "n=1 int32", "n": 1, "dtype": "int32", "seed": 1, "status": "fail", "points": 0.0,
              "max_points": 1.0, "message": "\x1b[2J" + "x" * (4 << 20), "visibility": "visible"}
    path.write_text(json.dumps({"event": "case", "result": result}) + "\n"
                    + json.dumps({"event": "compile-error", "message": "\x1b]0;t\x07" + "y\n" * 100000}) + "\n")
    case_ev, compile_ev = EventReader(path).poll()
    case = case_ev.result
    assert len(case.message.encode()) < MESSAGE_BYTES + 40 and "\x1b" not in case.message
    assert "(cut: " in case.message
    assert len(compile_ev.message.encode()) < 20000 and not any(ch in compile_ev.message for ch in CONTROLS)


def test_a_parts_case_messages_share_one_budget():
    budget = [PART_CASES_BYTES]
    big = CaseResult(name="n=1 int32", n=1, dtype="int32", seed=1, status="fail", points=0.0, max_points=1.0,
                     message="first line\n" + "z" * 10000)
    kept = [clean_case(big, budget) for _ in range(40)]
    assert sum(len(c.message.encode()) for c in kept) <= PART_CASES_BYTES + 40 * 300
    assert kept[0].message.startswith("first line\nzzz") and kept[-1].message.startswith("first line\n… (cut")


def _grade_in_every_format(tmp_path, capsys, attack: str):
    """``scangrade grade`` of the attack as Part 1, writing every report format: (what it printed,
    format -> the file written)."""
    folder = tmp_path / "sub"
    folder.mkdir()
    shutil.copy(ATTACKS / f"{attack}.cu", folder / "part1_naive.cu")
    config = write_config(tmp_path, sizes={"part1_naive": [5]})
    outputs = {k: tmp_path / f"out.{k}" for k in ("json", "junit", "markdown", "gradescope")}
    argv = ["grade", str(folder), "--config", str(config), "--backend", "emulator"]
    for k, path in outputs.items():
        argv += [f"--{k}", str(path)]
    assert main(argv) == 1
    return capsys.readouterr(), outputs


def test_escape_sequences_in_compiler_output_reach_no_report(tmp_path, capsys):
    printed, outputs = _grade_in_every_format(tmp_path, capsys, "compile_error_ansi")
    texts = [printed.out, printed.err] + [p.read_text(encoding="utf-8") for p in outputs.values()]
    for text in texts:
        assert not any(ch in text for ch in CONTROLS), repr(text[:300])
        assert "\\u001b" not in text and "&#27;" not in text  # nor escaped into JSON or XML
    part = json.loads(outputs["json"].read_text())["parts"][0]
    assert part["status"] == "compile-error" and "PASS all cases" in part["message"]
    assert len(part["message"].encode()) <= PART_MESSAGE_BYTES + 40



#: Bidirectional controls and separators (what compile_error_bidi.cu holds).
BIDI = ("\u202a", "\u202b", "\u202c", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f",
        "\u061c", "\u2028")


def test_the_one_cleaner_escapes_bidirectional_controls_everywhere_text_is_cleaned():
    from grader.grading.intake import show
    from grader.render._common import printable
    text = "a\u202eb\u2066c\u2069d\u200fe\u061cf\u2028g\ud800h\uffff\tok\nok\x1b[31m"
    for clean in (clean_text, printable, show):
        out = clean(text if clean is not show else text.replace("\ud800", ""))  # a name has no lone surrogate
        assert not any(ch in out for ch in (*BIDI, "\ud800", "\uffff", "\x1b")), (clean, out)
        assert "\\u202e" in out and "\\u2066" in out and "\\u061c" in out, (clean, out)
    assert printable(text).endswith("\tok\nok") and show("a\nb") == "a\\x0ab"
    assert printable(printable(text)) == printable(text)


def test_bidirectional_controls_in_compiler_output_reach_no_report(tmp_path, capsys):
    from grader.render.class_report import class_report
    from grader.core.results import result_from_dict
    printed, outputs = _grade_in_every_format(tmp_path, capsys, "compile_error_bidi")
    data = json.loads(outputs["json"].read_text())
    html = class_report([("student", result_from_dict(data))])
    texts = [printed.out, printed.err, html, json.dumps(data, ensure_ascii=False),
             json.dumps(json.loads(outputs["gradescope"].read_text()), ensure_ascii=False)]
    texts += [p.read_text(encoding="utf-8") for p in outputs.values()]
    for text in texts:
        assert not any(ch in text for ch in BIDI), [hex(ord(ch)) for ch in BIDI if ch in text]
    part = data["parts"][0]
    assert part["status"] == "compile-error" and "score: \\u202e001/0\\u202c points" in part["message"]

# --- 4. A hang costs its case only ------------------------------------------------------------------

def _hang_config(tmp_path, *, part_s, case_s):
    path = write_config(tmp_path, part_s=part_s, sizes={"part1_naive": [1, 3, 33, 100]},
                        extra=f"  case_s: {case_s}\n")
    return load_config(path)


def test_the_cases_after_a_hung_case_are_graded_in_a_new_worker(tmp_path, pace):
    cfg = _hang_config(tmp_path, part_s=pace.seconds(60), case_s=pace.seconds(2))
    folder = tmp_path / "hang"
    folder.mkdir()
    shutil.copy(BROKEN / "part1_hang_some_n.cu", folder / "part1_naive.cu")
    p = grade(folder, cfg=cfg, selection=EMULATOR, parts=["part1_naive"], checks=False).parts[0]
    status = {c.n: c.status for c in p.cases}
    assert status == {1: "pass", 3: "pass", 33: "timeout", 100: "pass", 128: "pass"}, \
        [(c.name, c.status, c.message) for c in p.cases]
    assert p.status == "timeout" and p.points == 4
    assert "n=33 int32" in p.message and "timeouts.case_s" in p.message


def test_a_kernel_that_hangs_at_every_n_still_ends_within_the_part_timeout(tmp_path, pace):
    cfg = _hang_config(tmp_path, part_s=pace.seconds(8), case_s=pace.seconds(1))
    folder = tmp_path / "hang"
    folder.mkdir()
    shutil.copy(BROKEN / "part1_hang.cu", folder / "part1_naive.cu")
    t0 = time.monotonic()
    p = grade(folder, cfg=cfg, selection=EMULATOR, parts=["part1_naive"], checks=False).parts[0]
    assert time.monotonic() - t0 < cfg.timeouts.part_s + pace.seconds(4)  # part_s, and the time to stop the last worker
    statuses = [c.status for c in p.cases]
    assert p.status == "timeout" and p.points == 0
    assert statuses.count("timeout") >= 2 and set(statuses) <= {"timeout", "not-run"}, statuses


# --- 8. The settings a run decides reach its workers ---------------------------------------------------

def test_a_worker_of_a_parallel_batch_runs_the_emulator_on_one_thread(tmp_path):
    from grader.classwork.batch import batch
    from grader.render.formats import student_reports
    cfg = load_config(write_config(tmp_path, sizes={"part1_naive": [5]}))
    assert cfg.emulator.workers == 0  # the file says: one thread per core
    subs = tmp_path / "subs"
    (subs / "alice").mkdir(parents=True)
    shutil.copy(BROKEN / "part1_correct_single_buffer.cu", subs / "alice" / "part1_naive.cu")
    rows = batch(subs, out=tmp_path / "out", cfg=cfg, selection=EMULATOR, reports=student_reports, jobs=2, checks=False)
    assert rows[0][1].device["workers"] == "1"


def test_the_worker_takes_the_effective_settings_from_the_job_not_from_the_file(tmp_path):
    from grader.grading.part_runner import grade_part
    cfg = load_config(write_config(tmp_path, sizes={"part1_naive": [5]}))
    folder = tmp_path / "sub"
    folder.mkdir()
    shutil.copy(BROKEN / "part1_correct_single_buffer.cu", folder / "part1_naive.cu")
    part, device = grade_part(PARTS["part1_naive"], folder / "part1_naive.cu", backend="emulator", checks=False,
                              cfg=cfg.override(emulator={"workers": 3, "sandbox": "off"}))
    assert part.status == "pass" and device["workers"] == "3" and device["sandbox"].startswith("off")


# --- 7. Grading machines refuse to run without the OS sandbox unless told ---------------------------

@pytest.mark.parametrize("explicit, official, allow, expected", [
    (None, True, False, "required"), (None, False, False, "auto"), (None, True, True, "auto"),
    ("auto", True, False, "auto"), ("off", True, False, "off"), ("required", False, False, "required"),
    ("required", True, True, "auto"), ("off", True, True, "off")])
def test_the_sandbox_policy_of_each_command(tmp_path, explicit, official, allow, expected):
    from grader.grading.runner import grading_sandbox
    extra = f"emulator:\n  sandbox: '{explicit}'\n" if explicit else ""  # quoted: YAML reads a bare off as false
    cfg = load_config(write_config(tmp_path, sizes={"part1_naive": [5]}, extra=extra))
    assert cfg.emulator.sandbox_explicit == (explicit is not None)
    assert grading_sandbox(cfg, official=official, allow_unsandboxed=allow).emulator.sandbox == expected


@pytest.fixture
def no_bubblewrap(monkeypatch):
    from grader.toolchain import sandbox as sandbox_module
    monkeypatch.setattr(sandbox_module, "probe_bubblewrap",
                        lambda: (None, "bubblewrap does not work here (no user namespaces)"))


def test_batch_refuses_without_bubblewrap_unless_allowed(tmp_path, capsys, no_bubblewrap):
    config = write_config(tmp_path, sizes={"part1_naive": [5]})
    subs = tmp_path / "subs"
    (subs / "alice").mkdir(parents=True)
    shutil.copy(BROKEN / "part1_correct_single_buffer.cu", subs / "alice" / "part1_naive.cu")
    argv = ["batch", str(subs), "--config", str(config), "--backend", "emulator", "--no-checks", "--jobs", "1"]
    assert main(argv + ["--out", str(tmp_path / "refused")]) == 2
    err = capsys.readouterr().err
    assert "only inside its OS sandbox" in err and "no user namespaces" in err and "--allow-unsandboxed" in err
    assert not (tmp_path / "refused" / "gradebook.csv").exists()
    assert main(argv + ["--out", str(tmp_path / "allowed"), "--allow-unsandboxed"]) == 0
    assert (tmp_path / "allowed" / "gradebook.csv").is_file()


@pytest.mark.parametrize("command", [["batch"], ["grade", "--require-sandbox"]])
def test_grading_for_the_record_on_a_gpu_refuses_an_unsandboxed_nvcc_as_it_refuses_the_emulator(
        tmp_path, capsys, monkeypatch, no_bubblewrap, command):
    """nvcc without bubblewrap can read what the grader's user can (were a directive to get past the
    filters): batch and the Gradescope autograder stop before compiling anything, exit status 2."""
    import grader.backends
    monkeypatch.setattr(grader.backends, "probe_pycuda", lambda *a, **k: (True, "a GPU (pretended)"))
    config = write_config(tmp_path, sizes={"part1_naive": [5]})
    subs = tmp_path / "subs"
    (subs / "alice").mkdir(parents=True)
    shutil.copy(BROKEN / "part1_correct_single_buffer.cu", subs / "alice" / "part1_naive.cu")
    target = str(subs) if command[0] == "batch" else str(subs / "alice")
    extra = ["--out", str(tmp_path / "out")] if command[0] == "batch" else []
    argv = [command[0], target, *command[1:], "--config", str(config), "--backend", "pycuda", "--no-checks", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "compiles with nvcc only inside the OS sandbox" in err and "no user namespaces" in err, err
    assert not (tmp_path / "out" / "gradebook.csv").exists()


def test_grade_on_a_laptop_runs_without_bubblewrap_and_the_autograders_grade_refuses(tmp_path, capsys, no_bubblewrap):
    config = write_config(tmp_path, sizes={"part1_naive": [5]})
    folder = tmp_path / "sub"
    folder.mkdir()
    shutil.copy(BROKEN / "part1_correct_single_buffer.cu", folder / "part1_naive.cu")
    argv = ["grade", str(folder), "--config", str(config), "--backend", "emulator", "--no-checks"]
    assert main(argv) == 0
    assert main(argv + ["--require-sandbox"]) == 2
    assert "emulator.sandbox: auto" in capsys.readouterr().err
    config.write_text(config.read_text().replace("parts:\n", "emulator:\n  sandbox: auto\nparts:\n"))
    assert main(argv + ["--require-sandbox"]) == 0  # the config's own choice holds


def _path_without_bubblewrap(tmp_path) -> str:
    """A PATH holding every program of this one's folders but bwrap (symbolic links in one folder)."""
    import os
    fake = tmp_path / "bin-without-bwrap"
    fake.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            if entry.name != "bwrap" and not (fake / entry.name).exists():
                (fake / entry.name).symlink_to(entry.path)
    return str(fake)


def test_the_gradescope_autograder_requires_the_sandbox_unless_its_config_says_otherwise(tmp_path):
    from grader.packaging.gradescope_bundle import build_bundle
    from tests.packaging.test_gradescope_bundle import _run, _unpack

    path = _path_without_bubblewrap(tmp_path)
    for policy, graded in ((None, False), ("auto", True)):
        base = tmp_path / (policy or "unset")
        base.mkdir()
        config = write_config(base, sizes={"part1_naive": [5]},
                              extra=f"emulator:\n  sandbox: {policy}\n" if policy else "")
        made = build_bundle(base / "ag.zip", config=config)
        root = base / "autograder"
        _unpack(made.archive, root)
        (root / "submission").mkdir()
        shutil.copy(BROKEN / "part1_correct_single_buffer.cu", root / "submission" / "part1_naive.cu")
        run = _run(root, PATH=path)
        assert run.returncode == 0, run.stdout + run.stderr
        data = json.loads((root / "results" / "results.json").read_text())
        if graded:
            assert data["score"] == 3, data
        else:
            assert data["score"] == 0 and "could not grade" in data["output"]
            assert "only inside its OS sandbox" in run.stderr


def test_slurm_tasks_carry_the_checks_and_sandbox_choices(tmp_path):
    from grader.classwork.slurm import sbatch_scripts
    config = write_config(tmp_path, sizes={"part1_naive": [5]})
    common = dict(out=tmp_path / "out", shards=2, config=config, private_config=None, backend="emulator")
    plain, _ = sbatch_scripts(tmp_path, checks=False, allow_unsandboxed=True, **common)
    assert "--no-checks" in plain and "--allow-unsandboxed" in plain
    default, _ = sbatch_scripts(tmp_path, checks=True, **common)
    assert "--checks" in default and "--no-checks" not in default and "--allow-unsandboxed" not in default
