"""The class report: one self-contained HTML page over a ``scangrade batch`` output folder.

For the TA (it shows hidden cases in full: do not publish it to students). The page needs no
network to view: no external style sheet, script, font or image; plots are inline ``<svg>``
drawn by matplotlib (the ``report`` extra). Without matplotlib the page still has every table and
says how to get the plots. Sections:

- header: assignment, title, dates, number of submissions, backends and GPUs seen, the config
  fingerprint from ``batch.json`` when there is one, grader versions and seeds;
- score distribution: per part and for the total, mean, median and how many passed every case,
  and a histogram of points;
- timing, per part the config times (Part 5, the challenge, among them): each submission's time
  over the reference solution's per timed size, the reference marked, and a table ranked by the
  combined ratio; on emulator results the section says that timing waits for a GPU run;
- failures grouped by kind (compile error, missing file, timeout, crash, wrong result, race,
  out-of-bounds, ...), with the students in each group, the first line of the message and
  relative links to each student's :data:`LINKED_REPORTS` (``report.md``, ``report.txt``);
- every student: points per part, total, status (a small inline script sorts the columns; the
  page's Content-Security-Policy admits that script by its hash and no other).

A student is shown by name as written (the class folder's entry, or the submitter's name in
Gradescope's export, from ``batch.json``: :func:`written_names`), with the id beside it where the
id differs (a name that is not a safe id gets a hashed one); links go by id.

The markup is a Jinja2 template, ``templates/class_report.html.j2``, with its style sheet and
script beside it (package data); autoescaping is on, so every string that comes from a submission
or a result file (ids, messages, file names, device names) is shown as text and never parsed as
markup. Only the style sheet, the script and matplotlib's SVG plots are inserted as markup.

:func:`class_report` renders (a pure function of the results: no file is read or written here);
:func:`class_report_page` renders a folder loaded by :func:`grader.classwork.store.load_batch`.
The CLI writes the page: ``scangrade batch`` at the end of a run, ``scangrade report DIR`` again
from ``DIR/<id>/result.json``, both through :func:`grader.classwork.store.write_class_report`.
"""

from __future__ import annotations

import base64
import datetime as _dt
import functools
import hashlib
import html
import io
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING
from urllib.parse import quote

import jinja2
from markupsafe import Markup

from grader import __version__
from grader.render._common import (PART_STATUS_WORDS, is_timed_case, part_status_words, points, printable,
                                   stopped_case)
from grader.core.kinds import GROUPS, group_of
from grader.assignment.parts import CHALLENGE_PART
from grader.render.formats import FORMATS, STUDENT_FOLDER
from grader.core.performance import Timing
from grader.core.results import CaseResult, PartResult, SubmissionResult

if TYPE_CHECKING:  # the loaded folder's type only: rendering reads no file
    from grader.classwork.store import BatchFolder

#: What is being graded, for the page's header.
ASSIGNMENT = "Parallel prefix sum (scan) in CUDA"
#: The reports a student's row links to, in ``OUT/<id>/`` (the course staff's copies): the files of
#: these formats of :data:`grader.render.formats.FORMATS`; the first is the one a student's id links to.
LINKED_REPORTS = tuple(FORMATS[name].file for name in ("markdown", "text"))
#: How to get the plots when matplotlib is missing.
PLOTS_HINT = "pip install scangrade[report]"

#: Failure groups, in the order they are listed on a tie, with what each means: derived from the
#: one table of kinds (:data:`grader.core.kinds.KINDS`; ``mismatch`` and ``ticket`` are ``wrong-result``).
FAILURE_KINDS = GROUPS

_COMPILER_ERROR = re.compile(r"\berror\b", re.IGNORECASE)
_MESSAGE_CHARS = 240

#: The page's template, style sheet and sort script: package data in ``grader/render/templates``.
TEMPLATE_FILE, CSS_FILE, SCRIPT_FILE = "class_report.html.j2", "class_report.css", "class_report.js"


