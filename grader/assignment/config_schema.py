"""The schema of ``config.yaml``: one frozen pydantic model per YAML mapping (:class:`ConfigFile` and the
models of its keys), and :class:`Config`, the validated configuration the whole grader runs with; and
the private config's (:class:`PrivateFile`, :class:`PrivatePart`).

Every key has a type, a default (or is required), a description and a check, declared once here. These
models *are* the runtime configuration: the grader reads ``cfg.timeouts.part_s`` or
``cfg.parts["part1_naive"].sizes`` where the file says ``timeouts: part_s:`` or ``parts: part1_naive:
sizes:``. Reading a file into them, and turning a validation error into a :class:`ConfigError` naming
the file, line and key, is :mod:`grader.assignment.config_load`'s job; callers import both through
:mod:`grader.assignment.config`.
"""

from __future__ import annotations

from typing import Annotated, Any, Callable

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, Strict, StrictBool, StrictInt, StrictStr,
                      ValidationInfo, model_validator)
from pydantic_core import PydanticCustomError

from grader.backends import CHOICES as BACKEND_CHOICES
from grader.backends import DEFAULT_TARGET_ARCH, TARGET_ARCHS
from grader.assignment.parts import DTYPES, PARTS, PartSpec

#: Values of ``emulator.sandbox`` (grader.toolchain.sandbox.POLICIES).
SANDBOX_CHOICES = ("auto", "required", "off")
#: Values of ``prairielearn.compile_error``: how PrairieLearn's results.json treats a part that does not
#: compile (:func:`grader.render.prairielearn.prairielearn`).
COMPILE_ERROR_CHOICES = ("not-gradable", "zero")
#: ``block_size`` when the file does not set it (a part's default is the top-level value).
DEFAULT_BLOCK_SIZE = 512


# ---- the schema: one pydantic model per mapping; defaults and descriptions declared once ----------------
#
# Each field's ``description`` says what the key holds, in the words of the error messages
# ("must be <description> (got ...)", "is required: <description>"). Checks that need more than the
# value (a part's size limit, full_at < zero_at) are model validators naming the field they fault.
# Validation errors become :class:`ConfigError` in :mod:`grader.assignment.config_load`,
# with the file, the line of the key (from :class:`grader.assignment.config_load._Lines`) and the dotted key.

#: The error types of a failed check (:func:`_fault`), which
#: :func:`grader.assignment.config_load` words: a value refused by a check, and a problem said as it is.
CHECK_ERROR, PLAIN_ERROR = "scangrade_check", "scangrade_plain"


def _fault(problem: str, *, field: tuple = (), value: Any = ..., plain: bool = False) -> PydanticCustomError:
    """A validation error with scangrade's wording: ``problem (got value); expected <description>``, or
    ``problem`` alone when ``plain``; ``field``: the key at fault below the model validated (a model
    validator names it; a field validator leaves it empty)."""
    ctx = {"problem": problem, "field": field}
    if value is not ...:
        ctx["value"] = value
    return PydanticCustomError(PLAIN_ERROR if plain else CHECK_ERROR, "{problem}", ctx)


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


def _measured_gpu(v: str | None) -> str | None:
    from grader.core.gpu_models import GPU_MODELS
    if v is None or v in GPU_MODELS:
        return None
    return (f"has no measured model: one of {', '.join(sorted(GPU_MODELS))} (or null); measure another GPU with "
            "bench/gpu_constants.py (docs/prediction.md)")


def _not_empty(v: list) -> str | None:
    return None if v else "must not be empty"


def _tuple(v: Any) -> Any:
    """YAML and JSON write a sequence as a list; the configuration holds tuples (it is frozen)."""
    return tuple(v) if isinstance(v, list) else v


#: An integer (YAML's true/false are not).
Int = StrictInt
#: A sequence, held as a tuple; its items are checked by the model (:func:`_sizes_problem`, ...).
Seq = Annotated[tuple, BeforeValidator(_tuple)]


