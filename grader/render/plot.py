"""The time plot of a timed part: time against n, log-log, for the submission's kernel, the
reference solution, the device-to-device copy and CUB where they were timed (a GPU run), or the
estimated lower bounds of the submission and the reference (the emulator's roofline) with their
predicted times (:mod:`grader.grading.prediction`), where predicted.

:func:`time_plot_png` is pure (the PNG's bytes, for PrairieLearn's ``images`` and Gradescope's
HTML output); :func:`write_plots` is the one function here that writes files: one PNG per part
beside a report (``scangrade grade``, a batch's student folder). matplotlib is the ``report``
extra: without it there is no plot, and :func:`plot_unavailable` says why.
"""

from __future__ import annotations

import contextlib
import functools
import io
import multiprocessing
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from grader.core.results import PartResult, SubmissionResult

__all__ = ["PNG_SIGNATURE", "draw_plots_in", "drawn_apart", "plot_name", "plot_series", "plot_unavailable",
           "plotted_parts", "time_plot_png", "warm_up", "write_plots"]

#: The first bytes of every PNG file.
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def plot_unavailable() -> str | None:
    """None when plots can be drawn, else why not (matplotlib is not importable)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        return f"matplotlib is not installed ({exc}); pip install 'scangrade[report]'"
    return None


def plot_name(part: PartResult) -> str:
    """The plot's file name: ``<part key>-time.png``."""
    return f"{part.key}-time.png"


def plot_series(part: PartResult) -> tuple[dict[str, list[tuple[int, float]]], str]:
    """The lines of the part's plot (label -> (n, ms) points) and the y label; ``({}, "")`` for a
    part with nothing to plot (no analysis table, no roofline)."""
    if part.analysis is not None and part.analysis.rows:
        rows = part.analysis.rows
        return ({"your kernel": [(r.n, r.gpu_ms) for r in rows],
                 "reference solution": [(r.n, r.reference_ms) for r in rows if r.reference_ms],
                 "device copy (roofline)": [(r.n, r.copy_ms) for r in rows if r.copy_ms],
                 "CUB DeviceScan": [(r.n, r.cub_ms) for r in rows if r.cub_ms]}, "median time on the GPU (ms)")
    roof = part.roofline
    if roof is not None and roof.rows:
        lines = {"your kernel (estimated bound)": [(r.n, r.bound_ms) for r in roof.rows],
                 "reference solution (estimated bound)": [(r.n, r.reference_bound_ms) for r in roof.rows
                                                          if r.reference_bound_ms]}
        ylabel = f"ESTIMATED lower bound on a {roof.target} (ms)"
        pred = roof.prediction
        if pred is not None and pred.rows:
            lines[f"your kernel (PREDICTED on an {pred.gpu})"] = [(r.n, r.predicted_ms) for r in pred.rows]
            lines[f"reference solution (PREDICTED on an {pred.gpu})"] = [(r.n, r.reference_ms) for r in pred.rows
                                                                        if r.reference_ms]
            ylabel = f"ESTIMATED bound on a {roof.target}, PREDICTED time on an {pred.gpu} (ms)"
        return lines, ylabel
    return {}, ""


def plotted_parts(result: SubmissionResult) -> list[PartResult]:
    """The parts of ``result`` that have a plot: a timed part with an analysis table or a roofline."""
    return [p for p in result.parts if plot_series(p)[0]]


def _plot_key(part: PartResult, dpi: int) -> tuple | None:
    """What a part's plot is drawn from, ``(title, ylabel, series, dpi)``; None: nothing to plot."""
    lines, ylabel = plot_series(part)
    if not lines:
        return None
    series = tuple((label, tuple(sorted(pts))) for label, pts in lines.items())
    return (f"Part {part.number}: {part.title}", ylabel, series, dpi)


def time_plot_png(part: PartResult, *, dpi: int = 72) -> bytes | None:
    """The part's plot as PNG bytes, or None: nothing to plot, or no matplotlib. The same plot is
    drawn once: a batch puts it in several reports of one result (Gradescope's, the staff's and the
    student's files), and drawing it is most of what rendering them costs."""
    key = _plot_key(part, dpi)
    if key is None or plot_unavailable():
        return None
    return _drawn_png(*key)


#: Plots drawn in another process (:func:`draw_plots_in`), by their key, until first used here.
_DRAWN_ELSEWHERE: dict[tuple, bytes] = {}
_ELSEWHERE_LOCK = threading.Lock()


def draw_plots_in(result: SubmissionResult, submit: Callable) -> None:
    """Draw the plots of ``result``'s parts through ``submit`` (a
    :class:`concurrent.futures.ProcessPoolExecutor`'s: another process, with its own interpreter
    lock) and keep them for :func:`time_plot_png`, which then draws nothing. A batch grades many
    submissions in threads of one process, where drawing a plot holds that process's lock for
    most of a second. Nothing to plot, or no matplotlib: nothing is done.

    Raises:
        whatever the submitted call raises (a pool that broke: ``BrokenProcessPool``).
    """
    if plot_unavailable():
        return
    keys = [k for k in (_plot_key(p, 72) for p in plotted_parts(result)) if k is not None]
    futures = [(key, submit(_draw_png, *key)) for key in keys]
    for key, future in futures:
        png = future.result()
        with _ELSEWHERE_LOCK:
            _DRAWN_ELSEWHERE[key] = png


