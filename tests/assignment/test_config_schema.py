"""config.yaml's schema (pydantic models in grader.assignment.config_schema): every allowed key is named, odd values give
a message rather than a traceback, and defaults are declared once."""

import pytest

from grader.assignment.config import REMOVED_FLOAT_RTOL, PartConfig, ProfileConfig, TimingConfig, load_config
from grader.core.errors import ConfigError

BASE = "seed: 1\nparts:\n  part1_naive:\n    points_per_case: 1\n    sizes: [1, 2]\n"


def _load(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return load_config(path)


def _bad(tmp_path, text) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text)
    return info.value


def test_an_unknown_key_in_a_part_names_every_key_a_part_may_have(tmp_path):
    err = _bad(tmp_path, BASE + "    colour: red\n")
    assert (err.key, err.line) == ("parts.part1_naive.colour", 6)
    assert err.detail == ("unknown key; allowed here: block_size, dtypes, fractional_sizes, hidden_sizes, points_per_case, profile, "
                          "sizes, timing")


def test_items_per_thread_is_a_key_of_part5_only(tmp_path):
    err = _bad(tmp_path, BASE + "    items_per_thread: 4\n")
    assert err.key == "parts.part1_naive.items_per_thread" and "unknown key" in err.detail
    err = _bad(tmp_path, "seed: 1\nparts:\n  part5_single_pass:\n    points_per_case: 1\n    sizes: [1]\n")
    assert err.key == "parts.part5_single_pass.items_per_thread" and err.line == 4
    assert err.detail == "is required: ITEMS_PER_THREAD, from 1 to 64"


def test_a_list_in_dtypes_is_refused_with_a_message_not_a_traceback(tmp_path):
    err = _bad(tmp_path, BASE + "    dtypes: [[1]]\n")
    assert err.key == "parts.part1_naive.dtypes" and err.line == 6
    assert err.detail == "unknown or repeated dtype (got [[1]]); expected a non-empty list of int32 and float32"


@pytest.mark.parametrize("text, key, line, detail", [
    (BASE + "float_rtol: 1.0e-6\n", "float_rtol", 6, REMOVED_FLOAT_RTOL),
    (BASE + "timeouts:\n  part_s: true\n", "timeouts.part_s", 7, "must be a positive number of seconds (got True)"),
    (BASE + "timeouts:\n  case_s: -2\n", "timeouts.case_s", 7,
     "must be positive (got -2); expected a positive number of seconds"),
    (BASE + "emulator: [1]\n", "emulator", 6, "must be a mapping of keys to values (got list)"),
    (BASE + "    timing:\n      sizes: [1]\n      points: 1\n      full_at: 2\n      zero_at: 2\n",
     "parts.part1_naive.timing.zero_at", 10, "must be above full_at (got 2); expected the time ratio to the "
                                            "reference at or above which no points are given"),
    ("block_size: 64\nseed: 1\nparts:\n  part1_naive:\n    points_per_case: 1\n    sizes: [1]\n    timing:\n"
     "      sizes: [65]\n      points: 1\n", "parts.part1_naive.timing.sizes", 8,
     "sizes[0] = 65 exceeds this part's limit of 64 elements (with block_size 64)"),
    ("seed: 1\nparts: [1]\n", "parts", 2, "must be a mapping of keys to values (got list)"),
])
def test_each_mistake_gives_the_key_its_line_and_the_same_words_as_before(tmp_path, text, key, line, detail):
    err = _bad(tmp_path, text)
    assert (err.key, err.line, err.detail) == (key, line, detail)


def test_defaults_fill_what_the_file_leaves_out(tmp_path):
    cfg = _load(tmp_path, BASE + "    timing:\n      sizes: [1]\n      points: 2\n    profile:\n      size: 64\n")
    part = cfg.parts["part1_naive"]
    assert part == PartConfig(sizes=(1, 2), points_per_case=1, block_size=512,
                              timing=TimingConfig(sizes=(1,), points=2.0, reference="part1_naive"),
                              profile=ProfileConfig(size=64, reference="part1_naive"))
    assert (cfg.inputs.low, cfg.inputs.high, cfg.backend, cfg.timeouts.part_s, cfg.timeouts.case_s) == \
        (-1000, 1000, "auto", 300.0, 120.0)
    assert (cfg.emulator.workers, cfg.emulator.checks_max_n, cfg.emulator.sandbox, cfg.emulator.sandbox_explicit) == \
        (0, 70000, "auto", False)
    assert (cfg.timing.warmup, cfg.timing.runs, cfg.timing.flush_bytes) == (10, 30, 512 * 2**20)
