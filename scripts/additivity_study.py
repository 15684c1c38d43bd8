#!/usr/bin/python3
"""Is a GPU-sharing pair's activity the sum of its jobs' solo activities? Tested on Lucid's
measured pairs (data/interference/lucid_colocate_info.csv, one RTX 3090) against the same
jobs' solo profiles (lucid_single_data.csv); docs/estimators.md, "Additivity".

    python3 scripts/additivity_study.py [--dir data/interference]

For every pair whose two jobs have a solo profile (model, dataset, batch size, AMP), the
pair's measured utilisation (`gpu_util`, %), memory-bandwidth utilisation (`gmem_util`, %)
and memory (`gmem`, MiB) are compared with four rules of combining the solo figures:
  sum            u1 + u2, capped at 100 %
  speed-weighted s1 u1 + s2 u2 (s = each job's measured speed relative to alone), capped:
                 the emulated GPU's rule (docs/emulated-gpu.md)
  max            max(u1, u2)
  union          1 - (1 - u1)(1 - u2): independent busy periods overlapping by chance
Prints the mean absolute error and the mean signed error (combined - measured) of each.
Standard library only; deterministic.
"""
import argparse
import csv
import os
import statistics

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def key(row, i=""):
    return (row["model" + i], row["dataset" + i], row["batchsize" + i], row["amp" + i])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dir", default=os.path.join(ROOT, "data/interference"))
    args = p.parse_args()
    with open(os.path.join(args.dir, "lucid_single_data.csv")) as f:
        solo = {key(r): r for r in csv.DictReader(f)}
    with open(os.path.join(args.dir, "lucid_colocate_info.csv")) as f:
        pairs = list(csv.DictReader(f))
    rules = {
        "sum": lambda a, b, s1, s2: min(100.0, a + b),
        "speed-weighted sum": lambda a, b, s1, s2: min(100.0, s1 * a + s2 * b),
        "max": lambda a, b, s1, s2: max(a, b),
        "union": lambda a, b, s1, s2: 100.0 * (1 - (1 - a / 100) * (1 - b / 100)),
    }
    errors = {(m, r): [] for m in ("gpu_util", "gmem_util") for r in rules}
    mem = []
    used = 0
    for pr in pairs:
        a, b = solo.get(key(pr, "1")), solo.get(key(pr, "2"))
        if a is None or b is None:
            continue
        used += 1
        s1, s2 = float(pr["speed1"]), float(pr["speed2"])
        for metric in ("gpu_util", "gmem_util"):
            measured = float(pr[metric])
            for name, rule in rules.items():
                errors[(metric, name)].append(rule(float(a[metric]), float(b[metric]), s1, s2) - measured)
        mem.append(float(a["gmem"]) + float(b["gmem"]) - float(pr["gmem"]))
    print(f"{used} of {len(pairs)} pairs have both jobs' solo profiles")
    print(f"{'metric':<10} {'rule':<20} {'MAE (points)':>12} {'mean error':>11}")
    for (metric, name), e in errors.items():
        print(f"{metric:<10} {name:<20} {statistics.fmean(abs(x) for x in e):>12.1f} {statistics.fmean(e):>11.1f}")
    print(f"memory: sum of solo MiB - pair MiB: mean {statistics.fmean(mem):.0f}, "
          f"median {statistics.median(mem):.0f}, MAE {statistics.fmean(abs(x) for x in mem):.0f} MiB")


if __name__ == "__main__":
    main()
