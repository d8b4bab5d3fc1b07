"""The file a student most likely meant for a part whose file is missing: ``part1.cu``,
``Part1_Naive.cu.txt`` or ``part1_naive.cu~`` for ``part1_naive.cu``, for the intake's message."""

from __future__ import annotations

import difflib
import re

from grader.assignment.parts import PARTS
from grader.grading.intake.records import PART_FILES


def _norm(name: str) -> str:
    low = name.lower()
    cut = low.find(".cu")
    if cut >= 0:
        low = low[:cut + 3]  # part1_naive.cu.txt, part1_naive.cu~ -> part1_naive.cu
    return re.sub(r"[^a-z0-9]", "", low)


def _score(candidate: str, key: str) -> float:
    """How much ``candidate`` (a base name) looks like part ``key``'s file: 1 same but for case,
    separators and trailing suffixes; else a similarity ratio."""
    got, want = _norm(candidate), _norm(PARTS[key].filename)
    if got == want:
        return 1.0
    ratio = difflib.SequenceMatcher(None, got, want).ratio()
    if got.startswith(f"part{PARTS[key].number}") and got.endswith("cu") and not got[5:6].isdigit():
        ratio = max(ratio, 0.8)  # part1.cu, part1_scan.cu
    return ratio


def suggestions(missing: list[str], names: list[tuple[str, str]]) -> dict[str, str]:
    """For parts whose file is missing, the file that was most likely meant.

    Args:
        missing: part keys whose file was not found.
        names: ``(base name, path to show)`` of the files the submission does hold.

    Returns:
        part key -> path to show, for the parts with a likely candidate (each candidate is given to
        the one part it looks most like; a part's exact file name is never a candidate).
    """
    best: dict[str, tuple[float, str]] = {}
    for base, shown in names:
        if base in PART_FILES:
            continue
        scores = sorted(((_score(base, k), k) for k in PARTS), reverse=True)
        score, key = scores[0]
        if score >= 0.8 and key in missing and score > best.get(key, (0.0, ""))[0]:
            best[key] = (score, shown)
    return {k: shown for k, (_, shown) in best.items()}
