#!/usr/bin/env python3
"""Sweep-heavy traces for the arrays study (docs/lab-policies.md, "Arrays"; issue 32 item 3).

Each job of a published 60-job trace (data/aegis/trace_{philly,saturn,venus}.csv) becomes a
sweep: an array of ELEMENTS jobs of its workload (same GPU count), submitted at its time, as
`aegis submit --array 0-<ELEMENTS-1>[%LIMIT] -- python train.py --seed {i}` would. Two files
per trace, equal but for the array columns: `<prefix>_<trace>.csv` (with `array_id`, and
`array_limit` when --limit is given: the lifecycle probes element 0 and caps the array) and
`<prefix>_<trace>_plain.csv` (without: the same jobs, each on its own).

  python3 scripts/make_sweep_traces.py [ELEMENTS]        (default 4: sweep_<t>.csv, as published)
  python3 scripts/make_sweep_traces.py --elements 16 --limit 8
      the issue's shape (`--array 0-N%8`): writes sweep16x8_<t>.csv and sweep16x8_<t>_plain.csv
  python3 scripts/make_sweep_traces.py --elements 50 --limit 8 --every 3
      only every 3rd published job becomes a sweep (20 sweeps of 50: 1000 jobs per trace)

Without --prefix, files are named sweep<ELEMENTS>x<LIMIT> (sweep<ELEMENTS> without a limit,
`_every<K>` appended when K > 1); the default call keeps the published names (`sweep`).
"""
import argparse
import csv
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_prefix(elements, limit, every):
    if elements == 4 and limit == 0 and every == 1:
        return "sweep"  # the published 4-element study's files
    name = f"sweep{elements}" + (f"x{limit}" if limit else "")
    return name + (f"_every{every}" if every > 1 else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("elements_pos", nargs="?", type=int, metavar="ELEMENTS")
    ap.add_argument("--elements", type=int, help="jobs per sweep (default 4)")
    ap.add_argument("--limit", type=int, default=0, help="the array's %%N cap (0: none; written as array_limit)")
    ap.add_argument("--every", type=int, default=1, help="only every K-th published job becomes a sweep")
    ap.add_argument("--prefix", help="file name prefix under data/sweeps/")
    a = ap.parse_args()
    elements = a.elements or a.elements_pos or 4
    if elements < 1 or a.limit < 0 or a.every < 1:
        ap.error("--elements and --every must be at least 1, --limit at least 0")
    prefix = a.prefix or default_prefix(elements, a.limit, a.every)
    out_dir = os.path.join(ROOT, "data", "sweeps")
    os.makedirs(out_dir, exist_ok=True)
    for name in ("philly", "saturn", "venus"):
        with open(os.path.join(ROOT, "data", "aegis", f"trace_{name}.csv")) as f:
            jobs = list(csv.DictReader(f))[::a.every]
        rows = []
        for j in jobs:
            first = len(rows)
            for _ in range(elements):
                rows.append({"job_index": len(rows), "submit_time_s": j["submit_time_s"],
                             "workload_name": j["workload_name"], "num_gpus": j["num_gpus"], "array_id": first,
                             "array_limit": a.limit})
        plain = ["job_index", "submit_time_s", "workload_name", "num_gpus"]
        arrays = plain + ["array_id"] + (["array_limit"] if a.limit else [])
        for suffix, cols in (("", arrays), ("_plain", plain)):
            path = os.path.join(out_dir, f"{prefix}_{name}{suffix}.csv")
            with open(path, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
                w.writeheader()
                w.writerows(rows)
            print(f"{path}: {len(rows)} jobs ({len(jobs)} sweeps of {elements})")


if __name__ == "__main__":
    main()
