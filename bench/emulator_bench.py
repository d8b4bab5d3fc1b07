"""Benchmark of the CPU emulator: a hierarchical exclusive scan, as part 4 of the assignment runs it.

Per tile of 1024 int32 elements a block of 512 threads runs a Blelloch scan in shared memory
(``scan_tiles``, 2 * log2(1024) + 1 = 21 barriers a block) and writes the tile's sum; the tile sums
are scanned the same way, recursively; then ``add_tile_offsets`` adds each tile's offset. Every
result is checked against numpy. Compile time is measured separately and excluded from the scan
times.

Usage (with scangrade installed, ``pip install -e .``): ``python bench/emulator_bench.py [--repeat 5] [--workers 1 2] [--sizes 1048576 16000000]
[--checks off|on|both]`` (checking is timed for sizes up to 2^22 only).
Prints a table of medians: wall-clock seconds, and the process's CPU seconds over the same runs
(with 2 workers on 2 idle cores, CPU ~ 2 x wall; much less means other processes took the cores:
the 1-minute load average before the runs is printed for that reason).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from grader.backends.emulator import EmulatorBackend
from grader.core.kernels import KernelSpec, Param

BLOCK = 512
TILE = 2 * BLOCK

KERNELS = (
    KernelSpec("scan_tiles", (Param("in", "const scan_t*", "ptr"), Param("out", "scan_t*", "ptr"),
                              Param("tile_sums", "scan_t*", "ptr"), Param("n", "int", "int"))),
    KernelSpec("add_tile_offsets", (Param("out", "scan_t*", "ptr"), Param("tile_offsets", "const scan_t*", "ptr"),
                                    Param("n", "int", "int"))),
)

SOURCE = r"""
// Blelloch (work-efficient) exclusive scan of one tile of 2*BLOCK_SIZE elements per block.
__global__ void scan_tiles(const scan_t* in, scan_t* out, scan_t* tile_sums, int n) {
    extern __shared__ scan_t temp[];
    const int t = threadIdx.x;
    const int base = blockIdx.x * 2 * BLOCK_SIZE;
    temp[2 * t] = base + 2 * t < n ? in[base + 2 * t] : 0;
    temp[2 * t + 1] = base + 2 * t + 1 < n ? in[base + 2 * t + 1] : 0;
    int offset = 1;
    for (int d = BLOCK_SIZE; d > 0; d >>= 1) {
        __syncthreads();
        if (t < d) {
            int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1;
            temp[bi] += temp[ai];
        }
        offset <<= 1;
    }
    if (t == 0) {
        tile_sums[blockIdx.x] = temp[2 * BLOCK_SIZE - 1];
        temp[2 * BLOCK_SIZE - 1] = 0;
    }
    for (int d = 1; d < 2 * BLOCK_SIZE; d <<= 1) {
        offset >>= 1;
        __syncthreads();
        if (t < d) {
            int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1;
            scan_t x = temp[ai];
            temp[ai] = temp[bi];
            temp[bi] += x;
        }
    }
    __syncthreads();
    if (base + 2 * t < n) out[base + 2 * t] = temp[2 * t];
    if (base + 2 * t + 1 < n) out[base + 2 * t + 1] = temp[2 * t + 1];
}

__global__ void add_tile_offsets(scan_t* out, const scan_t* tile_offsets, int n) {
    const int base = blockIdx.x * 2 * BLOCK_SIZE;
    const scan_t add = tile_offsets[blockIdx.x];
    for (int i = threadIdx.x; i < 2 * BLOCK_SIZE; i += BLOCK_SIZE)
        if (base + i < n) out[base + i] += add;
}
"""


def header(block_size: int) -> str:
    lines = ['#line 1 "<scangrade part header>"', f"#define BLOCK_SIZE {block_size}", "typedef int scan_t;",
             'extern "C" {', *(k.declaration() + ";" for k in KERNELS), "}", '#line 1 "bench_scan.cu"']
    return "\n".join(lines) + "\n"


def hierarchical_scan(be: EmulatorBackend, module, src, out, n: int) -> None:
    """Exclusive scan of ``src`` (n int32) into ``out``, recursing on the tile sums."""
    tiles = -(-n // TILE)
    sums = be.alloc(tiles, np.int32)
    be.launch(module, "scan_tiles", grid=tiles, block=BLOCK, shared_bytes=TILE * 4, args=[src, out, sums, n])
    if tiles > 1:
        offsets = be.alloc(tiles, np.int32)
        hierarchical_scan(be, module, sums, offsets, tiles)
        be.launch(module, "add_tile_offsets", grid=tiles, block=BLOCK, shared_bytes=0, args=[out, offsets, n])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per configuration (median reported)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1 << 20, 16_000_000])
    ap.add_argument("--cache-dir", type=Path, default=None)
    ap.add_argument("--checks", choices=("off", "on", "both"), default="both",
                    help="checking mode (races, bounds...) for the timed runs; 'both' times each size both ways")
    args = ap.parse_args(argv)

    rng = np.random.default_rng(20240611)
    rows: list[tuple[str, str, str, str, str]] = []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="scangrade-bench-") as tmp:
        be = EmulatorBackend(workers=1, cache_dir=args.cache_dir, nvcc_check=False)
        be.toolchain.runtime_object()  # build (or find) the cached runtime before timing compiles
        t0 = time.perf_counter()
        module = be.compile(source=header(BLOCK) + SOURCE, filename="bench_scan.cu", kernels=KERNELS,
                            workdir=Path(tmp))
        compile_s = time.perf_counter() - t0
        rows.append(("compile (runtime cached)", "-", "-", f"{compile_s:.3f}", "-"))
        for n in args.sizes:
            x = rng.integers(-1000, 1000, n, dtype=np.int32)
            expected = np.zeros(n, dtype=np.int32)
            np.cumsum(x[:-1], out=expected[1:])
            src, out = be.alloc(n, np.int32), be.alloc(n, np.int32)
            be.to_device(x, src)
            modes = {"off": [False], "on": [True], "both": [False, True]}[args.checks]
            for workers, checks in [(w, c) for c in modes for w in args.workers]:
                if checks and n > (1 << 22):
                    continue  # checking is meant for small sizes
                be.workers = workers
                be.checks = checks
                hierarchical_scan(be, module, src, out, n)  # warm-up: fiber pools, page faults
                times, cpu = [], []
                for _ in range(args.repeat):
                    t0, c0 = time.perf_counter(), time.process_time()
                    hierarchical_scan(be, module, src, out, n)
                    times.append(time.perf_counter() - t0)
                    cpu.append(time.process_time() - c0)
                ok = np.array_equal(be.to_host(out), expected)
                rows.append((f"hierarchical exclusive scan n={n:,}{' (checks)' if checks else ''}", str(workers),
                             "ok" if ok else "WRONG",
                             f"{statistics.median(times):.3f}", f"{statistics.median(cpu):.3f}"))
        be.close()

    print(f"scangrade emulator benchmark  ({os.cpu_count()} CPUs, load average {load_before:.2f} before the runs, "
          f"{be.toolchain.version_line}, block {BLOCK}, tile {TILE}, median of {args.repeat})")
    head = ("what", "workers", "check", "median s", "cpu s")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    print("  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(head, widths))))
    for r in rows:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return 0 if all(r[2] != "WRONG" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
