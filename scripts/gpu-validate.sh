#!/usr/bin/env bash
# The validation of aegisd on a real GPU (docs/gpu-validation.md), in two steps:
#
#   scripts/gpu-validate.sh --prepare BUNDLE_DIR [BUILD_DIR]
#       HERE (Debian 12): brings BUILD_DIR (default build/) up to date, copies aegisd, aegis,
#       aegis-shim, aegis-gpu-query, aegis-fakejob and the emulated NVML and DCGM libraries from it,
#       builds nvml_probe against it, and puts next to them the shared libraries a stock
#       system may lack (ldd); every binary finds them through its RPATH ($ORIGIN/../lib),
#       so no LD_LIBRARY_PATH leaks into the jobs' environment.
#
#   scripts/gpu-validate.sh [--emulated [--scale X]] [--budget S] [--trace CSV] BUNDLE_DIR [OUT_DIR]
#       ON THE GPU MACHINE: 1. NVML self-check and the cost of a sample against nvidia-smi,
#       the telemetry source aegisd chooses (GPM, DCGM where libdcgm is installed, coarse)
#       with what each source reads under load, and gpt.py's --memory-target-gib on the GPU;
#       then a warm-up (each kind for 30 steps at once, outside aegisd); 2. the solo
#       phase: one job of each kind of the mix (scripts/gpu-validate/mix.csv) under policy exclusive, one after the other: each kind's solo profile, from which
#       the exclusive makespan of the whole mix is derived; 3. the whole mix under policy
#       aegis, repeated while the budget allows another repeat (at most 3): its makespan
#       and spread; 4. everything packed into OUT_DIR/gpu-validation.tar.gz (rewritten
#       after each phase), plus run.log and summary.json. OUT_DIR defaults to $OUT.
#       --emulated runs the same on an emulated GPU with aegis-fakejob for the workloads
#       (the dry run that the tests use), --scale shrinks its durations. --budget caps the
#       whole run (default 500 s); --trace plays another mix of the same columns.
#       Afterwards, here: scripts/gpu-validate/compare.py OUT_DIR [--out DIR].
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HERE=$REPO/scripts/gpu-validate
die() { echo "gpu-validate: $*" >&2; exit 1; }
log() { echo "gpu-validate: [$(date +%H:%M:%S)] $*"; }

# --- prepare (here) -------------------------------------------------------------------

