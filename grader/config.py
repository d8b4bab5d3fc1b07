"""Loading and validating ``config.yaml``.

The schema is declared once, below: every key has a type, a default (or is required), a
description and a check. Loading reports the first problem as a :class:`ConfigError` naming the
file, the line and the dotted key, and what is allowed.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from grader.errors import ConfigError, UsageError
from grader.parts import DTYPES, PARTS

BACKEND_CHOICES = ("auto", "pycuda", "emulator")
#: Values of ``emulator.sandbox`` (grader.backends.emulator.sandbox.POLICIES).
SANDBOX_CHOICES = ("auto", "required", "off")


@dataclass(frozen=True)
class TimingConfig:
    """How one part is timed on a GPU and scored for speed.

    Attributes:
        sizes: the n of each timed case.
        points: performance points of the part.
        full_at: full points when the weighted geometric mean of (time / reference time) is at most this.
        zero_at: no points at this ratio or above; linear in between.
        reference: the part whose reference solution sets the bar (default: the part itself).
        absolute_ms: GPU name -> {n: ms}: where no reference solution can be timed (a student
            release), these times set the bar instead, on the GPUs named.
    """

    sizes: tuple[int, ...]
    points: float
    full_at: float = 1.2
    zero_at: float = 10.0
    reference: str = ""
    absolute_ms: dict[str, dict[int, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class ProfileConfig:
    """The memory-access profile of one part (bank conflicts, sectors per request; see
    :mod:`grader.profile`), counted by the CPU emulator on any machine, and its points.

    Attributes:
        size: the n of the profiled run (one input, the part's first dtype).
        points: points for shared-memory traffic close to the reference's (0: reported only).
        full_at: all points when the part's shared-memory wavefronts (conflicts included) are at
            most this multiple of the reference's.
        zero_at: no points at this multiple or above; linear in between.
        reference: the part whose reference solution sets the bar (default: the part itself).
        reference_wavefronts: the reference's wavefronts at ``size``, used where the reference
            solution is absent (a student release); None: not scored there.
        blocks: the blocks of each launch that are profiled (the first ones; 0: all).
    """

    size: int
    points: float = 0.0
    full_at: float = 1.1
    zero_at: float = 4.0
    reference: str = ""
    reference_wavefronts: int | None = None
    blocks: int = 1


@dataclass(frozen=True)
class PartConfig:
    """How one part is graded.

    Attributes:
        sizes: the n of each visible case, in order.
        points_per_case: points for each passing case.
        dtypes: the scan_t types graded (``int32``, ``float32``); every size runs for each.
        block_size: BLOCK_SIZE for this part (the top-level block_size unless overridden).
        items_per_thread: ITEMS_PER_THREAD (Part 5 only), else None.
        hidden_sizes: sizes from the private config; students see these cases by name and status only.
        timing: GPU timing and performance points, or None when the part is not timed.
        profile: the memory-access profile and its points, or None when the part is not profiled.
    """

    sizes: tuple[int, ...]
    points_per_case: float = 1.0
    dtypes: tuple[str, ...] = ("int32",)
    block_size: int = 512
    items_per_thread: int | None = None
    hidden_sizes: tuple[int, ...] = ()
    timing: TimingConfig | None = None
    profile: ProfileConfig | None = None


@dataclass(frozen=True)
class Config:
    """A validated configuration.

    Attributes:
        path: the file it was read from; private_path: the private overlay, if any.
        block_size: default threads per block (BLOCK_SIZE), a power of two in [32, 1024].
        seed: base seed of the input generator.
        input_low, input_high: inclusive range of the integer inputs (float inputs are uniform in [0, 1)).
        float_rtol: float32 outputs must be within float_rtol * sqrt(n) of the float64 reference, relative.
        backend: ``auto``, ``pycuda`` or ``emulator``.
        part_timeout_s: seconds allowed to one part, compile and cases together.
        case_timeout_s: seconds allowed to one case.
        submission_timeout_s: seconds allowed to a whole submission; parts not started by then are
            reported as timed out.
        emulator_workers: emulator worker threads (0: one per core).
        emulator_checks_max_n: with checks on, cases up to this n run with race, bounds and barrier
            checks under three thread orders; larger ones run once, unchecked (checking is ~3x slower).
        emulator_sandbox: how the emulator isolates student code: ``auto`` (bubblewrap when it
            works here, else resource limits and seccomp only), ``required`` (no emulator without
            bubblewrap) or ``off`` (see ``docs/security.md``); ``auto`` when the file does not set it.
        emulator_sandbox_explicit: whether the file sets ``emulator.sandbox``; where it does not,
            ``batch`` and the Gradescope autograder require the sandbox (``grading_sandbox`` in
            :mod:`grader.runner`).
        timing_warmup, timing_runs: untimed and timed repetitions per timed case.
        flush_bytes: bytes written before each timed run to empty the L2 cache.
        expected_copy_gbps: GPU name -> the device-to-device copy bandwidth (GB/s) it should reach.
        parts: part key -> PartConfig, in handout order; parts absent from the file are not graded.
    """

    path: str
    block_size: int
    seed: int
    input_low: int
    input_high: int
    backend: str
    part_timeout_s: float
    emulator_workers: int
    parts: dict[str, PartConfig] = field(default_factory=dict)
    float_rtol: float = 1e-6
    emulator_checks_max_n: int = 70000
    emulator_sandbox: str = "auto"
    emulator_sandbox_explicit: bool = False  # emulator.sandbox is in the file (see grader.runner.grading_sandbox)
    case_timeout_s: float = 120.0
    submission_timeout_s: float = 1800.0
    timing_warmup: int = 10
    timing_runs: int = 30
    flush_bytes: int = 512 * 2**20
    expected_copy_gbps: dict[str, float] = field(default_factory=dict)
    private_path: str | None = None
    hidden_seed_value: int | None = None

    @property
    def hidden_seed(self) -> int:
        """The seed of hidden cases: the private config's, else the public seed."""
        return self.seed if self.hidden_seed_value is None else self.hidden_seed_value


#: The checkout holding the grader: its ``config.yaml`` is the fallback of :func:`find_config`.
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def find_config(option: str | os.PathLike | None, *, start: Path, flag: str = "--config") -> Path:
    """The configuration file to use: the one named on the command line, else ``start/config.yaml``,
    else the ``config.yaml`` beside the grader (``PROJECT_ROOT``).

    Args:
        option: the file given on the command line (relative to ``start``), or None.
        start: the folder the command runs from (the current directory, pytest's invocation dir).
        flag: the option that names a file, for the message (``--config``, ``--scangrade-config``).

    Returns:
        The path (not checked to exist when ``option`` names it: :func:`load_config` says so).

    Raises:
        UsageError: no option and no ``config.yaml`` in either place.
    """
    if option:
        return start / option
    for candidate in (start / "config.yaml", PROJECT_ROOT / "config.yaml"):
        if candidate.is_file():
            return candidate
    raise UsageError(f"no config.yaml in this folder or beside the grader; pass one with {flag} FILE")


class _Lines(yaml.SafeLoader):
    """A YAML loader that remembers the line of every mapping key."""


def _construct_mapping(loader: _Lines, node: yaml.MappingNode) -> dict:
    mapping = loader.construct_mapping(node, deep=True)
    lines = {}
    for key_node, _ in node.value:
        lines[loader.construct_object(key_node)] = key_node.start_mark.line + 1
    return _LinedDict(mapping, lines, node.start_mark.line + 1)


class _LinedDict(dict):
    def __init__(self, data: dict, lines: dict, line: int) -> None:
        super().__init__(data)
        self.lines, self.line = lines, line


_Lines.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class _Reader:
    """Takes typed values out of one YAML mapping, with errors that name the key and the line."""

    def __init__(self, path: str, data: Any, prefix: str, line: int | None) -> None:
        self.path, self.prefix = path, prefix
        if not isinstance(data, dict):
            raise ConfigError(f"must be a mapping of keys to values (got {type(data).__name__})",
                              path=path, key=prefix or None, line=line)
        self.data = data
        self.lines = getattr(data, "lines", {})
        self.line = getattr(data, "line", line)
        self.seen: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix else name

    def error(self, name: str, message: str) -> ConfigError:
        return ConfigError(message, path=self.path, key=self.key(name), line=self.lines.get(name, self.line))

    def take(self, name: str, kind: type | tuple[type, ...], default: Any = ..., *,
             check: Callable[[Any], str | None] | None = None, what: str) -> Any:
        self.seen.add(name)
        if name not in self.data:
            if default is ...:
                raise ConfigError(f"is required: {what}", path=self.path, key=self.key(name), line=self.line)
            return default
        value = self.data[name]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            raise self.error(name, f"must be {what} (got {value!r})")
        problem = check(value) if check else None
        if problem:
            raise self.error(name, f"{problem} (got {value!r}); expected {what}")
        return value

    def sub(self, name: str, required: bool = False) -> "_Reader":
        self.seen.add(name)
        if name not in self.data and not required:
            return _Reader(self.path, {}, self.key(name), self.line)
        if name not in self.data:
            raise ConfigError("is required", path=self.path, key=self.key(name), line=self.line)
        return _Reader(self.path, self.data[name], self.key(name), self.lines.get(name, self.line))

    def finish(self, allowed_extra: tuple[str, ...] = ()) -> None:
        for name in self.data:
            if name not in self.seen and name not in allowed_extra:
                allowed = ", ".join(sorted(self.seen)) or "none"
                raise self.error(str(name), f"unknown key; allowed here: {allowed}")


def _power_of_two_block(v: int) -> str | None:
    if v < 32 or v > 1024 or v & (v - 1):
        return "not a power of two from 32 to 1024"
    return None


def _absolute_problem(v: dict) -> str | None:
    for gpu, times in v.items():
        if not isinstance(gpu, str) or not isinstance(times, dict):
            return f"{gpu!r} must map to a mapping of n to milliseconds"
        for n, ms in times.items():
            if isinstance(n, bool) or not isinstance(n, int) or isinstance(ms, bool) or \
                    not isinstance(ms, (int, float)) or ms <= 0:
                return f"{gpu}: {n!r}: {ms!r} is not a size mapped to positive milliseconds"
    return None


def _positive(v: float) -> str | None:
    return None if v > 0 else "must be positive"


def _read_yaml(p: str):
    try:
        text = Path(p).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the file ({exc.strerror}); pass an existing file with --config",
                          path=p) from None
    try:
        return yaml.load(text, Loader=_Lines)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"not valid YAML: {problem}", path=p,
                          line=mark.line + 1 if mark else None) from None


