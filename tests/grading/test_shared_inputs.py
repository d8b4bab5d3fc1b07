"""The inputs a GPU batch draws once for the whole class (grader.grading.case.inputs.shared_input): the same
values as drawn alone, read back by the next worker, private to each worker once mapped, and drawn
again where a file is cut short."""

from __future__ import annotations

import numpy as np
import pytest

from grader.assignment.config import load_config
from grader.grading.case.inputs import INPUT_CACHE_ENV, INPUT_CACHE_MIN, make_input, reference_output, shared_input
from grader.assignment.parts import PARTS, SOLUTIONS

N = INPUT_CACHE_MIN + 5


@pytest.fixture
def cfg():
    return load_config(SOLUTIONS.parent.parent / "config.yaml")


def test_an_input_drawn_once_is_read_back_with_the_same_values(cfg, tmp_path, monkeypatch):
    monkeypatch.setenv(INPUT_CACHE_ENV, str(tmp_path))
    part = PARTS["part4_any_size"]
    first, first_out = shared_input(cfg, part, N, 7, np.int32)
    files = sorted(p.name for p in tmp_path.glob("*.npy"))
    assert len(files) == 2
    again, again_out = shared_input(cfg, part, N, 7, np.int32)
    assert isinstance(again, np.memmap)  # read back, not drawn
    alone = make_input(cfg, part, N, 7, np.int32)
    assert np.array_equal(again, alone) and np.array_equal(again_out, reference_output(part, alone))
    assert np.array_equal(first, alone) and np.array_equal(first_out, again_out)


def test_a_workers_writes_to_a_shared_input_stay_its_own(cfg, tmp_path, monkeypatch):
    monkeypatch.setenv(INPUT_CACHE_ENV, str(tmp_path))
    part = PARTS["part5_single_pass"]
    shared_input(cfg, part, N, 3, np.float32)
    mine, _ = shared_input(cfg, part, N, 3, np.float32)
    mine[:10] = -1
    theirs, _ = shared_input(cfg, part, N, 3, np.float32)
    assert np.array_equal(theirs, make_input(cfg, part, N, 3, np.float32))


def test_other_cases_get_other_files_and_a_cut_short_one_is_drawn_again(cfg, tmp_path, monkeypatch):
    monkeypatch.setenv(INPUT_CACHE_ENV, str(tmp_path))
    part = PARTS["part4_any_size"]
    shared_input(cfg, part, N, 1, np.int32)
    shared_input(cfg, part, N, 2, np.int32)  # another seed
    shared_input(cfg, PARTS["part5_single_pass"], N, 1, np.int32)  # another part
    assert len(list(tmp_path.glob("*.npy"))) == 6
    for p in tmp_path.glob("*.npy"):
        p.write_bytes(p.read_bytes()[:100])  # cut short
    x, out = shared_input(cfg, part, N, 1, np.int32)
    assert np.array_equal(x, make_input(cfg, part, N, 1, np.int32))


def test_workers_asking_at_once_draw_an_input_once(cfg, tmp_path, monkeypatch):
    """Sixteen workers of a class start at once: one draws each input, the others wait for its file
    (each drawing and writing its own gigabyte was seconds of every worker's time)."""
    import threading

    from grader.grading.case import inputs

    monkeypatch.setenv(INPUT_CACHE_ENV, str(tmp_path))
    drawn = []
    real = inputs.make_input

    def counted(*args, **kwargs):
        drawn.append(1)
        threading.Event().wait(0.2)  # a slow draw: the others arrive while it is under way
        return real(*args, **kwargs)
    monkeypatch.setattr(inputs, "make_input", counted)
    part = PARTS["part4_any_size"]
    got = []
    threads = [threading.Thread(target=lambda: got.append(shared_input(cfg, part, N, 9, np.int32))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(drawn) == 1 and len(got) == 4
    assert all(np.array_equal(x, got[0][0]) and np.array_equal(out, got[0][1]) for x, out in got)


def test_small_inputs_and_runs_without_the_folder_are_drawn_in_memory(cfg, tmp_path, monkeypatch):
    part = PARTS["part4_any_size"]
    monkeypatch.setenv(INPUT_CACHE_ENV, str(tmp_path))
    shared_input(cfg, part, INPUT_CACHE_MIN - 1, 1, np.int32)
    assert not list(tmp_path.iterdir())
    monkeypatch.delenv(INPUT_CACHE_ENV)
    x, _ = shared_input(cfg, part, N, 1, np.int32)
    assert not isinstance(x, np.memmap) and not list(tmp_path.iterdir())


def test_an_input_drawn_ahead_is_handed_to_each_of_its_takers_then_forgotten(cfg, monkeypatch):
    """A large case's input drawn ahead goes to the GPU's run and to the emulator's checks beside it
    (takers 2): the same arrays twice, drawn once; a timed size that is a case's size too is one draw
    whose takers add up; after the last taker, an input is drawn afresh (the same values)."""
    from grader.grading.case import inputs

    monkeypatch.delenv(INPUT_CACHE_ENV, raising=False)
    draws = []
    real = inputs.make_input
    monkeypatch.setattr(inputs, "make_input", lambda *a, **k: draws.append(a[2]) or real(*a, **k))
    part = PARTS["part4_any_size"]
    ahead = inputs.DrawAhead(cfg, part, [(1000, 7, np.int32, False), (2000, 7, np.int32, False),
                                         (1000, 7, np.int32, False)], [2, 1, 1])
    first = ahead.take(1000, 7, np.int32)
    for _ in range(2):  # the second taker, and the third (the same key listed again: added up)
        x, expected = ahead.take(1000, 7, np.int32)
        assert x is first[0] and expected is first[1]
    assert ahead.take(2000, 7, np.int32)[0].size == 2000
    assert sorted(draws) == [1000, 2000]
    fresh = ahead.take(1000, 7, np.int32)
    assert fresh[0] is not first[0] and np.array_equal(fresh[0], first[0]) and sorted(draws) == [1000, 1000, 2000]
