"""Jobs whose records were lost with the database's write-ahead log are reported, never
left running unseen (issue 33 item 6).

aegisd keeps its database in WAL mode: a commit lands in aegis.db-wal first and reaches
aegis.db at a checkpoint. If the -wal file is lost while aegisd is down (a disk fault, an
administrator's `rm`), every change since the last checkpoint is gone, and SQLite opens
the older database without a word. Before the fix, jobs accepted in that window vanished
from every listing while their processes ran on, holding GPUs the scheduler then gave to
others, and nothing said so.

Play: one GPU per job (exclusive policy), two GPUs. User 1 and user 2 each run a long job;
user 1 has a third job waiting. aegisd is killed (kill -9: no checkpoint at close) and
aegis.db-wal deleted; aegisd starts again. Asserted:
- aegisd's log says, at error level, that the write-ahead log was lost;
- each running job is accounted for: shown to its owner, in `aegis show` and in
  `aegis history`, with a reason that says its record was lost, and its processes are
  stopped (its GPU is free for the jobs that aegisd does know);
- the metrics count the lost records and say the WAL was lost;
- its work did not run twice (its marker file was written once);
- a later job of user 2 runs and completes, with a larger id.
Second play, a record older than its job: on one GPU, user 2's job waits behind user 1's;
the WAL is checkpointed (the waiting job's record reaches aegis.db), then the first job
ends and the second starts (its launch is in the WAL only). After kill -9 and the WAL's
loss, aegis.db says the second job waits: it must not run a second time beside the first
run; it is reported lost and stopped, and user 1's job is still recorded as completed.
Usage: test_wal_loss.py BUILD_DIR
"""
import json
import os
import sqlite3
import sys
import time
import urllib.request

from secharness import Daemon, fail, shared_dir, users, wait_for

FINAL = ("completed", "failed", "cancelled")


