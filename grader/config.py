"""Loading and validating ``config.yaml``.

The schema is declared once, below, as pydantic models (one per YAML mapping): every key has a
type, a default (or is required), a description and a check. A YAML loader (:class:`_Lines`)
records the line of every key; loading reports the first problem as a :class:`ConfigError` naming
the file, the line and the dotted key, and what is allowed
(``c.yaml, line 12, key 'parts.part1_naive.sizes': sizes[1] = 65 exceeds ...``). The validated
models become the frozen dataclasses below (:class:`Config`, :class:`PartConfig`, ...), which the
rest of the grader uses.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Callable, Union

import yaml
from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictFloat, StrictInt, StrictStr,
                      ValidationError, ValidationInfo, model_validator)
from pydantic_core import PydanticCustomError

from grader.errors import ConfigError, UsageError
from grader.parts import DTYPES, PARTS

BACKEND_CHOICES = ("auto", "pycuda", "emulator")
#: Values of ``emulator.sandbox`` (grader.backends.emulator.sandbox.POLICIES).
SANDBOX_CHOICES = ("auto", "required", "off")
#: Values of ``prairielearn.compile_error``: how PrairieLearn's results.json treats a part that does not
#: compile (:func:`grader.render.prairielearn.prairielearn`).
COMPILE_ERROR_CHOICES = ("not-gradable", "zero")


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
        prairielearn_compile_error: on PrairieLearn, a part that does not compile makes the
            submission ``not-gradable`` (no score, no attempt used) or is graded ``zero``
            (:data:`COMPILE_ERROR_CHOICES`).
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
    prairielearn_compile_error: str = "not-gradable"
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
        start: the folder the command runs from: ``Path()`` for the current one (a relative
            ``option`` then stays as the user wrote it, in reports too), pytest's invocation dir.
        flag: the option that names a file, for the message (``--config``, ``--scangrade-config``).

    Returns:
        The path (not checked to exist when ``option`` names it: :func:`load_config` says so); a
        ``config.yaml`` found is named by its absolute path.

    Raises:
        UsageError: no option and no ``config.yaml`` in either place.
    """
    if option:
        return start / option
    for candidate in (start.absolute() / "config.yaml", PROJECT_ROOT / "config.yaml"):
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




# ---- the schema: one pydantic model per mapping; defaults and descriptions declared once ----------------
#
# Each field's ``description`` says what the key holds, in the words of the error messages
# ("must be <description> (got ...)", "is required: <description>"). Checks that need more than the
# value (a part's size limit, full_at < zero_at) are model validators naming the field they fault.
# Validation errors become :class:`ConfigError` in :func:`_config_error`, with the file, the line of
# the key (from :class:`_Lines`) and the dotted key.

_CHECK, _PLAIN = "scangrade_check", "scangrade_plain"


def _fault(problem: str, *, field: tuple = (), value: Any = ..., plain: bool = False) -> PydanticCustomError:
    """A validation error with scangrade's wording: ``problem (got value); expected <description>``, or
    ``problem`` alone when ``plain``; ``field``: the key at fault below the model validated (a model
    validator names it; a field validator leaves it empty)."""
    ctx = {"problem": problem, "field": field}
    if value is not ...:
        ctx["value"] = value
    return PydanticCustomError(_PLAIN if plain else _CHECK, "{problem}", ctx)


def _check(test: Callable[[Any], str | None]):
    """An after-validator: ``test(value)`` returns a problem (the value is refused) or None."""
    def run(value: Any) -> Any:
        problem = test(value)
        if problem:
            raise _fault(problem)
        return value
    return AfterValidator(run)


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


def _gbps_problem(v: dict) -> str | None:
    ok = all(isinstance(k, str) and isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0
             for k, x in v.items())
    return None if ok else "must map GPU names to positive GB/s"


def _dtypes_problem(v: list) -> str | None:
    ok = bool(v) and all(isinstance(d, str) and d in DTYPES for d in v) and len(set(v)) == len(v)
    return None if ok else "unknown or repeated dtype"


def _positive(v: float) -> str | None:
    return None if v > 0 else "must be positive"


def _not_negative(v: float) -> str | None:
    return None if v >= 0 else "must not be negative"


def _not_empty(v: list) -> str | None:
    return None if v else "must not be empty"


def _float_only(v: Any) -> Any:
    """float_rtol is written as a float (``1.0e-6``); an integer there is a slip, refused as before."""
    if isinstance(v, int):
        raise PydanticCustomError("float_type", "not a float")
    return v


