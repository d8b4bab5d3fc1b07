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
  relative links to each student's ``report.md`` and ``report.txt``;
- every student: points per part, total, status (a small inline script sorts the columns; the
  page's Content-Security-Policy admits that script by its hash and no other).

Every string that comes from a submission or a result file (ids, messages, file names, device
names) is passed through :func:`html.escape`, so it is shown as text and never parsed as markup.

:func:`class_report` renders (a pure function of the results); :func:`write_class_report` reads
a batch folder and writes ``class_report.html`` (``scangrade batch`` calls it at the end;
``scangrade report DIR`` rebuilds the page).
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import html
import io
import os
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from grader import __version__
from grader.errors import UsageError
from grader.render._common import PART_STATUS_WORDS, is_timed_case, points, printable, stopped_case
from grader.results import CHECK_KINDS, CaseResult, PartResult, SubmissionResult, Timing

#: The page's file name in a batch output folder.
REPORT_NAME = "class_report.html"
#: What is being graded, for the page's header.
ASSIGNMENT = "Parallel prefix sum (scan) in CUDA"
#: The challenge part's key (its timing section is marked as the challenge).
CHALLENGE_PART = "part5_single_pass"
#: How to get the plots when matplotlib is missing.
PLOTS_HINT = "pip install scangrade[report]"

#: Failure kinds, in the order their groups are listed on a tie, with what each means.
FAILURE_KINDS = {
    "compile-error": "the file does not compile",
    "missing": "the file is missing from the submission",
    "timeout": "a case ran past its deadline (a hang, or far too slow)",
    "crash": "the process running the part crashed",
    "wrong-result": "an output differs from the sequential reference scan",
    "wrong-after-timing": "the output was wrong after the timed runs (work skipped on a repeated launch?)",
    "out-of-bounds": "a read or write outside a buffer (guard zones or the emulator's checks)",
    "race": "the emulator's checks found a data race",
    "barrier-divergence": "threads of a block waited at different barriers, or a warp mask is wrong",
    "deadlock": "every thread spin-waits and nothing changes",
    "uninitialized-read": "a read of shared memory no thread had written",
    "misaligned": "an access at an address not a multiple of its size",
    "input-modified": "the kernel wrote to its read-only input",
    "launch-refused": "the launch configuration was refused (block size, shared memory, parameters)",
    "error": "the grader could not run the part",
}

_COMPILER_ERROR = re.compile(r"\berror\b", re.IGNORECASE)
_MESSAGE_CHARS = 240

# Sorts the students' table when a column head is clicked (numbers by data-sort, text by content).
_SORT_SCRIPT = """
for (const table of document.querySelectorAll("table.sortable")) {
  const heads = table.tHead.rows[0].cells;
  for (let col = 0; col < heads.length; col++) {
    heads[col].addEventListener("click", () => {
      const body = table.tBodies[0], down = heads[col].dataset.dir !== "desc";
      const key = (row) => { const c = row.cells[col]; const v = c.dataset.sort;
        return v !== undefined && v !== "" && !isNaN(v) ? Number(v) : c.textContent.trim().toLowerCase(); };
      const rows = Array.from(body.rows).sort((a, b) => {
        const x = key(a), y = key(b); return (x < y ? -1 : x > y ? 1 : 0) * (down ? -1 : 1); });
      for (const h of heads) delete h.dataset.dir;
      heads[col].dataset.dir = down ? "desc" : "asc";
      for (const r of rows) body.appendChild(r);
    });
  }
}
"""
_SCRIPT_HASH = base64.b64encode(hashlib.sha256(_SORT_SCRIPT.encode()).digest()).decode()
#: No network, no script but the sort script above, images only from data: URIs.
CONTENT_SECURITY_POLICY = (f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
                           f"script-src 'sha256-{_SCRIPT_HASH}'; base-uri 'none'; form-action 'none'")

_CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #1d1d1f;
       margin: 0 auto; max-width: 1180px; padding: 0 24px 48px; }
h1 { font-size: 26px; margin: 28px 0 2px; } h2 { font-size: 20px; margin: 36px 0 10px; border-bottom: 2px solid #e4e4e8;
  padding-bottom: 4px; } h3 { font-size: 16px; margin: 22px 0 8px; }
