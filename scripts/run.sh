#!/usr/bin/env bash
# The main job: installs what is missing, builds, compares every policy on the three
# published traces (3 x A100 40 GB) and prints the tables, then runs aegisd on emulated
# GPUs with a burst of jobs (scripts/demo.sh; AEGIS_NO_DEMO=1 skips it). Extra arguments
# go to `aegis sim`. Builds only the programs it runs (the test suite is built by
# scripts/test.sh), so the tables come after a few minutes on a fresh clone.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
# aegisd brings aegis-shim and the emulated NVML library; aegis-fakejob its MPS control.
AEGIS_TARGETS="aegis aegisd aegis-fakejob" scripts/build.sh
build/apps/aegis/aegis sim \
  --workloads data/aegis/workloads.csv \
  --trace data/aegis/trace_philly.csv --trace data/aegis/trace_saturn.csv --trace data/aegis/trace_venus.csv \
  --gpus 3 --gpu-memory 40960 "$@"
if [ "${AEGIS_NO_DEMO:-0}" != 1 ]; then
  echo
  scripts/demo.sh
fi
