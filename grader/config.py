"""Loading and validating ``config.yaml``.

The schema is declared once, below: every key has a type, a default (or is required), a
description and a check. Loading reports the first problem as a :class:`ConfigError` naming the
file, the line and the dotted key, and what is allowed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from grader.errors import ConfigError
from grader.parts import PARTS

BACKEND_CHOICES = ("auto", "pycuda", "emulator")


@dataclass(frozen=True)
class PartConfig:
    """How one part is graded.

    Attributes:
        sizes: the n of each case, in order.
        points_per_case: points for each passing case.
    """

    sizes: tuple[int, ...]
    points_per_case: float = 1.0


@dataclass(frozen=True)
class Config:
    """A validated configuration.

    Attributes:
        path: the file it was read from.
        block_size: threads per block (BLOCK_SIZE), a power of two in [32, 1024].
        seed: base seed of the input generator.
        input_low, input_high: inclusive range of the integer inputs.
        backend: ``auto``, ``pycuda`` or ``emulator``.
        part_timeout_s: seconds allowed to one part, compile and cases together.
        emulator_workers: emulator worker threads (0: one per core).
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


def _positive(v: float) -> str | None:
    return None if v > 0 else "must be positive"


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
    try:
        text = Path(p).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the file ({exc.strerror}); pass an existing file with --config",
                          path=p) from None
    try:
        data = yaml.load(text, Loader=_Lines)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"not valid YAML: {problem}", path=p,
                          line=mark.line + 1 if mark else None) from None
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
    timeouts.finish()
    emulator = top.sub("emulator")
    workers = emulator.take("workers", int, 0, check=lambda v: None if v >= 0 else "must not be negative",
                            what="a number of worker threads (0: one per core)")
    emulator.finish()

    parts_reader = top.sub("parts", required=True)
    parts: dict[str, PartConfig] = {}
    for key in parts_reader.data:
        if key not in PARTS:
            raise parts_reader.error(str(key), "unknown part; known parts: " + ", ".join(PARTS))
    for key, spec in PARTS.items():
        if key not in parts_reader.data:
            continue
        pr = parts_reader.sub(key, required=True)
        limit = spec.limit(block_size)
        sizes = pr.take("sizes", list, check=lambda v: None if v else "must not be empty",
                        what="a non-empty list of sizes n")
        for i, n in enumerate(sizes):
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise pr.error("sizes", f"sizes[{i}] = {n!r} is not a positive integer")
            if limit is not None and n > limit:
                raise pr.error("sizes", f"sizes[{i}] = {n} exceeds this part's limit of {limit} elements "
                                        f"(with block_size {block_size})")
            if n >= 2**31:
                raise pr.error("sizes", f"sizes[{i}] = {n} does not fit the contract's int n")
        points = pr.take("points_per_case", (int, float), 1, check=lambda v: None if v >= 0 else "must not be negative",
                         what="a non-negative number of points")
        pr.finish()
        parts[key] = PartConfig(sizes=tuple(sizes), points_per_case=float(points))
    parts_reader.finish(allowed_extra=tuple(PARTS))
    top.finish()
    return Config(path=p, block_size=block_size, seed=seed, input_low=low, input_high=high, backend=backend,
                  part_timeout_s=float(part_s),
                  emulator_workers=workers, parts=parts)