def load_config(path: str | os.PathLike) -> Config:
    """Read and validate a configuration file.

    Args:
        path: a YAML file shaped like the project's ``config.yaml``.

    Returns:
        A :class:`Config`.

    Raises:
        ConfigError: the file is missing, is not valid YAML, or a key is unknown, missing or has a
            value that is not allowed; the message names the file, the line and the key.
    """
    p = str(path)
    data = _read_yaml(p)
    top = _Reader(p, data if data is not None else {}, "", 1)
    block_size = top.take("block_size", int, 512, check=_power_of_two_block,
                          what="a power of two from 32 to 1024 (threads per block)")
    seed = top.take("seed", int, check=lambda v: None if v >= 0 else "must not be negative",
                    what="a non-negative integer (the input generator's seed)")
    inputs = top.sub("inputs")
    low = inputs.take("low", int, -1000, what="an integer (smallest input value)")
    high = inputs.take("high", int, 1000, what="an integer (largest input value)")
    if not (-2**31 <= low <= high < 2**31):
        raise inputs.error("high", f"low ({low}) and high ({high}) must satisfy -2^31 <= low <= high < 2^31")
    inputs.finish()
    backend = top.take("backend", str, "auto", check=lambda v: None if v in BACKEND_CHOICES else "unknown backend",
                       what="one of " + ", ".join(BACKEND_CHOICES))
    timeouts = top.sub("timeouts")
    part_s = timeouts.take("part_s", (int, float), 300, check=_positive, what="a positive number of seconds")
    case_s = timeouts.take("case_s", (int, float), 120, check=_positive, what="a positive number of seconds")
    submission_s = timeouts.take("submission_s", (int, float), 1800, check=_positive,
                                 what="a positive number of seconds")
    timeouts.finish()
    emulator = top.sub("emulator")
    workers = emulator.take("workers", int, 0, check=lambda v: None if v >= 0 else "must not be negative",
                            what="a number of worker threads (0: one per core)")
    checks_max_n = emulator.take("checks_max_n", int, 70000, check=_positive,
                                 what="the largest n checked for races under three thread orders")
    if emulator.data.get("sandbox") is False:  # YAML 1.1 reads a bare `off` as false
        emulator.data["sandbox"] = "off"
    sandbox = emulator.take("sandbox", str, "auto",
                            check=lambda v: None if v in SANDBOX_CHOICES else "unknown sandbox policy",
                            what="one of " + ", ".join(SANDBOX_CHOICES))
    emulator.finish()
    float_rtol = top.take("float_rtol", float, 1e-6, check=_positive,
                          what="a positive number (float32 tolerance per sqrt(n), relative)")
    timing = top.sub("timing")
    warmup = timing.take("warmup", int, 10, check=lambda v: None if v >= 0 else "must not be negative",
                         what="a number of untimed runs")
    runs = timing.take("runs", int, 30, check=lambda v: None if v >= 3 else "must be at least 3",
                       what="a number of timed runs (at least 3)")
    flush_mib = timing.take("flush_mib", int, 512, check=lambda v: None if v >= 0 else "must not be negative",
                            what="MiB written before each timed run to empty the L2 cache")
    expected = timing.take("expected_copy_gbps", dict, {},
                           check=lambda v: None if all(isinstance(k, str) and isinstance(x, (int, float))
                                                       and not isinstance(x, bool) and x > 0 for k, x in v.items())
                           else "must map GPU names to positive GB/s",
                           what="a mapping of GPU name to device-to-device copy GB/s")
    timing.finish()

    parts_reader = top.sub("parts", required=True)
    parts: dict[str, PartConfig] = {}
    for key in parts_reader.data:
        if key not in PARTS:
            raise parts_reader.error(str(key), "unknown part; known parts: " + ", ".join(PARTS))
    for key, spec in PARTS.items():
        if key not in parts_reader.data:
            continue
        parts[key] = _part(parts_reader.sub(key, required=True), spec, block_size)
    for key, pc in parts.items():
        if pc.timing and pc.timing.reference not in PARTS:
            raise parts_reader.error(key, f"timing.reference {pc.timing.reference!r} is not a part")
        if pc.profile and pc.profile.reference not in PARTS:
            raise parts_reader.error(key, f"profile.reference {pc.profile.reference!r} is not a part; "
                                          "known parts: " + ", ".join(PARTS))
    parts_reader.finish(allowed_extra=tuple(PARTS))
    top.finish()
    return Config(path=p, block_size=block_size, seed=seed, input_low=low, input_high=high, backend=backend,
                  part_timeout_s=float(part_s), case_timeout_s=float(case_s),
                  submission_timeout_s=float(submission_s), emulator_workers=workers,
                  parts=parts, float_rtol=float(float_rtol), emulator_checks_max_n=checks_max_n,
                  emulator_sandbox=sandbox, emulator_sandbox_explicit="sandbox" in emulator.data,
                  timing_warmup=warmup, timing_runs=runs,
                  flush_bytes=flush_mib * 2**20, expected_copy_gbps={k: float(v) for k, v in expected.items()})


