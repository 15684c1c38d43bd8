#!/usr/bin/env python3
"""Replays a validation run in `aegis sim` and compares it with what happened.

  compare.py RESULTS [--aegis BIN] [--out DIR] [--seed N] [--seeds K]

RESULTS is what scripts/gpu-validate.sh wrote: its OUT_DIR (holding gpu-validation.tar.gz),
the tarball itself, or an unpacked results/ folder. From the runs where jobs ran alone (the
solo phase: one job of each kind of the mix; in the first run's layout, the exclusive run of
the mini-trace) it takes each kind's solo profile: runtime (launch to end), peak memory
(aegisd's per-attempt peak of the job's GPU processes), mean SM activity, SM occupancy, DRAM
activity and utilisation while it ran, its delay to first GPU activity, and its phases
(`phases()`: start-up length after first activity, start-up and steady levels). It writes them as a
workloads CSV in data/aegis/workloads.csv's format (plus the phase columns of
docs/simulator.md), the submit times each run used as
AEGIS-format traces, replays each run with the same engine settings (`aegis sim --gpus 1
--gpu-memory <MiB>`), and prints simulated against measured makespan and per-job JCT. The
mix's exclusive makespan is not run but derived from the solo phase (summarize.py says how);
it is compared as such. Everything lands in --out (default RESULTS/compare): workloads.csv,
trace_<run>.csv, sim_<run>.json, simjobs_<run>.csv, compare.json, compare_jobs.csv.
Standard library only.
"""
import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
import summarize  # noqa: E402  (the mix's derived exclusive makespan)
MINIMAL_HEADER = ["name", "family", "model", "batch_size", "num_gpus", "precision", "gpu_memory_requirement_mib",
                  "peak_memory_mib", "avg_smact", "avg_smocc", "avg_drama", "horus_gpu_util_mean", "solo_runtime_s",
                  "profile_source", "notes"]


def die(msg):
    print(f"compare: {msg}", file=sys.stderr)
    sys.exit(1)


def find_results(path, scratch):
    """The folder holding config.json, exclusive/ and aegis/."""
    if os.path.isdir(path):
        for cand in (path, os.path.join(path, "results")):
            if os.path.isfile(os.path.join(cand, "config.json")):
                return cand
        tgz = os.path.join(path, "gpu-validation.tar.gz")
        if not os.path.isfile(tgz):
            die(f"{path}: neither results (config.json) nor gpu-validation.tar.gz in it")
        path = tgz
    if not os.path.isfile(path):
        die(f"{path}: no such file or folder")
    try:
        with tarfile.open(path) as t:
            t.extractall(scratch)  # our own archive, from our own script
    except (tarfile.TarError, OSError) as e:
        die(f"{path}: cannot unpack: {e}")
    res = os.path.join(scratch, "results")
    if not os.path.isfile(os.path.join(res, "config.json")):
        die(f"{path}: the archive has no results/config.json")
    return res


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError:
        die(f"{path}: missing (did that phase run?)")
    except ValueError as e:
        die(f"{path}: not valid JSON: {e}")


def load_telemetry(path):
    out = []
    if not os.path.isfile(path):
        return out
    with open(path) as f:
        for line in f:
            try:
                s = json.loads(line)
            except ValueError:
                continue  # a line cut short when the run was stopped
            if "gpus" in s and s["gpus"]:
                out.append(s)
    return out


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def final_attempt(show):
    att = show.get("attempt_log") or []
    done = [a for a in att if a.get("outcome") == "completed"]
    return done[-1] if done else None


def kind_of(j):
    return j.get("kind") or j["name"]


LEVELS = (("smact", "smact"), ("smocc", "smocc"), ("drama", "drama"), ("util", "utilization"))