def _e(value: object) -> str:
    """A string for HTML text or a quoted attribute: control characters shown, markup escaped."""
    return html.escape(printable(str(value)), quote=True)


def _first_line(text: str, limit: int = _MESSAGE_CHARS) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _size_tex(n: int) -> str:
    """A size for a matplotlib label: ``$2^{20}$`` (mathtext) for a power of two, else the number."""
    return f"$2^{{{n.bit_length() - 1}}}$" if n > 1 and n & (n - 1) == 0 else str(n)


# --- failures -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Failure:
    """One part of one submission in one failure group.

    Attributes:
        kind: a key of :data:`FAILURE_KINDS`, or ``kernel-error:<kind>`` for another
            KernelError kind (``trap``, ``assert``, ``illegal-address``, ...).
        student: the submission's id.
        part: the part that did not pass; None for a submission with every part missing (one
            entry instead of one per part).
        case: the first case of this kind (None for a failure of the whole part).
        message: the first line of the message (for a compile error, also the compiler's first
            line that says ``error``).
    """

    kind: str
    student: str
    part: PartResult | None
    case: CaseResult | None
    message: str


def _case_kind(case: CaseResult) -> str:
    return group_of(case.kind) if case.kind else ("wrong-result" if case.status == "fail" else group_of(case.status))


def part_failures(student: str, part: PartResult) -> list[Failure]:
    """The failure groups one part belongs to: none for a passing part; one for a part that failed
    as a whole (compile error, missing file, timeout, crash, grader error); for a part with failing
    cases, one per distinct kind among them (the first case of each kind).

    Args:
        student: the submission's id (carried into each :class:`Failure`).
        part: the part's result.

    Returns:
        :class:`Failure` objects, in the order of the part's cases.
    """
    if part.status == "pass":
        return []
    if part.status in ("compile-error", "missing", "timeout", "crash", "error"):
        message = _first_line(part.message) or part_status_words(part)
        if part.status == "compile-error":
            detail = next((ln.strip() for ln in part.message.splitlines()[1:] if _COMPILER_ERROR.search(ln)), "")
            if detail:
                message += "\n" + _first_line(detail)
        return [Failure(part.status, student, part, stopped_case(part), message)]
    found: dict[str, Failure] = {}
    for case in part.cases:
        if case.status in ("pass", "not-run"):
            continue
        kind = _case_kind(case)
        if kind not in found:
            found[kind] = Failure(kind, student, part, case, _first_line(case.message) or case.status)
    if not found:  # a failing part with no failing case: only a part message to go on
        found["error"] = Failure("error", student, part, None, _first_line(part.message) or part.status)
    return list(found.values())


def _kind_label(kind: str) -> tuple[str, str]:
    if kind.startswith("kernel-error:"):
        return f"kernel error: {kind.partition(':')[2]}", "the kernel stopped while running (see the message)"
    return kind.replace("-", " "), FAILURE_KINDS.get(kind, "")


def failure_groups(rows: Sequence[tuple[str, SubmissionResult]]) -> list[tuple[str, list[Failure]]]:
    """Failures of a class grouped by kind: ``(kind, failures)``, the largest group first (ties in
    :data:`FAILURE_KINDS` order), failures in student then part order. A submission with every
    part missing is one ``missing`` entry (``part`` None)."""
    groups: dict[str, list[Failure]] = {}
    for sid, result in rows:
        if result.parts and all(p.status == "missing" for p in result.parts):
            groups.setdefault("missing", []).append(Failure(
                "missing", sid, None, None, f"no part file in the submission ({len(result.parts)} parts missing)"))
            continue
        for part in sorted(result.parts, key=lambda p: p.number):
            for f in part_failures(sid, part):
                groups.setdefault(f.kind, []).append(f)
    order = list(FAILURE_KINDS)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), order.index(kv[0]) if kv[0] in order else len(order),
                                                  kv[0]))


# --- plots ---------------------------------------------------------------------------------------------

