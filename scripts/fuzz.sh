#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/: clang, ASan and UBSan) into build-fuzz/ and runs
# each for the given seconds (default 20). Prints the executions per target; exits
# non-zero if any target crashes or fails a check (its input lands in build-fuzz/artifacts/).
#   scripts/fuzz.sh [seconds-per-target]
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-20}
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/fuzz.sh [seconds-per-target]" >&2
  exit 2
fi

scripts/deps.sh
cmake -S fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DAEGIS_WERROR=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)"
mkdir -p build-fuzz/artifacts

status=0
for target in request job_spec_yaml mem_size; do
  # New inputs go to the first corpus folder, so the seeds in fuzz/corpus stay as they are.
  mkdir -p "build-fuzz/corpus/$target"
  log="build-fuzz/$target.log"
  if build-fuzz/fuzz_"$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -dict="fuzz/$target.dict" -artifact_prefix="build-fuzz/artifacts/$target-" \
      "build-fuzz/corpus/$target" "fuzz/corpus/$target" >"$log" 2>&1; then
    result=ok
  else
    result="FAILED, see $log"
    status=1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  echo "fuzz_$target: ${runs:-0} executions in ${seconds} s: $result"
done
exit "$status"
