"""Grading a class on a Slurm cluster: the job scripts, and submitting them.

A class is split into K shards — shard I holds every K-th submission of the sorted list, starting
at the I-th — and each shard is an ordinary ``scangrade batch --shard I/K`` into its own folder,
one Slurm array task each. Every batch run (sharded or not) writes ``batch.json``, a manifest
that names the shard, the config fingerprint, the backend and the students it graded
(:mod:`grader.classwork.store`); the merge job runs ``scangrade merge``
(:mod:`grader.classwork.merge`), which joins the shards' results into one gradebook and summary,
byte for byte what one local ``scangrade batch`` of the same class writes.

Layout written by ``scangrade batch SUBMISSIONS --out DIR --slurm``::

    DIR/slurm/grade.sbatch        the array job: task I runs the batch of shard I/K
    DIR/slurm/merge.sbatch        the merge job, submitted with --dependency=afterany:<array job>
    DIR/slurm/grade-<job>_<I>.out, merge-<job>.out    the jobs' logs
    DIR/shards/<I>/               shard I: per-student folders, gradebook.csv, summary.txt, batch.json
    DIR/gradebook.csv, DIR/summary.txt, DIR/<id>/     the merged class, written by the merge job
"""

from __future__ import annotations

import dataclasses
import math
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from grader import __version__
from grader.classwork.store import check_out_folder
from grader.classwork.submissions import count_submissions
from grader.backends import BACKENDS, CHOICES, ENV_VAR
from grader.core.errors import UsageError

#: sbatch options that say where and on whose account a job runs: the merge job gets these too.
_PLACEMENT_OPTIONS = ("--partition", "-p", "--account", "-A", "--qos", "-q", "--reservation", "--clusters",
                      "-M", "--chdir", "-D")
#: Students per shard when --slurm-shards is not given.
DEFAULT_PER_SHARD = 10


@dataclass(frozen=True)
class SlurmPlan:
    """The job scripts of a class graded on Slurm, and the job ids once submitted.

    Attributes:
        out: the class's output folder (absolute); shards: K, the array's size.
        grade_script, merge_script: the two sbatch scripts.
        backend: the backend every task runs; students: the class size.
        array_job, merge_job: Slurm job ids, or None when not submitted.
    """

    out: Path
    shards: int
    grade_script: Path
    merge_script: Path
    backend: str
    students: int
    array_job: str | None = None
    merge_job: str | None = None

    def describe(self) -> str:
        """What was written or submitted, and how to follow the jobs (for the terminal)."""
        lines = [f"{self.students} submissions in {self.shards} shard(s), backend {self.backend}",
                 f"array job script: {self.grade_script}", f"merge job script: {self.merge_script}"]
        if self.array_job is None:
            lines += ["not submitted (--no-submit); to submit:",
                      f"  ARRAY=$(sbatch --parsable {self.grade_script} | cut -d';' -f1)",
                      f"  sbatch --dependency=afterany:$ARRAY {self.merge_script}"]
        else:
            jobs = f"{self.array_job},{self.merge_job}"
            lines += [(f"submitted: array job {self.array_job} (tasks 0-{self.shards - 1}), "
                       f"merge job {self.merge_job} (starts when every task has ended)"),
                      f"watch: squeue -j {jobs}",
                      f"after: sacct -j {jobs} --format=JobID,JobName,State,ExitCode,Elapsed,NodeList"]
        lines += [f"logs: {self.out / 'slurm'}/grade-<job>_<task>.out, merge-<job>.out",
                  f"gradebook (once merged): {self.out / 'gradebook.csv'}"]
        return "\n".join(lines) + "\n"


def slurm_backend(option: str | None, *, config_value: str = "auto", env: dict[str, str] | None = None) -> str:
    """The backend the array tasks run: ``--backend``, then ``SCANGRADE_BACKEND``, then the config's
    key, as for a local run; ``auto`` means the GPU backend (``pycuda``: the tasks ask Slurm for a GPU each), since the
    machine writing the scripts is not the one that grades.

    Raises:
        UsageError: an unknown backend name.
    """
    env = os.environ if env is None else env
    name = option or env.get(ENV_VAR) or config_value or "auto"
    if name not in CHOICES:
        raise UsageError(f"unknown backend {name!r}; choose one of {', '.join(CHOICES)}")
    return next(k.name for k in BACKENDS.values() if k.uses_gpus) if name == "auto" else name


