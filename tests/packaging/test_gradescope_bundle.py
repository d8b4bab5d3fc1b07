"""scangrade gradescope-bundle: the autograder zip, and its run_autograder run against a fake /autograder."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.cli import main
from grader.assignment.config import load_config, load_private
from grader.grading.case.cases import case_list
from grader.packaging.gradescope_bundle import SCRIPTS, build_bundle
from grader.assignment.parts import PARTS
from grader.render.gradescope import TEST_KEYS, TOP_LEVEL_KEYS, VISIBILITIES
from tests.conftest import BROKEN, SOLUTIONS, write_config

PRIVATE_SEED = 5550123


def _config(tmp_path: Path) -> Path:
    return write_config(tmp_path, sizes={"part1_naive": [5], "part2_blelloch": [7, 40]})


def _private(tmp_path: Path) -> Path:
    path = tmp_path / "private.yaml"
    path.write_text(f"seed: {PRIVATE_SEED}\nparts:\n  part2_blelloch:\n    hidden_sizes: [233]\n")
    return path


def _unpack(bundle: Path, root: Path) -> Path:
    """Extract the bundle as Gradescope does, into ROOT/source, with the modes stored in the zip."""
    source = root / "source"
    with zipfile.ZipFile(bundle) as z:
        for info in z.infolist():
            z.extract(info, source)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                (source / info.filename).chmod(mode)
    return source


def _run(root: Path, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("SCANGRADE_", "AUTOGRADER_"))}
    full.update({"AUTOGRADER_ROOT": str(root), "SCANGRADE_PYTHON": sys.executable, "SCANGRADE_BACKEND": "emulator"})
    full.update(env)
    return subprocess.run([str(root / "source" / "run_autograder")], cwd=root, env=full, capture_output=True,
                          text=True, timeout=300, check=False)


def _results(root: Path) -> dict:
    data = json.loads((root / "results" / "results.json").read_text())
    assert set(data) <= TOP_LEVEL_KEYS
    assert isinstance(data["score"], (int, float)) and data["visibility"] in VISIBILITIES
    for test in data.get("tests", []):
        assert set(test) <= TEST_KEYS and {"name", "score", "max_score"} <= set(test)
        statusless = test["name"].endswith(("(pending)", "· analysis"))  # 0 of 0: a note, not a test of points
        assert test.get("status", "passed" if statusless else None) in ("passed", "failed")
    return data


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bundle")
    made = build_bundle(tmp / "autograder.zip", config=_config(tmp), private_config=_private(tmp))
    return made, tmp


def test_the_bundle_holds_the_scripts_the_configs_and_the_grader_with_its_solutions(bundle):
    made, tmp = bundle
    with zipfile.ZipFile(made.archive) as z:
        infos = {i.filename: i for i in z.infolist()}
        assert {"setup.sh", "run_autograder", "config.yaml", "private.yaml", "scangrade/pyproject.toml",
                "scangrade/README.md", "scangrade/grader/cli.py", "scangrade/grader/grading/worker/main.py",
                "scangrade/grader/backends/emulator/runtime/prelude.h", "scangrade/reference/scan.py",
                "scangrade/reference/__init__.py"} <= set(infos)
        assert {f"scangrade/reference/solutions/{p.filename}" for p in PARTS.values()} <= set(infos)
        assert not [n for n in infos if "__pycache__" in n or n.endswith(".pyc") or "/." in n or n.startswith(".")]
        assert {n.split("/")[0] for n in infos} == {"setup.sh", "run_autograder", "config.yaml", "private.yaml",
                                                    "scangrade"}
        for name, info in infos.items():
            mode = info.external_attr >> 16
            assert stat.S_ISREG(mode), name
            assert bool(mode & 0o111) == (name in SCRIPTS), (name, oct(mode))
        assert z.read("private.yaml") == (tmp / "private.yaml").read_bytes()
        assert z.read("config.yaml") == (tmp / "config.yaml").read_bytes()
        run_autograder = z.read("run_autograder").decode()
    assert sorted(made.files) == sorted(infos)
    assert 'args=(grade "$ROOT/submission" --intake ' in run_autograder  # batch's intake


def test_the_scripts_are_valid_bash(bundle, tmp_path):
    made, _ = bundle
    source = _unpack(made.archive, tmp_path)
    for name in SCRIPTS:
        check = subprocess.run(["bash", "-n", str(source / name)], capture_output=True, text=True, check=False)
        assert check.returncode == 0, (name, check.stderr)
        assert (source / name).read_text().startswith("#!/usr/bin/env bash\n")
    assert 'pip install -e "$SOURCE/scangrade"' in (source / "setup.sh").read_text()


def test_run_autograder_grades_part_files_found_anywhere_in_the_submission(bundle, tmp_path):
    made, tmp = bundle
    root = tmp_path / "autograder"
    _unpack(made.archive, root)
    sub = root / "submission"
    (sub / "scan" / "src" / "deeper").mkdir(parents=True)
    (sub / "__MACOSX" / "scan").mkdir(parents=True)
    shutil.copy(SOLUTIONS / "part1_naive.cu", sub / "scan" / "part1_naive.cu")
    shutil.copy(SOLUTIONS / "part2_blelloch.cu", sub / "scan" / "src" / "part2_blelloch.cu")
    shutil.copy(BROKEN / "part2_off_by_one.cu", sub / "scan" / "src" / "deeper" / "part2_blelloch.cu")  # deeper
    (sub / "__MACOSX" / "part1_naive.cu").write_bytes(b"\x00\x05\x16\x07")  # macOS metadata, not source

    run = _run(root)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "[scan/src/part2_blelloch.cu]" in run.stdout and "[scan/part1_naive.cu]" in run.stdout
    data = _results(root)
    cfg = load_private(load_config(tmp / "config.yaml"), tmp / "private.yaml")
    expected = sum(len(case_list(cfg, k)) * cfg.parts[k].points_per_case for k in cfg.parts)
    assert expected == 3 + 5  # part1: n = 1, 5, 128; part2: 1, 7, 40, 256 and one hidden case
    assert data["score"] == expected == sum(t["score"] for t in data["tests"]) == sum(t["max_score"]
                                                                                      for t in data["tests"])
    assert all(t["status"] == "passed" for t in data["tests"])
    assert "hidden #1 int32" in json.dumps(data) and "n = 233" not in json.dumps(data)
    assert str(PRIVATE_SEED) not in json.dumps(data)
    full = json.loads((root / "results" / "scangrade.json").read_text())  # the staff's copy, hidden cases in full
    assert full["schema"] == "scangrade.result" and full["points"] == expected


def test_on_the_emulator_the_results_say_performance_waits_for_a_gpu(tmp_path):
    config = write_config(tmp_path, sizes={"part1_naive": [5]})
    config.write_text(config.read_text() + "    timing:\n      sizes: [128]\n      points: 3\n")
    made = build_bundle(tmp_path / "ag.zip", config=config)
    root = tmp_path / "autograder"
    _unpack(made.archive, root)
    (root / "submission").mkdir()
    shutil.copy(SOLUTIONS / "part1_naive.cu", root / "submission" / "part1_naive.cu")
    assert _run(root).returncode == 0
    data = _results(root)
    assert data["score"] == 3  # the three cases; the 3 performance points wait
    assert "Performance (3 points) is pending a run on a GPU" in data["output"]
    perf = next(t for t in data["tests"] if t["name"].endswith("performance (pending)"))
    assert perf["score"] == perf["max_score"] == 0 and "3 performance points pending a run on a GPU" in perf["output"]


def _crashing_python(tmp_path: Path) -> Path:
    """A Python whose ``-m grader`` dies with a traceback (as a bug in scangrade would)."""
    fake = tmp_path / "python"
    fake.write_text(f"""#!/usr/bin/env bash
