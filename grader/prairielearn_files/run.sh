#!/usr/bin/env bash
# PrairieLearn's external grader runs this for every submission (the question's info.json names it
# as externalGradingOptions.entrypoint). It grades the part files found anywhere below
# $ROOT/student, taken in as `scangrade batch` takes in a submission (grade --intake: the same files,
# the same message for a misnamed one), with the course's config and private config beside this
# script, and writes $ROOT/results/results.json (creating the folder). When scangrade cannot (it stops on an
# error, crashes, or runs past the job's time limit), it writes one of its own: not gradable (no
# score, no attempt used) and why. What it prints is in the job's log, which only the course staff see.
# Written by `scangrade prairielearn-bundle`; see docs/prairielearn.md in scangrade.
#
# Arguments:
#   --part KEY         grade only this part (e.g. part2_blelloch, for a question per part); repeatable
#   --root DIR         the job's folder (default: $SCANGRADE_GRADE_ROOT, else /grade)
# Environment:
#   SCANGRADE_GRADE_ROOT  the job's folder, as --root
#   SCANGRADE_PYTHON      the Python that has scangrade's dependencies (default: /opt/scangrade-venv,
#                         where the bundle's Dockerfile installs them, else python3)
#   SCANGRADE_BACKEND     auto (default: a GPU through PyCUDA when usable, else the CPU emulator),
#                         emulator or pycuda
set -u

SCRIPT=run.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"   # /grade/serverFilesCourse/<the bundle>
ROOT="${SCANGRADE_GRADE_ROOT:-/grade}"
# The job's timeout (externalGradingOptions.timeout, seconds) the bundle was built for: scangrade is
# stopped 5 s before it, so that a results.json is written before PrairieLearn ends the job.
TIME_LIMIT=@TIME_LIMIT@
if [ -n "${SCANGRADE_PYTHON:-}" ]; then
    PYTHON="$SCANGRADE_PYTHON"
elif [ -x /opt/scangrade-venv/bin/python ]; then
    PYTHON=/opt/scangrade-venv/bin/python
else
    PYTHON=python3
fi

parts=()
usage=""
while [ $# -gt 0 ]; do
    case "$1" in
        --part) parts+=(--part "${2:-}"); shift 2 || shift ;;
        --root) ROOT="${2:-}"; shift 2 || shift ;;
        *) usage="${usage:-unknown argument '$1' in the entrypoint (it takes --part KEY and --root DIR)}"; shift ;;
    esac
done

RESULTS="$ROOT/results"
mkdir -p "$RESULTS" || { echo "$SCRIPT: cannot create $RESULTS" >&2; exit 1; }
rm -f "$RESULTS/results.json"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
: > "$work/stderr.txt"

private=no
if [ -f "$HERE/private.yaml" ]; then
    private=yes
fi
status=0
if [ -n "$usage" ]; then
    echo "$SCRIPT: $usage" | tee "$work/stderr.txt" >&2
    why="$usage"
    status=2
else
    # --require-sandbox: on the emulator, grade only inside the OS sandbox (bubblewrap) unless the
    # bundle's config sets emulator.sandbox (docs/security.md). The emulator's checks are on (the default).
    # --show-hidden: the report printed goes to the job's log, which only the course staff see.
    args=(grade "$ROOT/student" --intake --config "$HERE/config.yaml" --backend "${SCANGRADE_BACKEND:-auto}"
          --require-sandbox --show-hidden --prairielearn "$RESULTS/results.json" "${parts[@]}")
    if [ "$private" = yes ]; then
        args+=(--private-config "$HERE/private.yaml")
    fi
    # The grader in this bundle, whatever the image has installed.
    PYTHONPATH="$HERE/scangrade${PYTHONPATH:+:$PYTHONPATH}" \
        timeout -k 5 "$((TIME_LIMIT > 10 ? TIME_LIMIT - 5 : 5))" "$PYTHON" -m grader "${args[@]}" 2> "$work/stderr.txt"
    status=$?
    cat "$work/stderr.txt" >&2
    why="scangrade stopped with exit status $status"
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
        why="grading ran past the time limit of $TIME_LIMIT s (the course's timeouts.submission_s should end it sooner)"
    fi
fi

valid_results() {
    "$PYTHON" -c 'import json, sys; d = json.load(open(sys.argv[1], encoding="utf-8"))
sys.exit(not (isinstance(d, dict) and ("score" in d or d.get("gradable") is False)))' "$RESULTS/results.json" 2>/dev/null
}
if [ "$status" -le 1 ] && [ -s "$RESULTS/results.json" ] && valid_results; then
    exit 0
fi

echo "$SCRIPT: $why, and no results.json; writing one that says so (not gradable)" >&2
"$PYTHON" - prairielearn "$RESULTS/results.json" "$work/stderr.txt" "$why" "$private" <<'PY' && exit 0
@FALLBACK_PY@
PY
# Not even Python runs: a results.json by hand.
printf '{"gradable": false, "format_errors": ["The autograder could not grade this submission: %s could not run (exit status %s). This is a problem of the autograder, not of your code; it used no attempt, and your course staff can see the details."]}\n' \
    "scangrade" "$status" > "$RESULTS/results.json"
exit 0
