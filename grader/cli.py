"""The ``scangrade`` command line: thin commands over :func:`grader.grading.runner.grade`.

Exit status (:data:`EXIT_STATUSES`): 0 when every case passes, 1 when any fails, 2 for a usage or
configuration error, 3 when the grader failed on a part (to regrade), 130 when stopped by Ctrl-C.
"""

from __future__ import annotations

import argparse
import functools
import sys
import threading
from pathlib import Path
from typing import Callable

from grader import __version__, api
from grader.backends import CHOICES as BACKEND_CHOICES
from grader.assignment.config import find_config
from grader.core.errors import ScangradeError, UsageError
from grader.grading.case.cases import case_list
from grader.render.formats import FORMATS
from grader.render.text import render_text

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_REGRADE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
#: Every exit status, and what it means (README.md's table lists the same; tests/classwork/test_faults.py compares).
EXIT_STATUSES = {
    EXIT_PASS: "every case of every part passed",
    EXIT_FAIL: "some case failed (or, for merge, a shard is missing)",
    EXIT_USAGE: "a usage or configuration error, or the machine stopped the command (one line on stderr)",
    EXIT_REGRADE: "the grader failed on some part, not the submission: those rows say \"to regrade\" "
                  "(batch --resume grades them again); takes precedence over 1",
    EXIT_INTERRUPTED: "stopped by Ctrl-C",
}


def _results_status(results) -> int:
    """The exit status of a command that graded ``results``: :data:`EXIT_REGRADE` where the grader
    failed on any of them, else :data:`EXIT_PASS` when every one passed, else :data:`EXIT_FAIL`."""
    results = list(results)
    if any(r.to_regrade for r in results):
        return EXIT_REGRADE
    return EXIT_PASS if all(r.passed for r in results) else EXIT_FAIL


_BACKEND_HELP = ("where kernels run (default: SCANGRADE_BACKEND, then the config, then auto: a CUDA GPU through "
                 "PyCUDA if usable, else the CPU emulator)")
_CONFIG_HELP = "configuration file (default: ./config.yaml)"


def _parent(*adders) -> argparse.ArgumentParser:
    """A parent parser (no ``-h``) holding the options the ``adders`` put on it."""
    parent = argparse.ArgumentParser(add_help=False)
    for add in adders:
        add(parent)
    return parent


def _config_options(p: argparse.ArgumentParser, *, config_help: str = _CONFIG_HELP,
                    private_help: str = "a TA's private config adding hidden sizes (and their seed) to --config"
                    ) -> None:
    """``--config FILE`` (found by :func:`grader.assignment.config.find_config` when absent) and ``--private-config FILE``."""
    p.add_argument("--config", metavar="FILE", help=config_help)
    p.add_argument("--private-config", metavar="FILE", help=private_help)


def _backend_option(p: argparse.ArgumentParser) -> None:
    """``--backend auto|pycuda|emulator`` (None: SCANGRADE_BACKEND, then the config)."""
    p.add_argument("--backend", choices=BACKEND_CHOICES, default=None, help=_BACKEND_HELP)


def _checks_options(p: argparse.ArgumentParser) -> None:
    """``--checks`` (the default) and ``--no-checks``: the race, bounds and barrier checks, as in every
    official grade (the emulator's; on a GPU, compute-sanitizer's)."""
    p.add_argument("--checks", dest="checks", action="store_true", default=True,
                   help="check for races, out-of-bounds accesses and barrier divergence on sizes up to "
                        "emulator.checks_max_n, and on sampled blocks above it (the default): the emulator's "
                        "checks under three thread orders, on every machine (on a GPU they run beside it, on "
                        "the CPU's cores)")
    p.add_argument("--no-checks", dest="checks", action="store_false",
                   help="skip the checks (faster; the grade may then differ from the official one)")
    p.add_argument("--sanitizer-audit", action="store_true", default=False,
                   help="on a GPU, also run NVIDIA compute-sanitizer (memcheck, racecheck, synccheck) on the checked "
                        "cases, as an audit beside the emulator's checks (slower; config: sanitizer_audit)")


