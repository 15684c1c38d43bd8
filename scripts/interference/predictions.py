#!/usr/bin/env python3
"""The simulator's aegis/exclusive makespan on the three published traces under the
configurations of docs/interference.md ("Predictions"), over several seeds.

Usage: scripts/interference/predictions.py [AEGIS_BINARY] [--seeds 1,2,3,4,5] [--set sim.X=Y ...]
Prints one markdown row per configuration: per trace and geomean, the mean over seeds and
the spread (min-max). Every run is `aegis sim ... --policies exclusive,aegis --seed S`."""
import json, math, os, subprocess, sys, tempfile

args = sys.argv[1:]
binary = "build/apps/aegis/aegis"
if args and not args[0].startswith("--"):
    binary = args.pop(0)
seeds, extra = [1, 2, 3, 4, 5], []
while args:
    a = args.pop(0)
    if a == "--seeds":
        seeds = [int(s) for s in args.pop(0).split(",")]
    elif a == "--set":
        extra += ["--set", args.pop(0)]
    else:
        sys.exit(f"unknown argument {a}")

BASE = [binary, "sim", "--workloads", "data/aegis/workloads.csv",
        "--trace", "data/aegis/trace_philly.csv", "--trace", "data/aegis/trace_saturn.csv",
        "--trace", "data/aegis/trace_venus.csv", "--gpus", "3", "--gpu-memory", "40960",
        "--policies", "exclusive,aegis", "--threads", "1"]
OFF = ["--set", "smact_threshold=999", "--set", "smocc_threshold=999", "--set", "drama_threshold=999"]
CONFIGS = [
    ("filter off, magm", OFF + ["--set", "aegis.order=magm"]),
    ("filter off, lug", OFF + ["--set", "aegis.order=lug"]),
    ("defaults, magm", ["--set", "aegis.order=magm"]),
    ("defaults, lug", ["--set", "aegis.order=lug"]),
    ("defaults, ff", ["--set", "aegis.order=ff"]),
    ("thresholds 0.50/0.20/0.40", ["--set", "smact_threshold=0.50", "--set", "smocc_threshold=0.20",
                                    "--set", "drama_threshold=0.40"]),
]
TRACES = ["trace_philly", "trace_saturn", "trace_venus"]


def run(cfg, seed):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "o.json")
        subprocess.run(BASE + cfg + extra + ["--seed", str(seed), "--json", out], check=True,
                       stdout=subprocess.DEVNULL)
        res = json.load(open(out))["results"]
    ms = {(r["policy"], r["trace"]): r["makespan_s"] for r in res}
    ratios = [ms[("aegis", t)] / ms[("exclusive", t)] for t in TRACES]
    return ratios + [math.exp(sum(math.log(x) for x in ratios) / 3)]


print(f"seeds {','.join(map(str, seeds))}; cell = mean (min-max) of aegis/exclusive makespan")
print("| configuration | philly | saturn | venus | geomean |")
print("|---|---|---|---|---|")
for name, cfg in CONFIGS:
    rows = [run(cfg, s) for s in seeds]
    cells = []
    for k in range(4):
        xs = [r[k] for r in rows]
        cells.append(f"{sum(xs) / len(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})")
    print(f"| {name} | " + " | ".join(cells) + " |")