#: An integer (YAML's true/false are not).
Int = StrictInt
#: An integer or a float (not a boolean); an integer stays an integer.
Number = Union[StrictInt, StrictFloat]


def _sizes_problem(name: str, sizes: list, limit: int | None, block_size: int) -> str | None:
    """The first size of ``sizes`` that is not a positive int n within the part's limit, as a message."""
    for i, n in enumerate(sizes):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            return f"{name}[{i}] = {n!r} is not a positive integer"
        if limit is not None and n > limit:
            return f"{name}[{i}] = {n} exceeds this part's limit of {limit} elements (with block_size {block_size})"
        if n >= 2**31:
            return f"{name}[{i}] = {n} does not fit the contract's int n"
    return None


class _Schema(BaseModel):
    """A mapping of config.yaml: unknown keys refused, no type coercion (``"64"`` is not 64)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class _Inputs(_Schema):
    """``inputs:``: the range of the integer inputs (float inputs are uniform in [0, 1))."""

    low: Int = Field(-1000, description="an integer (smallest input value)")
    high: Int = Field(1000, description="an integer (largest input value)")

    @model_validator(mode="after")
    def _range(self) -> "_Inputs":
        if not (-2**31 <= self.low <= self.high < 2**31):
            raise _fault(f"low ({self.low}) and high ({self.high}) must satisfy -2^31 <= low <= high < 2^31",
                         field=("high",), plain=True)
        return self


_SECONDS = "a positive number of seconds"


class _Timeouts(_Schema):
    """``timeouts:``: seconds allowed to a part, a case and a whole submission."""

    part_s: Annotated[Number, _check(_positive)] = Field(300, description=_SECONDS)
    case_s: Annotated[Number, _check(_positive)] = Field(120, description=_SECONDS)
    submission_s: Annotated[Number, _check(_positive)] = Field(1800, description=_SECONDS)


def _bare_off(v: Any) -> Any:
    return "off" if v is False else v  # YAML 1.1 reads a bare `off` as false


class _Emulator(_Schema):
    """``emulator:``: worker threads, the checked sizes and the sandbox policy."""

    workers: Annotated[Int, _check(_not_negative)] = Field(
        0, description="a number of worker threads (0: one per core)")
    checks_max_n: Annotated[Int, _check(_positive)] = Field(
        70000, description="the largest n checked for races under three thread orders")
    sandbox: Annotated[StrictStr, BeforeValidator(_bare_off),
                       _check(lambda v: None if v in SANDBOX_CHOICES else "unknown sandbox policy")] = Field(
        "auto", description="one of " + ", ".join(SANDBOX_CHOICES))


class _Timing(_Schema):
    """``timing:``: how GPU times are taken (warm-up, runs, the L2 flush, copy bandwidths)."""

    warmup: Annotated[Int, _check(_not_negative)] = Field(10, description="a number of untimed runs")
    runs: Annotated[Int, _check(lambda v: None if v >= 3 else "must be at least 3")] = Field(
        30, description="a number of timed runs (at least 3)")
    flush_mib: Annotated[Int, _check(_not_negative)] = Field(
        512, description="MiB written before each timed run to empty the L2 cache")
    expected_copy_gbps: Annotated[dict, _check(_gbps_problem)] = Field(
        default_factory=dict, description="a mapping of GPU name to device-to-device copy GB/s")


class _PrairieLearn(_Schema):
    """``prairielearn:``: how PrairieLearn's results.json treats a submission (docs/prairielearn.md)."""

    compile_error: Annotated[StrictStr, _check(
        lambda v: None if v in COMPILE_ERROR_CHOICES else "unknown compile-error policy")] = Field(
        "not-gradable", description="one of " + ", ".join(COMPILE_ERROR_CHOICES)
                                    + " (a part that does not compile: no score and no attempt used, or 0 points)")


_BLOCK = Annotated[Int, _check(_power_of_two_block)]
_SIZES = Annotated[list, _check(_not_empty)]
_SIZES_WHAT = "a list of sizes n (not empty)"


class _Top(_Schema):
    """The top level of config.yaml; ``parts`` is validated part by part (:class:`_Part`)."""

    block_size: _BLOCK = Field(512, description="a power of two from 32 to 1024 (threads per block)")
    seed: Annotated[Int, _check(_not_negative)] = Field(
        description="a non-negative integer (the input generator's seed)")
    inputs: _Inputs = Field(default_factory=_Inputs)
    backend: Annotated[StrictStr, _check(lambda v: None if v in BACKEND_CHOICES else "unknown backend")] = Field(
        "auto", description="one of " + ", ".join(BACKEND_CHOICES))
    timeouts: _Timeouts = Field(default_factory=_Timeouts)
    emulator: _Emulator = Field(default_factory=_Emulator)
    float_rtol: Annotated[float, BeforeValidator(_float_only), _check(_positive)] = Field(
        1e-6, description="a positive number (float32 tolerance per sqrt(n), relative)")
    timing: _Timing = Field(default_factory=_Timing)
    prairielearn: _PrairieLearn = Field(default_factory=_PrairieLearn)
    parts: dict


