"""Reading ``config.yaml`` (and a TA's private overlay) into the models of
:mod:`grader.assignment.config_schema`, and saying what is wrong with a file that does not fit them.

A YAML loader (:class:`_Lines`) records the line of every key; loading reports the first problem as a
:class:`ConfigError` naming the file, the line and the dotted key, and what is allowed
(``c.yaml, line 12, key 'parts.part1_naive.sizes': sizes[1] = 65 exceeds ...``). Also here:
:func:`config_text_with`, a file's text with some values set and its comments kept. Callers import these
through :mod:`grader.assignment.config`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Callable, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from grader.core.errors import ConfigError
from grader.assignment.parts import PARTS
from grader.assignment.config_schema import (CHECK_ERROR, PLAIN_ERROR, Config, ConfigFile, PartConfig, PrivateFile,
                                             PrivatePart)


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


def _unreadable(exc: OSError) -> str:
    """Why a config file could not be read, and what to do, by the error's kind."""
    if isinstance(exc, FileNotFoundError):
        return "no such file; pass an existing YAML file"
    if isinstance(exc, IsADirectoryError):
        return "is a folder, not a file; pass the YAML file itself"
    if isinstance(exc, PermissionError):
        return ("cannot be read (permission denied); make it readable to this user (chmod u+r) or pass a "
                "copy that is")
    return f"cannot be read ({exc.strerror or exc}); pass a readable YAML file"


def read_text(p: str) -> str:
    """The text of the config file ``p``, which must be UTF-8 (a byte-order mark is dropped).

    Raises:
        ConfigError: the file is missing, a folder or unreadable, or is not UTF-8 text (the message
            names the line and column of the first byte that is not, and says to save it as UTF-8).
    """
    try:
        data = Path(p).read_bytes()
    except OSError as exc:
        raise ConfigError(_unreadable(exc), path=p) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        head = data[:exc.start]
        line, column = head.count(b"\n") + 1, exc.start - (head.rfind(b"\n") + 1) + 1
        raise ConfigError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at column {column}); save the file "
                          "as UTF-8 (a YAML config is text)", path=p, line=line) from None


def _read_yaml(p: str):
    text = read_text(p)
    try:
        return yaml.load(text, Loader=_Lines)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"not valid YAML: {problem}", path=p,
                          line=mark.line + 1 if mark else None) from None


def _key_lines(mapping: Any) -> Callable[[Any], int | None]:
    """key -> the line of ``key`` in a mapping read by :class:`_Lines` (else the mapping's line)."""
    return lambda key: getattr(mapping, "lines", {}).get(key, getattr(mapping, "line", None))


def _validate(model: type[BaseModel], data: Any, *, path: str, root: Any, prefix: tuple = (),
              context: dict | None = None) -> Any:
    """``model`` validated from ``data`` (found at key path ``prefix`` of the file's ``root``)."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise _config_error(exc.errors()[0], model=model, path=path, root=root, prefix=prefix) from None


def _held(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model a field's annotation holds (``M``, ``M | None``, ``dict[str, M]``) and whether it
    holds a mapping of them; ``(None, False)`` for plain values."""
    if get_origin(annotation) is dict:
        model, _ = _held(get_args(annotation)[1])
        return model, model is not None
    for arg in get_args(annotation) or (annotation,):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg, False
    return None, False


def _config_error(error: dict, *, model: type[BaseModel], path: str, root: Any, prefix: tuple) -> ConfigError:
    """One pydantic error as scangrade's :class:`ConfigError`: the dotted key (the fields along the
    error's location, and the keys of ``parts``; not list indexes or mapping entries below them), the
    line of that key in the file (else of the mapping that lacks it) and a message using the
    field's description."""
    ctx = error.get("ctx") or {}
    loc = tuple(error["loc"]) + tuple(ctx.get("field", ()))
    kind = error["type"]
    # walk the models along loc: the field at fault and the model holding it
    holder, info, keys, mapping, spec = model, None, [], False, None
    for i, step in enumerate(loc):
        if mapping:  # a key of a dict[str, Model] (a part)
            keys.append(str(step))
            spec, mapping = PARTS.get(step, spec), False
            continue
        if kind in ("extra_forbidden", "invalid_key") and i == len(loc) - 1:
            keys.append(str(step))  # the unknown key itself
            break
        fields = holder.model_fields if holder else None
        if not fields or step not in fields:
            if kind == PLAIN_ERROR and i == len(loc) - 1:
                keys.append(str(step))  # a key no model holds any more (float_rtol), named by its fault
            break
        keys.append(step)
        info = fields[step]
        holder, mapping = _held(info.annotation)
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
        allowed = PartConfig.keys(spec) if holder is PartConfig and spec else sorted(holder.model_fields)
        message = f"unknown key; allowed here: {', '.join(sorted(allowed))}"
    elif kind == "missing":
        message = f"is required: {what}" if what else "is required"
    elif kind == PLAIN_ERROR:
        message = ctx["problem"]
    elif kind == CHECK_ERROR:
        message = f"{ctx['problem']} (got {_shown(value)}); expected {what}"
    elif kind in ("model_type", "model_attributes_type") or (kind == "dict_type" and not what):
        message = f"must be a mapping of keys to values (got {type(value).__name__})"
    else:  # a value of the wrong type
        message = f"must be {what} (got {_shown(value)})"
    return ConfigError(message, path=path, key=key, line=line)


