"""Loading config.yaml: the shipped file is valid; every kind of mistake names the key and line."""

import pytest

from grader.cli import main
from grader.assignment.config import load_config
from grader.core.errors import ConfigError
from tests.conftest import ROOT, write_config


def test_the_shipped_config_loads_and_straddles_powers_of_two():
    cfg = load_config(ROOT / "config.yaml")
    assert cfg.block_size == 512
    p1 = cfg.parts["part1_naive"].sizes
    assert {1, 31, 32, 33, cfg.block_size - 1, cfg.block_size} <= set(p1)
    p4 = cfg.parts["part4_any_size"].sizes
    assert {2**20 - 1, 2**20, 2**20 + 1, 16_000_000} <= set(p4)


def _bad(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return info.value


BASE = "seed: 1\nparts:\n  part1_naive:\n    points_per_case: 1\n    sizes: [1, 2]\n"


def test_an_unknown_key_is_named_with_its_line_and_the_allowed_keys(tmp_path):
    err = _bad(tmp_path, BASE + "timeouts:\n  part_seconds: 3\n")
    assert err.key == "timeouts.part_seconds" and err.line == 7
    assert "allowed here: case_s, part_s" in str(err)


def test_a_block_size_that_is_not_a_power_of_two_is_refused(tmp_path):
    err = _bad(tmp_path, "block_size: 500\n" + BASE)
    assert err.key == "block_size" and err.line == 1
    assert "power of two from 32 to 1024" in str(err)


def test_a_size_beyond_the_parts_limit_names_the_limit(tmp_path):
    err = _bad(tmp_path, "block_size: 64\nseed: 1\nparts:\n  part1_naive:\n    points_per_case: 1\n"
                         "    sizes: [1, 65]\n")
    assert err.key == "parts.part1_naive.sizes"
    assert "sizes[1] = 65 exceeds this part's limit of 64" in str(err)


@pytest.mark.parametrize("text, key, words", [
    ("parts:\n  part1_naive:\n    points_per_case: 1\n    sizes: [1]\n", "seed", "is required"),
    (BASE + "backend: cuda\n", "backend", "one of auto, pycuda, emulator"),
    ("seed: 1\nparts:\n  part9:\n    points_per_case: 1\n    sizes: [1]\n", "parts.part9", "known parts: part1_naive"),
    ("seed: 1\nparts:\n  part1_naive:\n    points_per_case: 1\n    sizes: [0]\n", "parts.part1_naive.sizes",
     "not a positive integer"),
    ("seed: true\n" + BASE[8:], "seed", "non-negative integer"),
    (BASE + "inputs:\n  low: 5\n  high: 1\n", "inputs.high", "low (5) and high (1)"),
])
def test_wrong_values_name_the_key_and_what_is_allowed(tmp_path, text, key, words):
    err = _bad(tmp_path, text)
    assert err.key == key
    assert words in str(err)


def test_a_yaml_syntax_error_gives_the_line(tmp_path):
    err = _bad(tmp_path, "seed: 1\nparts: [\n  oops: 1\n")
    assert "not valid YAML" in str(err) and err.line is not None


def test_the_cli_reports_a_bad_config_with_exit_status_2_and_no_traceback(tmp_path, capsys):
    path = write_config(tmp_path, extra="colour: blue\n")
    assert main(["grade", str(tmp_path), "--config", str(path), "--backend", "emulator"]) == 2
    err = capsys.readouterr().err
    assert "key 'colour': unknown key" in err and "Traceback" not in err



@pytest.mark.parametrize("spelling", ["off", "'off'", "Off"])
def test_the_sandbox_policy_off_may_be_written_bare_though_yaml_reads_it_as_false(tmp_path, spelling):
    path = tmp_path / "c.yaml"
    path.write_text(f"emulator:\n  sandbox: {spelling}\n" + BASE)
    cfg = load_config(path)
    assert cfg.emulator.sandbox == "off" and cfg.emulator.sandbox_explicit
