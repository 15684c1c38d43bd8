#!/usr/bin/env bash
# A live demo of aegisd on three emulated 40 GiB GPUs: a burst of emulated training jobs
# (one too big to share, so it runs out of memory and climbs the recovery ladder), shown
# with `aegis gpus` and `aegis queue` as they run. Stops the daemon and cleans up at the end.
# Expects a build in build/ (or $AEGIS_BUILD_DIR: scripts/run.sh builds build-run/). About a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
B="$PWD/${AEGIS_BUILD_DIR:-build}"   # scripts/run.sh: build-run
dir=$(mktemp -d /tmp/aegis-demo.XXXXXX)
chmod 755 "$dir"
export AEGIS_SOCKET="$dir/aegisd.sock"
aegis() { "$B/apps/aegis/aegis" "$@"; }
fake="$B/apps/aegis-fakejob/aegis-fakejob"

"$B/apps/aegisd/aegisd" --set gpu_backend=emulated --set emulated_gpus=3x40960 \
  --state-dir "$dir/state" --socket "$AEGIS_SOCKET" --set durability=normal \
  --set observation_window_s=5 --set telemetry_sample_hz=2 --set telemetry_window_samples=10 \
  >"$dir/aegisd.log" 2>&1 &
daemon=$!
cleanup() {
  kill "$daemon" 2>/dev/null || true
  wait "$daemon" 2>/dev/null || true
  pkill -f "aegis-shim --lock-fd [0-9]+ --dir $dir" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
for _ in $(seq 100); do aegis queue >/dev/null 2>&1 && break; sleep 0.1; done

echo "== aegisd on 3 emulated GPUs (observation window shortened to 5 s for the demo)"
cd "$dir"
for i in 1 2 3 4 5 6; do
  aegis submit --name "resnet$i" --mem $((7 + i))G -- "$fake" --mem $((6000 + 1000 * i)) --smact 0.3 --seconds 12 >/dev/null
done
aegis submit --name llama-big -- "$fake" --mem 36000 --smact 0.5 --seconds 10 --ramp 2 >/dev/null
aegis submit --name bert-pair --gpus 2 --mem 10G -- "$fake" --mem 9000 --smact 0.4 --seconds 10 >/dev/null
echo "submitted 8 jobs"

while :; do
  echo
  aegis gpus
  echo
  aegis queue
  left=$(aegis queue --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
  [ "$left" -eq 0 ] && break
  sleep 4
done
echo
echo "== all done"
aegis queue --all
echo
aegis show "$(aegis queue --all --json | python3 -c 'import json,sys; print([j["id"] for j in json.load(sys.stdin) if j["name"]=="llama-big"][0])')"
