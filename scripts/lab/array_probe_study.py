#!/usr/bin/env python3
"""Arrays study (docs/lab-policies.md, "Arrays"): probing against plain arrays on the sweep
traces of scripts/make_sweep_traces.py, over seeds and server sizes.

For each published trace's sweep version (data/sweeps/<set>_<t>.csv, with array ids) and a
plain baseline, runs `aegis sim` under the published policy with --seeds N on one server of G
GPUs of 40960 MiB, and prints the mean (min-max) over the seeds of makespan, mean JCT, p95 JCT
and OOM kills, and the change probing makes. The baseline (--plain):
  separate  <set>_<t>_plain.csv: the same jobs without array columns (no probe, no %N cap)
  unprobed  the same array file with `--set array_probe=false` (its %N cap kept, no probe)

  scripts/lab/array_probe_study.py BUILD_DIR [--seeds 16] [--gpus 3,6,12] [--policy aegis]
      [--trace-set sweep] [--plain separate|unprobed] [--set NAME=VALUE ...] [--ranges]
  (--trace-set sweep16x8: the traces of `make_sweep_traces.py --elements 16 --limit 8`)
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLS = {"makespan_s": 2, "jct_mean_s": 4, "jct_p95_s": 5, "oom": 8}  # columns of the text table


def run(aegis, trace, gpus, seeds, policy, extra=()):
    out = subprocess.run([aegis, "sim", "--workloads", "data/aegis/workloads.csv", "--trace", trace,
                          "--gpus", str(gpus), "--gpu-memory", "40960", "--policies", policy, "--threads", "1",
                          "--seeds", str(seeds), *extra], cwd=ROOT, check=True, capture_output=True, text=True).stdout
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
    ap.add_argument("--trace-set", default="sweep", help="file prefix under data/sweeps/ (make_sweep_traces.py)")
    ap.add_argument("--plain", choices=("separate", "unprobed"), default="separate",
                    help="baseline: the _plain twin (separate jobs) or the arrays with array_probe=false")
    ap.add_argument("--traces", default="philly,saturn,venus")
    ap.add_argument("--ranges", action="store_true", help="print each mean with its min-max over the seeds")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a config value for both runs (aegis sim --set), e.g. strict_head_of_line=false")
    a = ap.parse_args()
    aegis = os.path.join(os.path.abspath(a.build), "apps", "aegis", "aegis")
    print(f"| GPUs | sweep trace | makespan s, probing / plain | mean JCT s, probing / plain | p95 JCT s, probing / plain "
          f"| OOM kills, probing / plain |")
    print("|---|---|---|---|---|---|")
    for g in (int(x) for x in a.gpus.split(",")):
        for t in a.traces.split(","):
            arrays = f"data/sweeps/{a.trace_set}_{t}.csv"
            both = [x for kv in a.set for x in ("--set", kv)]
            p = run(aegis, arrays, g, a.seeds, a.policy, both)
            if a.plain == "separate":
                q = run(aegis, f"data/sweeps/{a.trace_set}_{t}_plain.csv", g, a.seeds, a.policy, both)
            else:
                q = run(aegis, arrays, g, a.seeds, a.policy, both + ["--set", "array_probe=false"])
            cells = []
            for c in COLS:
                (pm, plo, phi), (qm, qlo, qhi) = p[c], q[c]
                change = f" ({(pm / qm - 1) * 100:+.1f} %)" if c != "oom" and qm else ""
                fmt = (lambda v: f"{v:.1f}") if c == "oom" else (lambda v: f"{v:.0f}")
                overlap = "" if c == "oom" or phi < qlo or qhi < plo else " ~"
                if a.ranges:
                    cells.append(f"{fmt(pm)} [{fmt(plo)}-{fmt(phi)}] / {fmt(qm)} [{fmt(qlo)}-{fmt(qhi)}]{change}{overlap}")
                else:
                    cells.append(f"{fmt(pm)} / {fmt(qm)}{change}{overlap}")
            print(f"| {g} | {t} | " + " | ".join(cells) + " |")
    print(f"\nMeans over {a.seeds} seeds{' [min-max]' if a.ranges else ''}; `~`: the two min-max ranges overlap. Trace set {a.trace_set}, "
          f"plain = {a.plain}.")


if __name__ == "__main__":
    sys.exit(main())
