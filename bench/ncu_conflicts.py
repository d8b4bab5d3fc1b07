"""Shared-memory wavefronts and bank conflicts: the emulator's count against Nsight Compute's.

The emulator counts, per warp-wide shared-memory request, the wavefronts the request needs (32 banks
of 4 bytes; lanes reading the same word are a broadcast); see docs/emulator.md, "What the profile
counts". Nsight Compute measures the same on a GPU with the counters
``l1tex__data_pipe_lsu_wavefronts_mem_shared`` (every shared-memory wavefront) and
``l1tex__data_bank_conflicts_pipe_lsu_mem_shared`` (the extra wavefronts bank conflicts cost).

Two modes, for the reference solutions of Parts 2 and 3 (one block, n elements, int32):

- ``python bench/ncu_conflicts.py emulator [--n 1024]`` prints the emulator's counts for every
  block of the launch (any machine; needs a C++ compiler);
- ``python bench/ncu_conflicts.py launch [--n 1024]`` compiles the same files with PyCUDA and
  launches each part once, for Nsight Compute to measure, e.g.::

      ncu --metrics l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,\\
      l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum -k regex:blelloch \\
          python bench/ncu_conflicts.py launch

Both use the grader's own part headers, inputs and launch plans (``grader.grading.case.run.run_case``),
with the shipped config.yaml. Run with scangrade installed (``pip install -e .``).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from grader.backends import create_backend
from grader.assignment.config import load_config
from grader.grading.case.cases import CaseSpec
from grader.grading.case.run import run_case
from grader.assignment.parts import DTYPES, PARTS, part_header
from grader.grading.profiling import profile_run

ROOT = Path(__file__).resolve().parent.parent
PARTS_COMPARED = ("part2_blelloch", "part3_conflict_free")


def _compile(backend, cfg, key: str, workdir: Path):
    spec, pc = PARTS[key], cfg.parts[key]
    header = part_header(spec, block_size=pc.block_size, dtype=DTYPES["int32"], items_per_thread=pc.items_per_thread)
    source = (ROOT / "reference" / "solutions" / spec.filename).read_text()
    folder = workdir / key
    folder.mkdir()
    return backend.compile(source=header + source, filename=spec.filename, kernels=spec.kernels, workdir=folder)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=("emulator", "launch"))
    ap.add_argument("--n", type=int, default=1024, help="elements (one block: at most 2 * BLOCK_SIZE)")
    ap.add_argument("--config", default=str(ROOT / "config.yaml"))
    args = ap.parse_args()
    cfg = load_config(args.config)
    backend = create_backend("emulator" if args.mode == "emulator" else "pycuda")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            print(f"{'part':<22} {'n':>6} {'shared wavefronts':>18} {'bank-conflict wavefronts':>25}")
            for key in PARTS_COMPARED:
                module = _compile(backend, cfg, key, Path(tmp))
                if args.mode == "emulator":
                    prof, wrong = profile_run(backend, module, cfg=cfg, part=PARTS[key], n=args.n,
                                              dtype_name="int32", blocks=0)
                    print(f"{key:<22} {args.n:>6} {prof.wavefronts:>18} {prof.conflict_wavefronts:>25}"
                          + (f"  (wrong output: {wrong})" if wrong else ""))
                else:
                    case = CaseSpec(f"n={args.n} int32", args.n, "int32", cfg.seed)
                    result = run_case(backend, module, cfg=cfg, part=PARTS[key], case=case)
                    print(f"{key:<22} {args.n:>6} launched once: {result.status} (counts: see Nsight Compute)")
    finally:
        backend.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
