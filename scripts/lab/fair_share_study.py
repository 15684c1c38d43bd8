#!/usr/bin/env python3
"""Fair-share study (docs/lab-policies.md, "Fair share"): two users' bursts, weights 2:1.

Builds a trace from a published one (data/aegis/trace_philly.csv: its 60 jobs, the
published workloads): user `alice` submits all 60 (times --copies) in a burst, one a
second, and user `bob` the same jobs half a second after each of hers, so that both users have the same work and are both
backlogged from the start. Runs `aegis sim` on the published testbed (3 x 40 GiB) with
and without `fair_share_users=alice:2,bob:1`, and measures each user's share of the
charged GPU-seconds (the lifecycle's charge: booked memory over capacity per GPU, a whole
GPU when placed exclusive, times time) while both users still have jobs waiting, i.e. up
to the first launch of the last job of the user whose queue empties first. Over the whole
run the shares are 1:1 by construction (equal work), so only that window says anything.

  scripts/lab/fair_share_study.py BUILD_DIR [--policy aegis] [--weights alice:2,bob:1] [--copies 1] [--seed 1]
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build_trace(path, source, copies):
    with open(source) as f:
        jobs = list(csv.DictReader(f)) * copies
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["job_index", "submit_time_s", "workload_name", "num_gpus", "user"])
        n = 0
        for k, j in enumerate(jobs):  # each user's burst: one job a second, bob's half a second after alice's
            for user, offset in (("alice", 0.0), ("bob", 0.5)):
                w.writerow([n, k + offset, j["workload_name"], j["num_gpus"], user])
                n += 1
    return {i: ("alice" if i % 2 == 0 else "bob") for i in range(n)}


def window_shares(jobs_csv, user_of, gpu_mib):
    rows = list(csv.DictReader(open(jobs_csv)))
    last_start = {}
    for r in rows:
        u = user_of[int(r["job_index"])]
        last_start[u] = max(last_start.get(u, 0.0), float(r["first_launch_s"]))
    end = min(last_start.values())  # after it one user has nothing waiting
    charged = {u: 0.0 for u in last_start}
    for r in rows:
        launch, stop = float(r["launch_s"]), min(float(r["attempt_end_s"]), end)
        if stop <= launch:
            continue
        gpus = len(r["gpus"].split(";")) if r["gpus"] else 0
        each = 1.0 if r["exclusive"] == "1" else min(1.0, float(r["admitted_mib"]) / gpu_mib)
        charged[user_of[int(r["job_index"])]] += gpus * each * (stop - launch)
    total = sum(charged.values())
    return end, {u: c / total for u, c in charged.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--policy", default="aegis")
    ap.add_argument("--weights", default="alice:2,bob:1")
    ap.add_argument("--copies", type=int, default=1, help="each user submits the 60 jobs this many times")
    ap.add_argument("--seed", type=int, default=1, help="the simulator's seed (first-activity delays, telemetry noise)")
    a = ap.parse_args()
    aegis = os.path.join(os.path.abspath(a.build), "apps", "aegis", "aegis")
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "two_users.csv")
        user_of = build_trace(trace, os.path.join(ROOT, "data/aegis/trace_philly.csv"), a.copies)
        for label, sets in (("FIFO (no weights)", []), (f"fair share {a.weights}", ["--set", f"fair_share_users={a.weights}"])):
            jobs_csv = os.path.join(tmp, "jobs.csv")
            out = subprocess.run([aegis, "sim", "--workloads", "data/aegis/workloads.csv", "--trace", trace, "--gpus", "3",
                                  "--gpu-memory", "40960", "--policies", a.policy, "--threads", "1", "--seed", str(a.seed), "--jobs-csv", jobs_csv,
                                  *sets], cwd=ROOT, check=True, capture_output=True, text=True).stdout
            whole = [line.strip() for line in out.splitlines() if "user GPU shares" in line]
            end, shares = window_shares(jobs_csv, user_of, 40960)
            ratio = shares["alice"] / shares["bob"]
            print(f"{a.policy}, {label}: while both wait (0-{end:.0f} s): alice {shares['alice']:.3f}, "
                  f"bob {shares['bob']:.3f}, ratio {ratio:.2f}; whole run: {whole[0] if whole else '-'}")


if __name__ == "__main__":
    sys.exit(main())