prepare() {
  local bundle=$1 build=${2:-$REPO/build}
  [ -d "$build" ] || die "$build: no such build directory (cmake -S . -B $build && cmake --build $build)"
  command -v patchelf >/dev/null || die "patchelf is not installed (apt-get install patchelf)"
  # nvml_probe is compiled here against today's headers and the build's libaegis_gpu.a: the
  # two must agree, so bring the build up to date first (the tests, run on a fresh build,
  # skip this with AEGIS_VAL_NO_BUILD=1).
  if [ "${AEGIS_VAL_NO_BUILD:-0}" != 1 ]; then
    cmake --build "$build" --target aegisd aegis-shim aegis aegis-gpu-query aegis-fakejob aegis-nvml-emulated aegis-dcgm-emulated aegis_gpu \
      || die "building the bundle's targets in $build failed (see above)"
  fi
  local -A src=(
    [aegisd]=apps/aegisd/aegisd [aegis-shim]=apps/aegisd/aegis-shim [aegis]=apps/aegis/aegis
    [aegis-gpu-query]=apps/aegis-gpu-query/aegis-gpu-query [aegis-fakejob]=apps/aegis-fakejob/aegis-fakejob
  )
  local emu=$build/src/runtime/gpu/emulated/libaegis-nvml-emulated.so gpulib=$build/src/runtime/libaegis_gpu.a
  local emu_dcgm=$build/src/runtime/gpu/emulated/libaegis-dcgm-emulated.so
  for n in "${!src[@]}"; do [ -x "$build/${src[$n]}" ] || die "$build/${src[$n]}: missing; build the project first"; done
  [ -f "$emu" ] || die "$emu: missing; build the project first"
  [ -f "$emu_dcgm" ] || die "$emu_dcgm: missing; build the project first"
  [ -f "$gpulib" ] || die "$gpulib: missing; build the project first"
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib"
  for n in "${!src[@]}"; do cp "$build/${src[$n]}" "$bundle/bin/$n"; done
  cp "$emu" "$emu_dcgm" "$bundle/lib/"
  # The emulated MPS control daemon, for the dry run's MPS phase (never used on a real GPU).
  mkdir -p "$bundle/emulated-mps"
  cp "$build/apps/aegis-fakejob/mps-bin/nvidia-cuda-mps-control" "$bundle/emulated-mps/"
  g++ -std=c++20 -O2 -Wall -Wextra -Werror -I "$REPO/src" "$HERE/nvml_probe.cpp" "$gpulib" -ldl \
    -o "$bundle/bin/nvml_probe" || die "nvml_probe did not build (see above)"
  # Every shared library the binaries need, less the C library and the C++ runtime: those
  # are on every system, and Debian 12's libstdc++ would raise the glibc needed from 2.34
  # (our binaries; libstdc++ from GCC 11 on serves them) to 2.36. Never an NVML: the real
  # one must come from the GPU machine.
  local libs
  libs=$(ldd "$bundle"/bin/* "$bundle"/lib/*.so 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
    grep -v libnvidia-ml | grep -v libdcgm | sort -u)
  for l in $libs; do cp -L "$l" "$bundle/lib/"; done
  # DT_RPATH (not RUNPATH): it also covers the libraries' own dependencies.
  for f in "$bundle"/bin/* "$bundle"/lib/*.so* "$bundle"/emulated-mps/*; do
    strip --strip-unneeded "$f" 2>/dev/null || true
    # shellcheck disable=SC2016  # $ORIGIN is for the dynamic loader, not the shell
    patchelf --force-rpath --set-rpath '$ORIGIN/../lib:$ORIGIN' "$f"
  done
  local missing
  missing=$(ldd "$bundle"/bin/* 2>&1 | grep "not found" || true)
  [ -z "$missing" ] || die "the bundle's binaries miss libraries: $missing"
  "$bundle/bin/aegis" --help >/dev/null || die "$bundle/bin/aegis does not run"
  local glibc
  glibc=$(for f in "$bundle"/bin/* "$bundle"/lib/*; do objdump -T "$f" 2>/dev/null; done |
    grep -o 'GLIBC_2\.[0-9]*' | sort -V | tail -1)
  echo "gpu-validate: bundle $bundle ready: $(du -sh "$bundle" | cut -f1); bin: $(cd "$bundle/bin" && echo *)"
  echo "gpu-validate: lib: $(cd "$bundle/lib" && echo *); needs ${glibc/_/ } or newer, libstdc++ of GCC 11 or newer"
}

if [ "${1:-}" = "--prepare" ]; then
  if [ $# -lt 2 ] || [ $# -gt 3 ]; then die "usage: gpu-validate.sh --prepare BUNDLE_DIR [BUILD_DIR]"; fi
  prepare "$2" "${3:-}"
  exit 0
fi

# --- the validation run -----------------------------------------------------------------

MODE=real SCALE=1 BUDGET=${AEGIS_VAL_BUDGET_S:-500} TRACE=$HERE/mix.csv
while [ $# -gt 0 ]; do
  case $1 in
    --emulated) MODE=emulated; shift ;;
    --scale) [ $# -ge 2 ] || die "--scale needs a number"; SCALE=$2; shift 2 ;;
    --budget) [ $# -ge 2 ] || die "--budget needs seconds"; BUDGET=$2; shift 2 ;;
    --trace) [ $# -ge 2 ] || die "--trace needs a CSV file"; TRACE=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) die "unknown option $1 (try --help)" ;;
    *) break ;;
  esac
done
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  die "usage: gpu-validate.sh [--emulated [--scale X]] [--budget S] [--trace CSV] BUNDLE_DIR [OUT_DIR]"
fi
[[ "$BUDGET" =~ ^[0-9]+$ ]] || die "--budget: '$BUDGET' is not a whole number of seconds"
[ -f "$TRACE" ] || die "$TRACE: no such mini-trace"
head -1 "$TRACE" | grep -q '^name,kind,submit_s,workload,steps,args,expect_s,' || die "$TRACE: not a mix (header as in scripts/gpu-validate/mix.csv)"
BUNDLE=$(cd "$1" 2>/dev/null && pwd) || die "$1: no such bundle directory (make one with --prepare)"
OUTDIR=${2:-${OUT:-}}
[ -n "$OUTDIR" ] || die "no OUT_DIR given and \$OUT is not set"
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
[ "$MODE" = emulated ] || [ "$SCALE" = 1 ] || die "--scale is for --emulated only (real jobs keep their durations)"
awk -v s="$SCALE" 'BEGIN { exit !(s > 0 && s <= 1) }' || die "--scale: '$SCALE' is not in (0, 1]"
for b in aegisd aegis aegis-shim aegis-gpu-query aegis-fakejob nvml_probe; do
  [ -x "$BUNDLE/bin/$b" ] || die "$BUNDLE/bin/$b: missing (make the bundle with --prepare)"
done
"$BUNDLE/bin/aegis" --help >/dev/null 2>&1 || die "$BUNDLE/bin/aegis does not start here: $(ldd "$BUNDLE/bin/aegis" | grep 'not found' | head -1)"
PY=${AEGIS_VAL_PYTHON:-python3}
command -v "$PY" >/dev/null || die "$PY: not found (set AEGIS_VAL_PYTHON)"
PY=$(command -v "$PY")
if [ "$MODE" = real ]; then
  command -v nvidia-smi >/dev/null || die "nvidia-smi not found: is this the GPU machine? (use --emulated elsewhere)"
  "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
    die "$PY has no PyTorch with CUDA (set AEGIS_VAL_PYTHON)"
fi

T_START=$(date +%s)
WORK=$(mktemp -d /tmp/aegis-val.XXXXXX)
chmod 755 "$WORK"
RES=$WORK/results
mkdir -p "$RES"
# On any exit: stop what we started (by pid), pack what there is, drop the scratch folder
# (AEGIS_VAL_KEEP=1 keeps it).
PIDS_TO_STOP=()
cleanup() {
  for p in "${PIDS_TO_STOP[@]}"; do kill "$p" 2>/dev/null || true; done
  pack 2>/dev/null || true
  [ "${AEGIS_VAL_KEEP:-0}" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT
exec > >(tee "$OUTDIR/run.log") 2>&1
scaled() { awk -v v="$1" -v s="$SCALE" 'BEGIN { printf "%g", v * s }'; }
elapsed() { echo $(( $(date +%s) - T_START )); }

# Engine settings of every run, recorded for compare.py, which replays with the same ones.
# The jobs train about 25 s instead of hours, so the published 30 s observation window and
# 30-sample telemetry window are scaled down to 5 s and 5 samples (docs/gpu-validation.md,
# "The mix": the window starts at the heavy phase, where memory and activity have settled
# within 1-2 s on the H200). The anchor's own settings are the defaults: the run checks them.
# The estimator is pinned to none (estimator-free AEGIS), which the simulator's policy uses
# and aegisd's "auto" chain would not. The rest is the policy's.
HZ=$(awk -v s="$SCALE" 'BEGIN { printf "%g", 1 / s }')
ENGINE=(
  "estimator=none"
  "observation_window_s=$(scaled 5)"
  "observation_max_wait_s=$(scaled 40)"
  "telemetry_window_samples=5"
  "telemetry_sample_hz=$HZ"
)
GPU_MEMORY=143771  # the emulated GPU: an H200 as nvidia-smi reports it
EMU_LIB=$BUNDLE/lib/libaegis-nvml-emulated.so
EMU_DCGM=$BUNDLE/lib/libaegis-dcgm-emulated.so
# AEGIS_VAL_EMULATED_GPM=0: an emulated GPU without GPM (Ampere-like): its SM activity then
# comes from the emulated libdcgm, the DCGM telemetry path.
EMU_GPM=${AEGIS_VAL_EMULATED_GPM:-1}
if [ "$MODE" = emulated ]; then
  export AEGIS_EMULATED_STATE=$WORK/emulated.state AEGIS_EMULATED_GPUS=1x$GPU_MEMORY AEGIS_EMULATED_GPM=$EMU_GPM
  NVML=$EMU_LIB
else
  # By soname when the loader knows it; else the first copy on LD_LIBRARY_PATH or where
  # drivers are mounted in containers, by path (the daemon dlopens exactly this).
  NVML=libnvidia-ml.so.1
  if ! ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml.so.1 '; then
    for dir in ${LD_LIBRARY_PATH//:/ } /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64; do
      if [ -e "$dir/libnvidia-ml.so.1" ]; then NVML=$dir/libnvidia-ml.so.1; break; fi
    done
  fi
fi
log "mode $MODE, scale $SCALE, budget ${BUDGET} s, bundle $BUNDLE, results $OUTDIR, work $WORK"

pack() {
  tar -czf "$OUTDIR/.gpu-validation.tar.gz" -C "$WORK" --exclude='*.sock' --exclude='lock' results
  mv "$OUTDIR/.gpu-validation.tar.gz" "$OUTDIR/gpu-validation.tar.gz"
}

{
  echo "{"
  echo "  \"mode\": \"$MODE\", \"scale\": $SCALE, \"gpu_memory_emulated_mib\": $GPU_MEMORY,"
  printf '  "engine": ['; printf '"%s",' "${ENGINE[@]}" | sed 's/,$//'; echo '],'
  echo "  \"started_at\": $T_START, \"host\": \"$(uname -srm)\", \"python\": \"$PY\", \"nvml_library\": \"$NVML\","
  echo "  \"torch\": \"$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)\""
  echo "}"
} > "$RES/config.json"
cp "$TRACE" "$RES/mix.csv"

# --- 1. NVML self-check ----------------------------------------------------------------

# Which telemetry source aegisd chooses on this GPU (--source auto: GPM, else DCGM, else
# coarse) and what GPM and DCGM each read under the same load (--source gpm, dcgm: DCGM on
# every GPU, to compare), one CSV and one description line each (summarize.py). Where no
# libdcgm is installed the dcgm files say so and auto reads GPM or coarse: nothing fails.
telemetry_sources() {
  local d=$1 ms=$2 dcgm=()
  if [ "$MODE" = emulated ]; then dcgm=(--dcgm-library "$EMU_DCGM"); fi
  ldconfig -p 2>/dev/null | grep libdcgm > "$d/libdcgm.txt" || echo "no libdcgm known to ldconfig" > "$d/libdcgm.txt"
  for s in auto gpm dcgm; do
    "$BUNDLE/bin/aegis-gpu-query" --library "$NVML" "${dcgm[@]}" --source "$s" --gpm-interval "$ms" --describe \
      > "$d/telemetry-$s.txt" 2>&1 || echo "exit $?" >> "$d/telemetry-$s.txt"
    "$BUNDLE/bin/aegis-gpu-query" --library "$NVML" "${dcgm[@]}" --source "$s" --gpm-interval "$ms" --header \
      > "$d/telemetry-$s.csv" 2>&1 || echo "exit $?" >> "$d/telemetry-$s.csv"
  done
}

nvml_phase() {
  local d=$RES/nvml
  mkdir -p "$d"
  log "1. NVML self-check with $NVML"
  if [ "$MODE" = real ]; then
    nvidia-smi > "$d/nvidia-smi.txt" 2>&1 || true
    nvidia-smi --query-gpu=index,uuid,name,driver_version,memory.total,memory.used,utilization.gpu,power.draw,mig.mode.current \
      --format=csv > "$d/nvidia-smi-gpus.csv" 2>&1 || true
    # The GPU's MIG profiles and placements as the driver knows them (it lists them only
    # with MIG mode on; aegis never switches it), against aegis's own table (summarize.py).
    nvidia-smi mig -lgip > "$d/mig-lgip.txt" 2>&1 || true
    nvidia-smi mig -lgipp > "$d/mig-lgipp.txt" 2>&1 || true
  fi
  "$BUNDLE/bin/aegis-gpu-query" --mig-table > "$d/mig-table-aegis.csv" 2>&1 || true
  local timed=(--time "$BUNDLE/bin/aegis-gpu-query --library $NVML")
  if [ "$MODE" = real ]; then
    timed+=(--time "nvidia-smi --query-gpu=index,memory.used,memory.total,utilization.gpu --format=csv,noheader")
  fi
  local gpm_ms
  gpm_ms=$(scaled 1000)
  "$BUNDLE/bin/nvml_probe" --library "$NVML" --gpm-interval-ms "${gpm_ms%.*}" --samples 1000 --runs 10 --max-seconds 4 "${timed[@]}" \
    > "$d/probe-idle.json" 2> "$d/probe-idle.err" || log "nvml_probe (idle) failed: $(tail -1 "$d/probe-idle.err")"

  # Under load: a real training job (or an emulated one), so that GPM, utilisation and the
  # process list have something to show; nvidia-smi's view is recorded next to ours.
  local load
  if [ "$MODE" = real ]; then
    # Also the check of --memory-target-gib on the GPU (summarize.py: its peak against 40 GiB).
    PYTHONUNBUFFERED=1 "$PY" "$REPO/workloads/gpt.py" --memory-target-gib 40 --seconds 30 > "$d/load.log" 2>&1 &
  else
    "$BUNDLE/bin/aegis-fakejob" --mem 20000 --smact 0.7 --seconds "$(scaled 25)" --startup 0 > "$d/load.log" 2>&1 &
  fi
  load=$!
  PIDS_TO_STOP+=("$load")
  local waited=0
  until "$BUNDLE/bin/aegis-gpu-query" --library "$NVML" | awk -F, '$8 != "" { found = 1 } END { exit !found }'; do
    sleep 0.5; waited=$((waited + 1))
    if [ $waited -ge 60 ] || ! kill -0 "$load" 2>/dev/null; then log "the load job shows no GPU process (see nvml/load.log)"; break; fi
  done
  # Past the first iterations: steady activity. gpt.py first searches its batch size for
  # the memory target (16 s on the H100); until it prints the result, what the sources read
  # is that search, not training (run 3: --source auto read SMACT 0.10 at 20.8 GB, then
  # --source gpm 0.91 at 39.0 GB).
  if [ "$MODE" = real ]; then
    waited=0
    until grep -q '^memory probe:' "$d/load.log" 2>/dev/null; do
      sleep 0.5; waited=$((waited + 1))
      if [ $waited -ge 60 ] || ! kill -0 "$load" 2>/dev/null; then log "the load job printed no memory probe (see nvml/load.log)"; break; fi
    done
  fi
  sleep "$(scaled 5)"
  telemetry_sources "$d" "${gpm_ms%.*}"
  if [ "$MODE" = real ]; then
    nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv > "$d/apps-before.csv" 2>&1 || true
  fi
  "$BUNDLE/bin/nvml_probe" --library "$NVML" --gpm-interval-ms "${gpm_ms%.*}" --samples 300 --runs 5 --max-seconds 3 "${timed[@]}" \
    > "$d/probe-load.json" 2> "$d/probe-load.err" || log "nvml_probe (load) failed: $(tail -1 "$d/probe-load.err")"
  "$BUNDLE/bin/aegis-gpu-query" --library "$NVML" --header --gpm-interval "${gpm_ms%.*}" > "$d/gpu-query-load.csv" 2>&1 || true
  if [ "$MODE" = real ]; then
    nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv > "$d/apps-after.csv" 2>&1 || true
    # The driver's own GPM reading (SM activity 2, occupancy 3, DRAM bandwidth 10), if it has one.
    timeout 10 nvidia-smi dmon --gpm-metrics 2,3,10 -c 2 > "$d/dmon-gpm.txt" 2>&1 || echo "exit $?" >> "$d/dmon-gpm.txt"
    timeout 10 nvidia-smi dmon -s um -c 2 > "$d/dmon-um.txt" 2>&1 || echo "exit $?" >> "$d/dmon-um.txt"
  fi
  wait "$load" || log "the load job exited with status $? (see nvml/load.log)"
  "$PY" "$HERE/summarize.py" nvml "$d" || true
}

# --- 2. the mini-trace through aegisd ---------------------------------------------------------

# trace_phase NAME POLICY DEADLINE_S [run_trace.py options]: the mix (or, with --solo, one
# job of each kind) through a fresh aegisd with POLICY; results in RESULTS/NAME.
trace_phase() {
  local name=$1 policy=$2 deadline=$3 d=$RES/$1
  shift 3
  mkdir -p "$d/state"
  local port
  port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  {
    echo "state_dir = \"$d/state\""
    echo "socket = \"$WORK/$name.sock\""
    echo "policy = \"$policy\""
    echo "durability = \"normal\""
    if [ -n "${PHASE_MPS_CONTROL:-}" ]; then
      echo "sharing = \"mps\""
      echo "mps_control = \"managed\""
      echo "mps_control_binary = \"$PHASE_MPS_CONTROL\""
      echo "mps_pipe_dir = \"$WORK/mps-pipe\""
      echo "mps_log_dir = \"$d/mps-log\""
    fi
    echo "metrics_port = $port"
    if [ "$MODE" = emulated ]; then
      echo "gpu_backend = \"emulated\""
      echo "emulated_library = \"$EMU_LIB\""
      echo "emulated_gpus = \"1x$GPU_MEMORY\""
      echo "dcgm_library = \"$EMU_DCGM\""
      if [ "$EMU_GPM" = 0 ]; then echo "emulated_gpm = false"; else echo "emulated_gpm = true"; fi
    else
      echo "gpu_backend = \"nvml\""
      echo "nvml_library = \"$NVML\""
    fi
    echo "[engine]"
    for kv in "${ENGINE[@]}"; do
      v=${kv#*=}
      if [[ "$v" =~ ^[0-9.]+$ ]]; then echo "${kv%%=*} = $v"; else echo "${kv%%=*} = \"$v\""; fi
    done
  } > "$d/aegisd.toml"
  # A fresh emulated GPU per run: no memory left over from the previous one.
  if [ "$MODE" = emulated ]; then rm -f "$AEGIS_EMULATED_STATE"; fi
  log "$name: policy $policy, aegisd up, jobs submitted (deadline ${deadline} s)"
  "$BUNDLE/bin/aegisd" --config "$d/aegisd.toml" > "$d/aegisd.log" 2>&1 &
  local daemon=$!
  PIDS_TO_STOP+=("$daemon")
  local i=0
  until "$BUNDLE/bin/aegis" --socket "$WORK/$name.sock" queue --json >/dev/null 2>&1; do
    sleep 0.2; i=$((i + 1))
    kill -0 "$daemon" 2>/dev/null || die "aegisd ($name) exited: $(tail -3 "$d/aegisd.log")"
    [ $i -lt 100 ] || die "aegisd ($name) did not answer within 20 s: $(tail -3 "$d/aegisd.log")"
  done
  "$BUNDLE/bin/aegis" --socket "$WORK/$name.sock" gpus > "$d/gpus-start.txt" 2>&1 || true
  "$BUNDLE/bin/aegis" --socket "$WORK/$name.sock" gpus --json > "$d/gpus-start.json" 2>&1 || true
  "$PY" "$HERE/run_trace.py" --aegis "$BUNDLE/bin/aegis" --socket "$WORK/$name.sock" --trace "$RES/mix.csv" \
    --repo "$REPO" --mode "$MODE" --python "$PY" --fakejob "$BUNDLE/bin/aegis-fakejob" --scale "$SCALE" \
    --interval "$(scaled 1)" --deadline-s "$deadline" --policy "$policy" --out "$d" "$@" ||
    log "run_trace ($name) failed; keeping what it wrote"
  "$PY" -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
    "http://127.0.0.1:$port/metrics" > "$d/metrics.txt" 2>&1 || true
  kill "$daemon" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$daemon" 2>/dev/null || true
  wait "$daemon" 2>/dev/null || true
}

# The seconds a phase's jobs are expected to take alone, one after the other (expect_s of the
# trace's rows; with "solo", of the first row of each kind), scaled.
expected_serial() {
  awk -F, -v s="$SCALE" -v solo="$1" 'NR > 1 && (!solo || !seen[$2]++) { t += $7 } END { printf "%d", t * s }' "$RES/mix.csv"
}
makespan_of() {  # a phase's makespan in whole seconds from its jobs.json (submit to last end), else 0
  "$PY" - "$RES/$1/jobs.json" <<'PYEOF' 2>/dev/null || echo 0
import json, sys
jobs = json.load(open(sys.argv[1]))["jobs"]
ends = [j["show"]["ended_at"] for j in jobs if j["show"].get("ended_at")]
print(round(max(ends) - min(j["show"]["submitted_at"] for j in jobs)) if ends else 0)
PYEOF
}

nvml_phase
pack
# The warm-up (run 3, docs/gpu-validation.md): one job of each kind at once, outside aegisd,
# for a few steps, so that the solo phase does not pay alone for reading PyTorch's and
# cuDNN's libraries from disk, which the aegis runs after it then find in the page cache.
log "warm-up: one job of each kind at once, 30 steps, outside aegisd"
mkdir -p "$RES/warmup"
"$PY" "$HERE/run_trace.py" --warm-up 30 --trace "$RES/mix.csv" --repo "$REPO" --mode "$MODE" --python "$PY" \
  --fakejob "$BUNDLE/bin/aegis-fakejob" --scale "$SCALE" --deadline-s "$(scaled 60)" --out "$RES/warmup" ||
  log "warm-up failed; going on (see results/warmup/)"
if [ "$MODE" = emulated ]; then rm -f "$AEGIS_EMULATED_STATE"; fi
pack
# The solo phase gets what its jobs should take one after the other, and half as much again
# (never more than half of what is left): the exclusive policy runs them in turn.
left=$(( BUDGET - $(elapsed) ))
solo=$(( $(expected_serial 1) * 3 / 2 + 10 ))
trace_phase solo exclusive "$(( solo < left / 2 ? solo : left / 2 ))" --solo
pack
# Then the mix under aegis, again while another repeat fits in what is left: each repeat
# gets what is left less a margin, and a further one starts only if what is left covers the
# longest repeat so far by 15 % and 15 s (a repeat cut short by its deadline is no repeat).
# After two repeats, the MPS phase comes before a third one.
longest=0
aegis_repeat() {  # aegis_repeat N: false when no time is left for it
  local rep=$1 left m
  left=$(( BUDGET - $(elapsed) ))
  if [ "$rep" -gt 1 ] && [ $(( longest * 115 / 100 + $(scaled 15 | cut -d. -f1) )) -gt "$left" ]; then
    log "no time for aegis repeat $rep: ${left} s left, the longest repeat took ${longest} s"
    return 1
  fi
  [ "$left" -gt 20 ] || { log "no time left for aegis repeat $rep"; return 1; }
  trace_phase "aegis-$rep" aegis "$(( left - 5 ))"
  m=$(makespan_of "aegis-$rep")
  [ "$m" -gt "$longest" ] && longest=$m
  pack
}
# MPS (docs/sharing.md): the two light kinds under sharing = "mps" with a managed control
# daemon per GPU: does each job get its anchor (NVML reports an MPS job's utilisation against
# the MPS server), its own utilisation history, a limit from what is known of it, and do
# both complete? Needs about twice a light job's expect_s.
mps_phase() {
  local ctl left need
  if [ "$MODE" = emulated ]; then ctl=$BUNDLE/emulated-mps/nvidia-cuda-mps-control
  else ctl=$(command -v nvidia-cuda-mps-control || true)
    [ -n "$ctl" ] || { [ -x /usr/local/nvidia/bin/nvidia-cuda-mps-control ] && ctl=/usr/local/nvidia/bin/nvidia-cuda-mps-control; }
  fi
  [ -n "$ctl" ] && [ -x "$ctl" ] || { log "mps: no nvidia-cuda-mps-control here; phase skipped"; return 0; }
  left=$(( BUDGET - $(elapsed) ))
  need=$(( $(awk -F, -v s="$SCALE" '$2 ~ /_input$/ && !seen[$2]++ { t += $7 } END { printf "%d", t * s }' "$RES/mix.csv") + $(scaled 10 | cut -d. -f1) ))
  [ "$left" -ge "$need" ] || { log "mps: ${left} s left, ${need} s needed; phase skipped"; return 0; }
  mkdir -p "$WORK/mps-pipe"
  PHASE_MPS_CONTROL=$ctl trace_phase mps aegis "$(( left - 5 ))" --solo --kinds cifar_input,dlrm_input --stagger 2
  if [ "$MODE" = real ]; then
    for p in "$WORK"/mps-pipe/*/; do echo quit | CUDA_MPS_PIPE_DIRECTORY=$p "$ctl" 2>/dev/null || true; done
  fi
  pack
}
aegis_repeat 1 && aegis_repeat 2 || true
mps_phase
aegis_repeat 3 || true
"$PY" "$HERE/summarize.py" runs "$RES" > "$OUTDIR/summary.json" || log "summary failed"
cp "$OUTDIR/summary.json" "$RES/summary.json" 2>/dev/null || true
"$PY" "$HERE/summarize.py" headline "$OUTDIR/summary.json" || true
pack
log "done in $(elapsed) s: $OUTDIR/gpu-validation.tar.gz; analyse here with scripts/gpu-validate/compare.py $OUTDIR"
sleep 0.3  # lets tee write the last lines to run.log before the caller collects it
