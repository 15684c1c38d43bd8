"""A `submit` whose reply does not come in time (issue 33, item 6).

aegisd is stopped (SIGSTOP) while a user submits with a 1 s timeout: the request reaches
the socket but no reply comes. The client's one-line error must say that the job may have
been queued (so the user checks before submitting again), and once aegisd runs again the
job is indeed queued, once.
Usage: test_submit_timeout.py BUILD_DIR
"""
import os
import signal
import subprocess
import sys
import time

from secharness import Daemon, fail, shared_dir, users, wait_for


def main(build):
    u1 = users()[0].pw_name
    d = Daemon(build, settings={"observation_window_s": 1.0})
    try:
        d.start()
        work = shared_dir(d, "work")
        os.kill(d.proc.pid, signal.SIGSTOP)
        try:
            cmd = ["runuser", "-u", u1, "--", d.aegis, "--socket", d.socket, "--timeout", "1", "submit",
                   "--name", "late", "--", "sleep", "600"]
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=work, timeout=60)
        finally:
            os.kill(d.proc.pid, signal.SIGCONT)
        if r.returncode == 0:
            fail(f"submit to a stopped aegisd succeeded: {r.stdout!r}")
        err = r.stderr.strip()
        if "may have been queued" not in err or "aegis queue --mine" not in err or len(err.splitlines()) != 1:
            fail(f"the timed-out submit should say in one line that the job may have been queued: {err!r}")
        late = wait_for("the timed-out submission to show in the queue",
                        lambda: [j for j in d.jobs() if j["name"] == "late"], timeout=60)
        time.sleep(1)
        late = [j for j in d.jobs() if j["name"] == "late"]
        if len(late) != 1:
            fail(f"the timed-out submission should be queued once, found {len(late)}")
        d.run_cli("cancel", str(late[0]["id"]), user=u1)
        d.wait_all_final([late[0]["id"]], timeout=120)
        print("OK: a submit that timed out says the job may have been queued, and it was, once")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
