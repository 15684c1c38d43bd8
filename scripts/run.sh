#!/usr/bin/env bash
# The main job: installs what is missing, builds, compares every policy on the three
# published traces (3 x A100 40 GB) and prints the tables, then runs aegisd on emulated
# GPUs with a burst of jobs (scripts/demo.sh; AEGIS_NO_DEMO=1 skips it). Extra arguments
# go to `aegis sim`.
# To show results soon on a fresh clone it builds only the programs it runs, in build-run/
# at -O1 without debug information (about half the compile work of -O2 -g) and in unity
# batches (AEGIS_UNITY_BUILD, the default: about 0.58x the work again), `aegis` first and
# the daemon's programs while the simulator runs. scripts/test.sh builds everything,
# tests included, in build/ (RelWithDebInfo, as CI).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
export AEGIS_BUILD_DIR=build-run
# Warnings are errors in build/ (scripts/test.sh, CI); here they must not stop a first look.
flags=(-DCMAKE_BUILD_TYPE=FirstLook -DCMAKE_CXX_FLAGS_FIRSTLOOK=-O1 -DAEGIS_WERROR=OFF -DAEGIS_BUILD_TESTS=OFF
       -DAEGIS_BUILD_BENCH=OFF)
AEGIS_TARGETS=aegis scripts/build.sh "${flags[@]}"
demo_build=
if [ "${AEGIS_NO_DEMO:-0}" != 1 ]; then
  # aegisd brings aegis-shim and the emulated NVML library; aegis-fakejob its MPS control.
  AEGIS_TARGETS="aegisd aegis-fakejob" scripts/build.sh "${flags[@]}" >build-run/demo-build.log 2>&1 &
  demo_build=$!
fi
# Eight seeds unless told otherwise: the tables state the spread, and a difference between
# policies within it is not a result (docs/simulator.md, "Seeds, and the spread over them").
seeds=(--seeds 8)
for arg in "$@"; do case "$arg" in --seeds|--seeds=*) seeds=() ;; esac; done
build-run/apps/aegis/aegis sim \
  --workloads data/aegis/workloads.csv \
  --trace data/aegis/trace_philly.csv --trace data/aegis/trace_saturn.csv --trace data/aegis/trace_venus.csv \
  --gpus 3 --gpu-memory 40960 "${seeds[@]}" "$@"
if [ -n "$demo_build" ]; then
  if ! wait "$demo_build"; then
    cat build-run/demo-build.log >&2
    exit 1
  fi
  echo
  scripts/demo.sh
fi
