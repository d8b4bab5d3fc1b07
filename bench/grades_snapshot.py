"""Grades before and after a change: a snapshot of the verdict corpus's results, and a comparison
of two snapshots case by case (for a refactoring that must not change a grade).

Usage, from the repository root::

    python bench/grades_snapshot.py snapshot OUT [FILE ...] [--backend emulator|pycuda] [--checks-max-n N] [--no-checks]
    python bench/grades_snapshot.py compare A B

``snapshot`` grades every entry of ``tests/verdicts/expected.yaml`` (or the named ones) with
``tests/verdicts/config.yaml``, as ``bench/verdicts.py`` and ``tests/grading/test_verdicts.py``'s
:func:`~tests.grading.test_verdicts.grade_entry` do (through the runner, checks on), and writes each
part's result as JSON (its ``SubmissionResult.to_dict()`` entry) to ``OUT/<backend>/<name>.json``
(the entries named before the options). ``--checks-max-n`` grades with the config's
``emulator.checks_max_n`` lowered, so that the larger cases run sampled rather than checked (the
corpus config checks every case); ``--no-checks`` grades with the checks off, as the commands'
``--no-checks`` does (every case plain).

``compare`` reads two snapshot folders (``OUT`` or ``OUT/<backend>``) and prints every difference,
entry by entry and case by case: the part's status, each case's name, status, failure kind (and
its findings' kinds), points, checker and warnings' kinds (:data:`CASE_FIELDS`), and entries
present in one snapshot only. Exit status 1 when anything differs, 0 when nothing does, 2 on a
usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grader.backends import Selection  # noqa: E402
from grader.grading.runner import grade  # noqa: E402
from tests.grading.test_verdicts import corpus_config, load_table  # noqa: E402

#: What ``compare`` reads of each case of a result: a field of the case's JSON, or what it keeps of
#: one (the kinds of its findings and warnings: which block or thread reports a race between blocks
#: first varies from run to run on several worker threads, and so does a device address).
CASE_FIELDS = {
    "status": lambda c: c.get("status"),
    "kind": lambda c: c.get("kind"),
    "finding kinds": lambda c: [f.get("kind") for f in c.get("findings") or ()],
    "points": lambda c: (c.get("points"), c.get("max_points")),
    "checker": lambda c: c.get("checker"),
    "warning kinds": lambda c: [w.split(":", 1)[0] for w in c.get("warnings") or ()],
}


def snapshot(out: Path, *, backend: str = "emulator", checks_max_n: int | None = None, checks: bool = True,
             files: list[str] | None = None) -> int:
    """Grade the corpus on ``backend`` and write each result to ``out/<backend>/<name>.json``.

    Returns:
        the exit status: 0, or 2 when ``files`` names no entry of the table.
    """
    cfg = corpus_config()
    if checks_max_n is not None:
        cfg = cfg.override(emulator={"checks_max_n": checks_max_n})
    table = load_table(cfg=cfg)
    if files:
        table = [e for e in table if e.file in files or e.name in files or Path(e.file).stem in files]
        if not table:
            print(f"no row of expected.yaml matches {files}", file=sys.stderr)
            return 2
    folder = out / backend
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    for entry in table:
        print(f"grading {entry.name} on {backend} ...", file=sys.stderr, flush=True)
        result = grade(entry.path, cfg=cfg, selection=Selection(backend, "grades snapshot"), parts=[entry.part],
                       checks=checks)
        (part,) = result.to_dict()["parts"]
        (folder / f"{entry.name}.json").write_text(json.dumps(part, indent=1, sort_keys=True))
    print(f"{len(table)} entries on {backend} in {time.perf_counter() - t0:.1f} s: {folder}", file=sys.stderr)
    return 0


def _results(folder: Path) -> dict[str, dict]:
    """Every result of a snapshot folder by entry name (``folder`` or its one backend's folder)."""
    files = sorted(folder.glob("*.json")) or sorted(folder.glob("*/*.json"))
    return {f"{p.parent.name}/{p.stem}" if p.parent != folder else p.stem: json.loads(p.read_text()) for p in files}


def differences(a: dict, b: dict) -> list[str]:
    """How two results of one entry differ: the part's status, then each case (by name) in
    :data:`CASE_FIELDS`; one line each, empty when they agree."""
    lines = [] if a.get("status") == b.get("status") else [f"part status: {a.get('status')} against {b.get('status')}"]
    first = {c["name"]: c for c in a.get("cases", [])}
    second = {c["name"]: c for c in b.get("cases", [])}
    for name in sorted(set(first) | set(second)):
        if name not in first or name not in second:
            lines.append(f"{name}: only in {'the first' if name in first else 'the second'}")
            continue
        for field, read in CASE_FIELDS.items():
            was, now = read(first[name]), read(second[name])
            if was != now:
                lines.append(f"{name}: {field} {was!r} against {now!r}")
    return lines


def compare(a: Path, b: Path) -> int:
    """Print every difference between snapshots ``a`` and ``b``.

    Returns:
        1 when any entry differs or is in one snapshot only, 0 when none does, 2 when a folder
        holds no result.
    """
    first, second = _results(a), _results(b)
    for folder, found in ((a, first), (b, second)):
        if not found:
            print(f"{folder}: no snapshot here", file=sys.stderr)
            return 2
    lines = []
    for name in sorted(set(first) | set(second)):
        if name not in first or name not in second:
            lines.append(f"{name}: only in {a if name in first else b}")
            continue
        lines += [f"{name}: {line}" for line in differences(first[name], second[name])]
    for line in lines:
        print(line)
    cases = sum(len(r.get("cases", [])) for r in first.values())
    print(f"{len(set(first) | set(second))} entries, {cases} cases: "
          + (f"{len(lines)} differences" if lines else "no differences"))
    return 1 if lines else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    snap = sub.add_parser("snapshot", help="grade the corpus and write each result")
    snap.add_argument("out", type=Path)
    snap.add_argument("--backend", default="emulator", choices=("emulator", "pycuda"))
    snap.add_argument("--checks-max-n", type=int, default=None,
                      help="the config's emulator.checks_max_n (default: the corpus config's)")
    snap.add_argument("--no-checks", dest="checks", action="store_false", help="grade with the checks off")
    snap.add_argument("files", nargs="*", help="only these entries (file names as in expected.yaml, or stems)")
    cmp = sub.add_parser("compare", help="print every difference between two snapshots")
    cmp.add_argument("a", type=Path)
    cmp.add_argument("b", type=Path)
    args = ap.parse_args(argv)
    if args.command == "snapshot":
        return snapshot(args.out, backend=args.backend, checks_max_n=args.checks_max_n,
                        checks=args.checks, files=args.files)
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
