#!/usr/bin/env bash
# Stands in for a training workload in `gpu-validate.sh --emulated`: runs aegis-fakejob on
# the emulated GPU, then prints the JSON line a workload (workloads/common.py) prints last,
# so the emulated dry run exercises the same parsing as the real one.
#   fake_workload.sh MODEL FAKEJOB MEM_MIB [aegis-fakejob options...]
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: fake_workload.sh MODEL FAKEJOB MEM_MIB [aegis-fakejob options...]" >&2
  exit 2
fi
model=$1 fakejob=$2 mem=$3
shift 3
t0=$(date +%s.%N)
rc=0
"$fakejob" --mem "$mem" "$@" || rc=$?
t1=$(date +%s.%N)
# aegis-fakejob exits 1 on an emulated OOM, after printing PyTorch's message on stderr.
if [ "$rc" -eq 0 ]; then status=ok peak=$mem; elif [ "$rc" -eq 1 ]; then status=oom peak=0; else exit "$rc"; fi
printf '{"model": "%s", "status": "%s", "device": "emulated", "batch_size": 0, "precision": "fp32", "steps": 0, "seconds": %s, "samples_per_s": 0, "peak_allocated_mib": %s, "peak_reserved_mib": %s, "smoke": false, "startup_s": null, "params": null, "torch": null}\n' \
  "$model" "$status" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" "$peak" "$peak"
exit "$rc"
