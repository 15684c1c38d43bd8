#!/usr/bin/env python3
"""Writes tests/data/h200_timelines.csv from the first real-GPU run's recordings.

Usage: make_h200_timelines.py DATA_DIR > tests/data/h200_timelines.csv
DATA_DIR: gpu-validation-h200-2026-12-04 (the recorded run; its README says what each file is).

One row per job attempt and second, from its launch to its end, taken from
results/{exclusive,aegis}/telemetry.jsonl (`aegis gpus --json` every second) and jobs.json
(`aegis show` of each job: launch, end, context time, the anchor it got). Columns:
  run, job, attempt, t_s (seconds since launch), own (1 once the job's process was listed:
  from its context time on), gpu_used_mib, smact (GPM SM activity), util (utilization.gpu);
and, per attempt, a `#` line with what aegisd recorded then (context, first activity, anchor).
"""
import json
import os
import sys


def main():
    root = sys.argv[1]
    print("# Per-second timelines of every job attempt of the first real-GPU run (one H200, 2026-12-04),")
    print("# written by tests/data/make_h200_timelines.py from gpu-validation-h200-2026-12-04/results/")
    print("# {exclusive,aegis}/{telemetry,jobs}.{jsonl,json}. Rows from launch to end; own = 1 once the")
    print("# job's process was listed (its CUDA context); before it, the GPU's figures are the driver's")
    print("# or a previous job's last seconds. `# attempt` lines: what aegisd recorded (seconds since launch).")
    print("run,job,attempt,t_s,own,gpu_used_mib,smact,util")
    for run in ("exclusive", "aegis"):
        d = os.path.join(root, "results", run)
        jobs = json.load(open(os.path.join(d, "jobs.json")))["jobs"]
        tel = [json.loads(l) for l in open(os.path.join(d, "telemetry.jsonl"))]
        tel = [s for s in tel if "gpus" in s]
        for j in jobs:
            for a in j["show"].get("attempt_log") or []:
                launched, ended, ctx = a["launched_at"], a.get("ended_at"), a.get("context_at")
                if ended is None:
                    continue
                fa = a.get("first_activity")
                print(f"# attempt {run} {j['name']} {a['number']}: outcome {a['outcome']}, context "
                      f"{ctx - launched:.1f}, first activity {fa - launched:.1f}, anchor {a.get('anchor')}")
                for s in tel:
                    if not launched <= s["t"] <= ended:
                        continue
                    g = s["gpus"][0]
                    own = int(ctx is not None and s["t"] >= ctx and g["processes"] > 0)
                    smact = "" if g["smact"] is None else f"{g['smact']:.3f}"
                    util = "" if g["utilization"] is None else f"{g['utilization']:.2f}"
                    print(f"{run},{j['name']},{a['number']},{s['t'] - launched:.1f},{own},{g['memory_used_mib']},"
                          f"{smact},{util}")


if __name__ == "__main__":
    main()
