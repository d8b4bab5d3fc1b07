"""The grader under an address-space limit (``ulimit -v``, as HPC login nodes, course containers and
CI runners set it): the emulator's device memory is sized from the config, so the reference
solutions grade under 4 GiB; where a limit cannot be met, the part is an ``error`` whose message is
one line saying what to do, the other parts are graded, and no report holds a Python traceback."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from grader.assignment.config import load_config
from grader.grading.case.cases import RUNS_LIVE, case_runs, device_memory_bytes
from grader.assignment.parts import DTYPES, PARTS
from grader.assignment.plans import Run, plan_allocations, prepare
from grader.render.formats import FORMATS

from tests.conftest import ROOT, SOLUTIONS

CONFIG = ROOT / "config.yaml"
GiB = 2**30


def _grade(tmp_path: Path, limit: int, *, config: Path = CONFIG, parts: tuple[str, ...] = (),
           private: Path | None = None) -> dict[str, str]:
    """``scangrade grade`` of the reference solutions on the emulator in a child process whose
    address space is capped at ``limit`` bytes (RLIMIT_AS, what ``ulimit -v`` sets), writing every
    report format: ``{format name (or "terminal"): its text}``."""
    outputs = {f.name: tmp_path / f"report-{f.name}" for f in FORMATS.values() if f.flag}

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    cmd = [sys.executable, "-m", "grader", "grade", str(SOLUTIONS), "--backend", "emulator", "--config", str(config),
           *(a for p in parts for a in ("--part", p)), *(("--private-config", str(private)) if private else ()),
           *(a for f in FORMATS.values() if f.flag for a in (f.flag, str(outputs[f.name])))]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, preexec_fn=cap, timeout=1800)
    assert all(path.exists() for path in outputs.values()), proc.stdout + proc.stderr
    texts = {name: path.read_text(encoding="utf-8") for name, path in outputs.items()}
    texts["text"] = proc.stdout + proc.stderr  # the terminal report
    return texts


def _result(texts: dict[str, str]) -> dict:
    return json.loads(texts["json"])


def test_the_device_memory_holds_the_largest_cases_runs_and_not_much_more() -> None:
    """The emulator's device memory for a part is what its largest case needs: :data:`RUNS_LIVE`
    runs of it fit, with their guard zones and Part 4's levels, and one run more does not."""
    from grader.backends.emulator import EmulatorBackend

    cfg = load_config(CONFIG)
    for key in ("part4_any_size", "part5_single_pass"):
        part, pc = PARTS[key], cfg.parts[key]
        n = max(c.n for c in case_runs(cfg, key))
        backend = EmulatorBackend(workers=1, nvcc_check=False, device_memory=device_memory_bytes(case_runs(cfg, key)))
        try:
            runs = []
            for _ in range(RUNS_LIVE):
                run = Run(backend, None, DTYPES["float32"])
                prepare(run, part, pc, run.buffer("in", n, output=False), n)
                runs.append(run)
            live = sum(b for _, b in backend._device_memory().live())
            assert live == RUNS_LIVE * sum(plan_allocations(part, pc, n, DTYPES["float32"])), key
            with pytest.raises(MemoryError, match="device memory is full"):
                extra = Run(backend, None, DTYPES["float32"])
                prepare(extra, part, pc, extra.buffer("in", n, output=False), n)
        finally:
            backend.close()


def test_a_plans_allocations_follow_its_levels() -> None:
    """Part 4's plan at n elements allocates, besides the input, an output and tile sums per level of
    its hierarchy (2 * BLOCK_SIZE elements a tile), each with guard zones of 256 elements a side."""
    cfg = load_config(CONFIG)
    part, pc = PARTS["part4_any_size"], cfg.parts["part4_any_size"]
    tile = part.tile_of(pc)
    for n in (1, tile, tile + 1, tile * tile + 1):
        expected, count = [n], n
        while True:
            sums = -(-count // tile)
            expected += [count, sums]
            if sums == 1:
                break
            count = sums
        assert plan_allocations(part, pc, n, np.dtype(np.int32)) == [4 * (c + 512) for c in expected], n


def test_the_reference_solutions_grade_on_the_emulator_under_a_4_gib_address_space_limit(tmp_path) -> None:
    texts = _grade(tmp_path, 4 * GiB)
    result = _result(texts)
    cases = [c for p in result["parts"] for c in p["cases"]]
    assert cases and all(c["status"] == "pass" for c in cases), texts["terminal"]
    assert all(p["status"] == "pass" for p in result["parts"]), texts["terminal"]
    # the profile's own emulator runs under the limit too, and the reference earns its points
    profiles = [p["profile"] for p in result["parts"] if p.get("profile") and p["profile"]["max_points"]]
    assert profiles and all(p["points"] == p["max_points"] and p["span_steps"] for p in profiles), profiles
    for name, text in texts.items():
        assert "Traceback" not in text, name


def test_a_part_the_limit_cannot_hold_is_an_error_in_one_line_and_the_others_are_graded(tmp_path) -> None:
    """Part 4 with a case of 2^29 elements needs about 8 GiB of device memory: under a 4 GiB limit
    it is an error whose message says, in one line, what to raise the limit to; Part 1 is graded
    as usual; no report format holds a traceback."""
    data = yaml.safe_load(CONFIG.read_text())
    data["parts"] = {"part1_naive": data["parts"]["part1_naive"],
                     "part4_any_size": {**data["parts"]["part4_any_size"], "sizes": [1, 512, 2**29]}}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(data))
    texts = _grade(tmp_path, 4 * GiB, config=config, parts=("part1_naive", "part4_any_size"))
    parts = {p["key"]: p for p in _result(texts)["parts"]}
    assert parts["part1_naive"]["status"] == "pass", texts["terminal"]
    assert all(c["status"] == "pass" for c in parts["part1_naive"]["cases"])
    p4 = parts["part4_any_size"]
    assert p4["status"] == "error", texts["terminal"]
    message = p4["message"]
    assert "\n" not in message and "ulimit -v" in message and "device memory" in message, message
    assert "raise the address-space limit (ulimit -v, now 4 GiB) to at least" in message, message
    for name, text in texts.items():
        assert "Traceback" not in text and 'File "' not in text, name
        if name in ("json", "gradescope", "markdown", "text"):
            assert "ulimit -v" in text, name