_REFERENCE = "the key of the part whose reference solution sets the bar"


class _PartTiming(_Schema):
    """A part's ``timing:`` block (:class:`TimingConfig`)."""

    sizes: _SIZES = Field(description=_SIZES_WHAT)
    points: Annotated[Number, _check(_not_negative)] = Field(
        description="a non-negative number of performance points")
    full_at: Annotated[Number, _check(lambda v: None if v >= 1 else "must be at least 1")] = Field(
        1.2, description="the time ratio to the reference at or below which all points are given")
    zero_at: Number = Field(10.0, description="the time ratio to the reference at or above which no points are given")
    reference: StrictStr = Field(None, description=_REFERENCE)  # absent: the part itself
    absolute_ms: Annotated[dict, _check(_absolute_problem)] = Field(
        default_factory=dict, description="a mapping of GPU name to a mapping of timed size n to milliseconds")

    @model_validator(mode="after")
    def _bar(self) -> "_PartTiming":
        if not self.zero_at > self.full_at:
            raise _fault("must be above full_at", field=("zero_at",), value=self.zero_at)
        return self


class _PartProfile(_Schema):
    """A part's ``profile:`` block (:class:`ProfileConfig`)."""

    size: Int = Field(description="the n of the profiled run")
    points: Annotated[Number, _check(_not_negative)] = Field(
        0, description="a non-negative number of points for conflict-free shared memory")
    full_at: Annotated[Number, _check(lambda v: None if v >= 1 else "must be at least 1")] = Field(
        1.1, description="the ratio of shared-memory wavefronts to the reference's at or below which all "
                         "points are given")
    zero_at: Number = Field(4.0, description="the ratio of shared-memory wavefronts to the reference's at or "
                                             "above which no points are given")
    reference: StrictStr = Field(None, description=_REFERENCE)  # absent: the part itself
    reference_wavefronts: Annotated[Int, _check(_positive)] = Field(
        None, description="the reference's shared-memory wavefronts at size (used without the reference solution)")
    blocks: Annotated[Int, _check(_not_negative)] = Field(
        1, description="how many blocks of each launch are profiled (0: all)")

    @model_validator(mode="after")
    def _bar(self) -> "_PartProfile":
        if not self.zero_at > self.full_at:
            raise _fault("must be above full_at", field=("zero_at",), value=self.zero_at)
        return self


class _Part(_Schema):
    """One part under ``parts:``; validated with the context ``spec`` (its PartSpec) and ``block_size``
    (the top-level one, this part's default)."""

    block_size: _BLOCK = Field(None, description="a power of two from 32 to 1024 (this part's BLOCK_SIZE)")
    sizes: _SIZES = Field(description=_SIZES_WHAT)
    hidden_sizes: list = Field(default_factory=list, description="a list of sizes n")
    points_per_case: Annotated[Number, _check(_not_negative)] = Field(
        1, description="a non-negative number of points")
    dtypes: Annotated[list, _check(_dtypes_problem)] = Field(
        default_factory=lambda: ["int32"], description="a non-empty list of " + " and ".join(DTYPES))
    timing: _PartTiming = Field(None)
    profile: _PartProfile = Field(None)

    def block(self, info: ValidationInfo) -> int:
        """This part's BLOCK_SIZE: its own, else the top-level one."""
        return info.context["block_size"] if self.block_size is None else self.block_size

    @model_validator(mode="after")
    def _within_limits(self, info: ValidationInfo) -> "_Part":
        spec, block = info.context["spec"], self.block(info)
        limit = spec.limit(block)
        for field, sizes in ((("sizes",), self.sizes), (("hidden_sizes",), self.hidden_sizes),
                             (("timing", "sizes"), self.timing.sizes if self.timing else [])):
            problem = _sizes_problem("sizes" if field[-1] == "sizes" else field[-1], sizes, limit, block)
            if problem:
                raise _fault(problem, field=field, plain=True)
        items = getattr(self, "items_per_thread", None)
        if items is not None and block * items * 4 > 48 * 1024:
            raise _fault(f"block_size {block} x items_per_thread {items} x 4 bytes of shared memory exceeds 48 KiB",
                         field=("items_per_thread",), plain=True)
        if self.profile and not (self.profile.size >= 1 and (limit is None or self.profile.size <= limit)):
            problem = (f"must be from 1 to this part's limit of {limit} elements (with block_size {block})"
                       if limit is not None else "must be positive")
            raise _fault(problem, field=("profile", "size"), value=self.profile.size)
        return self


