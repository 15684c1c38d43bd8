#!/usr/bin/env bash
# Configures and builds aegis in build/ (warnings are errors). Extra arguments go to cmake.
# AEGIS_TARGETS="aegis aegisd ..." builds only those targets (and what they need);
# unset, everything is built (the tests and benchmarks too). AEGIS_BUILD_DIR names
# another build folder (scripts/run.sh uses build-run/).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${AEGIS_BUILD_DIR:-build}
generator=()
if command -v ninja >/dev/null 2>&1 && [ ! -f "$dir/Makefile" ]; then generator=(-G Ninja); fi
cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAEGIS_WERROR=ON "$@" >/dev/null
targets=()
for t in ${AEGIS_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$dir" -j"$(nproc)" "${targets[@]}"