def test_a_limit_too_small_for_hidden_cases_gives_no_number_that_depends_on_them(tmp_path) -> None:
    """The same Part 4 case of 2^29 elements, hidden (a TA's private config): the part's message says
    the limit is too small for its cases, hidden ones included, and gives no size derived from them
    (nothing a student sees may depend on a hidden case)."""
    data = yaml.safe_load(CONFIG.read_text())
    data["parts"] = {"part4_any_size": {**data["parts"]["part4_any_size"], "sizes": [1, 512]}}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(data))
    private = tmp_path / "private.yaml"
    private.write_text("seed: 99\nparts:\n  part4_any_size:\n    hidden_sizes: [536870912]\n")
    texts = _grade(tmp_path, 4 * GiB, config=config, private=private)
    (p4,) = _result(texts)["parts"]
    assert p4["status"] == "error", texts["text"]
    assert "hidden ones included" in p4["message"] and "now 4 GiB" in p4["message"], p4["message"]
    assert not any(n in p4["message"] for n in ("8 GiB", "43 GiB", "536870912")), p4["message"]
    for name, text in texts.items():  # the full result (json) names the hidden case for the TA; no report its size
        assert not any(n in text for n in ("8 GiB", "43 GiB", "Traceback")), name


def test_a_worker_that_died_with_a_traceback_is_told_in_one_line() -> None:
    """A worker that exits with a Python traceback (a grader bug) gives the part its last line, not
    the traceback; one that could not get memory (numpy's import under a small ``ulimit -v``) says
    what to raise the limit to."""
    from grader.grading.part_runner import _worker_failure

    bug = ("Traceback (most recent call last):\n  File \"/x/grader/grading/worker.py\", line 1, in <module>\n"
           "    main()\nValueError: something the grader did not expect\n")
    why = _worker_failure(1, "the cases", bug)
    assert "\n" not in why and "ValueError: something the grader did not expect" in why and "File" not in why
    short = ("Traceback (most recent call last):\n  File \"<frozen importlib._bootstrap>\", line 1\n"
             "ImportError: libopenblas.so: failed to map segment from shared object\n")
    why = _worker_failure(1, "setting up", short)
    assert "\n" not in why and "ran out of memory" in why and "File" not in why
    if resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY:
        assert "out of memory" in why
    else:
        assert "ulimit -v" in why


def test_the_graders_own_process_out_of_memory_is_one_line(monkeypatch, capsys):
    """A ``MemoryError`` in the scangrade process itself (not a part's worker) ends the command with
    one line saying what to do, exit status 2, no traceback."""
    import grader.cli as cli

    def short(args):
        raise MemoryError()

    monkeypatch.setattr(cli, "_grade", short)
    assert cli.main(["grade", str(SOLUTIONS)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("scangrade: error: grade ran out of memory: ") and "Traceback" not in err


def test_the_grader_sizes_itself_to_the_cpus_it_may_use_not_the_machines() -> None:
    """Under taskset, a Slurm allocation or a container's cpuset, a batch's jobs and the emulator's
    threads follow the CPUs the process may run on: one CPU allowed, one job and one thread."""
    code = ("import os; os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})\n"
            "from grader.host.resources import usable_cpus\n"
            "from grader.classwork.batch import _gpus_and_jobs\n"
            "from grader.backends import Selection\n"
            "from grader.backends.emulator import EmulatorBackend\n"
            "sel = Selection('emulator', 'test')\n"
            "print(usable_cpus(), _gpus_and_jobs(sel, None)[1], EmulatorBackend(workers=0).workers)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "1", "1"]
