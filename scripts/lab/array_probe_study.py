#!/usr/bin/env python3
"""Arrays study (docs/lab-policies.md, "Arrays"): probing against plain arrays on the sweep
traces of scripts/make_sweep_traces.py, over seeds and server sizes.

For each published trace's sweep version (data/sweeps/sweep_<t>.csv, with array ids) and its
plain twin (sweep_<t>_plain.csv, the same jobs without), runs `aegis sim` under the published
policy with --seeds N on one server of G GPUs of 40960 MiB, and prints the mean (min-max) over
the seeds of makespan, mean JCT, p95 JCT and OOM kills, and the change probing makes.

  scripts/lab/array_probe_study.py BUILD_DIR [--seeds 16] [--gpus 3,6,12] [--policy aegis]
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLS = {"makespan_s": 2, "jct_mean_s": 4, "jct_p95_s": 5, "oom": 8}  # columns of the text table


def run(aegis, trace, gpus, seeds, policy):
    out = subprocess.run([aegis, "sim", "--workloads", "data/aegis/workloads.csv", "--trace", trace,
                          "--gpus", str(gpus), "--gpu-memory", "40960", "--policies", policy, "--threads", "1",
                          "--seeds", str(seeds)], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    lines = out.splitlines()
    i = next(k for k, l in enumerate(lines) if l.split() and l.split()[0] == policy)
    rows = [lines[i].split(), lines[i + 1].split(), lines[i + 2].split()] if seeds > 1 else [lines[i].split()] * 3
    return {c: tuple(float(r[k]) for r in rows) for c, k in COLS.items()}  # (mean, min, max)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--seeds", type=int, default=16)
    ap.add_argument("--gpus", default="3,6,12")
    ap.add_argument("--policy", default="aegis")
    a = ap.parse_args()
    aegis = os.path.join(os.path.abspath(a.build), "apps", "aegis", "aegis")
    print(f"| GPUs | sweep trace | makespan s, probing / plain | mean JCT s, probing / plain | p95 JCT s, probing / plain "
          f"| OOM kills, probing / plain |")
    print("|---|---|---|---|---|---|")
    for g in (int(x) for x in a.gpus.split(",")):
        for t in ("philly", "saturn", "venus"):
            p = run(aegis, f"data/sweeps/sweep_{t}.csv", g, a.seeds, a.policy)
            q = run(aegis, f"data/sweeps/sweep_{t}_plain.csv", g, a.seeds, a.policy)
            cells = []
            for c in COLS:
                (pm, plo, phi), (qm, qlo, qhi) = p[c], q[c]
                change = f" ({(pm / qm - 1) * 100:+.1f} %)" if c != "oom" and qm else ""
                fmt = (lambda v: f"{v:.1f}") if c == "oom" else (lambda v: f"{v:.0f}")
                overlap = "" if c == "oom" or phi < qlo or qhi < plo else " ~"
                cells.append(f"{fmt(pm)} / {fmt(qm)}{change}{overlap}")
            print(f"| {g} | {t} | " + " | ".join(cells) + " |")
    print(f"\nMeans over {a.seeds} seeds; `~`: the two min-max ranges overlap.")


if __name__ == "__main__":
    sys.exit(main())
