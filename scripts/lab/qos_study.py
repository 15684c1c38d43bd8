#!/usr/bin/env python3
"""QoS study (docs/lab-policies.md, "Priorities and preemption", "Alibaba qos levels").

Runs `aegis sim` on the Alibaba GPU-sharing pods (data/traces/alibaba-gpu-2023/
openb_pod_list_default.csv) on the README's cluster (--gpu-memory 1x8x40960,1x8x81920,
--load 1.5 by default) for each --policies: without qos levels, with them
(--alibaba-qos-priority: LS and Guaranteed 2, Burstable 1, BE 0) and preemption off, and
with them and preemption on (sim.preemption=true, the default checkpoint model: jobs save
when warned). Prints, per run and qos class: the pods, their mean and 95th-percentile wait
(first launch - arrival) and mean JCT, in hours; then the run's preemptions, the attempts
stopped by level, the work lost, and the pod preempted most (times, its name, GPUs and
class). A pod's class is its row's `qos` (job_index is the
data row). --set NAME=VALUE (repeatable) goes to every run.

  scripts/lab/qos_study.py BUILD_DIR [--policies exclusive,aegis] [--load 1.5] [--seed 1] [--set NAME=VALUE ...]
"""
import argparse
import csv
import json
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRACE = "data/traces/alibaba-gpu-2023/openb_pod_list_default.csv"
CLASSES = ["LS", "Guaranteed", "Burstable", "BE"]
RUNS = [("qos off", []),
        ("qos on, preemption off", ["--alibaba-qos-priority"]),
        ("qos on, preemption on", ["--alibaba-qos-priority", "--set", "sim.preemption=true"])]


def p95(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.95 * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--policies", default="exclusive,aegis")
    ap.add_argument("--load", type=float, default=1.5)
    ap.add_argument("--gpu-memory", default="1x8x40960,1x8x81920")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--set", action="append", default=[], help="NAME=VALUE for every run")
    a = ap.parse_args()
    aegis = os.path.join(os.path.abspath(a.build), "apps", "aegis", "aegis")
    with open(os.path.join(ROOT, TRACE)) as f:
        pods = list(csv.DictReader(f))
    qos = {i: row["qos"] for i, row in enumerate(pods)}
    print(f"{TRACE}, --gpu-memory {a.gpu_memory} --load {a.load}, seed {a.seed}; hours")
    print(f"{'policy':<10} {'run':<24} {'class':<10} {'pods':>5} {'wait':>8} {'wait p95':>8} {'JCT':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for policy in a.policies.split(","):
            for label, opts in RUNS:
                js, jobs_csv = os.path.join(tmp, "out.json"), os.path.join(tmp, "jobs.csv")
                subprocess.run([aegis, "sim", "--trace", TRACE, "--gpu-memory", a.gpu_memory, "--load", str(a.load),
                                "--seed", str(a.seed), "--policies", policy, "--json", js, "--jobs-csv", jobs_csv,
                                *opts, *[x for kv in a.set for x in ("--set", kv)]],
                               cwd=ROOT, check=True, capture_output=True, text=True)
                m = json.load(open(js))["results"][0]
                jobs, preempted = {}, {}
                for r in csv.DictReader(open(jobs_csv)):
                    i = int(r["job_index"])
                    jobs[i] = (float(r["submit_s"]), float(r["first_launch_s"]), float(r["end_s"]))
                    preempted[i] = preempted.get(i, 0) + (r["outcome"] == "preempted")
                for c in CLASSES:
                    mine = [jobs[i] for i in jobs if qos[i] == c]
                    if not mine:
                        continue
                    waits = [(f - s) / 3600 for s, f, _ in mine]
                    jct = sum(e - s for s, _, e in mine) / len(mine) / 3600
                    print(f"{policy:<10} {label:<24} {c:<10} {len(mine):>5} {sum(waits) / len(waits):>8.1f} "
                          f"{p95(waits):>8.1f} {jct:>8.1f}")
                if "preemptions" in m:
                    print(f"{policy:<10} {label:<24} preemptions {m['preemptions']}, stopped by level "
                          f"{m.get('preempted_by_level', {})}, work lost {m['work_lost_gpu_s'] / 3600:.0f} GPU-h")
                    most = max(preempted, key=lambda i: (preempted[i], -i))
                    if preempted[most]:
                        p = pods[most]
                        print(f"{policy:<10} {label:<24} most preempted: {preempted[most]} times, {p['name']} "
                              f"({p['num_gpu']} GPUs, {p['qos']}); pods preempted: "
                              f"{sum(1 for n in preempted.values() if n)}")


if __name__ == "__main__":
    main()
