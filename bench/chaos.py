"""Chaos: a batch killed outright, again and again, ends with the grades of a clean run, and leaves
no process behind.

On one backend, over a class of ``--submissions`` (the reference solutions, every fifth with one
part replaced by a kernel of ``tests/kernels`` that fails it), ``scangrade batch`` is run as a child
process:

1. once, cleanly: the grades to compare with, and the window in which the batch has children (from
   its first worker to its last);
2. ``--trials`` times: the batch started, its whole process group SIGKILLed at a random moment of
   the first :data:`KILL_SHARE` of what is left of that window (the share of the class not graded
   yet), ``--kills`` times (the first run fresh, the next ones with ``--resume``; a kill that falls
   after the batch ended is shown as missed), then
   ``--resume`` to the end. After each kill, every process the batch had started (workers,
   executors, compilers, compute-sanitizer and its children; /proc's parent links at the kill,
   and every process carrying the run's mark) must be gone within :data:`GONE_S` seconds; every
   ``result.json`` there must be whole. At the end, every submission's grade must equal the clean
   run's;
3. once, before the trials: a single grading worker SIGKILLed at work, mid-batch; the batch goes on
   (the part is graded again) and every grade must equal the clean run's.

A grade is what is decided by the cases: per part its status, whether it is to regrade, each
case's status and points, the profile's points; on a backend that times kernels the performance
points vary from run to run and are left out (``gradebook_equal`` then says whether the whole
gradebook happened to agree); on the emulator the gradebooks must be equal byte for byte too.

Usage, from the repository root::

    python bench/chaos.py --backend pycuda --submissions 24 --trials 5 --json chaos-h200.json
    python bench/chaos.py --backend emulator --submissions 6 --trials 1 --kills 2 \\
        --parts part1_naive part2_blelloch --no-checks --allow-unsandboxed --json /tmp/chaos.json  # a smoke test

Within the device tool's 10-minute calls, ``--budget-s 540`` starts no trial that would likely end
past 9 minutes (each call warms and grades the class cleanly first); run it in as many calls as the
trials need, each with its own ``--seed`` and ``--json``.

It prints a table and, with ``--json``, writes every measurement. Exit status 0 when every check
held, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.throughput import _submission  # noqa: E402
from tests.classwork.test_faults import (Batch, alive, descendants, kill_while_grading, killer, marked,  # noqa: E402
                               run_watched)

#: Seconds after a kill by which every process the batch started must be gone.
GONE_S = 2.0
#: A kill falls at a random moment of this share of the time the batch's workers have left to run
#: (from the clean run's window, times the share of the class not graded yet).
KILL_SHARE = 0.6
#: A broken kernel per part (tests/kernels): each fails its part's cases quickly, on every backend.
BROKEN = {"part1_naive": "part1_oob_write.cu", "part2_blelloch": "part2_off_by_one.cu",
          "part3_conflict_free": "part3_gems_16_banks.cu", "part4_any_size": "part4_offsets_off_by_one.cu",
          "part5_single_pass": "part5_inclusive.cu"}


def make_class(folder: Path, count: int, parts: list[str]) -> dict[str, str]:
    """``count`` submissions in ``folder``: the reference solutions, every fifth (from the third) with
    one of ``parts`` broken (:data:`BROKEN`, in turn). Returns ``{submission: the broken file or ""}``."""
    made = {}
    for i in range(count):
        broken = ()
        if i % 5 == 2:
            key = parts[(i // 5) % len(parts)]
            broken = (ROOT / "tests" / "kernels" / BROKEN[key],)
        name = f"s{i:03d}"
        _submission(folder / name, broken=broken)
        made[name] = broken[0].name if broken else ""
    return made


def write_config(source: Path, parts: list[str] | None, folder: Path) -> Path:
    """``source`` as it is, or (``parts``) a copy of it keeping those parts alone."""
    if not parts:
        return source
    import yaml
    data = yaml.safe_load(source.read_text())
    unknown = sorted(set(parts) - set(data.get("parts", {})))
    if unknown:
        raise SystemExit(f"chaos: --parts {' '.join(unknown)}: not a part of {source}")
    data["parts"] = {k: v for k, v in data["parts"].items() if k in parts}
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def grades(out: Path) -> dict[str, list]:
    """Per submission of the batch folder ``out``: what its cases decided (see the module's doc)."""
    from grader.classwork.store import load_batch

    found = {}
    for sid, r in load_batch(out).rows:
        found[sid] = [(p.key, str(p.status), p.to_regrade, p.profile.points if p.profile else None,
                       [(c.name, str(c.status), c.points) for c in p.cases
                        if c.timing is None and not c.name.startswith("timed ")]) for p in r.parts]
    return found


def whole_results(out: Path) -> bool:
    """Whether every ``result.json`` under ``out`` is a whole scangrade result (none cut short)."""
    for path in out.glob("*/result.json"):
        try:
            if json.loads(path.read_text()).get("schema") != "scangrade.result":
                return False
        except (OSError, ValueError):
            return False
    return True


def _gone(batch: Batch, started: dict[int, int]) -> tuple[list[str], float | None]:
    """After a kill: the command lines of the batch's processes still alive :data:`GONE_S` seconds
    later, and how long until none was (None: not within 60 s)."""
    t0 = time.monotonic()
    left_then: list[str] = []
    checked = False
    while time.monotonic() - t0 < 60:
        left = alive(started) + [p for p in marked(batch.mark, batch.scratch) if p not in started]
        if not checked and time.monotonic() - t0 >= GONE_S:
            checked = True
            left_then = [_cmdline(p) for p in left]
        if not left:
            if not checked:
                left_then = []
            return left_then, round(time.monotonic() - t0, 3)
        time.sleep(0.01)
    return left_then or ["(still alive after 60 s)"], None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return f"pid {pid} (gone)"


def _compare(out: Path, clean_grades: dict, clean_book: str, exact: bool) -> dict:
    book = (out / "gradebook.csv").read_text() if (out / "gradebook.csv").exists() else ""
    got = grades(out) if book else {}
    differ = sorted(sid for sid in set(clean_grades) | set(got) if clean_grades.get(sid) != got.get(sid))
    return {"grades_equal": not differ, "differ": differ, "gradebook_equal": book == clean_book,
            "ok": not differ and (book == clean_book or not exact)}


def trial(n: int, batch: Batch, out: Path, *, kills: int, window: float, total: int, rng: random.Random,
          clean_grades: dict, clean_book: str, exact: bool) -> dict:
    """One trial: ``kills`` kills of the whole batch (then ``--resume`` each time), then ``--resume``
    to the end; the row of the table."""
    rows = []
    for k in range(kills):
        done = len(list(out.glob("*/result.json"))) if out.exists() else 0
        more = ("--resume",) if k else ()
        # within the first part of what is left to grade, so that the next kill has something left too
        started, moment = kill_while_grading(batch, out, window * KILL_SHARE * max(0.1, (total - done) / total),
                                             rng, *more)
        left, gone_s = _gone(batch, started)
        rows.append({"kill": k + 1, "moment_s": round(moment, 2), "processes": len(started), "landed": bool(started),
                     "left_after_2s": left, "all_gone_s": gone_s, "results_whole": whole_results(out),
                     "done_before": done})
        print(f"trial {n} kill {k + 1}: at {moment:.1f} s, {len(started)} processes, gone in {gone_s} s"
              f"{', LEFT: ' + '; '.join(left) if left else ''}", file=sys.stderr, flush=True)
    rc, _ = run_watched(batch, out, "--resume")
    # what the killed runs left in their temporary folder (on a GPU, the class's shared inputs: GiBs)
    shutil.rmtree(batch.scratch, ignore_errors=True)
    batch.scratch.mkdir()
    row = {"trial": n, "kills": rows, "final_exit": rc, **_compare(out, clean_grades, clean_book, exact)}
    row["ok"] = row["ok"] and all(not r["left_after_2s"] and r["results_whole"] for r in rows)
    return row


def worker_trial(batch: Batch, out: Path, *, window: float, rng: random.Random, clean_grades: dict,
                 clean_book: str, exact: bool) -> dict:
    """One worker SIGKILLed inside a part, after a random part of ``window``; the batch goes on."""
    proc = batch.start(out)
    killed, loop = killer(batch.mark, times=1)
    wait = rng.uniform(0, window / 2)
    try:
        while proc.poll() is None and not descendants(proc.pid):
            time.sleep(0.005)
        time.sleep(wait)
        loop(lambda: proc.poll() is not None)
        rc = proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    row = {"trial": "one worker", "killed": len(killed), "final_exit": rc,
           **_compare(out, clean_grades, clean_book, exact)}
    row["ok"] = row["ok"] and bool(killed)
    return row


def main(argv: list[str] | None = None) -> int:
    """Run the chaos trials and print their table; returns the exit status (see the module's doc)."""
    from grader.backends import BACKENDS, CHOICES

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=CHOICES, default="auto")
    ap.add_argument("--submissions", type=int, default=24, help="the class's size (default 24; at least 5)")
    ap.add_argument("--trials", type=int, default=5, help="trials of kills then --resume (default 5)")
    ap.add_argument("--kills", type=int, default=3, help="kills of the whole batch per trial (default 3)")
    ap.add_argument("--jobs", type=int, default=0, help="the batch's --jobs (default: as scangrade batch)")
    ap.add_argument("--config", default=str(ROOT / "config.yaml"))
    ap.add_argument("--parts", nargs="+", metavar="KEY", help="grade these parts only (a copy of the config)")
    ap.add_argument("--no-checks", action="store_true", help="grade without the checks (quicker; a smoke test)")
    ap.add_argument("--allow-unsandboxed", action="store_true",
                    help="passed on to scangrade batch (a machine without bubblewrap)")
    ap.add_argument("--sanitizer-audit", action="store_true",
                    help="passed on to scangrade batch: compute-sanitizer's children are among the processes killed")
    ap.add_argument("--seed", type=int, help="the kills' moments (default: drawn, and printed)")
    ap.add_argument("--budget-s", type=float, default=0,
                    help="start no trial that would likely end after this many seconds from the start (the "
                         "device tool's 10-minute calls: 540); the table says how many ran. Default: no limit")
    ap.add_argument("--json", help="also write the measurements to this file")
    args = ap.parse_args(argv)
    if args.submissions < 5 or args.trials < 1 or args.kills < 1:
        ap.error("needs --submissions 5 or more, --trials and --kills 1 or more")
    began = time.monotonic()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    print(f"chaos: seed {seed} (--seed {seed} replays the kills' moments)", file=sys.stderr)

    with tempfile.TemporaryDirectory(prefix="scangrade-chaos-") as tmp:
        tmp = Path(tmp)
        config = write_config(Path(args.config), args.parts, tmp)
        import yaml
        parts = list(yaml.safe_load(config.read_text())["parts"])
        made = make_class(tmp / "class", args.submissions, parts)
        options = ("--backend", args.backend, *(("--jobs", str(args.jobs)) if args.jobs else ()),
                   *(("--no-checks",) if args.no_checks else ()),
                   *(("--allow-unsandboxed",) if args.allow_unsandboxed else ()),
                   *(("--sanitizer-audit",) if args.sanitizer_audit else ()))
        os.environ.setdefault("XDG_CACHE_HOME", str(tmp / "cache"))  # the clean run warms it for the trials
        # warm: the emulator's runtime built, every submission compiled, so that the clean run's window
        # is a warm batch's, as every later run's
        run_watched(Batch(tmp / "warm-run", classroom=tmp / "class", config=config, options=options),
                    tmp / "warm-out")
        clean = Batch(tmp / "clean", classroom=tmp / "class", config=config, options=options)
        t0 = time.monotonic()
        rc, window = run_watched(clean, tmp / "clean-out")
        clean_s = time.monotonic() - t0
        if window is None or not (tmp / "clean-out" / "gradebook.csv").exists():
            print(f"chaos: the clean run failed (exit {rc}):\n{clean.err.read_text()}", file=sys.stderr)
            return 1
        clean_grades, clean_book = grades(tmp / "clean-out"), (tmp / "clean-out" / "gradebook.csv").read_text()
        backend = json.loads(next((tmp / "clean-out").glob("*/result.json")).read_text())["backend"]
        exact = not BACKENDS[backend].times_kernels
        print(f"chaos: clean run {clean_s:.1f} s (exit {rc}), workers for {window:.1f} s", file=sys.stderr)
        batch = Batch(tmp / "worker", classroom=tmp / "class", config=config, options=options)
        rows = [worker_trial(batch, tmp / "out-worker", window=window, rng=rng, clean_grades=clean_grades,
                             clean_book=clean_book, exact=exact)]
        longest = 0.0
        for n in range(1, args.trials + 1):
            if args.budget_s and time.monotonic() - began + max(longest, clean_s * (args.kills + 1)) > args.budget_s:
                print(f"chaos: no time for trial {n} within --budget-s {args.budget_s:g}", file=sys.stderr)
                break
            t0 = time.monotonic()
            batch = Batch(tmp / f"trial-{n}", classroom=tmp / "class", config=config, options=options)
            rows.append(trial(n, batch, tmp / f"out-{n}", kills=args.kills, window=window, total=args.submissions,
                              rng=rng, clean_grades=clean_grades, clean_book=clean_book, exact=exact))
            longest = max(longest, time.monotonic() - t0)
        shutil.rmtree(tmp / "class", ignore_errors=True)

    report = {"backend": backend, "seed": seed, "submissions": args.submissions, "broken": made,
              "parts": parts, "checks": not args.no_checks, "clean_s": round(clean_s, 1),
              "workers_window_s": round(window, 2), "clean_exit": rc, "gone_s_limit": GONE_S, "trials": rows,
              "trials_asked": args.trials, "trials_run": len(rows) - 1, "ok": all(r["ok"] for r in rows)}
    _print_table(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0 if report["ok"] else 1


def _print_table(report: dict) -> None:
    print(f"backend {report['backend']}, {report['submissions']} submissions, parts {' '.join(report['parts'])}, "
          f"checks {'on' if report['checks'] else 'off'}; clean run {report['clean_s']} s (exit "
          f"{report['clean_exit']}), its workers for {report['workers_window_s']} s; seed {report['seed']}")
    print(f"{'trial':<12}{'kill':>5}{'done':>6}{'at s':>8}{'procs':>7}{'gone s':>8}  {'left 2 s later':<16}"
          f"{'whole':<7}")
    for row in report["trials"]:
        for k in row.get("kills", []):
            print(f"{row['trial']!s:<12}{k['kill']:>5}{k['done_before']:>6}{k['moment_s']:>8}{k['processes']:>7}"
                  f"{k['all_gone_s']!s:>8}  {len(k['left_after_2s']):<16}{'yes' if k['results_whole'] else 'NO':<7}"
                  f"{'' if k['landed'] else 'missed: the batch had ended'}")
        how = f"{row['killed']} worker killed mid-batch" if "killed" in row else "then --resume"
        print(f"{row['trial']!s:<12} {how}: exit {row['final_exit']}, grades "
              f"{'equal' if row['grades_equal'] else 'DIFFER: ' + ', '.join(row['differ'])}, gradebook "
              f"{'equal' if row['gradebook_equal'] else 'differs'} -> {'ok' if row['ok'] else 'FAILED'}")
    kills = [k for row in report["trials"] for k in row.get("kills", [])]
    print(f"{report['trials_run']} of {report['trials_asked']} trials run; "
          f"{sum(k['landed'] for k in kills)} of {len(kills)} kills landed while the batch had children; "
          + ("all ok" if report["ok"] else "FAILED"))


if __name__ == "__main__":
    sys.exit(main())
