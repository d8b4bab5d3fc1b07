"""The worker protocol (grader/grading/protocol.py): the job, the events, their one wire format."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from grader.assignment.config import load_config, load_private
from grader.grading.protocol import (EVENTS, CaseDone, CaseStart, Compiled, CompileFailed, CompilerNotes, Device, DeviceUpdate,
                             Done, EventReader, EventWriter, GpuWait, HiddenStart, Job, LocatingFault, PerformanceScored,
                             Profiled, ProfileStart, ProtocolError, RooflineTaken, Timed, TimingStart, WorkerError, decode,
                             encode)
from grader.core.performance import Performance, Profile, Roofline, RooflineRow, Timing
from grader.core.results import CaseResult, Mismatch
from tests.conftest import ROOT, write_config

CASE = CaseResult(name="n=33 int32", n=33, dtype="int32", seed=7, status="fail", points=0.0, max_points=1.0,
                  message="out[3] = 1, expected 2", mismatch=Mismatch("out", 3, 1, 2, 30, None, "a hint"),
                  elapsed_ms=1.5, kind="mismatch")
TIMED = CaseResult(name="timed n=1024 int32", n=1024, dtype="int32", seed=7, status="pass", points=0.0,
                   max_points=0.0, timing=Timing(median_ms=0.1, spread=0.02, runs=5, gbps=80.0, copy_fraction=0.5,
                                                 reference_ms=0.09, ratio=1.1, cpu_speedup=3.0))
ONE_OF_EACH = [Device({"backend": "emulator", "workers": "1"}), DeviceUpdate({"copy_gbps": "900"}),
               CompileFailed("part1_naive.cu:3: error: x"), Compiled(), CaseStart("n=33 int32"), CaseDone(CASE),
               Timed(TIMED), TimingStart(), HiddenStart(),
               PerformanceScored(Performance(1.5, 2.0, 1.2, "time / reference time = 1.20")), ProfileStart(),
               Profiled(Profile(0.0, 1.0, "line 3: 2-way bank conflict", n=256, wavefronts=10, worst_line=3)),
               RooflineTaken(Roofline("NVIDIA H100 80GB HBM3", 3350.0, 10.0, 1.0, "an estimate", n=65536,
                                      dtype="int32", bytes_per_element=16.5, launches=3,
                                      rows=(RooflineRow(1 << 20, 0.008, 0.008, 1.0),))),
               LocatingFault("n=33 int32"), GpuWait("n=33 int32"), CompilerNotes("n=33 float32"),
               WorkerError("no C++ compiler"), Done()]


def _job(tmp_path) -> Job:
    cfg = load_config(write_config(tmp_path, sizes={"part1_naive": [5]}))
    return Job.for_part(cfg, part="part1_naive", source=tmp_path / "part1_naive.cu", backend="emulator",
                        events=tmp_path / "events.jsonl", checks=True, start=2, earlier_failed=True)


# --- the job -----------------------------------------------------------------------------------------

def test_the_job_round_trips_through_its_json(tmp_path):
    job = _job(tmp_path)
    again = Job.from_json(job.to_json())
    assert again == job and isinstance(again, Job)
    assert (again.part, again.backend, again.checks, again.start, again.earlier_failed) == \
        ("part1_naive", "emulator", True, 2, True)
    assert again.source == str((tmp_path / "part1_naive.cu").resolve())


@pytest.mark.parametrize("checks", [True, False], ids=["checks", "no-checks"])
def test_the_job_carries_each_cases_check_mode_decided_with_the_case_list(tmp_path, checks):
    """Checked up to emulator.checks_max_n, sampled above it, plain with the checks off: decided
    once, by case_list, and read back from the job as it was decided (with its reason)."""
    from grader.grading.case.cases import CheckMode, case_list

    cfg = load_config(write_config(tmp_path, sizes={"part4_any_size": [33, 600]})).override(
        emulator={"checks_max_n": 100})
    job = Job.for_part(cfg, part="part4_any_size", source=tmp_path / "part4_any_size.cu", backend="emulator",
                       events=tmp_path / "e.jsonl", checks=checks)
    cases = Job.from_json(job.to_json()).cases
    assert list(cases) == case_list(cfg, "part4_any_size", checks=checks)
    modes = {(c.n, c.check) for c in cases}
    if checks:
        assert modes == {(1, CheckMode.CHECKED), (33, CheckMode.CHECKED), (600, CheckMode.SAMPLED)}
        assert {c.check_reason for c in cases if c.n == 600} == {"n is above emulator.checks_max_n = 100"}
    else:
        assert modes == {(1, CheckMode.PLAIN), (33, CheckMode.PLAIN), (600, CheckMode.PLAIN)}


def test_the_worker_grades_with_the_config_the_runner_validated_not_the_file(tmp_path):
    path = write_config(tmp_path, sizes={"part1_naive": [5]})
    private = tmp_path / "private.yaml"
    private.write_text("seed: 99\nparts:\n  part1_naive:\n    hidden_sizes: [7]\n")
    cfg = load_private(load_config(path), private)
    run_cfg = cfg.override(seed=1234, emulator={"workers": 1, "sandbox": "required", "checks_max_n": 64})
    job = Job.for_part(run_cfg, part="part1_naive", source=tmp_path / "a.cu", backend="emulator",
                       events=tmp_path / "e.jsonl", checks=False)
    path.write_text("not: [a config")  # the worker never reads the files again
    private.unlink()
    rebuilt = Job.from_json(job.to_json()).config
    assert rebuilt == run_cfg
    assert (rebuilt.seed, rebuilt.hidden_seed, rebuilt.parts["part1_naive"].hidden_sizes) == (1234, 99, (7,))
    assert (rebuilt.emulator.workers, rebuilt.emulator.sandbox, rebuilt.emulator.checks_max_n) == (1, "required", 64)


@pytest.mark.parametrize("change, words", [
    ({"part": 3}, "field 'part': input should be a valid string, not number"),
    ({"checks": "yes"}, "field 'checks': input should be a valid boolean, not string"),
    ({"start": True}, "field 'start': input should be a valid integer, not boolean"),
    ({"surprise": 1}, "unknown field 'surprise'"),
    ({"config": {"seed": 3}}, "field 'config.parts' is missing"),
    ({"config": "config.yaml"}, "field 'config': input should be an object, not string"),
])
def test_a_malformed_job_is_refused_naming_the_field(tmp_path, change, words):
    body = {**json.loads(_job(tmp_path).to_json()), **change}
    with pytest.raises(ProtocolError) as info:
        Job.from_json(json.dumps(body), where="job-0.json")
    assert str(info.value).startswith("job-0.json: ") and words in str(info.value)


def test_a_job_whose_config_breaks_a_rule_of_the_config_is_refused(tmp_path):
    body = json.loads(_job(tmp_path).to_json())
    body["config"]["parts"]["part1_naive"]["sizes"] = [5, 10**6]  # beyond Part 1's limit
    with pytest.raises(ProtocolError, match="job: field .config.parts.part1_naive.sizes.: sizes.1. = 1000000 exceeds"):
        Job.from_json(json.dumps(body))


def test_a_job_without_a_required_field_or_not_an_object_is_refused(tmp_path):
    body = json.loads(_job(tmp_path).to_json())
    del body["source"]
    with pytest.raises(ProtocolError, match="field 'source' is missing"):
        Job.from_json(json.dumps(body))
    with pytest.raises(ProtocolError, match="not JSON"):
        Job.from_json("{")
    with pytest.raises(ProtocolError, match="a job is a JSON object, not array"):
        Job.from_json("[]")


def test_the_worker_says_in_one_line_why_it_cannot_use_its_job(tmp_path):
    bad = tmp_path / "job.json"
    bad.write_text(json.dumps({"part": "part1_naive"}))
    run = subprocess.run([sys.executable, "-m", "grader.grading.worker", str(bad)], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr.strip() == f"scangrade worker: {bad}: field 'config' is missing"


# --- the events --------------------------------------------------------------------------------------

def test_every_event_of_the_worker_has_one_type():
    assert set(EVENTS) == {"device", "device-update", "compile-error", "compiled", "case-start", "case", "timed",
                           "timing-start", "hidden-start", "performance", "profile-start", "profile", "roofline",
                           "locating-fault", "gpu-wait", "compiler-notes", "error", "done"}
    assert {type(ev) for ev in ONE_OF_EACH} == set(EVENTS.values())


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda ev: ev.name)
def test_each_event_round_trips_through_encode_and_decode(event):
    stamped = dataclasses.replace(event, t=1700000000.25)
    line = encode(stamped)
    assert "\n" not in line and json.loads(line)["event"] == event.name
    assert decode(line) == stamped
    assert decode(encode(event)) == event  # no stamp: t stays None


def test_the_wire_keeps_its_field_names():
    assert json.loads(encode(CaseStart("n=1 int32"))) == {"event": "case-start", "t": None, "name": "n=1 int32"}
    wire = json.loads(encode(CaseDone(CASE)))
    assert wire["result"]["mismatch"]["hint"] == "a hint" and wire["result"]["kind"] == "mismatch"
    assert json.loads(encode(WorkerError("x"))) == {"event": "error", "t": None, "message": "x"}


@pytest.mark.parametrize("line", [
    b"not json", b"[1, 2]", b'{"event": "launched"}', b'{"event": 3}', b'{"event": "case-start"}',
    b'{"event": "case-start", "name": 5}', b'{"event": "case", "result": "x"}',
    b'{"event": "case", "result": {"name": "n=1"}}', b'{"event": "device", "info": []}',
    b'{"event": "performance", "result": {"points": 1, "bogus": 2}}', b"\xff\xfe",
])
def test_a_malformed_line_is_dropped(line):
    assert decode(line) is None


def test_a_result_of_the_wrong_shape_is_dropped_not_handed_to_the_runner():
    wire = json.loads(encode(CaseDone(CASE)))
    for field, value in (("points", "all of them"), ("n", [33]), ("findings", [{"kind": 3, "message": "x"}])):
        bad = {**wire, "result": {**wire["result"], field: value}}
        assert decode(json.dumps(bad)) is None, field
    assert decode(json.dumps(wire)).result.points == 0.0


def test_decoded_strings_are_cleaned_and_capped():
    line = json.dumps({"event": "device", "info": {"device": "\x1b[31mGPU\x1b[0m", "workers": 4}})
    assert decode(line).info == {"device": "GPU", "workers": "4"}
    err = decode(json.dumps({"event": "error", "message": "a\x07b" + "z" * 100000}))
    assert err.message.startswith("a\\x07bzzz") and "(cut: " in err.message


def test_the_reader_takes_whole_lines_only_as_the_writer_appends(tmp_path):
    path = tmp_path / "events.jsonl"
    reader = EventReader(path)
    assert reader.poll() == []  # no file yet
    with EventWriter(path) as writer:
        writer.emit(Compiled())
        writer.emit(CaseStart("n=1 int32"))
        first = reader.poll()
        assert [type(ev) for ev in first] == [Compiled, CaseStart]
        assert all(isinstance(ev.t, float) and ev.t > 1e9 for ev in first)
        with open(path, "a") as f:
            f.write(encode(Done())[:5])  # a line half written
        assert reader.poll() == []
    with open(path, "a") as f:
        f.write(encode(Done())[5:] + "\n")
    assert [type(ev) for ev in reader.poll()] == [Done]
    assert [ev.name for ev in reader.items] == ["compiled", "case-start", "done"]


def test_the_runner_hands_each_typed_event_to_on_event_as_the_progress_bar_reads_it(tmp_path):
    from grader.cli import _Progress
    from grader.assignment.parts import PARTS
    from grader.grading.part_runner import grade_part
    from tests.conftest import BROKEN

    cfg = load_config(write_config(tmp_path, sizes={"part1_naive": [5]}))
    seen = []
    part, _ = grade_part(PARTS["part1_naive"], BROKEN / "part1_correct_single_buffer.cu", cfg=cfg,
                         backend="emulator", checks=False, on_event=lambda name, ev: seen.append((name, ev)))
    assert part.status == "pass"
    assert all(name == ev.name and ev.t is not None for name, ev in seen)
    names = [name for name, _ in seen]
    assert names[:2] == ["device", "compiled"] and names[-1] == "done"
    assert [ev.case for name, ev in seen if name == "case-start"] == [c.name for c in part.cases]

    class Bar:  # rich's Progress, as the bar calls it
        def __init__(self):
            self.calls = []

        def update(self, task, description):
            self.calls.append(description)

        def advance(self, task):
            self.calls.append("+1")
    progress = _Progress(0)
    progress.bar, progress.task = Bar(), 0
    for name, ev in seen:
        progress(name, ev)
    assert progress.bar.calls == [x for c in part.cases for x in (f"case {c.name}", "+1")]
