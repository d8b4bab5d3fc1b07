"""The executor: the sandboxed process that loads one emulated module and runs its kernels.

Student code never loads into the grader's process. For each compiled module the backend starts
``runtime/executor.cpp``'s program, fresh (it holds no secrets), under the sandbox
(:mod:`grader.toolchain.sandbox`); it sets its resource limits, maps device memory, installs its seccomp filter,
dlopens the module (its static constructors run there) and serves launches over a socket.

Device memory is an :class:`Arena`: one memfd mapped at the same virtual address in the grader and
in every executor, so a device pointer is the same number in both and the runtime's checks,
findings and the grader's guard zones work unchanged; buffers are numpy views of it here.

If the executor dies (a crash outside the emulated threads' fault handling, a seccomp violation,
a resource limit), the request raises :class:`ExecutorDied` with a ``kind`` and a message for the
student; the module's next launch starts a new executor.

Public API: :class:`Arena`, :class:`Executor`, :class:`ExecutorDied`, :func:`probe_seccomp`,
:data:`ARENA_BYTES`.
"""

from __future__ import annotations

import ctypes
import os
import random
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import weakref
from bisect import insort
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grader.toolchain.sandbox import FILE_SIZE, MODULE_MEMORY, Limits, Sandbox
from grader.core.errors import ResourceLimit
from grader.host.resources import (address_space_limit, address_space_used, limit_advice, looks_like_memory_failure,
                              size_text)

__all__ = ["Arena", "Executor", "ExecutorDied", "Hello", "ARENA_BYTES", "probe_seccomp"]

#: The most device memory live at once of an arena made without a size (a backend made outside a
#: grading: the benches, the tests); a grading sizes it from the config, to what its cases need
#: (:func:`grader.grading.case.cases.device_memory_bytes`). Memory is committed only where buffers are; the
#: address space reserved, :attr:`Arena.span`, is larger: it holds the gaps between buffers too.
ARENA_BYTES = 16 * 2**30
#: Alignment of every buffer, and the smallest unallocated gap after each (counted against the
#: arena's size, so that an access just past a buffer is outside every allocation for the checks).
_ALIGNMENT = 256
#: The address space left unallocated after each buffer (besides :data:`_ALIGNMENT`) while the
#: reservation has room: an overrun of one buffer by up to half of it stays nearer to that buffer
#: than to the next, so the checks name the right one (runtime/memory/access.h, ``kNearBytes``).
#: Address space only: the memfd's pages there are never touched by the grader, and cost nothing.
GAP_BYTES = 16 * 2**20
#: Address space reserved beyond an arena's size for the gaps, tried in turn: room for 64 of them
#: (a case's run has at most a dozen buffers), then for 8, then none (256-byte gaps); when it runs
#: out, gaps shrink. The smaller ones are for a grader under an address-space limit (RLIMIT_AS,
#: ``ulimit -v``), which counts every byte mapped.
_GAP_SPACES = (64 * GAP_BYTES, 8 * GAP_BYTES, 0)
#: The grader's host memory for the cases (their inputs, expected outputs in float64, the outputs
#: read back and their comparison), at its peak, in multiples of the device memory sized for them
#: (:func:`grader.grading.case.cases.device_memory_bytes`): the measured peak, rounded up
#: (docs/throughput.md, "Figures behind the code's constants"). Under an address-space limit the gaps' room takes only what leaves it free.
HOST_SHARE = 4
#: The memfd grows and shrinks in steps of this many bytes.
_STEP = 2 * 2**20

_PROTOCOL = 2
_REQ_LAUNCH, _REQ_TRIM = 1, 2
_REQ_PROFILE, _REP_PROFILE = 3, 0x84  # the memory-access profile (runtime/profile/profile.h)
_REQ_GLOBALS, _REP_GLOBALS = 4, 0x85  # the module's writable data: snapshot, restore (executor.cpp)
_REP_HELLO, _REP_LAUNCHED, _REP_TRIMMED, _REP_VIOLATION = 0x81, 0x82, 0x83, 0xEE
_MAX_REPLY = 4 * 2**20
_VIOLATION_EXIT = 97

