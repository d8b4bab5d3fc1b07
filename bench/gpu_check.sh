#!/usr/bin/env bash
# One full GPU session in one call of the device tool: the GPU tests, the GPU-path compile attacks,
# `scangrade grade` of the reference solutions GRADE_RUNS times (default 3; timing spread between
# runs), `scangrade bench` of Parts 4 and 5 against CUB (BENCH_SIZES, default 2^20 2^24 2^28), and
# Nsight Compute's shared-memory counters for Parts 2 and 3 beside the emulator's count
# (bench/ncu_conflicts.py), PrairieLearn's entrypoint on the reference solutions (its wall time
# and results.json), and bench/throughput.py's table of grading speed; logs under $OUT (or ./gpu-logs).
# Usage on the GPU machine, from the repository root, with PyCUDA's wheels in .whl/ (and
# bubblewrap's .deb in .debs/, unpacked onto the PATH where present):
#   bash bench/gpu_check.sh
# STAGES picks some of its stages, in this order: tests (the GPU tests, bench/verdicts.py, the
# compile attacks), grade, prairielearn, throughput, bench (CUB and Nsight Compute); default all.
# The whole takes longer than one call of the device tool allows (10 minutes): run it in two calls,
#   STAGES=tests bash bench/gpu_check.sh;  STAGES="grade prairielearn throughput bench" bash bench/gpu_check.sh
set -uo pipefail
out=${OUT:-gpu-logs}
mkdir -p "$out"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
fi
if ! command -v bwrap >/dev/null && ls .debs/bubblewrap_*.deb >/dev/null 2>&1; then
  dpkg -x .debs/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
fi
export PYTHONUNBUFFERED=1
stages=" ${STAGES:-tests grade prairielearn throughput bench} "
want() { [[ "$stages" == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
if want tests; then
python3 -m pytest -q -m gpu ${PYTEST_ARGS:-} 2>&1 | tee "$out/pytest_gpu.txt" | tail -5
python3 bench/verdicts.py 2>&1 | tee "$out/verdicts.txt" | tail -30  # one verdict on every machine: emulator vs GPU
# The compile attacks through the GPU backend's sandboxed nvcc (no bubblewrap there: limits only).
python3 -m pytest -q tests/toolchain/test_containment.py tests/grading/test_attacks.py -k "pycuda or gpu or include or line or dev_zero" \
    2>&1 | tee "$out/pytest_gpu_compile.txt" | tail -3
fi
if want grade; then
runs=${GRADE_RUNS:-3}
for i in $(seq 1 "$runs"); do
  python3 -m grader grade reference/solutions --backend pycuda --json "$out/grade_$i.json" > "$out/grade_$i.txt" 2>&1
  echo "grade run $i: exit $?"
done
tail -40 "$out/grade_1.txt"
python3 - "$out" "$runs" <<'PY'
import json, sys, statistics
from pathlib import Path
out = Path(sys.argv[1])
runs = [json.loads((out / f"grade_{i}.json").read_text()) for i in range(1, int(sys.argv[2]) + 1)]
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
fi
if want prairielearn; then
# PrairieLearn's entrypoint on the reference solutions, on this GPU (docs/prairielearn.md, "The time
# limit"): a bundle of the shipped config with the timeouts the docs recommend, run.sh run in a
# scratch folder laid out as /grade; its log, wall time, results.json and throughput image.
pl="$(mktemp -d)"
python3 - "$pl/config.yaml" <<'PY'
import sys, yaml
with open("config.yaml", encoding="utf-8") as f:
    cfg = yaml.safe_load(f)
cfg["timeouts"] = {"case_s": 30, "part_s": 90, "submission_s": 290}
with open(sys.argv[1], "w", encoding="utf-8") as f:
    yaml.safe_dump(cfg, f, sort_keys=False)
PY
python3 -m grader prairielearn-bundle "$pl/bundle" --config "$pl/config.yaml" --timeout 300 > "$out/prairielearn_bundle.txt" 2>&1
mkdir -p "$pl/grade/student" "$pl/grade/serverFilesCourse"
cp reference/solutions/*.cu "$pl/grade/student/"
cp -r "$pl/bundle" "$pl/grade/serverFilesCourse/scangrade"
t0=$(date +%s.%N)
SCANGRADE_GRADE_ROOT="$pl/grade" SCANGRADE_PYTHON="$(command -v python3)" SCANGRADE_BACKEND=pycuda \
    "$pl/grade/serverFilesCourse/scangrade/run.sh" > "$out/prairielearn_run.txt" 2>&1
status=$?
t1=$(date +%s.%N)
echo "prairielearn run.sh on the reference solutions: exit $status, wall $(awk "BEGIN {printf \"%.1f\", $t1 - $t0}") s" \
    | tee "$out/prairielearn_time.txt"
cp "$pl/grade/results/results.json" "$out/prairielearn_results.json" 2>/dev/null
python3 - "$out" <<'PY'
import base64, json, sys
from pathlib import Path
out = Path(sys.argv[1])
doc = json.loads((out / "prairielearn_results.json").read_text(encoding="utf-8"))
print(f"prairielearn results.json: gradable {doc.get('gradable')}, score {doc.get('score')}, "
      f"{len(doc.get('tests', []))} tests, {len((out / 'prairielearn_results.json').read_bytes())} bytes")
for i, image in enumerate(doc.get("images", [])):
    (out / f"prairielearn_image_{i}.png").write_bytes(base64.b64decode(image["url"].split(",", 1)[1]))
PY
rm -rf "$pl"
fi
if want throughput; then
# Grading speed (docs/throughput.md): one submission cold and warm, a hang, a fault, a batch of 50.
python3 bench/throughput.py --backend pycuda --submissions ${THROUGHPUT_SUBMISSIONS:-50} \
    --json "$out/throughput.json" 2>"$out/throughput.log" | tee "$out/throughput.txt"
fi
if want bench; then
python3 -m grader bench --sizes ${BENCH_SIZES:-2^20 2^24 2^28} --dtypes int32 --json "$out/bench.json" \
    2>&1 | tee "$out/bench.txt" | tail -12
python3 bench/ncu_conflicts.py emulator 2>&1 | tee "$out/conflicts_emulator.txt"
ncu --metrics l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum \
    -k regex:blelloch python3 bench/ncu_conflicts.py launch 2>&1 | tee "$out/conflicts_ncu.txt" | grep -E "blelloch|l1tex|launched"
fi