def phases(samples, first, interval=1.0, key="smact"):
    """A job's phases from its own samples: [(t, gpu sample)] from its first activity `first`
    to its end, the job alone on the GPU, each sample the mean of the `interval` s before t.
    Steady from the first sample at half the attempt's highest `key` or more; that sample
    covers the start of the steady phase only in part, so the phase began its share of an
    interval before it (share = its level over the steady level). Start-up levels: the mean
    of the samples before it; steady ones: of the samples after it. None without activity."""
    xs = [(t, g) for t, g in samples if t >= first]
    top = max((g.get(key) or 0.0 for _, g in xs), default=0.0)
    if top <= 0:
        return None
    k = next(i for i, (_, g) in enumerate(xs) if (g.get(key) or 0.0) >= 0.5 * top)
    before, after = xs[:k], xs[k + 1:] or xs[k:]
    steady = {lv: mean(g.get(col) for _, g in after) or 0.0 for lv, col in LEVELS}
    share = min(1.0, (xs[k][1].get(key) or 0.0) / steady[key]) if steady[key] else 1.0
    return {"startup_s": max(0.0, xs[k][0] - share * interval - first),
            "startup": {lv: (mean(g.get(col) for _, g in before) or 0.0) if before else 0.0 for lv, col in LEVELS},
            "steady": steady}


def profiles(run, telemetry, interval=1.0):
    """Solo profile of every kind whose job completed in a run where jobs ran alone."""
    out, missing = {}, {}
    for j in run["jobs"]:
        a = final_attempt(j["show"])
        if not a or not a.get("ended_at"):
            missing[kind_of(j)] = f"did not complete alone ({j['show']['state']})"
            continue
        start = a.get("first_activity") or a["launched_at"]
        # Samples while this job alone was on the GPU and active.
        mine = [s["gpus"][0] for s in telemetry
                if start <= s["t"] <= a["ended_at"] and s["gpus"][0].get("jobs") == [j["id"]]]
        used = [g["memory_used_mib"] for g in mine]
        peak = a.get("peak_mib") or (max(used) if used else 0) or \
            ((j.get("result") or {}).get("peak_reserved_mib") or 0) + 512  # + the CUDA context, roughly
        smact = mean(g.get("smact") for g in mine)
        util = mean(g.get("utilization") for g in mine)
        gpm = smact is not None
        ramp = None
        if used and a.get("first_activity"):
            top = max(used)
            ramp = next((s["t"] - a["first_activity"] for s in telemetry
                         if start <= s["t"] <= a["ended_at"] and s["gpus"][0]["memory_used_mib"] >= 0.9 * top), None)
        mine_t = [(s["t"], s["gpus"][0]) for s in telemetry
                  if start <= s["t"] <= a["ended_at"] and s["gpus"][0].get("jobs") == [j["id"]]]
        ph = phases(mine_t, start, interval, key="smact" if gpm else "utilization") if a.get("first_activity") else None
        res = j.get("result") or {}
        # Without aegisd's first activity (its process list did not show the job), the time
        # the workload itself took to reach its first step stands in.
        first = (a["first_activity"] - a["launched_at"]) if a.get("first_activity") else res.get("startup_s")
        out[kind_of(j)] = {
            "job": kind_of(j), "workload": j.get("workload"), "args": j.get("args", ""),
            "solo_runtime_s": a["ended_at"] - a["launched_at"],
            "first_activity_s": first, "first_activity_seen": bool(a.get("first_activity")),
            "memory_ramp_s": ramp, "peak_memory_mib": int(round(peak)),
            "avg_smact": smact if gpm else (util or 0.0),  # coarse utilisation stands in without GPM
            "avg_smocc": mean(g.get("smocc") for g in mine) or 0.0,
            "avg_drama": mean(g.get("drama") for g in mine) or 0.0,
            "util": util, "gpm": gpm, "samples": len(mine),
            "batch_size": res.get("batch_size"), "precision": res.get("precision"),
            "samples_per_s": res.get("samples_per_s"), "phases": ph,
        }
    return out, missing


def clamp01(x):
    return min(1.0, max(0.0, x or 0.0))


