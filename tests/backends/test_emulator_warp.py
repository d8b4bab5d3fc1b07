"""Warp-level primitives under independent thread scheduling (sm_70+), against what an NVIDIA H100
computed.

``tests/emulator_kernels/warp_semantics.cu`` fills one row of 32 words (one per lane) per test:
``__activemask()`` inside a branch, after a branch, in and after a loop of lane-dependent trip count,
in each arm of an if/else (also inside a loop), after a lane exited; shuffles across a ``width``
(a butterfly reading an earlier segment, offsets of 32 or more); votes, matches and reductions with
partial and disjoint masks. :data:`H100` is what the same code gave on an NVIDIA H100 80GB HBM3
(nvcc 13, ``-arch=sm_90``, one warp; compute-sanitizer's synccheck clean), so the emulator must
give exactly it, under every schedule, with and without checks (docs/emulator.md, "Warp-level
primitives").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from grader.backends.emulator import EmulatorBackend
from tests.backends.test_emulator import header_for, marker_line, spec
from tests.conftest import EMULATOR_KERNELS, emulator_cache

KERNELS = tuple(spec(name, ("in", "const int*", "ptr"), ("out", "int*", "ptr"), ("n", "int", "int"))
                for name in ("warp_semantics", "activemask_spin"))


def _row(text: str) -> list[int]:
    """A row as the H100 run printed it: 32 hex words, or `a*k` for k copies of a."""
    words: list[int] = []
    for w in text.split():
        value, _, count = w.partition("*")
        words += [int(value, 16)] * int(count or 1)
    assert len(words) == 32, text
    return words


#: Row -> the 32 lanes' words, as printed by the H100 run (hex).
H100 = {
    0: "ffff*16 0*16",
    1: "aaaa*16 0*16",
    2: "ffffffff*32",
    3: " ".join(["0 eeeeeeee 77777776 eeeeeeee"] * 8),
    4: "ffffffff*32",
    5: "3ff*10 fffffc00*22",
    6: "64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 71 72 73 " * 2,
    7: "64 65 66 67 68 69 6a 6b 65 64 67 66 69 68 6b 6a 74 75 76 77 78 79 7a 7b 75 74 77 76 79 78 7b 7a",
    8: " ".join(f"{100 + min(lane + 1, 31):x}" for lane in range(32)),
    9: " ".join(f"{100 + max(lane - 1, 0):x}" for lane in range(32)),
    10: "6b*8 73*8 7b*8 83*8",
    11: "67 68 69 6a 6b 69 6a 6b 6f 70 71 72 73 71 72 73 77 78 79 7a 7b 79 7a 7b 7f 80 81 82 83 81 82 83",
    12: "64 65 66 64 65 66 67 68 6c 6d 6e 6c 6d 6e 6f 70 74 75 76 74 75 76 77 78 7c 7d 7e 7c 7d 7e 7f 80",
    13: "ffff*16 ffff0000*16",
    14: "1*16 0*16",
    15: "1*16 0*16",
    16: "ff*8 ff00*8 ff0000*8 ff000000*8",
    17: "ffffffff*32",
    18: "1*32",
    19: "0*32",
    20: "0*32",
    21: "78*16 178*16",
    22: "fffffffb*32",
    23: "c*32",
    24: "40*32",
    25: "ff*32",
    26: "0*32",
    27: "fff0*16 0*16",
    28: "66*8 6e*8 76*8 7e*8",
    29: "aa*32",
    30: "65 66 67 68 69 6a 6b 6b 6d 6e 6f 70 71 72 73 73 75 76 77 78 79 7a 7b 7b 7d 7e 7f 80 81 82 83 83",
    31: "0 1 2 3 4 5 6 7 64 65 66 67 68 69 6a 6b c8 c9 ca cb cc cd ce cf 12c 12d 12e 12f 130 131 132 133",
    32: " ".join(f"{0x640 + lane % 16:x}" for lane in range(32)),
    33: " ".join(f"{11000 + lane // 3:x}" if lane % 3 == 0 else "0" for lane in range(32)),
    34: " ".join("64" if lane % 3 == 0 else "0" for lane in range(32)),
    35: " ".join("7ff" if lane % 3 == 0 else "0" for lane in range(32)),
    36: "a*8 b*8 a*8 0*8",
    37: "55555555 aaaaaaaa " * 16,
    38: "55555555 aaaaaaaa " * 16,
    39: "7fffffff*31 0",
}


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "checks"])
def warp_backend(request, tmp_path_factory) -> tuple[EmulatorBackend, object]:
    be = EmulatorBackend(workers=1, cache_dir=emulator_cache(tmp_path_factory.getbasetemp() / "emulator-cache"),
                         nvcc_check=False, checks=request.param)
    source = header_for(KERNELS, "warp_semantics.cu", 32) + (EMULATOR_KERNELS / "warp_semantics.cu").read_text()
    module = be.compile(source=source, filename="warp_semantics.cu", kernels=KERNELS,
                        workdir=tmp_path_factory.mktemp("warp"))
    yield be, module
    be.close()


@pytest.mark.parametrize("schedule", ["ascending", "descending", "random"])
def test_warp_primitives_give_what_an_h100_gave(warp_backend, schedule: str) -> None:
    be, module = warp_backend
    be.set_schedule(schedule, 7)
    inp = be.alloc(32, np.dtype(np.int32))
    be.to_device(np.zeros(32, np.int32), inp)
    out = be.alloc(65 * 32, np.dtype(np.int32))
    be.to_device(np.zeros(65 * 32, np.int32), out)
    be.launch(module, "warp_semantics", grid=(1, 1, 1), block=(32, 1, 1), shared_bytes=0, args=[inp, out, 0])
    got = be.to_host(out).view(np.uint32).reshape(65, 32)
    wrong = {row: [f"{x:x}" for x in got[row]] for row, want in H100.items() if list(got[row]) != _row(want)}
    assert not wrong, f"rows that differ from the H100's: {wrong}"
    assert be.take_warnings() == []


def test_lanes_at_activemask_go_on_without_lanes_that_spin_for_them(warp_backend) -> None:
    """Forward progress (independent thread scheduling): a warning, not a deadlock."""
    be, module = warp_backend
    be.set_schedule("ascending", 0)
    inp = be.alloc(32, np.dtype(np.int32))
    out = be.alloc(64, np.dtype(np.int32))
    be.to_device(np.zeros(64, np.int32), out)
    be.launch(module, "activemask_spin", grid=(1, 1, 1), block=(32, 1, 1), shared_bytes=0, args=[inp, out, 0])
    got = be.to_host(out)
    assert got[0] == 1 and got[1:32].tolist() == [1] * 31
    (w,) = be.take_warnings()
    assert w.kind == "warp-convergence"
    assert (w.line, w.other_line) == (marker_line("warp_semantics.cu", "spin_mask"),
                                      marker_line("warp_semantics.cu", "spin_poll"))
    assert "returns 0x00000001" in w.message and "lanes 0xfffffffe of its warp still spin" in w.message
