"""Fair share and per-user caps in aegisd on an emulated GPU (issue 32 item 2,
docs/lab-policies.md "Fair share"). Two Unix users; needs root (exit 77 otherwise).

1. Weights (`fair_share_users`): on one GPU under `exclusive`, user 2 has used the GPU
   (its blocker job runs until cancelled); meanwhile user 2 submits a job and user 1 one. FIFO would start
   user 2's next; fair share starts user 1's, which has used nothing, and `aegis queue`
   lists it first with its factor. After a SIGKILL of aegisd, the usage is recomputed from
   the store's attempts: user 2's factor still says it used the GPU.
2. Caps (`user_max_running_jobs = 1`): on two GPUs, user 1's second job waits, passed
   over, while user 2's job behind it starts; the queue says why.
3. A bad weight, or an unknown `fair_share_committed`: aegisd refuses to start, with one
   line naming the field; that setting's default (mean_run_time) is printed with the config.
Usage: test_fair_share.py BUILD_DIR
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "security"))

from secharness import Daemon, fail, shared_dir, users, wait_for  # noqa: E402


def state(d, job):
    return d.show(job)["state"]


def weights(build, u1, u2):
    d = Daemon(build, gpus="1x40960", settings={"observation_window_s": 1.0, "policy": "exclusive",
                                                "fair_share_users": f"{u1}:2,{u2}:1"})
    try:
        d.start()
        work = shared_dir(d, "work")
        blocker = d.submit("--name", "blocker", "--", "sleep", "600", user=u2, cwd=work)
        wait_for("the blocker to run", lambda: state(d, blocker) == "running", timeout=60)
        a = d.submit("--name", "second-of-u2", "--", "sleep", "600", user=u2, cwd=work)
        b = d.submit("--name", "first-of-u1", "--", "sleep", "600", user=u1, cwd=work)
        # The listing serves user 1's job first, with its factor (a pass after the submits).
        def listed():
            out = d.run_cli("queue", user=u1).stdout
            rows = [line for line in out.splitlines() if "second-of-u2" in line or "first-of-u1" in line]
            return out if len(rows) == 2 and "first-of-u1" in rows[0] and "fair share" in rows[0] else None
        wait_for("the queue to list user 1's job first, with its fair-share factor", listed, timeout=30)
        d.run_cli("cancel", str(blocker), user=u2)  # user 2 has used the GPU meanwhile
        wait_for("the blocker to end and the next job to start",
                 lambda: state(d, a) == "running" or state(d, b) == "running", timeout=60)
        if state(d, a) == "running":
            fail(f"user 2's job {a} started before user 1's {b}: the queue stayed FIFO")
        # User 2's job runs a little, then the daemon is killed with nothing running.
        d.run_cli("cancel", str(b), user=u1)
        wait_for("user 2's job to run", lambda: state(d, a) == "running", timeout=60)
        d.run_cli("cancel", str(a), user=u2)
        d.wait_all_final([blocker, a, b], timeout=60)
        d.kill9()
        d.start()
        # A restart forgets nothing of the usage: it is read back from the store's attempts.
        # User 1 holds the GPU; user 2's job waits with a factor below 1 (with its usage
        # forgotten it would be 1: no usage at all).
        hold = d.submit("--name", "hold-u1", "--", "sleep", "600", user=u1, cwd=work)
        wait_for("user 1's job to run", lambda: state(d, hold) == "running", timeout=60)
        g = d.submit("--name", "after-restart-u2", "--", "sleep", "600", user=u2, cwd=work)
        def factor():
            for j in d.call("queue", "--json", user=u2):
                if j["id"] == g and "fair_share" in j:
                    return j["fair_share"]
            return None
        wait_for("the queue to show user 2's factor", lambda: factor() is not None, timeout=30)
        if not factor() < 0.999:
            fail(f"after a restart user 2's factor is {factor()}: its usage before the restart was forgotten")
        d.run_cli("cancel", str(g), user=u2)
        d.run_cli("cancel", str(hold), user=u1)
        states = d.wait_all_final([hold, g], timeout=120)
        print("after the restart:", {k: v for k, v in states.items() if k in (hold, g)})
        print("OK: weights: user 1's job went ahead of user 2's earlier one; the factor shows in the queue")
    finally:
        d.cleanup()


def caps(build, u1, u2):
    d = Daemon(build, gpus="2x40960", settings={"observation_window_s": 1.0, "policy": "exclusive",
                                                "user_max_running_jobs": 1})
    try:
        d.start()
        work = shared_dir(d, "work")
        one = d.submit("--name", "u1-one", "--", "sleep", "600", user=u1, cwd=work)
        wait_for("user 1's first job to run", lambda: state(d, one) == "running", timeout=60)
        two = d.submit("--name", "u1-two", "--", "sleep", "600", user=u1, cwd=work)
        other = d.submit("--name", "u2-one", "--", "sleep", "600", user=u2, cwd=work)
        wait_for("user 2's job to run past the capped one", lambda: state(d, other) == "running", timeout=60)
        if state(d, two) != "queued":
            fail(f"user 1's second job is {state(d, two)}, over its cap of one running job")
        out = d.run_cli("queue", user=u1).stdout
        if "user_max_running_jobs = 1" not in out:
            fail(f"the queue does not say the job waits for its user's cap:\n{out}")
        d.run_cli("cancel", str(one), user=u1)
        wait_for("user 1's second job to run once its first ended", lambda: state(d, two) == "running", timeout=60)
        d.run_cli("cancel", str(two), user=u1)
        d.run_cli("cancel", str(other), user=u2)
        d.wait_all_final([one, two, other], timeout=120)
        print("OK: caps: a capped user's job waited without blocking the other user's")
    finally:
        d.cleanup()


def bad_setting(build, settings, field, what):
    d = Daemon(build, gpus="1x40960", settings=settings)
    try:
        r = subprocess.run([d.aegisd, "--config", d.config, "--print-config"], capture_output=True, text=True)
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        if r.returncode == 0 or len(lines) != 1 or field not in lines[0]:
            fail(f"{what}: want one line naming {field}, got rc {r.returncode}: {r.stderr!r}")
        print(f"OK: {what} refused:", lines[0])
    finally:
        d.cleanup()


def committed_setting(build):
    """fair_share_committed: the default is printed with the config aegisd runs with, and
    `none` (Slurm's classic factor) is taken."""
    for value in (None, "none"):
        d = Daemon(build, gpus="1x40960", settings={} if value is None else {"fair_share_committed": value})
        try:
            r = subprocess.run([d.aegisd, "--config", d.config, "--print-config"], capture_output=True, text=True)
            want = value or "mean_run_time"
            if r.returncode != 0 or not any("fair_share_committed" in line and want in line for line in r.stdout.splitlines()):
                fail(f"fair_share_committed = {value}: want rc 0 and the value {want} printed, got rc {r.returncode}:"
                     f" {r.stdout[-400:]!r} {r.stderr!r}")
        finally:
            d.cleanup()
    print("OK: fair_share_committed printed (mean_run_time by default) and `none` taken")


def main(build):
    u1, u2 = (u.pw_name for u in users())
    bad_setting(build, {"fair_share_users": "alice:0"}, "fair_share_users", "a zero weight")
    bad_setting(build, {"fair_share_committed": "expected"}, "fair_share_committed", "an unknown committed rule")
    committed_setting(build)
    caps(build, u1, u2)
    weights(build, u1, u2)


if __name__ == "__main__":
    main(sys.argv[1])
