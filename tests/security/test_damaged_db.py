"""A damaged database fails requests, not the daemon.

1. A database holding thousands of finished jobs gets garbage written over pages in the
   middle of the file (a bad disk, a crash of the machine). aegisd must still start; any
   user's `aegis history --limit 100000` (which reads every page) must get a one-line
   error or a partial answer, and the daemon must live on and answer `aegis queue`.
2. One queued job's rows are damaged (its command is gone). aegisd must start anyway, set
   the job aside with a warning in its log (table quarantine), answer questions about
   that job with an error, and run the other queued jobs to completion.
Usage: test_damaged_db.py BUILD_DIR
"""
import json
import os
import sqlite3
import sys

from secharness import Daemon, fail, shared_dir, users, wait_for

FINAL = ("completed", "failed", "cancelled")
PAGE = 4096


def one_line_error(r, what):
    """A failed CLI call must say why in one line (not a stack trace, not silence)."""
    msg = r.stderr.strip()
    if not msg or "\n" in msg:
        fail(f"{what}: expected a one-line error, got rc {r.returncode}: {r.stderr!r}")
    return msg


def alive(d, user, what):
    if d.proc.poll() is not None:
        fail(f"aegisd died {what}: " + open(d.log).read()[-3000:])
    r = d.run_cli("queue", "--json", user=user, check=False)
    if r.returncode != 0:
        fail(f"aegisd does not answer `aegis queue` {what}: {r.stderr.strip()}")


def wait_final(d, ids, timeout):
    def states():
        s = {j["id"]: j["state"] for j in d.jobs()}
        return s if all(s.get(i) in FINAL for i in ids) else None
    return wait_for(f"jobs {ids} to finish", states, timeout=timeout, every=0.3)