def _check_option(opt: str) -> str:
    if not opt.startswith("-") or "\n" in opt or "\r" in opt:
        raise UsageError(f"--slurm-option {opt!r}: give one sbatch option per --slurm-option, as "
                         "--slurm-option=--partition=gpu (it becomes a line '#SBATCH --partition=gpu')")
    return opt.strip()


def _directive_path(path: Path) -> str:
    """A path as the value of an ``#SBATCH`` option: sbatch splits directives at spaces, and reads
    double quotes as quoting."""
    text = str(path)
    if any(c in text for c in '"\\\n\r'):
        raise UsageError(f"{text}: sbatch cannot take this path in a job script (it has a quote, backslash or "
                         "line break); choose an --out folder without one")
    return f'"{text}"' if any(c.isspace() for c in text) else text


def _option_name(opt: str) -> str:
    return opt.split("=", 1)[0].split(None, 1)[0]


def _task_command(submissions: Path, *, out: Path, shards: int, config: Path, private_config: Path | None,
                  backend: str, checks: bool, jobs: int | None, resume: bool, python: str,
                  allow_unsandboxed: bool) -> list[str]:
    """The words of an array task's ``python -P -m grader batch`` command, each shell-quoted: the
    shard (folder ``out/shards/I`` and ``--shard I/K``) read from ``$SLURM_ARRAY_TASK_ID``, config
    paths made absolute, and on the emulator without ``jobs``, ``--jobs`` the task's CPUs."""
    q = shlex.quote
    task_out = f'{q(str(out / "shards") + "/")}"$SLURM_ARRAY_TASK_ID"'
    cmd = [q(python), "-P", "-m", "grader", "batch", q(str(submissions)), "--out", task_out,
           "--shard", f'"$SLURM_ARRAY_TASK_ID/{shards}"', "--config", q(str(config.resolve())),
           "--backend", backend]
    if private_config is not None:
        cmd += ["--private-config", q(str(private_config.resolve()))]
    cmd.append("--checks" if checks else "--no-checks")
    if resume:
        cmd.append("--resume")
    if allow_unsandboxed:
        cmd.append("--allow-unsandboxed")
    if jobs:
        cmd += ["--jobs", str(jobs)]
    elif not BACKENDS[backend].uses_gpus:  # one submission per core of the node
        cmd += ["--jobs", '"${SLURM_CPUS_ON_NODE:-1}"']
    return cmd


def _grade_script(cmd: list[str], *, submissions: Path, out: Path, shards: int, backend: str,
                  options: list[str]) -> str:
    """The array job script: its ``#SBATCH`` lines (``--gres=gpu:1`` on a GPU backend unless
    ``options``, already checked, ask for GPUs; then ``options``), then ``cmd`` with the arguments
    given to sbatch after the script, exit status 1 (some student failed a case) made success.

    Raises:
        UsageError: the log folder under ``out`` cannot be an ``#SBATCH`` value.
    """
    logs = out / "slurm"
    names = {_option_name(o) for o in options}
    heads = ["#SBATCH --job-name=scangrade", f"#SBATCH --array=0-{shards - 1}",
             f"#SBATCH --output={_directive_path(logs / 'grade-%A_%a.out')}", "#SBATCH --ntasks=1"]
    if BACKENDS[backend].uses_gpus and not names & {"--gres", "--gpus", "-G", "--gpus-per-task", "--gpus-per-node"}:
        heads.append("#SBATCH --gres=gpu:1")
    heads += [f"#SBATCH {o}" for o in options]
    return "\n".join([
        "#!/bin/bash",
        f"# Written by scangrade {__version__} (scangrade batch --slurm): task I grades shard I of {shards}",
        f"# of {submissions} into {out}/shards/I.",
        f"# Grade one shard again, keeping its finished students: sbatch --array=I {logs}/grade.sbatch --resume",
        *heads,
        "set -uo pipefail",
        "status=0",
        " ".join(cmd) + ' "$@" || status=$?',
        "# exit status 1: some student failed a case; the shard is graded all the same, so the task",
        "# succeeded (sacct shows FAILED only for shards to grade again)",
        'if [ "$status" -eq 1 ]; then exit 0; fi',
        'exit "$status"',
        ""])


