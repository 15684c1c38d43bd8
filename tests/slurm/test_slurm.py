"""aegis under a real Slurm: two nodes (multiple slurmd), each with its aegisd on two
emulated 40960 MiB GPUs. Jobs are submitted with sbatch, asking for GPU memory
(--gres=aegis_mem:8G), and run `aegis run` on the node Slurm picks. Checked:
  - collocation: four 8G jobs on one node share its two GPUs;
  - OOM recovery inside the allocation: a job that declares 4G and needs 36000 MiB dies of
    OOM next to them and completes through the ladder, on the same node;
  - give-back: a job that may only run alone after its OOM, on a node whose GPUs stay busy,
    is requeued by Slurm with a whole GPU's memory booked and completes on the other node
    (submitted by a second Unix user: the scontrol calls need no privilege);
  - scancel of a job whose batch script does not exec `aegis run` stops its GPU processes;
  - `aegis submit --slurm` writes and submits the batch script;
  - sacct (slurmdbd on MariaDB) and scontrol show every outcome, with GPU memory booked
    as the TRES gres/aegis_mem.
Usage: test_slurm.py BUILD_DIR (exit 77: skipped, e.g. not root or Slurm not installed).
"""
import os
import shlex
import signal
import subprocess
import sys
import time

from cluster import Cluster, Skip, wait_for

GIB = 1 << 30
USER = "aegistest1"


def fail(msg):
    raise AssertionError(msg)


def shared_seconds(jobs):
    """Longest time two completed attempts ran on the same GPU at once."""
    spans = []
    for j in jobs:
        for a in j["attempt_log"]:
            if a["outcome"] == "completed" and a["ended_at"]:
                spans += [(g, a["launched_at"], a["ended_at"]) for g in a["gpus"]]
    best = 0.0
    for i, x in enumerate(spans):
        for y in spans[i + 1:]:
            if x[0] == y[0]:
                best = max(best, min(x[2], y[2]) - max(x[1], y[1]))
    return best


def ensure_user(name):
    if subprocess.run(["id", name], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True)


def run_wrap(c, *args, **kw):
    return f"exec {shlex.quote(c.aegis)} run {' '.join(args)} -- {shlex.quote(c.fakejob)} " + " ".join(
        f"--{k} {v}" for k, v in kw.items())


def running_on(c, node, slurm_ids):
    js = [c.aegis_job_of(node, s) for s in slurm_ids]
    return js if all(j and j["state"] == "running" for j in js) else None