def damaged_pages(d, u1, u2):
    d.start()
    ids = [d.submit("--", "/bin/true", user=u) for u in (u1, u2, u1, u2)]
    states = wait_final(d, ids, timeout=120)
    if any(states[i] != "completed" for i in ids):
        fail(f"the first jobs did not complete: {states}")
    d.stop()

    # Thousands of finished jobs, copied from a real one (as `aegis history` would find on
    # a busy server), with their child rows and events (store/schema.h).
    db = os.path.join(d.state, "aegis.db")
    con = sqlite3.connect(db)
    src = ids[0]
    cols = [c[1] for c in con.execute("PRAGMA table_info(jobs)") if c[1] not in ("id", "queue_seq", "name")]
    submitted_at = con.execute("SELECT submitted_at FROM jobs WHERE id = ?", (src,)).fetchone()[0]
    top = con.execute("SELECT MAX(id) FROM jobs").fetchone()[0]
    new_ids = list(range(top + 1, top + 3001))
    con.executemany(f"INSERT INTO jobs(id, queue_seq, name, {', '.join(cols)}) "
                    f"SELECT ?, ?, ?, {', '.join(cols)} FROM jobs WHERE id = ?",
                    [(i, i, f"old-{i}", src) for i in new_ids])
    for table in ("job_args", "job_env", "job_tags", "job_model_layers", "attempts", "attempt_gpus"):
        rest = [c[1] for c in con.execute(f"PRAGMA table_info({table})") if c[1] != "job_id"]
        con.executemany(f"INSERT INTO {table}(job_id, {', '.join(rest)}) "
                        f"SELECT ?, {', '.join(rest)} FROM {table} WHERE job_id = ?", [(i, src) for i in new_ids])
    con.executemany("INSERT INTO events(job_id, t, kind, detail) VALUES(?, ?, ?, ?)",
                    [(i, submitted_at, "completed", "exit status 0") for i in new_ids])
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()

    # Garbage over pages in the middle of the file that hold job records (pages 1 and 2
    # are the header and the schema: left alone).
    with open(db, "r+b") as f:
        blob = f.read()
        pages = [n for n in range(2, len(blob) // PAGE) if b"old-" in blob[n * PAGE:(n + 1) * PAGE]]
        if len(pages) < 50:
            fail(f"only {len(pages)} pages of job records in a {len(blob)}-byte database")
        middle = pages[len(pages) // 3: 2 * len(pages) // 3]
        for n in middle[::max(1, len(middle) // 6)][:6]:
            f.seek(n * PAGE)
            f.write(b"\xab" * PAGE)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.unlink(db + suffix)

    try:
        d.start()
    except RuntimeError as e:
        fail(f"aegisd did not start with a damaged database: {e}")
    r = d.run_cli("history", "--limit", "100000", "--json", user=u1, check=False)
    if r.returncode != 0:
        msg = one_line_error(r, "aegis history on a damaged database")
        print(f"history: {msg}")
    else:
        print(f"history: a partial answer ({len(r.stdout)} bytes)")
    alive(d, u2, "after `aegis history` read a damaged database")
    r = d.run_cli("queue", "--all", "--json", user=u2, check=False)
    if r.returncode != 0:
        one_line_error(r, "aegis queue --all on a damaged database")
    alive(d, u1, "after `aegis queue --all` read a damaged database")
    # Every job asked about: an answer or a one-line error.
    for i in list(range(1, top + 1)) + [top + 1 + k * 97 for k in range(31)]:
        r = d.run_cli("show", str(i), "--json", user=u2, check=False)
        if r.returncode != 0:
            one_line_error(r, f"aegis show {i} on a damaged database")
    alive(d, u1, "after `aegis show` of jobs on damaged pages")
    for i in ids:  # on intact pages
        if d.run_cli("show", str(i), "--json", user=u1, check=False).returncode != 0:
            fail(f"job {i}, on an intact page, cannot be shown")


def bad_queued_row(d, u1, u2):
    d.start()
    work = shared_dir(d, "work")
    go = os.path.join(work, "go")
    marks = shared_dir(d, "marks")
    # One GPU, one job per GPU: a blocker runs until `go` appears; three jobs wait.
    blocker = d.submit("--", "/bin/sh", "-c", f"while [ ! -e {go} ]; do sleep 0.2; done", user=u1, cwd=work)
    wait_for("the blocker to run",
             lambda: any(j["id"] == blocker and j["state"] == "running" for j in d.jobs()), timeout=120)
    queued = [d.submit("--", "/bin/sh", "-c", f"echo ran > {marks}/$AEGIS_JOB_ID", user=u2, cwd=work)
              for _ in range(3)]
    states = {j["id"]: j["state"] for j in d.jobs()}
    if any(states.get(i) != "queued" for i in queued):
        fail(f"expected three queued jobs behind the blocker: {states}")
    d.stop()  # the blocker runs on (re-adopted at the next start)

    bad = queued[1]
    db = os.path.join(d.state, "aegis.db")
    con = sqlite3.connect(db)
    con.execute("DELETE FROM job_args WHERE job_id = ?", (bad,))
    con.commit()
    con.close()

    try:
        d.start()
    except RuntimeError as e:
        fail(f"aegisd did not start with one unreadable queued job: {e}")
    log = open(d.log, errors="replace").read()
    warning = f"aegisd: warning: job {bad}: unreadable record set aside (table quarantine): "
    if warning not in log:
        fail(f"no quarantine warning for job {bad} in the log: {log[-3000:]}")
    r = d.run_cli("show", str(bad), "--json", user=u2, check=False)
    if r.returncode == 0:
        fail(f"aegis show {bad} (set aside) answered: {r.stdout[:300]}")
    msg = one_line_error(r, f"aegis show {bad}")
    if "set aside" not in msg:
        fail(f"aegis show {bad}: the error does not say the record was set aside: {msg}")

    open(go, "w").close()
    good = [blocker, queued[0], queued[2]]
    states = wait_final(d, good, timeout=180)
    if any(states[i] != "completed" for i in good):
        fail(f"the readable jobs did not complete: {states}")
    for i in queued:
        ran = os.path.exists(os.path.join(marks, str(i)))
        if ran != (i != bad):
            fail(f"job {i} {'ran' if ran else 'did not run'}")
    alive(d, u2, "after running the queue")
    d.stop()
    con = sqlite3.connect(db)
    row = con.execute("SELECT id, data, reason FROM quarantine WHERE id = ?", (bad,)).fetchone()
    left = con.execute("SELECT COUNT(*) FROM jobs WHERE id = ?", (bad,)).fetchone()[0]
    con.close()
    if not row or left:
        fail(f"job {bad} not moved to the table quarantine: {row}, {left} left in jobs")


def main(build):
    u1, u2 = (u.pw_name for u in users())
    d = Daemon(build)
    try:
        damaged_pages(d, u1, u2)
    finally:
        d.cleanup()
    d = Daemon(build, gpus="1x40960", settings={"policy": "exclusive"})
    try:
        bad_queued_row(d, u1, u2)
    finally:
        d.cleanup()
    print("OK: a damaged database failed requests, not the daemon; an unreadable queued job was set aside")


if __name__ == "__main__":
    main(sys.argv[1])