def write_workloads(path, profs):
    header = MINIMAL_HEADER
    catalog = os.path.join(REPO, "data/aegis/workloads.csv")
    if os.path.isfile(catalog):
        with open(catalog, newline="") as f:
            header = next(csv.reader(f))
    header = header + [c for c in PHASE_COLUMNS if c not in header]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header, extrasaction="ignore")
        w.writeheader()
        for p in profs.values():
            w.writerow({
                "name": p["job"], "family": "gpu_validation", "model": p["workload"], "dataset": "synthetic",
                "batch_size": p["batch_size"] or "", "num_gpus": 1, "precision": p["precision"] or "",
                "gpu_memory_requirement_mib": p["peak_memory_mib"], "peak_memory_mib": p["peak_memory_mib"],
                "full_run_peak_memory_mib": p["peak_memory_mib"],
                "avg_smact": f"{clamp01(p['avg_smact']):.4f}", "avg_smocc": f"{clamp01(p['avg_smocc']):.4f}",
                "avg_drama": f"{clamp01(p['avg_drama']):.4f}",
                "horus_gpu_util_mean": "" if p["util"] is None else f"{100 * clamp01(p['util']):.2f}",
                "solo_runtime_s": f"{p['solo_runtime_s']:.3f}",
                "profile_source": "scripts/gpu-validate.sh exclusive run" + ("" if p["gpm"] else " (no GPM: smact = util)"),
                "spec_command_args": p["args"], "notes": f"{p['samples']} telemetry samples",
                **phase_row(p.get("phases")),
            })


PHASE_COLUMNS = ["startup_s"] + [f"{ph}_{lv}" for ph in ("startup", "steady") for lv, _ in LEVELS]


def phase_row(ph):
    """The phase columns of a profile (docs/simulator.md); empty without phases."""
    if not ph:
        return {}
    row = {"startup_s": f"{ph['startup_s']:.3f}"}
    for name in ("startup", "steady"):
        for lv, _ in LEVELS:
            row[f"{name}_{lv}"] = f"{clamp01(ph[name][lv]):.4f}"
    return row


def write_trace(path, run, profs):
    """The run's jobs of a profiled kind, by submission; row i is the run's i-th such job."""
    jobs = sorted((j for j in run["jobs"] if kind_of(j) in profs), key=lambda j: j["show"]["submitted_at"])
    t0 = min(j["show"]["submitted_at"] for j in run["jobs"])
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["job_index", "submit_time_s", "workload_name", "num_gpus", "measured_submit_offset_s"])
        for i, j in enumerate(jobs):
            off = j["show"]["submitted_at"] - t0
            w.writerow([i, f"{off:.3f}", kind_of(j), 1, f"{off:.6f}"])
    return [j["name"] for j in jobs]


