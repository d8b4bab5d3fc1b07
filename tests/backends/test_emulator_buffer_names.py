"""Out-of-bounds accesses name the right buffer: the emulator's arena leaves a wide unlabelled gap
after every device allocation, and the checks call an address outside every allocation an overrun
(or underrun) of the nearest buffer, so reading past the end of ``in`` is not reported as an access
to ``out``'s guard zone. Also: a launch error's count of further findings agrees with its list."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from grader.backends.emulator import EmulatorBackend
from grader.backends.emulator.executor import GAP_BYTES, Arena
from grader.core.errors import KernelError
from grader.assignment.parts import PARTS, part_header
from grader.assignment.plans import GUARD, Run
from tests.conftest import emulator_cache

PART = PARTS["part1_naive"]
FILENAME = "part1_naive.cu"
BLOCK = 512
INT = np.dtype(np.int32)

KERNELS = {
    # in[tid + BLOCK_SIZE]: past the end of in, for every n < BLOCK_SIZE + GUARD inside its guard zone
    "read_past_in": "    if (tid < n) out[tid] = in[tid + BLOCK_SIZE];  // line 3\n",
    "write_before_out": "    if (tid < n) out[tid - 1] = in[tid];  // line 3\n",
    "write_far_before_out": "    if (tid < n) out[tid - 300] = in[tid];  // line 3: past out's guard zone\n",
}


def body(statement: str) -> str:
    return ("__global__ void naive_scan(const scan_t* in, scan_t* out, int n) {\n"
            "    int tid = threadIdx.x;\n" + statement + "}\n")


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> EmulatorBackend:
    be = EmulatorBackend(workers=1, cache_dir=emulator_cache(tmp_path_factory.mktemp("emulator-cache")), nvcc_check=False,
                         checks=True)
    yield be
    be.close()


@pytest.fixture(scope="module")
def modules(checked: EmulatorBackend, tmp_path_factory: pytest.TempPathFactory) -> dict:
    header = part_header(PART, block_size=BLOCK, dtype=INT)
    return {name: checked.compile(source=header + body(statement), filename=FILENAME, kernels=PART.kernels,
                                  workdir=tmp_path_factory.mktemp(name))
            for name, statement in KERNELS.items()}


def grade_once(be: EmulatorBackend, module, n: int) -> KernelError:
    """Allocate in and out as the grader does (guarded, labelled, in this order) and launch; the error."""
    run = Run(be, module, INT)
    d_in = run.buffer("in", n, np.arange(n, dtype=INT), output=False)
    out = run.buffer("out", n)
    with pytest.raises(KernelError) as info:
        be.launch(module, "naive_scan", grid=1, block=BLOCK, shared_bytes=0, args=[d_in.inner, out.inner, n])
    return info.value


@pytest.mark.parametrize("n", [1, 33, 255, 257])
def test_a_read_past_the_end_of_in_names_in(checked, modules, n: int) -> None:
    err = grade_once(checked, modules["read_past_in"], n)
    first = err.findings[0]
    assert err.kind == "out-of-bounds" and first.line == 3, str(err)
    expected = (f"out-of-bounds global memory read of in[{BLOCK}] ({BLOCK - n + 1} past the end of in, "
                f"{n} element{'s' if n > 1 else ''}) at {FILENAME}:3")
    assert first.message == expected, first.message
    assert "out[" not in str(err) and "device allocation" not in str(err), str(err)


@pytest.mark.parametrize("n", [1, 100])
def test_writes_before_out_name_out(checked, modules, n: int) -> None:
    err = grade_once(checked, modules["write_before_out"], n)
    assert err.findings[0].message.startswith(
        f"out-of-bounds global memory write of out[-1] (1 before the start of out, {n} element"), str(err)
    # Beyond out's own guard zone, in the gap below it: still nearer out than in.
    err = grade_once(checked, modules["write_far_before_out"], n)
    assert err.findings[0].message.startswith(
        f"out-of-bounds global memory write of out[-300] (300 before the start of out, {n} element"), str(err)


def test_unlabelled_buffers_are_named_by_their_allocation(checked, tmp_path) -> None:
    """An allocation without a label (no guard zones): an overrun is counted in bytes past its end."""
    module = checked.compile(source=part_header(PART, block_size=BLOCK, dtype=INT) + body(KERNELS["read_past_in"]),
                             filename=FILENAME, kernels=PART.kernels, workdir=tmp_path)
    d_in, out = checked.alloc(40, INT), checked.alloc(40, INT)
    checked.to_device(np.zeros(40, INT), d_in)
    with pytest.raises(KernelError) as info:
        checked.launch(module, "naive_scan", grid=1, block=BLOCK, shared_bytes=0, args=[d_in, out, 40])
    message = info.value.findings[0].message
    assert f"{(BLOCK - 40 + 1) * 4} bytes past the end of a 160-byte device allocation" in message, message


def test_the_arena_leaves_a_wide_gap_and_keeps_its_size_contract() -> None:
    arena = Arena(2**30)
    a, b = arena.alloc(100), arena.alloc(100)
    assert b - a >= GAP_BYTES
    assert arena.committed <= 2 * 2**20 + GAP_BYTES  # the gaps' pages are address space only
    arena.release(a)
    arena.release(b)
    # Many small buffers: the gaps shrink when their address space runs out; no MemoryError.
    small = [arena.alloc(1000) for _ in range(1000)]
    assert len(set(small)) == 1000
    for address in small:
        arena.release(address)
    # The size stays the most live at once, gaps not counted.
    pieces = [arena.alloc(2**24 - 256) for _ in range(64)]  # each counts 2**24: its data and 256 bytes
    with pytest.raises(MemoryError, match="device memory is full"):
        arena.alloc(1)
    for address in pieces:
        arena.release(address)
    assert arena.live() == [] and arena.committed == 0


# -- the count of further findings agrees with the list -------------------------------------------------

def racy(lines: int) -> str:
    """Every thread writes s[k] on line k + 3, with no barrier: one race per line."""
    return ("__global__ void naive_scan(const scan_t* in, scan_t* out, int n) {\n"
            f"    __shared__ int s[{lines}];\n"
            + "".join(f"    s[{k}] = threadIdx.x;\n" for k in range(lines))
            + "    __syncthreads();\n    if (threadIdx.x == 0) out[0] = s[0] + s[1] + s[2];\n}\n")


@pytest.mark.parametrize("lines", [3, 12])
def test_the_count_of_more_findings_agrees_with_the_list(checked, tmp_path, lines: int) -> None:
    module = checked.compile(source=part_header(PART, block_size=64, dtype=INT) + racy(lines), filename=FILENAME,
                             kernels=PART.kernels, workdir=tmp_path)
    d_in, out = checked.alloc(64, INT), checked.alloc(64, INT)
    checked.to_device(np.zeros(64, INT), d_in)
    with pytest.raises(KernelError) as info:
        checked.launch(module, "naive_scan", grid=1, block=64, shared_bytes=0, args=[d_in, out, 64])
    err = info.value
    text = str(err).splitlines()
    assert len(err.findings) >= lines and len(text) == 2, str(err)
    m = re.fullmatch(r"(\d+) more distinct findings?: (.*)", text[1])
    assert m, text[1]
    count, items = int(m.group(1)), m.group(2).split("; ")
    assert count == len(err.findings) - 1, str(err)
    more = re.fullmatch(r"and (\d+) more", items[-1])
    listed = items[:-1] if more else items
    assert all(re.fullmatch(rf"race at {FILENAME}:\d+", item) for item in listed), items
    assert len(listed) + (int(more.group(1)) if more else 0) == count, text[1]
    assert [f"{f.kind} at {f.file}:{f.line}" for f in err.findings[1:1 + len(listed)]] == listed
    if lines == 12:
        assert more and len(listed) == 8, text[1]
