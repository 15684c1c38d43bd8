"""An existing state directory of schema 1 (each job a JSON record in jobs.data, as aegisd
wrote it up to issue 12) keeps working under this aegisd, which migrates it to schema 4
(typed columns, src/runtime/store/schema.h; 2 -> 3 adds issue 32's columns, 3 -> 4 each
job's history signature) at start:
  - a job that was running when the old aegisd stopped, whose attempt has since ended
    (its shim gone, its exit.json written), ends completed with exit_code 0;
  - a queued job runs to completion; one whose record cannot be read is set aside;
  - ids, events and the history estimator's peaks are kept;
  - `aegis show --json` has exit_code and signal, per attempt and for the job, and
    `aegis run` ends with them (128 + signal for a killed job);
  - a database of a newer schema is refused with one line;
  - a schema-2 database whose history_runs predates the activity columns gets them at
    start (its runs kept, their activity NULL), and new runs record their activity;
  - a schema-3 database gets jobs.signature and its index: each job the signature aegisd
    gives a new job of the same command (one for the runs of one command, another for
    another command).
Usage: test_migration.py BUILD_DIR
"""
import json
import os
import sqlite3
import subprocess
import sys
import time

from harness import Daemon, fail

RECORD_BYTES = 512  # src/runtime/launch/attempt_dir.h kRecordBytes

# The layout before schema 2, shared with tests/test_runtime.cpp.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "store_schema1.sql")) as _f:
    SCHEMA_1 = _f.read()


def record(path, obj):
    """A fixed-size record as the shim writes it: JSON padded with spaces, then a newline."""
    text = json.dumps(obj)
    with open(path, "w") as f:
        f.write(text.ljust(RECORD_BYTES - 1) + "\n")
    os.chmod(path, 0o600)


def old_job(job_id, name, command, workdir, state, seq, t, attempts=(), gpu_uuids=(), started_at=None):
    """A job record the way schema 1's to_json wrote it (runtime/job/job_json.cpp then)."""
    return {
        "id": job_id, "name": name, "user": "root", "uid": 0, "gid": 0, "state": state, "gpus": 1,
        "gpu_uuids": list(gpu_uuids), "attempts": len(attempts), "submitted_at": t, "started_at": started_at,
        "ended_at": None, "reason": "", "queue": "main" if state == "queued" else "", "queue_seq": seq,
        "cancel_requested": False, "recovery": {"floor_mib": 0, "exclusive_only": False, "oom_count": 0},
        "request": {"command": command, "gpus": 1, "exclusive": False, "name": name, "workdir": workdir,
                    "env": {"PATH": "/usr/bin:/bin", "OPTS": "a=b ü"}, "tags": ["migrated"]},
        "attempt_log": list(attempts), "attached_to": None,
    }


def finished_pid():
    """A pid (and so a process group) with no process left in it."""
    p = subprocess.Popen(["/bin/true"])
    p.wait()
    return p.pid


def build_schema1_state(d, gpu_uuid):
    os.makedirs(d.state, mode=0o700, exist_ok=True)
    t = time.time() - 60
    pgid = finished_pid()
    # Job 1 ran under the old aegisd; its job ended (exit status 0) while no aegisd ran:
    # the lock is free, child.json and exit.json are written.
    attempt_dir = os.path.join(d.state, "jobs", "1", "1")
    os.makedirs(attempt_dir, mode=0o700)
    os.chmod(os.path.join(d.state, "jobs"), 0o700)
    os.chmod(os.path.join(d.state, "jobs", "1"), 0o700)
    open(os.path.join(attempt_dir, "lock"), "w").close()
    open(os.path.join(attempt_dir, "launch"), "w").close()
    for log in ("stdout", "stderr"):
        with open(os.path.join(attempt_dir, log), "w") as f:
            f.write("old output\n" if log == "stdout" else "")
        os.chmod(os.path.join(attempt_dir, log), 0o600)
    record(os.path.join(attempt_dir, "child.json"),
           {"pgid": pgid, "shim_pid": 0, "shim_start_ticks": 0, "cgroup_mount": "", "cgroup": ""})
    record(os.path.join(attempt_dir, "exit.json"),
           {"wait_status": 0, "ended_at": t + 30, "cancelled": False, "log_dropped_bytes": 0})
    attempt = {"number": 1, "gpus": [gpu_uuid], "launched_at": t + 1, "first_activity": None, "exclusive": False,
               "admitted_mib": 5120, "free_at_placement_mib": 40960, "gpu_total_mib": 40960, "pgid": pgid,
               "shim_pid": 0, "peak_mib": 0, "ended_at": None, "outcome": "", "detail": ""}
    running = old_job(1, "was-running", ["/bin/true"], d.dir, "running", 1, t, [attempt], [gpu_uuid], t + 1)
    queued = old_job(2, "was-queued", ["/bin/sh", "-c", 'echo "migrated $OPTS"'], d.dir, "queued", 2, t + 2)
    db = os.path.join(d.state, "aegis.db")
    con = sqlite3.connect(db)
    con.executescript(SCHEMA_1)
    rows = [(1, 0, "running", 1, t, json.dumps(running)), (2, 0, "queued", 2, t + 2, json.dumps(queued)),
            (3, 0, "queued", 3, t + 3, '{"id": 3, "user": garbage')]
    con.executemany("INSERT INTO jobs(id, uid, state, queue_seq, submitted_at, data) VALUES(?, ?, ?, ?, ?, ?)", rows)
    con.execute("UPDATE sqlite_sequence SET seq = 10 WHERE name = 'jobs'")
    con.execute("INSERT INTO events(job_id, t, kind, detail) VALUES(1, ?, 'launch', 'attempt 1')", (t + 1,))
    con.execute("INSERT INTO history VALUES('some signature', 1234, 1, ?)", (t,))
    con.commit()
    con.close()
    os.chmod(db, 0o600)