def matplotlib_available() -> bool:
    """Whether matplotlib can be imported (the ``report`` extra)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _mpl_text(text: str) -> str:
    return text.replace("$", r"\$")  # no mathtext from data


def _svg(fig, label: str) -> Markup:
    """A matplotlib figure as an inline ``<svg>`` element (text as text, no date, stable ids), as
    markup for the template."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "scangrade-class-report"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    return Markup(text.replace("<svg", f'<svg class="plot" role="img" aria-label="{_e(label)}"', 1))


def _histogram(values: list[float], top: float, title: str, pending: str = "") -> Markup:
    import numpy as np
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(3.5, 2.4), layout="constrained")
    ax = fig.add_subplot()
    whole = all(float(v).is_integer() for v in values) and top <= 40
    if whole:
        edges = np.arange(-0.5, max(top, max(values, default=0)) + 1.5, 1.0)
    else:
        edges = np.linspace(0.0, max(top, max(values, default=0), 1e-9), 21)
    ax.hist(values, bins=edges, color="#1f77b4", edgecolor="white", linewidth=0.6)
    if values:
        ax.axvline(statistics.mean(values), color="#d62728", linestyle="--", linewidth=1.2)
    ax.set_title(_mpl_text(title), fontsize=10)
    ax.set_xlabel(f"points (of {points(top)}" + (f"; {pending}" if pending else "") + ")", fontsize=9)
    ax.set_ylabel("submissions", fontsize=9)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if whole:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.tick_params(labelsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig, f"histogram of points: {title}")


def _timing_plot(sizes: list[int], series: list[dict[int, float]], *, ratio: bool, title: str) -> Markup:
    import numpy as np
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 3.2), layout="constrained")
    ax = fig.add_subplot()
    for i, n in enumerate(sizes):
        ys = sorted(s[n] for s in series if n in s)
        if not ys:
            continue
        xs = i + (np.linspace(-0.18, 0.18, len(ys)) if len(ys) > 1 else np.zeros(1))
        ax.scatter(xs, ys, s=22, color="#1f77b4", alpha=0.75, zorder=3,
                   label="a submission" if i == 0 else None)
        med = statistics.median(ys)
        ax.hlines(med, i - 0.28, i + 0.28, color="#333333", linewidth=1.6, zorder=4,
                  label="median" if i == 0 else None)
    if ratio:
        ax.axhline(1.0, color="#d62728", linestyle="--", linewidth=1.3, zorder=2, label="reference solution (1.0)")
        ax.set_ylabel("time / reference time", fontsize=9)
    else:
        ax.set_ylabel("median time (ms)", fontsize=9)
    values = [v for s in series for v in s.values()] + ([1.0] if ratio else [])
    if values and min(values) > 0 and max(values) / min(values) > 8:
        ax.set_yscale("log")
    ax.set_xticks(range(len(sizes)), [f"n = {_size_tex(n)}" for n in sizes])
    ax.set_xlim(-0.6, len(sizes) - 0.4)
    ax.set_title(_mpl_text(title), fontsize=10)
    ax.tick_params(labelsize=8)
    ax.grid(axis="y", color="#e4e4e8", linewidth=0.6)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(fontsize=8, frameon=False, loc="best")
    return _svg(fig, title)


# --- sections: the page's data; the markup is templates/class_report.html.j2 ---------------------------

def _part_titles(rows: Sequence[tuple[str, SubmissionResult]]) -> dict[str, tuple[int, str]]:
    """Part key -> (number, title), in part order, over every result."""
    seen: dict[str, tuple[int, str]] = {}
    for _, r in rows:
        for p in r.parts:
            seen.setdefault(p.key, (p.number, p.title))
    return dict(sorted(seen.items(), key=lambda kv: (kv[1][0], kv[0])))


def _tally(values: Sequence[str]) -> list[tuple[str, int]]:
    """``(value, how many)``, sorted by value."""
    tally: dict[str, int] = {}
    for v in values:
        tally[v] = tally.get(v, 0) + 1
    return sorted(tally.items())


