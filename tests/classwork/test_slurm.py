"""Grading beyond one machine: shards, their manifests, the Slurm job scripts, sbatch, the merge —
and a whole class graded on a one-node Slurm cluster started here (slurm-wlm and munge)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

from grader.backends import Selection
from grader.classwork.batch import batch
from grader.cli import main
from grader.assignment.config import load_config, load_private
from grader.core.errors import Interrupted, UsageError
from grader.classwork.merge import IncompleteMerge, merge
from grader.classwork.slurm import sbatch_scripts, slurm_backend, slurm_batch
from grader.classwork.store import RESULT, config_fingerprint, parse_shard, shard_positions
from grader.render.formats import STUDENT_FOLDER, batch_reports, report_files
from grader.grading.runner import grading_sandbox
from tests.conftest import BROKEN, SOLUTIONS, TEMPLATES, write_config

EMULATOR = Selection("emulator", "test")


def _class(root: Path, *, broken: bool = True) -> Path:
    """alice and erin pass, carol (a zip) passes, bob hands in the templates, dave writes out of bounds."""
    root.mkdir(parents=True)
    shutil.copytree(SOLUTIONS, root / "alice")
    shutil.copytree(TEMPLATES, root / "bob")
    with zipfile.ZipFile(root / "carol.zip", "w") as z:
        for f in SOLUTIONS.glob("*.cu"):
            z.write(f, f"carol/{f.name}")
    if broken:
        shutil.copytree(SOLUTIONS, root / "dave")
        shutil.copy(BROKEN / "part1_oob_write.cu", root / "dave" / "part1_naive.cu")
        shutil.copytree(SOLUTIONS, root / "erin")
    return root


# --- shards -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("total, count", [(0, 1), (1, 3), (5, 2), (7, 3), (10, 10), (4, 6)])
def test_shards_cover_the_class_once_taking_every_kth_submission(total, count):
    shards = [shard_positions(total, (i, count)) for i in range(count)]
    assert sorted(p for s in shards for p in s) == list(range(total))
    for i, positions in enumerate(shards):
        assert positions == list(range(total))[i::count]
    assert shard_positions(total, None) == list(range(total))


@pytest.mark.parametrize("text, expected", [("0/1", (0, 1)), ("2/3", (2, 3)), (" 1 / 4 ", (1, 4))])
def test_a_shard_is_written_i_of_k(text, expected):
    assert parse_shard(text) == expected


@pytest.mark.parametrize("text", ["3/3", "1", "-1/2", "a/b", "0/0", "1/2/3", ""])
def test_a_shard_outside_0_to_k_is_a_usage_error(text):
    with pytest.raises(UsageError, match="--shard must be I/K"):
        parse_shard(text)


def test_the_config_fingerprint_follows_the_rules_not_the_file(tmp_path):
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    a = load_config(write_config(tmp_path / "a", sizes={"part1_naive": [5]}))
    b = load_config(write_config(tmp_path / "b", sizes={"part1_naive": [5]}))
    assert a.path != b.path and config_fingerprint(a) == config_fingerprint(b)
    other_seed = load_config(write_config(tmp_path / "c", seed=8, sizes={"part1_naive": [5]}))
    assert config_fingerprint(other_seed) != config_fingerprint(a)
    private = tmp_path / "private.yaml"
    private.write_text("seed: 99\nparts:\n  part1_naive:\n    hidden_sizes: [77]\n")
    assert config_fingerprint(load_private(a, private)) != config_fingerprint(a)


# --- job scripts --------------------------------------------------------------------------------------

def _run_script(text: str, tmp_path: Path, *, env: dict[str, str], args: tuple[str, ...] = ()) -> list[str]:
    """Run a job script as Slurm would, with a stand-in interpreter that writes its argv, one per line."""
    script = tmp_path / "job.sbatch"
    script.write_text(text)
    subprocess.run(["bash", str(script), *args], check=True, env={**os.environ, **env}, cwd=tmp_path)
    return (tmp_path / "argv.txt").read_text().splitlines()


def _fake_python(tmp_path: Path, status: int = 0) -> Path:
    fake = tmp_path / "fake python"
    fake.write_text(f'#!/bin/bash\nprintf "%s\\n" "$@" > "$(dirname "$0")/argv.txt"\nexit {status}\n')
    fake.chmod(0o755)
    return fake


def test_array_task_i_grades_shard_i_with_the_same_options_and_absolute_paths(tmp_path):
    base = tmp_path / "a course"  # spaces must survive the shell
    (base / "class").mkdir(parents=True)
    config = write_config(base, sizes={"part1_naive": [5]})
    private = base / "private.yaml"
    private.write_text("seed: 3\n")
    grade, merge_text = sbatch_scripts(base / "class", out=base / "out dir", shards=3, config=config,
                                       private_config=private, backend="pycuda",
                                       options=["--partition=gpu", "--time=00:20:00", "--account=cs149"],
                                       python=str(_fake_python(tmp_path)))
    lines = grade.splitlines()
    assert lines[0] == "#!/bin/bash"
    for directive in ("--array=0-2", "--gres=gpu:1", "--partition=gpu", "--time=00:20:00", "--account=cs149",
                      f'--output="{base / "out dir" / "slurm"}/grade-%A_%a.out"'):  # sbatch splits at spaces
        assert f"#SBATCH {directive}" in lines, directive
    argv = _run_script(grade, tmp_path, env={"SLURM_ARRAY_TASK_ID": "2"})
    assert argv == ["-P", "-m", "grader", "batch", str(base / "class"), "--out", str(base / "out dir/shards/2"),
                    "--shard", "2/3", "--config", str(config), "--backend", "pycuda",
                    "--private-config", str(private), "--checks"]
    # the merge job: every shard folder, the placement options, no GPU, no time limit of the tasks
    merge_lines = merge_text.splitlines()
    assert "#SBATCH --partition=gpu" in merge_lines and "#SBATCH --account=cs149" in merge_lines
    assert not any("--gres" in line or "--time" in line or "--array" in line for line in merge_lines)
    argv = _run_script(merge_text, tmp_path, env={})
    assert argv == ["-P", "-m", "grader", "merge", *(str(base / f"out dir/shards/{i}") for i in range(3)),
                    "--out", str(base / "out dir")]


def test_on_the_emulator_a_task_uses_its_cpus_and_passes_on_extra_arguments(tmp_path):
    grade, _ = sbatch_scripts(tmp_path, out=tmp_path / "out", shards=2, config=write_config(tmp_path),
                              private_config=None, backend="emulator", checks=True,
                              python=str(_fake_python(tmp_path)))
    assert "--gres" not in grade and "#SBATCH --array=0-1" in grade
    argv = _run_script(grade, tmp_path, env={"SLURM_ARRAY_TASK_ID": "0", "SLURM_CPUS_ON_NODE": "6"},
                       args=("--resume",))
    assert argv[-4:] == ["--checks", "--jobs", "6", "--resume"]
    assert "--shard" in argv and argv[argv.index("--shard") + 1] == "0/2"


@pytest.mark.parametrize("backend", ["pycuda", "emulator"])
def test_a_task_skips_the_checks_when_asked_on_every_backend(tmp_path, backend):
    grade, _ = sbatch_scripts(tmp_path, out=tmp_path / "out", shards=1, config=write_config(tmp_path),
                              private_config=None, backend=backend, checks=False, jobs=2,
                              python=str(_fake_python(tmp_path)))
    argv = _run_script(grade, tmp_path, env={"SLURM_ARRAY_TASK_ID": "0"})
    assert "--no-checks" in argv and "--checks" not in argv  # on a GPU too: compute-sanitizer is skipped


@pytest.mark.parametrize("status, expected", [(0, 0), (1, 0), (2, 2), (137, 137)])
def test_a_task_fails_only_when_its_shard_was_not_graded(tmp_path, status, expected):
    grade, _ = sbatch_scripts(tmp_path, out=tmp_path / "out", shards=1, config=write_config(tmp_path),
                              private_config=None, backend="emulator", python=str(_fake_python(tmp_path, status)))
    script = tmp_path / "grade.sbatch"
    script.write_text(grade)
    ran = subprocess.run(["bash", str(script)], env={**os.environ, "SLURM_ARRAY_TASK_ID": "0"})
    assert ran.returncode == expected  # 1 = a student failed: the shard is graded all the same


def test_an_option_that_asks_for_gpus_replaces_the_default_gres(tmp_path):
    grade, _ = sbatch_scripts(tmp_path, out=tmp_path / "o", shards=1, config=write_config(tmp_path),
                              private_config=None, backend="pycuda", options=["--gres=gpu:a100:1"])
    assert "#SBATCH --gres=gpu:a100:1" in grade and "--gres=gpu:1\n" not in grade


@pytest.mark.parametrize("bad", ["partition=gpu", "--partition=gpu\n#SBATCH --uid=0"])
def test_a_slurm_option_must_be_one_sbatch_option(tmp_path, bad):
    with pytest.raises(UsageError, match="--slurm-option"):
        sbatch_scripts(tmp_path, out=tmp_path / "o", shards=1, config=write_config(tmp_path), private_config=None,
                       backend="emulator", options=[bad])


def test_auto_means_a_gpu_per_task_and_the_choice_follows_option_env_config():
    assert slurm_backend(None, config_value="auto", env={}) == "pycuda"
    assert slurm_backend(None, config_value="emulator", env={}) == "emulator"
    assert slurm_backend(None, config_value="pycuda", env={"SCANGRADE_BACKEND": "emulator"}) == "emulator"
    assert slurm_backend("pycuda", config_value="emulator", env={"SCANGRADE_BACKEND": "emulator"}) == "pycuda"
    with pytest.raises(UsageError, match="unknown backend 'cuda'"):
        slurm_backend("cuda", env={})


# --- submission -----------------------------------------------------------------------------------------

def _fake_sbatch(tmp_path: Path, *, refuse_nth: int = 0,
                 refusal: str = "Invalid partition name specified") -> Path:
    """An sbatch that logs its arguments and answers job ids 41, 42 (or refuses its nth call, saying
    ``refusal``)."""
    fake = tmp_path / "bin" / "sbatch"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(textwrap.dedent(f"""\
        #!/bin/bash
        echo "$*" >> "{tmp_path}/sbatch.log"
        n=$(wc -l < "{tmp_path}/sbatch.log")
        if [ "$n" -eq {refuse_nth} ]; then
            echo "sbatch: error: Batch job submission failed: {refusal}" >&2; exit 1
        fi
        echo "$((40 + n));cluster1"
        """))
    fake.chmod(0o755)
    return fake


def test_the_array_job_then_the_merge_job_after_it_are_submitted(tmp_path, capsys):
    root = _class(tmp_path / "class", broken=False)
    fake = _fake_sbatch(tmp_path)
    plan = slurm_batch(root, out=tmp_path / "out", config=write_config(tmp_path), private_config=None,
                       backend="emulator", sbatch=str(fake))
    assert (plan.array_job, plan.merge_job, plan.shards, plan.students) == ("41", "42", 1, 3)
    calls = (tmp_path / "sbatch.log").read_text().splitlines()
    assert calls == [f"--parsable {tmp_path / 'out/slurm/grade.sbatch'}",
                     f"--parsable --dependency=afterany:41 {tmp_path / 'out/slurm/merge.sbatch'}"]
    text = plan.describe()
    assert "squeue -j 41,42" in text and "sacct -j 41,42" in text


def test_a_missing_or_refusing_sbatch_is_a_usage_error_with_its_message(tmp_path, monkeypatch, capsys):
    root = _class(tmp_path / "class", broken=False)
    cfg = write_config(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    argv = ["batch", str(root), "--out", str(tmp_path / "out"), "--config", str(cfg), "--slurm", "--backend", "emulator"]
    assert main(argv) == 2
    assert "sbatch not found" in capsys.readouterr().err and (tmp_path / "out/slurm/grade.sbatch").is_file()
    assert main([*argv, "--no-submit", "--slurm-shards", "2"]) == 0
    assert "not submitted" in capsys.readouterr().out
    assert "#SBATCH --array=0-1" in (tmp_path / "out/slurm/grade.sbatch").read_text()
    monkeypatch.setenv("PATH", f"{_fake_sbatch(tmp_path, refuse_nth=1).parent}{os.pathsep}/usr/bin:/bin")
    assert main(argv) == 2
    assert "Invalid partition name specified" in capsys.readouterr().err
    monkeypatch.setenv("PATH", f"{_fake_sbatch(tmp_path, refuse_nth=3).parent}{os.pathsep}/usr/bin:/bin")
    assert main(argv) == 2  # the array job (call 2) went in, the merge job (call 3) was refused
    err = capsys.readouterr().err
    assert "the array job 42 was submitted" in err and "--dependency=afterany:42" in err


def test_a_gpu_request_refused_on_a_cluster_without_gpus_says_to_use_the_emulator(tmp_path, monkeypatch, capsys):
    root = _class(tmp_path / "class", broken=False)
    fake = _fake_sbatch(tmp_path, refuse_nth=1, refusal="Invalid generic resource (gres) specification")
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}/usr/bin:/bin")
    monkeypatch.delenv("SCANGRADE_BACKEND", raising=False)
    assert main(["batch", str(root), "--out", str(tmp_path / "out"), "--config", str(write_config(tmp_path)),
                 "--slurm", "--backend", "auto"]) == 2
    err = capsys.readouterr().err
    assert "Invalid generic resource (gres) specification" in err and "--backend emulator" in err
    assert "#SBATCH --gres=gpu:1" in (tmp_path / "out/slurm/grade.sbatch").read_text()


def test_slurm_only_options_without_slurm_are_usage_errors(tmp_path, capsys):
    cfg = write_config(tmp_path)
    base = ["batch", str(tmp_path), "--out", str(tmp_path / "o"), "--config", str(cfg)]
    assert main([*base, "--slurm-shards", "2"]) == 2
    assert main([*base, "--slurm", "--shard", "0/2"]) == 2
    assert main([*base, "--shard", "2/2"]) == 2
    assert "--shard must be I/K" in capsys.readouterr().err


# --- merge ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A small class graded once whole and once as shards 0/2 and 1/2."""
    base = tmp_path_factory.mktemp("graded")
    root = _class(base / "class", broken=False)
    shutil.copytree(SOLUTIONS, root / "dave")
    shutil.copy(BROKEN / "part1_oob_write.cu", root / "dave" / "part1_naive.cu")
    # the sandbox policy of `scangrade batch` (required), so that a shard resumed by the command trusts these
    cfg = grading_sandbox(load_config(write_config(base, sizes={"part1_naive": [5]})), official=True)
    for i in range(2):
        batch(root, out=base / "shards" / str(i), cfg=cfg, selection=EMULATOR,
              reports=batch_reports, jobs=2, shard=(i, 2))
    batch(root, out=base / "whole", cfg=cfg, selection=EMULATOR, reports=batch_reports, jobs=2)
    return base


