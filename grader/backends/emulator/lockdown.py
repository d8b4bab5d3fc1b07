"""The emulator's checks cannot be switched off by naming the runtime: judged on what the compiler
and the linker see, not on the submitted text.

The checks live in the runtime (``runtime/memory/hooks.cpp``): GCC's ``-fsanitize=thread`` makes every
load and store of the student's code call a hook such as ``__tsan_write4``, and the runtime's
definition checks the access. A translation unit that defines a symbol of that name itself (a
``static`` function, an asm label ``__asm__("__tsan_write4")``, a label written into the assembly
through ``asm(...)`` or an attribute's string) has its own calls bound to its own no-op: a kernel
with a missing barrier then passes every checked case. The directive filter and the rewrite read
the written text, which token pasting (``SG_J(__ts, an_write4)``) and strings get around. So:

- **The compiler refuses the names** (:func:`lockdown_header`, force-included after the prelude and
  before the part header and the student's file): ``#pragma GCC poison`` of every name the runtime
  object defines (read from its symbol table: the hooks, the ``__sg_*`` device ABI, the executor's
  ``sg_*`` ABI) and of ``asm``, ``__asm`` and ``__asm__``. A poisoned identifier is an error
  wherever it appears after the pragma, also when token pasting or a universal character name made
  it; the prelude's macros, defined before, still reach the runtime. The attributes that bind a
  symbol to a string (``alias``, ``weakref``, ``section``, ``symver``, ``ifunc``; a ``section`` or
  ``weakref`` string goes into the assembly unchecked) are macros that expand to a compile error,
  also when pasted (attribute names are macro-expanded); the rewrite refuses ``#define`` and
  ``#undef`` of them (:data:`REFUSED_ATTRIBUTES`). ``#pragma weak`` and ``#pragma
  redefine_extname`` name their symbols as identifiers, which the poison covers.
- **The linker's input is audited** (:func:`audit_object`): the student's object file may neither
  define a symbol the runtime defines (or any of the sanitizers' ``__tsan_*``, ``__ubsan_*``... names)
  nor refer to one of the runtime's that is not the device ABI a kernel calls (the hooks and the
  ``__sg_*`` functions of ``runtime/sg_abi.h``). This holds whatever spelled the name.
- **The check state has no name** a student's code could bind: the runtime keeps it (``g_checks``,
  the shadow memory, the findings) in the namespace ``sg::rt``, whose names the build makes local
  once the objects of its translation units are joined (``EmulatorToolchain.runtime_steps``; in the one
  compile of ``runtime.cpp``, inside an unnamed namespace), or ``static``: internal linkage.

What this does not stop: the module is native code in the executor's process, so a kernel can still
write any byte the runtime can, by address (docs/security.md, "What is not contained").

Public API: :func:`lockdown_header`, :func:`audit_object`, :func:`explain_refusal`,
:func:`runtime_names`, :func:`elf_symbols`, :class:`Symbol`, :data:`REFUSED_ATTRIBUTES`,
:data:`ASM_KEYWORDS`.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from grader.core.errors import CompileError

__all__ = ["lockdown_header", "audit_object", "explain_refusal", "elf_symbols", "runtime_names", "Symbol",
           "REFUSED_ATTRIBUTES", "ASM_KEYWORDS", "SANITIZER_PREFIXES"]

#: Attributes that bind a symbol to a name given as a string, in both spellings.
REFUSED_ATTRIBUTES = tuple(f"{u}{name}{u}" for name in ("alias", "weakref", "section", "symver", "ifunc")
                           for u in ("", "__"))
#: The spellings of inline assembly.
ASM_KEYWORDS = ("asm", "__asm", "__asm__")
#: Prefixes of the sanitizers' runtime names: no module may define one (the emulator's runtime is
#: the only sanitizer runtime there is).
SANITIZER_PREFIXES = ("__tsan_", "__ubsan_", "__asan_", "__msan_", "__sanitizer_", "__lsan_")
#: The runtime's names a student's code reaches through the prelude: the sanitizers' hooks and the
#: device ABI of ``runtime/sg_abi.h`` (read from it); every other name the runtime defines is its
#: own (the executor's ``sg_*`` ABI, the fiber switch).
_SG_ABI = Path(__file__).resolve().parent / "runtime" / "sg_abi.h"
#: A libc name the runtime overrides (``assert`` after ``#include <assert.h>`` calls it).
_LIBC_OVERRIDES = frozenset({"__assert_fail"})

_POISONED = re.compile(r'^(?P<file>[^\n:]+):(?P<line>\d+):(?:\d+:)? error: attempt to use poisoned "(?P<name>[^"]+)"',
                       re.M)
_REFUSED = re.compile(r"^(?P<file>[^\n:]+):(?P<line>\d+):(?:\d+:)? error: not allowed: (?P<what>[^\n]+)", re.M)


@dataclass(frozen=True)
class Symbol:
    """One entry of an ELF symbol table.

    Attributes:
        name: the symbol's name (as the linker sees it: mangled for C++).
        defined: whether this object defines it (else it refers to it).
        binding: ``"local"``, ``"global"``, ``"weak"`` or ``"other"``.
    """

    name: str
    defined: bool
    binding: str


def elf_symbols(path: Path) -> list[Symbol]:
    """The named symbols of a 64-bit little-endian ELF file's ``.symtab`` (an object file or a shared
    object), sections and files left out.

    Reference: the System V ABI's ELF chapter (``Elf64_Ehdr``, ``Elf64_Shdr``, ``Elf64_Sym``).

    Raises:
        ValueError: the file is not such an ELF file, or its tables do not fit in it.
    """
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or len(data) < 64 or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    if shentsize < 64 or shoff + shnum * shentsize > len(data):
        raise ValueError(f"{path}: its section headers lie outside the file")
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    symbols: list[Symbol] = []
    for _, sh_type, _, _, offset, size, link, _, _, entsize in sections:
        if sh_type != 2:  # SHT_SYMTAB
            continue
        if entsize < 24 or offset + size > len(data) or link >= len(sections):
            raise ValueError(f"{path}: a symbol table lies outside the file")
        str_off, str_size = sections[link][4], sections[link][5]
        if str_off + str_size > len(data):
            raise ValueError(f"{path}: a string table lies outside the file")
        for k in range(1, size // entsize):
            st_name, st_info, _, st_shndx = struct.unpack_from("<IBBH", data, offset + k * entsize)
            kind, bind = st_info & 0xF, st_info >> 4
            if kind in (3, 4) or st_name >= str_size:  # STT_SECTION, STT_FILE
                continue
            end = data.find(b"\0", str_off + st_name, str_off + str_size)
            name = data[str_off + st_name:end if end >= 0 else str_off + str_size].decode("utf-8", "replace")
            if name:
                symbols.append(Symbol(name, st_shndx != 0, {0: "local", 1: "global", 2: "weak"}.get(bind, "other")))
    return symbols


def runtime_names(runtime_object: Path) -> frozenset[str]:
    """The names the runtime object defines for other objects (global or weak), C++ library
    instantiations left out (a module may instantiate the same ``std::vector`` members)."""
    return frozenset(s.name for s in elf_symbols(runtime_object)
                     if s.defined and s.binding in ("global", "weak") and not s.name.startswith(("_ZN", "_ZS", "_ZT",
                                                                                                    "DW.ref.")))


def _device_abi() -> frozenset[str]:
    return frozenset(re.findall(r"\b(__sg_\w+)\s*\(", _SG_ABI.read_text()))


def lockdown_header(names: Iterable[str]) -> str:
    """The text force-included after the prelude (see the module docstring): ``names`` (the runtime's,
    :func:`runtime_names`) and :data:`ASM_KEYWORDS` poisoned, :data:`REFUSED_ATTRIBUTES` made errors."""
    poisoned = sorted({n for n in names if re.fullmatch(r"[A-Za-z_]\w*", n) and n not in _LIBC_OVERRIDES})
    lines = ["/* scangrade emulator: nothing after this may name the runtime (grader/backends/emulator/lockdown.py) */",
             "#pragma GCC poison " + " ".join(ASM_KEYWORDS)]
    lines += ["#pragma GCC poison " + " ".join(poisoned[i:i + 8]) for i in range(0, len(poisoned), 8)]
    for attr in REFUSED_ATTRIBUTES:
        bare = attr.strip("_")
        lines.append(f'#define {attr}(...) _Pragma("GCC error \\"not allowed: the {bare} attribute: it binds a '
                     f"symbol to a name of its own choosing, which could switch the emulator's memory checks off; "
                     f'remove it\\"")')
    return "\n".join(lines) + "\n"


def audit_object(path: Path, runtime: frozenset[str], *, filename: str) -> None:
    """Refuse an object file that binds a name of the runtime (see the module docstring).

    Args:
        path: the student's compiled object (before the link).
        runtime: the runtime object's names (:func:`runtime_names`).
        filename: the student's file, for the message.

    Raises:
        CompileError: ``"not allowed: <filename> defines `name` ..."`` or ``"... refers to `name` ..."``,
            or the object is not a readable ELF file.
    """
    try:
        symbols = elf_symbols(path)
    except (OSError, ValueError) as exc:
        raise CompileError(f"{filename}: its compiled object could not be checked ({exc})") from None
    reachable = _device_abi() | _LIBC_OVERRIDES
    for s in symbols:
        if s.defined and (s.name in runtime or s.name.startswith(SANITIZER_PREFIXES)):
            raise CompileError(f"not allowed: {filename} defines `{s.name}`, a name of the emulator's runtime (its "
                               "memory-check hooks and entry points): its own definition would replace the "
                               "runtime's and could switch the checks off; rename it")
        if not s.defined and s.name in runtime and s.name not in reachable and not s.name.startswith(
                SANITIZER_PREFIXES):
            raise CompileError(f"not allowed: {filename} refers to `{s.name}`, a part of the emulator's runtime "
                               "that student code may not call or change; remove it")


def explain_refusal(log: str) -> str | None:
    """The compile error to show for a compiler log in which the lockdown refused something
    (``"not allowed: `__tsan_write4`: ... (part1_naive.cu:3)"``), or None when it refused nothing."""
    refusals = sorted([(m.start(), "poison", m) for m in _POISONED.finditer(log)]
                      + [(m.start(), "refused", m) for m in _REFUSED.finditer(log)], key=lambda r: r[0])
    if not refusals:
        return None
    _, kind, m = refusals[0]
    where = f"({m.group('file')}:{m.group('line')})"
    if kind == "refused":
        return f"not allowed: {m.group('what')} {where}"
    name = m.group("name")
    if name in ASM_KEYWORDS:
        return (f"not allowed: `{name}`: inline assembly under the emulator (it can bind a name of the emulator's "
                f"runtime and switch its memory checks off); the emulator runs the inline PTX of asm statements in a "
                f"function body or a macro (docs/emulator.md, \"Inline PTX\"), written as nvcc's docs write "
                f"them, not an asm label {where}")
    return (f"not allowed: `{name}`: this name is reserved for the emulator's runtime (its memory-check hooks and "
            f"entry points), also where a macro pastes it together or universal character names spell it; "
            f"rename it {where}")
