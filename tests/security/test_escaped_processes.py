"""Attack: processes that escape their job (docs/security.md, item 2).

A job double-forks a child into a new session (setsid) that holds 8000 MiB of GPU memory,
then ends (or is cancelled while both live). Safe outcome: while both live, the escaped
process's memory counts against the job (its recorded peak) and starts its observation
window; when the job ends or is cancelled, the escaped process is killed and its memory is
free again; in both ways aegisd tracks job processes (cgroup, shim's descendants).
Usage: test_escaped_processes.py BUILD_DIR
"""
import os
import subprocess
import sys

from secharness import Daemon, fail, shared_dir, users, wait_for


def gpu_used(d):
    return sum(g["memory_used_mib"] for g in d.call("gpus", "--json"))


def scenario(build, user, tracking, cancel=False):
    d = Daemon(build, gpus="1x40960", shared_gpus=True, settings={"observation_window_s": 1.0, "telemetry_sample_hz": 4.0,
                                                **({} if tracking == "auto" else {"job_tracking": tracking})})
    try:
        d.start()
        work = shared_dir(d, "work")
        gate = os.path.join(work, "go")
        tag = f"escapee-{os.getpid()}-{tracking}{'-cancel' if cancel else ''}"
        escapee = os.path.join(work, tag)  # the emulated training job under a name pgrep can find
        os.symlink(d.fakejob, escapee)
        # (setsid X &) in a subshell: X's parent exits at once, X is in a session of its own.
        script = (f"(setsid {escapee} --mem 8000 --smact 0.1 --seconds 600 --startup 0.1 "
                  f">/dev/null 2>&1 &); while [ ! -e {gate} ]; do sleep 0.1; done; exit 0")
        job = d.submit("--name", "escaper", "--mem", "9000", "--", "/bin/sh", "-c", script, user=user, cwd=work)

        def peak():
            log = d.show(job)["attempt_log"]
            return log and log[0]["peak_mib"] >= 8000
        wait_for("the escaped process's memory to count against its job", peak, timeout=60)
        if not subprocess.run(["pgrep", "-f", tag], capture_output=True).stdout:
            fail(f"[{tracking}] the escaped process is not running: the test proves nothing")
        if d.show(job)["attempt_log"][0]["first_activity"] is None:
            wait_for("the escaped process to start its job's window",
                     lambda: d.show(job)["attempt_log"][0]["first_activity"] is not None, timeout=30)
        if cancel:
            d.run_cli("cancel", str(job), user=user)
        else:
            open(gate, "w").close()
        states = d.wait_all_final([job], timeout=60)
        if states[job] != ("cancelled" if cancel else "completed"):
            fail(f"[{tracking}] job {job}: {states[job]}")
        wait_for("the escaped process to be gone", lambda: not subprocess.run(["pgrep", "-f", tag],
                                                                                capture_output=True).stdout,
                 timeout=30)
        wait_for("its GPU memory to be free", lambda: gpu_used(d) == 0, timeout=30)
        print(f"OK [{tracking}]: an escaped process (setsid, double fork) counted 8000 MiB against its job, "
              f"started its window and was killed with it ({'cancel' if cancel else 'its end'}); its memory is free")
    finally:
        subprocess.run(["pkill", "-KILL", "-f", f"escapee-{os.getpid()}"], capture_output=True)
        d.cleanup()


def main(build):
    u1, _ = users()
    for tracking in ("auto", "descendants"):
        scenario(build, u1.pw_name, tracking)
    scenario(build, u1.pw_name, "auto", cancel=True)


if __name__ == "__main__":
    main(sys.argv[1])
