"""End-to-end: `aegis submit --after` and `aegis wait` on aegisd with emulated GPUs (issue 32
item 4).

Checks: a job after ID:ok runs after it completed; one whose dependency can no longer be met
(ok on a failed job) is cancelled with the reason; :failed and :any run after a failure; an
array's id means all its elements; a dependency on a missing job or another user's is one
line and queues nothing; dependencies survive a SIGKILL of aegisd; `aegis wait` exits 0 when
all completed and 1 otherwise.  Usage: test_after.py BUILD_DIR
"""
import os
import sys

from harness import Daemon, ensure_user, fail, wait_for


def main(build):
    d = Daemon(build, settings={"observation_window_s": 1.0, "telemetry_sample_hz": 4.0,
                                "telemetry_window_samples": 4}, shared_gpus=True)
    try:
        d.start()
        bad = d.submit("--", "sh", "-c", "sleep 1; exit 3")
        ok_after_bad = d.submit("--after", str(bad), "--", "true")
        failed_after_bad = d.submit("--after", f"{bad}:failed", "--", "true")
        any_after_bad = d.submit("--after", f"{bad}:any", "--", "true")
        arr = d.submit("--array", "0-2", "--", "sh", "-c", "sleep 1")
        after_arr = d.submit("--after", str(arr), "--", "true")
        # Missing: one line naming --after's field, nothing queued.
        before = len(d.jobs())
        r = d.run_cli("submit", "--after", "999999", "--", "true", check=False)
        if r.returncode == 0 or "job.after: job 999999 does not exist" not in r.stderr or len(r.stderr.strip().splitlines()) != 1:
            fail("a dependency on a missing job: " + repr(r.stderr))
        r = d.run_cli("submit", "--after", "12:maybe", "--", "true", check=False)
        if r.returncode == 0 or "--after" not in r.stderr:
            fail("bad --after syntax: " + repr(r.stderr))
        # Another user's job.
        if os.geteuid() == 0:
            ensure_user("aegistest1")
            os.chmod(d.dir, 0o755)
            r = d.run_cli("submit", "--workdir", "/tmp", "--after", str(bad), "--", "true", user="aegistest1",
                          check=False)
            if r.returncode == 0 or f"job.after: job {bad} is another user's" not in r.stderr:
                fail("a dependency on another user's job: rc %d %r" % (r.returncode, r.stderr))
        if len(d.jobs()) != before:
            fail("a refused dependency queued something")

        # aegis wait: 1 when one failed, 0 when all completed; an array's id: every element.
        w = d.run_cli("wait", str(bad), check=False)
        if w.returncode != 1 or f"{bad} failed" not in w.stdout:
            fail(f"aegis wait on a failed job: rc {w.returncode} {w.stdout!r} {w.stderr!r}")
        w = d.run_cli("wait", str(failed_after_bad), str(any_after_bad), str(arr), str(after_arr), check=False)
        if w.returncode != 0 or len(w.stdout.strip().splitlines()) != 6:
            fail(f"aegis wait on completed jobs: rc {w.returncode} {w.stdout!r} {w.stderr!r}")
        w = d.run_cli("wait", "999999", check=False)
        if w.returncode == 0 or "999999" not in w.stderr:
            fail("aegis wait on a missing job: " + repr(w.stderr))

        s = d.show(ok_after_bad)
        if s["state"] != "cancelled" or "can no longer be met" not in s["reason"] or not s["attempt_log"] == []:
            fail("ok after a failed job: " + str((s["state"], s["reason"])))
        elements = [j for j in d.jobs() if j.get("array_id") == arr]
        last_end = max(d.show(j["id"])["ended_at"] for j in elements)
        started = d.show(after_arr)["attempt_log"][0]["launched_at"]
        if started < last_end:
            fail(f"after the array: started at {started}, its last element ended at {last_end}")
        for j in (failed_after_bad, any_after_bad):
            if d.show(j)["attempt_log"][0]["launched_at"] < d.show(bad)["ended_at"]:
                fail(f"job {j} started before its dependency ended")

        # Across a SIGKILL of aegisd: the dependency is read back from the database.
        slow = d.submit("--", "sh", "-c", "sleep 4")
        waiting = d.submit("--after", str(slow), "--", "true")
        wait_for("the slow job to run", lambda: d.show(slow)["state"] == "running")
        d.kill9()
        d.start()
        if d.show(waiting).get("after") != [f"{slow}:ok"]:
            fail("the dependency was not kept: " + str(d.show(waiting).get("after")))
        w = d.run_cli("wait", str(waiting), check=False)
        if w.returncode != 0:
            fail("after a restart: " + w.stdout + w.stderr)
        if d.show(waiting)["attempt_log"][0]["launched_at"] < d.show(slow)["ended_at"]:
            fail("after a restart the waiting job started before its dependency ended")
        print("OK: ok/failed/any, array-aware, refusals, wait's exit codes, kept across a SIGKILL")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