def _sizes(reader: _Reader, name: str, limit: int | None, block_size: int, required: bool) -> tuple[int, ...]:
    sizes = reader.take(name, list, ... if required else [],
                        check=(lambda v: None if v else "must not be empty") if required else None,
                        what="a list of sizes n" + (" (not empty)" if required else ""))
    for i, n in enumerate(sizes):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise reader.error(name, f"{name}[{i}] = {n!r} is not a positive integer")
        if limit is not None and n > limit:
            raise reader.error(name, f"{name}[{i}] = {n} exceeds this part's limit of {limit} elements "
                                     f"(with block_size {block_size})")
        if n >= 2**31:
            raise reader.error(name, f"{name}[{i}] = {n} does not fit the contract's int n")
    return tuple(sizes)


def _part(pr: _Reader, spec, default_block: int) -> PartConfig:
    block = pr.take("block_size", int, default_block, check=_power_of_two_block,
                    what="a power of two from 32 to 1024 (this part's BLOCK_SIZE)")
    limit = spec.limit(block)
    sizes = _sizes(pr, "sizes", limit, block, required=True)
    hidden = _sizes(pr, "hidden_sizes", limit, block, required=False)
    points = pr.take("points_per_case", (int, float), 1, check=lambda v: None if v >= 0 else "must not be negative",
                     what="a non-negative number of points")
    dtypes = pr.take("dtypes", list, ["int32"],
                     check=lambda v: None if v and all(d in DTYPES for d in v) and len(set(v)) == len(v)
                     else "unknown or repeated dtype",
                     what="a non-empty list of " + " and ".join(DTYPES))
    items = None
    if spec.items_per_thread:
        items = pr.take("items_per_thread", int, check=lambda v: None if 1 <= v <= 64 else "must be from 1 to 64",
                        what="ITEMS_PER_THREAD, from 1 to 64")
        if block * items * 4 > 48 * 1024:
            raise pr.error("items_per_thread", f"block_size {block} x items_per_thread {items} x 4 bytes of "
                                               "shared memory exceeds 48 KiB")
    timing = None
    if "timing" in pr.data:
        tr = pr.sub("timing", required=True)
        t_sizes = _sizes(tr, "sizes", limit, block, required=True)
        t_points = tr.take("points", (int, float), check=lambda v: None if v >= 0 else "must not be negative",
                           what="a non-negative number of performance points")
        full_at = tr.take("full_at", (int, float), 1.2, check=lambda v: None if v >= 1 else "must be at least 1",
                          what="the time ratio to the reference at or below which all points are given")
        zero_at = tr.take("zero_at", (int, float), 10.0,
                          check=lambda v: None if v > full_at else "must be above full_at",
                          what="the time ratio to the reference at or above which no points are given")
        reference = tr.take("reference", str, spec.key,
                            what="the key of the part whose reference solution sets the bar")
        absolute = tr.take("absolute_ms", dict, {}, check=_absolute_problem,
                           what="a mapping of GPU name to a mapping of timed size n to milliseconds")
        tr.finish()
        timing = TimingConfig(sizes=t_sizes, points=float(t_points), full_at=float(full_at),
                              zero_at=float(zero_at), reference=reference,
                              absolute_ms={g: {int(n): float(ms) for n, ms in v.items()} for g, v in absolute.items()})
    profile = _profile(pr.sub("profile", required=True), spec, limit, block) if "profile" in pr.data else None
    pr.finish()
    return PartConfig(sizes=sizes, points_per_case=float(points), dtypes=tuple(dtypes), block_size=block,
                      items_per_thread=items, hidden_sizes=hidden, timing=timing, profile=profile)


