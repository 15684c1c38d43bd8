"""Attack: signals to a recycled process group (docs/security.md, item 2).

User 1's job ends while aegisd is not looking (stopped with SIGSTOP); its process-group
number is then given by the kernel to a process of user 2 (forced through
/proc/sys/kernel/ns_last_pid), and user 1 cancels the finished job. Safe outcome: user 2's
process is untouched, and the job is recorded as completed (it ended on its own), in both
ways aegisd tracks job processes (cgroup, and the shim's descendants).
Usage: test_pid_reuse.py BUILD_DIR
"""
import json
import os
import signal
import sys
import time

from secharness import AsUser, Daemon, connect, fail, read_reply, shared_dir, users, wait_for


def fork_with_pid(target, uid, gid, tries=20000):
    """Starts `sleep 300` as uid:gid in a session of its own with pid `target`, or None."""
    for _ in range(tries):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(target - 1))
        pid = os.fork()
        if pid == 0:
            if os.getpid() != target:
                os._exit(0)
            os.setsid()  # its pid is now also a process group (and session) number
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            os.execv("/bin/sleep", ["sleep", "300"])
        if pid == target:
            return pid
        os.waitpid(pid, 0)
    return None


def alive(pid):
    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return False


def scenario(build, u1, u2, tracking):
    d = Daemon(build, settings={"observation_window_s": 1.0, **({} if tracking == "auto" else {"job_tracking": tracking})})
    victim = None
    try:
        d.start()
        work = shared_dir(d, "work")
        gate = os.path.join(work, "go")
        job = d.submit("--name", "short", "--", "/bin/sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.1; done",
                       user=u1.pw_name, cwd=work)
        attempt = os.path.join(d.state, "jobs", str(job), "1")

        def record(name, key):
            try:
                r = json.load(open(os.path.join(attempt, name)))
                return r if key in r else None
            except (OSError, ValueError):
                return None
        pgid = wait_for("the job to start", lambda: record("child.json", "pgid"), timeout=60)["pgid"]
        os.kill(d.proc.pid, signal.SIGSTOP)
        try:
            open(gate, "w").close()
            wait_for("the job to end (its shim's exit record)", lambda: record("exit.json", "wait_status"), timeout=60)
            victim = fork_with_pid(pgid, u2.pw_uid, u2.pw_gid)
            if victim is None:
                print(f"SKIP: could not get pid {pgid} back from the kernel")
                sys.exit(77)
            # The cancel reaches the socket while aegisd is stopped; it is read on SIGCONT,
            # before aegisd's next look at the job.
            def send_cancel(report):
                s = connect(d.socket)
                s.sendall(json.dumps({"op": "cancel", "id": job}).encode() + b"\n")
                report(b"sent\n")
                return json.dumps(read_reply(s)).encode()
            cancel = AsUser(u1, send_cancel)
            cancel.read_until(b"sent\n")
        finally:
            os.kill(d.proc.pid, signal.SIGCONT)
        reply = cancel.result()
        if b'"ok": true' not in reply:
            fail(f"[{tracking}] the owner's cancel of a running job was refused: {reply!r}")
        states = d.wait_all_final([job], timeout=60)
        time.sleep(1.0)  # a wrongly aimed SIGTERM or SIGKILL would have landed by now
        if not alive(victim):
            fail(f"[{tracking}] user 2's process {victim} (which got job {job}'s old process group number) was killed")
        if states[job] != "completed":
            fail(f"[{tracking}] job {job} ended on its own before the cancel, but is recorded {states[job]}")
        print(f"OK [{tracking}]: user 2's process with the reused pid {victim} untouched; job {job} recorded completed")
    finally:
        if victim:
            os.kill(victim, signal.SIGKILL)
            os.waitpid(victim, 0)
        d.cleanup()


def main(build):
    u1, u2 = users()
    if not os.access("/proc/sys/kernel/ns_last_pid", os.W_OK):
        print("SKIP: /proc/sys/kernel/ns_last_pid is not writable here")
        sys.exit(77)
    for tracking in ("auto", "descendants"):
        scenario(build, u1, u2, tracking)


if __name__ == "__main__":
    main(sys.argv[1])