def _run_options(p: argparse.ArgumentParser) -> None:
    """``--seed`` and ``--part``: which cases one grade runs."""
    p.add_argument("--seed", type=int, help="replay with this seed instead of the config's")
    p.add_argument("--part", action="append", metavar="KEY", dest="parts",
                   help="grade only this part (e.g. part2_blelloch); repeatable")


def _report_options(p: argparse.ArgumentParser) -> None:
    """The report files one grade also writes: ``--NAME FILE`` per format of
    :data:`grader.render.formats.FORMATS` with an option (``--json``, ``--gradescope``, ...); and
    ``--show-hidden``, the terminal report as the course staff read it."""
    for f in FORMATS.values():
        if f.flag:
            p.add_argument(f.flag, metavar="FILE", dest=f.name, help=f.option_help)
    p.add_argument("--show-hidden", action="store_true",
                   help="print the report with every hidden case in full (size, seed, message, the run time): for "
                        "course staff; by default the terminal shows a hidden case by name and passed or failed only, "
                        "as students may see it")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``scangrade``; each command's function is the namespace's ``run``."""
    parser = argparse.ArgumentParser(prog="scangrade", description="Grade CUDA prefix-sum (scan) kernels.")
    parser.add_argument("--version", action="version", version=f"scangrade {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_grading_commands(sub)
    _add_gradebook_commands(sub)
    _add_packaging_commands(sub)
    _add_bench_command(sub)
    return parser


def _add_grading_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``grade``, ``check`` and ``batch`` to ``sub``, in that order, with their shared options."""
    grading = _parent(_backend_option, _config_options, _checks_options)  # grade, check, batch
    one_grade = _parent(_run_options, _report_options)  # grade, check
    g = sub.add_parser("grade", parents=[grading, one_grade], help="grade a submission folder or one part's .cu file")
    g.add_argument("path", help="a folder holding part1_naive.cu, part2_blelloch.cu, ... or one of those files")
    g.add_argument("--intake", action="store_true",
                   help="take the part files as batch does: from anywhere below PATH (a folder or a .zip), copied "
                        "by the grader, a misnamed file named in the report (the Gradescope autograder passes it)")
    g.add_argument("--require-sandbox", action="store_true",
                   help="grade for the record: on the emulator, refuse to run without its OS sandbox (bubblewrap) "
                        "unless the config sets emulator.sandbox (the Gradescope autograder passes it)")
    g.set_defaults(run=_grade)
    c = sub.add_parser("check", parents=[grading, one_grade],
                       help="grade your work in assignment/ on this machine (GPU or emulator)")
    c.add_argument("--dir", default="assignment", help="the folder holding your .cu files (default: assignment)")
    c.add_argument("--full", action="store_true",
                   help="grade every size of the config, as the official grade does (by default check grades the "
                        "sizes up to the config's check.quick_max_n, 300000 in the shipped config, and says what it "
                        "left out)")
    c.set_defaults(run=_grade)
    t = sub.add_parser("batch", parents=[grading],
                       help="grade a class: one folder or .zip per submission (or Gradescope's export) "
                            "into a gradebook and per-student reports")
    t.add_argument("submissions", help="the folder holding one folder or .zip per submission")
    t.add_argument("--out", required=True, metavar="DIR", help="where the gradebook and reports go")
    t.add_argument("--resume", action="store_true",
                   help="skip submissions whose result is already written, intact, and of the same submission, config, "
                        "private config, backend and checks (any other is graded again, and said)")
    t.add_argument("--jobs", type=int, default=None,
                   help="submissions graded at once, 1 or more (default: one per core, on a GPU machine up to 16 "
                        "per GPU, timed runs still alone on the GPU)")
    t.add_argument("--allow-unsandboxed", action="store_true",
                   help="grade on the emulator even where its OS sandbox (bubblewrap) is unusable, with resource "
                        "limits and the seccomp filter only (by default batch refuses; docs/security.md)")
    t.add_argument("--shard", metavar="I/K", help="grade only shard I of K (0-based): every K-th submission of the "
                                                  "sorted list, from the I-th; scangrade merge joins the shards")
    t.add_argument("--slurm", action="store_true",
                   help="grade on a Slurm cluster: write OUT/slurm/grade.sbatch (an array job, one shard a task) "
                        "and merge.sbatch, and submit both with sbatch (see docs/slurm.md)")
    t.add_argument("--slurm-shards", type=int, metavar="K",
                   help="with --slurm: the array's tasks (default: one per 10 submissions)")
    t.add_argument("--slurm-option", action="append", default=[], metavar="ARG",
                   help="with --slurm: one more '#SBATCH ARG' line, written --slurm-option=--partition=gpu; "
                        "repeatable")
    t.add_argument("--no-submit", action="store_true", help="with --slurm: write the job scripts, do not submit them")
    t.set_defaults(run=_batch)


