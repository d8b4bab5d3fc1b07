"""``scangrade private-template``: the commented private config it prints validates as a private
config of the public one, names every part, and gives hidden sizes the public config does not list."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.cli import main
from grader.assignment.config import load_config, load_private
from grader.assignment.parts import PARTS
from grader.assignment.private_template import SEED_RANGE, private_template
from tests.conftest import ROOT, SOLUTIONS, write_config


def _template(capsys, config: Path, tmp_path: Path) -> Path:
    assert main(["private-template", "--config", str(config)]) == 0
    path = tmp_path / "private.yaml"
    path.write_text(capsys.readouterr().out)
    return path


@pytest.mark.parametrize("which", ["shipped", "small"])
def test_the_template_validates_as_a_private_config_of_its_public_one(which, tmp_path, capsys):
    config = ROOT / "config.yaml" if which == "shipped" else write_config(
        tmp_path, sizes={"part1_naive": [1, 94, 95, 125], "part4_any_size": [1, 1283, 25599]})
    public = load_config(config)
    private = load_private(public, _template(capsys, config, tmp_path))
    assert SEED_RANGE[0] <= private.private_seed < SEED_RANGE[1] and private.private_seed != public.seed
    assert list(private.parts) == list(public.parts)
    for key, pc in private.parts.items():
        assert len(pc.hidden_sizes) == 2 and not set(pc.hidden_sizes) & set(public.parts[key].sizes), key
    for key, pc in public.parts.items():  # a power of two plus or minus one, and an odd size, within the part's bound
        spec = PARTS[key]
        limit, tile = spec.limit(pc.block_size), spec.tile_of(pc)
        power, odd = private.parts[key].hidden_sizes[-2:]
        assert min(abs(power - (1 << power.bit_length())), abs(power - (1 << (power.bit_length() - 1)))) == 1, key
        assert odd % 2 == 1 and not (tile and odd % tile == 0), key
        assert 2 <= min(power, odd) and max(power, odd) <= (limit if limit is not None else max(pc.sizes)), key


def test_the_template_is_commented_and_its_seed_and_sizes_are_drawn_each_time(tmp_path, capsys):
    """A course that keeps the template's sizes must not have published them: every template draws its own."""
    first, second = _template(capsys, ROOT / "config.yaml", tmp_path), _template(capsys, ROOT / "config.yaml",
                                                                                 tmp_path / "..")
    text = first.read_text()
    assert all(line.lstrip().startswith("#") or ":" in line for line in text.splitlines() if line.strip())
    assert "--private-config" in text and "Keep it from students" in text and "choose your own" in text
    public = load_config(ROOT / "config.yaml")
    a, b = load_private(public, first), load_private(public, second)
    assert a.private_seed != b.private_seed
    assert [pc.hidden_sizes for pc in a.parts.values()] != [pc.hidden_sizes for pc in b.parts.values()]


def test_the_example_sizes_are_drawn_from_the_generator_given(small_config):
    import random
    draws = [private_template(small_config, seed=5, rng=random.Random(1)) for _ in range(2)]
    assert draws[0] == draws[1] and draws[0] != private_template(small_config, seed=5, rng=random.Random(2))


def test_a_template_grades_its_hidden_cases(tmp_path, capsys):
    from grader.backends import Selection
    from grader.grading.runner import grade
    config = write_config(tmp_path, sizes={"part1_naive": [1, 33]})
    cfg = load_private(load_config(config), _template(capsys, config, tmp_path))
    (part,) = grade(SOLUTIONS, cfg=cfg, selection=Selection("emulator", "test"), parts=["part1_naive"]).parts
    hidden = [c for c in part.cases if c.visibility == "hidden"]
    assert len(hidden) == 2 * len(cfg.parts["part1_naive"].dtypes) and all(c.status == "pass" for c in hidden)


def test_private_template_of_a_bad_config_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: x\nparts: {}\n")
    assert main(["private-template", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "seed" in err


def test_the_example_of_docs_release_md_validates_against_the_shipped_config(tmp_path):
    text = (ROOT / "docs" / "release.md").read_text()
    section = text.split("## Private configs", 1)[1].split("\n## ", 1)[0]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "private.yaml"
    path.write_text(example)
    private = load_private(load_config(ROOT / "config.yaml"), path)
    assert private.private_seed is not None and any(pc.hidden_sizes for pc in private.parts.values())
