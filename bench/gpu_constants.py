"""The constants of the prediction model (docs/prediction.md), measured on the GPU this runs on.

Each is a microbenchmark of one mechanism, timed with CUDA events (median of several runs, the L2
emptied by a 512 MiB write before every copy, the clocks warmed up before every run as the grader's
timing warms them: docs/timing.md): nothing here runs a scan, so the model's accuracy,
measured against the graded kernels (bench/prediction.py), is not fitted to them.

- ``launch_us``: one launch of an empty kernel of one block, back to back in one stream (the time
  a dependent launch adds);
- ``queued_launch_us``: what each further launch of an empty kernel adds where the launches are
  queued behind a 512 MiB write (as the grader's timed window queues a plan's launches behind the
  L2 flush): the slope from 1 to 9 launches;
- ``block_ns``: the time each further block of 256 threads adds to an empty launch, per SM
  (block dispatch);
- ``copy``: a device-to-device copy's time at several byte counts (the bandwidth a kernel of the
  same bytes can reach at that size, its ramp included);
- ``barrier_ns``: one round of a block of 512 threads of a shared-memory step (each thread reads
  its neighbour's word and writes its own) and ``__syncthreads()``;
- ``shared_step_ns``: one dependent shared-memory load of one thread (a pointer chase);
- ``l2_step_ns``: one dependent global load that hits the L2 (a pointer chase in 8 MiB, one
  sector a step): a look-back's read of a status word;
- ``dram_step_ns``: one dependent global load from DRAM (a chase over 1 GiB);
- ``sector_gbps``: the stored 32-byte sectors a second (GB/s of sectors) of a copy whose lanes are
  176 bytes apart (every request 32 sectors; the loads' lines are reused from L1, the stores are
  not): the rate at which stores that touch more sectors than their bytes fill are served;
- ``thread_step_ns``: half of one element of a one-thread exclusive scan ``x = in[i]; out[i] = s;
  s += x`` (2^20 elements, a load and a store, the load first: the order a sequential scan needs to
  be right in place): how fast one thread walks memory alone (the same loop with the store first,
  which no in-place scan can use, is ``raw.store_first_element_ns``);
- ``lookback_tile_ns``: one tile of a chain of 2^15 tiles (blocks of 128 threads, 22 KiB of shared
  memory, as Part 5's), each loading and storing Part 5's tile of 5,632 words, whose one lane looks
  back one status word at a time (the same chain with no data, ``raw.empty_lookback_tile_ns``,
  runs at block dispatch's pace: its predecessors are done before it looks).

It prints the GPU's entry of ``grader/core/gpu_models.json`` (the model's keys, and the raw
figures under ``raw``).

Usage on the GPU machine (PyCUDA installed): ``python3 bench/gpu_constants.py OUT.json``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

SOURCE = r"""
extern "C" {
__global__ void empty_kernel() {}

__global__ void barrier_rounds(int rounds, int *out) {
    __shared__ int s[1024];
    int t = threadIdx.x;
    s[t] = t;
    __syncthreads();
    int v = 0;
    for (int r = 0; r < rounds; ++r) {
        v += s[(t + 1) % blockDim.x];
        __syncthreads();
        s[t] = v;
        __syncthreads();
    }
    if (v == -1) out[0] = v;
}

__global__ void shared_chase(int steps, int *out) {
    __shared__ int s[1024];
    for (int i = threadIdx.x; i < 1024; i += blockDim.x) s[i] = (i * 97 + 13) % 1024;
    __syncthreads();
    if (threadIdx.x != 0) return;
    int p = 0;
    for (int i = 0; i < steps; ++i) p = s[p];
    out[0] = p;
}

__global__ void global_chase(const int *next, int steps, int *out) {
    int p = 0;
    for (int i = 0; i < steps; ++i) p = next[p];
    out[0] = p;
}

// Tile t's serial decoupled look-back, by one lane: its aggregate (1) published (flag 1), then one
// predecessor's status word at a time until an inclusive prefix (flag 2), then its own published.
__device__ void serial_lookback(unsigned long long *status, unsigned int t) {
    volatile unsigned long long *st = status;
    if (t == 0) { st[0] = (2ull << 32) | 1u; return; }
    st[t] = (1ull << 32) | 1u;
    unsigned int sum = 0;
    for (int p = int(t) - 1;; --p) {
        unsigned long long w;
        do { w = st[p]; } while ((w >> 32) == 0);
        sum += (unsigned int)w;
        if ((w >> 32) == 2) break;
    }
    st[t] = (2ull << 32) | (sum + 1u);
}

// A chain of tiles with a serial decoupled look-back and no data: a ticket, the aggregate
// published (flag 1), one lane walking back one status word at a time until an inclusive prefix
// (flag 2), the inclusive prefix published.
__global__ void lookback_chain(unsigned long long *status, unsigned int *counter) {
    __shared__ unsigned int ticket;
    if (threadIdx.x == 0) ticket = atomicAdd(counter, 1u);
    __syncthreads();
    if (threadIdx.x == 0) serial_lookback(status, ticket);
}

// The same chain over tiles that carry Part 5's traffic: 128 threads a tile each load and store
// 44 words (5,632 a tile), then the one-lane look-back; the aggregate is the tile's count.
__global__ void lookback_tiles(const int *in, int *out, unsigned long long *status, unsigned int *counter) {
    __shared__ unsigned int ticket;
    if (threadIdx.x == 0) ticket = atomicAdd(counter, 1u);
    __syncthreads();
    unsigned int t = ticket;
    size_t base = size_t(t) * 5632;
    int v[44];
    for (int i = 0; i < 44; ++i) v[i] = in[base + i * 128 + threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) serial_lookback(status, t);
    __syncthreads();
    for (int i = 0; i < 44; ++i) out[base + i * 128 + threadIdx.x] = v[i] + 1;
}

// A copy whose lanes are 176 bytes apart (each thread its own 44 consecutive words, loaded into
// registers, then stored, as a tile loaded "by thread"): every warp request touches 32 sectors. The
// loads' lines come back to L1 for the next 43 requests; the stores go to L2 sector by sector.
__global__ void strided_copy(const int *__restrict__ in, int *__restrict__ out) {
    size_t base = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) * 44;
    int v[44];
    for (int i = 0; i < 44; ++i) v[i] = in[base + i];
    for (int i = 0; i < 44; ++i) out[base + i] = v[i] + 1;
}

