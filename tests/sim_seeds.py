#!/usr/bin/env python3
"""`aegis sim --seeds N` (docs/simulator.md "Seeds"), through the built binary:
- bad --seeds (0, negative, not a number, past the cap): exit 2, one line on stderr naming
  --seeds, nothing on stdout and no output file written;
- --seeds 1: text, --json and --jobs-csv byte-identical to no flag;
- --seeds 3 on the published traces: every result's min <= mean <= max, a "seeds" array of 3
  whose results are those of separate --seed runs, the mean their mean, the text tables'
  mean/min/max rows, a verdict line on the geometric mean, and the report's spread section;
- --sweep with --seeds 2: a seed column whose rows for each seed are that --seed's sweep rows,
  and a spread per point.

  tests/sim_seeds.py BUILD_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PUBLISHED = ["--workloads", "data/aegis/workloads.csv", "--trace", "data/aegis/trace_philly.csv",
             "--trace", "data/aegis/trace_saturn.csv", "--trace", "data/aegis/trace_venus.csv",
             "--gpus", "3", "--gpu-memory", "40960"]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def sim(aegis, *args):
    return subprocess.run([aegis, "sim", *PUBLISHED, *args], cwd=ROOT, capture_output=True, text=True)


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def bad_input(aegis, tmp):
    js = os.path.join(tmp, "bad.json")
    for args in (["--seeds", "0"], ["--seeds=-3"], ["--seeds", "abc"], ["--seeds", "1001"],
                 ["--seeds", "99999999999999999999"], ["--seeds", "2.5"]):
        r = sim(aegis, *args, "--json", js)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 2, f"{args}: exit {r.returncode}, want 2")
        check(len(lines) == 1 and "--seeds" in lines[0], f"{args}: stderr not one line naming --seeds: {r.stderr!r}")
        check(r.stdout == "", f"{args}: something ran: {r.stdout[:200]!r}")
        check(not os.path.exists(js), f"{args}: wrote {js}")


def one_seed_unchanged(aegis, tmp):
    outs = {}
    for name, extra in (("plain", []), ("seeds1", ["--seeds", "1"])):
        js, csv = os.path.join(tmp, f"{name}.json"), os.path.join(tmp, f"{name}.csv")
        r = sim(aegis, *extra, "--seed", "5", "--json", js, "--jobs-csv", csv)
        check(r.returncode == 0, f"{name}: exit {r.returncode}: {r.stderr}")
        outs[name] = (r.stdout, read(js, "rb") if os.path.exists(js) else None,
                      read(csv, "rb") if os.path.exists(csv) else None)
    for k, what in enumerate(("text", "json", "jobs csv")):
        check(outs["plain"][k] is not None and outs["plain"][k] == outs["seeds1"][k],
              f"--seeds 1 changes the {what}")


def three_seeds(aegis, tmp):
    js, report = os.path.join(tmp, "s3.json"), os.path.join(tmp, "s3.html")
    r = sim(aegis, "--seed", "4", "--seeds", "3", "--json", js, "--report", report)
    check(r.returncode == 0, f"--seeds 3: exit {r.returncode}: {r.stderr}")
    if r.returncode:
        return
    d = json.loads(read(js))
    check(d["config"].get("seeds") == [4, 5, 6], f"config.seeds {d['config'].get('seeds')}")
    seeds = d.get("seeds", [])
    check(len(seeds) == 3 and [s["seed"] for s in seeds] == [4, 5, 6], "a 'seeds' array of seeds 4, 5, 6")
    want = len(d["config"]["policies"]) * 3
    check(len(d["results"]) == want and want > 0, f"{len(d['results'])} results, want every policy x 3 traces")
    for res in d["results"]:
        for key, mean in res["min"].items():
            lo, hi, mid = res["min"][key], res["max"][key], res[key]
            check(lo <= mid + 1e-9 and mid <= hi + 1e-9, f"{res['policy']} {res['trace']} {key}: {lo} {mid} {hi}")
    # Each seed's results are exactly a separate --seed run's; the mean is their mean.
    for s in seeds:
        single = os.path.join(tmp, f"single{s['seed']}.json")
        sim(aegis, "--seed", str(s["seed"]), "--json", single)
        check(json.loads(read(single))["results"] == s["results"], f"seed {s['seed']}: not a --seed run's results")
    for i, res in enumerate(d["results"]):
        vals = [s["results"][i]["makespan_s"] for s in seeds]
        check(abs(res["makespan_s"] - sum(vals) / 3) < 1e-6 and res["min"]["makespan_s"] == min(vals)
              and res["max"]["makespan_s"] == max(vals), f"{res['policy']} {res['trace']}: makespan spread")
    spread = d["summary"]["makespan_vs_exclusive_geomean_spread"]
    for p, g in spread.items():
        per_seed = [s["summary"]["makespan_vs_exclusive_geomean"][p] for s in seeds]
        check(g["min"] == min(per_seed) and g["max"] == max(per_seed), f"{p}: geomean spread over per-seed geomeans")
    for a, b in d["summary"]["within_spread"]:
        check(spread[a]["min"] <= spread[b]["max"] and spread[b]["min"] <= spread[a]["max"], f"{a}, {b}: not overlapping")
    text = r.stdout
    check("seeds 4..6" in text and "\n  min " in text and "\n  max " in text, "text tables: mean, min and max rows")
    check("makespan normalised to exclusive: mean (min-max) over seeds 4..6" in text, "normalised table's header")
    check("geomean: no two policies within" in text or "within the spread over 3 seeds (not a result)" in text,
          "a verdict line on the geometric mean")
    html = read(report)
    check('<section id="seeds"><h2>Spread over 3 seeds</h2>' in html, "report: the spread section")


def sweep_two_seeds(aegis, tmp):
    sweep = ["--policies", "exclusive,aegis,carma", "--sweep", "smact=0.5:0.65:0.15"]
    both = os.path.join(tmp, "sweep2.csv")
    r = sim(aegis, *sweep, "--seed", "3", "--seeds", "2", "--sweep-csv", both)
    check(r.returncode == 0, f"--sweep --seeds 2: exit {r.returncode}: {r.stderr}")
    if r.returncode:
        return
    rows = read(both).splitlines()
    check(rows[0].startswith("seed,smact_threshold,policy,"), f"sweep header {rows[0]}")
    for seed in (3, 4):
        one = os.path.join(tmp, f"sweep{seed}.csv")
        sim(aegis, *sweep, "--seed", str(seed), "--sweep-csv", one)
        want = read(one).splitlines()[1:]
        got = [row.split(",", 1)[1] for row in rows[1:] if row.split(",", 1)[0] == str(seed)]
        check(got == want and len(want) == 18, f"sweep rows of seed {seed}: not that --seed's sweep")
    aegis_rows = [line.split() for line in r.stdout.splitlines() if line.split()[1:2] == ["aegis"]]
    aegis_rows = [w for w in aegis_rows if w[2].replace(".", "").isdigit()]
    check("over 2 seeds: mean (min-max)" in r.stdout and len(aegis_rows) == 2
          and all(w[3].startswith("(") and w[3].endswith(")") for w in aegis_rows), "sweep summary: the spread per point")


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    aegis = os.path.join(os.path.abspath(sys.argv[1]), "apps", "aegis", "aegis")
    with tempfile.TemporaryDirectory() as tmp:
        bad_input(aegis, tmp)
        one_seed_unchanged(aegis, tmp)
        three_seeds(aegis, tmp)
        sweep_two_seeds(aegis, tmp)
    print(f"{len(failures)} failure(s)" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
