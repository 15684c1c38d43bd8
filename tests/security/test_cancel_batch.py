"""`aegis cancel` of several ids where one has already ended (issue 33, item 6).

A user cancels a job that has finished together with one still running: the finished one
is reported ("already completed"), the running one is cancelled, and the command succeeds.
Another user's job or an unknown id in the list still fails the whole request, and nothing
is cancelled (a typo never cancels half a list).
Usage: test_cancel_batch.py BUILD_DIR
"""
import sys

from secharness import Daemon, fail, finished_job, shared_dir, users


def main(build):
    u1, u2 = (u.pw_name for u in users())
    d = Daemon(build, settings={"observation_window_s": 1.0})
    try:
        d.start()
        work = shared_dir(d, "work")
        done = finished_job(d, u1, work)
        mine = d.submit("--name", "mine", "--", "sleep", "600", user=u1, cwd=work)
        theirs = d.submit("--name", "theirs", "--", "sleep", "600", user=u2, cwd=work)

        # Another user's job in the list: refused whole, nothing cancelled.
        r = d.run_cli("cancel", str(mine), str(theirs), user=u1, check=False)
        if r.returncode == 0 or "permission denied" not in r.stderr:
            fail(f"cancel of {u2}'s job as {u1} should fail naming the permission: {r.returncode} {r.stderr!r}")
        if d.show(mine)["state"] == "cancelled":
            fail("a refused batch cancelled the caller's own job")
        r = d.run_cli("cancel", str(mine), "999999", user=u1, check=False)
        if r.returncode == 0 or "no such job" not in r.stderr or d.show(mine)["state"] == "cancelled":
            fail(f"an unknown id should fail the batch and cancel nothing: {r.returncode} {r.stderr!r}")

        # A finished job of the caller's among them: reported, the rest cancelled.
        r = d.run_cli("cancel", str(done), str(mine), user=u1, check=False)
        if r.returncode != 0:
            fail(f"cancel {done} {mine}: one finished job failed the whole batch: {r.stderr.strip()}")
        if f"cancelled {mine}" not in r.stdout or f"job {done}: already completed" not in r.stdout:
            fail(f"cancel {done} {mine} should cancel {mine} and report {done} as completed:\n{r.stdout}")
        states = d.wait_all_final([mine], timeout=120)
        if states[mine] != "cancelled" or d.show(done)["state"] != "completed":
            fail(f"after the batch: {mine} {states[mine]}, {done} {d.show(done)['state']}")
        if d.show(theirs)["state"] == "cancelled":
            fail(f"{u2}'s job was cancelled by {u1}")
        d.run_cli("cancel", str(theirs), user=u2)
        d.wait_all_final([theirs], timeout=120)
        print(f"OK: a finished job in a cancel list is reported and the rest cancelled; another user's job "
              f"or an unknown id fails the whole list")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