def _add_gradebook_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``merge`` and ``report`` to ``sub``, in that order: the commands on batch's output."""
    m = sub.add_parser("merge", help="join the shards of scangrade batch --shard (or --slurm) into one gradebook")
    m.add_argument("shards", nargs="+", metavar="SHARD_DIR", help="the shards' output folders (e.g. OUT/shards/*)")
    m.add_argument("--out", required=True, metavar="DIR", help="where the gradebook, summary and reports go")
    m.add_argument("--allow-partial", action="store_true",
                   help="when shards are missing, write a gradebook of those there are anyway (exit status 1)")
    m.set_defaults(run=_merge)
    r = sub.add_parser("report", help="rebuild the class report (one HTML page) from a batch output folder")
    r.add_argument("folder", metavar="DIR", help="the output folder of scangrade batch (its --out)")
    r.add_argument("--out", metavar="FILE.html", help="where the page goes (default: DIR/class_report.html)")
    r.add_argument("--title", help="the page's heading, e.g. the course and term (default: scangrade class report)")
    r.set_defaults(run=_report)


def _add_packaging_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``release``, ``gradescope-bundle``, ``prairielearn-bundle`` and ``private-template`` to ``sub``,
    in that order: the commands that build what students and the course platforms get."""
    rel = sub.add_parser("release", help="build what students get: assignment/, the grader and the public config, "
                                         "with no reference solution or private setting (see docs/release.md)")
    rel.add_argument("out", metavar="OUT", help="the release folder to create, outside this checkout")
    rel.add_argument("--zip", action="store_true", help="also write OUT.zip (one top folder, OUT's name)")
    rel.add_argument("--force", action="store_true", help="replace an existing, non-empty OUT (and OUT.zip)")
    _config_options(rel, config_help="the public config students get (default: ./config.yaml)",
                    private_help="a TA's private config: only checked not to leak into the release, never copied")
    rel.set_defaults(run=_package)
    gsb = sub.add_parser("gradescope-bundle", help="build the autograder zip for Gradescope (setup.sh, "
                                                   "run_autograder, the grader, config; see docs/release.md)")
    gsb.add_argument("out", metavar="OUT.zip", help="the zip to write")
    gsb.add_argument("--force", action="store_true", help="replace an existing OUT.zip")
    _config_options(gsb, config_help="the course's config (default: ./config.yaml)",
                    private_help="a private config (hidden sizes, their seed), put in the bundle and used for "
                                 "every submission")
    gsb.set_defaults(run=_package)
    plb = sub.add_parser("prairielearn-bundle", help="build the folder for PrairieLearn's serverFilesCourse: the "
                                                     "entrypoint run.sh, a Dockerfile, the grader, config (see "
                                                     "docs/prairielearn.md)")
    plb.add_argument("out", metavar="OUT", help="the folder to write, copied to serverFilesCourse/OUT's name/")
    plb.add_argument("--timeout", type=int, default=None, metavar="SECONDS",
                     help="the job timeout the questions set in info.json (externalGradingOptions.timeout, 11 to "
                          "600; default 120): the bundle's config.yaml has the config's timeouts lowered to fit in it, "
                          "each change printed")
    plb.add_argument("--force", action="store_true", help="replace an existing OUT")
    _config_options(plb, config_help="the course's config (default: ./config.yaml)",
                    private_help="a private config (hidden sizes, their seed), put in the bundle and used for "
                                 "every submission")
    plb.set_defaults(run=_package)
    pt = sub.add_parser("private-template", help="print a commented private config (hidden sizes and their seed) "
                                                "for --config, to fill in and keep from students (docs/release.md)")
    pt.add_argument("--config", metavar="FILE", help="the public config it adds hidden cases to (default: "
                                                     "./config.yaml)")
    pt.set_defaults(run=_private_template)


def _add_bench_command(sub: argparse._SubParsersAction) -> None:
    """Add ``bench`` to ``sub``: timing the reference solutions (GPU only)."""
    b = sub.add_parser("bench", help="time the reference solutions against a copy, CUB and library scans "
                                     "(GPU only; a benchmark, not a grade)")
    b.add_argument("--sizes", nargs="+", metavar="N",
                   help="sizes as integers or 2^k, comma- or space-separated (default: 2^16, 2^18, ..., 2^28)")
    b.add_argument("--dtypes", metavar="LIST", help="int32, float32 or both, comma-separated (default: both)")
    b.add_argument("--runs", type=int, default=30, help="timed runs per measurement; the median is reported "
                                                        "(default: 30)")
    b.add_argument("--json", metavar="FILE", help="also write the table as JSON to FILE")
    b.add_argument("--plot", metavar="FILE.png", help="also plot GB/s against n to FILE.png (needs matplotlib)")
    b.add_argument("--config", metavar="FILE", help=_CONFIG_HELP)
    b.set_defaults(run=_bench)


def _exit_status(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """The exit-status mapping of every command, defined once: the command's own status (0 all pass,
    1 any fail), else for a :class:`ScangradeError` its message on stderr, never a traceback, and its
    ``exit_status`` (2: usage or configuration error; 1 for an incomplete merge; 130 for a batch
    stopped by Ctrl-C, :class:`grader.core.errors.Interrupted`)."""
    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except ScangradeError as exc:
            print(f"scangrade: {exc.label}: {exc}", file=sys.stderr)
            return exc.exit_status
    return run


#: The progress bar's styles, by standard colour name: rich's defaults (a bar of rgb(249,38,114)
#: while it fills) read as bright red on 8- and 16-colour terminals while every case passes. Done
#: segments are green, the whole bar bright green when finished, the rest dim.
BAR_STYLES = {"style": "bright_black", "complete_style": "green", "finished_style": "bright_green",
              "pulse_style": "green"}


class _Progress:
    """A progress bar on stderr while cases or submissions are graded, when stderr is a terminal
    (rich): what runs, the bar, done of total, time elapsed and rich's estimate of the time left."""

    def __init__(self, total: int) -> None:
        self.bar = None
        if total and sys.stderr.isatty():
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(**BAR_STYLES), MofNCompleteColumn(),
                                TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), transient=True,
                                console=_console(sys.stderr))
            self.task = self.bar.add_task("grading", total=total)

    def __enter__(self) -> "_Progress":
        if self.bar:
            self.bar.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.bar:
            self.bar.stop()

    def __call__(self, kind: str, ev) -> None:
        if not self.bar:
            return
        if kind == "case-start":
            self.bar.update(self.task, description=f"case {ev.case}")
        elif kind == "case":
            self.bar.advance(self.task)