def _shards(graded: Path, tmp_path: Path) -> list[Path]:
    shutil.copytree(graded / "shards", tmp_path / "shards")
    return [tmp_path / "shards" / "0", tmp_path / "shards" / "1"]


def _edit_manifest(folder: Path, **changes) -> None:
    path = folder / "batch.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def test_each_shard_records_what_it_graded(graded):
    m0, m1 = (json.loads((graded / "shards" / str(i) / "batch.json").read_text()) for i in range(2))
    assert m0["shard"] == {"index": 0, "count": 2} and m1["shard"] == {"index": 1, "count": 2}
    assert [s["id"] for s in m0["students"]] == ["alice", "carol"] and [s["position"] for s in m0["students"]] == [0, 2]
    assert [s["id"] for s in m1["students"]] == ["bob", "dave"]
    assert m0["config_sha256"] == m1["config_sha256"] and m0["class_size"] == 4 and m0["backend"] == "emulator"
    assert not (graded / "shards" / "0" / "bob").exists() and (graded / "shards" / "1" / "bob" / "result.json").is_file()
    assert (graded / "shards" / "0" / "summary.txt").read_text().startswith("2 submissions")


def test_a_shard_resumes_on_its_own_and_a_run_cut_short_leaves_no_manifest(graded, tmp_path, capsys):
    shards = _shards(graded, tmp_path)
    argv = ["batch", str(graded / "class"), "--out", str(shards[1]), "--shard", "1/2", "--resume",
            "--config", str(graded / "config.yaml"), "--backend", "emulator"]
    assert main(argv) == 1  # dave fails; nothing graded again
    lines = capsys.readouterr().err.splitlines()
    assert sorted(line.split()[1] for line in lines) == ["bob:", "dave:"]
    assert all(line.startswith(("[1/2]", "[2/2]")) and line.endswith("(resumed)") for line in lines), lines
    assert (shards[1] / "batch.json").is_file()

    def stop(sid, result, resumed):
        raise KeyboardInterrupt
    with pytest.raises(Interrupted):  # as Ctrl-C ends a batch
        batch(graded / "class", out=shards[1], cfg=load_config(graded / "config.yaml"), selection=EMULATOR,
              reports=batch_reports, resume=True, jobs=1, shard=(1, 2), on_done=stop)
    assert not (shards[1] / "batch.json").exists()
    with pytest.raises(IncompleteMerge, match="shard 1/2 .* has no batch.json"):
        merge(shards, out=tmp_path / "m")


