#!/usr/bin/env bash
# The main job: installs what is missing, builds, and compares every policy on the three
# published traces (3 x A100 40 GB), printing the tables. Extra arguments go to `aegis sim`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
exec build/apps/aegis/aegis sim \
  --workloads data/aegis/workloads.csv \
  --trace data/aegis/trace_philly.csv --trace data/aegis/trace_saturn.csv --trace data/aegis/trace_venus.csv \
  --gpus 3 --gpu-memory 40960 "$@"
