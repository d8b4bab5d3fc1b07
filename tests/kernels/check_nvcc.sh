#!/usr/bin/env bash
# Compile every kernel file of scangrade with nvcc, wrapped in its part's header exactly as the
# grader makes it (grader.parts.part_header), to catch syntax and type errors without a GPU.
#
#   tests/kernels/check_nvcc.sh              # BLOCK_SIZE 512
#   BLOCK_SIZES="32 512 1024" tests/kernels/check_nvcc.sh
#
# Files: reference/solutions/*.cu, assignment/*.cu and tests/kernels/*.cu. The part is taken from
# the name's prefix (part1_, part2_, part4_). Every file must compile, except
# tests/kernels/part4_compile_error.cu, which must fail. Exit status 0 when all is as expected.
set -u

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
NVCC="${NVCC:-nvcc}"
ARCH="${ARCH:-sm_90}"
BLOCK_SIZES="${BLOCK_SIZES:-512}"
PYTHON="${PYTHON:-python3}"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

part_key() {
    case "$(basename "$1")" in
        part1_*) echo part1_naive ;;
        part2_*) echo part2_blelloch ;;
        part4_*) echo part4_any_size ;;
        *) echo "" ;;
    esac
}

# The header of one part for one BLOCK_SIZE, from the grader itself.
header() {
    (cd "$root" && "$PYTHON" -c '
import sys
import numpy as np
from grader.parts import PARTS, part_header
sys.stdout.write(part_header(PARTS[sys.argv[1]], block_size=int(sys.argv[2]), dtype=np.dtype(np.int32)))
' "$1" "$2")
}

failures=0
for f in "$root"/reference/solutions/*.cu "$root"/assignment/*.cu "$root"/tests/kernels/*.cu; do
    [ -e "$f" ] || continue
    rel="${f#"$root"/}"
    key="$(part_key "$f")"
    if [ -z "$key" ]; then
        echo "SKIP  $rel (no part1_/part2_/part4_ prefix)"
        continue
    fi
    expect_fail=0
    [ "$(basename "$f")" = part4_compile_error.cu ] && expect_fail=1
    for bs in $BLOCK_SIZES; do
        src="$tmp/unit.cu"
        if ! header "$key" "$bs" > "$src"; then
            echo "ERROR could not build the part header for $key (run from a checkout with numpy)"
            exit 2
        fi
        cat "$f" >> "$src"
        log="$tmp/nvcc.log"
        if "$NVCC" -arch="$ARCH" -c -o /dev/null "$src" > "$log" 2>&1; then
            status=0
        else
            status=1
        fi
        if [ "$expect_fail" = 1 ]; then
            if [ "$status" = 1 ]; then
                echo "ok    $rel [BLOCK_SIZE=$bs] fails to compile, as it should:"
                sed 's/^/        /' "$log"
            else
                echo "FAIL  $rel [BLOCK_SIZE=$bs] compiled, but it must not"
                failures=$((failures + 1))
            fi
        else
            if [ "$status" = 0 ]; then
                echo "ok    $rel [BLOCK_SIZE=$bs]"
                [ -s "$log" ] && sed 's/^/        /' "$log"
            else
                echo "FAIL  $rel [BLOCK_SIZE=$bs] does not compile:"
                sed 's/^/        /' "$log"
                failures=$((failures + 1))
            fi
        fi
    done
done

if [ "$failures" -ne 0 ]; then
    echo "$failures unexpected result(s)"
    exit 1
fi
echo "all as expected"