def wait_final(d, job_id, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        j = d.show(job_id)
        if j["state"] in ("completed", "failed", "cancelled"):
            return j
        time.sleep(0.3)
    fail(f"job {job_id} did not finish: {d.show(job_id)}")


# history_runs as schema 2 first had it, before the activity columns (store/schema.h).
HISTORY_RUNS_BEFORE_ACTIVITY = """
DROP TABLE history_runs;
CREATE TABLE history_runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  signature TEXT NOT NULL,
  gpu_model TEXT NOT NULL,
  peak_mib INTEGER NOT NULL,
  t REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS history_runs_key ON history_runs(signature, gpu_model, id);
INSERT INTO history_runs(signature, gpu_model, peak_mib, t) VALUES('an old signature', 'Some GPU', 1234, 1.0);
"""


def history_runs_gain_activity(build):
    d = Daemon(build, gpus="1x40960", settings={"observation_window_s": 1.0, "telemetry_sample_hz": 4.0})
    try:
        d.start()
        d.stop()
        db = os.path.join(d.state, "aegis.db")
        con = sqlite3.connect(db)
        con.executescript(HISTORY_RUNS_BEFORE_ACTIVITY)
        con.close()
        d.start()
        job = d.submit("--", d.fakejob, "--mem", "1000", "--smact", "0.5", "--seconds", "2", "--startup", "0.2")
        d.wait_all_final([job], timeout=120)
        con = sqlite3.connect(db)
        rows = con.execute("SELECT signature, peak_mib, gpu_util, smact, smocc, drama FROM history_runs "
                           "ORDER BY id").fetchall()
        con.close()
        if len(rows) != 2 or rows[0] != ("an old signature", 1234, None, None, None, None):
            fail(f"history_runs after the migration: {rows}")
        if any(v is None for v in rows[1][2:]):
            fail(f"the new run's activity was not recorded: {rows[1]}")
        d.stop()
        d.start()  # the columns are there now: nothing to add, nothing fails
        print(f"OK: history_runs gained its activity columns; the old run kept ({rows[0][1]} MiB, activity NULL), "
              f"the new one recorded util {rows[1][2]:.2f}, smact {rows[1][3]:.2f}")
    finally:
        d.cleanup()


# jobs as a schema-3 aegisd left them: no signature column, no index, version 3.
TO_SCHEMA_3 = """
DROP INDEX jobs_signature;
ALTER TABLE jobs DROP COLUMN signature;
UPDATE meta SET value = '3' WHERE key = 'schema';
"""


def signatures_added(build):
    d = Daemon(build, gpus="1x40960", settings={"backfill": True, "backfill_history_runs": 3})
    try:
        d.start()
        runs = [d.submit("--", "sh", "-c", f"sleep 0.{i}") for i in (1, 2, 3)]  # one signature: "sleep #"
        other = d.submit("--tag", "t", "--", "sh", "-c", "true")
        d.wait_all_final(runs + [other], timeout=60)
        d.stop()
        db = os.path.join(d.state, "aegis.db")
        con = sqlite3.connect(db)
        con.executescript(TO_SCHEMA_3)
        con.close()
        d.start()  # migrates
        again = d.submit("--", "sh", "-c", "sleep 0.4")  # its signature written as any new job's
        d.wait_all_final([again], timeout=60)
        con = sqlite3.connect(db)
        schema = con.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0]
        index = con.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'jobs_signature'"
                            ).fetchone()[0]
        sig = dict(con.execute("SELECT id, signature FROM jobs").fetchall())
        con.close()
        if schema != "4" or index != 1:
            fail(f"schema 3 not migrated: schema {schema}, index {index}")
        if any(sig[j] != sig[again] for j in runs) or sig[again] in ("", sig[other]) or not sig[other]:
            fail(f"signatures after the migration: {sig}")
        print(f"OK: schema 3 migrated to 4; the {len(runs)} runs of one command got the signature aegisd gives a "
              f"new run of it ({sig[again]!r}), another command its own")
    finally:
        d.cleanup()