def _merge_script(*, out: Path, shards: int, options: list[str], python: str) -> str:
    """The merge job script: ``scangrade merge`` of the ``shards`` folders under ``out/shards`` into
    ``out``, with the placement options of ``options`` (:data:`_PLACEMENT_OPTIONS`); exit status 1
    is success once a whole (not ``PARTIAL``) gradebook was written.

    Raises:
        UsageError: the log folder under ``out`` cannot be an ``#SBATCH`` value.
    """
    q = shlex.quote
    logs = out / "slurm"
    merge_heads = ["#SBATCH --job-name=scangrade-merge", f"#SBATCH --output={_directive_path(logs / 'merge-%j.out')}",
                   "#SBATCH --ntasks=1"]
    merge_heads += [f"#SBATCH {o}" for o in options if _option_name(o) in _PLACEMENT_OPTIONS]
    shard_dirs = " ".join(q(str(out / "shards" / str(i))) for i in range(shards))
    return "\n".join([
        "#!/bin/bash",
        f"# Written by scangrade {__version__} (scangrade batch --slurm): joins the {shards} shard(s) of",
        f"# {out}/shards into {out}/gradebook.csv and summary.txt. Submitted after the array job with",
        "# --dependency=afterany:<array job>; run it again (or this command by hand) after a shard is regraded.",
        *merge_heads,
        "set -uo pipefail",
        "status=0",
        f"printed=$({q(python)} -P -m grader merge {shard_dirs} --out {q(str(out))} \"$@\") || status=$?",
        'printf "%s\\n" "$printed"',
        "# exit status 1 after a whole gradebook was written: some student failed a case, the merge succeeded",
        'if [ "$status" -eq 1 ] && [[ "$printed" == *"gradebook: "* && "$printed" != *"PARTIAL: "* ]]; then exit 0; fi',
        'exit "$status"',
        ""])


def sbatch_scripts(submissions: Path, *, out: Path, shards: int, config: Path, private_config: Path | None,
                   backend: str, checks: bool = True, jobs: int | None = None, options: list[str] | tuple[str, ...] = (),
                   resume: bool = False, python: str | None = None,
                   allow_unsandboxed: bool = False) -> tuple[str, str]:
    """The text of the array job script and of the merge job script.

    Array task I runs ``python -P -m grader batch SUBMISSIONS --out OUT/shards/I --shard I/K`` with
    the config, private config, backend and checks (``--checks`` or ``--no-checks``, on every backend)
    given; arguments after the script's name on
    sbatch's command line are passed on (``sbatch --array=2 grade.sbatch --resume``). On the pycuda
    backend each task asks for ``--gres=gpu:1`` (unless an option already asks for GPUs); on the
    emulator, ``--jobs`` defaults to the task's CPUs (``SLURM_CPUS_ON_NODE``). Every path is
    absolute; ``python`` (default: the interpreter running now) is the one with scangrade installed
    (``-P``: a ``grader`` folder in the job's working directory cannot shadow it).

    A job fails (in ``sacct``) only when its work was not done: exit status 1 of ``scangrade
    batch``/``merge`` — some student failed a case — counts as success once the shard or the whole
    gradebook is written; a merge with missing shards, or any other status, fails the job (3: a
    result the grader failed on, to regrade, whose task ``--resume`` grades it again).

    Args:
        options: extra sbatch options, one ``#SBATCH`` line each (``--partition=gpu``); those that
            say where a job runs (partition, account, qos, reservation, clusters, chdir) also go to
            the merge job.
        resume: every task passes ``--resume`` (keeps the results already in its shard's folder).

    Raises:
        UsageError: K < 1, or an option that is not one sbatch option.
    """
    if shards < 1:
        raise UsageError(f"--slurm-shards must be 1 or more (got {shards})")
    options = [_check_option(o) for o in options]
    python = python or sys.executable
    out, submissions = out.resolve(), submissions.resolve()
    for path in (submissions, config, private_config):
        if path is not None and any(c in str(path) for c in "\n\r"):
            raise UsageError(f"{str(path)!r}: a path with a line break cannot go into a job script; rename it")
    cmd = _task_command(submissions, out=out, shards=shards, config=config, private_config=private_config,
                        backend=backend, checks=checks, jobs=jobs, resume=resume, python=python,
                        allow_unsandboxed=allow_unsandboxed)
    grade = _grade_script(cmd, submissions=submissions, out=out, shards=shards, backend=backend, options=options)
    return grade, _merge_script(out=out, shards=shards, options=options, python=python)


