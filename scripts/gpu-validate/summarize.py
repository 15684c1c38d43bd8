#!/usr/bin/env python3
"""Short summaries of a validation run, printed while it runs (on the GPU machine).

  summarize.py nvml RESULTS/nvml    the NVML self-check, in lines for the log (and nvml/summary.json)
  summarize.py runs RESULTS         both mini-trace runs and the self-check, as JSON on stdout
Standard library only. The full analysis (the simulator replay) is compare.py, run afterwards.
"""
import csv
import json
import os
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
    """nvidia-smi mig -lgip -> {profile: (GiB, SMs)} of GPU 0 (empty when MIG mode is off)."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                cells = line.strip(" |\n").split()
                # "0  MIG 3g.40gb  9  2/2  39.50  No  60  3  0"
                if len(cells) >= 7 and cells[0] == "0" and cells[1] == "MIG" and "+" not in cells[2]:
                    try:
                        out[cells[2]] = (float(cells[5]), int(cells[7]))
                    except (ValueError, IndexError):
                        pass
    except OSError:
        pass
    return out


def mig_table_check(d):
    """aegis's MIG table (aegis-gpu-query --mig-table) against the driver's, for this GPU's
    model (by memory.total): which rows agree, which differ, which the driver did not list."""
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
           "driver_lists_profiles": bool(theirs), "agree": [], "differ": [], "not_listed": []}
    for r in rows:
        name, gib, sms = r["profile"], float(r["memory_gib"]), int(r["sms"])
        if name not in theirs:
            out["not_listed"].append(name)
        elif abs(theirs[name][0] - gib) < 0.01 and theirs[name][1] == sms:
            out["agree"].append(name)
        else:
            out["differ"].append({"profile": name, "aegis": [gib, sms], "driver": list(theirs[name])})
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
        for sp in x.get("subprocess_per_sample") or []:
            ms = sp.get("ms") or {}
            ratio = sp.get("ratio_to_in_process")
            print(f"    one run of `{sp['command'][:60]}`: " +
                  (f"mean {ms['mean']:.2f} ms, p99 {ms['p99']:.2f} ms, {ratio:.0f}x" if ms else "failed") +
                  (f" ({sp['failed']} of {sp['runs']} failed)" if sp.get("failed") else ""))
    if "mig_table" in s:
        m = s["mig_table"]
        print(f"  MIG table: GPU of {m['gpu_memory_total_mib']} MiB is aegis's {m['model']}; driver lists profiles: "
              f"{m['driver_lists_profiles']}; agree {m['agree']}, differ {m['differ']}")
    for src, t in (s.get("telemetry") or {}).items():
        print(f"  telemetry --source {src}: {t.get('describe')}")
        for g in t.get("gpus") or []:
            print(f"    {g['uuid']}: source {g['source']}, smact {g['smact']}, smocc {g['smocc']}, drama {g['drama']}, "
                  f"util {g['utilization']}")
    if "process_check" in s:
        pc = s["process_check"]
        print(f"  process list against nvidia-smi: same pids {pc['same_pids']}, "
              f"largest memory difference {pc['max_mib_difference']} MiB")


def attribution(path):
    """What the samples say of per-process attribution: whether NVML gave per-process
    utilisation samples, how aegisd tracks job processes, the foreign processes it saw (none
    expected: every GPU process was a job's), and how many GPU processes sat in an aegis
    job cgroup."""
    samples, tracking, foreign, apps, in_job_cgroup = set(), None, set(), 0, 0
    try:
        with open(path) as f:
            for line in f:
                try:
                    s = json.loads(line)
                except ValueError:
                    continue
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


def run_summary(d):
    out = {}
    for policy in ("exclusive", "aegis"):
        doc = load(os.path.join(d, policy, "jobs.json"))
        if not doc:
            out[policy] = {"error": "no jobs.json"}
            continue
        jobs = []
        for j in doc["jobs"]:
            sh, res = j["show"], j.get("result") or {}
            att = sh.get("attempt_log") or []
            last = att[-1] if att else {}
            jobs.append({
                "name": j["name"], "state": sh["state"], "attempts": len(att),
                "outcomes": [a["outcome"] for a in att],
                "queued_s": (att[0]["launched_at"] - sh["submitted_at"]) if att else None,
                "first_activity_s": (last["first_activity"] - last["launched_at"]) if last.get("first_activity") else None,
                # Which evidence started its window, and how long after its CUDA context.
                "anchor": last.get("anchor"),
                "context_to_activity_s": (last["first_activity"] - last["context_at"])
                if last.get("first_activity") and last.get("context_at") else None,
                "run_s": (last["ended_at"] - last["launched_at"]) if last.get("ended_at") else None,
                "jct_s": (sh["ended_at"] - sh["submitted_at"]) if sh.get("ended_at") else None,
                "samples_per_s": res.get("samples_per_s"), "peak_reserved_mib": res.get("peak_reserved_mib"),
                "batch_size": res.get("batch_size"),
            })
        ends = [j["show"]["ended_at"] for j in doc["jobs"] if j["show"].get("ended_at")]
        first = min(j["show"]["submitted_at"] for j in doc["jobs"])
        anchors = {}
        for j in jobs:
            anchors[j["anchor"] or "none"] = anchors.get(j["anchor"] or "none", 0) + 1
        out[policy] = {"completed": sum(j["state"] == "completed" for j in jobs), "jobs": len(jobs),
                       "anchors": anchors, "attribution": attribution(os.path.join(d, policy, "telemetry.jsonl")),
                       "oom_attempts": sum(o == "oom" for j in jobs for o in j["outcomes"]),
                       "makespan_s": (max(ends) - first) if ends else None, "timed_out": doc.get("timed_out"),
                       "per_job": jobs}
    out["nvml"] = load(os.path.join(d, "nvml", "summary.json"))
    return out


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("nvml", "runs"):
        sys.exit("usage: summarize.py nvml RESULTS/nvml | summarize.py runs RESULTS")
    if sys.argv[1] == "nvml":
        s = nvml_summary(sys.argv[2])
        with open(os.path.join(sys.argv[2], "summary.json"), "w") as f:
            json.dump(s, f, indent=1)
        print_nvml(s)
    else:
        print(json.dumps(run_summary(sys.argv[2]), indent=1))


if __name__ == "__main__":
    main()
