"""Grade integrity: what a student sees depends on no hidden case, the profile's output is checked,
and student code cannot tell the emulator by a macro (issue 19, "Grade integrity")."""

from __future__ import annotations

from pathlib import Path

from grader.backends import Selection
from grader.config import load_config, load_private
from grader.runner import grade
from tests.conftest import write_config
from tests.test_profile import P3_PROFILE  # Part 3's profile as shipped, at n = 256

ATTACKS = Path(__file__).parent / "attacks"
EMULATOR = Selection("emulator", "test")
PART3 = "part3_conflict_free"


def _part3_config(tmp_path: Path, *, hidden: list[int] | None = None, sizes: tuple[int, ...] = (5, 256)):
    """Part 3 alone (int32, BLOCK_SIZE 128) with its profile, and a private config of ``hidden`` sizes."""
    folder = tmp_path / f"config-{'-'.join(map(str, hidden or []))}"
    folder.mkdir()
    path = write_config(folder, sizes={PART3: list(sizes)}, extra="emulator:\n  workers: 1\n")
    path.write_text(path.read_text() + P3_PROFILE)
    cfg = load_config(path)
    if hidden:
        private = folder / "private.yaml"
        private.write_text(f"seed: 99\nparts:\n  {PART3}:\n    hidden_sizes: {hidden}\n")
        cfg = load_private(cfg, private)
    return cfg


def _submit(tmp_path: Path, text: str, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / f"{PART3}.cu").write_text(text)
    return folder


def test_the_profile_shows_nothing_of_the_hidden_sizes(tmp_path):
    """The attack encodes the n of the launch before the profiled one as bank conflicts: the profile
    must come from a run no hidden case preceded, so it reads the same whatever the hidden sizes."""
    folder = _submit(tmp_path, (ATTACKS / "profile_leaks_hidden_sizes.cu").read_text(), "attack")
    profiles = []
    for hidden in ([77], [199]):
        part = grade(folder, cfg=_part3_config(tmp_path, hidden=hidden), selection=EMULATOR).parts[0]
        assert [c.status for c in part.cases] == ["pass"] * len(part.cases), part.cases
        assert [c.n for c in part.cases if c.visibility == "hidden"] == hidden
        profiles.append(part.profile)
        assert part.phases_s["profile"] > 0 and part.phases_s["hidden"] > 0, part.phases_s
        assert str(hidden[0]) not in part.profile.message
    assert profiles[0] == profiles[1]
    assert profiles[0].conflict_wavefronts == 0  # a fresh module: no launch came before the profiled one