def _console(stream):
    from rich.console import Console
    return Console(file=stream, highlight=False)


_STYLES = (("PASS", "green"), ("FAIL", "bold red"), ("ERROR", "bold red"), ("TIMEOUT", "bold red"),
           ("CRASH", "bold red"), ("NOT RUN", "yellow"), ("WARNING", "bold yellow"),
           ("PENDING", "cyan"))


def styled_report(text: str):
    """The text report as a rich ``Text`` for a terminal: each line's status word coloured (PASS
    green, FAIL and the other failures red, NOT RUN and WARNING yellow, PENDING cyan) and part
    headings bold."""
    from rich.text import Text
    styled = Text(text)
    for word, style in _STYLES:
        styled.highlight_regex(rf"(?m)^ *{word}\b", style)
    styled.highlight_regex(r"(?m)^Part \d+:.*$", "bold")
    return styled


def _print_report(text: str) -> None:
    """The report on stdout, coloured when stdout is a terminal (:func:`styled_report`)."""
    if sys.stdout.isatty():
        _console(sys.stdout).print(styled_report(text), soft_wrap=True)
    else:
        print(text)


@_exit_status
def _batch(args: argparse.Namespace) -> int:
    """``scangrade batch``: exit 0 when every submission passed, 1 otherwise, 3 where the grader failed
    on some (to regrade), 2 on usage errors (no submission found included) and a full disk."""
    from grader.classwork.store import parse_shard, shard_positions, write_class_report
    from grader.classwork.submissions import require_submissions
    from grader.render.class_report import class_report_page
    from grader.classwork.batch import check_jobs
    check_jobs(args.jobs)
    if args.slurm:
        return _batch_slurm(args)
    if args.slurm_shards is not None or args.slurm_option or args.no_submit:
        raise UsageError("--slurm-shards, --slurm-option and --no-submit go with --slurm")
    shard = parse_shard(args.shard) if args.shard else None
    grading = api.prepare(config=args.config, private_config=args.private_config, backend=args.backend,
                          checks=args.checks, official=True, allow_unsandboxed=args.allow_unsandboxed,
                          command="batch", sanitizer_audit=args.sanitizer_audit)
    total = len(shard_positions(require_submissions(Path(args.submissions)), shard))
    bar = _Progress(total)
    done = []

    def on_done(sid: str, result, resumed: bool) -> None:
        done.append(sid)
        if bar.bar:
            bar.bar.update(bar.task, description=f"{sid} {'(resumed)' if resumed else ''}")
            bar.bar.advance(bar.task)
        else:
            print(f"[{len(done)}/{total}] {sid}: {result.points:g}/{result.max_points:g}"
                  f"{' (resumed)' if resumed else ''}", file=sys.stderr)
    def on_note(sid: str, note: str) -> None:
        print(f"scangrade: note: {sid}: {note}", file=sys.stderr)  # rich's bar, where there is one, prints it above
    started: set[str] = set()
    lock = threading.Lock()

    def on_event(sid: str, kind: str, ev) -> None:
        """The bar moves with each case (its line names the submission and the case); without a
        terminal, a line as each submission starts, so a batch says what it does before one ends."""
        if bar.bar:
            if kind == "case-start":
                bar.bar.update(bar.task, description=f"{sid}: case {ev.case}")
            return
        with lock:
            first = sid not in started
            started.add(sid)
        if first:
            print(f"grading {sid} ({len(done)} of {total} done)", file=sys.stderr)  # not `[i/n]`: a result's line
    with bar:
        rows = grading.grade_class(args.submissions, out=args.out, resume=args.resume, jobs=args.jobs,
                                   shard=shard, on_done=on_done, on_note=on_note, on_event=on_event)
    # OUT/class_report.html, after batch.json: it shows the config fingerprint
    page = write_class_report(Path(args.out), class_report_page, rows=rows)
    print((Path(args.out) / "summary.txt").read_text(), end="")
    print(f"gradebook: {Path(args.out) / 'gradebook.csv'}")
    print(f"class report: {page}")
    return _results_status(r for _, r in rows)


