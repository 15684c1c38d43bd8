#!/usr/bin/env python3
"""Short summaries of a validation run, printed while it runs (on the GPU machine).

  summarize.py nvml RESULTS/nvml    the NVML self-check, in lines for the log (and nvml/summary.json)
  summarize.py runs RESULTS         every run (solo, aegis-N; the first run's exclusive, aegis), the
                                    mix's derived exclusive makespan against aegis's, the anchors
                                    against each job's heavy phase, and the self-check: JSON on stdout
  summarize.py headline SUMMARY     the lines of summary.json a reader wants first
Standard library only. The full analysis (the simulator replay) is compare.py, run afterwards.
"""
import csv
import json
import os
import statistics
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def smi_apps(path):
    """nvidia-smi --query-compute-apps CSV -> {pid: MiB}."""
    out = {}
    try:
        with open(path, newline="") as f:
            for row in csv.DictReader(f, skipinitialspace=True):
                pid = row.get("pid")
                # the header reads "used_gpu_memory [MiB]", the values "20000 MiB"
                mem = next((v for k, v in row.items() if k and "memory" in k), "") or ""
                if pid and pid.strip().isdigit():
                    out[int(pid)] = float(mem.split()[0]) if mem and mem.split()[0].replace(".", "").isdigit() else None
    except OSError:
        pass
    return out