def _header(rows, *, manifest: Mapping | None) -> dict:
    """The header's facts: counts, dates, backends, GPUs, seeds, versions, fingerprint and shard."""
    results = [r for _, r in rows]
    started = sorted(r.started_at[:10] for r in results if r.started_at)
    graded = "—" if not started else started[0] if started[0] == started[-1] else f"{started[0]} to {started[-1]}"
    shard = (manifest or {}).get("shard")
    fingerprint = (manifest or {}).get("config_sha256")
    return {"assignment": ASSIGNMENT, "submissions": len(rows), "passed": sum(r.passed for r in results),
            "graded": graded,
            "backends": _tally([r.backend for r in results]),
            "gpus": _tally([r.device.get("device") for r in results if r.device.get("device")]),
            "fingerprint": fingerprint if isinstance(fingerprint, str) and fingerprint else None,
            "shard": ({"index": shard.get("index"), "count": shard.get("count")} if isinstance(shard, dict) else None),
            "seeds": _tally([str(r.seed) for r in results]), "versions": _tally([r.scangrade_version for r in results])}


def _pending(points_pending: Sequence[float]) -> dict | None:
    """What of a row's "of" waits for a GPU run, from each submission's pending points (0: none):
    ``{"points": the most of any submission, "submissions": how many have some}``, or None."""
    some = [x for x in points_pending if x]
    return {"points": max(some), "submissions": len(some)} if some else None


def _pending_words(pending: dict | None) -> str:
    """``30 pending a GPU run`` (the most of any submission); "" for None."""
    if pending is None:
        return ""
    return f"{points(pending['points'])} pending a GPU run"


def _scores(rows, parts: Mapping[str, tuple[int, str]], plots: bool) -> dict:
    """Per part and for the total: the stats table's rows and (with ``plots``) the histograms. Each
    row's ``pending`` (:func:`_pending`) is the share of its "of" that waits for a GPU run: the
    performance points of results from a backend that cannot time kernels
    (:meth:`grader.core.results.SubmissionResult.performance_pending`), neither earned nor lost."""
    table, series = [], []  # series: plot label, points, of, passed, pending
    for key, (number, title) in parts.items():
        got = [(r, p) for _, r in rows for p in r.parts if p.key == key]
        pts = [p.points for _, p in got]
        top = max((p.max_points for _, p in got), default=0.0)
        passed = f"{sum(p.status == 'pass' for _, p in got)}/{len(got)}"
        statuses = _tally([p.status for _, p in got if p.status != "pass"])
        pending = _pending([p.performance.max_points if r.performance_pending(p) else 0.0 for r, p in got])
        series.append((f"Part {number}", pts, top, passed, pending))
        table.append({"label": f"Part {number}: {title}", "points": pts, "top": top, "passed": passed, "bold": False,
                      "statuses": [(PART_STATUS_WORDS.get(s, s), n) for s, n in statuses], "pending": pending})
    totals = [r.points for _, r in rows]
    top = max((r.max_points for _, r in rows), default=0.0)
    passed = f"{sum(r.passed for _, r in rows)}/{len(rows)}"
    pending = _pending([r.pending_points for _, r in rows])
    series.append(("Total", totals, top, passed, pending))
    table.append({"label": "Total", "points": totals, "top": top, "passed": passed, "bold": True, "statuses": [],
                  "pending": pending})
    figures = None
    if plots:
        figures = [{"svg": _histogram(pts, top, label, _pending_words(pending)), "label": label, "points": pts,
                    "passed": passed} for label, pts, top, passed, pending in series]
    return {"rows": table, "figures": figures, "pending": pending}


@dataclass(frozen=True)
class _Timed:
    student: str
    gpu: str
    timings: dict[int, Timing]
    part: PartResult


def _timed_runs(part: PartResult) -> dict[int, Timing] | None:
    """The part's timings by n, or None when it has no timed case or a timed case failed."""
    timed = [c for c in part.cases if is_timed_case(c)]
    if not timed or any(c.status != "pass" or c.timing is None for c in timed):
        return None
    return {c.n: c.timing for c in timed}


