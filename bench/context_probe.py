"""How long a GPU machine takes to make CUDA contexts many at once (a batch's workers each make one).

For each variant named on the command line, 16 processes start at once, each importing PyCUDA,
making a context on device 0, copying 1 MiB to it and tearing it down; prints, per variant, the
wall time until all have exited, the latest a context was made, and the longest teardown:

- ``default``: ``make_context`` as the driver sets it up;
- ``conn1``: with ``CUDA_DEVICE_MAX_CONNECTIONS=1`` (one hardware queue; what the grader sets);
- ``primary``: the device's primary context (``retain_primary_context``) instead.

Usage on the GPU machine (PyCUDA's wheels installed): ``python3 bench/context_probe.py default conn1``.
Measured on an H100: docs/throughput.md.
"""
import multiprocessing as mp, os, sys, time

def one(q, t0, variant):
    if "conn1" in variant:
        os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    a = time.time()
    import numpy, pycuda.driver as cuda
    b = time.time()
    cuda.init(); dev = cuda.Device(0)
    if "primary" in variant:
        ctx = dev.retain_primary_context(); ctx.push()
    else:
        ctx = dev.make_context()
    d = time.time()
    import numpy as np
    x = cuda.mem_alloc(1 << 20); cuda.memcpy_htod(x, np.zeros(1 << 18, np.float32))
    e = time.time()
    q.put((round(b - a, 3), round(d - b, 3), round(e - d, 3), round(time.time() - t0, 3)))
    ctx.pop(); ctx.detach() if "primary" not in variant else None
    f = time.time()
    q.put(("close", round(f - e, 3)))

if __name__ == "__main__":
    mp.set_start_method("spawn")
    for variant in sys.argv[1:] or ["default", "conn1"]:
        for n in [16]:
            q = mp.Queue(); t0 = time.time()
            ps = [mp.Process(target=one, args=(q, t0, variant)) for _ in range(n)]
            [p.start() for p in ps]; [p.join() for p in ps]
            wall = time.time() - t0
            rows = []
            while not q.empty():
                rows.append(q.get())
            made = sorted(r for r in rows if r[0] != "close")
            closes = [r[1] for r in rows if r[0] == "close"]
            print(f"{variant:<16} {n} at once: all exited after {wall:.2f} s; context made after (max) {max(r[1] for r in made):.2f} s; "
                  f"close {max(closes) if closes else '-'} s max", flush=True)
