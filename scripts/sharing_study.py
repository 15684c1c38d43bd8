#!/usr/bin/env python3
"""The sharing study of docs/sharing.md: on the three published traces, aegis with plain
process sharing, with MPS (with and without per-job memory limits), and exclusive on a
static MIG layout, against exclusive on whole GPUs. Prints a Markdown table.
Usage: scripts/sharing_study.py [BUILD_DIR] [MIG_LAYOUT]
"""
import json
import math
import os
import subprocess
import sys
import tempfile

build = sys.argv[1] if len(sys.argv) > 1 else "build"
layout = sys.argv[2] if len(sys.argv) > 2 else "3g.20gb,2g.10gb,1g.5gb,1g.5gb"
aegis = os.path.join(build, "apps/aegis/aegis")
traces = [f"data/aegis/trace_{t}.csv" for t in ("philly", "saturn", "venus")]
variants = [
    ("exclusive, whole GPUs", "exclusive", "process"),
    ("aegis, processes", "aegis", "process"),
    ("aegis, MPS with memory limits", "aegis", "mps"),
    ("aegis, MPS without limits", "aegis", "mps-nolimits"),
    ("aegis-horus (analytical estimate), processes", "aegis-horus", "process"),
    ("aegis-horus, MPS with memory limits", "aegis-horus", "mps"),
    ("aegis-peak (profiled peak), MPS with memory limits", "aegis-peak", "mps"),
    ("naive, processes", "naive", "process"),
    ("naive, MPS with memory limits", "naive", "mps"),
    (f"exclusive, MIG {layout}", "exclusive", "mig:" + layout),
    (f"aegis, MIG {layout}", "aegis", "mig:" + layout),
]
results = {}
with tempfile.TemporaryDirectory() as tmp:
    for label, policy, sharing in variants:
        out = os.path.join(tmp, "r.json")
        args = [aegis, "sim", "--policies", policy, "--sharing", sharing, "--json", out]
        for t in traces:
            args += ["--trace", t]
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
        results[label] = {r["trace"]: r for r in json.load(open(out))["results"]}

base = results["exclusive, whole GPUs"]
print("| variant | makespan / exclusive (geomean) | mean JCT / exclusive | OOM attempts | neighbour OOM deaths | died at own MPS limit | jobs that could not run |")
print("|---|---|---|---|---|---|---|")
for label, _, _ in variants:
    r = results[label]
    gm = lambda k: math.exp(sum(math.log(r[t][k] / base[t][k]) for t in base) / len(base))
    total = lambda k: sum(r[t][k] for t in r)
    print(f"| {label} | {gm('makespan_s'):.3f} | {gm('jct_mean_s'):.3f} | {total('oom_attempts')} | "
          f"{total('neighbour_oom_attempts')} | {total('mps_limit_attempts')} | {total('stopped')} |")
