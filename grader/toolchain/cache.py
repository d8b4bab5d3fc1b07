"""The compile cache: compiled modules kept between runs (an emulated module's shared object, a GPU
cubin) under the hash of everything that decides their bytes, bounded per grading and in all
(:class:`CacheLimits`, the config's ``compile_cache``), and where the caches live.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import tempfile
import time
from pathlib import Path


__all__ = ["CompileCache", "CacheLimits", "CACHE_OWNER_ENV", "set_cache_limits"]


#: The environment variable naming the grading a process compiles for (set by
#: :func:`grader.grading.runner.grade` for its workers, a fresh token per submission): what
#: :class:`CompileCache` counts a submission's quota by.
CACHE_OWNER_ENV = "SCANGRADE_CACHE_OWNER"
_OWNER_RE = re.compile(r"[0-9a-f]{8,64}")


class CacheLimits:
    """The bounds of the compile cache (the config's ``compile_cache`` keys, in bytes and seconds).

    Attributes:
        max_bytes: the most the cache holds; past it the least recently used files go.
        max_age_s: a file not used (read or written) for that long goes.
        submission_bytes: the most one grading adds (by :data:`CACHE_OWNER_ENV`); a file that would
            pass it, or is larger, is not kept.
    """

    def __init__(self, *, max_mib: int = 1024, max_age_days: int = 30, submission_mib: int = 32) -> None:
        self.max_bytes, self.max_age_s = max_mib << 20, max_age_days * 86400.0
        self.submission_bytes = min(submission_mib, max_mib) << 20


#: This process's bounds: the defaults, until :func:`set_cache_limits` (a worker sets its job's).
_LIMITS = CacheLimits()


def set_cache_limits(limits: CacheLimits) -> None:
    """Bound every :class:`CompileCache` of this process by ``limits`` (a worker, from its job's config)."""
    global _LIMITS
    _LIMITS = limits


class CompileCache:
    """Compiled modules kept between runs (an emulated module's shared object, a GPU cubin), each under
    the hash of everything that decides its bytes: the source as compiled, the header, the flags and
    the compiler's identity (its path and ``--version``), and for the emulator the runtime's key.

    Only the grader writes it, after a sandboxed compile has returned: the compile itself never sees
    the folder (``<cache_dir>/compiled``), and a file enters it by an atomic rename, so a reader sees
    a whole file or none. A hit is touched. It is bounded (:class:`CacheLimits`, the config's
    ``compile_cache``): after each file kept, files unused for ``max_age_s`` go, then the least
    recently used until the folder holds at most ``max_bytes`` (9/10 of it, so that pruning is not
    done at every file); one grading (:data:`CACHE_OWNER_ENV`) keeps at most ``submission_bytes``
    (counted in ``.owners/<token>``, under a lock: a submission's parts compile at once), and no
    file larger is kept: a submission with a static array of 60 MiB compiles, runs and is graded from
    its own scratch folder, and leaves nothing. ``SCANGRADE_COMPILE_CACHE=0`` turns it off (every
    compile runs).

    What it saves: a part compiled again in the worker that follows a hang or a GPU fault, the
    reference solutions compiled for every submission's timing and profile, a submission graded again.
    """

    #: Seconds after which a temporary file of an interrupted copy, or a grading's count, is stale.
    STALE_S = 86400.0

    def __init__(self, folder: Path, *, limits: CacheLimits | None = None) -> None:
        self.folder = Path(folder)
        self.limits = limits or _LIMITS
        self.enabled = os.environ.get("SCANGRADE_COMPILE_CACHE", "1") != "0"
        owner = os.environ.get(CACHE_OWNER_ENV, "")
        self.owner = owner if _OWNER_RE.fullmatch(owner) else None

    @staticmethod
    def key(*parts: str | bytes) -> str:
        """The hex SHA-256 of ``parts`` (each length-prefixed, so no two lists of parts collide)."""
        h = hashlib.sha256()
        for part in parts:
            data = part.encode() if isinstance(part, str) else part
            h.update(len(data).to_bytes(8, "little") + data)
        return h.hexdigest()

    def get(self, key: str, suffix: str) -> Path | None:
        """The cached file of ``key``, or None."""
        if not self.enabled:
            return None
        path = self.folder / f"{key}{suffix}"
        try:
            os.utime(path)
        except OSError:
            return None
        return path

    def put(self, key: str, suffix: str, built: Path) -> Path | None:
        """Keep a copy of ``built`` under ``key``; its path, or None where it is not kept (the folder
        cannot be written, the file is larger than one grading's quota, or the grading's quota is spent)."""
        if not self.enabled:
            return None
        target = self.folder / f"{key}{suffix}"
        try:
            size = Path(built).stat().st_size
            if size > self.limits.submission_bytes:
                return None
            self.folder.mkdir(parents=True, exist_ok=True)
            with self._quota(target.name, size) as granted:
                if not granted:
                    return None
                fd, tmp = tempfile.mkstemp(prefix=".put-", suffix=".tmp", dir=self.folder)
                try:
                    with os.fdopen(fd, "wb") as out:
                        out.write(Path(built).read_bytes())
                    os.replace(tmp, target)
                except BaseException:
                    Path(tmp).unlink(missing_ok=True)
                    raise
        except OSError:
            return None
        self.prune()
        return target

    @contextlib.contextmanager
    def _quota(self, name: str, size: int):
        """Whether this grading may add ``size`` bytes as ``name`` (yields a bool); when it may, and
        the body returns, the file is counted to it. Without an owner, always (the per-file cap holds)."""
        if self.owner is None:
            yield True
            return
        owners = self.folder / ".owners"
        owners.mkdir(exist_ok=True)
        with open(owners / self.owner, "a+", encoding="utf-8") as ledger:
            fcntl.flock(ledger, fcntl.LOCK_EX)
            ledger.seek(0)
            counted = {}  # each file it kept, once, while it is there
            for line in ledger.read().splitlines():
                kept, _, bytes_ = line.partition(" ")
                if bytes_.isdigit() and kept != name:
                    counted[kept] = int(bytes_)
            used = sum(n for kept, n in counted.items() if (self.folder / kept).is_file())
            if used + size > self.limits.submission_bytes:
                yield False
                return
            yield True
            ledger.write(f"{name} {size}\n")

    def prune(self) -> None:
        """Bound the folder (:class:`CacheLimits`): files unused for ``max_age_s`` go, then the least
        recently used until it holds at most 9/10 of ``max_bytes``; stale temporary files and
        gradings' counts go too. Safe beside other processes (a file gone is skipped)."""
        now = time.time()
        files = []
        try:
            scan = list(os.scandir(self.folder))
        except OSError:
            return
        for e in scan:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if e.name.startswith("."):
                if e.name.startswith(".put-") and now - st.st_mtime > self.STALE_S:
                    _unlink(e.path)
                continue
            if e.is_file(follow_symlinks=False):
                files.append((st.st_mtime, st.st_size, e.path))
        fresh = []
        for mtime, size, path in files:
            (_unlink(path) if now - mtime > self.limits.max_age_s else fresh.append((mtime, size, path)))
        total = sum(size for _, size, _ in fresh)
        if total > self.limits.max_bytes:
            for _, size, path in sorted(fresh):
                if total <= self.limits.max_bytes * 9 // 10:
                    break
                _unlink(path)
                total -= size
        try:
            ledgers = list(os.scandir(self.folder / ".owners"))
        except OSError:
            return
        for e in ledgers:
            try:
                if now - e.stat().st_mtime > self.STALE_S:
                    _unlink(e.path)
            except OSError:
                continue


def _unlink(path: str) -> None:
    """Remove ``path`` if it can be removed (another process may have pruned it first)."""
    try:
        os.unlink(path)
    except OSError:
        pass
