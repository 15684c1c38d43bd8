#!/usr/bin/env bash
# Configures and builds aegis in build/ (warnings are errors). Extra arguments go to cmake.
# AEGIS_TARGETS="aegis aegisd ..." builds only those targets (and what they need);
# unset, everything is built (the tests and benchmarks too).
set -euo pipefail
cd "$(dirname "$0")/.."
generator=()
if command -v ninja >/dev/null 2>&1 && [ ! -f build/Makefile ]; then generator=(-G Ninja); fi
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAEGIS_WERROR=ON "$@" >/dev/null
targets=()
for t in ${AEGIS_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build build -j"$(nproc)" "${targets[@]}"
