#!/usr/bin/env python3
"""compare.py's phase extraction (issue 31, item 1) on the H200 run's recorded solo timelines
(tests/data/h200_timelines.csv): each kind's start-up length and steady SM activity, checked
against what the recording shows by eye (the first training second, the training seconds'
levels), and a job with no activity has no phases. Standard library only; exits 1 on failure.

    test_compare_phases.py [REPO]
"""
import csv
import os
import sys

REPO = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts", "gpu-validate"))
sys.dont_write_bytecode = True
import compare  # noqa: E402


def timeline(run, job):
    """(first activity, [(t, gpu sample)]) of attempt 1: the seconds its process was listed."""
    first, rows = None, []
    with open(os.path.join(REPO, "tests/data/h200_timelines.csv")) as f:
        lines = [ln for ln in f if not ln.startswith("#") or ln.startswith(f"# attempt {run} {job} 1:")]
    for ln in lines:
        if ln.startswith("#"):
            first = float(ln.split("first activity ")[1].split(",")[0])
    for r in csv.DictReader(ln for ln in lines if not ln.startswith("#")):
        if r["run"] == run and r["job"] == job and r["attempt"] == "1" and r["own"] == "1":
            rows.append((float(r["t_s"]), {"smact": float(r["smact"]), "utilization": float(r["util"])}))
    return first, rows


failures = []


def check(what, got, want, tol):
    ok = got is not None and abs(got - want) <= tol
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {got} (want {want} +- {tol})")
    if not ok:
        failures.append(what)


# ResNet-50: first activity 7.8 s; 0.00-0.03 to 18 s, 0.646 in the second to 19 s, then
# 0.857 x3 and 0.777: training began about 0.75 s before 19 s (0.646 / 0.857 of a second).
first, rows = timeline("exclusive", "j1_resnet50_bf16")
ph = compare.phases(rows, first)
check("resnet50 startup_s", ph and ph["startup_s"], 19.0 - 0.646 / 0.837 - 7.8, 0.05)
check("resnet50 steady smact", ph and ph["steady"]["smact"], (3 * 0.857 + 0.777) / 4, 0.002)
check("resnet50 start-up smact", ph and ph["startup"]["smact"], 0.01, 0.01)
# BERT: much shorter start-up (about 4 s after its first activity).
first, rows = timeline("exclusive", "j3_bert_seq512")
ph = compare.phases(rows, first)
check("bert startup_s", ph and ph["startup_s"], 4.3, 0.5)
check("bert steady smact", ph and ph["steady"]["smact"], 0.87, 0.03)
# No activity at all: no phases (the OOM attempts died before training).
none = compare.phases([(t, {"smact": 0.0, "utilization": 0.0}) for t in range(10)], 0.0)
print(("ok  " if none is None else "FAIL") + " no activity: no phases")
if none is not None:
    failures.append("no activity")
# The columns compare.py writes for them.
row = compare.phase_row({"startup_s": 1.5, "startup": dict.fromkeys(("smact", "smocc", "drama", "util"), 0.0),
                         "steady": dict.fromkeys(("smact", "smocc", "drama", "util"), 0.5)})
want_cols = ["startup_s", "startup_smact", "startup_smocc", "startup_drama", "startup_util",
             "steady_smact", "steady_smocc", "steady_drama", "steady_util"]
print(("ok  " if list(row) == want_cols else "FAIL") + f" phase columns {list(row)}")
if list(row) != want_cols:
    failures.append("columns")
sys.exit(1 if failures else 0)