def _timing(rows, parts: Mapping[str, tuple[int, str]], plots: bool) -> dict:
    timed_keys = [k for k in parts if any(p.key == k and (p.performance is not None or _timed_runs(p))
                                          for _, r in rows for p in r.parts)]
    if not timed_keys:
        return {"state": "untimed"}
    any_timed = any(_timed_runs(p) for _, r in rows for p in r.parts if p.key in timed_keys)
    if not any_timed:
        emulated = sum(not r.backend_times_kernels for _, r in rows)
        why = (f"{emulated} of {len(rows)} results come from the CPU emulator, which checks correctness only: its "
               "run times say nothing about a GPU" if emulated else "no submission of these results was timed")
        names = ", ".join(f"Part {parts[k][0]}" + (" (the challenge)" if k == CHALLENGE_PART else "")
                          for k in timed_keys)
        return {"state": "pending", "names": names, "why": why}
    # The challenge first, then the other timed parts in part order.
    return {"state": "timed", "parts": [_timing_part(rows, key, parts[key], plots)
                                        for key in sorted(timed_keys, key=lambda k: k != CHALLENGE_PART)]}


def _timing_part(rows, key: str, number_title: tuple[int, str], plots: bool) -> dict:
    """One timed part's section of the page: its key, number, title and whether it is the challenge;
    with no submission timed, ``none_timed`` says why; else the sizes, whether times are ratios to
    the reference, the GPUs, the reference's times, the plot (with ``plots``), the submissions not
    timed with why, and the ranked ``rows`` (:func:`_ranked_rows`)."""
    number, title = number_title
    out = {"key": key, "number": number, "title": title, "challenge": key == CHALLENGE_PART, "none_timed": ""}
    entries, untimed = _timed_entries(rows, key)
    if not entries:
        emu = sum(not timing for _, _, timing in untimed)
        out["none_timed"] = (f"{emu} of {len(untimed)} results are from the emulator, which does not time kernels"
                             if emu else "a part is timed only when every one of its cases passes")
        return out
    sizes = sorted({n for e in entries for n in e.timings})
    ratio = all(t.ratio is not None for e in entries for t in e.timings.values())
    series = [{n: (t.ratio if ratio else t.median_ms) for n, t in e.timings.items()} for e in entries]
    out.update(sizes=sizes, ratio=ratio, gpus=sorted({e.gpu for e in entries if e.gpu}),
               reference=_reference_cells(entries, sizes) if ratio else None,
               plot=_timing_plot(sizes, series, ratio=ratio, title=f"Part {number}: {title}") if plots else None,
               untimed=[(sid, _first_line(why)) for sid, why, _ in untimed], rows=_ranked_rows(entries, sizes))
    return out


def _timed_entries(rows, key: str) -> tuple[list[_Timed], list[tuple[str, str, bool]]]:
    """The submissions with part ``key``, split: those whose every timed run passed (a
    :class:`_Timed` each), and the rest, ``(id, why it was not timed, whether its backend times
    kernels)``; a submission without the part is in neither."""
    entries, untimed = [], []
    for sid, r in rows:
        part = next((p for p in r.parts if p.key == key), None)
        if part is None:
            continue
        runs = _timed_runs(part)
        if runs:
            entries.append(_Timed(sid, r.device.get("device", ""), runs, part))
        else:
            why = part.performance.message if part.performance else part_status_words(part)
            untimed.append((sid, why, r.backend_times_kernels))
    return entries, untimed


def _reference_cells(entries: Sequence[_Timed], sizes: Sequence[int]) -> list[dict | None]:
    """Per size, the reference solution's median time (ms) over the submissions timed beside it, with
    the range when it varied: ``{"sort": ms, "text": "0.123 (0.120–0.130)"}``, or None where none was."""
    cells: list[dict | None] = []
    for n in sizes:
        refs = [e.timings[n].reference_ms for e in entries if n in e.timings and e.timings[n].reference_ms]
        spread = f" ({min(refs):#.3g}–{max(refs):#.3g})" if refs and min(refs) != max(refs) else ""
        cells.append({"sort": statistics.median(refs), "text": f"{statistics.median(refs):#.3g}{spread}"}
                     if refs else None)
    return cells


