"""Issue 36's GPU figures: the analysis table of the reference solutions and of every timed-part
kernel in tests/kernels that passes, each measured time against its emulator bound.

Grades each submission twice with the shipped config's timed parts: on the GPU (``--backend
pycuda``: the analysis table) and on the CPU emulator (``--backend emulator``: the roofline), then
prints, per part and timed size, the measured median, the emulator's bound, measured / bound, and
whether the bound held (measured >= bound) and, for the reference at 2^24 and above, whether
measured / bound <= 1.5. JSON results and reports go under OUT (default ./analysis-out).

Usage on the GPU machine, from the repository root (PyCUDA's wheels installed, see bench/gpu_check.sh):
    python3 bench/analysis.py [OUT] [--jobs 4] [--skip serial_one_thread]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMED = ("part3_conflict_free", "part4_any_size", "part5_single_pass")


def _submissions(work: Path) -> dict[str, Path]:
    """The reference solutions, and a folder per tests/kernels file of a timed part (as the part's file)."""
    from grader.assignment.parts import PARTS
    subs = {"reference": ROOT / "reference" / "solutions"}
    for cu in sorted((ROOT / "tests" / "kernels").glob("part[345]_*.cu")):
        key = next(k for k in TIMED if cu.name.startswith(k.split("_")[0] + "_"))
        folder = work / cu.stem
        folder.mkdir(parents=True)
        shutil.copy(cu, folder / PARTS[key].filename)
        subs[cu.stem] = folder
    return subs


def _grade(path: Path, backend: str, out: Path, parts: list[str]) -> dict | None:
    cmd = [sys.executable, "-m", "grader", "grade", str(path), "--backend", backend, "--json", str(out),
           *[a for p in parts for a in ("--part", p)]]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    (out.with_suffix(".txt")).write_text(proc.stdout + proc.stderr)
    return json.loads(out.read_text()) if out.is_file() else None


def _one(name: str, path: Path, out: Path) -> tuple[list[str], list[str]]:
    """Grade one submission on both backends: (its printed lines, its failures)."""
    lines: list[str] = []
    failures: list[str] = []
    parts = list(TIMED) if name == "reference" else [k for k in TIMED if name.startswith(k.split("_")[0] + "_")]
    gpu = _grade(path, "pycuda", out / f"{name}-gpu.json", parts)
    emu = _grade(path, "emulator", out / f"{name}-emulator.json", parts)
    if gpu is None or emu is None:
        return [f"{name}: no result (see {out}/{name}-*.txt)"], failures
    lines.append(f"== {name} on {gpu['device'].get('device')}")
    for part in gpu["parts"]:
        analysis = part.get("analysis")
        roof = next((p.get("roofline") for p in emu["parts"] if p["key"] == part["key"]), None)
        if not analysis:
            lines.append(f"  {part['key']}: not timed ({part['status']})")
            continue
        bounds = {r["n"]: r["bound_ms"] for r in (roof or {}).get("rows", [])}
        lines.append(f"  {part['key']}: peaks FP32 {analysis['peak_fp32_gflops']} GFLOPS, DRAM "
                     f"{analysis['peak_dram_gbps']} GB/s ({analysis['peaks']})")
        lines.append(f"  {'n':>11} {'GPU ms':>9} {'CPU ms':>9} {'speed-up':>8} {'GFLOPS':>8} {'%FP32':>6} "
                     f"{'%DRAM':>6} {'bound ms':>9} {'meas/bnd':>8}  bound")
        for r in analysis["rows"]:
            b = bounds.get(r["n"])
            ratio = r["gpu_ms"] / b if b else None
            held = b is None or r["gpu_ms"] >= b
            tight = not (name == "reference" and r["n"] >= 1 << 24 and ratio is not None and ratio > 1.5)
            if not held or not tight:
                failures.append(f"{name} {part['key']} n={r['n']}: measured {r['gpu_ms']:.4g} ms, bound "
                                f"{b:.4g} ms ({'below the bound' if not held else 'measured/bound > 1.5'})")
            lines.append(f"  {r['n']:>11} {r['gpu_ms']:>9.4g} {r['cpu_ms'] or 0:>9.4g} {r['speedup'] or 0:>7.1f}x "
                         f"{r['gflops']:>8.1f} {r['fp32_percent'] or 0:>6.2f} {r['dram_percent'] or 0:>6.1f} "
                         f"{b if b else float('nan'):>9.4g} {ratio if ratio else float('nan'):>8.2f}  {r['bound']}")
    return lines, failures


def main(argv: list[str]) -> int:
    """Grade every submission (``--jobs`` at once, default 4; ``--skip SUBSTRING`` leaves out the
    kernels whose name holds it, repeatable: a one-thread kernel's timed runs at 2^28 take minutes)
    and print the table; returns 1 where a bound did not hold."""
    import argparse
    from concurrent.futures import ThreadPoolExecutor
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", default="analysis-out")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--skip", action="append", default=[])
    args = ap.parse_args(argv[1:])
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        subs = {name: path for name, path in _submissions(Path(tmp)).items()
                if not any(s in name for s in args.skip)}
        with ThreadPoolExecutor(args.jobs) as pool:
            done = {name: pool.submit(_one, name, path, out) for name, path in subs.items()}
            for name, future in done.items():
                lines, failed = future.result()
                print("\n".join(lines), flush=True)
                failures += failed
    print("\n".join(["", "FAILED:", *failures]) if failures else "\nevery bound held; reference within 1.5x at 2^24+")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv))
