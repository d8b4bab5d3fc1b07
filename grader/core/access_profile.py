"""The memory-access profile of a kernel, counted by the CPU emulator: shared-memory bank
conflicts, global-memory sectors per request, and the work and span of each launch in steps.

Both depend only on the addresses the 32 lanes of a warp touch in one instruction, so the counts
are the same on a laptop as on any GPU with 32 banks of 4 bytes and 32-byte sectors (every NVIDIA
GPU since Maxwell). The runtime's side is ``grader/backends/emulator/runtime/profile/profile.h`` (what is
counted, exactly); docs/emulator.md ("What the profile counts") maps the numbers to Nsight Compute.

Steps measure how parallel a launch is (the work-span model: Blelloch, "Prefix sums and their
applications", 1990; Cormen et al., "Introduction to Algorithms", ch. 27). A *step* is one memory
operation of one thread: a plain or volatile load or store of any address (shared, global, a
``__device__`` variable, a local whose address escaped) or an atomic, as the host compiler emits them.
Per launch, over its profiled blocks: ``span_steps`` is the most steps one thread made (the critical
path's memory operations: O(log n) for a tree scan of n elements, O(n) for a serial loop),
``work_steps`` their sum over all threads, ``barriers`` the most ``__syncthreads()`` one block
passed. A plan of several launches adds them up (its launches run one after another). Bytes moved
to and from global memory are ``32 * global_sectors``.

Public API: :class:`AccessSite`, :class:`LaunchSteps`, :class:`MemoryProfile`,
:func:`parse_profile`, :func:`score_profile`, :func:`not_parallel`, :func:`report_lines`: data and
arithmetic only, importing no backend (the emulator backend builds a :class:`MemoryProfile` with
:func:`parse_profile`). Running the profile is :mod:`grader.grading.profiling`; the fields a result
keeps are :class:`grader.core.performance.Profile`'s (docs/results.md, "Profile").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

__all__ = ["AccessSite", "LaunchSteps", "MemoryProfile", "not_parallel", "parse_profile", "report_lines",
           "score_profile"]


@dataclass(frozen=True)
class AccessSite:
    """The accesses of one source line of one kernel to one memory space, loads or stores.

    Attributes:
        kernel: the kernel's name.
        file, line: the source line (``None`` when the address could not be resolved).
        space: ``"shared"`` or ``"global"``.
        store: True for stores, False for loads.
        size: bytes per lane per access (1, 2, 4, 8 or 16).
        requests: warp-wide instructions (one per warp per execution).
        wavefronts: shared: the wavefronts those requests took (``ideal_wavefronts`` plus the
            conflicts); 0 for global.
        ideal_wavefronts: shared: the wavefronts without bank conflicts (one per request, two for
            8-byte and four for 16-byte accesses of a full warp).
        worst_degree: shared: the largest n-way bank conflict of one request (1: none).
        worst_stride: shared: in that request, the bytes between the addresses of two neighbouring
            active lanes.
        sectors: global: the distinct 32-byte sectors the requests touched, summed over requests.
        ideal_sectors: global: ``ceil(active lanes * size / 32)`` summed over requests.
        bytes: global: ``active lanes * size`` summed over requests.
        worst_words: shared: the request of ``worst_degree``, lane by lane (32 entries): the 4-byte
            word the lane accessed (its first word, for an access of 8 or 16 bytes), numbered so that
            its bank is the number mod 32 and lanes of one number share a word (a broadcast); -1
            for a lane that took no part. Empty where not recorded (global memory).
    """

    kernel: str
    file: str | None
    line: int | None
    space: str
    store: bool
    size: int
    requests: int
    wavefronts: int = 0
    ideal_wavefronts: int = 0
    worst_degree: int = 0
    worst_stride: int = 0
    sectors: int = 0
    ideal_sectors: int = 0
    bytes: int = 0
    worst_words: tuple[int, ...] = ()

    @property
    def moved_bytes(self) -> int:
        """Global: the bytes this line's requests move at least (see :attr:`MemoryProfile.moved_bytes`):
        the fewest of 32 times the sectors they touched, 32 times the sectors their bytes fill, and
        their bytes."""
        return min(32 * self.sectors, 32 * self.ideal_sectors, self.bytes or 32 * self.ideal_sectors)

    @property
    def conflict_wavefronts(self) -> int:
        """Extra wavefronts caused by bank conflicts (Nsight Compute's l1tex__data_bank_conflicts)."""
        return self.wavefronts - self.ideal_wavefronts

    @property
    def where(self) -> str:
        """``file:line``, or ``"an unknown line"``."""
        return f"{self.file}:{self.line}" if self.file else "an unknown line"

    def describe(self) -> str:
        """One line for a report, e.g. ``"line 23: 16-way bank conflict (shared load, neighbouring
        lanes 16 words (64 bytes) apart; 480 of 510 wavefronts are conflicts)"``."""
        what = f"shared {'store' if self.store else 'load'}"
        where = f"line {self.line}" if self.line is not None else "an unknown line"
        stride = abs(self.worst_stride)
        apart = f"{stride // 4} words ({stride} bytes)" if stride % 4 == 0 else f"{stride} bytes"
        return (f"{where}: {self.worst_degree}-way bank conflict ({what}, neighbouring lanes {apart} apart; "
                f"{self.conflict_wavefronts} of {self.wavefronts} wavefronts are conflicts)")


@dataclass(frozen=True)
class LaunchSteps:
    """The work and span of one launch, in steps (memory operations of a thread; see the module's
    docstring), over its profiled blocks.

    Attributes:
        kernel: the kernel's name.
        span_steps: the most steps one thread made.
        work_steps: the steps of all threads together.
        barriers: the most barriers (``__syncthreads()`` and its variants) one block passed.
        blocks: the blocks profiled.
    """

    kernel: str
    span_steps: int
    work_steps: int
    barriers: int
    blocks: int


@dataclass(frozen=True)
class MemoryProfile:
    """The profile of the profiled blocks of every launch between start and take.

    Attributes:
        sites: one :class:`AccessSite` per (kernel, source line, space, load/store), in kernel,
            line order.
        blocks: how many blocks of each launch were profiled (0: all).
        launches: one :class:`LaunchSteps` per launch, in launch order (empty: none counted).
    """

    sites: tuple[AccessSite, ...] = ()
    blocks: int = 1
    launches: tuple[LaunchSteps, ...] = ()

    @property
    def span_steps(self) -> int:
        """Steps on the critical path of the launches: the sum of their spans (they run one after
        another)."""
        return sum(s.span_steps for s in self.launches)

    @property
    def work_steps(self) -> int:
        """Steps of every thread of every launch (profiled blocks)."""
        return sum(s.work_steps for s in self.launches)

    @property
    def barriers(self) -> int:
        """Barriers on the critical path: the sum over launches of the most one block passed."""
        return sum(s.barriers for s in self.launches)

    @property
    def shared_requests(self) -> int:
        """Shared-memory load and store requests (warp-wide instructions)."""
        return sum(s.requests for s in self._shared())

    def _shared(self) -> list[AccessSite]:
        return [s for s in self.sites if s.space == "shared"]

    def _global(self) -> list[AccessSite]:
        return [s for s in self.sites if s.space == "global"]

    @property
    def wavefronts(self) -> int:
        """Shared-memory wavefronts of all requests."""
        return sum(s.wavefronts for s in self._shared())

    @property
    def ideal_wavefronts(self) -> int:
        """Shared-memory wavefronts the same requests would take without bank conflicts."""
        return sum(s.ideal_wavefronts for s in self._shared())

    @property
    def conflict_wavefronts(self) -> int:
        """Extra shared-memory wavefronts caused by bank conflicts (0: conflict-free)."""
        return self.wavefronts - self.ideal_wavefronts

    @property
    def global_requests(self) -> int:
        """Global-memory load and store requests (warp-wide instructions)."""
        return sum(s.requests for s in self._global())

    @property
    def global_sectors(self) -> int:
        """32-byte sectors of all global-memory requests."""
        return sum(s.sectors for s in self._global())

    @property
    def moved_bytes(self) -> int:
        """The global bytes the requests move at least, for the roofline (:mod:`grader.grading.analysis`):
        per source line, the fewest of 32 times the sectors its requests touched, 32 times the
        sectors their bytes fill, and their bytes (two requests that each touch every other word of
        the same sectors, a thread's ``in[2i]`` and ``in[2i+1]``, count those sectors once; 32 lanes
        reading one word, one sector, as the L1 serves them; one thread copying 16 bytes a request,
        as Part 5's emulated bulk copy does, its bytes, not a sector a request)."""
        return sum(s.moved_bytes for s in self._global())

    @property
    def ideal_sectors_per_request(self) -> float | None:
        """The fewest sectors the same requests could touch (their bytes packed), per request; None
        without global accesses."""
        return sum(s.ideal_sectors for s in self._global()) / self.global_requests if self.global_requests else None

    @property
    def sectors_per_request(self) -> float | None:
        """Global sectors per request (4 for 32 coalesced 4-byte lanes, 32 for a stride of 32 bytes
        or more); None without global accesses."""
        return self.global_sectors / self.global_requests if self.global_requests else None

    @property
    def worst(self) -> AccessSite | None:
        """The shared-memory site with the most conflict wavefronts (ties: the higher degree), or
        None when no access conflicts."""
        conflicted = [s for s in self._shared() if s.conflict_wavefronts > 0]
        if not conflicted:
            return None
        return max(conflicted, key=lambda s: (s.conflict_wavefronts, s.worst_degree, -(s.line or 0)))

    @property
    def worst_request(self) -> AccessSite | None:
        """The shared-memory site whose recorded request (:attr:`AccessSite.worst_words`) a report
        draws: :attr:`worst`, or, where no access conflicts, the site with the most requests (its
        first request, conflict-free); None without a recorded shared request."""
        worst = self.worst
        if worst is not None and worst.worst_words:
            return worst
        recorded = [s for s in self._shared() if s.worst_words]
        return max(recorded, key=lambda s: (s.worst_degree, s.requests, -(s.line or 0))) if recorded else None

    def summary(self) -> str:
        """The report's lines: the conflict wavefronts, the worst line, sectors per request."""
        spr = self.sectors_per_request
        head = (f"shared memory: {self.conflict_wavefronts} bank-conflict wavefronts of {self.wavefronts} "
                f"(ideal {self.ideal_wavefronts})")
        worst = self.worst
        lines = [head + ("; conflict-free" if worst is None else f"; worst {worst.describe()}")]
        if spr is not None:
            lines.append(f"global memory: {spr:.2f} sectors per request, ideal {self.ideal_sectors_per_request:.2f} "
                         f"({self.global_sectors} sectors, {self.global_requests} requests)")
        return "\n".join(lines)


def parse_profile(text: str, resolve: Callable[[Sequence[int]], dict[int, tuple[str, int] | None]], *,
                  blocks: int = 1) -> MemoryProfile:
    """A :class:`MemoryProfile` from the runtime's ``sg_profile_take`` text.

    Args:
        text: tab-separated lines: one per launch, ``=``, kernel, span, work, barriers, profiled
            blocks (:class:`LaunchSteps`); one per (kernel, program point): kernel,
            ``@<hex pc offset>``, ``s``/``g``, store (0/1), size, requests, wavefronts, ideal
            wavefronts, worst degree, worst stride, sectors, ideal sectors, bytes and (a runtime
            of this version) the worst request's words (:attr:`AccessSite.worst_words`: 32
            comma-separated numbers, ``-`` for an inactive lane). Malformed lines are skipped.
        resolve: maps code offsets to (file, line) (:meth:`EmulatorModule.resolve`).
        blocks: recorded on the result.
    """
    rows = []
    launches = []
    for raw in text.splitlines():
        cols = raw.split("\t")
        if len(cols) == 6 and cols[0] == "=":
            try:
                launches.append(LaunchSteps(cols[1], *(int(c) for c in cols[2:])))
            except ValueError:
                pass
            continue
        if len(cols) not in (13, 14) or not cols[1].startswith("@"):
            continue
        try:
            nums = [int(c) for c in cols[3:13]]
            pc = int(cols[1][1:], 16)
            words = _words(cols[13]) if len(cols) == 14 else ()
        except ValueError:
            continue
        rows.append((cols[0], pc, "shared" if cols[2] == "s" else "global", nums, words))
    where = resolve(sorted({r[1] for r in rows})) if rows else {}
    merged: dict[tuple, AccessSite] = {}
    for kernel, pc, space, (store, size, req, wf, ideal, deg, stride, sec, isec, nbytes), words in rows:
        file, line = where.get(pc) or (None, None)
        key = (kernel, file, line, space, bool(store))
        site = AccessSite(kernel=kernel, file=file, line=line, space=space, store=bool(store), size=size,
                          requests=req, wavefronts=wf, ideal_wavefronts=ideal, worst_degree=deg,
                          worst_stride=stride, sectors=sec, ideal_sectors=isec, bytes=nbytes, worst_words=words)
        old = merged.get(key)
        if old is not None:  # several program points of one line (unrolled loops, inlined helpers)
            worst = site if site.worst_degree > old.worst_degree else old
            site = replace(old, requests=old.requests + req, wavefronts=old.wavefronts + wf,
                           ideal_wavefronts=old.ideal_wavefronts + ideal, worst_degree=worst.worst_degree,
                           worst_stride=worst.worst_stride, worst_words=worst.worst_words, sectors=old.sectors + sec,
                           ideal_sectors=old.ideal_sectors + isec, bytes=old.bytes + nbytes,
                           size=max(old.size, size))
        merged[key] = site
    order = sorted(merged.values(), key=lambda s: (s.kernel, s.file or "", s.line or 0, s.space, s.store))
    return MemoryProfile(sites=tuple(order), blocks=blocks, launches=tuple(launches))


def _words(text: str) -> tuple[int, ...]:
    """The runtime's worst request (``3,35,-,...``: 32 word numbers, ``-`` for an inactive lane) as
    :attr:`AccessSite.worst_words`; () for an empty column.

    Raises:
        ValueError: not 32 entries, or an entry neither a number nor ``-``.
    """
    if not text:
        return ()
    words = tuple(-1 if w == "-" else int(w) for w in text.split(","))
    if len(words) != 32:
        raise ValueError(f"a request has 32 lanes, not {len(words)}")
    return words


# ---- the profile phase of a part (the worker) -------------------------------------------------------

def score_profile(pconf, sub: MemoryProfile, reference_wavefronts: int | None, *, n: int, against: str = "",
                  reference_span_steps: int | None = None, reference_barriers: int | None = None,
                  reference: MemoryProfile | None = None):
    """The part's :class:`~grader.core.performance.Profile`: points from the ratio of its shared-memory
    wavefronts (conflicts included) to the reference's, all at or below ``pconf.full_at``, none at
    or above ``pconf.zero_at``, linear in between; but none, whatever the wavefronts, for a scan
    that is not a parallel scan in shared memory (:func:`not_parallel`): no shared-memory access,
    a span over ``pconf.span_slack`` times the reference's, or more barriers than
    ``pconf.barrier_slack`` times the reference's, on the same input.

    Args:
        pconf: the part's :class:`~grader.assignment.config.ProfileConfig`.
        sub: the submission's profile.
        reference_wavefronts: the reference's wavefronts on the same input; None: not scored
            (the message says so) unless ``pconf.points`` is 0.
        n: the profiled size.
        against: what the reference is, for the message.
        reference_span_steps, reference_barriers: the reference's :attr:`MemoryProfile.span_steps`
            and :attr:`MemoryProfile.barriers` on the same input; None: that bound is not checked
            (the message says so).
        reference: the reference's profile, where it was profiled: its drawn request
            (:attr:`MemoryProfile.worst_request`) is kept beside the submission's.
    """
    from grader.core.performance import Profile, linear_fraction

    worst = sub.worst
    drawn = sub.worst_request
    ref_drawn = reference.worst_request if reference is not None else None
    facts = dict(n=n, blocks=pconf.blocks, wavefronts=sub.wavefronts, ideal_wavefronts=sub.ideal_wavefronts,
                 conflict_wavefronts=sub.conflict_wavefronts, worst=worst.describe() if worst else "",
                 worst_file=worst.file if worst else None, worst_line=worst.line if worst else None,
                 worst_degree=worst.worst_degree if worst else None, sectors_per_request=sub.sectors_per_request,
                 ideal_sectors_per_request=sub.ideal_sectors_per_request, global_sectors=sub.global_sectors,
                 shared_requests=sub.shared_requests, span_steps=sub.span_steps, work_steps=sub.work_steps,
                 barriers=sub.barriers, reference_span_steps=reference_span_steps,
                 reference_barriers=reference_barriers, **_drawn_facts(drawn, ""),
                 **_drawn_facts(ref_drawn, "reference_"))
    counted = (f"{sub.conflict_wavefronts} bank-conflict wavefronts of {sub.wavefronts} "
               f"(ideal {sub.ideal_wavefronts})")
    if not pconf.points:
        return Profile(0.0, 0.0, f"shared memory: {counted}", **facts)
    if reference_wavefronts is None:
        return Profile(0.0, pconf.points, f"not scored: no reference solution on this machine to compare with, and "
                                          f"no profile.reference_wavefronts in the config; shared memory: {counted}",
                       **facts)
    ratio = sub.wavefronts / reference_wavefronts if reference_wavefronts else (1.0 if not sub.wavefronts else
                                                                                  float("inf"))
    why = not_parallel(pconf, sub, reference_span_steps, reference_barriers, n=n, against=against)
    if why:
        return Profile(0.0, pconf.points, f"no points: {why}", reference_wavefronts=reference_wavefronts,
                       ratio=ratio, **facts)
    frac = linear_fraction(ratio, full_at=pconf.full_at, zero_at=pconf.zero_at)
    message = (f"shared-memory wavefronts {sub.wavefronts} = {ratio:.2f}x {against or 'the reference'}'s "
               f"{reference_wavefronts} at n = {n} ({sub.conflict_wavefronts} from bank conflicts); all points "
               f"at or below {pconf.full_at:g}x, none at or above {pconf.zero_at:g}x")
    if worst is not None and frac < 1.0:
        message += f"; worst {worst.describe()}"
    if reference_span_steps is None or reference_barriers is None:
        message += "; the scan's span and barriers not checked (no reference figures for them)"
    return Profile(round(pconf.points * frac, 2), pconf.points, message, reference_wavefronts=reference_wavefronts,
                   ratio=ratio, **facts)


def _drawn_facts(site: AccessSite | None, prefix: str) -> dict:
    """The :class:`~grader.core.performance.Profile` fields of a drawn request (``request_words``,
    ``request_degree``, ``request_store``, and without ``prefix`` ``request_line``), each name after
    ``prefix`` (``reference_``: the reference's, whose source line is not the student's to see); {} for None."""
    if site is None:
        return {}
    facts = {f"{prefix}request_words": site.worst_words, f"{prefix}request_degree": site.worst_degree,
             f"{prefix}request_store": site.store}
    return facts if prefix else facts | {"request_line": site.line}


def not_parallel(pconf, sub: MemoryProfile, reference_span_steps: int | None, reference_barriers: int | None, *,
                 n: int, against: str = "") -> str:
    """Why ``sub`` is not the parallel scan in shared memory that the profile's points are for, or
    "" when it is (the handout's rule, assignment/README.md):

    - it makes at least one shared-memory load or store (bank conflicts are about shared memory;
      a scan without any has no wavefront to count, which is not the same as none in conflict);
    - its span (:attr:`MemoryProfile.span_steps`) is at most ``pconf.span_slack`` times the
      reference's on the same input: a tree scan (Blelloch's or Hillis and Steele's) makes O(log n)
      memory operations per thread, a loop of one thread over the elements O(n);
    - its barriers (:attr:`MemoryProfile.barriers`) are at most ``pconf.barrier_slack`` times the
      reference's: a tree scan synchronises O(log n) times, a serial chain spread over the threads
      with a barrier per element O(n) times.

    A bound whose reference figure is None is not checked. An empty ``sub.launches`` (the runtime
    sent no step counts) fails the span bound: nothing shows the scan is parallel.
    """
    ref = against or "the reference"
    if not sub.shared_requests:
        return (f"the kernel makes no shared-memory access at n = {n}: the points are for a scan in shared memory "
                f"without bank conflicts, and a scan that does not use shared memory has none to avoid")
    if reference_span_steps is not None:
        bound = pconf.span_slack * max(reference_span_steps, 1)
        if not sub.launches:
            return "the emulator counted no steps of the profiled launch, so nothing shows the scan is parallel"
        if sub.span_steps > bound:
            return (f"the scan is not parallel: one thread makes {sub.span_steps} memory operations (its span) at "
                    f"n = {n}, where {ref}'s make at most {reference_span_steps} (allowed: {pconf.span_slack:g}x, "
                    f"{int(bound)}); a tree scan makes O(log n) per thread, a loop over the elements O(n)")
    if reference_barriers is not None:
        bound = pconf.barrier_slack * max(reference_barriers, 1)
        if sub.barriers > bound:
            return (f"the scan is not parallel: its block passes {sub.barriers} barriers at n = {n}, where {ref}'s "
                    f"passes {reference_barriers} (allowed: {pconf.barrier_slack:g}x, {int(bound)}); a tree scan "
                    f"synchronises O(log n) times, a chain of one element per barrier O(n) times")
    return ""


def report_lines(profile) -> list[str]:
    """Plain-text lines (no indent) for a part's :class:`~grader.core.performance.Profile` in a report:
    the points and how they follow, the worst conflicted line, the span, barriers and work, global
    sectors per request; [] for None."""
    if profile is None:
        return []
    where = f" (CPU emulator, n = {profile.n})" if profile.n else ""
    head = f"bank conflicts{where}: "
    if profile.max_points:
        head += f"{profile.points:g}/{profile.max_points:g} points — "
    lines = [head + profile.message]
    if profile.worst and profile.worst not in profile.message:
        lines.append(f"worst {profile.worst}")
    if profile.span_steps is not None:
        ref = ""
        if profile.reference_span_steps is not None:
            ref = f" (reference: {profile.reference_span_steps}, {profile.reference_barriers} barriers)"
        lines.append(f"parallel steps: span {profile.span_steps} memory operations of one thread, "
                     f"{profile.barriers} barriers, work {profile.work_steps}{ref}")
    if profile.sectors_per_request is not None:
        ideal = profile.ideal_sectors_per_request
        lines.append(f"global memory: {profile.sectors_per_request:.2f} sectors per request"
                     + (f", ideal {ideal:.2f}" if ideal is not None else "")
                     + " (32-byte sectors a warp's load or store touches: 4 for 32 consecutive 4-byte elements)")
    return lines