def main(build):
    signatures_added(build)
    history_runs_gain_activity(build)
    d = Daemon(build, settings={"observation_window_s": 1.0})
    try:
        # The emulated GPUs' ids, from a daemon that is then stopped and its state removed.
        d.start()
        gpu_uuid = d.call("gpus", "--json")[0]["uuid"]
        d.stop()
        subprocess.run(["rm", "-rf", d.state], check=True)
        build_schema1_state(d, gpu_uuid)

        d.start()
        db = os.path.join(d.state, "aegis.db")
        con = sqlite3.connect(db)
        schema = con.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0]
        data_columns = con.execute("SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name = 'data'").fetchone()[0]
        con.close()
        if schema != "4" or data_columns:  # schema 1 -> 2, then the additive 2 -> 3 (issue 32), 3 -> 4
            fail(f"not migrated: schema {schema}, data column {data_columns}")

        ran = wait_final(d, 1)
        if ran["state"] != "completed" or ran["exit_code"] != 0 or ran["signal"] is not None:
            fail(f"the job that was running: {json.dumps(ran)[:1500]}")
        a = ran["attempt_log"][0]
        if a["exit_code"] != 0 or a["signal"] is not None or a["outcome"] != "completed" or a["gpus"] != [gpu_uuid]:
            fail(f"its attempt: {a}")
        queued = wait_final(d, 2)
        if queued["state"] != "completed" or queued["exit_code"] != 0 or queued["attempt_log"][0]["exit_code"] != 0:
            fail(f"the queued job: {json.dumps(queued)[:1500]}")
        out = d.run_cli("logs", "2").stdout
        if out != "migrated a=b ü\n":
            fail(f"the queued job's output (its environment migrated): {out!r}")
        if queued["request"]["tags"] != ["migrated"]:
            fail(f"the queued job's tags: {queued['request']}")
        print(f"OK: schema 1 migrated; the running job ended {ran['state']} (exit_code {ran['exit_code']}), "
              f"the queued one ran ({out.strip()!r})")

        r = d.run_cli("show", "3", "--json", check=False)
        if r.returncode == 0 or "set aside" not in r.stderr:
            fail(f"the unreadable record: rc {r.returncode} {r.stderr.strip()}")
        warning = "aegisd: warning: job 3: unreadable record set aside (table quarantine): job record: "
        if warning not in open(d.log).read():
            fail("no quarantine warning for job 3 in the log: " + open(d.log).read()[-2000:])
        events = d.show(1)["events"]
        if not any(e["kind"] == "launch" for e in events):
            fail(f"job 1's old events are gone: {events}")

        # New jobs: ids above the old sequence; exit status and signal as fields.
        failing = d.submit("--", "/bin/sh", "-c", "exit 5")
        killed = d.submit("--", "/bin/sh", "-c", "kill -KILL $$")
        if failing != 11:
            fail(f"a new job got id {failing}, expected 11 (the old id sequence was 10)")
        f, k = wait_final(d, failing), wait_final(d, killed)
        if f["state"] != "failed" or f["exit_code"] != 5 or f["signal"] is not None:
            fail(f"exit 5: state {f['state']} exit_code {f['exit_code']} signal {f['signal']}")
        if k["state"] != "failed" or k["exit_code"] is not None or k["signal"] != 9:
            fail(f"kill -9: state {k['state']} exit_code {k['exit_code']} signal {k['signal']}")
        env = dict(os.environ, AEGIS_SOCKET=d.socket)
        r = subprocess.run([d.aegis, "run", "--", "/bin/sh", "-c", "kill -KILL $$"], capture_output=True,
                           text=True, env=env, cwd=d.dir, timeout=60)
        if r.returncode != 137:
            fail(f"aegis run of a job killed by SIGKILL ended with {r.returncode}, not 137: {r.stderr}")
        print("OK: exit_code and signal shown per attempt and per job; aegis run ends with 128 + signal")

        # A database written by a newer aegisd: refused, in one line, and left alone.
        d.stop()
        con = sqlite3.connect(db)
        con.execute("UPDATE meta SET value = '5' WHERE key = 'schema'")
        con.commit()
        con.close()
        log_size = os.path.getsize(d.log)
        try:
            d.start()
            fail("aegisd started on a database of schema 5")
        except RuntimeError:
            pass
        said = open(d.log, errors="replace").read()[log_size:]
        if "database schema 5 is newer than this aegisd knows (4)" not in said:
            fail(f"no one-line refusal: {said!r}")
        line = [l for l in said.splitlines() if "newer than this aegisd" in l]
        print(f"OK: a newer schema refused: {line[0]}")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
