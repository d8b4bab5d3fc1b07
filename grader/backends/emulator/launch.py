"""A launch of the emulator, on the wire and back: the request the executor runs (the grid, the thread
order, the checks, the sampled blocks, the arguments), the result it sends back, and the error a
failed launch raises (with the checks' findings, their code addresses resolved to source lines).
"""

from __future__ import annotations

import ctypes
import re
import struct
from typing import Sequence, Union

import numpy as np

from grader.backends.base import SAMPLE_CHOICES, DeviceArray, Finding
from grader.backends.emulator.module import EmulatorArray, EmulatorModule
from grader.core.errors import KernelError, LaunchError
from grader.core.kernels import KernelSpec
from grader.core.kinds import WARNING_KINDS  # findings that do not fail a launch by themselves
from grader.core.results import CHECK_KINDS  # kinds the checks report (they come with Finding objects)

__all__ = ["SCHEDULES", "INTERLEAVE", "SAMPLE_MODES", "SAMPLE_DRAWN", "MAX_SAMPLE", "LAUNCH_HEAD", "sampled_blocks",
           "LaunchResult", "SG_OK", "SG_KERNEL_ERROR", "SG_LAUNCH_ERROR", "argument_slots", "launch_failure",
           "parse_findings"]

#: Thread orders within a block (the numbers are the runtime's).
SCHEDULES = {"ascending": 0, "descending": 1, "random": 2}
#: With checks on, the thread orders in which a thread of a checked block may also switch to another
#: before each plain load or store of shared or global memory, and the chance of a switch there, out of
#: 65536 (the runtime's ``interleave``): the random order, one access in eight.
INTERLEAVE = {"random": 8192}
#: Which blocks a checking launch runs and checks (:attr:`EmulatorBackend.sample`; the numbers are the
#: runtime's): None, every block, checked; ``only``, only the sampled blocks, checked (the others are
#: skipped: blocks that do not depend on one another); ``all``, every block, only the sampled ones
#: checked (blocks that wait on others, as a decoupled look-back does). The runtime's numbers are the
#: choices' places in :data:`grader.backends.base.SAMPLE_CHOICES` (None: 0, ``only``: 1, ``all``: 2).
SAMPLE_MODES = {mode: number for number, mode in enumerate(SAMPLE_CHOICES)}
#: Blocks a sampling launch draws from its seed besides its first and last (:func:`sampled_blocks`).
SAMPLE_DRAWN = 2
#: The most blocks the runtime takes in a sample (sg_host.h, SG_MAX_SAMPLE).
MAX_SAMPLE = 16
#: Device printf output kept between two :meth:`EmulatorBackend.take_output` calls, in bytes.

#: The head of a launch request (see executor.cpp's handle_launch).
LAUNCH_HEAD = struct.Struct(f"<3I3IQQiiQiiIIii{MAX_SAMPLE}QiiI")


def sampled_blocks(nblocks: int, seed: int, drawn: int = SAMPLE_DRAWN) -> tuple[int, ...]:
    """The blocks a sampling launch checks: its first and its last, and ``drawn`` others drawn from
    ``seed`` (the case's seed: the private one for a hidden case) and the grid's size, so a case's three
    thread orders check the same blocks and a replay with the same seed checks them again.

    Args:
        nblocks: blocks in the launch's grid (>= 1).
        seed: the seed the blocks are drawn from.
        drawn: blocks drawn besides the first and the last (at most 14).

    Returns:
        Distinct linear block indices in ``[0, nblocks)``, ascending; all of them for a grid of at most
        ``drawn + 2`` blocks.

    Raises:
        ValueError: ``nblocks`` < 1, or ``drawn`` outside 0..14.
    """
    import random

    if nblocks < 1 or not 0 <= drawn <= MAX_SAMPLE - 2:
        raise ValueError(f"cannot sample {drawn} + 2 of {nblocks} blocks")
    inner = range(1, nblocks - 1)
    picked = random.Random(f"scangrade sample {seed} {nblocks}").sample(inner, min(drawn, len(inner)))
    return tuple(sorted({0, nblocks - 1, *picked}))


class LaunchResult(ctypes.Structure):
    """``sg_result`` (sg_host.h), as the executor sends it back."""

    _fields_ = [("status", ctypes.c_int), ("has_ids", ctypes.c_int), ("block", ctypes.c_uint * 3),
                ("thread", ctypes.c_uint * 3), ("kind", ctypes.c_char * 32), ("message", ctypes.c_char * 2048),
                ("nfindings", ctypes.c_int)]