def _sbatch(args: list[str], *, what: str, sbatch: str) -> str:
    """Run sbatch --parsable; the job id.

    Raises:
        UsageError: sbatch is missing, refuses, or does not answer.
    """
    command = [sbatch, "--parsable", *args]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise UsageError(f"{sbatch} not found: run this on a Slurm login node (where sbatch is on PATH), "
                         "or pass --no-submit to write the job scripts only") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"sbatch did not answer in 120 s submitting the {what}: is slurmctld up? (sinfo)") from None
    answer = proc.stdout.strip().split(";")[0]
    if proc.returncode != 0 or not answer:
        message = (proc.stderr.strip() or proc.stdout.strip() or f"exit status {proc.returncode}")
        raise UsageError(f"sbatch refused the {what} ({shlex.join(command)}): {message}")
    return answer


def submit(plan: SlurmPlan, *, sbatch: str = "sbatch") -> SlurmPlan:
    """Submit the array job, then the merge job with ``--dependency=afterany:<array job>``.

    Returns:
        ``plan`` with both job ids.

    Raises:
        UsageError: sbatch is missing or refused a job (a refused merge job names the array job
            already submitted, and the command to submit the merge by hand; a GPU request refused,
            as on a cluster without GPUs, says to use the emulator).
    """
    try:
        array = _sbatch([str(plan.grade_script)], what="array job", sbatch=sbatch)
    except UsageError as exc:
        if BACKENDS[plan.backend].uses_gpus and "gres" in str(exc).lower():
            raise UsageError(f"{exc}\nthe tasks ask Slurm for a GPU each (--gres=gpu:1: --backend auto or pycuda); "
                             "on a cluster without GPUs grade on the CPU with --backend emulator, or name a "
                             "partition that has GPUs with --slurm-option=--partition=NAME") from None
        raise
    try:
        merge_job = _sbatch([f"--dependency=afterany:{array}", str(plan.merge_script)], what="merge job",
                            sbatch=sbatch)
    except UsageError as exc:
        raise UsageError(f"{exc}\nthe array job {array} was submitted and runs; submit the merge by hand: "
                         f"sbatch --dependency=afterany:{array} {plan.merge_script}") from None
    return dataclasses.replace(plan, array_job=array, merge_job=merge_job)


def slurm_batch(submissions: Path, *, out: Path, config: Path, private_config: Path | None, backend: str,
                checks: bool = True, jobs: int | None = None, shards: int | None = None,
                options: list[str] | tuple[str, ...] = (), resume: bool = False, submit_jobs: bool = True,
                sbatch: str = "sbatch", python: str | None = None, allow_unsandboxed: bool = False) -> SlurmPlan:
    """Write ``OUT/slurm/grade.sbatch`` and ``merge.sbatch`` for a class and (unless told not to)
    submit them: the Python API of ``scangrade batch --slurm``.

    Args:
        submissions: the folder of submissions, as for ``scangrade batch``.
        out: the class's output folder; must be on a file system the compute nodes share.
        config, private_config: the config files (already validated by the caller).
        backend: the tasks' backend (see :func:`slurm_backend`).
        shards: K (default: one shard per ten submissions, rounded up).
        options: extra sbatch options (see :func:`sbatch_scripts`).
        resume: the tasks keep results already in their shards' folders.
        submit_jobs: submit with sbatch; False writes the scripts only.

    Raises:
        UsageError: an unusable folder or option (``out`` inside ``submissions`` included), or
            sbatch missing or refusing.
    """
    check_out_folder(submissions, out)
    students = count_submissions(submissions)
    k = shards if shards is not None else max(1, math.ceil(students / DEFAULT_PER_SHARD))
    grade_text, merge_text = sbatch_scripts(submissions, out=out, shards=k, config=config,
                                            private_config=private_config, backend=backend, checks=checks,
                                            jobs=jobs, options=options, resume=resume, python=python,
                                            allow_unsandboxed=allow_unsandboxed)
    folder = out.resolve() / "slurm"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (out.resolve() / "shards").mkdir(exist_ok=True)
        grade_script, merge_script = folder / "grade.sbatch", folder / "merge.sbatch"
        grade_script.write_text(grade_text, encoding="utf-8")
        merge_script.write_text(merge_text, encoding="utf-8")
        for script in (grade_script, merge_script):
            script.chmod(0o755)
    except OSError as exc:
        raise UsageError(f"cannot write the job scripts into {folder}: {exc.strerror}") from None
    plan = SlurmPlan(out=out.resolve(), shards=k, grade_script=grade_script, merge_script=merge_script,
                     backend=backend, students=students)
    return submit(plan, sbatch=sbatch) if submit_jobs else plan
