#!/usr/bin/env bash
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
dpkg -x .debs/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/log.txt; nproc >> $OUT/log.txt
[ -n "${PROBE:-}" ] && python3 bench/_ctx_probe.py default conn1 >> $OUT/log.txt 2>&1
export SCANGRADE_CASE_TIMES=/tmp/ct
vmstat 3 > $OUT/vmstat.txt 2>&1 &
VM=$!
( sleep 70; top -b -n 1 -w 250 -c | head -45 > $OUT/top.txt; sleep 2; ps -eLo stat,comm | awk '{print $1, $2}' | sort | uniq -c | sort -rn | head -30 >> $OUT/top.txt ) &
python3 bench/throughput.py --backend pycuda --submissions ${SUBS:-32} --no-hang-rows --json $OUT/tp.json > $OUT/tp.txt 2>&1
kill $VM
unset SCANGRADE_CASE_TIMES
if [ -n "${PROF:-}" ]; then
  SCANGRADE_PROFILE=/tmp/prof python3 bench/throughput.py --backend pycuda --submissions 16 --no-hang-rows > $OUT/tp_prof.txt 2>&1
  python3 bench/profile_summary.py /tmp/prof --sort tottime --top 25 > $OUT/prof.txt 2>&1
fi
tail -30 $OUT/tp.txt >> $OUT/log.txt
