#!/usr/bin/env python3
"""The simulator's outputs, byte for byte: every policy of the registry on the three
published traces (1 x 3 GPUs) and on the first 10,000 Philly jobs (64 x 8 GPUs), through
`aegis sim --json --jobs-csv`, hashed and compared with tests/golden/sim_outputs.sha256;
and, off the defaults, 3,000 Philly jobs with noisy 3 Hz telemetry under MPS.

Speed work must not change a single result; a change that is meant to change results
regenerates the file (--update) in the same commit and says why. The file was first
written from commit a307349, before the simulator-speed work (issue 14).

  tests/sim_golden.py BUILD_DIR [--update]
Run from anywhere; paths in the outputs are relative to the repository root.
"""
import hashlib
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden", "sim_outputs.sha256")

RUNS = {
    "published": ["--workloads", "data/aegis/workloads.csv", "--trace", "data/aegis/trace_philly.csv",
                  "--trace", "data/aegis/trace_saturn.csv", "--trace", "data/aegis/trace_venus.csv",
                  "--gpus", "3", "--gpu-memory", "40960"],
    "philly10k": ["--trace", "data/traces/philly/philly_jobs.csv", "--max-jobs", "10000",
                  "--servers", "64", "--gpus-per-server", "8"],
    # Off the defaults: noisy telemetry sampled at 3 Hz, MPS with memory limits.
    "philly3k-noise-mps": ["--trace", "data/traces/philly/philly_jobs.csv", "--max-jobs", "3000",
                           "--servers", "16", "--gpus-per-server", "8", "--sharing", "mps",
                           "--set", "sim.telemetry_noise=0.03", "--set", "telemetry_sample_hz=3"],
}


def policies(aegis):
    out = subprocess.run([aegis, "policies"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line and not line[0].isspace()]


def digests(aegis):
    got = {}
    with tempfile.TemporaryDirectory() as tmp:
        for policy in policies(aegis):
            for run, args in RUNS.items():
                js, csv = os.path.join(tmp, "out.json"), os.path.join(tmp, "out.csv")
                subprocess.run([aegis, "sim", *args, "--policies", policy, "--threads", "1", "--json", js,
                                "--jobs-csv", csv], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
                for kind, path in (("json", js), ("jobs-csv", csv)):
                    with open(path, "rb") as f:
                        got[f"{run} {policy} {kind}"] = hashlib.sha256(f.read()).hexdigest()
    return got


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    aegis = os.path.join(os.path.abspath(sys.argv[1]), "apps", "aegis", "aegis")
    got = digests(aegis)
    if "--update" in sys.argv[2:]:
        with open(GOLDEN, "w") as f:
            f.write("# sha256 of aegis sim outputs (tests/sim_golden.py); regenerate with --update\n")
            for key in sorted(got):
                f.write(f"{got[key]}  {key}\n")
        print(f"wrote {len(got)} digests to {GOLDEN}")
        return 0
    want = {}
    with open(GOLDEN) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            digest, key = line.rstrip("\n").split("  ", 1)
            want[key] = digest
    bad = [k for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k)]
    for k in bad:
        print(f"differs: {k}: golden {want.get(k, '(none: new policy?)')}, now {got.get(k, '(not produced)')}")
    print(f"{len(got) - len([k for k in bad if k in got])} of {len(got)} outputs identical to the golden ones")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