def _combined_ratio(e: _Timed) -> float:
    """The part's combined time ratio to the reference (its performance's), or infinity when unknown."""
    perf = e.part.performance
    return perf.ratio if perf and perf.ratio is not None else float("inf")


def _ranked_rows(entries: Sequence[_Timed], sizes: Sequence[int]) -> list[dict]:
    """The timing table's rows, best combined ratio first (ties by id): per submission its id, GPU,
    one cell per size (median ms and the ratio, None where not timed), combined ratio and
    performance points, each cell ``{"sort", "text"}``."""
    out = []
    for e in sorted(entries, key=lambda e: (_combined_ratio(e), e.student)):
        cells = []
        for n in sizes:
            t = e.timings.get(n)
            cells.append(None if t is None else {
                "sort": t.ratio if t.ratio is not None else t.median_ms,
                "text": f"{t.median_ms:#.3g}" + (f" ({t.ratio:.2f}×)" if t.ratio is not None else "")})
        perf, comb = e.part.performance, _combined_ratio(e)
        known = comb != float("inf")
        out.append({
            "student": e.student, "gpu": e.gpu, "cells": cells,
            "combined": {"sort": comb if known else "", "text": f"{comb:.2f}" if known else "—"},
            "performance": {"sort": perf.points if perf else "",
                            "text": f"{points(perf.points)}/{points(perf.max_points)}" if perf else "—"}})
    return out


def _failures(rows) -> list[dict]:
    groups = []
    for kind, failures in failure_groups(rows):
        label, meaning = _kind_label(kind)
        groups.append({"kind": kind, "label": label, "meaning": meaning, "failures": failures,
                       "students": len({f.student for f in failures})})
    return groups


def _students(rows, parts: Mapping[str, tuple[int, str]]) -> list[tuple[str, SubmissionResult, list]]:
    """``(id, result, [the part's result or None, per part column])`` per student."""
    out = []
    for sid, r in rows:
        by_key = {p.key: p for p in r.parts}
        out.append((sid, r, [by_key.get(key) for key in parts]))
    return out


def written_names(manifest: Mapping | None) -> dict[str, str]:
    """Each student's name as written, where it is not the id: ``{id: name}`` from a batch's manifest
    (``batch.json``'s ``students``, :func:`grader.classwork.store.write_manifest`): the submitter's name
    where Gradescope's export gives one, else the entry of the class folder the submission was graded
    from (``zoë-müller``, whose id is ``zo_-m_ller_fd719cda4d``: :func:`grader.classwork.submissions.submission_ids`).
    A student whose entry is its id (``alice``, or ``alice.zip``: a ``.zip`` is named without it) is
    left out, and so is every student of a folder without a manifest, or of one written before it
    recorded names and folders (the page then shows ids only). Never raises for a manifest's odd values."""
    students = (manifest or {}).get("students")
    out: dict[str, str] = {}
    for entry in students if isinstance(students, list) else []:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("id"), str):
            continue
        sid, name, folder = entry["id"], entry.get("name"), entry.get("folder")
        shown = name if isinstance(name, str) and name else folder if isinstance(folder, str) else ""
        if shown and sid not in (shown, re.sub(r"(?i)\.zip$", "", shown)):
            out[sid] = shown
    return out


