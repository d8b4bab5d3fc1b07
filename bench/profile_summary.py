"""Summarise the worker profiles written under ``SCANGRADE_PROFILE`` (see docs/benchmarks.md).

Usage: ``python bench/profile_summary.py FOLDER [--part KEY] [--top N]``: for each part, the
functions with the most cumulative time, summed over that part's profiles (one per worker).
"""

from __future__ import annotations

import argparse
import io
import pstats
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """Print the summary; returns 1 when the folder holds no profiles."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--part", help="only this part (e.g. part4_any_size)")
    ap.add_argument("--sort", default="cumulative", help="pstats sort key (default: cumulative; tottime: own time)")
    ap.add_argument("--top", type=int, default=25, help="functions per part (default: 25)")
    args = ap.parse_args(argv)
    files = sorted(Path(args.folder).glob("*.prof"))
    parts = sorted({f.name.rsplit("-", 1)[0] for f in files})
    if args.part:
        parts = [p for p in parts if p == args.part]
    if not parts:
        print(f"no profiles in {args.folder}", file=sys.stderr)
        return 1
    for part in parts:
        mine = [str(f) for f in files if f.name.rsplit("-", 1)[0] == part]
        text = io.StringIO()
        stats = pstats.Stats(*mine, stream=text)
        stats.sort_stats(args.sort).print_stats(args.top)
        print(f"== {part} ({len(mine)} profile(s))")
        print(text.getvalue().split("\n", 1)[-1] if text.getvalue() else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
