"""The pictures of a student's HTML report (:mod:`grader.render.student_html`), as inline SVG: a race
as a timeline of its two threads, Part 3's worst shared-memory request as a grid of 32 lanes by 32
banks, and where a case's wrong elements lie across the array and its tiles; and a part's time plot
(:mod:`grader.render.plot`) as an inline PNG.

Every picture is a ``<figure>``: an ``<svg role="img">`` with a ``<title>`` and a ``<desc>`` (what a
screen reader says), then its text equivalent beside it (a table or a list), so nothing is told by the
picture alone. Colours are the Okabe–Ito palette (:data:`COLOURS`, safe for every common colour-vision
deficiency), and never alone: a conflicting lane is vermillion and crossed, a write is a square marked W
and a read a circle marked R, a bin with wrong elements is shaded and marked with a triangle. The SVG
uses presentation attributes only (no style sheet, no script, no font file), so a fragment shows the
same inside another page (Gradescope's HTML output).

Pure functions of a part of :func:`grader.render._common.student_view` (hidden cases have no finding,
mismatch or profile there, so none is drawn): each returns markup (:class:`markupsafe.Markup`), ``""``
for nothing to draw.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable

from markupsafe import Markup, escape

from grader.render._common import group_findings, is_hidden, is_timed_case, printable
from grader.render._patterns import part_tile, wrong_places
from grader.core.results import CaseFinding, CaseResult, PartResult

__all__ = ["COLOURS", "MAX_PICTURES", "bank_grid", "mismatch_strip", "part_pictures", "picture_images", "race_timeline",
           "time_plot"]

#: Colours by the role each plays: the Okabe–Ito palette (Okabe and Ito, "Color Universal Design", 2008),
#: and a neutral grey for the grid lines.
COLOURS = {"write": "#0072B2", "read": "#E69F00", "conflict": "#D55E00", "wrong": "#D55E00", "grid": "#BBBBBB",
           "tile": "#009E73"}
#: Pictures of one kind drawn for a part at most (races, wrong outputs): the first distinct ones.
MAX_PICTURES = 3
#: The bank grid's cell (px).
_CELL = 11
#: Characters of a source line a race's picture shows (its table shows the finding's whole quote).
_CODE_SHOWN = 64


def _e(value: object) -> Markup:
    """Text for HTML or an attribute: control characters shown (``\\xNN``), markup escaped."""
    return escape(printable(str(value)))


def _ids(t: tuple[int, int, int] | None) -> str:
    return "(?)" if t is None else f"({t[0]}, {t[1]}, {t[2]})"


def _svg(key: str, width: int, height: int, title: str, desc: str, body: Iterable[str]) -> Markup:
    """An ``<svg role="img">`` labelled by its ``<title>`` and ``<desc>`` (ids made of ``key``)."""
    return Markup(f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" height="{height}" '
                  f'viewBox="0 0 {width} {height}" aria-labelledby="{key}-t {key}-d" class="picture" '
                  f'font-family="sans-serif" font-size="12">'
                  f'<title id="{key}-t">{_e(title)}</title><desc id="{key}-d">{_e(desc)}</desc>'
                  + "".join(body) + "</svg>")


def _figure(svg: Markup, caption: str, equivalent: Markup, kind: str) -> Markup:
    """A figure: the picture, its caption and its text equivalent (``kind`` names it for tests and CSS)."""
    return Markup(f'<figure class="{kind}">{svg}<figcaption>{_e(caption)}</figcaption>{equivalent}</figure>')


def _table(caption: str, head: list[str], rows: list[list[object]], kind: str) -> Markup:
    cells = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return Markup(f'<table class="{kind}"><caption>{_e(caption)}</caption><thead><tr>'
                  + "".join(f'<th scope="col">{_e(h)}</th>' for h in head)
                  + f"</tr></thead><tbody>{cells}</tbody></table>")


def _text(x: float, y: float, text: str, *, anchor: str = "start", weight: str = "normal", fill: str = "#000000",
          size: int | None = None) -> str:
    sized = f' font-size="{size}"' if size else ""
    return (f'<text x="{x:g}" y="{y:g}" text-anchor="{anchor}" font-weight="{weight}" fill="{fill}"{sized}>'
            f"{_e(text)}</text>")


# ---- a race -------------------------------------------------------------------------------------

#: A race's kind (:attr:`grader.core.results.CaseFinding.access`) -> what the first and the second access did.
_RACE_ACCESSES = {"read-after-write": ("write", "read"), "write-after-read": ("read", "write"),
                  "write-after-write": ("write", "write")}
#: What an access does, as a verb.
_VERBS = {"write": "writes", "read": "reads"}


def _marker(x: float, y: float, what: str) -> str:
    """A write as a blue square marked W, a read as an orange circle marked R."""
    if what == "write":
        shape = f'<rect x="{x - 11:g}" y="{y - 11:g}" width="22" height="22" fill="{COLOURS["write"]}" stroke="#000"/>'
    else:
        shape = f'<circle cx="{x:g}" cy="{y:g}" r="12" fill="{COLOURS["read"]}" stroke="#000"/>'
    letter = "W" if what == "write" else "R"
    ink = "#FFFFFF" if what == "write" else "#000000"
    return shape + _text(x, y + 4, letter, anchor="middle", weight="bold", fill=ink)


def _separator(f: CaseFinding) -> str:
    """What would order a race's two accesses: a barrier where they are of one block, else
    synchronisation between the blocks (the finding's message says which)."""
    if f.block is not None and f.block == f.other_block:
        return (f"a __syncthreads() between line {f.other_line} and line {f.line} (or __syncwarp() where both "
                "threads are of one warp)")
    return "synchronisation between the blocks (a __threadfence() and a flag, or separate kernels): see the message"


def race_timeline(f: CaseFinding, *, key: str) -> Markup:
    """A race (a finding of kind ``race`` with its other access) as two threads on a timeline: the
    first access in the emulator's order on the first row, the second on the second, an arrow
    between them over the element both touched, and a dashed line where the missing barrier goes;
    then a table of the two accesses and a sentence on what would separate them. ``""`` for a
    finding without the other access or the race's kind (compute-sanitizer's, one saved before they
    were kept, and a memory-order race between blocks, whose message tells its fences).

    Args:
        f: the finding; key: an id unique in the page (for the SVG's labels).
    """
    if f.other_thread is None or f.thread is None or f.access not in _RACE_ACCESSES:
        return Markup("")
    first, second = _RACE_ACCESSES[f.access]
    where = (f.address or "the same element").split(" (", 1)[0]
    rows = [("1st", f.other_thread, f.other_block, first, f.other_line, f.other_code),
            ("2nd", f.thread, f.block, second, f.line, f.code)]
    body = ['<rect x="0" y="0" width="720" height="230" fill="#FFFFFF"/>']
    for k, (order, thread, block, what, line, code) in enumerate(rows):
        y = 60 + 80 * k
        body.append(f'<line x1="250" y1="{y}" x2="700" y2="{y}" stroke="{COLOURS["grid"]}" stroke-width="2"/>')
        body.append(_text(10, y - 4, f"thread {_ids(thread)}", weight="bold"))
        body.append(_text(10, y + 12, f"block {_ids(block)}"))
        x = 320 if k == 0 else 600
        body.append(_marker(x, y, what))
        body.append(_text(x, y - 20, f"{order}: {_VERBS[what]}, line {line if line is not None else '?'}",
                          anchor="middle"))
        if code:
            shown = code if len(code) <= _CODE_SHOWN else code[:_CODE_SHOWN - 1] + "…"
            body.append(f'<text class="code" x="250" y="{y + 30}" font-family="monospace" font-size="11" '
                        f'fill="#333333">{_e(f"{line}: {shown}")}</text>')
    body.append('<path d="M332 66 L588 134" stroke="#000" stroke-width="1.5" fill="none"/>'
                '<path d="M588 134 l-10 -8 l-2 10 z" fill="#000"/>')
    body.append(_text(400, 118, where, anchor="middle", weight="bold"))
    body.append(f'<line x1="460" y1="25" x2="460" y2="170" stroke="{COLOURS["conflict"]}" stroke-width="2" '
                f'stroke-dasharray="6 4"/>')
    body.append(_text(470, 36, "no barrier here", fill=COLOURS["conflict"], weight="bold"))
    body.append('<path d="M250 205 H700" stroke="#000"/><path d="M700 205 l-8 -4 v8 z" fill="#000"/>')
    body.append(_text(250, 222, "the emulator's order (a GPU may run them either way) →"))
    words = (f"Thread {_ids(f.other_thread)} of block {_ids(f.other_block)} {_VERBS[first]} {where} at line "
             f"{f.other_line} first; then thread {_ids(f.thread)} of block {_ids(f.block)} {_VERBS[second]} it at "
             f"line {f.line}, with nothing between them that orders the two: {_separator(f)}.")
    title = f"Race ({f.access}) on {where}"
    table = _table(f"The two accesses to {f.address or where}", ["order", "thread", "block", "access", "line", "code"],
                   [[o, _ids(t), _ids(b), w, ln if ln is not None else "?", code or ""]
                    for o, t, b, w, ln, code in rows], "race-table")
    note = Markup(f'<p class="separator">What would separate them: {_e(_separator(f))}.</p>')
    return _figure(_svg(key, 720, 230, title, words, body), title, table + note, "race")


# ---- Part 3's bank conflicts ----------------------------------------------------------------------

def _bank_of(words: tuple[int, ...]) -> dict[int, list[int]]:
    """Bank -> the distinct words its active lanes access."""
    banks: dict[int, list[int]] = {}
    for w in words:
        if w >= 0 and w not in banks.setdefault(w % 32, []):
            banks[w % 32].append(w)
    return banks


def _grid(words: tuple[int, ...], degree: int | None, *, key: str, whose: str) -> tuple[Markup, Markup]:
    """One request's grid (32 lanes as rows, 32 banks as columns, a lane's cell filled at its bank;
    lanes in conflict vermillion and crossed) and its table of conflicting banks."""
    banks = _bank_of(words)
    left, top = 52, 34
    side = 32 * _CELL
    body = [f'<rect x="0" y="0" width="{left + side + 12}" height="{top + side + 40}" fill="#FFFFFF"/>',
            f'<g fill="#FFFFFF" stroke="{COLOURS["grid"]}" stroke-width="0.5">']
    body += [f'<rect class="cell" x="{left + b * _CELL}" y="{top + l * _CELL}" width="{_CELL}" height="{_CELL}"/>'
             for l in range(32) for b in range(32)]
    body.append("</g>")
    for b in (*range(0, 32, 4), 31):
        body.append(_text(left + b * _CELL + _CELL / 2, top - 6, str(b), anchor="middle", size=10))
    for lane in (*range(0, 32, 4), 31):
        body.append(_text(left - 4, top + lane * _CELL + _CELL - 2, str(lane), anchor="end", size=10))
    body.append(_text(left + side / 2, 12, "bank →", anchor="middle"))
    body.append(f'<text x="12" y="{top + side / 2:g}" transform="rotate(-90 12 {top + side / 2:g})" '
                f'text-anchor="middle">lane (0 at the top)</text>')
    for lane, w in enumerate(words):
        if w < 0:
            continue
        b = w % 32
        x, y = left + b * _CELL, top + lane * _CELL
        if len(banks[b]) > 1:
            body.append(f'<rect class="lane conflict" data-lane="{lane}" data-bank="{b}" x="{x}" y="{y}" '
                        f'width="{_CELL}" height="{_CELL}" fill="{COLOURS["conflict"]}"/>'
                        f'<path d="M{x + 2} {y + 2}l{_CELL - 4} {_CELL - 4}m0 -{_CELL - 4}l-{_CELL - 4} {_CELL - 4}" '
                        f'stroke="#FFFFFF" stroke-width="1.5"/>')
        else:
            body.append(f'<rect class="lane ok" data-lane="{lane}" data-bank="{b}" x="{x}" y="{y}" '
                        f'width="{_CELL}" height="{_CELL}" fill="{COLOURS["write"]}"/>')
    worst = max((len(v) for v in banks.values()), default=0)
    body.append(_text(left, top + side + 18, f"{degree or worst}-way: the busiest bank holds {worst} distinct "
                                               f"word{'s' if worst != 1 else ''}", weight="bold"))
    active = sum(w >= 0 for w in words)
    conflicted = sorted(b for b, v in banks.items() if len(v) > 1)
    desc = (f"{whose}: {active} active lanes; " + (
        f"{len(conflicted)} bank{'s' if len(conflicted) != 1 else ''} hold more than one word ("
        + ", ".join(f"bank {b}: lanes {', '.join(str(i) for i, w in enumerate(words) if w >= 0 and w % 32 == b)}"
                    for b in conflicted[:4]) + ("; ..." if len(conflicted) > 4 else "") + ")"
        if conflicted else "every lane's word is in a bank of its own or shared as a broadcast: conflict-free"))
    svg = _svg(key, left + side + 12, top + side + 40, f"{whose}: {degree or worst}-way bank conflict", desc, body)
    rows = [[b, ", ".join(str(i) for i, w in enumerate(words) if w >= 0 and w % 32 == b), len(banks[b])]
            for b in conflicted]
    table = (_table(f"{whose}: banks holding more than one word", ["bank", "lanes", "distinct words"], rows,
                    "bank-table") if rows else
             Markup(f'<p class="bank-table">{_e(whose)}: no bank holds more than one distinct word.</p>'))
    lanes = _table(f"{whose}: each lane's bank", ["lane", "bank", "word"],
                   [[i, w % 32, w] for i, w in enumerate(words) if w >= 0], "lane-table")
    return svg, Markup(f"{table}<details><summary>{_e(whose)}: every lane</summary>{lanes}</details>")


def bank_grid(part: PartResult, *, key: str) -> Markup:
    """Part 3's drawn shared-memory request (:attr:`grader.core.performance.Profile.request_words`:
    the worst conflict's) as a grid of 32 lanes by 32 banks, beside the reference solution's where
    it was profiled, each with its degree and a table of its conflicting banks; ``""`` without one."""
    prof = part.profile
    if prof is None or not prof.request_words:
        return Markup("")
    what = "store" if prof.request_store else "load"
    names = [f"Your kernel, line {prof.request_line} ({what})"]
    figures = [_grid(prof.request_words, prof.request_degree, key=f"{key}-s", whose=names[0])]
    if prof.reference_request_words:
        names.append(f"The reference solution ({'store' if prof.reference_request_store else 'load'})")
        figures.append(_grid(prof.reference_request_words, prof.reference_request_degree, key=f"{key}-r",
                             whose=names[1]))
    cells = "".join(f'<div class="grid"><p class="whose">{_e(whose)}</p>{svg}{text}</div>'
                    for whose, (svg, text) in zip(names, figures))
    caption = (f"The worst shared-memory request: {prof.request_degree}-way at line {prof.request_line}"
               + (f", beside the reference's worst, {prof.reference_request_degree}-way"
                  if prof.reference_request_words else "")
               + ". A row is a lane of the warp, a column a bank (4-byte word number mod 32); a crossed "
                 "vermillion cell is a lane whose bank another lane also uses for a different word, so the "
                 "two are served one after the other.")
    return Markup(f'<figure class="banks"><div class="grids">{cells}</div><figcaption>{_e(caption)}</figcaption>'
                  "</figure>")


# ---- a wrong output ----------------------------------------------------------------------------------

def _strip(counts: tuple[int, ...], width: int, total: int, *, y: int, ticks: list[tuple[int, str]],
           label: str) -> list[str]:
    """One strip of bins (``counts`` of wrong elements over bins of ``width`` elements of ``total``):
    a bin's shade is its share of wrong elements, and a triangle marks every bin with any."""
    left, span = 150, 540
    out = [_text(10, y + 18, label, weight="bold")]
    step = span / len(counts)
    for k, c in enumerate(counts):
        size = min(width, total - k * width)
        share = c / size if size > 0 else 0
        x = left + k * step
        fill = COLOURS["wrong"] if c else "#FFFFFF"
        opacity = f' fill-opacity="{0.6 + 0.4 * share:.2f}"' if c else ""
        out.append(f'<rect class="bin{" wrong" if c else ""}" data-count="{c}" x="{x:.2f}" y="{y}" '
                   f'width="{step:.2f}" height="26" fill="{fill}"{opacity} stroke="{COLOURS["grid"]}" '
                   f'stroke-width="0.5"/>')
        if c:
            out.append(f'<path d="M{x + step / 2:.2f} {y - 2} l-4 -7 h8 z" fill="#000"/>')
    for pos, text in ticks:
        x = left + span * pos / total
        out.append(f'<line class="tile-edge" x1="{x:.2f}" y1="{y - 4}" x2="{x:.2f}" y2="{y + 30}" '
                   f'stroke="{COLOURS["tile"]}" stroke-width="1.5"/>')
        if text:
            out.append(_text(x, y + 42, text, anchor="middle", size=10))
    out.append(f'<rect x="{left}" y="{y}" width="{span}" height="26" fill="none" stroke="#000"/>')
    return out


def mismatch_strip(case: CaseResult, part: PartResult, *, key: str) -> Markup:
    """Where a case's wrong elements lie: a strip over the whole array (its bins, the tile
    boundaries where there are at most 64 tiles) and one over a tile (where in their tiles), with
    the sentences of :func:`grader.render._patterns.wrong_places`; ``""`` for a case without
    recorded bins (a result saved before them)."""
    mm = case.mismatch
    if mm is None or not mm.bins or not mm.bin_width:
        return Markup("")
    tile = part_tile(part)
    n = case.n
    tiles = -(-n // tile) if tile else 0
    edges = [(k * tile, str(k * tile) if k in (0, tiles - 1) or tiles <= 8 else "") for k in range(tiles)] \
        if tile and 1 < tiles <= 64 else []
    body = ['<rect x="0" y="0" width="720" height="170" fill="#FFFFFF"/>']
    body += _strip(mm.bins, mm.bin_width, n, y=30, ticks=edges, label=f"{mm.buffer}[0 … {n - 1}]")
    body.append(_text(10, 72, f"a box: {mm.bin_width:,} element{'s' if mm.bin_width != 1 else ''}", size=10))
    if edges:
        body.append(_text(10, 84, "(a tile)" if mm.bin_width == tile else "", size=10))
        body.append(_text(10, 96, "green: tile starts", size=10, fill=COLOURS["tile"]))
    height = 90
    if mm.offsets and mm.offset_width and tile:
        body += _strip(mm.offsets, mm.offset_width, tile, y=110, ticks=[], label="within a tile")
        body.append(_text(150, 150, f"0 … {tile - 1}: an element's place in its tile (boxes of {mm.offset_width})",
                          size=10))
        height = 170
    body[0] = f'<rect x="0" y="0" width="720" height="{height}" fill="#FFFFFF"/>'
    places = wrong_places(mm, n, tile)
    title = f"Where the wrong elements of {case.name} lie"
    svg = _svg(key, 720, height, title, "; ".join(places) + ".", body)
    items = Markup("".join(f"<li>{_e(p)}</li>" for p in places))
    return _figure(svg, f"{title}: shaded boxes (marked ▼) hold wrong elements, the darker the more.",
                   Markup(f'<ul class="places">{items}</ul>'), "mismatch")


# ---- the time plot -------------------------------------------------------------------------------------

def time_plot(part: PartResult) -> Markup:
    """The part's time plot (:func:`grader.render.plot.time_plot_png`) as an inline PNG with its
    points in a table beside it; ``""`` where there is none (no timing or roofline, no matplotlib)."""
    from grader.render.plot import plot_series, time_plot_png

    png = time_plot_png(part)
    if png is None:
        return Markup("")
    series, ylabel = plot_series(part)
    label = f"Part {part.number}: time against n"
    rows = [[name, f"{n:,}", f"{ms:.4g}"] for name, pts in series.items() for n, ms in sorted(pts)]
    img = Markup(f'<img alt="{_e(label)} (the table below gives its points)" '
                 f'src="data:image/png;base64,{base64.b64encode(png).decode()}">')
    return _figure(img, label, _table(f"{label}: {ylabel}", ["line", "n", "ms"], rows, "plot-table"), "plot")


# ---- a part --------------------------------------------------------------------------------------------

def _visible_failures(part: PartResult) -> list[CaseResult]:
    return [c for c in part.cases if c.status not in ("pass", "not-run") and not is_hidden(c)
            and not is_timed_case(c)]


def part_pictures(part: PartResult, *, plot: bool = True) -> Markup:
    """Every picture of one part of :func:`grader.render._common.student_view` (a fragment of HTML,
    the same in the HTML report and Gradescope's output): the first :data:`MAX_PICTURES` distinct
    races of its visible cases, Part 3's bank grids, the largest case of each of the first
    distinct wrong outputs, and with ``plot`` its time plot; ``""`` for none."""
    out: list[Markup] = []
    races: dict[tuple, CaseFinding] = {}
    for c in _visible_failures(part):
        for f in c.findings:
            if f.kind == "race" and f.other_thread is not None:
                races.setdefault((f.file, f.line, f.other_file, f.other_line, f.access), f)
    out += [race_timeline(f, key=f"p{part.number}-race{k}") for k, f in enumerate(list(races.values())[:MAX_PICTURES])]
    out.append(bank_grid(part, key=f"p{part.number}-banks"))
    wrong = [c for c in _visible_failures(part) if c.mismatch is not None and c.mismatch.bins]
    groups = group_findings(wrong)[:MAX_PICTURES]
    out += [mismatch_strip(max(g, key=lambda c: c.n), part, key=f"p{part.number}-wrong{k}")
            for k, g in enumerate(groups)]
    if plot:
        out.append(time_plot(part))
    return Markup("").join(x for x in out if x)


def picture_images(part: PartResult) -> list[dict[str, str]]:
    """The SVG pictures of :func:`part_pictures` (the time plot left out), each a standalone image
    for a format that shows images but no HTML (PrairieLearn's ``images``): ``{"label": its
    title, "url": "data:image/svg+xml;base64,..."}``, in order; [] for none. Their text equivalents
    are the report's words."""
    import base64
    import html
    import re
    images = []
    for svg in re.findall(r"<svg\b.*?</svg>", str(part_pictures(part, plot=False)), flags=re.S):
        title = re.search(r"<title[^>]*>(.*?)</title>", svg, flags=re.S)
        images.append({"label": html.unescape(title.group(1)) if title else f"Part {part.number}",
                       "url": "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()})
    return images
