#!/usr/bin/env bash
# One full GPU session in one call of the device tool: the GPU tests, then `scangrade grade` of the
# reference solutions three times (timing spread between runs), logs under $OUT (or ./gpu-logs).
# Usage on the GPU machine, from the repository root, with PyCUDA's wheels in .whl/:
#   bash bench/gpu_check.sh
set -uo pipefail
out=${OUT:-gpu-logs}
mkdir -p "$out"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
python3 -m pytest -q -m gpu ${PYTEST_ARGS:-} 2>&1 | tee "$out/pytest_gpu.txt" | tail -5
for i in 1 2 3; do
  python3 -m grader grade reference/solutions --backend pycuda --json "$out/grade_$i.json" > "$out/grade_$i.txt" 2>&1
  echo "grade run $i: exit $?"
done
tail -40 "$out/grade_1.txt"
python3 - "$out" <<'PY'
import json, sys, statistics
from pathlib import Path
out = Path(sys.argv[1])
runs = [json.loads((out / f"grade_{i}.json").read_text()) for i in (1, 2, 3)]
print(f"GPU: {runs[0]['device'].get('device')}  copy GB/s per run: {[r['device'].get('copy_gbps') for r in runs]}")
print(f"{'part':<20} {'case':<26} {'median ms per run':<36} {'spread between runs':>20}")
for part in runs[0]["parts"]:
    for case in part["cases"]:
        if not case.get("timing"):
            continue
        meds = []
        for r in runs:
            p = next(p for p in r["parts"] if p["key"] == part["key"])
            c = next(c for c in p["cases"] if c["name"] == case["name"])
            meds.append(c["timing"]["median_ms"])
        spread = (max(meds) - min(meds)) / statistics.median(meds)
        print(f"{part['key']:<20} {case['name']:<26} {', '.join(f'{m:.4f}' for m in meds):<36} {100 * spread:>19.1f}%")
PY