#: A batch of this many jobs or more draws its plots in a pool of processes
#: (:func:`drawn_apart`), one per this many jobs, at most :data:`PLOT_PROCESSES_MAX`.
PLOT_POOL_JOBS = 8
PLOT_PROCESSES_MAX = 4


@contextlib.contextmanager
def drawn_apart(reports: Callable[[SubmissionResult], Mapping], *, jobs: int | None) -> Iterator[Callable]:
    """``reports`` (a result's report files, as a batch renders them in its job threads) made to draw
    its plots in a pool of processes first (:func:`draw_plots_in`): the jobs are threads of one
    process, and a plot holds its interpreter lock for most of a second, so that at many jobs
    drawing would pace the batch. The pool (``spawn``: no copy of the threaded process) serves the
    block and ends with it. ``jobs`` None: as many as the cores; under :data:`PLOT_POOL_JOBS` jobs,
    or without matplotlib, ``reports`` itself. A pool that broke leaves each plot drawn in the
    calling thread, as without one."""
    from grader.host.resources import usable_cpus

    count = min(PLOT_PROCESSES_MAX, (jobs or usable_cpus()) // PLOT_POOL_JOBS)
    if count < 1 or plot_unavailable():
        yield reports
        return
    pool = ProcessPoolExecutor(max_workers=count, mp_context=multiprocessing.get_context("spawn"))

    def drawn(result: SubmissionResult) -> Mapping:
        try:
            draw_plots_in(result, pool.submit)
        except Exception:  # noqa: BLE001 - a pool that broke: the reports draw their plots here
            pass
        return reports(result)
    try:
        yield drawn
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@functools.lru_cache(maxsize=32)
def _drawn_png(title: str, ylabel: str, series: tuple, dpi: int) -> bytes:
    """The plot of ``series`` (``((label, ((n, y), ...)), ...)``), as :func:`time_plot_png` draws it:
    drawn elsewhere (:func:`draw_plots_in`) or now."""
    with _ELSEWHERE_LOCK:
        png = _DRAWN_ELSEWHERE.pop((title, ylabel, series, dpi), None)
    return png if png is not None else _draw_png(title, ylabel, series, dpi)


#: Held while this process draws a plot: matplotlib's caches (fonts, text layout) are shared by its
#: figures, and :func:`warm_up` draws in a thread of its own.
_DRAW_LOCK = threading.Lock()
_WARMED_UP = threading.Event()


def warm_up() -> None:
    """Start drawing a throwaway plot in a background thread, once per process, where matplotlib is
    installed: its import, its font cache (built on a machine's first run, from every font it
    finds) and its first text layout then happen while a grading runs (``scangrade grade``, whose
    threads wait on the parts' workers meanwhile), not after it, before the first time plot. The
    process does not end before the thread does."""
    import importlib.util

    if _WARMED_UP.is_set() or importlib.util.find_spec("matplotlib") is None:
        return
    _WARMED_UP.set()

    def draw() -> None:
        try:
            _draw_png("n", "ms", (("warm-up", ((1, 1.0), (1 << 20, 2.0))),), 72)
        except Exception:  # noqa: BLE001 - the plots drawn after the grading say what is wrong
            pass
    # Not a daemon: the interpreter waits for it before it finalizes. A daemon thread still inside
    # matplotlib then (a grading shorter than the warm-up, nothing to plot) crashed the process on
    # its way out.
    threading.Thread(target=draw, name="scangrade-plot-warm-up", daemon=False).start()


def _draw_png(title: str, ylabel: str, series: tuple, dpi: int) -> bytes:
    """Draw the plot of ``series`` with matplotlib: PNG bytes."""
    with _DRAW_LOCK:
        return _draw_png_now(title, ylabel, series, dpi)


#: The most characters a line of the plot's y-axis label and title holds: longer ones are wrapped, so
#: that the emulator's label ("ESTIMATED lower bound on a NVIDIA H100 80GB HBM3 (ms)") is not cut off.
_YLABEL_CHARS, _TITLE_CHARS = 36, 72


def _draw_png_now(title: str, ylabel: str, series: tuple, dpi: int) -> bytes:
    fig = _figure(title, ylabel, series)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return buf.getvalue()


def _figure(title: str, ylabel: str, series: tuple):
    """The plot of ``series`` as a matplotlib ``Figure`` (6.4 x 4 inches), its long labels wrapped."""
    import textwrap

    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0), layout="constrained")
    ax = fig.add_subplot()
    for label, pts in series:
        if pts:
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="o", label=label,
                    linestyle="--" if label.startswith(("device copy", "CUB")) or "bound" in label else "-")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("n (elements)")
    ax.set_ylabel("\n".join(textwrap.wrap(ylabel, _YLABEL_CHARS)))
    ax.set_title("\n".join(textwrap.wrap(title, _TITLE_CHARS)), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def write_plots(result: SubmissionResult, folder: Path) -> list[Path]:
    """Write each plotted part's PNG (:func:`plot_name`) into ``folder`` (created); the paths written,
    [] without matplotlib or without a plotted part.

    Raises:
        OSError: the folder or a file cannot be written.
    """
    written = []
    for part in plotted_parts(result):
        png = time_plot_png(part)
        if png is None:
            continue
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / plot_name(part)
        path.write_bytes(png)
        written.append(path)
    return written