.sub { color: #555; margin: 0 0 14px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 3px 18px; margin: 0 0 12px; }
dl.facts dt { color: #555; } dl.facts dd { margin: 0; }
.note { background: #f4f6fb; border-left: 4px solid #7a8cc4; padding: 8px 12px; margin: 10px 0; }
.warn { background: #fff6e5; border-left: 4px solid #e0a030; padding: 8px 12px; margin: 10px 0; }
nav a { margin-right: 16px; }
table { border-collapse: collapse; margin: 8px 0 14px; font-size: 14px; }
th, td { border-bottom: 1px solid #e4e4e8; padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #f6f6f8; font-weight: 600; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
table.sortable th { cursor: pointer; user-select: none; white-space: nowrap; }
table.sortable th::after { content: " \\2195"; color: #aaa; }
table.timing td.num { white-space: nowrap; } table.failures { width: 100%; }
.pass { color: #16794a; } .fail { color: #b42318; font-weight: 600; }
td.pass { background: #eef8f1; } td.fail { background: #fdf0ef; } td.partial { background: #fff8e6; }
.plots { display: flex; flex-wrap: wrap; gap: 14px; }
figure { margin: 0; border: 1px solid #e4e4e8; border-radius: 6px; padding: 6px; background: #fff; }
figure { box-sizing: border-box; } figure.small { width: 360px; } figure.wide { max-width: 760px; }
figure svg { display: block; max-width: 100%; height: auto; }
figcaption { font-size: 13px; color: #444; padding: 2px 4px; }
code, .msg { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace; font-size: 13px; }
.msg { white-space: pre-wrap; word-break: break-word; }
details { margin: 6px 0 12px; } summary { cursor: pointer; font-weight: 600; font-size: 15px; }
summary .count { color: #555; font-weight: 400; }
.nowrap { white-space: nowrap; }
footer { margin-top: 40px; color: #666; font-size: 13px; }
"""


def _e(value: object) -> str:
    """A string for HTML text or a quoted attribute: control characters shown, markup escaped."""
    return html.escape(printable(str(value)), quote=True)


def _first_line(text: str, limit: int = _MESSAGE_CHARS) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _size_html(n: int) -> str:
    """A size for HTML: ``2<sup>20</sup>`` for a power of two, else the number."""
    return f"2<sup>{n.bit_length() - 1}</sup>" if n > 1 and n & (n - 1) == 0 else str(n)


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


#: Case kinds (:attr:`grader.results.CaseResult.kind`) listed under another failure group.
_GROUP_OF_KIND = {"mismatch": "wrong-result", "ticket": "wrong-result"}


def _case_kind(case: CaseResult) -> str:
    kind = _GROUP_OF_KIND.get(case.kind, case.kind) if case.kind else (
        "wrong-result" if case.status == "fail" else case.status)
    return kind if kind in CHECK_KINDS or kind in FAILURE_KINDS else f"kernel-error:{kind}"


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
        message = _first_line(part.message) or PART_STATUS_WORDS.get(part.status, part.status)
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


def _svg(fig, label: str) -> str:
    """A matplotlib figure as an inline ``<svg>`` element (text as text, no date, stable ids)."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "scangrade-class-report"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    return text.replace("<svg", f'<svg class="plot" role="img" aria-label="{_e(label)}"', 1)


def _histogram(values: list[float], top: float, title: str) -> str:
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
    ax.set_xlabel(f"points (of {points(top)})", fontsize=9)
    ax.set_ylabel("submissions", fontsize=9)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if whole:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.tick_params(labelsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig, f"histogram of points: {title}")


def _timing_plot(sizes: list[int], series: list[dict[int, float]], *, ratio: bool, title: str) -> str:
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


def _figure(svg: str, caption: str, css: str = "") -> str:
    return f'<figure class="{css}">{svg}<figcaption>{caption}</figcaption></figure>'


# --- sections ------------------------------------------------------------------------------------------

def _part_titles(rows: Sequence[tuple[str, SubmissionResult]]) -> dict[str, tuple[int, str]]:
    """Part key -> (number, title), in part order, over every result."""
    seen: dict[str, tuple[int, str]] = {}
    for _, r in rows:
        for p in r.parts:
            seen.setdefault(p.key, (p.number, p.title))
    return dict(sorted(seen.items(), key=lambda kv: (kv[1][0], kv[0])))


def _counts(values: Sequence[str]) -> str:
    tally: dict[str, int] = {}
    for v in values:
        tally[v] = tally.get(v, 0) + 1
    return ", ".join(f"{_e(k)} ({n})" if len(tally) > 1 else _e(k) for k, n in sorted(tally.items())) or "—"


def _header(rows, *, title: str, manifest: Mapping | None, damaged: Sequence[str], generated_at: str,
            folder_name: str) -> list[str]:
    results = [r for _, r in rows]
    gpus = [r.device.get("device") for r in results if r.device.get("device")]
    started = sorted(r.started_at[:10] for r in results if r.started_at)
    graded = "—" if not started else started[0] if started[0] == started[-1] else f"{started[0]} to {started[-1]}"
    passed = sum(r.passed for r in results)
    facts = [("Assignment", _e(ASSIGNMENT)),
             ("Submissions", f"{len(rows)} ({passed} passed every case)" + (f", {len(damaged)} unreadable"
                                                                            if damaged else "")),
             ("Graded", _e(graded)), ("Report generated", _e(generated_at)),
             ("Backend", _counts([r.backend for r in results])),
             ("GPU", _counts(gpus) if gpus else "none (no GPU run)")]
    fingerprint = (manifest or {}).get("config_sha256")
    if isinstance(fingerprint, str) and fingerprint:
        facts.append(("Config fingerprint", (f'<code title="{_e(fingerprint)}">{_e(fingerprint[:16])}</code> '
                                             "(SHA-256 of every setting that can change a grade)")))
    shard = (manifest or {}).get("shard")
    if isinstance(shard, dict):
        facts.append(("Shard", _e(f"{shard.get('index')} of {shard.get('count')}: this page covers one shard only")))
    facts += [("Seed", _counts([str(r.seed) for r in results])),
              ("scangrade", _counts([r.scangrade_version for r in results]))]
    out = [f"<header><h1>{_e(title)}</h1>", f'<p class="sub">Class report of <code>{_e(folder_name)}</code></p>',
           '<dl class="facts">']
    out += [f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts]
    out.append("</dl>")
    out.append('<p class="note">For TAs: this page shows hidden cases and full messages. Do not publish it to '
               "students; each student's own <code>report.md</code> is the version for them.</p>")
    if damaged:
        out.append('<p class="warn">These results could not be read (missing, cut short, or not a scangrade '
                   "result) and are left out: " + ", ".join(f"<code>{_e(d)}</code>" for d in damaged)
                   + ". Grade them again with <code>scangrade batch ... --resume</code>.</p>")
    out.append('<nav><a href="#scores">Scores</a><a href="#timing">Timing</a><a href="#failures">Failures</a>'
               '<a href="#students">All students</a></nav></header>')
    return out


def _scores(rows, parts: Mapping[str, tuple[int, str]], plots: bool) -> list[str]:
    out = ['<section id="scores"><h2>Score distribution</h2>',
           ('<table class="stats"><thead><tr><th>Part</th><th class="num">of</th><th class="num">mean</th>'
            '<th class="num">median</th><th class="num">min</th><th class="num">max</th>'
            '<th class="num">every case passed</th><th>not passing, by status</th></tr></thead><tbody>')]
    figures = []
    series: list[tuple[str, list[float], float, str]] = []  # plot title, points, of, passed
    for key, (number, title) in parts.items():
        got = [p for _, r in rows for p in r.parts if p.key == key]
        pts = [p.points for p in got]
        top = max((p.max_points for p in got), default=0.0)
        passed = sum(p.status == "pass" for p in got)
        statuses = [p.status for p in got if p.status != "pass"]
        series.append((f"Part {number}", pts, top, f"{passed}/{len(got)}"))
        out.append(_stats_row(f"Part {number}: {title}", pts, top, f"{passed}/{len(got)}", statuses))
    totals = [r.points for _, r in rows]
    top = max((r.max_points for _, r in rows), default=0.0)
    everyone = sum(r.passed for _, r in rows)
    series.append(("Total", totals, top, f"{everyone}/{len(rows)}"))
    out.append(_stats_row("Total", totals, top, f"{everyone}/{len(rows)}", [], bold=True))
    out.append("</tbody></table>")
    if plots:
        for label, pts, top, passed in series:
            cap = (f"<b>{_e(label)}</b>: mean {statistics.mean(pts):.2f} (dashed) · median "
                   f"{statistics.median(pts):g} · {passed} passed every case" if pts else f"{_e(label)}: no results")
            figures.append(_figure(_histogram(pts, top, label), cap, css="small"))
        out += ['<div class="plots">', *figures, "</div>"]
    else:
        out.append(f'<p class="note">Plots need matplotlib: <code>{PLOTS_HINT}</code>, then rebuild this page '
                   "with <code>scangrade report DIR</code>.</p>")
    out.append("</section>")
    return out


def _stats_row(label: str, pts: list[float], top: float, passed: str, statuses: list[str], bold: bool = False) -> str:
    def num(x: float) -> str:
        return f'<td class="num">{x:.2f}</td>'
    cells = [f"<td>{'<b>' if bold else ''}{_e(label)}{'</b>' if bold else ''}</td>",
             f'<td class="num">{points(top)}</td>']
    if pts:
        cells += [num(statistics.mean(pts)), num(statistics.median(pts)), num(min(pts)), num(max(pts))]
    else:
        cells += ['<td class="num">—</td>'] * 4
    cells.append(f'<td class="num">{passed}</td>')
    tally: dict[str, int] = {}
    for s in statuses:
        tally[s] = tally.get(s, 0) + 1
    cells.append("<td>" + (", ".join(f"{_e(PART_STATUS_WORDS.get(s, s))} {n}" for s, n in sorted(tally.items()))
                           or "—") + "</td>")
    return "<tr>" + "".join(cells) + "</tr>"


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


def _timing(rows, parts: Mapping[str, tuple[int, str]], plots: bool, link_base: str) -> list[str]:
    out = ['<section id="timing"><h2>Timing</h2>']
    timed_keys = [k for k in parts if any(p.key == k and (p.performance is not None or _timed_runs(p))
                                          for _, r in rows for p in r.parts)]
    if not timed_keys:
        out += ['<p class="note">No part of these results is timed by the config.</p>', "</section>"]
        return out
    names = ", ".join(f"Part {parts[k][0]}" + (" (the challenge)" if k == CHALLENGE_PART else "") for k in timed_keys)
    any_timed = any(_timed_runs(p) for _, r in rows for p in r.parts if p.key in timed_keys)
    if not any_timed:
        emulated = sum(r.backend == "emulator" for _, r in rows)
        why = (f"{emulated} of {len(rows)} results come from the CPU emulator, which checks correctness only: its "
               "run times say nothing about a GPU" if emulated else "no submission of these results was timed")
        out += [(f'<p class="warn"><b>Timing pending a GPU run.</b> The config times {names}, but {why}. '
                 "Performance points are not given yet: grade the class with <code>scangrade batch</code> on a "
                 "machine with a GPU (<code>--backend pycuda</code>) and this section will show each "
                 "submission's time against the reference solution.</p>"), "</section>"]
        return out
    # The challenge first, then the other timed parts in part order.
    for key in sorted(timed_keys, key=lambda k: k != CHALLENGE_PART):
        out += _timing_part(rows, key, parts[key], plots, link_base)
    out.append("</section>")
    return out


def _timing_part(rows, key: str, number_title: tuple[int, str], plots: bool, link_base: str) -> list[str]:
    number, title = number_title
    challenge = " — the challenge" if key == CHALLENGE_PART else ""
    out = [f'<h3 id="timing-{_e(key)}">Part {number}: {_e(title)}{challenge}</h3>']
    entries, untimed = [], []
    for sid, r in rows:
        part = next((p for p in r.parts if p.key == key), None)
        if part is None:
            continue
        runs = _timed_runs(part)
        if runs:
            entries.append(_Timed(sid, r.device.get("device", ""), runs, part))
        else:
            why = part.performance.message if part.performance else PART_STATUS_WORDS.get(part.status, part.status)
            untimed.append((sid, why, r.backend))
    if not entries:
        emu = sum(b == "emulator" for _, _, b in untimed)
        why = (f"{emu} of {len(untimed)} results are from the emulator, which does not time kernels" if emu else
               "a part is timed only when every one of its cases passes")
        out.append(f'<p class="warn">No submission was timed in this part ({why}).</p>')
        return out
    sizes = sorted({n for e in entries for n in e.timings})
    ratio = all(t.ratio is not None for e in entries for t in e.timings.values())
    series = [{n: (t.ratio if ratio else t.median_ms) for n, t in e.timings.items()} for e in entries]
    if plots:
        what = "time over the reference solution's" if ratio else "median time"
        out.append('<div class="plots">' + _figure(
            _timing_plot(sizes, series, ratio=ratio, title=f"Part {number}: {title}"),
            f"Each dot is a submission's {what} on the same GPU and input, per timed size; "
            + ("the dashed line at 1.0 is the reference solution, below it is faster. " if ratio else
               "no reference solution was timed, so no reference is marked. ")
            + f"{len(entries)} submission(s) timed.", css="wide") + "</div>")
    gpus = sorted({e.gpu for e in entries if e.gpu})
    if len(gpus) > 1:
        out.append(f'<p class="note">Timed on {len(gpus)} kinds of GPU ({", ".join(_e(g) for g in gpus)}): '
                   "ratios to the reference are comparable across them, milliseconds are not.</p>")
    unit = "ms (× ref)" if ratio else "ms"
    head = "".join(f'<th class="num">n = {_size_html(n)}<br>{unit}</th>' for n in sizes)
    out.append(f'<table class="sortable timing"><thead><tr><th>Student</th>{head}<th class="num">combined ratio</th>'
               '<th class="num">performance points</th><th>GPU</th></tr></thead><tbody>')
    if ratio:  # the reference was timed beside every submission: its median, and the range when it varied
        ref_row = []
        for n in sizes:
            refs = [e.timings[n].reference_ms for e in entries if n in e.timings and e.timings[n].reference_ms]
            spread = f" ({min(refs):#.3g}–{max(refs):#.3g})" if refs and min(refs) != max(refs) else ""
            ref_row.append(f'<td class="num" data-sort="{statistics.median(refs)}">'
                           f"{statistics.median(refs):#.3g}{spread}</td>" if refs else '<td class="num">—</td>')
        out.append('<tr class="reference"><td><b>reference solution</b> (median of its runs)</td>' + "".join(ref_row)
                   + '<td class="num" data-sort="1">1.00</td><td class="num">—</td><td>—</td></tr>')

    def combined(e: _Timed) -> float:
        return e.part.performance.ratio if e.part.performance and e.part.performance.ratio is not None else float("inf")
    for e in sorted(entries, key=lambda e: (combined(e), e.student)):
        cells = []
        for n in sizes:
            t = e.timings.get(n)
            if t is None:
                cells.append('<td class="num">—</td>')
                continue
            rel = f" ({t.ratio:.2f}×)" if t.ratio is not None else ""
            cells.append(f'<td class="num" data-sort="{t.ratio if t.ratio is not None else t.median_ms}">'
                         f"{t.median_ms:#.3g}{rel}</td>")
        perf = e.part.performance
        comb = combined(e)
        cells.append(f'<td class="num" data-sort="{comb if comb != float("inf") else ""}">'
                     + (f"{comb:.2f}" if comb != float("inf") else "—") + "</td>")
        cells.append(f'<td class="num" data-sort="{perf.points if perf else ""}">'
                     + (f"{points(perf.points)}/{points(perf.max_points)}" if perf else "—") + "</td>")
        out.append(f"<tr><td>{_student_link(e.student, link_base)}</td>{''.join(cells)}"
                   f"<td>{_e(e.gpu) or '—'}</td></tr>")
    out.append("</tbody></table>")
    if untimed:
        out.append(f"<details><summary>{len(untimed)} submission(s) not timed in this part</summary><ul>"
                   + "".join(f"<li>{_student_link(sid, link_base)}: {_e(_first_line(why))}</li>"
                             for sid, why, _ in untimed) + "</ul></details>")
    return out


def _href(link_base: str, student: str, name: str) -> str:
    return _e(link_base + quote(student, safe="") + "/" + name)


def _student_link(student: str, link_base: str) -> str:
    return f'<a href="{_href(link_base, student, "report.md")}">{_e(student)}</a>'


def _report_links(student: str, link_base: str) -> str:
    return (f'<a href="{_href(link_base, student, "report.md")}">report.md</a> · '
            f'<a href="{_href(link_base, student, "report.txt")}">report.txt</a>')


def _failures(rows, link_base: str) -> list[str]:
    out = ['<section id="failures"><h2>Failures by kind</h2>']
    groups = failure_groups(rows)
    if not groups:
        out += ['<p class="note">Every part of every submission passed every case.</p>', "</section>"]
        return out
    out.append("<p>Each part that did not pass is listed under every kind of failure among its cases (the first "
               "case of each kind); a part that failed as a whole (compile error, missing file, timeout, crash) "
               "under that one kind.</p>")
    for kind, failures in groups:
        label, meaning = _kind_label(kind)
        students = len({f.student for f in failures})
        out.append(f'<details open class="failure-group" id="kind-{_e(kind)}"><summary>{_e(label)} '
                   f'<span class="count">— {len(failures)} part(s), {students} student(s)'
                   + (f": {_e(meaning)}" if meaning else "") + "</span></summary>")
        out.append('<table class="failures"><thead><tr><th>Student</th><th>Part</th><th>Case</th>'
                   "<th>Message (first line)</th>"
                   "<th>Reports</th></tr></thead><tbody>")
        for f in failures:
            case = _e(f.case.name) if f.case is not None else "—"
            where = f"Part {f.part.number}" if f.part is not None else "every part"
            out.append(f'<tr><td>{_e(f.student)}</td><td class="nowrap">{where}</td><td class="nowrap">{case}</td>'
                       f'<td class="msg">{_e(f.message)}</td>'
                       f'<td class="nowrap">{_report_links(f.student, link_base)}</td></tr>')
        out.append("</tbody></table></details>")
    out.append("</section>")
    return out


def _students(rows, parts: Mapping[str, tuple[int, str]], link_base: str) -> list[str]:
    head = "".join(f'<th class="num" title="{_e(title)}">Part {number}</th>' for number, title in parts.values())
    out = ['<section id="students"><h2>All students</h2>',
           "<p>Click a column head to sort. Each part's cell: points, with the part's status on hover.</p>",
           (f'<table class="sortable students"><thead><tr><th>Student</th>{head}<th class="num">Total</th>'
            '<th class="num">of</th><th>Status</th><th>Backend</th><th>GPU</th><th>Reports</th></tr></thead>'
            "<tbody>")]
    for sid, r in rows:
        by_key = {p.key: p for p in r.parts}
        cells = []
        for key in parts:
            p = by_key.get(key)
            if p is None:
                cells.append('<td class="num">—</td>')
                continue
            css = "pass" if p.status == "pass" else "partial" if p.points > 0 else "fail"
            cells.append(f'<td class="num {css}" data-sort="{p.points:g}" '
                         f'title="{_e(PART_STATUS_WORDS.get(p.status, p.status))}">{points(p.points)}</td>')
        status = '<span class="pass">pass</span>' if r.passed else '<span class="fail">fail</span>'
        out.append(f"<tr><td>{_student_link(sid, link_base)}</td>{''.join(cells)}"
                   f'<td class="num" data-sort="{r.points:g}"><b>{points(r.points)}</b></td>'
                   f'<td class="num">{points(r.max_points)}</td><td>{status}</td><td>{_e(r.backend)}</td>'
                   f"<td>{_e(r.device.get('device', '')) or '—'}</td>"
                   f'<td class="nowrap">{_report_links(sid, link_base)}</td></tr>')
    out.append("</tbody></table></section>")
    return out


def class_report(rows: Sequence[tuple[str, SubmissionResult]], *, title: str | None = None,
                 manifest: Mapping | None = None, damaged: Sequence[str] = (), link_base: str = "",
                 folder_name: str = "", generated_at: str | None = None, plots: bool | None = None) -> str:
    """The class report as one self-contained HTML page (a str; no I/O).

    Args:
        rows: ``(id, result)`` per submission, in the order the students' table lists them.
        title: the page's heading (default: ``"scangrade class report"``).
        manifest: the batch folder's ``batch.json`` as a dict, for the config fingerprint and the
            shard (None: not shown).
        damaged: ids whose result could not be read, listed in a warning.
        link_base: the relative URL from the page to the batch folder, ending in ``/`` (``""``
            when the page lies in it); student links go to ``<link_base><id>/report.md`` and
            ``report.txt``.
        folder_name: the batch folder's name as shown in the header.
        generated_at: the time shown as the report's date (default: now, UTC, ISO 8601).
        plots: draw the plots with matplotlib; None: when matplotlib is installed. Without plots the
            page says how to get them.

    Returns:
        The HTML text (UTF-8, one file: inline CSS, inline SVG plots, one small inline script
        that sorts tables). Every string from a result is escaped.
    """
    if plots is None:
        plots = matplotlib_available()
    rows = list(rows)
    generated_at = generated_at or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    title = title or "scangrade class report"
    parts = _part_titles(rows)
    body = _header(rows, title=title, manifest=manifest, damaged=damaged, generated_at=generated_at,
                   folder_name=folder_name)
    body += _scores(rows, parts, plots)
    body += _timing(rows, parts, plots, link_base)
    body += _failures(rows, link_base)
    body += _students(rows, parts, link_base)
    body.append(f"<footer>scangrade {_e(__version__)} · rebuild this page with <code>scangrade report "
                f"{_e(folder_name or 'DIR')}</code></footer>")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="referrer" content="no-referrer">',
        f"<title>{_e(title)}</title>", f"<style>{_CSS}</style>", "</head><body>",
        *body, f"<script>{_SORT_SCRIPT}</script>", "</body></html>", ""])


# --- files ---------------------------------------------------------------------------------------------

def load_batch(folder: Path) -> tuple[list[tuple[str, SubmissionResult]], list[str]]:
    """The results of a batch output folder: ``(rows, damaged)``.

    Args:
        folder: a ``scangrade batch --out`` folder (or a merged one): one subfolder per student
            holding ``result.json``.

    Returns:
        ``(id, result)`` per readable ``result.json``, sorted by id (the subfolder's name), and
        the ids of subfolders whose ``result.json`` is missing beside other reports, cut short or
        not a scangrade result.

    Raises:
        UsageError: ``folder`` is not a folder, or holds no student's results.
    """
    from grader.batch import load_intact  # late: grader.batch imports this module's package

    if not folder.is_dir():
        raise UsageError(f"{folder}: not a folder; pass the output folder of scangrade batch (its --out)")
    rows, damaged = [], []
    for sub in sorted(folder.iterdir()):
        if sub.name.startswith(".") or not sub.is_dir() or sub.is_symlink():
            continue
        saved = sub / "result.json"
        if not saved.exists() and not (sub / "report.txt").exists():
            continue  # not a student's folder (e.g. slurm/, shards/)
        result = load_intact(saved)
        if result is None:
            damaged.append(sub.name)
        else:
            rows.append((sub.name, result))
    if not rows and not damaged:
        raise UsageError(f"{folder}: no <student>/result.json in it; pass the output folder of scangrade batch "
                         "(its --out), after the batch has graded someone")
    return rows, damaged


def _manifest(folder: Path) -> dict | None:
    """``batch.json`` of a batch folder (:func:`grader.slurm.read_manifest`), or None when absent or
    unusable: the page then has no fingerprint."""
    from grader.slurm import read_manifest
    try:
        return read_manifest(folder)
    except UsageError:
        return None


def write_class_report(folder: Path, *, out: Path | None = None,
                       rows: Sequence[tuple[str, SubmissionResult]] | None = None,
                       title: str | None = None) -> Path:
    """Write the class report of a batch output folder.

    Args:
        folder: the batch output folder (student subfolders, ``batch.json``).
        out: the page to write (default: ``folder/class_report.html``); links to the students'
            reports are relative to where it lies.
        rows: ``(id, result)`` per submission, as :func:`grader.batch.batch` returns them
            (default: read from ``folder/<id>/result.json``, see :func:`load_batch`).
        title: the page's heading.

    Returns:
        The page's path.

    Raises:
        UsageError: ``folder`` holds no results, or ``out`` cannot be written.
    """
    from grader.batch import _write_atomic

    damaged: list[str] = []
    if rows is None:
        rows, damaged = load_batch(folder)
    out = out or folder / REPORT_NAME
    if out.is_dir():
        raise UsageError(f"{out} is a folder; --out takes the page's file name (e.g. {out / REPORT_NAME})")
    rel = os.path.relpath(folder.resolve(), out.resolve().parent).replace(os.sep, "/")
    link_base = "" if rel == "." else quote(rel) + "/"
    page = class_report(rows, title=title, manifest=_manifest(folder), damaged=damaged, link_base=link_base,
                        folder_name=folder.resolve().name)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(out, page)
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None
    return out
