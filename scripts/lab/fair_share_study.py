#!/usr/bin/env python3
"""Fair-share study (docs/lab-policies.md, "Fair share"): two users' bursts, weights 2:1.

Builds a trace from a published one (data/aegis/trace_philly.csv: its 60 jobs, the
published workloads): user `alice` submits all 60 (times --copies) in a burst, one a
second, and user `bob` the same jobs half a second after each of hers, so that both users have the same work and are both
backlogged from the start. Runs `aegis sim` on the published testbed (3 x 40 GiB) with
and without `fair_share_users=alice:2,bob:1`, and measures each user's share while both
users still have jobs waiting, i.e. up to the first launch of the last job of the user
whose queue empties first, by two yardsticks:
- charged: the lifecycle's charge under `--charge` (fair_share_charge): `booked`, booked
  memory over capacity per GPU (a whole GPU when placed exclusive) times time; `occupied`,
  each GPU's busy time split among the jobs on it by their bookings;
- occupied: each GPU's busy time split equally among the users with a job on it (what
  each user kept from the others, whatever the charge).
Over the whole run the shares are 1:1 by construction (equal work), so only that window
says anything.

  scripts/lab/fair_share_study.py BUILD_DIR [--policy aegis] [--charge booked] [--weights alice:2,bob:1]
                                  [--copies 1] [--seed 1] [--trace data/aegis/trace_philly.csv] [--set KEY=VALUE ...]
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


def window_shares(jobs_csv, user_of, gpu_mib, charge):
    """Each user's share (charged, occupied) of the window, and the window's end."""
    rows = list(csv.DictReader(open(jobs_csv)))
    last_start = {}
    for r in rows:
        u = user_of[int(r["job_index"])]
        last_start[u] = max(last_start.get(u, 0.0), float(r["first_launch_s"]))
    end = min(last_start.values())  # after it one user has nothing waiting
    charged = {u: 0.0 for u in last_start}
    occupied = {u: 0.0 for u in last_start}
    events = {}  # GPU -> [(time, +1 start / -1 end, user, booked MiB)]
    for r in rows:
        launch, stop = float(r["launch_s"]), min(float(r["attempt_end_s"]), end)
        if stop <= launch:
            continue
        user = user_of[int(r["job_index"])]
        gpus = r["gpus"].split(";") if r["gpus"] else []
        each = 1.0 if r["exclusive"] == "1" else min(1.0, float(r["admitted_mib"]) / gpu_mib)
        if charge == "booked":
            charged[user] += len(gpus) * each * (stop - launch)
        for g in gpus:
            events.setdefault(g, []).extend([(launch, 1, user, float(r["admitted_mib"])),
                                             (stop, -1, user, float(r["admitted_mib"]))])
    # Each GPU swept in time order (ends first at one instant): who is on it between events.
    for evs in events.values():
        evs.sort(key=lambda e: (e[0], e[1]))
        on = {}  # user -> [booked MiB, jobs]
        prev = None
        for t, sign, user, mib in evs:
            if prev is not None and t > prev and on:
                dt = t - prev
                booked = sum(b for b, _ in on.values())
                jobs = sum(n for _, n in on.values())
                for u, (b, n) in on.items():
                    occupied[u] += dt / len(on)
                    if charge == "occupied":
                        charged[u] += dt * (b / booked if booked > 0 else n / jobs)
            prev = t
            b, n = on.get(user, [0.0, 0])
            b, n = b + sign * mib, n + sign
            if n > 0:
                on[user] = [b, n]
            else:
                on.pop(user, None)
    share = lambda d: {u: c / sum(d.values()) for u, c in d.items()}
    return end, share(charged), share(occupied)


def default_charge(aegis, policy):
    """The policy's fair_share_charge, as `aegis config` says."""
    out = subprocess.run([aegis, "config", "--policy", policy], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.split()[:2] == ["fair_share_charge", "="]:
            return line.split()[2]
    sys.exit("aegis config does not list fair_share_charge")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--policy", default="aegis")
    ap.add_argument("--charge", default=None, choices=["booked", "occupied"],
                    help="fair_share_charge for the run and the charged yardstick (default: the engine's)")
    ap.add_argument("--weights", default="alice:2,bob:1")
    ap.add_argument("--copies", type=int, default=1, help="each user submits the 60 jobs this many times")
    ap.add_argument("--trace", default="data/aegis/trace_philly.csv",
                    help="the published trace whose jobs both users submit (saturn and venus: held-out job mixes)")
    ap.add_argument("--seed", type=int, default=1, help="the simulator's seed (first-activity delays, telemetry noise)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a further engine or sim parameter for both runs (e.g. sim.time_limit_factor=1.5)")
    a = ap.parse_args()
    aegis = os.path.join(os.path.abspath(a.build), "apps", "aegis", "aegis")
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "two_users.csv")
        user_of = build_trace(trace, os.path.join(ROOT, a.trace), a.copies)
        charge = a.charge or default_charge(aegis, a.policy)
        for label, sets in (("FIFO (no weights)", []), (f"fair share {a.weights}", ["--set", f"fair_share_users={a.weights}"])):
            sets = sets + ["--set", f"fair_share_charge={charge}"] + [x for kv in a.set for x in ("--set", kv)]
            jobs_csv = os.path.join(tmp, "jobs.csv")
            out = subprocess.run([aegis, "sim", "--workloads", "data/aegis/workloads.csv", "--trace", trace, "--gpus", "3",
                                  "--gpu-memory", "40960", "--policies", a.policy, "--threads", "1", "--seed", str(a.seed), "--jobs-csv", jobs_csv,
                                  *sets], cwd=ROOT, check=True, capture_output=True, text=True).stdout
            whole = [line.strip() for line in out.splitlines() if "user GPU shares" in line]
            end, charged, occupied = window_shares(jobs_csv, user_of, 40960, charge)
            print(f"{a.policy}, {label}, charge {charge}: while both wait (0-{end:.0f} s): "
                  f"charged alice {charged['alice']:.3f}, bob {charged['bob']:.3f}, ratio {charged['alice'] / charged['bob']:.2f}; "
                  f"occupied alice {occupied['alice']:.3f}, bob {occupied['bob']:.3f}, "
                  f"ratio {occupied['alice'] / occupied['bob']:.2f}; whole run: {whole[0] if whole else '-'}")


if __name__ == "__main__":
    sys.exit(main())
