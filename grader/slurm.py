"""Grading a class on a Slurm cluster: shards, their manifests, the job scripts, and the merge.

A class is split into K shards — shard I holds every K-th submission of the sorted list, starting
at the I-th — and each shard is an ordinary ``scangrade batch --shard I/K`` into its own folder,
one Slurm array task each. Every batch run (sharded or not) writes ``batch.json``, a manifest
that names the shard, the config fingerprint, the backend and the students it graded; ``scangrade
merge`` joins the shards' results into one gradebook and summary, byte for byte what one local
``scangrade batch`` of the same class writes, after checking that the shards fit together.

Layout written by ``scangrade batch SUBMISSIONS --out DIR --slurm``::

    DIR/slurm/grade.sbatch        the array job: task I runs the batch of shard I/K
    DIR/slurm/merge.sbatch        the merge job, submitted with --dependency=afterany:<array job>
    DIR/slurm/grade-<job>_<I>.out, merge-<job>.out    the jobs' logs
    DIR/shards/<I>/               shard I: per-student folders, gradebook.csv, summary.txt, batch.json
    DIR/gradebook.csv, DIR/summary.txt, DIR/<id>/     the merged class, written by the merge job
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader import __version__
from grader.config import BACKEND_CHOICES, Config
from grader.errors import UsageError
from grader.results import SubmissionResult

#: The manifest's name in every batch output folder, and its schema.
MANIFEST = "batch.json"
MANIFEST_SCHEMA, MANIFEST_VERSION = "scangrade.batch", 1
#: Config fields that do not change a grade (where the files were, how many threads the emulator
#: used, the config's own backend key — the backend that ran is recorded apart).
_NOT_FINGERPRINTED = ("path", "private_path", "emulator_workers", "backend")
#: sbatch options that say where and on whose account a job runs: the merge job gets these too.
_PLACEMENT_OPTIONS = ("--partition", "-p", "--account", "-A", "--qos", "-q", "--reservation", "--clusters",
                      "-M", "--chdir", "-D")
#: Students per shard when --slurm-shards is not given.
DEFAULT_PER_SHARD = 10
_SHARD_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


class IncompleteMerge(UsageError):
    """``scangrade merge`` found shards missing or unfinished (exit status 1, not 2).

    Attributes:
        missing: one line per missing shard: its index or folder, and why.
    """

    exit_status = 1

    def __init__(self, message: str, *, missing: list[str]) -> None:
        self.missing = missing
        super().__init__(message)


# --- shards and manifests -------------------------------------------------------------------------

def parse_shard(text: str) -> tuple[int, int]:
    """``"I/K"`` -> ``(I, K)``, 0-based: shard I of K.

    Raises:
        UsageError: not two integers with 0 <= I < K.
    """
    m = _SHARD_RE.match(text or "")
    if not m or int(m[2]) < 1 or int(m[1]) >= int(m[2]):
        raise UsageError(f"--shard must be I/K with 0 <= I < K, shards counted from 0 (e.g. 0/4); got {text!r}")
    return int(m[1]), int(m[2])


def shard_positions(total: int, shard: tuple[int, int] | None) -> list[int]:
    """Positions (0-based, in the sorted submission list of ``total``) that a shard grades.

    Shard ``(I, K)`` holds positions I, I+K, I+2K, ...; ``None`` is the whole class. The split
    depends on nothing but the list, so every task of an array job computes the same one.

    Raises:
        UsageError: a shard outside 0 <= I < K.
    """
    if shard is None:
        return list(range(total))
    index, count = shard
    if count < 1 or not 0 <= index < count:
        raise UsageError(f"shard {index}/{count}: needs 0 <= I < K")
    return list(range(index, total, count))


def config_fingerprint(cfg: Config) -> str:
    """SHA-256 (hex) of everything in a loaded config (public and private) that can change a grade:
    sizes, hidden sizes and seeds, points, dtypes, block sizes, tolerances, timeouts, timing.

    Two shards graded with equal fingerprints graded under the same rules, wherever their config
    files were. Paths, the emulator's thread count and the config's ``backend`` key are left out
    (the backend that ran is recorded on its own).
    """
    data = dataclasses.asdict(cfg)
    for key in _NOT_FINGERPRINTED:
        data.pop(key, None)
    text = json.dumps(data, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _class_hash(ids: list[str]) -> str:
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


def write_manifest(out: Path, *, cfg: Config, backend: str, checks: bool, shard: tuple[int, int] | None,
                   part_keys: list[str], everyone: list[str], positions: list[int], submissions: Path) -> Path:
    """Write ``out/batch.json``: what a batch run graded and under which rules (written last, so
    its presence means the shard finished).

    Args:
        cfg: the config as loaded (public and private).
        backend: the backend that ran (``pycuda`` or ``emulator``); checks: the emulator's checks.
        shard: ``(I, K)``, or None for a whole class.
        part_keys: the gradebook's part columns, in order.
        everyone: every submission id of the class, in gradebook order (not only this shard's).
        positions: the positions in ``everyone`` this run graded.
        submissions: the folder of submissions.

    Returns:
        The manifest's path.
    """
    manifest = {
        "schema": MANIFEST_SCHEMA, "schema_version": MANIFEST_VERSION, "scangrade_version": __version__,
        "shard": {"index": shard[0], "count": shard[1]} if shard else None,
        "config_sha256": config_fingerprint(cfg), "config": str(Path(cfg.path).resolve()),
        "private_config": str(Path(cfg.private_path).resolve()) if cfg.private_path else None,
        "backend": backend, "checks": checks, "part_keys": list(part_keys),
        "submissions": str(submissions.resolve()), "class_size": len(everyone), "class_sha256": _class_hash(everyone),
        "students": [{"position": p, "id": everyone[p]} for p in positions],
        "finished_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    from grader.batch import _write_atomic
    path = out / MANIFEST
    _write_atomic(path, json.dumps(manifest, indent=2) + "\n")
    return path


def read_manifest(folder: Path) -> dict | None:
    """A folder's ``batch.json``, or None when it is not there (the shard did not finish).

    Raises:
        UsageError: the file is there but is not a scangrade batch manifest.
    """
    path = folder / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: unreadable ({exc}); grade that shard again (scangrade batch --shard ... --resume)") from None
    if not isinstance(data, dict) or data.get("schema") != MANIFEST_SCHEMA:
        raise UsageError(f"{path}: not a scangrade batch manifest")
    if data.get("schema_version") != MANIFEST_VERSION:
        raise UsageError(f"{path}: manifest version {data.get('schema_version')!r}; this scangrade ({__version__}) "
                         f"reads version {MANIFEST_VERSION}: merge with the scangrade that graded the shards")
    return data


# --- merge ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Merged:
    """What :func:`merge` wrote.

    Attributes:
        rows: ``(id, result)`` per student, in gradebook order.
        missing: one line per missing or unfinished shard (empty unless ``allow_partial``).
        out: the merged folder.
    """

    rows: list[tuple[str, SubmissionResult]]
    missing: tuple[str, ...]
    out: Path


def _resubmit_hint(folder: Path, index: int | None) -> str:
    """How to grade a shard again: the exact sbatch line when the folder sits in a --slurm layout."""
    script = folder.parent.parent / "slurm" / "grade.sbatch"
    if index is not None and folder.parent.name == "shards" and script.is_file():
        return f"resubmit it: sbatch --array={index} {script} --resume"
    return "grade it again (scangrade batch ... --shard I/K --resume) or resubmit its array index"


def _shard_index(folder: Path) -> int | None:
    return int(folder.name) if folder.name.isdigit() else None


def _link_tree(src: Path, dest: Path) -> None:
    """Copy a student's folder, hard-linking the files where the file system allows."""
    def link_or_copy(s: str, d: str) -> None:
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest, copy_function=link_or_copy)


