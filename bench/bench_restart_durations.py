#!/usr/bin/env python3
"""What rebuilding backfill's durations costs aegisd's start (issue 32): a store with N
successful attempts (one real run of `sh -c "sleep 0.1"`, copied N times in SQL as jobs of
about 1,000 commands), then aegisd started three times each with backfill_history_runs = 0
(nothing rebuilt) and 3 (one pass over the successful attempts), on emulated GPUs; prints
the seconds until it answers.

  python3 bench/bench_restart_durations.py BUILD_DIR [N]   (N: 100000 by default)
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
    jc = ",".join(c for c in cols("jobs") if c != "id")
    ac = ",".join(c for c in cols("attempts") if c not in ("job_id", "launched_at", "ended_at"))
    db.execute("CREATE TEMP TABLE seq(k INTEGER PRIMARY KEY)")
    db.execute(f"WITH RECURSIVE r(k) AS (SELECT 1 UNION ALL SELECT k+1 FROM r WHERE k < {n}) INSERT INTO seq SELECT k FROM r")
    db.execute(f"INSERT INTO jobs(id, {jc}) SELECT {job} + k, {jc} FROM seq, jobs WHERE jobs.id = {job}")
    db.execute(f"INSERT INTO job_args(job_id, pos, arg) SELECT {job} + k, pos, CASE pos WHEN 2 THEN arg || ' ' || "
               f"char(97 + k % 26) || char(97 + (k / 26) % 40) ELSE arg END FROM seq, job_args WHERE job_id = {job}")
    db.execute(f"INSERT INTO job_tags(job_id, pos, tag) SELECT {job} + k, pos, tag FROM seq, job_tags WHERE job_id = {job}")
    db.execute(f"INSERT INTO attempts(job_id, launched_at, ended_at, {ac}) SELECT {job} + k, launched_at - k, "
               f"ended_at - k + (k % 7), {ac} FROM seq, attempts WHERE job_id = {job}")
    db.execute(f"INSERT INTO attempt_gpus SELECT {job} + k, number, pos, uuid FROM seq, attempt_gpus WHERE job_id = {job}")
    db.commit()
    return db.execute("SELECT COUNT(*) FROM attempts WHERE outcome = 'completed'").fetchone()[0]


def main(build, n):
    d = Daemon(build, gpus="2x40960", settings={"backfill": True, "backfill_history_runs": 3})
    try:
        d.start()
        job = d.submit("--exclusive", "--tag", "x", "--", "sh", "-c", "sleep 0.1")
        d.wait_all_final([job], timeout=60)
        d.stop()
        db = sqlite3.connect(os.path.join(d.state, "aegis.db"))
        print("successful attempts in the store:", fill(db, job, n))
        db.close()
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
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 100000)
