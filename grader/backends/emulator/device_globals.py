"""The ``__device__`` variables of an emulated module made fresh for each run: which bytes of the
module are the student's writable data, read from GNU ld's map of its link
(:meth:`grader.backends.emulator.build.EmulatorToolchain.compile_module` writes it), and kept beside the
module as ``<module>.globals`` for the executor to snapshot and restore (``executor.cpp``,
``handle_globals``; :meth:`grader.backends.emulator.module.EmulatorModule.fresh_globals`).

Public API: :func:`module_globals`, :func:`globals_path`, :func:`write_globals`, :func:`read_globals`,
:data:`WRITABLE_OUTPUT_SECTIONS`.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["module_globals", "globals_path", "write_globals", "read_globals", "WRITABLE_OUTPUT_SECTIONS"]

#: The output sections of a module whose input sections from the student's object are its writable
#: data at run time (``__device__`` variables, statics, guard variables): GNU ld's default script puts
#: ``.data``, ``.data.*`` (``.data.rel.local``, a COMDAT's ``.data._ZZ...``) in ``.data`` and ``.bss``,
#: ``.bss.*`` and ``COMMON`` in ``.bss``. ``.data.rel.ro`` and ``.got`` are read-only after relocation.
WRITABLE_OUTPUT_SECTIONS = frozenset({".data", ".bss"})
_MAP_OUTPUT = re.compile(r"^(\.\S+)(?:\s+0x[0-9a-fA-F]+\s+0x[0-9a-fA-F]+)?\s*$")
_MAP_INPUT = re.compile(r"^ (\S+)(?:\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)\s+(\S.*))?$")
_MAP_WRAPPED = re.compile(r"^\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)\s+(\S.*)$")


def module_globals(link_map: str, object_name: str) -> list[tuple[int, int]] | None:
    """The writable data of a module that the object ``object_name`` (the student's translation unit,
    the prelude's statics and the glue with it) contributed: ``(link-time address, bytes)`` ranges,
    adjacent ones merged, read from GNU ld's map (``-Wl,-Map``: each output section at the start of
    a line, then each input section indented by one space as ``name address size file``, the name on
    a line of its own when it is long). The runtime object's data is not among them, so restoring the
    ranges leaves the runtime's state alone (executor.cpp, handle_globals). None where the text is
    not such a map (no ``.data`` output section)."""
    ranges: list[tuple[int, int]] = []
    section, seen, pending = None, False, None
    for line in link_map.splitlines():
        m = _MAP_OUTPUT.match(line)
        if m:
            section, pending = m.group(1), None
            seen |= section in WRITABLE_OUTPUT_SECTIONS
            continue
        if section not in WRITABLE_OUTPUT_SECTIONS:
            continue
        if pending is not None and (w := _MAP_WRAPPED.match(line)):
            addr, size, path = int(w.group(1), 16), int(w.group(2), 16), w.group(3)
        elif (i := _MAP_INPUT.match(line)) and not line.startswith(" *"):
            if i.group(2) is None:
                pending = i.group(1)
                continue
            addr, size, path = int(i.group(2), 16), int(i.group(3), 16), i.group(4)
        else:
            pending = None
            continue
        pending = None
        if size and Path(path.strip()).name == object_name:
            if ranges and ranges[-1][0] + ranges[-1][1] == addr:
                ranges[-1] = (ranges[-1][0], ranges[-1][1] + size)
            else:
                ranges.append((addr, size))
    return ranges if seen else None


def globals_path(module: Path) -> Path:
    """Where the ranges of :func:`module_globals` of the module ``module`` are kept: beside it."""
    return Path(f"{module}.globals")


def write_globals(path: Path, ranges: list[tuple[int, int]]) -> None:
    """Write ``ranges`` to ``path``: one ``address size`` (hex) a line."""
    path.write_text("".join(f"{a:x} {n:x}\n" for a, n in ranges), encoding="utf-8")


def read_globals(path: Path) -> list[tuple[int, int]] | None:
    """The ranges :func:`write_globals` wrote to ``path``; None where it is missing or malformed."""
    try:
        return [(int(a, 16), int(n, 16)) for a, n in (line.split() for line in path.read_text().splitlines())]
    except (OSError, ValueError):
        return None
