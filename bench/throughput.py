"""Grading throughput: how long one submission, a hang, a fault and a class take to grade.

Prints a table (and writes it as JSON with ``--json``) of, on one backend:

- one submission (the reference solutions), cold: a fresh cache folder, as on a new machine (the
  emulator's runtime and executor are built, every part compiled);
- the same submission again, warm (compiles come from the compile cache);
- the whole ``scangrade grade`` of it, cold, in a child process with a fresh cache folder of its
  own: Python's start, the backend's probe, the grading, the report and the time plots (the rows
  above and below time the grading alone);
- a hang submission: the reference solutions with a Part 1 that never finishes at n = 1
  (``bench/kernels/part1_hang_n1.cu``);
- a fault submission: the reference solutions with a Part 1 that writes a gigabyte past its output
  at every n (``tests/verdicts/part1_illegal_address.cu``: an illegal address on a GPU);
- a batch: the reference solutions copied N times, graded by :func:`grader.classwork.batch.batch`
  (the code path of ``scangrade batch``, its default jobs), in submissions per minute;
- a broken class (``--broken``): one submission per kernel of ``tests/kernels`` and ``tests/verdicts``
  (hangs, faults and compile errors included), each the reference solutions with that part replaced,
  every other one with a second part replaced too; graded as the batch is, in submissions per
  minute; then the slowest of them graded again alone.

Every run grades with the checks on (the default of every grading command). The cache folder is a
fresh temporary one (``XDG_CACHE_HOME``), so the cold row is cold whatever ran before. The machine's
load (1-minute load average) is printed beside each row: on a shared machine it says how much the
figures are worth.

Usage (from the repository root)::

    python bench/throughput.py --backend pycuda --submissions 50 --json h100.json
    python bench/throughput.py --backend emulator --submissions 10 --json emulator.json

Exit status 1 when a reference submission did not pass every case, or the hang or fault row did
not report its Part 1 as hanging (a timeout, or the emulator's deadlock) or failing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HANG = ROOT / "bench" / "kernels" / "part1_hang_n1.cu"
FAULT = ROOT / "tests" / "verdicts" / "part1_illegal_address.cu"


def _load() -> float:
    try:
        return round(os.getloadavg()[0], 1)
    except OSError:
        return float("nan")


def _submission(folder: Path, part1: Path | None = None, *, broken: tuple[Path, ...] = ()) -> Path:
    """The reference solutions copied to ``folder``, with ``part1`` as its Part 1 and each file of
    ``broken`` as the part its name starts with (``part4_...cu``: Part 4)."""
    from grader.assignment.parts import PARTS, SOLUTIONS

    shutil.copytree(SOLUTIONS, folder)
    if part1 is not None:
        shutil.copy(part1, folder / "part1_naive.cu")
    for file in broken:
        spec = next(p for p in PARTS.values() if file.name.startswith(f"part{p.number}_"))
        shutil.copy(file, folder / spec.filename)
    return folder


def broken_kernels() -> list[Path]:
    """Every kernel of the test corpora, broken on purpose or not: ``tests/kernels`` and ``tests/verdicts``
    (``partN_*.cu``), in name order."""
    return sorted((p for d in (ROOT / "tests" / "kernels", ROOT / "tests" / "verdicts") for p in d.glob("part[1-5]_*.cu")),
                  key=lambda p: p.name)


def broken_class(folder: Path, count: int) -> dict[str, tuple[Path, ...]]:
    """``count`` submissions (at most one per corpus kernel) under ``folder``: submission i has kernel i
    in place of its part, and every odd one kernel i + 1 as well where that is another part's.
    Returns ``{submission name: kernels}``."""
    kernels = broken_kernels()
    made: dict[str, tuple[Path, ...]] = {}
    for i, kernel in enumerate(kernels[:count]):
        files = (kernel,)
        other = kernels[(i + 1) % len(kernels)]
        if i % 2 and other.name[:6] != kernel.name[:6]:
            files += (other,)
        name = f"b{i:03d}-" + "+".join(f.stem for f in files)
        _submission(folder / name, broken=files)
        made[name] = files
    return made


def _one(name: str, folder: Path, *, cfg, selection) -> dict:
    from grader.grading.runner import grade

    load = _load()
    cpu0 = _cpu_s()
    t0 = time.perf_counter()
    result = grade(folder, cfg=cfg, selection=selection, checks=True)
    wall = time.perf_counter() - t0
    cpu = _cpu_s() - cpu0
    p1 = result.parts[0]
    phases = {}
    for p in result.parts:
        for k, v in p.phases_s.items():
            phases[k] = round(phases.get(k, 0.0) + v, 2)
    row = {"run": name, "wall_s": round(wall, 2), "cpu_s": round(cpu, 1), "load_before": load, "load_after": _load(),
           "points": result.points, "max_points": result.max_points, "passed": result.passed,
           "part_s": {p.key: p.phases_s.get("total", 0.0) for p in result.parts},
           "part_phases_s": {p.key: p.phases_s for p in result.parts},
           "phases_s_summed": phases, "device": result.device.get("device", ""),
           "part1": {"status": p1.status, "statuses": _counts(c.status for c in p1.cases),
                     "message": p1.message[:2000], "cases": [(c.name, c.status, c.kind, c.message[:300])
                                                            for c in p1.cases[:8]]}}
    print(f"{name}: {wall:.1f} s, {result.points:g}/{result.max_points:g}, part 1 {p1.status}", file=sys.stderr)
    return row


#: The row of :func:`_command`: what a user waits for.
COMMAND_ROW = "the whole `scangrade grade`, cold"


def _command(folder: Path, cache: Path, *, backend: str, config: str) -> dict:
    """``scangrade grade`` of ``folder`` run whole in a child process, in its own fresh cache folder:
    Python's start, the backend's choice (on a GPU, its probe: a CUDA context in a child), the
    grading, the report and the time plots. The other rows time :func:`grader.grading.runner.grade`
    alone; this one is what a student or a TA waits for. ``graded_s`` is the report's own figure."""
    import subprocess

    load = _load()
    cpu0 = _cpu_s()
    out = cache.parent / "command.json"
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(folder), "--backend", backend, "--config", config,
                           "--json", str(out)], env={**os.environ, "XDG_CACHE_HOME": str(cache)},
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    result = json.loads(out.read_text()) if out.exists() else {}
    row = {"run": COMMAND_ROW, "wall_s": round(wall, 2), "cpu_s": round(_cpu_s() - cpu0, 1), "load_before": load,
           "load_after": _load(), "points": result.get("points", 0), "max_points": result.get("max_points", 0),
           "passed": bool(result.get("passed")), "graded_s": result.get("elapsed_s"), "exit": proc.returncode,
           "device": (result.get("device") or {}).get("device", ""), "part1": {"statuses": {}}}
    print(f"{COMMAND_ROW}: {wall:.1f} s (graded in {row['graded_s']} s), exit {proc.returncode}", file=sys.stderr)
    return row


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process and its children that ended."""
    import resource
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _cpu_traces() -> dict:
    """Where ``SCANGRADE_CASE_TIMES`` names a folder: the workers' CPU seconds there, summed per part
    and field (user + system of the worker and of its children that ended, system alone, ...), and
    the files removed (the next run starts from none)."""
    folder = os.environ.get("SCANGRADE_CASE_TIMES")
    sums: dict[str, dict[str, float]] = {}
    if not folder or not Path(folder).is_dir():
        return sums
    for f in Path(folder).glob("*-cpu-*.json"):
        data = json.loads(f.read_text())
        part = sums.setdefault(data.pop("part"), {"workers": 0})
        part["workers"] += 1
        for k, v in data.items():
            part[k] = round(part.get(k, 0.0) + v, 2)
        f.unlink()
    return sums


def _counts(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in items:
        out[str(i)] = out.get(str(i), 0) + 1
    return out


def _machine_cpu_s() -> tuple[float, float, float] | None:
    """``(busy, stolen, all)`` CPU seconds of the cores this process may run on since boot, from
    ``/proc/stat``: busy is every process's and the kernel's; stolen, what a hypervisor gave
    other machines while these cores wanted to run. None where it cannot be read."""
    try:
        cpus = os.sched_getaffinity(0)
        tick = os.sysconf("SC_CLK_TCK")
        busy = stolen = total = 0
        with open("/proc/stat", encoding="ascii") as f:
            for line in f:
                name, *fields = line.split()
                if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
                    continue
                ticks = [int(x) for x in fields[:8]]  # user nice system idle iowait irq softirq steal
                total += sum(ticks)
                busy += sum(ticks) - ticks[3] - ticks[4] - ticks[7]
                stolen += ticks[7]
        return busy / tick, stolen / tick, total / tick
    except (OSError, ValueError, AttributeError):
        return None


def _machine_share(since: tuple[float, float, float] | None) -> dict:
    """The machine's CPU seconds over a run (every process on this process's cores, not only the
    grader's children that ended) and the share of those cores busy, from :func:`_machine_cpu_s`."""
    now = _machine_cpu_s()
    if since is None or now is None or now[2] <= since[2]:
        return {}
    busy, stolen, total = (a - b for a, b in zip(now, since))
    return {"machine_cpu_s": round(busy, 1), "cores_busy": round(busy / total, 3), "stolen_s": round(stolen, 1)}


