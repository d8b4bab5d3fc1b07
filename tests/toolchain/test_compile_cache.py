"""The compile cache is bounded: by size and age (the config's ``compile_cache``), and per submission.

Issue 38: a Part 1 with a 60 MiB static host array passed and left 120 MiB in
``~/.cache/scangrade/compiled`` (its module for each dtype), and the cache was pruned at 4,000
files, never by size: about 250 GiB before it ever was. Now the folder holds at most
``compile_cache.max_mib`` (the least recently used go), nothing unused for ``max_age_days``, and one
grading adds at most ``submission_mib`` (no file larger is kept).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from grader.toolchain.cache import CACHE_OWNER_ENV, CacheLimits, CompileCache
from grader.host.folders import default_cache_dir

MIB = 1 << 20


def _built(tmp_path: Path, name: str, size: int) -> Path:
    path = tmp_path / "built" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(b"\x7f" * size)
    return path


def _held(folder: Path) -> dict[str, int]:
    if not folder.is_dir():
        return {}
    return {e.name: e.stat().st_size for e in folder.iterdir() if e.is_file() and not e.name.startswith(".")}


@pytest.fixture(autouse=True)
def _no_owner(monkeypatch):
    monkeypatch.delenv(CACHE_OWNER_ENV, raising=False)
    monkeypatch.delenv("SCANGRADE_COMPILE_CACHE", raising=False)


def test_the_cache_holds_at_most_its_bound_and_the_least_recently_used_go_first(tmp_path):
    cache = CompileCache(tmp_path / "compiled", limits=CacheLimits(max_mib=4, submission_mib=4))
    for i in range(4):  # 4 MiB: at the bound
        assert cache.put(f"k{i}", ".so", _built(tmp_path, f"m{i}", MIB)) is not None
        os.utime(cache.folder / f"k{i}.so", (time.time() - 100 + i, time.time() - 100 + i))
    assert sum(_held(cache.folder).values()) == 4 * MIB
    assert cache.get("k0", ".so") is not None  # used now: the least recently used is k1
    cache.put("k4", ".so", _built(tmp_path, "m4", MIB))  # 5 MiB: down to 9/10 of the bound
    assert sorted(_held(cache.folder)) == ["k0.so", "k3.so", "k4.so"]
    assert sum(_held(cache.folder).values()) <= 4 * MIB * 9 // 10


def test_a_file_unused_for_max_age_goes(tmp_path):
    cache = CompileCache(tmp_path / "compiled", limits=CacheLimits(max_age_days=2))
    cache.put("old", ".so", _built(tmp_path, "a", 10))
    cache.put("used", ".so", _built(tmp_path, "b", 10))
    three_days = time.time() - 3 * 86400
    for name in ("old.so", "used.so"):
        os.utime(cache.folder / name, (three_days, three_days))
    assert cache.get("used", ".so") is not None  # a hit is a use
    cache.put("new", ".so", _built(tmp_path, "c", 10))
    assert sorted(_held(cache.folder)) == ["new.so", "used.so"]


def test_no_file_larger_than_a_submissions_quota_is_kept(tmp_path):
    cache = CompileCache(tmp_path / "compiled", limits=CacheLimits(submission_mib=2))
    assert cache.put("big", ".so", _built(tmp_path, "big", 2 * MIB + 1)) is None
    assert cache.get("big", ".so") is None and _held(cache.folder) == {}
    assert cache.put("fits", ".so", _built(tmp_path, "fits", 2 * MIB)) is not None


def test_one_gradings_files_together_stay_within_its_quota(tmp_path, monkeypatch):
    limits = CacheLimits(max_mib=64, submission_mib=3)
    monkeypatch.setenv(CACHE_OWNER_ENV, "a" * 32)
    first, second = CompileCache(tmp_path / "compiled", limits=limits), CompileCache(tmp_path / "compiled", limits=limits)
    assert first.put("p1-int32", ".so", _built(tmp_path, "1", MIB)) is not None
    assert second.put("p1-float32", ".so", _built(tmp_path, "2", MIB)) is not None  # another worker, the same grading
    assert first.put("p1-int32", ".so", _built(tmp_path, "1", MIB)) is not None  # the same file again: counted once
    assert second.put("p2-int32", ".so", _built(tmp_path, "3", MIB)) is not None  # 3 MiB: the quota
    assert first.put("p2-float32", ".so", _built(tmp_path, "4", 1)) is None  # past it: used, not kept
    monkeypatch.setenv(CACHE_OWNER_ENV, "b" * 32)  # the next submission has its own
    assert CompileCache(tmp_path / "compiled", limits=limits).put("q", ".so", _built(tmp_path, "5", MIB)) is not None
    assert sum(_held(tmp_path / "compiled").values()) == 4 * MIB


def test_the_bounds_are_config_keys_with_defaults_and_checks(tmp_path):
    from grader.assignment.config import load_config
    from grader.core.errors import ConfigError
    base = "seed: 1\nparts:\n  part1_naive:\n    points_per_case: 1\n    sizes: [1]\n"
    (tmp_path / "c.yaml").write_text(base)
    cc = load_config(tmp_path / "c.yaml").compile_cache
    assert (cc.max_mib, cc.max_age_days, cc.submission_mib) == (1024, 30, 32)
    for text, key, words in (("compile_cache:\n  max_mib: 0\n", "compile_cache.max_mib", "must be positive"),
                             ("compile_cache:\n  max_mib: 16\n  submission_mib: 32\n", "compile_cache.submission_mib",
                              "submission_mib (32) must not be above max_mib (16)"),
                             ("compile_cache:\n  max_age_days: '30'\n", "compile_cache.max_age_days", "positive"),
                             ("compile_cache:\n  gib: 3\n", "compile_cache.gib", "unknown key")):
        (tmp_path / "c.yaml").write_text(base + text)
        with pytest.raises(ConfigError) as info:
            load_config(tmp_path / "c.yaml")
        assert info.value.key == key and words in str(info.value), str(info.value)


BALLAST = """
// 60 MiB of initialised host data: each compiled module of this file is that large.
int scangrade_ballast[15 << 20] = {1};
"""


def test_a_submission_with_a_60_mib_static_array_passes_and_leaves_no_more_than_its_quota(tmp_path, monkeypatch):
    from grader.backends import Selection
    from grader.assignment.config import load_config
    from grader.grading.runner import grade
    from tests.conftest import SOLUTIONS, write_config
    cache = tmp_path / "xdg" / "scangrade"
    shutil.copytree(default_cache_dir() / "emulator", cache / "emulator", dirs_exist_ok=True)  # the runtime, built
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "part1_naive.cu").write_text((SOLUTIONS / "part1_naive.cu").read_text() + BALLAST)
    path = write_config(tmp_path, sizes={"part1_naive": [5]})
    text = path.read_text()
    for quota in (8, 128):
        path.write_text(text + f"compile_cache:\n  submission_mib: {quota}\n")
        result = grade(sub, cfg=load_config(path), selection=Selection("emulator", "test"), checks=False)
        part = result.parts[0]
        assert part.status == "pass", (part.message, [c.message for c in part.cases])  # a correct kernel passes
        held = _held(cache / "compiled")
        if quota == 8:
            assert sum(held.values()) <= 8 * MIB and all(size < 60 * MIB for size in held.values()), held
        else:  # the control: its module is that large, and a quota that holds it keeps it
            assert max(held.values()) >= 60 * MIB, held
