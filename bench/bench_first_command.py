#!/usr/bin/env python3
"""How soon the README's first command shows results (issue 16): runs `scripts/run.sh` in
two fresh clones of this repository, at two commits, started at the same moment so that
they share the machine alike, and prints when each printed its policy table and when its
demo started (seconds from the start), and its CPU time.

  python3 bench/bench_first_command.py NEW_COMMIT OLD_COMMIT
Clones go to /tmp/aegis-first-NEW and /tmp/aegis-first-OLD (replaced); the full output of
each run, every line timestamped, to /tmp/aegis-first-COMMIT.log.
"""
import os
import shutil
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(commit, results):
    path = f"/tmp/aegis-first-{commit}"
    shutil.rmtree(path, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", ROOT, path], check=True)
    subprocess.run(["git", "-C", path, "checkout", "-q", commit], check=True)
    start = time.time()
    p = subprocess.Popen(["bash", "-c", "time scripts/run.sh"], cwd=path, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    marks = {}
    with open(f"/tmp/aegis-first-{commit}.log", "w") as log:
        for line in p.stdout:
            at = time.time() - start
            log.write(f"{at:8.1f} {line}")
            if "tables" not in marks and line.startswith("policy ") and " done " in line:
                marks["tables"] = at
            if "demo" not in marks and line.startswith("== aegisd on"):
                marks["demo"] = at
            for kind in ("user", "sys"):
                if line.startswith(kind + "\t"):
                    m, s = line.split("\t")[1].strip().rstrip("s").split("m")
                    marks[kind] = float(m) * 60 + float(s)
    p.wait()
    marks["rc"] = p.returncode
    results[commit] = marks


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    results = {}
    threads = [threading.Thread(target=run, args=(c, results)) for c in sys.argv[1:]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    new, old = sys.argv[1], sys.argv[2]
    for c in (new, old):
        r = results[c]
        print(f"{c}: tables after {r.get('tables', float('nan')):.0f} s, demo after {r.get('demo', float('nan')):.0f} s, "
              f"CPU {r.get('user', 0) + r.get('sys', 0):.0f} s, exit {r['rc']}")
    for k in ("tables", "demo"):
        if k in results[new] and k in results[old]:
            print(f"{k}: {100 * results[new][k] / results[old][k]:.0f} % of the old wait")
    return 0


if __name__ == "__main__":
    sys.exit(main())
