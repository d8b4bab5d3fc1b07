"""The prediction model's accuracy (docs/prediction.md): predicted against measured GPU times.

Two steps, on two machines:

``python3 bench/prediction.py measure OUT`` (the GPU machine, PyCUDA installed): the model's
constants (bench/gpu_constants.py, into ``OUT/constants.json``), then ``scangrade batch --backend
pycuda`` of a class holding the reference solutions and every timed-part kernel of tests/kernels
(one submission each, the kernel as its part's file), results under ``OUT/results/<name>.json``.

``python3 bench/prediction.py table OUT`` (any machine): the emulator's prediction for every timed
case that passed on the GPU, with the constants of ``OUT/constants.json``, against the GPU's median
and its ratio to the reference; prints the table and the accuracy against issue 52's targets.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMED_PREFIXES = ("part3_", "part4_", "part5_")


def _class(folder: Path) -> list[str]:
    """A class in ``folder``: ``reference`` (every reference solution) and one submission per
    timed-part kernel of tests/kernels, its file named as its part's."""
    from grader.assignment.parts import PARTS
    shutil.copytree(ROOT / "reference" / "solutions", folder / "reference")
    names = ["reference"]
    for cu in sorted((ROOT / "tests" / "kernels").glob("part*.cu")):
        if not cu.name.startswith(TIMED_PREFIXES):
            continue
        key = next(k for k in PARTS if k.startswith(cu.name.split("_")[0] + "_"))
        (folder / cu.stem).mkdir()
        shutil.copy(cu, folder / cu.stem / PARTS[key].filename)
        names.append(cu.stem)
    return names


def measure(out: Path, jobs: int) -> int:
    """The GPU side: constants, then the class's batch; returns the batch's exit status."""
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_constants.py"), str(out / "constants.json")],
                   check=False)
    with tempfile.TemporaryDirectory() as tmp:
        names = _class(Path(tmp) / "class")
        batch = Path(tmp) / "batch"
        proc = subprocess.run([sys.executable, "-m", "grader", "batch", str(Path(tmp) / "class"), "--backend",
                               "pycuda", "--out", str(batch), "--jobs", str(jobs)], cwd=ROOT)
        (out / "results").mkdir(exist_ok=True)
        for name in names:
            for found in batch.glob(f"{name}*/result.json"):
                shutil.copy(found, out / "results" / f"{name}.json")
        if (batch / "summary.txt").is_file():
            shutil.copy(batch / "summary.txt", out / "summary.txt")
    return proc.returncode


def main(argv: list[str]) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    m = sub.add_parser("measure")
    m.add_argument("out", type=Path)
    m.add_argument("--jobs", type=int, default=8)
    t = sub.add_parser("table")
    t.add_argument("out", type=Path)
    args = ap.parse_args(argv[1:])
    if args.what == "measure":
        return measure(args.out, args.jobs)
    from grader.grading.prediction_table import print_table  # the model's side, on any machine
    return print_table(args.out)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv))