def _own_cpu_s() -> float:
    """CPU seconds of this process alone (the batch's runner threads, reports and plots), not its
    children's: one Python process whose threads share one interpreter lock."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _run_batch(subs: Path, out: Path, what: str, *, cfg, selection, jobs: int | None) -> tuple[dict, list]:
    """``scangrade batch``'s code path over the folder ``subs``: the row (wall, CPU, rate, the phases'
    medians, the workers' traces) and the ``(id, result)`` pairs graded."""
    from grader.classwork.batch import batch
    from grader.render.plot import drawn_apart
    from grader.render.formats import student_reports

    total = len(list(subs.iterdir()))
    load = _load()
    cpu0 = _cpu_s()
    own0 = _own_cpu_s()
    mine0 = _machine_cpu_s()
    t0 = time.perf_counter()
    done: list[float] = []

    def progress(sid: str, result, resumed: bool) -> None:
        done.append(time.perf_counter() - t0)
        print(f"[{len(done)}/{total}] {sid}: {result.points:g}/{result.max_points:g} in "
              f"{result.elapsed_s:.1f} s, {done[-1]:.1f} s since the start", file=sys.stderr, flush=True)
    with drawn_apart(student_reports, jobs=jobs) as reports:  # as scangrade batch draws them
        graded = batch(subs, out=out, cfg=cfg, selection=selection, jobs=jobs, reports=reports, on_done=progress)
    wall = time.perf_counter() - t0
    results = [r for _, r in graded]
    phases: dict[str, dict[str, list]] = {}  # per part and phase: the median over the batch
    for r in results:
        for p in r.parts:
            for k, v in p.phases_s.items():
                phases.setdefault(p.key, {}).setdefault(k, []).append(v)
    return {"phases_s_median": {key: {k: round(statistics.median(v), 2) for k, v in ph.items()}
                                for key, ph in phases.items()},
            "cpu_traces": _cpu_traces(),
            "run": f"{what} of {len(results)}", "wall_s": round(wall, 2),
            "cpu_s": round(_cpu_s() - cpu0, 1), "load_before": load,
            "runner_cpu_s": round(_own_cpu_s() - own0, 1),
            **_machine_share(mine0),
            "load_after": _load(), "submissions_per_min": round(60 * len(results) / wall, 2),
            "passed": sum(r.passed for r in results), "submissions": len(results),
            "submission_s_median": round(statistics.median(r.elapsed_s for r in results), 2),
            "submission_s_max": round(max(r.elapsed_s for r in results), 2)}, graded