def _profile(pf: _Reader, spec, limit: int | None, block: int) -> ProfileConfig:
    """A part's ``profile:`` block (see :class:`ProfileConfig`)."""
    size = pf.take("size", int, check=lambda v: None if v >= 1 and (limit is None or v <= limit) else
                   f"must be from 1 to this part's limit of {limit} elements (with block_size {block})"
                   if limit is not None else "must be positive",
                   what="the n of the profiled run")
    points = pf.take("points", (int, float), 0, check=lambda v: None if v >= 0 else "must not be negative",
                     what="a non-negative number of points for conflict-free shared memory")
    full_at = pf.take("full_at", (int, float), 1.1, check=lambda v: None if v >= 1 else "must be at least 1",
                      what="the ratio of shared-memory wavefronts to the reference's at or below which all "
                           "points are given")
    zero_at = pf.take("zero_at", (int, float), 4.0, check=lambda v: None if v > full_at else "must be above full_at",
                      what="the ratio of shared-memory wavefronts to the reference's at or above which no points "
                           "are given")
    reference = pf.take("reference", str, spec.key, what="the key of the part whose reference solution sets the bar")
    ref_wf = pf.take("reference_wavefronts", int, None, check=lambda v: None if v >= 1 else "must be positive",
                     what="the reference's shared-memory wavefronts at size (used without the reference solution)")
    blocks = pf.take("blocks", int, 1, check=lambda v: None if v >= 0 else "must not be negative",
                     what="how many blocks of each launch are profiled (0: all)")
    pf.finish()
    return ProfileConfig(size=size, points=float(points), full_at=float(full_at), zero_at=float(zero_at),
                         reference=reference, reference_wavefronts=ref_wf, blocks=blocks)