_PROT_READ, _PROT_WRITE = 1, 2
_MAP_SHARED, _MAP_NORESERVE, _MAP_FIXED_NOREPLACE = 0x01, 0x4000, 0x100000
_FALLOC_FL_KEEP_SIZE, _FALLOC_FL_PUNCH_HOLE = 0x01, 0x02

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
_MAP_FAILED = ctypes.c_void_p(-1).value


def _round_up(n: int, step: int) -> int:
    return (n + step - 1) // step * step


class Arena:
    """Device memory shared with the executors: one memfd, mapped at the same address everywhere.

    Buffers are first-fit blocks, 256-byte aligned, each followed by an unallocated gap of 256 bytes
    plus :data:`GAP_BYTES` of address space (less where the reservation runs short), so that the
    checks can tell an overrun of one buffer from an access to the next. The memfd's size follows
    the end of the highest live buffer (so a module can touch no more memory than the grader
    allocated: past the end it faults). A freed block is zeroed at once, its gap included (its whole
    pages punched out, so their memory goes back), and everything past the highest live block is
    cut off the memfd: no data outlives its buffer.

    Args:
        size: the most device memory that can be live at once, in bytes (each buffer counts rounded
            up to 256 bytes, plus 256).

    Attributes:
        fd: the memfd (executors inherit it).
        base: the mapping's address, in this process and in every executor.
        size: the most bytes live at once.
        span: bytes of address space reserved and mapped (``size`` plus room for the gaps).

    Raises:
        ResourceLimit: not even ``size`` bytes of address space could be mapped (an address-space
            limit, ``ulimit -v``): one line saying what to raise it to.
    """

    def __init__(self, size: int = ARENA_BYTES) -> None:
        self.size = int(size)
        self.fd = os.memfd_create("scangrade-device-memory", os.MFD_CLOEXEC)
        self.base, self.span = self._map()
        self._gap = GAP_BYTES if self.span > self.size else 0  # besides the 256 bytes counted in size
        self._blocks: dict[int, tuple[int, int, int]] = {}  # offset -> (bytes taken, asked for, of the gap)
        self._live = 0  # bytes counted against size
        self._holes: list[tuple[int, int]] = []  # (offset, length) below _top, sorted, coalesced
        self._top = 0
        self._file = 0
        self._pending: list[int] = []  # offsets freed by finalizers, applied under the lock
        self._lock = threading.Lock()
        # Not at interpreter exit: arrays may still view the memory then (exit unmaps it anyway).
        weakref.finalize(self, _unmap, self.base, self.span, self.fd).atexit = False

    def _map(self) -> tuple[int, int]:
        """Map the memfd at a random 1 GiB-aligned address between 16 and 64 TiB (far from where
        the loader and malloc place things, in this process and in a freshly exec'ed one): ``(address,
        bytes mapped)``, the size and the gaps' room, else (an address-space limit) the size alone.
        Under an address-space limit the gaps' room is taken only where :data:`HOST_SHARE` times
        the size, and 256 MiB, stay free for the host side of the cases."""
        rng = random.Random(os.urandom(8))
        spans = [self.size + gaps for gaps in _GAP_SPACES]
        limit = address_space_limit()
        if limit is not None:
            free = limit - address_space_used() - HOST_SHARE * self.size - 256 * 2**20
            spans = [span for span in spans[:-1] if span <= free] + spans[-1:]
        for span in spans:
            for _ in range(64):
                hint = 0x1000_0000_0000 + rng.randrange(0x3000_0000_0000 // 2**30) * 2**30
                addr = _libc.mmap(hint, span, _PROT_READ | _PROT_WRITE,
                                  _MAP_SHARED | _MAP_NORESERVE | _MAP_FIXED_NOREPLACE, self.fd, 0)
                if addr == hint:
                    return hint, span
                if addr not in (None, _MAP_FAILED):
                    _libc.munmap(addr, span)  # a kernel older than 4.17 took the address as a hint
        os.close(self.fd)
        raise ResourceLimit(f"the CPU emulator cannot reserve {size_text(self.size)} of address space for device "
                            f"memory (what the cases need): {limit_advice((1 + HOST_SHARE) * self.size)}")

    def alloc(self, nbytes: int) -> int:
        """Address of a new block of ``nbytes`` (uninitialised; zeros when fresh).

        Raises:
            MemoryError: the arena is full (``size`` bytes live at once, or, rarely, no room left in its
                address space).
        """
        data = _round_up(max(int(nbytes), 1), _ALIGNMENT)
        need = data + _ALIGNMENT  # what counts against size
        full = need + self._gap
        with self._lock:
            self._apply_frees()
            if self._live + need > self.size:
                raise MemoryError(f"emulator device memory is full: {nbytes} more bytes do not fit in "
                                  f"{size_text(self.size)}")
            # A hole with room for the whole gap (first fit), else the top; where the address space
            # runs short, the middle of the widest free stretch: a hole, a buffer's gap, the top.
            fits = [i for i, (_, length) in enumerate(self._holes) if length >= full]
            if fits:
                off, length = self._holes[fits[0]]
                take = full
                if length == take:
                    del self._holes[fits[0]]
                else:
                    self._holes[fits[0]] = (off + take, length - take)
            elif self._top + full <= self.span:
                off, take = self._top, full
                self._top += take
            else:
                off, take = self._squeeze(need, nbytes)
            self._blocks[off] = (take, int(nbytes), take - data)
            self._live += need
            self._resize()
        return self.base + off

    def _squeeze(self, need: int, nbytes: int) -> tuple[int, int]:
        """``(offset, bytes taken)`` of a block of ``need`` bytes (its data and 256-byte gap) when the
        address space has no room for a whole gap: in the middle of the widest free stretch (a hole,
        the part of a buffer's gap past its first 256 bytes, or what is left above the top), so that
        the buffers on both sides stay as far from it as can be. Call with the lock held.

        Raises:
            MemoryError: no stretch of ``need`` bytes is left.
        """
        stretches = [(length, "hole", i, off) for i, (off, length) in enumerate(self._holes)]
        for off, (take, asked, gap) in self._blocks.items():
            stretches.append((gap - _ALIGNMENT, "gap", off, off + take - gap + _ALIGNMENT))
        stretches.append((self.span - self._top, "top", 0, self._top))
        length, where, key, start = max(stretches)
        if length < need:
            raise MemoryError(f"emulator device memory is full: {nbytes} more bytes do not fit in its "
                              f"{size_text(self.span)} of address space")
        if where == "top":
            self._top = self.span
            return start, length
        left = (length - need) // 2 // _ALIGNMENT * _ALIGNMENT
        if where == "hole":
            if left:
                self._holes[key] = (start, left)
            else:
                del self._holes[key]
        else:  # the buffer at `key` keeps the first part of its gap
            take, asked, gap = self._blocks[key]
            self._blocks[key] = (take - (length - left), asked, gap - (length - left))
        return start + left, length - left

    def release(self, address: int) -> None:
        """Free a block (safe from a finalizer: applied at the next :meth:`alloc` or :meth:`live`)."""
        self._pending.append(address - self.base)

    def live(self) -> list[tuple[int, int]]:
        """``(address, bytes)`` of every live block, as asked for (the checks' allocation table)."""
        with self._lock:
            self._apply_frees()
            return [(self.base + off, asked) for off, (_, asked, _) in sorted(self._blocks.items())]

    @property
    def committed(self) -> int:
        """Bytes of the memfd now (the end of the highest live buffer, its gap not included, rounded up
        to 2 MiB; the pages of the gaps below it are never touched by the grader)."""
        return self._file

    def _apply_frees(self) -> None:
        page = os.sysconf("SC_PAGE_SIZE")
        while self._pending:
            off = self._pending.pop()
            taken = self._blocks.pop(off, None)
            if taken is None:
                continue
            self._live -= _round_up(max(taken[1], 1), _ALIGNMENT) + _ALIGNMENT
            start, end = off, off + taken[0]
            # Zero the block (whole pages are punched out: their memory goes back), so that nothing
            # a module left in device memory reaches the next buffer or another module.
            # The highest block's gap lies past the memfd's end (no pages: nothing to zero, and a
            # store there would fault).
            stop = min(end, self._file)
            lo, hi = _round_up(start, page), stop // page * page
            if hi > lo:
                _libc.fallocate(self.fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, lo, hi - lo)
                ctypes.memset(self.base + start, 0, lo - start)
                ctypes.memset(self.base + hi, 0, stop - hi)
            elif stop > start:
                ctypes.memset(self.base + start, 0, stop - start)
            insort(self._holes, (start, end - start))
            i = self._holes.index((start, end - start))
            if i + 1 < len(self._holes) and self._holes[i + 1][0] == end:  # merge with the next hole
                end += self._holes.pop(i + 1)[1]
            if i > 0 and sum(self._holes[i - 1]) == start:  # and with the previous one
                i -= 1
                start = self._holes[i][0]
                del self._holes[i + 1]
            self._holes[i] = (start, end - start)
            if end == self._top:
                del self._holes[i]
                self._top = start
            self._resize()

    def _resize(self) -> None:
        top = max(self._blocks, default=None)  # the memfd ends with the highest buffer, not its gap
        want = 0 if top is None else _round_up(top + self._blocks[top][0] - self._blocks[top][2], _STEP)
        if want != self._file:
            os.ftruncate(self.fd, want)  # shrinking gives the pages back
            self._file = want


def _unmap(base: int, size: int, fd: int) -> None:
    _libc.munmap(base, size)
    os.close(fd)


class ExecutorDied(Exception):
    """The executor ended (or was stopped) while serving a request.

    Attributes:
        kind: ``crash``, ``sandbox-violation``, ``resource-limit`` or ``timeout``.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Hello:
    """What a freshly started executor reports once the module is loaded.

    Attributes:
        abi: the module's runtime ABI version.
        seccomp: whether its seccomp filter is in force.
        result_size: ``sizeof(sg_result)`` in the executor.
        kernels: registered kernel name -> (1 defined / 0 declared only, number of parameters).
    """

    abi: int
    seccomp: bool
    result_size: int
    kernels: dict[str, tuple[int, int]]


class Executor:
    """One executor process: a compiled module loaded in the sandbox, serving launches.

    Args:
        binary: the executor program (:meth:`.build.EmulatorToolchain.executor_binary`).
        module: the compiled shared object to load.
        arena: device memory to map.
        sandbox: how to run it; ``seccomp``: whether it installs its seccomp filter.
        limits: its resource limits (:func:`grader.toolchain.sandbox.executor_limits`).
        load_timeout_s: how long loading (the module's static constructors) may take, in seconds.

    Attributes:
        hello: what it reported once the module was loaded.

    Raises:
        ExecutorDied: it could not start, or loading the module failed or timed out.
        ResourceLimit: it could not map device memory or start its threads under the machine's
            address-space limit (``ulimit -v``, below the sandbox's own): one line with what to do.

    The executor dies with the thread that started it (bubblewrap's ``--die-with-parent``, or
    ``PR_SET_PDEATHSIG``), so start it from a thread that lives as long as the backend.
    """

    def __init__(self, *, binary: Path, module: Path, arena: Arena, sandbox: Sandbox, seccomp: bool,
                 limits: Limits, load_timeout_s: float) -> None:
        self._limits = limits
        self._isolated = sandbox.isolated
        self._stderr = tempfile.TemporaryFile(prefix="scangrade-executor-")
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock = parent
        argv = [str(binary), "serve", "--socket", str(child.fileno()), "--memfd", str(arena.fd),
                "--arena", str(arena.base), str(arena.span), "--module", str(Path(module).resolve()),
                "--seccomp", "1" if seccomp else "0", *limits.options()]
        if not sandbox.isolated:
            argv += ["--parent", str(os.getpid())]
        cmd = sandbox.command(argv, read_only=[binary, module])
        try:
            self._proc = subprocess.Popen(cmd.argv, env=cmd.env, cwd=cmd.cwd or "/",
                                          pass_fds=(child.fileno(), arena.fd), stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=self._stderr)
        except OSError as exc:
            parent.close()
            raise ExecutorDied("crash", f"the emulator's executor could not start ({exc})") from None
        finally:
            child.close()
        self._finalizer = weakref.finalize(self, _reap, self._proc, self._sock, self._stderr)
        try:
            kind, body = self._receive(timeout=load_timeout_s)
        except socket.timeout:
            self.stop()
            raise ExecutorDied("timeout", f"loading the module did not finish within {load_timeout_s:g} s "
                                          "(a static constructor that never returns?)") from None
        if kind != _REP_HELLO or len(body) < 20:
            raise self._broken("no greeting")
        status, protocol = struct.unpack_from("<ii", body)
        if protocol != _PROTOCOL:
            self.stop()
            raise ExecutorDied("crash", f"the emulator's executor speaks protocol {protocol}, not {_PROTOCOL}: "
                                        "a stale build in the cache")
        if status != 0:
            self.stop()
            why = body[20:].decode(errors="replace") or "loading the module failed"
            if self._machine_limited() and looks_like_memory_failure(why):
                raise ResourceLimit(f"the CPU emulator's executor could not start under this machine's address-space "
                                    f"limit ({why.splitlines()[0]}): {limit_advice(arena.span)}")
            raise ExecutorDied("crash", why)
        abi, on, result_size = struct.unpack_from("<iii", body, 8)
        kernels = {}
        for line in body[20:].decode(errors="replace").splitlines():
            fields = line.split("\t")
            if len(fields) == 3 and fields[1].lstrip("-").isdigit() and fields[2].lstrip("-").isdigit():
                kernels[fields[0]] = (int(fields[1]), int(fields[2]))
        self.hello = Hello(abi=abi, seccomp=bool(on), result_size=result_size, kernels=kernels)

    def _machine_limited(self) -> bool:
        """Whether the address-space limit this process passes on (``ulimit -v``) is below the one
        the sandbox sets for an executor, so that a lack of memory may be the machine's, not the
        module's."""
        limit = address_space_limit()
        return limit is not None and limit < self._limits.address_space

    @property
    def pid(self) -> int:
        """The process the grader started (bubblewrap's, when sandboxed; the executor dies with it)."""
        return self._proc.pid

    @property
    def alive(self) -> bool:
        """Whether the process is still running (and was not stopped)."""
        return self._finalizer.alive and self._proc.poll() is None

    def launch(self, request: bytes) -> tuple[bytes, str, str, bool]:
        """Run one launch request: ``(sg_result bytes, findings text, printf output, output was cut)``.

        Raises:
            ExecutorDied: the executor died or broke the protocol during the launch.
        """
        self._send(_REQ_LAUNCH, request)
        kind, body = self._receive(timeout=None)
        size = self.hello.result_size
        if kind != _REP_LAUNCHED or len(body) < size + 8:
            raise self._broken("a malformed launch reply")
        (nfind,) = struct.unpack_from("<q", body, size)
        if not 0 <= nfind <= len(body) - size - 16:
            raise self._broken("a malformed launch reply")
        findings = body[size + 8:size + 8 + nfind].decode(errors="replace")
        (code,) = struct.unpack_from("<q", body, size + 8 + nfind)
        output = body[size + 16 + nfind:]
        if len(output) != (-1 - code if code < 0 else code):
            raise self._broken("a malformed launch reply")
        return body[:size], findings, output.decode(errors="replace"), code < 0

    def trim(self) -> None:
        """Ask the runtime to free its fiber stacks and arenas (kept warm between launches)."""
        self._send(_REQ_TRIM, b"")
        kind, _ = self._receive(timeout=None)
        if kind != _REP_TRIMMED:
            raise self._broken("a malformed reply")

    def profile(self, *, on: bool, max_blocks: int = 1) -> str:
        """Take the memory-access profile totals gathered since the last call (the runtime's
        ``sg_profile_take`` text, one line per kernel and program point), then turn the profile on
        (for blocks ``0 .. max_blocks - 1`` of each launch; 0: every block) or off.

        Raises:
            ExecutorDied: the executor died or broke the protocol.
        """
        self._send(_REQ_PROFILE, struct.pack("<iQ", int(bool(on)), max(0, int(max_blocks))))
        kind, body = self._receive(timeout=None)
        if kind != _REP_PROFILE:
            raise self._broken("a malformed profile reply")
        return body.decode(errors="replace")

    def snapshot_globals(self, ranges: Sequence[tuple[int, int]]) -> str:
        """Have the executor copy the module's writable data ``ranges`` (``(offset from the module's
        load address, bytes)``, :func:`.device_globals.module_globals`) as loaded: before any launch, once.
        Returns "" when done, else why the executor refused (a range outside the module's writable
        data, a launch already ran).

        Raises:
            ExecutorDied: the executor died or broke the protocol.
        """
        payload = struct.pack("<ii", 0, len(ranges)) + b"".join(struct.pack("<QQ", o, n) for o, n in ranges)
        return self._globals(payload)

    def restore_globals(self) -> str:
        """Copy the snapshot of :meth:`snapshot_globals` back: the module's ``__device__`` variables
        as loaded. Returns "" when done, else why not (no snapshot).

        Raises:
            ExecutorDied: the executor died or broke the protocol.
        """
        return self._globals(struct.pack("<ii", 1, 0))

    def _globals(self, payload: bytes) -> str:
        self._send(_REQ_GLOBALS, payload)
        kind, body = self._receive(timeout=None)
        if kind != _REP_GLOBALS or len(body) < 4:
            raise self._broken("a malformed globals reply")
        (status,) = struct.unpack_from("<i", body)
        return "" if status == 0 else (body[4:].decode(errors="replace") or "refused")

    def stop(self) -> None:
        """Kill the process (and its sandbox) and reap it. Idempotent."""
        self._finalizer()

    # -- plumbing ---------------------------------------------------------------------------------
    def _send(self, kind: int, payload: bytes) -> None:
        try:
            self._sock.sendall(struct.pack("<II", len(payload), kind) + payload)
        except OSError:
            raise self._death() from None

    def _receive(self, *, timeout: float | None) -> tuple[int, bytes]:
        self._sock.settimeout(timeout)
        head = self._read(8)
        length, kind = struct.unpack("<II", head)
        if length > _MAX_REPLY:
            raise self._broken(f"a reply of {length} bytes")
        body = self._read(length)
        if kind == _REP_VIOLATION and len(body) >= 4:
            (nr,) = struct.unpack_from("<i", body)
            name = body[4:].decode(errors="replace") or f"system call {nr}"
            self.stop()
            raise ExecutorDied("sandbox-violation", _violation(name))
        return kind, body

    def _read(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            try:
                data = self._sock.recv(min(left, 1 << 20))
            except socket.timeout:
                raise
            except OSError:
                data = b""
            if not data:
                raise self._death()
            chunks.append(data)
            left -= len(data)
        return b"".join(chunks)

    def _broken(self, what: str) -> ExecutorDied:
        self.stop()
        return ExecutorDied("crash", f"the emulated module broke the executor's protocol ({what}): it wrote to "
                                     "a descriptor it does not own, or the executor failed")

    def _death(self) -> ExecutorDied:
        """Why the process ended (it closed the socket): reaped, classified for the student."""
        try:
            rc = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.stop()
            return ExecutorDied("crash", "the emulated module closed the grader's socket")
        self._stderr.seek(0)
        tail = self._stderr.read(2000).decode(errors="replace").strip()
        self.stop()
        sig = -rc if rc < 0 else (rc - 128 if self._isolated and rc > 128 else None)
        if rc == _VIOLATION_EXIT or sig == signal.SIGSYS:
            return ExecutorDied("sandbox-violation", _violation(None))
        if sig == signal.SIGXCPU:
            return ExecutorDied("resource-limit", f"the module used more than {self._limits.cpu_s} s of CPU time "
                                                  "(the sandbox's limit)")
        if sig == signal.SIGXFSZ:
            return ExecutorDied("resource-limit", f"the module wrote a file larger than {FILE_SIZE >> 20} MiB "
                                                  "(the sandbox's limit)")
        if sig == signal.SIGKILL:
            return ExecutorDied("crash", "the process running the module was killed (SIGKILL), e.g. because "
                                         "the machine ran out of memory")
        if sig:
            name = signal.Signals(sig).name if sig in signal.Signals.__members__.values() else f"signal {sig}"
            why = f"the module crashed ({name}) outside the emulated threads (in a static constructor or " \
                  "destructor, or a thread it started itself)"
            if sig == signal.SIGABRT:
                why += f"; abort() is also how an allocation fails past the sandbox's {MODULE_MEMORY >> 30} GiB"
                if self._machine_limited():
                    why += (", or past this machine's address-space limit, which is lower "
                            f"({size_text(address_space_limit() or 0)}; ulimit -v)")
            return ExecutorDied("crash", why)
        return ExecutorDied("crash", f"the process running the module exited (status {rc}): a kernel or a static "
                                     "constructor called exit()?" + (f"\n{tail}" if tail else ""))


_seccomp_probes: dict[tuple[str, str | None], str | None] = {}


def probe_seccomp(binary: Path, sandbox: Sandbox) -> str | None:
    """Whether the executor's seccomp filter works here (in this sandbox): None when it is installed
    and stops ``fork()``, else why not. Probed once per process and sandbox (a few milliseconds)."""
    key = (str(binary), sandbox.bwrap)
    if key not in _seccomp_probes:
        cmd = sandbox.command([str(binary), "probe"], read_only=[binary])
        try:
            proc = subprocess.run(cmd.argv, env=cmd.env, cwd=cmd.cwd or "/", capture_output=True, text=True,
                                  errors="replace", timeout=30, stdin=subprocess.DEVNULL)
            last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
            problem = None if proc.returncode == _VIOLATION_EXIT else f"the seccomp filter does not work here: {last}"
        except (OSError, subprocess.TimeoutExpired) as exc:
            problem = f"the seccomp filter could not be probed ({exc})"
        _seccomp_probes[key] = problem
    return _seccomp_probes[key]


def _violation(name: str | None) -> str:
    what = f"the system call {name}()" if name else "a system call"
    if name in ("clone", "clone3"):
        what += (" (thread or process creation: a submission runs on the emulator's worker threads and may "
                 "start no thread or process of its own)")
    elif name == "pthread_create":
        what = ("pthread_create() (thread creation: a submission runs on the emulator's worker threads and may "
                "start no thread of its own)")
    return (f"the module made {what}, which the emulator's sandbox does not allow (submissions may not start "
            "threads or processes, run programs, open sockets, or touch other processes); the process was stopped")


def _reap(proc: subprocess.Popen, sock: socket.socket, stderr) -> None:
    sock.close()
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    stderr.close()
