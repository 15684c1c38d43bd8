#!/usr/bin/env python3
"""Sweep-heavy traces for the arrays study (docs/lab-policies.md, "Arrays"; issue 32 item 3).

Each job of a published 60-job trace (data/aegis/trace_{philly,saturn,venus}.csv) becomes a
sweep: an array of ELEMENTS jobs of its workload (same GPU count), submitted at its time, as
`aegis submit --array 0-N -- python train.py --seed {i}` would. Two files per trace, equal but
for the `array_id` column: `sweep_<trace>.csv` (with it: the lifecycle probes element 0) and
`sweep_<trace>_plain.csv` (without: the same jobs, each on its own).

  python3 scripts/make_sweep_traces.py [ELEMENTS]   (default 4; writes data/sweeps/)
"""
import csv
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    elements = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    out_dir = os.path.join(ROOT, "data", "sweeps")
    os.makedirs(out_dir, exist_ok=True)
    for name in ("philly", "saturn", "venus"):
        with open(os.path.join(ROOT, "data", "aegis", f"trace_{name}.csv")) as f:
            jobs = list(csv.DictReader(f))
        rows = []
        for j in jobs:
            first = len(rows)
            for _ in range(elements):
                rows.append({"job_index": len(rows), "submit_time_s": j["submit_time_s"],
                             "workload_name": j["workload_name"], "num_gpus": j["num_gpus"], "array_id": first})
        for suffix, cols in (("", ["job_index", "submit_time_s", "workload_name", "num_gpus", "array_id"]),
                             ("_plain", ["job_index", "submit_time_s", "workload_name", "num_gpus"])):
            path = os.path.join(out_dir, f"sweep_{name}{suffix}.csv")
            with open(path, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
                w.writeheader()
                w.writerows(rows)
            print(f"{path}: {len(rows)} jobs ({len(jobs)} sweeps of {elements})")


if __name__ == "__main__":
    main()