def _broken_rows(tmp: Path, size: int, *, cfg, selection, jobs: int | None) -> list[dict]:
    """The broken class's batch row (with its five slowest) and the slowest one graded again alone."""
    made = broken_class(tmp / "broken", size)
    row, graded = _run_batch(tmp / "broken", tmp / "broken-out", "broken class", cfg=cfg, selection=selection,
                             jobs=jobs)
    row["slowest"] = [(sid, r.elapsed_s, f"{r.points:g}/{r.max_points:g}")
                      for sid, r in sorted(graded, key=lambda g: -g[1].elapsed_s)[:5]]
    row["kernels"] = {name: [f.name for f in files] for name, files in made.items()}
    slowest = row["slowest"][0][0]
    alone = _one(f"slowest broken, alone ({slowest})", tmp / "broken" / slowest, cfg=cfg, selection=selection)
    return [row, alone]


def _print_table(selection, rows: list[dict], batches: list[dict]) -> None:
    """The table of the runs: one row each, then the batches' rates, then the first two runs' phases."""
    device = rows[0]["device"] or f"the CPU emulator ({os.cpu_count()} cores)"
    print(f"backend {selection.name}, {device}, checks on; CPU = seconds of every core together; load = 1-minute "
          f"load average before / after ({os.cpu_count()} cores)")
    print(f"{'run':<40}{'wall':>8} {'CPU':>8}  {'points':>11}  {'load':>11}  note")
    for r in rows:
        note = ", ".join(f"{k}: {v}" for k, v in r["part1"]["statuses"].items()) if "Part 1" in r["run"] else ""
        if r["run"] == COMMAND_ROW:
            note = f"(graded in {r['graded_s']} s, as the report says; exit {r['exit']})"
        print(f"{r['run']:<40}{r['wall_s']:>7.1f}s {r['cpu_s']:>7.1f}s  {r['points']:>5g}/{r['max_points']:<5g}  "
              f"{r['load_before']:>5} /{r['load_after']:>4}  "
              f"{note if r['run'] == COMMAND_ROW else ('part 1 cases ' + note) if note else ''}")
    for b in batches:
        print(f"{b['run']:<40}{b['wall_s']:>7.1f}s {b['cpu_s']:>7.1f}s  {b['passed']:>5}/"
              f"{b['submissions']:<5}  {b['load_before']:>5} /{b['load_after']:>4}  "
              f"{b['submissions_per_min']:.1f} submissions / min (median {b['submission_s_median']} s, "
              f"slowest {b['submission_s_max']} s each; the runner's own CPU {b.get('runner_cpu_s', 0):.1f} s)")
        if "machine_cpu_s" in b:
            print(f"  the machine's cores: {b['machine_cpu_s']:.1f} s busy ({100 * b['cores_busy']:.0f} % of them), "
                  f"{b['stolen_s']:.1f} s stolen by the hypervisor")
        for sid, sec, points in b.get("slowest", []):
            print(f"  slowest: {sid} {sec:.1f} s {points}")
    for r in rows[:2]:
        print(f"{r['run']}, seconds per part and phase (parts run at once on a GPU machine):")
        for key, phases in r["part_phases_s"].items():
            print(f"  {key:<22}" + "  ".join(f"{k} {v:.2f}" for k, v in phases.items()))


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its table; returns the exit status (see the module's docstring)."""
    from grader.backends import CHOICES  # reads no cache: the cold run below still starts cold
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=CHOICES, default=None)
    ap.add_argument("--submissions", type=int, default=50, help="the batch's size (default: 50; 0: no batch)")
    ap.add_argument("--jobs", type=int, default=0, help="the batch's jobs (default: as scangrade batch)")
    ap.add_argument("--broken", type=int, default=0,
                    help=f"the broken class's size (default 0: none; at most {len(broken_kernels())}, one per kernel)")
    ap.add_argument("--only-broken", action="store_true", help="only the broken class's rows")
    ap.add_argument("--no-hang-rows", action="store_true", help="leave out the hang and fault rows")
    ap.add_argument("--config", default=str(ROOT / "config.yaml"))
    ap.add_argument("--json", help="also write the measurements to this file")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="scangrade-throughput-") as tmp:
        os.environ["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")  # cold: nothing built or compiled yet
        from grader.backends import select_backend
        from grader.assignment.config import load_config

        cfg = load_config(args.config)
        selection = select_backend(args.backend, config_value=cfg.backend)
        reference = _submission(Path(tmp) / "reference")
        rows: list[dict] = []
        batch_row = None
        broken_rows: list[dict] = []

        def save() -> None:  # after every row: a run stopped part way keeps what it measured
            if args.json:
                Path(args.json).write_text(json.dumps({"backend": selection.name, "cores": os.cpu_count(),
                                                       "rows": rows, "batch": batch_row, "broken": broken_rows},
                                                      indent=2) + "\n")
        first = (("one submission, cold", None), ("one submission, warm", None))
        for name, part1 in first + (() if args.only_broken or args.no_hang_rows else (
                ("hang (Part 1 never ends at n = 1)", HANG), ("fault (Part 1 writes 1 GiB past out)", FAULT))):
            folder = reference if part1 is None else _submission(Path(tmp) / name.split()[0], part1)
            rows.append(_one(name, folder, cfg=cfg, selection=selection))
            save()
        if not args.only_broken:
            rows.append(_command(reference, Path(tmp) / "command-cache", backend=args.backend or "auto",
                                 config=args.config))
            save()
        if args.submissions and not args.only_broken:
            subs = Path(tmp) / "class"
            for i in range(args.submissions):
                _submission(subs / f"s{i:03d}")
            batch_row, _ = _run_batch(subs, Path(tmp) / "out", "batch", cfg=cfg, selection=selection,
                                      jobs=args.jobs or None)
            save()
        if args.broken:
            broken_rows = _broken_rows(Path(tmp), args.broken, cfg=cfg, selection=selection, jobs=args.jobs or None)
            rows.append(broken_rows[-1])
            save()

    _print_table(selection, rows, ([batch_row] if batch_row else []) + [r for r in broken_rows
                                                                        if "submissions_per_min" in r])
    save()
    command = [r for r in rows if r["run"] == COMMAND_ROW]
    ok = (rows[0]["passed"] and rows[1]["passed"] and all(r["passed"] and r["exit"] == 0 for r in command) and (
          args.only_broken or args.no_hang_rows or (
          rows[2]["part1"]["status"] in ("timeout", "fail") and rows[3]["part1"]["status"] == "fail"))
          and (batch_row is None or batch_row["passed"] == args.submissions))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
