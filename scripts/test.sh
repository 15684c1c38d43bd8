#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds (warnings are errors), runs ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 600