def write_mix_trace(path, rows):
    """The mix as submitted (its submit_s offsets): the derived exclusive run's trace."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["job_index", "submit_time_s", "workload_name", "num_gpus", "measured_submit_offset_s"])
        for i, r in enumerate(sorted(rows, key=lambda r: float(r["submit_s"]))):
            w.writerow([i, f"{float(r['submit_s']):.3f}", r["kind"], 1, f"{float(r['submit_s']):.6f}"])
    return [r["name"] for r in rows]


def overlaps(a, b):
    return a["launched_at"] < (b.get("ended_at") or 1e18) and b["launched_at"] < (a.get("ended_at") or 1e18)


def measured(run, names):
    jobs = [j for j in run["jobs"] if j["name"] in names]
    t0 = min(j["show"]["submitted_at"] for j in run["jobs"])
    atts = [(j["name"], a) for j in jobs for a in j["show"].get("attempt_log") or []]
    per = {}
    for j in jobs:
        sh = j["show"]
        mine = [a for n, a in atts if n == j["name"]]
        per[j["name"]] = {
            "completed": sh["state"] == "completed",
            "jct_s": (sh["ended_at"] - sh["submitted_at"]) if sh.get("ended_at") and sh["state"] == "completed" else None,
            "attempts": len(mine), "oom_attempts": sum(a.get("outcome") == "oom" for a in mine),
            "collocated": any(overlaps(a, b) for a in mine for n, b in atts if n != j["name"]),
            "kind": j.get("kind"), "samples_per_s": (j.get("result") or {}).get("samples_per_s"),
        }
    ends = [j["show"]["ended_at"] for j in jobs if j["show"].get("ended_at")]
    return {"makespan_s": (max(ends) - t0) if ends else None, "jobs": per,
            "oom_attempts": sum(p["oom_attempts"] for p in per.values()),
            "collocated_jobs": sum(p["collocated"] for p in per.values())}


def simulate(aegis, out, label, policy, workloads, trace, names, gpu_mib, engine, sim_sets, seed):
    """`aegis sim` of one run; per job by the trace's row (names[i] is row i's job)."""
    js, jc = os.path.join(out, f"sim_{label}.json"), os.path.join(out, f"simjobs_{label}.csv")
    cmd = [aegis, "sim", "--workloads", workloads, "--trace", trace, "--gpus", "1", "--gpu-memory", str(gpu_mib),
           "--policies", policy, "--seed", str(seed), "--json", js, "--jobs-csv", jc, "--threads", "1"]
    for kv in engine:
        cmd += ["--set", kv]
    for kv in sim_sets:
        cmd += ["--set", kv]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        die(f"aegis sim ({policy}) failed: {r.stderr.strip() or r.stdout.strip()}\n  command: {' '.join(cmd)}")
    result = load_json(js)["results"][0]
    per = {}
    with open(jc, newline="") as f:
        for row in csv.DictReader(f):
            p = per.setdefault(names[int(row["job_index"])], {"attempts": 0, "oom_attempts": 0})
            p["attempts"] += 1
            p["oom_attempts"] += row["outcome"] == "oom"
            p["completed"] = row["completed"] == "1"
            # The last attempt's speed relative to alone: its solo runtime over its run time.
            run_s = float(row["attempt_end_s"] or 0) - float(row["launch_s"])
            p["speed"] = float(row["solo_runtime_s"]) / run_s if run_s > 0 and row["solo_runtime_s"] else None
            p["jct_s"] = float(row["end_s"]) - float(row["submit_s"]) if p["completed"] else None
    return {"makespan_s": result.get("makespan_s"), "oom_attempts": result.get("oom_attempts"),
            "collocated_attempts": result.get("collocated_attempts"), "jobs": per, "command": cmd}


def makespan_over_seeds(cmd, out, label, seeds):
    """The same replay under `seeds` seeds (from the command's --seed on): median, min, max."""
    js = os.path.join(out, f"sim_{label}_seeds.json")
    c = list(cmd)
    del c[c.index("--jobs-csv"):c.index("--jobs-csv") + 2]
    c[c.index("--json") + 1] = js
    c += ["--seeds", str(seeds)]
    r = subprocess.run(c, capture_output=True, text=True)
    if r.returncode != 0:
        die(f"aegis sim --seeds {seeds} failed: {r.stderr.strip() or r.stdout.strip()}\n  command: {' '.join(c)}")
    doc = load_json(js)
    ms = sorted(s["results"][0]["makespan_s"] for s in doc.get("seeds", [{"results": doc["results"]}])
                if s["results"] and s["results"][0].get("makespan_s") is not None)
    if not ms:
        return None
    return {"seeds": len(ms), "median_s": statistics.median(ms), "min_s": ms[0], "max_s": ms[-1], "command": c}


def rel(a, b):
    return (a - b) / b if a is not None and b else None


def pct(x):
    return "-" if x is None else f"{100 * x:+.1f}%"


def apct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def num(x, fmt="{:.1f}"):
    return "-" if x is None else fmt.format(x)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", help="OUT_DIR of gpu-validate.sh, its gpu-validation.tar.gz, or results/")
    p.add_argument("--aegis", help="the aegis command (default: build/apps/aegis/aegis, else aegis on PATH)")
    p.add_argument("--out", help="where to write (default RESULTS/compare)")
    p.add_argument("--seed", type=int, default=1, help="the seed of the per-job replay (default 1)")
    p.add_argument("--seeds", type=int, default=20,
                   help="the makespan's spread over this many seeds from --seed on (default 20; 1: none)")
    a = p.parse_args()
    if not 1 <= a.seeds <= 1000:
        die(f"--seeds: {a.seeds} is not in 1..1000")
    aegis = a.aegis or next((c for c in (os.path.join(REPO, "build/apps/aegis/aegis"), shutil.which("aegis"))
                             if c and os.access(c, os.X_OK)), None)
    if not aegis:
        die("no aegis command found: build the project or give --aegis")
    scratch = tempfile.mkdtemp(prefix="aegis-compare-")
    try:
        res = find_results(a.results, scratch)
        base = a.results if os.path.isdir(a.results) else os.path.dirname(os.path.abspath(a.results))
        out = a.out or os.path.join(base, "compare")
        try:
            os.makedirs(out, exist_ok=True)
        except OSError as e:  # the device tool hands results back read-only
            die(f"{out}: cannot write there ({e.strerror}); give --out DIR")
        report = run(aegis, res, out, a.seed, a.seeds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    with open(os.path.join(out, "compare.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(f"\nwritten: {out}/compare.json, compare_jobs.csv, workloads.csv, trace_*.csv, sim_*.json")


def run(aegis, res, out, seed, seeds):
    cfg = load_json(os.path.join(res, "config.json"))
    mix = os.path.isdir(os.path.join(res, "solo"))
    # The runs: (label, policy, folder); the one whose jobs ran alone gives the profiles.
    if mix:
        alone = "solo"
        labels = [("exclusive", "exclusive", None)] + [
            (n, "aegis", n) for n in ("aegis-1", "aegis-2", "aegis-3") if os.path.isdir(os.path.join(res, n))]
    else:  # the first run's layout: the mini-trace under exclusive, then aegis
        alone = "exclusive"
        labels = [("exclusive", "exclusive", "exclusive"), ("aegis", "aegis", "aegis")]
    runs = {lab: load_json(os.path.join(res, d, "jobs.json")) for lab, _, d in labels if d}
    alone_run = load_json(os.path.join(res, alone, "jobs.json"))
    alone_tel = load_telemetry(os.path.join(res, alone, "telemetry.jsonl"))
    if not alone_tel:
        die(f"{res}/{alone}/telemetry.jsonl: no samples, so no solo profiles")
    gpu_mib = alone_tel[0]["gpus"][0]["memory_total_mib"]
    # The sampling interval, as recorded (run_trace.py --interval): the median gap.
    gaps = [b["t"] - a["t"] for a, b in zip(alone_tel, alone_tel[1:]) if b["t"] > a["t"]]
    profs, missing = profiles(alone_run, alone_tel, statistics.median(gaps) if gaps else 1.0)
    if not profs:
        die(f"no job completed in the {alone} run: nothing to replay")
    for name, why in missing.items():
        print(f"compare: leaving {name} out: {why}", file=sys.stderr)

    # The simulator's start-up model: the measured delays to first GPU activity and memory ramp.
    fa = sorted(p["first_activity_s"] for p in profs.values() if p["first_activity_s"] is not None)
    sim_sets = []
    if fa:
        med = statistics.median(fa)
        p95 = max(fa[min(len(fa) - 1, int(0.95 * len(fa)))], med * 1.05 + 1e-3)
        sim_sets += [f"sim.first_activity_median_s={med:.3f}", f"sim.first_activity_p95_s={p95:.3f}",
                     f"sim.first_activity_max_s={max(max(fa), p95) * 1.2:.3f}"]
    ramps = [p["memory_ramp_s"] for p in profs.values() if p["memory_ramp_s"] is not None]
    if ramps:
        sim_sets.append(f"sim.memory_ramp_s={max(statistics.median(ramps), 0.01):.3f}")

    # Without GPM the daemon applies the coarse rule (keep a GPU while its utilisation risk is
    # under util_threshold); the simulator always applies the full one. Feeding it utilisation
    # as SM activity and occupancy, no DRAM activity, and util_threshold as the SMACT threshold
    # makes the full rule the coarse one (the DRAM term of interference is then lost).
    coarse = not any(p["gpm"] for p in profs.values())
    if coarse:
        util_thr = next((kv.split("=", 1)[1] for kv in cfg.get("engine", []) if kv.startswith("util_threshold=")), "0.7")
        sim_sets.append(f"smact_threshold={util_thr}")
        for p in profs.values():
            p["avg_smact"] = p["avg_smocc"] = p["util"] or 0.0
            p["avg_drama"] = 0.0
            for name in ("startup", "steady"):  # the same stand-ins in each phase
                if p["phases"]:
                    lv = p["phases"][name]
                    lv["smact"] = lv["smocc"] = lv["util"]
                    lv["drama"] = 0.0
        print(f"compare: no GPM metrics in the {alone} run: replaying with the coarse (utilisation) rule",
              file=sys.stderr)

    wl = os.path.join(out, "workloads.csv")
    write_workloads(wl, profs)
    report = {"results": res, "mode": cfg.get("mode"), "gpu_memory_mib": gpu_mib, "engine": cfg.get("engine", []),
              "layout": "mix" if mix else "mini-trace", "telemetry": "coarse" if coarse else "full",
              "sim_settings": sim_sets, "profiles": profs, "left_out": missing, "policies": {}}
    rows = []
    for label, pol, _ in labels:
        tr = os.path.join(out, f"trace_{label}.csv")
        if label in runs:
            names = write_trace(tr, runs[label], profs)
            meas = measured(runs[label], names)
        else:  # the mix under exclusive: derived from the solo phase, not run
            mrows = [r for r in summarize.mix_rows(res) if r["kind"] in profs]
            names = write_mix_trace(tr, mrows)
            solo = summarize.run_summary_one(res, "solo")
            der = summarize.derive_exclusive(solo, mrows)
            meas = {"makespan_s": der.get("makespan_s"), "derived": der, "jobs": {}, "oom_attempts": 0,
                    "collocated_jobs": 0}
        sim = simulate(aegis, out, label, pol, wl, tr, names, gpu_mib, cfg.get("engine", []), sim_sets, seed)
        spread = makespan_over_seeds(sim["command"], out, label, seeds) if seeds > 1 else None
        if spread and meas["makespan_s"] is not None:
            spread["measured_within"] = spread["min_s"] <= meas["makespan_s"] <= spread["max_s"]
            spread["median_error"] = rel(spread["median_s"], meas["makespan_s"])
        errs = []
        for name, m in meas["jobs"].items():
            s = sim["jobs"].get(name, {})
            e = rel(s.get("jct_s"), m["jct_s"])
            if e is not None:
                errs.append(abs(e))
            # Training speed next to the others, relative to the kind alone: measured by the
            # workload's own samples per second (start-up excluded), simulated as solo runtime
            # over run time (docs/gpu-validation.md, runs 3 and 4: the interference evidence).
            solo_sps = (profs.get(m.get("kind")) or {}).get("samples_per_s")
            m_speed = m["samples_per_s"] / solo_sps if m.get("samples_per_s") and solo_sps else None
            rows.append({"policy": label, "job": name, "measured_jct_s": m["jct_s"], "simulated_jct_s": s.get("jct_s"),
                         "measured_speed": m_speed, "simulated_speed": s.get("speed"),
                         "error": e, "measured_attempts": m["attempts"], "simulated_attempts": s.get("attempts"),
                         "measured_oom": m["oom_attempts"], "simulated_oom": s.get("oom_attempts"),
                         "measured_collocated": m["collocated"]})
        report["policies"][label] = {
            "measured": meas, "simulated": sim,
            "makespan_error": rel(sim["makespan_s"], meas["makespan_s"]),
            "simulated_over_seeds": spread,
            "jct_mean_abs_error": (sum(errs) / len(errs)) if errs else None,
            "jct_max_abs_error": max(errs) if errs else None,
        }
    if rows:
        with open(os.path.join(out, "compare_jobs.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)
    ex = report["policies"]["exclusive"]
    ae = [x for lab, x in report["policies"].items() if lab.startswith("aegis")]
    for who in ("measured", "simulated"):
        x = ex[who]["makespan_s"]
        ys = [a[who]["makespan_s"] for a in ae if a[who]["makespan_s"]]
        report[f"{who}_aegis_over_exclusive"] = (statistics.median(ys) / x) if x and ys else None
        report[f"{who}_aegis_over_exclusive_range"] = [min(ys) / x, max(ys) / x] if x and ys else None
    # The aegis runs' makespan, measured against simulated, over the repeats: one figure.
    meas_ae = [a["measured"]["makespan_s"] for a in ae if a["measured"]["makespan_s"]]
    sim_ae = [a["simulated"]["makespan_s"] for a in ae if a["simulated"]["makespan_s"]]
    report["aegis_makespan_error"] = rel(statistics.median(sim_ae), statistics.median(meas_ae)) \
        if meas_ae and sim_ae else None
    print_report(report, rows)
    return report


def print_report(r, rows):
    print(f"mode {r['mode']}; GPU {r['gpu_memory_mib']} MiB; engine {' '.join(r['engine'])}")
    print(f"simulator start-up model: {' '.join(r['sim_settings']) or 'defaults'}")
    print(f"\nsolo profiles ({'solo phase' if r['layout'] == 'mix' else 'exclusive run'}):")
    print(f"  {'job':<18} {'runtime s':>9} {'1st act s':>9} {'peak MiB':>9} {'smact':>6} {'smocc':>6} {'drama':>6} "
          f"{'util':>6} {'samples/s':>10} {'start-up s':>10} {'steady smact':>12}")
    for p in r["profiles"].values():
        print(f"  {p['job']:<18} {p['solo_runtime_s']:>9.1f} {num(p['first_activity_s']):>9} {p['peak_memory_mib']:>9} "
              f"{p['avg_smact']:>6.2f} {p['avg_smocc']:>6.2f} {p['avg_drama']:>6.2f} {num(p['util'], '{:.2f}'):>6} "
              f"{num(p['samples_per_s']):>10} {num((p['phases'] or {}).get('startup_s')):>10} "
              f"{num((p['phases'] or {}).get('steady', {}).get('smact'), '{:.2f}'):>12}")
    print("\nmakespan, measured against simulated:")
    for pol, x in r["policies"].items():
        m, s = x["measured"], x["simulated"]
        print(f"  {pol:<10} {'derived' if m.get('derived') else 'measured'} {num(m['makespan_s']):>7} s, "
              f"simulated {num(s['makespan_s']):>7} s "
              f"({pct(x['makespan_error'])}); JCT |error| mean {apct(x['jct_mean_abs_error'])}, "
              f"max {apct(x['jct_max_abs_error'])}; "
              f"OOM attempts {m['oom_attempts']} / {s['oom_attempts']}")
        sp = x.get("simulated_over_seeds")
        if sp and sp["min_s"] != sp["max_s"]:
            print(f"  {'':<10} over {sp['seeds']} seeds: simulated median {sp['median_s']:.1f} s "
                  f"({pct(sp.get('median_error'))}), range {sp['min_s']:.1f}-{sp['max_s']:.1f} s: measured "
                  f"{'within' if sp.get('measured_within') else 'OUTSIDE'}")
    rng = r.get("measured_aegis_over_exclusive_range")
    print(f"  aegis / exclusive: measured {num(r['measured_aegis_over_exclusive'], '{:.3f}')}"
          + (f" (range {rng[0]:.3f}-{rng[1]:.3f})" if rng and rng[0] != rng[1] else "")
          + f", simulated {num(r['simulated_aegis_over_exclusive'], '{:.3f}')}")
    print("\nper job (JCT s, measured / simulated; speed relative to the kind alone, measured / simulated):")
    for row in rows:
        speed = ""
        if row.get("measured_collocated") and (row.get("measured_speed") or row.get("simulated_speed")):
            speed = (f"  speed {num(row.get('measured_speed'), '{:.2f}')} / "
                     f"{num(row.get('simulated_speed'), '{:.2f}')}")
        print(f"  {row['policy']:<10} {row['job']:<18} {num(row['measured_jct_s']):>7} / {num(row['simulated_jct_s']):>7} "
              f"{pct(row['error']):>8}  attempts {row['measured_attempts']}/{row['simulated_attempts']}"
              f"{'  shared' if row['measured_collocated'] else ''}{speed}")


if __name__ == "__main__":
    main()