def phase_sharing(c):
    """Collocation, OOM recovery on the node, scancel, aegis submit --slurm."""
    share = [c.sbatch("-w", "n1", "--gres=aegis_mem:8G", wrap=run_wrap(c, mem=8000, smact=0.3, seconds=14))
             for _ in range(4)]
    # A batch script that runs aegis run without exec: scancel must still stop the GPU job.
    script = os.path.join(c.work, "no-exec.sh")
    with open(script, "w") as f:
        f.write(f"#!/bin/bash\necho start\n{shlex.quote(c.aegis)} run -- {shlex.quote(c.fakejob)} "
                f"--mem 6000 --smact 0.2 --seconds 300\necho 'aegis run ended' $?\n")
    os.chmod(script, 0o755)
    victim = c.sbatch("-w", "n2", "--gres=aegis_mem:6G", script=script)
    r = c.cmd(c.aegis, "submit", "--slurm", "--mem", "6G", "--name", "via-submit", "--slurm-arg=--nodelist=n2",
              "--", c.fakejob, "--mem", "6000", "--smact", "0.2", "--seconds", "4")
    submitted = r.stdout.strip()
    if not submitted.isdigit():
        fail(f"aegis submit --slurm printed {r.stdout!r}")

    wait_for("the four 8G jobs running on n1's aegisd", lambda: running_on(c, "n1", share), 60, 0.3)
    oom = c.sbatch("-w", "n1", "--gres=aegis_mem:4G", wrap=run_wrap(c, mem=36000, smact=0.3, seconds=4))

    # scancel: the job's processes on the GPU go with it.
    j = wait_for("the no-exec job running with its process group",
                 lambda: (lambda x: x if x and x["state"] == "running" and x["attempt_log"]
                          and x["attempt_log"][-1]["pgid"] > 1 and x["attempt_log"][-1]["first_activity"]
                          else None)(c.aegis_job_of("n2", victim)), 60, 0.3)
    pgid = j["attempt_log"][-1]["pgid"]
    t_cancel = time.time()
    c.cmd("scancel", victim)

    def gone():
        try:
            os.killpg(pgid, 0)
            return False
        except ProcessLookupError:
            return True
    wait_for(f"the cancelled job's process group {pgid} to go", gone, 30, 0.2)
    gone_after = time.time() - t_cancel
    row = c.wait_final(victim, 60)
    aj = wait_for("n2's aegisd to record the cancel",
                  lambda: (lambda x: x if x["state"] != "running" else None)(c.aegis_job_of("n2", victim)), 30, 0.3)
    if row["state"] != "CANCELLED" or aj["state"] != "cancelled":
        fail(f"scancel: sacct {row}, aegisd {aj['state']} ({aj['reason']})")
    print(f"OK: scancel of Slurm job {victim} (script without exec): aegisd job {aj['id']} {aj['state']} "
          f"({aj['reason']}), its process group gone {gone_after:.1f} s after scancel; sacct {row['state']}")

    rows = {s: c.wait_final(s, 120) for s in share + [oom, submitted]}
    for s, row in rows.items():
        if row["state"] != "COMPLETED" or row["exit"] != "0:0":
            fail(f"Slurm job {s}: {row}\n{c.output(s)}")
    for s in share:
        if f"gres/aegis_mem={8 * GIB}" not in rows[s]["tres"] or rows[s]["nodes"] != "n1":
            fail(f"Slurm job {s}: booked {rows[s]['tres']} on {rows[s]['nodes']}")
    jobs = [c.aegis_job_of("n1", s) for s in share]
    overlap = shared_seconds(jobs)
    if overlap < 1.0:
        fail(f"the 8G jobs never shared a GPU: {[(j['name'], j['attempt_log']) for j in jobs]}")
    print(f"OK: 4 sbatch jobs of --gres=aegis_mem:8G ran on n1's 2 GPUs, two on one GPU at once for "
          f"{overlap:.1f} s; sacct: COMPLETED 0:0, AllocTRES gres/aegis_mem={8 * GIB}")

    oj = c.aegis_job_of("n1", oom)
    outcomes = [a["outcome"] for a in oj["attempt_log"]]
    if "oom" not in outcomes or outcomes[-1] != "completed" or oj["state"] != "completed":
        fail(f"OOM job {oom}: aegisd attempts {outcomes}, state {oj['state']}")
    if "declared GPU memory 4096 MiB per GPU, from the Slurm booking" not in c.output(oom):
        fail(f"OOM job {oom}: the booking was not its declared memory:\n{c.output(oom)}")
    print(f"OK: Slurm job {oom} (booked 4G, needs 36000 MiB) recovered on n1 inside its allocation: aegisd attempts "
          f"{outcomes}; sacct {rows[oom]['state']} {rows[oom]['exit']}")

    sj = next((j for j in c.aegis_jobs("n2") if j["name"] == "via-submit"), None)
    if not sj or sj["name"] != "via-submit" or sj["state"] != "completed" or \
            f"gres/aegis_mem={6 * GIB}" not in rows[submitted]["tres"]:
        fail(f"aegis submit --slurm: {sj and sj['state']}, sacct {rows[submitted]}")
    print(f"OK: aegis submit --slurm: Slurm job {submitted} booked gres/aegis_mem={6 * GIB}, ran as aegisd job "
          f"{sj['id']} ({sj['name']}) on n2: {rows[submitted]['state']}")