if [ "$1" = -m ]; then
    echo 'Traceback (most recent call last):' >&2
    echo 'RuntimeError: boom in the grader' >&2
    exit 1
fi
exec {sys.executable} "$@"
""")
    fake.chmod(0o755)
    return fake


@pytest.mark.parametrize("how", ["config error", "traceback", "no python"])
def test_run_autograder_writes_results_even_when_scangrade_cannot_grade(tmp_path, how):
    made = build_bundle(tmp_path / "ag.zip", config=_config(tmp_path))
    root = tmp_path / "autograder"
    _unpack(made.archive, root)
    if how == "config error":  # the bundle checks its config; one edited afterwards is not
        config = root / "source" / "config.yaml"
        config.write_text(config.read_text() + "bogus_key: 1\n")
    (root / "submission").mkdir()
    env = {"config error": {}, "traceback": {"SCANGRADE_PYTHON": str(_crashing_python(tmp_path))},
           "no python": {"SCANGRADE_PYTHON": str(tmp_path / "missing" / "python")}}[how]
    run = _run(root, **env)
    assert run.returncode == 0, run.stderr
    data = _results(root)
    assert data["score"] == 0 and data["tests"] == []
    assert data["output"].startswith("The autograder could not grade this submission")
    expected = {"config error": "key 'bogus_key': unknown key", "traceback": "RuntimeError: boom in the grader",
                "no python": "could not run (exit status 127)"}[how]
    assert expected in data["output"]


def test_the_error_output_is_kept_from_students_when_the_bundle_has_a_private_config(tmp_path):
    config = _config(tmp_path)
    made = build_bundle(tmp_path / "ag.zip", config=config, private_config=_private(tmp_path))
    root = tmp_path / "autograder"
    _unpack(made.archive, root)
    (root / "source" / "private.yaml").write_text("seed: 5550123\nparts:\n  part2_blelloch:\n    hidden_sizes: [x]\n")
    run = _run(root)
    assert "hidden_sizes" in run.stderr  # the staff see it in Gradescope's stdout of the run
    data = _results(root)
    assert data["score"] == 0 and "exit status 2" in data["output"]
    assert "hidden_sizes" not in data["output"] and "5550123" not in data["output"]


def test_gradescope_bundle_refuses_a_name_without_zip_and_an_existing_file(tmp_path, capsys):
    config = str(_config(tmp_path))
    assert main(["gradescope-bundle", str(tmp_path / "autograder"), "--config", config]) == 2
    assert "takes the autograder as a .zip" in capsys.readouterr().err
    out = tmp_path / "autograder.zip"
    assert main(["gradescope-bundle", str(out), "--config", config]) == 0
    assert "Gradescope autograder:" in capsys.readouterr().out
    assert main(["gradescope-bundle", str(out), "--config", config]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["gradescope-bundle", str(out), "--config", config, "--force"]) == 0


def test_a_misnamed_file_gets_the_message_batch_gives(bundle, tmp_path):
    """run_autograder takes a submission in as batch does: a Part1_Naive.cu is named, with the fix."""
    from grader.grading.intake import snapshot
    made, _ = bundle
    root = tmp_path / "autograder"
    _unpack(made.archive, root)
    (root / "submission" / "hw").mkdir(parents=True)
    shutil.copy(SOLUTIONS / "part1_naive.cu", root / "submission" / "hw" / "Part1_Naive.cu")
    shutil.copy(SOLUTIONS / "part2_blelloch.cu", root / "submission" / "hw" / "part2_blelloch.cu")
    assert _run(root).returncode == 0
    batch_says = snapshot(root / "submission", tmp_path / "copy").notes["part1_naive"].message
    assert "did you mean part1_naive.cu" in batch_says
    part1 = [t for t in _results(root)["tests"] if t["name"].startswith("Part 1 ")]
    assert [t["output"] for t in part1] == [batch_says] and part1[0]["status"] == "failed"