#: ``sg_result``'s status (sg_host.h): the launch ran, a kernel failed, the launch was refused.
SG_OK, SG_KERNEL_ERROR, SG_LAUNCH_ERROR = 0, 1, 2


def argument_slots(kernel: str, spec: KernelSpec, args: Sequence[Union[DeviceArray, int]]) -> list[tuple[int, int]]:
    """The launch's arguments as the executor takes them: ``(0, address)`` for a pointer parameter,
    ``(1, value)`` for an ``int`` one, in the kernel's parameter order.

    Raises:
        LaunchError: the count does not match the kernel's parameters, a pointer parameter is not
            given an emulator buffer, or an ``int`` parameter not an int in the 32-bit range (naming
            the kernel and the parameter).
    """
    if len(args) != len(spec.params):
        names = ", ".join(p.name for p in spec.params)
        raise LaunchError(f"launch of {kernel}: the kernel takes {len(spec.params)} arguments ({names}), "
                          f"got {len(args)}")
    slots: list[tuple[int, int]] = []  # (0 pointer / 1 int, value)
    for n, (param, arg) in enumerate(zip(spec.params, args), start=1):
        where = f"launch of {kernel}: argument {n} `{param.name}` ({param.ctype})"
        if param.kind == "ptr":
            if not isinstance(arg, EmulatorArray):
                raise LaunchError(f"{where} must be a device array of the emulator backend "
                                  f"(got {type(arg).__name__})")
            slots.append((0, arg.address))
        elif param.kind == "int":
            slots.append((1, _int_argument(where, arg)))
        else:
            raise LaunchError(f"{where}: parameter kind {param.kind!r} is not supported by the emulator")
    return slots


def _int_argument(where: str, arg: object) -> int:
    """``arg`` given to an ``int`` parameter, as an int.

    Raises:
        LaunchError: not an int (a bool is not), or outside the 32-bit range.
    """
    if isinstance(arg, bool) or not isinstance(arg, (int, np.integer)):
        raise LaunchError(f"{where} must be an int (got {type(arg).__name__})")
    if not -2**31 <= int(arg) < 2**31:
        raise LaunchError(f"{where} = {int(arg)} does not fit a 32-bit int")
    return int(arg)


def launch_failure(kernel: str, module: EmulatorModule, res: LaunchResult, findings: list[Finding]
                   ) -> LaunchError | KernelError:
    """The error a launch that did not succeed raises: its result ``res`` was not ``OK``, or its
    ``findings`` hold more than warnings.

    Returns:
        LaunchError: the runtime refused the launch (``launch of <kernel>: <message>``).
        KernelError: the kernel failed; ``kind`` its kind, ``findings`` the fatal ones first (for a
            kind the checks report, the finding of the launch's kind leads and names the block and
            thread), then the warnings; ``completed`` when every thread ran to its end (only
            collected findings, a race).
    """
    status = res.status
    findings = [f for f in findings if f.kind not in WARNING_KINDS] + \
        [f for f in findings if f.kind in WARNING_KINDS]  # the fatal ones first
    kind = res.kind.decode(errors="replace")
    message = _substitute(res.message.decode(errors="replace"), module, findings)
    if status == SG_LAUNCH_ERROR:
        return LaunchError(f"launch of {kernel}: {message}")
    if not findings:
        err = KernelError(f"{kernel}: {message}", kind=kind)
        err.findings = []
        return err
    first = findings[0]
    if status == SG_OK or kind in CHECK_KINDS:
        findings = _leading_with(findings, kind, status)
        first = findings[0]
        text = f"{kernel}: {first.message}"
        if first.block is not None:
            text += f" (block {_ids(first.block)}, thread {_ids(first.thread)})"
        kind = first.kind
    else:
        text = f"{kernel}: {message}"
    text += _more_findings(findings[1 if text.startswith(f"{kernel}: {first.message}") else 0:])
    err = KernelError(text, kind=kind)
    err.findings = findings
    err.completed = status == SG_OK  # only collected findings (a race): every thread ran to its end
    return err


def _leading_with(findings: list[Finding], kind: str, status: int) -> list[Finding]:
    """``findings`` with the first of the launch's ``kind`` in front when the launch failed of it."""
    fatal = [f for f in findings if f.kind == kind and status != SG_OK][:1]
    return fatal + [f for f in findings if f not in fatal]


_FINDINGS_LISTED = 8


