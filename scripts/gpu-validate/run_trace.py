#!/usr/bin/env python3
"""Plays the mini-trace against a running aegisd and records what happened.

Submits each job of the trace at its offset (aegis submit; with --solo one job of each kind,
all at once, for the exclusive policy to run one after the other), samples `aegis gpus --json`
(and, on a real GPU, nvidia-smi's per-process memory) while they run, waits until every job is
final or the deadline passes (then cancels what is left), and writes into OUT_DIR:
  jobs.json        every job: `aegis show --json`, its command, and the workload's final JSON line
  telemetry.jsonl  one line per sample: {"t": unix time, "gpus": [...]} or {"t", "apps": [...]}, each
                   app with its cgroup v2 path (/proc/PID/cgroup), which tells whether aegisd
                   can attribute it to its job by cgroup
Never stalls on one job: an attempt running longer than --cap-factor times its row's
expect_s (at least --cap-min-s) is cancelled, and so is a queue head that waits while no job
runs for --stuck-s (a job that can never start here); each such cancel is recorded in
jobs.json ("guard") and the run goes on with the others.
With --warm-up STEPS it talks to no aegisd: it runs one job of each kind at once, directly,
for STEPS training steps (emulated: one scaled second), and writes OUT_DIR/warmup.json. That
reads the workloads' libraries (PyTorch, cuDNN's kernels) into the page cache before the solo
phase, so that the solo phase starts as warm as the aegis runs after it (docs/gpu-validation.md,
run 3).
Standard library only (it runs under whatever python3 the GPU machine has).
"""
import argparse
import csv
import json
import os
import shlex
import subprocess
import sys
import threading
import time

FINAL = ("completed", "failed", "cancelled")


def die(msg):
    print(f"run_trace: {msg}", file=sys.stderr)
    sys.exit(1)


class Cli:
    def __init__(self, aegis, socket):
        self.base = [aegis, "--socket", socket]

    def run(self, *args, check=True):
        r = subprocess.run(self.base + list(args), capture_output=True, text=True)
        if check and r.returncode != 0:
            raise RuntimeError(f"aegis {' '.join(args)}: {r.stderr.strip()}")
        return r

    def json(self, *args):
        return json.loads(self.run(*args).stdout)


def job_command(row, a):
    """The command line of one trace row: the real workload, or its emulated stand-in. A row
    gives its length as training steps (fixed work: co-located jobs that slow down take longer)
    or, in the first run's mini-trace, as seconds."""
    if a.mode == "real":
        length = ["--steps", row["steps"]] if row.get("steps") else ["--seconds", f"{float(row['seconds']) * a.scale:g}"]
        return [a.python, os.path.join(a.repo, "workloads", row["workload"] + ".py")] + length + shlex.split(row["args"])
    seconds = float(row.get("fake_seconds") or row["seconds"]) * a.scale
    cmd = [os.path.join(a.repo, "scripts/gpu-validate/fake_workload.sh"), row["workload"], a.fakejob,
           row["fake_mem_mib"], "--smact", row["fake_smact"], "--drama", row["fake_drama"],
           "--seconds", f"{seconds:g}", "--startup", f"{float(row['fake_startup_s']) * a.scale:g}"]
    # The start-up shape the H200 showed (docs/gpu-validation.md): a CUDA context, model loading
    # with small warm-up kernels, then training.
    if row.get("fake_context_mib"):
        cmd += ["--context", row["fake_context_mib"], "--load", f"{float(row['fake_load_s']) * a.scale:g}",
                "--loaded", row["fake_loaded_mib"], "--load-smact", row.get("fake_load_smact") or "0"]
    return cmd


def solo_rows(rows, kinds=None, stagger=0.0):
    """The first row of each kind (of `kinds` only, when given), submitted `stagger` seconds apart
    (0: all at once; the exclusive policy then runs them in turn)."""
    seen, out = set(), []
    for r in rows:
        kind = r.get("kind") or r["name"]
        if kind not in seen and (not kinds or kind in kinds):
            seen.add(kind)
            out.append(dict(r, submit_s=str(stagger * len(out))))
    return out