__global__ void one_thread_scan(const int *in, int *out, int n) {
    int s = 0;
    for (int i = 0; i < n; ++i) { int x = in[i]; out[i] = s; s += x; }
}

__global__ void one_thread_store_first(const int *in, int *out, int n) {
    int s = 0;
    for (int i = 0; i < n; ++i) { out[i] = s; s += in[i]; }
}
}
"""


def _median_ms(drv, fn, *, runs: int, before=None) -> float:
    """The median of ``runs`` timed calls of ``fn``, each after ``before()`` and the grader's clock
    warm-up (:class:`grader.backends.base.ClockWarmup`: every SM busy for CLOCK_WARMUP_MS), so that
    a constant is measured at the clocks a graded kernel is timed at."""
    times = []
    for _ in range(runs):
        if before is not None:
            before()
        _hold_clocks(drv)
        a, b = drv.Event(), drv.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(b.time_since(a))
    return statistics.median(times)


#: What :func:`grader.backends.pycuda.ptx.hold_clocks` keeps its loaded kernel in (a grading's Scratch there).
_HOLD = SimpleNamespace(hold=None)


def _hold_clocks(drv) -> None:
    """Queue the grader's clock warm-up (:func:`grader.backends.pycuda.ptx.hold_clocks`)."""
    from grader.backends.base import CLOCK_WARMUP_MS
    from grader.backends.pycuda.ptx import hold_clocks
    hold_clocks(drv, drv.Context.get_device(), _HOLD, CLOCK_WARMUP_MS)


