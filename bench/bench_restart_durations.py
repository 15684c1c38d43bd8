#!/usr/bin/env python3
"""What rebuilding backfill's durations costs aegisd's start (issue 32): a store with N
successful attempts (one real run of `sh -c "sleep 0.1"`, copied N times in SQL as jobs of
about 1,000 commands), then aegisd started three times each with backfill_history_runs = 0
(nothing rebuilt) and 3 (each signature's last history_window successful attempts, read
through jobs.signature since schema 4; before, every successful attempt), on emulated GPUs;
prints the seconds until it answers.
With --migrate-from OLD_BUILD the store is written by OLD_BUILD's aegisd (an older schema),
and the first start of BUILD_DIR's aegisd on it, which migrates it, is timed first.

  python3 bench/bench_restart_durations.py BUILD_DIR [N] [--migrate-from OLD_BUILD]   (N: 100000)
"""
import os
import sqlite3
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "daemon"))
from harness import Daemon  # noqa: E402


def fill(db, job, n):
    """Copies job `job` (its row, argv, tags, attempt and GPUs) n times; argv[2] gets one of
    1,040 letter suffixes, so there are that many signatures (numbers would be normalised)."""
    cols = lambda t: [r[1] for r in db.execute(f"SELECT * FROM pragma_table_info('{t}')")]
    jc = ",".join(c for c in cols("jobs") if c not in ("id", "ended_at"))
    ac = ",".join(c for c in cols("attempts") if c not in ("job_id", "launched_at", "ended_at"))
    db.execute("CREATE TEMP TABLE seq(k INTEGER PRIMARY KEY)")
    db.execute(f"WITH RECURSIVE r(k) AS (SELECT 1 UNION ALL SELECT k+1 FROM r WHERE k < {n}) INSERT INTO seq SELECT k FROM r")
    # Each copy ends with its attempt (below), as aegisd writes a completed job.
    db.execute(f"INSERT INTO jobs(id, ended_at, {jc}) SELECT {job} + k, ended_at - k + (k % 7), {jc} FROM seq, jobs "
               f"WHERE jobs.id = {job}")
    db.execute(f"INSERT INTO job_args(job_id, pos, arg) SELECT {job} + k, pos, CASE pos WHEN 2 THEN arg || ' ' || "
               f"char(97 + k % 26) || char(97 + (k / 26) % 40) ELSE arg END FROM seq, job_args WHERE job_id = {job}")
    db.execute(f"INSERT INTO job_tags(job_id, pos, tag) SELECT {job} + k, pos, tag FROM seq, job_tags WHERE job_id = {job}")
    if "signature" in cols("jobs"):  # schema 4: the copies' signatures, as aegisd makes them from their argv
        sig = db.execute(f"SELECT signature FROM jobs WHERE id = {job}").fetchone()[0]
        arg2 = sig.split("\x1f")[2].split("\x1e")[2]  # argv[2] with numbers normalised: "sleep #"
        db.execute(f"UPDATE jobs SET signature = replace(signature, ?1, ?2 || char(97 + (id - {job}) % 26) || "
                   f"char(97 + ((id - {job}) / 26) % 40) || char(30)) WHERE id > {job}",
                   ("\x1e" + arg2 + "\x1e", "\x1e" + arg2 + " "))
    db.execute(f"INSERT INTO attempts(job_id, launched_at, ended_at, {ac}) SELECT {job} + k, launched_at - k, "
               f"ended_at - k + (k % 7), {ac} FROM seq, attempts WHERE job_id = {job}")
    db.execute(f"INSERT INTO attempt_gpus SELECT {job} + k, number, pos, uuid FROM seq, attempt_gpus WHERE job_id = {job}")
    db.commit()
    return db.execute("SELECT COUNT(*) FROM attempts WHERE outcome = 'completed'").fetchone()[0]


def main(build, n, old_build=None):
    d = Daemon(old_build or build, gpus="2x40960", settings={"backfill": True, "backfill_history_runs": 3})
    try:
        d.start()
        job = d.submit("--exclusive", "--tag", "x", "--", "sh", "-c", "sleep 0.1")
        d.wait_all_final([job], timeout=60)
        d.stop()
        db = sqlite3.connect(os.path.join(d.state, "aegis.db"))
        print("successful attempts in the store:", fill(db, job, n))
        print("signatures:", db.execute("SELECT COUNT(DISTINCT args) FROM (SELECT group_concat(arg, ' ') AS args "
                                        "FROM job_args GROUP BY job_id)").fetchone()[0])
        db.close()
        if old_build:
            new = Daemon(build)
            d.aegisd, d.aegis, d.fakejob = new.aegisd, new.aegis, new.fakejob
            new.cleanup()
            start = time.time()
            d.start()
            print(f"first start on the older schema (migrated): answered {time.time() - start:.2f} s after its start")
            d.stop()
        text = open(d.config).read()
        for runs in (0, 3) * 3:
            with open(d.config, "w") as f:
                f.write(text.replace("backfill_history_runs = 3", f"backfill_history_runs = {runs}"))
            start = time.time()
            d.start()
            print(f"backfill_history_runs = {runs}: answered {time.time() - start:.2f} s after its start")
            d.stop()
    finally:
        d.cleanup()


if __name__ == "__main__":
    args = sys.argv[1:]
    old = None
    if "--migrate-from" in args:
        i = args.index("--migrate-from")
        old = args[i + 1]
        del args[i:i + 2]
    main(args[0], int(args[1]) if len(args) > 1 else 100000, old)