def _shown(value: Any) -> str:
    """A value as a message shows it: a float as the file most likely wrote it (``2``, not ``2.0``)."""
    return f"{value:g}" if isinstance(value, float) else repr(value)


def load_config(path: str | os.PathLike) -> Config:
    """Read and validate a configuration file.

    Args:
        path: a YAML file shaped like the project's ``config.yaml``.

    Returns:
        A :class:`Config` naming ``path``.

    Raises:
        ConfigError: the file is missing, is not valid YAML, or a key is unknown, missing or has a
            value that is not allowed; the message names the file, the line and the key.
    """
    p = str(path)
    data = _read_yaml(p)
    root = data if data is not None else {}
    file = _validate(ConfigFile, root, path=p, root=root)
    return Config.model_validate({**{k: getattr(file, k) for k in file.model_fields_set}, "path": p})


def load_private(cfg: Config, path: str | os.PathLike) -> Config:
    """Layer a TA's private configuration over a public one.

    The private file must hold ``seed``, the seed of the hidden cases (visible cases keep the
    public seed), and may hold, per part, ``hidden_sizes``: cases that students see by name and
    status only. Nothing else, so a private file cannot silently change what the public config
    promises. The seed is required, and must differ from the public one: hidden inputs drawn from the
    public seed could be computed by anyone who reads the public config and the grader.

    Raises:
        ConfigError: as :func:`load_config`, naming the private file; also a private file without
            ``seed``, or whose seed is the public config's.
    """
    p = str(path)
    root = _read_yaml(p) or {}
    private = _validate(PrivateFile, root, path=p, root=root)
    if private.seed == cfg.seed:
        raise ConfigError("is the public config's seed, so anyone could compute the hidden inputs; use a seed of "
                          "its own (`scangrade private-template` draws one)", path=p, key="seed",
                          line=_key_lines(root)("seed"))
    parts = {}
    lines = _key_lines(root.get("parts"))
    for key in private.parts:
        if key not in cfg.parts:
            raise ConfigError("not a part of the public config; its parts: " + ", ".join(cfg.parts), path=p,
                              key=f"parts.{key}", line=lines(key))
        pc = cfg.parts[key]
        extra = _validate(PrivatePart, private.parts[key], path=p, root=root, prefix=("parts", key),
                          context={"limit": PARTS[key].limit(pc.block_size), "block_size": pc.block_size})
        parts[key] = {"hidden_sizes": pc.hidden_sizes + extra.hidden_sizes}
    return cfg.override(parts=parts, private_path=p, private_seed=private.seed)


def _plain(value: Any) -> Any:
    """A value read by :class:`_Lines` as plain dicts and lists (for ``yaml.safe_dump``)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def config_text_with(path: str | os.PathLike, values: dict[tuple[str, str], float],
                     notes: dict[tuple[str, str], str]) -> str:
    """The text of the config file ``path`` with ``values`` set, everything else as written.

    Each key of ``values`` is ``(section, key)`` (``("timeouts", "part_s")``). Where the file has
    the key in block style, its value on that line is replaced; where the section has no such key,
    a line is added below the section's; where there is no section, one is added at the end. Each
    line set ends with ``# `` and its note from ``notes`` (why it was set). Comments and layout
    elsewhere are kept. Where the result does not read back with the values (a section in flow
    style, ``{part_s: 300}``), the file's mapping is written out whole instead (its comments then
    lost), under one comment line per note.

    Raises:
        ConfigError: the file cannot be read or is not valid YAML (as :func:`load_config`).
    """
    p = str(path)
    root = _read_yaml(p) or {}
    text = read_text(p)
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    shown = {k: f"{v:g}" if isinstance(v, float) else str(v) for k, v in values.items()}
    added: dict[int, list[str]] = {}  # 0-based line index -> lines to insert after it
    appended: dict[str, list[str]] = {}
    for (section, key), value in shown.items():
        comment = notes[(section, key)]
        mapping = root.get(section) if isinstance(root, dict) else None
        if mapping is None and section in getattr(root, "lines", {}):  # `section:` with nothing below it
            added.setdefault(root.lines[section] - 1, []).append(f"  {key}: {value}  # {comment}\n")
            continue
        if not isinstance(mapping, dict) or not hasattr(mapping, "lines"):
            appended.setdefault(section, []).append(f"  {key}: {value}  # {comment}\n")
            continue
        head = root.lines[section] - 1
        if key in mapping:
            at = mapping.lines[key] - 1
            lines[at] = re.sub(rf"^(\s*{re.escape(key)}\s*:\s*)[^#\n]*?(\s*#.*)?(\n)$",
                               lambda m: f"{m.group(1)}{value}  # {comment}\n", lines[at])
        else:
            first = min(mapping.lines.values(), default=None)
            indent = re.match(r"\s*", lines[first - 1]).group(0) if first and first - 1 > head else "  "
            added.setdefault(head, []).append(f"{indent}{key}: {value}  # {comment}\n")
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        out += added.get(i, [])
    for section, body in appended.items():
        out += [f"{section}:\n", *body]
    new = "".join(out)
    try:
        data = yaml.safe_load(new) or {}
        ok = all(isinstance(data.get(s), dict) and data[s].get(k) == values[(s, k)] for s, k in values)
    except yaml.YAMLError:
        ok = False
    if ok:
        return new
    whole = _plain(root)
    for (section, key), value in values.items():
        whole.setdefault(section, {})[key] = value
    return "".join(f"# {section}.{key}: {notes[(section, key)]}\n" for section, key in values) + \
        yaml.safe_dump(whole, sort_keys=False)
