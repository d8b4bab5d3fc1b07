"""The litmus suite's table: one row per test (kernel), with its file, launch shape, source, the
model's verdict and what decides it. tests/backends/test_litmus.py runs every row on the emulator's checks;
``render_markdown`` is the table of docs/emulator.md ("The litmus suite"), which that test compares
with the docs (``python -m tests.litmus.table`` writes it there).

Verdicts: ``race``: the checks must report a finding of kind ``race`` naming the two lines of one of
the row's ``lines`` pairs (markers ``// LINE:name`` in the kernel file), in at least one thread order
(the grader's rule: a case fails on a finding of any of its checked runs).
``clean``: no finding in any order, and the outcome (``allowed``, given the results ``r`` = RES(0..)
and the final shared locations ``m`` = X, Y, Z, F, D...) is one the model allows.
``stale``: no data race, but the model lets the read get an older value: the checks must report a
``stale-read`` naming one of the row's ``lines`` pairs and give the read that value (the outcome
``older`` shows it) in at least one order; a grader fails a case on it only where the output is
then wrong (grader/grading/case/run.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent.parent / "docs" / "emulator.md"
WORDS = 64  # ints of `out`: locations 0..31, results 32..47, 64-bit words from 48
RESULTS = 32
X, Y, Z, F, D = 0, 1, 2, 3, 4

HERD = "herdtools7 catalogue/ptx/tests/{} (3753fa29f)"
MIT = "herdtools7 catalogue/tutorial/tests/{}"
PTXMM = "Lustig et al. 2019, {}"
MG = "Merrill & Garland 2016, §4"
PTX = "PTX ISA, Memory Consistency Model, {}"

Allowed = Callable[[np.ndarray, np.ndarray], bool]


@dataclass(frozen=True)
class Litmus:
    name: str
    file: str
    grid: int
    block: int
    source: str
    verdict: str  # "race", "stale" or "clean"
    why: str
    lines: tuple[tuple[str, str], ...] = ()  # race, stale: acceptable pairs of line markers, either order
    allowed: Allowed | None = None  # clean: the outcomes the model allows (r: results, m: locations)
    older: Allowed | None = None  # stale: the outcome of the read given the older value


def _any(r: np.ndarray, m: np.ndarray) -> bool:
    return True


def _got_one(r: np.ndarray, m: np.ndarray) -> bool:
    return r[0] == 1


def _mp(name: str, source: str, verdict: str, why: str, data: str = "mp_data", *, block: int = 1,
        grid: int = 2) -> Litmus:
    pair = ((f"{data}_load", f"{data}_store"),) if verdict == "race" else ()
    return Litmus(name, "mp.cu", grid, block, source, verdict, why, pair, _got_one if verdict == "clean" else None)


DATA_RACE = "data race on D (plain, unordered)"
STALE = "stale D allowed after F was seen (all strong: no data race)"

ROWS: tuple[Litmus, ...] = (
    _mp("mp_plain_fence_both", HERD.format("mp+membar.gls.litmus"), "clean", "fence + strong flag: release/acquire patterns"),
    _mp("mp_plain_fence_writer", HERD.format("mp.litmus") + ", writer fence", "race", "no acquire: " + DATA_RACE),
    _mp("mp_plain_fence_reader", HERD.format("mp.litmus") + ", reader fence", "race", "no release: " + DATA_RACE),
    _mp("mp_plain_no_fence", HERD.format("mp.litmus"), "race", DATA_RACE),
    _mp("mp_volatile_fence_both", HERD.format("mp+membar.gls.litmus") + ", volatile", "clean",
        "release/acquire patterns", "mp_vdata"),
    _mp("mp_volatile_fence_writer", HERD.format("mp.litmus") + ", volatile, writer fence", "race",
        "no acquire: " + STALE, "mp_vdata"),
    _mp("mp_volatile_fence_reader", HERD.format("mp.litmus") + ", volatile, reader fence", "race",
        "no release: " + STALE, "mp_vdata"),
    _mp("mp_volatile_no_fence", HERD.format("mp.litmus") + ", volatile", "race", STALE, "mp_vdata"),
    _mp("mp_atomic_fence_both", MG + "; " + PTX.format("§8.7"), "clean",
        "fence + atomicExch / atomicAdd(&F,0) + fence: release/acquire patterns"),
    _mp("mp_atomic_fence_writer", MG + ", no reader fence", "race", "a CUDA atomic acquires nothing: " + DATA_RACE),
    _mp("mp_atomic_fence_reader", MG + ", no writer fence", "race", "a CUDA atomic releases nothing: " + DATA_RACE),
    _mp("mp_atomic_no_fence", MG + ", no fences", "race", "relaxed atomics order nothing: " + DATA_RACE),
    _mp("mp_fence_block_both", HERD.format("mp+membar.ctas.litmus"), "race",
        "fence.cta does not hold the other block: " + DATA_RACE),
    _mp("mp_fence_block_writer", MIT.format("mp-mit-scopes+fcta+fgpu.litmus"), "race",
        "writer's fence.cta not morally strong with the reader: " + DATA_RACE),
    _mp("mp_fence_gpu_sys", MIT.format("mp-mit-scopes+fgpu+fsys.litmus"), "clean", "gpu and sys fences hold both"),
    _mp("mp_warps_fence_block", HERD.format("mp+membar.ctas.litmus") + ", one block, two warps", "clean",
        "fence.cta holds both warps", block=64, grid=1),
    _mp("mp_shared_fence_both", HERD.format("mp+membar.ctas.litmus") + ", shared memory, two warps", "clean",
        "fence.cta + volatile shared flag: release/acquire patterns in the block", block=64, grid=1),
    _mp("mp_shared_fence_writer", HERD.format("mp.litmus") + ", shared memory, writer fence.cta", "race",
        "no acquire: " + DATA_RACE, "mps_data", block=64, grid=1),
    _mp("mp_shared_no_fence", HERD.format("mp.litmus") + ", shared memory, two warps", "race", DATA_RACE,
        "mps_data", block=64, grid=1),
    _mp("mp_release_acquire", PTXMM.format("Fig. 5") + "; " + PTX.format("§8.7"), "clean",
        "release store / acquire load synchronize"),
    _mp("mp_relaxed_builtin", PTXMM.format("Fig. 5") + ", relaxed", "race", "relaxed flag: " + DATA_RACE),
    _mp("mp_release_relaxed", PTXMM.format("Fig. 5") + ", relaxed load", "race", "release, no acquire: " + DATA_RACE),
    Litmus("sb_plain", "sb_lb.cu", 2, 1, HERD.format("sb.litmus"), "race", "plain X, Y: data race",
           (("sbp_x_store", "sbp_x_load"), ("sbp_y_store", "sbp_y_load"))),
    Litmus("sb_atomics", "sb_lb.cu", 2, 1, HERD.format("sb.litmus") + ", atomics", "clean",
           "morally strong; (0,0) allowed and recorded, not a bug", allowed=_any),
    Litmus("sb_fenced", "sb_lb.cu", 2, 1, PTXMM.format("Fig. 6") + "; " + HERD.format("sb.litmus"), "clean",
           "fence.sc.gpu both: (0,0) forbidden", allowed=lambda r, m: not (r[0] == 0 and r[1] == 0)),
    Litmus("lb_plain", "sb_lb.cu", 2, 1, HERD.format("ld.litmus"), "race", "plain X, Y: data race",
           (("lbp_x_load", "lbp_x_store"), ("lbp_y_load", "lbp_y_store"))),
    Litmus("lb_volatile", "sb_lb.cu", 2, 1, HERD.format("ld.litmus") + ", volatile; " + PTXMM.format("Fig. 8"), "clean",
           "strong, no dependency: every outcome allowed", allowed=_any),
    Litmus("corr", "coherence.cu", 2, 1, PTXMM.format("Fig. 9a") + "; " + HERD.format("coRR.litmus"), "clean",
           "strong: (1,0) forbidden", allowed=lambda r, m: not (r[0] == 1 and r[1] == 0)),
    Litmus("corr_plain", "coherence.cu", 2, 1, HERD.format("coRR.litmus"), "race", "weak ld/st: data race",
           (("corrp_store", "corrp_load1"), ("corrp_store", "corrp_load2"))),
    Litmus("coww", "coherence.cu", 1, 1, PTXMM.format("Fig. 9d"), "clean", "one thread: final X = 2",
           allowed=lambda r, m: m[X] == 2),
    Litmus("corw", "coherence.cu", 2, 1, PTXMM.format("Fig. 9b"), "clean", "strong: r=1 with final X=1 forbidden",
           allowed=lambda r, m: not (r[0] == 1 and m[X] == 1)),
    Litmus("cowr", "coherence.cu", 2, 1, PTXMM.format("Fig. 9c"), "clean", "strong: final X=2 with r=1 forbidden",
           allowed=lambda r, m: not (m[X] == 2 and r[0] == 1)),
    Litmus("iriw_plain", "chains.cu", 4, 1, HERD.format("iriw.litmus"), "race", "weak ld/st: data race",
           (("iriwp_x_store", "iriwp_x_load1"), ("iriwp_x_store", "iriwp_x_load3"),
            ("iriwp_y_store", "iriwp_y_load1"), ("iriwp_y_store", "iriwp_y_load3"))),
    Litmus("iriw_fenced", "chains.cu", 4, 1, HERD.format("iriw.litmus") + ", volatile + fence.sc", "clean",
           "Fence-SC: readers agree", allowed=lambda r, m: not (r[1] == 0 and r[3] == 0)),
    Litmus("isa2_fenced", "chains.cu", 3, 1, PTXMM.format("Fig. 12, §3.4.4") + "; " + PTX.format("§8.8.5"), "clean",
           "causality composes link by link", allowed=_got_one),
    Litmus("isa2_middle_unfenced", "chains.cu", 3, 1, PTXMM.format("Fig. 12") + ", middle fence removed", "race",
           "chain broken: " + DATA_RACE, (("isa2_data_load", "isa2_data_store"),)),
    Litmus("wrc_fenced", "chains.cu", 3, 1, PTXMM.format("§3.4.4") + "; " + PTX.format("§8.9.6"), "clean",
           "observation then base causality", allowed=_got_one),
    Litmus("wrc_middle_unfenced", "chains.cu", 3, 1, PTXMM.format("§3.4.4") + ", middle fence removed", "stale",
           "stale X allowed after Y was seen (all strong: no data race); the older value is given",
           (("wrc_x_load", "wrc_x_store"),), older=lambda r, m: r[0] == 0),
    Litmus("rmw_poll", "rmw.cu", 2, 1, PTX.format("§8.9.3") + "; " + PTXMM.format("§3.5.3"), "clean",
           "atomics only; atomicAdd(&X,0) publishes nothing",
           allowed=lambda r, m: r[0] in (0, 2) and m[X] == 2),
    Litmus("rmw_poll_cas", "rmw.cu", 2, 1, PTX.format("§8.9.3") + ", failed CAS", "clean",
           "atomics only; a failed CAS publishes nothing", allowed=lambda r, m: r[0] in (0, 2) and m[X] == 2),
    Litmus("lookback_packed64", "rmw.cu", 4, 1, MG + ", packed status|prefix word", "clean",
           "one 64-bit atomic word carries flag and value", allowed=lambda r, m: list(r[:4]) == [1, 3, 6, 10]),
    Litmus("lookback_split_fenced", "rmw.cu", 4, 1, MG, "clean", "fences on both sides",
           allowed=lambda r, m: list(r[:4]) == [1, 3, 6, 10]),
    Litmus("lookback_split_unfenced", "rmw.cu", 4, 1, MG + ", fences removed", "race",
           "plain prefix unordered: data race", (("lbs_value_load", "lbs_value_store"),)),
    Litmus("atomic_add_two_blocks", "rmw.cu", 2, 1, PTX.format("§8.6"), "clean", "gpu-scope atomics: morally strong",
           allowed=lambda r, m: m[X] == 2),
    Litmus("atomic_add_block_two_blocks", "rmw.cu", 2, 1, PTX.format("§8.6.1") + "; " + PTXMM.format("§3.3"), "race",
           "atom.cta across blocks: not morally strong", (("aab_block0", "aab_block1"),)),
    Litmus("atomic_add_block_one_block", "rmw.cu", 1, 64, PTX.format("§8.6"), "clean", "atom.cta within the block",
           allowed=lambda r, m: m[X] == 2),
    Litmus("plain_load_vs_atomic_exch", "rmw.cu", 2, 1, PTX.format("§8.6.1"), "race", "plain load vs atomic: data race",
           (("plx_load", "plx_exch"),)),
    Litmus("poll_barrier_unfenced", "barrier.cu", 2, 32, PTX.format("§8.7, §8.8.4") + "; ptx.als", "race",
           "acquire is per thread: data race on D", (("pb_data_load", "pb_data_store"),)),
    Litmus("poll_fence_barrier", "barrier.cu", 2, 32, PTX.format("§8.7, §8.8.4") + "; ptx.als", "clean",
           "fence after the poll, then the barrier", allowed=_got_one),
    Litmus("barrier_fence_flag", "barrier.cu", 2, 32, PTX.format("§8.8.4, §8.8.5"), "clean",
           "barrier, then thread 0's fence and flag", allowed=_got_one),
    Litmus("barrier_flag_unfenced", "barrier.cu", 2, 32, PTX.format("§8.8.4") + "; ptx.als", "race",
           "barrier is a cta-scope release only: data race on D", (("bf_data_load", "bf_data_store"),)),
)

BY_NAME = {row.name: row for row in ROWS}
FILES = tuple(sorted({row.file for row in ROWS}))

BEGIN = "<!-- litmus table: generated by `python -m tests.litmus.table`; tests/backends/test_litmus.py checks it -->"
END = "<!-- end of litmus table -->"


def line_of(file: str, marker: str) -> int:
    """The line of ``// LINE:marker`` in the kernel file ``file``."""
    for n, line in enumerate((HERE / file).read_text().splitlines(), start=1):
        if re.search(rf"LINE:{re.escape(marker)}\b", line):
            return n
    raise AssertionError(f"no LINE:{marker} in {file}")


def render_markdown() -> str:
    """The docs' table, one row per test."""
    out = [BEGIN, "", "| test | file | grid x block | verdict | why | source |", "| --- | --- | --- | --- | --- | --- |"]
    out += [f"| `{r.name}` | {r.file} | {r.grid} x {r.block} | {r.verdict} | {r.why} | {r.source} |" for r in ROWS]
    return "\n".join(out + ["", END])


def docs_table() -> str | None:
    """The table as docs/emulator.md has it (None if the markers are missing)."""
    text = DOCS.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        return None
    return text[text.index(BEGIN):text.index(END) + len(END)]


def write_docs() -> None:
    text = DOCS.read_text(encoding="utf-8")
    old = docs_table()
    assert old is not None, f"{DOCS} has no litmus table markers"
    DOCS.write_text(text.replace(old, render_markdown()), encoding="utf-8")


if __name__ == "__main__":
    write_docs()