def _finalize(value: object) -> object:
    """Every ``{{ value }}`` of the template: text shown with its control characters as ``\\xNN``
    (markup from the renderer itself, :class:`markupsafe.Markup`, as it is); escaping follows."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return printable(value)
    return value


def _asset(name: str) -> str:
    """A file of ``grader/render/templates`` (package data), as text."""
    return resources.files("grader.render").joinpath("templates", name).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def _template() -> tuple[jinja2.Template, Markup, Markup, Markup]:
    """The page's template, its style sheet and script (as markup), and its Content-Security-Policy."""
    env = jinja2.Environment(autoescape=True, finalize=_finalize, undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True)
    env.filters.update(points=points, mean=statistics.mean, median=statistics.median, pending=_pending_words,
                       url_part=lambda s: quote(s, safe=""), status_words=lambda s: PART_STATUS_WORDS.get(s, s))
    env.tests["power_of_two"] = lambda n: n & (n - 1) == 0
    script = _asset(SCRIPT_FILE)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    csp = (f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{digest}'; "
           "base-uri 'none'; form-action 'none'")
    return env.from_string(_asset(TEMPLATE_FILE)), Markup(_asset(CSS_FILE)), Markup(script), Markup(csp)


def content_security_policy() -> str:
    """The page's Content-Security-Policy: no network, no script but the sort script (admitted by
    its SHA-256), images only from ``data:`` URIs."""
    return _template()[3]


def class_report(rows: Sequence[tuple[str, SubmissionResult]], *, title: str | None = None,
                 manifest: Mapping | None = None, damaged: Sequence[str] = (), link_base: str = "",
                 folder_name: str = "", generated_at: str | None = None, plots: bool | None = None) -> str:
    """The class report as one self-contained HTML page (a str; no I/O).

    Args:
        rows: ``(id, result)`` per submission, in the order the students' table lists them.
        title: the page's heading (default: ``"scangrade class report"``).
        manifest: the batch folder's ``batch.json`` as a dict, for the config fingerprint, the
            shard and each student's name as written (:func:`written_names`: shown, escaped, with
            the id beside it where they differ; links still go by id); None: not shown, ids only.
        damaged: ids whose result could not be read, listed in a warning.
        link_base: the relative URL from the page to the batch folder, ending in ``/`` (``""``
            when the page lies in it); student links go to ``<link_base><id>/FILE``, FILE each of
            :data:`LINKED_REPORTS` (``report.md``, ``report.txt``).
        folder_name: the batch folder's name as shown in the header.
        generated_at: the time shown as the report's date (default: now, UTC, ISO 8601).
        plots: draw the plots with matplotlib; None: when matplotlib is installed. Without plots the
            page says how to get them.

    Returns:
        The HTML text (UTF-8, one file: inline CSS, inline SVG plots, one small inline script
        that sorts tables), from the Jinja2 template ``templates/class_report.html.j2`` with
        autoescaping: every string from a result is escaped.
    """
    if plots is None:
        plots = matplotlib_available()
    rows = list(rows)
    parts = _part_titles(rows)
    template, css, script, csp = _template()
    return template.render(
        title=title or "scangrade class report", folder_name=folder_name, link_base=link_base,
        generated_at=generated_at or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        damaged=list(damaged), header=_header(rows, manifest=manifest), scores=_scores(rows, parts, plots),
        plots_hint=PLOTS_HINT, timing=_timing(rows, parts, plots), failures=_failures(rows),
        parts=parts, students=_students(rows, parts), regrade=[sid for sid, r in rows if r.to_regrade],
        written=written_names(manifest),
        version=__version__, css=css, script=script, csp=csp,
        report_files=LINKED_REPORTS, student_folder=STUDENT_FOLDER)


def class_report_page(batch: BatchFolder, link_base: str = "", *, title: str | None = None,
                      generated_at: str | None = None, plots: bool | None = None) -> str:
    """The class report of a batch output folder as read back by
    :func:`grader.classwork.store.load_batch`: :func:`class_report` of its rows, with its manifest,
    damaged results and folder name (a pure function: no I/O).

    Args:
        batch: the loaded folder (``rows``, ``damaged``, ``manifest``, ``folder``).
        link_base: the relative URL from the page to the folder (see :func:`class_report`); this is
            the ``render`` argument of :func:`grader.classwork.store.write_class_report`.
        title, generated_at, plots: as for :func:`class_report`.
    """
    return class_report(batch.rows, title=title, manifest=batch.manifest, damaged=batch.damaged, link_base=link_base,
                        folder_name=batch.folder.resolve().name, generated_at=generated_at, plots=plots)