def measure() -> dict:
    """Every constant, with the GPU's name and attributes; a dict ready for JSON."""
    import numpy as np
    import pycuda.autoinit  # noqa: F401  (creates the context)
    import pycuda.driver as drv
    from pycuda.compiler import SourceModule

    dev = pycuda.autoinit.device
    mod = SourceModule(SOURCE, no_extern_c=True)
    empty = mod.get_function("empty_kernel")
    sms = dev.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
    out = drv.mem_alloc(64)
    flush = drv.mem_alloc(512 << 20)

    def flush_l2() -> None:
        drv.memset_d32(flush, 0, (512 << 20) // 4)

    k = 2000
    launch_ms = _median_ms(drv, lambda: [empty(block=(32, 1, 1), grid=(1, 1)) for _ in range(k)], runs=5) / k
    words = (512 << 20) // 4

    def queued_ms(k: int) -> float:
        return _median_ms(drv, lambda: [empty(block=(32, 1, 1), grid=(1, 1)) for _ in range(k)], runs=15,
                          before=lambda: drv.memset_d32_async(flush, 0, words))
    queued_launch_us = (queued_ms(9) - queued_ms(1)) * 1e3 / 8
    blocks = 1 << 20
    big_ms = _median_ms(drv, lambda: empty(block=(256, 1, 1), grid=(blocks, 1)), runs=10)
    block_ns = max(0.0, (big_ms - launch_ms) * 1e6 / (blocks / sms))

    copy = []
    for nbytes in (1 << 13, 1 << 17, 1 << 20, 1 << 22, 1 << 23, 1 << 25, 1 << 27, 1 << 29, 1 << 31):
        src, dst = drv.mem_alloc(nbytes // 2), drv.mem_alloc(nbytes // 2)
        ms = _median_ms(drv, lambda: drv.memcpy_dtod(dst, src, nbytes // 2), runs=15, before=flush_l2)
        copy.append([nbytes, round(ms, 6)])
        src.free()
        dst.free()

    rounds = 4096
    barrier = mod.get_function("barrier_rounds")
    bar_ms = _median_ms(drv, lambda: barrier(np.int32(rounds), out, block=(512, 1, 1), grid=(1, 1)), runs=10)
    barrier_ns = (bar_ms - launch_ms) * 1e6 / (2 * rounds)

    steps = 1 << 16
    sh = mod.get_function("shared_chase")
    sh_ms = _median_ms(drv, lambda: sh(np.int32(steps), out, block=(256, 1, 1), grid=(1, 1)), runs=10)
    shared_step_ns = (sh_ms - launch_ms) * 1e6 / steps

    chase = mod.get_function("global_chase")
    rng = np.random.default_rng(1)

    def chase_ns(nbytes: int, steps: int) -> float:
        count = nbytes // 4
        stride = 32 // 4  # one step a sector, in a random cycle over the sectors
        order = rng.permutation(count // stride) * stride
        nxt = np.zeros(count, np.int32)
        nxt[order] = np.roll(order, -1)
        d = drv.to_device(nxt)
        ms = _median_ms(drv, lambda: chase(d, np.int32(steps), out, block=(1, 1, 1), grid=(1, 1)), runs=5,
                        before=flush_l2)
        d.free()
        return (ms - launch_ms) * 1e6 / steps

    global_step_ns = chase_ns(8 << 20, 1 << 14)
    dram_step_ns = chase_ns(1 << 30, 1 << 13)

    n = 1 << 20
    d_in = drv.to_device(np.ones(n, np.int32))
    d_out = drv.mem_alloc(4 * n)

    def element_ns(kernel: str) -> float:
        one = mod.get_function(kernel)
        one_ms = _median_ms(drv, lambda: one(d_in, d_out, np.int32(n), block=(1, 1, 1), grid=(1, 1)), runs=3,
                            before=flush_l2)
        return (one_ms - launch_ms) * 1e6 / n
    thread_element_ns = element_ns("one_thread_scan")
    store_first_ns = element_ns("one_thread_store_first")

    tiles = 1 << 16
    status = drv.mem_alloc(8 * tiles)
    counter = drv.mem_alloc(4)
    look = mod.get_function("lookback_chain")

    def zero() -> None:
        drv.memset_d32(status, 0, 2 * tiles)
        drv.memset_d32(counter, 0, 1)
    look_ms = _median_ms(drv, lambda: look(status, counter, block=(128, 1, 1), grid=(tiles, 1), shared=22528),
                         runs=10, before=zero)
    empty_tile_ns = look_ms * 1e6 / tiles

    tiles = 1 << 15
    d_in, d_out = drv.mem_alloc(4 * 5632 * tiles), drv.mem_alloc(4 * 5632 * tiles)
    status2 = drv.mem_alloc(8 * tiles)
    loaded = mod.get_function("lookback_tiles")

    def zero2() -> None:
        flush_l2()
        drv.memset_d32(status2, 0, 2 * tiles)
        drv.memset_d32(counter, 0, 1)
    loaded_ms = _median_ms(drv, lambda: loaded(d_in, d_out, status2, counter, block=(128, 1, 1), grid=(tiles, 1),
                                                shared=22528), runs=10, before=zero2)
    lookback_tile_ns = loaded_ms * 1e6 / tiles

    strided = mod.get_function("strided_copy")
    words = 5632 * tiles  # d_in and d_out hold this many words
    s_ms = _median_ms(drv, lambda: strided(d_in, d_out, block=(128, 1, 1), grid=(words // (128 * 44), 1)), runs=10,
                      before=flush_l2)
    sector_bytes = (words // 32) * 32 * 32  # the stores: words / 32 requests, 32 sectors of 32 bytes each
    sector_gbps = sector_bytes / (s_ms * 1e-3) / 1e9

    smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    return {
        "gpu": dev.name(),
        "measured": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "driver": smi.splitlines()[0] if smi else "",
        "cuda": ".".join(map(str, drv.get_version())),
        "command": "python3 bench/gpu_constants.py",
        "sm_count": sms,
        "max_threads_per_sm": dev.get_attribute(drv.device_attribute.MAX_THREADS_PER_MULTIPROCESSOR),
        "max_blocks_per_sm": dev.get_attribute(drv.device_attribute.MAX_BLOCKS_PER_MULTIPROCESSOR),
        "shared_bytes_per_sm": dev.get_attribute(drv.device_attribute.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
        "copy": copy,
        "shared_step_ns": round(shared_step_ns, 2),
        "thread_step_ns": round(thread_element_ns / 2, 2),
        "barrier_ns": round(barrier_ns, 2),
        "lookback_tile_ns": round(lookback_tile_ns, 2),
        "l2_step_ns": round(global_step_ns, 2),
        "sector_gbps": round(sector_gbps, 1),
        "queued_launch_us": round(queued_launch_us, 3),
        "accuracy": "",
        "raw": {"launch_us": launch_ms * 1e3, "block_ns": block_ns, "global_step_ns": global_step_ns,
                "dram_step_ns": dram_step_ns, "thread_element_ns": thread_element_ns,
                "store_first_element_ns": store_first_ns,
                "empty_lookback_tile_ns": empty_tile_ns},
    }


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    result = measure()
    text = json.dumps(result, indent=2)
    print(text)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(text + "\n")