class _TunedPart(_Part):
    """A part with ITEMS_PER_THREAD (Part 5)."""

    items_per_thread: Annotated[Int, _check(lambda v: None if 1 <= v <= 64 else "must be from 1 to 64")] = Field(
        description="ITEMS_PER_THREAD, from 1 to 64")


class _Private(_Schema):
    """A TA's private config: the hidden cases' seed and, per part, hidden sizes (:class:`_PrivatePart`)."""

    seed: Annotated[Int, _check(_not_negative)] = Field(
        None, description="a non-negative integer (the hidden cases' seed)")
    parts: dict = Field(default_factory=dict)


class _PrivatePart(_Schema):
    """One part of a private config; validated with the context ``limit`` and ``block_size``."""

    hidden_sizes: list = Field(default_factory=list, description="a list of sizes n")

    @model_validator(mode="after")
    def _within_limits(self, info: ValidationInfo) -> "_PrivatePart":
        problem = _sizes_problem("hidden_sizes", self.hidden_sizes, info.context["limit"], info.context["block_size"])
        if problem:
            raise _fault(problem, field=("hidden_sizes",), plain=True)
        return self


def _key_lines(mapping: Any) -> Callable[[Any], int | None]:
    """key -> the line of ``key`` in a mapping read by :class:`_Lines` (else the mapping's line)."""
    return lambda key: getattr(mapping, "lines", {}).get(key, getattr(mapping, "line", None))


def _validate(model: type[_Schema], data: Any, *, path: str, root: Any, prefix: tuple = (),
              context: dict | None = None) -> Any:
    """``model`` validated from ``data`` (found at key path ``prefix`` of the file's ``root``)."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise _config_error(exc.errors()[0], model=model, path=path, root=root, prefix=prefix) from None


def _config_error(error: dict, *, model: type[_Schema], path: str, root: Any, prefix: tuple) -> ConfigError:
    """One pydantic error as scangrade's :class:`ConfigError`: the dotted key (the fields along the
    error's location, not list indexes or mapping entries below them), the line of that key in the file
    (else of the mapping that lacks it) and a message using the field's description."""
    ctx = error.get("ctx") or {}
    loc = tuple(error["loc"]) + tuple(ctx.get("field", ()))
    kind = error["type"]
    # walk the models along loc: the field at fault and the model holding it
    holder, info, keys = model, None, []
    for step in loc:
        fields = getattr(holder, "model_fields", None) if holder else None
        if kind in ("extra_forbidden", "invalid_key") and len(keys) == len(loc) - 1:
            keys.append(str(step))  # the unknown key itself
            break
        if not fields or step not in fields:
            break
        keys.append(step)
        info = fields[step]
        holder = info.annotation if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel) \
            else None
    full = prefix + tuple(keys)
    # the line: of the key where the file has it, else of the mapping it belongs in
    node, line = root, getattr(root, "line", 1)
    for step in full:
        if isinstance(node, dict) and step in node:
            line = getattr(node, "lines", {}).get(step, line)
            node = node[step]
        else:
            line = getattr(node, "line", line)
            break
    key = ".".join(str(k) for k in full) or None
    what = info.description if info is not None else None
    value = ctx["value"] if "value" in ctx else error.get("input")
    if kind in ("extra_forbidden", "invalid_key"):
        allowed = ", ".join(sorted(holder.model_fields))
        message = f"unknown key; allowed here: {allowed}"
    elif kind == "missing":
        message = f"is required: {what}" if what else "is required"
    elif kind == _PLAIN:
        message = ctx["problem"]
    elif kind == _CHECK:
        message = f"{ctx['problem']} (got {value!r}); expected {what}"
    elif kind in ("model_type", "model_attributes_type") or (kind == "dict_type" and not what):
        message = f"must be a mapping of keys to values (got {type(value).__name__})"
    else:  # a value of the wrong type
        message = f"must be {what} (got {value!r})"
    return ConfigError(message, path=path, key=key, line=line)


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
    root = data if data is not None else {}
    top = _validate(_Top, root, path=p, root=root)
    parts: dict[str, PartConfig] = {}
    lines = _key_lines(root["parts"])
    for key in top.parts:
        if key not in PARTS:
            raise ConfigError("unknown part; known parts: " + ", ".join(PARTS), path=p, key=f"parts.{key}",
                              line=lines(key))
    for key, spec in PARTS.items():
        if key in top.parts:
            model = _TunedPart if spec.items_per_thread else _Part
            part = _validate(model, top.parts[key], path=p, root=root, prefix=("parts", key),
                             context={"spec": spec, "block_size": top.block_size})
            parts[key] = _part_config(part, spec, top.block_size)
    for key, pc in parts.items():
        line = lines(key)
        if pc.timing and pc.timing.reference not in PARTS:
            raise ConfigError(f"timing.reference {pc.timing.reference!r} is not a part", path=p,
                              key=f"parts.{key}", line=line)
        if pc.profile and pc.profile.reference not in PARTS:
            raise ConfigError(f"profile.reference {pc.profile.reference!r} is not a part; known parts: "
                              + ", ".join(PARTS), path=p, key=f"parts.{key}", line=line)
    t = top.timeouts
    return Config(path=p, block_size=top.block_size, seed=top.seed, input_low=top.inputs.low,
                  input_high=top.inputs.high, backend=top.backend, part_timeout_s=float(t.part_s),
                  case_timeout_s=float(t.case_s), submission_timeout_s=float(t.submission_s),
                  emulator_workers=top.emulator.workers, parts=parts, float_rtol=float(top.float_rtol),
                  emulator_checks_max_n=top.emulator.checks_max_n, emulator_sandbox=top.emulator.sandbox,
                  emulator_sandbox_explicit="sandbox" in top.emulator.model_fields_set,
                  timing_warmup=top.timing.warmup, timing_runs=top.timing.runs,
                  flush_bytes=top.timing.flush_mib * 2**20,
                  expected_copy_gbps={k: float(v) for k, v in top.timing.expected_copy_gbps.items()},
                  prairielearn_compile_error=top.prairielearn.compile_error)


