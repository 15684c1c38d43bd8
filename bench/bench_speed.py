#!/usr/bin/env python3
"""Every simulator speed figure of the README in one run (issue 14's targets), as
min / median / max of --runs runs, each in its own process, on one core:

  1. the whole Philly trace (82,247 jobs, 64 x 8 GPUs), every policy: seconds of
     simulate() (build/bench/bench_philly, trace loaded before timing) and peak RSS;
  2. the first 10,000 Philly jobs, whole process (`aegis sim --max-jobs 10000 ...
     --policies exclusive`), start-up and reading the trace included;
  3. cost growth, whole process, policy aegis: 10k jobs, the whole trace, and the trace
     replayed 13 times (`--repeat 13`, 1,069,211 jobs);
  4. the three published traces x every policy, whole process.

  5. with --instructions: the instructions simulate() executes on the first 10,000 Philly
     jobs, every policy (valgrind's callgrind; deterministic, so two commits compare on
     any machine, however noisy its clock).

  python3 bench/bench_speed.py [BUILD_DIR=build] [--runs 5] [--quick] [--instructions]
--quick: one run each and no 1M run (a smoke test of the script). Prints Markdown tables
and the targets each figure is held to, with the commit and the machine.
"""
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PHILLY = "data/traces/philly/philly_jobs.csv"
CLUSTER = ["--servers", "64", "--gpus-per-server", "8"]
PUBLISHED = ["--trace", "data/aegis/trace_philly.csv", "--trace", "data/aegis/trace_saturn.csv",
             "--trace", "data/aegis/trace_venus.csv", "--gpus", "3", "--gpu-memory", "40960"]

# Targets of issue 14 (seconds); None: no target.
WHOLE_TARGET = {"exclusive": 0.35, "lucid": 0.35, "horus": 0.35, "carma": 0.5, "naive": 1.0}
AEGIS_FAMILY_TARGET = 0.5
RSS_TARGET_MB = 150


def timed(cmd):
    """Wall seconds and peak RSS (MB) of one process."""
    start = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, _, usage = os.wait4(p.pid, 0)
    secs = time.perf_counter() - start
    out = p.stdout.read().decode()
    err = p.stderr.read().decode()
    p.returncode = 0
    return secs, usage.ru_maxrss / 1024.0, out, err


def spread(values):
    v = sorted(values)
    return v[0], statistics.median(v), v[-1]


def machine():
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    return f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; commit {commit}; " \
           f"{time.strftime('%Y-%m-%d')}"


def policies(aegis):
    out = subprocess.run([aegis, "policies"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line and not line[0].isspace()]


def main():
    args = sys.argv[1:]
    quick = "--quick" in args
    runs = 1 if quick else 5
    if "--runs" in args:
        runs = int(args[args.index("--runs") + 1])
    build = next((a for a in args if not a.startswith("--") and not a.isdigit()), "build")
    build = os.path.abspath(build)
    aegis = os.path.join(build, "apps", "aegis", "aegis")
    bench = os.path.join(build, "bench", "bench_philly")
    names = policies(aegis)
    print(f"Machine: {machine()}. One core per process; {runs} run(s) each, min / median / max.\n")

    print("### Whole Philly trace (82,247 jobs, 64 x 8 GPUs), simulate() only\n")
    print("| policy | min s | median s | max s | target | events | engine asks | peak RSS |")
    print("|---|---|---|---|---|---|---|---|")
    for p in names:
        _, _, out, err = timed([bench, "--trace", PHILLY, "--policies", p, "--runs", str(runs)])
        row = [l for l in out.splitlines() if l.startswith(p + " ")]
        if not row:
            sys.exit(f"bench_philly gave no row for {p}: {err.strip()}")
        f = row[0].split()
        lo, med, hi, events, asks, rss = float(f[1]), float(f[2]), float(f[3]), int(f[5]), int(f[6]), float(f[8])
        target = WHOLE_TARGET.get(p, AEGIS_FAMILY_TARGET if p.startswith("aegis") else None)
        mark = "" if target is None else f"<= {target}" + ("" if lo <= target else " (missed)")
        rss_mark = "" if rss <= RSS_TARGET_MB else " (over 150)"
        print(f"| {p} | {lo:.3f} | {med:.3f} | {hi:.3f} | {mark} | {events:,} | {asks:,} | {rss:.0f} MiB{rss_mark} |")

    print("\n### Whole process (`aegis sim`, start-up and reading the trace included)\n")
    print("| run | jobs | min s | median s | max s | s per 10k jobs | peak RSS | target |")
    print("|---|---|---|---|---|---|---|---|")
    cases = [
        ("first 10k Philly, exclusive", 10000, [aegis, "sim", "--trace", PHILLY, "--max-jobs", "10000", *CLUSTER,
                                              "--policies", "exclusive", "--threads", "1"], "<= 0.05 s"),
        ("first 10k Philly, aegis", 10000, [aegis, "sim", "--trace", PHILLY, "--max-jobs", "10000", *CLUSTER,
                                          "--policies", "aegis", "--threads", "1"], ""),
        ("whole Philly, aegis", 82247, [aegis, "sim", "--trace", PHILLY, *CLUSTER, "--policies", "aegis",
                                       "--threads", "1"], ""),
    ]
    if not quick:
        cases.append(("Philly x 13 (--repeat 13), aegis", 1069211,
                      [aegis, "sim", "--trace", PHILLY, "--repeat", "13", *CLUSTER, "--policies", "aegis",
                       "--threads", "1"], "<= 4 s, <= 600 MB"))
    cases.append((f"3 published traces x {len(names)} policies", 3 * len(names),
                  [aegis, "sim", "--workloads", "data/aegis/workloads.csv", *PUBLISHED, "--policies", ",".join(names),
                   "--threads", "1"], "<= 0.1 s"))
    for label, jobs, cmd, target in cases:
        secs, rss = [], 0.0
        for _ in range(runs):
            s, r, _, err = timed(cmd)
            secs.append(s)
            rss = max(rss, r)
        lo, med, hi = spread(secs)
        per10k = f"{lo / jobs * 1e4:.3f}" if jobs >= 10000 else ""
        print(f"| {label} | {jobs:,} | {lo:.3f} | {med:.3f} | {hi:.3f} | {per10k} | {rss:.0f} MiB | {target} |")

    if "--instructions" in args:
        print_instructions(bench, names)
    return 0


def instructions(bench, policy):
    """Instructions executed inside simulate() for the first 10k Philly jobs (callgrind)."""
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                          "--toggle-collect=aegis::simulate*", bench, "--trace", PHILLY, "--policies", policy,
                          "--runs", "1", "--max-jobs", "10000"], cwd=ROOT, capture_output=True, text=True)
    for line in out.stderr.splitlines():
        if "Collected :" in line:
            return int(line.split(":")[-1].strip())
    sys.exit(f"callgrind gave no count for {policy}: {out.stderr.strip()[-300:]}")


def print_instructions(bench, names):
    if subprocess.run(["sh", "-c", "command -v valgrind"], capture_output=True).returncode != 0:
        print("\n(--instructions: valgrind is not installed; apt install valgrind)")
        return
    print("\n### Instructions in simulate(), first 10,000 Philly jobs (callgrind, deterministic)\n")
    print("| policy | instructions | per job |")
    print("|---|---|---|")
    for p in names:
        n = instructions(bench, p)
        print(f"| {p} | {n / 1e6:,.0f}M | {n / 10000:,.0f} |")


if __name__ == "__main__":
    sys.exit(main())