def lgip_rows(path):
    """nvidia-smi mig -lgip -> {profile: (GiB, SMs, total instances)} of GPU 0, +me profiles
    included (empty when MIG mode is off)."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                cells = line.strip(" |\n").split()
                # "0  MIG 3g.40gb  9  2/2  39.50  No  60  3  0"
                if len(cells) >= 8 and cells[0] == "0" and cells[1] == "MIG":
                    try:
                        out[cells[2]] = (float(cells[5]), int(cells[7]), int(cells[4].split("/")[1]))
                    except (ValueError, IndexError):
                        pass
    except OSError:
        pass
    return out


def mig_table_check(d):
    """aegis's MIG table (aegis-gpu-query --mig-table) against the driver's, for this GPU's
    model (by memory.total): which rows agree (memory, SMs, instances), which differ, which
    the driver did not list, and which the driver lists but aegis lacks."""
    try:
        with open(os.path.join(d, "mig-table-aegis.csv"), newline="") as f:
            ours = list(csv.DictReader(f))
    except OSError:
        return None
    total = None
    try:
        with open(os.path.join(d, "nvidia-smi-gpus.csv"), newline="") as f:
            row = next(csv.DictReader(f, skipinitialspace=True))
            total = int(next(v for k, v in row.items() if k and k.startswith("memory.total")).split()[0])
    except (OSError, StopIteration, ValueError):
        pass
    if total is None:  # no nvidia-smi (the emulated run): NVML's figure, through our probe
        gpus = ((load(os.path.join(d, "probe-idle.json")) or {}).get("after_interval") or [{}])
        total = gpus[0].get("memory_total_mib")
    rows = [r for r in ours if total is not None and int(r["gpu_total_mib"]) == total]
    theirs = lgip_rows(os.path.join(d, "mig-lgip.txt"))
    out = {"gpu_memory_total_mib": total, "model": rows[0]["model"] if rows else None,
           "driver_lists_profiles": bool(theirs), "agree": [], "differ": [], "not_listed": [],
           "aegis_lacks": sorted(set(theirs) - {r["profile"] for r in rows}) if rows else []}
    for r in rows:
        name, gib, sms = r["profile"], float(r["memory_gib"]), int(r["sms"])
        mine = [gib, sms] + ([int(r["instances"])] if r.get("instances") else [])
        if name not in theirs:
            out["not_listed"].append(name)
        elif abs(theirs[name][0] - gib) < 0.01 and list(theirs[name][1:len(mine)]) == mine[1:]:
            out["agree"].append(name)
        else:
            out["differ"].append({"profile": name, "aegis": mine, "driver": list(theirs[name])})
    return out


def telemetry_summary(d):
    """What each telemetry source read under load (telemetry-{auto,gpm,dcgm}.csv, aegis-gpu-query):
    per source its description line and, per GPU, the source and the three activity metrics."""
    out = {}
    for src in ("auto", "gpm", "dcgm"):
        entry = {}
        try:
            with open(os.path.join(d, f"telemetry-{src}.txt")) as f:
                entry["describe"] = f.read().strip()
        except OSError:
            continue
        def num(v):
            try:
                return float(v)
            except (TypeError, ValueError):
                return None
        try:
            with open(os.path.join(d, f"telemetry-{src}.csv"), newline="") as f:
                entry["gpus"] = [{"uuid": r.get("uuid"), "source": r.get("source"), "smact": num(r.get("smact")),
                                  "smocc": num(r.get("smocc")), "drama": num(r.get("drama")),
                                  "utilization": num(r.get("utilization"))}
                                 for r in csv.DictReader(f) if r.get("uuid")]
        except OSError:
            entry["gpus"] = []
        out[src] = entry
    return out


def memory_target(path, target_gib=40):
    """The load job of the self-check is gpt.py --memory-target-gib 40: its JSON line says the
    batch it chose and its peak; under the target is what the option promises."""
    try:
        with open(path) as f:
            lines = [l for l in f if l.startswith("{")]
        j = json.loads(lines[-1])
    except (OSError, ValueError, IndexError):
        return None
    if j.get("device") != "cuda":
        return None
    peak = j.get("peak_reserved_mib")
    return {"target_gib": target_gib, "batch_size": j.get("batch_size"), "peak_reserved_mib": peak,
            "status": j.get("status"),
            "verdict": "under the target" if j.get("status") == "ok" and peak is not None and peak <= target_gib * 1024
            else "NOT under the target"}


def nvml_summary(d):
    s = {}
    for phase in ("idle", "load"):
        p = load(os.path.join(d, f"probe-{phase}.json"))
        if not p:
            s[phase] = {"error": "no probe output"}
            continue
        g = (p.get("after_interval") or [{}])
        s[phase] = {
            "error": p.get("error"), "describe": p.get("describe"), "open_ms": p.get("open_ms"),
            "gpus": [{k: x.get(k) for k in ("name", "memory_total_mib", "memory_used_mib", "utilization", "smact",
                                             "smocc", "drama", "power_w", "telemetry", "mig_enabled")}
                     | {"processes": x.get("processes")} for x in g],
            "gpm_metrics_present": p.get("gpm_metrics_present"),
            "in_process_sample_us": p.get("in_process_sample_us"),
            # what aegisd asks now: neither costly call / per-process utilisation (no energy)
            "in_process_cheap_sample_us": p.get("in_process_cheap_sample_us"),
            "in_process_anchoring_sample_us": p.get("in_process_anchoring_sample_us"),
            "subprocess_per_sample": p.get("subprocess_per_sample"),
        }
    # Does our process list (v3 layout) agree with nvidia-smi's, pid for pid and MiB for MiB?
    ours = {}
    for g in (s.get("load", {}).get("gpus") or []):
        for pr in g.get("processes") or []:
            ours[pr["pid"]] = pr.get("used_mib")
    theirs = smi_apps(os.path.join(d, "apps-before.csv")) or smi_apps(os.path.join(d, "apps-after.csv"))
    if theirs:
        s["process_check"] = {"ours": ours, "nvidia_smi": theirs,
                              "same_pids": sorted(ours) == sorted(theirs),
                              "max_mib_difference": max((abs((ours.get(p) or 0) - (theirs[p] or 0)) for p in theirs),
                                                        default=None)}
    mt = memory_target(os.path.join(d, "load.log"))
    if mt:
        s["memory_target"] = mt
    mig = mig_table_check(d)
    if mig is not None:
        s["mig_table"] = mig
    tel = telemetry_summary(d)
    if tel:
        s["telemetry"] = tel
    return s


def print_nvml(s):
    for phase in ("idle", "load"):
        x = s.get(phase, {})
        if x.get("error"):
            print(f"  {phase}: ERROR {x['error']}")
        print(f"  {phase}: {x.get('describe')}; GPM metrics present: {x.get('gpm_metrics_present')}")
        for g in x.get("gpus") or []:
            procs = " ".join(f"{p['pid']}:{p['used_mib']}" for p in g.get("processes") or [])
            print(f"    {g['name']}: {g['memory_used_mib']}/{g['memory_total_mib']} MiB, util {g['utilization']}, "
                  f"smact {g['smact']}, smocc {g['smocc']}, drama {g['drama']}, {g['power_w']} W, "
                  f"telemetry {g['telemetry']}, processes [{procs}]")
        ip = x.get("in_process_sample_us") or {}
        if ip:
            print(f"    one in-process sample: mean {ip['mean']:.1f} us, p99 {ip['p99']:.1f} us")
        for key, what in (("in_process_cheap_sample_us", "without per-process utilisation and energy"),
                          ("in_process_anchoring_sample_us", "with per-process utilisation, without energy")):
            if x.get(key):
                print(f"    one in-process sample {what}: mean {x[key]['mean']:.1f} us, p99 {x[key]['p99']:.1f} us")
        for sp in x.get("subprocess_per_sample") or []:
            ms = sp.get("ms") or {}
            ratio = sp.get("ratio_to_in_process")
            print(f"    one run of `{sp['command'][:60]}`: " +
                  (f"mean {ms['mean']:.2f} ms, p99 {ms['p99']:.2f} ms, {ratio:.0f}x" if ms else "failed") +
                  (f" ({sp['failed']} of {sp['runs']} failed)" if sp.get("failed") else ""))
    if "mig_table" in s:
        m = s["mig_table"]
        print(f"  MIG table: GPU of {m['gpu_memory_total_mib']} MiB is aegis's {m['model']}; driver lists profiles: "
              f"{m['driver_lists_profiles']}; agree {m['agree']}, differ {m['differ']}, "
              f"aegis lacks {m.get('aegis_lacks', [])}")
    for src, t in (s.get("telemetry") or {}).items():
        print(f"  telemetry --source {src}: {t.get('describe')}")
        for g in t.get("gpus") or []:
            print(f"    {g['uuid']}: source {g['source']}, smact {g['smact']}, smocc {g['smocc']}, drama {g['drama']}, "
                  f"util {g['utilization']}")
    if "process_check" in s:
        pc = s["process_check"]
        print(f"  process list against nvidia-smi: same pids {pc['same_pids']}, "
              f"largest memory difference {pc['max_mib_difference']} MiB")


def json_lines(path):
    """The JSON objects of a JSON-lines file, skipping a line cut short when a run was stopped."""
    with open(path) as f:
        for line in f:
            try:
                yield json.loads(line)
            except ValueError:
                continue


def attribution(path):
    """What the samples say of per-process attribution: whether NVML gave per-process
    utilisation samples, how aegisd tracks job processes, the foreign processes it saw (none
    expected: every GPU process was a job's), and how many GPU processes sat in an aegis
    job cgroup."""
    samples, tracking, foreign, apps, in_job_cgroup = set(), None, set(), 0, 0
    try:
        for s in json_lines(path):
                for gpu in s.get("gpus") or []:
                    tracking = tracking or gpu.get("job_tracking")
                    samples.add(bool(gpu.get("process_samples")))
                    foreign.update(p["pid"] for p in gpu.get("foreign", []))
                for app in s.get("apps", []):
                    apps += 1
                    in_job_cgroup += "/aegis/" in (app.get("cgroup") or "")
    except OSError:
        return {"error": f"{path}: cannot read"}
    return {"process_samples": sorted(samples), "tracking": tracking, "foreign_pids": sorted(foreign),
            "gpu_process_samples": apps, "in_an_aegis_job_cgroup": in_job_cgroup}


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def read_telemetry(path):
    try:
        return [s for s in json_lines(path) if s.get("gpus")]
    except OSError:
        return []


# The heavy phase of a job that ran alone: its steady level is the 80th percentile of the GPU's
# SM activity while it ran, and the phase starts at the first of 3 samples in a row at half that
# level or more (the H200's start-ups: 0.00-0.12 of warm-up kernels, then 0.47-0.89 at once).
HEAVY_FRACTION, HEAVY_SAMPLES = 0.5, 3


def heavy_phase_start(samples, launched, ended):
    xs = [(s["t"], s["gpus"][0].get("smact")) for s in samples if launched <= s["t"] <= ended]
    xs = [(t, v) for t, v in xs if v is not None]
    if len(xs) < HEAVY_SAMPLES:
        return None, None
    level = sorted(v for _, v in xs)[int(0.8 * (len(xs) - 1))]
    if level <= 0:
        return None, level
    for i in range(len(xs) - HEAVY_SAMPLES + 1):
        if all(v >= HEAVY_FRACTION * level for _, v in xs[i:i + HEAVY_SAMPLES]):
            return xs[i][0], level
    return None, level


def run_summary_one(d, name):
    doc = load(os.path.join(d, name, "jobs.json"))
    if not doc:
        return {"error": "no jobs.json"}
    telemetry = read_telemetry(os.path.join(d, name, "telemetry.jsonl"))
    jobs = []
    for j in doc["jobs"]:
        sh, res = j["show"], j.get("result") or {}
        att = sh.get("attempt_log") or []
        last = att[-1] if att else {}
        entry = {
            "name": j["name"], "kind": j.get("kind", j["name"]), "state": sh["state"], "attempts": len(att),
            "outcomes": [a["outcome"] for a in att], "guard": j.get("guard"),
            "queued_s": (att[0]["launched_at"] - sh["submitted_at"]) if att else None,
            "first_activity_s": (last["first_activity"] - last["launched_at"]) if last.get("first_activity") else None,
            # Which evidence started its window, and how long after its CUDA context.
            "anchor": last.get("anchor"),
            "context_to_activity_s": (last["first_activity"] - last["context_at"])
            if last.get("first_activity") and last.get("context_at") else None,
            "run_s": (last["ended_at"] - last["launched_at"]) if last.get("ended_at") else None,
            "jct_s": (sh["ended_at"] - sh["submitted_at"]) if sh.get("ended_at") else None,
            "launched_at": last.get("launched_at"), "ended_at": last.get("ended_at"),
            "samples_per_s": res.get("samples_per_s"), "steps": res.get("steps"),
            "peak_reserved_mib": res.get("peak_reserved_mib"), "batch_size": res.get("batch_size"),
            "startup_s": res.get("startup_s"),
            # What the job's history recorded of its GPU utilisation (estimators read it).
            "utilisation": sh.get("utilisation"),
        }
        # Alone on the GPU (the solo phase runs one job at a time): where its heavy phase began,
        # and how far the anchor landed from it (the target: within 2 s).
        if doc.get("solo") and last.get("launched_at") and last.get("ended_at"):
            start, level = heavy_phase_start(telemetry, last["launched_at"], last["ended_at"])
            entry["steady_smact"] = level
            entry["heavy_phase_s"] = (start - last["launched_at"]) if start else None
            entry["anchor_minus_heavy_s"] = (last["first_activity"] - start) \
                if start and last.get("first_activity") else None
        jobs.append(entry)
    ends = [j["show"]["ended_at"] for j in doc["jobs"] if j["show"].get("ended_at")]
    first = min(j["show"]["submitted_at"] for j in doc["jobs"])
    anchors = {}
    for j in jobs:
        anchors[j["anchor"] or "none"] = anchors.get(j["anchor"] or "none", 0) + 1
    return {"policy": doc.get("policy"), "solo": bool(doc.get("solo")),
            "completed": sum(j["state"] == "completed" for j in jobs), "jobs": len(jobs),
            "anchors": anchors, "attribution": attribution(os.path.join(d, name, "telemetry.jsonl")),
            "oom_attempts": sum(o == "oom" for j in jobs for o in j["outcomes"]),
            "guard_cancels": sum(1 for j in jobs if j["guard"]),
            "makespan_s": (max(ends) - first) if ends else None, "timed_out": doc.get("timed_out"),
            "per_job": jobs}


def mix_rows(d):
    try:
        with open(os.path.join(d, "mix.csv"), newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def derive_exclusive(solo, rows):
    """The exclusive policy's makespan of the whole mix on this one GPU, derived from the solo
    phase: exclusive runs the jobs one after the other, so it is the sum of each job's solo run
    (launch to end, its kind's) plus the daemon's gap between one job's end and the next one's
    launch (the solo phase's mean), plus the first job's wait from submission to launch."""
    done = {j["kind"]: j for j in solo["per_job"] if j["state"] == "completed" and j["run_s"]}
    missing = sorted({r["kind"] for r in rows} - set(done))
    if missing:
        return {"error": f"no completed solo run of {', '.join(missing)}"}
    order = sorted(done.values(), key=lambda j: j["launched_at"])
    gaps = [b["launched_at"] - a["ended_at"] for a, b in zip(order, order[1:])]
    gap = sum(gaps) / len(gaps) if gaps else 0.0
    first_wait = order[0]["queued_s"] or 0.0
    total = sum(done[r["kind"]]["run_s"] for r in rows) + gap * (len(rows) - 1) + first_wait
    return {"makespan_s": total, "jobs": len(rows), "mean_gap_s": gap, "first_wait_s": first_wait,
            "solo_run_s": {k: j["run_s"] for k, j in done.items()}}


def run_summary(d):
    out = {}
    names = [n for n in ("solo", "aegis-1", "aegis-2", "aegis-3", "mps", "exclusive", "aegis")
             if os.path.isdir(os.path.join(d, n))]
    for n in names:
        out[n] = run_summary_one(d, n)
    rows = mix_rows(d)
    if "solo" in out and "error" not in out["solo"] and rows:
        excl = derive_exclusive(out["solo"], rows)
        reps = [out[n] for n in ("aegis-1", "aegis-2", "aegis-3") if n in out and "error" not in out[n]]
        whole = [r for r in reps if r["completed"] == r["jobs"] and not r["timed_out"]]
        spans = [r["makespan_s"] for r in whole]
        mix = {"exclusive_derived": excl, "aegis_repeats": len(reps), "aegis_complete_repeats": len(whole),
               "aegis_makespan_s": spans}
        if spans and "makespan_s" in excl:
            ratios = [m / excl["makespan_s"] for m in spans]
            mix["aegis_over_exclusive"] = {"min": min(ratios), "median": median(ratios), "max": max(ratios),
                                          "each": ratios}
        errs = [j["anchor_minus_heavy_s"] for j in out["solo"]["per_job"] if j.get("anchor_minus_heavy_s") is not None]
        mix["anchor_minus_heavy_s"] = {j["kind"]: j.get("anchor_minus_heavy_s") for j in out["solo"]["per_job"]}
        mix["anchors_within_2s"] = sum(abs(e) <= 2 for e in errs)
        mix["anchors_checked"] = len(errs)
        out["mix"] = mix
    out["nvml"] = load(os.path.join(d, "nvml", "summary.json"))
    return out


def headline(path):
    s = load(path) or {}
    for n in ("solo", "aegis-1", "aegis-2", "aegis-3", "mps", "exclusive", "aegis"):
        r = s.get(n)
        if not r or "error" in r:
            continue
        span = r.get("makespan_s")
        print(f"  {n}: {r['completed']}/{r['jobs']} completed, makespan "
              f"{'-' if span is None else f'{span:.1f}'} s, {r['oom_attempts']} OOM attempts, anchors {r['anchors']}"
              + (f", {r['guard_cancels']} cancelled by the guards" if r.get("guard_cancels") else ""))
        if n == "mps":
            for j in r["per_job"]:
                u = j.get("utilisation") or {}
                print(f"    {j['kind']}: {j['state']}, anchor {j['anchor'] or '-'} at "
                      f"{j['first_activity_s'] and round(j['first_activity_s'], 1)} s, history utilisation "
                      f"{u.get('gpu_util')} ({u.get('gpu_util_source')})")
        if r.get("solo"):
            for j in r["per_job"]:
                print(f"    {j['kind']}: run {j['run_s'] and round(j['run_s'], 1)} s, heavy phase from "
                      f"{j.get('heavy_phase_s') and round(j['heavy_phase_s'], 1)} s at SMACT "
                      f"{j.get('steady_smact') and round(j['steady_smact'], 2)}, anchor ({j['anchor']}) at "
                      f"{j['first_activity_s'] and round(j['first_activity_s'], 1)} s "
                      f"({j.get('anchor_minus_heavy_s') and round(j['anchor_minus_heavy_s'], 1)} s from the heavy phase)")
    m = s.get("mix")
    if m:
        e = m["exclusive_derived"]
        print(f"  mix: exclusive (derived from the solo runs) {e.get('makespan_s', float('nan')):.1f} s; aegis "
              f"{', '.join(f'{x:.1f}' for x in m['aegis_makespan_s']) or '-'} s over {m['aegis_complete_repeats']} "
              f"complete repeat(s)")
        r = m.get("aegis_over_exclusive")
        if r:
            print(f"  aegis / exclusive: median {r['median']:.3f}, min {r['min']:.3f}, max {r['max']:.3f}")
        print(f"  anchors within 2 s of the heavy phase: {m['anchors_within_2s']} of {m['anchors_checked']}")
    load_job = ((s.get("nvml") or {}).get("memory_target") or {})
    if load_job:
        print(f"  gpt.py --memory-target-gib {load_job.get('target_gib')}: batch {load_job.get('batch_size')}, "
              f"peak reserved {load_job.get('peak_reserved_mib')} MiB ({load_job.get('verdict')})")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("nvml", "runs", "headline"):
        sys.exit("usage: summarize.py nvml RESULTS/nvml | summarize.py runs RESULTS | summarize.py headline SUMMARY")
    if sys.argv[1] == "headline":
        headline(sys.argv[2])
        return
    if sys.argv[1] == "nvml":
        s = nvml_summary(sys.argv[2])
        with open(os.path.join(sys.argv[2], "summary.json"), "w") as f:
            json.dump(s, f, indent=1)
        print_nvml(s)
    else:
        print(json.dumps(run_summary(sys.argv[2]), indent=1))


if __name__ == "__main__":
    main()
