"""The verdict corpus on every backend this machine has: one table, and exit status 1 on any
disagreement (docs: tests/grading/test_verdicts.py, tests/verdicts/expected.yaml).

Usage, from the repository root: ``python bench/verdicts.py [--backend emulator|pycuda ...] [FILE ...]``

Each file of ``tests/verdicts/expected.yaml`` (the corpus and the reference solutions) is graded with
``tests/verdicts/config.yaml`` through the runner, as every command grades (checks on), on the
emulator and, where PyCUDA can use a GPU, through PyCUDA. Columns: the file, the verdict the table
expects, each backend's verdict (part status, then each failure kind with the sizes it failed
at; a backend's cell ends in ``!`` where it differs from the table), and ``agree?``: ``yes`` when the
backends give every case the same status and kind, ``-`` with one backend. Lines under the table
say what differs, case by case. Exit status 1 when two backends disagree on any case, or a backend
differs from the table on a settled row; 0 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grader.backends import probe_pycuda  # noqa: E402
from tests.grading.test_verdicts import (corpus_config, disagreements, expected_summary, grade_entry,  # noqa: E402
                                 load_table, summary, verdict_problems)


def _grade_row(entry, backends: list[str], cfg, gpu_ok: bool) -> tuple[list, list[str], bool]:
    """One file graded on each backend: its table row, its lines of differences, and whether any."""
    cells, results, details, bad = {}, {}, [], False
    for backend in backends:
        print(f"grading {entry.name} on {backend} ...", file=sys.stderr, flush=True)
        res = grade_entry(entry.path, entry.part, backend)
        results[backend] = res
        problems = verdict_problems(entry, res, cfg)
        cells[backend] = summary(res) + (" !" if problems else "")
        details += [f"{entry.name} on {backend}: {p if len(p) <= 240 else p[:239] + '…'}" for p in problems]
        bad |= bool(problems)
    agree = "-"
    if len(results) > 1:
        first, *others = results.values()
        lines = [line for other in others for line in disagreements(first, other)]
        agree = "no" if lines else "yes"
        details += [f"{entry.name}, {' vs '.join(results)}: {line}" for line in lines]
        bad |= bool(lines)
    row = ([entry.name, expected_summary(entry)]
           + [cells.get(b, "no GPU" if b == "pycuda" and not gpu_ok else "not run") for b in COLUMNS] + [agree])
    return row, details, bad


def _print_table(rows: list, details: list[str], head: list[str], footer: str) -> None:
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
    print(footer)
    if details:
        print("\ndifferences (from the table: `!`; between backends: agree? no):")
        for line in details:
            print("  " + line)


#: The table's backend columns.
COLUMNS = ("emulator", "pycuda")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="only these rows (file names as in expected.yaml, or their stems)")
    ap.add_argument("--backend", action="append", choices=list(COLUMNS),
                    help="grade on this backend (repeatable; default: the emulator, and PyCUDA where it has a GPU)")
    args = ap.parse_args(argv)

    cfg = corpus_config()
    table = load_table(cfg=cfg)
    if args.files:
        table = [e for e in table if e.file in args.files or e.name in args.files or Path(e.file).stem in args.files]
        if not table:
            print(f"no row of expected.yaml matches {args.files}", file=sys.stderr)
            return 2
    gpu_ok, gpu_why = probe_pycuda()
    backends = args.backend or (["emulator", "pycuda"] if gpu_ok else ["emulator"])
    if "pycuda" in backends and not gpu_ok:
        print(f"pycuda: no usable CUDA GPU: {gpu_why}", file=sys.stderr)
        return 2
    rows, details, bad = [], [], False
    t0 = time.perf_counter()
    for entry in table:
        row, more, wrong = _grade_row(entry, backends, cfg, gpu_ok)
        rows.append(row)
        details += more
        bad |= wrong
    head = ["file", "expected", "emulator", "pycuda" + (f" ({gpu_why})" if gpu_ok else ""), "agree?"]
    _print_table(rows, details, head, f"\n{len(rows)} files, backends: {', '.join(backends)}; graded in "
                                      f"{time.perf_counter() - t0:.1f} s with {cfg.path}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