def merge(shard_dirs: list[Path], *, out: Path, allow_partial: bool = False) -> Merged:
    """Join the shards of one class into ``out``: ``gradebook.csv``, ``summary.txt``, ``batch.json``
    and every student's folder (hard links where possible, else copies).

    The gradebook and summary are those one ``scangrade batch`` of the whole class writes, byte for
    byte. Checked first: every folder holds a finished shard (its ``batch.json``); all shards were
    graded by the same scangrade version, config fingerprint, backend and checks, from the same
    class, into the same number of shards; no shard index or student appears twice; every student's
    ``result.json`` is intact.

    Args:
        shard_dirs: the shards' output folders (``DIR/shards/0`` ...).
        out: the merged folder (created; may be the shards' parent).
        allow_partial: write a gradebook of the shards there are when some are missing (the
            summary then says which); otherwise a missing shard writes nothing.

    Raises:
        IncompleteMerge: shards missing or unfinished, and not ``allow_partial``.
        UsageError: shards that do not fit together, or a damaged shard.
    """
    from grader.batch import load_intact

    if not shard_dirs:
        raise UsageError("give the shards' folders to merge (e.g. DIR/shards/*)")
    found: list[tuple[Path, dict]] = []
    unfinished: list[Path] = []
    for folder in shard_dirs:
        if not folder.is_dir():
            unfinished.append(folder)
            continue
        manifest = read_manifest(folder)
        (unfinished.append(folder) if manifest is None else found.append((folder, manifest)))
    if not found:
        raise IncompleteMerge(f"none of the {len(shard_dirs)} folders holds a finished shard (no {MANIFEST}): "
                              + ", ".join(map(str, shard_dirs)), missing=[str(f) for f in shard_dirs])

    first_dir, first = found[0]
    for field in ("scangrade_version", "config_sha256", "backend", "checks", "part_keys", "class_size",
                  "class_sha256"):
        for folder, m in found[1:]:
            if m.get(field) != first.get(field):
                what = {"config_sha256": "configs (public or private) differ",
                        "class_sha256": "they graded different classes (different submission folders)",
                        "class_size": "they graded different classes (different submission folders)"}.get(
                    field, f"{field} differs: {first.get(field)!r} vs {m.get(field)!r}")
                raise UsageError(f"{first_dir} and {folder} do not fit together: {what}; grade every shard with "
                                 "the same scangrade, --config, --private-config, --backend and --checks")
    count = (first["shard"] or {"count": 1})["count"]
    by_index: dict[int, Path] = {}
    for folder, m in found:
        shard = m["shard"] or {"index": 0, "count": 1}
        if shard["count"] != count:
            raise UsageError(f"{first_dir} is a shard of {count} but {folder} of {shard['count']}: "
                             "merge the shards of one run")
        if shard["index"] in by_index:
            raise UsageError(f"{by_index[shard['index']]} and {folder} are both shard {shard['index']}/{count}: "
                             "give each shard once")
        by_index[shard["index"]] = folder

    missing, named = [], set()
    for index in range(count):
        if index in by_index:
            continue
        guess = next((f for f in unfinished if _shard_index(f) == index), None)
        if guess is not None:
            named.add(guess)
            why = "does not exist" if not guess.exists() else f"has no {MANIFEST}: its job failed or is still running"
            missing.append(f"shard {index}/{count} ({guess}) {why}; {_resubmit_hint(guess, index)}")
        else:
            missing.append(f"shard {index}/{count} is not among the folders given")
    for folder in unfinished:
        if folder not in named:
            why = "does not exist" if not folder.exists() else f"holds no finished shard ({MANIFEST} missing)"
            missing.append(f"{folder} {why}")
    absent = count - len(by_index)
    if missing and not allow_partial:
        head = f"{absent} of {count} shard(s) missing or unfinished" if absent else "folders without a finished shard"
        raise IncompleteMerge(f"{head}, so no gradebook was written (--allow-partial writes one of the shards "
                              "there are):\n  " + "\n  ".join(missing), missing=missing)

    placed: dict[str, Path] = {}
    positions: dict[int, str] = {}
    rows_at: list[tuple[int, str, SubmissionResult, Path]] = []
    for folder, m in found:
        for entry in m["students"]:
            sid, pos = entry["id"], entry["position"]
            if sid in placed:
                raise UsageError(f"student {sid!r} is in both {placed[sid]} and {folder}: "
                                 "each student must be graded in one shard only")
            if pos in positions:
                raise UsageError(f"{folder}: position {pos} of the class is {sid!r} here but {positions[pos]!r} "
                                 "in another shard: the shards split the class differently")
            placed[sid], positions[pos] = folder, sid
            result = load_intact(folder / sid / "result.json")
            if result is None:
                raise UsageError(f"{folder / sid / 'result.json'} is missing or damaged though {folder / MANIFEST} "
                                 f"lists it; {_resubmit_hint(folder, _shard_index(folder))}")
            rows_at.append((pos, sid, result, folder / sid))
    rows_at.sort(key=lambda r: r[0])
    if not absent and sorted(positions) != list(range(first["class_size"])):
        raise UsageError(f"the shards hold {len(positions)} of the class's {first['class_size']} submissions: "
                         "their manifests do not split the class as scangrade batch --shard does; grade them again")

    try:
        return _write_merged(out, rows_at, shard_dirs=shard_dirs, first=first, by_index=by_index, count=count,
                             absent=absent, missing=missing)
    except OSError as exc:
        raise UsageError(f"cannot write the merged class into {out}: {exc.strerror or exc}") from None


