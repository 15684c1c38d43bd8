"""Security on a shared server: jobs run as their owner (uid and gid), log files belong
to the owner with mode 0600, and another user can neither cancel nor read them.
Needs root (it creates two Unix users); exits 77 (skipped) otherwise.
Usage: test_security.py BUILD_DIR
"""
import os
import sys

from harness import Daemon, ensure_user, fail, wait_for

USERS = ("aegistest1", "aegistest2")


def main(build):
    if os.geteuid() != 0:
        print("SKIP: needs root to create test users and run jobs as them")
        sys.exit(77)
    u1, u2 = (ensure_user(n) for n in USERS)
    d = Daemon(build, settings={"observation_window_s": 2.0})
    try:
        d.start()
        os.chmod(d.dir, 0o755)
        work = os.path.join(d.dir, "work")
        os.makedirs(work)
        os.chmod(work, 0o777)
        job = d.submit("--name", "whoami", "--", "/bin/sh", "-c", "id -u; id -g; sleep 600", user=USERS[0], cwd=work)
        # Wait until it runs and has printed its ids (it then runs until cancelled below).
        def printed_ids():
            out = d.run_cli("logs", str(job), user=USERS[0]).stdout.split()
            return out if len(out) >= 2 else None
        ids = wait_for("the job to print its ids", printed_ids, every=0.3)
        if ids[:2] != [str(u1.pw_uid), str(u1.pw_gid)]:
            fail(f"job ran as {ids[:2]}, expected {[u1.pw_uid, u1.pw_gid]}")
        # Its log file: owned by the user, mode 0600.
        log = os.path.join(d.state, "jobs", str(job), "1", "stdout")
        st = os.stat(log)
        if (st.st_uid, st.st_gid, st.st_mode & 0o777) != (u1.pw_uid, u1.pw_gid, 0o600):
            fail(f"log owned by {st.st_uid}:{st.st_gid} mode {oct(st.st_mode & 0o777)}")
        # The other user: can list it, cannot read or cancel it.
        listed = [j["id"] for j in d.call("queue", "--json", user=USERS[1])]
        if job not in listed:
            fail("the other user does not see the job in listings")
        r = d.run_cli("logs", str(job), user=USERS[1], check=False)
        if r.returncode == 0 or "permission denied" not in r.stderr:
            fail("the other user read the logs: " + r.stderr)
        r = d.run_cli("cancel", str(job), user=USERS[1], check=False)
        if r.returncode == 0 or "permission denied" not in r.stderr:
            fail("the other user cancelled the job: " + r.stderr)
        if d.show(job)["state"] != "running":
            fail("job no longer running after the refused cancel")
        # Its owner can cancel it.
        d.run_cli("cancel", str(job), user=USERS[0])
        states = d.wait_all_final([job], timeout=30)
        if states[job] != "cancelled":
            fail("owner's cancel did not work: " + states[job])
        print("OK: jobs run as their owner; another user can neither read nor cancel them")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