def _batch_slurm(args: argparse.Namespace) -> int:
    """``scangrade batch --slurm``: write the job scripts, submit them unless --no-submit (exit 0)."""
    from grader.classwork.slurm import slurm_backend, slurm_batch
    from grader.classwork.submissions import require_submissions
    cfg = api.load(config=args.config, private_config=args.private_config)  # checked here, graded there
    if args.shard:
        raise UsageError("--shard and --slurm do not go together: --slurm writes one array task per shard")
    require_submissions(Path(args.submissions))  # no job scripts for an empty class
    backend = slurm_backend(args.backend, config_value=cfg.backend)
    plan = slurm_batch(Path(args.submissions), out=Path(args.out), config=Path(cfg.path),
                       private_config=Path(cfg.private_path) if cfg.private_path else None, backend=backend,
                       checks=args.checks, jobs=args.jobs, shards=args.slurm_shards,
                       options=args.slurm_option, resume=args.resume, submit_jobs=not args.no_submit,
                       allow_unsandboxed=args.allow_unsandboxed)
    print(plan.describe(), end="")
    return EXIT_PASS


@_exit_status
def _report(args: argparse.Namespace) -> int:
    """``scangrade report``: write the class report page (exit 0), 2 when DIR holds no results."""
    from functools import partial

    from grader.classwork.store import write_class_report
    from grader.render.class_report import class_report_page
    page = write_class_report(Path(args.folder), partial(class_report_page, title=args.title),
                              out=Path(args.out) if args.out else None)
    print(f"class report: {page}")
    return EXIT_PASS