def test_merged_shards_give_the_gradebook_and_summary_of_one_batch_byte_for_byte(graded, tmp_path, capsys):
    shards = _shards(graded, tmp_path)
    assert main(["merge", *map(str, reversed(shards)), "--out", str(tmp_path / "merged")]) == 1  # bob, dave fail
    for name in ("gradebook.csv", "summary.txt"):
        assert (tmp_path / "merged" / name).read_bytes() == (graded / "whole" / name).read_bytes(), name
    for shard, sid in ((0, "alice"), (1, "bob"), (0, "carol"), (1, "dave")):
        for name in (RESULT, *report_files(), *(f"{STUDENT_FOLDER}/{f}" for f in report_files(student=True))):
            assert (tmp_path / "merged" / sid / name).read_bytes() == (shards[shard] / sid / name).read_bytes()
    out = capsys.readouterr().out
    assert out.startswith("4 submissions")
    page = tmp_path / "merged" / "class_report.html"  # the merged class's report, as a batch writes it
    assert f"class report: {page}" in out and "alice" in page.read_text()
    assert main(["report", str(tmp_path / "merged"), "--out", str(tmp_path / "again.html")]) == 0
    assert capsys.readouterr().out == f"class report: {tmp_path / 'again.html'}\n"


def test_a_missing_shard_writes_no_gradebook_and_says_which(graded, tmp_path, capsys):
    shards = _shards(graded, tmp_path)
    (shards[1] / "batch.json").unlink()  # its job died before the end
    out = tmp_path / "merged"
    assert main(["merge", *map(str, shards), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"shard 1/2 ({shards[1]}) has no batch.json" in err and not (out / "gradebook.csv").exists()
    assert main(["merge", str(shards[0]), "--out", str(out)]) == 1
    assert "shard 1/2 is not among the folders given" in capsys.readouterr().err
    with pytest.raises(IncompleteMerge) as info:
        merge([shards[0], tmp_path / "shards" / "9"], out=out)
    assert len(info.value.missing) == 2  # shard 1 not given, and a folder that is not there


def test_allow_partial_writes_the_shards_there_are_and_says_so(graded, tmp_path, capsys):
    shards = _shards(graded, tmp_path)
    shutil.rmtree(shards[1])
    out = tmp_path / "merged"
    assert main(["merge", *map(str, shards), "--out", str(out), "--allow-partial"]) == 1
    assert "not in the gradebook: shard 1/2" in capsys.readouterr().err
    book = (out / "gradebook.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in book[1:]] == ["alice", "carol"]
    assert (out / "summary.txt").read_text().splitlines()[-1] == \
        "PARTIAL: 1 shard(s) of 2 missing, 2 of 4 submissions not in this gradebook"


def test_shards_graded_under_another_config_are_refused(graded, tmp_path, capsys):
    shards = _shards(graded, tmp_path)
    _edit_manifest(shards[1], config_sha256="0" * 64)
    assert main(["merge", *map(str, shards), "--out", str(tmp_path / "m")]) == 2
    assert "configs (public or private) differ" in capsys.readouterr().err
    assert not (tmp_path / "m" / "gradebook.csv").exists()


def test_a_student_in_two_shards_is_refused(graded, tmp_path):
    shards = _shards(graded, tmp_path)
    m1 = json.loads((shards[1] / "batch.json").read_text())
    shutil.copytree(shards[0] / "alice", shards[1] / "alice")
    _edit_manifest(shards[1], students=m1["students"] + [{"position": 5, "id": "alice"}])
    with pytest.raises(UsageError, match="student 'alice' is in both"):
        merge(shards, out=tmp_path / "m")


def test_the_same_shard_twice_or_shards_of_different_splits_are_refused(graded, tmp_path):
    shards = _shards(graded, tmp_path)
    shutil.copytree(shards[0], tmp_path / "again")
    with pytest.raises(UsageError, match="are both shard 0/2"):
        merge([shards[0], tmp_path / "again", shards[1]], out=tmp_path / "m")
    _edit_manifest(shards[1], shard={"index": 1, "count": 3})
    with pytest.raises(UsageError, match="shard of 2 but .* of 3"):
        merge(shards, out=tmp_path / "m")


def test_a_damaged_result_in_a_finished_shard_is_reported(graded, tmp_path):
    shards = _shards(graded, tmp_path)
    (shards[1] / "dave" / "result.json").write_text("{")
    with pytest.raises(UsageError, match=r"dave/result.json is missing or damaged"):
        merge(shards, out=tmp_path / "m")


# --- a real cluster ---------------------------------------------------------------------------------------

_DAEMONS = ("slurmctld", "slurmd", "munged")
_CLIENTS = ("sbatch", "scontrol", "sinfo", "squeue")


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/local/sbin")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Cluster:
    """A one-node Slurm cluster (slurmctld, slurmd, munged with its own key and socket) in a temp folder."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="scangrade-slurm-"))  # short: the munge socket path
        self.conf = self.root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.procs: list[subprocess.Popen] = []

    def start(self) -> None:
        r = self.root
        for d in ("munge", "state", "spool", "log"):
            (r / d).mkdir(mode=0o700)
        key = r / "munge" / "munge.key"
        key.write_bytes(os.urandom(128))
        key.chmod(0o600)
        socket_path = r / "munge" / "munge.sock"
        self._spawn([_which("munged"), "--foreground", "--force", f"--socket={socket_path}", f"--key-file={key}",
                     f"--pid-file={r / 'munge/munged.pid'}", f"--log-file={r / 'log/munged.log'}",
                     f"--seed-file={r / 'munge/munged.seed'}"])
        self._until(socket_path.exists, "munged to open its socket")
        memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
        self.conf.write_text(textwrap.dedent(f"""\
            ClusterName=scangradetest
            SlurmctldHost=localhost
            SlurmctldPort={_free_port()}
            SlurmdPort={_free_port()}
            SlurmUser=root
            AuthType=auth/munge
            CredType=cred/munge
            AuthInfo=socket={socket_path}
            StateSaveLocation={r / 'state'}
            SlurmdSpoolDir={r / 'spool'}
            SlurmctldPidFile={r / 'slurmctld.pid'}
            SlurmdPidFile={r / 'slurmd.pid'}
            SlurmctldLogFile={r / 'log/slurmctld.log'}
            SlurmdLogFile={r / 'log/slurmd.log'}
            ProctrackType=proctrack/linuxproc
            TaskPlugin=task/none
            SelectType=select/cons_tres
            SelectTypeParameters=CR_Core
            SchedulerType=sched/builtin
            JobAcctGatherType=jobacct_gather/none
            AccountingStorageType=accounting_storage/none
            MpiDefault=none
            ReturnToService=2
            MinJobAge=600
            KillWait=5
            NodeName=localhost NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory={memory_mb * 9 // 10} State=UNKNOWN
            PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
            """))
        self._spawn([_which("slurmctld"), "-D", "-i", "-f", str(self.conf)])
        self._spawn([_which("slurmd"), "-D", "-f", str(self.conf), "-N", "localhost"])
        self._until(lambda: self.scontrol("show", "node", "localhost", check=False).find("State=IDLE") >= 0,
                    "the node to come up idle")

    def _spawn(self, argv: list[str]) -> None:
        with open(self.root / "log" / f"{Path(argv[0]).name}.stderr", "wb") as err:
            self.procs.append(subprocess.Popen(argv, env=self.env, stdout=err, stderr=err, stdin=subprocess.DEVNULL,
                                               start_new_session=True))

    def _until(self, ready, what: str, timeout_s: float = 30) -> None:
        end = time.monotonic() + timeout_s
        while not ready():
            dead = [p.args[0] for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > end:
                pytest.fail(f"waiting for {what}: {'exited: ' + ', '.join(dead) if dead else 'timed out'}\n"
                            + self.logs())
            time.sleep(0.2)

    def scontrol(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run([_which("scontrol"), *args], env=self.env, capture_output=True, text=True, timeout=30)
        if check and proc.returncode:
            raise AssertionError(f"scontrol {' '.join(args)}: {proc.stderr}")
        return proc.stdout

    def job_state(self, job: str) -> str:
        out = self.scontrol("show", "job", job, check=False)
        return next((w.split("=", 1)[1] for w in out.split() if w.startswith("JobState=")), "UNKNOWN")

    def wait_for(self, job: str, timeout_s: float) -> str:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            state = self.job_state(job)
            if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"):
                return state
            time.sleep(0.5)
        return "still " + self.job_state(job)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-3000:]
                         for p in sorted((self.root / "log").glob("*")))

    def stop(self) -> None:
        subprocess.run([_which("scancel"), "--full", "--user=root"], env=self.env, capture_output=True, timeout=30)
        self.scontrol("shutdown", check=False)
        for proc in reversed(self.procs):  # slurmd and slurmctld obey the shutdown; munged is told here
            try:
                proc.wait(timeout=0 if proc.args[0].endswith("munged") else 15)
            except subprocess.TimeoutExpired:
                pass
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def cluster():
    """A one-node Slurm cluster on this machine for one test; stopped, with every daemon it started."""
    missing = [n for n in (*_DAEMONS, *_CLIENTS, "scancel") if not _which(n)]
    if missing:
        pytest.skip(f"Slurm and munge are not installed ({', '.join(missing)} missing; apt-get install "
                    "slurm-wlm munge)")
    if os.geteuid() != 0:
        pytest.skip("starting slurmd (which runs jobs as their users) needs root")
    c = _Cluster()
    try:
        c.start()
        yield c
    finally:
        c.stop()


def test_a_class_graded_on_slurm_equals_a_local_batch(cluster, tmp_path, monkeypatch, capsys, pace):
    root = _class(tmp_path / "class")
    cfg = write_config(tmp_path, part_s=pace.seconds(60), sizes={"part1_naive": [5, 100], "part2_blelloch": [7]})
    out = tmp_path / "on slurm"
    monkeypatch.setenv("SLURM_CONF", str(cluster.conf))
    assert main(["batch", str(root), "--out", str(out), "--config", str(cfg), "--backend", "emulator",
                 "--slurm", "--slurm-shards", "3", "--slurm-option=--partition=debug"]) == 0
    printed = capsys.readouterr().out
    array_job = printed.split("submitted: array job ")[1].split()[0]
    merge_job = printed.split("merge job ")[-1].split()[0]
    assert f"squeue -j {array_job},{merge_job}" in printed

    # the same class graded here, meanwhile
    assert main(["batch", str(root), "--out", str(tmp_path / "local"), "--config", str(cfg),
                 "--backend", "emulator", "--jobs", "1"]) == 1
    state = cluster.wait_for(merge_job, timeout_s=pace.seconds(75))
    logs = "\n".join(f"--- {p.name}\n{p.read_text()}" for p in sorted((out / "slurm").glob("*.out")))
    assert state == "COMPLETED", f"merge job {state}\n{logs}\n{cluster.logs()}"  # students failing is no failure
    for task in range(3):
        assert cluster.job_state(f"{array_job}_{task}") == "COMPLETED", logs  # bob and dave fail: still graded
        assert json.loads((out / "shards" / str(task) / "batch.json").read_text())["shard"]["index"] == task
    assert len(list((out / "slurm").glob(f"grade-{array_job}_*.out"))) == 3
    for name in ("gradebook.csv", "summary.txt"):
        assert (out / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), f"{name}\n{logs}"
    book = (out / "gradebook.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in book[1:]] == ["alice", "bob", "carol", "dave", "erin"]
    assert [line.split(",")[-4] for line in book[1:]] == ["pass", "fail", "pass", "fail", "pass"]  # status, backend, gpu, note
    assert all((out / sid / "result.json").is_file() for sid in ("alice", "bob", "carol", "dave", "erin"))
    assert "5 submissions" in (out / "slurm" / f"merge-{merge_job}.out").read_text()

    # shard 1 "failed" half way: resubmit its array index with --resume, as docs/slurm.md says
    shard1 = json.loads((out / "shards/1/batch.json").read_text())["students"]
    lost, kept = shard1[0]["id"], shard1[1]["id"]
    (out / "shards/1/batch.json").unlink()
    (out / "shards/1" / lost / "result.json").unlink()
    assert main(["merge", *(str(out / f"shards/{i}") for i in range(3)), "--out", str(out)]) == 1
    assert f"sbatch --array=1 {out / 'slurm/grade.sbatch'} --resume" in capsys.readouterr().err
    again = subprocess.run([_which("sbatch"), "--parsable", "--array=1", str(out / "slurm/grade.sbatch"), "--resume"],
                           env=cluster.env, capture_output=True, text=True, check=True).stdout.strip().split(";")[0]
    assert cluster.wait_for(f"{again}_1", timeout_s=pace.seconds(40)) == "COMPLETED"
    log = (out / "slurm" / f"grade-{again}_1.out").read_text()
    assert f"{kept}: " in log and f"{lost}: " in log
    assert [line.endswith("(resumed)") for line in log.splitlines() if line.startswith("[")] in ([True, False],
                                                                                                 [False, True])
    assert not list((out / "slurm").glob(f"grade-{again}_0.out"))  # only task 1 ran
    assert main(["merge", *(str(out / f"shards/{i}") for i in range(3)), "--out", str(out)]) == 1
    assert (out / "gradebook.csv").read_bytes() == (tmp_path / "local" / "gradebook.csv").read_bytes()