def _write_merged(out: Path, rows_at: list[tuple[int, str, SubmissionResult, Path]], *, shard_dirs: list[Path],
                  first: dict, by_index: dict[int, Path], count: int, absent: int, missing: list[str]) -> Merged:
    """The files of :func:`merge`, once every check has passed."""
    from grader.batch import _write_atomic, class_summary, gradebook_csv

    out.mkdir(parents=True, exist_ok=True)
    keep = {d.resolve() for d in shard_dirs} | {(out / "slurm").resolve()}
    for _, sid, _, src in rows_at:
        dest = (out / sid).resolve()
        if dest in keep or any(dest in k.parents for k in keep):
            raise UsageError(f"student {sid!r} would overwrite {dest}, which holds shards or scripts: "
                             "merge into another --out folder")
        if src.resolve() != dest:
            _link_tree(src, dest)
    rows = [(sid, result) for _, sid, result, _ in rows_at]
    keys = list(first["part_keys"])
    _write_atomic(out / "gradebook.csv", gradebook_csv(rows, keys))
    summary = class_summary(rows, keys)
    if absent:
        summary += (f"PARTIAL: {absent} shard(s) of {count} missing, "
                    f"{first['class_size'] - len(rows)} of {first['class_size']} submissions not in this gradebook\n")
    _write_atomic(out / "summary.txt", summary)
    merged = {**{k: v for k, v in first.items() if k not in ("shard", "students", "finished_at")},
              "shard": None, "students": [{"position": p, "id": sid} for p, sid, _, _ in rows_at],
              "merged_from": [str(f.resolve()) for _, f in sorted(by_index.items())],
              "missing": missing, "finished_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    _write_atomic(out / MANIFEST, json.dumps(merged, indent=2) + "\n")
    return Merged(rows=rows, missing=tuple(missing), out=out)


# --- job scripts and submission -------------------------------------------------------------------

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
    key, as for a local run; ``auto`` means ``pycuda`` (the tasks ask Slurm for a GPU each), since the
    machine writing the scripts is not the one that grades.

    Raises:
        UsageError: an unknown backend name.
    """
    env = os.environ if env is None else env
    name = option or env.get("SCANGRADE_BACKEND") or config_value or "auto"
    if name not in BACKEND_CHOICES:
        raise UsageError(f"unknown backend {name!r}; choose one of {', '.join(BACKEND_CHOICES)}")
    return "pycuda" if name == "auto" else name


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


def sbatch_scripts(submissions: Path, *, out: Path, shards: int, config: Path, private_config: Path | None,
                   backend: str, checks: bool = False, jobs: int = 0, options: list[str] | tuple[str, ...] = (),
                   resume: bool = False, python: str | None = None,
                   allow_unsandboxed: bool = False) -> tuple[str, str]:
    """The text of the array job script and of the merge job script.

    Array task I runs ``python -P -m grader batch SUBMISSIONS --out OUT/shards/I --shard I/K`` with
    the config, private config, backend and checks given; arguments after the script's name on
    sbatch's command line are passed on (``sbatch --array=2 grade.sbatch --resume``). On the pycuda
    backend each task asks for ``--gres=gpu:1`` (unless an option already asks for GPUs); on the
    emulator, ``--jobs`` defaults to the task's CPUs (``SLURM_CPUS_ON_NODE``). Every path is
    absolute; ``python`` (default: the interpreter running now) is the one with scangrade installed
    (``-P``: a ``grader`` folder in the job's working directory cannot shadow it).

    A job fails (in ``sacct``) only when its work was not done: exit status 1 of ``scangrade
    batch``/``merge`` — some student failed a case — counts as success once the shard or the whole
    gradebook is written; a merge with missing shards, or any other status, fails the job.

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
    logs = out / "slurm"
    q = shlex.quote
    task_out = f'{q(str(out / "shards") + "/")}"$SLURM_ARRAY_TASK_ID"'
    cmd = [q(python), "-P", "-m", "grader", "batch", q(str(submissions)), "--out", task_out,
           "--shard", f'"$SLURM_ARRAY_TASK_ID/{shards}"', "--config", q(str(config.resolve())),
           "--backend", backend]
    if private_config is not None:
        cmd += ["--private-config", q(str(private_config.resolve()))]
    if checks:
        cmd.append("--checks")
    elif backend == "emulator":  # checks are the default there
        cmd.append("--no-checks")
    if resume:
        cmd.append("--resume")
    if allow_unsandboxed:
        cmd.append("--allow-unsandboxed")
    if jobs > 0:
        cmd += ["--jobs", str(jobs)]
    elif backend == "emulator":
        cmd += ["--jobs", '"${SLURM_CPUS_ON_NODE:-1}"']
    names = {_option_name(o) for o in options}
    heads = ["#SBATCH --job-name=scangrade", f"#SBATCH --array=0-{shards - 1}",
             f"#SBATCH --output={_directive_path(logs / 'grade-%A_%a.out')}", "#SBATCH --ntasks=1"]
    if backend == "pycuda" and not names & {"--gres", "--gpus", "-G", "--gpus-per-task", "--gpus-per-node"}:
        heads.append("#SBATCH --gres=gpu:1")
    heads += [f"#SBATCH {o}" for o in options]
    grade = "\n".join([
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
    merge_heads = ["#SBATCH --job-name=scangrade-merge", f"#SBATCH --output={_directive_path(logs / 'merge-%j.out')}",
                   "#SBATCH --ntasks=1"]
    merge_heads += [f"#SBATCH {o}" for o in options if _option_name(o) in _PLACEMENT_OPTIONS]
    shard_dirs = " ".join(q(str(out / "shards" / str(i))) for i in range(shards))
    merge_text = "\n".join([
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
    return grade, merge_text


def count_submissions(folder: Path) -> int:
    """How many submissions ``folder`` holds, as ``scangrade batch`` counts them.

    Raises:
        UsageError: not a folder.
    """
    from grader.batch import find_submissions
    with tempfile.TemporaryDirectory(prefix="scangrade-count-") as work:
        return len(find_submissions(folder, work=Path(work)))


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
            already submitted, and the command to submit the merge by hand).
    """
    array = _sbatch([str(plan.grade_script)], what="array job", sbatch=sbatch)
    try:
        merge_job = _sbatch([f"--dependency=afterany:{array}", str(plan.merge_script)], what="merge job",
                            sbatch=sbatch)
    except UsageError as exc:
        raise UsageError(f"{exc}\nthe array job {array} was submitted and runs; submit the merge by hand: "
                         f"sbatch --dependency=afterany:{array} {plan.merge_script}") from None
    return dataclasses.replace(plan, array_job=array, merge_job=merge_job)


def slurm_batch(submissions: Path, *, out: Path, config: Path, private_config: Path | None, backend: str,
                checks: bool = False, jobs: int = 0, shards: int | None = None,
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
        UsageError: an unusable folder or option, or sbatch missing or refusing.
    """
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
