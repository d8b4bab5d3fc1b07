#!/usr/bin/env bash
# System packages the whole test suite exercises (Debian or Ubuntu):
#   bubblewrap, libseccomp-dev  the emulator's sandbox (tests/grading/test_attacks.py, tests/toolchain/test_emulator_sandbox.py)
#   slurm-wlm, munge            a one-node Slurm cluster (tests/classwork/test_slurm.py)
#   chromium                    the class report rendered headless (tests/render/test_class_report.py)
# Without them those tests skip and say why. Needs root and apt-get; a failure here is reported,
# not fatal: the rest of the suite still runs.
set -uo pipefail
PKGS=(bubblewrap libseccomp-dev slurm-wlm munge chromium)
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "system-deps: not root, or no apt-get: not installing ${PKGS[*]} (their tests will skip)"
    exit 0
fi
missing=()
for p in "${PKGS[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "system-deps: ${PKGS[*]} already installed"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
echo "system-deps: installing ${missing[*]}"
if ! timeout 600 apt-get update -qq; then
    echo "system-deps: apt-get update failed: the tests that need ${missing[*]} will skip"
    exit 0
fi
if ! timeout 900 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/system-deps.log 2>&1; then
    tail -5 /tmp/system-deps.log
    echo "system-deps: apt-get install failed (above); trying the packages one by one"
    for p in "${missing[@]}"; do
        timeout 600 apt-get install -y -qq --no-install-recommends "$p" >/dev/null 2>&1 \
            || echo "system-deps: $p could not be installed: its tests will skip"
    done
fi
exit 0
