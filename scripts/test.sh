#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds (warnings are errors), fuzzes the
# API parsers for a bounded time (AEGIS_FUZZ_SECONDS per target, default 20; 0 skips),
# and runs ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test
scripts/build.sh
if [ "${AEGIS_FUZZ_SECONDS:-20}" != 0 ]; then scripts/fuzz.sh "${AEGIS_FUZZ_SECONDS:-20}"; fi
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 600
