#!/usr/bin/env bash
# Where a GPU batch's time goes (docs/throughput.md), in one call of the device tool: PyCUDA's wheels
# from .whl/ and bubblewrap from .debs/ installed, then bench/throughput.py's batch of SUBS (default
# 32; JOBS at once, default scangrade batch's) with the workers' CPU and GPU-lock seconds
# (SCANGRADE_CASE_TIMES), vmstat every 3 s and a `top` a minute in; with BROKEN=1 the broken class
# too, with PROBE=1 bench/context_probe.py first, with PROF=1 a batch of 16 under cProfile
# (SCANGRADE_PROFILE) summed by bench/profile_summary.py. Everything under $OUT.
#   SUBS=48 BROKEN=1 bash bench/batch_diagnosis.sh
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
dpkg -x .debs/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/log.txt; nproc >> $OUT/log.txt
[ -n "${PROBE:-}" ] && python3 bench/context_probe.py default conn1 >> $OUT/log.txt 2>&1
export SCANGRADE_CASE_TIMES=/tmp/ct
vmstat 3 > $OUT/vmstat.txt 2>&1 &
VM=$!
( sleep 70; top -b -n 1 -w 250 -c | head -45 > $OUT/top.txt; sleep 2; ps -eLo stat,comm | awk '{print $1, $2}' | sort | uniq -c | sort -rn | head -30 >> $OUT/top.txt ) &
python3 bench/throughput.py --backend pycuda --submissions ${SUBS:-32} ${JOBS:+--jobs $JOBS} --no-hang-rows --json $OUT/tp.json > $OUT/tp.txt 2>&1
kill $VM
if [ -n "${BROKEN:-}" ]; then
  python3 bench/throughput.py --backend pycuda --submissions 0 --broken 44 --only-broken --json $OUT/broken.json > $OUT/broken.txt 2>&1
fi
unset SCANGRADE_CASE_TIMES
if [ -n "${PROF:-}" ]; then
  SCANGRADE_PROFILE=/tmp/prof python3 bench/throughput.py --backend pycuda --submissions 16 --no-hang-rows > $OUT/tp_prof.txt 2>&1
  python3 bench/profile_summary.py /tmp/prof --sort tottime --top 25 > $OUT/prof.txt 2>&1
fi
tail -30 $OUT/tp.txt >> $OUT/log.txt
