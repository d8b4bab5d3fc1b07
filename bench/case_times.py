"""Measure the reference solution's time on every case, for the case deadlines (grader/grading/deadlines.py).

Grades ``reference/solutions`` RUNS times on one backend and writes, for that backend, the largest
wall time of each case (its ``elapsed_ms``: input, launches, checks) into ``grader/grading/case_times.json``
(the other backends' entries are kept), with the machine it was measured on. A case's deadline is
then a few seconds plus 20 times this time, scaled by the machine's load.

On the emulator the cases run with the checks on and one worker thread (as ``scangrade batch``
runs them: the slowest way a grade runs them); on a GPU with the checks on (compute-sanitizer's run
is not part of a case's time, and is recorded apart: mode ``sanitizer``, the slowest tool's time
between the child's markers) and the timed cases too.

Usage (from the repository root)::

    python bench/case_times.py --backend emulator --runs 2
    python bench/case_times.py --backend pycuda --runs 2       # on a GPU machine
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.backends import BACKENDS, backend_kind, select_backend  # noqa: E402
from grader.assignment.config import load_config  # noqa: E402
from grader.grading.deadlines import TABLE_PATH  # noqa: E402
from grader.grading.runner import grade  # noqa: E402
from grader.assignment.parts import SOLUTIONS  # noqa: E402


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def measure(backend: str, runs: int, config: str, parts: list[str] | None = None) -> dict:
    """The backend's entry of the table: per part, ``"<mode> <dtype>": [[n, seconds], ...]``;
    ``parts``: only these parts' (None: every part of the config)."""
    cfg = load_config(config)
    kind = backend_kind(backend)
    if not kind.uses_gpus:  # as batch runs it: one emulator thread per submission
        cfg = cfg.override(emulator={"workers": 1})
    selection = select_backend(backend, config_value=cfg.backend)
    worst: dict[tuple[str, str, int], float] = {}
    device, loads = {}, []
    sanitizer_times = Path(tempfile.mkdtemp(prefix="scangrade-case-times-"))
    os.environ["SCANGRADE_CASE_TIMES"] = str(sanitizer_times)  # the workers write compute-sanitizer's times there
    for i in range(runs):
        loads.append(os.getloadavg()[0])
        t0 = time.perf_counter()
        result = grade(SOLUTIONS, cfg=cfg, selection=selection, checks=True, parts=parts)
        print(f"run {i + 1}: {time.perf_counter() - t0:.1f} s, every case passed: {result.passed}", file=sys.stderr)
        if not result.passed:
            raise SystemExit("a reference solution failed a case: fix that first")
        device = result.device or device
        for p in result.parts:
            for c in p.cases:
                if c.elapsed_ms is None:
                    continue
                mode = "timed" if c.timing is not None else (
                    "checked" if not kind.has_sanitizer and c.n <= cfg.emulator.checks_max_n else "plain")
                key = (p.key, f"{mode} {c.dtype}", c.n)
                worst[key] = max(worst.get(key, 0.0), c.elapsed_ms / 1e3)
    for f in sanitizer_times.glob("*-sanitizer-*.json"):  # the slowest tool's time per checked case
        part = f.name.split("-sanitizer-")[0]
        for dtype, n, seconds in json.loads(f.read_text()):
            key = (part, f"sanitizer {dtype}", int(n))
            worst[key] = max(worst.get(key, 0.0), float(seconds))
    shutil.rmtree(sanitizer_times, ignore_errors=True)
    parts: dict[str, dict[str, list]] = {}
    for (part, mode, n), s in sorted(worst.items()):
        parts.setdefault(part, {}).setdefault(mode, []).append([n, round(s, 4)])
    return {"measured": time.strftime("%Y-%m-%d"), "runs": runs,
            "machine": f"{os.cpu_count()} cores ({_cpu_model()}), 1-minute load average "
                       f"{min(loads):.1f} to {max(loads):.1f} while measured",
            "device": device.get("device", ""), "emulator_workers": None if kind.uses_gpus else 1,
            "parts": parts}


def _dumps(value, indent: int = 0) -> str:
    """``value`` as JSON, a list of measurements on one line."""
    pad = " " * (indent + 1)
    if isinstance(value, dict) and value:
        items = [f"{pad}{json.dumps(k)}: {_dumps(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}" + ("\n" if indent == 0 else "")
    return json.dumps(value)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=tuple(BACKENDS), required=True)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--config", default=str(ROOT / "config.yaml"))
    ap.add_argument("--out", default=str(TABLE_PATH), help="the table to update (default: %(default)s)")
    ap.add_argument("--part", action="append", metavar="KEY",
                    help="measure this part only and merge its times into the backend's entry (repeatable; "
                         "a new part's times without measuring the others again)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    table = json.loads(out.read_text()) if out.is_file() else {}
    table.setdefault("about", "The reference solution's wall seconds per case (the largest of the runs), per "
                              "backend: what grader/grading/deadlines.py derives each case's deadline from. Written by "
                              "bench/case_times.py.")
    measured = measure(args.backend, args.runs, args.config, args.part)
    if args.part and args.backend in table:  # one part's times merged into the others'
        merged = table[args.backend]
        merged.setdefault("parts", {}).update(measured["parts"])
        measured = {**measured, "parts": dict(sorted(merged["parts"].items()))}
    table[args.backend] = measured
    out.write_text(_dumps(table))
    print(f"wrote the {args.backend} times into {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