def warm_up(rows, a):
    """One job of each kind at once, outside aegisd, STEPS steps each; every exit recorded."""
    procs = []
    for row in solo_rows(rows):
        r = dict(row, steps=str(a.warm_up))
        if a.mode == "emulated":
            r.update(fake_seconds="1", fake_startup_s="0", fake_load_s="0")
        log = open(os.path.join(a.out, f"warmup-{r.get('kind') or r['name']}.log"), "w")
        cmd = job_command(r, a)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        procs.append((r.get("kind") or r["name"], cmd, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                                                        env=env, start_new_session=True), log, time.time()))
    deadline = time.time() + a.deadline_s
    done = {}
    for kind, cmd, proc, log, t in procs:
        try:
            rc = proc.wait(timeout=max(0.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            rc = proc.wait()
            rc = f"killed at the deadline ({a.deadline_s:g} s)"
        log.close()
        done[kind] = {"command": cmd, "exit": rc, "seconds": round(time.time() - t, 2)}
    with open(os.path.join(a.out, "warmup.json"), "w") as f:
        json.dump({"steps": a.warm_up, "mode": a.mode, "kinds": done}, f, indent=1)
    ok = sum(d["exit"] == 0 for d in done.values())
    print(f"run_trace: warm-up: {ok}/{len(done)} kinds ran {a.warm_up} steps "
          "(" + ", ".join(f"{k} {d['seconds']:.0f} s" for k, d in done.items()) + ")", flush=True)


def cgroup_of(pid):
    """The process's cgroup v2 path (the "0::" line of /proc/PID/cgroup), None if unknown."""
    try:
        with open(f"/proc/{int(pid)}/cgroup") as f:
            for line in f:
                if line.startswith("0::"):
                    return line[3:].strip()
    except (OSError, ValueError):
        pass
    return None


def sampler(cli, a, stop, out):
    """Every interval: the daemon's view of the GPUs; every 4th, nvidia-smi's processes (real GPU)."""
    n = 0
    with open(out, "w") as f:
        while not stop.is_set():
            t = time.time()
            try:
                f.write(json.dumps({"t": t, "gpus": cli.json("gpus", "--json")}) + "\n")
            except (RuntimeError, ValueError, OSError) as e:
                f.write(json.dumps({"t": t, "error": str(e)[:300]}) + "\n")
            if a.mode == "real" and n % 4 == 0:
                try:
                    r = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                                        "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10)
                    apps = [dict(zip(("pid", "used_mib"), (x.strip() for x in line.split(","))))
                            for line in r.stdout.splitlines() if line.strip()]
                    for app in apps:
                        app["cgroup"] = cgroup_of(app["pid"])
                    f.write(json.dumps({"t": time.time(), "apps": apps, "rc": r.returncode}) + "\n")
                except (OSError, subprocess.SubprocessError) as e:
                    f.write(json.dumps({"t": time.time(), "apps_error": str(e)[:300]}) + "\n")
            f.flush()
            n += 1
            stop.wait(max(0.0, a.interval - (time.time() - t)))


def last_json_line(text):
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                v = json.loads(line)
            except ValueError:
                continue
            if isinstance(v, dict) and "model" in v:
                return v
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--aegis", help="the aegis command (not with --warm-up)")
    p.add_argument("--socket", help="aegisd's socket (not with --warm-up)")
    p.add_argument("--trace", required=True, help="scripts/gpu-validate/minitrace.csv")
    p.add_argument("--repo", required=True, help="repository root (workloads/, scripts/)")
    p.add_argument("--mode", choices=["real", "emulated"], required=True)
    p.add_argument("--python", default=sys.executable, help="python with PyTorch, for the workloads")
    p.add_argument("--fakejob", help="aegis-fakejob (emulated mode)")
    p.add_argument("--scale", type=float, default=1.0, help="multiplies durations and submit offsets")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between telemetry samples")
    p.add_argument("--deadline-s", type=float, required=True, help="cancel what is not final after this long")
    p.add_argument("--policy", help="recorded with the results (not with --warm-up)")
    p.add_argument("--warm-up", type=int, metavar="STEPS",
                   help="no aegisd: run one job of each kind at once for STEPS steps, then exit")
    p.add_argument("--solo", action="store_true", help="one job of each kind, all submitted at once")
    p.add_argument("--kinds", help="with --solo: only these kinds (comma-separated)")
    p.add_argument("--stagger", type=float, default=0.0, help="with --solo: seconds between submissions")
    p.add_argument("--cap-factor", type=float, default=5.0, help="cancel an attempt running this many times its expect_s")
    p.add_argument("--cap-min-s", type=float, default=60.0, help="... but never before this many seconds (scaled)")
    p.add_argument("--stuck-s", type=float, default=20.0,
                   help="cancel a queue head that waits this long while no job runs (scaled)")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    if a.mode == "emulated" and not a.fakejob:
        die("--mode emulated needs --fakejob")
    with open(a.trace, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        die(f"{a.trace}: no jobs")
    if a.warm_up is not None:
        if a.warm_up < 1:
            die(f"--warm-up: {a.warm_up} is not a number of steps (1 or more)")
        os.makedirs(a.out, exist_ok=True)
        warm_up(rows, a)
        return
    for need in ("aegis", "socket", "policy"):
        if not getattr(a, need):
            die(f"--{need} is needed (all but --warm-up talk to aegisd)")
    if a.solo:
        kinds = set(a.kinds.split(",")) if a.kinds else None
        rows = solo_rows(rows, kinds, a.stagger)
        if kinds and {r.get("kind") for r in rows} != kinds:
            die(f"--kinds {a.kinds}: not all in {a.trace}")
    os.makedirs(a.out, exist_ok=True)
    cli = Cli(a.aegis, a.socket)

    stop = threading.Event()
    th = threading.Thread(target=sampler, args=(cli, a, stop, os.path.join(a.out, "telemetry.jsonl")), daemon=True)
    th.start()

    t0 = time.time()
    submitted = []
    env = ["--env", "PYTHONUNBUFFERED=1"]
    for row in sorted(rows, key=lambda r: float(r["submit_s"])):
        wait = t0 + float(row["submit_s"]) * a.scale - time.time()
        if wait > 0:
            time.sleep(wait)
        cmd = job_command(row, a)
        # --name last: after a repeatable option (--tag, --env) the CLI takes "--" as the end of
        # that option's values, and the command's own options would then be parsed as aegis's.
        r = cli.run("submit", "--tag", "gpu-validate", *env, "--name", row["name"], "--", *cmd, check=False)
        if r.returncode != 0:
            die(f"submit {row['name']}: {r.stderr.strip()}")
        submitted.append({"name": row["name"], "kind": row.get("kind") or row["name"], "id": int(r.stdout.strip()),
                          "command": cmd, "trace_submit_s": float(row["submit_s"]) * a.scale,
                          "workload": row["workload"], "args": row["args"],
                          "expect_s": float(row["expect_s"]) * a.scale if row.get("expect_s") else None})
        print(f"run_trace: {a.policy}: submitted {row['name']} as job {submitted[-1]['id']}", flush=True)

    ids = [s["id"] for s in submitted]
    by_id = {s["id"]: s for s in submitted}
    deadline = t0 + a.deadline_s
    timed_out = False
    guards = {}          # job id -> why the run cancelled it
    idle_since = None    # when the queue last had a waiting job and nothing running
    while True:
        listed = cli.json("queue", "--all", "--json")
        states = {j["id"]: j["state"] for j in listed}
        if all(states.get(i) in FINAL for i in ids):
            break
        now = time.time()
        if now > deadline:
            timed_out = True
            left = [str(i) for i in ids if states.get(i) not in FINAL]
            print(f"run_trace: {a.policy}: deadline of {a.deadline_s:g} s passed; cancelling jobs {', '.join(left)}",
                  file=sys.stderr, flush=True)
            cli.run("cancel", *left, check=False)
            time.sleep(2)
            break
        # The guards: an attempt far past its expected length; a head that cannot start.
        for j in listed:
            s_ = by_id.get(j["id"])
            if not s_ or j["state"] != "running" or j["id"] in guards or not s_.get("expect_s"):
                continue
            since = j.get("started_at") or now
            cap = max(a.cap_factor * s_["expect_s"], a.cap_min_s * a.scale)
            if now - since > cap:
                guards[j["id"]] = f"running {now - since:.0f} s, over {cap:.0f} s ({a.cap_factor:g} x expect_s)"
        running = any(states.get(i) == "running" for i in ids)
        waiting = [i for i in ids if states.get(i) == "queued"]
        idle_since = None if running or not waiting else (idle_since or now)
        if idle_since and now - idle_since > a.stuck_s * a.scale and waiting[0] not in guards:
            guards[waiting[0]] = f"head of the queue for {now - idle_since:.0f} s while no job ran"
            idle_since = None
        for i, why in guards.items():
            if states.get(i) not in FINAL and not by_id[i].get("guard"):
                by_id[i]["guard"] = why
                print(f"run_trace: {a.policy}: cancelling {by_id[i]['name']} (job {i}): {why}", file=sys.stderr,
                      flush=True)
                cli.run("cancel", str(i), check=False)
        time.sleep(min(1.0, a.interval))
    stop.set()
    th.join(timeout=10)

    jobs = []
    for s in submitted:
        show = cli.json("show", str(s["id"]), "--json")
        out = cli.run("logs", str(s["id"]), check=False).stdout
        err = cli.run("logs", str(s["id"]), "--stderr", check=False).stdout
        jobs.append(dict(s, show=show, result=last_json_line(out), stdout_tail=out[-4000:], stderr_tail=err[-4000:]))
    doc = {"policy": a.policy, "mode": a.mode, "scale": a.scale, "solo": a.solo and not a.stagger, "started_at": t0,
           "ended_at": time.time(), "timed_out": timed_out, "jobs": jobs}
    with open(os.path.join(a.out, "jobs.json"), "w") as f:
        json.dump(doc, f, indent=1)
    done = sum(j["show"]["state"] == "completed" for j in jobs)
    ooms = sum(a_["outcome"] == "oom" for j in jobs for a_ in j["show"]["attempt_log"])
    ends = [j["show"]["ended_at"] for j in jobs if j["show"].get("ended_at")]
    span = (max(ends) - min(j["show"]["submitted_at"] for j in jobs)) if ends else float("nan")
    print(f"run_trace: {a.policy}: {done}/{len(jobs)} completed, {ooms} OOM attempts, makespan {span:.1f} s"
          + (" (deadline hit)" if timed_out else "")
          + (f", {len(guards)} cancelled by the guards" if guards else ""), flush=True)


if __name__ == "__main__":
    main()
