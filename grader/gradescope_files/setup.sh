#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder's image. It installs a C++
# compiler (scangrade's CPU emulator compiles the kernels with it), Python 3.11 or newer, and
# scangrade from the sources in this bundle into a virtual environment of its own, then grades one
# reference solution to check the installation and fill the emulator's build cache.
# Written by `scangrade gradescope-bundle`; see docs/release.md in scangrade.
set -euo pipefail

SOURCE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"   # /autograder/source
ROOT="${AUTOGRADER_ROOT:-/autograder}"
VENV="$ROOT/scangrade-venv"
export DEBIAN_FRONTEND=noninteractive

apt-get update
apt-get install -y --no-install-recommends ca-certificates g++ python3 python3-venv libseccomp-dev bubblewrap

python_ok() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }
PYTHON=""
for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null && python_ok "$candidate"; then
        PYTHON="$(command -v "$candidate")"
        break
    fi
done
if [ -z "$PYTHON" ]; then
    # Ubuntu 22.04's python3 is 3.10; its 3.11 is a package of its own.
    apt-get install -y --no-install-recommends python3.11 python3.11-venv || {
        echo "setup.sh: scangrade needs Python 3.11 or newer and none could be installed;" \
             "choose a newer Ubuntu base image in the autograder settings" >&2
        exit 1
    }
    PYTHON="$(command -v python3.11)"
fi
name="$(basename "$PYTHON")"
if [ "$name" != python3 ]; then
    apt-get install -y --no-install-recommends "$name-venv" || true   # ensurepip for that version
fi

"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --upgrade pip
# Editable, so that the grader finds the reference solutions beside its own sources (a GPU run
# times every submission against them).
"$VENV/bin/python" -m pip install -e "$SOURCE/scangrade"

# The check grades as run_autograder will (--require-sandbox, the bundle's emulator.sandbox if it
# sets one), so a container where bubblewrap cannot run fails here, once, with the reason, instead
# of every submission scoring 0 later.
warm="$(mktemp -d)"
"$VENV/bin/python" - "$SOURCE/config.yaml" "$warm/config.yaml" <<'PY'
import sys
import yaml
with open(sys.argv[1], encoding="utf-8") as f:
    course = yaml.safe_load(f) or {}
warm = {"seed": 1, "parts": {"part1_naive": {"sizes": [2]}}}
sandbox = (course.get("emulator") or {}).get("sandbox")
if sandbox is not None:
    warm["emulator"] = {"sandbox": sandbox}
with open(sys.argv[2], "w", encoding="utf-8") as f:
    yaml.safe_dump(warm, f)
PY
if ! "$VENV/bin/python" -m grader grade "$SOURCE/scangrade/reference/solutions/part1_naive.cu" \
        --config "$warm/config.yaml" --backend emulator --require-sandbox; then
    echo "setup.sh: the installed scangrade could not grade the Part 1 reference solution (output above)." >&2
    echo "setup.sh: if it says bubblewrap cannot run here, this container does not allow user namespaces:" \
         "set 'emulator.sandbox: auto' in the config you build the bundle from (scangrade gradescope-bundle" \
         "--config FILE) to grade with resource limits and seccomp only (docs/security.md), build the bundle" \
         "again and upload it" >&2
    exit 1
fi
rm -rf "$warm"
echo "setup.sh: scangrade is installed in $VENV"