def load_private(cfg: Config, path: str | os.PathLike) -> Config:
    """Layer a TA's private configuration over a public one.

    The private file may hold ``seed`` (the seed of the hidden cases; visible cases keep the
    public seed) and, per part, ``hidden_sizes``: cases that students see by name and status only. Nothing else, so a private file cannot silently
    change what the public config promises.

    Raises:
        ConfigError: as :func:`load_config`, naming the private file.
    """
    p = str(path)
    top = _Reader(p, _read_yaml(p) or {}, "", 1)
    seed = top.take("seed", int, None, check=lambda v: None if v >= 0 else "must not be negative",
                    what="a non-negative integer (the hidden cases' seed)")
    parts_reader = top.sub("parts")
    parts = dict(cfg.parts)
    for key in parts_reader.data:
        if key not in cfg.parts:
            raise parts_reader.error(str(key), "not a part of the public config; its parts: " + ", ".join(cfg.parts))
        pr = parts_reader.sub(key, required=True)
        pc = cfg.parts[key]
        hidden = _sizes(pr, "hidden_sizes", PARTS[key].limit(pc.block_size), pc.block_size, required=False)
        pr.finish()
        parts[key] = dataclasses.replace(pc, hidden_sizes=pc.hidden_sizes + hidden)
    parts_reader.finish(allowed_extra=tuple(parts_reader.data))
    top.finish()
    return dataclasses.replace(cfg, hidden_seed_value=seed, parts=parts, private_path=p)
