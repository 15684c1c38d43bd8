#!/usr/bin/env python3
"""The simulator against the two recorded H200 runs (issue 31): compare.py replays each run in
`aegis sim` from its own solo profiles (phases included) and the run's engine settings.
Run 1 (data/gpu-validation/h200-run1/, the mini-trace): exclusive and aegis each within 5 %
of the measured makespan. Run 2 (data/gpu-validation/h200-run2/, the mix; held out: nothing
was chosen by looking at it) is printed, and checked only loosely (within 25 %), since its
solo phase started colder than its aegis run (docs/gpu-validation.md). Exits 1 on failure.

    test_compare_h200.py BUILD_DIR [REPO]
"""
import json
import os
import subprocess
import sys
import tempfile

BUILD = sys.argv[1]
REPO = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AEGIS = os.path.join(os.path.abspath(BUILD), "apps", "aegis", "aegis")
COMPARE = os.path.join(REPO, "scripts", "gpu-validate", "compare.py")


def replay(archive, out):
    p = subprocess.run([sys.executable, COMPARE, archive, "--aegis", AEGIS, "--out", out],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: compare.py {archive}: {p.stderr.strip()}")
    with open(os.path.join(out, "compare.json")) as f:
        return json.load(f)


def errors(cmp):
    out = {}
    for name, pol in cmp["policies"].items():
        meas = pol["measured"]["makespan_s"] if "measured" in pol else pol["derived"]["makespan_s"]
        out[name] = (pol["simulated"]["makespan_s"] - meas) / meas
    return out


failed = False
with tempfile.TemporaryDirectory() as tmp:
    for run, archive, bound in (("run 1", "data/gpu-validation/h200-run1/results.tar.gz", 0.05),
                                ("run 2", "data/gpu-validation/h200-run2/gpu-validation.tar.gz", 0.25)):
        errs = errors(replay(os.path.join(REPO, archive), os.path.join(tmp, run.replace(" ", ""))))
        for name, e in sorted(errs.items()):
            ok = abs(e) <= bound
            failed |= not ok
            print(f"{'ok  ' if ok else 'FAIL'} H200 {run} {name}: simulated makespan {e:+.1%} of measured (bound {bound:.0%})")
sys.exit(1 if failed else 0)
