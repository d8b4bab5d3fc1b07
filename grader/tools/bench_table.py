"""The bench's table: its rows (:class:`BenchRow`, :class:`BenchResult`), the names of the
implementations it times, and their forms for people and files: GB/s and the share of the copy's
bandwidth (:func:`fill_rates`), a text or Markdown table, JSON, a PNG plot (:func:`throughput_panel`,
also drawn by the PrairieLearn renderer). Timing the implementations is :mod:`grader.tools.bench`'s job.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

#: Implementation names, in table order.
COPY, CUB, TORCH, CUPY, PYCUDA_SCAN = ("copy (D2D, roofline)", "CUB DeviceScan::ExclusiveSum", "torch.cumsum",
                                       "cupy.cumsum", "PyCUDA InclusiveScanKernel")


@dataclass
class BenchRow:
    """One implementation at one size and dtype.

    Attributes:
        n: elements scanned.  dtype: ``int32`` or ``float32``.  impl: the implementation's name.
        median_ms: median time of the timed runs (ms), None when it could not be timed.
        spread: (90th - 10th percentile) / median of the timed runs.
        runs: timed runs.
        gbps: effective bandwidth, ``2 * n * itemsize`` bytes / median time (GB/s, 10^9 bytes/s).
        copy_fraction: gbps / the copy's gbps at the same n and dtype (1.0 for the copy itself).
        verified: the output matched the reference scan (the copy: copied bytes equal the input).
        note: why a row failed or how it was run.
    """

    n: int
    dtype: str
    impl: str
    median_ms: float | None
    spread: float = 0.0
    runs: int = 0
    gbps: float | None = None
    copy_fraction: float | None = None
    verified: bool = False
    note: str = ""


@dataclass
class BenchResult:
    """A whole bench run: the rows, what was skipped, and where it ran.

    Attributes:
        rows: every timed (or failed) implementation, by dtype, then n, then table order.
        skipped: implementations not run at all, and why (``torch.cumsum: not importable``).
        device: GPU name, compute capability, driver and CUDA versions (from the backend).
        command: the command line.  date: ISO 8601 time of the run (UTC).
        method: warm-up, runs, flush bytes.
    """

    rows: list[BenchRow] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    device: dict = field(default_factory=dict)
    command: str = ""
    date: str = ""
    method: dict = field(default_factory=dict)

    @property
    def all_verified(self) -> bool:
        """True when every row's output matched the reference."""
        return all(r.verified for r in self.rows)


def _rate(n: int, dtype: str, ms: float) -> float:
    return 2 * n * np.dtype(dtype).itemsize / (ms * 1e-3) / 1e9


def fill_rates(rows: list[BenchRow]) -> None:
    """Set every row's ``gbps`` (GB/s from ``2 * n * itemsize`` bytes and the median ms) and
    ``copy_fraction`` (relative to the copy row of the same n and dtype), in place."""
    copies = {(r.n, r.dtype): r for r in rows if r.impl == COPY and r.median_ms}
    for r in rows:
        if not r.median_ms:
            continue
        r.gbps = _rate(r.n, r.dtype, r.median_ms)
        copy = copies.get((r.n, r.dtype))
        r.copy_fraction = r.gbps / copy.gbps if copy is not None and copy.gbps else None


def size_label(n: int) -> str:
    """n as the table shows it: ``2^k`` for a power of two, else its digits."""
    k = n.bit_length() - 1
    return f"2^{k}" if n == 1 << k else str(n)


def format_table(rows: Sequence[BenchRow]) -> str:
    """The rows as a fixed-width text table: n, dtype, implementation, median (ms), GB/s,
    % of copy bandwidth, and whether the output was verified (with the note of failed rows)."""
    head = f"{'n':>6} {'dtype':<7} {'implementation':<30} {'median ms':>10} {'GB/s':>8} {'% copy':>7}  verified"
    lines = [head, "-" * len(head)]
    last = None
    for r in rows:
        if last is not None and (r.n, r.dtype) != last:
            lines.append("")
        last = (r.n, r.dtype)
        ms = f"{r.median_ms:.4f}" if r.median_ms else "-"
        gbps = f"{r.gbps:.0f}" if r.gbps else "-"
        pct = f"{100 * r.copy_fraction:.1f}" if r.copy_fraction else "-"
        ok = "yes" if r.verified else "NO" + (f" ({r.note})" if r.note else "")
        lines.append(f"{size_label(r.n):>6} {r.dtype:<7} {r.impl:<30} {ms:>10} {gbps:>8} {pct:>7}  {ok}")
    return "\n".join(lines)


def format_markdown(rows: Sequence[BenchRow]) -> str:
    """The rows as a Markdown table (for ``docs/benchmarks.md``)."""
    lines = ["| n | dtype | implementation | median ms | GB/s | % of copy | verified |",
             "| --- | --- | --- | ---: | ---: | ---: | --- |"]
    for r in rows:
        lines.append(f"| {size_label(r.n)} | {r.dtype} | {r.impl} | {r.median_ms:.4f} | {r.gbps:.0f} | "
                     f"{100 * r.copy_fraction:.1f} | {'yes' if r.verified else 'NO'} |" if r.median_ms and
                     r.copy_fraction else f"| {size_label(r.n)} | {r.dtype} | {r.impl} | - | - | - | "
                                          f"{'yes' if r.verified else 'NO ' + r.note} |")
    return "\n".join(lines)


def to_json(result: BenchResult) -> str:
    """The result as JSON: ``{"version", "device", "date", "command", "method", "skipped", "rows"}``
    with each row's fields as in :class:`BenchRow` (times in ms, bandwidth in GB/s)."""
    doc = {"version": 1, "device": result.device, "date": result.date, "command": result.command,
           "method": result.method, "skipped": result.skipped, "all_verified": result.all_verified,
           "rows": [dataclasses.asdict(r) for r in result.rows]}
    return json.dumps(doc, indent=2) + "\n"


def throughput_panel(ax, lines: dict[str, Sequence[tuple[int, float]]], *, title: str,
                     dashed: Iterable[str] = ()) -> None:
    """Draw effective bandwidth against n on one matplotlib ``Axes``: one line per entry of ``lines``
    (label -> ``(n, GB/s)`` points; an empty one is left out), n on a log-2 axis, the labels in
    ``dashed`` drawn dashed (a roofline such as the copy). Used by the bench's plot and by the
    PrairieLearn renderer's throughput image."""
    dashed = set(dashed)
    for label, pts in lines.items():
        if pts:
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="o", linestyle="--" if label in dashed else "-", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("n (elements)")
    ax.set_ylabel("effective GB/s (2·n·sizeof / time)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def write_plot(result: BenchResult, path: Path) -> str | None:
    """A PNG of effective bandwidth (GB/s) against n (log-2 axis), one panel per dtype.

    Returns:
        None when written, else why not (matplotlib is not importable).
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return f"matplotlib is not importable ({exc})"
    dtypes = list(dict.fromkeys(r.dtype for r in result.rows))
    fig, axes = plt.subplots(1, len(dtypes), figsize=(6.5 * len(dtypes), 4.8), squeeze=False)
    for ax, dtype in zip(axes[0], dtypes):
        impls = list(dict.fromkeys(r.impl for r in result.rows if r.dtype == dtype))
        throughput_panel(ax, {impl: [(r.n, r.gbps) for r in result.rows
                                     if r.dtype == dtype and r.impl == impl and r.gbps] for impl in impls},
                         title=f"{dtype} scan", dashed={COPY})
    fig.suptitle(f"scangrade bench — {result.device.get('device', '?')} — {result.date[:10]}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return None
