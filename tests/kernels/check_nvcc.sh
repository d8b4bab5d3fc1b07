#!/usr/bin/env bash
# Compile every kernel file of scangrade with nvcc, wrapped in its part's header exactly as the
# grader makes it (grader.assignment.parts.part_header), to catch syntax and type errors without a GPU.
#
#   tests/kernels/check_nvcc.sh                               # BLOCK_SIZE 512, int and float
#   BLOCK_SIZES="32 128 256 512 1024" tests/kernels/check_nvcc.sh
#   ITEMS_PER_THREAD_VALUES="1 7 12 16" DTYPES=int32 tests/kernels/check_nvcc.sh
#
# Files: reference/solutions/*.cu, assignment/*.cu and tests/kernels/*.cu. The part is taken from
# the name's prefix (part1_ ... part5_). Each file is compiled once per BLOCK_SIZE in BLOCK_SIZES,
# per scan_t in DTYPES (int32 -> int, float32 -> float) and, for Part 5, per ITEMS_PER_THREAD in
# ITEMS_PER_THREAD_VALUES. Every file must compile, except tests/kernels/part4_compile_error.cu,
# which must fail. Exit status 0 when all is as expected.
#
# The header comes from the grader (python3 with numpy, run from this checkout). Should the
# grader not know a part or a dtype, the script writes the same header itself:
#   #line 1 "<scangrade part header>"
#   #define BLOCK_SIZE <b>
#   #define ITEMS_PER_THREAD <i>          (Part 5 only)
#   typedef <int|float> scan_t;
#   extern "C" {
#   <one declaration per kernel of the part>;
#   }
#   #line 1 "<the part's file name>"
set -u

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
NVCC="${NVCC:-nvcc}"
ARCH="${ARCH:-sm_90}"
BLOCK_SIZES="${BLOCK_SIZES:-512}"
DTYPES="${DTYPES:-int32 float32}"
ITEMS_PER_THREAD_VALUES="${ITEMS_PER_THREAD_VALUES:-12}"
PYTHON="${PYTHON:-python3}"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

part_key() {
    case "$(basename "$1")" in
        part1_*) echo part1_naive ;;
        part2_*) echo part2_blelloch ;;
        part3_*) echo part3_conflict_free ;;
        part4_*) echo part4_any_size ;;
        part5_*) echo part5_single_pass ;;
        *) echo "" ;;
    esac
}

# The header of one part: header KEY BLOCK_SIZE DTYPE ITEMS_PER_THREAD (the last ignored but for
# Part 5). From the grader when it knows the part and the dtype, else written here.
header() {
    (cd "$root" && "$PYTHON" -c '
import sys
import numpy as np
key, block, dtype, items = sys.argv[1], int(sys.argv[2]), np.dtype(sys.argv[3]), int(sys.argv[4])
try:
    from grader.assignment.parts import PARTS, part_header
    part = PARTS[key]
    kwargs = {"items_per_thread": items} if getattr(part, "items_per_thread", False) else {}
    sys.stdout.write(part_header(part, block_size=block, dtype=dtype, **kwargs))
    sys.exit(0)
except (ImportError, KeyError, TypeError):
    pass
scan = "const scan_t* in, scan_t* out, int n"
decls = {
    "part1_naive": ["naive_scan(" + scan + ")"],
    "part2_blelloch": ["blelloch_scan(" + scan + ")"],
    "part3_conflict_free": ["blelloch_scan_cf(" + scan + ")"],
    "part4_any_size": ["scan_tiles(const scan_t* in, scan_t* out, scan_t* tile_sums, int n)",
                       "add_tile_offsets(scan_t* out, const scan_t* tile_offsets, int n)"],
    "part5_single_pass": ["scan_single_pass(" + scan
                          + ", unsigned long long* tile_status, unsigned int* tile_counter)"],
}[key]
ctype = {"int32": "int", "float32": "float"}[dtype.name]
lines = ["#line 1 \"<scangrade part header>\"", "#define BLOCK_SIZE %d" % block]
if key == "part5_single_pass":
    lines.append("#define ITEMS_PER_THREAD %d" % items)
lines += ["typedef %s scan_t;" % ctype, "extern \"C\" {"]
lines += ["__global__ void %s;" % d for d in decls]
lines += ["}", "#line 1 \"%s.cu\"" % key]
sys.stdout.write("\n".join(lines) + "\n")
' "$1" "$2" "$3" "$4")
}

failures=0
checked=0
for f in "$root"/reference/solutions/*.cu "$root"/assignment/*.cu "$root"/tests/kernels/*.cu; do
    [ -e "$f" ] || continue
    rel="${f#"$root"/}"
    key="$(part_key "$f")"
    if [ -z "$key" ]; then
        echo "SKIP  $rel (no part1_ ... part5_ prefix)"
        continue
    fi
    expect_fail=0
    [ "$(basename "$f")" = part4_compile_error.cu ] && expect_fail=1
    items_list=0
    [ "$key" = part5_single_pass ] && items_list="$ITEMS_PER_THREAD_VALUES"
    for bs in $BLOCK_SIZES; do
        for dt in $DTYPES; do
            for items in $items_list; do
                what="BLOCK_SIZE=$bs $dt"
                [ "$key" = part5_single_pass ] && what="$what ITEMS_PER_THREAD=$items"
                src="$tmp/unit.cu"
                if ! header "$key" "$bs" "$dt" "$items" > "$src"; then
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
                checked=$((checked + 1))
                if [ "$expect_fail" = 1 ]; then
                    if [ "$status" = 1 ]; then
                        echo "ok    $rel [$what] fails to compile, as it should:"
                        sed 's/^/        /' "$log"
                    else
                        echo "FAIL  $rel [$what] compiled, but it must not"
                        failures=$((failures + 1))
                    fi
                else
                    if [ "$status" = 0 ]; then
                        echo "ok    $rel [$what]"
                        [ -s "$log" ] && sed 's/^/        /' "$log"
                    else
                        echo "FAIL  $rel [$what] does not compile:"
                        sed 's/^/        /' "$log"
                        failures=$((failures + 1))
                    fi
                fi
            done
        done
    done
done

if [ "$failures" -ne 0 ]; then
    echo "$failures unexpected result(s) in $checked compilation(s)"
    exit 1
fi
echo "all as expected ($checked compilations)"