def shown(d, job_id, user):
    r = d.run_cli("show", str(job_id), "--json", user=user, check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purpose (its parent has not reaped it yet).
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def no_record(build, u1, u2):
    port = 19900 + os.getpid() % 90
    d = Daemon(build, gpus="2x40960", settings={"policy": "exclusive", "kill_grace_s": 2, "metrics_port": port})
    try:
        d.start()
        work = shared_dir(d, "work")
        marks = shared_dir(d, "marks")
        # Each run appends its pid to the job's marker file, then sleeps long.
        body = f"echo $$ >> {marks}/$AEGIS_JOB_ID; exec sleep 100000"
        running = {d.submit("--", "/bin/sh", "-c", body, user=u, cwd=work): u for u in (u1, u2)}
        for i in running:
            wait_for(f"job {i} to run", lambda i=i: (shown(d, i, running[i]) or {}).get("state") == "running",
                     timeout=120)
        waiting = d.submit("--", "/bin/sh", "-c", body, user=u1, cwd=work)
        if (shown(d, waiting, u1) or {}).get("state") != "queued":
            fail(f"job {waiting} should wait behind the two running jobs: {shown(d, waiting, u1)}")
        pids = {}
        for i in running:
            pids[i] = int(wait_for(f"job {i}'s marker", lambda i=i: (lambda p: open(p).read().split() if
                                                                      os.path.exists(p) else None)(
                os.path.join(marks, str(i))), timeout=60)[0])

        # aegisd dies with every record since its start in the WAL only; the WAL is lost.
        d.kill9()
        wal = os.path.join(d.state, "aegis.db-wal")
        if not os.path.exists(wal) or os.path.getsize(wal) == 0:
            fail("expected the records in aegis.db-wal after kill -9 (did aegisd checkpoint?)")
        os.unlink(wal)
        log_before = os.path.getsize(d.log)
        d.start()

        # Each job that ran is stopped and reported to its owner.
        for i, u in running.items():
            deadline = time.time() + 60
            while time.time() < deadline and (shown(d, i, u) or {}).get("state") not in FINAL:
                time.sleep(0.5)
            if (shown(d, i, u) or {}).get("state") not in FINAL:
                r = d.run_cli("show", str(i), "--json", user=u, check=False)
                fail(f"job {i} (record lost) is not accounted for 60 s after the restart: `aegis show {i}` says "
                     f"{(r.stdout or r.stderr).strip()[:300]!r}; its process {pids[i]} "
                     f"{'still runs' if alive(pids[i]) else 'is gone'}")
            job = wait_for(f"job {i} (record lost, processes running) to be accounted for",
                           lambda i=i, u=u: (lambda j: j if j and j["state"] in FINAL else None)(shown(d, i, u)),
                           timeout=60, every=0.5)
            if "lost" not in job.get("reason", ""):
                fail(f"job {i}: its reason does not say its record was lost: {job.get('reason')!r}")
            print(f"job {i}: {job['state']}: {job['reason']}")
            wait_for(f"job {i}'s process {pids[i]} to be stopped", lambda i=i: not alive(pids[i]), timeout=60)
            hist = d.call("history", "--json", user=u)
            if not any(h["id"] == i and h["state"] in FINAL for h in hist):
                fail(f"job {i} is not in its owner's `aegis history`: {[(h['id'], h['state']) for h in hist]}")
        log = open(d.log, errors="replace").read()[log_before:]
        lines = [line for line in log.splitlines() if "error" in line and "write-ahead log" in line]
        if not lines:
            fail(f"aegisd's log does not say the write-ahead log was lost: {log[-3000:]}")
        print(lines[0])
        for i in running:
            if not any(f"job {i}" in line and "lost" in line for line in log.splitlines()):
                fail(f"aegisd's log does not name job {i} as lost: {log[-3000:]}")

        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        for want in ("aegis_database_wal_lost 1\n", f"aegis_lost_records_total {len(running)}\n"):
            if want not in metrics:
                fail(f"the metrics lack {want.strip()!r}")

        # Nothing ran twice, and the GPUs serve new work.
        later = d.submit("--", "/bin/sh", "-c", f"echo $$ >> {marks}/$AEGIS_JOB_ID", user=u2, cwd=work)
        if later <= max([waiting, *running]):
            fail(f"the new job got id {later}, not above the lost ones {sorted([waiting, *running])}")
        job = wait_for(f"job {later} to finish",
                       lambda: (lambda j: j if j and j["state"] in FINAL else None)(shown(d, later, u2)), timeout=120)
        if job["state"] != "completed":
            fail(f"job {later} did not complete: {job['state']} {job.get('reason')}")
        time.sleep(1)
        for i in running:
            runs = open(os.path.join(marks, str(i))).read().split()
            if len(runs) != 1:
                fail(f"job {i} ran {len(runs)} times: {runs}")
        d.stop()
    finally:
        d.cleanup()



def marker_runs(marks, i):
    p = os.path.join(marks, str(i))
    return open(p).read().split() if os.path.exists(p) else []


def older_record(build, u1, u2):
    d = Daemon(build, gpus="1x40960", settings={"policy": "exclusive", "kill_grace_s": 2})
    try:
        d.start()
        work = shared_dir(d, "work")
        marks = shared_dir(d, "marks")
        go = os.path.join(work, "go")
        first = d.submit("--", "/bin/sh", "-c", f"echo $$ >> {marks}/$AEGIS_JOB_ID; "
                         f"while [ ! -e {go} ]; do sleep 0.2; done", user=u1, cwd=work)
        wait_for(f"job {first} to run", lambda: (shown(d, first, u1) or {}).get("state") == "running", timeout=120)
        second = d.submit("--", "/bin/sh", "-c", f"echo $$ >> {marks}/$AEGIS_JOB_ID; exec sleep 100000",
                          user=u2, cwd=work)
        if (shown(d, second, u2) or {}).get("state") != "queued":
            fail(f"job {second} should wait behind job {first}: {shown(d, second, u2)}")
        # A checkpoint while aegisd runs (as SQLite's automatic one would): aegis.db now
        # holds the second job, waiting.
        con = sqlite3.connect(os.path.join(d.state, "aegis.db"))
        busy, _, _ = con.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        con.close()
        if busy:
            fail("the checkpoint could not run")
        open(go, "w").close()
        pid = int(wait_for(f"job {second} to start", lambda: marker_runs(marks, second), timeout=120)[0])
        wait_for(f"job {first} to be recorded as completed",
                 lambda: (shown(d, first, u1) or {}).get("state") == "completed", timeout=60)
        d.kill9()
        os.unlink(os.path.join(d.state, "aegis.db-wal"))
        d.start()

        job = wait_for(f"job {second} (record older than its run) to be accounted for",
                       lambda: (lambda j: j if j and j["state"] in FINAL else None)(shown(d, second, u2)),
                       timeout=60, every=0.5)
        if "lost" not in job.get("reason", ""):
            fail(f"job {second}: its reason does not say its record was lost: {job.get('reason')!r}")
        print(f"job {second}: {job['state']}: {job['reason']}")
        wait_for(f"job {second}'s process {pid} to be stopped", lambda: not alive(pid), timeout=60)
        job = wait_for(f"job {first} to be final", lambda: (lambda j: j if j and j["state"] in FINAL else None)(
            shown(d, first, u1)), timeout=60, every=0.5)
        if job["state"] != "completed":
            fail(f"job {first} (ended before the loss) is {job['state']}: {job.get('reason')}")
        time.sleep(2)  # a second run, if any, would have written its marker by now
        for i in (first, second):
            if len(marker_runs(marks, i)) != 1:
                fail(f"job {i} ran {len(marker_runs(marks, i))} times")
        d.stop()
    finally:
        d.cleanup()


def main(build):
    u1, u2 = (u.pw_name for u in users())
    no_record(build, u1, u2)
    older_record(build, u1, u2)
    print("OK: jobs whose records were lost with the WAL were stopped and reported to their owners")

if __name__ == "__main__":
    main(sys.argv[1])
