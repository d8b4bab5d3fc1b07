"""The gradebook (``gradebook.csv``) and the class summary (``summary.txt``) of a batch.

Both are pure functions of ``(id, result)`` rows: one ``scangrade batch`` of a class and the
merge of its shards write them byte for byte the same.
"""

from __future__ import annotations

import csv
import io
import statistics

from grader.results import SubmissionResult


def gradebook_csv(rows: list[tuple[str, SubmissionResult]], part_keys: list[str]) -> str:
    """The gradebook: id, points per part, total, max, status, backend, GPU — one row per submission."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["student", *part_keys, "total", "max", "status", "backend", "gpu"])
    for sid, r in rows:
        by_key = {p.key: p for p in r.parts}
        w.writerow([sid, *(f"{by_key[k].points:g}" if k in by_key else "" for k in part_keys),
                    f"{r.points:g}", f"{r.max_points:g}", "pass" if r.passed else "fail", r.backend,
                    r.device.get("device", "")])
    return out.getvalue()


def class_summary(rows: list[tuple[str, SubmissionResult]], part_keys: list[str]) -> str:
    """Per part: mean, median and how many submissions passed every case; failures by kind."""
    lines = [f"{len(rows)} submissions"]
    for k in part_keys:
        pts = [p.points for _, r in rows for p in r.parts if p.key == k]
        if not pts:
            continue
        passed = sum(p.status == "pass" for _, r in rows for p in r.parts if p.key == k)
        top = max((p.max_points for _, r in rows for p in r.parts if p.key == k), default=0)
        lines.append(f"{k:<20} mean {statistics.mean(pts):6.2f}  median {statistics.median(pts):6.2f}  "
                     f"of {top:g}  all cases passed: {passed}/{len(pts)}")
    kinds: dict[str, int] = {}
    for _, r in rows:
        for p in r.parts:
            if p.status != "pass":
                kinds[p.status] = kinds.get(p.status, 0) + 1
    if kinds:
        lines.append("parts not passing, by status: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    return "\n".join(lines) + "\n"
