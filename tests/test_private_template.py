"""``scangrade private-template``: the commented private config it prints validates as a private
config of the public one, names every part, and gives hidden sizes the public config does not list."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.cli import main
from grader.assignment.config import load_config, load_private
from grader.assignment.private_template import SEED_RANGE
from tests.conftest import ROOT, write_config


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
    if which == "small":  # the examples moved off the public sizes (95, 94 and 125; 5 and 100 tiles of 256, less 1)
        assert private.parts["part1_naive"].hidden_sizes == (93, 124)
        assert private.parts["part4_any_size"].hidden_sizes == (1282, 25598)


def test_the_template_is_commented_and_its_seed_is_drawn_each_time(tmp_path, capsys):
    text = _template(capsys, ROOT / "config.yaml", tmp_path).read_text()
    assert all(line.lstrip().startswith("#") or ":" in line for line in text.splitlines() if line.strip())
    assert "--private-config" in text and "Keep it from students" in text and "choose your own" in text
    again = _template(capsys, ROOT / "config.yaml", tmp_path / "..").read_text()
    seed = [line for line in text.splitlines() if line.startswith("seed:")]
    assert seed and seed != [line for line in again.splitlines() if line.startswith("seed:")]


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
