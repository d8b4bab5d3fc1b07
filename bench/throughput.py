"""Grading throughput: the reference solutions graded as a class of N submissions.

Copies ``reference/solutions`` N times into a scratch folder, grades them with
:func:`grader.classwork.batch.batch` (the code path of ``scangrade batch``), and prints a table: wall time,
submissions per minute, the wall time of one submission (the first, with a cold compile cache, and
the rest), and where a submission's time goes, summed over its parts (``PartResult.phases_s``):
starting the part's child process and backend, compiling, the correctness cases, GPU timing.

Usage (from the repository root, with scangrade installed: ``pip install -e .``)::

    python bench/throughput.py --submissions 50                 # backend as scangrade chooses
    python bench/throughput.py --submissions 4 --backend emulator
    python bench/throughput.py --submissions 20 --jobs 1 --json one_gpu.json   # on a 2-GPU host,
    python bench/throughput.py --submissions 20 --jobs 2 --json two_gpus.json  # one job per GPU

Every submission must pass every case; the script says so when one does not (exit status 1).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from grader.backends import select_backend
from grader.classwork.batch import batch
from grader.config import load_config
from grader.render.student import student_reports
from grader.worker import SOLUTIONS

PHASES = ("startup", "compile", "cases", "timing")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns 0 when every submission passed every case, else 1."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--submissions", type=int, default=50, help="class size (default: 50)")
    ap.add_argument("--jobs", type=int, default=0, help="submissions at once (default: as scangrade batch)")
    ap.add_argument("--backend", choices=("auto", "pycuda", "emulator"), default=None)
    ap.add_argument("--config", default=str(ROOT / "config.yaml"))
    ap.add_argument("--part", action="append", dest="parts", help="only these parts (repeatable)")
    ap.add_argument("--json", help="also write the measurements to this file")
    args = ap.parse_args(argv)

    cfg = load_config(args.config)
    if args.parts:
        cfg = dataclasses.replace(cfg, parts={k: v for k, v in cfg.parts.items() if k in args.parts})
    selection = select_backend(args.backend, config_value=cfg.backend)
    with tempfile.TemporaryDirectory(prefix="scangrade-throughput-") as tmp:
        subs = Path(tmp) / "class"
        for i in range(args.submissions):
            shutil.copytree(SOLUTIONS, subs / f"s{i:03d}")
        finished: list[float] = []
        t0 = time.perf_counter()

        def on_done(sid: str, result, resumed: bool) -> None:
            finished.append(time.perf_counter() - t0)
            print(f"[{len(finished)}/{args.submissions}] {sid}: {result.points:g}/{result.max_points:g} "
                  f"in {result.elapsed_s:.1f} s", file=sys.stderr, flush=True)

        rows = batch(subs, out=Path(tmp) / "out", cfg=cfg, selection=selection, jobs=args.jobs, on_done=on_done,
                     reports=student_reports)
        wall = time.perf_counter() - t0

    results = [r for _, r in rows]
    first, rest = results[0], results[1:] or results
    phases = {ph: statistics.mean(sum(p.phases_s.get(ph, 0.0) for p in r.parts) for r in results) for ph in PHASES}
    per_part = {p.key: statistics.mean(q.phases_s.get("total", 0.0) for r in results for q in r.parts
                                       if q.key == p.key) for p in first.parts}
    gpus = sorted({r.device.get("device", "") for r in results} - {""})
    perfect = sum(r.passed for r in results)
    summary = {
        "backend": selection.name, "devices": gpus, "jobs": args.jobs or "auto", "submissions": len(results),
        "wall_s": round(wall, 2), "submissions_per_min": round(60 * len(results) / wall, 2),
        "first_submission_s": first.elapsed_s, "submission_s_mean": round(statistics.mean(r.elapsed_s for r in rest), 2),
        "submission_s_max": max(r.elapsed_s for r in results),
        "phases_s_mean": {k: round(v, 2) for k, v in phases.items()},
        "part_s_mean": {k: round(v, 2) for k, v in per_part.items()}, "all_cases_passed": perfect,
        "points": [r.points for r in results], "max_points": first.max_points,
        # Every timed case of every submission: how steady the timing (and so the score) is.
        "timed": [{"submission": sid, "part": p.key, "n": c.n, "median_ms": round(c.timing.median_ms, 5),
                   "reference_ms": c.timing.reference_ms and round(c.timing.reference_ms, 5),
                   "ratio": c.timing.ratio and round(c.timing.ratio, 4), "spread": round(c.timing.spread, 3)}
                  for sid, r in rows for p in r.parts for c in p.cases if c.timing],
    }
    print(f"backend {summary['backend']}  device {', '.join(gpus) or '-'}  jobs {summary['jobs']}")
    print(f"{'submissions':<34}{len(results)}")
    print(f"{'wall time':<34}{wall:.1f} s")
    print(f"{'submissions per minute':<34}{summary['submissions_per_min']:.2f}")
    print(f"{'one submission, first (cold)':<34}{first.elapsed_s:.2f} s")
    print(f"{'one submission, the rest (mean)':<34}{summary['submission_s_mean']:.2f} s "
          f"(max {summary['submission_s_max']:.2f} s)")
    print("where a submission's time goes (mean, summed over its parts):")
    total = sum(phases.values()) or 1.0
    for ph in PHASES:
        print(f"  {ph:<32}{phases[ph]:8.2f} s {100 * phases[ph] / total:5.1f} %")
    print("per part (mean wall s):")
    for k, v in per_part.items():
        print(f"  {k:<32}{v:8.2f} s")
    print(f"{'every case passed':<34}{perfect}/{len(results)}")
    full = sum(r.points == r.max_points for r in results)
    print(f"{'all points (timing included)':<34}{full}/{len(results)}"
          + ("  (the emulator does not time: performance points need a GPU)" if selection.name == "emulator" else ""))
    ratios: dict[tuple[str, int], list[float]] = {}
    for t in summary["timed"]:
        if t["ratio"]:
            ratios.setdefault((t["part"], t["n"]), []).append(t["ratio"])
    if ratios:
        print("time / reference time over the submissions (all are the reference): min median max")
        for (part, n), rs in ratios.items():
            print(f"  {part} n={n:<12}{min(rs):6.3f} {statistics.median(rs):6.3f} {max(rs):6.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
    return 0 if perfect == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