@_exit_status
def _merge(args: argparse.Namespace) -> int:
    """``scangrade merge``: 0 when every student passed, 1 when any failed or shards are missing
    (``IncompleteMerge``), 3 where a row is to regrade, 2 on shards that do not fit together."""
    from grader.classwork.merge import merge
    from grader.classwork.store import write_class_report
    from grader.render.class_report import class_report_page
    merged = merge([Path(p) for p in args.shards], out=Path(args.out), allow_partial=args.allow_partial)
    for line in merged.missing:
        print(f"scangrade: warning: not in the gradebook: {line}", file=sys.stderr)
    page = write_class_report(merged.out, class_report_page, rows=merged.rows)  # after batch.json, as batch does
    print((merged.out / "summary.txt").read_text(), end="")
    print(f"gradebook: {merged.out / 'gradebook.csv'}")
    print(f"class report: {page}")
    status = _results_status(r for _, r in merged.rows)
    return EXIT_FAIL if merged.missing and status == EXIT_PASS else status


@_exit_status
def _package(args: argparse.Namespace) -> int:
    """``scangrade release``, ``gradescope-bundle`` and ``prairielearn-bundle``: 0 when written, 2 on usage errors."""
    private = Path(args.private_config) if args.private_config else None
    config = find_config(args.config, start=Path())
    if args.command == "release":
        from grader.packaging.release import build_release
        made = build_release(Path(args.out), config=config, private_config=private,
                             zip_archive=args.zip, force=args.force)
    elif args.command == "gradescope-bundle":
        from grader.packaging.gradescope_bundle import build_bundle
        made = build_bundle(Path(args.out), config=config, private_config=private, force=args.force)
    else:
        from grader.packaging.prairielearn_bundle import DEFAULT_TIMEOUT_S, build_prairielearn_bundle
        made = build_prairielearn_bundle(Path(args.out), config=config, private_config=private, force=args.force,
                                         timeout_s=DEFAULT_TIMEOUT_S if args.timeout is None else args.timeout)
    print(made.describe(), end="")
    return EXIT_PASS


@_exit_status
def _private_template(args: argparse.Namespace) -> int:
    """``scangrade private-template``: the template on stdout (exit 0), 2 on a config error."""
    from grader.assignment.config import load_config
    from grader.assignment.private_template import private_template
    print(private_template(load_config(find_config(args.config, start=Path()))), end="")
    return EXIT_PASS


@_exit_status
def _bench(args: argparse.Namespace) -> int:
    """``scangrade bench``: the benchmark table (GPU only); 2 on usage errors."""
    from grader.tools import bench
    return bench.command(config=find_config(args.config, start=Path()), sizes=args.sizes, dtypes=args.dtypes,
                         runs=args.runs, json_path=args.json, plot_path=args.plot, argv=args.argv)


