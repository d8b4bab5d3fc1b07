"""Does a long submission kernel change the reference's time beside it? (docs/timing.md)

Usage, on a GPU machine with PyCUDA, from the repository root::

    python3 bench/timing_probe.py [N ...]

For each size (default 2^20 and 2^24 int32) it times the Part 4 reference solution, with the
grader's plan and its timing loop (:meth:`PyCudaBackend.time_interleaved_ms`, the config's warm-up,
runs, L2 flush and clock warm-up), in these settings, and prints the median and the 10th and 90th percentiles:

- ``alone``: the reference only;
- ``beside serial``: interleaved with tests/kernels/part4_correct_serial_one_thread.cu (one thread
  scans the array: one SM busy for tens of ms), as :func:`grader.grading.case.timing.time_case` does;
- ``after host sleep``: alone, the host idle (``time.sleep``) for as long as the serial kernel ran
  before every run: the GPU idle and the CPU asleep;
- ``after serial, no flush``: interleaved as above without the L2 flush;
- ``beside reference``: interleaved with a second copy of itself (the control).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str]) -> int:
    from grader.assignment.config_load import load_config
    from grader.assignment.parts import DTYPES, PARTS, SOLUTIONS
    from grader.backends.pycuda import PyCudaBackend
    from grader.grading.case.inputs import make_input
    from grader.grading.case.timing import timed_plan
    from grader.grading.compile import compile_part

    sizes = [int(a) for a in argv] or [2**20, 2**24]
    cfg = load_config(ROOT / "config.yaml")
    key = "part4_any_size"
    spec, pc = PARTS[key], cfg.parts[key]
    backend = PyCudaBackend()
    print(backend.describe())
    with tempfile.TemporaryDirectory() as w1, tempfile.TemporaryDirectory() as w2:
        ref = compile_part(backend, spec, (SOLUTIONS / spec.filename).read_text(), pc=pc, dtype="int32",
                           workdir=Path(w1))
        serial = compile_part(backend, spec, (ROOT / "tests/kernels/part4_correct_serial_one_thread.cu").read_text(),
                              pc=pc, dtype="int32", workdir=Path(w2))
    t = cfg.timing
    for n in sizes:
        x = make_input(cfg, spec, n, cfg.seed, DTYPES["int32"])
        _, rplan, d_in, rbefore = timed_plan(backend, ref, part=spec, pc=pc, x=x, dtype=DTYPES["int32"])
        _, r2plan, _, r2before = timed_plan(backend, ref, part=spec, pc=pc, x=x, dtype=DTYPES["int32"], d_in=d_in)
        _, splan, _, sbefore = timed_plan(backend, serial, part=spec, pc=pc, x=x, dtype=DTYPES["int32"], d_in=d_in)
        t0 = time.perf_counter()
        splan.launch()
        backend.synchronize()
        serial_s = time.perf_counter() - t0
        refjob = ("ref", rplan.launch, rbefore)

        def sleeping():
            rbefore()
            time.sleep(serial_s)

        settings = {
            "alone": ([refjob], t.flush_bytes, 0),
            "beside serial": ([("serial", splan.launch, sbefore), refjob], t.flush_bytes, 1),
            "after host sleep": ([("ref", rplan.launch, sleeping)], t.flush_bytes, 0),
            "after serial, no flush": ([("serial", splan.launch, sbefore), refjob], 0, 1),
            "beside reference": ([("ref2", r2plan.launch, r2before), refjob], t.flush_bytes, 1),
        }
        print(f"n={n}: the serial kernel took {serial_s * 1e3:.2f} ms")
        for name, (jobs, flush, j) in settings.items():
            times = backend.time_interleaved_ms(jobs, warmup=t.warmup, runs=t.runs, flush_bytes=flush)[j]
            p10, p50, p90 = np.percentile(times, [10, 50, 90])
            even = np.median(times[0::2])
            odd = np.median(times[1::2])
            print(f"  {name:26s} median {p50:.4f} ms  p10 {p10:.4f}  p90 {p90:.4f}  "
                  f"(even runs {even:.4f}, odd runs {odd:.4f})", flush=True)
    backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