def _more_findings(rest: list[Finding]) -> str:
    """``"\\nN more distinct findings: kind at file:line; ..."`` for the findings after the one a launch
    error leads with: all N of them up to :data:`_FINDINGS_LISTED`, then ``"and M more"``; ``""`` for none."""
    if not rest:
        return ""
    listed = "; ".join(f"{f.kind} at {f.file}:{f.line}" if f.file else f"{f.kind} at an unknown line"
                       for f in rest[:_FINDINGS_LISTED])
    more = f"; and {len(rest) - _FINDINGS_LISTED} more" if len(rest) > _FINDINGS_LISTED else ""
    return f"\n{len(rest)} more distinct finding{'s' if len(rest) > 1 else ''}: {listed}{more}"


def _ids(t: tuple[int, int, int] | None) -> str:
    """Block or thread ids as a message shows them: ``(x, y, z)``, ``(?)`` when unknown."""
    return "(?)" if t is None else f"({t[0]}, {t[1]}, {t[2]})"


def _split_loc(loc: str, resolved: dict[int, tuple[str, int] | None]) -> tuple[str | None, int | None]:
    """(file, line) of a finding's location as the runtime sends it: ``@<hex code offset>``
    (looked up in ``resolved``) or ``file:line``; (None, None) when empty or unresolved."""
    if not loc:
        return None, None
    if loc.startswith("@"):
        r = resolved.get(int(loc[1:], 16))
        return (r[0], r[1]) if r else (None, None)
    file, _, line = loc.rpartition(":")
    return (file, int(line)) if line.isdigit() else (loc, None)


def _triple(text: str) -> tuple[int, int, int]:
    """``"x,y,z"`` as three ints."""
    x, y, z = (int(v) for v in text.split(","))
    return (x, y, z)


#: A third (or further) code location in a finding's message: ``{@<hex offset>}``, resolved like
#: the finding's own two (``{L}``, ``{O}``).
_CODE_AT = re.compile(r"\{@([0-9a-f]+)\}")


def parse_findings(module: EmulatorModule, text: str) -> list[Finding]:
    """The findings of the runtime's report ``text`` (one tab-separated row each), their code
    addresses resolved to source lines of ``module``, one per kind and pair of locations, with
    operator-precedence advice on an undefined shift whose amount has a ``+`` or ``-``."""
    rows = [line.split("\t", 11) for line in text.splitlines() if line.count("\t") >= 11]
    offsets = sorted({int(loc[1:], 16) for r in rows for loc in (r[1], r[2]) if loc.startswith("@")}
                     | {int(h, 16) for r in rows for h in _CODE_AT.findall(r[11])})
    resolved = module.resolve(offsets)

    def code_at(m: re.Match[str]) -> str:
        file, line = _split_loc("@" + m.group(1), resolved)
        return f"{file}:{line}" if file else "an unknown line"
    findings: list[Finding] = []
    seen: set[tuple] = set()
    for kind, loc, other, block, thread, oblock, othread, has_other, _linear, access, element, message in rows:
        file, line = _split_loc(loc, resolved)
        ofile, oline = _split_loc(other, resolved)
        where = f"{file}:{line}" if file else "an unknown line"
        owhere = f"{ofile}:{oline}" if ofile else "an unknown line"
        message = message.replace("{L}", where).replace("{O}", owhere)
        message = _CODE_AT.sub(code_at, message)
        if kind == "undefined-shift" and (file, line) in module.sum_shifts:
            op, sign = module.sum_shifts[file, line]
            message += (f"; check the operator precedence: `{sign}` binds tighter than `{op}`"
                        + (" (GPU Gems' CONFLICT_FREE_OFFSET needs parentheses)" if op == ">>" and sign == "+" else ""))
        key = (kind, file, line, ofile, oline)
        if key in seen:
            continue  # distinct code addresses of one source line
        seen.add(key)
        relevant = has_other == "1"
        findings.append(Finding(kind=kind, message=message, file=file, line=line,
                                other_line=oline if relevant else None, other_file=ofile if relevant else None,
                                block=_triple(block), thread=_triple(thread),
                                other_block=_triple(oblock) if relevant else None,
                                other_thread=_triple(othread) if relevant else None,
                                access=access or None, address=element or None))
    return findings


def _substitute(message: str, module: EmulatorModule, findings: list[Finding]) -> str:
    """A fatal error's message with the first matching finding's locations filled in (or its advice,
    which :func:`parse_findings` may add to a finding: the error's message is the runtime's)."""
    if "{L}" not in message and "{O}" not in message:
        head = message[:message.rfind(" (block")] if " (block" in message else message
        grown = next((f for f in findings if head and f.message != head and f.message.startswith(head)), None)
        return message if grown is None else grown.message + message[len(head):]
    for f in findings:
        if f.message and message.startswith(f.message[:20]):
            return f.message + message[message.rfind(" (block"):] if " (block" in message else f.message
    return message.replace("{L}", "an unknown line").replace("{O}", "an unknown line")
