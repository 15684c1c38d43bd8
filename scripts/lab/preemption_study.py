#!/usr/bin/env python3
"""Preemption study (docs/lab-policies.md, "Priorities and preemption", "In the simulator").

Builds a trace from the published workloads: the 180 jobs of the three published traces
(data/aegis/trace_{philly,saturn,venus}.csv), in their order, arriving as a Poisson process
(seeded) whose rate offers the 1 x 3 GPU testbed --load times the work it can do alone
(mean solo runtime x GPUs per job / 3 GPUs between arrivals at load 1), a --share of them
(seeded) at priority level 1, the rest at 0. Runs `aegis sim` on the published testbed
(3 x 40 GiB) for each --policies with preemption off, on with jobs that save a checkpoint
when warned (the defaults: 30 s within a 120 s lead), and on with jobs that ignore the
warning and checkpoint every 30 min (sim.checkpoint_save_s=1000,
sim.checkpoint_interval_s=1800). Prints, per run: the high-priority jobs' mean wait (first
launch - submit) and mean JCT, every job's mean JCT, the makespan, preemptions, the most
times one job was preempted, the shortest preempted attempt (launch to stop, seconds: the
warning came that much less its save or lead time after the launch), and work lost. --set NAME=VALUE (repeatable) goes to every run
(e.g. --set preempt_exempt_s=0, the rule without the exemption).

  scripts/lab/preemption_study.py BUILD_DIR [--policies aegis,exclusive] [--share 0.2] [--load 1.0] [--seed 1]
                                  [--set NAME=VALUE ...]
"""
import argparse
import csv
import json
import os
import random
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRACES = ["data/aegis/trace_philly.csv", "data/aegis/trace_saturn.csv", "data/aegis/trace_venus.csv"]
RUNS = [("off", []),
        ("on, saves when warned", ["--set", "sim.preemption=true"]),
        ("on, ignores warning, ckpt/30min", ["--set", "sim.preemption=true", "--set", "sim.checkpoint_save_s=1000",
                                             "--set", "sim.checkpoint_interval_s=1800"])]


def build_trace(path, share, load, seed):
    solo = {}
    with open(os.path.join(ROOT, "data/aegis/workloads.csv")) as f:
        for w in csv.DictReader(f):
            if w["solo_runtime_s"]:
                solo[w["name"]] = float(w["solo_runtime_s"])
    jobs = []
    for t in TRACES:
        with open(os.path.join(ROOT, t)) as f:
            jobs += [(j["workload_name"], int(j["num_gpus"])) for j in csv.DictReader(f)]
    work = sum(solo[w] * g for w, g in jobs) / len(jobs)
    gap = work / 3 / load  # mean seconds between arrivals
    rng = random.Random(seed)
    level, t = {}, 0.0
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["job_index", "submit_time_s", "workload_name", "num_gpus", "priority"])
        for i, (w, g) in enumerate(jobs):
            level[i] = 1 if rng.random() < share else 0
            out.writerow([i, f"{t:.3f}", w, g, level[i]])
            t += rng.expovariate(1 / gap)
    return level, gap


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--policies", default="aegis,exclusive")
    ap.add_argument("--share", type=float, default=0.2, help="share of jobs at level 1")
    ap.add_argument("--load", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--set", action="append", default=[], help="NAME=VALUE for every run")
    a = ap.parse_args()
    aegis = os.path.join(os.path.abspath(a.build), "apps", "aegis", "aegis")
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "priorities.csv")
        level, gap = build_trace(trace, a.share, a.load, a.seed)
        high = sum(level.values())
        print(f"{len(level)} jobs, {high} at level 1, mean gap {gap:.0f} s, seed {a.seed}")
        print(f"{'policy':<10} {'preemption':<32} {'hi wait':>8} {'hi JCT':>8} {'all JCT':>8} {'makespan':>9} "
              f"{'preempt':>7} {'max/job':>7} {'min run':>7} {'lost GPU-s':>10}")
        for policy in a.policies.split(","):
            for label, sets in RUNS:
                js, jobs_csv = os.path.join(tmp, "out.json"), os.path.join(tmp, "jobs.csv")
                subprocess.run([aegis, "sim", "--workloads", "data/aegis/workloads.csv", "--trace", trace, "--gpus", "3",
                                "--gpu-memory", "40960", "--policies", policy, "--threads", "1", "--json", js,
                                "--jobs-csv", jobs_csv, *sets, *[x for kv in a.set for x in ("--set", kv)]], cwd=ROOT, check=True, capture_output=True, text=True)
                m = json.load(open(js))["results"][0]
                first, preempted, runs = {}, {}, []
                for r in csv.DictReader(open(jobs_csv)):
                    i = int(r["job_index"])
                    first[i] = (float(r["submit_s"]), float(r["first_launch_s"]), float(r["end_s"]))
                    preempted[i] = preempted.get(i, 0) + (r["outcome"] == "preempted")
                    if r["outcome"] == "preempted":
                        runs.append(float(r["attempt_end_s"]) - float(r["launch_s"]))
                hi = [first[i] for i in first if level[i] == 1]
                wait = sum(f - s for s, f, _ in hi) / len(hi)
                jct = sum(e - s for s, _, e in hi) / len(hi)
                print(f"{policy:<10} {label:<32} {wait:>8.0f} {jct:>8.0f} {m['jct_mean_s']:>8.0f} {m['makespan_s']:>9.0f} "
                      f"{m.get('preemptions', 0):>7} {max(preempted.values()):>7} {min(runs) if runs else 0:>7.0f} "
                      f"{m.get('work_lost_gpu_s', 0):>10.0f}")


if __name__ == "__main__":
    main()
