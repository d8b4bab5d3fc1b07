"""The memory-access profile of a kernel, counted by the CPU emulator: shared-memory bank
conflicts and global-memory sectors per request.

Both depend only on the addresses the 32 lanes of a warp touch in one instruction, so the counts
are the same on a laptop as on any GPU with 32 banks of 4 bytes and 32-byte sectors (every NVIDIA
GPU since Maxwell). The runtime's side is ``grader/backends/emulator/runtime/profile.inc`` (what is
counted, exactly); docs/emulator.md ("What the profile counts") maps the numbers to Nsight Compute.

Public API: :class:`AccessSite`, :class:`MemoryProfile`, :func:`parse_profile`,
:func:`score_profile`, :func:`report_lines`: data and arithmetic only, importing no backend (the
emulator backend builds a :class:`MemoryProfile` with :func:`parse_profile`). Running the profile
is :mod:`grader.profile_phase`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

__all__ = ["AccessSite", "MemoryProfile", "parse_profile", "report_lines", "score_profile"]


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
class MemoryProfile:
    """The profile of the profiled blocks of every launch between start and take.

    Attributes:
        sites: one :class:`AccessSite` per (kernel, source line, space, load/store), in kernel,
            line order.
        blocks: how many blocks of each launch were profiled (0: all).
    """

    sites: tuple[AccessSite, ...] = ()
    blocks: int = 1

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
        text: one line per (kernel, program point): kernel, ``@<hex pc offset>``, ``s``/``g``,
            store (0/1), size, requests, wavefronts, ideal wavefronts, worst degree, worst stride,
            sectors, ideal sectors; tab-separated. Malformed lines are skipped.
        resolve: maps code offsets to (file, line) (:meth:`EmulatorModule.resolve`).
        blocks: recorded on the result.
    """
    rows = []
    for raw in text.splitlines():
        cols = raw.split("\t")
        if len(cols) != 12 or not cols[1].startswith("@"):
            continue
        try:
            nums = [int(c) for c in cols[3:]]
            pc = int(cols[1][1:], 16)
        except ValueError:
            continue
        rows.append((cols[0], pc, "shared" if cols[2] == "s" else "global", nums))
    where = resolve(sorted({r[1] for r in rows})) if rows else {}
    merged: dict[tuple, AccessSite] = {}
    for kernel, pc, space, (store, size, req, wf, ideal, deg, stride, sec, isec) in rows:
        file, line = where.get(pc) or (None, None)
        key = (kernel, file, line, space, bool(store))
        site = AccessSite(kernel=kernel, file=file, line=line, space=space, store=bool(store), size=size,
                          requests=req, wavefronts=wf, ideal_wavefronts=ideal, worst_degree=deg,
                          worst_stride=stride, sectors=sec, ideal_sectors=isec)
        old = merged.get(key)
        if old is not None:  # several program points of one line (unrolled loops, inlined helpers)
            worst = site if site.worst_degree > old.worst_degree else old
            site = replace(old, requests=old.requests + req, wavefronts=old.wavefronts + wf,
                           ideal_wavefronts=old.ideal_wavefronts + ideal, worst_degree=worst.worst_degree,
                           worst_stride=worst.worst_stride, sectors=old.sectors + sec,
                           ideal_sectors=old.ideal_sectors + isec, size=max(old.size, size))
        merged[key] = site
    order = sorted(merged.values(), key=lambda s: (s.kernel, s.file or "", s.line or 0, s.space, s.store))
    return MemoryProfile(sites=tuple(order), blocks=blocks)


# ---- the profile phase of a part (the worker) -------------------------------------------------------

def score_profile(pconf, sub: MemoryProfile, reference_wavefronts: int | None, *, n: int, against: str = ""):
    """The part's :class:`~grader.results.Profile`: points from the ratio of its shared-memory
    wavefronts (conflicts included) to the reference's, all at or below ``pconf.full_at``, none at
    or above ``pconf.zero_at``, linear in between.

    Args:
        pconf: the part's :class:`~grader.config.ProfileConfig`.
        sub: the submission's profile.
        reference_wavefronts: the reference's wavefronts on the same input; None: not scored
            (the message says so) unless ``pconf.points`` is 0.
        n: the profiled size.
        against: what the reference is, for the message.
    """
    from grader.results import Profile, linear_fraction

    worst = sub.worst
    facts = dict(n=n, blocks=pconf.blocks, wavefronts=sub.wavefronts, ideal_wavefronts=sub.ideal_wavefronts,
                 conflict_wavefronts=sub.conflict_wavefronts, worst=worst.describe() if worst else "",
                 worst_file=worst.file if worst else None, worst_line=worst.line if worst else None,
                 worst_degree=worst.worst_degree if worst else None, sectors_per_request=sub.sectors_per_request,
                 ideal_sectors_per_request=sub.ideal_sectors_per_request)
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
    frac = linear_fraction(ratio, full_at=pconf.full_at, zero_at=pconf.zero_at)
    message = (f"shared-memory wavefronts {sub.wavefronts} = {ratio:.2f}x {against or 'the reference'}'s "
               f"{reference_wavefronts} at n = {n} ({sub.conflict_wavefronts} from bank conflicts); all points "
               f"at or below {pconf.full_at:g}x, none at or above {pconf.zero_at:g}x")
    if worst is not None and frac < 1.0:
        message += f"; worst {worst.describe()}"
    return Profile(round(pconf.points * frac, 2), pconf.points, message, reference_wavefronts=reference_wavefronts,
                   ratio=ratio, **facts)


def report_lines(profile) -> list[str]:
    """Plain-text lines (no indent) for a part's :class:`~grader.results.Profile` in a report:
    the points and how they follow, the worst conflicted line, global sectors per request;
    [] for None."""
    if profile is None:
        return []
    where = f" (CPU emulator, n = {profile.n})" if profile.n else ""
    head = f"bank conflicts{where}: "
    if profile.max_points:
        head += f"{profile.points:g}/{profile.max_points:g} points — "
    lines = [head + profile.message]
    if profile.worst and profile.worst not in profile.message:
        lines.append(f"worst {profile.worst}")
    if profile.sectors_per_request is not None:
        ideal = profile.ideal_sectors_per_request
        lines.append(f"global memory: {profile.sectors_per_request:.2f} sectors per request"
                     + (f", ideal {ideal:.2f}" if ideal is not None else "")
                     + " (32-byte sectors a warp's load or store touches: 4 for 32 consecutive 4-byte elements)")
    return lines
