"""``scangrade private-template``: a commented private config for a public one, to fill in.

A private config (:func:`grader.assignment.config.load_private`) holds the seed of the hidden cases and, per
part, ``hidden_sizes``: cases graded like the visible ones, shown to students by name and status
only. The template names every part of the public config with two hidden sizes and a seed, all
drawn at random (:mod:`secrets`) for each template: sizes printed the same for every course would
be hidden from no one whose course kept them, and a seed is required (hidden inputs drawn from the
public seed could be computed from the public config). Each size is one the public config could
list: within the part's limit and no larger than its largest public size, one beside a power of two
and one odd (for a part of tiles, off the tile boundaries), neither a public size. It validates as a
private config of the public one as printed (``tests/assignment/test_private_template.py``).
"""

from __future__ import annotations

import random
import secrets
import textwrap

from grader.assignment.config import Config
from grader.assignment.parts import PARTS

#: The random seed's range: 9 digits, so that ``release --private-config`` can find it if it leaks
#: (it looks for seeds of :data:`grader.packaging.release.SEED_MIN_DIGITS` digits or more).
SEED_RANGE = (10**8, 10**9)


def example_hidden_sizes(cfg: Config, key: str, *, rng: random.Random | None = None) -> list[int]:
    """Two sizes for part ``key`` of ``cfg``, drawn with ``rng`` (default: :class:`secrets.SystemRandom`),
    that its public sizes do not list: a power of two plus or minus one, and an odd size (for a part of
    tiles, not a multiple of the tile), the power from the upper half of the bound's exponents. Both
    are from 2 to the part's bound: its limit for a one-block part, else its largest public size
    (hidden cases then cost no more than visible ones), so they straddle what the public sizes
    straddle within what the config already asks of the grader.
    Where a part's bound leaves no such size (a bound under 4, or every candidate public), the sizes
    from 1 up that are not public."""
    rng = rng or secrets.SystemRandom()
    pc, spec = cfg.parts[key], PARTS[key]
    limit, tile = spec.limit(pc.block_size), spec.tile_of(pc)
    bound = limit if limit is not None else max(pc.sizes)
    taken = set(pc.sizes)
    out: list[int] = []

    def fits(n: int) -> bool:
        return 2 <= n <= bound and n not in taken and n not in out and not (tile and n % tile == 0)

    top = bound.bit_length() - 1  # the largest power of two within the bound is 2^top
    draws = (lambda: (1 << rng.randint(max(2, top // 2), max(2, top))) + rng.choice((-1, 1)),
             lambda: rng.randrange(3, bound + 1, 2) if bound >= 3 else 1)
    for draw in draws:
        n = next((n for n in (draw() for _ in range(100)) if fits(n)), None)
        if n is None:  # a tiny bound, crowded with public sizes: the first free size
            n = next(n for n in range(1, bound + len(taken) + 3) if n not in taken and n not in out)
        out.append(n)
    return out


def private_template(cfg: Config, *, seed: int | None = None, rng: random.Random | None = None) -> str:
    """The template's YAML text for the public config ``cfg`` (comments say what each key does).

    Args:
        seed: the hidden cases' seed written (default: drawn at random from :data:`SEED_RANGE`, never
            the public seed).
        rng: where the example hidden sizes are drawn from (default: :class:`secrets.SystemRandom`;
            a seeded :class:`random.Random` for a template that can be made again).
    """
    if seed is None:
        seed = cfg.seed
        while seed == cfg.seed:  # load_private refuses the public seed
            seed = SEED_RANGE[0] + secrets.randbelow(SEED_RANGE[1] - SEED_RANGE[0])
    lines = [
        "# A private config for scangrade: the hidden cases of the official grade. Keep it from students.",
        f"# Made by `scangrade private-template` for {cfg.path}.",
        "# Give it to `scangrade batch`, `grade` or `check` as --private-config FILE; `gradescope-bundle` and",
        "# `prairielearn-bundle --private-config FILE` put it into the bundle (seen by course staff only);",
        "# `release --private-config FILE` only checks that nothing of it is in the student release.",
        "# It must hold `seed`, and may hold, per part of the public config, `hidden_sizes`; any other key is",
        "# refused.",
        "",
        f"# The seed of the hidden cases' inputs (the visible cases keep the public seed, {cfg.seed}). Drawn at",
        "# random for this template; required, any non-negative integer but the public seed. With 4 digits",
        "# or more, `release --private-config` finds it in any file of the release it would leak into.",
        f"seed: {seed}",
        "",
        "# Per part: sizes n graded for every dtype of the part, each case worth the part's points_per_case,",
        "# after its visible cases. Students see each by name (`hidden #1 int32`) and passed or failed only:",
        "# no size, input, message or time. Leave a part out (or its list empty) for no hidden case. The sizes",
        "# below were drawn at random for this template (a power of two plus or minus one, and an odd size,",
        "# up to the part's largest public size): keep them or choose your own, but never publish them.",
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
                  f"    hidden_sizes: [{', '.join(map(str, example_hidden_sizes(cfg, key, rng=rng)))}]"]
    return "\n".join(lines) + "\n"
