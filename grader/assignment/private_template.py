"""``scangrade private-template``: a commented private config for a public one, to fill in.

A private config (:func:`grader.assignment.config.load_private`) holds the seed of the hidden cases and, per
part, ``hidden_sizes``: cases graded like the visible ones, shown to students by name and status
only. The template names every part of the public config with two example hidden sizes that the
public config does not list (within the part's limit; for a part of tiles, off the tile
boundaries), and a seed drawn at random, so no two courses share it by default. It validates as a
private config of the public one as printed (``tests/test_private_template.py``).
"""

from __future__ import annotations

import secrets
import textwrap

from grader.assignment.config import Config
from grader.assignment.parts import PARTS

#: The random seed's range: 9 digits, so that ``release --private-config`` can find it if it leaks
#: (it looks for seeds of :data:`grader.packaging.release.SEED_MIN_DIGITS` digits or more).
SEED_RANGE = (10**8, 10**9)


def example_hidden_sizes(cfg: Config, key: str) -> list[int]:
    """Two sizes for part ``key`` of ``cfg`` that its public sizes do not list: for a one-block part
    of limit L, about 3/4 of L and L - 3; for a part of tiles of T elements, 5 T + 3 and 100 T - 1
    (a partial last tile, several tiles of tile sums). Each moved down past a public size."""
    pc, spec = cfg.parts[key], PARTS[key]
    limit, tile = spec.limit(pc.block_size), spec.tile_of(pc)
    if limit is not None:
        wanted = [max(1, limit * 3 // 4 - 1), max(1, limit - 3)]
    else:
        tile = tile or pc.block_size
        wanted = [5 * tile + 3, 100 * tile - 1]
    taken = set(pc.sizes)
    out = []
    for n in wanted:
        while n > 1 and (n in taken or n in out):
            n -= 1
        out.append(n)
    return out


def private_template(cfg: Config, *, seed: int | None = None) -> str:
    """The template's YAML text for the public config ``cfg`` (comments say what each key does).

    Args:
        seed: the hidden cases' seed written (default: drawn at random from :data:`SEED_RANGE`).
    """
    if seed is None:
        seed = SEED_RANGE[0] + secrets.randbelow(SEED_RANGE[1] - SEED_RANGE[0])
    lines = [
        "# A private config for scangrade: the hidden cases of the official grade. Keep it from students.",
        f"# Made by `scangrade private-template` for {cfg.path}.",
        "# Give it to `scangrade batch`, `grade` or `check` as --private-config FILE; `gradescope-bundle` and",
        "# `prairielearn-bundle --private-config FILE` put it into the bundle (seen by course staff only);",
        "# `release --private-config FILE` only checks that nothing of it is in the student release.",
        "# It may hold `seed` and, per part of the public config, `hidden_sizes`; any other key is refused.",
        "",
        f"# The seed of the hidden cases' inputs (the visible cases keep the public seed, {cfg.seed}). Drawn at",
        "# random for this template; any non-negative integer. With 4 digits or more, `release",
        "# --private-config` finds it in any file of the release it would leak into.",
        f"seed: {seed}",
        "",
        "# Per part: sizes n graded for every dtype of the part, each case worth the part's points_per_case,",
        "# after its visible cases. Students see each by name (`hidden #1 int32`) and passed or failed only:",
        "# no size, input, message or time. Leave a part out (or its list empty) for no hidden case. The sizes",
        "# below are examples that every template prints: choose your own.",
        "parts:",
    ]
    for key, pc in cfg.parts.items():
        spec = PARTS[key]
        limit, tile = spec.limit(pc.block_size), spec.tile_of(pc)
        bound = (f"1 to {limit} (one block of BLOCK_SIZE {pc.block_size})" if limit is not None
                 else f"1 to 2^31 - 1; tiles of {tile} elements" if tile else "1 to 2^31 - 1")
        worth = f"{pc.points_per_case:g} point{'' if pc.points_per_case == 1 else 's'}"
        lines += [f"  {key}:",
                  f"    # Part {spec.number}, {' and '.join(pc.dtypes)}, {worth} a case; n from {bound}.",
                  *textwrap.wrap(f"Public sizes: {', '.join(map(str, pc.sizes))}.", width=100,
                                 initial_indent="    # ", subsequent_indent="    #   "),
                  f"    hidden_sizes: [{', '.join(map(str, example_hidden_sizes(cfg, key)))}]"]
    return "\n".join(lines) + "\n"
