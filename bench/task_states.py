"""What a grading's processes wait on: every thread of the grader's processes, sampled from /proc.

Five times a second for SECONDS, every thread of every process whose command line names a part
worker, an emulator executor, bubblewrap, a compiler or ``bench/throughput.py`` (the runner) is
read from ``/proc/PID/task/TID/``: its state (``R`` running, ``S`` sleeping, ``D`` uninterruptible),
the system call it is in (``/proc/.../syscall``; for ``read``, ``write``, ``poll`` and ``ioctl`` also
what its file descriptor is: a ``/dev`` node such as ``/dev/nvidiactl``, a pipe, a socket or a
file) and, for a thread in ``D`` or in an ioctl on ``/dev/nvidiactl``, the kernel function it waits
in (``wchan``: ``os_acquire_rwlock_write`` is the NVIDIA driver's lock). Writes to OUT.json the
counts of each ``(process kind, main thread or other, state, call, wchan)``, most frequent first,
and prints the 25 most frequent with their share of their process kind's main or other threads.

Run it beside a batch, e.g. 16 s after ``bench/throughput.py`` starts (its single-submission rows
first), on the GPU machine: ``python3 bench/task_states.py samples.json 35``. Linux only; a
sample of a few hundred threads takes a few milliseconds. Measured: docs/throughput.md, the sixth day.
"""

from __future__ import annotations

import collections
import json
import os
import sys
import time

#: x86-64 system call numbers by name, for those a grading's threads wait in.
SYSCALLS = {0: "read", 1: "write", 3: "close", 7: "poll", 9: "mmap", 11: "munmap", 16: "ioctl", 23: "select",
            28: "madvise", 35: "nanosleep", 45: "recvfrom", 47: "recvmsg", 56: "clone", 59: "execve", 61: "wait4",
            72: "fcntl", 73: "flock", 74: "fsync", 202: "futex", 230: "clock_nanosleep", 232: "epoll_wait",
            257: "openat", 270: "pselect6", 271: "ppoll", 281: "epoll_pwait", 435: "clone3"}
#: Calls whose file descriptor (the first argument) says what is waited on.
_FD_CALLS = {0, 1, 7, 16}


def process_kind(cmdline: str) -> str | None:
    """The kind of a grading's process by its command line, or None for another process."""
    for kind, marks in (("worker", ("grader.grading.worker",)), ("executor", ("executor",)), ("bwrap", ("bwrap",)),
                        ("compiler", ("nvcc", "cicc", "ptxas", "g++", "cc1plus")), ("runner", ("throughput.py",))):
        if any(mark in cmdline for mark in marks):
            return kind
    return None


def _call(pid: str, fields: list[str]) -> str:
    """The system call a thread is in (``running``: none), from ``/proc/.../syscall``'s fields."""
    if fields[0] in ("running", "-1"):
        return "running" if fields[0] == "running" else "not-in-syscall"
    number = int(fields[0])
    name = SYSCALLS.get(number, f"syscall {number}")
    if number in _FD_CALLS and len(fields) > 1:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{int(fields[1], 16)}")
        except (OSError, ValueError):
            return name
        where = target if target.startswith("/dev/") else target.split(":")[0] if ":" in target else "file"
        return f"{name}:{where}"
    return name


def sample(counts: collections.Counter) -> None:
    """Add one sample of every thread of the grading's processes to ``counts``."""
    me = str(os.getpid())
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid == me:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                kind = process_kind(f.read().replace(b"\0", b" ").decode(errors="replace"))
            tids = os.listdir(f"/proc/{pid}/task") if kind else []
        except OSError:
            continue
        for tid in tids:
            base = f"/proc/{pid}/task/{tid}"
            try:
                with open(base + "/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
                with open(base + "/syscall") as f:
                    fields = f.read().split()
                with open(base + "/wchan") as f:
                    wchan = f.read().strip()
            except OSError:
                continue
            if not fields:
                continue
            call = _call(pid, fields)
            waits = wchan if state == "D" or call == "ioctl:/dev/nvidiactl" else ""
            counts[(kind, "main" if tid == pid else "other", state, call, waits)] += 1


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out, seconds = argv[0], float(argv[1])
    counts: collections.Counter = collections.Counter()
    samples = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.monotonic()
        sample(counts)
        samples += 1
        time.sleep(max(0.0, 0.2 - (time.monotonic() - started)))
    rows = sorted(((n, list(key)) for key, n in counts.items()), reverse=True)
    with open(out, "w") as f:
        json.dump({"samples": samples, "rows": rows}, f, indent=0)
    totals: collections.Counter = collections.Counter()
    for n, key in rows:
        totals[(key[0], key[1])] += n
    for n, (kind, thread, state, call, waits) in rows[:25]:
        print(f"{n:7d} {100 * n / totals[(kind, thread)]:5.1f} % of {kind} {thread:<5} {state} {call} {waits}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