def phase_give_back(c):
    """n1's GPUs stay busy; a job that must run alone goes back to Slurm and runs on n2."""
    busy = [c.sbatch("-w", "n1", "--gres=aegis_mem:8G", wrap=run_wrap(c, mem=8000, smact=0.3, seconds=60))
            for _ in range(2)]
    wait_for("both of n1's GPUs busy", lambda: (lambda js: js and len({j["gpu_uuids"][0] for j in js}) == 2)(
        running_on(c, "n1", busy)), 60, 0.3)
    ensure_user(USER)
    alone = c.sbatch("--gres=aegis_mem:4G", user=USER,
                     wrap=run_wrap(c, "--requeue-after", "3", mem=38000, smact=0.3, seconds=4))
    # Slurm holds a requeued job back for about 2 minutes; as its admin, the test lets it
    # go once the give-back has rebooked it (the way the observation window is shortened).
    def held():
        j = c.job(alone)
        return j if j.get("JobState") == "PENDING" and j.get("Reason") == "BeginTime" else None
    j = wait_for(f"Slurm job {alone} requeued and held", held, 60, 0.3)
    if j.get("TresPerNode") != "gres:aegis_mem:40960M" or j.get("ExcNodeList") != "n1":
        fail(f"given-back job {alone} was not rebooked: {j}")
    c.cmd("scontrol", "update", f"JobId={alone}", "StartTime=now")
    row = c.wait_final(alone, 120)
    out = c.output(alone)
    job = c.job(alone)
    history = c.sacct(alone, duplicates=True)
    if row["state"] != "COMPLETED" or row["nodes"] != "n2":
        fail(f"given-back job {alone}: {row}\n{history}\n{out}")
    first, last = history[0], history[-1]
    if first["state"] != "REQUEUED" or first["nodes"] != "n1" or f"gres/aegis_mem={4 * GIB}" not in first["tres"]:
        fail(f"given-back job {alone}: first run {first}")
    if f"gres/aegis_mem={40960 << 20}" not in last["tres"]:
        fail(f"given-back job {alone}: not rebooked with a whole GPU: {last}")
    if job.get("Restarts") != "1" or "aegis:alone" not in job.get("Comment", "") or job.get("ExcNodeList") != "n1":
        fail(f"given-back job {alone}: scontrol shows {job}")
    n1 = c.aegis_job_of("n1", alone)
    n2 = c.aegis_job_of("n2", alone)
    if [a["outcome"] for a in n1["attempt_log"]] != ["oom"] or n1["state"] != "cancelled":
        fail(f"n1's aegisd: {n1['state']} {n1['attempt_log']}")
    if n2["state"] != "completed" or not n2["attempt_log"][-1]["exclusive"] or n2["user"] != USER:
        fail(f"n2's aegisd: {n2['state']} {n2['attempt_log']}")
    if "requeued with Gres=aegis_mem:40960M ExcNodeList=n1" not in out:
        fail(f"the job's output does not say why it moved:\n{out}")
    print(f"OK: Slurm job {alone} (user {USER}, booked 4G, needs 38000 MiB) OOMed on n1, waited 3 s to run alone, "
          f"was requeued with TresPerNode={job['TresPerNode']} ExcNodeList={job['ExcNodeList']} and completed alone "
          f"on n2; sacct -D: {first['state']} on {first['nodes']}, then {last['state']} on {last['nodes']}; "
          f"Restarts={job['Restarts']}")
    c.cmd("scancel", *busy)


def main(build):
    try:
        c = Cluster(build, aegisd_settings={"observation_window_s": 2.0})
    except Skip as e:
        print("SKIP:", e)
        sys.exit(77)
    t0 = time.time()
    ok = False
    try:
        c.start()
        print(f"cluster up in {time.time() - t0:.1f} s: munged, MariaDB, slurmdbd, slurmctld, slurmd n1 and n2, "
              f"two aegisd; each node offers {c.gres_line}")
        phase_sharing(c)
        phase_give_back(c)
        ok = True
    finally:
        if not ok:
            print(c.logs())
            for n, d in c.daemons.items():
                try:
                    print(f"--- aegisd {n}\n" + open(d.log).read()[-3000:])
                except OSError:
                    pass
        c.stop()
    print(f"all Slurm checks passed in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    main(sys.argv[1])
