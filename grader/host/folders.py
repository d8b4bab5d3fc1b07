"""Where the grader keeps what outlives one grading on this machine."""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/scangrade``, else ``~/.cache/scangrade``: the compile cache, the emulator's
    builds and the GPU locks (``locks/``)."""
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "scangrade"