def _part_config(part: _Part, spec, default_block: int) -> PartConfig:
    """The :class:`PartConfig` of a validated part."""
    timing = profile = None
    if part.timing:
        t = part.timing
        timing = TimingConfig(sizes=tuple(t.sizes), points=float(t.points), full_at=float(t.full_at),
                              zero_at=float(t.zero_at), reference=spec.key if t.reference is None else t.reference,
                              absolute_ms={g: {int(n): float(ms) for n, ms in v.items()}
                                           for g, v in t.absolute_ms.items()})
    if part.profile:
        f = part.profile
        profile = ProfileConfig(size=f.size, points=float(f.points), full_at=float(f.full_at),
                                zero_at=float(f.zero_at), reference=spec.key if f.reference is None else f.reference,
                                reference_wavefronts=f.reference_wavefronts, blocks=f.blocks)
    return PartConfig(sizes=tuple(part.sizes), points_per_case=float(part.points_per_case),
                      dtypes=tuple(part.dtypes),
                      block_size=default_block if part.block_size is None else part.block_size,
                      items_per_thread=getattr(part, "items_per_thread", None),
                      hidden_sizes=tuple(part.hidden_sizes), timing=timing, profile=profile)


def load_private(cfg: Config, path: str | os.PathLike) -> Config:
    """Layer a TA's private configuration over a public one.

    The private file may hold ``seed`` (the seed of the hidden cases; visible cases keep the
    public seed) and, per part, ``hidden_sizes``: cases that students see by name and status only.
    Nothing else, so a private file cannot silently change what the public config promises.

    Raises:
        ConfigError: as :func:`load_config`, naming the private file.
    """
    p = str(path)
    root = _read_yaml(p) or {}
    private = _validate(_Private, root, path=p, root=root)
    parts = dict(cfg.parts)
    lines = _key_lines(root.get("parts"))
    for key in private.parts:
        if key not in cfg.parts:
            raise ConfigError("not a part of the public config; its parts: " + ", ".join(cfg.parts), path=p,
                              key=f"parts.{key}", line=lines(key))
        pc = cfg.parts[key]
        extra = _validate(_PrivatePart, private.parts[key], path=p, root=root, prefix=("parts", key),
                          context={"limit": PARTS[key].limit(pc.block_size), "block_size": pc.block_size})
        parts[key] = dataclasses.replace(pc, hidden_sizes=pc.hidden_sizes + tuple(extra.hidden_sizes))
    return dataclasses.replace(cfg, hidden_seed_value=private.seed, parts=parts, private_path=p)
