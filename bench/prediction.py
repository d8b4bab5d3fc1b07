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


def _class(folder: Path, only: list[str] | None = None) -> list[str]:
    """A class in ``folder``: ``reference`` (every reference solution) and one submission per
    timed-part kernel of tests/kernels (those named in ``only``, where given), its file named as
    its part's."""
    from grader.assignment.parts import PARTS
    shutil.copytree(ROOT / "reference" / "solutions", folder / "reference")
    names = ["reference"]
    for cu in sorted((ROOT / "tests" / "kernels").glob("part*.cu")):
        if not cu.name.startswith(TIMED_PREFIXES) or (only and cu.stem not in only):
            continue
        key = next(k for k in PARTS if k.startswith(cu.name.split("_")[0] + "_"))
        (folder / cu.stem).mkdir()
        shutil.copy(cu, folder / cu.stem / PARTS[key].filename)
        names.append(cu.stem)
    return names


def measure(out: Path, jobs: int, only: list[str] | None = None, constants: bool = True) -> int:
    """The GPU side: constants (unless ``constants`` is False), then the class's batch (the kernels
    of ``only``, where given); returns the batch's exit status."""
    out.mkdir(parents=True, exist_ok=True)
    if constants:
        subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_constants.py"), str(out / "constants.json")],
                       check=False)
    with tempfile.TemporaryDirectory() as tmp:
        names = _class(Path(tmp) / "class", only)
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


def _measured(out: Path) -> dict[tuple[str, str], dict[int, tuple[float, float]]]:
    """Per (submission, part): {n: (median ms, ratio to the reference)} of its timed cases that passed."""
    found: dict = {}
    for path in sorted((out / "results").glob("*.json")):
        result = json.loads(path.read_text())
        for part in result["parts"]:
            for case in part["cases"]:
                t = case.get("timing")
                if case["status"] == "pass" and t and t.get("ratio"):
                    found.setdefault((path.stem, part["key"]), {})[case["n"]] = (t["median_ms"], t["ratio"])
    return found


def _model(out: Path, override: Path | None):
    from dataclasses import fields
    from grader.core.gpu_models import GPU_MODELS, GpuModel
    path = override or out / "constants.json"
    if path.is_file():
        raw = json.loads(path.read_text())
        keys = {f.name for f in fields(GpuModel)} - {"copy"}
        return GpuModel(**{k: v for k, v in raw.items() if k in keys}, copy=tuple(map(tuple, raw["copy"])))
    gpu = json.loads(next((out / "results").glob("*.json")).read_text())["device"]["device"]
    return GPU_MODELS[gpu]


def table(out: Path, override: Path | None) -> int:
    """Predict every measured (submission, part) on the CPU emulator and print predicted against
    measured; returns 0 where issue 52's targets are met, 1 where not."""
    from grader.assignment.config import load_config
    from grader.assignment.parts import PARTS
    from grader.backends.emulator import EmulatorBackend
    from grader.grading.compile import compile_part
    from grader.grading.prediction import prediction
    from grader.grading.profiling import grown_counts

    cfg = load_config(ROOT / "config.yaml")
    model = _model(out, override)
    emu = EmulatorBackend(workers=cfg.emulator.workers, nvcc_check=False)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        def counts(spec, source: Path, pc, n: int, dtype: str):
            module = compile_part(emu, spec, source.read_text(), pc=pc, dtype=dtype,
                                  workdir=Path(tmp) / f"{source.stem}-{spec.key}-{len(rows)}")
            found, wrong = grown_counts(emu, module, cfg=cfg, part=spec, n=n, dtype_name=dtype, pc=pc)
            if wrong:
                raise SystemExit(f"{source}: the counted run is wrong: {wrong}")
            return found
        for (name, key), measured in sorted(_measured(out).items()):
            spec, pc = PARTS[key], cfg.parts[key]
            ref_spec = PARTS[pc.timing.reference or key]
            dtype = pc.dtypes[0]
            n = min(min(pc.timing.all_sizes), cfg.roofline.max_n)
            source = (ROOT / "reference" / "solutions" / spec.filename if name == "reference"
                      else ROOT / "tests" / "kernels" / f"{name}.cu")
            mine = counts(spec, source, pc, n, dtype)
            ref = counts(ref_spec, ROOT / "reference" / "solutions" / ref_spec.filename, pc, n, dtype)
            pred = prediction(model, part=spec, pc=pc, dtype=dtype, counts=mine, reference=ref, reference_part=ref_spec)
            for r in pred.rows:
                if r.n in measured:
                    ms, ratio = measured[r.n]
                    rows.append((name, key, r.n, ms, r.predicted_ms, ratio, r.ratio))
    emu.close()
    print(f"model: {model.gpu}, constants measured {model.measured} ({model.command})")
    print(f"{'kernel':<34} {'n':>11} {'GPU ms':>10} {'pred ms':>10} {'time err':>9} {'GPU ratio':>10} "
          f"{'pred ratio':>10} {'ratio err':>9}")
    within_ratio = within_time = within_2x = 0
    for name, key, n, ms, pms, ratio, pratio in rows:
        te, re_ = pms / ms - 1, pratio / ratio - 1
        within_ratio += abs(re_) <= 0.25
        within_time += abs(te) <= 0.40
        within_2x += 0.5 <= pratio / ratio <= 2
        print(f"{name[:34]:<34} {n:>11,} {ms:>10.4g} {pms:>10.4g} {te:>+9.0%} {ratio:>10.4g} {pratio:>10.4g} {re_:>+9.0%}")
    k = len(rows)
    print(f"\nratio within ±25 %: {within_ratio} of {k} ({within_ratio / k:.0%}; target 80 %); within 2x: "
          f"{within_2x} of {k} (target all); time within ±40 %: {within_time} of {k}")
    return 0 if within_ratio >= 0.8 * k and within_2x == k else 1


def main(argv: list[str]) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    m = sub.add_parser("measure")
    m.add_argument("out", type=Path)
    m.add_argument("--jobs", type=int, default=8)
    m.add_argument("--only", nargs="*", help="only these kernels of tests/kernels (stems), with the reference")
    m.add_argument("--no-constants", action="store_true", help="grade only")
    t = sub.add_parser("table")
    t.add_argument("out", type=Path)
    t.add_argument("--model", type=Path, help="constants JSON to use (default: OUT/constants.json, else the "
                   "shipped gpu_models.json entry of the measured GPU)")
    args = ap.parse_args(argv[1:])
    if args.what == "measure":
        return measure(args.out, args.jobs, args.only, not args.no_constants)
    return table(args.out, args.model)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv))
