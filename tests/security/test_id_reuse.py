"""Job ids are never reused on a host, even when the database is lost.

A job's attempts keep their files (output, exit record, lock) in
STATE_DIR/jobs/<id>/<attempt>/. If the daemon's database is deleted and ids start again
from 1, a new job meets an old job's files: it fails ("attempt already running"), or its
owner reads the old job's output, another user's.

User 1 runs a job that prints a secret word; the daemon is stopped and aegis.db (with its
-wal and -shm) deleted; after a restart user 2 submits a job. Its id must be larger than
user 1's, it must complete, and its logs must not hold the secret.
Usage: test_id_reuse.py BUILD_DIR
"""
import json
import os
import secrets
import sys

from secharness import Daemon, fail, users, wait_for

FINAL = ("completed", "failed", "cancelled")


def state_of(d, job_id, user):
    r = d.run_cli("show", str(job_id), "--json", user=user, check=False)
    if r.returncode != 0:
        return None
    return json.loads(r.stdout)


def main(build):
    u1, u2 = (u.pw_name for u in users())
    d = Daemon(build)
    try:
        d.start()
        secret = "secret-" + secrets.token_hex(12)
        # User 1's jobs: the first (the id a new database would give out first) prints the
        # secret; the ids after it are taken too.
        old = d.submit("--", "/bin/sh", "-c", f"echo {secret}", user=u1)
        ids = [old] + [d.submit("--", "/bin/true", user=u1) for _ in range(2)]
        for i in ids:
            job = wait_for(f"user 1's job {i} to finish",
                           lambda i=i: (lambda j: j if j and j["state"] in FINAL else None)(state_of(d, i, u1)),
                           timeout=120)
            if job["state"] != "completed":
                fail(f"user 1's job {i} did not complete: {job['state']} {job.get('reason')}")
        r = d.run_cli("logs", str(old), user=u1, check=False)
        if secret not in r.stdout:
            fail(f"user 1 cannot read the secret from its own job {old}: {r.stdout!r} {r.stderr!r}")

        # The database is lost; the state directory (jobs/) is not.
        d.stop()
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(os.path.join(d.state, "aegis.db" + suffix))
            except FileNotFoundError:
                pass
        d.start()

        new = d.submit("--", "/bin/sh", "-c", "echo hello-from-user-2", user=u2)
        job = wait_for(f"user 2's job {new} to finish",
                       lambda: (lambda j: j if j and j["state"] in FINAL else None)(state_of(d, new, u2)),
                       timeout=120)
        problems = []
        if new <= max(ids):
            problems.append(f"job id {new} reused: user 1's old jobs were {ids}")
        if job["state"] != "completed":
            problems.append(f"user 2's job {new} did not complete: {job['state']}: {job.get('reason')}")
        r = d.run_cli("logs", str(new), user=u2, check=False)
        if secret in r.stdout or secret in r.stderr:
            problems.append(f"user 2 read user 1's secret through job {new}")
        if r.returncode != 0 or "hello-from-user-2" not in r.stdout:
            problems.append(f"user 2's job {new} logs: rc {r.returncode}: {r.stdout!r} {r.stderr!r}")
        if problems:
            fail("; ".join(problems))
        print(f"OK: after the database was lost, user 2's job got id {new} (> {max(ids)}), completed, "
              f"and its logs are its own")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
