#!/usr/bin/env bash
# Installs the Debian 12 packages aegis needs, only those missing (idempotent).
# Used by scripts/run.sh and scripts/test.sh; safe to run by hand. `--test` adds what only
# the test suite needs: a Slurm with accounting for tests/slurm/ (on a machine with systemd
# these packages enable their services; the tests start private daemons of their own).
set -euo pipefail

PACKAGES=(
  g++ cmake make ninja-build pkg-config
  libcli11-dev nlohmann-json3-dev libfmt-dev
  libgtest-dev googletest libbenchmark-dev
  libsqlite3-dev libyaml-cpp-dev libtomlplusplus-dev libeigen3-dev
  libjemalloc-dev   # the simulator's allocator (CMakeLists.txt, AEGIS_SIM_ALLOCATOR)
  libcpp-httplib-dev   # aegisd's web dashboard (docs/dashboard.md)
  clang libclang-rt-14-dev   # libFuzzer for the fuzz targets (fuzz/)
  chromium   # headless, for the HTML report's browser check (tests/browser/)
  python3   # the test scripts (tests/sim_golden.py, tests/daemon/, tests/security/)
  python3-torch python3-torchvision   # Debian's PyTorch (/usr/bin/python3): estimator helpers, workload smoke tests
  patchelf   # scripts/gpu-validate.sh --prepare: the bundle's RPATH
  help2man   # the man pages of the package (packaging/)
)
if [ "${1:-}" = "--test" ]; then
  PACKAGES+=(slurm-wlm slurmdbd munge mariadb-server)   # tests/slurm/: a real Slurm with accounting
  PACKAGES+=(dpkg-dev systemd)   # tests/package/: dpkg-shlibdeps for cpack, systemd-analyze verify
  PACKAGES+=(python3-websocket)   # tests/browser/test_dashboard.py: drives Chromium over DevTools
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "aegis: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi

echo "aegis: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