def _sizes_problem(name: str, sizes: tuple, limit: int | None, block_size: int) -> str | None:
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
    """A mapping of config.yaml: unknown keys refused, no type coercion (``"64"`` is not 64; an
    integer is accepted where a float is wanted), frozen once validated."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Inputs(_Schema):
    """``inputs:``: the range of the integer inputs (float inputs: :func:`grader.grading.case.inputs.make_input`)."""

    low: Int = Field(-1000, description="an integer (smallest input value)")
    high: Int = Field(1000, description="an integer (largest input value)")

    @model_validator(mode="after")
    def _range(self) -> "Inputs":
        if not (-2**31 <= self.low <= self.high < 2**31):
            raise _fault(f"low ({self.low}) and high ({self.high}) must satisfy -2^31 <= low <= high < 2^31",
                         field=("high",), plain=True)
        return self


_SECONDS = "a positive number of seconds"


class Timeouts(_Schema):
    """``timeouts:``: seconds allowed to a part (compile and cases together), to one case, and to a
    whole submission (parts not started by then are reported as timed out)."""

    part_s: Annotated[float, _check(_positive)] = Field(300.0, description=_SECONDS)
    case_s: Annotated[float, _check(_positive)] = Field(120.0, description=_SECONDS)
    submission_s: Annotated[float, _check(_positive)] = Field(1800.0, description=_SECONDS)


def _bare_off(v: Any) -> Any:
    return "off" if v is False else v  # YAML 1.1 reads a bare `off` as false


class EmulatorConfig(_Schema):
    """``emulator:``: worker threads, the checked sizes and the sandbox policy.

    ``checks_max_n``: with checks on, cases up to this n run with race, bounds and barrier checks
    under three thread orders; in larger ones the checks run on a sample of each launch's blocks
    (the first, the last and 2 drawn from the case's seed), in the same orders (checking every block
    is ~3x slower).
    ``sandbox``: how the emulator isolates student code (``docs/security.md``); where the file does
    not set it (:attr:`sandbox_explicit`), ``batch`` and the Gradescope autograder require the
    sandbox (:func:`grader.grading.runner.grading_sandbox`).
    """

    workers: Annotated[Int, _check(_not_negative)] = Field(
        0, description="a number of worker threads (0: one per core)")
    checks_max_n: Annotated[Int, _check(_positive)] = Field(
        70000, description="the largest n checked whole for races under three thread orders")
    sandbox: Annotated[StrictStr, BeforeValidator(_bare_off),
                       _check(lambda v: None if v in SANDBOX_CHOICES else "unknown sandbox policy")] = Field(
        "auto", description="one of " + ", ".join(SANDBOX_CHOICES))

    @property
    def sandbox_explicit(self) -> bool:
        """Whether the file sets ``sandbox`` (where it does not, the command decides)."""
        return "sandbox" in self.model_fields_set


class TimingMethod(_Schema):
    """``timing:``: how GPU times are taken (warm-up, runs, the L2 flush, copy bandwidths)."""

    warmup: Annotated[Int, _check(_not_negative)] = Field(10, description="a number of untimed runs")
    runs: Annotated[Int, _check(lambda v: None if v >= 3 else "must be at least 3")] = Field(
        30, description="a number of timed runs (at least 3)")
    flush_mib: Annotated[Int, _check(_not_negative)] = Field(
        512, description="MiB written before each timed run to empty the L2 cache")
    expected_copy_gbps: Annotated[dict[str, float], _check(_gbps_problem)] = Field(
        default_factory=dict, description="a mapping of GPU name to device-to-device copy GB/s")

    @property
    def flush_bytes(self) -> int:
        """Bytes written before each timed run to empty the L2 cache."""
        return self.flush_mib * 2**20


class RooflineConfig(_Schema):
    """``roofline:``: the course's target GPU, whose figures turn the emulator's counts into an
    estimated lower bound on a kernel's time (:mod:`grader.grading.analysis`); they earn and take no points.

    ``target``: its name, for the reports. ``dram_gbps``: its peak DRAM bandwidth (10^9 bytes/s).
    ``step_ns``: the least time one dependent step of a thread takes (a shared-memory access or a
    barrier: about 30 cycles on Hopper, 15 ns at 1.98 GHz; the default is below it, so the bound
    stays a bound). ``launch_us``: the least time a launch adds between dependent kernels.
    ``max_n``: the largest size counted on the emulator (the bound at larger timed sizes scales
    its bytes by n and its span by n to the power it grew from max_n / 4 to max_n:
    :func:`grader.grading.analysis.span_exponent`). ``predict_on``: the GPU whose measured model
    (:data:`grader.grading.prediction.GPU_MODELS`) predicts each timed part's time and points from
    the same counts (never counted; docs/prediction.md), or null for no prediction.
    """

    target: StrictStr = Field("NVIDIA H100 80GB HBM3", description="the GPU's name (for the reports)")
    dram_gbps: Annotated[float, _check(_positive)] = Field(
        3350.0, description="a positive number of GB/s (the target's peak DRAM bandwidth)")
    step_ns: Annotated[float, _check(_not_negative)] = Field(
        10.0, description="a non-negative number of ns (the least time of one dependent step)")
    launch_us: Annotated[float, _check(_not_negative)] = Field(
        1.0, description="a non-negative number of µs (the least time a launch adds)")
    max_n: Annotated[Int, _check(_positive)] = Field(
        65536, description="a positive size n (the largest counted on the emulator)")
    predict_on: Annotated[StrictStr, _check(_measured_gpu)] | None = Field(
        "NVIDIA H200", description="a GPU of grader/core/gpu_models.json, or null (no predicted time)")


class CompileCacheConfig(_Schema):
    """``compile_cache:``: the bounds of the compile cache (``<cache>/compiled``: emulated modules and
    cubins, kept between runs; :class:`grader.toolchain.cache.CompileCache`).

    ``max_mib``: the most the cache holds; past it the least recently used go first.
    ``max_age_days``: a file not used for that long goes. ``submission_mib``: the most one grading
    (one submission) may add; what it compiles past that, and any one file larger, is used and not
    kept (a static array of 60 MiB in a part's file makes each of its modules that large).
    """

    max_mib: Annotated[Int, _check(_positive)] = Field(
        1024, description="a positive number of MiB (the most the compile cache holds)")
    max_age_days: Annotated[Int, _check(_positive)] = Field(
        30, description="a positive number of days (a compiled file not used for that long is removed)")
    submission_mib: Annotated[Int, _check(_positive)] = Field(
        32, description="a positive number of MiB (the most one submission's grading adds to the compile cache)")

    @model_validator(mode="after")
    def _quota_within_bound(self) -> "CompileCacheConfig":
        if self.submission_mib > self.max_mib:
            raise _fault(f"submission_mib ({self.submission_mib}) must not be above max_mib ({self.max_mib})",
                         field=("submission_mib",), plain=True)
        return self


class CheckConfig(_Schema):
    """``check:``: what ``scangrade check`` grades by default. ``quick_max_n``: the largest n it
    grades (hidden sizes included), so that a student's edit-check loop takes seconds; ``check
    --full`` and every official grade (``grade``, ``batch``, the bundles, the pytest plugin) grade
    every size."""

    quick_max_n: Annotated[Int, _check(_positive)] = Field(
        300000, description="a positive integer (the largest n `scangrade check` grades unless --full)")


class PrairieLearnConfig(_Schema):
    """``prairielearn:``: how PrairieLearn's results.json treats a submission (docs/prairielearn.md)."""

    compile_error: Annotated[StrictStr, _check(
        lambda v: None if v in COMPILE_ERROR_CHOICES else "unknown compile-error policy")] = Field(
        "not-gradable", description="one of " + ", ".join(COMPILE_ERROR_CHOICES)
                                    + " (a part that does not compile: no score and no attempt used, or 0 points)")


_BLOCK = Annotated[Int, _check(_power_of_two_block)]
_SIZES = Annotated[Seq, _check(_not_empty)]
_SIZES_WHAT = "a list of sizes n (not empty)"
#: A size as the key of a mapping: JSON writes keys as strings, read back as the integer they spell.
_SIZE_KEY = Annotated[int, Strict(False)]
_REFERENCE = "the key of the part whose reference solution sets the bar (absent: the part itself)"
_AT_LEAST_1 = _check(lambda v: None if v >= 1 else "must be at least 1")


class _Scored(_Schema):
    """A block scored linearly between ``full_at`` (all points) and ``zero_at`` (none), which must be
    above it: :class:`TimingConfig`, :class:`ProfileConfig`."""

    @model_validator(mode="after")
    def _bar(self) -> "_Scored":
        if not self.zero_at > self.full_at:
            raise _fault("must be above full_at", field=("zero_at",), value=self.zero_at)
        return self


class TimingConfig(_Scored):
    """A part's ``timing:`` block: how it is timed on a GPU and scored for speed. Full points when
    the weighted geometric mean of (time / reference time) is at most ``full_at``, none at
    ``zero_at`` or above, linear in between; ``absolute_ms`` (GPU name -> {n: ms}) sets the bar
    where no reference solution can be timed (a student release), on the GPUs named.
    ``analysis_sizes`` are timed as well, for the analysis table (:mod:`grader.grading.analysis`: the
    assignment's n = 16,000,000), and never scored."""

    sizes: _SIZES = Field(description=_SIZES_WHAT)
    points: Annotated[float, _check(_not_negative)] = Field(
        description="a non-negative number of performance points")
    full_at: Annotated[float, _AT_LEAST_1] = Field(
        1.2, description="the time ratio to the reference at or below which all points are given")
    zero_at: float = Field(10.0, description="the time ratio to the reference at or above which no points are given")
    reference: StrictStr = Field("", description=_REFERENCE)
    absolute_ms: Annotated[dict[str, dict[_SIZE_KEY, float]], _check(_absolute_problem)] = Field(
        default_factory=dict, description="a mapping of GPU name to a mapping of timed size n to milliseconds")
    analysis_sizes: Seq = Field((), description="a list of sizes n timed for the analysis table only (never scored)")

    @property
    def all_sizes(self) -> tuple[int, ...]:
        """Every size timed: the scored ``sizes``, then the ``analysis_sizes`` not among them."""
        return tuple(dict.fromkeys((*self.sizes, *self.analysis_sizes)))


class ProfileConfig(_Scored):
    """A part's ``profile:`` block: its memory-access profile (bank conflicts, sectors per request;
    see :mod:`grader.core.access_profile`), counted by the CPU emulator on any machine, and its points: all
    when the part's shared-memory wavefronts (conflicts included) are at most ``full_at`` times the
    reference's, none at ``zero_at`` or above, linear in between; none for a scan that is not
    parallel or uses no shared memory (its span over ``span_slack`` or its barriers over
    ``barrier_slack`` times the reference's: :func:`grader.core.access_profile.not_parallel`).
    ``reference_wavefronts``, ``reference_span_steps`` and ``reference_barriers`` are used where the
    reference solution is absent (a student release); None: not scored there (wavefronts), not
    checked (span, barriers)."""

    size: Int = Field(description="the n of the profiled run")
    points: Annotated[float, _check(_not_negative)] = Field(
        0.0, description="a non-negative number of points for conflict-free shared memory")
    full_at: Annotated[float, _AT_LEAST_1] = Field(
        1.1, description="the ratio of shared-memory wavefronts to the reference's at or below which all "
                         "points are given")
    zero_at: float = Field(4.0, description="the ratio of shared-memory wavefronts to the reference's at or "
                                            "above which no points are given")
    reference: StrictStr = Field("", description=_REFERENCE)
    reference_wavefronts: Annotated[Int, _check(_positive)] | None = Field(
        None, description="the reference's shared-memory wavefronts at size (used without the reference solution)")
    span_slack: Annotated[float, _AT_LEAST_1] = Field(
        3.0, description="the most span (memory operations of one thread) a scan may take, as a multiple of the "
                         "reference's at size, and keep its points")
    barrier_slack: Annotated[float, _AT_LEAST_1] = Field(
        3.0, description="the most barriers a block may pass, as a multiple of the reference's at size, and keep "
                         "its points")
    reference_span_steps: Annotated[Int, _check(_positive)] | None = Field(
        None, description="the reference's span in steps at size (used without the reference solution)")
    reference_barriers: Annotated[Int, _check(_positive)] | None = Field(
        None, description="the reference's barriers per block at size (used without the reference solution)")
    blocks: Annotated[Int, _check(_not_negative)] = Field(
        1, description="how many blocks of each launch are profiled (0: all)")


class PartConfig(_Schema):
    """One part under ``parts:``: its cases (every size runs for each dtype), points (required: a
    default would grade a course on points it never chose), BLOCK_SIZE
    (the top-level ``block_size`` unless set), ITEMS_PER_THREAD (Part 5's only), the hidden sizes of a
    private config (students see those cases by name and status only), and its timing and profile
    (None: not timed, not profiled). Its limits are checked by :class:`ConfigFile`, which knows the
    part."""

    block_size: _BLOCK = Field(DEFAULT_BLOCK_SIZE, description="a power of two from 32 to 1024 (this part's "
                                                               "BLOCK_SIZE)")
    sizes: _SIZES = Field(description=_SIZES_WHAT)
    hidden_sizes: Seq = Field((), description="a list of sizes n")
    fractional_sizes: Seq = Field((), description="a list of sizes n (float32 cases with fractional inputs)")
    points_per_case: Annotated[float, _check(_not_negative)] = Field(
        description="a non-negative number of points, what each case of the part is worth (the shipped "
                    "config.yaml gives 1)")
    dtypes: Annotated[Seq, _check(_dtypes_problem)] = Field(
        ("int32",), description="a non-empty list of " + " and ".join(DTYPES))
    items_per_thread: Annotated[Int, _check(lambda v: None if 1 <= v <= 64 else "must be from 1 to 64")] | None = \
        Field(None, description="ITEMS_PER_THREAD, from 1 to 64")
    timing: TimingConfig | None = None
    profile: ProfileConfig | None = None

    @staticmethod
    def keys(spec: PartSpec) -> list[str]:
        """The keys a part's mapping may hold (``items_per_thread`` only where the part takes it)."""
        return [k for k in PartConfig.model_fields if k != "items_per_thread" or spec.items_per_thread]

    def problem(self, spec: PartSpec) -> PydanticCustomError | None:
        """What is wrong with this part as part ``spec`` (its ITEMS_PER_THREAD, a size beyond its
        limit with this BLOCK_SIZE, shared memory, a reference that is no part), or None."""
        if spec.items_per_thread and self.items_per_thread is None:
            return PydanticCustomError("missing", "is required", {"field": ("items_per_thread",)})
        if not spec.items_per_thread and self.items_per_thread is not None:
            return PydanticCustomError("extra_forbidden", "unknown key", {"field": ("items_per_thread",)})
        block = self.block_size
        limit = spec.limit(block)
        for field, sizes in ((("sizes",), self.sizes), (("hidden_sizes",), self.hidden_sizes),
                             (("fractional_sizes",), self.fractional_sizes),
                             (("timing", "sizes"), self.timing.sizes if self.timing else ()),
                             (("timing", "analysis_sizes"), self.timing.analysis_sizes if self.timing else ())):
            problem = _sizes_problem("sizes" if field[-1] == "sizes" else field[-1], sizes, limit, block)
            if problem:
                return _fault(problem, field=field, plain=True)
        items = self.items_per_thread
        if items is not None and block * items * 4 > 48 * 1024:
            return _fault(f"block_size {block} x items_per_thread {items} x 4 bytes of shared memory exceeds 48 KiB",
                          field=("items_per_thread",), plain=True)
        if self.profile and not (self.profile.size >= 1 and (limit is None or self.profile.size <= limit)):
            problem = (f"must be from 1 to this part's limit of {limit} elements (with block_size {block})"
                       if limit is not None else "must be positive")
            return _fault(problem, field=("profile", "size"), value=self.profile.size)
        for name, block_config in (("timing", self.timing), ("profile", self.profile)):
            if block_config and block_config.reference not in PARTS:
                return _fault(f"{name}.reference {block_config.reference!r} is not a part; known parts: "
                              + ", ".join(PARTS), field=(name, "reference"), plain=True)
        return None


#: Why ``float_rtol`` is refused, and what to do.
REMOVED_FLOAT_RTOL = (
    "is no longer used: float32 cases draw inputs whose every sum is exact and are compared exactly, and the "
    "fractional cases (a part's fractional_sizes) within a per-element error bound (docs/results.md, \"How "
    "float32 is checked\"); delete this key")


class ConfigFile(_Schema):
    """What a config.yaml holds (see the project's ``config.yaml`` for every key, commented).
    ``parts`` maps part keys to :class:`PartConfig`, in handout order; parts absent from the file
    are not graded. Defaults that come from elsewhere in the file are filled before validation: a
    part's ``block_size`` is the top-level one, a timing's or profile's ``reference`` the part itself.
    """

    block_size: _BLOCK = Field(DEFAULT_BLOCK_SIZE, description="a power of two from 32 to 1024 (threads per block)")
    seed: Annotated[Int, _check(_not_negative)] = Field(
        description="a non-negative integer (the input generator's seed)")
    inputs: Inputs = Field(default_factory=Inputs)
    backend: Annotated[StrictStr, _check(lambda v: None if v in BACKEND_CHOICES else "unknown backend")] = Field(
        "auto", description="one of " + ", ".join(BACKEND_CHOICES))
    target_arch: Annotated[Int, _check(lambda v: None if v in TARGET_ARCHS else "unknown GPU architecture")] = Field(
        DEFAULT_TARGET_ARCH, description="the GPU the course targets, its compute capability times ten (90: an "
                                         "H100); one of " + ", ".join(map(str, TARGET_ARCHS)))
    timeouts: Timeouts = Field(default_factory=Timeouts)
    check: CheckConfig = Field(default_factory=CheckConfig)
    emulator: EmulatorConfig = Field(default_factory=EmulatorConfig)
    timing: TimingMethod = Field(default_factory=TimingMethod)
    prairielearn: PrairieLearnConfig = Field(default_factory=PrairieLearnConfig)
    sanitizer_audit: StrictBool = Field(
        False, description="true or false (on a GPU, also run NVIDIA compute-sanitizer on the checked cases, "
                           "as an audit beside the emulator's checks)")
    compile_cache: CompileCacheConfig = Field(default_factory=CompileCacheConfig)
    roofline: RooflineConfig = Field(default_factory=RooflineConfig)
    parts: dict[str, PartConfig]

    @model_validator(mode="before")
    @classmethod
    def _part_defaults(cls, data: Any) -> Any:
        """Parts in handout order, unknown ones refused; each part's ``block_size`` the top-level one
        and its timing's and profile's ``reference`` the part itself, where the file leaves them out.
        ``float_rtol`` (a key of earlier versions) is refused with what replaced it."""
        if isinstance(data, dict) and "float_rtol" in data:
            raise _fault(REMOVED_FLOAT_RTOL, field=("float_rtol",), plain=True)
        if not isinstance(data, dict) or not isinstance(data.get("parts"), dict):
            return data
        for key in data["parts"]:
            if key not in PARTS:
                raise _fault("unknown part; known parts: " + ", ".join(PARTS), field=("parts", key), plain=True)
        block = data.get("block_size", cls.model_fields["block_size"].default)
        parts = {}
        for key in (k for k in PARTS if k in data["parts"]):
            part = data["parts"][key]
            if isinstance(part, dict):
                part = {"block_size": block, **part}
                for name in ("timing", "profile"):
                    if isinstance(part.get(name), dict):
                        part[name] = {"reference": key, **part[name]}
            parts[key] = part
        return {**data, "parts": parts}

    @model_validator(mode="after")
    def _parts_fit(self) -> "ConfigFile":
        for key, part in self.parts.items():
            problem = part.problem(PARTS[key])
            if problem is not None:
                ctx = dict(problem.context or {})
                ctx["field"] = ("parts", key) + tuple(ctx.get("field", ()))
                raise PydanticCustomError(problem.type, problem.message_template, ctx)
        return self


class Config(ConfigFile):
    """A validated configuration: a :class:`ConfigFile`, with where it came from.

    Attributes:
        path: the file it was read from.
        private_path: the TA's private overlay laid over it (:func:`load_private`), if any.
        private_seed: the private overlay's seed of the hidden cases, if it sets one.
    """

    path: str
    private_path: str | None = None
    private_seed: Int | None = None

    @property
    def hidden_seed(self) -> int:
        """The seed of hidden cases: the private config's, else the public seed."""
        return self.seed if self.private_seed is None else self.private_seed

    def override(self, **changes: Any) -> "Config":
        """A copy with ``changes``, validated again. A mapping given for a key that holds a mapping
        is merged into it: ``cfg.override(seed=7, emulator={"workers": 1})`` keeps the other
        emulator keys, and whether the file set them.

        Raises:
            pydantic.ValidationError: a change is not a valid value (a bug of the caller, not of a file).
        """
        return type(self).model_validate(_merged(self.model_dump(exclude_unset=True), changes))


def _merged(base: dict, changes: dict) -> dict:
    """``base`` with ``changes`` laid over it, mapping into mapping."""
    out = dict(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            value = _merged(out[key], value)
        out[key] = value
    return out


class PrivateFile(_Schema):
    """A TA's private config: the hidden cases' seed and, per part, hidden sizes (:class:`PrivatePart`),
    laid over a :class:`Config` by :func:`grader.assignment.config_load.load_private`."""

    seed: Annotated[Int, _check(_not_negative)] = Field(
        description="a non-negative integer of its own, not the public seed (the hidden cases' inputs are drawn "
                    "from it: with the public seed, anyone could compute them); `scangrade private-template` "
                    "draws one")
    parts: dict = Field(default_factory=dict)


class PrivatePart(_Schema):
    """One part of a private config; validated with the context ``limit`` and ``block_size``."""

    hidden_sizes: Seq = Field((), description="a list of sizes n")

    @model_validator(mode="after")
    def _within_limits(self, info: ValidationInfo) -> "PrivatePart":
        problem = _sizes_problem("hidden_sizes", self.hidden_sizes, info.context["limit"], info.context["block_size"])
        if problem:
            raise _fault(problem, field=("hidden_sizes",), plain=True)
        return self