@_exit_status
def _grade(args: argparse.Namespace) -> int:
    """``scangrade grade`` and ``scangrade check`` (without ``--full``, the quick check:
    :meth:`grader.api.Grading.quick`): the report on stdout; 0 when every case graded passed, 1
    when any failed, 3 where the grader failed on a part (to regrade), 2 on usage or configuration
    errors (a report file that cannot be written included)."""
    grading = api.prepare(config=args.config, private_config=args.private_config, backend=args.backend,
                          checks=args.checks, official=args.command == "grade" and args.require_sandbox,
                          sanitizer_audit=args.sanitizer_audit)
    if args.command == "check" and not args.full:
        grading = grading.quick()
    cfg = grading.cfg
    path = Path(args.path if args.command == "grade" else args.dir)
    if not getattr(args, "intake", False):
        from grader.grading.intake import require_part_file
        require_part_file(path)  # the wrong folder: one line, before anything is graded
    if args.command == "check" and not path.is_dir():
        raise UsageError(f"{path}/ not found: run `scangrade check` from the folder that holds your "
                         "assignment/ folder, or pass --dir")
    total = sum(len(case_list(cfg, k)) for k in (args.parts or cfg.parts) if k in cfg.parts)
    from grader.render.plot import warm_up
    warm_up()  # the time plots' matplotlib, while the parts grade
    with _Progress(total) as progress:
        result = grading.grade(path, seed=args.seed, parts=args.parts, intake=getattr(args, "intake", False),
                               on_event=progress, compile_first=_compiles_first(args, cfg))
    _print_report(render_text(result, show_hidden=args.show_hidden))
    written = []
    for f in FORMATS.values():
        path = getattr(args, f.name) if f.flag else None
        if not path:
            continue
        try:
            Path(path).write_text(f.render(result, cfg), encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror}") from None
        written.append(Path(path))
    _write_plots(result, written[0].parent if written else _plots_folder())
    return _results_status([result])


def _compiles_first(args: argparse.Namespace, cfg) -> bool:
    """Whether this grade compiles every part before any case and stops at a compile error: where it
    writes PrairieLearn's results.json (``--prairielearn``, the bundle's entrypoint) and the config's
    ``prairielearn.compile_error`` is ``not-gradable``, as such a submission is not graded, and its
    results.json then comes in seconds, naming every problem found (docs/prairielearn.md)."""
    return bool(getattr(args, "prairielearn", None)) and cfg.prairielearn.compile_error == "not-gradable"


def _plots_folder() -> Path:
    """Where the time plots of a run that writes no report file go: ``plots/`` in the grader's cache
    folder, not the current folder (a student's repository, which a grading must leave as it is)."""
    from grader.host.folders import default_cache_dir
    return default_cache_dir() / "plots"


def _write_plots(result, folder: Path) -> None:
    """Each timed part's time plot (:mod:`grader.render.plot`) into ``folder`` (beside the first
    report file written, else :func:`_plots_folder`), one line each saying where; or one line saying
    why there is none (no matplotlib)."""
    from grader.render.plot import plot_unavailable, plotted_parts, write_plots
    if not plotted_parts(result):
        return
    why = plot_unavailable()
    if why:
        print(f"time plots: none ({why})")
        return
    try:
        for path in write_plots(result, folder):
            print(f"time plot: {path}")
    except OSError as exc:
        raise UsageError(f"cannot write the time plots into {folder}: {exc.strerror}") from None


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status (:data:`EXIT_STATUSES`: 0 all pass,
    1 any fail, 2 usage or configuration error, 3 to regrade, 130 stopped by Ctrl-C; see
    :func:`_exit_status`). Ctrl-C ends every command
    with one line, never a traceback; the workers of a grading are ended by the runner. So does a
    ``MemoryError`` of the grader's own process (an address-space limit, ``ulimit -v``): the line
    says what to raise it to."""
    args = build_parser().parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    try:
        return args.run(args)
    except KeyboardInterrupt:
        print(f"scangrade: interrupted: {args.command} was stopped before it finished", file=sys.stderr)
        return EXIT_INTERRUPTED
    except MemoryError:  # the grader's own process, not a part's worker (those are graded results)
        from grader.host.resources import limit_advice
        print(f"scangrade: error: {args.command} ran out of memory: {limit_advice(0)}", file=sys.stderr)
        return UsageError.exit_status


if __name__ == "__main__":
    sys.exit(main())
