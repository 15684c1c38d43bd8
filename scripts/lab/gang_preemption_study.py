#!/usr/bin/env python3
"""Preemption for jobs larger than one server (docs/lab-policies.md, "Priorities and
preemption", "Jobs larger than a server").

A study trace, not a measured one: Philly's jobs (data/traces/philly/philly_jobs.csv) with a
`priority` column derived here. A job is at level 1 when the first 8 bytes of
sha256("SEED:ROW") (ROW: its 0-based data row in the file, the simulator's job_index), read
as a big-endian integer over 2^64, fall below --share; every other job is at level 0.
Runs `aegis sim` on the first --max-jobs jobs (by submit time) on --servers x 8 GPUs, for
each --policies, with preemption off and on (jobs save a checkpoint when warned: the
defaults), and prints per run: how many level-1 jobs larger than one server there are,
their mean wait (first launch - submit), every level-1 job's mean wait, every job's mean
JCT, the makespan, preemptions, work lost and the run's wall time.

  scripts/lab/gang_preemption_study.py BUILD_DIR [--policies exclusive] [--share 0.2] [--seed 1]
                                       [--max-jobs 10000] [--servers 64] [--set NAME=VALUE ...]
"""
import argparse
import csv
import hashlib
import json
import os
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PHILLY = os.path.join(ROOT, "data/traces/philly/philly_jobs.csv")
GPUS_PER_SERVER = 8


def level_of(row, seed, share):
    h = hashlib.sha256(f"{seed}:{row}".encode()).digest()
    return 1 if int.from_bytes(h[:8], "big") / 2**64 < share else 0


def build_trace(path, seed, share):
    """The Philly file with a priority column; returns {row: (level, num_gpus)}."""
    jobs = {}
    with open(PHILLY) as src, open(path, "w") as out:
        out.write(src.readline().rstrip("\r\n") + ",priority\n")
        row = 0
        for line in src:
            line = line.rstrip("\r\n")
            if not line:
                continue
            level = level_of(row, seed, share)
            jobs[row] = (level, int(float(line.split(",")[2])))
            out.write(f"{line},{level}\n")
            row += 1
    return jobs


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--policies", default="exclusive")
    ap.add_argument("--share", type=float, default=0.2, help="share of jobs at level 1")
    ap.add_argument("--seed", type=int, default=1, help="seed of the level hash")
    ap.add_argument("--max-jobs", type=int, default=10000)
    ap.add_argument("--servers", type=int, default=64)
    ap.add_argument("--set", action="append", default=[], help="NAME=VALUE for every run")
    a = ap.parse_args()
    aegis = os.path.join(os.path.abspath(a.build), "apps", "aegis", "aegis")
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "philly_priority.csv")
        jobs = build_trace(trace, a.seed, a.share)
        print(f"{a.max_jobs} Philly jobs, {a.servers} x {GPUS_PER_SERVER} GPUs, level 1: share {a.share}, seed {a.seed}")
        print(f"{'policy':<10} {'preemption':<10} {'gang L1':>7} {'gang L1 wait':>12} {'L1 wait':>9} {'all JCT':>9} "
              f"{'makespan':>10} {'preempt':>7} {'lost GPU-s':>10} {'wall s':>7}")
        for policy in a.policies.split(","):
            for label, sets in [("off", []), ("on", ["--set", "sim.preemption=true"])]:
                js, jobs_csv = os.path.join(tmp, "out.json"), os.path.join(tmp, "jobs.csv")
                began = time.monotonic()
                subprocess.run([aegis, "sim", "--trace", trace, "--trace-format", "philly", "--max-jobs", str(a.max_jobs),
                                "--servers", str(a.servers), "--gpus-per-server", str(GPUS_PER_SERVER),
                                "--policies", policy, "--threads", "1", "--json", js, "--jobs-csv", jobs_csv, *sets,
                                *[x for kv in a.set for x in ("--set", kv)]],
                               cwd=ROOT, check=True, capture_output=True, text=True)
                wall = time.monotonic() - began
                m = json.load(open(js))["results"][0]
                wait = {}
                for r in csv.DictReader(open(jobs_csv)):
                    wait[int(r["job_index"])] = float(r["first_launch_s"]) - float(r["submit_s"])
                hi = [i for i in wait if jobs[i][0] == 1]
                gang = [i for i in hi if jobs[i][1] > GPUS_PER_SERVER]
                print(f"{policy:<10} {label:<10} {len(gang):>7} {mean([wait[i] for i in gang]):>12.0f} "
                      f"{mean([wait[i] for i in hi]):>9.0f} {m['jct_mean_s']:>9.0f} {m['makespan_s']:>10.0f} "
                      f"{m.get('preemptions', 0):>7} {m.get('work_lost_gpu_s', 0):>10.0f} {wall:>7.1f}")


if __name__ == "__main__":
    main()
